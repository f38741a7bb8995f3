/*
 * bestfit.c - a generic coalescing best-fit pool: the textbook design with its knobs exposed.
 * Requests round up to a granule; a miss obtains a segment of at least min_segment bytes
 * (rounded to segment_round); the smallest adequate free block (lowest address on ties) is
 * split when the remainder is at least split_threshold; frees merge with free neighbours;
 * pools are per stream or shared. On device out-of-memory, whole free segments are released
 * and the request retried once.
 */
#include "policy.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "util/tree.h"

typedef struct bf_conf {
	uint64_t granule, min_segment, segment_round, split_threshold;
	int per_stream;
} bf_conf;

typedef struct bblock {
	uint64_t ptr, size, key_stream, dev_stream;
	struct bblock *prev, *next;
	int allocated, pending;
	RB_ENTRY(bblock) rb;
	RB_ENTRY(bblock) wrb;   /* in the tree of whole free segments (no neighbours) */
	int whole;
	struct bblock *all_prev, *all_next;
} bblock;

static int bcmp_(const bblock *a, const bblock *b)
{
	if (a->key_stream != b->key_stream)
		return a->key_stream < b->key_stream ? -1 : 1;
	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	return a->ptr < b->ptr ? -1 : a->ptr > b->ptr;
}
RB_HEAD(bftree, bblock);
RB_GENERATE_STATIC(bftree, bblock, rb, bcmp_);
/* The free blocks that are whole segments, in the free tree's order: what a release walks (walking
 * the whole free tree at every failed device allocation was quadratic; found by fuzz_native). */
RB_HEAD(bfwhole, bblock);
RB_GENERATE_STATIC(bfwhole, bblock, wrb, bcmp_);

typedef struct bestfit {
	as_policy base;
	bf_conf c;
	as_device *dev;
	as_counters *ctr;
	struct bftree free;
	struct bfwhole whole;
	bblock *all;
	uint64_t reserved;
} bestfit;

/* Sizes up to 2^60 bytes (the largest request is below it): then request + granule and segment +
 * segment_round cannot overflow (min_segment:2^64-1 made zero-byte segments). */
static int parse_seg(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	if (as_opt_parse_size(conf, d, val, err))
		return -1;
	if (*(uint64_t *)((char *)conf + d->off) > AS_MAX_REQUEST)
		return as_fail(err, AS_EXIT_USAGE, "%s: at most 1024 PiB (2^60 bytes), got '%s'", d->name, val);
	return 0;
}

static int parse_pow2(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	if (parse_seg(conf, d, val, err))
		return -1;
	uint64_t v = *(uint64_t *)((char *)conf + d->off);
	if (!v || (v & (v - 1)))
		return as_fail(err, AS_EXIT_USAGE, "%s: must be a power of two, got '%s'", d->name, val);
	return 0;
}

#define OFF(f) offsetof(bf_conf, f)
static const as_optdesc bf_opts[] = {
	{ "granule", "size", "512", "requests are rounded up to a multiple of this (power of two)", parse_pow2, OFF(granule) },
	{ "min_segment", "size", "2MiB", "smallest device allocation made on a miss (at most 2^60)", parse_seg, OFF(min_segment) },
	{ "segment_round", "size", "2MiB", "device allocations are rounded up to a multiple of this (power of two)", parse_pow2, OFF(segment_round) },
	{ "split_threshold", "size", "512", "a block is split when the remainder is at least this", as_opt_parse_size, OFF(split_threshold) },
	{ "per_stream", "True|False", "True", "free blocks are reused only by requests on the same stream", as_opt_parse_bool, OFF(per_stream) },
	{ NULL, NULL, NULL, NULL, NULL, 0 },
};

static bblock *bnew(bestfit *p, uint64_t ptr, uint64_t size, uint64_t key_stream, uint64_t dev_stream)
{
	bblock *b = xcalloc(1, sizeof(*b));
	b->ptr = ptr;
	b->size = size;
	b->key_stream = key_stream;
	b->dev_stream = dev_stream;
	b->all_next = p->all;
	if (p->all)
		p->all->all_prev = b;
	p->all = b;
	return b;
}

static void bdel(bestfit *p, bblock *b)
{
	if (b->all_prev)
		b->all_prev->all_next = b->all_next;
	else
		p->all = b->all_next;
	if (b->all_next)
		b->all_next->all_prev = b->all_prev;
	free(b);
}

/* A block's neighbours do not change while it is free (merges and splits take it out first), so
 * whether it is a whole segment is decided when it enters the free tree. */
static void free_insert(bestfit *p, bblock *b)
{
	RB_INSERT(bftree, &p->free, b);
	b->whole = !b->prev && !b->next;
	if (b->whole)
		RB_INSERT(bfwhole, &p->whole, b);
}

static void free_remove(bestfit *p, bblock *b)
{
	RB_REMOVE(bftree, &p->free, b);
	if (b->whole)
		RB_REMOVE(bfwhole, &p->whole, b);
	b->whole = 0;
}

static int bf_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	extern const as_policy_ops as_policy_bestfit;
	bestfit *p = xcalloc(1, sizeof(*p));
	if (as_conf_defaults(bf_opts, &p->c, err) || as_conf_parse(config, bf_opts, &p->c, err)) {
		free(p);
		return -1;
	}
	p->base.ops = &as_policy_bestfit;
	p->dev = dev;
	p->ctr = ctr;
	RB_INIT(&p->free);
	RB_INIT(&p->whole);
	*out = &p->base;
	return 0;
}

static void release_free_segments(bestfit *p)
{
	bblock *b, *n;
	RB_FOREACH_SAFE(b, bfwhole, &p->whole, n) {
		free_remove(p, b);
		as_dev_free(p->dev, b->ptr, b->size, b->dev_stream);
		p->reserved -= b->size;
		bdel(p, b);
	}
}

static int bf_malloc(as_policy *pol, const as_request *rq, void **handle, uint64_t *bsize, uint64_t *addr)
{
	uint64_t n = rq->size, stream = rq->stream;
	bestfit *p = (bestfit *)pol;
	uint64_t g = p->c.granule;
	uint64_t s = (n + g - 1) / g * g;
	uint64_t ks = p->c.per_stream ? stream : 0;
	bblock key = { .key_stream = ks, .size = s, .ptr = 0 };
	bblock *b = RB_NFIND(bftree, &p->free, &key);
	if (b && b->key_stream == ks) {
		free_remove(p, b);
	} else {
		uint64_t seg = s > p->c.min_segment ? s : p->c.min_segment;
		seg = (seg + p->c.segment_round - 1) / p->c.segment_round * p->c.segment_round;
		uint64_t a;
		if (as_dev_alloc(p->dev, seg, stream, &a)) {
			p->ctr->alloc_retries++;
			release_free_segments(p);
			if (as_dev_alloc(p->dev, seg, stream, &a))
				return 1;
		}
		p->reserved += seg;
		b = bnew(p, a, seg, ks, stream);
	}
	if (b->size - s >= p->c.split_threshold && b->size > s) {
		bblock *rem = bnew(p, b->ptr + s, b->size - s, ks, b->dev_stream);
		rem->prev = b;
		rem->next = b->next;
		if (b->next)
			b->next->prev = rem;
		b->next = rem;
		b->size = s;
		free_insert(p, rem);
	}
	b->allocated = 1;
	*handle = b;
	*bsize = b->size;
	*addr = b->ptr;
	return 0;
}

static void bf_free_requested(as_policy *pol, void *h)
{
	bblock *b = h;
	(void)pol;
	b->allocated = 0;
	b->pending = 1;
}

static int mergeable(const bblock *b)
{
	return b && !b->allocated && !b->pending;
}

static void bf_free(as_policy *pol, void *h)
{
	bestfit *p = (bestfit *)pol;
	bblock *b = h;
	b->allocated = b->pending = 0;
	if (mergeable(b->prev)) {
		bblock *pr = b->prev;
		free_remove(p, pr);
		b->ptr = pr->ptr;
		b->size += pr->size;
		b->prev = pr->prev;
		if (b->prev)
			b->prev->next = b;
		bdel(p, pr);
	}
	if (mergeable(b->next)) {
		bblock *nx = b->next;
		free_remove(p, nx);
		b->size += nx->size;
		b->next = nx->next;
		if (b->next)
			b->next->prev = b;
		bdel(p, nx);
	}
	free_insert(p, b);
}

static void bf_empty_cache(as_policy *pol)
{
	release_free_segments((bestfit *)pol);
}

static int bf_check(as_policy *pol, as_err *err)
{
	bestfit *p = (bestfit *)pol;
	uint64_t seg_bytes = 0;
	for (bblock *b = p->all; b; b = b->all_next) {
		if (b->next && b->ptr + b->size != b->next->ptr)
			return as_fail(err, AS_EXIT_SOFTWARE, "bestfit: blocks at 0x%" PRIx64 " overlap or leave a gap", b->ptr);
		if (mergeable(b) && mergeable(b->next))
			return as_fail(err, AS_EXIT_SOFTWARE, "bestfit: free neighbours at 0x%" PRIx64 " are not merged", b->ptr);
		if (mergeable(b) != (RB_FIND(bftree, &p->free, b) == b))
			return as_fail(err, AS_EXIT_SOFTWARE, "bestfit: free set disagrees with block 0x%" PRIx64, b->ptr);
		if ((mergeable(b) && !b->prev && !b->next) != (b->whole && RB_FIND(bfwhole, &p->whole, b) == b))
			return as_fail(err, AS_EXIT_SOFTWARE, "bestfit: the whole-segment set disagrees with block 0x%" PRIx64, b->ptr);
		seg_bytes += b->size;
	}
	if (seg_bytes != p->reserved || p->reserved != p->dev->reserved)
		return as_fail(err, AS_EXIT_SOFTWARE, "bestfit: blocks cover %" PRIu64 " bytes, reserved %" PRIu64, seg_bytes, p->dev->reserved);
	return 0;
}

static int cmp_head(const void *a, const void *b)
{
	const bblock *x = *(bblock *const *)a, *y = *(bblock *const *)b;
	return x->ptr < y->ptr ? -1 : x->ptr > y->ptr;
}

/* The segment map in address order: a segment is a chain of blocks from one without a prev. */
static void bf_segments(bestfit *p, as_seg_cb cb, void *ctx)
{
	size_t n = 0, cap = 0;
	bblock **heads = NULL;
	for (bblock *b = p->all; b; b = b->all_next)
		if (!b->prev) {
			AS_GROW(heads, n, cap, 64);
			heads[n++] = b;
		}
	qsort(heads, n, sizeof(*heads), cmp_head);
	as_segbuf sb = { 0 };
	for (size_t i = 0; i < n; i++) {
		as_seg_view v = { .addr = heads[i]->ptr, .stream = heads[i]->dev_stream };
		for (bblock *b = heads[i]; b; b = b->next)
			as_segbuf_push(&sb, b->size, b->allocated ? 1 : b->pending ? 2 : 0);
		as_segbuf_emit(&sb, &v, cb, ctx);
	}
	as_segbuf_free(&sb);
	free(heads);
}

static int bf_query(as_policy *pol, int what, void *arg)
{
	if (what == AS_Q_ROUND) {
		uint64_t g = ((bestfit *)pol)->c.granule, *n = &((as_q_round *)arg)->size;
		*n = (*n + g - 1) / g * g;
		((as_q_round *)arg)->granule = g;
		return 0;
	}
	if (what != AS_Q_SEGMENTS)
		return AS_Q_UNKNOWN;
	as_q_segments *q = arg;
	bf_segments((bestfit *)pol, q->cb, q->ctx);
	return 0;
}

static void bf_destroy(as_policy *pol)
{
	bestfit *p = (bestfit *)pol;
	for (bblock *b = p->all, *n; b; b = n) {
		n = b->all_next;
		free(b);
	}
	free(p);
}

const as_policy_ops as_policy_bestfit = {
	.name = "bestfit",
	.summary = "coalescing best-fit pool with configurable rounding, segment sizing, split threshold and per-stream pools",
	.opts = bf_opts,
	.flags = AS_CAP_SEGMENTS | AS_CAP_ROUND,
	.create = bf_create,
	.malloc = bf_malloc,
	.free_requested = bf_free_requested,
	.free = bf_free,
	.empty_cache = bf_empty_cache,
	.check = bf_check,
	.query = bf_query,
	.destroy = bf_destroy,
};
