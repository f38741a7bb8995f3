/* gen_phase.c - the phase model: a repeating step described by a table of (position, size,
 * lifetime) classes, as gen --fit extracts it from a real trace (gen_fit.c).
 *
 * A step is cut into --bins equal parts of its allocations. A row "BIN SIZE LIFE COUNT SCALES
 * [OFFSET]" says that COUNT allocations over the fitted steps (COUNT / --fitted-steps per step, on
 * average) start in part BIN (at OFFSET within it, else anywhere) with SIZE x s^SCALES bytes, s the
 * step's scale drawn from --scale (the sequence length of a varlen workload, relative to the
 * median), and live LIFE steps (fractions: 0.25 is a quarter step). "first" and "last" rows belong
 * to the first and the last step only (COUNT not divided). A row "persist SIZE STEP BIN COUNT"
 * allocates COUNT buffers that stay live to the end, in step STEP (the last step if there are
 * fewer), part BIN. doc/generator.md. */
#include "gen/gen.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct prow { uint32_t bin; uint8_t kind; uint64_t size; double scales, life, count, off; } prow; /* kind: 0 every step, 1 first, 2 last */
typedef struct ppersist { uint64_t size, step, bin, count; } ppersist;

#define PHASE_MAX_ROWS 1000000

typedef struct phase {
	uint64_t steps, bins, fitted_steps, max_size;
	double size_scale, jitter;
	int shuffle;
	gen_dist scale;
	prow *rows;
	size_t nrows, caprows, nkind[3];
	ppersist *pers;
	size_t npers, cappers;
	gen_opt opts[18];
} phase;

static int parse_doubles(const char *v, double *out, int n)
{
	char *end;
	for (int i = 0; i < n; i++) {
		while (*v == ' ' || *v == '\t')
			v++;
		if (!*v)
			return -1;
		out[i] = strtod(v, &end);
		if (end == v || !isfinite(out[i]) || out[i] < 0)
			return -1;
		v = end;
	}
	while (*v == ' ' || *v == '\t')
		v++;
	return *v ? -1 : 0;
}

static int add_kind(void *mv, const char *v, char *msg, size_t msglen, int kind)
{
	phase *m = mv;
	double x[6] = { 0, 0, 0, 0, 0, -1 };
	if ((parse_doubles(v, x, 5) && parse_doubles(v, x, 6)) || x[5] >= 1 || x[0] >= 65536 || x[0] != floor(x[0]) || x[1] < 1 || x[1] >= (double)AS_MAX_REQUEST
		|| x[2] > 1e6 || x[3] > 1e9 || x[4] > 4) {
		snprintf(msg, msglen, "'%s': expected 'BIN SIZE LIFE COUNT SCALES [OFFSET]' (BIN < 65536, SIZE 1 .. 2^60-1, LIFE "
			"0 .. 1e6 steps, COUNT 0 .. 1e9, SCALES 0 .. 4, OFFSET 0 .. 1)", v);
		return -1;
	}
	if (m->nrows == PHASE_MAX_ROWS) {
		snprintf(msg, msglen, "more than %d rows", PHASE_MAX_ROWS);
		return -1;
	}
	AS_GROW(m->rows, m->nrows, m->caprows, 256);
	m->rows[m->nrows++] = (prow){ (uint32_t)x[0], (uint8_t)kind, (uint64_t)x[1], x[4], x[2], x[3], x[5] };
	m->nkind[kind]++;
	return 0;
}
static int add_row(void *m, const char *v, char *msg, size_t msglen) { return add_kind(m, v, msg, msglen, 0); }
static int add_first(void *m, const char *v, char *msg, size_t msglen) { return add_kind(m, v, msg, msglen, 1); }
static int add_last(void *m, const char *v, char *msg, size_t msglen) { return add_kind(m, v, msg, msglen, 2); }

static int add_persist(void *mv, const char *v, char *msg, size_t msglen)
{
	phase *m = mv;
	double x[4];
	if (parse_doubles(v, x, 4) || x[0] < 1 || x[0] >= (double)AS_MAX_REQUEST || x[1] > 1e6 || x[2] >= 65536 || x[3] > 1e6
		|| x[0] != floor(x[0]) || x[1] != floor(x[1]) || x[2] != floor(x[2]) || x[3] != floor(x[3])) {
		snprintf(msg, msglen, "'%s': expected 'SIZE STEP BIN COUNT' (whole numbers: SIZE 1 .. 2^60-1, STEP <= 1e6, "
			"BIN < 65536, COUNT <= 1e6)", v);
		return -1;
	}
	if (m->npers == PHASE_MAX_ROWS) {
		snprintf(msg, msglen, "more than %d rows", PHASE_MAX_ROWS);
		return -1;
	}
	AS_GROW(m->pers, m->npers, m->cappers, 64);
	m->pers[m->npers++] = (ppersist){ (uint64_t)x[0], (uint64_t)x[1], (uint64_t)x[2], (uint64_t)x[3] };
	return 0;
}

static void *make(void)
{
	phase *m = xcalloc(1, sizeof *m);
	char msg[64];
	m->steps = 10, m->bins = 64, m->fitted_steps = 1, m->size_scale = 1, m->jitter = 0.1, m->max_size = 64 * AS_GiB;
	gen_dist_parse(&m->scale, "const:1", msg, sizeof msg);
	const gen_opt o[] = {
		{ "steps", GO_U64, &m->steps, 1, 1e6, 0, 0, "steps to draw (10)" },
		{ "bins", GO_U64, &m->bins, 1, 65536, 0, 0, "parts of a step that rows name (64)" },
		{ "fitted-steps", GO_U64, &m->fitted_steps, 1, 1e6, 0, 0, "steps the rows' counts add up over (1)" },
		{ "scale", GO_DIST, &m->scale, 0, 0, 0, 0, "per-step size scale of the rows with SCALES 1 (const:1)" },
		{ "scale-draw", GO_ENUM, &m->shuffle, 0, 0, "random|shuffle|sequence", 0, "random: --scale drawn each step; "
			"shuffle: a table's values each once a pass, in random order; sequence: in the table's order (random)" },
		{ "size-scale", GO_DBL, &m->size_scale, 1e-6, 1e6, 0, 0, "every size multiplied by it: a bigger batch (1)" },
		{ "jitter", GO_DBL, &m->jitter, 0, 1, 0, 0, "spread, in parts, around a row's OFFSET (0.1)" },
		{ "max-size", GO_SIZE, &m->max_size, 1, (double)(AS_MAX_REQUEST - 1), 0, 0, "sizes are clamped to it (64GiB)" },
		{ "row", GO_CALL, 0, 0, 0, 0, add_row, "a class: 'BIN SIZE LIFE COUNT SCALES' (repeat)" },
		{ "first", GO_CALL, 0, 0, 0, 0, add_first, "a class of the first step only (its COUNT not divided) (repeat)" },
		{ "last", GO_CALL, 0, 0, 0, 0, add_last, "a class of the last step only (repeat)" },
		{ "persist", GO_CALL, 0, 0, 0, 0, add_persist, "live to the end: 'SIZE STEP BIN COUNT' (repeat)" },
		{ 0 },
	};
	GEN_OPTS_COPY(m->opts, o);
	return m;
}

static const gen_opt *opts(void *m) { return ((phase *)m)->opts; }

static int check(void *mv, char *msg, size_t msglen)
{
	phase *m = mv;
	if (!m->nrows && !m->npers) {
		snprintf(msg, msglen, "the phase model needs rows ('row' or 'persist' lines: gen --fit TRACE writes them)");
		return -1;
	}
	for (size_t i = 0; i < m->nrows; i++)
		if (m->rows[i].bin >= m->bins) {
			snprintf(msg, msglen, "a row names bin %u but --bins is %llu", m->rows[i].bin, (unsigned long long)m->bins);
			return -1;
		}
	for (size_t i = 0; i < m->npers; i++)
		if (m->pers[i].bin >= m->bins) {
			snprintf(msg, msglen, "a persist row names bin %llu but --bins is %llu", (unsigned long long)m->pers[i].bin,
				(unsigned long long)m->bins);
			return -1;
		}
	return 0;
}

typedef struct pev { double u, life; uint64_t size, seq; } pev;

static int by_u(const void *a, const void *b)
{
	const pev *x = a, *y = b;
	if (x->u != y->u)
		return x->u < y->u ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static uint64_t sized(const phase *m, double s)
{
	s *= m->size_scale;
	if (!(s >= 1))
		return 1;
	if (s > (double)m->max_size)
		return m->max_size;
	return (uint64_t)llround(s);
}

typedef struct group { uint8_t kind; size_t first, end; double frac; gsl_ran_discrete_t *pick; } group;
static const prow *sort_rows; /* by_part's rows (qsort passes no context) */
static int by_part(const void *a, const void *b)
{
	const prow *x = &sort_rows[*(const size_t *)a], *y = &sort_rows[*(const size_t *)b];
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->bin != y->bin)
		return x->bin < y->bin ? -1 : 1;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	return i < j ? -1 : i > j;
}

static void run(void *mv, gen_ctx *g)
{
	phase *m = mv;
	double B = (double)m->bins;
	pev *ev = NULL;
	size_t cap = 0, *perm = NULL, nperm = 0;
	/* the rows grouped by (kind, part) */
	size_t *order = xcalloc(m->nrows ? m->nrows : 1, sizeof *order), ngroups = 0;
	for (size_t i = 0; i < m->nrows; i++)
		order[i] = i;
	sort_rows = m->rows;
	if (m->nrows)
		qsort(order, m->nrows, sizeof *order, by_part);
	group *groups = xcalloc(m->nrows ? m->nrows : 1, sizeof *groups);
	double *w = xcalloc(m->nrows ? m->nrows : 1, sizeof *w);
	for (size_t i = 0; i < m->nrows;) {
		size_t j = i;
		double frac = 0;
		const prow *r = &m->rows[order[i]];
		while (j < m->nrows && m->rows[order[j]].kind == r->kind && m->rows[order[j]].bin == r->bin) {
			double c = r->kind ? m->rows[order[j]].count : m->rows[order[j]].count / (double)m->fitted_steps;
			w[j - i] = c - floor(c);
			frac += w[j - i];
			j++;
		}
		groups[ngroups++] = (group){ r->kind, i, j, frac, frac > 0 ? gsl_ran_discrete_preproc(j - i, w) : NULL };
		i = j;
	}
	free(w);
	for (uint64_t k = 0; k < m->steps && !g->over; k++) {
		gen_phase(g, "step");
		double s;
		if (m->shuffle && m->scale.kind == GD_TABLE) { /* each value once a pass, in random order */
			if (!perm) {
				perm = xcalloc(m->scale.n, sizeof *perm);
				for (size_t i = 0; i < m->scale.n; i++)
					perm[i] = i;
				nperm = m->scale.n;
			}
			if (nperm == m->scale.n) {
				if (m->shuffle == 1)
					gsl_ran_shuffle(g->rng, perm, m->scale.n, sizeof *perm);
				nperm = 0;
			}
			s = m->scale.v[perm[nperm++]];
		} else {
			s = gen_dist_draw(&m->scale, g->rng);
		}
		size_t n = 0;
		int kind = k == 0 && m->nkind[1] ? 1 : k + 1 == m->steps && k && m->nkind[2] ? 2 : 0;
		for (size_t gi = 0; gi < ngroups; gi++) {
			const group *gr = &groups[gi];
			if (gr->kind != kind)
				continue;
			/* each row's whole allocations per step (its count over the fitted steps), then the
			 * rows' fractions as one: their sum drawn (the fraction by chance), each allocation a
			 * row drawn by its fraction. A part holds as many allocations each step as it held on
			 * average, however its rows split them. */
			size_t want = 0;
			for (size_t q = gr->first; q < gr->end; q++) {
				const prow *r = &m->rows[order[q]];
				want += (size_t)floor(kind ? r->count : r->count / (double)m->fitted_steps);
			}
			uint64_t extra = (uint64_t)floor(gr->frac);
			if (gsl_rng_uniform(g->rng) < gr->frac - floor(gr->frac))
				extra++;
			if (n + want + extra > g->max_events) {
				g->over = 1;
				break;
			}
			while (n + want + extra > cap) {
				cap = cap ? 2 * cap : 4096;
				ev = xrealloc(ev, cap * sizeof *ev);
			}
			for (size_t q = gr->first; q < gr->end + extra; q++) {
				const prow *r;
				uint64_t times = 1;
				if (q < gr->end) {
					r = &m->rows[order[q]];
					times = (uint64_t)floor(kind ? r->count : r->count / (double)m->fitted_steps);
				} else {
					r = &m->rows[order[gr->first + gsl_ran_discrete(g->rng, gr->pick)]];
				}
				for (uint64_t t = 0; t < times; t++) {
					double at = r->off >= 0 ? r->off + m->jitter * (gsl_rng_uniform(g->rng) - 0.5) : gsl_rng_uniform(g->rng);
					ev[n] = (pev){ (r->bin + fmin(0.999999, fmax(0, at))) / B, r->life, sized(m, (double)r->size * (r->scales > 0 ? pow(s, r->scales) : 1)), n };
					n++;
				}
			}
		}
		for (size_t i = 0; i < m->npers; i++) {
			const ppersist *p = &m->pers[i];
			if (!(p->step == k || (k == m->steps - 1 && p->step > k)))
				continue;
			for (uint64_t j = 0; j < p->count && !g->over; j++) {
				if (n + 1 > g->max_events) {
					g->over = 1;
					break;
				}
				AS_GROW(ev, n, cap, 4096);
				ev[n] = (pev){ (p->bin + gsl_rng_uniform(g->rng)) / B, -1, sized(m, (double)p->size), n };
				n++;
			}
		}
		if (n)
			qsort(ev, n, sizeof *ev, by_u);
		for (size_t i = 0; i < n && !g->over; i++) {
			double t = (double)k + ev[i].u;
			gen_advance(g, t);
			uint64_t id = gen_alloc(g, ev[i].size, 0);
			if (ev[i].life >= 0)
				gen_free_at(g, id, t + ev[i].life);
		}
	}
	free(ev);
	for (size_t i = 0; i < ngroups; i++)
		if (groups[i].pick)
			gsl_ran_discrete_free(groups[i].pick);
	free(groups);
	free(order);
	free(perm);
	gen_flush(g);
}

static void destroy(void *mv)
{
	phase *m = mv;
	gen_dist_free(&m->scale);
	free(m->rows);
	free(m->pers);
	free(m);
}

const gen_model gen_model_phase = { "phase", "a repeating step as a table of (position, size, lifetime) classes: what "
	"gen --fit extracts", make, opts, check, run, destroy };
