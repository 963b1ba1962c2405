/* interp.h: the reference interpreter, the oracle of every numeric test.
 *
 * It evaluates a fusion's algorithm on the CPU straight from the fusion IR, ignoring the
 * schedule: every tensor of Fusion.tensors is computed in order, element by element, from its
 * `def` (an IrExpr over its root axes). Semantics (docs/runtime.md):
 *   - values are rounded to a tensor's dtype when stored (f16/bf16 round to nearest even,
 *     emulated exactly; f32 as float; i32 wraps);
 *   - each operator computes in its result dtype (f16/bf16 arithmetic is f32) and rounds to it;
 *   - reductions accumulate in double (floats) or int64 (integers) and round once at the end;
 *     max/min (reductions and the binary built-ins) propagate NaN;
 *   - integer division or modulo by zero is undefined on the GPU: interp_run fails with a
 *     message (the simulator reports it and goes on with 0); INT_MIN / -1 wraps.
 * Host buffers are raw bytes in the tensor's dtype, row-major (f16/bf16: uint16_t bits).
 */
#ifndef FUSC_INTERP_H
#define FUSC_INTERP_H

#include "../ir/ir.h"


/* A tensor in host memory. */
typedef struct HostTensor {
	DType dtype;
	int ndim;
	int64_t dims[IR_MAX_DIMS];
	void *data; /* numel * dtype_size bytes, row-major */
} HostTensor;

/* Runs fusion f. sizes: one per f->sizes (by SizeSym.index). scalars: one per f->params in
 * order (converted to the param's dtype). inputs: one buffer per f->inputs, outputs: one per
 * f->outputs (filled). False with *err (malloc'd) on inconsistent sizes or when memory runs
 * out; the outputs are then unspecified. */
bool interp_run(Fusion *f, const int64_t *sizes, const double *scalars, void **inputs,
		void **outputs, char **err);

/* HostTensor helpers. host_tensor_init allocates zeroed data (false on overflow/no memory). */
bool host_tensor_init(HostTensor *h, Tensor *t, const int64_t *sizes, char **err);
void host_tensor_free(HostTensor *h);
int64_t host_tensor_numel(const HostTensor *h);
size_t host_tensor_bytes(const HostTensor *h);
/* Fills with deterministic pseudo-random values from seed: floats uniform in [-1, 1] (rounded
 * to the dtype), integers uniform in [-8, 8] without 0, bools 0/1. Never all zeros. */
void host_tensor_fill_random(HostTensor *h, uint64_t seed);
/* Element i as a double (f16/bf16 decoded, integers converted). */
double host_tensor_get(const HostTensor *h, int64_t i);

/* Element values, shared by the reference interpreter and the simulator: a double for
 * floating dtypes, an int64 for integers and bool, already rounded to the dtype. */
typedef union InterpVal {
	double f;
	int64_t i;
} InterpVal;
/* Element i of a raw host buffer of dtype t, and back (rounding/wrapping to t). */
InterpVal interp_load(const void *data, DType t, int64_t i);
void interp_store(void *data, DType t, int64_t i, InterpVal v);
/* Wraps an integer to the integer dtype t (i32 wraps, bool is x != 0). */
int64_t interp_wrap_int(int64_t x, DType t);
/* + - * / % neg ceildiv on operands in t's representation (floats round to t, integers wrap,
 * x / 0 == 0 without a C division: callers check interp_div_by_zero first). */
InterpVal interp_arith(IrOp op, DType t, InterpVal a, InterpVal b);
/* op on operands of compute dtype t is an integer division (/ % ceildiv) by zero: undefined
 * on the GPU, so the reference fails and the simulator reports it (interp_arith gives 0). */
bool interp_div_by_zero(IrOp op, DType t, InterpVal b);
/* The math built-ins (exp ... pow) in double. */
double interp_fmath(IrOp op, double x, double y);
/* OP_EXP_LOWP as the GPU computes it in f32, but for ex2's own error (2 ulp): 2^t with
 * t = x * log2(e) rounded to f32 (frontend/lowp_exp.c); the simulator's model. */
double interp_exp_lowp(double x);

/* The number of terms summed into an element of t: the product of the extents of the sum
 * reductions of t and, transitively, of the tensors its definition reads (1 without any; max
 * and min add no rounding error and do not count). Used to scale comparison tolerances. */
double interp_reduction_terms(Tensor *t, const int64_t *sizes);

/* What interp_run costs at these sizes, to refuse work above a budget before starting it:
 * the elements it holds (every tensor of f) and the terms it evaluates (each definition once
 * per element, a reduction's body once per term); both saturate at INT64_MAX. False (with *err, malloc'd) when a dim cannot be evaluated. */
typedef struct InterpCost {
	int64_t elements, evals;
} InterpCost;
bool interp_cost(Fusion *f, const int64_t *sizes, InterpCost *out, char **err);


/* interp/simulate.c: the kernel simulator behind `fusc check` (docs/check.md). It runs a
 * lowered Kernel (the IR the CUDA backend prints) on the CPU, thread by thread, with CUDA's
 * memory and barrier semantics, and reports the faults its detectors find. */

/* X(enum suffix, text) */
#define SIM_FAULTS(X)                                        \
	X(OOB, "out-of-bounds access")                       \
	X(UNINIT, "read of uninitialized memory")            \
	X(MISALIGNED, "misaligned vector access")            \
	X(RACE, "shared-memory data race")                   \
	X(GLOBAL_RACE, "global-memory data race")            \
	X(ASYNC_READ, "read of a cp.async destination before its wait") \
	X(BARRIER, "barrier not reached by every thread")    \
	X(ASYNC_PENDING, "cp.async group in flight at kernel end") \
	X(DIV_ZERO, "integer division by zero")              \
	X(ERROR, "simulation error")

typedef enum SimFault {
#define X(e, s) SF_##e,
	SIM_FAULTS(X)
#undef X
	SF_COUNT
} SimFault;
const char *sim_fault_name(SimFault f);

/* One fault, with the first occurrence's details and how often it recurred (reports are
 * merged by kind, statement and buffer). */
typedef struct SimReport {
	SimFault kind;
	Stmt *stmt;          /* the kernel-IR statement at fault (NULL: none) */
	Span span;           /* the .fus text responsible: stmt's span, else the fusion's */
	DType dtype;         /* the buffer's dtype */
	const char *buffer;  /* tensor or variable name (NULL: none) */
	MemType mem;
	bool write;
	int64_t offset;      /* element offset of the access */
	int64_t size;        /* elements in the buffer */
	int64_t block[3], thread[3];
	/* RACE/GLOBAL_RACE: the conflicting access; BARRIER: a thread that did not arrive */
	Stmt *other;
	Span other_span;
	bool other_write;
	bool has_other_thread;
	int64_t other_block[3], other_thread[3];
	char *detail;        /* extra text or NULL (malloc'd) */
	int64_t count;
} SimReport;

typedef struct SimOptions {
	int64_t max_blocks;  /* simulate at most this many blocks (a seeded sample that always
			      * includes the first and the last); 0: every block */
	uint64_t seed;
	/* The budget (docs/check.md), 0: none. max_elements bounds the elements held at once:
	 * every global buffer, and each shared or local allocation on top of them (a local array
	 * once per thread context). max_steps bounds the work: one step per thread started, per
	 * statement executed and per loop iteration. Work the simulation can tell in advance is
	 * above the budget (the blocks times their threads, a loop's extent) is refused before
	 * it starts; sim_run then fails with SimResult.over_budget set. */
	int64_t max_elements;
	int64_t max_steps;
	/* Run the sampled blocks in decreasing order (a test's check that a grid reduction's
	 * result does not depend on the order in which blocks finish). */
	bool reverse_blocks;
} SimOptions;

typedef struct SimResult {
	SimReport *reports;
	int nreports;
	int64_t blocks_total, blocks_run;
	int64_t threads_per_block;
	/* per output (f->outputs order): 1 for each element the kernel wrote (malloc'd) */
	unsigned char **written;
	int noutputs;
	char *error;         /* a setup failure (sizes, memory) or the budget, malloc'd; NULL if
			      * none */
	bool over_budget;    /* error is SimOptions' budget: the work was refused, not checked */
	int64_t steps;       /* the steps taken (SimOptions.max_steps) */
	/* The bank model of ldmatrix (docs/check.md, "Bank conflicts"): the phases run (8 rows of
	 * 16 bytes each, one per matrix), the shared-memory wavefronts they took, the most one took
	 * (1: conflict-free). */
	int64_t ldm_phases, ldm_wavefronts;
	int ldm_worst;
} SimResult;

/* Runs kernel k with the given sizes (by SizeSym.index), scalars (f->params order), inputs
 * and outputs (raw host buffers as for interp_run). Elements the kernel does not write are left
 * as they were. False when the simulation could not be set up or ran over its budget
 * (r->error; the outputs are then incomplete). */
bool sim_run(Kernel *k, const int64_t *sizes, const double *scalars, void **inputs,
	     void **outputs, const SimOptions *o, SimResult *r);
void sim_result_free(SimResult *r);
/* interp/sim_plan.c: sim_run of a segmented plan (Kernel.segments; sim_run calls it): the
 * workspace, then each segment's kernel for these sizes, in order; the results added up. */
bool sim_run_plan(Kernel *k, const int64_t *sizes, const double *scalars, void **inputs,
		  void **outputs, const SimOptions *o, SimResult *r);
/* The elements of k's global buffers at these sizes (inputs, outputs, grid-reduction
 * workspaces), or -1 when they cannot be evaluated or overflow: what sim_run checks against
 * max_elements before it allocates anything. */
int64_t sim_global_elements(Kernel *k, const int64_t *sizes);
/* Prints one report: `file:line:col: check: KIND ...` (the span of the .fus text that produced
 * the statement, via diag_line_col), the block/thread/address, and the kernel-IR statement. */
void sim_report_print(Diag *d, const SimReport *r, FILE *out);
/* The kernel-IR statement as one line (no nested bodies); malloc'd. */
char *sim_stmt_text(Stmt *s);

/* tools/check.c: `fusc check FILE [--fusion NAME] [--dims M=..] [--size S] [--seed S]
 * [--max-blocks N]`. Returns the exit status (0 PASS, 1 report or mismatch, 2 usage). */
int fusc_check_main(int argc, char **argv);

#endif
