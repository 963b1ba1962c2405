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
 *   - integer division or modulo by zero gives 0 (the GPU's result is undefined).
 * Host buffers are raw bytes in the tensor's dtype, row-major (f16/bf16: uint16_t bits).
 */
#ifndef FUSC_INTERP_H
#define FUSC_INTERP_H

#include "../ir/ir.h"

#define INTERP_MAX_DIMS 8

/* A tensor in host memory. */
typedef struct HostTensor {
	DType dtype;
	int ndim;
	int64_t dims[INTERP_MAX_DIMS];
	void *data; /* numel * dtype_size bytes, row-major */
} HostTensor;

/* Evaluates an i64 expression built from EX_INT, EX_SIZE and integer EX_OP/EX_SELECT/EX_CAST
 * nodes (shapes, extents, launch dimensions). False when e uses anything else or divides by 0. */
bool interp_eval_i64(IrExpr *e, const int64_t *sizes, int64_t *out);

/* The dims of tensor t with the given size values. False (with *err, malloc'd) when a dim
 * cannot be evaluated, is negative, or t has more than INTERP_MAX_DIMS dims. */
bool interp_tensor_dims(Tensor *t, const int64_t *sizes, int64_t *dims, char **err);
int64_t interp_numel(const int64_t *dims, int ndim); /* -1 on overflow */

/* Checks that the sizes are consistent with the fusion: no negative size, and every access
 * `x[..., i, ...]` reads dimension d of x with an index i whose extent equals x's dim d (a
 * file that ties N to a constant, say, contradicts N=other). False with *err (malloc'd). */
bool interp_check_sizes(Fusion *f, const int64_t *sizes, char **err);

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

/* Scalar conversions, exact: double -> nearest f16/bf16 (ties to even, overflow to inf). */
uint16_t interp_f16_bits(double x);
uint16_t interp_bf16_bits(double x);
double interp_f16_value(uint16_t bits);
double interp_bf16_value(uint16_t bits);
/* Rounds x to the value set of a floating dtype (f16, bf16, f32; f64 unchanged). */
double interp_round_float(DType t, double x);

/* The number of terms summed into an element of t: the product of the reduction extents of
 * t and, transitively, of the materialized tensors its definition reads (1 without any). Used
 * to scale comparison tolerances. */
double interp_reduction_terms(Tensor *t, const int64_t *sizes);

#endif
