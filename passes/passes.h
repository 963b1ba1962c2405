/* passes.h: the pass manager and every lowering pass.
 *
 * Lowering takes one scheduled Fusion to one Kernel. The first pass builds the kernel IR from
 * the fusion IR; every later pass rewrites the kernel IR in place. The pipeline is the list in
 * passes/pipeline.c; each pass is one file with one entry point `bool pass_NAME(Kernel *, Diag *)`
 * that returns false after reporting a (user) error. Between passes, test and debug builds run
 * ir_verify().
 */
#ifndef FUSC_PASSES_H
#define FUSC_PASSES_H

#include "../ir/ir.h"


/* The most elements a `local` (per-thread) buffer may have (passes/allocation.c;
 * docs/design.md, "Limits"). */
#define PASS_MAX_LOCAL_ELEMS 4096

typedef bool (*PassFn)(Kernel *k, Diag *d);
typedef struct Pass {
	const char *name;
	PassFn run;
	const char *what; /* one line for --print-passes */
} Pass;

/* passes/pipeline.c */
extern const Pass pass_list[];
extern const int pass_count;
/* Lowers one fusion. Returns NULL after reporting errors into d. */
Kernel *lower_fusion(Arena *a, Diag *d, Fusion *f, const LowerOptions *o);
void passes_print(FILE *out);
bool pass_exists(const char *name);

/* passes/loop_nest.c: loop nests from the scheduled domains; inlines; EX_AXIS -> loop vars. */
bool pass_loop_nest(Kernel *k, Diag *d);
/* passes/predicate.c: bounds predicates for non-divisible splits and partially used
 * parallel dimensions; no out-of-bounds access, ever. */
/* private_local.c: every element of a register tensor is read only by the thread that wrote it
 * (an error at the directive that put the tensor in registers otherwise) */
bool pass_private_local(Kernel *k, Diag *d);
bool pass_predicate(Kernel *k, Diag *d);
/* passes/redundant_write.c: only index 0 of an unbound parallel dim writes shared/global. */
bool pass_redundant_write(Kernel *k, Diag *d);
/* passes/indexing.c: logical subscripts -> flattened offsets (EX_ACCESS -> EX_LOAD). */
bool pass_indexing(Kernel *k, Diag *d);
/* passes/mma.c: the accumulation nest of a `t.mma(...)` accumulator -> KS_MMA with the
 * fragment offsets of each lane (docs/tensor_cores.md). */
bool pass_mma(Kernel *k, Diag *d);
/* The axes that index a materialized intermediate's buffer (local: its own serial axes; shared:
 * also its own thread-bound axes; never aliases or reduction axes), in domain order. The buffer
 * is row-major over their extents. */
int index_buffer_axes(Arena *a, Tensor *t, Axis ***out);
/* The extent that buffer axis i of the n from index_buffer_axes has in t's layout: its own,
 * the innermost one's longer by t->pad. NULL when it is not a constant. */
bool index_buffer_extent(Tensor *t, Axis **axes, int n, int i, int64_t *e);
/* The size in elements of a buffer whose axes' extents (index_buffer_extent) multiply to
 * `size`, with pad(n, e): size / e * (e + n). False (an error at the pad) when e does not
 * divide size. */
bool index_padded_size(Diag *d, Tensor *t, int64_t *size);
/* swizzle(S) of tensor t lays out its buffer (false, with an error at the directive, when it
 * cannot: docs/caching.md, "swizzle"). */
bool index_swizzle_check(Diag *d, Arena *a, Tensor *t);
/* Offset off (elements of es bytes) of a buffer of r rows of w elements in the S-byte swizzled
 * layout: the shared layout's one address function, for every writer and reader (indexing.c). */
IrExpr *index_swizzle(Arena *a, const IrRange *rg, IrExpr *off, int64_t es, int64_t S, int64_t w,
		      int64_t r);
/* The position along axis ax (of the tensor) of the element with root values subs: split
 * r / F and r % F, merge o * E_inner + i (indexing.c). */
IrExpr *index_forward(Arena *a, const IrRange *rg, Axis *ax, IrExpr **subs, int n);
/* Element offset of t[subs] (logical subscripts): row-major over the shape for inputs and
 * outputs, over the buffer axes (computed forward from the subscripts) for intermediates. */
IrExpr *index_offset(Arena *a, const IrRange *rg, Tensor *t, IrExpr **subs, int n);
/* passes/grid_reduce.c: the store of a tensor with reduction axes bound to blockIdx.* becomes
 * a KS_GRID_REDUCE around it (workspace in Kernel.grid_ws; docs/reductions.md). */
bool pass_grid_reduce(Kernel *k, Diag *d);
/* passes/cp_async.c: copies into cp_async tensors -> KS_CP_ASYNC (zero-fill by src-size, a
 * real branch only for shared addresses out of range), one commit after each load nest. */
bool pass_cp_async(Kernel *k, Diag *d);
/* Whether t's copies are cp.async in k: not in a kernel lowered without vector accesses
 * (LowerOptions.no_vectorize), whose copies stay plain stores. */
bool cp_async_kept(Kernel *k, Tensor *t);
/* passes/circular_buffer.c: stages(n, p): n slots, prologue, per-stage commits, wait counts,
 * slot-reuse barriers, wait_all after the loop; any loop extent. */
bool pass_circular_buffer(Kernel *k, Diag *d);
/* passes/tail_split.c: a serial loop over ceil(B / C) steps whose body guards rows with
 * `r * C + rest < B` -> the B / C full steps without those guards, then the last step. */
bool pass_tail_split(Kernel *k, Diag *d);
/* passes/vectorize.c: vectorized loops -> vector loads/stores with a scalar tail (with
 * LowerOptions.no_vectorize: plain unrolled loops, lane by lane). */
bool pass_vectorize(Kernel *k, Diag *d);
/* Helpers for passes that emit their own vector accesses (cp_async): the constant c with
 * e = c * v + (terms without v); whether e is a multiple of V whatever its variables; whether
 * t[off] (off of stride 1 in v) can be one V-element access: sets *base = off at v = 0 and
 * records the launch preconditions it needs (pointer alignment, size multiples) for `reason`
 * at `span`. */
bool vectorize_stride(IrExpr *e, Var *v, int64_t *c);
bool vectorize_multiple(Arena *a, IrExpr *e, int64_t V);
bool vectorize_access(Kernel *k, Diag *d, Var *v, int64_t V, Span span, const char *reason,
		      Tensor *t, IrExpr *off, IrExpr **base);
/* passes/allocation.c: buffers for materialized intermediates. */
bool pass_allocation(Kernel *k, Diag *d);
/* passes/shared_memory.c: 16-byte aligned offsets in one pool, reuse of buffers whose
 * lifetimes do not overlap, static or dynamic (> 48 KiB), the target's limit. */
bool pass_shared_memory(Kernel *k, Diag *d);
/* passes/cp_wait.c: a cp.async wait before any read of a cp.async destination. */
bool pass_cp_wait(Kernel *k, Diag *d);
/* passes/sync.c: __syncthreads() for cross-thread RAW/WAR/WAW hazards on shared memory. */
bool pass_sync(Kernel *k, Diag *d);
/* passes/mma_pipeline.c: in a circular-buffered mma mainloop, the fragment loads of the next
 * k step before the mma of this one (docs/tensor_cores.md). */
bool pass_mma_pipeline(Kernel *k, Diag *d);
/* Whether a thread may read (or write) in `readers` an element of t that another thread
 * wrote (or read) in `writers` (offsets after indexing; used by circular_buffer.c). */
bool sync_cross_thread(Kernel *k, Tensor *t, Stmt *writers, Stmt *readers);
/* passes/arch.c: minimum architecture from the features used; check against the target. */
bool pass_arch(Kernel *k, Diag *d);
/* Why lowered kernel k (k->min_arch set) cannot run on sm_`target`: the error and note pass_arch
 * reports for that target, into d (k is not changed). */
void pass_arch_explain(Kernel *k, int target, Diag *d);
/* passes/simplify.c: constant folding and dead branch removal. */
bool pass_simplify(Kernel *k, Diag *d);
/* passes/hoist.c: divisions of thread and block indices by sizes, computed once per thread
 * into kernel-scope locals at the top of the kernel. */
bool pass_hoist(Kernel *k, Diag *d);
/* passes/raster.c: the block order of t.raster(rows, cols, G): the two block indices
 * computed at the top of the kernel from the hardware's, in grouped order (Fusion.raster_*). */
bool pass_raster(Kernel *k, Diag *d);
/* passes/index32.c: a copy of lowered kernel k (its own name `..._i32`, its own preconditions:
 * k's and PC_INDEX32) whose index arithmetic is 32-bit; NULL when k has no body or a constant
 * element count does not fit. lower_fusion puts it in front of k in the launch chain. When
 * every count is a constant that fits, the copy has k's name and preconditions: it replaces k. */
Kernel *index32_variant(Kernel *k);
/* k's PC_INDEX32 precondition (a 32-bit index variant in front of a 64-bit kernel), or NULL. */
Precond *kernel_index32(Kernel *k);

/* The options of the lowering in progress (set by lower_fusion for the passes). */

#endif
