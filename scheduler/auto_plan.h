/* auto_plan.h: what the automatic scheduler's files share (private to scheduler/): the plan
 * (the generated directives, applied as they are made) and the helpers that emit one
 * directive each. auto_schedule.c defines them; auto_outer.c (outer, middle-axis and
 * whole-tensor reductions), auto_transpose.c (transposes) and auto_matmul.c (matrix
 * products) use them. docs/auto_schedule.md. */
#ifndef FUSC_AUTO_PLAN_H
#define FUSC_AUTO_PLAN_H

#include "scheduler/scheduler.h"

/* The size variants a plan asks for: copies of the fusion with size symbol `sym` bounded by
 * each of `bounds` in turn, scheduled at the tuned level (docs/auto_schedule.md, "Size
 * variants"); sym NULL: none. */
typedef struct Buckets {
	SizeSym *sym;
	const int64_t *bounds;
	int n;
	/* a row length unit * (the product of the symbols `of`, sym one of them): each bound
	 * is on the row length, the symbols' product bounded by bound / unit (collapse_bound);
	 * of 0: sym alone, unit 1 */
	uint64_t of;
	int64_t unit;
} Buckets;

/* The schedule is written as directives (AstDirective, the same as a schedule block), each
 * applied by sched_directive as soon as it is made, so it goes through every check a user's
 * schedule does, and later choices can look at the domains the earlier ones made. */
typedef struct Plan {
	Arena *a;
	Fusion *f;
	Sched s;
	AutoLevel level;
	int arch;     /* the target sm (AutoOptions.arch) */
	Span at;      /* every generated directive points here (the fusion, or the output) */
	Vec dirs;     /* AstDirective* */
	NameSet names; /* names in use: indices, tensors, parameters, sizes, caches */
	NameSet axes; /* generated axis names, as "tensor.axis" */
	bool ok;      /* every directive held */
	/* A size symbol that a bound would let the tuned schedule plan for (a row group's
	 * symbolic row length, a matrix product's symbolic M, with no SizeSym.bound):
	 * auto_schedule adds size variants for it (docs/auto_schedule.md, "Size variants"). */
	Buckets bucket;
} Plan;

/* auto_schedule.c */
const char *fresh_axis(Plan *p, const char *t, const char *base);
void d_split(Plan *p, const char *t, const char *ax, int64_t f, const char *o, const char *i);
void d_merge(Plan *p, const char *t, const char *x, const char *y, const char *m);
void d_verb1(Plan *p, const char *t, const char *verb, const char *arg);
void d_reorder(Plan *p, const char *t, const char **axes, int n);
void d_bind(Plan *p, const char *t, const char *ax, const char *par);
void d_reorder(Plan *p, const char *t, const char **axes, int n);
const char *d_rfactor(Plan *p, const char *t, const char **axes, int n, const char *base);
void d_compute_at(Plan *p, const char *t, const char *u, const char *ax, const char **shared,
		  int nshared);
const char *d_cache_after(Plan *p, Tensor *x, const char *mem);
const char *d_cache_before(Plan *p, const char *t, const char *mem);
/* `[result =] t.verb(args) [-> (outs)];` (an argument: an integer, a dotted name, a name) */
void d_directive(Plan *p, const char *result, const char *t, const char *verb, int nargs,
		 const char **args, int nouts, const char **outs);
int64_t threads_for(IrExpr *extent, int64_t want);
bool read_by_other(Fusion *f, Tensor *t);
/* Two extents that are the same constant or the same size symbol. */
bool dims_equal(IrExpr *x, IrExpr *y);

/* classify.c: the class of an output, which picks its automatic schedule (docs/auto_schedule.md,
 * "Classes"), and what the class files share to find it. */
enum { AUTO_MAX_RANK = 16 };
typedef enum AutoClass {
	AC_MATMUL,    /* a matrix product, batched or with an epilogue (auto_matmul.c) */
	AC_POINTWISE, /* no reduction, every read in the output's index order and shape */
	AC_BROADCAST, /* no reduction, some read not (a broadcast, a constant subscript, ...) */
	AC_TRANSPOSE, /* transpose or permute (auto_transpose.c) */
	AC_ROWS,      /* a row group: inner reductions, normalizations (auto_schedule.c) */
	AC_OUTER,     /* column reduction (auto_outer.c) */
	AC_MIDDLE,    /* middle-axis reduction: more kept indices (auto_outer.c) */
	AC_WHOLE,     /* whole-tensor reduction into a 0-d output (auto_outer.c) */
	AC_GENERAL,   /* anything else: correct, not tuned (auto_schedule.c) */
	AC_COUNT
} AutoClass;
/* o's class in f; row_group: o is a row group (auto_schedule.c's row analysis decides). */
AutoClass auto_classify(Fusion *f, Tensor *o, bool row_group);
const char *auto_class_name(AutoClass c);
/* Inlined intermediates, read outputs and scalars: recomputed where they are read. */
bool auto_recomputed(Tensor *x);
/* A read of tensor x (memory, or a reduction) whose subscript k is the output's root pos[k]
 * (-1: a constant or any other expression); false stops the walk. */
typedef bool (*AutoReadFn)(void *ctx, Tensor *x, const int *pos);
/* Calls fn for every read of e, an expression over the roots of a tensor whose root k is the
 * output's root map[k], looking through recomputed tensors. False when fn stopped it, or at
 * a reduction expression inside e, a read of more than AUTO_MAX_RANK subscripts or
 * definitions nested more than 64 deep (the reads seen are then not all of them). */
bool auto_walk_reads(IrExpr *e, const int *map, AutoReadFn fn, void *ctx);
/* The reductions e reads, looking through inlined tensors: bit 0 any, bit 1 a 0-d one, bit
 * 2 one with dimensions. */
unsigned auto_reads_reductions(IrExpr *e, int depth);
/* What the reads reachable from a pointwise output's definition allow. */
typedef struct AutoAccess {
	Tensor *out;
	bool identity;  /* every memory read is out's own index order and shape */
	bool vec_ok;    /* the last index only ever subscripts the last dimension */
	int max_size;   /* widest dtype read or written, in bytes */
} AutoAccess;
AutoAccess auto_access(Tensor *o);

/* collapse.c ("Collapsed axes" in docs/auto_schedule.md): are o's roots [from, to) (at
 * least one) used by every read of its definition only together, as adjacent subscripts in
 * that order over dimensions of their extents (one contiguous run of each tensor read)? */
bool auto_collapsible(Tensor *o, int from, int to);
/* Merges o's roots [from, to) in order into one axis (new names from base); its name. */
const char *auto_merge_roots(Plan *p, Tensor *o, int from, int to, const char *base);
/* Bounds the size symbols `of` of g (its indices) together: one symbol's SizeSym.bound and
 * .above, or a SizeProd over several (reused when they have one). Returns one of them. */
SizeSym *collapse_bound(Arena *a, Fusion *g, uint64_t of, int64_t bound, int64_t above);
/* A segment g of f (sizes: f's index of each of g's size symbols) bounds the product that f
 * bounds (SizeProd) when it has all its symbols. */
void collapse_bound_segment(Arena *a, Fusion *f, Fusion *g, const int *sizes);
/* Is r a row reduction whose reduced roots collapse into a row length marked long (one
 * symbol's SizeSym.above, or a SizeProd's above)? */
bool collapse_long_row(Tensor *r);

/* auto_outer.c: AC_OUTER, AC_MIDDLE or AC_WHOLE when o is one of them, else AC_GENERAL;
 * auto_outer schedules o when it is (false: not, nothing emitted). */
AutoClass auto_outer_class(Fusion *f, Tensor *o);
/* The same for o as the one output of a fusion (its other outputs left to other segments:
 * segment.c splits such an output off a fusion of several). */
AutoClass auto_outer_class_alone(Fusion *f, Tensor *o);
bool auto_outer(Plan *p, Tensor *o);

/* auto_long_row.c: a row reduction output over a long row (segment_long_row), the only
 * output: each row split over blocks, a grid reduction. False (nothing emitted) otherwise. */
bool auto_long_row(Plan *p, Tensor *o);

/* auto_transpose.c: a pointwise output that reads inputs with its innermost index on
 * another dimension than their innermost one (a transpose or permute). */
enum { AUTO_TRANSPOSE_MAX = 8 };
typedef struct AutoTranspose {
	int a;        /* o's root index that the cached inputs' innermost dimension follows */
	Tensor *ins[AUTO_TRANSPOSE_MAX]; /* inputs staged through shared-memory tiles */
	int subs[AUTO_TRANSPOSE_MAX][16]; /* their subscripts as o's root indices */
	int nins;
	int tile_a;   /* tile elements along a: one 128-byte line of the staged inputs (32 f32,
		       * 64 for 16-bit and smaller elements) */
	int tile_b;   /* tile elements along o's innermost index (64) */
} AutoTranspose;
/* Whether o is in the class (c says how); false: another class (c->nins may be 0). */
bool auto_transpose_classify(Fusion *f, Tensor *o, AutoTranspose *c);
/* o's tiled schedule when it is in the class; false (nothing emitted) when it is not. */
bool auto_transpose(Plan *p, Tensor *o);

/* auto_matmul.c: a contraction C[b..., i, j] = sum(k: A[b..., i, k] * B[b..., k, j]) (either
 * operand transposed), or a pointwise epilogue of one, as the fusion's one output. */
typedef struct AutoMatmul {
	Tensor *out;        /* the output */
	Tensor *acc;        /* the contraction: out, or the reduction its epilogue reads */
	Tensor *a, *b;      /* the operands, inputs */
	bool a_trans, b_trans; /* A[b..., k, i], B[b..., j, k] */
	int nbatch;         /* leading batch indices */
	bool mma;           /* tensor cores (f16/bf16 operands, f32 accumulator, no transpose) */
	int64_t bm, bn;     /* block tile rows, columns (smaller than 128 for small constants) */
	int64_t bk, stages; /* tensor cores: k per step, circular-buffer stages */
	int warps_y, warps_x; /* tensor cores: warps along the rows (threadIdx.z), columns (.y) */
} AutoMatmul;
/* Whether o is in the class (c says how): a constant extent must be at least its tile
 * (tensor cores: M, N, K >= 32; FMA: M, N >= 128, K >= 16). */
bool auto_matmul_classify(Fusion *f, Tensor *o, AutoMatmul *c);
/* o's tiled schedule when it is in the class; false (nothing emitted) when it is not. */
bool auto_matmul(Plan *p, Tensor *o);

#endif
