/* map.c: hash maps in an arena (open addressing, linear probing, grown at 1/2 load). Keys are
 * pointers compared by address, or C strings compared by content (Map.strings); the map keeps
 * the key pointers, so keys must outlive it (arena strings do). A value is never NULL: get
 * returns NULL for a missing key. The old arrays of a grown map stay in the arena. */
#include <string.h>

#include "support/support.h"

static uint64_t key_hash(const Map *m, const void *key)
{
	if (m->strings)
		return hash_fnv1a(0xcbf29ce484222325ull, key, strlen(key));
	uint64_t h = (uint64_t)(uintptr_t)key;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 33);
}

static bool key_equal(const Map *m, const void *a, const void *b)
{
	return a == b || (m->strings && strcmp(a, b) == 0);
}

/* The slot of key: where it is, or the empty slot where it would go. */
static int slot_of(const Map *m, const void *key)
{
	int mask = m->cap - 1;
	int i = (int)(key_hash(m, key) & (uint64_t)mask);
	while (m->keys[i] && !key_equal(m, m->keys[i], key))
		i = (i + 1) & mask;
	return i;
}

void *map_lookup(const Map *m, const void *key)
{
	if (!m->len)
		return NULL;
	int i = slot_of(m, key);
	return m->keys[i] ? m->vals[i] : NULL;
}

static void grow(Arena *a, Map *m)
{
	Map old = *m;
	m->cap = old.cap ? 2 * old.cap : 16;
	m->len = 0;
	m->keys = arena_alloc(a, sizeof(void *) * (size_t)m->cap);
	m->vals = arena_alloc(a, sizeof(void *) * (size_t)m->cap);
	for (int i = 0; i < old.cap; i++)
		if (old.keys[i])
			map_insert(a, m, old.keys[i], old.vals[i]);
}

void map_insert(Arena *a, Map *m, const void *key, void *val)
{
	if (!key || !val)
		die("map_insert: NULL key or value");
	if (2 * (m->len + 1) > m->cap)
		grow(a, m);
	int i = slot_of(m, key);
	if (!m->keys[i]) {
		m->keys[i] = key;
		m->len++;
	}
	m->vals[i] = val;
}
