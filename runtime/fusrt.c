/* fusrt.c: compile .fus text into a loaded CUDA module and launch its fusions by name.
 *
 * fusrt_compile: front end (errors need no GPU) -> driver -> lowering for the device's arch
 * -> device CUDA source -> cache lookup keyed by (source, options, arch, FUSC_VERSION) or
 * NVRTC -> cuModuleLoadData. A module owns the arena holding its fusion and kernel IR, which
 * the launcher reads: signature, size symbols, launch dims and preconditions.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "scheduler/scheduler.h"
#include "interp/interp.h"
#include "passes/passes.h"
#include "runtime/runtime.h"

struct fusrt_module {
	Arena *arena;
	Program *prog;
	Kernel **kernels;   /* one per fusion, in program order (the first of its variants) */
	/* Per kernel slot: every kernel of every fusion (Kernel.fallback chains, the segments'
	 * kernels included: kernel_flatten), in order. */
	Kernel **slots;
	int nslots;
	CUfunction *funcs;
	bool *smem_raised;  /* per slot: MAX_DYNAMIC_SHARED_SIZE_BYTES raised (once) */
	int n;
	CUmodule mod;
	bool loaded;          /* mod holds the kernels (set under lock, read with acquire) */
	/* Not loaded yet (compiled for an explicit arch without a driver, or an ahead-of-time
	 * object): the binaries its first launch chooses from (load_pending); owned when
	 * own_images (the JIT's), else static data of the object. */
	RtImage *images;
	int nimages;
	bool own_images;
	char *dump;           /* FUSRT_DUMP: the .dims file launches are appended to, or NULL */
	pthread_mutex_t lock;
};

static _Thread_local int last_cached;
/* Why the last compilation did not use the disk cache as it could have (its first reason),
 * or NULL: fusrt_last_cache_note. */
static _Thread_local char *cache_note;

int fusrt_last_compile_cached(void) { return last_cached; }

const char *fusrt_last_cache_note(void) { return cache_note ? cache_note : ""; }

/* Keeps why (malloc'd, NULL: nothing) as "disk cache: WHY" unless a note is there already. */
static void cache_note_add(char *why)
{
	if (why && !cache_note) {
		Buf b = {0};
		buf_printf(&b, "disk cache: %s", why);
		cache_note = b.s;
	}
	free(why);
}

void fusrt_module_free(fusrt_module *m)
{
	if (!m)
		return;
	if (m->loaded && rt_driver_init() == FUSRT_OK)
		rt_cu.module_unload(m->mod);
	for (int i = 0; m->own_images && i < m->nimages; i++)
		free((void *)m->images[i].data);
	free(m->images);
	free(m->dump);
	pthread_mutex_destroy(&m->lock);
	free(m->funcs);
	free(m->smem_raised);
	arena_free(m->arena);
	free(m);
}

/* Front end + lowering of every fusion for `arch`. Arch problems are checked by the caller
 * (no_arch_check: a kernel that needs a newer GPU is an FUSRT_ERR_ARCH, not a diagnostic). */
static fusrt_status build_ir(fusrt_module *m, const char *src, size_t len, const char *name,
			     int arch, const char *prefix)
{
	Diag *d = diag_new();
	int file = diag_add_file(d, name, src, len);
	fusrt_status s = FUSRT_OK;

	m->prog = compile_program(m->arena, d, file);
	if (m->prog && diag_error_count(d) == 0) {
		LowerOptions o = {0};
		o.arch = arch;
		o.no_arch_check = true;
		m->n = m->prog->nfusions;
		m->kernels = arena_alloc(m->arena, sizeof(Kernel *) * (m->n + 1));
		Vec slots = {0};
		for (int i = 0; i < m->n && s == FUSRT_OK; i++) {
			if (prefix && *prefix) /* as fusc --prefix: after the front end's name checks */
				fusion_rename(m->arena, m->prog->fusions[i],
					      arena_printf(m->arena, "%s%s", prefix,
							   m->prog->fusions[i]->name));
			m->kernels[i] = lower_fusion(m->arena, d, m->prog->fusions[i], &o);
			if (!m->kernels[i])
				s = FUSRT_ERR_COMPILE;
			kernel_flatten(m->arena, m->kernels[i], &slots);
		}
		m->slots = (Kernel **)slots.items;
		m->nslots = slots.len;
	}
	if (!m->prog || diag_error_count(d) > 0 || s != FUSRT_OK) {
		char *text = diag_render(d);
		s = rt_fail(FUSRT_ERR_COMPILE, "%s", text && *text ? text : "compilation failed\n");
		free(text);
	}
	diag_free(d);
	return s;
}

/* The reason a kernel needs k->min_arch, in the words of the compile-time error
 * (pass_arch_explain, rendered: "FILE:L:C: error: cp.async needs sm_80, but the target is
 * sm_75" with the source line and the note). Malloc'd. */
static char *arch_reason(Kernel *k, int arch, const char *src, size_t len, const char *name)
{
	Diag *d = diag_new();

	diag_add_file(d, name, src, len);
	pass_arch_explain(k, arch, d);
	char *text = diag_render(d);
	diag_free(d);
	return text;
}

static fusrt_status check_arch(fusrt_module *m, int arch, const char *src, size_t len,
			       const char *name)
{
	for (int i = 0; i < m->nslots; i++) {
		Kernel *k = m->slots[i];
		if (k->min_arch <= arch)
			continue;
		char *why = arch_reason(k, arch, src, len, name);
		fusrt_status s = rt_fail(FUSRT_ERR_ARCH, "fusion %s needs sm_%d or newer; the target "
					 "is sm_%d:\n%s", k->fusion->name, k->min_arch, arch,
					 why ? why : "");
		free(why);
		return s;
	}
	return FUSRT_OK;
}

fusrt_status rt_get_binary(const char *src, const char *name, int arch, bool cubin,
			   const char *cache_dir, bool use_cache, char **bin, size_t *len)
{
	const char *opts = cubin ? "cubin" : "ptx";
	RtCacheKey key = rt_cache_key(src, opts, arch);
	char *log = NULL, *why = NULL;

	if (use_cache && cache_dir && rt_cache_load(cache_dir, key, bin, len, &why)) {
		last_cached = 1;
		return FUSRT_OK;
	}
	cache_note_add(why);
	if (!nvrtc_compile(src, name, arch, cubin, bin, len, &log)) {
		fusrt_status s = rt_fail(FUSRT_ERR_NVRTC, "NVRTC failed for sm_%d:\n%s", arch,
					 log ? log : "(no log)");
		free(log);
		return s;
	}
	free(log);
	if (!cubin) {
		*len = strlen(*bin) + 1;
	}
	if (cache_dir && !rt_cache_store(cache_dir, key, *bin, *len, &why))
		cache_note_add(why); /* a cache that fails is no cache, and a note */
	return FUSRT_OK;
}

/* The kernel of a slot (see fusrt_module.slots). */
static Kernel *slot_kernel(const fusrt_module *m, int slot)
{
	return m->slots[slot];
}

/* The slot of kernel k (one with a body). */
static int slot_of(const fusrt_module *m, Kernel *k)
{
	int i = 0;
	while (i < m->nslots - 1 && m->slots[i] != k)
		i++;
	return i;
}

/* Loads bin into the GPU and looks up every kernel; sets m->loaded last (a launch on another
 * thread reads it without the lock). */
static fusrt_status load_module(fusrt_module *m, const void *bin)
{
	CUresult r = rt_cu.module_load_data(&m->mod, bin);

	if (r != CUDA_SUCCESS)
		return rt_cu_fail(r, "cuModuleLoadData");
	if (!m->funcs) { /* no xmalloc: load_pending holds the module's lock */
		m->funcs = calloc(m->nslots + 1, sizeof(CUfunction));
		m->smem_raised = calloc(m->nslots + 1, sizeof(bool));
	}
	if (!m->funcs || !m->smem_raised) {
		rt_cu.module_unload(m->mod);
		return rt_fail(FUSRT_ERR_INTERNAL, "out of memory loading a module");
	}
	for (int i = 0; i < m->nslots; i++) {
		Kernel *k = slot_kernel(m, i);
		r = rt_cu.module_get_function(&m->funcs[i], m->mod, k->name);
		if (r != CUDA_SUCCESS) {
			fusrt_status s = rt_cu_fail(r, k->name);
			rt_cu.module_unload(m->mod);
			return s;
		}
	}
	__atomic_store_n(&m->loaded, true, __ATOMIC_RELEASE);
	return FUSRT_OK;
}

int rt_pick_image(const RtImage *im, int n, int dev)
{
	int best = -1;

	for (int i = 0; i < n; i++) /* SASS runs on its major arch, at its minor or above */
		if (!im[i].ptx && im[i].arch / 10 == dev / 10 && im[i].arch <= dev &&
		    (best < 0 || im[i].arch > im[best].arch))
			best = i;
	for (int i = 0; i < n && best < 0; i++) /* else the driver compiles PTX for the device */
		if (im[i].ptx && im[i].arch <= dev && (best < 0 || im[i].arch > im[best].arch))
			best = i;
	return best;
}

/* Makes the driver's context current on this thread (every launch does) and, at a module's
 * first launch, loads the image of m->images that fits the device. */
static fusrt_status load_pending(fusrt_module *m)
{
	fusrt_status s = rt_driver_init();

	if (s != FUSRT_OK || __atomic_load_n(&m->loaded, __ATOMIC_ACQUIRE))
		return s;
	int dev = rt_device_arch(), i = rt_pick_image(m->images, m->nimages, dev);
	pthread_mutex_lock(&m->lock); /* nothing under it can die (rt_guard) */
	if (!m->loaded && i >= 0)
		s = load_module(m, m->images[i].data);
	pthread_mutex_unlock(&m->lock);
	if (i < 0) {
		Buf b = {0};
		for (int j = 0; j < m->nimages; j++)
			buf_printf(&b, "%s%s_%d", j ? ", " : "", m->images[j].ptx ? "compute" : "sm",
				   m->images[j].arch);
		s = rt_fail(FUSRT_ERR_ARCH, "the module has kernels for %s, none of which runs on "
			    "the device (sm_%d)", b.s ? b.s : "no architecture", dev);
		buf_free(&b);
	}
	return s;
}

/* A new module, empty. */
static fusrt_module *module_new(void)
{
	fusrt_module *m = calloc(1, sizeof *m);

	if (!m)
		die("out of memory (a module)");
	m->arena = arena_new();
	pthread_mutex_init(&m->lock, NULL);
	return m;
}

/* The arguments of fusrt_compile, and the module being built (freed by fusrt_compile when
 * the compilation died halfway). */
typedef struct CompileCall {
	const char *source;
	size_t len;
	const char *name;
	const fusrt_options *opt;
	fusrt_module **out;
	fusrt_module *m;
} CompileCall;

static fusrt_status compile_body(void *ctx)
{
	CompileCall *c = ctx;
	const char *source = c->source, *name = c->name;
	size_t len = c->len;
	const fusrt_options *opt = c->opt;
	fusrt_module **out = c->out;
	fusrt_options o = {0, NULL};
	fusrt_module *m;
	fusrt_status s;
	char *dir = NULL, *bin = NULL;
	size_t blen = 0;
	Buf cu = {0};

	if (!out)
		return rt_fail(FUSRT_ERR_INVALID, "fusrt_compile: NULL result pointer");
	*out = NULL;
	if (!source)
		return rt_fail(FUSRT_ERR_INVALID, "fusrt_compile: NULL source");
	if (opt)
		o = *opt;
	if (o.arch < 0)
		return rt_fail(FUSRT_ERR_INVALID, "fusrt_compile: bad arch %d", o.arch);
	if (o.arch) {
		Buf valid = {0};
		bool known = nvrtc_arch_supported(o.arch, &valid);
		if (!known)
			rt_fail(FUSRT_ERR_INVALID, "fusrt_compile: NVRTC cannot compile for sm_%d "
				"(it supports %s)", o.arch, valid.s);
		buf_free(&valid);
		if (!known)
			return FUSRT_ERR_INVALID;
	}
	m = c->m = module_new();
	/* The front end first, so that errors in the text are reported without a GPU. */
	s = build_ir(m, source, len, name ? name : "<source>", o.arch ? o.arch : 90, NULL);
	if (s == FUSRT_OK)
		s = rt_driver_init();
	/* An explicit arch needs no GPU: NVRTC alone fills the cache, and the module loads the
	 * cubin at its first launch. */
	bool offline = o.arch && (s == FUSRT_ERR_NO_DRIVER || s == FUSRT_ERR_NO_DEVICE);
	if (offline) {
		rt_clear_error();
		s = FUSRT_OK;
	}
	int dev_arch = offline ? o.arch : rt_device_arch();
	if (s == FUSRT_OK && o.arch > dev_arch)
		s = rt_fail(FUSRT_ERR_ARCH, "target sm_%d is newer than the device (sm_%d)", o.arch,
			    dev_arch);
	int arch = o.arch ? o.arch : dev_arch;
	if (s == FUSRT_OK && !o.arch && arch != 90) { /* lower again for the real arch */
		Arena *old = m->arena; /* replaced first: a die() in arena_new frees the module */
		m->arena = arena_new();
		arena_free(old);
		s = build_ir(m, source, len, name ? name : "<source>", arch, NULL);
	}
	if (s == FUSRT_OK)
		s = check_arch(m, arch, source, len, name ? name : "<source>");
	if (s == FUSRT_OK) {
		cuda_emit_device(m->kernels, m->n, &cu);
		const char *dump = getenv("FUSRT_DUMP");
		if (dump && *dump)
			m->dump = rt_dump_compile(dump, name ? name : "<source>", source, len, arch,
						  cu.s, m->kernels, m->n);
		dir = o.cache_dir ? (*o.cache_dir ? xstrdup(o.cache_dir) : NULL)
				  : rt_cache_default_dir();
		/* A cubin runs only on its own major arch: for another target, JIT from PTX. */
		bool cubin = arch == dev_arch;
		s = rt_get_binary(cu.s, name ? name : "fusion.cu", arch, cubin, dir, true, &bin, &blen);
		if (s == FUSRT_OK && offline) {
			m->images = xmalloc(sizeof(RtImage));
			m->images[0] = (RtImage){arch, false, bin, blen};
			m->nimages = 1;
			m->own_images = true;
			bin = NULL;
		} else if (s == FUSRT_OK && (s = load_module(m, bin)) != FUSRT_OK && last_cached) {
			/* A well-formed entry that the driver rejects: rebuild it once. */
			free(bin);
			bin = NULL;
			last_cached = 0;
			s = rt_get_binary(cu.s, name ? name : "fusion.cu", arch, cubin, dir, false, &bin,
				       &blen);
			if (s == FUSRT_OK)
				s = load_module(m, bin);
		}
	}
	free(bin);
	free(dir);
	buf_free(&cu);
	c->m = NULL;
	if (s != FUSRT_OK) {
		fusrt_module_free(m);
		return s;
	}
	*out = m;
	return FUSRT_OK;
}

fusrt_status fusrt_compile(const char *source, size_t len, const char *name,
			   const fusrt_options *opt, fusrt_module **out)
{
	CompileCall c = {source, len, name, opt, out, NULL};

	rt_clear_error();
	last_cached = 0;
	free(cache_note);
	cache_note = NULL;
	fusrt_status s = rt_guard("fusrt_compile", compile_body, &c);
	if (s == FUSRT_ERR_INTERNAL && c.m) /* died halfway */
		fusrt_module_free(c.m);
	return s;
}

/* ---- introspection -------------------------------------------------------------------- */

static int find_fusion(const fusrt_module *m, const char *name)
{
	if (!m || !name || !m->prog)
		return -1;
	for (int i = 0; i < m->n; i++)
		if (strcmp(m->prog->fusions[i]->name, name) == 0)
			return i;
	return -1;
}

Fusion *rt_module_fusion(const fusrt_module *m, const char *name)
{
	int i = find_fusion(m, name);

	return i < 0 ? NULL : m->prog->fusions[i];
}

Kernel *rt_module_kernel(const fusrt_module *m, const char *name)
{
	int i = find_fusion(m, name);

	return i < 0 ? NULL : m->kernels[i];
}

int fusrt_fusion_count(const fusrt_module *m) { return m ? m->n : 0; }

const char *fusrt_fusion_name(const fusrt_module *m, int i)
{
	return m && i >= 0 && i < m->n ? m->prog->fusions[i]->name : NULL;
}

int fusrt_fusion_nargs(const fusrt_module *m, const char *fusion)
{
	Fusion *f = rt_module_fusion(m, fusion);

	return f ? f->nsig : -1;
}

/* The arguments of fusrt_fusion_arg (for rt_guard). */
typedef struct ArgCall {
	const fusrt_module *m;
	const char *fusion;
	int i;
	fusrt_arg_info *out;
} ArgCall;

static fusrt_status arg_body(void *ctx)
{
	ArgCall *c = ctx;
	Fusion *f = rt_module_fusion(c->m, c->fusion);
	const char *fusion = c->fusion;
	fusrt_arg_info *out = c->out;
	int i = c->i;

	if (!f || !out || i < 0 || i >= f->nsig)
		return rt_fail(FUSRT_ERR_INVALID, "fusrt_fusion_arg: no argument %d of fusion %s", i,
			       fusion ? fusion : "(null)");
	struct SigEntry *e = &f->sig[i];
	if (e->kind == 'p') {
		out->name = e->param->name;
		out->kind = FUSRT_SCALAR;
		out->dtype = dtype_name(e->param->dtype);
		out->ndim = 0;
	} else {
		out->name = e->tensor->name;
		out->kind = e->kind == 't' ? FUSRT_INPUT : FUSRT_OUTPUT;
		out->dtype = dtype_name(e->tensor->dtype);
		out->ndim = e->tensor->ndim;
	}
	return FUSRT_OK;
}

fusrt_status fusrt_fusion_arg(const fusrt_module *m, const char *fusion, int i,
			      fusrt_arg_info *out)
{
	ArgCall c = {m, fusion, i, out};

	rt_clear_error();
	return rt_guard("fusrt_fusion_arg", arg_body, &c);
}

int fusrt_fusion_nsizes(const fusrt_module *m, const char *fusion)
{
	Fusion *f = rt_module_fusion(m, fusion);

	return f ? f->nsizes : -1;
}

int fusrt_fusion_arg_dim(const fusrt_module *m, const char *fusion, int i, int d,
			 int64_t *extent)
{
	Fusion *f = rt_module_fusion(m, fusion);

	if (!f || i < 0 || i >= f->nsig || f->sig[i].kind == 'p' || d < 0 ||
	    d >= f->sig[i].tensor->ndim)
		return -2;
	IrExpr *e = f->sig[i].tensor->shape[d];
	if (e->kind == EX_SIZE)
		return e->size->index;
	int64_t v = 0;
	if (!ir_is_const(e, &v))
		return -2; /* a declared dimension is a size symbol or a literal (docs/language.md) */
	if (extent)
		*extent = v;
	return -1;
}

const char *fusrt_fusion_size_name(const fusrt_module *m, const char *fusion, int i)
{
	Fusion *f = rt_module_fusion(m, fusion);

	return f && i >= 0 && i < f->nsizes ? f->sizes[i]->name : NULL;
}

/* ---- launching ------------------------------------------------------------------------ */

/* Storage for one kernel argument: scalars by value in their dtype, pointers, sizes. */
typedef union ArgSlot {
	float f32;
	double f64;
	int32_t i32;
	long long i64;
	uint16_t bits;
	unsigned char b;
	CUdeviceptr ptr;
} ArgSlot;

/* A scalar argument in the kernel parameter's type; false for a dtype no parameter has (an
 * internal error, reported rather than aborting the program). */
static bool scalar_slot(DType t, const fusrt_arg *a, ArgSlot *s)
{
	memset(s, 0, sizeof *s);
	switch (t) {
	case DT_F16: s->bits = interp_f16_bits(a->f); return true;
	case DT_BF16: s->bits = interp_bf16_bits(a->f); return true;
	case DT_F32: s->f32 = (float)a->f; return true;
	case DT_F64: s->f64 = a->f; return true;
	case DT_I32: s->i32 = (int32_t)a->i; return true;
	case DT_I64: s->i64 = a->i; return true;
	case DT_BOOL: s->b = a->i != 0; return true;
	default: return false;
	}
}

static const char *arg_name(struct SigEntry *e)
{
	return e->kind == 'p' ? e->param->name : e->tensor->name;
}

/* The signature's pointers, for precond_holds (scalars: 0). Malloc'd. */
static uint64_t *arg_ptrs(Fusion *f, const fusrt_arg *args)
{
	uint64_t *p = xmalloc(sizeof(uint64_t) * (size_t)(f->nsig + 1));
	for (int i = 0; i < f->nsig; i++)
		p[i] = f->sig[i].kind == 'p' ? 0 : (uint64_t)args[i].ptr;
	return p;
}

/* Counts, sizes, pointers and the kernel's preconditions. */
static fusrt_status check_launch(Kernel *k, const fusrt_arg *args, int nargs,
				 const int64_t *sizes, int nsizes)
{
	Fusion *f = k->fusion;
	char *err = NULL;

	if (nargs != f->nsig || (nargs > 0 && !args)) {
		Buf b = {0};
		for (int i = 0; i < f->nsig; i++)
			buf_printf(&b, "%s%s", i ? ", " : "", arg_name(&f->sig[i]));
		fusrt_status s = rt_fail(FUSRT_ERR_INVALID, "fusion %s takes %d arguments (%s), got %d",
					 f->name, f->nsig, b.s ? b.s : "", args ? nargs : 0);
		buf_free(&b);
		return s;
	}
	if (nsizes != f->nsizes || (nsizes > 0 && !sizes)) {
		Buf b = {0};
		for (int i = 0; i < f->nsizes; i++)
			buf_printf(&b, "%s%s", i ? ", " : "", f->sizes[i]->name);
		fusrt_status s = rt_fail(FUSRT_ERR_INVALID, "fusion %s takes %d sizes (%s), got %d",
					 f->name, f->nsizes, b.s ? b.s : "", sizes ? nsizes : 0);
		buf_free(&b);
		return s;
	}
	if (!interp_check_sizes(f, sizes, &err)) {
		fusrt_status s = rt_fail(FUSRT_ERR_INVALID, "fusion %s: %s", f->name, err);
		free(err);
		return s;
	}
	/* as the generated launchers do: each tensor's size in bytes must fit in 64 bits, and
	 * only an empty tensor may be a null pointer */
	for (int i = 0; i < f->nsig; i++) {
		Tensor *t = f->sig[i].tensor;
		int64_t dims[INTERP_MAX_DIMS], n, bytes;
		if (f->sig[i].kind == 'p')
			continue;
		if (!interp_tensor_dims(t, sizes, dims, NULL) || (n = interp_numel(dims, t->ndim)) < 0 ||
		    __builtin_mul_overflow(n, (int64_t)dtype_size(t->dtype), &bytes))
			return rt_fail(FUSRT_ERR_INVALID, "fusion %s: sizes too large: the size of %s "
				       "in bytes does not fit in 64 bits", f->name, t->name);
		if (!args[i].ptr && bytes != 0)
			return rt_fail(FUSRT_ERR_INVALID, "fusion %s: argument %s is a null pointer",
				       f->name, t->name);
	}
	/* no variant's preconditions hold: the last one's failure, worded as the generated
	 * launcher words it (precond_failure) */
	uint64_t *ptrs = arg_ptrs(f, args);
	Kernel *last = kernel_last_variant(k);
	Precond *p = kernel_pick(k, sizes, ptrs) ? NULL : kernel_failed_precond(last, sizes, ptrs);
	fusrt_status st = FUSRT_OK;
	if (p) {
		Arena *a = arena_new();
		PrecondText t = precond_failure(a, p);
		if (!t.sized)
			st = rt_fail(FUSRT_ERR_PRECONDITION, "fusion %s: %s", f->name, t.pre);
		else
			st = rt_fail(FUSRT_ERR_PRECONDITION, "fusion %s: %s%lld%s", f->name, t.pre,
				     (long long)sizes[p->size->index], t.post);
		arena_free(a);
	}
	free(ptrs);
	return st;
}

/* Grid (x, y, z) then block (x, y, z). */
static fusrt_status launch_dims(Kernel *k, const int64_t *sizes, int64_t dims[6])
{
	static const ParType pts[6] = {PT_BIDX, PT_BIDY, PT_BIDZ, PT_TIDX, PT_TIDY, PT_TIDZ};
	static const int64_t limit[6] = {2147483647, 65535, 65535, 1024, 1024, 64};

	for (int i = 0; i < 6; i++) {
		dims[i] = 1;
		if (k->segments.len) /* a plan: each segment's launch is checked when it runs */
			continue;
		if (k->launch[pts[i]] && !interp_eval_i64(k->launch[pts[i]], sizes, &dims[i]))
			return rt_fail(FUSRT_ERR_INVALID, "fusion %s: sizes too large: the %s launch "
				       "dimension does not fit in 64 bits", k->fusion->name,
				       par_name(pts[i]));
		if (dims[i] < 0)
			dims[i] = 0;
	}
	for (int i = 0; i < 6; i++)
		if (dims[i] > limit[i])
			return rt_fail(FUSRT_ERR_LAUNCH, "fusion %s: %s = %lld exceeds the limit %lld",
				       k->fusion->name, par_name(pts[i]), (long long)dims[i],
				       (long long)limit[i]);
	if (dims[3] * dims[4] * dims[5] > 1024)
		return rt_fail(FUSRT_ERR_LAUNCH, "fusion %s: a block of %lld threads exceeds 1024",
			       k->fusion->name, (long long)(dims[3] * dims[4] * dims[5]));
	return FUSRT_OK;
}

Kernel *rt_pick_kernel(Kernel *k, const fusrt_arg *args, const int64_t *sizes)
{
	uint64_t *ptrs = arg_ptrs(k->fusion, args);
	Kernel *v = kernel_pick(k, sizes, ptrs);
	free(ptrs);
	return v ? v : kernel_last_variant(k);
}

fusrt_status rt_launch_check(Kernel *k, const fusrt_arg *args, int nargs,
			     const int64_t *sizes, int nsizes, int64_t dims[6])
{
	fusrt_status s = check_launch(k, args, nargs, sizes, nsizes);

	return s != FUSRT_OK ? s : launch_dims(rt_pick_kernel(k, args, sizes), sizes, dims);
}

fusrt_status rt_check_smem(Kernel *k, int limit, char **msg)
{
	long long dyn = (long long)kernel_smem_dynamic(k), stat = (long long)kernel_smem_static(k);

	*msg = NULL;
	if (dyn + stat <= limit)
		return FUSRT_OK;
	Buf b = {0};
	buf_printf(&b, "%s: needs %lld bytes of shared memory (dynamic %lld, static %lld, required "
		   "%lld) but the device allows %d per block", k->fusion->name, dyn + stat, dyn,
		   stat, dyn + stat, limit);
	*msg = b.s;
	return FUSRT_ERR_LAUNCH;
}

/* Checks the kernel's shared memory against the device and, for dynamic shared memory,
 * raises the function's limit (once per function; the module's context is the one device's). */
static fusrt_status setup_smem(fusrt_module *m, int fi)
{
	Kernel *k = slot_kernel(m, fi);
	char *msg = NULL;
	fusrt_status s = rt_check_smem(k, rt_device_smem_optin(), &msg);

	if (s != FUSRT_OK) {
		s = rt_fail(s, "%s", msg);
		free(msg);
		return s;
	}
	if (!k->smem_dynamic || m->smem_raised[fi])
		return FUSRT_OK;
	CUresult r = rt_cu.func_set_attribute(m->funcs[fi],
					      CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					      (int)k->smem_bytes);
	if (r != CUDA_SUCCESS)
		return rt_cu_fail(r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
	m->smem_raised[fi] = true;
	return FUSRT_OK;
}

/* Grid reductions (Kernel.grid_ws): the workspace of one launch, in stream order when the
 * driver has cuMemAllocAsync (else synchronously): ws[i] gets grid_ws[i].shape[0] elements,
 * the counters (odd i) are zeroed. On failure everything allocated is freed again. */
static fusrt_status ws_alloc(Kernel *k, const int64_t *sizes, CUstream stream, CUdeviceptr *ws)
{
	fusrt_status s = FUSRT_OK;
	CUresult r = CUDA_SUCCESS;
	int i;

	for (i = 0; i < k->grid_ws.len && s == FUSRT_OK; i++) {
		Tensor *t = VEC_AT(k->grid_ws, Tensor, i);
		int64_t n = 0, b;
		if (!interp_eval_i64(t->shape[0], sizes, &n) || n < 0 ||
		    __builtin_mul_overflow(n ? n : 1, (int64_t)dtype_size(t->dtype), &b)) {
			s = rt_fail(FUSRT_ERR_INVALID, "fusion %s: sizes too large: the size of the "
				    "grid-reduction workspace does not fit in 64 bits", k->fusion->name);
			break;
		}
		size_t bytes = (size_t)b; /* sem: DT_I32 */
		r = rt_cu.mem_alloc_async ? rt_cu.mem_alloc_async(&ws[i], bytes, stream)
					  : rt_cu.mem_alloc(&ws[i], bytes);
		if (r != CUDA_SUCCESS) {
			ws[i] = 0;
			s = rt_cu_fail(r, "cuMemAllocAsync (grid-reduction workspace)");
			break;
		}
		if (i % 2)
			r = rt_cu.memset_d32_async ? rt_cu.memset_d32_async(ws[i], 0, bytes / 4, stream)
						   : rt_cu.memset_d32(ws[i], 0, bytes / 4);
		if (r != CUDA_SUCCESS)
			s = rt_cu_fail(r, "cuMemsetD32Async (grid-reduction workspace)");
	}
	if (s != FUSRT_OK)
		for (int j = 0; j < k->grid_ws.len && j <= i; j++)
			if (ws[j] && (rt_cu.mem_free_async ? rt_cu.mem_free_async(ws[j], stream)
							   : rt_cu.mem_free(ws[j])) != CUDA_SUCCESS)
				break; /* the first error is the one reported */
	return s;
}

/* After the launch, in stream order (the kernel finishes first). Without the stream-ordered
 * calls the context is synchronized first, so nothing frees memory a kernel still uses.
 * Returns the first error. */
static CUresult ws_free(Kernel *k, CUstream stream, CUdeviceptr *ws)
{
	CUresult r = CUDA_SUCCESS;

	if (k->grid_ws.len && !rt_cu.mem_free_async)
		r = rt_cu.ctx_synchronize();
	for (int i = 0; i < k->grid_ws.len; i++) {
		CUresult e = rt_cu.mem_free_async ? rt_cu.mem_free_async(ws[i], stream)
						  : rt_cu.mem_free(ws[i]);
		if (r == CUDA_SUCCESS)
			r = e;
	}
	return r;
}

static fusrt_status do_launch(fusrt_module *m, int fi, const fusrt_arg *args,
			      const int64_t *sizes, const int64_t dims[6], CUstream stream)
{
	Kernel *k = slot_kernel(m, fi);
	Fusion *f = k->fusion;
	int nws = k->grid_ws.len, n = f->nsig + f->nsizes + nws;
	ArgSlot *slots = xmalloc(sizeof(ArgSlot) * (n + 1));
	void **params = xmalloc(sizeof(void *) * (n + 1));
	CUdeviceptr *ws = xmalloc(sizeof(CUdeviceptr) * (size_t)(nws + 1));
	fusrt_status s;
	CUresult r;

	s = FUSRT_OK;
	for (int i = 0; i < f->nsig && s == FUSRT_OK; i++) {
		if (f->sig[i].kind != 'p')
			slots[i].ptr = (CUdeviceptr)args[i].ptr;
		else if (!scalar_slot(f->sig[i].param->dtype, &args[i], &slots[i]))
			s = rt_fail(FUSRT_ERR_INTERNAL, "internal error: fusion %s: parameter %s has "
				    "dtype %d, which no kernel argument carries", f->name,
				    f->sig[i].param->name, (int)f->sig[i].param->dtype);
		params[i] = &slots[i];
	}
	memset(ws, 0, sizeof(CUdeviceptr) * (size_t)(nws + 1));
	if (s != FUSRT_OK || (s = ws_alloc(k, sizes, stream, ws)) != FUSRT_OK) {
		free(slots);
		free(params);
		free(ws);
		return s;
	}
	for (int i = 0; i < nws; i++) {
		slots[f->nsig + f->nsizes + i].ptr = ws[i];
		params[f->nsig + f->nsizes + i] = &slots[f->nsig + f->nsizes + i];
	}
	for (int i = 0; i < f->nsizes; i++) {
		slots[f->nsig + i].i64 = sizes[i];
		params[f->nsig + i] = &slots[f->nsig + i];
	}
	r = rt_cu.launch_kernel(m->funcs[fi], (unsigned)dims[0], (unsigned)dims[1],
				(unsigned)dims[2], (unsigned)dims[3], (unsigned)dims[4],
				(unsigned)dims[5], k->smem_dynamic ? (unsigned)k->smem_bytes : 0,
				stream, params, NULL);
	free(slots);
	free(params);
	s = r != CUDA_SUCCESS ? rt_cu_fail(r, "cuLaunchKernel") : FUSRT_OK;
	CUresult fr = ws_free(k, stream, ws);
	free(ws);
	if (s == FUSRT_OK && fr != CUDA_SUCCESS)
		s = rt_cu_fail(fr, "cuMemFreeAsync (grid-reduction workspace)");
	return s;
}

/* Everything before the launch: the module, the fusion, the arguments, the dims. *skip is
 * set when a grid dimension is 0 (nothing to launch); *plan when the launch is a segmented
 * plan's (launch_plan checks each segment's launch). */
static fusrt_status prepare(fusrt_module *m, const char *fusion, const fusrt_arg *args,
			    int nargs, const int64_t *sizes, int nsizes, int *fi, Kernel **plan,
			    int64_t dims[6], bool *skip)
{
	fusrt_status s;

	if (!m)
		return rt_fail(FUSRT_ERR_INVALID, "fusrt_launch: NULL module");
	if (!fusion)
		return rt_fail(FUSRT_ERR_INVALID, "fusrt_launch: NULL fusion name");
	if ((*fi = find_fusion(m, fusion)) < 0) {
		Buf b = {0};
		for (int i = 0; i < m->n; i++)
			buf_printf(&b, "%s%s", i ? ", " : "", m->prog->fusions[i]->name);
		s = rt_fail(FUSRT_ERR_INVALID, "no fusion named '%s' (the module has: %s)", fusion,
			    b.s ? b.s : "none");
		buf_free(&b);
		return s;
	}
	if ((s = rt_launch_check(m->kernels[*fi], args, nargs, sizes, nsizes, dims)) != FUSRT_OK)
		return s;
	Kernel *v = rt_pick_kernel(m->kernels[*fi], args, sizes);
	*plan = v->segments.len ? v : NULL;
	*fi = slot_of(m, v);
	if (m->dump && !*plan)
		rt_dump_launch(m->dump, slot_kernel(m, *fi), sizes, dims);
	*skip = false;
	for (int i = 0; i < 6; i++)
		if (dims[i] == 0)
			*skip = true;
	if ((s = load_pending(m)) != FUSRT_OK || *plan)
		return s;
	return setup_smem(m, *fi);
}

void rt_segment_args(const Segment *sg, const fusrt_arg *args, const int64_t *sizes,
		     const CUdeviceptr *ws, fusrt_arg *out, int64_t *out_sizes)
{
	for (int q = 0; q < sg->fusion->nsig; q++)
		out[q] = sg->args[q].from == 's' ? args[sg->args[q].index]
			 : fusrt_ptr(ws ? (fusrt_devptr)ws[sg->args[q].index] : 256);
	segment_sizes(sg, sizes, out_sizes);
}

/* A segmented plan (Kernel.segments; docs/runtime.md): the workspace between the segments,
 * allocated in stream order (synchronously without cuMemAllocAsync), then each segment's
 * launch as fusrt_launch makes it (its checks, its variant, its dims), then the workspace
 * freed after them. */
static fusrt_status launch_plan(fusrt_module *m, Kernel *k, const fusrt_arg *args,
				const int64_t *sizes, CUstream stream)
{
	Fusion *f = k->fusion;
	int nb = f->seg_buffers.len;
	CUdeviceptr *ws = calloc((size_t)nb + 1, sizeof(CUdeviceptr));
	fusrt_status s = FUSRT_OK;

	for (int i = 0; i < nb && s == FUSRT_OK; i++) {
		Tensor *t = VEC_AT(f->seg_buffers, Tensor, i);
		int64_t dims[INTERP_MAX_DIMS], n = 1, b;
		if ((t->ndim && (!interp_tensor_dims(t, sizes, dims, NULL) ||
				 (n = interp_numel(dims, t->ndim)) < 0)) ||
		    __builtin_mul_overflow(n ? n : 1, (int64_t)dtype_size(t->dtype), &b)) {
			s = rt_fail(FUSRT_ERR_INVALID, "fusion %s: sizes too large: the size of the "
				    "segments' workspace does not fit in 64 bits", f->name);
			break;
		}
		CUresult r = rt_cu.mem_alloc_async ? rt_cu.mem_alloc_async(&ws[i], (size_t)b, stream)
						   : rt_cu.mem_alloc(&ws[i], (size_t)b);
		if (r != CUDA_SUCCESS) {
			ws[i] = 0;
			s = rt_cu_fail(r, "cuMemAllocAsync (the segments' workspace)");
		}
	}
	for (int i = 0; i < k->segments.len && s == FUSRT_OK; i++) {
		Segment *sg = VEC_AT(f->segments, Segment, i);
		Fusion *g = sg->fusion;
		Kernel *chain = VEC_AT(k->segments, Kernel, i);
		fusrt_arg *ga = calloc((size_t)g->nsig + 1, sizeof(fusrt_arg));
		int64_t *gs = calloc((size_t)g->nsizes + 1, sizeof(int64_t)), dims[6];
		rt_segment_args(sg, args, sizes, ws, ga, gs);
		s = rt_launch_check(chain, ga, g->nsig, gs, g->nsizes, dims);
		int slot = slot_of(m, rt_pick_kernel(chain, ga, gs));
		if (s == FUSRT_OK && m->dump)
			rt_dump_launch(m->dump, slot_kernel(m, slot), gs, dims);
		if (s == FUSRT_OK)
			s = setup_smem(m, slot);
		if (s == FUSRT_OK && dims[0] && dims[1] && dims[2] && dims[3] && dims[4] && dims[5])
			s = do_launch(m, slot, ga, gs, dims, stream);
		free(ga);
		free(gs);
	}
	CUresult fr = CUDA_SUCCESS;
	if (nb && !rt_cu.mem_free_async)
		fr = rt_cu.ctx_synchronize();
	for (int i = 0; i < nb; i++) {
		CUresult e = !ws[i] ? CUDA_SUCCESS : rt_cu.mem_free_async ? rt_cu.mem_free_async(ws[i], stream)
								       : rt_cu.mem_free(ws[i]);
		fr = fr == CUDA_SUCCESS ? e : fr;
	}
	free(ws);
	if (s == FUSRT_OK && fr != CUDA_SUCCESS)
		s = rt_cu_fail(fr, "cuMemFreeAsync (the segments' workspace)");
	return s;
}

/* The launch prepare chose: a kernel's, or a plan's segments. */
static fusrt_status launch_chosen(fusrt_module *m, int fi, Kernel *plan, const fusrt_arg *args,
				  const int64_t *sizes, const int64_t dims[6], CUstream stream)
{
	return plan ? launch_plan(m, plan, args, sizes, stream)
		    : do_launch(m, fi, args, sizes, dims, stream);
}

/* The arguments of fusrt_launch and fusrt_time_launch (for rt_guard). */
typedef struct LaunchCall {
	fusrt_module *m;
	const char *fusion;
	const fusrt_arg *args;
	int nargs;
	const int64_t *sizes;
	int nsizes;
	fusrt_stream stream;
	int warmup, iters;
	double *median_ms;
} LaunchCall;

static fusrt_status launch_body(void *ctx)
{
	LaunchCall *c = ctx;
	fusrt_module *m = c->m;
	const fusrt_arg *args = c->args;
	const int64_t *sizes = c->sizes;
	int64_t dims[6];
	bool skip = false;
	int fi;
	Kernel *plan;
	fusrt_status s;

	s = prepare(m, c->fusion, args, c->nargs, sizes, c->nsizes, &fi, &plan, dims, &skip);
	if (s != FUSRT_OK)
		return s;
	if (skip)
		return FUSRT_OK;
	return launch_chosen(m, fi, plan, args, sizes, dims, (CUstream)c->stream);
}

fusrt_status fusrt_launch(fusrt_module *m, const char *fusion, const fusrt_arg *args, int nargs,
			  const int64_t *sizes, int nsizes, fusrt_stream stream)
{
	LaunchCall c = {m, fusion, args, nargs, sizes, nsizes, stream, 0, 0, NULL};

	rt_clear_error();
	return rt_guard("fusrt_launch", launch_body, &c);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static fusrt_status time_body(void *ctx)
{
	LaunchCall *c = ctx;
	fusrt_module *m = c->m;
	const fusrt_arg *args = c->args;
	const int64_t *sizes = c->sizes;
	int warmup = c->warmup, iters = c->iters;
	double *median_ms = c->median_ms;
	int64_t dims[6];
	bool skip = false;
	int fi;
	Kernel *plan;
	fusrt_status s;
	CUresult r = CUDA_SUCCESS;

	if (!median_ms || iters < 1 || warmup < 0)
		return rt_fail(FUSRT_ERR_INVALID, "fusrt_time_launch: bad arguments");
	*median_ms = 0;
	s = prepare(m, c->fusion, args, c->nargs, sizes, c->nsizes, &fi, &plan, dims, &skip);
	if (s != FUSRT_OK)
		return s;
	if (skip)
		return FUSRT_OK;
	for (int i = 0; i < warmup; i++)
		if ((s = launch_chosen(m, fi, plan, args, sizes, dims, NULL)) != FUSRT_OK)
			return s;
	CUevent *ev = calloc(iters + 1, sizeof(CUevent));
	double *ms = calloc(iters, sizeof(double));
	int made = 0;
	for (; made <= iters && r == CUDA_SUCCESS; made++)
		r = rt_cu.event_create(&ev[made], CU_EVENT_DEFAULT);
	if (r != CUDA_SUCCESS) {
		made--;
		s = rt_cu_fail(r, "cuEventCreate");
	}
	for (int i = 0; i < iters && s == FUSRT_OK; i++) {
		if (i == 0 && (r = rt_cu.event_record(ev[0], NULL)) != CUDA_SUCCESS)
			s = rt_cu_fail(r, "cuEventRecord");
		if (s == FUSRT_OK)
			s = launch_chosen(m, fi, plan, args, sizes, dims, NULL);
		if (s == FUSRT_OK && (r = rt_cu.event_record(ev[i + 1], NULL)) != CUDA_SUCCESS)
			s = rt_cu_fail(r, "cuEventRecord");
	}
	if (s == FUSRT_OK && (r = rt_cu.event_synchronize(ev[iters])) != CUDA_SUCCESS)
		s = rt_cu_fail(r, "kernel execution failed (cuEventSynchronize)");
	for (int i = 0; i < iters && s == FUSRT_OK; i++) {
		float t = 0;
		if ((r = rt_cu.event_elapsed_time(&t, ev[i], ev[i + 1])) != CUDA_SUCCESS)
			s = rt_cu_fail(r, "cuEventElapsedTime");
		ms[i] = t;
	}
	if (s == FUSRT_OK) {
		qsort(ms, iters, sizeof(double), cmp_double);
		*median_ms = iters % 2 ? ms[iters / 2] : (ms[iters / 2 - 1] + ms[iters / 2]) / 2;
	}
	for (int i = 0; i < made; i++)
		rt_cu.event_destroy(ev[i]);
	free(ev);
	free(ms);
	return s;
}

fusrt_status fusrt_time_launch(fusrt_module *m, const char *fusion, const fusrt_arg *args,
			       int nargs, const int64_t *sizes, int nsizes, int warmup, int iters,
			       double *median_ms)
{
	LaunchCall c = {m, fusion, args, nargs, sizes, nsizes, NULL, warmup, iters, median_ms};

	rt_clear_error();
	return rt_guard("fusrt_time_launch", time_body, &c);
}

/* ---- ahead-of-time objects ------------------------------------------------------------ */

/* The module of an object written by fusc --emit=obj: its text lowered again as fusc lowered
 * it (arch, prefix; no NVRTC), checked to give the very device code whose binaries the object
 * holds, which its first launch loads. Made once per object (the first thread to finish
 * wins; a module another thread made meanwhile is dropped). */
static fusrt_status aot_module(const fusrt_aot *aot, fusrt_module **out)
{
	fusrt_module *m = __atomic_load_n(aot->module, __ATOMIC_ACQUIRE), *none = NULL;
	unsigned char digest[SHA256_BYTES];
	char hex[2 * SHA256_BYTES + 1];
	fusrt_status s;
	Buf cu = {0};
	Sha256 h;

	if ((*out = m))
		return FUSRT_OK;
	if (!aot->source || !aot->binaries || aot->nbinaries < 1 || !aot->device_sha256)
		return rt_fail(FUSRT_ERR_INVALID, "fusrt_aot_launch: a malformed object");
	m = module_new();
	s = build_ir(m, aot->source, aot->source_len, aot->name ? aot->name : "<object>", aot->arch,
		     aot->prefix);
	if (s == FUSRT_OK) {
		cuda_emit_device(m->kernels, m->n, &cu);
		sha256_init(&h);
		sha256_update(&h, cu.s, cu.len);
		sha256_final(&h, digest);
		sha256_hex(digest, hex);
		buf_free(&cu);
		if (strcmp(hex, aot->device_sha256) != 0)
			s = rt_fail(FUSRT_ERR_INVALID, "%s: the object was made by fusc %s, whose kernels "
				    "this libfusrt (%s) does not make: rebuild it with this fusc",
				    aot->name ? aot->name : "<object>",
				    aot->fusc_version ? aot->fusc_version : "?", FUSC_VERSION);
	} else {
		s = rt_fail(FUSRT_ERR_INVALID, "%s: the object's text does not compile with this "
			    "libfusrt (%s; the object was made by fusc %s): rebuild it with this "
			    "fusc:\n%s", aot->name ? aot->name : "<object>", FUSC_VERSION,
			    aot->fusc_version ? aot->fusc_version : "?", fusrt_last_error());
	}
	if (s != FUSRT_OK) {
		fusrt_module_free(m);
		return s;
	}
	m->images = xmalloc(sizeof(RtImage) * (size_t)aot->nbinaries);
	for (int i = 0; i < aot->nbinaries; i++)
		m->images[i] = (RtImage){aot->binaries[i].arch, aot->binaries[i].ptx != 0,
					 aot->binaries[i].data, aot->binaries[i].size};
	m->nimages = aot->nbinaries;
	if (!__atomic_compare_exchange_n(aot->module, &none, m, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		fusrt_module_free(m);
		m = none;
	}
	*out = m;
	return FUSRT_OK;
}

typedef struct AotCall {
	const fusrt_aot *aot;
	LaunchCall launch;
} AotCall;

static fusrt_status aot_body(void *ctx)
{
	AotCall *c = ctx;
	fusrt_status s = aot_module(c->aot, &c->launch.m);

	return s != FUSRT_OK ? s : launch_body(&c->launch);
}

fusrt_status fusrt_aot_launch(const fusrt_aot *aot, const char *fusion, const fusrt_arg *args,
			      int nargs, const int64_t *sizes, int nsizes, fusrt_stream stream)
{
	AotCall c = {aot, {NULL, fusion, args, nargs, sizes, nsizes, stream, 0, 0, NULL}};

	rt_clear_error();
	if (!aot || !aot->module)
		return rt_fail(FUSRT_ERR_INVALID, "fusrt_aot_launch: NULL object");
	return rt_guard("fusrt_aot_launch", aot_body, &c);
}
