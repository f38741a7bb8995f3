/* optimal.c - the clairvoyant allocator: it gets every allocation's lifetime before the replay (the
 * plan step, AS_CAP_PLAN), computes an offline placement (optimal_place.c: size-decreasing first fit,
 * then a branch-and-bound search for small traces) and serves each malloc at its planned offset in
 * one device segment whose size is the placement's height. Its peak reserved bytes are therefore the
 * address space an allocator that knows the future needs; lower_bound_bytes is what no placement can
 * go below (doc/policies.md, "optimal"). */
#include "policy.h"
#include "policies/optimal.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct opt_conf {
	uint64_t align, nodes, search_max, fit_max;
} opt_conf;

typedef struct opt_block {
	uint64_t k; /* lifetime index */
} opt_block;

typedef struct optimal {
	as_policy base;
	opt_conf c;
	as_device *dev;
	int planned;
	size_t n, next;            /* lifetimes; the next malloc's index */
	const as_lifetime *lt;
	opt_item *items;
	uint64_t *off, *suffix_top; /* planned offsets; the largest top of items k.. */
	opt_block *blocks;
	uint64_t bound, heuristic, height, nodes;
	size_t stacked;            /* allocations the heuristic put above all it overlaps (fit_max) */
	int searched, proved;
	size_t collision;          /* opt_check's answer: n when the placement is sound */
	int too_big;               /* the sizes together exceed 2^62 bytes (or 2^32 allocations): no placement */
	uint64_t seg_addr, seg_size;
	int have_seg;
	uint64_t live;
	uint64_t unplanned, mismatches;
	char first_mismatch[160];
} optimal;

static int parse_align(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	if (as_opt_parse_size(conf, d, val, err))
		return -1;
	uint64_t g = ((opt_conf *)conf)->align;
	if (!g || (g & (g - 1)) || g > (1ULL << 40))
		return as_fail(err, AS_EXIT_USAGE, "option align: must be a power of two up to 1TiB, got '%s'", val);
	return 0;
}

static int parse_count(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	uint64_t v;
	if (as_parse_u64(val, &v))
		return as_fail(err, AS_EXIT_USAGE, "option %s: '%s' is not a whole number", d->name, val);
	*(uint64_t *)((char *)conf + d->off) = v;
	return 0;
}

static int parse_search_max(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	if (parse_count(conf, d, val, err))
		return -1;
	if (((opt_conf *)conf)->search_max > OPT_SEARCH_MAX)
		return as_fail(err, AS_EXIT_USAGE, "option search_max: at most %d allocations, got '%s'", OPT_SEARCH_MAX, val);
	return 0;
}

#define OFF(f) offsetof(opt_conf, f)
static const as_optdesc opt_opts[] = {
	{ "align", "size", "512", "every request is rounded up to a multiple of this (power of two; cudaMalloc's alignment)", parse_align, OFF(align) },
	{ "search_max", "count", "32", "the exact search runs on traces of at most this many allocations (at most 64; 0: never)", parse_search_max, OFF(search_max) },
	{ "nodes", "count", "200000", "the exact search's budget in search nodes (deterministic, unlike a time budget)", parse_count, OFF(nodes) },
	{ "fit_max", "count", "4096", "an allocation overlapping more placed ones than this goes above them all instead of into the lowest gap (bounds the heuristic's time)", parse_count, OFF(fit_max) },
	{ NULL, NULL, NULL, NULL, NULL, 0 },
};

static int op_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	extern const as_policy_ops as_policy_optimal;
	(void)ctr;
	optimal *p = xcalloc(1, sizeof(*p));
	p->base.ops = &as_policy_optimal;
	p->dev = dev;
	if (as_conf_defaults(opt_opts, &p->c, err) || as_conf_parse(config, opt_opts, &p->c, err)) {
		free(p);
		return -1;
	}
	*out = &p->base;
	return 0;
}

static uint64_t round_up(const optimal *p, uint64_t n)
{
	uint64_t g = p->c.align;
	return n > UINT64_MAX - (g - 1) ? UINT64_MAX / g * g : (n + g - 1) / g * g;
}

static void drop_plan(optimal *p)
{
	free(p->items);
	free(p->off);
	free(p->suffix_top);
	free(p->blocks);
	p->items = NULL;
	p->off = p->suffix_top = NULL;
	p->blocks = NULL;
}

/* The plan: the placement of every lifetime. */
static void plan(optimal *p, const as_q_plan *q)
{
	drop_plan(p);
	size_t n = q->n;
	p->lt = q->v;
	p->n = n;
	p->items = xmalloc((n + 1) * sizeof(opt_item));
	p->off = xcalloc(n + 1, sizeof(uint64_t));
	p->suffix_top = xcalloc(n + 1, sizeof(uint64_t));
	p->blocks = xcalloc(n + 1, sizeof(opt_block));
	size_t nonzero = 0;
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		p->items[i] = (opt_item){ q->v[i].alloc, q->v[i].free, round_up(p, q->v[i].size) };
		nonzero += p->items[i].size != 0;
		p->blocks[i].k = i;
		total = p->items[i].size > (1ULL << 62) - total ? 1ULL << 62 : total + p->items[i].size;
	}
	/* Offsets never exceed the sum of the sizes: below 2^62 no sum overflows. Beyond it (or beyond the
	 * 32-bit indices of the placement's tree) no device could hold the placement: every request fails. */
	p->too_big = total >= (1ULL << 62) || n >= UINT32_MAX;
	p->collision = n;
	p->next = 0;
	p->planned = 1;
	if (p->too_big)
		return;
	p->bound = opt_clique_bound(p->items, n);
	p->height = p->heuristic = opt_place_decreasing(p->items, n, p->c.fit_max > SIZE_MAX ? SIZE_MAX : (size_t)p->c.fit_max, p->off,
		&p->stacked);
	p->proved = p->height <= p->bound;
	p->searched = 0;
	p->nodes = 0;
	if (!p->proved && nonzero <= p->c.search_max) {
		opt_search s = { .max_nodes = p->c.nodes };
		p->height = opt_place_exact(p->items, n, p->bound, p->off, p->height, &s);
		p->proved = s.proved;
		p->nodes = s.nodes;
		p->searched = 1;
	}
	p->collision = opt_check(p->items, n, p->off);
	for (size_t i = n; i-- > 0;) {
		uint64_t top = p->off[i] + p->items[i].size;
		p->suffix_top[i] = top > p->suffix_top[i + 1] ? top : p->suffix_top[i + 1];
	}
}

static void mismatch(optimal *p, size_t k, const as_request *rq, const char *what)
{
	if (!p->mismatches++)
		snprintf(p->first_mismatch, sizeof p->first_mismatch, "allocation %zu (%" PRIu64 " bytes, event %" PRIu64 "): %s", k, rq->size,
			p->dev->event, what);
}

static int op_malloc(as_policy *pol, const as_request *rq, void **handle, uint64_t *bsize, uint64_t *addr)
{
	optimal *p = (optimal *)pol;
	if (!p->planned) {
		p->unplanned++;
		return 1;
	}
	size_t k = p->next++;
	if (p->collision != p->n || p->too_big)
		return 1; /* an unsound placement is served to no one (check() says why); nor one no device holds */
	if (k >= p->n) {
		mismatch(p, k, rq, "more allocations than the plan has");
		return 1;
	}
	if (rq->size != p->lt[k].size) {
		mismatch(p, k, rq, "not the planned allocation (optimal must be the top layer, replayed with its plan)");
		return 1;
	}
	if (!p->items[k].size) { /* occupies nothing: no segment needed */
		*handle = &p->blocks[k];
		*bsize = 0;
		*addr = p->have_seg ? p->seg_addr : 0;
		return 0;
	}
	if (!p->have_seg) {
		/* the address space the rest of the trace needs (the whole height at the first malloc) */
		uint64_t need = p->suffix_top[k];
		if (as_dev_alloc(p->dev, need, rq->stream, &p->seg_addr))
			return 1;
		p->seg_size = need;
		p->have_seg = 1;
	}
	p->live++;
	*handle = &p->blocks[k];
	*bsize = p->items[k].size;
	*addr = p->seg_addr + p->off[k];
	return 0;
}

static void op_free(as_policy *pol, void *h)
{
	optimal *p = (optimal *)pol;
	if (p->items[((opt_block *)h)->k].size)
		p->live--;
}

/* Nothing is cached but the segment: it goes back when no block is live in it. */
static void op_empty_cache(as_policy *pol)
{
	optimal *p = (optimal *)pol;
	if (p->have_seg && !p->live) {
		as_dev_free(p->dev, p->seg_addr, p->seg_size, 0);
		p->have_seg = 0;
	}
}

static int op_check(as_policy *pol, as_err *err)
{
	optimal *p = (optimal *)pol;
	if (p->unplanned)
		return as_fail(err, AS_EXIT_SOFTWARE, "optimal: %" PRIu64 " allocations without a plan (the policy needs the trace's lifetimes first, AS_Q_PLAN)",
			p->unplanned);
	if (p->mismatches)
		return as_fail(err, AS_EXIT_SOFTWARE, "optimal: %" PRIu64 " allocations differ from the plan; the first: %s", p->mismatches,
			p->first_mismatch);
	if (p->planned && p->collision != p->n)
		return as_fail(err, AS_EXIT_SOFTWARE, "optimal: the placement puts allocation %zu over another one live at the same time",
			p->collision);
	if (p->live && !p->have_seg)
		return as_fail(err, AS_EXIT_SOFTWARE, "optimal: %" PRIu64 " live blocks but no segment", p->live);
	return 0;
}

static void op_stats(optimal *p, as_stat_cb cb, void *ctx)
{
	cb(ctx, "allocations", (int64_t)p->n);
	cb(ctx, "peak_live_bytes", (int64_t)p->bound);
	cb(ctx, "heuristic_height_bytes", (int64_t)p->heuristic);
	cb(ctx, "heuristic_stacked", (int64_t)p->stacked);
	cb(ctx, "height_bytes", (int64_t)p->height);
	cb(ctx, "searched", p->searched);
	cb(ctx, "search_nodes", (int64_t)p->nodes);
	cb(ctx, "optimal_proved", p->proved);
}

static int op_query(as_policy *pol, int what, void *arg)
{
	optimal *p = (optimal *)pol;
	switch (what) {
	case AS_Q_PLAN:
		plan(p, arg);
		return 0;
	case AS_Q_ROUND:
		((as_q_round *)arg)->size = round_up(p, ((as_q_round *)arg)->size);
		((as_q_round *)arg)->granule = p->c.align;
		return 0;
	case AS_Q_STATS:
		op_stats(p, ((as_q_stats *)arg)->cb, ((as_q_stats *)arg)->ctx);
		return 0;
	default:
		return AS_Q_UNKNOWN;
	}
}

static void op_destroy(as_policy *pol)
{
	optimal *p = (optimal *)pol;
	drop_plan(p);
	free(p);
}

const as_policy_ops as_policy_optimal = {
	.name = "optimal",
	.summary = "the offline optimum: every allocation at its planned offset in one segment of the placement's height (needs the whole trace first)",
	.opts = opt_opts,
	.flags = AS_CAP_PLAN | AS_CAP_ROUND | AS_CAP_STATS | AS_CAP_NO_INFERRED_EMPTY,
	.create = op_create,
	.malloc = op_malloc,
	.free = op_free,
	.empty_cache = op_empty_cache,
	.check = op_check,
	.query = op_query,
	.destroy = op_destroy,
};
