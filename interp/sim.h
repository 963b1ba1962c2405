/* sim.h: the kernel simulator's internals, shared by interp/simulate.c (execution and
 * detectors) and interp/sim_report.c (reports), and used by its unit tests. The public API is
 * the `interp/simulate.c` section of interp/interp.h.
 *
 * Model (docs/check.md):
 *   - every buffer holds values already rounded to its dtype (SVal: double for floats, int64
 *     for integers and bool) and one initialized bit per element;
 *   - global buffers are the fusion's inputs (initialized) and outputs (not);
 *   - a shared buffer has one copy per block, cleared (uninitialized) when a block starts;
 *   - a local buffer has one copy per thread context, cleared by each execution of its alloc;
 *   - race detection works in epochs: S->epoch grows at every block start and at every
 *     barrier, so two accesses by different threads to one element conflict when they fall in
 *     the same epoch (a barrier orders everything before it against everything after it);
 *   - cp.async copies are queued per thread and land when that thread's wait retires their
 *     group; until then their destination elements are `pending`.
 */
#ifndef FUSC_SIM_H
#define FUSC_SIM_H

#include "interp/interp.h"

typedef InterpVal SVal; /* interp.h: shared with the reference */

/* Per-element tracking for shared memory (races, cp.async). Epoch 0 means never. */
typedef struct SimShared {
	uint32_t w_epoch, r_epoch;
	int32_t w_tid, r_tid, r_tid2; /* r_tid2: a second reader thread, -1 if none */
	int32_t pending;              /* issuing thread + 1 while a cp.async to it is in flight */
	Stmt *w_stmt, *r_stmt;
} SimShared;

/* Per-element last writer of a written global buffer. */
typedef struct SimGlobal {
	uint32_t epoch; /* 0: never written */
	int32_t tid;
	int64_t block;
} SimGlobal;

typedef struct SimBuf {
	Tensor *t;
	MemType mem;
	DType dt;
	bool is_input;
	/* global and shared: one copy */
	int64_t n;
	SVal *v;
	uint8_t *init;
	SimShared *sh;      /* shared only */
	SimGlobal *gl;      /* global outputs only */
	uint64_t gen;       /* shared: the block generation its contents belong to */
	/* local: one copy per thread context */
	int64_t *ln;
	SVal **lv;
	uint8_t **linit;
} SimBuf;

typedef struct SimFrame {
	Stmt *s;       /* next statement of this list */
	Stmt *loop;    /* the KS_FOR whose body this is, or NULL */
	int64_t extent;
} SimFrame;

/* A cp.async in flight: n elements dst[dst_off..] <- src[src_off..] (zeros when zero_fill).
 * Only the first nread elements come from src (a partial vector, Stmt.size); the rest are
 * zeros. */
typedef struct SimCopy {
	SimBuf *dst, *src;
	int64_t dst_off, src_off;
	int n;
	bool zero_fill;
	int group;     /* the commit group, 0 while uncommitted */
	Stmt *stmt;
	int nread;     /* elements read from src (0 when zero_fill) */
} SimCopy;

enum { TS_RUN, TS_BARRIER, TS_WARP, TS_DONE }; /* TS_WARP: at a warp-collective KS_MMA */

#define SIM_MAX_DEPTH 64

typedef struct SimThread {
	int64_t tid[3];
	int32_t lin;          /* linear thread index in the block */
	int ctx;              /* which copy of the local buffers */
	SVal *vars;           /* by Var.id */
	uint8_t *var_init;
	SimFrame stack[SIM_MAX_DEPTH];
	int depth;
	int state;
	Stmt *at;             /* TS_BARRIER: the barrier */
	SimCopy *copies;
	int ncopies, capcopies;
	int groups;           /* groups committed so far */
} SimThread;

typedef struct Sim {
	Kernel *k;
	Fusion *f;
	const int64_t *sizes;
	SVal *params;         /* f->params order */
	int64_t grid[3], block[3], nthreads;
	bool has_sync;
	/* buffers by tensor (open addressing on the Tensor pointer) */
	SimBuf **bufs;
	int nbufs;
	struct SimSlot { void *key; int val; } *map;
	int mapcap;
	int nctx;             /* local buffer copies (1 without barriers) */
	/* the current block and epoch */
	int64_t bid[3], blin;
	uint32_t epoch, block_epoch;
	uint64_t gen;
	/* the current thread and statement (for reports) */
	SimThread *cur;
	Stmt *stmt;
	SimResult *res;
	int capreports;
	/* the budget (SimOptions; 0: none) and what is used of it */
	int64_t max_elements, max_steps;
	int64_t elements;     /* global buffers */
} Sim;

/* interp/simulate.c: the cp.async model behind KS_CP_ASYNC, KS_CP_COMMIT and KS_CP_WAIT. */
void sim_async_copy(Sim *S, SimThread *T, Stmt *s, SimBuf *dst, int64_t dst_off, SimBuf *src,
		    int64_t src_off, int n, bool zero_fill);
/* The same with only the first nread (0..n) elements read from src, the rest zero-filled. */
void sim_async_copy_part(Sim *S, SimThread *T, Stmt *s, SimBuf *dst, int64_t dst_off,
			 SimBuf *src, int64_t src_off, int n, int nread);
void sim_async_commit(Sim *S, SimThread *T);
/* Retires every group but the newest `keep` (cp.async.wait_group keep); keep < 0: wait_all. */
void sim_async_wait(Sim *S, SimThread *T, int keep);
SimBuf *sim_buf(Sim *S, Tensor *t);

/* interp/sim_report.c */
void sim_report(Sim *S, SimFault kind, SimBuf *b, int64_t off, int64_t size, bool write);
/* Adds a report and returns it (merged with an earlier one of the same kind, statement and
 * buffer: then NULL, the earlier one counted). */
SimReport *sim_report_new(Sim *S, SimFault kind, Stmt *s, const char *buffer);

/* The shared-memory wavefronts of one ldmatrix phase (8 rows of 16 bytes at element offsets
 * o of es-byte elements): 1 when its rows fall in 8 different 16-byte bank groups. */
int sim_ldm_wavefronts(const int64_t o[8], int es);

#endif
