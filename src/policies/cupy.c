/*
 * cupy.c - CuPy 14.2's device memory pool (cupy.cuda.MemoryPool / SingleDeviceMemoryPool,
 * cupy/cuda/memory.pyx at tag v14.2.0, commit dc1552a32f5489bdf6a5a721dfd952a92d47d934).
 *
 * - Requests round up to 512 bytes (_round_size, ALLOCATION_UNIT_SIZE).
 * - One arena per stream (_Arena, keyed by the stream). An arena's free chunks are one ordered set
 *   of (size, chunk) pairs (std::set<pair<size_t, uintptr_t>>); a request takes the first pair not
 *   below (size, 0): the smallest free chunk that fits, ties going to the lowest key. CuPy's key is
 *   the address of the Python _Chunk object, which the simulation cannot know; option `tie` says
 *   what stands in for it (doc/policies.md).
 * - The chunk is split at the rounded size; the remainder is a new chunk inserted without merging.
 * - A miss allocates exactly the rounded size from the device (cudaMalloc through the pool's
 *   allocator): no minimum and no larger segment.
 * - A free returns the chunk to the arena of the stream it was allocated on, at once: CuPy does no
 *   cross-stream event tracking (no record_stream); reuse is ordered on the allocation's stream, so a
 *   program makes that stream wait for the others and drops the memory when it lets go of it. The
 *   free therefore happens at the trace's free request (the property free_at_request; --free-at
 *   completed holds the chunk until the completion instead, as a program that synchronises first
 *   would). The freed chunk merges with its free next neighbours, then with its free previous ones
 *   (the previous chunk survives).
 * - free_all_blocks (empty_cache) releases every free chunk that was never split (no prev, no
 *   next), in every arena.
 * - Limit (set_limit, option `limit`): a miss that would take the pool's total above the limit
 *   runs free_all_blocks and checks again, twice (the second time after gc.collect()), then fails;
 *   a request above the limit fails at once. A device out-of-memory (--capacity) runs
 *   free_all_blocks and retries the device allocation, twice, then fails.
 */
#include "policy.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "util/tree.h"

#define CUPY_UNIT 512ULL /* ALLOCATION_UNIT_SIZE */

enum { TIE_OLDEST, TIE_NEWEST, TIE_ADDRESS };

typedef struct cp_conf {
	uint64_t limit;        /* bytes; 0 = none */
	double limit_fraction; /* > 0: limit = fraction x the device's total memory */
	int tie;
} cp_conf;

struct carena;

typedef struct cchunk {
	uint64_t ptr, size;         /* ptr = the Memory's address + offset */
	uint64_t req;               /* requested bytes while allocated (waste attribution) */
	uint64_t key;               /* tie-break key: stands in for the _Chunk object's address */
	struct carena *arena;
	struct cchunk *prev, *next; /* neighbours within one device allocation */
	int in_index;               /* free: in the arena's set */
	RB_ENTRY(cchunk) rb;
	struct cchunk *all_prev, *all_next;
} cchunk;

static int chunk_cmp(const cchunk *a, const cchunk *b)
{
	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	return a->key < b->key ? -1 : a->key > b->key;
}
RB_HEAD(cindex, cchunk);
RB_GENERATE_STATIC(cindex, cchunk, rb, chunk_cmp);

typedef struct carena {
	uint64_t stream;
	struct cindex index;
	size_t nfree;
	struct carena *next_created; /* creation order: free_all_blocks walks arenas in it */
	RB_ENTRY(carena) rb;
} carena;

static int arena_cmp(const carena *a, const carena *b)
{
	return a->stream < b->stream ? -1 : a->stream > b->stream;
}
RB_HEAD(carenas, carena);
RB_GENERATE_STATIC(carenas, carena, rb, arena_cmp);

typedef struct cupy_pool {
	as_policy base;
	cp_conf c;
	as_device *dev;
	as_counters *ctr;
	uint64_t limit;             /* the effective limit, 0 = none */
	uint64_t total, used;       /* total_bytes(), used_bytes() */
	uint64_t rounding;          /* sum of size - req over chunks in use (the waste query, kept as it changes) */
	uint64_t peak_total, peak_used;
	uint64_t serial;            /* chunks created so far */
	struct carenas arenas;
	carena *first, *last;
	cchunk *all;
	cchunk zero;                /* what a request of 0 bytes gets (CuPy: Memory(0), no pool) */
} cupy_pool;

static int parse_limit(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	cp_conf *c = conf;
	size_t n = strlen(val);
	if (n && val[n - 1] == '%') {
		/* CUPY_GPU_MEMORY_LIMIT's form: a percentage of the device's memory */
		char *end;
		double pct = strtod(val, &end);
		if (end != val + n - 1 || end == val || !(pct >= 0 && pct <= 100))
			return as_fail(err, AS_EXIT_USAGE, "%s: '%s' is not a percentage from 0%% to 100%%", d->name, val);
		c->limit = 0;
		c->limit_fraction = pct / 100.0;
		return 0;
	}
	c->limit_fraction = 0;
	return as_opt_parse_size(conf, d, val, err);
}

static int parse_tie(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	static const char *const names[] = { "oldest", "newest", "address" };
	for (int i = 0; i < 3; i++)
		if (!strcmp(val, names[i])) {
			((cp_conf *)conf)->tie = i;
			return 0;
		}
	return as_fail(err, AS_EXIT_USAGE, "%s: expected oldest, newest or address, got '%s'", d->name, val);
}

static const as_optdesc cp_opts[] = {
	{ "limit", "size|N%", "0", "the pool's limit (set_limit; N% of the device's memory like CUPY_GPU_MEMORY_LIMIT); 0 = none", parse_limit, offsetof(cp_conf, limit) },
	{ "tie", "oldest|newest|address", "oldest", "among free chunks of one size, the one taken: created first, created last, or lowest address", parse_tie, offsetof(cp_conf, tie) },
	{ NULL, NULL, NULL, NULL, NULL, 0 },
};

static cchunk *chunk_new(cupy_pool *p, uint64_t ptr, uint64_t size, carena *a)
{
	cchunk *c = xcalloc(1, sizeof(*c));
	c->ptr = ptr;
	c->size = size;
	c->arena = a;
	p->serial++;
	switch (p->c.tie) {
	case TIE_OLDEST: c->key = p->serial; break;
	case TIE_NEWEST: c->key = UINT64_MAX - p->serial; break;
	default: c->key = ptr; break;
	}
	c->all_next = p->all;
	if (p->all)
		p->all->all_prev = c;
	p->all = c;
	return c;
}

static void chunk_del(cupy_pool *p, cchunk *c)
{
	if (c->all_prev)
		c->all_prev->all_next = c->all_next;
	else
		p->all = c->all_next;
	if (c->all_next)
		c->all_next->all_prev = c->all_prev;
	free(c);
}

static carena *arena_get(cupy_pool *p, uint64_t stream)
{
	carena key = { .stream = stream };
	carena *a = RB_FIND(carenas, &p->arenas, &key);
	if (a)
		return a;
	a = xcalloc(1, sizeof(*a));
	a->stream = stream;
	RB_INIT(&a->index);
	RB_INSERT(carenas, &p->arenas, a);
	if (p->last)
		p->last->next_created = a;
	else
		p->first = a;
	p->last = a;
	return a;
}

static void index_insert(carena *a, cchunk *c)
{
	RB_INSERT(cindex, &a->index, c);
	c->in_index = 1;
	a->nfree++;
}

static void index_remove(carena *a, cchunk *c)
{
	RB_REMOVE(cindex, &a->index, c);
	c->in_index = 0;
	a->nfree--;
}

/* _Chunk.merge_next: the next chunk's bytes join this one and the next chunk object goes. */
static void merge_next(cupy_pool *p, cchunk *c)
{
	cchunk *n = c->next;
	c->size += n->size;
	c->next = n->next;
	if (c->next)
		c->next->prev = c;
	chunk_del(p, n);
}

/* _Arena.insert_chunk(chunk, merge=True) through try_merge_chunk. */
static void insert_merged(cupy_pool *p, carena *a, cchunk *c)
{
	while (c->next && c->next->in_index) {
		index_remove(a, c->next);
		merge_next(p, c);
	}
	while (c->prev && c->prev->in_index) {
		index_remove(a, c->prev);
		c = c->prev;
		merge_next(p, c);
	}
	index_insert(a, c);
}

/* _Arena.free_all: every free chunk that was never split goes back to the device. */
static uint64_t arena_free_all(cupy_pool *p, carena *a)
{
	uint64_t freed = 0;
	cchunk *c, *n;
	RB_FOREACH_SAFE(c, cindex, &a->index, n) {
		if (c->prev || c->next)
			continue;
		index_remove(a, c);
		as_dev_free(p->dev, c->ptr, c->size, a->stream);
		freed += c->size;
		chunk_del(p, c);
	}
	return freed;
}

/* SingleDeviceMemoryPool.free_all_blocks(None): every arena, in the order they were created. */
static void free_all_blocks(cupy_pool *p)
{
	for (carena *a = p->first; a; a = a->next_created)
		p->total -= arena_free_all(p, a);
}

/* _try_block_total_bytes: may the pool grow by size under its limit? (-1: never) */
static int limit_ok(const cupy_pool *p, uint64_t size)
{
	uint64_t lim = p->limit ? p->limit : UINT64_MAX;
	if (size > lim)
		return -1;
	return p->total <= lim - size;
}

/* _try_malloc: the limit check, then the device allocation, each retried after free_all_blocks
 * twice (CuPy calls gc.collect() before the second; the simulation has no garbage to collect). */
static int try_malloc(cupy_pool *p, uint64_t size, uint64_t stream, uint64_t *addr)
{
	int retried = 0;
	int ok = limit_ok(p, size);
	if (ok < 0)
		return 1;
	for (int i = 0; i < 2 && !ok; i++) {
		free_all_blocks(p);
		retried = 1;
		ok = limit_ok(p, size);
	}
	if (!ok) {
		p->ctr->alloc_retries += retried;
		return 1;
	}
	int failed = as_dev_alloc(p->dev, size, stream, addr);
	for (int i = 0; i < 2 && failed; i++) {
		free_all_blocks(p);
		retried = 1;
		failed = as_dev_alloc(p->dev, size, stream, addr);
	}
	p->ctr->alloc_retries += retried;
	if (failed)
		return 1;
	p->total += size;
	return 0;
}

static int cp_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	extern const as_policy_ops as_policy_cupy;
	cupy_pool *p = xcalloc(1, sizeof(*p));
	if (as_conf_defaults(cp_opts, &p->c, err) || as_conf_parse(config, cp_opts, &p->c, err)) {
		free(p);
		return -1;
	}
	p->base.ops = &as_policy_cupy;
	p->dev = dev;
	p->ctr = ctr;
	/* set_limit(fraction=f): f x memGetInfo()'s total, truncated to an integer */
	p->limit = p->c.limit_fraction > 0 ? (uint64_t)(p->c.limit_fraction * (double)dev->total_memory) : p->c.limit;
	RB_INIT(&p->arenas);
	*out = &p->base;
	return 0;
}

static int cp_malloc(as_policy *pol, const as_request *rq, void **handle, uint64_t *bsize, uint64_t *addr)
{
	cupy_pool *p = (cupy_pool *)pol;
	uint64_t n = rq->size, stream = rq->stream;
	if (n == 0) {
		*handle = &p->zero;
		*bsize = 0;
		*addr = 0;
		return 0;
	}
	if (n > UINT64_MAX - (CUPY_UNIT - 1))
		return 1; /* no size_t holds it rounded: no device could either */
	uint64_t size = (n + CUPY_UNIT - 1) / CUPY_UNIT * CUPY_UNIT;
	carena *a = arena_get(p, stream);
	cchunk key = { .size = size, .key = 0 };
	cchunk *c = RB_NFIND(cindex, &a->index, &key);
	if (c) {
		index_remove(a, c);
		if (c->size > size) {
			/* _Chunk.split: the remainder is a new chunk, inserted without merging */
			cchunk *rem = chunk_new(p, c->ptr + size, c->size - size, a);
			c->size = size;
			rem->next = c->next;
			if (rem->next)
				rem->next->prev = rem;
			c->next = rem;
			rem->prev = c;
			index_insert(a, rem);
		}
	} else {
		uint64_t ptr;
		if (try_malloc(p, size, stream, &ptr))
			return 1;
		c = chunk_new(p, ptr, size, a);
	}
	c->req = n;
	p->used += c->size;
	p->rounding += c->size - c->req;
	if (p->used > p->peak_used)
		p->peak_used = p->used;
	if (p->total > p->peak_total)
		p->peak_total = p->total;
	*handle = c;
	*bsize = c->size;
	*addr = c->ptr;
	return 0;
}

static void cp_free(as_policy *pol, void *h)
{
	cupy_pool *p = (cupy_pool *)pol;
	cchunk *c = h;
	if (c == &p->zero)
		return;
	p->used -= c->size;
	p->rounding -= c->size - c->req;
	insert_merged(p, c->arena, c);
}

static void cp_empty_cache(as_policy *pol)
{
	free_all_blocks((cupy_pool *)pol);
}

static int cp_check(as_policy *pol, as_err *err)
{
	cupy_pool *p = (cupy_pool *)pol;
	uint64_t total = 0, used = 0, rounding = 0;
	size_t nfree = 0, indexed = 0;
	for (cchunk *c = p->all; c; c = c->all_next) {
		if (c->size == 0 || c->size % CUPY_UNIT)
			return as_fail(err, AS_EXIT_SOFTWARE, "cupy: chunk at 0x%" PRIx64 " has size %" PRIu64, c->ptr, c->size);
		if (c->next && (c->next->prev != c || c->ptr + c->size != c->next->ptr || c->next->arena != c->arena))
			return as_fail(err, AS_EXIT_SOFTWARE, "cupy: chunk at 0x%" PRIx64 " and its next are not contiguous neighbours", c->ptr);
		if (c->in_index && c->next && c->next->in_index)
			return as_fail(err, AS_EXIT_SOFTWARE, "cupy: free neighbours at 0x%" PRIx64 " are not merged", c->ptr);
		if (c->in_index != (RB_FIND(cindex, &c->arena->index, c) == c))
			return as_fail(err, AS_EXIT_SOFTWARE, "cupy: the free set disagrees with chunk 0x%" PRIx64, c->ptr);
		total += c->size;
		if (c->in_index)
			nfree++;
		else {
			used += c->size;
			rounding += c->size - c->req;
		}
	}
	if (rounding != p->rounding)
		return as_fail(err, AS_EXIT_SOFTWARE, "cupy: chunks in use hold %" PRIu64 " rounding bytes, the running sum says %" PRIu64,
			rounding, p->rounding);
	for (carena *a = p->first; a; a = a->next_created)
		indexed += a->nfree;
	if (total != p->total || total != p->dev->reserved || used != p->used || nfree != indexed)
		return as_fail(err, AS_EXIT_SOFTWARE, "cupy: chunks hold %" PRIu64 " bytes (%" PRIu64 " used), the pool counts %" PRIu64
			" (%" PRIu64 " used), the device %" PRIu64, total, used, p->total, p->used, p->dev->reserved);
	if (p->limit && p->total > p->limit)
		return as_fail(err, AS_EXIT_SOFTWARE, "cupy: total %" PRIu64 " bytes above the limit %" PRIu64, p->total, p->limit);
	return 0;
}

static void cp_stats(as_policy *pol, as_stat_cb cb, void *ctx)
{
	cupy_pool *p = (cupy_pool *)pol;
	size_t narenas = 0, nfree = 0;
	for (carena *a = p->first; a; a = a->next_created) {
		narenas++;
		nfree += a->nfree;
	}
	cb(ctx, "used_bytes", (int64_t)p->used);
	cb(ctx, "free_bytes", (int64_t)(p->total - p->used));
	cb(ctx, "total_bytes", (int64_t)p->total);
	cb(ctx, "peak_used_bytes", (int64_t)p->peak_used);
	cb(ctx, "peak_total_bytes", (int64_t)p->peak_total);
	cb(ctx, "limit", (int64_t)p->limit);
	cb(ctx, "n_free_blocks", (int64_t)nfree);
	cb(ctx, "arenas", (int64_t)narenas);
}

static void cp_free_stats(as_policy *pol, uint64_t *largest, uint64_t *total)
{
	cupy_pool *p = (cupy_pool *)pol;
	*largest = *total = 0;
	for (carena *a = p->first; a; a = a->next_created) {
		cchunk *c = RB_MAX(cindex, &a->index);
		if (c && c->size > *largest)
			*largest = c->size;
	}
	*total = p->total - p->used;
}

static void cp_waste(as_policy *pol, as_waste *w)
{
	cupy_pool *p = (cupy_pool *)pol;
	memset(w, 0, sizeof(*w));
	w->rounding = p->rounding; /* a running sum: a walk here made every new reserved peak O(chunks) */
	w->free_cached = p->total - p->used;
}

/* One view per device allocation (a chunk with no prev heads one), blocks in address order. */
static void cp_segments(as_policy *pol, as_seg_cb cb, void *ctx)
{
	cupy_pool *p = (cupy_pool *)pol;
	as_segbuf sb = { 0 };
	for (cchunk *h = p->all; h; h = h->all_next) {
		if (h->prev)
			continue;
		for (cchunk *c = h; c; c = c->next)
			as_segbuf_push(&sb, c->size, !c->in_index);
		as_seg_view v = { .addr = h->ptr, .stream = h->arena->stream };
		as_segbuf_emit(&sb, &v, cb, ctx);
	}
	as_segbuf_free(&sb);
}

static int cp_query(as_policy *pol, int what, void *arg)
{
	switch (what) {
	case AS_Q_STATS: {
		as_q_stats *q = arg;
		cp_stats(pol, q->cb, q->ctx);
		return 0;
	}
	case AS_Q_SEGMENTS: {
		as_q_segments *q = arg;
		cp_segments(pol, q->cb, q->ctx);
		return 0;
	}
	case AS_Q_FREE_STATS: {
		as_q_free_stats *q = arg;
		cp_free_stats(pol, &q->largest, &q->total);
		return 0;
	}
	case AS_Q_WASTE:
		cp_waste(pol, arg);
		return 0;
	case AS_Q_ROUND: { /* _round_size; a 0-byte request gets no chunk */
		uint64_t *n = &((as_q_round *)arg)->size;
		*n = *n > UINT64_MAX - (CUPY_UNIT - 1) ? *n : (*n + CUPY_UNIT - 1) / CUPY_UNIT * CUPY_UNIT;
		((as_q_round *)arg)->granule = CUPY_UNIT;
		return 0;
	}
	default:
		return AS_Q_UNKNOWN;
	}
}

static void cp_destroy(as_policy *pol)
{
	cupy_pool *p = (cupy_pool *)pol;
	for (cchunk *c = p->all, *n; c; c = n) {
		n = c->all_next;
		free(c);
	}
	for (carena *a = p->first, *n; a; a = n) {
		n = a->next_created;
		free(a);
	}
	free(p);
}

const as_policy_ops as_policy_cupy = {
	.name = "cupy",
	.summary = "CuPy 14.2's MemoryPool: 512-byte rounding, best fit per stream arena, split and merge, exact-size cudaMalloc, set_limit",
	.opts = cp_opts,
	/* A snapshot's inferred release runs (empty_cache `maybe`, doc/trace-format.md) are the recording
	 * PyTorch allocator's own doing, not calls of the program: CuPy's pool takes none of them for
	 * free_all_blocks (scripts/replay_cupy.py ignores them too). */
	.flags = AS_CAP_STATS | AS_CAP_SEGMENTS | AS_CAP_FREE_STATS | AS_CAP_WASTE | AS_CAP_ROUND | AS_CAP_NO_INFERRED_EMPTY | AS_CAP_FREE_AT_REQUEST,
	.create = cp_create,
	.malloc = cp_malloc,
	.free = cp_free,
	.empty_cache = cp_empty_cache,
	.check = cp_check,
	.query = cp_query,
	.destroy = cp_destroy,
};
