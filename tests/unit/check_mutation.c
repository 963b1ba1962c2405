/* check_mutation.c: the simulator's detectors on REAL lowered IR (issue 5 item 5).
 *
 * Fusions of examples/cp_async/ are compiled through the whole pipeline; each test removes or
 * changes exactly one statement of the lowered kernel (a __syncthreads, a cp.async wait or
 * commit, the branch guarding a shared destination, a shared allocation's size) and checks
 * that the simulator reports exactly the fault that the mutation introduces: its kind, its
 * buffer, and that no other kind is reported. Unmutated kernels give no report and the
 * reference interpreter's values. The tests run from the repository root (make check).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp/sim.h"
#include "tests/unit/testutil.h"

/* ---- compiling and running an example ---------------------------------------------------- */

static char *read_example(const char *name)
{
	char path[256];
	snprintf(path, sizeof path, "examples/cp_async/%s.fus", name);
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f, "cannot open %s (run from the repository root)", path);
	Buf b = {0};
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		buf_printf(&b, "%.*s", (int)n, chunk);
	fclose(f);
	return b.s;
}

static TestCompile *compile_example(const char *name)
{
	char *src = read_example(name);
	TestCompile *tc = tc_compile(src, true);
	free(src);
	ck_assert_msg(tc->kernels, "%s does not compile:\n%s", name, tc->diags);
	return tc;
}

/* Runs kernel 0 on seeded random inputs (every size 67); returns how many output elements
 * differ from the reference interpreter. */
static int64_t simulate(TestCompile *tc, SimResult *r)
{
	Kernel *k = tc->kernels[0];
	Fusion *f = k->fusion;
	int64_t sizes[8] = {67, 67, 67, 67, 67, 67, 67, 67}, bad = 0;
	double scalars[8] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
	HostTensor in[8], out[8], ref[8];
	void *inp[8], *outp[8], *refp[8];
	SimOptions o = {.seed = 1};
	char *err = NULL;

	ck_assert(f->nsizes <= 8 && f->nparams <= 8 && f->ninputs <= 8 && f->noutputs <= 8);
	for (int i = 0; i < f->ninputs; i++) {
		ck_assert(host_tensor_init(&in[i], f->inputs[i], sizes, &err));
		host_tensor_fill_random(&in[i], (uint64_t)i + 1);
		inp[i] = in[i].data;
	}
	for (int i = 0; i < f->noutputs; i++) {
		ck_assert(host_tensor_init(&out[i], f->outputs[i], sizes, &err));
		ck_assert(host_tensor_init(&ref[i], f->outputs[i], sizes, &err));
		outp[i] = out[i].data;
		refp[i] = ref[i].data;
	}
	ck_assert(interp_run(f, sizes, scalars, inp, refp, &err));
	ck_assert_msg(sim_run(k, sizes, scalars, inp, outp, &o, r), "%s", r->error);
	for (int i = 0; i < f->noutputs; i++) {
		for (int64_t e = 0; e < host_tensor_numel(&ref[i]); e++)
			bad += host_tensor_get(&out[i], e) != host_tensor_get(&ref[i], e);
		host_tensor_free(&out[i]);
		host_tensor_free(&ref[i]);
	}
	for (int i = 0; i < f->ninputs; i++)
		host_tensor_free(&in[i]);
	return bad;
}

/* Every report as one line each (for failure messages); malloc'd. */
static char *reports_text(TestCompile *tc, SimResult *r)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);
	for (int i = 0; i < r->nreports; i++)
		sim_report_print(tc->diag, &r->reports[i], f);
	fclose(f);
	return s;
}

/* Asserts that every report is of `kind` on shared buffer `buffer`, and there is one at least;
 * returns the first. */
static SimReport *only_kind(TestCompile *tc, SimResult *r, SimFault kind, const char *buffer)
{
	char *text = reports_text(tc, r);
	ck_assert_msg(r->nreports > 0, "expected a %s report, got none", sim_fault_name(kind));
	for (int i = 0; i < r->nreports; i++) {
		SimReport *p = &r->reports[i];
		ck_assert_msg(p->kind == kind && p->buffer && strcmp(p->buffer, buffer) == 0 &&
				      p->mem == MEM_SHARED,
			      "expected only %s on %s, got:\n%s", sim_fault_name(kind), buffer, text);
	}
	free(text);
	return &r->reports[0];
}

/* The report of `kind` with detail `detail`, or NULL. */
static SimReport *with_detail(SimResult *r, SimFault kind, const char *detail)
{
	for (int i = 0; i < r->nreports; i++)
		if (r->reports[i].kind == kind && r->reports[i].detail &&
		    strcmp(r->reports[i].detail, detail) == 0)
			return &r->reports[i];
	return NULL;
}

/* ---- the test-only IR walk ----------------------------------------------------------------- */

/* The link (pointer to the pointer) of the n-th statement of `kind` in pre-order (0-based),
 * or NULL. *n counts down as statements are passed. */
static Stmt **nth_link(Stmt **link, StmtKind kind, int *n)
{
	for (Stmt *s = *link; s; link = &s->next, s = s->next) {
		if (s->kind == kind && (*n)-- == 0)
			return link;
		Stmt **lists[3], **r = NULL;
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl && !r; i++)
			r = *lists[i] ? nth_link(lists[i], kind, n) : NULL;
		if (r)
			return r;
	}
	return NULL;
}

static Stmt **find_nth(Kernel *k, StmtKind kind, int n)
{
	Stmt **link = nth_link(&k->body, kind, &n);
	ck_assert_msg(link, "no statement of kind %d number %d", (int)kind, n);
	return link;
}

/* Unlinks the statement; returns it. */
static Stmt *remove_at(Stmt **link)
{
	Stmt *s = *link;
	*link = s->next;
	return s;
}

static int count_stmts(Stmt *s, StmtKind kind)
{
	int n = 0;
	for (; s; s = s->next) {
		n += s->kind == kind;
		Stmt **lists[3];
		for (int i = 0, nl = ir_stmt_lists(s, lists); i < nl; i++)
			n += count_stmts(*lists[i], kind);
	}
	return n;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static const char *const examples[] = {
	"cp_async_db1_stages2", "cp_async_db1_stages5", "cp_async_db2", "cp_async_smem_guard",
	"cp_async_simple", "cp_async_f16",
};

START_TEST(test_unmutated_examples_pass)
{
	TestCompile *tc = compile_example(examples[_i]);
	SimResult r;

	ck_assert_int_eq(simulate(tc, &r), 0);
	char *text = reports_text(tc, &r);
	ck_assert_msg(r.nreports == 0, "%s:\n%s", examples[_i], text);
	free(text);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* Compiles `name`, removes the n-th statement of `kind` and simulates; *bad: mismatches. */
static TestCompile *mutate_remove(const char *name, StmtKind kind, int n, SimResult *r,
				  int64_t *bad)
{
	TestCompile *tc = compile_example(name);
	remove_at(find_nth(tc->kernels[0], kind, n));
	*bad = simulate(tc, r);
	return tc;
}

static int count_kind(SimResult *r, SimFault kind)
{
	int n = 0;
	for (int i = 0; i < r->nreports; i++)
		n += r->reports[i].kind == kind;
	return n;
}

/* (a) smem_guard: the second __syncthreads of the loop (after the wait, before out reads As)
 * orders thread t's copy before thread t' != t reads it. Without it: one RAW race on As, the
 * only report; the values still match (the simulator ran the copies first). */
START_TEST(test_raw_sync_removed_is_race)
{
	SimResult r;
	int64_t bad;
	TestCompile *tc = compile_example("cp_async_smem_guard");

	ck_assert_int_eq(count_stmts(tc->kernels[0]->body, KS_SYNC), 2);
	tc_free(tc);
	tc = mutate_remove("cp_async_smem_guard", KS_SYNC, 1, &r, &bad);
	SimReport *p = only_kind(tc, &r, SF_RACE, "As");
	ck_assert_int_eq(r.nreports, 1);
	ck_assert_str_eq(p->detail, "read-after-write");
	ck_assert_int_eq(p->stmt->kind, KS_STORE);
	ck_assert_int_eq(p->other->kind, KS_CP_ASYNC);
	ck_assert(p->other_write && !p->write);
	ck_assert_int_eq(p->thread[0], 1);      /* thread 1 reads As[1], copied by thread 0 */
	ck_assert_int_eq(p->other_thread[0], 0);
	ck_assert_int_eq(p->offset, 1);
	ck_assert_int_eq(bad, 0);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* (a) db1_stages2: the prologue's __syncthreads orders the first slot's copies before the
 * reads of iteration 0. Without it: races on As in both directions (the simulator runs thread
 * 0 to the next barrier before thread 3 copies As[12..15]); the reads that came first also see
 * uninitialized shared memory. Nothing else. */
START_TEST(test_prologue_sync_removed_is_race)
{
	SimResult r;
	int64_t bad;
	TestCompile *tc = mutate_remove("cp_async_db1_stages2", KS_SYNC, 0, &r, &bad);
	char *text = reports_text(tc, &r);

	SimReport *raw = with_detail(&r, SF_RACE, "read-after-write");
	SimReport *war = with_detail(&r, SF_RACE, "write-after-read");
	ck_assert_msg(raw && war, "%s", text);
	ck_assert_str_eq(raw->buffer, "As");
	ck_assert_str_eq(war->buffer, "As");
	ck_assert_int_eq(war->stmt->kind, KS_CP_ASYNC);
	ck_assert_int_eq(count_kind(&r, SF_RACE) + count_kind(&r, SF_UNINIT), r.nreports);
	ck_assert_int_eq(count_kind(&r, SF_UNINIT), 1);
	ck_assert_str_eq(r.reports[0].buffer, "As");
	ck_assert_int_gt(bad, 0);
	free(text);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* (b) db1_stages2: the barrier at the end of the loop body keeps iteration i+1's cp.async out
 * of the slot that iteration i's readers read (WAR). Without it: a write-after-read race whose
 * write is the cp.async and whose read is out's store. */
START_TEST(test_war_sync_removed_is_race)
{
	SimResult r;
	int64_t bad;
	TestCompile *tc = mutate_remove("cp_async_db1_stages2", KS_SYNC, 1, &r, &bad);
	char *text = reports_text(tc, &r);

	SimReport *war = with_detail(&r, SF_RACE, "write-after-read");
	ck_assert_msg(war, "%s", text);
	ck_assert_str_eq(war->buffer, "As");
	ck_assert_int_eq(war->mem, MEM_SHARED);
	ck_assert_int_eq(war->stmt->kind, KS_CP_ASYNC);
	ck_assert_int_eq(war->other->kind, KS_STORE);
	ck_assert(war->write && !war->other_write);
	ck_assert_int_eq(count_kind(&r, SF_RACE) + count_kind(&r, SF_UNINIT), r.nreports);
	for (int i = 0; i < r.nreports; i++)
		ck_assert_str_eq(r.reports[i].buffer, "As");
	ck_assert_int_gt(bad, 0);
	free(text);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* (b) smem_guard: the first barrier of the loop body protects the slot's reuse. Without it the
 * hazard is found as a race on As, the only kind reported (the epoch detector names the pair by
 * the order the simulator ran them: thread 0's next copy lands before thread 1's read). */
START_TEST(test_war_sync_removed_smem_guard)
{
	SimResult r;
	int64_t bad;
	TestCompile *tc = mutate_remove("cp_async_smem_guard", KS_SYNC, 0, &r, &bad);

	SimReport *p = only_kind(tc, &r, SF_RACE, "As");
	ck_assert_int_eq(r.nreports, 1);
	ck_assert_int_eq(p->other->kind, KS_CP_ASYNC);
	ck_assert_int_gt(bad, 0); /* thread 1 read the next row's data */
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* (c) db1_stages2: the loop's cp.async.wait_group 0 retires the copy of the next slot. Without
 * it the next iteration reads the slot while the copy is in flight. */
START_TEST(test_wait_removed_is_read_before_wait)
{
	SimResult r;
	int64_t bad;
	TestCompile *tc = compile_example("cp_async_db1_stages2");
	Stmt **w = find_nth(tc->kernels[0], KS_CP_WAIT, 1);

	ck_assert_int_eq((*w)->wait.n, 0);
	tc_free(tc);
	tc = mutate_remove("cp_async_db1_stages2", KS_CP_WAIT, 1, &r, &bad);
	char *text = reports_text(tc, &r);
	SimReport *p = NULL;
	for (int i = 0; i < r.nreports; i++)
		if (r.reports[i].kind == SF_ASYNC_READ)
			p = &r.reports[i];
	ck_assert_msg(p, "%s", text);
	ck_assert_str_eq(p->buffer, "As");
	ck_assert_int_eq(p->offset, 48); /* slot 1, read in iteration 1 */
	ck_assert_int_eq(p->stmt->kind, KS_STORE);
	/* the in-flight data never landed before the read: also uninitialized reads, nothing else */
	ck_assert_int_eq(count_kind(&r, SF_ASYNC_READ) + count_kind(&r, SF_UNINIT), r.nreports);
	ck_assert_int_gt(bad, 0);
	free(text);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* (d) smem_guard: its only wait removed leaves every copy committed but never waited for. */
START_TEST(test_wait_removed_is_in_flight_at_end)
{
	SimResult r;
	int64_t bad;
	TestCompile *tc = mutate_remove("cp_async_smem_guard", KS_CP_WAIT, 0, &r, &bad);
	SimReport *p = NULL;

	for (int i = 0; i < r.nreports; i++)
		if (r.reports[i].kind == SF_ASYNC_PENDING)
			p = &r.reports[i];
	ck_assert(p);
	ck_assert_str_eq(p->buffer, "As");
	ck_assert_str_eq(p->detail, "committed but never waited for");
	ck_assert_int_eq(p->stmt->kind, KS_CP_ASYNC);
	ck_assert_int_eq(p->count, 12 * 33); /* every copy of the 12 copy threads, every row */
	ck_assert_int_eq(count_kind(&r, SF_ASYNC_READ), 1);
	ck_assert_int_eq(count_kind(&r, SF_UNINIT), 1);
	ck_assert_int_eq(r.nreports, 3);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* (d) smem_guard: the commit removed: wait_group 0 retires nothing, the copies are never
 * committed. */
START_TEST(test_commit_removed_is_never_committed)
{
	SimResult r;
	int64_t bad;
	TestCompile *tc = mutate_remove("cp_async_smem_guard", KS_CP_COMMIT, 0, &r, &bad);
	SimReport *p = NULL;

	for (int i = 0; i < r.nreports; i++)
		if (r.reports[i].kind == SF_ASYNC_PENDING)
			p = &r.reports[i];
	ck_assert(p);
	ck_assert_str_eq(p->detail, "never committed");
	ck_assert_str_eq(p->buffer, "As");
	ck_assert_int_eq(count_kind(&r, SF_ASYNC_READ), 1);
	ck_assert_int_eq(r.nreports, 3); /* with the uninitialized reads */
	ck_assert_int_eq(bad, 33 * 48);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* (d) db1_stages2: the wait_all after the loop is redundant there (the last iteration's group
 * is empty and the loop's wait_group 0 retired the rest): removing it changes nothing. */
START_TEST(test_wait_all_removed_is_harmless_here)
{
	SimResult r;
	int64_t bad;
	TestCompile *tc = compile_example("cp_async_db1_stages2");
	Stmt **w = find_nth(tc->kernels[0], KS_CP_WAIT, 2);

	ck_assert_int_lt((*w)->wait.n, 0);
	ck_assert_ptr_null((*w)->next); /* the kernel's last statement */
	tc_free(tc);
	tc = mutate_remove("cp_async_db1_stages2", KS_CP_WAIT, 2, &r, &bad);
	ck_assert_int_eq(r.nreports, 0);
	ck_assert_int_eq(bad, 0);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* (e) smem_guard: the branch `threadIdx.x < 12` keeps threads 12..47 off As (48 floats): the
 * zero-fill alone would still write As[48..191]. Without it: out-of-bounds writes of As, the
 * only kind reported. */
START_TEST(test_guard_removed_is_shared_oob)
{
	TestCompile *tc = compile_example("cp_async_smem_guard");
	Stmt **link = find_nth(tc->kernels[0], KS_IF, 0);
	Stmt *g = *link;
	SimResult r;

	ck_assert_int_eq(g->branch.then->kind, KS_CP_ASYNC);
	ck_assert_ptr_null(g->branch.then->next);
	g->branch.then->next = g->next;
	*link = g->branch.then;
	simulate(tc, &r);
	SimReport *p = only_kind(tc, &r, SF_OOB, "As");
	ck_assert_int_eq(r.nreports, 1);
	ck_assert(p->write);
	ck_assert_int_eq(p->stmt->kind, KS_CP_ASYNC);
	ck_assert_int_eq(p->thread[0], 12);
	ck_assert_int_eq(p->offset, 48);
	ck_assert_int_eq(p->size, 48);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* (f) db1_stages2: As (2 slots of 48) shrunk to 92 elements: the last vector of slot 1 is out
 * of bounds for the cp.async that writes it and the reads of it. */
START_TEST(test_shrunk_shared_buffer_is_oob)
{
	TestCompile *tc = compile_example("cp_async_db1_stages2");
	Stmt *al = *find_nth(tc->kernels[0], KS_ALLOC, 0);
	SimResult r;

	ck_assert_str_eq(al->alloc.tensor->name, "As");
	ck_assert_int_eq(al->alloc.mem, MEM_SHARED);
	al->alloc.size = ir_int(tc->arena, 92);
	simulate(tc, &r);
	only_kind(tc, &r, SF_OOB, "As");
	ck_assert_int_eq(r.nreports, 2);
	for (int i = 0; i < 2; i++) {
		SimReport *p = &r.reports[i];
		ck_assert_int_eq(p->size, 92);
		ck_assert_int_eq(p->offset, 92);
		ck_assert_int_eq(p->thread[0], p->write ? 11 : 8); /* 48 + 4 * 11; 3 * 12 + 8 + 48 */
		ck_assert_int_eq(p->stmt->kind, p->write ? KS_CP_ASYNC : KS_STORE);
	}
	ck_assert(r.reports[0].write != r.reports[1].write);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* Stmt.size (passes/cp_async.c, a partial last vector): smem_guard's cp.async given
 * size = min(1582 - src_offset, 4) and A shrunk to 1582 elements (1 x 1582): thread 11's
 * vector of the last row, A[1580 .. 1583], reads A[1580, 1581] and zero-fills the rest. No
 * out-of-bounds report (the tail is not read), and the zeros are written and initialized. */
START_TEST(test_cp_async_partial_vector)
{
	TestCompile *tc = compile_example("cp_async_smem_guard");
	Kernel *k = tc->kernels[0];
	Stmt *cp = *find_nth(k, KS_CP_ASYNC, 0);
	Tensor *A = k->fusion->inputs[0];
	Arena *a = tc->arena;
	static float x[1582], y[1584];
	void *in[1] = {x}, *out[1] = {y};
	SimOptions o = {.seed = 1};
	SimResult r;

	cp->copy.size = ir_op(a, OP_MIN, DT_I64, ix_sub(a, ir_int(a, 1582), cp->copy.src_offset),
			 ir_int(a, 4));
	A->shape[0] = ir_int(a, 1);
	A->shape[1] = ir_int(a, 1582);
	for (int i = 0; i < 1582; i++)
		x[i] = (float)i + 0.5f;
	for (int i = 0; i < 1584; i++)
		y[i] = -1;
	ck_assert(sim_run(k, NULL, NULL, in, out, &o, &r));
	char *text = reports_text(tc, &r);
	ck_assert_msg(r.nreports == 0, "%s", text);
	free(text);
	for (int i = 0; i < 1584; i++)
		ck_assert_float_eq(y[i], i < 1582 ? (float)i + 0.5f : 0.0f);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

Suite *mutation_suite(void)
{
	Suite *s = suite_create("mutation");
	TCase *c = tcase_create("cp_async_examples");
	tcase_add_loop_test(c, test_unmutated_examples_pass, 0, countof(examples));
	tcase_add_test(c, test_raw_sync_removed_is_race);
	tcase_add_test(c, test_prologue_sync_removed_is_race);
	tcase_add_test(c, test_war_sync_removed_is_race);
	tcase_add_test(c, test_war_sync_removed_smem_guard);
	tcase_add_test(c, test_wait_removed_is_read_before_wait);
	tcase_add_test(c, test_wait_removed_is_in_flight_at_end);
	tcase_add_test(c, test_commit_removed_is_never_committed);
	tcase_add_test(c, test_wait_all_removed_is_harmless_here);
	tcase_add_test(c, test_guard_removed_is_shared_oob);
	tcase_add_test(c, test_shrunk_shared_buffer_is_oob);
	tcase_add_test(c, test_cp_async_partial_vector);
	suite_add_tcase(s, c);
	return s;
}
