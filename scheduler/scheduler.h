/* scheduler.h: the scheduler layer's umbrella header.
 *
 * Between the front end (frontend/: text -> AST -> fusion IR) and the lowering (passes/): a
 * fusion's schedule is applied here, once, from its schedule block's directives or from the
 * automatic scheduler's choice (which generates directives and applies them the same way).
 *
 *   scheduler.c          text -> scheduled Program (parse, sema, schedule, depth check)
 *   schedule.c           the directives (split, merge, bind, compute_at, ...), default placement
 *   cache_directives.c   cache_after / cache_before / cp_async / stages
 *   rfactor.c, welford.c the reduction rewrites
 *   auto_schedule.c      the automatic scheduler; auto_nests.c, auto_outer.c,
 *                        auto_transpose.c, auto_long_row.c its parts
 *   segment.c            segmentation: a fusion split into fusions run in order
 */
#ifndef FUSC_SCHEDULER_H
#define FUSC_SCHEDULER_H

#include "../frontend/frontend.h"

/* scheduler/schedule.c: applies the fusion's schedule directives in order (or calls
 * auto_schedule when there is no schedule block / `auto`). Errors go to d. */
bool schedule_apply(Arena *a, Diag *d, Fusion *f);
/* The same for target sm `arch` (what the automatic scheduler may use: cp.async and tensor
 * cores need sm_80); schedule_apply is sm_80. */
bool schedule_apply_for(Arena *a, Diag *d, Fusion *f, int arch);

/* Individual directives, also called by auto_schedule and the unit tests. They return false
 * after reporting an error at `at`. */
bool sched_split(Arena *a, Diag *d, Tensor *t, Axis *ax, int64_t factor, const char *outer,
		 const char *inner, Span at);
bool sched_merge(Arena *a, Diag *d, Tensor *t, Axis *outer, Axis *inner, const char *name,
		 Span at);
bool sched_bind(Fusion *f, Diag *d, Tensor *t, Axis *ax, ParType p, Span at);

/* Default placement at the end of a schedule (docs/schedule.md defaults): caches and reductions read by
 * another statement that have no compute_at are computed at their reader's most inlined legal
 * position (docs/caching.md, docs/reductions.md). schedule_apply calls it after the last
 * directive; auto_schedule may call it after its own choices. */
bool sched_place_defaults(Arena *a, Diag *d, Fusion *f);

/* ---- schedule internals, shared by scheduler/schedule.c (directives, compute_at),
 * scheduler/cache_directives.c (caches, default placement) and scheduler/rfactor.c ---------- */

/* One schedule block being applied. */
typedef struct Sched {
	Arena *a;
	Diag *d;
	Fusion *f;
	/* Names a failed directive would have made ("tensor" or "tensor.axis"; "tensor.*": any
	 * axis of a tensor whose domain is unknown after a failed compute_at or rfactor). A later
	 * use of one fails silently: the failed directive was reported, its consequences are
	 * not (scheduler/schedule.c, poison). */
	Vec poisoned;
	bool poison_all; /* too many to keep: every unknown name is a consequence */
	bool generated;  /* AstSchedule.generated: checks of the user's intent are off */
} Sched;

/* One directive of a schedule block (a failed one poisons the names it would have made), and
 * the end of the schedule (default placement, then the checks of the final schedule; `ok`:
 * every directive held). schedule_apply is these two; auto_schedule applies its generated
 * directives the same way. */
bool sched_directive(Sched *s, AstDirective *dir);
bool sched_finish(Sched *s, bool ok);

typedef struct ReadMap { /* how a reader subscripts a tensor it reads */
	Arena *a;
	Tensor *t;
	Axis **first;   /* t->ndim entries, once found */
	bool found, differ;
} ReadMap;

/* compute_at replay: consumer axis -> producer axis */
typedef struct Replay {
	Axis **uaxes, **taxes;
	int n, cap;
} Replay;

Axis *sched_arg_axis(Sched *s, Tensor *t, AstArg *arg);
/* ax is t's own axis (not a loop of another tensor) and, to be transformed, not shared with a
 * tensor computed at t; otherwise an error at `at`. */
bool sched_axis_changeable(Sched *s, Tensor *t, Axis *ax, Span at, bool transform);
/* scheduler/mma.c: `t.mma(m16n8k16)` on a contraction's register accumulator, `t.fragment(m,
 * n)` on its reader, and the final schedule's checks of both (docs/tensor_cores.md). */
bool sched_mma(Sched *s, Tensor *t, AstDirective *dir);
bool sched_fragment(Sched *s, Tensor *t, AstDirective *dir);
bool sched_check_mma(Sched *s);
bool sched_check_caches(Sched *s);
bool sched_check_new_name(Sched *s, AstName n);
bool sched_compute_at_pos(Sched *s, Tensor *t, Tensor *u, int pos, Span at);
Tensor *sched_computed_at(Fusion *f, Tensor *t);
bool sched_cache_after(Sched *s, Tensor *t, AstDirective *dir);
bool sched_cache_before(Sched *s, Tensor *t, AstDirective *dir);
bool sched_cp_async(Sched *s, Tensor *c, AstDirective *dir);
bool sched_rfactor(Sched *s, Tensor *t, AstDirective *dir);
/* scheduler/welford.c: `s2.welford()` and `s.online()` (the patterns, at the directive) and
 * the final schedule's checks of every such pair (placement, loops, no grid reduction, no
 * rfactor). sched_online_max: the max m that s.online() would pair s with, or NULL (no
 * diagnostic: the automatic scheduler asks); sched_welford_sum: the sum s1 that s2.welford()
 * would pair s2 with, or NULL. */
bool sched_welford(Sched *s, Tensor *t, AstDirective *dir);
bool sched_online(Sched *s, Tensor *t, AstDirective *dir);
Tensor *sched_online_max(Arena *a, Tensor *s);
Tensor *sched_welford_sum(Arena *a, Tensor *s2);
bool sched_check_welford(Sched *s);
bool sched_stages(Sched *s, Tensor *c, AstDirective *dir, bool double_buffer);
enum { PAD_MAX = 32 }; /* the largest pad(n) */
bool sched_pad(Sched *s, Tensor *c, AstDirective *dir);
bool sched_swizzle(Sched *s, Tensor *c, AstDirective *dir);
bool sched_finish_caches(Sched *s);
void sched_insert_tensor(Arena *a, Fusion *f, Tensor *c, int at);
bool sched_is_ancestor_of_shared(Axis *x, Tensor *u, int pos);
Axis *sched_new_axis(Arena *a, Tensor *t, AxisKind kind, const char *name, IrExpr *extent,
		      Span at);
bool sched_parse_mem(Sched *s, AstArg *g, MemType *m);
ReadMap sched_read_map(Arena *a, Tensor *t, Tensor *u);
Tensor *sched_reduction_home(Tensor **u, int n, int *limit);
Axis *sched_replay_get(Replay *r, Axis *u);
void sched_replay_put(Arena *a, Replay *r, Axis *u, Axis *t);

/* scheduler/auto_schedule.c: the automatic scheduler (docs/schedule.md defaults; docs/auto_schedule.md).
 * It tries its schedules from the tuned one down and keeps the first that is accepted and
 * lowers; a refused one leaves no diagnostic and no trace in the fusion (rebuilt by sema). */
typedef enum AutoLevel {
	AUTO_TUNED,   /* vectors, register caches, block reductions per row group */
	AUTO_SCALAR,  /* the same without vectors, register caches or kept intermediates */
	AUTO_PLAIN,   /* one thread per output element, each reduction serial in its reader */
	AUTO_SERIAL,  /* the same on one thread */
	AUTO_LEVELS
} AutoLevel;
typedef struct AutoOptions {
	unsigned refuse; /* tests: levels (bits 1 << AutoLevel) refused after they lowered */
	int arch;        /* the target sm the schedules are for (0: sm_80) */
} AutoOptions;
bool auto_schedule(Arena *a, Diag *d, Fusion *f);
bool auto_schedule_with(Arena *a, Diag *d, Fusion *f, const AutoOptions *o);
const char *auto_level_name(AutoLevel level);

/* scheduler/auto_nests.c: every loop nest gets its own copy of the reductions it reads, and no
 * statement reads an output (docs/auto_schedule.md, "One loop nest per output"). False when
 * that would take too many copies. */
typedef enum AutoCopies {
	AUTO_COPY_NEST,   /* the reductions a nest's output reads are shared in the nest */
	AUTO_COPY_READER, /* every stored reader (output or reduction) has its own copies */
} AutoCopies;
bool auto_split_nests(Arena *a, Fusion *f, AutoCopies mode);
/* The outputs of one row group run in the anchor's nest (auto_schedule.c, row_companions):
 * the other outputs' copies that equal a tensor the anchor reads (a reduction, an inlined
 * value) are replaced by it, and a reduction output equal to one becomes `o[rows] = u[rows]`,
 * so each reduction is computed once per row. True when anything changed. */
bool auto_share_copies(Arena *a, Fusion *f, Tensor *anchor);

/* scheduler/segment.c: splits a fusion without a schedule block into segments when a
 * reduction that another tensor reads is best a grid reduction (docs/auto_schedule.md,
 * "Segmentation"): builds f->segments, each scheduled automatically, and returns true;
 * false (f unchanged, no diagnostic) when there is nothing to split or a segment fails. */
bool segment_fusion(Arena *a, Diag *d, Fusion *f, int arch);
/* A matrix product on f16/bf16 (auto_matmul_classify, tensor cores) whose operands' rows
 * (the extent of each one's last dimension: K or N, M of A[k, i], K of B[j, k]) may not be
 * multiples of 8: builds f->pad_plan, a copy of f segmented into copies of A and B with rows
 * zero-padded to a multiple of 8 elements in a workspace, then the product on them (the
 * tensor-core kernel, its real M and N predicating the stores), each segment scheduled
 * automatically; true when it did. f itself is unchanged. */
bool segment_pad_matmul(Arena *a, Diag *d, Fusion *f, int arch);
/* The last subscripts of r's reads (a mask of r's roots; bit 31: something else). */
unsigned segment_read_roots(Tensor *r);
/* A row reduction (one reduced root, or several that collapse; the last subscript of every
 * read) over a size symbol marked long (SizeSym.above), or a product marked long
 * (SizeProd.above): its rows are split over blocks (auto_long_row.c). */
bool segment_long_row(Tensor *r);

/* A set of names (open addressing), for fresh names in fusions of any size. */
typedef struct NameSet {
	Arena *a;
	const char **slots;
	int cap, len;
} NameSet;
bool names_has(NameSet *s, const char *n);
void names_add(NameSet *s, const char *n);
/* base, base2, base3, ...: the first not in s, added to it. */
const char *names_fresh(NameSet *s, const char *base);
/* Every tensor, root axis, parameter and size name of f. */
void names_of_fusion(NameSet *s, Fusion *f);

/* scheduler/scheduler.c: text -> scheduled Program in one call (parse, sema, schedule). Stops
 * after the first phase that reported errors; returns NULL then. */
Program *compile_program(Arena *a, Diag *d, int file);
/* The same for target sm `arch` (schedule_apply_for); compile_program is sm_80. */
Program *compile_program_for(Arena *a, Diag *d, int file, int arch);

#endif
