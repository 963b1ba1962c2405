/* gen_fusion.c: a random well-typed fusion (fuzz.h).
 *
 * The fusion has up to four dimension variables, each a size symbol (M, N, K, L) or a small
 * constant, and each with its own index letter (i, j, k, l), so that every read subscripts a
 * dimension with the same index and the ranges sema infers never conflict. Inputs are 1-3
 * tensors of rank 1-3 over random dimensions (f32, f16, bf16) and maybe a scalar `a`. Each
 * statement reads 1-3 earlier tensors (an intermediate not read yet is preferred, so few end
 * up unused), maybe one at a constant subscript, and is
 *   - pointwise: its indices are the union of the indices read (in first-read order, or
 *     permuted: a transpose); a read with fewer indices is a broadcast; or
 *   - a reduction (sum, max, min) over a nonempty subset of those indices, maybe all of them
 *     (a 0-d result), maybe inside a larger expression (`sum(j: ...) * 0.5 + x1[i]`).
 * The last statement is an output, and so is every intermediate nobody reads. Expressions
 * avoid what a tolerance cannot absorb: no division except by `abs(e) + 1.0`, no exp of an
 * unbounded value, no log or sqrt of a possibly negative one.
 */
#include <string.h>

#include "tests/fuzz/fuzz.h"

#define MAX_DIMS 4
#define MAX_RANK 3
#define MAX_TENSORS 10
#define MAX_READS 3

typedef struct GDim {
	char index;       /* its index letter */
	const char *sym;  /* a size symbol, or NULL for a constant */
	int64_t value;    /* the constant */
} GDim;

typedef struct GTensor {
	char name[12];
	int dims[MAX_RANK]; /* dimension variables in declared order */
	int ndim;
	bool input;
	bool read;          /* read by a later statement */
	bool from_red;      /* a reduction or computed from one: its rounding error grows with the
			     * terms summed, so it is never multiplied, divided by or put through
			     * a function steeper than 1 (the tolerance could not absorb that) */
	const char *dtype;
} GTensor;

/* One read of a statement: the tensor and, for one of its dims, a constant subscript. */
typedef struct GRead {
	int t;
	int const_dim;      /* position of the constant subscript, -1 if none */
	int64_t const_val;
} GRead;

typedef struct Gen {
	Rng *r;
	const FuzzOpts *o;
	Case *c;
	GDim dims[MAX_DIMS];
	int ndims;
	GTensor t[MAX_TENSORS];
	int nt, ninputs;
	bool scalar_used;
} Gen;

static const char *const syms[] = {"M", "N", "K", "L"};
static const char indices[] = {'i', 'j', 'k', 'l'};
static const int64_t const_dims[] = {1, 2, 3, 4, 5, 8, 16, 32, 33};
/* Sizes a symbol is checked at: 1, primes, powers of two and their neighbours. */
static const int64_t sym_sizes[] = {1, 2, 3, 5, 7, 8, 11, 13, 16, 17, 31, 32, 33, 37, 64, 67, 97, 128};

static const char *random_dtype(Gen *g, bool output)
{
	int n = rng_below(g->r, 100);
	if (!fuzz_on(g->o, FF_HALF) || n < (output ? 60 : 50))
		return "f32";
	return n < 80 ? "f16" : "bf16";
}

static void pick_dims(Gen *g)
{
	g->ndims = 1 + rng_below(g->r, MAX_DIMS);
	int nsym = 0;
	for (int d = 0; d < g->ndims; d++) {
		GDim *x = &g->dims[d];
		x->index = indices[d];
		if (rng_chance(g->r, 70)) {
			x->sym = syms[nsym];
			SizeDim *s = &g->c->syms[nsym++];
			strcpy(s->name, x->sym);
			s->value[0] = RNG_PICK(g->r, sym_sizes);
			s->value[1] = rng_chance(g->r, 30) ? 1 + rng_below(g->r, 3) : RNG_PICK(g->r, sym_sizes);
		} else {
			x->value = RNG_PICK(g->r, const_dims);
		}
	}
	g->c->nsyms = nsym;
}

/* Keeps the product of every dim below max_elems in both runs: a reduction's loops span the
 * union of its reads' dims, so this bounds every nest the simulator runs. */
static void bound_sizes(Gen *g)
{
	for (int r = 0; r < 2; r++) {
		for (;;) {
			int64_t prod = 1;
			SizeDim *big = NULL;
			for (int d = 0; d < g->ndims; d++)
				prod *= g->dims[d].sym ? 1 : g->dims[d].value;
			for (int s = 0; s < g->c->nsyms; s++) {
				SizeDim *x = &g->c->syms[s];
				prod *= x->value[r];
				if (!big || x->value[r] > big->value[r])
					big = x;
			}
			if (prod <= g->o->max_elems || !big || big->value[r] == 1)
				break;
			big->value[r] = 1 + big->value[r] / 3;
		}
	}
}

static void dims_text(Gen *g, GTensor *t, Buf *b)
{
	buf_puts(b, "[");
	for (int k = 0; k < t->ndim; k++) {
		GDim *x = &g->dims[t->dims[k]];
		if (x->sym)
			buf_printf(b, "%s%s", k ? ", " : "", x->sym);
		else
			buf_printf(b, "%s%lld", k ? ", " : "", (long long)x->value);
	}
	buf_puts(b, "]");
}

/* A random subset of the dims, in random order. */
static int random_dims(Gen *g, int *out, int max)
{
	int perm[MAX_DIMS], n = 1 + rng_below(g->r, max < g->ndims ? max : g->ndims);
	for (int d = 0; d < g->ndims; d++)
		perm[d] = d;
	for (int d = g->ndims - 1; d > 0; d--) {
		int e = rng_below(g->r, d + 1), tmp = perm[d];
		perm[d] = perm[e];
		perm[e] = tmp;
	}
	memcpy(out, perm, sizeof(int) * (size_t)n);
	return n;
}

static void gen_inputs(Gen *g)
{
	int n = 1 + rng_below(g->r, 3);
	for (int i = 0; i < n; i++) {
		GTensor *t = &g->t[g->nt++];
		snprintf(t->name, sizeof t->name, "x%d", i);
		t->input = true;
		t->ndim = random_dims(g, t->dims, MAX_RANK);
		t->dtype = random_dtype(g, false);
	}
	g->ninputs = n;
}

/* ---- statements ------------------------------------------------------------------------- */

static bool has_dim(const int *dims, int n, int d)
{
	for (int k = 0; k < n; k++)
		if (dims[k] == d)
			return true;
	return false;
}

/* The dims a read subscripts with an index (not a constant), appended to u (a set). */
static int read_union(Gen *g, GRead *rd, int nrd, int *u)
{
	int n = 0;
	for (int k = 0; k < nrd; k++) {
		GTensor *t = &g->t[rd[k].t];
		for (int p = 0; p < t->ndim; p++)
			if (p != rd[k].const_dim && !has_dim(u, n, t->dims[p]))
				u[n++] = t->dims[p];
	}
	return n;
}

static void pick_reads(Gen *g, GRead *rd, int *nrd)
{
	*nrd = 1 + rng_below(g->r, MAX_READS);
	for (int k = 0; k < *nrd; k++) {
		int unread = -1;
		for (int t = 0; t < g->nt; t++)
			if (!g->t[t].input && !g->t[t].read)
				unread = t;
		rd[k].t = unread >= 0 && k == 0 && rng_chance(g->r, 80) ? unread : rng_below(g->r, g->nt);
		if (!fuzz_on(g->o, FF_MULTI_READ) && !g->t[rd[k].t].input && g->t[rd[k].t].read)
			rd[k].t = rng_below(g->r, g->ninputs); /* read by another statement already */
		rd[k].const_dim = -1;
		GTensor *t = &g->t[rd[k].t];
		if (t->ndim > 1 && fuzz_on(g->o, FF_CONST_SUB) && rng_chance(g->r, 12)) {
			rd[k].const_dim = rng_below(g->r, t->ndim);
			GDim *x = &g->dims[t->dims[rd[k].const_dim]];
			rd[k].const_val = !x->sym && rng_chance(g->r, 50) ? x->value - 1 : 0;
		}
	}
}

static void access_text(Gen *g, GRead *rd, Buf *b)
{
	GTensor *t = &g->t[rd->t];
	buf_puts(b, t->name);
	if (t->ndim == 0)
		return;
	buf_puts(b, "[");
	for (int p = 0; p < t->ndim; p++) {
		if (p == rd->const_dim)
			buf_printf(b, "%s%lld", p ? ", " : "", (long long)rd->const_val);
		else
			buf_printf(b, "%s%c", p ? ", " : "", g->dims[t->dims[p]].index);
	}
	buf_puts(b, "]");
}

/* An expression over the reads: a chain of binary operations, maybe a scalar or a literal,
 * maybe wrapped in a bounded function. */
static void expr_text(Gen *g, GRead *rd, int nrd, Buf *b)
{
	static const char *const literals[] = {"0.5", "2.0", "1.5", "0.25"};
	static const char *const wraps[] = {"tanh", "sigmoid", "abs", "sin", "cos"};
	Buf e = {0};
	bool red = g->t[rd[0].t].from_red;
	access_text(g, &rd[0], &e);
	for (int k = 1; k < nrd; k++) {
		Buf x = {0}, n = {0};
		access_text(g, &rd[k], &x);
		red |= g->t[rd[k].t].from_red;
		int op = red ? RNG_PICK(g->r, ((const int[]){0, 1, 3, 4, 6})) : rng_below(g->r, 7);
		switch (op) {
		case 0: buf_printf(&n, "%s + %s", e.s, x.s); break;
		case 1: buf_printf(&n, "%s - %s", e.s, x.s); break;
		case 2: buf_printf(&n, "%s * %s", e.s, x.s); break;
		case 3: buf_printf(&n, "max(%s, %s)", e.s, x.s); break;
		case 4: buf_printf(&n, "min(%s, %s)", e.s, x.s); break;
		case 5: buf_printf(&n, "(%s) / (abs(%s) + 1.0)", e.s, x.s); break;
		default: buf_printf(&n, "%s * %s + %s", x.s, RNG_PICK(g->r, literals), e.s); break;
		}
		buf_free(&e);
		buf_free(&x);
		e = n;
	}
	if (rng_chance(g->r, 25)) {
		Buf n = {0};
		buf_printf(&n, "%s * a", e.s);
		buf_free(&e);
		e = n;
		g->scalar_used = true;
	} else if (rng_chance(g->r, 25)) {
		Buf n = {0};
		buf_printf(&n, "%s + %s", e.s, RNG_PICK(g->r, literals));
		buf_free(&e);
		e = n;
	}
	if (rng_chance(g->r, 30)) {
		Buf n = {0};
		buf_printf(&n, "%s(%s)", red ? RNG_PICK(g->r, ((const char *const[]){"tanh", "sigmoid", "abs"})) :
			   RNG_PICK(g->r, wraps), e.s);
		buf_free(&e);
		e = n;
	}
	buf_puts(b, e.s);
	buf_free(&e);
}

/* One statement defining a new tensor; false when no choice of reads fits. */
static bool gen_stmt(Gen *g)
{
	GRead rd[MAX_READS];
	int nrd = 0, u[MAX_DIMS * MAX_READS], nu = 0, red[MAX_DIMS], nred = 0, lhs[MAX_DIMS], nl = 0;
	bool ok = false;
	for (int tries = 0; tries < 20 && !ok; tries++) {
		pick_reads(g, rd, &nrd);
		nu = read_union(g, rd, nrd, u);
		bool reduce = nu > 0 && fuzz_on(g->o, FF_REDUCTION) && rng_chance(g->r, 40);
		nred = nl = 0;
		for (int k = 0; k < nu; k++) {
			if (reduce && (rng_chance(g->r, 50) || (k == nu - 1 && nred == 0)))
				red[nred++] = u[k];
			else
				lhs[nl++] = u[k];
		}
		ok = nl <= MAX_RANK && (nl > 0 || fuzz_on(g->o, FF_ZERO_D));
		if (!fuzz_on(g->o, FF_BROADCAST))
			for (int k = 0; k < nrd; k++)
				ok &= g->t[rd[k].t].ndim - (rd[k].const_dim >= 0) == nu;
	}
	if (!ok || g->nt == MAX_TENSORS)
		return false;
	if (nl > 1 && fuzz_on(g->o, FF_TRANSPOSE) && rng_chance(g->r, 25)) {
		for (int k = nl - 1; k > 0; k--) {
			int e = rng_below(g->r, k + 1), tmp = lhs[k];
			lhs[k] = lhs[e];
			lhs[e] = tmp;
		}
	}
	bool from_red = nred > 0;
	for (int k = 0; k < nrd; k++) {
		g->t[rd[k].t].read = true;
		from_red |= g->t[rd[k].t].from_red;
	}

	GTensor *t = &g->t[g->nt++];
	snprintf(t->name, sizeof t->name, "t%d", g->nt - 1);
	t->ndim = nl;
	t->from_red = from_red;
	memcpy(t->dims, lhs, sizeof(int) * (size_t)nl);
	t->dtype = random_dtype(g, true);

	Buf s = {0}, body = {0};
	buf_puts(&s, t->name);
	if (nl) {
		buf_puts(&s, "[");
		for (int k = 0; k < nl; k++)
			buf_printf(&s, "%s%c", k ? ", " : "", g->dims[lhs[k]].index);
		buf_puts(&s, "]");
	}
	buf_puts(&s, " = ");
	expr_text(g, rd, nrd, &body);
	if (nred) {
		static const char *const ops[] = {"sum", "sum", "max", "min"};
		Buf r = {0};
		buf_printf(&r, "%s(", RNG_PICK(g->r, ops));
		for (int k = 0; k < nred; k++)
			buf_printf(&r, "%s%c", k ? ", " : "", g->dims[red[k]].index);
		buf_printf(&r, ": %s)", body.s);
		/* maybe inside a larger expression, with a read of the result's own indices */
		int other = -1;
		for (int x = 0; x < g->nt - 1 && nl && fuzz_on(g->o, FF_REDUCE_IN_EXPR); x++)
			if (g->t[x].ndim > 0 && g->t[x].ndim <= nl && rng_chance(g->r, 30) &&
			    (g->t[x].input || !g->t[x].read || fuzz_on(g->o, FF_MULTI_READ))) {
				bool sub = true;
				for (int p = 0; p < g->t[x].ndim; p++)
					sub &= has_dim(lhs, nl, g->t[x].dims[p]);
				if (sub)
					other = x;
			}
		if (other >= 0) {
			GRead o = {other, -1, 0};
			buf_printf(&s, "%s * 0.5 + ", r.s);
			access_text(g, &o, &s);
			g->t[other].read = true;
		} else {
			buf_puts(&s, r.s);
		}
		buf_free(&r);
	} else {
		buf_puts(&s, body.s);
	}
	buf_puts(&s, ";");
	int unit = g->c->next_unit++;
	item_add(&g->c->stmts, unit, "%s", s.s);
	buf_free(&s);
	buf_free(&body);
	t->read = false;
	return true;
}

/* Outputs: the last statement and every tensor nobody reads, in statement order. */
static void gen_outputs(Gen *g)
{
	int unit = 0;
	for (int x = 0; x < g->nt; x++) {
		GTensor *t = &g->t[x];
		if (t->input)
			continue;
		int u = g->c->stmts.v[unit++].unit;
		bool is_last = x == g->nt - 1;
		if (!is_last && t->read && (!fuzz_on(g->o, FF_READ_OUTPUT) || !rng_chance(g->r, 20)))
			continue;
		Buf d = {0};
		if (t->ndim)
			dims_text(g, t, &d);
		item_add(&g->c->outs, u, "%s: %s%s", t->name, t->dtype, d.s ? d.s : "");
		buf_free(&d);
	}
}

void gen_fusion(Rng *r, const FuzzOpts *o, Case *c)
{
	Gen g;
	memset(&g, 0, sizeof g);
	g.r = r;
	g.o = o;
	g.c = c;
	strcpy(c->name, "fz");
	pick_dims(&g);
	bound_sizes(&g);
	gen_inputs(&g);
	int n = 1 + rng_below(r, 4);
	for (int s = 0; s < n; s++)
		if (!gen_stmt(&g))
			break;
	if (c->stmts.n == 0) { /* always possible: a copy of the first input */
		GRead rd = {0, -1, 0};
		GTensor *t = &g.t[g.nt++];
		*t = g.t[0];
		snprintf(t->name, sizeof t->name, "t%d", g.nt - 1);
		t->input = false;
		Buf s = {0};
		buf_printf(&s, "%s", t->name);
		buf_puts(&s, "[");
		for (int k = 0; k < t->ndim; k++)
			buf_printf(&s, "%s%c", k ? ", " : "", g.dims[t->dims[k]].index);
		buf_puts(&s, "] = ");
		access_text(&g, &rd, &s);
		buf_puts(&s, ";");
		item_add(&c->stmts, c->next_unit++, "%s", s.s);
		buf_free(&s);
	}
	gen_outputs(&g);
	for (int x = 0; x < g.nt; x++) {
		GTensor *t = &g.t[x];
		if (!t->input)
			continue;
		Buf d = {0};
		dims_text(&g, t, &d);
		item_add(&c->params, c->next_unit++, "%s: %s%s", t->name, t->dtype, d.s);
		buf_free(&d);
	}
	if (g.scalar_used)
		item_add(&c->params, c->next_unit++, "a: f32");
}
