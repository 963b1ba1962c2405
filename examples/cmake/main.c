/* main.c: calls the launcher that fusc_add_library built from examples/saxpy.fus (with the
 * prefix ex_). The null inputs are refused by the launcher, before any CUDA call, with its own
 * message: the program runs without a GPU and exits 0 when that refusal came. */
#include <stdio.h>

#include "saxpy.h"

int main(void)
{
	cudaError_t e = ex_saxpy(2.0f, NULL, NULL, NULL, 1024, 0);
	printf("ex_saxpy: %s\n", e == cudaSuccess ? "ok" : ex_saxpy_last_error());
	return e == cudaSuccess;
}
