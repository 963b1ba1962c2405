/* check_parser.c: the grammar (grammar/fus.y, fus.l) and the AST printer (frontend/ast.c).
 * Each test parses text registered as "t.fus" and compares ast_print's text and the rendered
 * diagnostics exactly. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

typedef struct Parsed {
	char *ast;   /* ast_print text (malloc'd) */
	char *diags; /* rendered diagnostics (malloc'd), "" if none */
	int errors;
	AstFile *file;
	Arena *arena;
} Parsed;

/* Parses the first len bytes of text (which may hold NUL bytes). */
static Parsed parse_len(const char *text, size_t len)
{
	Parsed p = {0};
	Diag *d = diag_new();
	int f = diag_add_file(d, "t.fus", text, len);
	Buf b = {0};

	p.arena = arena_new();
	p.file = parse_file(p.arena, d, f);
	ck_assert_ptr_nonnull(p.file);
	ast_print(p.file, &b);
	p.ast = b.s;
	p.errors = diag_error_count(d);
	p.diags = diag_render(d);
	diag_free(d);
	return p;
}

static Parsed parse(const char *text)
{
	return parse_len(text, strlen(text));
}

static void done(Parsed *p)
{
	free(p->ast);
	free(p->diags);
	arena_free(p->arena);
}

/* Parses text that must have no errors and compares its AST text. */
static void check_ast(const char *text, const char *want)
{
	Parsed p = parse(text);
	ck_assert_msg(p.errors == 0, "unexpected diagnostics:\n%s", p.diags);
	ck_assert_str_eq(p.ast, want);
	done(&p);
}

/* Parses text that must fail and compares the diagnostics. */
static void check_diags(const char *text, int nerrors, const char *want)
{
	Parsed p = parse(text);
	ck_assert_str_eq(p.diags, want);
	ck_assert_int_eq(p.errors, nerrors);
	done(&p);
}

/* Wraps one statement in a fusion so expression tests stay short. */
static void check_stmt(const char *stmt, const char *want)
{
	char text[512], ast[512];
	snprintf(text, sizeof text, "fusion f(x: f32[N]) -> (y: f32[N]) {\n%s\n}\n", stmt);
	snprintf(ast, sizeof ast,
		 "(fusion f\n  (param x f32 [N])\n  (out y f32 [N])\n  %s)\n", want);
	check_ast(text, ast);
}

/* ---- well-formed input ------------------------------------------------------------------- */

START_TEST(saxpy_with_schedule)
{
	check_ast("// saxpy.fus\n"
		  "fusion saxpy(a: f32, x: f32[N], y: f32[N]) -> (z: f32[N]) {\n"
		  "  z[i] = a * x[i] + y[i];\n"
		  "}\n"
		  "\n"
		  "schedule saxpy {\n"
		  "  z.split(i, 1024) -> (io, ii);\n"
		  "  z.split(ii, 4) -> (it, iv);\n"
		  "  z.bind(io, blockIdx.x);\n"
		  "  z.bind(it, threadIdx.x);\n"
		  "  z.vectorize(iv);\n"
		  "}\n",
		  "(fusion saxpy\n"
		  "  (param a f32)\n"
		  "  (param x f32 [N])\n"
		  "  (param y f32 [N])\n"
		  "  (out z f32 [N])\n"
		  "  (assign z [i] (+ (* a x[i]) y[i])))\n"
		  "(schedule saxpy\n"
		  "  (z.split i 1024 -> io ii)\n"
		  "  (z.split ii 4 -> it iv)\n"
		  "  (z.bind io blockIdx.x)\n"
		  "  (z.bind it threadIdx.x)\n"
		  "  (z.vectorize iv))\n");
}
END_TEST

START_TEST(signature_forms)
{
	check_ast("fusion f(n: i64, x: f16[M, 64], s: bf16[4]) -> (y: f32[M, 64], total: f32) "
		  "{ }\n"
		  "fusion g() -> () {}\n",
		  "(fusion f\n"
		  "  (param n i64)\n"
		  "  (param x f16 [M 64])\n"
		  "  (param s bf16 [4])\n"
		  "  (out y f32 [M 64])\n"
		  "  (out total f32))\n"
		  "(fusion g)\n");
}
END_TEST

START_TEST(softmax_reductions)
{
	check_ast("fusion softmax(x: f32[M, N]) -> (y: f32[M, N]) {\n"
		  "  m[i]    = max(j: x[i, j]);\n"
		  "  e[i, j] = exp(x[i, j] - m[i]);\n"
		  "  s[i]    = sum(j: e[i, j]);\n"
		  "  y[i, j] = e[i, j] / s[i];\n"
		  "}\n",
		  "(fusion softmax\n"
		  "  (param x f32 [M N])\n"
		  "  (out y f32 [M N])\n"
		  "  (assign m [i] (max [j] x[i, j]))\n"
		  "  (assign e [i j] (exp (- x[i, j] m[i])))\n"
		  "  (assign s [i] (sum [j] e[i, j]))\n"
		  "  (assign y [i j] (/ e[i, j] s[i])))\n");
}
END_TEST

START_TEST(reduce_versus_call)
{
	/* max(a, b) is a call; max(j, k: e) a reduction over two indices. */
	check_stmt("y[i] = max(j, k: x[j] * x[k]) + max(x[i], 0.0) + min(i: x[i]);",
		   "(assign y [i] (+ (+ (max [j k] (* x[j] x[k])) (max x[i] 0.0)) "
		   "(min [i] x[i])))");
}
END_TEST

/* A reduction is an expression like any other (sema lifts the ones that are not a whole
 * right-hand side): inside operators, calls, a ternary and another reduction. */
START_TEST(reductions_inside_expressions)
{
	check_stmt("y[i] = c ? x[i] / sum(j: x[j]) : log(sum(j: exp(max(k: x[k]) - x[j]))) / N;",
		   "(assign y [i] (?: c (/ x[i] (sum [j] x[j])) "
		   "(/ (log (sum [j] (exp (- (max [k] x[k]) x[j])))) N)))");
	/* the reduction's span, which sema's diagnostics about it underline, is sum(...) */
	Parsed p = parse("fusion f(x: f32[N]) -> (y: f32[N]) {\n  y[i] = 2.0 * sum(j: x[j]) + 1.0;\n}\n");
	ck_assert_int_eq(p.errors, 0);
	AstExpr *e = p.file->fusions[0]->stmts[0]->rhs->args[0]->args[1];
	ck_assert_int_eq(e->kind, AE_REDUCE);
	ck_assert_int_eq(e->span.lo, 52);
	ck_assert_int_eq(e->span.hi, 64);
	done(&p);
}
END_TEST

START_TEST(precedence_and_associativity)
{
	check_stmt("y[i] = 1 + 2 * 3 - 4 / 5 % 6;",
		   "(assign y [i] (- (+ 1 (* 2 3)) (% (/ 4 5) 6)))");
	check_stmt("y[i] = a < b == c >= d != e;",
		   "(assign y [i] (!= (== (< a b) (>= c d)) e))");
	check_stmt("y[i] = a || b && c || !d;", "(assign y [i] (|| (|| a (&& b c)) (! d)))");
	check_stmt("y[i] = a ? b : c ? d : e;", "(assign y [i] (?: a b (?: c d e)))");
	check_stmt("y[i] = c > 0 ? a + 1 : -b * 2;",
		   "(assign y [i] (?: (> c 0) (+ a 1) (* (- b) 2)))");
	check_stmt("y[i] = -(a - b) - - c;", "(assign y [i] (- (- (- a b)) (- c)))");
	check_stmt("y[i] = a <= b && a > b;", "(assign y [i] (&& (<= a b) (> a b)))");
}
END_TEST

START_TEST(literals_and_accesses)
{
	check_stmt("y[i] = 1.0 + 1e-5 + .5 + 2. + 3E+2 + 0 + 9223372036854775807;",
		   "(assign y [i] (+ (+ (+ (+ (+ (+ 1.0 1e-5) .5) 2.) 3E+2) 0) "
		   "9223372036854775807))");
	check_stmt("y[i] = x[j, i] + b[0, j] + f32(x[i]) + where(c, a, b) + pow(a, 2);",
		   "(assign y [i] (+ (+ (+ (+ x[j, i] b[0, j]) (f32 x[i])) (where c a b)) "
		   "(pow a 2)))");
	check_stmt("t = N;", "(assign t N)");
	check_stmt("y[i] = f();", "(assign y [i] (f))");
}
END_TEST

START_TEST(literal_values_and_spans)
{
	Parsed p = parse("fusion f(x: f32[N]) -> (y: f32[N]) {\n"
			 "  y[i] = 42 + 2.5e1 * x[i, 3];\n"
			 "}\n");
	ck_assert_int_eq(p.errors, 0);
	ck_assert_int_eq(p.file->nfusions, 1);
	AstFusion *f = p.file->fusions[0];
	ck_assert_int_eq(f->nstmts, 1);
	AstStmt *s = f->stmts[0];
	ck_assert(!s->is_scalar);
	ck_assert_int_eq(s->nidx, 1);
	ck_assert_str_eq(s->idx[0].name, "i");
	/* Spans are byte offsets: the statement is "y[i] = ... ;" on line 2. */
	ck_assert_uint_eq(s->span.lo, 39);
	ck_assert_uint_eq(s->span.hi, 67);
	AstExpr *add = s->rhs;
	ck_assert_int_eq(add->kind, AE_BINARY);
	ck_assert_int_eq(add->op, OP_ADD);
	ck_assert_uint_eq(add->span.lo, 46);
	ck_assert_uint_eq(add->span.hi, 66);
	ck_assert_int_eq(add->args[0]->kind, AE_INT);
	ck_assert_int_eq(add->args[0]->ival, 42);
	AstExpr *mul = add->args[1];
	ck_assert_int_eq(mul->op, OP_MUL);
	ck_assert_int_eq(mul->args[0]->kind, AE_FLOAT);
	ck_assert(mul->args[0]->fval == 25.0);
	AstExpr *acc = mul->args[1];
	ck_assert_int_eq(acc->kind, AE_ACCESS);
	ck_assert_str_eq(acc->name, "x");
	ck_assert_uint_eq(acc->name_span.lo, 59);
	ck_assert_uint_eq(acc->name_span.hi, 60);
	ck_assert_int_eq(acc->nargs, 2);
	ck_assert_int_eq(acc->args[0]->kind, AE_NAME);
	ck_assert_int_eq(acc->args[1]->kind, AE_INT);
	ck_assert_int_eq(acc->args[1]->ival, 3);
	AstParam *x = f->params[0];
	ck_assert_int_eq(x->ndims, 1);
	ck_assert_str_eq(x->dims[0].sym, "N");
	ck_assert_uint_eq(x->span.lo, 9);
	ck_assert_uint_eq(x->span.hi, 18);
	done(&p);
}
END_TEST

START_TEST(directive_forms)
{
	check_ast("schedule f {\n"
		  "  xs = x.cache_after(shared);\n"
		  "  ys = y.cache_before(local);\n"
		  "  xs.cp_async();\n"
		  "  xs.cp_async(cg);\n"
		  "  xs.compute_at(y, io);\n"
		  "  xs.stages(3, 1);\n"
		  "  y.merge(i, j) -> ij;\n"
		  "  y.reorder(j, i, k);\n"
		  "  r = y.rfactor(ko) -> (r2);\n"
		  "  t.inline();\n"
		  "  t.memory(shared);\n"
		  "  y.bind(ij, threadIdx.y);\n"
		  "}\n"
		  "schedule g auto;\n",
		  "(schedule f\n"
		  "  (xs = x.cache_after shared)\n"
		  "  (ys = y.cache_before local)\n"
		  "  (xs.cp_async)\n"
		  "  (xs.cp_async cg)\n"
		  "  (xs.compute_at y io)\n"
		  "  (xs.stages 3 1)\n"
		  "  (y.merge i j -> ij)\n"
		  "  (y.reorder j i k)\n"
		  "  (r = y.rfactor ko -> r2)\n"
		  "  (t.inline)\n"
		  "  (t.memory shared)\n"
		  "  (y.bind ij threadIdx.y))\n"
		  "(schedule g auto)\n");
}
END_TEST

START_TEST(directive_fields)
{
	Parsed p = parse("schedule f { c = t.bind(a, blockIdx.x, 4) -> (o, i); }");
	ck_assert_int_eq(p.errors, 0);
	ck_assert_int_eq(p.file->nschedules, 1);
	AstSchedule *s = p.file->schedules[0];
	ck_assert(!s->is_auto);
	ck_assert_str_eq(s->fusion.name, "f");
	ck_assert_int_eq(s->ndirs, 1);
	AstDirective *d = s->dirs[0];
	ck_assert_str_eq(d->result.name, "c");
	ck_assert_str_eq(d->tensor.name, "t");
	ck_assert_str_eq(d->verb.name, "bind");
	ck_assert_int_eq(d->nargs, 3);
	ck_assert_int_eq(d->args[0].kind, AA_NAME);
	ck_assert_int_eq(d->args[1].kind, AA_DOTTED);
	ck_assert_str_eq(d->args[1].name, "blockIdx.x");
	ck_assert_uint_eq(d->args[1].span.lo, 27);
	ck_assert_uint_eq(d->args[1].span.hi, 37);
	ck_assert_int_eq(d->args[2].kind, AA_INT);
	ck_assert_int_eq(d->args[2].value, 4);
	ck_assert_int_eq(d->nouts, 2);
	ck_assert_str_eq(d->outs[1].name, "i");
	ck_assert_uint_eq(d->span.lo, 13);
	ck_assert_uint_eq(d->span.hi, 52);
	done(&p);
}
END_TEST

START_TEST(file_order_and_comments)
{
	check_ast("/* header\n   comment */ schedule a auto; // trailing\n"
		  "fusion a(x: f32) -> (y: f32) { y = x; /* inline */ }\n"
		  "fusion b(x: f32) -> (y: f32) { y = x; }\n"
		  "schedule b { }\n",
		  "(schedule a auto)\n"
		  "(fusion a\n"
		  "  (param x f32)\n"
		  "  (out y f32)\n"
		  "  (assign y x))\n"
		  "(fusion b\n"
		  "  (param x f32)\n"
		  "  (out y f32)\n"
		  "  (assign y x))\n"
		  "(schedule b)\n");
	check_ast("", "");
	check_ast("  // only a comment", "");
}
END_TEST

/* ---- syntax errors ----------------------------------------------------------------------- */

START_TEST(three_errors_reported)
{
	/* Two bad statements in one fusion and a bad directive: each reported, and the good
	 * statements around them still parsed. */
	Parsed p = parse("fusion f(x: f32[N]) -> (y: f32[N]) {\n"
			 "  t[i] = x[i] +* 2;\n"
			 "  u[i] = x[i];\n"
			 "  v[i] = (x[i];\n"
			 "  y[i] = u[i];\n"
			 "}\n"
			 "schedule f {\n"
			 "  y.split(i 4) -> (a, b);\n"
			 "  y.bind(a, blockIdx.x);\n"
			 "}\n");
	ck_assert_str_eq(p.diags, "t.fus:2:16: error: expected expression before '*'\n"
				  "  t[i] = x[i] +* 2;\n"
				  "               ^\n"
				  "t.fus:4:15: error: expected ')' before ';'\n"
				  "  v[i] = (x[i];\n"
				  "              ^\n"
				  "t.fus:8:13: error: expected ')', ',' or '.' before integer literal '4'\n"
				  "  y.split(i 4) -> (a, b);\n"
				  "            ^\n");
	ck_assert_int_eq(p.errors, 3);
	ck_assert_str_eq(p.ast, "(fusion f\n"
				"  (param x f32 [N])\n"
				"  (out y f32 [N])\n"
				"  (assign u [i] x[i])\n"
				"  (assign y [i] u[i]))\n"
				"(schedule f\n"
				"  (y.bind a blockIdx.x))\n");
	done(&p);
}
END_TEST

START_TEST(missing_semicolon_points_after_token)
{
	check_diags("fusion f(x: f32[N]) -> (y: f32[N]) {\n"
		    "  t[i] = x[i]\n"
		    "  y[i] = t[i];\n"
		    "}\n",
		    1,
		    "t.fus:2:14: error: expected ';' before identifier 'y'\n"
		    "  t[i] = x[i]\n"
		    "             ^\n");
}
END_TEST

START_TEST(missing_arrow)
{
	check_diags("fusion f(x: f32[N]) (y: f32[N]) {\n"
		    "  y[i] = x[i];\n"
		    "}\n"
		    "fusion g(x: f32) -> (y: f32) { y = x }\n",
		    2,
		    "t.fus:1:21: error: expected '->' before '('\n"
		    "fusion f(x: f32[N]) (y: f32[N]) {\n"
		    "                    ^\n"
		    "t.fus:4:38: error: expected ';' before '}'\n"
		    "fusion g(x: f32) -> (y: f32) { y = x }\n"
		    "                                     ^\n");
}
END_TEST

START_TEST(keyword_as_name)
{
	check_diags("fusion fusion(x: f32) -> (y: f32) { y = x; }\n"
		    "fusion g(auto: f32) -> (y: f32) { y = auto; }\n",
		    2,
		    "t.fus:1:8: error: expected identifier before 'fusion'\n"
		    "fusion fusion(x: f32) -> (y: f32) { y = x; }\n"
		    "       ^~~~~~\n"
		    "t.fus:2:10: error: expected identifier or ')' before 'auto'\n"
		    "fusion g(auto: f32) -> (y: f32) { y = auto; }\n"
		    "         ^~~~\n");
}
END_TEST

START_TEST(unbalanced_braces)
{
	/* A '}' moved from its fusion to after the schedule: both places are reported, and the
	 * schedule between them is parsed. */
	Parsed p = parse("fusion f(x: f32) -> (y: f32) {\n"
			 "  y = x;\n"
			 "\n"
			 "schedule f { y.inline(); }\n"
			 "}\n");
	ck_assert_str_eq(p.diags, "t.fus:4:1: error: expected identifier or '}' before 'schedule'\n"
				  "schedule f { y.inline(); }\n"
				  "^~~~~~~~\n"
				  "t.fus:5:1: error: expected 'fusion' or 'schedule' before '}'\n"
				  "}\n"
				  "^\n");
	ck_assert_int_eq(p.errors, 2);
	ck_assert_str_eq(p.ast, "(fusion f\n"
				"  (param x f32)\n"
				"  (out y f32)\n"
				"  (assign y x))\n"
				"(schedule f\n"
				"  (y.inline))\n");
	done(&p);
	check_diags("fusion f(x: f32) -> (y: f32) { y = x; }}\n", 1,
		    "t.fus:1:40: error: expected 'fusion' or 'schedule' before '}'\n"
		    "fusion f(x: f32) -> (y: f32) { y = x; }}\n"
		    "                                       ^\n");
}
END_TEST

START_TEST(bad_directives)
{
	check_diags("schedule f {\n"
		    "  y.split(i, 4) -> (a b);\n"
		    "  y.bind(a, blockIdx.);\n"
		    "  = y.inline();\n"
		    "  y.bind(a, blockIdx.x)\n"
		    "}\n"
		    "schedule g auto\n",
		    5,
		    "t.fus:2:23: error: expected ')' or ',' before identifier 'b'\n"
		    "  y.split(i, 4) -> (a b);\n"
		    "                      ^\n"
		    "t.fus:3:22: error: expected identifier before ')'\n"
		    "  y.bind(a, blockIdx.);\n"
		    "                     ^\n"
		    "t.fus:4:3: error: expected identifier or '}' before '='\n"
		    "  = y.inline();\n"
		    "  ^\n"
		    "t.fus:5:24: error: expected '->' or ';' before '}'\n"
		    "  y.bind(a, blockIdx.x)\n"
		    "                       ^\n"
		    "t.fus:7:16: error: expected ';' before end of file\n"
		    "schedule g auto\n"
		    "               ^\n");
}
END_TEST

START_TEST(reduction_index_must_be_name)
{
	check_diags("fusion f(x: f32[N]) -> (y: f32) { y = sum(j, 2: x[j]); }\n", 1,
		    "t.fus:1:46: error: a reduction index must be a name\n"
		    "fusion f(x: f32[N]) -> (y: f32) { y = sum(j, 2: x[j]); }\n"
		    "                                             ^\n");
}
END_TEST

START_TEST(deep_nesting_no_crash)
{
	enum { DEPTH = 20000 };
	char *text = malloc(2 * DEPTH + 100);
	char *p = text + sprintf(text, "fusion f(x: f32) -> (y: f32) { y = ");
	for (int i = 0; i < DEPTH; i++)
		*p++ = '(';
	strcpy(p, "x; }");
	Parsed r = parse(text);
	ck_assert_int_ge(r.errors, 1);
	ck_assert_ptr_nonnull(strstr(r.diags, "error: memory exhausted"));
	done(&r);
	free(text);
}
END_TEST

/* ---- lexical errors ---------------------------------------------------------------------- */

START_TEST(stray_characters)
{
	/* A stray character is one error; the parser resyncs after it without a second one. */
	Parsed p = parse("fusion f(x: f32) -> (y: f32) {\n"
			 "  y = x @ x;\n"
			 "  y = $x # 2;\n"
			 "  y = x;\n"
			 "}\n");
	ck_assert_str_eq(p.diags, "t.fus:2:9: error: unexpected character '@'\n"
				  "  y = x @ x;\n"
				  "        ^\n"
				  "t.fus:3:7: error: unexpected character '$'\n"
				  "  y = $x # 2;\n"
				  "      ^\n"
				  "t.fus:3:10: error: unexpected character '#'\n"
				  "  y = $x # 2;\n"
				  "         ^\n");
	ck_assert_int_eq(p.errors, 3);
	ck_assert_str_eq(p.ast, "(fusion f\n"
				"  (param x f32)\n"
				"  (out y f32)\n"
				"  (assign y x))\n");
	done(&p);
}
END_TEST

START_TEST(bad_literals)
{
	check_diags("fusion f(x: f32) -> (y: f32) {\n"
		    "  y = 9223372036854775808 + 1e + 2.5x + 1e999;\n"
		    "}\n",
		    4,
		    "t.fus:2:7: error: integer literal '9223372036854775808' is too large "
		    "(the largest is 9223372036854775807)\n"
		    "  y = 9223372036854775808 + 1e + 2.5x + 1e999;\n"
		    "      ^~~~~~~~~~~~~~~~~~~\n"
		    "t.fus:2:29: error: malformed floating-point literal '1e': the exponent has "
		    "no digits\n"
		    "  y = 9223372036854775808 + 1e + 2.5x + 1e999;\n"
		    "                            ^~\n"
		    "t.fus:2:34: error: invalid numeric literal '2.5x'\n"
		    "  y = 9223372036854775808 + 1e + 2.5x + 1e999;\n"
		    "                                 ^~~~\n"
		    "t.fus:2:41: error: floating-point literal '1e999' is too large for f64\n"
		    "  y = 9223372036854775808 + 1e + 2.5x + 1e999;\n"
		    "                                        ^~~~~\n");
}
END_TEST

START_TEST(unterminated_comment)
{
	/* Reported at the opening of the comment only: the sudden end of file is not a second error. */
	check_diags("fusion f(x: f32) -> (y: f32) {\n"
		    "  y = x; /* unfinished\n"
		    "}\n",
		    1,
		    "t.fus:2:10: error: unterminated comment\n"
		    "  y = x; /* unfinished\n"
		    "         ^~\n");
}
END_TEST

START_TEST(garbage_bytes_no_crash)
{
	/* Every byte value, control characters and a lone UTF-8 sequence. */
	char text[300];
	int n = 0;
	for (int c = 1; c < 256; c++)
		text[n++] = (char)c;
	text[n] = '\0';
	Parsed p = parse(text);
	ck_assert_int_ge(p.errors, 1);
	done(&p);
	check_diags("fusion f(x: f32) -> (y: f32) { y = x \xc3\xa9; }\n", 1,
		    "t.fus:1:38: error: unexpected character '\xc3\xa9'\n"
		    "fusion f(x: f32) -> (y: f32) { y = x \xc3\xa9; }\n"
		    "                                     ^\n");
}
END_TEST

/* A NUL byte is a lexical error wherever it is (code or comment), and the text after it is
 * still scanned: it neither ends the file nor hides what follows. */
START_TEST(nul_byte_is_an_error)
{
	static const char code[] = "fusion f(x: f32) -> (y: f32) { y = x\0; }\nfusion g(";
	Parsed p = parse_len(code, sizeof code - 1);
	ck_assert_int_eq(p.errors, 2);
	ck_assert_ptr_nonnull(strstr(p.diags, "t.fus:1:37: error: unexpected NUL byte"));
	ck_assert_ptr_nonnull(strstr(p.diags, "t.fus:2:10: error: expected"));
	done(&p);
	static const char comment[] = "// a\0b\nfusion f(x: f32) -> (y: f32) { /* \0 */ y = x; }\n";
	p = parse_len(comment, sizeof comment - 1);
	ck_assert_int_eq(p.errors, 2);
	ck_assert_ptr_nonnull(strstr(p.diags, "t.fus:1:5: error: unexpected NUL byte"));
	ck_assert_ptr_nonnull(strstr(p.diags, "t.fus:2:35: error: unexpected NUL byte"));
	done(&p);
}
END_TEST

/* ast_print_fusion (--emit=schedule prints a segment's fusion with it) writes .fus text that
 * parses back to the same tree: every expression form, nested operators, 0-d and scalar
 * parameters, constant and symbolic dimensions. */
START_TEST(print_fusion_round_trip)
{
	const char *src =
		"fusion f(a: f32, x: f16[M, 4], y: f32[M]) -> (z: f32[M, 4], t: f32) {\n"
		"  s = a * 2.5e-3;\n"
		"  m[i] = max(j: f32(x[i, j]));\n"
		"  z[i, j] = -(x[i, j] - m[i]) / (y[i] + s) > 0.0 && !(i < 3) ? exp(x[i, 0]) : pow(y[i], 2.0);\n"
		"  t = sum(i, j: z[i, j] * (a - -1.0)) + min(a, 1.0) / M;\n"
		"}\n";
	Parsed p = parse(src);
	ck_assert_msg(p.errors == 0, "%s", p.diags);
	Buf b = {0};
	ast_print_fusion(p.file->fusions[0], &b);
	Parsed q = parse(b.s);
	ck_assert_msg(q.errors == 0, "%s\n%s", b.s, q.diags);
	ck_assert_str_eq(q.ast, p.ast);
	buf_free(&b);
	done(&p);
	done(&q);
}
END_TEST

Suite *parser_suite(void)
{
	Suite *s = suite_create("parser");
	TCase *ok = tcase_create("parse");
	tcase_add_test(ok, saxpy_with_schedule);
	tcase_add_test(ok, signature_forms);
	tcase_add_test(ok, softmax_reductions);
	tcase_add_test(ok, reduce_versus_call);
	tcase_add_test(ok, reductions_inside_expressions);
	tcase_add_test(ok, precedence_and_associativity);
	tcase_add_test(ok, literals_and_accesses);
	tcase_add_test(ok, literal_values_and_spans);
	tcase_add_test(ok, directive_forms);
	tcase_add_test(ok, directive_fields);
	tcase_add_test(ok, file_order_and_comments);
	tcase_add_test(ok, print_fusion_round_trip);
	suite_add_tcase(s, ok);
	TCase *syn = tcase_create("syntax_errors");
	tcase_add_test(syn, three_errors_reported);
	tcase_add_test(syn, missing_semicolon_points_after_token);
	tcase_add_test(syn, missing_arrow);
	tcase_add_test(syn, keyword_as_name);
	tcase_add_test(syn, unbalanced_braces);
	tcase_add_test(syn, bad_directives);
	tcase_add_test(syn, reduction_index_must_be_name);
	tcase_add_test(syn, deep_nesting_no_crash);
	suite_add_tcase(s, syn);
	TCase *lex = tcase_create("lexical_errors");
	tcase_add_test(lex, stray_characters);
	tcase_add_test(lex, bad_literals);
	tcase_add_test(lex, unterminated_comment);
	tcase_add_test(lex, garbage_bytes_no_crash);
	tcase_add_test(lex, nul_byte_is_an_error);
	suite_add_tcase(s, lex);
	return s;
}
