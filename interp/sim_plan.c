/* sim_plan.c: the simulator's run of a segmented plan (Kernel.segments; docs/auto_schedule.md,
 * "Segmentation"), as the launchers run it: the workspace buffers (poisoned: NaN for floats,
 * so a read of an element no segment wrote shows in the comparison), then each segment's
 * chosen kernel in order, with its arguments taken from the fusion's and the workspace. Every
 * segment but the last runs all of its blocks (a sample would leave the workspace a later
 * segment reads incomplete); the last takes SimOptions.max_blocks. The results add up: blocks,
 * reports, and the elements of the fusion's outputs each segment wrote.
 */
#include <stdlib.h>
#include <string.h>

#include "interp/interp.h"

/* The position of signature entry `sig` of f among f's params, inputs or outputs. */
static int slot_of(Fusion *f, int sig)
{
	struct SigEntry *e = &f->sig[sig];
	int n = 0;
	for (int i = 0; i < sig; i++)
		n += f->sig[i].kind == e->kind;
	return n;
}

static int64_t numel_of(Tensor *t, const int64_t *sizes)
{
	int64_t dims[IR_MAX_DIMS];
	if (!tensor_dims(t, sizes, dims, NULL))
		return -1;
	return t->ndim ? shape_numel(dims, t->ndim) : 1;
}

static bool fail(SimResult *r, const char *what, const char *name)
{
	Buf b = {0};
	buf_printf(&b, "%s%s", what, name);
	free(r->error);
	r->error = b.s;
	return false;
}

/* Adds segment result s (of fusion g, segment sg) into r. */
static void merge(Fusion *f, Segment *sg, SimResult *r, SimResult *s, const int64_t *sizes)
{
	Fusion *g = sg->fusion;
	r->blocks_total += s->blocks_total;
	r->blocks_run += s->blocks_run;
	r->steps += s->steps;
	r->ldm_phases += s->ldm_phases;
	r->ldm_wavefronts += s->ldm_wavefronts;
	if (s->ldm_worst > r->ldm_worst)
		r->ldm_worst = s->ldm_worst;
	if (s->threads_per_block > r->threads_per_block)
		r->threads_per_block = s->threads_per_block;
	if (s->nreports) {
		r->reports = realloc(r->reports, sizeof(SimReport) * (size_t)(r->nreports + s->nreports));
		memcpy(r->reports + r->nreports, s->reports, sizeof(SimReport) * (size_t)s->nreports);
		r->nreports += s->nreports;
		s->nreports = 0;
	}
	for (int i = 0, q = 0; i < g->nsig; i++) {
		if (g->sig[i].kind != 'o')
			continue;
		SegArg a = sg->args[i];
		if (a.from == 's' && s->written && s->written[q]) {
			int o = slot_of(f, a.index);
			int64_t n = numel_of(f->outputs[o], sizes);
			for (int64_t e = 0; e < n; e++)
				r->written[o][e] |= s->written[q][e];
		}
		q++;
	}
}

bool sim_run_plan(Kernel *k, const int64_t *sizes, const double *scalars, void **inputs,
		  void **outputs, const SimOptions *o, SimResult *r)
{
	Fusion *f = k->fusion;
	int nb = f->seg_buffers.len;
	void **ws = calloc((size_t)nb + 1, sizeof(void *));
	bool ok = true;

	memset(r, 0, sizeof *r);
	r->noutputs = f->noutputs;
	r->written = calloc((size_t)f->noutputs + 1, sizeof(unsigned char *));
	for (int i = 0; i < f->noutputs && ok; i++) {
		int64_t n = numel_of(f->outputs[i], sizes);
		ok = n >= 0 && (r->written[i] = calloc((size_t)n + 1, 1));
	}
	for (int i = 0; i < nb && ok; i++) {
		Tensor *t = VEC_AT(f->seg_buffers, Tensor, i);
		int64_t n = numel_of(t, sizes);
		ok = n >= 0 && (ws[i] = malloc((size_t)n * (size_t)dtype_size(t->dtype) + 1));
		if (ok)
			memset(ws[i], 0xff, (size_t)n * (size_t)dtype_size(t->dtype));
	}
	if (!ok)
		fail(r, "cannot allocate the workspace of ", f->name);
	for (int s = 0; s < k->segments.len && ok; s++) {
		Segment *sg = VEC_AT(f->segments, Segment, s);
		Fusion *g = sg->fusion;
		int64_t *gs = calloc((size_t)g->nsizes + 1, sizeof(int64_t));
		double *gp = calloc((size_t)g->nparams + 1, sizeof(double));
		void **gi = calloc((size_t)g->ninputs + 1, sizeof(void *));
		void **go = calloc((size_t)g->noutputs + 1, sizeof(void *));
		segment_sizes(sg, sizes, gs);
		for (int i = 0; i < g->nsig; i++) {
			SegArg a = sg->args[i];
			int slot = slot_of(g, i);
			char kind = a.from == 's' ? f->sig[a.index].kind : 'w';
			int from = a.from == 's' ? slot_of(f, a.index) : a.index;
			void *p = kind == 't' ? inputs[from] : kind == 'o' ? outputs[from]
				  : kind == 'w' ? ws[from] : NULL;
			if (g->sig[i].kind == 'p')
				gp[slot] = scalars[from];
			else if (g->sig[i].kind == 't')
				gi[slot] = p;
			else
				go[slot] = p;
		}
		Kernel *v = kernel_pick(VEC_AT(k->segments, Kernel, s), gs, NULL);
		SimOptions so = o ? *o : (SimOptions){0};
		if (s + 1 < k->segments.len)
			so.max_blocks = 0;
		SimResult sr;
		if (!v) {
			ok = fail(r, "the launcher refuses the sizes of segment ", g->name);
		} else {
			ok = sim_run(v, gs, gp, gi, go, &so, &sr);
			merge(f, sg, r, &sr, sizes);
			if (!ok) {
				r->over_budget = sr.over_budget;
				fail(r, sr.error ? sr.error : "", "");
			}
			sim_result_free(&sr);
		}
		free(gs);
		free(gp);
		free(gi);
		free(go);
	}
	for (int i = 0; i < nb; i++)
		free(ws[i]);
	free(ws);
	return ok;
}
