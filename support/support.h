/* support.h: the ground every layer stands on.
 *
 *   arena    one per compilation; every AST and IR node lives in it and dies with it.
 *   Vec      growable arrays of pointers, allocated from an arena.
 *   Map      hash maps from pointers or strings, allocated from an arena.
 *   Buf      a growable text buffer (malloc'd: it outlives arenas, e.g. generated code).
 *   Span     a source range: file id + byte offsets. Line/column are computed only when a
 *            diagnostic is printed.
 *   Diag     collected diagnostics (errors, warnings, notes), printed cproc-style:
 *            file:line:col: error: message / source line / ^~~~ underline / note: lines.
 *   die()    internal bugs only: a user can never trigger it with any input. It aborts, or,
 *            under a DieTrap (libfusrt's entry points), returns to the trap.
 */
#ifndef FUSC_SUPPORT_H
#define FUSC_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define FUSC_VERSION "0.1.0"

#define PRINTF(f, a) __attribute__((format(printf, f, a)))
#define NORETURN __attribute__((noreturn))
#define countof(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* support/util.c */
NORETURN void die_at(const char *file, int line, const char *fmt, ...) PRINTF(3, 4);
#define die(...) die_at(__FILE__, __LINE__, __VA_ARGS__)
#define unreachable() die_at(__FILE__, __LINE__, "unreachable")
/* A recovery point for die(): while a thread has one set, die() keeps its message ("FILE:LINE:
 * TEXT", die_message) and longjmps to trap->env instead of printing and aborting. libfusrt
 * sets one around each entry point, so a fusc bug (or host out-of-memory) reached from a
 * library call returns FUSRT_ERR_INTERNAL and the host program goes on; memory of the
 * abandoned work that no arena owns leaks. Usage: t.outer = die_trap_get(); if (setjmp(t.env))
 * { die_trap_set(t.outer); ... } die_trap_set(&t); ...; die_trap_set(t.outer). The trap is
 * per thread (the only per-thread state of support/). */
typedef struct DieTrap {
	jmp_buf env;
	struct DieTrap *outer; /* the trap to restore */
} DieTrap;
DieTrap *die_trap_get(void);
void die_trap_set(DieTrap *t);
/* The message of the last die() caught by a trap on this thread. */
const char *die_message(void);
void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
uint64_t hash_fnv1a(uint64_t h, const void *data, size_t n);
double now_seconds(void); /* monotonic clock */
/* Edits (insert, delete, replace a byte) from x to y; 99 when either is longer than 62 bytes.
 * The did-you-mean of unknown directives and built-in functions. */
int edit_distance(const char *x, const char *y);

/* support/sha256.c: SHA-256, incremental (init, update..., final). */
#define SHA256_BYTES 32
typedef struct Sha256 {
	uint32_t h[8];
	uint64_t len;             /* bytes hashed so far */
	unsigned char buf[64];    /* a partial block */
	size_t nbuf;
} Sha256;
void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t n);
void sha256_final(Sha256 *s, unsigned char out[SHA256_BYTES]);
/* The digest as 64 lowercase hex digits and a NUL. */
void sha256_hex(const unsigned char d[SHA256_BYTES], char out[2 * SHA256_BYTES + 1]);

/* support/arena.c */
/* Public for arena_alloc's fast path only: the free space of the chunk being filled. */
typedef struct Arena {
	unsigned char *cur, *end;
	struct Chunk *head;
} Arena;
Arena *arena_new(void);
void arena_free(Arena *a);
void *arena_alloc_chunk(Arena *a, size_t n); /* arena_alloc where the chunk is full */
/* Zeroed, 16-byte aligned. Inline: the IR makes hundreds of thousands of small nodes. */
static inline void *arena_alloc(Arena *a, size_t n)
{
	n = n ? (n + 15) & ~(size_t)15 : 16;
	if ((size_t)(a->end - a->cur) < n)
		return arena_alloc_chunk(a, n);
	void *p = a->cur;
	a->cur += n;
	return p;
}
size_t arena_bytes(const Arena *a); /* bytes handed out so far (--time-passes) */
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) PRINTF(2, 3);
#define NEW(a, T) ((T *)arena_alloc((a), sizeof(T)))

/* A vector of pointers in an arena. */
typedef struct Vec {
	void **items;
	int len, cap;
} Vec;
void vec_push(Arena *a, Vec *v, void *item);
#define VEC_AT(v, T, i) ((T *)(v).items[i])

/* support/map.c: a hash map in an arena from pointers (compared by address) or, with
 * `strings` set, from C strings (compared by content) to non-NULL values. Zero-initialize:
 * `Map m = {0}` or `Map m = {.strings = true}`. Keys are kept, not copied. */
typedef struct Map {
	const void **keys;
	void **vals;
	int len, cap;
	bool strings;
} Map;
void *map_lookup(const Map *m, const void *key); /* NULL when absent */
void map_insert(Arena *a, Map *m, const void *key, void *val);

/* support/buf.c: malloc'd text buffer, always NUL-terminated. */
typedef struct Buf {
	char *s;
	size_t len, cap;
} Buf;
void buf_printf(Buf *b, const char *fmt, ...) PRINTF(2, 3);
void buf_vprintf(Buf *b, const char *fmt, va_list ap);
void buf_grow(Buf *b, size_t extra); /* room for extra more bytes and a NUL */
/* s appended. Inline: the emitters append hundreds of thousands of pieces, most of them
 * literals, whose length and copy the compiler then does in place. */
static inline void buf_puts(Buf *b, const char *s)
{
	size_t n = strlen(s);
	if (b->len + n >= b->cap)
		buf_grow(b, n);
	memcpy(b->s + b->len, s, n + 1);
	b->len += n;
}
void buf_indent(Buf *b, int level); /* two spaces per level */
void buf_free(Buf *b);
/* A malloc'd string formatted like printf (the caller frees it). */
char *xprintf(const char *fmt, ...) PRINTF(1, 2);

/* support/diag.c */
typedef struct Span {
	int file;         /* index into the Diag's file table; 0 = no location */
	uint32_t lo, hi;  /* byte offsets [lo, hi) */
} Span;

Span span_join(Span a, Span b);

typedef enum DiagLevel { DL_ERROR, DL_WARNING, DL_NOTE } DiagLevel;

typedef struct Diag Diag;
Diag *diag_new(void);
void diag_free(Diag *d);
/* Registers a source text; returns its file id (>= 1). The text is copied. */
int diag_add_file(Diag *d, const char *name, const char *text, size_t len);
const char *diag_file_name(Diag *d, int file);
const char *diag_file_text(Diag *d, int file);
/* The text's length in bytes: the text may hold NUL bytes (a lexical error), so strlen of
 * diag_file_text is not its length. */
size_t diag_file_len(Diag *d, int file);
void diag_error(Diag *d, Span at, const char *fmt, ...) PRINTF(3, 4);
void diag_warning(Diag *d, Span at, const char *fmt, ...) PRINTF(3, 4);
/* A note attached to the last error or warning. */
void diag_note(Diag *d, Span at, const char *fmt, ...) PRINTF(3, 4);
int diag_error_count(Diag *d);
/* A point in the diagnostics: diag_rollback(d, m) forgets everything reported after
 * diag_mark(d) returned m (the automatic scheduler's rejected attempts). A mark does not
 * survive diag_print or diag_render. */
typedef struct DiagMark {
	int nentries, errors;
	bool dropping;
} DiagMark;
DiagMark diag_mark(Diag *d);
void diag_rollback(Diag *d, DiagMark m);
/* Prints every collected diagnostic in order and forgets them. */
void diag_print(Diag *d, FILE *out);
/* Renders into a string instead (for libfusrt and tests); caller frees. */
char *diag_render(Diag *d);
/* Line and column (1-based) of an offset. */
void diag_line_col(Diag *d, int file, uint32_t off, int *line, int *col);
/* --color=auto|always|never. With colour on, the severity word and the caret line are
 * wrapped in ANSI escapes (nothing else changes); off by default. */
typedef enum DiagColor { DC_AUTO, DC_ALWAYS, DC_NEVER } DiagColor;
bool diag_color_from_name(const char *s, DiagColor *out);
/* Whether to colour: always, never, or for auto only on a terminal (tty) whose TERM is not
 * "dumb" when NO_COLOR (https://no-color.org) is unset or empty. The caller passes the
 * environment in (getenv("NO_COLOR"), getenv("TERM"), isatty(2)). */
bool diag_color_wanted(DiagColor when, const char *no_color, const char *term, bool tty);
void diag_set_color(Diag *d, bool on);

/* Diagnostics stop being collected past this many errors. */
#define DIAG_MAX_ERRORS 20

#endif
