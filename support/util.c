/* util.c: die(), checked allocation, hashing, clock, edit distance. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/support.h"

static _Thread_local DieTrap *die_trap;
static _Thread_local char die_text[512];

DieTrap *die_trap_get(void) { return die_trap; }

void die_trap_set(DieTrap *t) { die_trap = t; }

const char *die_message(void) { return die_text; }

void die_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	if (die_trap) { /* no allocation here: die() may report that malloc failed */
		int n = snprintf(die_text, sizeof die_text, "%s:%d: ", file, line);
		va_start(ap, fmt);
		vsnprintf(die_text + n, sizeof die_text - (size_t)n, fmt, ap);
		va_end(ap);
		longjmp(die_trap->env, 1);
	}
	fflush(stdout);
	fprintf(stderr, "fusc: internal error at %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		die("out of memory (%zu bytes)", n);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		die("out of memory (%zu bytes)", n);
	return p;
}

char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(xmalloc(n), s, n);
}

/* FNV-1a, 64 bit. h is the running hash: pass 0 to start a new hash (0 stands for the FNV
 * offset basis), or a previous result to continue hashing more data. */
uint64_t hash_fnv1a(uint64_t h, const void *data, size_t n)
{
	const unsigned char *p = data;

	if (h == 0)
		h = 14695981039346656037ull;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ull;
	}
	return h;
}

double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Levenshtein distance, two rows of the table. */
int edit_distance(const char *x, const char *y)
{
	int n = (int)strlen(y), prev[64], cur[64];
	if (n >= 63 || strlen(x) >= 63)
		return 99;
	for (int j = 0; j <= n; j++)
		prev[j] = j;
	for (int i = 1; x[i - 1]; i++) {
		cur[0] = i;
		for (int j = 1; j <= n; j++) {
			int c = prev[j - 1] + (x[i - 1] != y[j - 1]);
			if (prev[j] + 1 < c)
				c = prev[j] + 1;
			if (cur[j - 1] + 1 < c)
				c = cur[j - 1] + 1;
			cur[j] = c;
		}
		memcpy(prev, cur, sizeof(int) * (n + 1));
	}
	return prev[n];
}
