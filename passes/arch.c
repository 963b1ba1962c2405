/* arch.c: the minimum architecture a kernel needs, from the features it uses, checked against
 * the target (--arch).
 *
 * The baseline is sm_75, the oldest target NVRTC of CUDA 13 accepts: the generated code needs
 * nothing newer (f16 conversions are PTX available everywhere, bf16 rounding is done in integer
 * arithmetic). A feature that needs more raises Kernel.min_arch and names the .fus text that
 * asked for it, so an error points at the directive. Add new features to `features` below.
 */
#include "passes/passes.h"

#define ARCH_BASELINE 75

/* A feature found in the kernel: what it is, the arch it needs, the text that asked for it. */
typedef struct Need {
	int arch;
	const char *what;
	Span span;
} Need;

static void need(Need *worst, int arch, const char *what, Span span)
{
	if (arch > worst->arch)
		*worst = (Need){arch, what, span};
}

/* The statements that need a newer architecture than the baseline: cp.async (sm_80), at the
 * cp_async directive; an mma (its instruction's arch: mma.sync m16n8k16 sm_80), at the mma
 * directive. */
static void stmt_needs(Stmt *s, Need *worst)
{
	if (s->kind == KS_CP_ASYNC)
		need(worst, 80, "cp.async", s->span);
	if (s->kind == KS_MMA)
		need(worst, s->mma.instr->min_arch, s->mma.instr->family == MMA_SYNC ? "mma.sync" : "mma",
		     s->span);
}

static bool scan(Stmt *s, void *worst)
{
	stmt_needs(s, worst);
	return false;
}

static Need worst_need(Kernel *k)
{
	Need worst = {ARCH_BASELINE, NULL, {0}};
	ir_stmts_any(k->body, scan, &worst);
	return worst;
}

void pass_arch_explain(Kernel *k, int target, Diag *d)
{
	Need worst = worst_need(k);
	const char *what = worst.what ? worst.what : "the generated code";
	diag_error(d, worst.span, "%s needs sm_%d, but the target is sm_%d", what, k->min_arch,
		   target);
	diag_note(d, (Span){0}, "use --arch=sm_%d or newer, or --no-arch-check to emit it anyway",
		  k->min_arch);
}

bool pass_arch(Kernel *k, Diag *d)
{
	Need worst = worst_need(k);
	int target = k->options->arch;

	if (k->min_arch < worst.arch)
		k->min_arch = worst.arch;
	if (target >= k->min_arch)
		return true;
	if (k->options->no_arch_check) {
		const char *what = worst.what ? worst.what : "the generated code";
		diag_warning(d, worst.span, "%s needs sm_%d, but the target is sm_%d; emitting it "
			     "anyway (--no-arch-check)", what, k->min_arch, target);
		return true;
	}
	pass_arch_explain(k, target, d);
	return false;
}
