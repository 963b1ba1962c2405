/* cuda_stmt.c: a kernel's body (kernel IR statements) as CUDA C++ text.
 *
 * cuda_emit_body prints what goes between the kernel's braces: the shared-memory pool, the
 * kernel-scope locals, then the statements, two spaces per level. Expressions are printed by
 * cuda_expr.c.
 */
#include <string.h>

#include "backend/backend.h"

typedef struct Em {
	Kernel *k;
	Buf *out;
	int depth;
	Map vec_bytes;  /* Tensor * -> int *: the largest vector access touching it (vector_bytes) */
} Em;

static void line_start(Em *em)
{
	buf_indent(em->out, em->depth);
}

static void vector_touch(Em *em, Tensor *t, int bytes)
{
	int *best = map_lookup(&em->vec_bytes, t);
	if (!best) {
		best = arena_alloc(em->k->arena, sizeof *best);
		map_insert(em->k->arena, &em->vec_bytes, t, best);
	}
	if (bytes > *best)
		*best = bytes;
}

/* Em.vec_bytes for every tensor of list s, in one walk (a buffer is aligned for the largest
 * vector access that touches it). */
static void vector_bytes(Em *em, Stmt *s)
{
	for (; s; s = s->next) {
		if (s->kind == KS_VSTORE) {
			int vec = s->copy.vec;
			vector_touch(em, s->copy.tensor, vec * dtype_size(s->copy.tensor->dtype));
			vector_touch(em, s->copy.src, vec * dtype_size(s->copy.src->dtype));
		}
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			vector_bytes(em, *lists[i]);
	}
}

static void emit_stmts(Em *em, Stmt *s);

static void emit_block(Em *em, Stmt *body)
{
	buf_puts(em->out, " {\n");
	em->depth++;
	emit_stmts(em, body);
	em->depth--;
	line_start(em);
	buf_puts(em->out, "}");
}

static void emit_for(Em *em, Stmt *s)
{
	if (s->loop.unroll || s->loop.vectorize) {
		line_start(em);
		buf_puts(em->out, "#pragma unroll\n");
	}
	line_start(em);
	buf_puts(em->out, "for (");
	buf_puts(em->out, dtype_ctype(s->loop.var->dtype));
	buf_puts(em->out, " ");
	cuda_name(em->out, s->loop.var->name);
	buf_puts(em->out, " = 0; ");
	cuda_name(em->out, s->loop.var->name);
	buf_puts(em->out, " < ");
	cuda_put_expr(em->out, s->loop.var->extent, s->loop.var->dtype, true);
	buf_puts(em->out, "; ++");
	cuda_name(em->out, s->loop.var->name);
	buf_puts(em->out, ")");
	emit_block(em, s->loop.body);
	buf_puts(em->out, "\n");
}

/* if / else if / else chains. */
static void emit_if(Em *em, Stmt *s)
{
	line_start(em);
	for (;;) {
		buf_puts(em->out, "if (");
		cuda_put_expr(em->out, s->branch.cond, DT_BOOL, true);
		buf_puts(em->out, ")");
		emit_block(em, s->branch.then);
		if (!s->branch.els)
			break;
		buf_puts(em->out, " else ");
		if (s->branch.els->kind == KS_IF && !s->branch.els->next) {
			s = s->branch.els;
			continue;
		}
		buf_puts(em->out, "{\n");
		em->depth++;
		emit_stmts(em, s->branch.els);
		em->depth--;
		line_start(em);
		buf_puts(em->out, "}");
		break;
	}
	buf_puts(em->out, "\n");
}

static int count_shared(Stmt *s)
{
	int n = 0;
	for (; s; s = s->next) {
		n += s->kind == KS_ALLOC && s->alloc.mem == MEM_SHARED;
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			n += count_shared(*lists[i]);
	}
	return n;
}

/* Several shared buffers (which may share bytes) or a dynamic one live in one pool,
 * `fus_smem`; a single static buffer is a plain array. */
static bool smem_pooled(Kernel *k)
{
	return k->smem_dynamic || count_shared(k->body) > 1;
}

/* e / 2 (an even element offset in a fragment array: its 32-bit register) */
static IrExpr *half(Em *em, IrExpr *e)
{
	Arena *a = em->k->arena;
	IrRange rg = ir_range_in(em->k);
	return ir_simplify(a, &rg, ix_div(a, &rg, e, ir_int(a, 2)));
}

static void emit_alloc(Em *em, Stmt *s)
{
	Tensor *t = s->alloc.tensor;
	int *vb = map_lookup(&em->vec_bytes, t);
	int align = vb ? *vb : 0;

	line_start(em);
	if (s->alloc.mem == MEM_SHARED && smem_pooled(em->k)) {
		buf_printf(em->out, "%s *", dtype_ctype(t->dtype));
		cuda_name(em->out, t->name);
		buf_printf(em->out, " = reinterpret_cast<%s *>(fus_smem + %lld); // ",
			   dtype_ctype(t->dtype), (long long)s->alloc.smem_offset);
		cuda_put_expr(em->out, s->alloc.size, DT_I64, true);
		buf_puts(em->out, " elements\n");
		return;
	}
	if (s->alloc.mem == MEM_SHARED)
		buf_puts(em->out, "__shared__ __align__(16) ");
	else if (s->alloc.mem != MEM_LOCAL)
		die("%s: only local and shared buffers are allocated in kernels", t->name);
	else if (align > dtype_size(t->dtype))
		buf_printf(em->out, "__align__(%d) ", align);
	IrExpr *n = s->alloc.size;
	if (t->sched.mma_frag) /* 32-bit registers, two 16-bit elements each */
		n = half(em, n);
	buf_puts(em->out, t->sched.mma_frag ? "unsigned" : dtype_ctype(t->dtype));
	buf_puts(em->out, " ");
	cuda_name(em->out, t->name);
	buf_puts(em->out, "[");
	cuda_put_expr(em->out, n, DT_I64, true);
	buf_puts(em->out, "];\n");
}

static void emit_store(Em *em, Stmt *s)
{
	if (!s->store.offset)
		die("%s: store reached the backend before indexing", s->store.tensor->name);
	line_start(em);
	cuda_name(em->out, s->store.tensor->name);
	buf_puts(em->out, "[");
	cuda_put_expr(em->out, s->store.offset, DT_I64, true);
	buf_puts(em->out, "] = ");
	DType want = s->store.tensor->dtype;
	cuda_put_expr(em->out, s->store.value, want, cuda_widening(s->store.value->dtype, want));
	buf_puts(em->out, ";\n");
}

/* *reinterpret_cast<__fus_vec<T, N> *>(&dst[o]) = *reinterpret_cast<const ...>(&src[so]);
 * (an evict_first source: = __fus_ld_ef(reinterpret_cast<const ...>(&src[so]));) */
static void emit_vstore(Em *em, Stmt *s)
{
	Tensor *d = s->copy.tensor, *src = s->copy.src;

	if (d->dtype != src->dtype)
		die("vector copy %s <- %s changes dtype", d->name, src->name);
	line_start(em);
	buf_printf(em->out, "*reinterpret_cast<__fus_vec<%s, %d> *>(&", dtype_ctype(d->dtype),
		   s->copy.vec);
	cuda_name(em->out, d->name);
	buf_puts(em->out, "[");
	cuda_put_expr(em->out, s->copy.offset, DT_I64, true);
	bool ef = src->sched.evict_first;
	buf_printf(em->out, "]) = %sreinterpret_cast<const __fus_vec<%s, %d> *>(&",
		   ef ? "__fus_ld_ef(" : "*", dtype_ctype(d->dtype), s->copy.vec);
	cuda_name(em->out, src->name);
	buf_puts(em->out, "[");
	cuda_put_expr(em->out, s->copy.src_offset, DT_I64, true);
	buf_puts(em->out, ef ? "]));\n" : "]);\n");
}

static bool is_local(Kernel *k, Var *v)
{
	for (int i = 0; i < k->locals.len; i++)
		if (VEC_AT(k->locals, Var, i) == v)
			return true;
	return false;
}

/* A let of a kernel-scope local assigns it; any other let declares its variable. */
static void emit_let(Em *em, Stmt *s)
{
	line_start(em);
	if (!is_local(em->k, s->let.var)) {
		buf_puts(em->out, dtype_ctype(s->let.var->dtype));
		buf_puts(em->out, " ");
	}
	cuda_name(em->out, s->let.var->name);
	buf_puts(em->out, " = ");
	DType want = s->let.var->dtype;
	cuda_put_expr(em->out, s->let.value, want, cuda_widening(s->let.value->dtype, want));
	buf_puts(em->out, ";\n");
}

/* acc = __fus_reduce_warps<__fus_red_sum, 128, float>(acc); (bool travels as int: shuffles
 * have no bool overload) */
/* __fus_welford_warps<128, float>(s1_n, s1_mean, s1_m2); */
static void emit_block_welford(Em *em, Stmt *s, BlockReduceShape *sh)
{
	const char *ct = dtype_ctype(s->block_red.var->dtype);
	line_start(em);
	switch (sh->kind) {
	case BR_WARP:
		buf_printf(em->out, "__fus_welford_warp<%lld, %lld, %s>(", (long long)sh->count,
			   (long long)sh->nthreads, ct);
		break;
	case BR_WARPS:
		buf_printf(em->out, "__fus_welford_warps<%lld, %s>(", (long long)sh->count, ct);
		break;
	case BR_SMEM:
		buf_printf(em->out, "__fus_welford_smem<%lld, %lld, %lld, %s>(", (long long)sh->count,
			   (long long)sh->stride, (long long)sh->nthreads, ct);
		break;
	}
	cuda_name(em->out, s->block_red.var->name);
	buf_puts(em->out, ", ");
	cuda_name(em->out, s->block_red.wmean->name);
	buf_puts(em->out, ", ");
	cuda_name(em->out, s->block_red.wm2->name);
	buf_puts(em->out, ");\n");
}

static void emit_block_reduce(Em *em, Stmt *s)
{
	BlockReduceShape sh;
	if (!kir_block_reduce_shape(em->k, s->block_red.pars, &sh))
		die("block reduction without a layout reached the backend");
	if (s->block_red.red == RED_WELFORD) {
		emit_block_welford(em, s, &sh);
		return;
	}
	/* an online pair travels as one __fus_online<T> value:
	 * __fus_online_set(m_acc, m_sum, __fus_reduce_warps<__fus_red_online, 128,
	 *                  __fus_online<float>>(__fus_online<float>{m_acc, m_sum})); */
	bool online = s->block_red.red == RED_ONLINE;
	const char *op = red_name(s->block_red.red);
	bool is_bool = s->block_red.var->dtype == DT_BOOL;
	const char *ct = is_bool ? "int" : dtype_ctype(s->block_red.var->dtype);
	char pair[64];
	if (online) {
		snprintf(pair, sizeof pair, "__fus_online<%s>", ct);
		ct = pair;
	}
	line_start(em);
	if (online) {
		buf_puts(em->out, "__fus_online_set(");
		cuda_name(em->out, s->block_red.var->name);
		buf_puts(em->out, ", ");
		cuda_name(em->out, s->block_red.osum->name);
		buf_puts(em->out, ", ");
	} else {
		cuda_name(em->out, s->block_red.var->name);
		buf_printf(em->out, " = %s", is_bool ? "(bool)" : "");
	}
	switch (sh.kind) {
	case BR_WARP:
		buf_printf(em->out, "__fus_reduce_warp<__fus_red_%s, %lld, %lld, %s>(", op,
			   (long long)sh.count, (long long)sh.nthreads, ct);
		break;
	case BR_WARPS:
		buf_printf(em->out, "__fus_reduce_warps<__fus_red_%s, %lld, %s>(", op,
			   (long long)sh.count, ct);
		break;
	case BR_SMEM:
		buf_printf(em->out, "__fus_reduce_smem<__fus_red_%s, %lld, %lld, %lld, %s>(", op,
			   (long long)sh.count, (long long)sh.stride, (long long)sh.nthreads, ct);
		break;
	}
	if (online) {
		buf_printf(em->out, "%s{", ct);
		cuda_name(em->out, s->block_red.var->name);
		buf_puts(em->out, ", ");
		cuda_name(em->out, s->block_red.osum->name);
		buf_puts(em->out, "}));\n");
		return;
	}
	buf_puts(em->out, is_bool ? "(int)" : "");
	cuda_name(em->out, s->block_red.var->name);
	buf_puts(em->out, ");\n");
}

/* if (__fus_grid_reduce<__fus_red_sum>(acc, fus_ws_s, fus_sem_s, o, r, R)) { store } */
static void emit_grid_reduce(Em *em, Stmt *s)
{
	const char *op = red_name(s->grid_red.red);
	line_start(em);
	buf_printf(em->out, "if (__fus_grid_reduce<__fus_red_%s>(", op);
	cuda_name(em->out, s->grid_red.var->name);
	buf_printf(em->out, ", %s, %s, ", s->grid_red.ws->name, s->grid_red.sem->name);
	cuda_put_expr(em->out, s->grid_red.offset, DT_I64, true);
	buf_puts(em->out, ", ");
	cuda_put_expr(em->out, s->grid_red.part, DT_I64, true);
	buf_puts(em->out, ", ");
	cuda_put_expr(em->out, s->grid_red.nparts, DT_I64, true);
	buf_puts(em->out, "))");
	emit_block(em, s->grid_red.body);
	buf_puts(em->out, "\n");
}

static void emit_comment(Em *em, Stmt *s)
{
	const char *p = s->note.text ? s->note.text : "";

	/* one // line per line of text */
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		line_start(em);
		buf_puts(em->out, "// ");
		cuda_put_n(em->out, p, n);
		buf_puts(em->out, "\n");
		p += n + (nl != NULL);
	}
}

/* The 32-bit shared address of &t[off]. */
static void put_smem_addr(Em *em, Tensor *t, IrExpr *off)
{
	buf_puts(em->out, "(unsigned)__cvta_generic_to_shared(&");
	cuda_name(em->out, t->name);
	buf_puts(em->out, "[");
	cuda_put_expr(em->out, off, DT_I64, true);
	buf_puts(em->out, "])");
}

/* asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" :: "r"(smem), "l"(gmem),
 * "r"(src_size) : "memory"); the src-size operand zero-fills lanes not read from global. */
static void emit_cp_async(Em *em, Stmt *s)
{
	Tensor *t = s->copy.tensor;
	int esize = dtype_size(t->dtype), bytes = s->copy.vec * esize;
	bool src_size = s->copy.cond || s->copy.size;

	line_start(em);
	buf_printf(em->out, "asm volatile(\"cp.async.%s.shared.global [%%0], [%%1], %d%s;\\n\" :: \"r\"(",
		   t->sched.cp_async_cg ? "cg" : "ca", bytes, src_size ? ", %2" : "");
	put_smem_addr(em, t, s->copy.offset);
	buf_puts(em->out, "), \"l\"(&");
	cuda_name(em->out, s->copy.src->name);
	buf_puts(em->out, "[");
	cuda_put_expr(em->out, s->copy.src_offset, DT_I64, true);
	buf_puts(em->out, "])");
	if (src_size) {
		buf_puts(em->out, ", \"r\"(");
		if (s->copy.cond) {
			cuda_put_operand(em->out, s->copy.cond, DT_BOOL, true, PREC_OR);
			buf_puts(em->out, " ? ");
		}
		if (s->copy.size) {
			buf_puts(em->out, "(unsigned)(");
			cuda_put_operand(em->out, s->copy.size, DT_I64, true, PREC_MUL);
			buf_printf(em->out, " * %d)", esize);
		} else {
			buf_printf(em->out, "%du", bytes);
		}
		if (s->copy.cond)
			buf_puts(em->out, " : 0u");
		buf_puts(em->out, ")");
	}
	buf_puts(em->out, " : \"memory\");\n");
}

static void emit_cp_wait(Em *em, Stmt *s)
{
	line_start(em);
	if (s->wait.n < 0)
		buf_puts(em->out, "asm volatile(\"cp.async.wait_all;\\n\" ::: \"memory\");\n");
	else
		buf_printf(em->out, "asm volatile(\"cp.async.wait_group %d;\\n\" ::: \"memory\");\n",
			   s->wait.n);
}

/* Two 16-bit operand elements (the even one in the low half) as one 32-bit register: the
 * register itself when they are fragment registers (TensorSched.mma_frag, declared `unsigned`,
 * two elements each), else the two loads packed. */
static void put_pair(Em *em, IrExpr *lo, IrExpr *hi, DType ab)
{
	if (lo->tensor->sched.mma_frag) {
		cuda_name(em->out, lo->tensor->name);
		buf_puts(em->out, "[");
		cuda_put_expr(em->out, half(em, lo->args[0]), DT_I64, true);
		buf_puts(em->out, "]");
		return;
	}
	buf_puts(em->out, "(unsigned)(");
	cuda_put_expr(em->out, lo, ab, false);
	buf_puts(em->out, ").bits | (unsigned)(");
	cuda_put_expr(em->out, hi, ab, false);
	buf_puts(em->out, ").bits << 16");
}

/* `%from, %from+1, ...`: n asm operands */
static void put_regs(Buf *out, int from, int n)
{
	for (int i = 0; i < n; i++) {
		buf_puts(out, i ? ", %" : "%");
		cuda_put_int(out, from + i);
	}
}

/* KS_MMA_LOAD: the lane's fragment registers of one operand, by ldmatrix
 *   asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
 *                : "=r"(As_frag[o]), ... : "r"(smem address) : "memory");
 * (B: .x2; .trans for the A[k, i] and B[k, j] tiles) or by per-lane loads packed in pairs:
 * As_frag[o] = (unsigned)... */
static void emit_mma_load(Em *em, Stmt *s)
{
	Arena *a = em->k->arena;
	int n = s->mma.tiles * (s->mma.op == 'a' ? s->mma.instr->na : s->mma.instr->nb) / 2;
	IrExpr **reg = arena_alloc(a, sizeof(IrExpr *) * (size_t)(2 * n));
	for (int r = 0; r < 2 * n; r++)
		reg[r] = ir_load(a, s->mma.tensor, ir_simplify(a, NULL, ix_add(a, s->mma.offset, ir_int(a, r))));
	if (!s->mma.ldm) {
		for (int r = 0; r < n; r++) {
			line_start(em);
			put_pair(em, reg[2 * r], NULL, DT_F16);
			buf_puts(em->out, " = ");
			put_pair(em, s->mma.idx[2 * r], s->mma.idx[2 * r + 1], s->mma.idx[0]->dtype);
			buf_puts(em->out, ";\n");
		}
		return;
	}
	line_start(em);
	buf_printf(em->out, "asm volatile(\"ldmatrix.sync.aligned.m8n8.x%d%s.shared.b16 {", n,
		   s->mma.ldt ? ".trans" : "");
	put_regs(em->out, 0, n);
	buf_puts(em->out, "}, [%");
	cuda_put_int(em->out, n);
	buf_puts(em->out, "];\\n\" : ");
	for (int r = 0; r < n; r++) {
		buf_puts(em->out, r ? ", \"=r\"(" : "\"=r\"(");
		put_pair(em, reg[2 * r], NULL, DT_F16);
		buf_puts(em->out, ")");
	}
	buf_puts(em->out, " : \"r\"(");
	put_smem_addr(em, s->mma.idx[0]->tensor, s->mma.idx[0]->args[0]);
	buf_puts(em->out, ") : \"memory\");\n");
}

/* KS_MMA: the instruction on the accumulator registers in place, its operands the lane's
 * fragment registers (or its loads packed in pairs):
 *   asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, ...}, ..."
 *                : "+f"(Cl[c0]), ... : "r"(As_frag[o]), ...); */
static void emit_mma(Em *em, Stmt *s)
{
	const MmaInstr *in = s->mma.instr;
	Arena *a = em->k->arena;
	int first[2], count[2] = {in->na / 2, in->nb / 2}, n_;
	DType ab = s->mma.idx[in->nc]->dtype;

	if (s->mma.ldm)
		die("mma with ldmatrix operands: passes/mma.c moves them into fragment loads");
	first[0] = mma_slot(s, 'a', &n_);
	first[1] = mma_slot(s, 'b', &n_);
	line_start(em);
	buf_printf(em->out, "asm volatile(\"%s {", mma_ptx(in, ab));
	put_regs(em->out, 0, in->nc);
	for (int op = 0, n = in->nc; op < 2; n += count[op++]) {
		buf_puts(em->out, "}, {");
		put_regs(em->out, n, count[op]);
	}
	buf_puts(em->out, "}, {");
	put_regs(em->out, 0, in->nc);
	buf_puts(em->out, "};\\n\"\n");
	line_start(em);
	buf_puts(em->out, "             : ");
	for (int i = 0; i < in->nc; i++) {
		buf_puts(em->out, i ? ", \"+f\"(" : "\"+f\"(");
		cuda_put_expr(em->out, ir_load(a, s->mma.tensor, s->mma.idx[i]), DT_F32, false);
		buf_puts(em->out, ")");
	}
	buf_puts(em->out, "\n");
	line_start(em);
	buf_puts(em->out, "             : ");
	for (int op = 0; op < 2; op++)
		for (int r = 0; r < count[op]; r++) {
			buf_puts(em->out, op || r ? ", \"r\"(" : "\"r\"(");
			put_pair(em, s->mma.idx[first[op] + 2 * r], s->mma.idx[first[op] + 2 * r + 1], ab);
			buf_puts(em->out, ")");
		}
	buf_puts(em->out, ");\n");
}

static void emit_stmts(Em *em, Stmt *s)
{
	for (; s; s = s->next) {
		switch (s->kind) {
		case KS_FOR: emit_for(em, s); break;
		case KS_IF: emit_if(em, s); break;
		case KS_ALLOC: emit_alloc(em, s); break;
		case KS_STORE: emit_store(em, s); break;
		case KS_VSTORE: emit_vstore(em, s); break;
		case KS_LET: emit_let(em, s); break;
		case KS_COMMENT:
		case KS_NEST: emit_comment(em, s); break;
		case KS_SYNC: line_start(em); buf_puts(em->out, "__syncthreads();\n"); break;
		case KS_BLOCK_REDUCE: emit_block_reduce(em, s); break;
		case KS_GRID_REDUCE: emit_grid_reduce(em, s); break;
		case KS_CP_ASYNC: emit_cp_async(em, s); break;
		case KS_CP_COMMIT:
			line_start(em);
			buf_puts(em->out, "asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\");\n");
			break;
		case KS_CP_WAIT: emit_cp_wait(em, s); break;
		case KS_MMA: emit_mma(em, s); break;
		case KS_MMA_LOAD: emit_mma_load(em, s); break;
		default: die("statement kind %d cannot reach the CUDA backend", (int)s->kind);
		}
	}
}

void cuda_emit_body(Kernel *k, Buf *out)
{
	Em em = {k, out, 1, {0}};

	if (k->smem_dynamic)
		buf_printf(out, "  extern __shared__ __align__(16) unsigned char fus_smem[]; // %lld "
				"bytes, dynamic\n", (long long)k->smem_bytes);
	else if (smem_pooled(k))
		buf_printf(out, "  __shared__ __align__(16) unsigned char fus_smem[%lld];\n",
			   (long long)k->smem_bytes);
	for (int i = 0; i < k->locals.len; i++) {
		Var *v = VEC_AT(k->locals, Var, i);
		buf_printf(out, "  %s ", dtype_ctype(v->dtype));
		cuda_name(out, v->name);
		buf_puts(out, ";\n");
	}
	vector_bytes(&em, k->body);
	emit_stmts(&em, k->body);
}
