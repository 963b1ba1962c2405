/* mma.c: the tensor-core instructions fusc knows (docs/tensor_cores.md) and the compiler's
 * table of their fragment layouts: which lane of a warp holds which element of A, B and C.
 *
 * m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"), with
 * g = lane / 4 and t = lane % 4:
 *   A (16 x 16, row-major, 8 halves a0..a7 per lane): a0, a1 = (g, 2t + 0/1); a2, a3 at row
 *     g + 8; a4, a5 at column + 8; a6, a7 at both;
 *   B (16 x 8, k x n, 4 halves b0..b3): b0, b1 = (k = 2t + 0/1, n = g); b2, b3 at k + 8;
 *   C (16 x 8, 4 floats c0..c3): c0, c1 = (g, 2t + 0/1); c2, c3 at row g + 8.
 * Pairs of halves travel in one 32-bit register, the even element in the low half.
 */
#include <string.h>

#include "ir/ir.h"

/* {rg, rt, rc, cg, ct, cc}: row = rg*g + rt*t + rc, col = cg*g + ct*t + cc */
static const MmaFrag m16n8k16_a[8] = {
	{1, 0, 0, 0, 2, 0}, {1, 0, 0, 0, 2, 1}, {1, 0, 8, 0, 2, 0}, {1, 0, 8, 0, 2, 1},
	{1, 0, 0, 0, 2, 8}, {1, 0, 0, 0, 2, 9}, {1, 0, 8, 0, 2, 8}, {1, 0, 8, 0, 2, 9},
};
static const MmaFrag m16n8k16_b[4] = {
	{0, 2, 0, 1, 0, 0}, {0, 2, 1, 1, 0, 0}, {0, 2, 8, 1, 0, 0}, {0, 2, 9, 1, 0, 0},
};
static const MmaFrag m16n8k16_c[4] = {
	{1, 0, 0, 0, 2, 0}, {1, 0, 0, 0, 2, 1}, {1, 0, 8, 0, 2, 0}, {1, 0, 8, 0, 2, 1},
};

static const MmaInstr instrs[] = {
	{MMA_M16N8K16, "m16n8k16", MMA_SYNC, 16, 8, 16, 80, 8, 4, 4, m16n8k16_a, m16n8k16_b,
	 m16n8k16_c},
};
_Static_assert(sizeof instrs / sizeof instrs[0] == MMA_COUNT, "one entry per MMA_INSTRS");

const MmaInstr *mma_instr(MmaShape s)
{
	return &instrs[s];
}

const MmaInstr *mma_instr_by_name(const char *name)
{
	for (int i = 0; i < MMA_COUNT; i++)
		if (strcmp(instrs[i].name, name) == 0)
			return &instrs[i];
	return NULL;
}

const char *mma_ptx(const MmaInstr *in, DType ab)
{
	(void)in; /* one shape so far */
	return ab == DT_BF16 ? "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
			     : "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
}

int mma_slot(const Stmt *s, char op, int *count)
{
	const MmaInstr *in = s->mma.instr;
	int na = s->mma.ldm & MMA_LDM_A ? 1 : in->na, nb = s->mma.ldm & MMA_LDM_B ? 1 : in->nb;
	*count = op == 'c' ? in->nc : op == 'a' ? na : nb;
	return op == 'c' ? 0 : op == 'a' ? in->nc : in->nc + na;
}

void mma_frag_at(const MmaInstr *in, char operand, int lane, int r, int *row, int *col)
{
	const MmaFrag *f = operand == 'a' ? &in->a[r] : operand == 'b' ? &in->b[r] : &in->c[r];
	int g = lane / 4, t = lane % 4;
	*row = f->rg * g + f->rt * t + f->rc;
	*col = f->cg * g + f->ct * t + f->cc;
}
