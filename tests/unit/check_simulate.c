/* check_simulate.c: the kernel simulator (interp/simulate.c).
 *
 * Lowered kernels of real fusions give exact results and no reports; faults injected into
 * their lowered IR (a bounds predicate removed, a buffer shrunk, a store removed) are reported
 * exactly: kind, buffer, statement, thread and address. Barrier, race and cp.async detectors
 * run on kernel IR built by hand (a shared buffer written by thread t and read by thread t+1).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "interp/sim.h"
#include "tests/unit/testutil.h"

/* saxpy with a = 2, x[i] = i, y[i] = 0.5: z[i] = 2i + 0.5. */
static void run_saxpy(Kernel *k, int64_t n, float *z, SimResult *r)
{
	float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
	double a = 2;
	void *in[2] = {x, y}, *out[1] = {z};
	SimOptions o = {.seed = 1};

	for (int64_t i = 0; i < n; i++) {
		x[i] = (float)i;
		y[i] = 0.5f;
		z[i] = -1;
	}
	ck_assert(sim_run(k, &n, &a, in, out, &o, r));
	free(x);
	free(y);
}

static int count_kind(SimResult *r, SimFault kind)
{
	int n = 0;
	for (int i = 0; i < r->nreports; i++)
		n += r->reports[i].kind == kind;
	return n;
}

static SimReport *find_report(SimResult *r, SimFault kind, const char *buffer)
{
	for (int i = 0; i < r->nreports; i++)
		if (r->reports[i].kind == kind && r->reports[i].buffer &&
		    strcmp(r->reports[i].buffer, buffer) == 0)
			return &r->reports[i];
	return NULL;
}

static char *report_text(TestCompile *tc, SimReport *rep)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);
	sim_report_print(tc->diag, rep, f);
	fclose(f);
	return s;
}

START_TEST(test_saxpy_exact)
{
	TestCompile *tc = tc_lowered(test_saxpy_src);
	float z[67];
	SimResult r;

	run_saxpy(tc->kernels[0], 67, z, &r);
	ck_assert_int_eq(r.nreports, 0);
	ck_assert_int_eq(r.blocks_run, 1);
	ck_assert_int_eq(r.threads_per_block, 256);
	for (int i = 0; i < 67; i++) {
		ck_assert_float_eq(z[i], 2.0f * (float)i + 0.5f);
		ck_assert_int_eq(r.written[0][i], 1);
	}
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* ---- fault injection in lowered IR ------------------------------------------------------- */

/* Replaces the first `if` without else whose body stores (a bounds predicate) by its body. */
static bool strip_predicate(Stmt **link)
{
	for (Stmt *s = *link; s; link = &s->next, s = s->next) {
		if (s->kind == KS_IF && !s->branch.els && s->branch.then && s->branch.then->kind == KS_STORE) {
			Stmt *last = s->branch.then;
			while (last->next)
				last = last->next;
			last->next = s->next;
			*link = s->branch.then;
			return true;
		}
		if (s->kind == KS_FOR && strip_predicate(&s->loop.body))
			return true;
		if (s->kind == KS_IF && (strip_predicate(&s->branch.then) || strip_predicate(&s->branch.els)))
			return true;
	}
	return false;
}

/* The tensor an allocation or a store is of, or NULL. */
static Tensor *stmt_tensor(Stmt *s)
{
	return s->kind == KS_ALLOC ? s->alloc.tensor : ir_stmt_write(s, NULL);
}

/* The first statement of `kind` touching a tensor whose name starts with `name`. */
static Stmt **find_stmt(Stmt **link, StmtKind kind, const char *name)
{
	for (Stmt *s = *link; s; link = &s->next, s = s->next) {
		Tensor *t = stmt_tensor(s);
		if (s->kind == kind && t && strncmp(t->name, name, strlen(name)) == 0)
			return link;
		Stmt **r = NULL;
		if (s->kind == KS_FOR)
			r = find_stmt(&s->loop.body, kind, name);
		if (s->kind == KS_IF && !(r = find_stmt(&s->branch.then, kind, name)))
			r = find_stmt(&s->branch.els, kind, name);
		if (r)
			return r;
	}
	return NULL;
}

START_TEST(test_missing_predicate_is_oob)
{
	TestCompile *tc = tc_lowered(test_saxpy_src);
	Kernel *k = tc->kernels[0];
	float z[67];
	SimResult r;

	ck_assert(strip_predicate(&k->body));
	run_saxpy(k, 67, z, &r);
	/* exactly the three accesses of the unguarded tail, nothing else */
	ck_assert_int_eq(r.nreports, 3);
	ck_assert_int_eq(count_kind(&r, SF_OOB), 3);
	SimReport *x = find_report(&r, SF_OOB, "x"), *y = find_report(&r, SF_OOB, "y");
	SimReport *w = find_report(&r, SF_OOB, "z");
	ck_assert(x && y && w);
	ck_assert(!x->write && !y->write && w->write);
	/* thread 16 is the first in the tail: its lane 3 is element 67 */
	ck_assert_int_eq(w->offset, 67);
	ck_assert_int_eq(w->size, 67);
	ck_assert_int_eq(w->thread[0], 16);
	ck_assert_int_eq(w->block[0], 0);
	ck_assert_int_eq(w->count, 1 + 239 * 4);
	ck_assert_int_eq(w->stmt->kind, KS_STORE);
	char *text = report_text(tc, w);
	ck_assert_contains(text, "t.fus:2:3: check: out-of-bounds access: write of z[67] "
				 "(global f32, 67 elements)\n  block (0, 0, 0) thread (16, 0, 0); "
				 "957 times in all\n  kernel IR: z[");
	free(text);
	/* the in-bounds elements are still right */
	for (int i = 0; i < 67; i++)
		ck_assert_float_eq(z[i], 2.0f * (float)i + 0.5f);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

START_TEST(test_shrunk_buffer_is_oob)
{
	TestCompile *tc = tc_lowered(test_saxpy_src);
	Kernel *k = tc->kernels[0];
	float z[67];
	SimResult r;

	Stmt **al = find_stmt(&k->body, KS_ALLOC, "x_vec");
	ck_assert(al);
	(*al)->alloc.size = ir_int(k->arena, 2);
	run_saxpy(k, 67, z, &r);
	ck_assert_int_eq(count_kind(&r, SF_OOB), r.nreports);
	SimReport *w = NULL;
	for (int i = 0; i < r.nreports; i++) {
		ck_assert_str_eq(r.reports[i].buffer, (*al)->alloc.tensor->name);
		ck_assert_int_eq(r.reports[i].mem, MEM_LOCAL);
		if (r.reports[i].write)
			w = &r.reports[i];
	}
	ck_assert(w && w->stmt->kind == KS_VSTORE);
	ck_assert_int_eq(w->offset, 2);
	ck_assert_int_eq(w->size, 2);
	ck_assert_int_eq(r.nreports, 2); /* the vector load into it, the lane reads of it */
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

START_TEST(test_removed_store_is_uninit_read)
{
	TestCompile *tc = tc_lowered(test_saxpy_src);
	Kernel *k = tc->kernels[0];
	float z[67];
	SimResult r;

	Stmt **st = find_stmt(&k->body, KS_VSTORE, "y_vec");
	ck_assert(st);
	const char *name = (*st)->copy.tensor->name;
	*st = (*st)->next;
	run_saxpy(k, 67, z, &r);
	ck_assert_int_eq(r.nreports, 1);
	SimReport *u = find_report(&r, SF_UNINIT, name);
	ck_assert(u);
	ck_assert(!u->write);
	ck_assert_int_eq(u->offset, 0);
	ck_assert_int_eq(u->thread[0], 0);
	ck_assert_int_eq(u->count, 16 * 4); /* 16 threads take the vector path, 4 lanes each */
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* Removes the first `if` without else that guards a store to exactly tensor `name`. */
static bool drop_guarded_store(Stmt **link, const char *name)
{
	for (Stmt *s = *link; s; link = &s->next, s = s->next) {
		if (s->kind == KS_IF && !s->branch.els && s->branch.then && s->branch.then->kind == KS_STORE &&
		    strcmp(s->branch.then->store.tensor->name, name) == 0) {
			*link = s->next;
			return true;
		}
		if (s->kind == KS_FOR && drop_guarded_store(&s->loop.body, name))
			return true;
		if (s->kind == KS_IF &&
		    (drop_guarded_store(&s->branch.then, name) || drop_guarded_store(&s->branch.els, name)))
			return true;
	}
	return false;
}

START_TEST(test_removed_tail_store_leaves_unwritten)
{
	TestCompile *tc = tc_lowered(test_saxpy_src);
	Kernel *k = tc->kernels[0];
	float z[67];
	SimResult r;

	ck_assert(drop_guarded_store(&k->body, "z"));
	run_saxpy(k, 67, z, &r);
	ck_assert_int_eq(r.nreports, 0);
	for (int i = 0; i < 67; i++)
		ck_assert_int_eq(r.written[0][i], i < 64);
	ck_assert_float_eq(z[66], -1.0f);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

START_TEST(test_block_sample_has_first_and_last)
{
	TestCompile *tc = tc_lowered(test_saxpy_src);
	int64_t n = 1024 * 50 - 3;
	float *x = calloc((size_t)n, 4), *y = calloc((size_t)n, 4), *z = calloc((size_t)n, 4);
	double a = 1;
	void *in[2] = {x, y}, *out[1] = {z};
	SimOptions o = {.max_blocks = 5, .seed = 7};
	SimResult r;

	ck_assert(sim_run(tc->kernels[0], &n, &a, in, out, &o, &r));
	ck_assert_int_eq(r.blocks_total, 50);
	ck_assert_int_eq(r.blocks_run, 5);
	ck_assert_int_eq(r.nreports, 0);
	int64_t written = 0;
	for (int64_t i = 0; i < n; i++)
		written += r.written[0][i];
	ck_assert_int_eq(written, 4 * 1024 + 1024 - 3); /* the last block is partial */
	ck_assert_int_eq(r.written[0][0], 1);
	ck_assert_int_eq(r.written[0][n - 1], 1);
	sim_result_free(&r);
	free(x);
	free(y);
	free(z);
	tc_free(tc);
}
END_TEST

/* An integer division by a run-time zero is undefined on the GPU: the simulator reports it
 * (at the statement), the reference fails with a message, and neither executes a C division
 * by zero or INT64_MIN / -1 itself (issue 11 item 17). */
START_TEST(test_integer_division_by_zero)
{
	TestCompile *tc = tc_lowered("fusion f(x: i64[N], k: i64) -> (y: i64[N]) {\n"
				     "  y[i] = x[i] / k + x[i] % k;\n"
				     "}\n");
	int64_t n = 5, x[5] = {INT64_MIN, -1, 0, 7, INT64_MAX}, y[5];
	void *in[1] = {x}, *out[1] = {y};
	SimOptions o = {.seed = 1};
	SimResult r;
	double k = 0;

	ck_assert(sim_run(tc->kernels[0], &n, &k, in, out, &o, &r));
	ck_assert_int_ge(count_kind(&r, SF_DIV_ZERO), 1);
	char *text = report_text(tc, &r.reports[0]);
	ck_assert_contains(text, "t.fus:2:");
	ck_assert_contains(text, "integer division by zero");
	free(text);
	sim_result_free(&r);
	char *err = NULL;
	ck_assert(!interp_run(tc->prog->fusions[0], &n, &k, in, out, &err));
	ck_assert_contains(err, "integer division by zero in the definition of y");
	free(err);

	k = -1; /* INT64_MIN / -1 wraps like the GPU's two's complement, without a report */
	ck_assert(sim_run(tc->kernels[0], &n, &k, in, out, &o, &r));
	ck_assert_int_eq(r.nreports, 0);
	ck_assert_int_eq(y[0], INT64_MIN);
	sim_result_free(&r);
	ck_assert(interp_run(tc->prog->fusions[0], &n, &k, in, out, &err));
	ck_assert_int_eq(y[0], INT64_MIN);
	tc_free(tc);
}
END_TEST

/* ---- hand-built kernels: barriers, races, cp.async ---------------------------------------- */

/* A fusion y[i] = x[i] over N, whose kernel body the tests replace: a block of 32 threads. */
typedef struct Hand {
	TestCompile *tc;
	Kernel *k;
	Arena *a;
	Tensor *x, *y, *s;
} Hand;

static Hand hand_new(void)
{
	Hand h;
	h.tc = tc_lowered("fusion copy(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[i];\n}\n");
	h.a = h.tc->arena;
	Fusion *f = h.tc->prog->fusions[0];
	h.k = kir_new(h.a, f);
	h.k->launch[PT_TIDX] = ir_int(h.a, 32);
	h.x = f->inputs[0];
	h.y = f->outputs[0];
	h.s = NEW(h.a, Tensor);
	h.s->name = "s";
	h.s->dtype = DT_F32;
	h.s->sched.mem = MEM_SHARED;
	h.s->index = -1;
	return h;
}

static IrExpr *tid(Hand *h) { return ir_par(h->a, PT_TIDX); }

static Stmt *store_at(Hand *h, Tensor *t, IrExpr *off, IrExpr *value)
{
	Stmt *s = kir_store(h->k, t, NULL, 0, value);
	s->store.offset = off;
	s->store.mem = t->sched.mem;
	return s;
}

static Stmt *sync_stmt(Hand *h)
{
	Stmt *s = NEW(h->a, Stmt);
	s->kind = KS_SYNC;
	return s;
}

static Stmt *list(Stmt **items, int n)
{
	Stmt *head = NULL;
	for (int i = 0; i < n; i++)
		if (items[i])
			head = kir_append(head, items[i]);
	return head;
}

/* alloc s[32]; s[t] = x[t]; [sync]; y[t] = s[(t + 31) % 32]: thread t+1 reads what t wrote. */
static Stmt *rotate_body(Hand *h, bool with_sync, Stmt **read)
{
	Arena *a = h->a;
	IrExpr *prev = ix_mod(a, NULL, ix_add(a, tid(h), ir_int(a, 31)), ir_int(a, 32));
	Stmt *items[] = {
		kir_alloc(h->k, h->s, MEM_SHARED, ir_int(a, 32)),
		store_at(h, h->s, tid(h), ir_load(a, h->x, tid(h))),
		with_sync ? sync_stmt(h) : NULL,
		*read = store_at(h, h->y, tid(h), ir_load(a, h->s, prev)),
	};
	return list(items, countof(items));
}

static void run_hand(Hand *h, float *y, SimResult *r)
{
	float x[32];
	int64_t n = 32;
	void *in[1] = {x}, *out[1] = {y};
	SimOptions o = {.seed = 1};

	for (int i = 0; i < 32; i++) {
		x[i] = (float)(i * 10);
		y[i] = -1;
	}
	ck_assert(sim_run(h->k, &n, NULL, in, out, &o, r));
}

START_TEST(test_race_without_barrier)
{
	Hand h = hand_new();
	Stmt *read;
	float y[32];
	SimResult r;

	h.k->body = rotate_body(&h, false, &read);
	run_hand(&h, y, &r);
	SimReport *raw = NULL;
	for (int i = 0; i < r.nreports; i++)
		if (r.reports[i].kind == SF_RACE && r.reports[i].stmt == read)
			raw = &r.reports[i];
	ck_assert(raw);
	ck_assert_str_eq(raw->buffer, "s");
	ck_assert_str_eq(raw->detail, "read-after-write");
	ck_assert(!raw->write && raw->other_write);
	ck_assert_int_eq(raw->thread[0], 1);
	ck_assert_int_eq(raw->offset, 0);
	ck_assert(raw->has_other_thread);
	ck_assert_int_eq(raw->other_thread[0], 0);
	ck_assert_int_eq(raw->other->kind, KS_STORE);
	ck_assert_int_eq(raw->count, 31);
	/* thread 0 reads s[31] before thread 31 writes it: uninitialized, then write-after-read */
	ck_assert(find_report(&r, SF_UNINIT, "s"));
	ck_assert_int_eq(count_kind(&r, SF_RACE), 2);
	ck_assert_int_eq(r.nreports, 3);
	sim_result_free(&r);
	tc_free(h.tc);
}
END_TEST

START_TEST(test_barrier_orders_shared_accesses)
{
	Hand h = hand_new();
	Stmt *read;
	float y[32];
	SimResult r;

	h.k->body = rotate_body(&h, true, &read);
	run_hand(&h, y, &r);
	ck_assert_int_eq(r.nreports, 0);
	for (int i = 0; i < 32; i++)
		ck_assert_float_eq(y[i], (float)(((i + 31) % 32) * 10));
	sim_result_free(&r);
	tc_free(h.tc);
}
END_TEST

START_TEST(test_write_after_read_across_barrier_interval)
{
	/* s[t] = x[t]; sync; y[t] = s[t+1 mod 32]; s[t] = 0 (no second barrier): WAR race */
	Hand h = hand_new();
	Arena *a = h.a;
	Stmt *read, *clobber;
	float y[32];
	SimResult r;

	h.k->body = rotate_body(&h, true, &read);
	read->store.value = ir_load(a, h.s, ix_mod(a, NULL, ix_add(a, tid(&h), ir_int(a, 1)), ir_int(a, 32)));
	clobber = store_at(&h, h.s, tid(&h), ir_float(a, DT_F32, 0));
	kir_append(h.k->body, clobber);
	run_hand(&h, y, &r);
	ck_assert_int_eq(r.nreports, 2);
	ck_assert_int_eq(count_kind(&r, SF_RACE), 2);
	/* thread 1 overwrites s[1], which thread 0 read in the same interval */
	SimReport *war = &r.reports[0], *raw = &r.reports[1];
	ck_assert(war->stmt == clobber);
	ck_assert_str_eq(war->detail, "write-after-read");
	ck_assert_int_eq(war->thread[0], 1);
	ck_assert_int_eq(war->other_thread[0], 0);
	ck_assert(war->other == read);
	/* thread 31 reads s[0] after thread 0 overwrote it, in the same interval */
	ck_assert(raw->stmt == read);
	ck_assert_str_eq(raw->detail, "read-after-write");
	ck_assert_int_eq(raw->thread[0], 31);
	ck_assert_int_eq(raw->offset, 0);
	ck_assert(raw->other == clobber);
	sim_result_free(&r);
	tc_free(h.tc);
}
END_TEST

START_TEST(test_divergent_barrier)
{
	Hand h = hand_new();
	Arena *a = h.a;
	float y[32];
	SimResult r;

	Stmt *bar = sync_stmt(&h);
	Stmt *items[] = {
		kir_if(h.k, ix_lt(a, tid(&h), ir_int(a, 16)), bar, NULL),
		store_at(&h, h.y, tid(&h), ir_load(a, h.x, tid(&h))),
	};
	h.k->body = list(items, 2);
	run_hand(&h, y, &r);
	ck_assert_int_eq(r.nreports, 1);
	ck_assert_int_eq(r.reports[0].kind, SF_BARRIER);
	ck_assert(r.reports[0].stmt == bar);
	ck_assert_str_eq(r.reports[0].detail,
			 "16 of 32 threads arrived; thread (16, 0, 0) has exited");
	for (int i = 0; i < 32; i++)
		ck_assert_float_eq(y[i], (float)(i * 10));
	sim_result_free(&r);
	tc_free(h.tc);
}
END_TEST

START_TEST(test_global_write_race_across_blocks)
{
	/* two blocks both write y[t] */
	Hand h = hand_new();
	float y[32];
	SimResult r;

	h.k->launch[PT_BIDX] = ir_int(h.a, 2);
	h.k->body = store_at(&h, h.y, tid(&h), ir_load(h.a, h.x, tid(&h)));
	run_hand(&h, y, &r);
	ck_assert_int_eq(r.nreports, 1);
	ck_assert_int_eq(r.reports[0].kind, SF_GLOBAL_RACE);
	ck_assert_int_eq(r.reports[0].block[0], 1);
	ck_assert_int_eq(r.reports[0].other_block[0], 0);
	ck_assert_int_eq(r.reports[0].count, 32);
	sim_result_free(&r);
	tc_free(h.tc);
}
END_TEST

static Stmt *cp_async(Hand *h, IrExpr *cond)
{
	Stmt *s = NEW(h->a, Stmt);
	s->kind = KS_CP_ASYNC;
	s->copy.tensor = h->s;
	s->copy.mem = MEM_SHARED;
	s->copy.offset = tid(h);
	s->copy.src = h->x;
	s->copy.src_offset = tid(h);
	s->copy.vec = 1;
	s->copy.cond = cond;
	return s;
}

static Stmt *cp_node(Hand *h, StmtKind kind, int n)
{
	Stmt *s = NEW(h->a, Stmt);
	s->kind = kind;
	s->wait.n = n;
	return s;
}

/* alloc s; cp.async s[t] <- x[t]; commit; [wait]; y[t] = s[t] */
static void async_body(Hand *h, bool wait, IrExpr *cond)
{
	Stmt *items[] = {
		kir_alloc(h->k, h->s, MEM_SHARED, ir_int(h->a, 32)),
		cp_async(h, cond),
		cp_node(h, KS_CP_COMMIT, 0),
		wait ? cp_node(h, KS_CP_WAIT, 0) : NULL,
		store_at(h, h->y, tid(h), ir_load(h->a, h->s, tid(h))),
	};
	h->k->body = list(items, countof(items));
}

START_TEST(test_cp_async_with_wait)
{
	Hand h = hand_new();
	float y[32];
	SimResult r;

	async_body(&h, true, NULL);
	run_hand(&h, y, &r);
	ck_assert_int_eq(r.nreports, 0);
	for (int i = 0; i < 32; i++)
		ck_assert_float_eq(y[i], (float)(i * 10));
	sim_result_free(&r);
	tc_free(h.tc);
}
END_TEST

START_TEST(test_cp_async_read_before_wait)
{
	Hand h = hand_new();
	float y[32];
	SimResult r;

	async_body(&h, false, NULL);
	run_hand(&h, y, &r);
	SimReport *rd = find_report(&r, SF_ASYNC_READ, "s");
	SimReport *end = find_report(&r, SF_ASYNC_PENDING, "s");
	ck_assert(rd && end);
	ck_assert_int_eq(rd->count, 32);
	ck_assert_str_eq(end->detail, "committed but never waited for");
	ck_assert_int_eq(end->stmt->kind, KS_CP_ASYNC);
	/* the data never landed: the reads also see uninitialized shared memory */
	ck_assert(find_report(&r, SF_UNINIT, "s"));
	ck_assert_int_eq(r.nreports, 3);
	sim_result_free(&r);
	tc_free(h.tc);
}
END_TEST

START_TEST(test_cp_async_zero_fill)
{
	/* lanes t >= 20 are predicated off: zero-filled, x never read out of bounds */
	Hand h = hand_new();
	float y[32];
	SimResult r;

	async_body(&h, true, ix_lt(h.a, tid(&h), ir_int(h.a, 20)));
	run_hand(&h, y, &r);
	ck_assert_int_eq(r.nreports, 0);
	for (int i = 0; i < 32; i++)
		ck_assert_float_eq(y[i], i < 20 ? (float)(i * 10) : 0.0f);
	sim_result_free(&r);
	tc_free(h.tc);
}
END_TEST

/* ---- the budget (SimOptions.max_elements, max_steps; issue 11 item 8) -------------------- */

/* Runs the one-input, one-output f32 fusion of tc (f32[N] or f32[N, 64]) at size n under the
 * budget o. */
static bool run_budget(TestCompile *tc, int64_t n, const SimOptions *o, SimResult *r)
{
	float *x = calloc((size_t)n * 64 + 1, 4), *y = calloc((size_t)n * 64 + 1, 4);
	void *in[1] = {x}, *out[1] = {y};
	bool ok = sim_run(tc->kernels[0], &n, NULL, in, out, o, r);
	free(x);
	free(y);
	return ok;
}

/* A split by 2^40 of a symbolic size is a serial loop of 2^40 iterations: refused at the loop,
 * at once, not after spinning through the budget. */
START_TEST(test_budget_huge_loop)
{
	TestCompile *tc = tc_lowered("fusion f(x: f32[N]) -> (y: f32[N]) { y[i] = x[i] * 2.0; }\n"
				     "schedule f { y.split(i, 1099511627776) -> (io, ii);\n"
				     "  y.bind(io, blockIdx.x); }\n");
	SimOptions o = {.seed = 1, .max_steps = 1000000};
	SimResult r;

	ck_assert(!run_budget(tc, 5, &o, &r));
	ck_assert(r.over_budget);
	ck_assert_contains(r.error, "of 1099511627776 iterations is more than the step budget "
			   "of 1000000");
	ck_assert_int_lt(r.steps, 100);
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* The steps are exact: a run that takes s steps passes with max_steps = s and is stopped with
 * s - 1; no budget (0) is no limit. */
START_TEST(test_budget_steps_exact)
{
	TestCompile *tc = tc_lowered("fusion f(x: f32[N]) -> (y: f32[N]) { y[i] = x[i] * 2.0; }\n"
				     "schedule f { y.split(i, 64) -> (io, ii);\n"
				     "  y.bind(io, blockIdx.x); }\n");
	SimOptions o = {.seed = 1};
	SimResult r;

	ck_assert(run_budget(tc, 300, &o, &r));
	int64_t steps = r.steps;
	ck_assert_int_gt(steps, 300);
	sim_result_free(&r);
	o.max_steps = steps;
	ck_assert(run_budget(tc, 300, &o, &r));
	ck_assert(!r.over_budget && !r.error);
	sim_result_free(&r);
	o.max_steps = steps - 1;
	ck_assert(!run_budget(tc, 300, &o, &r));
	ck_assert(r.over_budget);
	ck_assert_contains(r.error, "step budget");
	sim_result_free(&r);
	tc_free(tc);
}
END_TEST

/* More blocks times threads than steps in the budget is refused before any block runs. */
START_TEST(test_budget_blocks_times_threads)
{
	TestCompile *tc = tc_lowered(test_saxpy_src);
	int64_t n = 1 << 20;
	float *x = calloc((size_t)n, 4), *y = calloc((size_t)n, 4), *z = calloc((size_t)n, 4);
	double a = 1;
	void *in[2] = {x, y}, *out[1] = {z};
	SimOptions o = {.seed = 1, .max_steps = 100000};
	SimResult r;

	ck_assert(!sim_run(tc->kernels[0], &n, &a, in, out, &o, &r));
	ck_assert(r.over_budget);
	ck_assert_contains(r.error, "1024 blocks of 256 threads are more than the step budget");
	ck_assert_int_eq(r.steps, 0);
	sim_result_free(&r);
	o.max_blocks = 2; /* a sample of 2 blocks fits */
	ck_assert(sim_run(tc->kernels[0], &n, &a, in, out, &o, &r));
	sim_result_free(&r);
	free(x);
	free(y);
	free(z);
	tc_free(tc);
}
END_TEST

/* Elements: the global buffers up front, then each shared allocation and each local array
 * (once per thread context) on top of them. */
START_TEST(test_budget_elements)
{
	TestCompile *pw = tc_lowered("fusion f(x: f32[N]) -> (y: f32[N]) { y[i] = x[i] * 2.0; }\n"
				     "schedule f { y.bind(i, blockIdx.x); }\n");
	TestCompile *sh = tc_lowered(
		"fusion f(x: f32[N]) -> (y: f32[N]) { y[i] = x[i] * 2.0; }\n"
		"schedule f { y.split(i, 128) -> (io, ii); y.bind(io, blockIdx.x);\n"
		"  y.bind(ii, threadIdx.x); xs = x.cache_after(shared); xs.compute_at(y, io);\n"
		"  xs.bind(ii, threadIdx.x); }\n");
	TestCompile *lo = tc_lowered(
		"fusion f(x: f32[N, 64]) -> (y: f32[N, 64]) { y[i, j] = x[i, j] * 2.0; }\n"
		"schedule f { y.bind(i, blockIdx.x); xl = x.cache_after(local);\n"
		"  xl.compute_at(y, i); }\n");
	SimOptions o = {.seed = 1, .max_elements = 1000};
	SimResult r;

	ck_assert_int_eq(sim_global_elements(pw->kernels[0], (int64_t[]){501}), 1002);
	ck_assert_msg(run_budget(pw, 500, &o, &r), "%s", r.error);
	sim_result_free(&r);
	ck_assert(!run_budget(pw, 501, &o, &r));
	ck_assert(r.over_budget);
	ck_assert_contains(r.error, "hold 1002 elements, more than the element budget of 1000");
	sim_result_free(&r);

	ck_assert(run_budget(sh, 436, &o, &r)); /* 872 + 128 */
	sim_result_free(&r);
	ck_assert(!run_budget(sh, 437, &o, &r));
	ck_assert_contains(r.error, "shared buffer xs of 128 elements on top of 874");
	sim_result_free(&r);

	o.max_elements = 2 * 64 * 3 + 64; /* N = 3 rows in and out, and xl */
	ck_assert(run_budget(lo, 3, &o, &r));
	sim_result_free(&r);
	o.max_elements--;
	ck_assert(!run_budget(lo, 3, &o, &r));
	ck_assert_contains(r.error, "local array xl of 64 elements");
	sim_result_free(&r);
	tc_free(pw);
	tc_free(sh);
	tc_free(lo);
}
END_TEST

/* What the reference costs: every tensor's elements, and a reduction's terms (an empty
 * schedule block: the automatic matmul schedule's caches would be tensors to count too). */
START_TEST(test_interp_cost)
{
	TestCompile *tc = tc_lowered("fusion mm(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {\n"
				     "  C[i, j] = sum(k: A[i, k] * B[k, j]);\n"
				     "}\nschedule mm {\n}\n");
	int64_t sizes[3];
	InterpCost c;
	char *err = NULL;
	Fusion *f = tc->prog->fusions[0];

	for (int i = 0; i < f->nsizes; i++) /* M = 2, K = 3, N = 5 */
		sizes[i] = f->sizes[i]->name[0] == 'M' ? 2 : f->sizes[i]->name[0] == 'K' ? 3 : 5;
	ck_assert(interp_cost(f, sizes, &c, &err));
	ck_assert_int_eq(c.elements, 6 + 15 + 10);
	ck_assert_int_eq(c.evals, 6 + 15 + 10 * 3);
	for (int i = 0; i < f->nsizes; i++)
		sizes[i] = INT64_C(1) << 40;
	ck_assert(interp_cost(f, sizes, &c, &err));
	ck_assert_int_eq(c.elements, INT64_MAX); /* saturates */
	ck_assert_int_eq(c.evals, INT64_MAX);
	tc_free(tc);
}
END_TEST

Suite *simulate_suite(void)
{
	Suite *s = suite_create("simulate");
	TCase *c = tcase_create("lowered");
	tcase_add_test(c, test_saxpy_exact);
	tcase_add_test(c, test_integer_division_by_zero);
	tcase_add_test(c, test_missing_predicate_is_oob);
	tcase_add_test(c, test_shrunk_buffer_is_oob);
	tcase_add_test(c, test_removed_store_is_uninit_read);
	tcase_add_test(c, test_removed_tail_store_leaves_unwritten);
	tcase_add_test(c, test_block_sample_has_first_and_last);
	tcase_add_test(c, test_budget_huge_loop);
	tcase_add_test(c, test_budget_steps_exact);
	tcase_add_test(c, test_budget_blocks_times_threads);
	tcase_add_test(c, test_budget_elements);
	tcase_add_test(c, test_interp_cost);
	suite_add_tcase(s, c);
	c = tcase_create("hand_built");
	tcase_add_test(c, test_race_without_barrier);
	tcase_add_test(c, test_barrier_orders_shared_accesses);
	tcase_add_test(c, test_write_after_read_across_barrier_interval);
	tcase_add_test(c, test_divergent_barrier);
	tcase_add_test(c, test_global_write_race_across_blocks);
	tcase_add_test(c, test_cp_async_with_wait);
	tcase_add_test(c, test_cp_async_read_before_wait);
	tcase_add_test(c, test_cp_async_zero_fill);
	suite_add_tcase(s, c);
	return s;
}
