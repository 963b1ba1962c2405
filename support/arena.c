/* arena.c: a chunked bump allocator. Chunks are anonymous mappings and memory is never
 * reused, so every allocation is zeroed; offsets are rounded up to 16 bytes from a 16-aligned
 * base. A mapping is zero already and its pages are touched only as they are handed out:
 * calloc'd chunks cost a memset each and heap growth and trimming around them, about 1.2 of
 * auto_hgemm's 8 ms (bench/compile_time.sh). An arena past ARENA_SMALL chunks grows by 2 MB
 * huge pages (chunk_huge). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "support/support.h"

enum { ARENA_ALIGN = 16, ARENA_CHUNK = 256 * 1024, ARENA_HUGE = 2 * 1024 * 1024, ARENA_SMALL = 2 };

typedef struct Chunk {
	struct Chunk *next;
	size_t size, used;
	_Alignas(16) unsigned char data[];
} Chunk;

_Static_assert(ARENA_ALIGN == 16, "arena_alloc (support.h) rounds to 16 bytes");

/* a->head is the chunk being filled (a->cur, a->end: its free space; its `used` is brought up
 * to date when the next one starts) or a big block's (no free space); older chunks follow. */
Arena *arena_new(void)
{
	Arena *a = xmalloc(sizeof *a);

	a->head = NULL;
	a->cur = a->end = NULL;
	return a;
}

/* The head chunk is the one being filled. */
static bool filling(const Arena *a, const Chunk *c)
{
	return a->end && a->end == c->data + c->size;
}

void arena_free(Arena *a)
{
	if (!a)
		return;
	for (Chunk *c = a->head, *next; c; c = next) {
		next = c->next;
		munmap(c, sizeof(Chunk) + c->size);
	}
	free(a);
}

/* populate: the pages are mapped now, in one go (MAP_POPULATE), not one fault each: an arena
 * that needs a second chunk will most likely fill it (a lowering's IR), and a fault costs
 * about 4 us in a loaded VM (auto_hgemm: 672 -> 216 faults). The first chunk of every arena
 * is faulted in as used, so a small compilation maps no more than it touches. */
static Chunk *chunk_new(size_t size, bool populate)
{
	Chunk *c = mmap(NULL, sizeof(Chunk) + size, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0), -1, 0);

	if (c == MAP_FAILED)
		die("out of memory (arena chunk of %zu bytes)", size);
	c->size = size;
	return c;
}

/* A chunk of one 2 MB transparent huge page: on a 2 MB boundary, marked MADV_HUGEPAGE, not
 * populated (the first touch brings the whole page in, zeroed in one go; where the system
 * gives no huge pages, each 4 KB page comes in as it is touched). On the 2-core VM a huge
 * page takes 0.12-0.25 ms, what 100-200 small ones do (1.2 us each, populated or faulted), and
 * auto_hgemm's 3.9 MB of IR took 1.1 of its 6.5 ms in 4 KB pages (perf: __mm_populate), so
 * an arena that has filled ARENA_SMALL chunks grows by these (it most likely needs more:
 * with 1, mid-sized programs that needed under 2 MB paid more than they saved). */
static Chunk *chunk_huge(void)
{
	unsigned char *p = mmap(NULL, 2 * ARENA_HUGE, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("out of memory (arena chunk of %d bytes)", ARENA_HUGE);
	unsigned char *q = (unsigned char *)(((uintptr_t)p + ARENA_HUGE - 1) &
					     ~(uintptr_t)(ARENA_HUGE - 1));
	if (q > p)
		munmap(p, (size_t)(q - p));
	munmap(q + ARENA_HUGE, (size_t)(p + ARENA_HUGE - q));
	madvise(q, ARENA_HUGE, MADV_HUGEPAGE);
	Chunk *c = (Chunk *)q;
	c->size = ARENA_HUGE - sizeof(Chunk);
	return c;
}

/* n (rounded by arena_alloc) does not fit in the free space. */
void *arena_alloc_chunk(Arena *a, size_t n)
{
	Chunk *c = a->head;
	if (n > ARENA_CHUNK / 4) {
		/* A big block gets a chunk of its own behind the current one, so the current
		 * chunk's free space is not wasted. */
		Chunk *big = chunk_new(n, false);
		big->used = n;
		if (c) {
			big->next = c->next;
			c->next = big;
		} else {
			a->head = big;
		}
		return big->data;
	}
	if (c && filling(a, c))
		c->used = (size_t)(a->cur - c->data);
	int chunks = 0;
	for (Chunk *x = c; x && chunks < ARENA_SMALL; x = x->next)
		chunks++;
	c = chunks == ARENA_SMALL ? chunk_huge() : chunk_new(ARENA_CHUNK, c != NULL);
	c->next = a->head;
	a->head = c;
	c->used = n;
	a->cur = c->data + n;
	a->end = c->data + c->size;
	return c->data;
}

size_t arena_bytes(const Arena *a)
{
	size_t n = 0;

	for (const Chunk *c = a->head; c; c = c->next)
		n += c == a->head && filling(a, c) ? (size_t)(a->cur - c->data) : c->used;
	return n;
}

char *arena_strndup(Arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *arena_strdup(Arena *a, const char *s)
{
	return arena_strndup(a, s, strlen(s));
}

char *arena_printf(Arena *a, const char *fmt, ...)
{
	Buf b = {0};
	va_list ap;

	/* through buf_vprintf: its own conversions of %s, %d, ... are far cheaper than two
	 * vsnprintf calls (names of variables and kernels are printed thousands of times) */
	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	char *p = arena_strndup(a, b.s, b.len);
	buf_free(&b);
	return p;
}

void vec_push(Arena *a, Vec *v, void *item)
{
	if (v->len == v->cap) {
		int cap = v->cap ? v->cap * 2 : 4;
		void **items = arena_alloc(a, (size_t)cap * sizeof(void *));
		if (v->len)
			memcpy(items, v->items, (size_t)v->len * sizeof(void *));
		v->items = items;
		v->cap = cap;
	}
	v->items[v->len++] = item;
}
