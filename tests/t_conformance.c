/*
 * t_conformance.c - what every allocator policy must do, checked for every registered policy with
 * no edit here (a new policy is tested the moment it is added to src/policies/registry.c), and the
 * interface's own mechanisms (the plan step of offline policies).
 */
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include "engine/lifetimes.h"
#include "engine/reconcile.h"
#include "engine/run.h"
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
	struct oblock **live;   /* by lifetime index, for destroy */
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
	if (rq->thread != rq->id % 5 || rq->time_us != (int64_t)(rq->id * 10)) /* write_trace's th= and t= */
		p->mismatches++;
	oblock *b = xmalloc(sizeof(*b));
	b->k = k;
	b->size = (rq->size + 511) / 512 * 512;
	if (as_dev_alloc(p->dev, b->size, rq->stream, &b->addr)) {
		free(b);
		return 1;
	}
	if (k < p->n)
		p->live[k] = b;
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
	if (b->k < p->n)
		p->live[b->k] = NULL;
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
	p->live = xcalloc(q->n + 1, sizeof(*p->live));
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
	for (size_t i = 0; p->live && i < p->n; i++)
		free(p->live[i]);
	free(p->live);
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
			fprintf(f, "a %" PRIu64 " %" PRIu64 " %lu t=%" PRIu64 " th=%" PRIu64 "\n", live[s], 1 + gsl_rng_uniform_int(rng, 40 * MiB),
				gsl_rng_uniform_int(rng, 3), live[s] * 10, live[s] % 5);
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
	is_u64(last_oracle->mismatches, 0, "plan: each malloc and each free is the one the plan announced; requests carry the trace's thread and time");
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

/* ---- every registered policy ---- */

/* A random workload as an event array: three streams, sizes from bytes to 100 MiB, frees in random
 * order, some requested on one stream and completed later, empty_cache() now and then. At the
 * middle every requested free completes and an empty_cache() follows (event *mid); at the end
 * everything is freed and the cache emptied. */
static as_event *workload(unsigned long seed, size_t nev, uint64_t maxsize, size_t *n, size_t *mid)
{
	gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(rng, seed);
	size_t cap = nev + 2 * 256 + 8;
	as_event *v = xcalloc(cap, sizeof(*v));
	uint64_t live[256] = { 0 }, next = 1;
	int req[256] = { 0 };
	size_t k = 0;
	for (size_t i = 0; i < nev; i++) {
		if (i == nev / 2) {
			for (int s = 0; s < 256; s++)
				if (live[s] && req[s]) {
					v[k++] = (as_event){ .type = EV_FREE, .id = live[s], .slot = (uint32_t)s, .time_us = -1 };
					live[s] = 0;
					req[s] = 0;
				}
			*mid = k;
			v[k++] = (as_event){ .type = EV_EMPTY_CACHE, .time_us = -1 };
		}
		size_t s = gsl_rng_uniform_int(rng, 256);
		as_event ev = { .time_us = -1, .stream = gsl_rng_uniform_int(rng, 3), .slot = (uint32_t)s };
		if (live[s]) {
			ev.id = live[s];
			if (!req[s] && gsl_rng_uniform(rng) < 0.15) {
				ev.type = EV_FREE_REQ;
				req[s] = 1;
			} else {
				ev.type = EV_FREE;
				live[s] = 0;
				req[s] = 0;
			}
		} else if (gsl_rng_uniform(rng) < 0.003) {
			ev.type = EV_EMPTY_CACHE;
		} else {
			double u = gsl_rng_uniform(rng);
			ev.type = EV_ALLOC;
			ev.id = live[s] = next++;
			ev.size = u < 0.6 ? 1 + gsl_rng_uniform_int(rng, MiB) : u < 0.95 ? 1 + gsl_rng_uniform_int(rng, 12 * MiB)
				: 1 + gsl_rng_uniform_int(rng, maxsize);
		}
		v[k++] = ev;
	}
	for (int s = 0; s < 256; s++)
		if (live[s])
			v[k++] = (as_event){ .type = EV_FREE, .id = live[s], .slot = (uint32_t)s, .time_us = -1 };
	v[k++] = (as_event){ .type = EV_EMPTY_CACHE, .time_us = -1 };
	gsl_rng_free(rng);
	*n = k;
	return v;
}

typedef struct seg_count {
	uint64_t segs, idle, bytes;
} seg_count;

static void count_seg(void *ctx, const as_seg_view *v)
{
	seg_count *c = ctx;
	int used = 0;
	for (size_t i = 0; i < v->nblocks; i++)
		used |= v->block_states[i] != 0;
	c->segs++;
	c->idle += !used;
	c->bytes += v->size;
}

typedef struct outcome {
	int good;             /* every event applied, check() held after each */
	char why[300];
	as_summary s;
	char row[2048];       /* the summary row */
	uint64_t mid_reserved, mid_idle_segs, mid_again_changed, mid_seg_bytes;
	int has_segments;
	uint64_t end_reserved, end_allocated;
	uint64_t empties, empty_changed;  /* the workload's empty_cache events, and those that changed reserved bytes */
} outcome;

static void replay(const char *name, const char *conf, uint64_t cap, const as_event *v, size_t n, size_t mid, outcome *o)
{
	memset(o, 0, sizeof(*o));
	as_err err = { 0, "" };
	as_device *dev = as_sim_device_new(cap, ADDR_MODEL);
	as_engine e;
	o->good = as_engine_init(&e, as_policy_find(name), conf, dev, &err) == 0;
	if (!o->good) {
		snprintf(o->why, sizeof o->why, "%s", err.msg);
		as_device_destroy(dev);
		return;
	}
	e.check = 1;
	as_lifetimes plan; /* an offline policy gets the events' lifetimes first, as every replay gives them */
	as_lifetimes_init(&plan);
	if (as_plan_from_array(&e, &plan, v, n, &err)) {
		snprintf(o->why, sizeof o->why, "plan: %s", err.msg);
		o->good = 0;
	}
	for (size_t i = 0; i < n && o->good; i++) {
		uint64_t before = dev->reserved;
		if (v[i].type == EV_EMPTY_CACHE)
			o->empties++;
		if (as_engine_step(&e, &v[i], &err)) {
			snprintf(o->why, sizeof o->why, "event %zu: %s", i, err.msg);
			o->good = 0;
		}
		if (v[i].type == EV_EMPTY_CACHE && dev->reserved != before)
			o->empty_changed++;
		if (i == mid) {
			/* no free is pending: the cache is empty now */
			o->mid_reserved = dev->reserved;
			seg_count c = { 0 };
			as_q_segments q = { count_seg, &c };
			o->has_segments = as_policy_query(e.pol, AS_Q_SEGMENTS, &q) == 0;
			o->mid_idle_segs = c.idle;
			o->mid_seg_bytes = c.bytes;
			uint64_t calls = dev->num_free;
			e.pol->ops->empty_cache(e.pol);
			o->mid_again_changed = (dev->reserved != o->mid_reserved) + (dev->num_free != calls);
		}
	}
	as_engine_finish(&e);
	o->s = e.s;
	as_lifetimes_free(&plan);
	o->end_reserved = dev->reserved;
	o->end_allocated = e.allocated + e.requested;
	FILE *f = fmemopen(o->row, sizeof o->row - 1, "w");
	as_summary_row(f, "workload", name, conf, cap, &e.s);
	fclose(f);
	as_engine_free(&e);
	as_device_destroy(dev);
}

/* The peak of live bytes by the plan's lifetimes: what any allocator must hold at once. */
static uint64_t plan_peak(const as_lifetimes *lt)
{
	uint64_t peak = 0, cur = 0;
	size_t nd = 0;
	uint64_t *ends = xmalloc((lt->n + 1) * sizeof(uint64_t) * 2);
	for (size_t i = 0; i < lt->n; i++)
		if (lt->v[i].free != AS_NEVER) {
			ends[2 * nd] = lt->v[i].free;
			ends[2 * nd + 1] = lt->v[i].size;
			nd++;
		}
	/* allocations in index order; frees sorted by index (insertion: small n) */
	for (size_t i = 1; i < nd; i++)
		for (size_t j = i; j > 0 && ends[2 * (j - 1)] > ends[2 * j]; j--) {
			uint64_t a = ends[2 * j], b = ends[2 * j + 1];
			ends[2 * j] = ends[2 * (j - 1)];
			ends[2 * j + 1] = ends[2 * (j - 1) + 1];
			ends[2 * (j - 1)] = a;
			ends[2 * (j - 1) + 1] = b;
		}
	size_t a = 0, f = 0;
	while (a < lt->n) {
		if (f < nd && ends[2 * f] < lt->v[a].alloc) {
			cur -= ends[2 * f + 1];
			f++;
		} else {
			cur += lt->v[a++].size;
			if (cur > peak)
				peak = cur;
		}
	}
	free(ends);
	return peak;
}

/* ---- reconciliation: an inferred empty_cache (EVF_MAYBE) under the recorded settings ---- */

/* Replays a1, a2 (30 MiB each), free 1, then `at` (the run's start), a recorded segment release, a
 * phase marker and a3 (30 MiB), through the reconciliation stage of a replay of the recorded settings;
 * out: device allocations, device frees, reserved bytes before the last frees. */
static int replay_run(const char *name, const as_event *at, uint64_t out[3])
{
	const as_event v[] = {
		{ .type = EV_ALLOC, .id = 1, .slot = 0, .size = 30 * MiB, .time_us = -1 },
		{ .type = EV_ALLOC, .id = 2, .slot = 1, .size = 30 * MiB, .time_us = -1 },
		{ .type = EV_FREE, .id = 1, .slot = 0, .time_us = -1 },
		*at,
		{ .type = EV_SEG_FREE, .addr = 0x7f0000000000ULL, .size = 30 * MiB, .time_us = -1 },
		{ .type = EV_PHASE, .label = "step", .time_us = -1 },
		{ .type = EV_ALLOC, .id = 3, .slot = 2, .size = 30 * MiB, .time_us = -1 },
	};
	const as_event tail[] = { { .type = EV_FREE, .id = 2, .slot = 1, .time_us = -1 }, { .type = EV_FREE, .id = 3, .slot = 2, .time_us = -1 } };
	as_err err = { 0, "" };
	as_device *dev = as_sim_device_new(0, ADDR_MODEL);
	as_engine e;
	int good = as_engine_init(&e, as_policy_find(name), "", dev, &err) == 0;
	as_lifetimes plan;
	as_lifetimes_init(&plan);
	if (good) {
		as_event all[sizeof v / sizeof *v + 2];
		memcpy(all, v, sizeof v);
		memcpy(all + sizeof v / sizeof *v, tail, sizeof tail);
		good = as_plan_from_array(&e, &plan, all, sizeof all / sizeof *all, &err) == 0;
	}
	if (good) {
		as_reconcile_attach(&e, 1);
		for (size_t i = 0; good && i < sizeof v / sizeof *v; i++)
			good = !as_engine_step(&e, &v[i], &err);
		out[0] = dev->num_alloc, out[1] = dev->num_free, out[2] = dev->reserved;
		for (size_t i = 0; good && i < 2; i++)
			good = !as_engine_step(&e, &tail[i], &err);
		as_engine_finish(&e);
		as_engine_free(&e);
	}
	as_lifetimes_free(&plan);
	as_device_destroy(dev);
	return good;
}

/* A policy with AS_CAP_NO_INFERRED_EMPTY replays the run as if it were not there; any other one, when
 * the next event is not an allocation its fallback could explain, as a program's empty_cache(). */
static void test_inferred_empty(const char *name)
{
	const as_event maybe = { .type = EV_EMPTY_CACHE, .flags = EVF_MAYBE, .time_us = -1 };
	const as_event none = { .type = EV_PHASE, .label = "none", .time_us = -1 };
	const as_event call = { .type = EV_EMPTY_CACHE, .time_us = -1 };
	uint64_t m[3], n[3], c[3];
	int good = replay_run(name, &maybe, m) && replay_run(name, &none, n) && replay_run(name, &call, c);
	int ignores = (as_policy_find(name)->flags & AS_CAP_NO_INFERRED_EMPTY) != 0;
	const uint64_t *want = ignores ? n : c;
	ok(good && !memcmp(m, want, sizeof m), "%s: an inferred empty_cache run under the recorded settings is %s "
		"(device allocs, frees, reserved: %" PRIu64 ",%" PRIu64 ",%" PRIu64 " = %" PRIu64 ",%" PRIu64 ",%" PRIu64 ")",
		name, ignores ? "ignored (no_inferred_empty)" : "an empty_cache() call", m[0], m[1], m[2], want[0], want[1], want[2]);
}

/* The configuration under which a program's empty_cache() releases what is free: "" for most policies;
 * empty_cache_releases:True (allocsim's what-if) in every layer that has the option, for those whose real
 * allocator has no such call (bfc, rmm-*), so that the release itself is checked too. */
static void releasing_conf(const char *name, char *out, size_t len)
{
	char layers[128];
	snprintf(layers, sizeof layers, "%s", name);
	out[0] = 0;
	int any = 0;
	for (char *s = layers, *tok; (tok = strsep(&s, ">")) != NULL;) {
		const as_policy_ops *ops = as_policy_find(tok);
		int has = 0;
		for (const as_optdesc *d = ops ? ops->opts : NULL; d && d->name; d++)
			has |= !strcmp(d->name, "empty_cache_releases");
		any |= has;
		snprintf(out + strlen(out), len - strlen(out), "%s%s", out[0] || tok != layers ? ";" : "", has ? "empty_cache_releases:True" : "");
	}
	if (!any)
		out[0] = 0;
}

static void test_policy(const char *name)
{
	size_t n, mid;
	as_event *v = workload(11, 6000, 100 * MiB, &n, &mid);
	as_lifetimes lt;
	as_lifetimes_init(&lt);
	/* the bound ends a lifetime where the policy's blocks come back (--free-at's default) */
	lt.at_request = (as_policy_find(name)->flags & AS_CAP_FREE_AT_REQUEST) != 0;
	for (size_t i = 0; i < n; i++)
		as_lifetimes_add(&lt, &v[i]);
	outcome a, b;
	char conf[256];
	releasing_conf(name, conf, sizeof conf);
	if (conf[0]) {
		/* by default an empty_cache event is no call of its real allocator: it keeps the pool */
		replay(name, "", 0, v, n, mid, &a);
		ok(a.good && a.empties > 0 && a.empty_changed == 0 && a.end_allocated == 0,
			"%s: by default none of the %" PRIu64 " empty_cache events releases anything (its allocator has no such call)", name, a.empties);
	}
	replay(name, conf, 0, v, n, mid, &a);
	if (!a.good && !strstr(a.why, "event")) {
		/* a policy that cannot run on the simulated device here (e.g. a stack over a pool) */
		ok(strchr(name, '>') != NULL, "%s: refuses the simulated setup only as a stack (%s)", name, a.why);
		free(v);
		as_lifetimes_free(&lt);
		return;
	}
	ok(a.good, "%s: %zu random events with check() after each (%s)", name, n, a.why);
	test_inferred_empty(name);
	is_u64(a.end_allocated, 0, "%s: everything freed leaves nothing allocated or requested", name);
	is_u64(a.end_reserved, 0, "%s: empty_cache after freeing everything returns every byte to the device", name);
	is_u64(a.mid_again_changed, 0, "%s: a second empty_cache releases nothing more", name);
	if (a.has_segments) {
		is_u64(a.mid_idle_segs, 0, "%s: after empty_cache (no pending frees) no segment without a live block is kept", name);
		is_u64(a.mid_seg_bytes, a.mid_reserved, "%s: its segments are all it reserves", name);
	}
	uint64_t bound = plan_peak(&lt);
	is_u64(a.s.peak_requested_bytes, bound, "%s: peak live bytes equal the plan's bound (first pass over the same events)", name);
	ok(a.s.peak_reserved_bytes >= bound, "%s: reserves at least the bound (%" PRIu64 " >= %" PRIu64 ")", name, a.s.peak_reserved_bytes, bound);
	ok(a.s.lower_bound_bytes >= bound && a.s.lower_bound_bytes <= a.s.peak_reserved_bytes,
		"%s: lower_bound_bytes lies between the unrounded bound and the peak reserved bytes (%" PRIu64 " <= %" PRIu64 " <= %" PRIu64 ")",
		name, bound, a.s.lower_bound_bytes, a.s.peak_reserved_bytes);
	replay(name, conf, 0, v, n, mid, &b);
	ok(b.good && !strcmp(a.row, b.row), "%s: two runs give byte-identical summary rows", name);
	free(v);

	/* out of memory at a small capacity: requests fail cleanly, invariants hold, frees go on */
	const uint64_t cap = 96 * MiB, capm = 96;
	v = workload(23, 3000, 80 * MiB, &n, &mid);
	replay(name, conf, cap, v, n, mid, &a);
	ok(a.good, "%s at %" PRIu64 " MiB: every event applies with check() after each (%s)", name, capm, a.why);
	ok(a.s.num_ooms > 0, "%s at %" PRIu64 " MiB: some requests run out of memory (%" PRIu64 ")", name, capm, a.s.num_ooms);
	ok(a.s.peak_reserved_bytes <= cap, "%s at %" PRIu64 " MiB: never reserves beyond the capacity (%" PRIu64 ")", name, capm,
		a.s.peak_reserved_bytes);
	ok(a.s.first_oom_event >= 0 && a.s.frees > 0 && a.end_allocated == 0 && a.end_reserved == 0,
		"%s at %" PRIu64 " MiB: after the first OOM the frees go on and everything is returned at the end", name, capm);
	free(v);
	as_lifetimes_free(&lt);
}

int main(void)
{
	test_plan();
	for (size_t i = 0; as_policies[i]; i++)
		test_policy(as_policies[i]->name);
	/* each over passthrough as its upstream (src/policies/stack.c) */
	for (size_t i = 0; as_policies[i]; i++) {
		char name[128];
		snprintf(name, sizeof name, "%s>passthrough", as_policies[i]->name);
		test_policy(name);
	}
	return done_testing();
}
