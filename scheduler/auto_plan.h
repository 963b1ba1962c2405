/* auto_plan.h: what the automatic scheduler's files share (private to scheduler/): the plan
 * (the generated directives, applied as they are made) and the helpers that emit one
 * directive each. auto_schedule.c defines them; auto_outer.c (outer, middle-axis and
 * whole-tensor reductions) and auto_transpose.c (transposes) use them. docs/auto_schedule.md. */
#ifndef FUSC_AUTO_PLAN_H
#define FUSC_AUTO_PLAN_H

#include "scheduler/scheduler.h"

/* The schedule is written as directives (AstDirective, the same as a schedule block), each
 * applied by sched_directive as soon as it is made, so it goes through every check a user's
 * schedule does, and later choices can look at the domains the earlier ones made. */
typedef struct Plan {
	Arena *a;
	Fusion *f;
	Sched s;
	AutoLevel level;
	Span at;      /* every generated directive points here (the fusion, or the output) */
	Vec dirs;     /* AstDirective* */
	NameSet names; /* names in use: indices, tensors, parameters, sizes, caches */
	NameSet axes; /* generated axis names, as "tensor.axis" */
	bool ok;      /* every directive held */
	/* A symbolic row length that a bound would let the tuned schedule plan for (a row
	 * group over a size symbol with no SizeSym.bound): auto_schedule adds size variants
	 * for it (docs/auto_schedule.md, "Size variants"); NULL: none. */
	SizeSym *bucket;
} Plan;

/* auto_schedule.c */
const char *fresh_axis(Plan *p, const char *t, const char *base);
void d_split(Plan *p, const char *t, const char *ax, int64_t f, const char *o, const char *i);
void d_merge(Plan *p, const char *t, const char *x, const char *y, const char *m);
void d_verb1(Plan *p, const char *t, const char *verb, const char *arg);
void d_reorder(Plan *p, const char *t, const char **axes, int n);
void d_bind(Plan *p, const char *t, const char *ax, const char *par);
void d_reorder(Plan *p, const char *t, const char **axes, int n);
const char *d_rfactor(Plan *p, const char *t, const char **axes, int n, const char *base);
void d_compute_at(Plan *p, const char *t, const char *u, const char *ax, const char **shared,
		  int nshared);
const char *d_cache_after(Plan *p, Tensor *x, const char *mem);
int64_t threads_for(IrExpr *extent, int64_t want);
bool read_by_other(Fusion *f, Tensor *t);

/* auto_outer.c */
bool auto_outer(Plan *p, Tensor *o);

/* auto_long_row.c: a row reduction output over a long row (segment_long_row), the only
 * output: each row split over blocks, a grid reduction. False (nothing emitted) otherwise. */
bool auto_long_row(Plan *p, Tensor *o);

/* auto_transpose.c: a pointwise output that reads inputs with its innermost index on
 * another dimension than their innermost one (a transpose or permute). */
enum { AUTO_TRANSPOSE_MAX = 8 };
typedef struct AutoTranspose {
	int a;        /* o's root index that the cached inputs' innermost dimension follows */
	Tensor *ins[AUTO_TRANSPOSE_MAX]; /* inputs staged through shared-memory tiles */
	int subs[AUTO_TRANSPOSE_MAX][16]; /* their subscripts as o's root indices */
	int nins;
	int tile_b;   /* tile elements along o's innermost index (64) */
} AutoTranspose;
/* Whether o is in the class (c says how); false: another class (c->nins may be 0). */
bool auto_transpose_classify(Fusion *f, Tensor *o, AutoTranspose *c);
/* o's tiled schedule when it is in the class; false (nothing emitted) when it is not. */
bool auto_transpose(Plan *p, Tensor *o);

#endif
