/* diag.c: source files, spans and collected diagnostics.
 *
 * Diagnostics are kept in report order and rendered only when printed:
 *   file:line:col: error: message
 *   <the source line>
 *   <caret line: '^' under the first byte of the span, '~' under the rest of it on that line>
 * Columns are 1-based byte columns. The caret line copies tabs from the source line so the
 * caret lines up in any tab width, and skips UTF-8 continuation bytes so it lines up under
 * multibyte characters too. A span of file 0 has no location: `fusc: error: message`.
 * With colour on (--color), the severity word and the caret line are wrapped in ANSI SGR
 * escapes, as GCC does: bold red error, bold magenta warning, bold cyan note, bold green caret;
 * every other byte is the same as without colour. */
#include <stdlib.h>
#include <string.h>

#include "support/support.h"

typedef struct SrcFile {
	char *name;
	char *text;
	size_t len;
	uint32_t *lines; /* byte offset of the start of each line */
	int nlines;
} SrcFile;

typedef struct Entry {
	DiagLevel level;
	Span at;
	char *msg;
} Entry;

struct Diag {
	SrcFile *files; /* files[0] is the "no location" file */
	int nfiles;
	Entry *entries;
	int nentries, cap;
	int errors;    /* every error reported, collected or not */
	bool dropping; /* past DIAG_MAX_ERRORS: drop everything until the next print */
	bool color;    /* ANSI colour on the severity word and the caret line */
};

static const char *level_names[] = {
	[DL_ERROR] = "error",
	[DL_WARNING] = "warning",
	[DL_NOTE] = "note",
};

static const char *level_colors[] = {
	[DL_ERROR] = "\033[1;31m",
	[DL_WARNING] = "\033[1;35m",
	[DL_NOTE] = "\033[1;36m",
};
#define CARET_COLOR "\033[1;32m"
#define COLOR_RESET "\033[0m"

bool diag_color_from_name(const char *s, DiagColor *out)
{
	static const char *names[] = {[DC_AUTO] = "auto", [DC_ALWAYS] = "always",
				      [DC_NEVER] = "never"};

	for (int i = 0; i < countof(names); i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = (DiagColor)i;
			return true;
		}
	}
	return false;
}

bool diag_color_wanted(DiagColor when, const char *no_color, const char *term, bool tty)
{
	if (when != DC_AUTO)
		return when == DC_ALWAYS;
	if (no_color && *no_color)
		return false;
	return tty && !(term && strcmp(term, "dumb") == 0);
}

void diag_set_color(Diag *d, bool on)
{
	d->color = on;
}

Span span_join(Span a, Span b)
{
	if (a.file == 0)
		return b;
	if (b.file == 0)
		return a;
	Span s = a;
	if (b.lo < s.lo)
		s.lo = b.lo;
	if (b.hi > s.hi)
		s.hi = b.hi;
	return s;
}

Diag *diag_new(void)
{
	Diag *d = xmalloc(sizeof *d);

	memset(d, 0, sizeof *d);
	d->files = xmalloc(sizeof(SrcFile));
	memset(d->files, 0, sizeof(SrcFile));
	d->nfiles = 1;
	return d;
}

static void forget_entries(Diag *d)
{
	for (int i = 0; i < d->nentries; i++)
		free(d->entries[i].msg);
	d->nentries = 0;
	d->dropping = false;
}

void diag_free(Diag *d)
{
	if (!d)
		return;
	forget_entries(d);
	free(d->entries);
	for (int i = 1; i < d->nfiles; i++) {
		free(d->files[i].name);
		free(d->files[i].text);
		free(d->files[i].lines);
	}
	free(d->files);
	free(d);
}

int diag_add_file(Diag *d, const char *name, const char *text, size_t len)
{
	d->files = xrealloc(d->files, (size_t)(d->nfiles + 1) * sizeof(SrcFile));
	SrcFile *f = &d->files[d->nfiles];
	f->name = xstrdup(name);
	f->text = xmalloc(len + 1);
	memcpy(f->text, text, len);
	f->text[len] = '\0';
	f->len = len;
	int cap = 16;
	f->lines = xmalloc((size_t)cap * sizeof(uint32_t));
	f->nlines = 0;
	f->lines[f->nlines++] = 0;
	for (size_t i = 0; i < len; i++) {
		if (text[i] != '\n')
			continue;
		if (f->nlines == cap) {
			cap *= 2;
			f->lines = xrealloc(f->lines, (size_t)cap * sizeof(uint32_t));
		}
		f->lines[f->nlines++] = (uint32_t)(i + 1);
	}
	return d->nfiles++;
}

static SrcFile *file_of(Diag *d, int file)
{
	if (file < 1 || file >= d->nfiles)
		die("bad file id %d", file);
	return &d->files[file];
}

const char *diag_file_name(Diag *d, int file)
{
	return file_of(d, file)->name;
}

const char *diag_file_text(Diag *d, int file)
{
	return file_of(d, file)->text;
}

size_t diag_file_len(Diag *d, int file)
{
	return file_of(d, file)->len;
}

/* Index of the line holding byte offset off (clamped to the text). */
static int line_index(SrcFile *f, uint32_t off)
{
	int lo = 0, hi = f->nlines - 1;

	if (off > f->len)
		off = (uint32_t)f->len;
	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;
		if (f->lines[mid] <= off)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

void diag_line_col(Diag *d, int file, uint32_t off, int *line, int *col)
{
	SrcFile *f = file_of(d, file);

	if (off > f->len)
		off = (uint32_t)f->len;
	int i = line_index(f, off);
	*line = i + 1;
	*col = (int)(off - f->lines[i]) + 1;
}

static void add_entry(Diag *d, DiagLevel level, Span at, const char *fmt, va_list ap)
{
	if (level == DL_ERROR && ++d->errors > DIAG_MAX_ERRORS)
		d->dropping = true;
	if (d->dropping)
		return;
	if (d->nentries == d->cap) {
		d->cap = d->cap ? 2 * d->cap : 16;
		d->entries = xrealloc(d->entries, (size_t)d->cap * sizeof(Entry));
	}
	Buf b = {0};
	buf_vprintf(&b, fmt, ap);
	d->entries[d->nentries++] = (Entry){level, at, b.s};
}

void diag_error(Diag *d, Span at, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_entry(d, DL_ERROR, at, fmt, ap);
	va_end(ap);
}

void diag_warning(Diag *d, Span at, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_entry(d, DL_WARNING, at, fmt, ap);
	va_end(ap);
}

void diag_note(Diag *d, Span at, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_entry(d, DL_NOTE, at, fmt, ap);
	va_end(ap);
}

int diag_error_count(Diag *d)
{
	return d->errors;
}

DiagMark diag_mark(Diag *d)
{
	return (DiagMark){d->nentries, d->errors, d->dropping};
}

void diag_rollback(Diag *d, DiagMark m)
{
	if (m.nentries > d->nentries)
		die("diag_rollback: the mark was printed");
	for (int i = m.nentries; i < d->nentries; i++)
		free(d->entries[i].msg);
	d->nentries = m.nentries;
	d->errors = m.errors;
	d->dropping = m.dropping;
}

static bool is_continuation(char c)
{
	return ((unsigned char)c & 0xC0) == 0x80;
}

/* The source line and the caret line under it. */
static void render_source(Buf *b, SrcFile *f, Span at, bool color)
{
	uint32_t lo = at.lo > f->len ? (uint32_t)f->len : at.lo;
	int li = line_index(f, lo);
	const char *start = f->text + f->lines[li];
	const char *end = start;
	while (*end && *end != '\n')
		end++;
	size_t n = (size_t)(end - start);
	if (n > 0 && start[n - 1] == '\r')
		n--;
	buf_printf(b, "%.*s\n", (int)n, start);

	const char *caret = f->text + lo;
	for (const char *p = start; p < caret && p < start + n; p++) {
		if (*p == '\t')
			buf_puts(b, "\t");
		else if (!is_continuation(*p))
			buf_puts(b, " ");
	}
	buf_puts(b, color ? CARET_COLOR "^" : "^");
	const char *stop = f->text + (at.hi > f->len ? f->len : at.hi);
	if (stop > start + n)
		stop = start + n;
	for (const char *p = caret + 1; p < stop; p++) {
		if (!is_continuation(*p))
			buf_puts(b, "~");
	}
	buf_puts(b, color ? COLOR_RESET "\n" : "\n");
}

static void render_entry(Diag *d, Buf *b, Entry *e)
{
	const char *level = level_names[e->level];
	char colored[32];

	if (d->color) {
		snprintf(colored, sizeof colored, "%s%s%s", level_colors[e->level], level,
			 COLOR_RESET);
		level = colored;
	}
	if (e->at.file == 0) {
		buf_printf(b, "fusc: %s: %s\n", level, e->msg);
		return;
	}
	SrcFile *f = file_of(d, e->at.file);
	int line, col;
	diag_line_col(d, e->at.file, e->at.lo, &line, &col);
	buf_printf(b, "%s:%d:%d: %s: %s\n", f->name, line, col, level, e->msg);
	render_source(b, f, e->at, d->color);
}

char *diag_render(Diag *d)
{
	Buf b = {0};

	buf_puts(&b, "");
	for (int i = 0; i < d->nentries; i++)
		render_entry(d, &b, &d->entries[i]);
	if (d->dropping)
		buf_puts(&b, "fusc: too many errors, stopping\n");
	forget_entries(d);
	return b.s;
}

void diag_print(Diag *d, FILE *out)
{
	char *s = diag_render(d);

	fputs(s, out);
	fflush(out);
	free(s);
}
