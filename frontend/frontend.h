/* frontend.h: the front end's umbrella header.
 *
 * Pipeline of this layer:
 *   parse (grammar/fus.y)      text -> AST (this file's Ast* types, built by ast_* calls)
 *   sema (sema.c)              names, dtypes, shapes, index ranges; AST -> fusion IR (ir/ir.h)
 *   schedule (schedule.c)      applies a schedule block's directives to the fusion IR
 *   auto_schedule.c            picks a schedule when a fusion has none
 *
 * The grammar does no checking beyond syntax: every name, dtype, verb and shape is resolved in
 * sema.c / schedule.c, so each mistake gets a diagnostic with the span of the text at fault.
 */
#ifndef FUSC_FRONTEND_H
#define FUSC_FRONTEND_H

#include "../ir/ir.h"
#include "../support/support.h"

/* ---- AST ------------------------------------------------------------------------------- */

typedef struct AstExpr AstExpr;

typedef struct AstName {
	const char *name;
	Span span;
} AstName;

typedef enum AstExprKind {
	AE_INT,     /* ival */
	AE_FLOAT,   /* fval (text kept in name for exact printing) */
	AE_NAME,    /* name: a scalar parameter, scalar temporary, size symbol or index */
	AE_ACCESS,  /* name[args]: tensor access; args are AE_NAME (index) or AE_INT */
	AE_UNARY,   /* op ('-' or '!'), args[0] */
	AE_BINARY,  /* op (BinOp), args[0], args[1] */
	AE_TERNARY, /* args[0] ? args[1] : args[2] */
	AE_CALL,    /* name(args): built-in function or cast */
	AE_REDUCE,  /* name(idx: args[0]): sum / max / min over the indices in idx */
} AstExprKind;

struct AstExpr {
	AstExprKind kind;
	Span span;
	const char *name; /* AE_NAME, AE_ACCESS, AE_CALL, AE_REDUCE; AE_FLOAT: literal text */
	Span name_span;
	int op;           /* AE_UNARY: '-' or '!'; AE_BINARY: an IrOp (OP_ADD, ...) */
	int64_t ival;
	double fval;
	AstExpr **args;
	int nargs;
	AstName *idx;     /* AE_REDUCE: reduction indices */
	int nidx;
	int depth;        /* levels of nesting: 1 for a leaf, 1 + the deepest argument else */
};

/* The deepest expression fusc accepts, in levels of operators, calls and reductions: one
 * statement's right-hand side (checked by the parser), and a definition with every inlined
 * tensor it reads expanded (checked by sema). Every later walker recurses over expressions,
 * so this bound keeps their stack use bounded (docs/design.md, "Limits"). */
#define FUS_MAX_EXPR_DEPTH 1000

/* The most elements a tensor's constant dimensions may hold, 2^48 (sema; docs/design.md,
 * "Limits"): index arithmetic on constant extents then never overflows i64. */
#define FUS_MAX_CONST_ELEMS ((int64_t)1 << 48)

/* A dimension of a declared tensor: an integer literal or a size symbol. */
typedef struct AstDim {
	const char *sym; /* NULL for a literal */
	int64_t value;
	Span span;
} AstDim;

typedef struct AstParam {
	AstName name;
	AstName dtype;   /* resolved by sema */
	AstDim *dims;
	int ndims;       /* 0: scalar (an output with 0 dims is a 0-d tensor) */
	Span span;
} AstParam;

typedef struct AstStmt {
	AstName lhs;
	AstName *idx;    /* left-hand indices; nidx == 0 and is_scalar: `t = EXPR;` */
	int nidx;
	bool is_scalar;
	AstExpr *rhs;
	Span span;
} AstStmt;

/* A directive argument: an identifier, an integer, or a dotted name (blockIdx.x). */
typedef enum AstArgKind { AA_NAME, AA_INT, AA_DOTTED } AstArgKind;
typedef struct AstArg {
	AstArgKind kind;
	const char *name;  /* AA_NAME, AA_DOTTED ("blockIdx.x") */
	int64_t value;     /* AA_INT */
	Span span;
} AstArg;

/* `[result =] tensor.verb(args) [-> names];` */
typedef struct AstDirective {
	AstName result;    /* name NULL when absent */
	AstName tensor;
	AstName verb;
	AstArg *args;
	int nargs;
	AstName *outs;     /* names after "->" */
	int nouts;
	Span span;
} AstDirective;

typedef struct AstSchedule {
	AstName fusion;
	bool is_auto;      /* `schedule NAME auto;` */
	bool generated;    /* written by the automatic scheduler, not by the user */
	AstDirective **dirs;
	int ndirs;
	Span span;
} AstSchedule;

typedef struct AstFusion {
	AstName name;
	AstParam **params;
	int nparams;
	AstParam **outs;
	int nouts;
	AstStmt **stmts;
	int nstmts;
	AstSchedule *schedule; /* attached by sema (schedule blocks are matched by name) */
	Span span;
} AstFusion;

typedef struct AstFile {
	AstFusion **fusions;
	int nfusions;
	AstSchedule **schedules;
	int nschedules;
} AstFile;

/* frontend/ast.c: constructors called by grammar actions, one call per action. Lists are built
 * with Vec and frozen into (pointer, count) pairs by the constructors. */
AstExpr *ast_int(Arena *a, Span s, int64_t v);
AstExpr *ast_float(Arena *a, Span s, const char *text);
AstExpr *ast_name(Arena *a, Span s, const char *name);
AstExpr *ast_access(Arena *a, Span s, AstName name, Vec *args);
AstExpr *ast_unary(Arena *a, Span s, int op, AstExpr *e);
AstExpr *ast_binary(Arena *a, Span s, int op, AstExpr *l, AstExpr *r);
AstExpr *ast_ternary(Arena *a, Span s, AstExpr *c, AstExpr *t, AstExpr *f);
AstExpr *ast_call(Arena *a, Span s, AstName fn, Vec *args);
AstExpr *ast_reduce(Arena *a, Span s, AstName op, Vec *idx /* of AstName* */, AstExpr *body);
AstName *ast_name_ptr(Arena *a, Span s, const char *name);
AstDim *ast_dim_int(Arena *a, Span s, int64_t v);
AstDim *ast_dim_sym(Arena *a, Span s, const char *sym);
AstParam *ast_param(Arena *a, Span s, AstName name, AstName dtype, Vec *dims /* AstDim* */);
AstStmt *ast_stmt(Arena *a, Span s, AstName lhs, Vec *idx /* AstName*, NULL: scalar */,
		  AstExpr *rhs);
AstArg *ast_arg_name(Arena *a, Span s, const char *name);
AstArg *ast_arg_int(Arena *a, Span s, int64_t v);
AstArg *ast_arg_dotted(Arena *a, Span s, const char *l, const char *r);
AstDirective *ast_directive(Arena *a, Span s, AstName *result, AstName tensor, AstName verb,
			    Vec *args /* AstArg* */, Vec *outs /* AstName* */);
AstSchedule *ast_schedule(Arena *a, Span s, AstName fusion, bool is_auto, Vec *dirs);
AstFusion *ast_fusion(Arena *a, Span s, AstName name, Vec *params, Vec *outs, Vec *stmts);
void ast_file_add_fusion(Arena *a, AstFile *f, AstFusion *fu);
void ast_file_add_schedule(Arena *a, AstFile *f, AstSchedule *s);
/* Prints the AST as indented text (`fusc --emit=ast`). */
void ast_print(AstFile *f, Buf *out);

/* grammar/fus.y + grammar/fus.l: parses one source file (already registered in d as `file`).
 * Syntax errors go to d; returns the (possibly partial) AST, never NULL. */
AstFile *parse_file(Arena *a, Diag *d, int file);

/* frontend/sema.c: checks the AST and builds one Fusion per definition (in file order), with
 * its schedule block attached as f->ast_schedule for schedule_apply. Errors go to d. */
Program *sema_program(Arena *a, Diag *d, AstFile *f);
/* One fusion's IR, built afresh from its definition (f->failed after errors); the schedule
 * block is not attached. auto_schedule rebuilds a fusion this way to try another schedule. */
Fusion *sema_fusion(Arena *a, Diag *d, AstFusion *af);

/* frontend/cnames.c: why a fusion cannot be named `name` ("a C keyword", "a C standard library
 * name (<stdlib.h>)", ...: its launcher is a global C function of that name), or NULL. */
const char *sema_c_name_clash(const char *name);

/* frontend/schedule.c: applies the fusion's schedule directives in order (or calls
 * auto_schedule when there is no schedule block / `auto`). Errors go to d. */
bool schedule_apply(Arena *a, Diag *d, Fusion *f);

/* Individual directives, also called by auto_schedule and the unit tests. They return false
 * after reporting an error at `at`. */
bool sched_split(Arena *a, Diag *d, Tensor *t, Axis *ax, int64_t factor, const char *outer,
		 const char *inner, Span at);
bool sched_merge(Arena *a, Diag *d, Tensor *t, Axis *outer, Axis *inner, const char *name,
		 Span at);
bool sched_bind(Fusion *f, Diag *d, Tensor *t, Axis *ax, ParType p, Span at);

/* Default placement at the end of a schedule (docs/schedule.md defaults): caches and reductions read by
 * another statement that have no compute_at are computed at their reader's most inlined legal
 * position (docs/caching.md, docs/reductions.md). schedule_apply calls it after the last
 * directive; auto_schedule may call it after its own choices. */
bool sched_place_defaults(Arena *a, Diag *d, Fusion *f);

/* ---- schedule internals, shared by frontend/schedule.c (directives, compute_at),
 * frontend/cache_directives.c (caches, default placement) and frontend/rfactor.c ---------- */

/* One schedule block being applied. */
typedef struct Sched {
	Arena *a;
	Diag *d;
	Fusion *f;
	/* Names a failed directive would have made ("tensor" or "tensor.axis"; "tensor.*": any
	 * axis of a tensor whose domain is unknown after a failed compute_at or rfactor). A later
	 * use of one fails silently: the failed directive was reported, its consequences are
	 * not (frontend/schedule.c, poison). */
	Vec poisoned;
	bool poison_all; /* too many to keep: every unknown name is a consequence */
	bool generated;  /* AstSchedule.generated: checks of the user's intent are off */
} Sched;

/* One directive of a schedule block (a failed one poisons the names it would have made), and
 * the end of the schedule (default placement, then the checks of the final schedule; `ok`:
 * every directive held). schedule_apply is these two; auto_schedule applies its generated
 * directives the same way. */
bool sched_directive(Sched *s, AstDirective *dir);
bool sched_finish(Sched *s, bool ok);

typedef struct ReadMap { /* how a reader subscripts a tensor it reads */
	Arena *a;
	Tensor *t;
	Axis **first;   /* t->ndim entries, once found */
	bool found, differ;
} ReadMap;

/* compute_at replay: consumer axis -> producer axis */
typedef struct Replay {
	Axis **uaxes, **taxes;
	int n, cap;
} Replay;

Axis *sched_arg_axis(Sched *s, Tensor *t, AstArg *arg);
bool sched_check_caches(Sched *s);
bool sched_check_new_name(Sched *s, AstName n);
bool sched_compute_at_pos(Sched *s, Tensor *t, Tensor *u, int pos, Span at);
Tensor *sched_computed_at(Fusion *f, Tensor *t);
bool sched_cache_after(Sched *s, Tensor *t, AstDirective *dir);
bool sched_cache_before(Sched *s, Tensor *t, AstDirective *dir);
bool sched_cp_async(Sched *s, Tensor *c, AstDirective *dir);
bool sched_rfactor(Sched *s, Tensor *t, AstDirective *dir);
/* frontend/welford.c: `s2.welford()` (the pattern, at the directive) and the final
 * schedule's checks of every welford pair (placement, loops, no grid reduction, no rfactor). */
bool sched_welford(Sched *s, Tensor *t, AstDirective *dir);
bool sched_check_welford(Sched *s);
bool sched_stages(Sched *s, Tensor *c, AstDirective *dir, bool double_buffer);
bool sched_finish_caches(Sched *s);
void sched_insert_tensor(Arena *a, Fusion *f, Tensor *c, int at);
bool sched_is_ancestor_of_shared(Axis *x, Tensor *u, int pos);
Axis *sched_new_axis(Arena *a, Tensor *t, AxisKind kind, const char *name, IrExpr *extent,
		      Span at);
bool sched_parse_mem(Sched *s, AstArg *g, MemType *m);
ReadMap sched_read_map(Arena *a, Tensor *t, Tensor *u);
Tensor *sched_reduction_home(Tensor **u, int n, int *limit);
Axis *sched_replay_get(Replay *r, Axis *u);
void sched_replay_put(Arena *a, Replay *r, Axis *u, Axis *t);

/* frontend/auto_schedule.c: the automatic scheduler (docs/schedule.md defaults; docs/auto_schedule.md).
 * It tries its schedules from the tuned one down and keeps the first that is accepted and
 * lowers; a refused one leaves no diagnostic and no trace in the fusion (rebuilt by sema). */
typedef enum AutoLevel {
	AUTO_TUNED,   /* vectors, register caches, block reductions per row group */
	AUTO_SCALAR,  /* the same without vectors, register caches or kept intermediates */
	AUTO_PLAIN,   /* one thread per output element, each reduction serial in its reader */
	AUTO_SERIAL,  /* the same on one thread */
	AUTO_LEVELS
} AutoLevel;
typedef struct AutoOptions {
	unsigned refuse; /* tests: levels (bits 1 << AutoLevel) refused after they lowered */
} AutoOptions;
bool auto_schedule(Arena *a, Diag *d, Fusion *f);
bool auto_schedule_with(Arena *a, Diag *d, Fusion *f, const AutoOptions *o);
const char *auto_level_name(AutoLevel level);

/* frontend/auto_nests.c: every loop nest gets its own copy of the reductions it reads, and no
 * statement reads an output (docs/auto_schedule.md, "One loop nest per output"). False when
 * that would take too many copies. */
typedef enum AutoCopies {
	AUTO_COPY_NEST,   /* the reductions a nest's output reads are shared in the nest */
	AUTO_COPY_READER, /* every stored reader (output or reduction) has its own copies */
} AutoCopies;
bool auto_split_nests(Arena *a, Fusion *f, AutoCopies mode);

/* A set of names (open addressing), for fresh names in fusions of any size. */
typedef struct NameSet {
	Arena *a;
	const char **slots;
	int cap, len;
} NameSet;
bool names_has(NameSet *s, const char *n);
void names_add(NameSet *s, const char *n);
/* base, base2, base3, ...: the first not in s, added to it. */
const char *names_fresh(NameSet *s, const char *base);
/* Every tensor, root axis, parameter and size name of f. */
void names_of_fusion(NameSet *s, Fusion *f);

/* frontend/frontend.c: text -> scheduled Program in one call (parse, sema, schedule). Stops
 * after the first phase that reported errors; returns NULL then. */
Program *frontend_compile(Arena *a, Diag *d, int file);

#endif
