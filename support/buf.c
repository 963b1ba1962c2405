/* buf.c: a malloc'd, always NUL-terminated, growable text buffer. A zeroed Buf is empty. */
#include <stdlib.h>
#include <string.h>

#include "support/support.h"

static void buf_reserve(Buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;

	if (need <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap *= 2;
	b->s = xrealloc(b->s, cap);
	b->cap = cap;
}

void buf_vprintf(Buf *b, const char *fmt, va_list ap)
{
	va_list ap2;

	/* one pass when the text fits in the room left, a second one after growing */
	buf_reserve(b, 63);
	va_copy(ap2, ap);
	int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		die("buf_printf: bad format '%s'", fmt);
	if ((size_t)n >= b->cap - b->len) {
		buf_reserve(b, (size_t)n);
		vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	}
	b->len += (size_t)n;
}

void buf_printf(Buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_vprintf(b, fmt, ap);
	va_end(ap);
}

char *xprintf(const char *fmt, ...)
{
	Buf b = {0};
	va_list ap;

	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (!b.s)
		buf_puts(&b, "");
	return b.s;
}

void buf_puts(Buf *b, const char *s)
{
	size_t n = strlen(s);

	buf_reserve(b, n);
	memcpy(b->s + b->len, s, n + 1);
	b->len += n;
}

void buf_indent(Buf *b, int level)
{
	buf_reserve(b, (size_t)(level > 0 ? 2 * level : 0));
	for (int i = 0; i < 2 * level; i++)
		b->s[b->len++] = ' ';
	b->s[b->len] = '\0';
}

void buf_free(Buf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
}
