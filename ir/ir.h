/* ir.h: the IR layer's umbrella header: dtypes, expressions, the fusion IR (tensors with
 * scheduled loop domains), the kernel IR (loops, ifs, stores, allocations), printers and the
 * verifier.
 *
 * One expression type (IrExpr) serves both IRs. In the fusion IR a tensor's definition reads
 * other tensors through EX_ACCESS nodes whose subscripts are EX_AXIS (a root axis of the tensor
 * being defined) or integer constants. The loop-nest pass rewrites subscripts into functions of
 * loop variables (EX_VAR) and parallel indices (EX_PAR); the indexing pass turns EX_ACCESS into
 * EX_LOAD with one flattened offset. Every node lives in the compilation's arena.
 */
#ifndef FUSC_IR_H
#define FUSC_IR_H

#include "../support/support.h"

/* ---- tables (X-macros) --------------------------------------------------------------- */

/* X(enum suffix, .fus name, CUDA storage type, size in bytes, is_float) */
#define DTYPES(X)                                      \
	X(F16, "f16", "__fus_half", 2, true)           \
	X(BF16, "bf16", "__fus_bfloat", 2, true)       \
	X(F32, "f32", "float", 4, true)                \
	X(F64, "f64", "double", 8, true)               \
	X(I32, "i32", "int", 4, false)                 \
	X(I64, "i64", "long long", 8, false)           \
	X(BOOL, "bool", "bool", 1, false)

typedef enum DType {
#define X(e, n, c, s, f) DT_##e,
	DTYPES(X)
#undef X
	DT_COUNT
} DType;

const char *dtype_name(DType t);     /* "f32" */
const char *dtype_ctype(DType t);    /* "float" */
int dtype_size(DType t);
/* Inline: the passes and the emitter ask it for nearly every expression node. */
static inline bool dtype_is_float(DType t)
{
	static const bool is_float[] = {
#define X(e, n, c, s, f) f,
		DTYPES(X)
#undef X
	};
	if ((unsigned)t >= DT_COUNT)
		die("bad dtype %d", (int)t);
	return is_float[t];
}
bool dtype_from_name(const char *s, DType *out);
/* The dtype arithmetic is done in: f16/bf16 compute in f32 (docs/language.md). */
DType dtype_compute(DType t);
/* Promotion of a binary operation's operands (f64 > f32 > bf16/f16 > i64 > i32 > bool;
 * f16 with bf16 gives f32). */
DType dtype_promote(DType a, DType b);

/* Operators and built-ins. X(enum suffix, name in .fus / dumps, arity, kind)
 * kind: 'a' arithmetic, 'c' comparison (result bool), 'l' logical (bool operands),
 *       'f' float function (computed in f32/f64), 'm' min/max-like (any numeric).
 * EXP_LOWP is exp where only f16/bf16 results see it (frontend/lowp_exp.c), computed with
 * ex2.approx; it has no .fus name ('.' is not in an identifier). */
#define IR_OPS(X)                  \
	X(ADD, "+", 2, 'a')        \
	X(SUB, "-", 2, 'a')        \
	X(MUL, "*", 2, 'a')        \
	X(DIV, "/", 2, 'a')        \
	X(MOD, "%", 2, 'a')        \
	X(LT, "<", 2, 'c')         \
	X(LE, "<=", 2, 'c')        \
	X(GT, ">", 2, 'c')         \
	X(GE, ">=", 2, 'c')        \
	X(EQ, "==", 2, 'c')        \
	X(NE, "!=", 2, 'c')        \
	X(AND, "&&", 2, 'l')       \
	X(OR, "||", 2, 'l')        \
	X(NEG, "neg", 1, 'a')      \
	X(NOT, "!", 1, 'l')        \
	X(EXP, "exp", 1, 'f')      \
	X(EXP_LOWP, "exp.lowp", 1, 'f') \
	X(LOG, "log", 1, 'f')      \
	X(SQRT, "sqrt", 1, 'f')    \
	X(RSQRT, "rsqrt", 1, 'f')  \
	X(TANH, "tanh", 1, 'f')    \
	X(SIGMOID, "sigmoid", 1, 'f') \
	X(ERF, "erf", 1, 'f')      \
	X(ABS, "abs", 1, 'm')      \
	X(SIN, "sin", 1, 'f')      \
	X(COS, "cos", 1, 'f')      \
	X(FLOOR, "floor", 1, 'f')  \
	X(CEIL, "ceil", 1, 'f')    \
	X(POW, "pow", 2, 'f')      \
	X(MAX, "max", 2, 'm')      \
	X(MIN, "min", 2, 'm')      \
	X(CEILDIV, "ceildiv", 2, 'a') /* index arithmetic only: ceil(a / b), b > 0 */ \
	X(XOR, "^", 2, 'a')       /* index arithmetic only: a swizzled shared layout (indexing.c) */

typedef enum IrOp {
#define X(e, n, a, k) OP_##e,
	IR_OPS(X)
#undef X
	OP_COUNT
} IrOp;

const char *op_name(IrOp op);
int op_arity(IrOp op);
/* Inline, as dtype_is_float. */
static inline char op_kind(IrOp op)
{
	static const char kinds[] = {
#define X(e, n, a, k) k,
		IR_OPS(X)
#undef X
	};
	if ((unsigned)op >= OP_COUNT)
		die("bad op %d", (int)op);
	return kinds[op];
}
/* Looks up a built-in function by its .fus name (exp, max, ...); false if none. */
bool op_builtin(const char *name, int nargs, IrOp *out);

/* Parallel types. X(enum suffix, text) */
#define PAR_TYPES(X)                  \
	X(SERIAL, "serial")           \
	X(BIDX, "blockIdx.x")         \
	X(BIDY, "blockIdx.y")         \
	X(BIDZ, "blockIdx.z")         \
	X(TIDX, "threadIdx.x")        \
	X(TIDY, "threadIdx.y")        \
	X(TIDZ, "threadIdx.z")

typedef enum ParType {
#define X(e, n) PT_##e,
	PAR_TYPES(X)
#undef X
	PT_COUNT
} ParType;
const char *par_name(ParType p);
bool par_from_name(const char *s, ParType *out);
static inline bool par_is_block(ParType p) { return p >= PT_BIDX && p <= PT_BIDZ; }
static inline bool par_is_thread(ParType p) { return p >= PT_TIDX && p <= PT_TIDZ; }

typedef enum MemType { MEM_GLOBAL, MEM_SHARED, MEM_LOCAL } MemType;
const char *mem_name(MemType m);

/* RED_WELFORD exists only in the kernel IR: a KS_BLOCK_REDUCE of Welford triples (count, mean,
 * M2) made by `s2.welford()` (docs/reductions.md, "Welford's single pass"); RED_ONLINE too: a
 * KS_BLOCK_REDUCE of (max, sum of exp(x - max)) pairs made by `s.online()` ("Online max and
 * sum"). */
typedef enum ReduceOp { RED_NONE, RED_SUM, RED_MAX, RED_MIN, RED_WELFORD, RED_ONLINE } ReduceOp;
/* "sum", "max", "min", "welford", "online" (ir/expr.c): IR text and the CUDA helpers' names. */
const char *red_name(ReduceOp r);
/* The one accumulation dtype rule (docs/reductions.md, "Accumulation dtype"): a reduction
 * `red` of operands of dtype `body` whose result is stored as `out` accumulates in the
 * promotion of the two, computed (floats in at least f32); a sum of bools counts in i64. Sema
 * types EX_REDUCE with it, the reference accumulates into it, loop_nest declares the
 * accumulator (and so the simulator and the backend) with it. */
DType dtype_accum(ReduceOp red, DType out, DType body);

/* ---- expressions --------------------------------------------------------------------- */

typedef struct IrExpr IrExpr;
typedef struct Tensor Tensor;
typedef struct Axis Axis;
typedef struct Var Var;
typedef struct Fusion Fusion;
typedef struct IrRange IrRange;

typedef enum ExprKind {
	EX_INT,     /* ival (dtype I64 or I32 or BOOL) */
	EX_FLOAT,   /* fval */
	EX_PARAM,   /* param: a scalar parameter of the fusion */
	EX_SIZE,    /* size: a size symbol (i64) */
	EX_AXIS,    /* axis: a root axis of the tensor being defined (fusion IR only) */
	EX_VAR,     /* var: a loop variable or a scalar temporary (kernel IR) */
	EX_PAR,     /* par: threadIdx.x, blockIdx.y, ... */
	EX_ACCESS,  /* tensor[args[0..nargs)]: logical subscripts, one per dim */
	EX_LOAD,    /* tensor[args[0]]: flattened element offset (after the indexing pass) */
	EX_OP,      /* op(args[0..arity)) */
	EX_SELECT,  /* args[0] ? args[1] : args[2] */
	EX_CAST,    /* (dtype) args[0] */
	EX_REDUCE,  /* red over red_axes of args[0] (fusion IR only) */
} ExprKind;

/* The member of the union is the one the kind names (ExprKind); reading another reads the
 * same bytes as something else, so every reader tests the kind first. The union keeps a node
 * at 48 bytes: the passes make tens of thousands (docs/design.md, "Compile time"). */
struct IrExpr {
	ExprKind kind;
	DType dtype;  /* result dtype */
	Span span;    /* the .fus text this came from, when any */
	int nargs;
	IrExpr **args;
	union {
		int64_t ival;
		double fval;
		IrOp op;
		struct Param *param;
		struct SizeSym *size;
		Axis *axis;
		Var *var;
		ParType par;
		Tensor *tensor;
		Axis **red_axes;
	};
	ReduceOp red; /* EX_REDUCE (RED_NONE otherwise) */
	int nred;     /* EX_REDUCE: red_axes[0..nred) (0 otherwise) */
};

/* C precedence levels (higher binds tighter), shared by the IR printer and the backend, and
 * the level of an operator as C prints it (calls such as exp(x), max(a, b): PREC_PRIMARY). */
enum {
	PREC_SELECT = 3,
	PREC_OR = 4,
	PREC_AND = 5,
	PREC_XOR = 7,
	PREC_EQ = 9,
	PREC_REL = 10,
	PREC_ADD = 12,
	PREC_MUL = 13,
	PREC_UNARY = 14,
	PREC_PRIMARY = 16,
};
int ir_op_prec(IrOp op);

/* Constructors (ir/expr.c). Index arithmetic is i64. The ix_* helpers fold constants and the
 * obvious identities (x*1, x+0, (a*F+b)/F with 0<=b<F, ...) so lowered code stays readable. */
IrExpr *ir_int(Arena *a, int64_t v);
IrExpr *ir_float(Arena *a, DType t, double v);
IrExpr *ir_bool(Arena *a, bool v);
IrExpr *ir_var(Arena *a, Var *v);
IrExpr *ir_par(Arena *a, ParType p);
IrExpr *ir_size(Arena *a, struct SizeSym *s);
IrExpr *ir_axis(Arena *a, Axis *ax);
IrExpr *ir_op(Arena *a, IrOp op, DType t, IrExpr *l, IrExpr *r /* NULL for unary */);
IrExpr *ir_select(Arena *a, IrExpr *c, IrExpr *t, IrExpr *f);
IrExpr *ir_cast(Arena *a, DType t, IrExpr *e);
IrExpr *ir_access(Arena *a, Tensor *t, IrExpr **idx, int n);
IrExpr *ir_load(Arena *a, Tensor *t, IrExpr *offset);
IrExpr *ix_add(Arena *a, IrExpr *l, IrExpr *r);
IrExpr *ix_sub(Arena *a, IrExpr *l, IrExpr *r);
IrExpr *ix_mul(Arena *a, IrExpr *l, IrExpr *r);
/* The division identities need ranges: they fold with the facts of rg (NULL: none). */
IrExpr *ix_div(Arena *a, const IrRange *rg, IrExpr *l, IrExpr *r);
IrExpr *ix_mod(Arena *a, const IrRange *rg, IrExpr *l, IrExpr *r);
IrExpr *ix_ceildiv(Arena *a, const IrRange *rg, IrExpr *l, IrExpr *r);
/* l ^ r of non-negative values (swizzled shared layouts): folded on constants, l ^ 0 is l */
IrExpr *ix_xor(Arena *a, IrExpr *l, IrExpr *r);
/* l / f (f > 0) as ix_div, and also (q * c + r) / f = q / (f / c) for c dividing f and
 * 0 <= r < c (a padded row's `(threadIdx.x * 8 + v) / 128`: threadIdx.x / 16) */
IrExpr *ix_div_rows(Arena *a, const IrRange *rg, IrExpr *l, int64_t f);
/* e (an i64 +, -, *, /, %, ceildiv, ^) built again by its ix_ helper from its operands: e itself,
 * not a copy, when the helper would build the same node (ir_simplify of a simplified
 * expression allocates nothing). */
IrExpr *ix_rebuild(Arena *a, const IrRange *rg, IrExpr *e);
IrExpr *ix_lt(Arena *a, IrExpr *l, IrExpr *r);
IrExpr *ix_and(Arena *a, IrExpr *l, IrExpr *r); /* NULL means true on either side */
/* e is an integer literal (its value in *v when v is given); inline: the passes ask it tens of
 * thousands of times a compilation */
static inline bool ir_is_const(IrExpr *e, int64_t *v)
{
	if (!e || e->kind != EX_INT)
		return false;
	if (v)
		*v = e->ival;
	return true;
}
bool ir_equal(IrExpr *a, IrExpr *b); /* structural equality */
IrExpr *ir_copy(Arena *a, IrExpr *e); /* deep copy */
/* e with fn applied bottom-up to every node (fn returns the node or a replacement). Copy on
 * write: unchanged subtrees are shared with e, so fn must not change the node it is given. */
typedef IrExpr *(*IrRewrite)(Arena *a, IrExpr *e, void *ctx);
IrExpr *ir_rewrite(Arena *a, IrExpr *e, IrRewrite fn, void *ctx);
/* The facts ranges are taken from (ir/range.c), always passed explicitly: the kernel whose
 * launch dims bound EX_PAR and whose PC_MULTIPLE preconditions the simplifier may use (NULL:
 * threadIdx.* in [0, 1023], blockIdx.* in [0, unknown)), and the facts of the enclosing guards:
 * inside `if (threadIdx.x < 32 && t * 3 + v < 128)` threadIdx.x is at most 31 and t * 3 + v at
 * most 127. A NULL `const IrRange *` means neither (the scheduler and the backend pass NULL). */
#define IR_GUARD_FACTS 16
struct IrRange {
	const struct Kernel *kernel;
	struct { IrExpr *e; int64_t hi; } fact[IR_GUARD_FACTS];
	int n;
};
/* The facts of kernel k's launch (no guards). */
IrRange ir_range_in(const struct Kernel *k);
/* The multiple the launcher of rg's kernel requires of size z (its PC_MULTIPLE
 * preconditions), 1 if none: the kernel runs only when it holds (kernel_pick). */
int64_t ir_size_multiple(const IrRange *rg, struct SizeSym *z);
/* Appends the addends of an integer sum of dtype t to v (at most 16; false past that). */
bool ir_addends(IrExpr *e, DType t, IrExpr **v, int *n);
/* Adds the facts of guard cond to rg (for the statements under `if (cond)`): the conjuncts
 * `e < c`, `e <= c` and `e == c`, c a constant, narrow ir_range of every expression equal to
 * e. A pass walking into a guarded list copies its IrRange and guards the copy. */
void ir_range_guard(IrRange *rg, IrExpr *cond);
/* Simplifies an expression with the range facts of rg. */
IrExpr *ir_simplify(Arena *a, const IrRange *rg, IrExpr *e);
/* Bounds of an integer expression when they are known constants: var ranges come from
 * Var.extent, par ranges from rg's kernel's launch dims if set (else unknown). */
bool ir_range(const IrRange *rg, IrExpr *e, int64_t *lo, int64_t *hi);
/* e as c * (a product of distinct size symbols), integer casts looked through: *c times its
 * constant factors (non-negative), *of ORed with the symbols' indices (below 64), *any one of
 * them (untouched when none); false when e is anything else. */
bool ir_size_product(IrExpr *e, int64_t *c, uint64_t *of, struct SizeSym **any);
/* e >= 0 provably (sizes, loop variables and parallel indices are non-negative). */
bool ir_nonneg(const IrRange *rg, IrExpr *e);

/* ---- fusion IR ----------------------------------------------------------------------- */

/* A bound on a product of size symbols, the row length M * N of a collapsed column
 * (docs/auto_schedule.md, "Collapsed axes"): what SizeSym.bound and .above say of one
 * symbol, said of the product. Each symbol of the product points to it. */
typedef struct SizeProd {
	uint64_t of;    /* the symbols: bit SizeSym.index (indices below 64) */
	int64_t bound;  /* > 0: the product is at most this (a PC_AT_MOST on the product) */
	int64_t above;  /* > 0: tried only after a size variant for products <= above */
} SizeProd;

typedef struct SizeSym {
	const char *name;
	int index;     /* position among the fusion's size symbols (launcher argument order) */
	Span span;     /* first appearance */
	/* > 0 in a size variant (Fusion.variants): this copy's kernels run only for values
	 * <= bound (a PC_AT_MOST precondition), and ir_range uses it; 0: unbounded */
	int64_t bound;
	/* > 0: the launcher tries this copy only after a size variant for values <= above (a
	 * scheduling hint, no precondition: long rows split over blocks, scheduler/segment.c) */
	int64_t above;
	SizeProd *prod; /* a bound on a product this symbol is a factor of, or NULL */
} SizeSym;

typedef struct Param {
	const char *name;
	DType dtype;
	int index;     /* position in the signature */
	Span span;
} Param;

/* An axis of a tensor's loop domain. Root axes are the indices of the tensor's definition (left
 * side first, then reduction indices); split and merge make new axes from old ones. A tensor's
 * loop domain is the ordered list of its current leaf axes. */
typedef enum AxisKind {
	AX_ROOT,        /* root_index: position among the tensor's root axes */
	AX_SPLIT_OUTER, /* from[0] split by factor: extent ceil(n / factor) */
	AX_SPLIT_INNER, /* from[0] split by factor: extent factor */
	AX_MERGE,       /* from[0] (outer) merged with from[1] (inner) */
} AxisKind;

struct Axis {
	AxisKind kind;
	const char *name;
	Span span;          /* where it was named: the statement index or the directive */
	Tensor *owner;
	IrExpr *extent;     /* i64 */
	Axis *from[2];      /* parents (see AxisKind) */
	Axis *to[2];        /* children once transformed: split [outer, inner]; merge [merged] */
	int64_t factor;     /* split factor */
	int root_index;
	bool reduction;     /* a reduction axis (root) or derived only from reduction axes */
	ParType par;        /* binding; PT_SERIAL if none */
	Span par_span;      /* the bind directive */
	bool unroll, vectorize;
	Span unroll_span, vectorize_span;
	/* After compute_at: this axis is `ca_alias`, a loop of the tensor computed at. */
	Axis *ca_alias;
};

typedef enum TensorKind {
	TK_INPUT,        /* a tensor parameter */
	TK_OUTPUT,       /* an output (0-d allowed) */
	TK_INTERMEDIATE, /* defined by a statement */
	TK_SCALAR,       /* a scalar temporary `t = EXPR;` (0-d, always inlined) */
} TensorKind;

/* A tensor's schedule state: where and how it is computed and stored. tensor_sched_new gives
 * the state of a tensor no directive has touched; every field other than mem starts zero. */
typedef struct TensorSched {
	MemType mem;
	Span mem_span;
	bool inlined;       /* recomputed inside readers (default for pointwise intermediates) */
	Span inline_span;
	Tensor *ca_tensor;  /* compute_at target, or NULL */
	int ca_pos;         /* ca_tensor's domain[0..ca_pos] are shared loops (-1: none, the top
			     * of its nest) */
	Span ca_span;
	/* Caches (issue 6). A cache is a TK_INTERMEDIATE whose def is a plain copy of
	 * `cache_of` (cache_after: c[...] = t[...], readers of t read c; cache_before: t's
	 * definition computes into c, then t[...] = c[...]). */
	Tensor *cache_of;
	bool cache_before;  /* c was made by t.cache_before(M) */
	Span cache_span;    /* the cache_after / cache_before directive */
	/* `x.evict_first()` on an input read once: its loads bypass L1 and enter L2 with the
	 * evict-first policy (backend/preamble.cuh, __fus_ld_ef) */
	bool evict_first;
	Span evict_first_span;
	bool cp_async;      /* the copy into this tensor is cp.async */
	bool cp_async_cg;   /* .cg (16 bytes, bypasses L1) instead of .ca */
	Span cp_async_span;
	int stages;         /* circular buffer slots (0: not buffered; double_buffer() = 2) */
	int prefetch;       /* prefetch distance (default stages - 1) */
	Span stages_span;
	int pad;            /* pad(n): a shared buffer's innermost buffer axis is n elements longer
			     * in its layout (passes/indexing.c; docs/caching.md, "pad") */
	int64_t pad_every;  /* pad(n, e): n unused elements after every e elements of the layout
			     * instead (0: after each run of the innermost axis) */
	Span pad_span;
	int swizzle;        /* swizzle(S): S = 32, 64 or 128 bytes; 0 none. A shared buffer whose
			     * 16-byte chunks are XORed with the row (passes/indexing.c,
			     * index_swizzle; docs/caching.md, "swizzle") */
	int64_t swizzle_row; /* swizzle(S, e): rows of e elements (0: the innermost buffer axis) */
	Span swizzle_span;
	/* `s2.welford()` (scheduler/welford.c): s2 (welford_sum set) is the sum of squared
	 * deviations from the mean of the sum s1 = welford_sum, and s1->welford_var = s2. s1's
	 * loop nest computes both in one pass (count, mean, M2); s2 has no loops of its own. */
	Tensor *welford_sum, *welford_var;
	Span welford_span;  /* the welford directive */
	/* `s.online()` (scheduler/welford.c): s (online_max set) is sum(exp(X - m)) with m =
	 * online_max = max(X), and m->online_sum = s. m's loop nest computes the max and the sum
	 * in one pass (the sum rescaled when the max grows); s has no loops of its own. */
	Tensor *online_max, *online_sum;
	Span online_span;   /* the online directive */
	/* `t.rfactor(...) -> r` (scheduler/rfactor.c): on r, the reduction t it was split from. */
	Tensor *rfactor_of;
	/* Tensor cores (docs/tensor_cores.md): `t.mma(m16n8k16)` on the accumulator (NULL: none);
	 * `t.fragment(m, n)` gives t the accumulator's lane layout (span set); `zero_fill`: an
	 * operand cache read by an mma, whose out-of-bounds elements are stored as zeros (the
	 * instruction reads whole tiles: padding must add nothing). */
	struct TensorMma *mma;
	Span fragment_span;
	bool zero_fill;
	/* registers holding mma operand fragments (passes/mma.c): 16-bit elements, two to a
	 * 32-bit register (CUDA declares them `unsigned`, half the elements) */
	bool mma_frag;
} TensorSched;

/* The schedule state of a tensor stored in mem that no directive has touched. */
TensorSched tensor_sched_new(MemType mem);

struct Tensor {
	const char *name;
	Span span;          /* declaration or defining statement */
	TensorKind kind;
	DType dtype;
	int index;          /* position among the fusion's tensors (definition order) */
	int param_index;    /* inputs/outputs: position in the launcher signature */
	int ndim;
	IrExpr **shape;     /* ndim extents (EX_INT or EX_SIZE; intermediates: inferred) */
	/* Definition (not for inputs): value of tensor[root axes], over these root axes. */
	IrExpr *def;
	Span def_span;
	/* Depth of def with every pointwise tensor it reads expanded (they are recomputed in
	 * their readers): at most FUS_MAX_EXPR_DEPTH once scheduled (scheduler/scheduler.c), so
	 * the recursive walkers of the lowering and the backends stay bounded. */
	int depth;
	Axis **root;        /* ndim + nred root axes: left-hand indices, then reduction indices */
	int nroot;
	Axis **domain;      /* the loop domain: leaf axes in loop order */
	int ndomain;
	Vec history;        /* Axis* produced by transforms, in order (for compute_at replay) */
	Vec readers;        /* Tensor* whose definitions read this one */
	/* A reduction inside an expression of lifted_from's definition, lifted by sema into
	 * this tensor (docs/language.md, "Reductions inside expressions"); NULL otherwise. */
	Tensor *lifted_from;
	/* A copy the automatic scheduler made of `copy_of` for one loop nest (scheduler/auto_nests.c;
	 * `fusc --emit=schedule` names them: a schedule block cannot make copies). */
	Tensor *copy_of;
	/* How it is computed and stored: the schedule directives (or the automatic scheduler)
	 * set it, the lowering reads it. */
	TensorSched sched;
};

/* The options of one lowering (passes/pipeline.c, lower_fusion); every pass reads them from its
 * Kernel (Kernel.options), never from anywhere else. */
typedef struct LowerOptions {
	int arch;            /* target sm version, e.g. 80 */
	bool no_arch_check;  /* lower anyway when the target is too old (with a warning) */
	bool verify;         /* run ir_verify between passes */
	const char *dump_after; /* NULL, a pass name or "all": print the IR after it */
	FILE *dump_out;
	bool time_passes;    /* print per-pass times to dump_out (or stderr) */
	bool no_vectorize;   /* vectorized loops become unrolled scalar loops (no preconditions);
			      * lower_fusion sets it to lower Kernel.fallback */
	bool no_index32;     /* no 32-bit index variants (passes/index32.c) in front of the kernels */
} LowerOptions;

typedef struct Fusion {
	const char *name;
	Span span;
	Param **params;     /* scalar parameters, in signature order */
	int nparams;
	Tensor **inputs;    /* tensor parameters */
	int ninputs;
	Tensor **outputs;
	int noutputs;
	Tensor **tensors;   /* every tensor: inputs, then definitions in statement order */
	int ntensors;
	SizeSym **sizes;    /* size symbols in first-appearance order */
	int nsizes;
	/* The signature in declaration order, for launchers: kind 'p' param, 't' input tensor,
	 * 'o' output. */
	int nsig;
	struct SigEntry { char kind; Param *param; Tensor *tensor; } *sig;
	struct AstSchedule *ast_schedule; /* NULL: automatic */
	struct AstFusion *ast;  /* the definition sema built this from (rebuilt by auto_schedule) */
	bool auto_scheduled;
	/* auto_scheduled: NULL, or the simpler schedule the automatic scheduler fell back to
	 * ("scalar", "plain", "serial"; docs/auto_schedule.md) */
	const char *auto_fallback;
	/* auto_scheduled: the classes of the outputs' tuned schedules, in output order without
	 * repeats ("rows", "transpose, pointwise"; scheduler/classify.c), NULL for the plain
	 * and serial fallbacks */
	const char *auto_class;
	/* sema reported an error in this fusion (its IR is incomplete: not scheduled, never
	 * lowered); the other fusions of the file are still scheduled, so their errors show */
	bool failed;
	/* Size variants (Fusion*, docs/auto_schedule.md "Size variants"): copies of this fusion
	 * with bounds on size symbols (SizeSym.bound), each scheduled for its bounds, whose
	 * kernels the launcher tries in order before this fusion's own. Empty for most. */
	Vec variants;
	/* Segmentation (scheduler/segment.c, docs/auto_schedule.md "Segmentation"): Segment*,
	 * the kernels' fusions that the launcher runs in order instead of one kernel of this
	 * fusion (which is then left unscheduled: the reference interpreter reads it); empty
	 * for most. seg_buffers (Tensor*, this fusion's intermediates): the workspace the
	 * launcher allocates for the values one segment stores and a later one reads. */
	Vec segments;
	Vec seg_buffers;
	/* This fusion is a segment of segment_of (it is not segmented again). */
	struct Fusion *segment_of;
	/* A matrix product on f16/bf16 whose K or N may not be a multiple of 8 (scheduler/
	 * segment.c, segment_pad_matmul): a copy of this fusion segmented into copies of the
	 * operands with rows padded to a multiple of 8 elements, then the product on them, which
	 * the launcher tries after the tensor-core kernels (instead of their scalar kernels).
	 * padded_operands: this fusion is a segment of such a plan (a copy, whose reads under
	 * `k < K ?` leave the source tensor, or the product, whose C rows may be odd). */
	struct Fusion *pad_plan;
	bool padded_operands;
	/* `t.index64()`: the fusion's kernels keep 64-bit index arithmetic, no `_i32` variants
	 * (passes/pipeline.c; the FMA GEMM's 32-bit copy is the slower kernel on the H200) */
	bool index64;
	/* `t.raster(rows, cols, G)` (docs/schedule.md): the blocks take the tiles of rows' and
	 * cols' block types in groups of G rows, each group column by column (passes/raster.c);
	 * raster_rows NULL: the hardware's order */
	struct Axis *raster_rows, *raster_cols;
	int64_t raster_group;
	Span raster_span;
	/* passes/pipeline.c: the kernel (then its scalar kernel) last lowered from this fusion
	 * alone with options lowered_with, when the lowering reported nothing: the automatic
	 * scheduler lowers every schedule it keeps to see that it compiles, and the real
	 * lowering takes that kernel instead of running the passes again. lowerings counts
	 * the pass pipelines run on this fusion (tests/unit/check_scale.c: once per kernel),
	 * resumed those of them that were a scalar kernel's, run from a copy of its vector
	 * kernel before the first pass that tells them apart (passes/pipeline.c).
	 * index32_rewrites counts the 32-bit variants made of its kernels (passes/index32.c:
	 * once per kernel, however many chains take it). */
	struct Kernel *lowered;
	LowerOptions lowered_with;
	int lowerings, resumed, index32_rewrites;
} Fusion;

/* Where a signature entry of a segment's fusion comes from: `from` 's' the segmented
 * fusion's signature entry `index`, 'w' its workspace buffer `index` (Fusion.seg_buffers). A
 * 0-d buffer is a 1-element tensor in a reader's signature (`m: f32[1]`, read as m[0]). */
typedef struct SegArg {
	char from;
	int index;
} SegArg;

typedef struct Segment {
	Fusion *fusion;    /* an ordinary fusion: scheduled, lowered and launched like any other */
	SegArg *args;      /* fusion->nsig entries */
	int *sizes;        /* fusion->nsizes entries: the segmented fusion's size index of each */
	int *multiple;     /* NULL, or per size: 0, or that size rounded up to a multiple of it
			    * (a padded copy's row length, segment_pad_matmul) */
} Segment;

typedef struct Program {
	Fusion **fusions;
	int nfusions;
	const char *file_name;
} Program;

Tensor *fusion_find_tensor(Fusion *f, const char *name);
Axis *tensor_find_axis(Tensor *t, const char *name); /* among the current domain */
int tensor_axis_pos(Tensor *t, Axis *ax);            /* -1 if not in the domain */
/* The loop t is computed in (t->ca_tensor, t->ca_pos), through aliases to a real loop. */
void tensor_placement(Tensor *t, Tensor **owner, int *pos);
bool tensor_is_reduction(Tensor *t);
/* The extent a parallel loop over ax launches: its extent, but at least 1 for a reduction axis
 * (an empty reduction, N = 0, still has one block or thread that stores the identity: an
 * empty grid would launch nothing and leave the output unwritten). */
IrExpr *axis_launch_extent(Arena *a, Axis *ax);
/* A new tensor: every other field zero (not in a fusion's list yet: index 0, no domain). */
Tensor *tensor_new(Arena *a, const char *name, TensorKind kind, DType dt, MemType mem, Span at);
/* A 1-d buffer of n elements that is not part of the fusion (index and param_index -1): the
 * passes' own arrays (vector staging registers, grid-reduction workspaces). */
Tensor *tensor_buffer(Arena *a, const char *name, DType dt, MemType mem, IrExpr *n, Span at);

/* Renames f (--prefix), its size variants (the same name) and its segments (NAME_segK). */
void fusion_rename(Arena *a, Fusion *f, const char *name);
/* The name of segment i of f when f is named `name`: NAME_segI, with f's bounds when f is a
 * size variant (NAME_segI_N65536: a bounded plan beside the fusion's own) */
const char *fusion_segment_name(Arena *a, Fusion *f, const char *name, int i);

/* ir/shape.c: sizes at run time. At most IR_MAX_DIMS dims per tensor. */
#define IR_MAX_DIMS 8
/* Evaluates an i64 expression built from EX_INT, EX_SIZE and integer EX_OP/EX_SELECT/EX_CAST
 * nodes (shapes, extents, launch dimensions). False when e uses anything else or divides by 0. */
bool ir_eval_i64(IrExpr *e, const int64_t *sizes, int64_t *out);

/* The dims of tensor t with the given size values. False (with *err, malloc'd) when a dim
 * cannot be evaluated, is negative, or t has more than IR_MAX_DIMS dims. */
bool tensor_dims(Tensor *t, const int64_t *sizes, int64_t *dims, char **err);
int64_t shape_numel(const int64_t *dims, int ndim); /* -1 on overflow */

/* Checks that the sizes are consistent with the fusion: no negative size, and every access
 * `x[..., i, ...]` reads dimension d of x with an index i whose extent equals x's dim d (a
 * file that ties N to a constant, say, contradicts N=other). False with *err (malloc'd). */
bool fusion_check_sizes(Fusion *f, const int64_t *sizes, char **err);

/* ir/convert.c: scalar conversions, exact: double -> nearest f16/bf16 (ties to even, overflow to
 * inf) and back. */
uint16_t dtype_f16_bits(double x);
uint16_t dtype_bf16_bits(double x);
double dtype_f16_value(uint16_t bits);
double dtype_bf16_value(uint16_t bits);
/* Rounds x to the value set of a floating dtype (f16, bf16, f32; f64 unchanged). */
double dtype_round(DType t, double x);
/* CUDA's float -> integer conversion: truncates and saturates to `to`; NaN gives 0. */
int64_t dtype_float_to_int(double x, DType to);

/* Prints a fusion with its schedule as text (`fusc --emit=ir`, golden .ir files). */
void ir_print_fusion(Fusion *f, Buf *out);
/* `fusion saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N])`, no newline. */
void ir_print_signature(Fusion *f, Buf *out);
void ir_print_expr(IrExpr *e, Buf *out);

/* ---- tensor cores (ir/mma.c, docs/tensor_cores.md) ------------------------------------ */

/* Instruction families: mma.sync (a warp, sm_80); wgmma (a warpgroup, sm_90a) comes later. */
typedef enum MmaFamily { MMA_SYNC } MmaFamily;

/* Where element r of a lane's fragment lies in its matrix: row = rg * g + rt * t + rc,
 * col = cg * g + ct * t + cc, with g = lane / 4 (the group) and t = lane % 4 (the thread in
 * the group). The compiler's layout table, from the PTX ISA's fragment figures; the simulator
 * has its own copy of the hardware's (interp/simulate.c), so a wrong entry here gives wrong
 * results in `fusc check`. */
typedef struct MmaFrag {
	int8_t rg, rt, rc, cg, ct, cc;
} MmaFrag;

/* X(enum suffix, name, family, m, n, k, min arch) */
#define MMA_INSTRS(X) X(M16N8K16, "m16n8k16", MMA_SYNC, 16, 8, 16, 80)

typedef enum MmaShape {
#define X(e, n, f, m, nn, k, arch) MMA_##e,
	MMA_INSTRS(X)
#undef X
	MMA_COUNT
} MmaShape;

typedef struct MmaInstr {
	MmaShape shape;
	const char *name;  /* "m16n8k16" */
	MmaFamily family;
	int m, n, k;       /* the instruction's tile: A m x k, B k x n, C m x n */
	int min_arch;
	int na, nb, nc;    /* elements per lane of A, B and C (16-bit operands, f32 C) */
	const MmaFrag *a, *b, *c; /* na, nb, nc entries: A (row m, col k), B (k, n), C (m, n) */
} MmaInstr;

const MmaInstr *mma_instr(MmaShape s);
const MmaInstr *mma_instr_by_name(const char *name); /* NULL when unknown */
/* The PTX of one instruction for operands of dtype ab (f16 or bf16), f32 accumulators:
 * "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32". */
const char *mma_ptx(const MmaInstr *in, DType ab);
/* Element r of lane `lane`'s fragment of operand 'a', 'b' or 'c' (row, col). */
void mma_frag_at(const MmaInstr *in, char operand, int lane, int r, int *row, int *col);

/* The schedule of an mma accumulator (scheduler/mma.c): the instruction, its directive, the
 * operand caches, and the axes its fragment transform made: the lane (bound to threadIdx.x),
 * the row half `mh` (row = 8 * mh + lane / 4) and column bit `nc` (col = 2 * (lane % 4) + nc)
 * of the m x n tile, and the k axis of the instruction. */
typedef struct TensorMma {
	const MmaInstr *instr;
	Span span;
	Tensor *a, *b;
	Axis *lane, *mh, *nc, *k;
	bool ldmatrix;  /* `mma(m16n8k16, ldmatrix)`: operands by ldmatrix (passes/mma.c proves it) */
} TensorMma;

/* ---- kernel IR ----------------------------------------------------------------------- */

/* A loop variable or a scalar local. */
struct Var {
	const char *name;   /* unique within the kernel */
	int id;
	DType dtype;
	IrExpr *extent;     /* loop variables: the loop's extent (range [0, extent)) */
	Axis *axis;         /* the axis the loop runs over, if any */
};

typedef struct Stmt Stmt;

/* Each kind's comment names the member of Stmt's union it uses. */
typedef enum StmtKind {
	KS_FOR,    /* loop: for (var = 0; var < var->extent; ++var) body; unroll/vectorize from
		    * the axis */
	KS_IF,     /* branch: if (cond) then else els */
	KS_ALLOC,  /* alloc: tensor's buffer in memory mem with size elements (local/shared) */
	KS_STORE,  /* store: tensor[idx...] = value (logical, before indexing) or
		    * tensor[offset] = value (after indexing, idx == NULL) */
	KS_VSTORE, /* copy: tensor[offset .. offset+vec) = src[src_offset .. +vec);
		    * one 2/4/8/16-byte access on each side (cond and size unused) */
	KS_LET,    /* let: var = value (a scalar local) */
	KS_COMMENT,/* note: text */
	KS_NEST,   /* note: a marker: the statements of `tensor` start here (a top-level nest, or
		    * where a computed-at tensor is computed); no effect, printed as the comment
		    * `text` */
	KS_CP_ASYNC, /* copy: cp.async.{ca,cg}.shared.global: tensor[offset .. +vec) from
		      * src[src_offset .. +vec), vec elements (4, 8 or 16 bytes); cond, when set, is
		      * the in-bounds predicate of the global read: false lanes are zero-filled
		      * (src-size 0) without reading global memory; cg from
		      * Tensor.sched.cp_async_cg. size, when set (and cond holds): only the first
		      * `size` elements (1..vec) are read from global, the rest are zero-filled (a
		      * partial last vector) */
	KS_CP_COMMIT, /* cp.async.commit_group (no member) */
	KS_CP_WAIT,   /* wait: cp.async.wait_group n, or cp.async.wait_all when n < 0 */
	KS_SYNC,   /* __syncthreads(): every thread of the block waits here (no member) */
	KS_BLOCK_REDUCE, /* block_red: var = red of value over the threads that differ only in the
			  * thread types of `pars` (a mask of 1u << ParType): every thread of the
			  * block takes part (barriers inside), each gets its group's result (the
			  * broadcast); kir_block_reduce_shape says how the groups are laid out */
	KS_GRID_REDUCE, /* grid_red: the grid step of a reduction over blockIdx types (`pars`, a
			 * mask of 1u << PT_BID*) into element `offset` of output `tensor`, run by
			 * the one thread of each block that would store that element: it leaves
			 * `var` in ws[offset * nparts + part], counts arrivals in sem[offset], and
			 * the last of the nparts blocks to arrive folds the partials in order
			 * part = 0, 1, ... into `var` and runs `body` (the store).
			 * docs/reductions.md */
	KS_MMA,    /* mma: one warp-collective matrix multiply-accumulate `instr` (passes/mma.c):
		    * every lane of the warp executes it together (no lane-dependent predicate
		    * around it); idx[0 .. nc) are the offsets of the lane's accumulator elements
		    * in `tensor` (registers), idx[nc .. nc+na) the loads of its A fragment and
		    * idx[nc+na .. nc+na+nb) those of its B fragment, in the instruction's fragment
		    * order (MmaInstr.a/b/c): D = A B + C in place. With MMA_LDM_A in ldm, A is one
		    * load instead: the lane's row address for ldmatrix.x4 (A[i, k]: lane l gives
		    * row l % 16, column 8 * (l / 16) of the 16 x 16 tile, 8 contiguous elements;
		    * A[k, i], MMA_LDM_A in ldt, .x4.trans: k = l % 8 + 8 * (l / 16), row
		    * 8 * (l / 8 % 2)); with MMA_LDM_B, B is the row address for ldmatrix.x2
		    * (B[k, j], MMA_LDM_B in ldt, .trans: lane l gives k = l % 16, n = 0; B[j, k]:
		    * n = l % 8, k = 8 * (l % 16 / 8)); passes/mma.c proves which, lane by lane;
		    * mma_slot says where each operand is. After the fragment pass
		    * (passes/mma.c) the A and B loads read registers that KS_MMA_LOAD filled */
	KS_MMA_LOAD, /* mma: operand `op` ('a' or 'b') of an mma into the lane's fragment
		      * registers: `tensor` (TensorSched.mma_frag), elements offset .. offset + n
		      * (n: tiles times the instruction's na or nb); idx the n per-lane loads in
		      * fragment order, or with ldm set one load: the lane's ldmatrix row address
		      * (as in KS_MMA); with ldmatrix a warp collective */
} StmtKind;

/* A kernel IR statement: the shared header, then the members of its kind (StmtKind says
 * which). The expression fields and nested lists of every kind are listed once, in ir/walk.c
 * (ir_stmt_exprs, ir_stmt_lists). */
struct Stmt {
	StmtKind kind;
	Stmt *next;       /* statement lists are singly linked */
	Span span;        /* the .fus text responsible (statement or directive) */
	union {
		struct {
			Var *var;
			bool unroll, vectorize;
			Stmt *body;
		} loop;
		struct {
			IrExpr *cond;
			Stmt *then, *els;
		} branch;
		struct {
			Tensor *tensor;
			MemType mem;
			IrExpr *size;
			/* shared memory: byte offset in the kernel's pool (set by
			 * passes/shared_memory.c; buffers whose lifetimes do not overlap may share
			 * bytes) */
			int64_t smem_offset;
		} alloc;
		struct {
			Tensor *tensor;
			MemType mem;        /* tensor's */
			IrExpr **idx;
			int nidx;
			IrExpr *offset;
			IrExpr *value;
			/* set by loop_nest for the predicate pass: the conjunction of `inner < F`
			 * for every split inner axis of the tensor that is split, merged further (a
			 * non-divisible split's remainder would otherwise alias the next outer
			 * iteration: docs/lowering.md, "Non-divisible splits"); NULL: none */
			IrExpr *split_cond;
		} store;
		struct {
			Tensor *tensor;
			MemType mem;        /* tensor's */
			IrExpr *offset;
			Tensor *src;
			IrExpr *src_offset;
			int vec;            /* elements per access */
			IrExpr *cond, *size; /* KS_CP_ASYNC */
		} copy;
		struct {
			Var *var;
			IrExpr *value;
			IrExpr *split_cond; /* as store.split_cond */
			/* the tensor an accumulation or a Welford update belongs to (loop_nest.c):
			 * one group for the predicate pass; NULL: none */
			Tensor *tensor;
		} let;
		struct {
			const char *text;
			Tensor *tensor;     /* KS_NEST */
		} note;
		struct {
			int n;
		} wait;
		struct {
			Var *var;
			IrExpr *value;
			ReduceOp red;
			/* red RED_WELFORD: var is the count, wmean and wm2 the mean and M2 of the
			 * thread's partial (all of the accumulation dtype); Chan et al.'s
			 * combination */
			Var *wmean, *wm2;
			/* red RED_ONLINE: var is the running max, osum the sum of exp(x - max)
			 * (both of the accumulation dtype) */
			Var *osum;
			unsigned pars;      /* the reduced thread types, 1u << PT_TIDX, ... */
		} block_red;
		struct {
			Var *var;
			ReduceOp red;
			unsigned pars;      /* the reduced block types, 1u << PT_BIDX, ... */
			Tensor *tensor;
			IrExpr *offset;
			IrExpr *value;      /* the accumulator (the body's store's value) */
			/* the workspace (ws: nparts partials of the accumulator dtype per
			 * element of `tensor`; sem: one arrival counter per element, zero before
			 * the launch), this block's part (its linear index over the reduced block
			 * types) and their number */
			Tensor *ws, *sem;
			IrExpr *part, *nparts;
			Stmt *body;
		} grid_red;
		struct {
			Tensor *tensor;
			IrExpr **idx;
			int nidx;
			const MmaInstr *instr;
			unsigned ldm;       /* MMA_LDM_A, MMA_LDM_B: operands loaded by ldmatrix */
			unsigned ldt;       /* those of ldm loaded with .trans (each 8 x 8 matrix
					     * transposed: A[k, i] and B[k, j] tiles) */
			/* KS_MMA_LOAD: the first element of the fragment in `tensor`, the operand
			 * ('a' or 'b') and the fragments loaded one after the other: 1, or 2 (B: two
			 * n tiles by one ldmatrix.x4[.trans]) */
			IrExpr *offset;
			char op;
			int tiles;
			/* the loop over the instruction's k steps whose fragments the mma pass
			 * loaded before it, for every step (the fragment arrays span it: what
			 * passes/mma_pipeline.c moves across steps): KS_MMA, that unrolled loop
			 * around the mma; KS_MMA_LOAD, its copy around the load. NULL: none */
			Var *step;
		} mma;
	};
};

enum { MMA_LDM_A = 1, MMA_LDM_B = 2 };
/* The first index in s->idx of KS_MMA operand op ('c', 'a' or 'b') and their number. */
int mma_slot(const Stmt *s, char op, int *count);

/* A precondition the launcher checks before launching (vectorized accesses need aligned
 * pointers and sizes that keep every vector aligned; a size variant needs its bounds). The
 * one launch contract: the generated launchers (backend/cuda_launch.c) print these, libfusrt
 * and `fusc check` evaluate them with precond_holds, and both word a failure with
 * precond_failure. */
typedef enum PrecondKind {
	PC_ALIGNED,   /* tensor's pointer aligned to `value` bytes */
	PC_MULTIPLE,  /* size symbol is a multiple of `value` */
	PC_AT_MOST,   /* size symbol is at most `value` (a size variant's bound); size NULL:
		       * the product counts[0] of size symbols is (SizeProd) */
	PC_INDEX32,   /* each of counts[0..ncounts) is at most `value` (2^31 - 1): the kernel's
		       * index arithmetic is 32-bit (passes/index32.c) */
} PrecondKind;
typedef struct Precond {
	PrecondKind kind;
	Tensor *tensor;
	SizeSym *size;
	int64_t value;
	Span span;    /* the directive that needs it */
	const char *where;  /* "file.fus:LINE:COL" of span for launcher messages, or NULL */
	const char *reason; /* e.g. "vectorized access"; NULL means that (PC_AT_MOST: "size variant") */
	/* PC_INDEX32: element counts over the sizes, each a product (OP_MUL nodes) of factors
	 * that ir_eval_i64 evaluates (each tensor's root domain, each grid-reduction workspace);
	 * a product past the value (or past 64 bits) fails. PC_AT_MOST without a size: the one
	 * product of size symbols that is bounded. */
	IrExpr **counts;
	int ncounts;
} Precond;

/* ir/kir.c: the product of the symbols of p (in index order: M * N), as sizes of f. */
IrExpr *size_prod_expr(Arena *a, Fusion *f, const SizeProd *p);
/* The SizeProd of f with a bound (bound > 0, or above > 0 when `above`), or NULL. */
SizeProd *fusion_size_prod(Fusion *f, bool above);
/* ir/kir.c: whether p (a precondition of a kernel of f) holds for these sizes (indexed by
 * SizeSym.index) and pointers (the addresses of the signature's entries, by position in
 * Fusion.sig; NULL: every pointer is taken as aligned, as `fusc check` does). */
bool precond_holds(Fusion *f, const Precond *p, const int64_t *sizes, const uint64_t *ptrs);
/* The first precondition of k that fails, or NULL. */
Precond *kernel_failed_precond(struct Kernel *k, const int64_t *sizes, const uint64_t *ptrs);
/* The variant of the chain k, k->fallback, ... that runs: the first whose preconditions all
 * hold; NULL when none does (the launch is refused with the last one's failure). */
struct Kernel *kernel_pick(struct Kernel *k, const int64_t *sizes, const uint64_t *ptrs);
/* Every kernel with a body in chain k, the segments' chains included (plans themselves
 * skipped), in launch-contract order, appended to out (Kernel*): what a .cu or a module holds. */
void kernel_flatten(Arena *a, struct Kernel *k, Vec *out);
/* Segment sg's sizes (its fusion's nsizes, in its order) from the segmented fusion's. */
void segment_sizes(const Segment *sg, const int64_t *sizes, int64_t *out);
/* Does the plan f is a segment of (Fusion.segment_of; f may be a size variant of the
 * segment's fusion) make p hold at every launch? A workspace buffer is allocated on its own
 * (256-byte aligned), and a size the plan rounds up (Segment.multiple) divides by what it is
 * rounded to: a padded copy's vector kernels need no scalar kernel. */
bool segment_guarantees(Fusion *f, const Precond *p);
/* The last kernel of the chain (the one that refuses when nothing holds). */
struct Kernel *kernel_last_variant(struct Kernel *k);
/* The fusion's own kernel in the chain: the first that is not a size variant's (what
 * --emit=ir and --dump-after show). */
struct Kernel *kernel_own(struct Kernel *k);
/* The one wording of p's failure: PRE VALUE POST with VALUE the size in decimal (sized),
 * `N = ` 1001 ` is not a multiple of 4 (vectorized access, f.fus:3:5)`, or PRE alone
 * (`x is not 16-byte aligned (vectorized access, f.fus:3:5)`). */
typedef struct PrecondText {
	const char *pre, *post;
	bool sized;
} PrecondText;
PrecondText precond_failure(Arena *a, const Precond *p);
/* The condition p states, for comments and --verbose: `x is 16-byte aligned`,
 * `N is a multiple of 4`, `N <= 4096`. */
void precond_condition(const Precond *p, Buf *out);
/* The position of tensor t in its fusion's signature (-1: none). */
int fusion_sig_pos(Fusion *f, Tensor *t);

typedef struct Kernel {
	Fusion *fusion;
	const LowerOptions *options; /* the lowering's options (kir_new: the defaults, sm_80) */
	const char *name;      /* CUDA kernel name: FUSION_kernel */
	Stmt *body;
	IrExpr *launch[PT_COUNT]; /* grid/block extent per parallel type (i64); NULL = 1 */
	Vec preconds;          /* Precond* */
	Vec locals;            /* Var* declared at kernel scope (loop vars are declared by loops) */
	int min_arch;          /* e.g. 80: from the features used */
	/* Shared memory (passes/shared_memory.c): bytes the kernel's buffers need (each 16-byte
	 * aligned, reused where lifetimes do not overlap). smem_dynamic: more than 48 KiB, so it
	 * is one `extern __shared__` pool and the launch passes smem_bytes as dynamic shared
	 * memory (after cudaFuncSetAttribute(MaxDynamicSharedMemorySize)); otherwise static. */
	int64_t smem_bytes;
	bool smem_dynamic;
	/* Static shared memory the backend's block-reduction helpers declare (the ws[32] of
	 * __fus_reduce_warps, Welford's wn/wm/wm2, ...), once per template instantiation, each
	 * rounded up to 16 bytes; it counts toward every limit with smem_bytes
	 * (passes/shared_memory.c, kernel_smem_static). */
	int64_t smem_helper_bytes;
	int nvars;             /* counter for unique Var names */
	Vec vars;              /* every Var of kir_new_var (names are unique among them) */
	Map names;             /* kir_new_var: every name a new Var may not take (strings) */
	Map name_next;         /* kir_new_var: base name -> int * next suffix to try */
	Arena *arena;
	/* The next variant (the launch contract is the ordered chain k, k->fallback, ...: the
	 * first whose preconditions hold runs, kernel_pick). An auto-scheduled kernel with vector
	 * preconditions is followed by the same fusion lowered without vector accesses
	 * (FUSION_kernel_scalar: only its size bounds as preconditions); a size variant
	 * (Fusion.variants, FUSION_kernel_N4096) by the next one; the fusion's own kernel comes
	 * last. NULL at the end of the chain. */
	struct Kernel *fallback;
	/* Grid reductions (passes/grid_reduce.c): Tensor* pairs ws, sem per KS_GRID_REDUCE, in
	 * order. Global buffers that are not part of the fusion's signature: extra kernel
	 * parameters after the sizes, allocated per launch by the launcher or libfusrt (ws:
	 * shape[0] elements of its dtype; sem: shape[0] unsigned counters, zeroed). */
	Vec grid_ws;
	/* A segmented plan (Fusion.segments): no body of its own; the chain heads of each
	 * segment's kernels (Kernel*, in order), launched one after another with the fusion's
	 * workspace buffers. Its preconditions are its variant bounds only. */
	Vec segments;
	/* passes/index32.c: this kernel's 32-bit index variant (index32_variant), made once
	 * (index32_made; NULL: it has none) and shared by the later headers of the kernel (the
	 * final lowering reuses the automatic scheduler's trial, passes/pipeline.c). */
	struct Kernel *index32;
	bool index32_made;
} Kernel;

/* ir/kir.c */
Kernel *kir_new(Arena *a, Fusion *f);
/* FUSION_kernel, and a size variant's bounds: softmax_kernel_N4096 */
const char *kir_name(Arena *a, Fusion *f);
/* the bounds part of kir_name ("_N65536"; "" when f is no size variant): a bounded plan's
 * name (NAME_segments_N65536) and its segments' (NAME_seg0_N65536) */
const char *kir_bound_suffix(Arena *a, Fusion *f);
Var *kir_new_var(Kernel *k, const char *base, DType t); /* unique name base_N */
/* A copy of k that passes can go on lowering without changing k: its own statements and
 * variables (their names and the names still free are k's), expressions shared where they
 * mention no variable (passes never change an expression in place); fallback NULL. */
Kernel *kir_copy(Arena *a, Kernel *k);
Stmt *kir_for(Kernel *k, Var *v, Stmt *body);
Stmt *kir_if(Kernel *k, IrExpr *cond, Stmt *then, Stmt *els);
Stmt *kir_store(Kernel *k, Tensor *t, IrExpr **idx, int nidx, IrExpr *value);
Stmt *kir_alloc(Kernel *k, Tensor *t, MemType m, IrExpr *size);
Stmt *kir_comment(Kernel *k, const char *text);
/* The KS_NEST marker of t, with span at (the passes find a tensor's statements by it). */
Stmt *kir_nest_mark(Kernel *k, Tensor *t, Span at, const char *text);
/* The only statement of list s that is not a comment or a marker, or NULL. */
Stmt *kir_only_stmt(Stmt *s);
/* var = red of var over the thread types in pars (KS_BLOCK_REDUCE). */
Stmt *kir_block_reduce(Kernel *k, Var *v, ReduceOp r, unsigned pars);
/* (n, mean, m2) = the Welford combination of the triples over the thread types in pars
 * (KS_BLOCK_REDUCE with RED_WELFORD). */
Stmt *kir_block_welford(Kernel *k, Var *n, Var *mean, Var *m2, unsigned pars);
/* (max, sum) = the online combination of the pairs over the thread types in pars
 * (KS_BLOCK_REDUCE with RED_ONLINE). */
Stmt *kir_block_online(Kernel *k, Var *max, Var *sum, unsigned pars);
/* How a block reduction's groups lie in the block (k's constant launch dims): the group of the
 * thread with linear index tid = x + X * (y + Y * z) is base + r * stride, r in [0, count),
 * base = tid / (count * stride) * (count * stride) + tid % stride; nthreads = X * Y * Z. The
 * kind fixes the combination order, which the CUDA helpers and the simulator share:
 *   BR_WARP  (stride 1, count a power of 2 <= 32): butterfly, v = op(v, lane ^ o) for
 *            o = count/2 .. 1 (shuffles only);
 *   BR_WARPS (stride 1, count a multiple of 32): butterfly over the warp (o = 16 .. 1), then
 *            r = w0, r = op(r, w1), ... over the group's warps in order (shared memory);
 *   BR_SMEM  (any other): r = v[base], r = op(r, v[base + i * stride]) for i = 1 .. count-1.
 * False when the groups are not of that form (the reduced thread types are not consecutive
 * among the launched ones, e.g. x and z but not y) or the thread dims are not constant. */
typedef enum BlockReduceKind { BR_WARP, BR_WARPS, BR_SMEM } BlockReduceKind;
typedef struct BlockReduceShape {
	BlockReduceKind kind;
	int64_t count, stride, nthreads;
} BlockReduceShape;
bool kir_block_reduce_shape(Kernel *k, unsigned pars, BlockReduceShape *out);
/* The kernel's shared memory by kind: dynamic (the pool when smem_dynamic) and static (the
 * pool otherwise, plus the helpers' smem_helper_bytes); a block needs their sum. */
int64_t kernel_smem_dynamic(const Kernel *k);
int64_t kernel_smem_static(const Kernel *k);
/* Appends b's list to a's list; returns the head. */
Stmt *kir_append(Stmt *a, Stmt *b);
/* Prints the kernel IR (`--dump-after`). */
void kir_print(Kernel *k, Buf *out);
/* One statement on one line, without the bodies of loops and ifs (for reports). */
void kir_print_stmt_line(Stmt *s, Buf *out);
/* ir/walk.c: a statement's children are listed there and nowhere else. */
/* Calls fn on the address of each expression field of s that is set (cond, size, offset,
 * value, split_cond, src_offset, part, nparts, idx[]), not on nested statements; stops and
 * returns true when fn does. */
typedef bool (*IrSlotFn)(IrExpr **slot, void *ctx);
bool ir_stmt_exprs(Stmt *s, IrSlotFn fn, void *ctx);
/* The addresses of the statement lists nested in s (a loop's body, an if's then and els, a
 * grid reduction's body) into out; returns their number. */
int ir_stmt_lists(Stmt *s, Stmt **out[3]);
/* Whether fn holds for a node of e (pre-order; NULL e: false). */
typedef bool (*IrExprPred)(IrExpr *e, void *ctx);
bool ir_expr_any(IrExpr *e, IrExprPred fn, void *ctx);
/* Whether fn holds for a statement of list or of the lists nested in it (pre-order). */
typedef bool (*IrStmtPred)(Stmt *s, void *ctx);
bool ir_stmts_any(Stmt *list, IrStmtPred fn, void *ctx);
/* Whether fn holds for a node of an expression of a statement of list (nested too). */
bool ir_stmts_any_expr(Stmt *list, IrExprPred fn, void *ctx);
/* Every expression field of s (of every statement of list, nested too) through ir_rewrite. */
void ir_stmt_rewrite(Arena *a, Stmt *s, IrRewrite fn, void *ctx);
void ir_stmts_rewrite(Arena *a, Stmt *list, IrRewrite fn, void *ctx);
/* The tensor a KS_STORE, KS_VSTORE or KS_CP_ASYNC writes, with the address of its element
 * offset in *offset (when offset is not NULL); NULL for every other kind. */
Tensor *ir_stmt_write(Stmt *s, IrExpr ***offset);
/* A shallow copy of s alone (next NULL; its own idx array; the same nested lists). */
Stmt *ir_stmt_clone(Arena *a, Stmt *s);
/* Whether e mentions variable v; whether e loads from tensor t (NULL e: false). */
bool ir_mentions(IrExpr *e, Var *v);
bool ir_reads(IrExpr *e, Tensor *t);
/* e with every use of v replaced by a copy of `with` (NULL e: NULL); not simplified. */
IrExpr *ir_subst(Arena *a, IrExpr *e, Var *v, IrExpr *with);
/* Checks structural invariants; reports internal errors into d (returns false on failure). */
bool ir_verify(Kernel *k, Diag *d, const char *after_pass);

#endif
