/* case.c: the fuzzer's random numbers and its cases (fuzz.h).
 *
 * A case is a fusion and its schedule as lists of lines (parameters, outputs, statements,
 * directives) so that the minimizer can drop any of them and render the rest, plus the size
 * symbols with the two sets of values it is checked at. The serialized form is what a child
 * process leaves in shared memory for the driver: one line per item, "P|O|S|D unit dropped
 * text", and "Y name v0 v1" per size symbol.
 */
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"

/* ---- Rng -------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void rng_seed(Rng *r, uint64_t seed, uint64_t stream)
{
	uint64_t x = seed * 0x2545f4914f6cdd1dull + stream;
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t rng_next(Rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

int rng_below(Rng *r, int n)
{
	return n <= 1 ? 0 : (int)(rng_next(r) % (uint64_t)n);
}

bool rng_chance(Rng *r, int percent)
{
	return rng_below(r, 100) < percent;
}

/* ---- features --------------------------------------------------------------------------- */

static const char *const feature_names[] = {
#define X(e, n, w) n,
	FUZZ_FEATURES(X)
#undef X
};
static const char *const feature_whats[] = {
#define X(e, n, w) w,
	FUZZ_FEATURES(X)
#undef X
};

const char *fuzz_feature_name(FuzzFeature f) { return feature_names[f]; }
const char *fuzz_feature_what(FuzzFeature f) { return feature_whats[f]; }

/* ---- items ------------------------------------------------------------------------------ */

static void item_push(ItemList *l, int unit, bool dropped, char *text)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		l->v = xrealloc(l->v, sizeof(Item) * (size_t)l->cap);
	}
	l->v[l->n++] = (Item){text, unit, dropped};
}

void item_add(ItemList *l, int unit, const char *fmt, ...)
{
	Buf b = {0};
	va_list ap;
	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	item_push(l, unit, false, b.s);
}

void item_pop(ItemList *l)
{
	free(l->v[--l->n].text);
}

static void list_free(ItemList *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->v[i].text);
	free(l->v);
	*l = (ItemList){0};
}

static ItemList list_copy(const ItemList *l)
{
	ItemList r = {0};
	for (int i = 0; i < l->n; i++)
		item_push(&r, l->v[i].unit, l->v[i].dropped, xstrdup(l->v[i].text));
	return r;
}

void case_free(Case *c)
{
	list_free(&c->params);
	list_free(&c->outs);
	list_free(&c->stmts);
	list_free(&c->dirs);
}

Case case_copy(const Case *c)
{
	Case r = *c;
	r.params = list_copy(&c->params);
	r.outs = list_copy(&c->outs);
	r.stmts = list_copy(&c->stmts);
	r.dirs = list_copy(&c->dirs);
	return r;
}

/* ---- text ------------------------------------------------------------------------------- */

static void render_list(const ItemList *l, Buf *out)
{
	bool first = true;
	for (int i = 0; i < l->n; i++) {
		if (l->v[i].dropped)
			continue;
		buf_printf(out, "%s%s", first ? "" : ", ", l->v[i].text);
		first = false;
	}
}

int case_render(const Case *c, Buf *out)
{
	int line = 1, last = 0;
	buf_printf(out, "fusion %s(", c->name);
	render_list(&c->params, out);
	buf_puts(out, ") -> (");
	render_list(&c->outs, out);
	buf_puts(out, ") {\n");
	for (int i = 0; i < c->stmts.n; i++) {
		if (!c->stmts.v[i].dropped) {
			buf_printf(out, "  %s\n", c->stmts.v[i].text);
			line++;
		}
	}
	buf_puts(out, "}\n");
	line++;
	if (c->auto_schedule)
		return 0;
	buf_printf(out, "schedule %s {\n", c->name);
	line++;
	for (int i = 0; i < c->dirs.n; i++) {
		if (!c->dirs.v[i].dropped) {
			buf_printf(out, "  %s\n", c->dirs.v[i].text);
			last = ++line;
		}
	}
	buf_puts(out, "}\n");
	return last;
}

/* Does the text of the live items of l hold `word` as a whole word? */
static bool list_uses(const ItemList *l, const char *word)
{
	size_t n = strlen(word);
	for (int i = 0; i < l->n; i++) {
		if (l->v[i].dropped)
			continue;
		for (const char *p = l->v[i].text; (p = strstr(p, word)); p += n) {
			bool before = p == l->v[i].text || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
							      (p[-1] >= 'A' && p[-1] <= 'Z') ||
							      (p[-1] >= '0' && p[-1] <= '9'));
			char a = p[n];
			bool after = !(a == '_' || (a >= 'a' && a <= 'z') || (a >= 'A' && a <= 'Z') ||
				       (a >= '0' && a <= '9'));
			if (before && after)
				return true;
		}
	}
	return false;
}

void case_dims(const Case *c, int r, Buf *out)
{
	bool first = true;
	buf_puts(out, "");
	for (int i = 0; i < c->nsyms; i++) {
		const SizeDim *s = &c->syms[i];
		if (!list_uses(&c->params, s->name) && !list_uses(&c->outs, s->name) &&
		    !list_uses(&c->stmts, s->name))
			continue;
		buf_printf(out, "%s%s=%lld", first ? "" : ",", s->name, (long long)s->value[r]);
		first = false;
	}
}

/* ---- serialized form -------------------------------------------------------------------- */

static void serialize_list(const ItemList *l, char kind, Buf *out)
{
	for (int i = 0; i < l->n; i++)
		buf_printf(out, "%c %d %d %s\n", kind, l->v[i].unit, l->v[i].dropped, l->v[i].text);
}

void case_serialize(const Case *c, Buf *out)
{
	buf_printf(out, "N %s %d %d %d\n", c->name, c->auto_schedule, c->next_unit, c->next_name);
	for (int i = 0; i < c->nsyms; i++)
		buf_printf(out, "Y %s %lld %lld\n", c->syms[i].name, (long long)c->syms[i].value[0],
			   (long long)c->syms[i].value[1]);
	serialize_list(&c->params, 'P', out);
	serialize_list(&c->outs, 'O', out);
	serialize_list(&c->stmts, 'S', out);
	serialize_list(&c->dirs, 'D', out);
}

bool case_parse(const char *text, Case *c)
{
	*c = (Case){0};
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		if (!nl)
			break;
		char line[4096];
		size_t n = (size_t)(nl - p);
		if (n >= sizeof line)
			return false;
		memcpy(line, p, n);
		line[n] = 0;
		p = nl + 1;
		int unit, dropped, k = 0, a, u, nn;
		long long v0, v1;
		switch (line[0]) {
		case 'N':
			if (sscanf(line, "N %15s %d %d %d", c->name, &a, &u, &nn) != 4)
				return false;
			c->auto_schedule = a;
			c->next_unit = u;
			c->next_name = nn;
			break;
		case 'Y':
			if (c->nsyms == FUZZ_MAX_SYMS)
				return false;
			if (sscanf(line, "Y %7s %lld %lld", c->syms[c->nsyms].name, &v0, &v1) != 3)
				return false;
			c->syms[c->nsyms].value[0] = v0;
			c->syms[c->nsyms++].value[1] = v1;
			break;
		case 'P': case 'O': case 'S': case 'D': {
			if (sscanf(line + 1, " %d %d %n", &unit, &dropped, &k) != 2 || k == 0)
				return false;
			ItemList *l = line[0] == 'P' ? &c->params : line[0] == 'O' ? &c->outs :
				      line[0] == 'S' ? &c->stmts : &c->dirs;
			item_push(l, unit, dropped, xstrdup(line + 1 + k));
			break;
		}
		default:
			return false;
		}
	}
	return c->name[0] != 0;
}
