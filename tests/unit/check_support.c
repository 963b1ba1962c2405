/* check_support.c: arena, Vec, Buf, hashing and diagnostics (positions and exact rendering). */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "support/support.h"

/* ---- arena and Vec ----------------------------------------------------------------------- */

/* About 640 KB in small blocks: two 256 KB chunks, then a 2 MB huge-page chunk (arena.c,
 * chunk_huge). The zero bytes are counted, not asserted one by one: each ck_assert is a write
 * to Check's log, and 640,000 of them took over its 4 s timeout on a loaded machine. */
START_TEST(arena_zeroed_aligned)
{
	Arena *a = arena_new();
	for (int i = 1; i < 3000; i += 7) {
		unsigned char *p = arena_alloc(a, (size_t)i);
		ck_assert_uint_eq((uintptr_t)p % 16, 0);
		int nonzero = 0;
		for (int j = 0; j < i; j++)
			nonzero += p[j] != 0;
		ck_assert_int_eq(nonzero, 0);
		memset(p, 0xAB, (size_t)i); /* must not overlap later blocks */
	}
	/* A block bigger than a chunk. */
	unsigned char *big = arena_alloc(a, 1 << 20);
	ck_assert_uint_eq((uintptr_t)big % 16, 0);
	ck_assert_uint_eq(big[0], 0);
	ck_assert_uint_eq(big[(1 << 20) - 1], 0);
	arena_free(a);
}
END_TEST

/* Map: pointer keys by address, string keys by content, through growth; NULL when absent. */
START_TEST(map_pointers_and_strings)
{
	Arena *a = arena_new();
	Map p = {0}, s = {.strings = true};
	int vals[5000];
	for (int i = 0; i < 5000; i++) {
		vals[i] = i;
		map_insert(a, &p, &vals[i], &vals[i]);
		map_insert(a, &s, arena_printf(a, "name%d", i), &vals[i]);
	}
	ck_assert_int_eq(p.len, 5000);
	for (int i = 0; i < 5000; i++) {
		ck_assert_ptr_eq(map_lookup(&p, &vals[i]), &vals[i]);
		char key[32];
		snprintf(key, sizeof key, "name%d", i); /* another pointer, same text */
		ck_assert_ptr_eq(map_lookup(&s, key), &vals[i]);
	}
	ck_assert_ptr_null(map_lookup(&s, "name5000"));
	ck_assert_ptr_null(map_lookup(&p, &p));
	map_insert(a, &s, "name7", &vals[0]); /* replaces */
	ck_assert_ptr_eq(map_lookup(&s, "name7"), &vals[0]);
	ck_assert_int_eq(s.len, 5000);
	Map empty = {0};
	ck_assert_ptr_null(map_lookup(&empty, "x"));
	arena_free(a);
}
END_TEST

START_TEST(arena_blocks_distinct)
{
	Arena *a = arena_new();
	int *p[1000];
	for (int i = 0; i < 1000; i++) {
		p[i] = NEW(a, int);
		*p[i] = i;
	}
	for (int i = 0; i < 1000; i++)
		ck_assert_int_eq(*p[i], i);
	arena_free(a);
}
END_TEST

START_TEST(arena_strings)
{
	Arena *a = arena_new();
	ck_assert_str_eq(arena_strdup(a, "fusion"), "fusion");
	ck_assert_str_eq(arena_strndup(a, "blockIdx.x", 8), "blockIdx");
	ck_assert_str_eq(arena_printf(a, "%s_%d", "t", 42), "t_42");
	arena_free(a);
}
END_TEST

START_TEST(vec_grows)
{
	Arena *a = arena_new();
	Vec v = {0};
	static int xs[100];
	for (int i = 0; i < 100; i++)
		vec_push(a, &v, &xs[i]);
	ck_assert_int_eq(v.len, 100);
	ck_assert_int_ge(v.cap, 100);
	for (int i = 0; i < 100; i++)
		ck_assert_ptr_eq(VEC_AT(v, int, i), &xs[i]);
	arena_free(a);
}
END_TEST

/* ---- Buf, hashing ------------------------------------------------------------------------ */

START_TEST(buf_text)
{
	Buf b = {0};
	buf_puts(&b, "");
	ck_assert_str_eq(b.s, "");
	buf_printf(&b, "%d-%s", 7, "x");
	buf_indent(&b, 2);
	buf_puts(&b, "end");
	ck_assert_str_eq(b.s, "7-x    end");
	ck_assert_uint_eq(b.len, 10);
	for (int i = 0; i < 1000; i++)
		buf_puts(&b, "0123456789");
	ck_assert_uint_eq(b.len, 10010);
	ck_assert_uint_eq(strlen(b.s), 10010);
	buf_free(&b);
	ck_assert_ptr_null(b.s);
	ck_assert_uint_eq(b.len, 0);
}
END_TEST

/* buf_printf writes %s %c %d %u %ld %lld %zu %% itself (support/buf.c, fast_printf) and the
 * rest through vsnprintf: the same text as snprintf either way, extremes included. */
START_TEST(buf_printf_as_snprintf)
{
	char want[256];
	Buf b = {0};
#define SAME(...)                                                          \
	do {                                                                   \
		b.len = 0;                                                     \
		buf_printf(&b, __VA_ARGS__);                                   \
		snprintf(want, sizeof want, __VA_ARGS__);                      \
		ck_assert_str_eq(b.s, want);                                   \
		ck_assert_uint_eq(b.len, strlen(want));                        \
	} while (0)
	SAME("%d|%d|%d|%d", 0, -1, INT_MAX, INT_MIN);
	SAME("%lld %lld %lld", (long long)LLONG_MAX, (long long)LLONG_MIN, -10LL);
	SAME("x%ldy%zuz%u", -123456789L, (size_t)SIZE_MAX, UINT_MAX);
	SAME("%s%s%c%% 100%%", "ab", "", 'q');
	SAME("%lldLL [%s]", 4096LL, "off");
	SAME("no conversions");
	const char *volatile null = NULL; /* volatile: no warning; glibc prints "(null)" */
	SAME("%s", null);
	SAME("%5d|%-4s|%.3s|%03o|%lu|%x", 7, "a", "abcdef", 8, 9UL, 255); /* vsnprintf */
	SAME("%d %.*s %s", 1, 2, "xyz", "tail");
#undef SAME
	buf_free(&b);
}
END_TEST

START_TEST(hash_known_values)
{
	/* FNV-1a 64 reference values; 0 starts a new hash. */
	ck_assert_uint_eq(hash_fnv1a(0, "", 0), 0xcbf29ce484222325ull);
	ck_assert_uint_eq(hash_fnv1a(0, "a", 1), 0xaf63dc4c8601ec8cull);
	ck_assert_uint_eq(hash_fnv1a(0, "foobar", 6), 0x85944171f73967e8ull);
	/* Hashing in pieces equals hashing at once. */
	ck_assert_uint_eq(hash_fnv1a(hash_fnv1a(0, "foo", 3), "bar", 3),
			  hash_fnv1a(0, "foobar", 6));
}
END_TEST

/* SHA-256 of data (n bytes) as hex, hashed in pieces of `piece` bytes (0: at once). */
static void sha256_of(const void *data, size_t n, size_t piece, char hex[65])
{
	Sha256 s;
	unsigned char d[SHA256_BYTES];
	const unsigned char *p = data;

	sha256_init(&s);
	for (size_t i = 0; i < n; i += piece ? piece : n)
		sha256_update(&s, p + i, piece && n - i > piece ? piece : n - i);
	sha256_final(&s, d);
	sha256_hex(d, hex);
}

START_TEST(sha256_vectors)
{
	/* FIPS 180-4 / NIST CAVS examples */
	static const struct { const char *msg, *digest; } v[] = {
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
		{"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
		 "klmnopqrlmnopqrsmnopqrstnopqrstu",
		 "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
	};
	/* lengths around the padding boundaries (55 and 56 bytes: one or two final blocks) */
	static const struct { size_t n; const char *digest; } as[] = {
		{55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
		{56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
		{63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
		{64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
		{65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
		{119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
		{120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
		{1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
	};
	char hex[65];
	char *a = xmalloc(1000000);

	memset(a, 'a', 1000000);
	for (int i = 0; i < countof(v); i++) {
		for (size_t piece = 0; piece <= 70; piece++) { /* 0: at once */
			sha256_of(v[i].msg, strlen(v[i].msg), piece, hex);
			ck_assert_str_eq(hex, v[i].digest);
		}
	}
	for (int i = 0; i < countof(as); i++) {
		sha256_of(a, as[i].n, 0, hex);
		ck_assert_str_eq(hex, as[i].digest);
		sha256_of(a, as[i].n, 7, hex); /* in pieces that straddle the blocks */
		ck_assert_str_eq(hex, as[i].digest);
	}
	free(a);
}
END_TEST

START_TEST(clock_monotonic)
{
	double t0 = now_seconds(), t1 = now_seconds();
	ck_assert(t0 > 0);
	ck_assert(t1 >= t0);
}
END_TEST

/* ---- diagnostics ------------------------------------------------------------------------- */

static const char *src = "fusion f(x: f32) -> (y: f32) {\n"
			 "\ty = x @ 2;\n"
			 "}\n";

static Span at(int file, uint32_t lo, uint32_t hi)
{
	return (Span){file, lo, hi};
}

START_TEST(diag_positions)
{
	Diag *d = diag_new();
	int f = diag_add_file(d, "t.fus", src, strlen(src));
	int line, col;
	ck_assert_int_eq(f, 1);
	ck_assert_str_eq(diag_file_name(d, f), "t.fus");
	ck_assert_str_eq(diag_file_text(d, f), src);
	diag_line_col(d, f, 0, &line, &col);
	ck_assert_int_eq(line, 1);
	ck_assert_int_eq(col, 1);
	diag_line_col(d, f, 30, &line, &col); /* the '\n' ending line 1 */
	ck_assert_int_eq(line, 1);
	ck_assert_int_eq(col, 31);
	diag_line_col(d, f, 31, &line, &col); /* the tab */
	ck_assert_int_eq(line, 2);
	ck_assert_int_eq(col, 1);
	diag_line_col(d, f, 38, &line, &col); /* '@' */
	ck_assert_int_eq(line, 2);
	ck_assert_int_eq(col, 8);
	diag_line_col(d, f, (uint32_t)strlen(src), &line, &col); /* end of text */
	ck_assert_int_eq(line, 4);
	ck_assert_int_eq(col, 1);
	int g = diag_add_file(d, "u.fus", "abc", 3);
	ck_assert_int_eq(g, 2);
	diag_free(d);
}
END_TEST

/* A registered text keeps its true length, NUL bytes included (the scanner is fed it). */
START_TEST(diag_file_len_counts_nul)
{
	Diag *d = diag_new();
	int f = diag_add_file(d, "t.fus", "ab\0cd\n", 6);
	ck_assert_uint_eq(diag_file_len(d, f), 6);
	ck_assert_int_eq(diag_file_text(d, f)[4], 'd');
	int line, col;
	diag_line_col(d, f, 5, &line, &col);
	ck_assert_int_eq(col, 6);
	diag_free(d);
}
END_TEST

START_TEST(diag_render_error_with_tab)
{
	Diag *d = diag_new();
	int f = diag_add_file(d, "t.fus", src, strlen(src));
	diag_error(d, at(f, 38, 39), "unexpected character '%c'", '@');
	diag_error(d, at(f, 33, 42), "span %d", 2);
	ck_assert_int_eq(diag_error_count(d), 2);
	char *s = diag_render(d);
	ck_assert_str_eq(s, "t.fus:2:8: error: unexpected character '@'\n"
			    "\ty = x @ 2;\n"
			    "\t      ^\n"
			    "t.fus:2:3: error: span 2\n"
			    "\ty = x @ 2;\n"
			    "\t ^~~~~~~~~\n");
	free(s);
	/* Rendering forgot them; the count remains. */
	s = diag_render(d);
	ck_assert_str_eq(s, "");
	free(s);
	ck_assert_int_eq(diag_error_count(d), 2);
	diag_free(d);
}
END_TEST

START_TEST(diag_render_levels_and_notes)
{
	Diag *d = diag_new();
	int f = diag_add_file(d, "t.fus", src, strlen(src));
	diag_warning(d, at(f, 7, 8), "unused fusion '%s'", "f");
	diag_error(d, at(f, 21, 22), "bad output");
	diag_note(d, at(f, 9, 10), "input '%s' is here", "x");
	diag_error(d, at(0, 0, 0), "no location");
	diag_note(d, at(0, 0, 0), "neither");
	ck_assert_int_eq(diag_error_count(d), 2);
	char *s = diag_render(d);
	ck_assert_str_eq(s, "t.fus:1:8: warning: unused fusion 'f'\n"
			    "fusion f(x: f32) -> (y: f32) {\n"
			    "       ^\n"
			    "t.fus:1:22: error: bad output\n"
			    "fusion f(x: f32) -> (y: f32) {\n"
			    "                     ^\n"
			    "t.fus:1:10: note: input 'x' is here\n"
			    "fusion f(x: f32) -> (y: f32) {\n"
			    "         ^\n"
			    "fusc: error: no location\n"
			    "fusc: note: neither\n");
	free(s);
	diag_free(d);
}
END_TEST

/* --color: escapes around the severity word and the caret line only (issue 15). */
START_TEST(diag_render_color)
{
	Diag *d = diag_new();
	int f = diag_add_file(d, "t.fus", src, strlen(src));
	diag_set_color(d, true);
	diag_warning(d, at(f, 7, 8), "unused fusion '%s'", "f");
	diag_error(d, at(f, 21, 25), "bad output");
	diag_note(d, at(0, 0, 0), "neither");
	char *s = diag_render(d);
	ck_assert_str_eq(s, "t.fus:1:8: \033[1;35mwarning\033[0m: unused fusion 'f'\n"
			    "fusion f(x: f32) -> (y: f32) {\n"
			    "       \033[1;32m^\033[0m\n"
			    "t.fus:1:22: \033[1;31merror\033[0m: bad output\n"
			    "fusion f(x: f32) -> (y: f32) {\n"
			    "                     \033[1;32m^~~~\033[0m\n"
			    "fusc: \033[1;36mnote\033[0m: neither\n");
	free(s);
	diag_set_color(d, false);
	diag_error(d, at(f, 21, 22), "bad output");
	s = diag_render(d);
	ck_assert_str_eq(s, "t.fus:1:22: error: bad output\n"
			    "fusion f(x: f32) -> (y: f32) {\n"
			    "                     ^\n");
	free(s);
	diag_free(d);
}
END_TEST

/* auto: a terminal, TERM not dumb, NO_COLOR unset or empty; always and never win. */
START_TEST(diag_color_choice)
{
	DiagColor c;

	ck_assert(diag_color_from_name("auto", &c) && c == DC_AUTO);
	ck_assert(diag_color_from_name("always", &c) && c == DC_ALWAYS);
	ck_assert(diag_color_from_name("never", &c) && c == DC_NEVER);
	ck_assert(!diag_color_from_name("yes", &c));
	ck_assert(diag_color_wanted(DC_AUTO, NULL, "xterm", true));
	ck_assert(diag_color_wanted(DC_AUTO, "", NULL, true));
	ck_assert(!diag_color_wanted(DC_AUTO, "1", "xterm", true));
	ck_assert(!diag_color_wanted(DC_AUTO, NULL, "dumb", true));
	ck_assert(!diag_color_wanted(DC_AUTO, NULL, "xterm", false));
	ck_assert(diag_color_wanted(DC_ALWAYS, "1", "dumb", false));
	ck_assert(!diag_color_wanted(DC_NEVER, NULL, "xterm", true));
}
END_TEST

START_TEST(diag_render_edges)
{
	Diag *d = diag_new();
	int f = diag_add_file(d, "t.fus", src, strlen(src));
	/* Empty span: one caret. A span running past its line: underline stops at the line end. */
	diag_error(d, at(f, 43, 43), "empty");
	diag_error(d, at(f, 26, 45), "multi-line");
	/* At the very end of the text (an empty last line). */
	diag_error(d, at(f, (uint32_t)strlen(src), (uint32_t)strlen(src)), "at end");
	char *s = diag_render(d);
	ck_assert_str_eq(s, "t.fus:3:1: error: empty\n"
			    "}\n"
			    "^\n"
			    "t.fus:1:27: error: multi-line\n"
			    "fusion f(x: f32) -> (y: f32) {\n"
			    "                          ^~~~\n"
			    "t.fus:4:1: error: at end\n"
			    "\n"
			    "^\n");
	free(s);
	diag_free(d);
}
END_TEST

START_TEST(diag_too_many_errors)
{
	Diag *d = diag_new();
	int f = diag_add_file(d, "t.fus", "x", 1);
	for (int i = 0; i < DIAG_MAX_ERRORS + 5; i++) {
		diag_error(d, at(f, 0, 1), "error %d", i);
		diag_note(d, at(0, 0, 0), "note %d", i);
	}
	ck_assert_int_eq(diag_error_count(d), DIAG_MAX_ERRORS + 5);
	char *s = diag_render(d);
	char last[64];
	snprintf(last, sizeof last, "fusc: note: note %d\nfusc: too many errors, stopping\n",
		 DIAG_MAX_ERRORS - 1);
	ck_assert_ptr_nonnull(strstr(s, last));
	ck_assert_uint_eq(strlen(strstr(s, last)), strlen(last)); /* it is the very end */
	char dropped[32];
	snprintf(dropped, sizeof dropped, "error %d\n", DIAG_MAX_ERRORS);
	ck_assert_ptr_null(strstr(s, dropped));
	free(s);
	diag_free(d);
}
END_TEST

START_TEST(diag_print_matches_render)
{
	Diag *d = diag_new();
	int f = diag_add_file(d, "t.fus", src, strlen(src));
	diag_error(d, at(f, 38, 39), "stray");
	char *want = diag_render(d);
	diag_error(d, at(f, 38, 39), "stray");
	char *got = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&got, &len);
	diag_print(d, mem);
	fclose(mem);
	ck_assert_str_eq(got, want);
	free(got);
	free(want);
	diag_free(d);
}
END_TEST

START_TEST(span_join_covers_both)
{
	Span s = span_join(at(1, 10, 12), at(1, 3, 5));
	ck_assert_int_eq(s.file, 1);
	ck_assert_uint_eq(s.lo, 3);
	ck_assert_uint_eq(s.hi, 12);
	s = span_join(at(0, 0, 0), at(2, 4, 6));
	ck_assert_int_eq(s.file, 2);
	ck_assert_uint_eq(s.lo, 4);
}
END_TEST

Suite *support_suite(void)
{
	Suite *s = suite_create("support");
	TCase *tc = tcase_create("support");
	tcase_add_test(tc, arena_zeroed_aligned);
	tcase_add_test(tc, arena_blocks_distinct);
	tcase_add_test(tc, map_pointers_and_strings);
	tcase_add_test(tc, arena_strings);
	tcase_add_test(tc, vec_grows);
	tcase_add_test(tc, buf_text);
	tcase_add_test(tc, buf_printf_as_snprintf);
	tcase_add_test(tc, hash_known_values);
	tcase_add_test(tc, sha256_vectors);
	tcase_add_test(tc, clock_monotonic);
	tcase_add_test(tc, diag_positions);
	tcase_add_test(tc, diag_render_error_with_tab);
	tcase_add_test(tc, diag_file_len_counts_nul);
	tcase_add_test(tc, diag_render_levels_and_notes);
	tcase_add_test(tc, diag_render_edges);
	tcase_add_test(tc, diag_render_color);
	tcase_add_test(tc, diag_color_choice);
	tcase_add_test(tc, diag_too_many_errors);
	tcase_add_test(tc, diag_print_matches_render);
	tcase_add_test(tc, span_join_covers_both);
	suite_add_tcase(s, tc);
	return s;
}
