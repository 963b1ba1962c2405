/* convert.c: value conversions on the host, as the GPU does them: rounding a double to the
 * value set of a float dtype, the exact conversions between doubles and f16/bf16 bits, and
 * float to integer. The reference interpreter, the simulator, the backend (constants) and
 * libfusrt (a launch's f16/bf16 scalar arguments) share them.
 */
#include <math.h>
#include <string.h>

#include "ir/ir.h"

/* Rounds x to a binary float format with `mant` explicit mantissa bits, minimum normal
 * exponent `emin` and largest finite value `maxval`, ties to even. x / q is exact (a power of
 * two scaling of a double far from the double's limits) and nearbyint rounds to even. */
static double round_format(double x, int mant, int emin, double maxval)
{
	if (isnan(x) || isinf(x) || x == 0)
		return x;
	int e;
	frexp(x, &e); /* |x| = m * 2^e, m in [0.5, 1): leading bit is 2^(e-1) */
	int lead = e - 1 < emin ? emin : e - 1;
	double q = ldexp(1.0, lead - mant);
	double r = nearbyint(x / q) * q;
	if (fabs(r) > maxval)
		return copysign(INFINITY, x);
	return r;
}

static const double F16_MAX = 65504.0;
static double bf16_max(void) { return ldexp(255.0, 120); } /* (2 - 2^-7) * 2^127 */

double dtype_round(DType t, double x)
{
	switch (t) {
	case DT_F16: return round_format(x, 10, -14, F16_MAX);
	case DT_BF16: return round_format(x, 7, -126, bf16_max());
	case DT_F32: return (double)(float)x;
	default: return x;
	}
}

uint16_t dtype_f16_bits(double x)
{
	double r = round_format(x, 10, -14, F16_MAX);
	uint16_t sign = signbit(r) ? 0x8000 : 0;
	double a = fabs(r);

	if (isnan(r))
		return 0x7e00;
	if (isinf(r))
		return sign | 0x7c00;
	if (a == 0)
		return sign;
	int e;
	frexp(a, &e);
	if (e - 1 < -14) /* subnormal: a multiple of 2^-24 */
		return sign | (uint16_t)ldexp(a, 24);
	uint16_t m = (uint16_t)(ldexp(a, -(e - 1) + 10) - 1024);
	return sign | (uint16_t)((e - 1 + 15) << 10) | m;
}

double dtype_f16_value(uint16_t bits)
{
	double s = bits & 0x8000 ? -1.0 : 1.0;
	int ex = (bits >> 10) & 0x1f, m = bits & 0x3ff;

	if (ex == 0x1f)
		return m ? NAN : s * INFINITY;
	if (ex == 0)
		return s * ldexp(m, -24);
	return s * ldexp(1024 + m, ex - 25);
}

uint16_t dtype_bf16_bits(double x)
{
	double r = round_format(x, 7, -126, bf16_max());
	float f = (float)r; /* exact: a bf16 value is a float value */
	uint32_t u;

	if (isnan(r))
		return 0x7fc0;
	memcpy(&u, &f, 4);
	return (uint16_t)(u >> 16);
}

double dtype_bf16_value(uint16_t bits)
{
	uint32_t u = (uint32_t)bits << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

int64_t dtype_float_to_int(double x, DType to)
{
	double lo = to == DT_I32 ? -2147483648.0 : -9223372036854775808.0;
	double hi = to == DT_I32 ? 2147483647.0 : 9223372036854775807.0;

	if (isnan(x))
		return 0;
	x = trunc(x);
	if (x <= lo)
		return to == DT_I32 ? INT32_MIN : INT64_MIN;
	if (x >= hi)
		return to == DT_I32 ? INT32_MAX : INT64_MAX;
	return (int64_t)x;
}
