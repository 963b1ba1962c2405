/* fuzz.h: the schedule fuzzer (docs/fuzzing.md).
 *
 *   gen_fusion.c    a random well-typed fusion: pointwise, broadcast, transpose, constant
 *                   subscripts, reductions over any axes (0-d results too), several outputs,
 *                   f16/bf16/f32 inputs, size symbols and small constant dims
 *   gen_schedule.c  a random schedule for it, one directive at a time: every choice looks at
 *                   the scheduled fusion IR of the directives so far (the front end is the only
 *                   source of truth for axis names after a compute_at replay)
 *   schedfuzz.c     the driver: each case in a child process (crashes, aborts and hangs are
 *                   failures too), `fusc check` on it at random small sizes, the verdict, and
 *                   the greedy minimizer of failing cases
 *
 *   case.c          the random numbers and the case: its lines, its text, its sizes
 *
 * Everything is deterministic: case n of seed s uses its own Rng seeded from (s, n), never
 * rand(), so `schedfuzz --seed S --case N` regenerates one case exactly.
 */
#ifndef FUSC_FUZZ_H
#define FUSC_FUZZ_H

#include "scheduler/scheduler.h"

/* ---- random numbers (xoshiro256**, seeded by splitmix64) --------------------------------- */

typedef struct Rng {
	uint64_t s[4];
} Rng;

void rng_seed(Rng *r, uint64_t seed, uint64_t stream);
uint64_t rng_next(Rng *r);
int rng_below(Rng *r, int n);           /* uniform in [0, n); n >= 1 */
bool rng_chance(Rng *r, int percent);   /* true with probability percent / 100 */
#define RNG_PICK(r, arr) ((arr)[rng_below((r), countof(arr))])

/* ---- options ---------------------------------------------------------------------------- */

/* The classes of fusions and schedules the generator makes; each can be left out with
 * --no-NAME (the Makefile's FUZZ_EXCLUDE keeps known-open findings out of `make check`).
 * X(enum suffix, option name, what it is) */
#define FUZZ_FEATURES(X)                                                                     \
	X(REDUCTION, "reduction", "reductions in the fusion (sum, max, min)")                \
	X(REDUCE_IN_EXPR, "reduce-in-expr", "a reduction inside a larger expression")        \
	X(READ_OUTPUT, "read-output", "an output that a later statement reads")             \
	X(READ_OUTPUT_REDUCTION, "read-output-reduction", "an output reduction that a later statement reads (item 3)") \
	X(MULTI_READ, "multi-read", "an intermediate (or a cached input) read by several statements") \
	X(ZERO_D, "zero-d", "0-d results (a reduction over every axis)")                     \
	X(TRANSPOSE, "transpose", "a statement that permutes its indices")                  \
	X(BROADCAST, "broadcast", "a read of a tensor with fewer indices")                  \
	X(CONST_SUB, "const-subscript", "a read at a constant subscript (x[i, 0])")         \
	X(HALF, "half", "f16 and bf16 tensors")                                              \
	X(AUTO, "auto", "no schedule block: the automatic scheduler (4% of the cases)")      \
	X(SPLIT, "split", "split")                                                           \
	X(NESTED_SPLIT, "nested-split", "a split of an axis made by a split or merge")      \
	X(MERGE, "merge", "merge")                                                           \
	X(REORDER, "reorder", "reorder")                                                     \
	X(BIND_BLOCK, "bind-block", "bind to blockIdx")                                     \
	X(BIND_THREAD, "bind-thread", "bind to threadIdx")                                  \
	X(BLOCK_REDUCE, "block-reduce", "a reduction axis bound to threadIdx")              \
	X(GRID_REDUCE, "grid-reduce", "a reduction axis bound to blockIdx")                 \
	X(UNROLL, "unroll", "unroll")                                                        \
	X(VECTORIZE, "vectorize", "vectorize")                                               \
	X(CACHE_SHARED, "cache-shared", "cache_after/cache_before/memory in shared memory")  \
	X(CACHE_LOCAL, "cache-local", "cache_after/cache_before/memory in registers")        \
	X(CACHE_BEFORE, "cache-before", "cache_before")                                     \
	X(COMPUTE_AT, "compute-at", "explicit compute_at (else the default placement)")     \
	X(CP_ASYNC, "cp-async", "cp_async")                                                  \
	X(STAGES, "stages", "stages / double_buffer")                                        \
	X(NESTED_STAGES, "nested-stages", "a buffered cache computed inside another one's loops") \
	X(STAGES_ON_CHAIN, "stages-on-chain", "stages on a cache of a cache (xl = xs.cache_after)") \
	X(PAD, "pad", "pad(n) on a shared cache")                                             \
	X(RFACTOR, "rfactor", "rfactor")                                                     \
	X(PRODUCER_BLOCK, "producer-block", "a blockIdx binding of a shared tensor's own axis") \
	X(SHARED_IN_THREADS, "shared-in-threads", "a shared tensor computed inside a threadIdx loop") \
	X(PAR_REUSE, "par-reuse", "an own axis bound to a type a compute_at loop binds")     \
	X(BIND_LOCAL, "bind-local", "a threadIdx binding of a register tensor's own axis")  \
	X(FULLY_BOUND_REDUCTION, "fully-bound-reduction", "every reduction axis bound (no loop)") \
	X(REDUCE_IN_WIDER_BLOCK, "reduce-in-wider-block", "a block reduction over fewer threads than the launch has")

typedef enum FuzzFeature {
#define X(e, n, w) FF_##e,
	FUZZ_FEATURES(X)
#undef X
	FF_COUNT
} FuzzFeature;

const char *fuzz_feature_name(FuzzFeature f);
const char *fuzz_feature_what(FuzzFeature f);

typedef struct FuzzOpts {
	bool off[FF_COUNT];  /* --no-NAME */
	int max_dirs;        /* directives per schedule at most */
	int64_t max_elems;   /* the sizes chosen keep every tensor below this many elements */
	bool only_auto;      /* --only-auto: every case without a schedule block */
} FuzzOpts;

static inline bool fuzz_on(const FuzzOpts *o, FuzzFeature f) { return !o->off[f]; }

/* ---- a case ----------------------------------------------------------------------------- */

/* One line of the case's text that the minimizer may drop. `unit` ties lines that go
 * together (a statement and its entry in the output list): dropping one drops all. */
typedef struct Item {
	char *text;
	int unit;
	bool dropped;
} Item;

typedef struct ItemList {
	Item *v;
	int n, cap;
} ItemList;

/* A size symbol of the fusion and the sizes it is checked at. */
typedef struct SizeDim {
	char name[8];
	int64_t value[2];  /* two runs per case */
} SizeDim;

#define FUZZ_MAX_SYMS 4

typedef struct Case {
	char name[16];
	ItemList params;   /* "x0: f16[M, 8]", "a: f32" */
	ItemList outs;     /* "y0: f32[M, N]" */
	ItemList stmts;    /* "y0[i, j] = x0[i, j] * 2.0;" */
	ItemList dirs;     /* "y0.split(i, 4) -> (o1, i1);" */
	SizeDim syms[FUZZ_MAX_SYMS];
	int nsyms;
	bool auto_schedule; /* no schedule block: the automatic scheduler picks one */
	int next_unit;
	int next_name;     /* counter for fresh axis and tensor names */
} Case;

void item_add(ItemList *l, int unit, const char *fmt, ...) PRINTF(3, 4);
void item_pop(ItemList *l);
void case_free(Case *c);
Case case_copy(const Case *c);
/* The .fus text of the case (dropped items left out); returns the line of the last
 * directive (0 without one). */
int case_render(const Case *c, Buf *out);
/* The case as lines "KIND UNIT DROPPED TEXT" (and the sizes), and back: how a child process
 * hands a case to the driver. case_parse returns false on malformed text. */
void case_serialize(const Case *c, Buf *out);
bool case_parse(const char *text, Case *c);
/* "M=5,N=13" for run r (0 or 1), only the symbols the text still uses. */
void case_dims(const Case *c, int r, Buf *out);

/* gen_fusion.c: the fusion part of a fresh case (params, outs, stmts, syms). */
void gen_fusion(Rng *r, const FuzzOpts *o, Case *c);

/* gen_schedule.c: appends a schedule to c. Before each choice the case so far goes through
 * the front end (fuzz_frontend); `trace` receives the text of each attempt before it is
 * compiled, so that a crash of the front end leaves the text that caused it. */
typedef void (*FuzzTrace)(const char *text, void *ctx);
void gen_schedule(Rng *r, const FuzzOpts *o, Case *c, FuzzTrace trace, void *ctx);

/* The front end on text (schedfuzz.c): parse, sema and schedule_apply, like
 * compile_program, except that the program is returned even when the schedule reported
 * errors (NULL only when parse or sema did). *diags gets the rendered diagnostics
 * (malloc'd) and *nerrors their error count. The file is called FUZZ_FILE_NAME. */
#define FUZZ_FILE_NAME "case.fus"
Program *fuzz_frontend(Arena *a, const char *text, char **diags, int *nerrors);
/* Whether rendered diagnostics hold an error at line `line` of FUZZ_FILE_NAME. */
bool fuzz_error_at_line(const char *diags, int line);

#endif
