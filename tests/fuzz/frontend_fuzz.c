/* frontend_fuzz.c: fuzzing of the front end and the whole lowering (docs/fuzzing.md).
 *
 * One input is one .fus text: parse, sema, schedule (compile_program), lower every fusion
 * with the IR verifier between passes (lower_fusion), then print the fusion IR and kernel IR
 * and emit the CUDA and the header, all in memory (no NVRTC, no files). Any input may be
 * refused with diagnostics; none may crash, abort (an internal error), hang or trip ASan or
 * UBSan.
 *
 * Two ways to run it:
 *   - with -DFUSC_LIBFUZZER and clang -fsanitize=fuzzer,address,undefined it is a libFuzzer
 *     target (`make fuzz-frontend SECONDS=...`: coverage-guided, seeded with the examples and
 *     goldens, with tests/fuzz/fus.dict);
 *   - otherwise it is a standalone program that needs no clang (`make check`):
 *       frontend_fuzz [--seed S] [--mutations N] [--dict FILE] [--crash FILE] FILE...
 *     replays every FILE, then N deterministic random mutations of them (byte edits, cut and
 *     duplicated ranges, dictionary tokens, splices of two inputs). Before each input it
 *     arms a 10-second alarm; a crash or hang writes the input to --crash FILE (default
 *     frontend_fuzz-crash.fus) from the signal handler and exits with the signal.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "scheduler/scheduler.h"
#include "passes/passes.h"

/* Inputs larger than this are skipped: they only slow the fuzzer down. */
#define FUZZ_MAX_INPUT (64 * 1024)

/* How far an input got: 0 refused by the front end, 1 scheduled, 2 lowered and emitted. */
static int run_input(const uint8_t *data, size_t size)
{
	int got = 0;
	if (size > FUZZ_MAX_INPUT)
		return got;
	Arena *a = arena_new();
	Diag *d = diag_new();
	int file = diag_add_file(d, "fuzz.fus", (const char *)data, size);
	Program *p = compile_program(a, d, file);
	if (p) {
		got = 1;
		LowerOptions lo = {.arch = 80, .verify = true};
		Kernel **ks = arena_alloc(a, sizeof(Kernel *) * ((size_t)p->nfusions + 1));
		bool ok = true;
		for (int i = 0; i < p->nfusions; i++) {
			ks[i] = lower_fusion(a, d, p->fusions[i], &lo);
			ok = ok && ks[i];
		}
		if (ok && diag_error_count(d) == 0) {
			got = 2;
			Buf ir = {0}, cu = {0}, h = {0};
			for (int i = 0; i < p->nfusions; i++) {
				ir_print_fusion(p->fusions[i], &ir);
				kir_print(ks[i], &ir);
			}
			cuda_emit(ks, p->nfusions, "fuzz.fus", &cu);
			header_emit(ks, p->nfusions, "fuzz.fus", "fuzz", &h);
			buf_free(&ir);
			buf_free(&cu);
			buf_free(&h);
		}
	}
	free(diag_render(d));
	diag_free(d);
	arena_free(a);
	return got;
}

#ifdef FUSC_LIBFUZZER

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run_input(data, size);
	return 0;
}

#else

#include <errno.h>
#include <stdio.h>

#include "tests/fuzz/fuzz.h"

typedef struct Input {
	uint8_t *data;
	size_t len;
} Input;

typedef struct Inputs {
	Input *v;
	int n, cap;
} Inputs;

static void inputs_add(Inputs *l, uint8_t *data, size_t len)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->v = xrealloc(l->v, sizeof(Input) * (size_t)l->cap);
	}
	l->v[l->n++] = (Input){data, len};
}

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	uint8_t *data = NULL;
	size_t n = 0, cap = 0, got;
	char chunk[4096];
	while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
		if (n + got > cap) {
			cap = 2 * (n + got);
			data = xrealloc(data, cap);
		}
		memcpy(data + n, chunk, got);
		n += got;
	}
	fclose(f);
	*len = n;
	return data ? data : xmalloc(1);
}

/* libFuzzer's dictionary format: one "token" per line (maybe NAME=), \" \\ and \xHH escapes. */
static void read_dict(const char *path, Inputs *dict)
{
	size_t len;
	uint8_t *text = read_file(path, &len);
	if (!text) {
		fprintf(stderr, "frontend_fuzz: cannot read %s: %s\n", path, strerror(errno));
		exit(2);
	}
	for (size_t i = 0; i < len;) {
		size_t e = i;
		while (e < len && text[e] != '\n')
			e++;
		size_t q = i;
		while (q < e && text[q] != '"' && text[q] != '#')
			q++;
		if (q < e && text[q] == '"') {
			uint8_t *tok = xmalloc(e - q + 1);
			size_t n = 0;
			for (size_t k = q + 1; k < e && text[k] != '"'; k++) {
				if (text[k] == '\\' && k + 1 < e && text[k + 1] == 'x' && k + 3 < e) {
					char hex[3] = {(char)text[k + 2], (char)text[k + 3], 0};
					tok[n++] = (uint8_t)strtol(hex, NULL, 16);
					k += 3;
				} else if (text[k] == '\\' && k + 1 < e) {
					tok[n++] = text[++k];
				} else {
					tok[n++] = text[k];
				}
			}
			inputs_add(dict, tok, n);
		}
		i = e + 1;
	}
	free(text);
}

/* ---- mutations -------------------------------------------------------------------------- */

typedef struct Mut {
	uint8_t *d;
	size_t n, cap;
} Mut;

static void mut_reserve(Mut *m, size_t extra)
{
	if (m->n + extra <= m->cap)
		return;
	m->cap = 2 * (m->n + extra) + 16;
	m->d = xrealloc(m->d, m->cap);
}

static void mut_insert(Mut *m, size_t at, const uint8_t *src, size_t len)
{
	mut_reserve(m, len);
	memmove(m->d + at + len, m->d + at, m->n - at);
	memcpy(m->d + at, src, len);
	m->n += len;
}

static void mut_erase(Mut *m, size_t at, size_t len)
{
	memmove(m->d + at, m->d + at + len, m->n - at - len);
	m->n -= len;
}

/* A position and a length of a range of m, at most max long. */
static void mut_range(Rng *r, Mut *m, size_t max, size_t *at, size_t *len)
{
	*at = m->n ? (size_t)rng_below(r, (int)m->n) : 0;
	size_t room = m->n - *at;
	*len = room ? 1 + (size_t)rng_below(r, (int)(room < max ? room : max)) : 0;
}

static bool is_word(uint8_t c)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static const uint8_t interesting[] = {0, '\n', ';', '}', '{', '(', ')', '[', ']', ',', ':', '.',
				      '-', '*', '/', '0', '9', 0xff, 0x80, '"', '\\'};

static void mutate_once(Rng *r, Mut *m, const Inputs *corpus, const Inputs *dict)
{
	size_t at, len;
	switch (rng_below(r, 9)) {
	case 0: /* flip a bit */
		if (m->n)
			m->d[rng_below(r, (int)m->n)] ^= (uint8_t)(1u << rng_below(r, 8));
		break;
	case 1: /* an interesting byte */
		if (m->n)
			m->d[rng_below(r, (int)m->n)] = RNG_PICK(r, interesting);
		break;
	case 2: /* cut a range */
		mut_range(r, m, 64, &at, &len);
		mut_erase(m, at, len);
		break;
	case 3: { /* duplicate a range */
		mut_range(r, m, 128, &at, &len);
		uint8_t *copy = xmalloc(len + 1);
		memcpy(copy, m->d + at, len);
		mut_insert(m, m->n ? (size_t)rng_below(r, (int)m->n + 1) : 0, copy, len);
		free(copy);
		break;
	}
	case 4: case 5: { /* insert a dictionary token */
		if (!dict->n)
			break;
		const Input *t = &dict->v[rng_below(r, dict->n)];
		mut_insert(m, m->n ? (size_t)rng_below(r, (int)m->n + 1) : 0, t->data, t->len);
		break;
	}
	case 6: { /* replace a word with a dictionary token */
		if (!dict->n || !m->n)
			break;
		const Input *t = &dict->v[rng_below(r, dict->n)];
		at = (size_t)rng_below(r, (int)m->n);
		len = 0;
		while (at + len < m->n && is_word(m->d[at + len]))
			len++;
		mut_erase(m, at, len);
		mut_insert(m, at, t->data, t->len);
		break;
	}
	case 7: { /* splice: a range of another input */
		const Input *o = &corpus->v[rng_below(r, corpus->n)];
		if (!o->len)
			break;
		size_t from = (size_t)rng_below(r, (int)o->len);
		size_t n = 1 + (size_t)rng_below(r, (int)(o->len - from < 256 ? o->len - from : 256));
		mut_insert(m, m->n ? (size_t)rng_below(r, (int)m->n + 1) : 0, o->data + from, n);
		break;
	}
	default: { /* a number: a big or odd one in place of a digit run */
		static const char *const nums[] = {"0", "1", "3", "1024", "1025", "65536", "2147483648",
						   "4294967296", "9223372036854775807", "1e30", "-1",
						   "0.5", "99999999999999999999"};
		if (!m->n)
			break;
		at = (size_t)rng_below(r, (int)m->n);
		len = 0;
		while (at + len < m->n && m->d[at + len] >= '0' && m->d[at + len] <= '9')
			len++;
		const char *s = RNG_PICK(r, nums);
		mut_erase(m, at, len);
		mut_insert(m, at, (const uint8_t *)s, strlen(s));
		break;
	}
	}
}

/* ---- crashes ---------------------------------------------------------------------------- */

/* The input in flight and where a crash writes it (the signal handler only calls
 * async-signal-safe functions: open, write, close, signal, raise). */
static const uint8_t *cur_data;
static size_t cur_len;
static const char *crash_path = "frontend_fuzz-crash.fus";
static char cur_what[96];

static void on_signal(int sig)
{
	int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		size_t off = 0;
		while (off < cur_len) {
			ssize_t w = write(fd, cur_data + off, cur_len - off);
			if (w <= 0)
				break;
			off += (size_t)w;
		}
		close(fd);
	}
	static const char msg[] = "frontend_fuzz: crash or hang (10 s) on ";
	ssize_t ignored = write(2, msg, sizeof msg - 1);
	ignored = write(2, cur_what, strlen(cur_what));
	ignored = write(2, "; the input is in ", 18);
	ignored = write(2, crash_path, strlen(crash_path));
	ignored = write(2, "\n", 1);
	(void)ignored;
	signal(sig, SIG_DFL);
	raise(sig);
}

static int run_one(const uint8_t *data, size_t len, const char *what)
{
	cur_data = data;
	cur_len = len;
	snprintf(cur_what, sizeof cur_what, "%s", what);
	alarm(10);
	int got = run_input(data, len);
	alarm(0);
	return got;
}

int main(int argc, char **argv)
{
	uint64_t seed = 1;
	long mutations = 0;
	Inputs corpus = {0}, dict = {0};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if ((strcmp(a, "--seed") == 0 || strcmp(a, "--mutations") == 0 || strcmp(a, "--dict") == 0 ||
		     strcmp(a, "--crash") == 0) && i + 1 < argc) {
			const char *v = argv[++i];
			if (strcmp(a, "--seed") == 0)
				seed = strtoull(v, NULL, 10);
			else if (strcmp(a, "--mutations") == 0)
				mutations = strtol(v, NULL, 10);
			else if (strcmp(a, "--dict") == 0)
				read_dict(v, &dict);
			else
				crash_path = v;
			continue;
		}
		if (a[0] == '-') {
			fprintf(stderr, "usage: frontend_fuzz [--seed S] [--mutations N] [--dict FILE] "
					"[--crash FILE] FILE...\n");
			return 2;
		}
		size_t len;
		uint8_t *data = read_file(a, &len);
		if (!data) {
			fprintf(stderr, "frontend_fuzz: cannot read %s: %s\n", a, strerror(errno));
			return 2;
		}
		inputs_add(&corpus, data, len);
	}
	if (corpus.n == 0) {
		fprintf(stderr, "frontend_fuzz: no input files\n");
		return 2;
	}
	signal(SIGSEGV, on_signal);
	signal(SIGABRT, on_signal);
	signal(SIGBUS, on_signal);
	signal(SIGFPE, on_signal);
	signal(SIGILL, on_signal);
	signal(SIGALRM, on_signal);
	double t0 = now_seconds();
	char what[96];
	long got[3] = {0};
	for (int i = 0; i < corpus.n; i++) {
		snprintf(what, sizeof what, "input %d", i + 1);
		got[run_one(corpus.v[i].data, corpus.v[i].len, what)]++;
	}
	Rng r;
	Mut m = {0};
	for (long k = 0; k < mutations; k++) {
		rng_seed(&r, seed, (uint64_t)k);
		const Input *in = &corpus.v[rng_below(&r, corpus.n)];
		m.n = 0;
		mut_reserve(&m, in->len);
		memcpy(m.d, in->data, in->len);
		m.n = in->len;
		int edits = 1 + rng_below(&r, 4);
		for (int e = 0; e < edits; e++)
			mutate_once(&r, &m, &corpus, &dict);
		snprintf(what, sizeof what, "mutation %ld of --seed %llu", k, (unsigned long long)seed);
		got[run_one(m.d, m.n, what)]++;
	}
	double secs = now_seconds() - t0;
	long execs = corpus.n + mutations;
	printf("frontend_fuzz: %d inputs and %ld mutations (seed %llu): no crash, no hang; %ld "
	       "refused, %ld scheduled but refused by the lowering, %ld lowered and emitted; "
	       "%.1f s, %.0f execs/s\n", corpus.n, mutations, (unsigned long long)seed, got[0],
	       got[1], got[2], secs, secs > 0 ? execs / secs : 0.0);
	free(m.d);
	for (int i = 0; i < corpus.n; i++)
		free(corpus.v[i].data);
	for (int i = 0; i < dict.n; i++)
		free(dict.v[i].data);
	free(corpus.v);
	free(dict.v);
	return 0;
}

#endif
