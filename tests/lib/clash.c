/* clash.c: a program with its own xmalloc, die, die_at, buf_printf, buf_puts and arena_new
 * (names fusc uses inside libfusrt) links against libfusrt.so and libfusrt.a, and the library
 * never calls them: it compiles .fus text (front end, lowering, diagnostics: all of which
 * allocate and format) without touching the program's functions. No GPU needed: a text with
 * an error fails before the driver is loaded, and FUSRT_LIBCUDA points at no driver.
 * Exits 0 when all is well; prints what went wrong and exits 1 otherwise. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusrt.h"

static int mine_called; /* how often the library called one of the functions below */

void *xmalloc(size_t n) { mine_called++; return malloc(n); }
void die(const char *msg) { mine_called++; fprintf(stderr, "die: %s\n", msg); exit(3); }
void die_at(const char *file, int line, const char *msg) { mine_called++; (void)file; (void)line; die(msg); }
int buf_printf(char *out, const char *fmt, ...)
{
	va_list ap;
	int n;

	mine_called++;
	va_start(ap, fmt);
	n = vsprintf(out, fmt, ap);
	va_end(ap);
	return n;
}
int buf_puts(const char *s) { mine_called++; return puts(s); }
void *arena_new(void) { mine_called++; return NULL; }

static int failures;
#define CHECK(c, ...) \
	do { if (!(c)) { failures++; printf("clash: " __VA_ARGS__); printf("\n"); } } while (0)

int main(void)
{
	char text[64], version[32];
	fusrt_module *m = NULL;
	fusrt_status s;
	const char *good = "fusion scale(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[i] * 2.0;\n}\n";
	const char *bad = "fusion scale(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[j];\n}\n";

	/* the program's own functions work as the program wrote them */
	char *p = xmalloc(16);
	buf_printf(text, "%d", 42);
	CHECK(p && strcmp(text, "42") == 0, "the program's own functions do not work");
	free(p);
	mine_called = 0;

	snprintf(version, sizeof version, "%d.%d.%d", FUSRT_VERSION_MAJOR, FUSRT_VERSION_MINOR,
		 FUSRT_VERSION_PATCH);
	CHECK(strcmp(fusrt_version(), version) == 0, "fusrt_version() is %s, the header says %s",
	      fusrt_version(), version);

	s = fusrt_compile(bad, strlen(bad), "bad.fus", NULL, &m);
	CHECK(s == FUSRT_ERR_COMPILE && !m, "a text with an error: %s", fusrt_status_name(s));
	CHECK(strstr(fusrt_last_error(), "bad.fus:2:") != NULL, "no diagnostic at bad.fus:2: %s",
	      fusrt_last_error());

	setenv("FUSRT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
	s = fusrt_compile(good, strlen(good), "good.fus", NULL, &m);
	CHECK(s == FUSRT_ERR_NO_DRIVER && !m, "without a driver: %s: %s", fusrt_status_name(s),
	      fusrt_last_error());

	CHECK(mine_called == 0, "libfusrt called the program's functions %d times", mine_called);
	if (failures == 0)
		printf("clash: ok (fusrt %s)\n", fusrt_version());
	return failures ? 1 : 0;
}
