/* gen_iid.c - the iid model: independent sizes and lifetimes from named distributions. */
#include "gen/gen.h"
#include <math.h>
#include <stdlib.h>

typedef struct iid {
	uint64_t count, streams, max_size, quantum;
	gen_dist size, life;
	gen_opt opts[8];
} iid;

static void *make(void)
{
	iid *m = xcalloc(1, sizeof *m);
	char msg[256];
	m->count = 100000;
	m->streams = 1;
	m->max_size = 16 * AS_GiB;
	m->quantum = 1;
	gen_dist_parse(&m->size, "lognormal:64KiB,2", msg, sizeof msg);
	gen_dist_parse(&m->life, "exp:100", msg, sizeof msg);
	const gen_opt o[] = {
		{ "count", GO_U64, &m->count, 1, 2e7, 0, 0, "allocations to draw (100000)" },
		{ "size", GO_DIST, &m->size, 0, 0, 0, 0, "request size in bytes (lognormal:64KiB,2)" },
		{ "lifetime", GO_DIST, &m->life, 0, 0, 0, 0, "lifetime, in allocations drawn after it (exp:100)" },
		{ "streams", GO_U64, &m->streams, 1, 64, 0, 0, "streams, each allocation on one drawn uniformly (1)" },
		{ "max-size", GO_SIZE, &m->max_size, 1, (double)(AS_MAX_REQUEST - 1), 0, 0, "sizes above are clamped (16GiB)" },
		{ "quantum", GO_SIZE, &m->quantum, 1, (double)AS_GiB, 0, 0, "sizes rounded up to a multiple (1)" },
		{ 0 },
	};
	GEN_OPTS_COPY(m->opts, o);
	return m;
}

static const gen_opt *opts(void *m) { return ((iid *)m)->opts; }

static int check(void *mv, char *msg, size_t msglen)
{
	(void)mv, (void)msg, (void)msglen;
	return 0;
}

static void run(void *mv, gen_ctx *g)
{
	iid *m = mv;
	for (uint64_t i = 0; i < m->count && !g->over; i++) {
		gen_advance(g, (double)i);
		double s = ceil(gen_dist_draw(&m->size, g->rng));
		uint64_t size = s < 1 ? 1 : s > (double)m->max_size ? m->max_size : (uint64_t)s;
		size = m->quantum > 1 ? (size + m->quantum - 1) / m->quantum * m->quantum : size;
		uint64_t stream = m->streams > 1 ? gsl_rng_uniform_int(g->rng, m->streams) : 0;
		uint64_t id = gen_alloc(g, size, stream);
		double l = gen_dist_draw(&m->life, g->rng);
		if (!(l >= 0))
			l = 0;
		if (l > (double)m->count)
			l = (double)m->count;
		gen_free_at(g, id, (double)i + l + 0.5);
	}
	gen_flush(g);
}

static void destroy(void *mv)
{
	iid *m = mv;
	gen_dist_free(&m->size);
	gen_dist_free(&m->life);
	free(m);
}

const gen_model gen_model_iid = { "iid", "independent sizes and lifetimes (lognormal, Pareto, Weibull, a table)", make, opts,
	check, run, destroy };
