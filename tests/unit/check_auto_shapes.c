/* check_auto_shapes.c: the automatic scheduler on fusions of every shape (issue 11 items 3
 * and 10): each must compile without a schedule block, and its kernel must match the
 * reference interpreter in the simulator at sizes that no split divides. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "interp/interp.h"
#include "interp/sim.h"
#include "tests/unit/testutil.h"
#include "tools/cli.h"

void parse_dims(Fusion *f, const char *dims, int64_t *sizes)
{
	for (int i = 0; i < f->nsizes; i++) {
		const char *name = f->sizes[i]->name, *at = dims;
		size_t n = strlen(name);
		while ((at = strstr(at, name)) && ((at > dims && at[-1] != ',') || at[n] != '='))
			at += n;
		ck_assert_msg(at != NULL, "no size %s in %s", name, dims);
		sizes[f->sizes[i]->index] = strtoll(at + n + 1, NULL, 10);
	}
}

/* `fusc check` in miniature: k (lowered from f) runs in the simulator on seeded inputs at
 * `dims` with no report; whether every output element is written and within the dtype's
 * tolerance of the reference. */
bool sim_agrees(Kernel *k, const char *dims)
{
	SimFault first = SF_ERROR; /* (printed only when there are reports) */
	int n = 0;
	bool agree = sim_agrees_reporting(k, dims, &n, &first);
	ck_assert_msg(n == 0, "%s at %s: %d simulator reports (the first: %s)", k->fusion->name,
		      dims, n, sim_fault_name(first));
	return agree;
}

bool sim_agrees_reporting(Kernel *k, const char *dims, int *nreports, SimFault *first)
{
	Fusion *f = k->fusion;
	int64_t sizes[16] = {0};
	ck_assert_int_le(f->nsizes, 16);
	parse_dims(f, dims, sizes);
	ck_assert_int_eq(f->nparams, 0);
	HostTensor in[8] = {0}, out[8] = {0}, ref[8] = {0};
	void *ins[8], *outs[8], *refs[8];
	char *err = NULL;
	ck_assert_int_le(f->ninputs, 8);
	ck_assert_int_le(f->noutputs, 8);
	for (int i = 0; i < f->ninputs; i++) {
		ck_assert_msg(host_tensor_init(&in[i], f->inputs[i], sizes, &err), "%s", err);
		host_tensor_fill_random(&in[i], 17 + (uint64_t)i);
		ins[i] = in[i].data;
	}
	for (int i = 0; i < f->noutputs; i++) {
		ck_assert_msg(host_tensor_init(&out[i], f->outputs[i], sizes, &err) &&
			      host_tensor_init(&ref[i], f->outputs[i], sizes, &err), "%s", err);
		memset(out[i].data, 0xff, host_tensor_bytes(&out[i]));
		outs[i] = out[i].data;
		refs[i] = ref[i].data;
	}
	ck_assert_msg(interp_run(f, sizes, NULL, ins, refs, &err), "%s", err);
	SimResult r;
	SimOptions so = {.seed = 1};
	ck_assert_msg(sim_run(k, sizes, NULL, ins, outs, &so, &r), "%s", r.error);
	*nreports = r.nreports;
	if (r.nreports)
		*first = r.reports[0].kind;
	bool agree = true;
	for (int i = 0; i < f->noutputs; i++) {
		agree &= cli_compare(f->outputs[i], &out[i], &ref[i],
				     cli_tolerance(f->outputs[i], sizes), "simulated", r.written[i], true, NULL);
		host_tensor_free(&out[i]);
		host_tensor_free(&ref[i]);
	}
	for (int i = 0; i < f->ninputs; i++)
		host_tensor_free(&in[i]);
	sim_result_free(&r);
	return agree;
}

static void check_sim(Kernel *k, const char *dims)
{
	ck_assert_msg(sim_agrees(k, dims), "%s at %s: an output differs from the reference",
		      k->fusion->name, dims);
}

void expect_sim(Kernel *k, const char *dims)
{
	check_sim(k, dims);
}

Kernel *expect_sim_picked(Kernel *k, const char *dims)
{
	int64_t sizes[16] = {0};
	parse_dims(k->fusion, dims, sizes);
	Kernel *run = kernel_pick(k, sizes, NULL);
	ck_assert_msg(run != NULL, "no kernel of %s runs at %s", k->name, dims);
	check_sim(run, dims);
	return run;
}

/* Every fusion of src compiles without a schedule block, and each of its kernel variants
 * (size variants, scalar kernels: Kernel.fallback) that may run at the sizes (its size bounds
 * hold) passes check_sim at each of the sizes. */
TestCompile *expect_auto(const char *src, const char **dims, int ndims)
{
	TestCompile *tc = tc_compile(src, true);
	ck_assert_msg(tc->kernels != NULL, "did not compile:\n%s\n%s", src, tc->diags);
	ck_assert_str_eq(tc->diags, "");
	for (int i = 0; i < tc->prog->nfusions; i++)
		for (int s = 0; s < ndims; s++)
			for (Kernel *k = tc->kernels[i]; k; k = k->fallback) {
				int64_t sizes[16] = {0};
				parse_dims(k->fusion, dims[s], sizes);
				bool within = true;
				for (int p = 0; p < k->preconds.len; p++) {
					Precond *c = VEC_AT(k->preconds, Precond, p);
					within &= c->kind != PC_AT_MOST ||
						  precond_holds(k->fusion, c, sizes, NULL);
				}
				if (within)
					check_sim(k, dims[s]);
			}
	return tc;
}

/* ---- item 10: rank-3 and rank-4 pointwise fusions are vectorized ----------------------- */

/* All axes merged into one and split by the vector width: the merged index's offset
 * ((i * B + j) * C + k read back from its divisions and remainders) simplifies to the merged
 * index itself, so the vectorize pass sees unit stride. Used to fail with "cannot vectorize
 * 'v': y is not written as 4 contiguous elements" on a directive the user never wrote. */
START_TEST(test_auto_rank3_rank4_vectorized)
{
	static const char src[] =
		"fusion r3(x: f32[A, B, C]) -> (y: f32[A, B, C]) {\n"
		"  y[i, j, k] = x[i, j, k] * 2.0;\n"
		"}\n"
		"fusion r4(x: f16[A, B, C, D]) -> (y: f16[A, B, C, D]) {\n"
		"  y[i, j, k, l] = x[i, j, k, l] * 2.0 + 1.0;\n"
		"}\n"
		"fusion r4c(x: bf16[A, 3, 5, D], b: bf16[A, 3, 5, D]) -> (y: bf16[A, 3, 5, D]) {\n"
		"  y[i, j, k, l] = x[i, j, k, l] - b[i, j, k, l];\n"
		"}\n";
	const char *dims[] = {"A=3,B=5,C=7,D=9", "A=2,B=3,C=4,D=8", "A=1,B=1,C=1,D=1"};
	TestCompile *tc = expect_auto(src, dims, 3);
	for (int i = 0; i < 3; i++) {
		char *k = tc_kernel_ir(tc, i);
		ck_assert_contains(k, "] = y_vec[0 : ");
		free(k);
	}
	tc_free(tc);
}
END_TEST

Suite *auto_shapes_suite(void)
{
	Suite *s = suite_create("auto_shapes");
	TCase *tc = tcase_create("auto_shapes");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_auto_rank3_rank4_vectorized);
	suite_add_tcase(s, tc);
	return s;
}
