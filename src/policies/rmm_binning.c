/*
 * rmm_binning.c - RMM's binning_memory_resource over fixed_size_memory_resource bins (rapidsai/rmm
 * v26.06.00, commit 871841839b94c67a61c8ed0d31feecfd92a07156: cpp/src/mr/detail/
 * binning_memory_resource_impl.cpp, fixed_size_memory_resource_impl.cpp, detail/fixed_size_free_list.hpp,
 * detail/stream_ordered_memory_resource.hpp).
 *
 * - Bins: for i in [min_size_exponent, max_size_exponent], a fixed_size_memory_resource of block
 *   size align_up(2^i, 256) (a size already present is not added twice). With an exponent of -1 (the
 *   default of RMM's constructor without exponents and of Python's BinningMemoryResource) there are
 *   no bins and every request goes to the upstream.
 * - A request of n bytes goes to the first bin whose size is >= n (resource_bins_.lower_bound(n));
 *   larger requests go to the upstream unchanged (n bytes, unaligned). 0 bytes: a null pointer.
 * - A bin is stream ordered (stream_ordered_memory_resource with a fixed_size_free_list): its
 *   construction allocates one chunk of blocks_to_preallocate (128) blocks from the upstream onto
 *   the legacy stream's list. A request takes the front block of its stream's list; else the front
 *   of the first other stream's list that has one (in the order of the streams' events, taken as
 *   the order streams were first seen by the bin); else a new chunk (128 blocks) from the upstream,
 *   appended to its stream's list, whose first block it takes. A free appends the block to the list
 *   of the stream it is freed on (free_from; the allocation's when the trace does not say).
 * - RMM never releases a bin's chunks before the resource is destroyed: an empty_cache event does
 *   nothing by default (an RMM program has no such call); empty_cache_releases:True (allocsim's
 *   what-if) returns every chunk whose blocks are all free.
 * The upstream is the device, or the next layer of a stack (`-p 'rmm-binning>rmm-pool'`).
 */
#include "policy.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define RMM_ALIGN 256ULL
#define STREAM_LEGACY 1ULL
#define STREAM_PER_THREAD 2ULL
#define MAX_BINS 64

typedef struct rb_conf {
	int64_t min_exp, max_exp;
	uint64_t prealloc;
	int ptds, empty_cache_releases;
} rb_conf;

struct bchunk;
struct blist;
/* One block of a bin: on its stream's list when free, the handle when allocated. */
typedef struct bblk {
	int big;                             /* 0: a bin's block (a bbig starts with 1 here) */
	uint64_t addr, req;
	struct bchunk *chunk;
	struct blist *list;                  /* free: the list it is on; allocated: its stream's list */
	struct bblk *prev, *next;            /* on the list */
	int is_free;
} bblk;

struct bin;
typedef struct bchunk {
	struct bin *bin;
	uint64_t addr;
	size_t nfree;
	bblk *blocks;                        /* prealloc blocks */
	struct bchunk *next;
} bchunk;

typedef struct blist {                   /* one stream's fixed_size_free_list */
	int per_thread;
	uint64_t key;
	bblk *head, *tail;
	size_t n;
} blist;

typedef struct bin {
	uint64_t size;
	bchunk *chunks;
	size_t nchunks;
	blist **lists;
	size_t nlists, caplists;
	uint64_t used;
} bin;

/* A request above every bin: one upstream allocation. */
typedef struct bbig {
	int big;                             /* 1 */
	uint64_t addr, size, req;
	uint64_t stream;
	struct bbig *prev, *next;
} bbig;

typedef struct rmm_binning {
	as_policy base;
	rb_conf c;
	as_device *dev;
	as_counters *ctr;
	bin bins[MAX_BINS];
	size_t nbins;
	bbig *big;
	uint64_t held, used, rounding, peak_held;
	bblk zero;
} rmm_binning;

static int parse_exp(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	char *end;
	long v = strtol(val, &end, 10);
	if (*end || end == val || v < -1 || v > 62)
		return as_fail(err, AS_EXIT_USAGE, "option %s: '%s' is not an exponent from -1 to 62", d->name, val);
	*(int64_t *)((char *)conf + d->off) = v;
	return 0;
}

static int parse_count(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	uint64_t v;
	if (as_parse_u64(val, &v) || v == 0 || v > (1u << 16))
		return as_fail(err, AS_EXIT_USAGE, "option %s: '%s' is not a number of blocks from 1 to 65536", d->name, val);
	*(uint64_t *)((char *)conf + d->off) = v;
	return 0;
}

#define OFF(f) offsetof(rb_conf, f)
static const as_optdesc rb_opts[] = {
	{ "min_size_exponent", "int", "-1", "the smallest bin is 2^this bytes (-1 with max_size_exponent -1: no bins, RMM's default)", parse_exp, OFF(min_exp) },
	{ "max_size_exponent", "int", "-1", "the largest bin is 2^this bytes (RMM's benchmarks use 18..22)", parse_exp, OFF(max_exp) },
	{ "blocks_to_preallocate", "count", "128", "blocks per chunk a bin allocates from the upstream (fixed_size_memory_resource)", parse_count, OFF(prealloc) },
	{ "ptds", "True|False", "False", "built with CUDA_API_PER_THREAD_DEFAULT_STREAM: stream 0 is each thread's own default stream", as_opt_parse_bool, OFF(ptds) },
	{ "empty_cache_releases", "True|False", "False", "an empty_cache event returns every chunk whose blocks are all free (RMM has no such call, so by default it does nothing)", as_opt_parse_bool, OFF(empty_cache_releases) },
	{ NULL, NULL, NULL, NULL, NULL, 0 },
};

static blist *list_for(bin *b, int ptds, uint64_t stream, uint64_t thread)
{
	int pt = stream == STREAM_PER_THREAD || (ptds && stream == 0);
	uint64_t key = pt ? thread : stream == 0 ? STREAM_LEGACY : stream;
	for (size_t i = 0; i < b->nlists; i++)
		if (b->lists[i]->per_thread == pt && b->lists[i]->key == key)
			return b->lists[i];
	AS_GROW(b->lists, b->nlists, b->caplists, 8);
	blist *l = xcalloc(1, sizeof(*l));
	l->per_thread = pt;
	l->key = key;
	b->lists[b->nlists++] = l;
	return l;
}

static void push_back(blist *l, bblk *x)
{
	x->list = l;
	x->is_free = 1;
	x->next = NULL;
	x->prev = l->tail;
	if (l->tail)
		l->tail->next = x;
	else
		l->head = x;
	l->tail = x;
	l->n++;
	x->chunk->nfree++;
}

static void unlink_blk(blist *l, bblk *x)
{
	if (x->prev)
		x->prev->next = x->next;
	else
		l->head = x->next;
	if (x->next)
		x->next->prev = x->prev;
	else
		l->tail = x->prev;
	l->n--;
	x->chunk->nfree--;
	x->is_free = 0;
	x->prev = x->next = NULL;
}

/* blocks_from_upstream: one chunk, its blocks appended to l in address order. */
static int chunk_new(rmm_binning *p, bin *b, blist *l, uint64_t stream)
{
	uint64_t addr, n = p->c.prealloc;
	if (as_dev_alloc(p->dev, b->size * n, stream, &addr))
		return 1;
	bchunk *c = xcalloc(1, sizeof(*c));
	c->addr = addr;
	c->bin = b;
	c->blocks = xcalloc(n, sizeof(*c->blocks));
	c->next = b->chunks;
	b->chunks = c;
	b->nchunks++;
	for (uint64_t i = 0; i < n; i++) {
		c->blocks[i].addr = addr + i * b->size;
		c->blocks[i].chunk = c;
		push_back(l, &c->blocks[i]);
	}
	p->held += b->size * n;
	if (p->held > p->peak_held)
		p->peak_held = p->held;
	return 0;
}

static void destroy_all(rmm_binning *p)
{
	for (size_t i = 0; i < p->nbins; i++) {
		bin *b = &p->bins[i];
		for (bchunk *c = b->chunks, *n; c; c = n) {
			n = c->next;
			free(c->blocks);
			free(c);
		}
		for (size_t k = 0; k < b->nlists; k++)
			free(b->lists[k]);
		free(b->lists);
	}
	for (bbig *g = p->big, *n; g; g = n) {
		n = g->next;
		free(g);
	}
	free(p);
}

static int rb_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	extern const as_policy_ops as_policy_rmm_binning;
	rmm_binning *p = xcalloc(1, sizeof(*p));
	if (as_conf_defaults(rb_opts, &p->c, err) || as_conf_parse(config, rb_opts, &p->c, err)) {
		free(p);
		return -1;
	}
	p->base.ops = &as_policy_rmm_binning;
	p->dev = dev;
	p->ctr = ctr;
	if ((p->c.min_exp == -1) != (p->c.max_exp == -1)) {
		free(p);
		return as_fail(err, AS_EXIT_USAGE, "rmm-binning: give both min_size_exponent and max_size_exponent, or neither");
	}
	/* binning_memory_resource_impl(upstream, min, max): add_bin(1 << i) for each i, in order; a bin
	 * is constructed (and preallocates its first chunk) when added */
	for (int64_t i = p->c.min_exp; i >= 0 && i <= p->c.max_exp; i++) {
		uint64_t size = ((1ULL << i) + RMM_ALIGN - 1) / RMM_ALIGN * RMM_ALIGN;
		if (p->nbins && p->bins[p->nbins - 1].size == size)
			continue; /* resource_bins_.count(allocation_size) != 0 */
		bin *b = &p->bins[p->nbins++];
		b->size = size;
		blist *legacy = list_for(b, p->c.ptds, STREAM_LEGACY, 0);
		if (b->size > UINT64_MAX / p->c.prealloc || chunk_new(p, b, legacy, STREAM_LEGACY)) {
			as_fail(err, AS_EXIT_USAGE, "rmm-binning: the bin of %" PRIu64 "-byte blocks cannot preallocate its %" PRIu64 " blocks (rmm::out_of_memory at construction)",
				size, p->c.prealloc);
			destroy_all(p);
			return -1;
		}
	}
	*out = &p->base;
	return 0;
}

static bin *bin_for(rmm_binning *p, uint64_t n)
{
	for (size_t i = 0; i < p->nbins; i++) /* the bins are in increasing size */
		if (p->bins[i].size >= n)
			return &p->bins[i];
	return NULL;
}

/* stream_ordered_memory_resource::get_block with a fixed_size_free_list */
static bblk *bin_get(rmm_binning *p, bin *b, blist *own, uint64_t stream)
{
	bblk *x = own->head;
	if (!x)
		for (size_t i = 0; i < b->nlists && !x; i++) /* another stream's list (merge_first = false) */
			if (b->lists[i] != own)
				x = b->lists[i]->head;
	if (!x) { /* every list is empty: merging them changes nothing; expand_pool */
		if (chunk_new(p, b, own, stream))
			return NULL;
		x = own->head;
	}
	unlink_blk(x->list, x);
	return x;
}

static int rb_malloc(as_policy *pol, const as_request *rq, void **handle, uint64_t *bsize, uint64_t *addr)
{
	rmm_binning *p = (rmm_binning *)pol;
	if (rq->size == 0) {
		*handle = &p->zero;
		*bsize = 0;
		*addr = 0;
		return 0;
	}
	bin *b = bin_for(p, rq->size);
	if (!b) {
		bbig *g = xcalloc(1, sizeof(*g));
		if (as_dev_alloc(p->dev, rq->size, rq->stream, &g->addr)) {
			free(g);
			return 1;
		}
		g->big = 1;
		g->size = g->req = rq->size;
		g->stream = rq->stream;
		g->next = p->big;
		if (p->big)
			p->big->prev = g;
		p->big = g;
		p->held += g->size;
		p->used += g->size;
		if (p->held > p->peak_held)
			p->peak_held = p->held;
		*handle = g;
		*bsize = g->size;
		*addr = g->addr;
		return 0;
	}
	blist *own = list_for(b, p->c.ptds, rq->stream, rq->thread);
	bblk *x = bin_get(p, b, own, rq->stream);
	if (!x)
		return 1;
	x->req = rq->size;
	x->list = own;
	b->used += b->size;
	p->used += b->size;
	p->rounding += b->size - rq->size;
	*handle = x;
	*bsize = b->size;
	*addr = x->addr;
	return 0;
}

static void free_on(rmm_binning *p, void *h, blist *to)
{
	if (h == &p->zero)
		return;
	if (((bblk *)h)->big) {
		bbig *g = h;
		if (g->prev)
			g->prev->next = g->next;
		else
			p->big = g->next;
		if (g->next)
			g->next->prev = g->prev;
		as_dev_free(p->dev, g->addr, g->size, g->stream);
		p->held -= g->size;
		p->used -= g->size;
		free(g);
		return;
	}
	bblk *x = h;
	bin *b = x->chunk->bin;
	b->used -= b->size;
	p->used -= b->size;
	p->rounding -= b->size - x->req;
	x->req = 0;
	push_back(to ? to : x->list, x);
}

static void rb_free(as_policy *pol, void *h)
{
	free_on((rmm_binning *)pol, h, NULL);
}

/* deallocate(stream): a bin's block goes to the back of the list of the stream it is freed on */
static void rb_free_from(as_policy *pol, void *h, const as_request *rq)
{
	rmm_binning *p = (rmm_binning *)pol;
	bblk *x = h;
	free_on(p, h, x != &p->zero && !x->big ? list_for(x->chunk->bin, p->c.ptds, rq->stream, rq->thread) : NULL);
}

static void rb_empty_cache(as_policy *pol)
{
	rmm_binning *p = (rmm_binning *)pol;
	if (!p->c.empty_cache_releases)
		return;
	for (size_t i = 0; i < p->nbins; i++) {
		bin *b = &p->bins[i];
		for (bchunk **cp = &b->chunks; *cp;) {
			bchunk *c = *cp;
			if (c->nfree != p->c.prealloc) {
				cp = &c->next;
				continue;
			}
			for (uint64_t k = 0; k < p->c.prealloc; k++)
				unlink_blk(c->blocks[k].list, &c->blocks[k]);
			*cp = c->next;
			b->nchunks--;
			as_dev_free(p->dev, c->addr, b->size * p->c.prealloc, STREAM_LEGACY);
			p->held -= b->size * p->c.prealloc;
			free(c->blocks);
			free(c);
		}
	}
}

static int rb_check(as_policy *pol, as_err *err)
{
	rmm_binning *p = (rmm_binning *)pol;
	uint64_t held = 0, used = 0, rounding = 0;
	for (size_t i = 0; i < p->nbins; i++) {
		bin *b = &p->bins[i];
		size_t listed = 0, nfree = 0, chunks = 0;
		for (size_t k = 0; k < b->nlists; k++) {
			size_t n = 0;
			for (bblk *x = b->lists[k]->head; x; x = x->next, n++)
				if (!x->is_free || x->list != b->lists[k] || (x->next && x->next->prev != x))
					return as_fail(err, AS_EXIT_SOFTWARE, "rmm-binning: bin %" PRIu64 ": block 0x%" PRIx64 " is on a list it does not belong to", b->size, x->addr);
			if (n != b->lists[k]->n)
				return as_fail(err, AS_EXIT_SOFTWARE, "rmm-binning: bin %" PRIu64 ": a list holds %zu blocks, its count says %zu", b->size, n, b->lists[k]->n);
			listed += n;
		}
		for (bchunk *c = b->chunks; c; c = c->next, chunks++) {
			size_t f = 0;
			for (uint64_t k = 0; k < p->c.prealloc; k++) {
				bblk *x = &c->blocks[k];
				if (x->is_free)
					f++;
				else {
					used += b->size;
					rounding += b->size - x->req;
				}
			}
			if (f != c->nfree)
				return as_fail(err, AS_EXIT_SOFTWARE, "rmm-binning: bin %" PRIu64 ": chunk 0x%" PRIx64 " has %zu free blocks, its count says %zu", b->size, c->addr, f, c->nfree);
			nfree += f;
			held += b->size * p->c.prealloc;
		}
		if (nfree != listed || chunks != b->nchunks)
			return as_fail(err, AS_EXIT_SOFTWARE, "rmm-binning: bin %" PRIu64 ": %zu free blocks, %zu on the lists", b->size, nfree, listed);
	}
	for (bbig *g = p->big; g; g = g->next) {
		held += g->size;
		used += g->size;
	}
	if (held != p->held || used != p->used || rounding != p->rounding || held != p->dev->reserved)
		return as_fail(err, AS_EXIT_SOFTWARE, "rmm-binning: chunks and large blocks hold %" PRIu64 " bytes (counted %" PRIu64 ", device %" PRIu64 "), %" PRIu64 " used (counted %" PRIu64 ")",
			held, p->held, p->dev->reserved, used, p->used);
	return 0;
}

static void rb_stats(rmm_binning *p, as_stat_cb cb, void *ctx)
{
	uint64_t chunks = 0, nbig = 0;
	for (size_t i = 0; i < p->nbins; i++)
		chunks += p->bins[i].nchunks;
	for (bbig *g = p->big; g; g = g->next)
		nbig++;
	cb(ctx, "bins", (int64_t)p->nbins);
	cb(ctx, "chunks", (int64_t)chunks);
	cb(ctx, "held_bytes", (int64_t)p->held);
	cb(ctx, "peak_held_bytes", (int64_t)p->peak_held);
	cb(ctx, "used_bytes", (int64_t)p->used);
	cb(ctx, "upstream_blocks", (int64_t)nbig);
	for (size_t i = 0; i < p->nbins; i++) {
		char key[64];
		snprintf(key, sizeof key, "bin_%" PRIu64 "_used_bytes", p->bins[i].size);
		cb(ctx, key, (int64_t)p->bins[i].used);
	}
}

static int rb_query(as_policy *pol, int what, void *arg)
{
	rmm_binning *p = (rmm_binning *)pol;
	switch (what) {
	case AS_Q_STATS: {
		as_q_stats *q = arg;
		rb_stats(p, q->cb, q->ctx);
		return 0;
	}
	case AS_Q_WASTE: {
		as_waste *w = arg;
		memset(w, 0, sizeof(*w));
		w->rounding = p->rounding;
		w->free_cached = p->held - p->used;
		return 0;
	}
	default:
		return AS_Q_UNKNOWN;
	}
}

static void rb_destroy(as_policy *pol)
{
	destroy_all((rmm_binning *)pol);
}

const as_policy_ops as_policy_rmm_binning = {
	.name = "rmm-binning",
	.summary = "RMM 26.06's binning_memory_resource: fixed-size bins of 2^i bytes (128-block chunks per stream-ordered bin) over an upstream, larger requests to the upstream",
	.opts = rb_opts,
	.flags = AS_CAP_STATS | AS_CAP_WASTE | AS_CAP_NO_INFERRED_EMPTY | AS_CAP_FREE_AT_REQUEST,
	.create = rb_create,
	.malloc = rb_malloc,
	.free = rb_free,
	.free_from = rb_free_from,
	.empty_cache = rb_empty_cache,
	.check = rb_check,
	.query = rb_query,
	.destroy = rb_destroy,
};
