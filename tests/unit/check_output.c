/* check_output.c: how fusc writes its outputs (tools/output.c, issue 11 item 15): a planted
 * symlink under a temporary's name is not followed, a set of outputs is written all or nothing,
 * and an output that is the input file is recognised under any spelling. Each test works in a
 * fresh directory under /tmp. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/support.h"
#include "tests/unit/testutil.h"
#include "tools/output.h"

/* A fresh directory; every path below is made inside it with at(). */
static char dir[64];

static void make_dir(void)
{
	strcpy(dir, "/tmp/fusc_output_XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static char *at(const char *name)
{
	Buf b = {0};
	buf_printf(&b, "%s/%s", dir, name);
	return b.s;
}

static void put(const char *name, const char *text)
{
	char *p = at(name);
	FILE *f = fopen(p, "wb");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	free(p);
}

/* The file's whole text (malloc'd), or NULL when it does not exist. */
static char *get(const char *name)
{
	char *p = at(name), buf[256];
	FILE *f = fopen(p, "rb");
	free(p);
	if (!f)
		return NULL;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	return xstrdup(buf);
}

/* The names in dir, sorted, space-separated (malloc'd). */
static char *listing(void)
{
	char cmd[128], line[256];
	Buf b = {0};
	snprintf(cmd, sizeof cmd, "ls -A %s", dir);
	FILE *p = popen(cmd, "r");
	buf_puts(&b, "");
	while (fgets(line, sizeof line, p)) {
		line[strcspn(line, "\n")] = 0;
		buf_printf(&b, "%s%s", b.len ? " " : "", line);
	}
	pclose(p);
	return b.s;
}

static void remove_dir(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Symlinks planted under the names of this process's temporaries (OUT.tmp<pid>), one to a
 * victim file and one dangling: neither is followed, both stay, the victim keeps its text and
 * the dangling target is not created; the outputs are written under other temporary names. */
START_TEST(planted_symlink_not_followed)
{
	make_dir();
	put("victim", "precious");
	char *cu = at("k.cu"), *h = at("k.h"), *victim = at("victim"), *nowhere = at("nowhere");
	char tmp[128];
	snprintf(tmp, sizeof tmp, "%s.tmp%ld", cu, (long)getpid());
	ck_assert_int_eq(symlink(victim, tmp), 0);
	snprintf(tmp, sizeof tmp, "%s.tmp%ld", h, (long)getpid());
	ck_assert_int_eq(symlink(nowhere, tmp), 0);

	OutputFile fs[2] = {{h, "header", 6}, {cu, "kernels", 7}};
	ck_assert(output_write(fs, 2));
	char *s = get("victim"), *c = get("k.cu"), *hh = get("k.h"), *l = listing();
	ck_assert_str_eq(s, "precious");
	ck_assert_str_eq(c, "kernels");
	ck_assert_str_eq(hh, "header");
	ck_assert_ptr_null(get("nowhere"));
	char want[160];
	snprintf(want, sizeof want, "k.cu k.cu.tmp%ld k.h k.h.tmp%ld victim", (long)getpid(),
		 (long)getpid());
	ck_assert_str_eq(l, want);
	free(s), free(c), free(hh), free(l);
	free(cu), free(h), free(victim), free(nowhere);
	remove_dir();
}
END_TEST

/* When one output cannot be written, none is: earlier contents stay, no temporary remains. */
START_TEST(all_or_nothing)
{
	make_dir();
	put("k.cu", "old kernels");
	char *cu = at("k.cu"), *h_missing_dir = at("nodir/k.h"), *h_dir = at("adir");
	ck_assert_int_eq(mkdir(h_dir, 0700), 0);

	OutputFile fs[2] = {{h_missing_dir, "header", 6}, {cu, "kernels", 7}};
	ck_assert(!output_write(fs, 2));
	OutputFile gs[2] = {{cu, "kernels", 7}, {h_dir, "header", 6}};
	ck_assert(!output_write(gs, 2));
	char *c = get("k.cu"), *l = listing();
	ck_assert_str_eq(c, "old kernels");
	ck_assert_str_eq(l, "adir k.cu");
	free(c), free(l);

	OutputFile ok[1] = {{cu, "kernels", 7}}; /* then it works, replacing the old file */
	ck_assert(output_write(ok, 1));
	c = get("k.cu");
	l = listing();
	ck_assert_str_eq(c, "kernels");
	ck_assert_str_eq(l, "adir k.cu");
	free(c), free(l);
	free(cu), free(h_missing_dir), free(h_dir);
	remove_dir();
}
END_TEST

/* A path that is not a regular file is written in place, not renamed over. */
START_TEST(special_file_in_place)
{
	OutputFile f = {"/dev/null", "kernels", 7};
	struct stat st;
	ck_assert(output_write(&f, 1));
	ck_assert_int_eq(stat("/dev/null", &st), 0);
	ck_assert(S_ISCHR(st.st_mode));
}
END_TEST

START_TEST(output_that_is_the_input)
{
	make_dir();
	put("k.fus", "fusion");
	put("other.fus", "fusion");
	char *in = at("k.fus"), *other = at("other.fus"), *sym = at("link.cu"), *hard = at("hard.cu");
	char *dotted = at("./k.fus"), *fresh = at("new.cu");
	ck_assert_int_eq(symlink(in, sym), 0);
	ck_assert_int_eq(link(in, hard), 0);
	ck_assert(output_is_input(in, in));
	ck_assert(output_is_input(dotted, in));
	ck_assert(output_is_input(sym, in));
	ck_assert(output_is_input(hard, in));
	ck_assert(!output_is_input(other, in));
	ck_assert(!output_is_input(fresh, in));
	ck_assert(!output_is_input("-", in));
	ck_assert(!output_is_input(fresh, "-"));
	free(in), free(other), free(sym), free(hard), free(dotted), free(fresh);
	remove_dir();
}
END_TEST

Suite *output_suite(void)
{
	Suite *s = suite_create("output");
	TCase *c = tcase_create("output");
	tcase_add_test(c, planted_symlink_not_followed);
	tcase_add_test(c, all_or_nothing);
	tcase_add_test(c, special_file_in_place);
	tcase_add_test(c, output_that_is_the_input);
	suite_add_tcase(s, c);
	return s;
}
