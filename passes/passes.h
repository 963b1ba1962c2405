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

typedef struct LowerOptions {
	int arch;            /* target sm version, e.g. 80 */
	bool no_arch_check;  /* lower anyway when the target is too old (with a warning) */
	bool verify;         /* run ir_verify between passes */
	const char *dump_after; /* NULL, a pass name or "all": print the IR after it */
	FILE *dump_out;
	bool time_passes;    /* print per-pass times to dump_out (or stderr) */
} LowerOptions;

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
bool pass_predicate(Kernel *k, Diag *d);
/* passes/redundant_write.c: only index 0 of an unbound parallel dim writes shared/global. */
bool pass_redundant_write(Kernel *k, Diag *d);
/* passes/indexing.c: logical subscripts -> flattened offsets (EX_ACCESS -> EX_LOAD). */
bool pass_indexing(Kernel *k, Diag *d);
/* The axes that index a materialized intermediate's buffer (local: its own serial axes; shared:
 * also its own thread-bound axes; never aliases or reduction axes), in domain order. The buffer
 * is row-major over their extents. */
int index_buffer_axes(Arena *a, Tensor *t, Axis ***out);
/* Element offset of t[subs] (logical subscripts): row-major over the shape for inputs and
 * outputs, over the buffer axes (computed forward from the subscripts) for intermediates. */
IrExpr *index_offset(Arena *a, Tensor *t, IrExpr **subs, int n);
/* passes/vectorize.c: vectorized loops -> vector loads/stores with a scalar tail. */
bool pass_vectorize(Kernel *k, Diag *d);
/* passes/allocation.c: buffers for materialized intermediates. */
bool pass_allocation(Kernel *k, Diag *d);
/* passes/arch.c: minimum architecture from the features used; check against the target. */
bool pass_arch(Kernel *k, Diag *d);
/* passes/simplify.c: constant folding and dead branch removal. */
bool pass_simplify(Kernel *k, Diag *d);

/* The options of the lowering in progress (set by lower_fusion for the passes). */
extern const LowerOptions *pass_options;

#endif
