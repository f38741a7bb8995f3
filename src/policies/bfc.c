/*
 * bfc.c - the best-fit-with-coalescing allocator of TensorFlow and XLA/JAX
 * (xla/tsl/framework/bfc_allocator.cc; the version, the JAX configuration and the measured
 * fidelity are in doc/policies.md).
 *
 * Requests round up to 256 bytes (kMinAllocationSize). Free chunks sit in 21 bins (bin b holds
 * chunks of 256 << b bytes up to twice that, the last bin everything larger), each ordered by
 * (size, address); a request scans its bin and the larger ones and takes the first chunk that
 * fits: the smallest adequate chunk, lowest address first. A chunk is split when it is at least
 * twice the rounded request or the remainder would be at least the internal-fragmentation cap
 * (128 MiB, or fragmentation_fraction x the memory limit). Frees merge with free neighbours in
 * the same region. A miss extends the pool by a new region (Extend): with allow_growth the
 * region size starts at 2 MiB and doubles on every extension that did not already have to double
 * to fit the request; without it the first region is the whole memory limit. A device allocation
 * that fails is retried at 90% (kBackpedalFactor) down to the request. With garbage_collection, a
 * request that still fails releases every wholly free region and extends once more
 * (DeallocateFreeRegions). Regions from separate device allocations are never coalesced
 * (DeviceMemAllocator does not support it).
 *
 * Not modelled (PJRT never uses them on the default GPU allocator): spatial partitioning, the
 * timestamped chunks of a timing counter (safe_frontier), alignment above 256 bytes, and the
 * retry helper that waits up to 10 s for another thread to free memory.
 */
#include "policy.h"
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "util/tree.h"

#define MIN_ALLOC 256ULL      /* kMinAllocationSize */
#define NUM_BINS 21           /* kNumBins */
#define INITIAL_REGION (2ULL << 20)

typedef struct bfc_conf {
	uint64_t memory_limit;   /* 0: mem_fraction x the device's memory */
	double mem_fraction;
	double fragmentation_fraction;
	int allow_growth, garbage_collection, empty_cache_releases;
} bfc_conf;

struct bregion;
typedef struct bchunk {
	uint64_t ptr, size, requested;
	struct bchunk *prev, *next;  /* physical neighbours in the region */
	struct bregion *region;
	int in_use, bin;             /* bin: -1 when not in a bin */
	RB_ENTRY(bchunk) rb;
} bchunk;

typedef struct bregion {
	uint64_t ptr, size;
	uint64_t seq;                /* creation order */
	uint64_t rank;               /* order between regions in the bins (region_rank, chunk_cmp) */
	bchunk *first;
	struct bregion *next;        /* sorted by address */
} bregion;

/* Bins order chunks by size, then address (TF's ChunkComparator). Across regions allocsim orders by
 * the region's rank (region_rank), then the address within it: the order of the addresses the H200's
 * driver gave JAX's regions, and one that does not depend on where a real cudaMalloc put them, so that
 * --backend cuda decides as the simulation (tests/cuda.sh: resnet50's peak allocated bytes differed on
 * the H200 before). A lookup key has no region (rank 0) and sorts first. */
static int chunk_cmp(const bchunk *a, const bchunk *b)
{
	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	uint64_t sa = a->region ? a->region->rank : 0, sb = b->region ? b->region->rank : 0;
	if (sa != sb)
		return sa < sb ? -1 : 1;
	return a->ptr < b->ptr ? -1 : a->ptr > b->ptr;
}
RB_HEAD(bin_tree, bchunk);
RB_GENERATE_STATIC(bin_tree, bchunk, rb, chunk_cmp);

typedef struct bfc {
	as_policy base;
	bfc_conf c;
	as_device *dev;
	as_counters *ctr;
	struct bin_tree bins[NUM_BINS];
	bregion *regions;
	bchunk *spare;               /* recycled chunk records (BFC's unused_chunk_handle list) */
	uint64_t limit, curr_region, max_frag;
	/* AllocatorStats */
	uint64_t num_allocs, bytes_in_use, peak_bytes_in_use, largest_alloc_size, pool_bytes, peak_pool_bytes;
	uint64_t num_regions, regions_freed;
	uint64_t num_regions_made;       /* regions ever made (their seq) */
	as_waste w;   /* the waste of chunks in use, kept as chunks are taken and freed (a walk made each new peak O(chunks)) */
} bfc;

static bchunk zero_chunk; /* the handle of a 0-byte request: BFC allocates nothing */

static int parse_fraction(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	char *end;
	double v = strtod(val, &end);
	if (end == val || *end || !isfinite(v) || v < 0 || v > 1)
		return as_fail(err, AS_EXIT_USAGE, "%s: expected a fraction from 0 to 1, got '%s'", d->name, val);
	*(double *)((char *)conf + d->off) = v;
	return 0;
}

#define OFF(f) offsetof(bfc_conf, f)
static const as_optdesc bfc_opts[] = {
	{ "memory_limit", "size", "0", "the allocator's memory limit (bytes_limit); 0: mem_fraction x the device's memory", as_opt_parse_size, OFF(memory_limit) },
	{ "mem_fraction", "fraction", "0.75", "JAX's XLA_PYTHON_CLIENT_MEM_FRACTION: the limit as a fraction of the device's memory", parse_fraction, OFF(mem_fraction) },
	{ "allow_growth", "True|False", "True", "grow by regions of 2 MiB, doubling (JAX: XLA_PYTHON_CLIENT_PREALLOCATE=false); False: one region of the whole limit", as_opt_parse_bool, OFF(allow_growth) },
	{ "garbage_collection", "True|False", "False", "on a miss that cannot extend, release wholly free regions and extend again (TF_ENABLE_GPU_GARBAGE_COLLECTION)", as_opt_parse_bool, OFF(garbage_collection) },
	{ "fragmentation_fraction", "fraction", "0", "split a chunk when the remainder is at least this x the limit (0: 128 MiB)", parse_fraction, OFF(fragmentation_fraction) },
	{ "empty_cache_releases", "True|False", "False", "an empty_cache event releases every wholly free region (JAX has no such call, so by default it does nothing)", as_opt_parse_bool, OFF(empty_cache_releases) },
	{ NULL, NULL, NULL, NULL, NULL, 0 },
};

static uint64_t rounded_bytes(uint64_t n)
{
	return (n + MIN_ALLOC - 1) / MIN_ALLOC * MIN_ALLOC;
}

/* BinNumForSize: floor(log2(max(bytes, 256) >> 8)), at most the last bin. */
static int bin_for_size(uint64_t bytes)
{
	uint64_t v = (bytes > MIN_ALLOC ? bytes : MIN_ALLOC) >> 8;
	int b = 63 - __builtin_clzll(v);
	return b < NUM_BINS - 1 ? b : NUM_BINS - 1;
}

static bchunk *chunk_new(bfc *p)
{
	bchunk *c = p->spare;
	if (c)
		p->spare = c->next;
	else
		c = xmalloc(sizeof(*c));
	memset(c, 0, sizeof(*c));
	c->bin = -1;
	return c;
}

static void chunk_delete(bfc *p, bchunk *c)
{
	c->next = p->spare;
	p->spare = c;
}

static void insert_free(bfc *p, bchunk *c)
{
	c->bin = bin_for_size(c->size);
	RB_INSERT(bin_tree, &p->bins[c->bin], c);
}

static void remove_free(bfc *p, bchunk *c)
{
	RB_REMOVE(bin_tree, &p->bins[c->bin], c);
	c->bin = -1;
}

/* FindChunkPtr's search: the first chunk of at least `rounded` bytes in (size, address) order,
 * from the request's bin upwards. */
static bchunk *find_chunk(bfc *p, uint64_t rounded)
{
	bchunk key = { .size = rounded, .ptr = 0 };
	for (int b = bin_for_size(rounded); b < NUM_BINS; b++) {
		bchunk *c = RB_NFIND(bin_tree, &p->bins[b], &key);
		if (c)
			return c;
	}
	return NULL;
}

/* SplitChunk: c keeps its first n bytes; the rest becomes a free chunk after it. */
static void split_chunk(bfc *p, bchunk *c, uint64_t n)
{
	bchunk *r = chunk_new(p);
	r->ptr = c->ptr + n;
	r->size = c->size - n;
	r->region = c->region;
	r->prev = c;
	r->next = c->next;
	if (c->next)
		c->next->prev = r;
	c->next = r;
	c->size = n;
	insert_free(p, r);
}

/* Adds (sign 1) or removes (-1) an in-use chunk's share of the waste attribution. */
static void waste_account(bfc *p, const bchunk *c, int sign)
{
	uint64_t rb = rounded_bytes(c->requested), d = (uint64_t)sign;
	p->w.rounding += d * (rb - c->requested);
	if (c->size - rb >= p->max_frag)
		p->w.oversize += d * (c->size - rb);
	else
		p->w.unsplit += d * (c->size - rb);
}

static bchunk *take_chunk(bfc *p, bchunk *c, uint64_t rounded, uint64_t n)
{
	remove_free(p, c);
	/* ShouldSplitChunk */
	if (c->size >= rounded * 2 || (int64_t)c->size - (int64_t)rounded >= (int64_t)p->max_frag)
		split_chunk(p, c, rounded);
	c->in_use = 1;
	c->requested = n;
	waste_account(p, c, 1);
	p->num_allocs++;
	p->bytes_in_use += c->size;
	if (p->bytes_in_use > p->peak_bytes_in_use)
		p->peak_bytes_in_use = p->bytes_in_use;
	if (c->size > p->largest_alloc_size)
		p->largest_alloc_size = c->size;
	return c;
}

/* Where the driver put JAX's regions, as an order: on the H200 (jax 0.11.2, driver 580.159.04) the
 * first two cudaMallocs of the process landed high (near 0x7f..., the second below the first) and every
 * later one bottom-up from 0x302000000, each above the previous (every one of the 20 streams__s2/s3
 * runs of scripts/replay_jax.py --log, 2026-12-04). Ranks 1, 2, ... for the later regions in the order
 * made, then the second, then the first. Before, the first two ranked first: with their 16 MiB chunks
 * tying those of the later regions, -p bfc took the wrong one and parted from JAX on 8 of the 58 runs
 * of traces/jax-h200-freeat.csv (tests/freeat.sh). */
#define HIGH_REGIONS 2
static uint64_t region_rank(uint64_t seq)
{
	return seq >= HIGH_REGIONS ? seq - HIGH_REGIONS + 1 : ((uint64_t)1 << 62) - seq;
}

static void add_region(bfc *p, uint64_t ptr, uint64_t size)
{
	bregion *r = xcalloc(1, sizeof(*r)), **at = &p->regions;
	r->seq = p->num_regions_made++;
	r->rank = region_rank(r->seq);
	r->ptr = ptr;
	r->size = size;
	while (*at && (*at)->ptr < ptr)
		at = &(*at)->next;
	r->next = *at;
	*at = r;
	bchunk *c = chunk_new(p);
	c->ptr = ptr;
	c->size = size;
	c->region = r;
	r->first = c;
	insert_free(p, c);
	p->num_regions++;
}

/* Extend: a new region big enough for `rounded`, within the memory limit. */
static int extend(bfc *p, uint64_t rounded, uint64_t stream)
{
	uint64_t avail = p->pool_bytes < p->limit ? p->limit - p->pool_bytes : 0;
	avail = avail / MIN_ALLOC * MIN_ALLOC;
	if (rounded > avail)
		return 0;
	int increased = 0;
	while (rounded > p->curr_region) {
		p->curr_region *= 2;
		increased = 1;
	}
	uint64_t bytes = p->curr_region < avail ? p->curr_region : avail, addr;
	while (as_dev_alloc(p->dev, bytes, stream, &addr)) {
		/* kBackpedalFactor is a float: the product is computed in single precision */
		uint64_t back = rounded_bytes((uint64_t)((float)bytes * 0.9f));
		if (back >= bytes)
			back = bytes - MIN_ALLOC;
		bytes = back;
		if (bytes < rounded)
			return 0;
	}
	if (!increased)
		p->curr_region *= 2;
	p->pool_bytes += bytes;
	if (p->pool_bytes > p->peak_pool_bytes)
		p->peak_pool_bytes = p->pool_bytes;
	add_region(p, addr, bytes);
	return 1;
}

static int region_free(const bregion *r)
{
	return !r->first->in_use && !r->first->next;
}

/* DeallocateRegions over every wholly free region; returns the bytes released. */
static uint64_t release_free_regions(bfc *p)
{
	uint64_t released = 0;
	for (bregion **at = &p->regions; *at;) {
		bregion *r = *at;
		if (!region_free(r)) {
			at = &r->next;
			continue;
		}
		remove_free(p, r->first);
		chunk_delete(p, r->first);
		as_dev_free(p->dev, r->ptr, r->size, 0);
		p->pool_bytes -= r->size;
		released += r->size;
		p->regions_freed++;
		p->num_regions--;
		*at = r->next;
		free(r);
	}
	return released;
}

/* DeallocateFreeRegions: only with garbage_collection, and only if it can help. */
static int deallocate_free_regions(bfc *p, uint64_t rounded)
{
	if (!p->c.garbage_collection)
		return 0;
	uint64_t total = 0;
	for (bregion *r = p->regions; r; r = r->next)
		if (region_free(r))
			total += r->size;
	if (!total || rounded > p->limit - p->pool_bytes + total)
		return 0;
	release_free_regions(p);
	return 1;
}

static int bfc_malloc(as_policy *pol, const as_request *rq, void **h, uint64_t *bsize, uint64_t *addr)
{
	bfc *p = (bfc *)pol;
	uint64_t n = rq->size, stream = rq->stream;
	if (!n) { /* AllocateRaw returns nullptr; PJRT does not even ask */
		*h = &zero_chunk;
		*bsize = 0;
		*addr = 0;
		return 0;
	}
	uint64_t rounded = rounded_bytes(n);
	bchunk *c = find_chunk(p, rounded);
	if (!c && extend(p, rounded, stream))
		c = find_chunk(p, rounded);
	if (!c && deallocate_free_regions(p, rounded)) {
		p->ctr->alloc_retries++;
		if (extend(p, rounded, stream))
			c = find_chunk(p, rounded);
	}
	if (!c)
		return 1;
	take_chunk(p, c, rounded, n);
	*h = c;
	*bsize = c->size;
	*addr = c->ptr;
	return 0;
}

/* MergeChunks: b (free, after a) joins a. */
static void merge_into(bfc *p, bchunk *a, bchunk *b)
{
	a->size += b->size;
	a->next = b->next;
	if (b->next)
		b->next->prev = a;
	chunk_delete(p, b);
}

static void bfc_free(as_policy *pol, void *h)
{
	bfc *p = (bfc *)pol;
	bchunk *c = h;
	if (c == &zero_chunk)
		return;
	waste_account(p, c, -1);
	c->in_use = 0;
	c->requested = 0;
	p->bytes_in_use -= c->size;
	/* TryToCoalesce: the next chunk first, then the previous one */
	if (c->next && !c->next->in_use) {
		remove_free(p, c->next);
		merge_into(p, c, c->next);
	}
	if (c->prev && !c->prev->in_use) {
		bchunk *pr = c->prev;
		remove_free(p, pr);
		merge_into(p, pr, c);
		c = pr;
	}
	insert_free(p, c);
}

static void bfc_empty_cache(as_policy *pol)
{
	bfc *p = (bfc *)pol;
	if (p->c.empty_cache_releases)
		release_free_regions(p);
}

static uint64_t largest_free(bfc *p)
{
	for (int b = NUM_BINS - 1; b >= 0; b--) {
		bchunk *c = RB_MAX(bin_tree, &p->bins[b]);
		if (c)
			return c->size;
	}
	return 0;
}

static void bfc_stats(bfc *p, as_stat_cb cb, void *ctx)
{
	/* the keys of jax.Device.memory_stats() (AllocatorStats), then the model's own */
	cb(ctx, "num_allocs", (int64_t)p->num_allocs);
	cb(ctx, "bytes_in_use", (int64_t)p->bytes_in_use);
	cb(ctx, "peak_bytes_in_use", (int64_t)p->peak_bytes_in_use);
	cb(ctx, "largest_alloc_size", (int64_t)p->largest_alloc_size);
	cb(ctx, "bytes_limit", (int64_t)p->limit);
	cb(ctx, "largest_free_block_bytes", (int64_t)largest_free(p));
	cb(ctx, "pool_bytes", (int64_t)p->pool_bytes);
	cb(ctx, "peak_pool_bytes", (int64_t)p->peak_pool_bytes);
	cb(ctx, "regions", (int64_t)p->num_regions);
	cb(ctx, "regions_freed", (int64_t)p->regions_freed);
	cb(ctx, "curr_region_allocation_bytes", (int64_t)p->curr_region);
}

static void bfc_segments(bfc *p, as_seg_cb cb, void *ctx)
{
	as_segbuf sb = { 0 };
	for (bregion *r = p->regions; r; r = r->next) {
		for (bchunk *c = r->first; c; c = c->next)
			as_segbuf_push(&sb, c->size, c->in_use);
		as_seg_view v = { .addr = r->ptr, .size = r->size };
		as_segbuf_emit(&sb, &v, cb, ctx);
	}
	as_segbuf_free(&sb);
}

/* The waste by walking every chunk: what --check compares the running sums with. */
static void bfc_waste_walk(bfc *p, as_waste *w)
{
	memset(w, 0, sizeof(*w));
	for (bregion *r = p->regions; r; r = r->next)
		for (bchunk *c = r->first; c; c = c->next) {
			if (!c->in_use) {
				w->free_cached += c->size;
				continue;
			}
			uint64_t rb = rounded_bytes(c->requested);
			w->rounding += rb - c->requested;
			if (c->size - rb >= p->max_frag)
				w->oversize += c->size - rb;
			else
				w->unsplit += c->size - rb;
		}
}

static void bfc_waste(bfc *p, as_waste *w)
{
	*w = p->w;
	w->free_cached = p->pool_bytes - p->bytes_in_use;
}

static int bfc_query(as_policy *pol, int what, void *arg)
{
	bfc *p = (bfc *)pol;
	switch (what) {
	case AS_Q_STATS:
		bfc_stats(p, ((as_q_stats *)arg)->cb, ((as_q_stats *)arg)->ctx);
		return 0;
	case AS_Q_SEGMENTS:
		bfc_segments(p, ((as_q_segments *)arg)->cb, ((as_q_segments *)arg)->ctx);
		return 0;
	case AS_Q_FREE_STATS:
		((as_q_free_stats *)arg)->largest = largest_free(p);
		((as_q_free_stats *)arg)->total = p->pool_bytes - p->bytes_in_use;
		return 0;
	case AS_Q_WASTE:
		bfc_waste(p, arg);
		return 0;
	case AS_Q_ROUND: {
		as_q_round *q = arg;
		q->size = q->size ? rounded_bytes(q->size) : 0;
		q->granule = MIN_ALLOC;
		return 0;
	}
	default:
		return AS_Q_UNKNOWN;
	}
}

static int bfc_check(as_policy *pol, as_err *err)
{
	bfc *p = (bfc *)pol;
	uint64_t pool = 0, in_use = 0;
	size_t nfree = 0, nbinned = 0;
	for (bregion *r = p->regions; r; r = r->next) {
		if (r->next && r->ptr + r->size > r->next->ptr)
			return as_fail(err, AS_EXIT_SOFTWARE, "bfc: regions at 0x%" PRIx64 " overlap", r->ptr);
		uint64_t at = r->ptr;
		for (bchunk *c = r->first; c; c = c->next) {
			if (c->ptr != at || c->region != r || (c->next && c->next->prev != c) || !c->size || c->size % MIN_ALLOC)
				return as_fail(err, AS_EXIT_SOFTWARE, "bfc: chunk at 0x%" PRIx64 " breaks its region's chain", c->ptr);
			if (c->in_use) {
				in_use += c->size;
				if (c->bin != -1)
					return as_fail(err, AS_EXIT_SOFTWARE, "bfc: chunk 0x%" PRIx64 " is in use and in a bin", c->ptr);
			} else {
				nfree++;
				if (c->next && !c->next->in_use)
					return as_fail(err, AS_EXIT_SOFTWARE, "bfc: free neighbours at 0x%" PRIx64 " are not merged", c->ptr);
				if (c->bin != bin_for_size(c->size) || RB_FIND(bin_tree, &p->bins[c->bin], c) != c)
					return as_fail(err, AS_EXIT_SOFTWARE, "bfc: free chunk 0x%" PRIx64 " is not in its bin", c->ptr);
			}
			at += c->size;
		}
		if (at != r->ptr + r->size)
			return as_fail(err, AS_EXIT_SOFTWARE, "bfc: the chunks of region 0x%" PRIx64 " do not cover it", r->ptr);
		pool += r->size;
	}
	for (int b = 0; b < NUM_BINS; b++) {
		bchunk *c;
		RB_FOREACH(c, bin_tree, &p->bins[b])
			nbinned++;
	}
	if (nbinned != nfree)
		return as_fail(err, AS_EXIT_SOFTWARE, "bfc: %zu chunks in bins, %zu free", nbinned, nfree);
	if (in_use != p->bytes_in_use || pool != p->pool_bytes || pool != p->dev->reserved || pool > p->limit)
		return as_fail(err, AS_EXIT_SOFTWARE, "bfc: in use %" PRIu64 " (counted %" PRIu64 "), pool %" PRIu64
			" (counted %" PRIu64 ", device %" PRIu64 ", limit %" PRIu64 ")", in_use, p->bytes_in_use, pool,
			p->pool_bytes, p->dev->reserved, p->limit);
	as_waste walk, run;
	bfc_waste_walk(p, &walk);
	bfc_waste(p, &run);
#define X(n, d) \
	if (walk.n != run.n) \
		return as_fail(err, AS_EXIT_SOFTWARE, "bfc: waste " #n " is %" PRIu64 " by the chunks, %" PRIu64 " by the running sums", walk.n, run.n);
	AS_WASTE_CATEGORIES(X)
#undef X
	return 0;
}

static int bfc_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	extern const as_policy_ops as_policy_bfc;
	bfc *p = xcalloc(1, sizeof(*p));
	if (as_conf_defaults(bfc_opts, &p->c, err) || as_conf_parse(config, bfc_opts, &p->c, err)) {
		free(p);
		return -1;
	}
	p->base.ops = &as_policy_bfc;
	p->dev = dev;
	p->ctr = ctr;
	/* the driver placed JAX's regions bottom-up; ties between equal chunks follow addresses */
	as_dev_placement(dev, ADDR_ASCENDING);
	for (int b = 0; b < NUM_BINS; b++)
		RB_INIT(&p->bins[b]);
	/* CreateBFCAllocator: total_memory * memory_fraction, converted to size_t */
	p->limit = p->c.memory_limit ? p->c.memory_limit : (uint64_t)((double)dev->total_memory * p->c.mem_fraction);
	if (p->limit < MIN_ALLOC) {
		uint64_t limit = p->limit;
		free(p);
		return as_fail(err, AS_EXIT_USAGE, "bfc: a memory limit of %" PRIu64 " bytes holds no allocation", limit);
	}
	p->curr_region = rounded_bytes(p->c.allow_growth ? (p->limit < INITIAL_REGION ? p->limit : INITIAL_REGION) : p->limit);
	p->max_frag = p->c.fragmentation_fraction > 0 ? (uint64_t)(p->c.fragmentation_fraction * (double)p->limit) : 128ULL << 20;
	*out = &p->base;
	return 0;
}

static void bfc_destroy(as_policy *pol)
{
	bfc *p = (bfc *)pol;
	for (bregion *r = p->regions, *rn; r; r = rn) {
		rn = r->next;
		for (bchunk *c = r->first, *cn; c; c = cn) {
			cn = c->next;
			free(c);
		}
		free(r);
	}
	for (bchunk *c = p->spare, *cn; c; c = cn) {
		cn = c->next;
		free(c);
	}
	free(p);
}

const as_policy_ops as_policy_bfc = {
	.name = "bfc",
	.summary = "TensorFlow/XLA best-fit with coalescing (JAX's GPU allocator): 256-byte rounding, 21 bins, regions doubling from 2 MiB",
	.opts = bfc_opts,
	.flags = AS_CAP_STATS | AS_CAP_SEGMENTS | AS_CAP_FREE_STATS | AS_CAP_WASTE | AS_CAP_ROUND,
	.create = bfc_create,
	.malloc = bfc_malloc,
	.free = bfc_free,
	.empty_cache = bfc_empty_cache,
	.check = bfc_check,
	.query = bfc_query,
	.destroy = bfc_destroy,
};
