/* gen_common.c - the generator's shared part: distributions, the event sink, pending frees,
 * options, the fragmenter prefix (gen.h). */
#include "gen/gen.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- numbers and distributions ----------------------------------------------------------- */

/* A finite number with an optional unit, as sizes take them everywhere (src/util/common.c): K, M, G,
 * T alone or with iB are powers of 1024, with B powers of 1000, B alone 1; in any case. */
static int num(const char *s, char **end, double *out)
{
	static const struct { const char *u; double m; } units[] = {
		{ "KiB", 1024.0 }, { "MiB", 1048576.0 }, { "GiB", 1073741824.0 }, { "TiB", 1099511627776.0 },
		{ "KB", 1e3 }, { "MB", 1e6 }, { "GB", 1e9 }, { "TB", 1e12 },
		{ "K", 1024.0 }, { "M", 1048576.0 }, { "G", 1073741824.0 }, { "T", 1099511627776.0 }, { "B", 1 },
	};
	errno = 0;
	if (!*s || isspace((unsigned char)*s))
		return -1;
	double v = strtod(s, end);
	if (*end == s || errno || !isfinite(v))
		return -1;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		size_t n = strlen(units[i].u);
		if (!strncasecmp(*end, units[i].u, n)) {
			v *= units[i].m;
			*end += n;
			break;
		}
	}
	if (!isfinite(v))
		return -1;
	*out = v;
	return 0;
}

static int nums(const char *s, double *v, int want, char *msg, size_t msglen, const char *what)
{
	char *end;
	for (int i = 0; i < want; i++) {
		if (num(s, &end, &v[i])) {
			snprintf(msg, msglen, "%s: '%s' is not a number", what, s);
			return -1;
		}
		if (i + 1 < want) {
			if (*end != ',') {
				snprintf(msg, msglen, "%s wants %d numbers separated by ','", what, want);
				return -1;
			}
			s = end + 1;
		} else if (*end) {
			snprintf(msg, msglen, "%s wants %d number%s, not '%s'", what, want, want > 1 ? "s" : "", end);
			return -1;
		}
	}
	return 0;
}

int gen_dist_parse(gen_dist *d, const char *s, char *msg, size_t msglen)
{
	static const struct { const char *name; gen_dist_kind k; int n; } kinds[] = {
		{ "const", GD_CONST, 1 }, { "lognormal", GD_LOGNORMAL, 2 }, { "pareto", GD_PARETO, 2 },
		{ "weibull", GD_WEIBULL, 2 }, { "gamma", GD_GAMMA, 2 }, { "exp", GD_EXP, 1 },
		{ "uniform", GD_UNIFORM, 2 }, { "table", GD_TABLE, 0 },
	};
	const char *colon = strchr(s, ':');
	size_t klen = colon ? (size_t)(colon - s) : strlen(s);
	int which = -1;
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		if (strlen(kinds[i].name) == klen && !strncmp(kinds[i].name, s, klen))
			which = (int)i;
	if (which < 0 || !colon) {
		snprintf(msg, msglen, "'%s' is not a distribution (const:V, lognormal:MEDIAN,SIGMA, pareto:XM,ALPHA, "
			"weibull:SCALE,SHAPE, gamma:SHAPE,SCALE, exp:MEAN, uniform:LO,HI, table:V:W,V:W...)", s);
		return -1;
	}
	gen_dist nd = { .kind = kinds[which].k };
	double v[2] = { 0, 0 };
	const char *args = colon + 1;
	if (nd.kind != GD_TABLE) {
		if (nums(args, v, kinds[which].n, msg, msglen, kinds[which].name))
			return -1;
		nd.a = v[0];
		nd.b = v[1];
		int ok = 1;
		switch (nd.kind) {
		case GD_CONST: ok = nd.a >= 0; break;
		case GD_LOGNORMAL: ok = nd.a > 0 && nd.b >= 0 && nd.b <= 10; break;
		case GD_PARETO: case GD_WEIBULL: case GD_GAMMA: ok = nd.a > 0 && nd.b > 0; break;
		case GD_EXP: ok = nd.a > 0; break;
		case GD_UNIFORM: ok = nd.a >= 0 && nd.b >= nd.a; break;
		default: break;
		}
		if (!ok) {
			snprintf(msg, msglen, "'%s': parameters out of range (doc/generator.md: positive scales, "
				"lognormal sigma 0 .. 10, uniform LO <= HI)", s);
			return -1;
		}
		*d = nd;
		return 0;
	}
	/* table:V:W,V:W,... */
	size_t cap = 0;
	const char *p = args;
	double wsum = 0;
	while (*p) {
		char *end;
		double val, w;
		if (nd.n == GEN_TABLE_MAX) {
			snprintf(msg, msglen, "table: more than %d entries", GEN_TABLE_MAX);
			goto bad;
		}
		if (num(p, &end, &val) || *end != ':' || num(end + 1, &end, &w) || (*end && *end != ',')) {
			snprintf(msg, msglen, "table: expected VALUE:WEIGHT pairs separated by ',' at '%s'", p);
			goto bad;
		}
		if (val < 0 || w < 0) {
			snprintf(msg, msglen, "table: negative value or weight at '%s'", p);
			goto bad;
		}
		AS_GROW2(nd.v, nd.w, nd.n, cap, 16);
		nd.v[nd.n] = val;
		nd.w[nd.n++] = w;
		wsum += w;
		p = *end ? end + 1 : end;
		if (*end == ',' && !*p) {
			snprintf(msg, msglen, "table: trailing ','");
			goto bad;
		}
	}
	if (!nd.n || !(wsum > 0) || !isfinite(wsum)) {
		snprintf(msg, msglen, "table: needs at least one entry with a positive weight");
		goto bad;
	}
	nd.pick = gsl_ran_discrete_preproc(nd.n, nd.w);
	*d = nd;
	return 0;
bad:
	free(nd.v);
	free(nd.w);
	return -1;
}

double gen_dist_draw(const gen_dist *d, const gsl_rng *r)
{
	switch (d->kind) {
	case GD_CONST: return d->a;
	case GD_LOGNORMAL: return gsl_ran_lognormal(r, log(d->a), d->b);
	case GD_PARETO: return gsl_ran_pareto(r, d->b, d->a);
	case GD_WEIBULL: return gsl_ran_weibull(r, d->a, d->b);
	case GD_GAMMA: return gsl_ran_gamma(r, d->a, d->b);
	case GD_EXP: return gsl_ran_exponential(r, d->a);
	case GD_UNIFORM: return d->a + (d->b - d->a) * gsl_rng_uniform(r);
	case GD_TABLE: return d->v[gsl_ran_discrete(r, d->pick)];
	}
	return 0;
}

void gen_dist_free(gen_dist *d)
{
	if (d->pick)
		gsl_ran_discrete_free(d->pick);
	free(d->v);
	free(d->w);
	memset(d, 0, sizeof *d);
}

/* ---- the event sink ---------------------------------------------------------------------- */

void gen_ctx_init(gen_ctx *g, uint64_t seed, uint64_t max_events)
{
	memset(g, 0, sizeof *g);
	g->rng = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(g->rng, (unsigned long)seed);
	g->max_events = max_events;
	g->buf.keep_ids = 1;
	g->next_id = 1;
}

void gen_ctx_free(gen_ctx *g)
{
	gsl_rng_free(g->rng);
	as_evbuf_free(&g->buf);
	free(g->slot_of);
	free(g->live);
	free(g->size_of);
	free(g->free_slots);
	free(g->heap);
	memset(g, 0, sizeof *g);
}

static int room(gen_ctx *g)
{
	if (g->buf.n >= g->max_events)
		g->over = 1;
	return !g->over;
}

static void put(gen_ctx *g, as_event *ev)
{
	ev->time_us = -1;
	ev->index = g->buf.n;
	ev->pos = g->buf.n;
	as_evbuf_add(&g->buf, ev);
}

uint64_t gen_alloc(gen_ctx *g, uint64_t size, uint64_t stream)
{
	if (!room(g))
		return 0;
	if (size < 1)
		size = 1;
	if (size >= AS_MAX_REQUEST)
		size = AS_MAX_REQUEST - 1;
	uint64_t id = g->next_id++;
	if (id >= g->cap_ids) {
		size_t nc = g->cap_ids ? 2 * g->cap_ids : 4096;
		g->slot_of = xrealloc(g->slot_of, nc * sizeof *g->slot_of);
		g->size_of = xrealloc(g->size_of, nc * sizeof *g->size_of);
		g->live = xrealloc(g->live, nc);
		memset(g->live + g->cap_ids, 0, nc - g->cap_ids);
		g->cap_ids = nc;
	}
	uint32_t slot = g->nfree ? g->free_slots[--g->nfree] : g->nslots++;
	g->slot_of[id] = slot;
	g->size_of[id] = size;
	g->live[id] = 1;
	g->live_bytes += size;
	if (g->live_bytes > g->peak_live)
		g->peak_live = g->live_bytes;
	as_event ev = { .type = EV_ALLOC, .id = id, .size = size, .stream = stream, .slot = slot };
	put(g, &ev);
	return id;
}

void gen_free(gen_ctx *g, uint64_t id)
{
	if (!id || id >= g->next_id || !g->live[id] || !room(g))
		return;
	g->live[id] = 0;
	g->live_bytes -= g->size_of[id];
	AS_GROW(g->free_slots, g->nfree, g->cap_free, 1024);
	g->free_slots[g->nfree++] = g->slot_of[id];
	as_event ev = { .type = EV_FREE, .id = id, .slot = g->slot_of[id] };
	put(g, &ev);
}

static int before(const gen_pending *a, const gen_pending *b)
{
	return a->when < b->when || (a->when == b->when && a->seq < b->seq);
}

void gen_free_at(gen_ctx *g, uint64_t id, double when)
{
	if (!id)
		return;
	AS_GROW(g->heap, g->nheap, g->cap_heap, 1024);
	size_t i = g->nheap++;
	gen_pending x = { when, g->seq++, id };
	while (i && before(&x, &g->heap[(i - 1) / 2])) {
		g->heap[i] = g->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	g->heap[i] = x;
}

static gen_pending pop(gen_ctx *g)
{
	gen_pending top = g->heap[0], x = g->heap[--g->nheap];
	size_t i = 0, n = g->nheap;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && before(&g->heap[c + 1], &g->heap[c]))
			c++;
		if (!before(&g->heap[c], &x))
			break;
		g->heap[i] = g->heap[c];
		i = c;
	}
	if (n)
		g->heap[i] = x;
	return top;
}

void gen_advance(gen_ctx *g, double now)
{
	while (g->nheap && g->heap[0].when <= now)
		gen_free(g, pop(g).id);
}

void gen_flush(gen_ctx *g)
{
	while (g->nheap)
		gen_free(g, pop(g).id);
}

void gen_phase(gen_ctx *g, const char *label)
{
	if (!room(g))
		return;
	as_event ev = { .type = EV_PHASE, .label = label };
	put(g, &ev);
}

/* ---- options ------------------------------------------------------------------------------ */

int gen_opt_set(const gen_opt *o, void *model, const char *val, char *msg, size_t msglen)
{
	char m2[512];
	switch (o->kind) {
	case GO_U64: {
		uint64_t v;
		if (as_parse_u64(val, &v) || (double)v < o->lo || (double)v > o->hi) {
			snprintf(msg, msglen, "--%s: '%s' is not a whole number in %.0f .. %.0f", o->name, val, o->lo, o->hi);
			return -1;
		}
		*(uint64_t *)o->dst = v;
		return 0;
	}
	case GO_SIZE: {
		uint64_t v;
		if (as_parse_size(val, &v, m2, sizeof m2)) {
			snprintf(msg, msglen, "--%s: %s", o->name, m2);
			return -1;
		}
		if ((double)v < o->lo || (double)v > o->hi) {
			snprintf(msg, msglen, "--%s: '%s' is outside %.0f .. %.0f bytes", o->name, val, o->lo, o->hi);
			return -1;
		}
		*(uint64_t *)o->dst = v;
		return 0;
	}
	case GO_DBL: {
		double v;
		char *end;
		if (num(val, &end, &v) || *end || v < o->lo || v > o->hi) {
			snprintf(msg, msglen, "--%s: '%s' is not a number in %g .. %g", o->name, val, o->lo, o->hi);
			return -1;
		}
		*(double *)o->dst = v;
		return 0;
	}
	case GO_DIST: {
		gen_dist d;
		if (gen_dist_parse(&d, val, m2, sizeof m2)) {
			snprintf(msg, msglen, "--%s: %s", o->name, m2);
			return -1;
		}
		gen_dist_free(o->dst);
		*(gen_dist *)o->dst = d;
		return 0;
	}
	case GO_ENUM: {
		const char *p = o->choices;
		size_t n = strlen(val);
		for (int i = 0; p && *p; i++) {
			const char *bar = strchr(p, '|');
			size_t len = bar ? (size_t)(bar - p) : strlen(p);
			if (len == n && !strncmp(p, val, n)) {
				*(int *)o->dst = i;
				return 0;
			}
			p = bar ? bar + 1 : p + len;
		}
		snprintf(msg, msglen, "--%s: '%s' is not one of %s", o->name, val, o->choices);
		return -1;
	}
	case GO_CALL:
		if (o->call(model, val, m2, sizeof m2)) {
			snprintf(msg, msglen, "--%s: %s", o->name, m2);
			return -1;
		}
		return 0;
	}
	return -1;
}

/* ---- the fragmenter prefix ---------------------------------------------------------------- */

void gen_fragment_begin(gen_ctx *g, gen_frag *f)
{
	if (!f->total || !f->piece)
		return;
	uint64_t n = f->total / f->piece;
	uint64_t *ids = xcalloc(n ? n : 1, sizeof *ids);
	gen_phase(g, "fragmenter");
	for (uint64_t i = 0; i < n; i++)
		ids[i] = gen_alloc(g, f->piece, 0);
	f->kept = xcalloc(n ? n : 1, sizeof *f->kept);
	f->nkept = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (f->keep && i % f->keep == f->keep - 1)
			f->kept[f->nkept++] = ids[i];
		else
			gen_free(g, ids[i]);
	}
	free(ids);
	gen_phase(g, "workload");
}

void gen_fragment_end(gen_ctx *g, gen_frag *f)
{
	for (size_t i = 0; i < f->nkept; i++)
		gen_free(g, f->kept[i]);
	free(f->kept);
	f->kept = NULL;
	f->nkept = 0;
}
