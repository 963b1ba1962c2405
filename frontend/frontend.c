/* frontend.c: text -> scheduled Program (parse, sema, schedule). Each phase runs only when the
 * previous one reported no error (sema on a broken AST would repeat the parser's complaints);
 * within the schedule phase every fusion is scheduled, so one run reports every schedule error
 * of the file. */
#include "frontend/frontend.h"

Program *frontend_compile(Arena *a, Diag *d, int file)
{
	AstFile *ast = parse_file(a, d, file);
	if (diag_error_count(d))
		return NULL;
	Program *p = sema_program(a, d, ast);
	if (diag_error_count(d))
		return NULL;
	p->file_name = diag_file_name(d, file);
	bool ok = true;
	for (int i = 0; i < p->nfusions; i++)
		ok &= schedule_apply(a, d, p->fusions[i]);
	if (!ok || diag_error_count(d))
		return NULL;
	return p;
}
