/* buf.c: a malloc'd, always NUL-terminated, growable text buffer. A zeroed Buf is empty. */
#include <stdlib.h>
#include <string.h>

#include "support/support.h"

void buf_grow(Buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;

	if (need <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	b->s = xrealloc(b->s, cap);
	b->cap = cap;
}

static void put_unsigned(Buf *b, unsigned long long v, bool neg)
{
	char s[24], *p = s + sizeof s;
	*--p = '\0';
	do
		*--p = (char)('0' + v % 10);
	while ((v /= 10));
	if (neg)
		*--p = '-';
	buf_puts(b, p);
}

static void put_signed(Buf *b, long long v)
{
	put_unsigned(b, v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v, v < 0);
}

/* fmt written directly when its conversions are only %s %c %d %u %ld %lld %zu %% (no flags,
 * width or precision): vsnprintf costs ~700 instructions a call, and the CUDA emitter makes
 * thousands of calls per kernel. False, with b as it was, at any other conversion. */
static bool fast_printf(Buf *b, const char *fmt, va_list ap)
{
	size_t start = b->len;
	for (const char *p = fmt;;) {
		const char *q = p; /* the literal runs are short: no strchr call */
		while (*q && *q != '%')
			q++;
		size_t n = (size_t)(q - p);
		buf_grow(b, n);
		memcpy(b->s + b->len, p, n);
		b->len += n;
		b->s[b->len] = '\0';
		if (!*q)
			return true;
		p = q + 1;
		if (*p == 's') {
			const char *s = va_arg(ap, const char *);
			buf_puts(b, s ? s : "(null)"); /* as glibc */
		} else if (*p == 'c') { /* a NUL too, as vsnprintf: it is counted in len */
			buf_grow(b, 1);
			b->s[b->len++] = (char)va_arg(ap, int);
			b->s[b->len] = '\0';
		} else if (*p == 'd') {
			put_signed(b, va_arg(ap, int));
		} else if (*p == 'u') {
			put_unsigned(b, va_arg(ap, unsigned), false);
		} else if (*p == '%') {
			buf_puts(b, "%");
		} else if (p[0] == 'z' && p[1] == 'u') {
			put_unsigned(b, va_arg(ap, size_t), false);
			p++;
		} else if (p[0] == 'l' && p[1] == 'd') {
			put_signed(b, va_arg(ap, long));
			p++;
		} else if (p[0] == 'l' && p[1] == 'l' && p[2] == 'd') {
			put_signed(b, va_arg(ap, long long));
			p += 2;
		} else {
			b->len = start;
			b->s[start] = '\0';
			return false;
		}
		p++;
	}
}

void buf_vprintf(Buf *b, const char *fmt, va_list ap)
{
	va_list ap2;

	va_copy(ap2, ap);
	bool fast = fast_printf(b, fmt, ap2);
	va_end(ap2);
	if (fast)
		return;
	/* one pass when the text fits in the room left, a second one after growing */
	buf_grow(b, 63);
	va_copy(ap2, ap);
	int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		die("buf_printf: bad format '%s'", fmt);
	if ((size_t)n >= b->cap - b->len) {
		buf_grow(b, (size_t)n);
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

void buf_indent(Buf *b, int level)
{
	buf_grow(b, (size_t)(level > 0 ? 2 * level : 0));
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
