/*
 * buddy.c - a binary buddy allocator (Knowlton 1965; Knuth, TAOCP vol. 1, 2.5, "the buddy system"),
 * the classical baseline for the GPU allocators (doc/policies.md, section buddy).
 *
 * - Blocks are min_block x 2^k bytes (order k, 0 <= k <= max_order). A request of n bytes takes the
 *   smallest order whose block holds it (n = 0 takes order 0).
 * - Memory comes from the device in arenas of min_block x 2^max_order bytes, one cudaMalloc each;
 *   an arena starts as one free block of order max_order. Buddies are found by offset within their
 *   arena (offset XOR block size).
 * - Allocation: the lowest-address free block of the smallest order >= the request's that has one;
 *   while its order is above the request's it is split in halves, the lower half kept, the upper
 *   half put on the free list of the order below. With no free block of a fitting order a new arena
 *   is allocated; if the device refuses, every wholly free arena is released and the arena asked for
 *   once more (counted in alloc_retries), then the request fails.
 * - A request above the arena size (order > max_order) gets a device allocation of its own of
 *   min_block x 2^order bytes, returned to the device when freed (a buddy system has no block
 *   larger than its heap).
 * - Free: the block merges with its buddy while the buddy is free and whole (same order), up to the
 *   arena's order.
 * - empty_cache releases every arena that is one free block.
 * - One heap for all streams (the classical algorithm knows no streams); free_requested is not a
 *   return: a block is reused from its free (completion) event on.
 *
 * Free lists are one red-black tree per order, keyed by address (lowest address first, O(log n)
 * buddy lookup); the BSD tree macros (util/tree.h) are used as everywhere in allocsim.
 */
#include "policy.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "util/tree.h"
#include <sys/queue.h>

#define BUDDY_MAX_ORDER 40

typedef struct bd_conf {
	uint64_t min_block;
	uint64_t max_order;
} bd_conf;

struct barena;

typedef struct bblock {
	uint64_t addr;
	unsigned order;
	int is_free, pending;
	uint64_t req;
	struct barena *arena;     /* NULL: an oversize request's own device allocation */
	RB_ENTRY(bblock) rb;      /* free list of its order */
	LIST_ENTRY(bblock) live; /* allocated blocks (destroy frees them) */
} bblock;

static int bblock_cmp(const bblock *a, const bblock *b)
{
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}
RB_HEAD(bfree, bblock);
RB_GENERATE_STATIC(bfree, bblock, rb, bblock_cmp);

typedef struct barena {
	uint64_t base;
	TAILQ_ENTRY(barena) link; /* in creation order */
} barena;

typedef struct buddy {
	as_policy base;
	bd_conf c;
	as_device *dev;
	as_counters *ctr;
	uint64_t arena_size;
	struct bfree freel[BUDDY_MAX_ORDER + 1];
	size_t nfree[BUDDY_MAX_ORDER + 1];
	TAILQ_HEAD(, barena) arenas;
	LIST_HEAD(, bblock) live;
	size_t narenas, noversize;
	uint64_t allocated, oversize_bytes;
	uint64_t reqsum, pend;     /* requested bytes of blocks in use; bytes beyond them of pending ones */
	uint64_t splits, merges, arenas_made;
} buddy;

static int parse_min_block(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	bd_conf *c = conf;
	if (as_opt_parse_size(conf, d, val, err))
		return -1;
	if (c->min_block == 0 || (c->min_block & (c->min_block - 1)) || c->min_block < 256)
		return as_fail(err, AS_EXIT_USAGE, "option %s: '%s' is not a power of two of at least 256 bytes", d->name, val);
	return 0;
}

static int parse_order(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	uint64_t v;
	if (as_parse_u64(val, &v) || v > 30)
		return as_fail(err, AS_EXIT_USAGE, "option %s: '%s' is not an order from 0 to 30", d->name, val);
	((bd_conf *)conf)->max_order = v;
	return 0;
}

static const as_optdesc bd_opts[] = {
	{ "min_block", "size", "512", "the smallest block (order 0), a power of two >= 256 bytes", parse_min_block, offsetof(bd_conf, min_block) },
	{ "max_order", "0..30", "21", "the arena is min_block x 2^max_order bytes (default 1 GiB), one cudaMalloc each", parse_order, offsetof(bd_conf, max_order) },
	{ NULL, NULL, NULL, NULL, NULL, 0 },
};

static uint64_t bsize(const buddy *p, unsigned order)
{
	return p->c.min_block << order;
}

static void put_free(buddy *p, bblock *b)
{
	b->is_free = 1;
	RB_INSERT(bfree, &p->freel[b->order], b);
	p->nfree[b->order]++;
}

static void take_free(buddy *p, bblock *b)
{
	RB_REMOVE(bfree, &p->freel[b->order], b);
	p->nfree[b->order]--;
	b->is_free = 0;
}

static int new_arena(buddy *p, uint64_t stream)
{
	uint64_t addr;
	if (as_dev_alloc(p->dev, p->arena_size, stream, &addr))
		return 1;
	barena *a = xcalloc(1, sizeof(*a));
	a->base = addr;
	TAILQ_INSERT_TAIL(&p->arenas, a, link);
	p->narenas++;
	p->arenas_made++;
	bblock *b = xcalloc(1, sizeof(*b));
	b->addr = addr;
	b->order = (unsigned)p->c.max_order;
	b->arena = a;
	put_free(p, b);
	return 0;
}

/* Every arena that is one free block goes back to the device, oldest first. */
static void release_free_arenas(buddy *p)
{
	unsigned top = (unsigned)p->c.max_order;
	barena *a, *n;
	TAILQ_FOREACH_SAFE(a, &p->arenas, link, n) {
		bblock key = { .addr = a->base };
		bblock *b = RB_FIND(bfree, &p->freel[top], &key);
		if (!b)
			continue;
		take_free(p, b);
		free(b);
		as_dev_free(p->dev, a->base, p->arena_size, 0);
		TAILQ_REMOVE(&p->arenas, a, link);
		free(a);
		p->narenas--;
	}
}

static int bd_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	extern const as_policy_ops as_policy_buddy;
	buddy *p = xcalloc(1, sizeof(*p));
	TAILQ_INIT(&p->arenas);
	LIST_INIT(&p->live);
	if (as_conf_defaults(bd_opts, &p->c, err) || as_conf_parse(config, bd_opts, &p->c, err)) {
		free(p);
		return -1;
	}
	if (p->c.min_block > (1ULL << 60) >> p->c.max_order) {
		free(p);
		return as_fail(err, AS_EXIT_USAGE, "buddy: an arena of min_block x 2^max_order bytes must be at most 2^60 bytes");
	}
	p->base.ops = &as_policy_buddy;
	p->dev = dev;
	p->ctr = ctr;
	p->arena_size = bsize(p, (unsigned)p->c.max_order);
	for (int k = 0; k <= BUDDY_MAX_ORDER; k++)
		RB_INIT(&p->freel[k]);
	*out = &p->base;
	return 0;
}

/* The smallest order whose block holds n bytes; BUDDY_MAX_ORDER + 1 when none does. */
static unsigned order_for(const buddy *p, uint64_t n)
{
	unsigned k = 0;
	while (k <= BUDDY_MAX_ORDER && bsize(p, k) < n) {
		if (bsize(p, k) > UINT64_MAX / 2)
			return BUDDY_MAX_ORDER + 1;
		k++;
	}
	return k;
}

static bblock *find_free(buddy *p, unsigned k)
{
	for (unsigned j = k; j <= p->c.max_order; j++)
		if (p->nfree[j])
			return RB_MIN(bfree, &p->freel[j]);
	return NULL;
}

static int bd_malloc(as_policy *pol, const as_request *rq, void **handle, uint64_t *bsz, uint64_t *addr)
{
	buddy *p = (buddy *)pol;
	unsigned k = order_for(p, rq->size);
	if (k > BUDDY_MAX_ORDER)
		return 1;
	bblock *b;
	if (k > p->c.max_order) {
		/* larger than an arena: a device allocation of its own */
		uint64_t a;
		int failed = as_dev_alloc(p->dev, bsize(p, k), rq->stream, &a);
		if (failed) {
			release_free_arenas(p);
			p->ctr->alloc_retries++;
			failed = as_dev_alloc(p->dev, bsize(p, k), rq->stream, &a);
		}
		if (failed)
			return 1;
		b = xcalloc(1, sizeof(*b));
		b->addr = a;
		b->order = k;
		p->noversize++;
		p->oversize_bytes += bsize(p, k);
	} else {
		b = find_free(p, k);
		if (!b) {
			int failed = new_arena(p, rq->stream);
			if (failed) {
				release_free_arenas(p);
				p->ctr->alloc_retries++;
				failed = new_arena(p, rq->stream);
			}
			if (failed)
				return 1;
			b = find_free(p, k);
		}
		take_free(p, b);
		while (b->order > k) {
			/* keep the lower half, free the upper one */
			b->order--;
			bblock *up = xcalloc(1, sizeof(*up));
			up->addr = b->addr + bsize(p, b->order);
			up->order = b->order;
			up->arena = b->arena;
			put_free(p, up);
			p->splits++;
		}
	}
	b->req = rq->size;
	b->pending = 0;
	p->reqsum += rq->size;
	LIST_INSERT_HEAD(&p->live, b, live);
	p->allocated += bsize(p, b->order);
	*handle = b;
	*bsz = bsize(p, b->order);
	*addr = b->addr;
	return 0;
}

static void bd_free(as_policy *pol, void *h)
{
	buddy *p = (buddy *)pol;
	bblock *b = h;
	LIST_REMOVE(b, live);
	p->allocated -= bsize(p, b->order);
	p->reqsum -= b->req;
	if (b->pending)
		p->pend -= bsize(p, b->order) - b->req;
	if (!b->arena) {
		as_dev_free(p->dev, b->addr, bsize(p, b->order), 0);
		p->noversize--;
		p->oversize_bytes -= bsize(p, b->order);
		free(b);
		return;
	}
	while (b->order < p->c.max_order) {
		uint64_t off = b->addr - b->arena->base;
		bblock key = { .addr = b->arena->base + (off ^ bsize(p, b->order)) };
		bblock *bud = RB_FIND(bfree, &p->freel[b->order], &key);
		if (!bud)
			break;
		take_free(p, bud);
		if (bud->addr < b->addr)
			b->addr = bud->addr;
		free(bud);
		b->order++;
		p->merges++;
	}
	put_free(p, b);
}

/* The block stays in use until its free completes; only the waste attribution moves. */
static void bd_free_requested(as_policy *pol, void *h)
{
	buddy *p = (buddy *)pol;
	bblock *b = h;
	b->pending = 1;
	p->pend += bsize(p, b->order) - b->req;
}

static void bd_empty_cache(as_policy *pol)
{
	release_free_arenas((buddy *)pol);
}

static int bd_check(as_policy *pol, as_err *err)
{
	buddy *p = (buddy *)pol;
	uint64_t free_bytes = 0;
	for (unsigned k = 0; k <= p->c.max_order; k++) {
		size_t n = 0;
		bblock *b;
		RB_FOREACH(b, bfree, &p->freel[k]) {
			n++;
			uint64_t off = b->addr - b->arena->base;
			if (!b->is_free || b->order != k || off % bsize(p, k) || off + bsize(p, k) > p->arena_size)
				return as_fail(err, AS_EXIT_SOFTWARE, "buddy: free block at 0x%" PRIx64 " of order %u is misplaced", b->addr, k);
			if (k < p->c.max_order) {
				bblock key = { .addr = b->arena->base + (off ^ bsize(p, k)) };
				if (RB_FIND(bfree, &p->freel[k], &key))
					return as_fail(err, AS_EXIT_SOFTWARE, "buddy: free buddies at 0x%" PRIx64 " of order %u are not merged", b->addr, k);
			}
			free_bytes += bsize(p, k);
		}
		if (n != p->nfree[k])
			return as_fail(err, AS_EXIT_SOFTWARE, "buddy: order %u lists %zu free blocks, counts %zu", k, n, p->nfree[k]);
	}
	uint64_t arenas = (uint64_t)p->narenas * p->arena_size;
	if (arenas + p->oversize_bytes != p->dev->reserved || free_bytes + p->allocated != arenas + p->oversize_bytes)
		return as_fail(err, AS_EXIT_SOFTWARE, "buddy: %zu arenas (%" PRIu64 " bytes) and %" PRIu64 " oversize bytes, %" PRIu64
			" free and %" PRIu64 " allocated, the device reserves %" PRIu64, p->narenas, arenas, p->oversize_bytes, free_bytes,
			p->allocated, p->dev->reserved);
	return 0;
}

static int bd_query(as_policy *pol, int what, void *arg)
{
	buddy *p = (buddy *)pol;
	switch (what) {
	case AS_Q_STATS: {
		as_q_stats *q = arg;
		uint64_t nfree = 0;
		for (unsigned k = 0; k <= p->c.max_order; k++)
			nfree += p->nfree[k];
		q->cb(q->ctx, "arena_bytes", (int64_t)p->arena_size);
		q->cb(q->ctx, "arenas", (int64_t)p->narenas);
		q->cb(q->ctx, "arenas_allocated", (int64_t)p->arenas_made);
		q->cb(q->ctx, "oversize_blocks", (int64_t)p->noversize);
		q->cb(q->ctx, "free_blocks", (int64_t)nfree);
		q->cb(q->ctx, "splits", (int64_t)p->splits);
		q->cb(q->ctx, "merges", (int64_t)p->merges);
		return 0;
	}
	case AS_Q_FREE_STATS: {
		as_q_free_stats *q = arg;
		q->largest = q->total = 0;
		for (unsigned k = 0; k <= p->c.max_order; k++)
			if (p->nfree[k]) {
				q->largest = bsize(p, k);
				q->total += p->nfree[k] * bsize(p, k);
			}
		return 0;
	}
	case AS_Q_WASTE: {
		as_waste *w = arg;
		memset(w, 0, sizeof(*w));
		w->rounding = p->allocated - p->reqsum - p->pend;
		w->pending_free = p->pend;
		w->free_cached = p->dev->reserved - p->allocated;
		return 0;
	}
	default:
		return AS_Q_UNKNOWN;
	}
}

static void bd_destroy(as_policy *pol)
{
	buddy *p = (buddy *)pol;
	for (unsigned k = 0; k <= p->c.max_order; k++) {
		bblock *b, *n;
		RB_FOREACH_SAFE(b, bfree, &p->freel[k], n) {
			RB_REMOVE(bfree, &p->freel[k], b);
			free(b);
		}
	}
	bblock *b, *nb;
	LIST_FOREACH_SAFE(b, &p->live, live, nb)
		free(b);
	barena *a, *na;
	TAILQ_FOREACH_SAFE(a, &p->arenas, link, na)
		free(a);
	free(p);
}

const as_policy_ops as_policy_buddy = {
	.name = "buddy",
	.summary = "binary buddy allocator: power-of-two blocks split and merged with their buddies in arenas of one cudaMalloc",
	.opts = bd_opts,
	.flags = AS_CAP_STATS | AS_CAP_FREE_STATS | AS_CAP_WASTE | AS_CAP_NO_INFERRED_EMPTY,
	.create = bd_create,
	.malloc = bd_malloc,
	.free_requested = bd_free_requested,
	.free = bd_free,
	.empty_cache = bd_empty_cache,
	.check = bd_check,
	.query = bd_query,
	.destroy = bd_destroy,
};
