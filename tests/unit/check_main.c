/* The one runner of every Check suite. Suites are listed in build/suites.h, generated from the
 * tests/unit/check_*.c file names: check_lexer.c exports `Suite *lexer_suite(void)`.
 * Tests that need a GPU go in TCase's tagged "gpu"; without a CUDA device they are excluded
 * and the runner prints "skipped: no CUDA device". */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "tests/unit/testutil.h"

#define SUITE(n) Suite *n##_suite(void);
#include "suites.h"
#undef SUITE

int main(void)
{
	SRunner *sr = srunner_create(NULL);
#define SUITE(n) srunner_add_suite(sr, n##_suite());
#include "suites.h"
#undef SUITE
	const char *exclude = NULL;
	if (!rt_have_cuda_device()) {
		exclude = "gpu";
		printf("skipped: no CUDA device (Check tests tagged \"gpu\" are excluded)\n");
	}
	srunner_run_tagged(sr, NULL, NULL, NULL, exclude, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
