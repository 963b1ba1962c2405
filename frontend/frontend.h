/* frontend.h: the front end's umbrella header.
 *
 * Pipeline of this layer:
 *   parse (grammar/fus.y)      text -> AST (this file's Ast* types, built by ast_* calls)
 *   sema (sema.c)              names, dtypes, shapes, index ranges; AST -> fusion IR (ir/ir.h)
 *
 * The schedule (a block's directives, or the automatic choice) is the next layer:
 * scheduler/scheduler.h.
 *
 * The grammar does no checking beyond syntax: every name, dtype, verb and shape is resolved in
 * sema.c / scheduler/schedule.c, so each mistake gets a diagnostic with the span of the text at fault.
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
	/* AE_ACCESS made by the segment builder, never by the parser (scheduler/segment.c,
	 * padded operands): bit d set, subscript d's index keeps the range it has (the read
	 * covers part of dimension d, or more of it under `where` on its bound); without one
	 * yet it takes dimension d's, which a later subscript of another extent replaces */
	unsigned lenient;
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
/* Prints a schedule block in .fus syntax, one directive per line (`fusc --emit=schedule`). */
void ast_print_schedule(const AstSchedule *s, Buf *out);
/* A fusion in .fus syntax (what the parser reads back to the same tree). */
void ast_print_fusion(const AstFusion *f, Buf *out);

/* grammar/fus.y + grammar/fus.l: parses one source file (already registered in d as `file`).
 * Syntax errors go to d; returns the (possibly partial) AST, never NULL. */
AstFile *parse_file(Arena *a, Diag *d, int file);

/* frontend/sema.c: checks the AST and builds one Fusion per definition (in file order), with
 * its schedule block attached as f->ast_schedule for schedule_apply. Errors go to d. */
Program *sema_program(Arena *a, Diag *d, AstFile *f);
/* One fusion's IR, built afresh from its definition (f->failed after errors); the schedule
 * block is not attached. auto_schedule rebuilds a fusion this way to try another schedule. */
Fusion *sema_fusion(Arena *a, Diag *d, AstFusion *af);

/* frontend/lowp_exp.c: the f32 exponentials of f whose value reaches only f16/bf16 outputs
 * through products, quotients and sums of exponentials become OP_EXP_LOWP (computed with
 * ex2.approx; docs/language.md, "Float accuracy on the GPU"). sema_fusion calls it. */
void sema_lowp_exp(Arena *a, Fusion *f);

/* frontend/cnames.c: why a fusion cannot be named `name` ("a C keyword", "a C standard library
 * name (<stdlib.h>)", ...: its launcher is a global C function of that name), or NULL. */
const char *sema_c_name_clash(const char *name);

#endif
