/* shared_memory.c: the kernel's shared-memory layout and its limits (docs/lowering.md).
 *
 * Every shared KS_ALLOC gets a byte offset in one pool: sizes are rounded up to 16 bytes, so
 * every buffer is 16-byte aligned (vector and cp.async accesses need it). Buffers whose
 * lifetimes do not overlap share bytes. A lifetime is an interval of statement positions
 * (preorder): from the allocation to the last access, where an access inside a loop that does
 * not contain the allocation extends it to the whole loop (the buffer lives across its
 * iterations). Offsets are assigned first-fit in allocation order. The sync pass treats
 * buffers sharing bytes as one memory, so reuse gets the barriers it needs.
 *
 * The backend's block-reduction helpers declare static shared memory of their own (ws[32] of
 * __fus_reduce_warps, ws[NT] of __fus_reduce_smem, Welford's three arrays): one copy per
 * template instantiation, counted here (Kernel.smem_helper_bytes, each rounded up to 16
 * bytes: an upper bound of the compiler's layout). Every limit counts both.
 *
 * Up to 48 KiB of static memory (pool + helpers) the pool is static; beyond, it is dynamic
 * (`extern __shared__`; the launcher raises cudaFuncAttributeMaxDynamicSharedMemorySize).
 * Beyond the target's opt-in limit (dynamic + static) it is an error at the cache directive
 * of the largest buffer (a warning with --no-arch-check), the message stating dynamic, static,
 * required and limit sizes; the launcher checks the device's own limit at launch time.
 */
#include <string.h>

#include "passes/passes.h"

#define STATIC_LIMIT (48 * 1024)

typedef struct SBuf {
	Stmt *alloc;
	Tensor *t;
	int64_t bytes;
	int pos, depth;  /* allocation position and loop depth there */
	int last;        /* end of the lifetime */
	int64_t off;
} SBuf;

typedef struct Sm {
	SBuf *b;
	int n;
	int pos;
	int starts[64], ends[64]; /* enclosing loops: first and last position */
	int depth;
} Sm;

static bool count_one(Stmt *s, void *n)
{
	(void)s;
	++*(int *)n;
	return false;
}

static int count(Stmt *s)
{
	int n = 0;
	ir_stmts_any(s, count_one, &n);
	return n;
}

static SBuf *find_buf(Sm *m, Tensor *t)
{
	for (int i = 0; i < m->n; i++)
		if (m->b[i].t == t)
			return &m->b[i];
	return NULL;
}

static void use(Sm *m, Tensor *t)
{
	SBuf *b = find_buf(m, t);
	if (!b)
		return;
	int end = m->pos;
	if (m->depth > b->depth && b->depth < countof(m->ends))
		end = m->ends[b->depth];
	if (end > b->last)
		b->last = end;
}

static bool use_load(IrExpr *e, void *m)
{
	if (e->kind == EX_LOAD)
		use(m, e->tensor);
	return false;
}

static bool use_slot(IrExpr **slot, void *m)
{
	return ir_expr_any(*slot, use_load, m);
}

static void scan(Sm *m, Stmt *s, Arena *a)
{
	for (; s; s = s->next) {
		int here = m->pos++;
		if (s->kind == KS_ALLOC && s->alloc.mem == MEM_SHARED) {
			int64_t n;
			if (!ir_is_const(s->alloc.size, &n))
				die("shared buffer %s without a constant size", s->alloc.tensor->name);
			SBuf *nb = arena_alloc(a, sizeof *nb * (size_t)(m->n + 1));
			if (m->n)
				memcpy(nb, m->b, sizeof *nb * (size_t)m->n);
			int64_t bytes = (n * dtype_size(s->alloc.tensor->dtype) + 15) / 16 * 16;
			nb[m->n++] = (SBuf){s, s->alloc.tensor, bytes, here, m->depth, here, 0};
			m->b = nb;
		}
		use(m, ir_stmt_write(s, NULL));
		if (s->kind == KS_VSTORE)
			use(m, s->copy.src);
		ir_stmt_exprs(s, use_slot, m);
		if (s->kind == KS_FOR && m->depth < countof(m->starts)) {
			m->starts[m->depth] = here;
			m->ends[m->depth] = here + count(s->loop.body);
			m->depth++;
			scan(m, s->loop.body, a);
			m->depth--;
			continue;
		}
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			scan(m, *lists[i], a);
	}
}

/* ---- the helpers' static shared memory ---- */

typedef struct Helper {
	ReduceOp red;
	DType dt;
	BlockReduceShape sh;
} Helper;

typedef struct Helpers {
	Helper *h;
	int n, cap;
	Stmt *first; /* the first block reduction that declares any (for diagnostics) */
	int64_t bytes;
	Arena *a;
	Kernel *k;
} Helpers;

/* Bytes one block reduction's helper declares: none for shuffles in a warp, 32 partials for
 * warps through shared memory, one per thread otherwise; Welford keeps three, online two. A
 * bool travels as int. */
static int64_t helper_bytes(Stmt *s, BlockReduceShape *sh)
{
	DType dt = s->block_red.var->dtype;
	int64_t el = dt == DT_BOOL ? 4 : dtype_size(dt);
	int64_t n = sh->kind == BR_WARP ? 0 : sh->kind == BR_WARPS ? 32 : sh->nthreads;
	if (s->block_red.red == RED_WELFORD)
		n *= 3;
	if (s->block_red.red == RED_ONLINE)
		n *= 2;
	return (n * el + 15) / 16 * 16;
}

static bool same_helper(Helper *h, Stmt *s, BlockReduceShape *sh)
{
	return h->red == s->block_red.red && h->dt == s->block_red.var->dtype &&
	       h->sh.kind == sh->kind &&
	       h->sh.count == sh->count && h->sh.stride == sh->stride &&
	       h->sh.nthreads == sh->nthreads;
}

static bool scan_helper(Stmt *s, void *ctx)
{
	Helpers *hs = ctx;
	BlockReduceShape sh;
	if (s->kind != KS_BLOCK_REDUCE || !kir_block_reduce_shape(hs->k, s->block_red.pars, &sh) ||
	    !helper_bytes(s, &sh))
		return false;
	for (int i = 0; i < hs->n; i++)
		if (same_helper(&hs->h[i], s, &sh))
			return false;
	if (hs->n == hs->cap) {
		int cap = hs->cap ? 2 * hs->cap : 4;
		Helper *nh = arena_alloc(hs->a, sizeof *nh * (size_t)cap);
		if (hs->n)
			memcpy(nh, hs->h, sizeof *nh * (size_t)hs->n);
		hs->h = nh;
		hs->cap = cap;
	}
	hs->h[hs->n++] = (Helper){s->block_red.red, s->block_red.var->dtype, sh};
	hs->bytes += helper_bytes(s, &sh);
	if (!hs->first)
		hs->first = s;
	return false;
}

static bool overlap(SBuf *x, SBuf *y)
{
	return x->pos <= y->last && y->pos <= x->last;
}

/* First fit: the lowest offset clear of every placed buffer alive at the same time. */
static void place(Sm *m, int i)
{
	SBuf *b = &m->b[i];
	b->off = 0;
	for (bool moved = true; moved;) {
		moved = false;
		for (int j = 0; j < i; j++) {
			SBuf *q = &m->b[j];
			if (overlap(b, q) && b->off < q->off + q->bytes && q->off < b->off + b->bytes) {
				b->off = q->off + q->bytes;
				moved = true;
			}
		}
	}
}

/* The opt-in shared memory per block of a target (bytes). */
static int64_t smem_limit(int arch)
{
	switch (arch) {
	case 75: return 64 * 1024;
	case 80: case 87: return 163 * 1024;
	case 86: case 89: case 120: case 121: return 99 * 1024;
	case 90: case 100: case 103: return 227 * 1024;
	default: return arch >= 90 ? 227 * 1024 : arch >= 80 ? 99 * 1024 : 48 * 1024;
	}
}

static Span buf_span(Tensor *t)
{
	if (t->sched.cache_span.file)
		return t->sched.cache_span;
	if (t->sched.mem_span.file)
		return t->sched.mem_span;
	return t->sched.ca_span.file ? t->sched.ca_span : t->span;
}

/* dynamic + static above the target's opt-in limit, or static memory (the helpers' alone,
 * when the pool is dynamic) above 48 KiB: an error at the largest buffer's directive (the
 * first block reduction's when there is no buffer). */
static bool check_limit(Kernel *k, Diag *d, Sm *m, Helpers *hs)
{
	int arch = k->options->arch;
	int64_t limit = smem_limit(arch);
	long long dyn = (long long)kernel_smem_dynamic(k), stat = (long long)kernel_smem_static(k);
	if (dyn + stat <= limit && stat <= STATIC_LIMIT)
		return true;
	if (dyn + stat <= limit)
		limit = STATIC_LIMIT;
	Span at = hs->first ? hs->first->span : k->fusion->span;
	if (m->n) {
		SBuf *big = &m->b[0];
		for (int i = 1; i < m->n; i++)
			if (m->b[i].bytes > big->bytes)
				big = &m->b[i];
		at = buf_span(big->t);
	}
	bool warn = k->options->no_arch_check;
	const char *fmt = "%s needs %lld bytes of shared memory (dynamic %lld, static %lld, "
			  "required %lld), more than the %lld bytes (%lld KiB) %s on sm_%d";
	const char *what = limit == STATIC_LIMIT ? "of static shared memory a block can have"
						 : "a block can have";
	if (warn)
		diag_warning(d, at, fmt, k->fusion->name, dyn + stat, dyn, stat, dyn + stat,
			     (long long)limit, (long long)(limit / 1024), what, arch);
	else
		diag_error(d, at, fmt, k->fusion->name, dyn + stat, dyn, stat, dyn + stat,
			   (long long)limit, (long long)(limit / 1024), what, arch);
	for (int i = 0; i < m->n; i++)
		diag_note(d, buf_span(m->b[i].t), "%s: %lld bytes at offset %lld", m->b[i].t->name,
			  (long long)m->b[i].bytes, (long long)m->b[i].off);
	if (hs->first)
		diag_note(d, hs->first->span, "block reductions: %lld bytes of static shared memory "
			  "for their partials", (long long)hs->bytes);
	return warn;
}

bool pass_shared_memory(Kernel *k, Diag *d)
{
	Sm m = {0};
	Helpers hs = {.a = k->arena, .k = k};

	scan(&m, k->body, k->arena);
	ir_stmts_any(k->body, scan_helper, &hs);
	k->smem_helper_bytes = hs.bytes;
	k->smem_bytes = 0;
	for (int i = 0; i < m.n; i++) {
		place(&m, i);
		m.b[i].alloc->alloc.smem_offset = m.b[i].off;
		if (m.b[i].off + m.b[i].bytes > k->smem_bytes)
			k->smem_bytes = m.b[i].off + m.b[i].bytes;
	}
	/* static memory is the pool and the helpers together: past 48 KiB the pool goes dynamic */
	k->smem_dynamic = k->smem_bytes && k->smem_bytes + hs.bytes > STATIC_LIMIT;
	return check_limit(k, d, &m, &hs);
}
