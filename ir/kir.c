/* kir.c: kernel IR constructors and the kernel IR printer (`fusc --dump-after`).
 *
 * Variable names are unique within a kernel and never clash with the fusion's tensors,
 * parameters and size symbols (the backend prints them as they are, in one C scope): a loop
 * keeps its axis name when it is free, else gets a numeric suffix (`i_1`).
 *
 * The printer is indented, one statement a line, deterministic (names only):
 *
 *   kernel saxpy_kernel grid(ceildiv(N, 1024)) block(256) {
 *     for iv in [0, 4) vectorize {
 *       if (io * 1024 + it * 4 + iv < N) {
 *         z[io * 1024 + it * 4 + iv] = a * x[...] + y[...];
 *       }
 *     }
 *   }
 */
#include <string.h>

#include "ir/ir.h"

static const LowerOptions default_options = {.arch = 80};

const char *kir_name(Arena *a, Fusion *f)
{
	const char *name = arena_printf(a, "%s_kernel", f->name);
	for (int i = 0; i < f->nsizes; i++)
		if (f->sizes[i]->bound > 0)
			name = arena_printf(a, "%s_%s%lld", name, f->sizes[i]->name,
					    (long long)f->sizes[i]->bound);
	/* a bounded product: its symbols, then the bound (sum_last2_kernel_M_N4096) */
	SizeProd *p = fusion_size_prod(f, false);
	for (int i = 0; p && i < f->nsizes; i++)
		if (i < 64 && (p->of >> i & 1))
			name = arena_printf(a, "%s_%s", name, f->sizes[i]->name);
	if (p)
		name = arena_printf(a, "%s%lld", name, (long long)p->bound);
	return name;
}

const char *kir_bound_suffix(Arena *a, Fusion *f)
{
	return kir_name(a, f) + strlen(f->name) + strlen("_kernel");
}

IrExpr *size_prod_expr(Arena *a, Fusion *f, const SizeProd *p)
{
	IrExpr *e = NULL;
	for (int i = 0; i < f->nsizes && i < 64; i++)
		if (p->of >> i & 1) {
			IrExpr *z = ir_size(a, f->sizes[i]);
			e = e ? ix_mul(a, e, z) : z;
		}
	return e ? e : ir_int(a, 1);
}

SizeProd *fusion_size_prod(Fusion *f, bool above)
{
	for (int i = 0; i < f->nsizes; i++) {
		SizeProd *p = f->sizes[i]->prod;
		if (p && (above ? p->above : p->bound) > 0)
			return p;
	}
	return NULL;
}

Kernel *kir_new(Arena *a, Fusion *f)
{
	Kernel *k = NEW(a, Kernel);
	k->fusion = f;
	k->options = &default_options;
	k->name = kir_name(a, f);
	k->arena = a;
	return k;
}

/* ---- the launch contract ---------------------------------------------------------------- */

int fusion_sig_pos(Fusion *f, Tensor *t)
{
	for (int i = 0; i < f->nsig; i++)
		if (f->sig[i].kind != 'p' && f->sig[i].tensor == t)
			return i;
	return -1;
}

/* A PC_INDEX32 count: its product with every partial product at most `limit` (else limit +
 * 1: the count fails), a factor that cannot be evaluated or is negative failing too. */
static int64_t count_at_most(IrExpr *e, const int64_t *sizes, int64_t limit)
{
	int64_t v, w;
	if (e->kind == EX_OP && e->op == OP_MUL) {
		v = count_at_most(e->args[0], sizes, limit);
		w = count_at_most(e->args[1], sizes, limit);
		if (v == 0 || w == 0)
			return 0;
		return v > limit || w > limit || v > limit / w ? limit + 1 : v * w;
	}
	if (!ir_eval_i64(e, sizes, &v) || v < 0 || v > limit)
		return limit + 1;
	return v;
}

bool precond_holds(Fusion *f, const Precond *p, const int64_t *sizes, const uint64_t *ptrs)
{
	switch (p->kind) {
	case PC_INDEX32:
		for (int i = 0; i < p->ncounts; i++)
			if (count_at_most(p->counts[i], sizes, p->value) > p->value)
				return false;
		return true;
	case PC_ALIGNED: {
		int pos = fusion_sig_pos(f, p->tensor);
		return !ptrs || pos < 0 || ptrs[pos] % (uint64_t)p->value == 0;
	}
	case PC_MULTIPLE:
		return sizes[p->size->index] % p->value == 0;
	case PC_AT_MOST:
		if (!p->size)
			return count_at_most(p->counts[0], sizes, p->value) <= p->value;
		return sizes[p->size->index] <= p->value;
	}
	unreachable();
}

Precond *kernel_failed_precond(Kernel *k, const int64_t *sizes, const uint64_t *ptrs)
{
	for (int i = 0; i < k->preconds.len; i++) {
		Precond *p = VEC_AT(k->preconds, Precond, i);
		if (!precond_holds(k->fusion, p, sizes, ptrs))
			return p;
	}
	return NULL;
}

Kernel *kernel_pick(Kernel *k, const int64_t *sizes, const uint64_t *ptrs)
{
	for (; k; k = k->fallback)
		if (!kernel_failed_precond(k, sizes, ptrs))
			return k;
	return NULL;
}

Kernel *kernel_own(Kernel *k)
{
	for (Kernel *v = k; v; v = v->fallback) {
		bool bounded = false;
		for (int i = 0; i < v->fusion->nsizes; i++)
			bounded |= v->fusion->sizes[i]->bound > 0;
		bounded |= fusion_size_prod(v->fusion, false) != NULL;
		if (!bounded)
			return v;
	}
	return k;
}

void kernel_flatten(Arena *a, Kernel *k, Vec *out)
{
	for (; k; k = k->fallback) {
		if (!k->segments.len)
			vec_push(a, out, k);
		for (int i = 0; i < k->segments.len; i++)
			kernel_flatten(a, VEC_AT(k->segments, Kernel, i), out);
	}
}

void segment_sizes(const Segment *sg, const int64_t *sizes, int64_t *out)
{
	for (int i = 0; i < sg->fusion->nsizes; i++) {
		int64_t m = sg->multiple ? sg->multiple[i] : 0, v = sizes[sg->sizes[i]];
		/* a size past INT64_MAX - m was refused with the workspace it sizes */
		out[i] = m > 0 && v % m ? v + (m - v % m) : v;
	}
}

/* The segment of f's plan that lowers f, or NULL: its fusion, or a copy of it from the same
 * source (a size variant, which the scheduler lowers before it is in Fusion.variants) */
static Segment *segment_lowering(Fusion *f)
{
	Fusion *plan = f->segment_of;
	for (int i = 0; plan && i < plan->segments.len; i++) {
		Segment *sg = VEC_AT(plan->segments, Segment, i);
		if (sg->fusion == f || (f->ast && sg->fusion->ast == f->ast))
			return sg;
	}
	return NULL;
}

bool segment_guarantees(Fusion *f, const Precond *p)
{
	Segment *sg = segment_lowering(f);
	if (!sg)
		return false;
	if (p->kind == PC_ALIGNED) {
		int pos = fusion_sig_pos(f, p->tensor);
		return pos >= 0 && sg->args[pos].from == 'w' && p->value > 0 && 256 % p->value == 0;
	}
	if (p->kind == PC_MULTIPLE) {
		int m = sg->multiple ? sg->multiple[p->size->index] : 0;
		return m > 0 && p->value > 0 && m % p->value == 0;
	}
	return false;
}

Kernel *kernel_last_variant(Kernel *k)
{
	while (k->fallback)
		k = k->fallback;
	return k;
}

PrecondText precond_failure(Arena *a, const Precond *p)
{
	const char *reason = p->reason ? p->reason
			     : p->kind == PC_AT_MOST ? "size variant"
			     : p->kind == PC_INDEX32 ? "32-bit indices" : "vectorized access";
	const char *why = p->where ? arena_printf(a, " (%s, %s)", reason, p->where)
			  : arena_printf(a, " (%s)", reason);
	long long v = (long long)p->value;
	switch (p->kind) {
	case PC_ALIGNED:
		return (PrecondText){arena_printf(a, "%s is not %lld-byte aligned%s", p->tensor->name,
						  v, why), "", false};
	case PC_MULTIPLE:
		return (PrecondText){arena_printf(a, "%s = ", p->size->name),
				     arena_printf(a, " is not a multiple of %lld%s", v, why), true};
	case PC_AT_MOST:
		if (!p->size) {
			Buf e = {0};
			ir_print_expr(p->counts[0], &e);
			PrecondText t = {arena_printf(a, "%s is more than %lld%s", e.s, v, why), "",
					 false};
			buf_free(&e);
			return t;
		}
		return (PrecondText){arena_printf(a, "%s = ", p->size->name),
				     arena_printf(a, " is more than %lld%s", v, why), true};
	case PC_INDEX32:
		return (PrecondText){arena_printf(a, "a tensor or loop nest has more than %lld "
						  "elements%s", v, why), "", false};
	}
	unreachable();
}

void precond_condition(const Precond *p, Buf *out)
{
	switch (p->kind) {
	case PC_ALIGNED:
		buf_printf(out, "%s is %lld-byte aligned", p->tensor->name, (long long)p->value);
		return;
	case PC_MULTIPLE:
		buf_printf(out, "%s is a multiple of %lld", p->size->name, (long long)p->value);
		return;
	case PC_AT_MOST:
		if (p->size)
			buf_puts(out, p->size->name);
		else
			ir_print_expr(p->counts[0], out);
		buf_printf(out, " <= %lld", (long long)p->value);
		return;
	case PC_INDEX32:
		buf_printf(out, "every tensor and loop nest has at most %lld elements",
			   (long long)p->value);
		return;
	}
}

/* Names the generated C code cannot use for a variable. */
static const char *reserved[] = {
	"auto", "bool", "break", "case", "char", "const", "continue", "default", "do",
	"double", "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int",
	"long", "register", "return", "short", "signed", "sizeof", "static", "struct",
	"switch", "typedef", "union", "unsigned", "void", "volatile", "while", "threadIdx",
	"blockIdx", "blockDim", "gridDim", "true", "false", "stream",
};

static void take(Kernel *k, const char *s)
{
	map_insert(k->arena, &k->names, s, (void *)s);
}

/* The names a variable cannot take: C keywords, CUDA built-ins, the fusion's names. Filled
 * on the first kir_new_var, so kernels with 10^5 variables and tensors stay linear. */
static void init_names(Kernel *k)
{
	k->names.strings = k->name_next.strings = true;
	for (int i = 0; i < countof(reserved); i++)
		take(k, reserved[i]);
	take(k, k->name);
	Fusion *f = k->fusion;
	if (!f)
		return;
	take(k, f->name);
	for (int i = 0; i < f->ntensors; i++)
		take(k, f->tensors[i]->name);
	for (int i = 0; i < f->nparams; i++)
		take(k, f->params[i]->name);
	for (int i = 0; i < f->nsizes; i++)
		take(k, f->sizes[i]->name);
}

Var *kir_new_var(Kernel *k, const char *base, DType t)
{
	Var *v = NEW(k->arena, Var);
	const char *name = base;
	if (!k->names.strings)
		init_names(k);
	if (map_lookup(&k->names, name)) {
		/* base_1, base_2, ...: the next suffix of this base is kept */
		int *n = map_lookup(&k->name_next, base);
		if (!n) {
			n = NEW(k->arena, int);
			*n = 1;
			map_insert(k->arena, &k->name_next, arena_strdup(k->arena, base), n);
		}
		do
			name = arena_printf(k->arena, "%s_%d", base, (*n)++);
		while (map_lookup(&k->names, name));
	}
	v->name = arena_strdup(k->arena, name);
	take(k, v->name);
	v->id = k->nvars++;
	v->dtype = t;
	vec_push(k->arena, &k->vars, v);
	return v;
}

/* ---- copies of a kernel ---------------------------------------------------------------- */

/* Old Var -> its copy: every variable reachable from the kernel is copied (its extent too),
 * so that a pass changing one in place (simplify's loop extents) changes one kernel only. */
typedef struct KCopy {
	Arena *a;
	Map vars;
} KCopy;

static Var *copy_var(KCopy *c, Var *v);

static IrExpr *copy_var_use(Arena *a, IrExpr *e, void *ctx)
{
	if (e->kind != EX_VAR)
		return e;
	IrExpr *n = NEW(a, IrExpr);
	*n = *e;
	n->var = copy_var(ctx, e->var);
	return n;
}

/* e with its variables replaced by their copies (the nodes without a variable are shared:
 * expressions are never changed in place) */
static IrExpr *copy_expr(KCopy *c, IrExpr *e)
{
	return ir_rewrite(c->a, e, copy_var_use, c);
}

static Var *copy_var(KCopy *c, Var *v)
{
	if (!v)
		return NULL;
	Var *n = map_lookup(&c->vars, v);
	if (n)
		return n;
	n = NEW(c->a, Var);
	*n = *v;
	map_insert(c->a, &c->vars, v, n);
	n->extent = copy_expr(c, v->extent);
	return n;
}

static bool copy_slot(IrExpr **slot, void *ctx)
{
	*slot = copy_expr(ctx, *slot);
	return false;
}

static Stmt *copy_list(KCopy *c, Stmt *list)
{
	Stmt *head = NULL, **tail = &head;
	for (Stmt *s = list; s; s = s->next) {
		Stmt *n = ir_stmt_clone(c->a, s);
		ir_stmt_exprs(n, copy_slot, c);
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(n, lists); i < nl; i++)
			*lists[i] = copy_list(c, *lists[i]);
		switch (n->kind) {
		case KS_FOR: n->loop.var = copy_var(c, n->loop.var); break;
		case KS_LET: n->let.var = copy_var(c, n->let.var); break;
		case KS_BLOCK_REDUCE:
			n->block_red.var = copy_var(c, n->block_red.var);
			n->block_red.wmean = copy_var(c, n->block_red.wmean);
			n->block_red.wm2 = copy_var(c, n->block_red.wm2);
			n->block_red.osum = copy_var(c, n->block_red.osum);
			break;
		case KS_GRID_REDUCE: n->grid_red.var = copy_var(c, n->grid_red.var); break;
		case KS_MMA:
		case KS_MMA_LOAD: n->mma.step = copy_var(c, n->mma.step); break;
		default: break;
		}
		*tail = n;
		tail = &n->next;
	}
	return head;
}

static Vec copy_vec(Arena *a, Vec v)
{
	Vec n = {0};
	for (int i = 0; i < v.len; i++)
		vec_push(a, &n, v.items[i]);
	return n;
}

static Map copy_map(Arena *a, Map m, size_t val_bytes)
{
	Map n = m;
	if (!m.cap)
		return n;
	n.keys = arena_alloc(a, sizeof(void *) * (size_t)m.cap);
	n.vals = arena_alloc(a, sizeof(void *) * (size_t)m.cap);
	memcpy(n.keys, m.keys, sizeof(void *) * (size_t)m.cap);
	for (int i = 0; i < m.cap; i++) {
		n.vals[i] = m.vals[i];
		if (val_bytes && m.vals[i]) {
			n.vals[i] = arena_alloc(a, val_bytes);
			memcpy(n.vals[i], m.vals[i], val_bytes);
		}
	}
	return n;
}

Kernel *kir_copy(Arena *a, Kernel *k)
{
	KCopy c = {a, {0}};
	Kernel *n = NEW(a, Kernel);
	*n = *k;
	n->body = copy_list(&c, k->body);
	for (int i = 0; i < PT_COUNT; i++)
		n->launch[i] = copy_expr(&c, k->launch[i]);
	n->preconds = copy_vec(a, k->preconds);
	n->grid_ws = copy_vec(a, k->grid_ws);
	n->segments = copy_vec(a, k->segments);
	n->locals = copy_vec(a, k->locals);
	n->vars = copy_vec(a, k->vars);
	for (int i = 0; i < n->locals.len; i++)
		n->locals.items[i] = copy_var(&c, n->locals.items[i]);
	for (int i = 0; i < n->vars.len; i++)
		n->vars.items[i] = copy_var(&c, n->vars.items[i]);
	n->names = copy_map(a, k->names, 0);
	n->name_next = copy_map(a, k->name_next, sizeof(int));
	n->fallback = NULL;
	return n;
}

static Stmt *stmt(Kernel *k, StmtKind kind)
{
	Stmt *s = NEW(k->arena, Stmt);
	s->kind = kind;
	return s;
}

Stmt *kir_for(Kernel *k, Var *v, Stmt *body)
{
	Stmt *s = stmt(k, KS_FOR);
	s->loop.var = v;
	s->loop.body = body;
	if (v->axis) {
		s->loop.unroll = v->axis->unroll;
		s->loop.vectorize = v->axis->vectorize;
		s->span = v->axis->span;
	}
	return s;
}

Stmt *kir_if(Kernel *k, IrExpr *cond, Stmt *then, Stmt *els)
{
	Stmt *s = stmt(k, KS_IF);
	s->branch.cond = cond;
	s->branch.then = then;
	s->branch.els = els;
	return s;
}

Stmt *kir_store(Kernel *k, Tensor *t, IrExpr **idx, int nidx, IrExpr *value)
{
	Stmt *s = stmt(k, KS_STORE);
	s->store.tensor = t;
	s->store.mem = t->sched.mem;
	s->store.nidx = nidx;
	s->store.idx = arena_alloc(k->arena, sizeof(IrExpr *) * (size_t)(nidx ? nidx : 1));
	for (int i = 0; i < nidx; i++)
		s->store.idx[i] = idx[i];
	s->store.value = value;
	s->span = t->def_span;
	return s;
}

Stmt *kir_alloc(Kernel *k, Tensor *t, MemType m, IrExpr *size)
{
	Stmt *s = stmt(k, KS_ALLOC);
	s->alloc.tensor = t;
	s->alloc.mem = m;
	s->alloc.size = size;
	s->span = t->span;
	return s;
}

Stmt *kir_comment(Kernel *k, const char *text)
{
	Stmt *s = stmt(k, KS_COMMENT);
	s->note.text = arena_strdup(k->arena, text);
	return s;
}

Stmt *kir_nest_mark(Kernel *k, Tensor *t, Span at, const char *text)
{
	Stmt *s = kir_comment(k, text);
	s->kind = KS_NEST;
	s->note.tensor = t;
	s->span = at;
	return s;
}

Stmt *kir_only_stmt(Stmt *s)
{
	Stmt *found = NULL;
	for (; s; s = s->next) {
		if (s->kind == KS_COMMENT || s->kind == KS_NEST)
			continue;
		if (found)
			return NULL;
		found = s;
	}
	return found;
}

Stmt *kir_block_reduce(Kernel *k, Var *v, ReduceOp r, unsigned pars)
{
	Stmt *s = stmt(k, KS_BLOCK_REDUCE);
	s->block_red.var = v;
	s->block_red.value = ir_var(k->arena, v);
	s->block_red.red = r;
	s->block_red.pars = pars;
	return s;
}

Stmt *kir_block_welford(Kernel *k, Var *n, Var *mean, Var *m2, unsigned pars)
{
	Stmt *s = kir_block_reduce(k, n, RED_WELFORD, pars);
	s->block_red.wmean = mean;
	s->block_red.wm2 = m2;
	return s;
}

Stmt *kir_block_online(Kernel *k, Var *max, Var *sum, unsigned pars)
{
	Stmt *s = kir_block_reduce(k, max, RED_ONLINE, pars);
	s->block_red.osum = sum;
	return s;
}

static int64_t thread_dim(Kernel *k, ParType p)
{
	int64_t v = 1;
	if (k->launch[p] && !ir_is_const(k->launch[p], &v))
		return -1;
	return v;
}

bool kir_block_reduce_shape(Kernel *k, unsigned pars, BlockReduceShape *out)
{
	int64_t count = 1, stride = 1, nthreads = 1;
	int state = 0; /* 0: before the reduced types, 1: among them, 2: past them */
	for (int p = PT_TIDX; p <= PT_TIDZ; p++) {
		int64_t e = thread_dim(k, (ParType)p);
		if (e < 0)
			return false;
		nthreads *= e;
		if (e == 1)
			continue; /* an unlaunched type separates nothing */
		if (pars & (1u << p)) {
			if (state == 2)
				return false;
			state = 1;
			count *= e;
		} else if (state == 0) {
			stride *= e;
		} else {
			state = 2;
		}
	}
	out->count = count;
	out->stride = stride;
	out->nthreads = nthreads;
	if (stride == 1 && count <= 32 && (count & (count - 1)) == 0)
		out->kind = BR_WARP;
	else if (stride == 1 && count % 32 == 0)
		out->kind = BR_WARPS;
	else
		out->kind = BR_SMEM;
	return true;
}

int64_t kernel_smem_dynamic(const Kernel *k)
{
	return k->smem_dynamic ? k->smem_bytes : 0;
}

int64_t kernel_smem_static(const Kernel *k)
{
	return (k->smem_dynamic ? 0 : k->smem_bytes) + k->smem_helper_bytes;
}

static void print_pars(unsigned pars, Buf *out)
{
	bool first = true;
	for (int p = PT_BIDX; p <= PT_TIDZ; p++) {
		if (!(pars & (1u << p)))
			continue;
		buf_printf(out, "%s%s", first ? "" : ", ", par_name((ParType)p));
		first = false;
	}
}

Stmt *kir_append(Stmt *a, Stmt *b)
{
	if (!a)
		return b;
	Stmt *t = a;
	while (t->next)
		t = t->next;
	t->next = b;
	return a;
}

/* ---- printer -------------------------------------------------------------------------- */

static void print_list(Stmt *s, int level, Buf *out);

static void print_block(Stmt *body, int level, Buf *out)
{
	buf_puts(out, "{\n");
	print_list(body, level + 1, out);
	buf_indent(out, level);
	buf_puts(out, "}");
}

/* `cp.async.ca c[o : 4] <- A[g : 4] src_size(cond ? 4 : 0);` (src_size in elements, as the
 * PTX operand is in bytes; the rest of the destination vector is zero-filled) */
static void print_cp_async(Stmt *s, Buf *out)
{
	buf_printf(out, "cp.async.%s %s[", s->copy.tensor->sched.cp_async_cg ? "cg" : "ca",
		   s->copy.tensor->name);
	ir_print_expr(s->copy.offset, out);
	buf_printf(out, " : %d] <- %s[", s->copy.vec, s->copy.src ? s->copy.src->name : "?");
	ir_print_expr(s->copy.src_offset, out);
	buf_printf(out, " : %d]", s->copy.vec);
	if (s->copy.cond || s->copy.size) {
		buf_puts(out, " src_size(");
		if (s->copy.cond) {
			ir_print_expr(s->copy.cond, out);
			buf_puts(out, " ? ");
		}
		if (s->copy.size)
			ir_print_expr(s->copy.size, out);
		else
			buf_printf(out, "%d", s->copy.vec);
		if (s->copy.cond)
			buf_puts(out, " : 0");
		buf_puts(out, ")");
	}
	buf_puts(out, ";");
}

/* mma.m16n8k16 Cl[c0, c1, c2, c3] += {a0, ..., a7} * {b0, ..., b3}; (the lane's elements, in
 * fragment order) */
static void print_mma(Stmt *s, Buf *out)
{
	const char ops[3] = {'c', 'a', 'b'};
	buf_printf(out, "mma.%s %s[", s->mma.instr->name, s->mma.tensor->name);
	for (int part = 0; part < 3; part++) {
		int n, first = mma_slot(s, ops[part], &n);
		bool ldm = part && (s->mma.ldm & (part == 1 ? MMA_LDM_A : MMA_LDM_B));
		if (part)
			buf_puts(out, part == 1 ? "] += " : " * ");
		if (part)
			buf_printf(out, "%s%s%s", !ldm ? "{" : part == 1 ? "ldmatrix.x4" : "ldmatrix.x2",
				   ldm && (s->mma.ldt & (part == 1 ? MMA_LDM_A : MMA_LDM_B)) ? ".trans" : "",
				   ldm ? "(" : "");
		for (int i = first; i < first + n; i++) {
			if (i > first)
				buf_puts(out, ", ");
			ir_print_expr(s->mma.idx[i], out);
		}
		if (part)
			buf_puts(out, ldm ? ")" : "}");
	}
	buf_puts(out, ";");
}

/* As_frag[o ..] = ldmatrix.x4(As[row]); or As_frag[o ..] = {As[a0], ...}; */
static void print_mma_load(Stmt *s, Buf *out)
{
	buf_printf(out, "%s[", s->mma.tensor->name);
	ir_print_expr(s->mma.offset, out);
	buf_puts(out, " ..] = ");
	if (!s->mma.ldm)
		buf_puts(out, "{");
	else
		buf_printf(out, "ldmatrix.x%d%s(", s->mma.op == 'a' || s->mma.tiles == 2 ? 4 : 2,
			   s->mma.ldt ? ".trans" : "");
	for (int i = 0; i < s->mma.nidx; i++) {
		if (i)
			buf_puts(out, ", ");
		ir_print_expr(s->mma.idx[i], out);
	}
	buf_puts(out, s->mma.ldm ? ");" : "};");
}

static void print_stmt(Stmt *s, int level, Buf *out)
{
	buf_indent(out, level);
	switch (s->kind) {
	case KS_FOR:
		buf_printf(out, "for %s in [0, ", s->loop.var->name);
		ir_print_expr(s->loop.var->extent, out);
		buf_puts(out, ")");
		if (s->loop.unroll)
			buf_puts(out, " unroll");
		if (s->loop.vectorize)
			buf_puts(out, " vectorize");
		buf_puts(out, " ");
		print_block(s->loop.body, level, out);
		break;
	case KS_IF:
		buf_puts(out, "if (");
		ir_print_expr(s->branch.cond, out);
		buf_puts(out, ") ");
		print_block(s->branch.then, level, out);
		if (s->branch.els) {
			buf_puts(out, " else ");
			print_block(s->branch.els, level, out);
		}
		break;
	case KS_ALLOC:
		buf_printf(out, "alloc %s %s %s[", mem_name(s->alloc.mem),
			   dtype_name(s->alloc.tensor->dtype), s->alloc.tensor->name);
		ir_print_expr(s->alloc.size, out);
		buf_puts(out, "];");
		if (s->alloc.mem == MEM_SHARED && s->alloc.smem_offset)
			buf_printf(out, " // at byte %lld", (long long)s->alloc.smem_offset);
		break;
	case KS_STORE:
		buf_printf(out, "%s[", s->store.tensor->name);
		if (s->store.idx && !s->store.offset) {
			for (int i = 0; i < s->store.nidx; i++) {
				if (i)
					buf_puts(out, ", ");
				ir_print_expr(s->store.idx[i], out);
			}
		} else {
			ir_print_expr(s->store.offset, out);
		}
		buf_puts(out, "] = ");
		ir_print_expr(s->store.value, out);
		buf_puts(out, ";");
		break;
	case KS_VSTORE:
		buf_printf(out, "%s[", s->copy.tensor->name);
		ir_print_expr(s->copy.offset, out);
		buf_printf(out, " : %d] = %s[", s->copy.vec, s->copy.src ? s->copy.src->name : "?");
		ir_print_expr(s->copy.src_offset, out);
		buf_printf(out, " : %d];", s->copy.vec);
		break;
	case KS_LET:
		buf_printf(out, "%s = ", s->let.var->name);
		ir_print_expr(s->let.value, out);
		buf_puts(out, ";");
		break;
	case KS_COMMENT:
	case KS_NEST:
		buf_printf(out, "// %s", s->note.text);
		break;
	case KS_SYNC:
		buf_puts(out, "__syncthreads();");
		break;
	case KS_BLOCK_REDUCE:
		if (s->block_red.red == RED_WELFORD) {
			/* s1_n, s1_mean, s1_m2 = block_welford(s1_n, s1_mean, s1_m2 over threadIdx.x); */
			const char *n = s->block_red.var->name, *m = s->block_red.wmean->name;
			const char *m2 = s->block_red.wm2->name;
			buf_printf(out, "%s, %s, %s = block_welford(%s, %s, %s over ", n, m, m2, n, m,
				   m2);
			print_pars(s->block_red.pars, out);
			buf_puts(out, ");");
			break;
		}
		if (s->block_red.red == RED_ONLINE) {
			/* m_acc, m_sum = block_online(m_acc, m_sum over threadIdx.x); */
			const char *m = s->block_red.var->name, *sum = s->block_red.osum->name;
			buf_printf(out, "%s, %s = block_online(%s, %s over ", m, sum, m, sum);
			print_pars(s->block_red.pars, out);
			buf_puts(out, ");");
			break;
		}
		buf_printf(out, "%s = block_reduce_%s(", s->block_red.var->name,
			   red_name(s->block_red.red));
		ir_print_expr(s->block_red.value, out);
		buf_puts(out, " over ");
		print_pars(s->block_red.pars, out);
		buf_puts(out, ");");
		break;
	case KS_GRID_REDUCE:
		/* grid_reduce_sum(s_acc over blockIdx.y, element j, part blockIdx.y of R,
		 * fus_ws_s, fus_sem_s) { s[j] = s_acc; } */
		buf_printf(out, "grid_reduce_%s(%s over ", red_name(s->grid_red.red),
			   s->grid_red.var->name);
		print_pars(s->grid_red.pars, out);
		buf_puts(out, ", element ");
		ir_print_expr(s->grid_red.offset, out);
		buf_puts(out, ", part ");
		ir_print_expr(s->grid_red.part, out);
		buf_puts(out, " of ");
		ir_print_expr(s->grid_red.nparts, out);
		buf_printf(out, ", %s, %s) ", s->grid_red.ws->name, s->grid_red.sem->name);
		print_block(s->grid_red.body, level, out);
		break;
	case KS_CP_ASYNC:
		print_cp_async(s, out);
		break;
	case KS_CP_COMMIT:
		buf_puts(out, "cp.async.commit_group;");
		break;
	case KS_CP_WAIT:
		if (s->wait.n < 0)
			buf_puts(out, "cp.async.wait_all;");
		else
			buf_printf(out, "cp.async.wait_group %d;", s->wait.n);
		break;
	case KS_MMA:
		print_mma(s, out);
		break;
	case KS_MMA_LOAD:
		print_mma_load(s, out);
		break;
	}
	buf_puts(out, "\n");
}

static void print_list(Stmt *s, int level, Buf *out)
{
	for (; s; s = s->next)
		print_stmt(s, level, out);
}

/* ` grid(X, Y, Z)`: trailing 1s are left out; nothing when every extent is 1 */
static void print_dims(Kernel *k, const char *what, ParType first, Buf *out)
{
	int n = 0;
	for (int i = 0; i < 3; i++)
		if (k->launch[first + i])
			n = i + 1;
	if (!n)
		return;
	buf_printf(out, " %s(", what);
	for (int i = 0; i < n; i++) {
		if (i)
			buf_puts(out, ", ");
		IrExpr *e = k->launch[first + i];
		if (e)
			ir_print_expr(e, out);
		else
			buf_puts(out, "1");
	}
	buf_puts(out, ")");
}

static void print_precond(Precond *p, Buf *out)
{
	buf_indent(out, 1);
	if (p->kind == PC_ALIGNED)
		buf_printf(out, "require aligned(%s, %lld);\n", p->tensor ? p->tensor->name : "?",
			   (long long)p->value);
	else if (p->kind == PC_MULTIPLE)
		buf_printf(out, "require %s %% %lld == 0;\n", p->size ? p->size->name : "?",
			   (long long)p->value);
	else if (p->kind == PC_INDEX32)
		buf_printf(out, "require index32(%lld);\n", (long long)p->value);
	else {
		buf_puts(out, "require ");
		precond_condition(p, out);
		buf_puts(out, ";\n");
	}
}

void kir_print_stmt_line(Stmt *s, Buf *out)
{
	Buf one = {0};
	if (s->kind == KS_FOR) {
		Stmt head = *s;
		head.loop.body = NULL;
		print_stmt(&head, 0, &one);
	} else if (s->kind == KS_IF) {
		Stmt head = *s;
		head.branch.then = head.branch.els = NULL;
		print_stmt(&head, 0, &one);
	} else if (s->kind == KS_GRID_REDUCE) {
		Stmt head = *s;
		head.grid_red.body = NULL;
		print_stmt(&head, 0, &one);
	} else {
		print_stmt(s, 0, &one);
	}
	/* A line: cut at the first newline (the empty body of a loop or an if). */
	one.s[strcspn(one.s, "\n")] = 0;
	buf_puts(out, one.s);
	buf_free(&one);
}

void kir_print(Kernel *k, Buf *out)
{
	if (k->segments.len) { /* a plan: its segments' own kernels, in launch order */
		buf_printf(out, "plan %s {\n", k->name);
		for (int i = 0; i < k->preconds.len; i++)
			print_precond(VEC_AT(k->preconds, Precond, i), out);
		for (int i = 0; i < k->segments.len; i++)
			buf_printf(out, "  run %s\n", VEC_AT(k->segments, Kernel, i)->fusion->name);
		buf_puts(out, "}\n");
		for (int i = 0; i < k->segments.len; i++)
			kir_print(kernel_own(VEC_AT(k->segments, Kernel, i)), out);
		return;
	}
	buf_printf(out, "kernel %s", k->name);
	print_dims(k, "grid", PT_BIDX, out);
	print_dims(k, "block", PT_TIDX, out);
	if (k->smem_bytes)
		buf_printf(out, " smem(%lld%s)", (long long)k->smem_bytes,
			   k->smem_dynamic ? " dynamic" : "");
	buf_puts(out, " {\n");
	for (int i = 0; i < k->preconds.len; i++)
		print_precond(VEC_AT(k->preconds, Precond, i), out);
	for (int i = 0; i < k->locals.len; i++) {
		Var *v = VEC_AT(k->locals, Var, i);
		buf_indent(out, 1);
		buf_printf(out, "local %s %s;\n", dtype_name(v->dtype), v->name);
	}
	print_list(k->body, 1, out);
	buf_puts(out, "}\n");
}
