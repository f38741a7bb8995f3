/*
 * t_conformance.c - what every allocator policy must do, checked for every registered policy with
 * no edit here (a new policy is tested the moment it is added to policies/registry.c), and the
 * interface's own mechanisms (the plan step of offline policies).
 */
#include "../src/engine.h"
#include "../src/lifetimes.h"
#include "../src/run.h"
#include "tap.h"
#include <gsl/gsl_rng.h>
#include <stdlib.h>
#include <unistd.h>

#define MiB (1ULL << 20)

/* ---- the plan step: an offline policy gets the whole trace's lifetimes before the replay ---- */

/* A clairvoyant checker: it serves requests like passthrough, but first takes the plan and checks,
 * call by call, that the replay makes exactly the requests the plan announced (k-th malloc = k-th
 * lifetime: size and stream) and frees the blocks in the order of their lifetimes' ends. */
typedef struct oracle {
	as_policy base;
	as_device *dev;
	const as_lifetime *v;
	size_t n, next_alloc;
	uint64_t *free_order;   /* lifetime indices by free event */
	size_t nfree, next_free;
	uint64_t mismatches, planned;
} oracle;
typedef struct oblock {
	uint64_t k, addr, size;
} oblock;

static oracle *last_oracle;
static uint64_t gone_mismatches, gone_allocs, gone_planned; /* of the last oracle destroyed */

static int cmp_by_free(const void *a, const void *b, void *ctx)
{
	const as_lifetime *v = ctx;
	uint64_t x = v[*(const uint64_t *)a].free, y = v[*(const uint64_t *)b].free;
	return x < y ? -1 : x > y;
}

static int or_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	extern const as_policy_ops oracle_ops;
	(void)config; (void)ctr; (void)err;
	oracle *p = xcalloc(1, sizeof(*p));
	p->base.ops = &oracle_ops;
	p->dev = dev;
	last_oracle = p;
	*out = &p->base;
	return 0;
}

static int or_malloc(as_policy *pol, const as_request *rq, void **h, uint64_t *bsize, uint64_t *addr)
{
	oracle *p = (oracle *)pol;
	size_t k = p->next_alloc++;
	if (k >= p->n || p->v[k].size != rq->size || p->v[k].stream != rq->stream)
		p->mismatches++;
	oblock *b = xmalloc(sizeof(*b));
	b->k = k;
	b->size = (rq->size + 511) / 512 * 512;
	if (as_dev_alloc(p->dev, b->size, rq->stream, &b->addr)) {
		free(b);
		return 1;
	}
	*h = b;
	*bsize = b->size;
	*addr = b->addr;
	return 0;
}

static void or_free(as_policy *pol, void *h)
{
	oracle *p = (oracle *)pol;
	oblock *b = h;
	if (p->next_free >= p->nfree || p->free_order[p->next_free] != b->k)
		p->mismatches++;
	p->next_free++;
	as_dev_free(p->dev, b->addr, b->size, 0);
	free(b);
}

static void or_empty_cache(as_policy *pol) { (void)pol; }
static int or_check(as_policy *pol, as_err *err) { (void)pol; (void)err; return 0; }

static int or_query(as_policy *pol, int what, void *arg)
{
	oracle *p = (oracle *)pol;
	if (what != AS_Q_PLAN)
		return AS_Q_UNKNOWN;
	as_q_plan *q = arg;
	p->v = q->v;
	p->n = q->n;
	p->planned = 1;
	p->free_order = xmalloc((q->n + 1) * sizeof(uint64_t));
	for (size_t i = 0; i < q->n; i++)
		if (q->v[i].free != AS_NEVER)
			p->free_order[p->nfree++] = i;
	qsort_r(p->free_order, p->nfree, sizeof(uint64_t), cmp_by_free, (void *)q->v);
	return 0;
}

static void or_destroy(as_policy *pol)
{
	oracle *p = (oracle *)pol;
	gone_mismatches = p->mismatches;
	gone_allocs = p->next_alloc;
	gone_planned = p->planned ? p->n : 0;
	free(p->free_order);
	free(pol);
}

const as_policy_ops oracle_ops = {
	.name = "oracle", .summary = "test: checks the plan against the replay", .flags = AS_CAP_PLAN,
	.create = or_create, .malloc = or_malloc, .free = or_free, .empty_cache = or_empty_cache,
	.check = or_check, .query = or_query, .destroy = or_destroy,
};

/* A random native trace: allocations on three streams, frees in random order, some requested
 * first and completed later, phases and empty_cache() calls between them. */
static void write_trace(const char *path, unsigned long seed, size_t nev)
{
	gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(rng, seed);
	FILE *f = fopen(path, "w");
	fputs("#allocsim-trace 1\n", f);
	uint64_t live[64] = { 0 }, next = 1;
	int req[64] = { 0 };
	for (size_t i = 0; i < nev; i++) {
		size_t s = gsl_rng_uniform_int(rng, 64);
		double u = gsl_rng_uniform(rng);
		if (u < 0.01)
			fputs("p phase\n", f);
		else if (u < 0.02)
			fputs("e\n", f);
		else if (live[s] && !req[s] && u < 0.2) {
			fprintf(f, "r %" PRIu64 "\n", live[s]);
			req[s] = 1;
		} else if (live[s]) {
			fprintf(f, "f %" PRIu64 "\n", live[s]);
			live[s] = 0;
			req[s] = 0;
		} else {
			live[s] = next++;
			fprintf(f, "a %" PRIu64 " %" PRIu64 " %lu\n", live[s], 1 + gsl_rng_uniform_int(rng, 40 * MiB), gsl_rng_uniform_int(rng, 3));
		}
	}
	fclose(f);
	gsl_rng_free(rng);
}

static void test_plan(void)
{
	char path[] = "/tmp/allocsim-conf-XXXXXX";
	int fd = mkstemp(path);
	close(fd);
	write_trace(path, 7, 5000);
	as_lifetimes lt;
	as_lifetimes_init(&lt);
	as_err err = { 0, "" };
	ok(as_lifetimes_from_trace(&lt, path, &err) == 0 && lt.n > 1000, "plan: the first pass finds the trace's %zu allocations", lt.n);
	as_run_opts o = { .path = path, .ops = &oracle_ops, .config = "", .addr_mode = ADDR_MODEL };
	as_summary s;
	last_oracle = NULL;
	int rc = as_run(&o, &s, &err);
	ok(rc == 0 && gone_planned == lt.n && gone_allocs == lt.n && gone_mismatches == 0,
		"plan: as_run plans first, then replays exactly the planned mallocs and frees (%s)", err.msg);
	/* the same by hand, looking at the policy during the replay */
	as_device *dev = as_sim_device_new(0, ADDR_MODEL);
	as_engine e;
	as_lifetimes l2;
	as_lifetimes_init(&l2);
	as_engine_init(&e, &oracle_ops, "", dev, &err);
	ok(as_plan_from_trace(&e, &l2, path, &err) == 0 && last_oracle->planned && last_oracle->n == lt.n,
		"plan: the policy gets all %zu lifetimes before the first malloc", lt.n);
	as_reader *r;
	as_event ev;
	as_reader_open(&r, path, NULL, &err);
	while (as_reader_next(r, &ev, &err) > 0)
		as_engine_step(&e, &ev, &err);
	as_reader_close(r);
	as_engine_finish(&e);
	is_u64(last_oracle->next_alloc, lt.n, "plan: every planned allocation is requested");
	is_u64(last_oracle->mismatches, 0, "plan: each malloc and each free is the one the plan announced");
	is_u64(e.s.events, lt.events, "plan: the first pass numbers events as the engine does");
	is_u64(s.allocs, lt.n, "plan: as_run's replay made the planned allocations");
	as_engine_free(&e);
	as_device_destroy(dev);
	as_lifetimes_free(&l2);
	/* standard input cannot be read twice */
	dev = as_sim_device_new(0, ADDR_MODEL);
	as_engine_init(&e, &oracle_ops, "", dev, &err);
	err.code = 0;
	ok(as_plan_from_trace(&e, &l2, "-", &err) == -1 && err.code == AS_EXIT_USAGE, "plan: an offline policy refuses standard input (%s)", err.msg);
	as_engine_free(&e);
	as_device_destroy(dev);
	as_lifetimes_free(&l2);
	as_lifetimes_free(&lt);
	unlink(path);
}

int main(void)
{
	test_plan();
	return done_testing();
}
