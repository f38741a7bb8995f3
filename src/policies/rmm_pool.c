/*
 * rmm_pool.c - RMM's pool_memory_resource (rapidsai/rmm v26.06.00, commit
 * 871841839b94c67a61c8ed0d31feecfd92a07156): a coalescing best-fit suballocator over stream-ordered
 * free lists (cpp/src/mr/detail/pool_memory_resource_impl.cpp,
 * cpp/include/rmm/mr/detail/stream_ordered_memory_resource.hpp, detail/coalescing_free_list.hpp).
 *
 * - A request of n bytes becomes align_up(n, 256) (CUDA_ALLOCATION_ALIGNMENT); 0 bytes get a null
 *   pointer and touch nothing.
 * - Free blocks are kept per stream: one address-ordered coalescing free list per stream's event
 *   (stream_free_blocks_). Stream 0 and the legacy stream 0x1 share one list (get_event stores the
 *   default stream as cudaStreamLegacy); the per-thread default stream 0x2 has one list per thread
 *   (its event is thread_local), and so does stream 0 with `ptds` (CUDA_API_PER_THREAD_DEFAULT_STREAM).
 * - get_block: best fit in the request's own list (the smallest block that fits, the lowest address
 *   among equals: std::min_element over the address-ordered list with is_better_fit); else, list by
 *   list in the order of the other streams' events, a best fit in that list, the remainder staying
 *   there (cudaStreamWaitEvent); else, again in that order, each other list is merged into the own
 *   one (coalescing, the other list erased) and a best fit tried after each merge; else the pool
 *   grows. The order of the events is std::map's order of cudaEvent_t handles; the model takes the
 *   order in which streams were first seen (the initial pool's legacy stream first), see
 *   doc/policies.md.
 * - A block is split at the aligned size; the remainder (not a head) goes back into the list the
 *   block came from, or the own list after a growth.
 * - Growth (expand_pool -> try_to_expand(size_to_grow(size), size)): without a maximum pool size
 *   the pool asks the upstream for max(size, pool_size()); with one, for max(size, remaining / 2)
 *   where remaining = align_up(maximum - pool_size(), 256), or fails when size > remaining. A
 *   refused upstream allocation is retried at max(size, try / 2) until the size itself fails
 *   (rmm::out_of_memory). A new upstream block is a "head": a block never coalesces with the block
 *   before it when it is a head, so separate upstream allocations never merge.
 * - Initial pool (initialize_pool): initial_pool_size bytes from the upstream at construction, on
 *   the legacy stream's list; the default is Python's PoolMemoryResource default,
 *   percent_of_free_device_memory(50) (align_down(free x 0.5, 256)).
 * - A free inserts the block into the free list of the stream it is made on (free_from: RMM logs'
 *   free lines name it; otherwise the allocation's stream) with coalescing (prev and next, unless
 *   the later one is a head).
 * - RMM never returns pool memory before the pool is destroyed: release() is protected, called only
 *   by ~pool_memory_resource (pool_memory_resource.hpp), so an RMM program has no call to make
 *   where a PyTorch one calls empty_cache(), and an empty_cache event does nothing by default;
 *   empty_cache_releases:True (allocsim's what-if) releases every upstream block that is wholly free.
 */
#include "policy.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "util/tree.h"

#define RMM_ALIGN 256ULL                 /* rmm::CUDA_ALLOCATION_ALIGNMENT */
#define STREAM_LEGACY 1ULL               /* cudaStreamLegacy */
#define STREAM_PER_THREAD 2ULL           /* cudaStreamPerThread */

typedef struct rp_conf {
	uint64_t initial, maximum;           /* bytes; maximum 0 = none */
	double initial_pct, maximum_pct;     /* > 0: percent of the free device memory */
	int ptds, empty_cache_releases;
} rp_conf;

struct rplist;

/* A block: free (in a list's two trees) or allocated (the handle). */
typedef struct rpblk {
	uint64_t addr, size, req;
	int head, is_free;
	struct rplist *list;                 /* free: the list it is in; allocated: its stream's list */
	RB_ENTRY(rpblk) by_addr, by_size;
	struct rpblk *lprev, *lnext;         /* allocated: the live list (segments query, destroy) */
} rpblk;

static int addr_cmp(const rpblk *a, const rpblk *b)
{
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}
static int size_cmp(const rpblk *a, const rpblk *b)
{
	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	return addr_cmp(a, b);
}
RB_HEAD(rp_addr, rpblk);
RB_GENERATE_STATIC(rp_addr, rpblk, by_addr, addr_cmp);
RB_HEAD(rp_size, rpblk);
RB_GENERATE_STATIC(rp_size, rpblk, by_size, size_cmp);

/* One stream's free list (stream_free_blocks_[event]); an empty list stands for an erased entry. */
typedef struct rplist {
	int per_thread;
	uint64_t key;                        /* the stream, or the thread for a per-thread default stream */
	struct rp_addr addr;
	struct rp_size size;
	uint64_t bytes;
	size_t n;
} rplist;

/* An upstream allocation (upstream_blocks_). */
typedef struct rpup {
	uint64_t addr, size;
	int busy;                            /* empty_cache: something is allocated in it */
	RB_ENTRY(rpup) rb;
} rpup;
static int up_cmp(const rpup *a, const rpup *b)
{
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}
RB_HEAD(rp_ups, rpup);
RB_GENERATE_STATIC(rp_ups, rpup, rb, up_cmp);

typedef struct rmm_pool {
	as_policy base;
	rp_conf c;
	as_device *dev;
	as_counters *ctr;
	uint64_t maximum;                    /* 0 = none */
	uint64_t pool_size;                  /* current_pool_size_ */
	uint64_t used, rounding, peak_used, peak_pool;
	rplist **lists;                      /* in the order of their events' creation */
	size_t nlists, caplists;
	struct rp_ups ups;
	size_t nups;
	rpblk *live;                         /* allocated blocks */
	rpblk *spare;                        /* recycled block records */
	rpblk zero;                          /* what a request of 0 bytes gets */
	uint64_t grows, merges, steals;
} rmm_pool;

/* "size" or "N%" (of the free device memory, percent_of_free_device_memory) */
static int parse_size_pct(const char *name, const char *val, uint64_t *bytes, double *pct, as_err *err)
{
	size_t n = strlen(val);
	if (n && val[n - 1] == '%') {
		char *end;
		double v = strtod(val, &end);
		if (end != val + n - 1 || end == val || !(v > 0 && v <= 100))
			return as_fail(err, AS_EXIT_USAGE, "option %s: '%s' is not a percentage above 0%% and at most 100%%", name, val);
		*pct = v;
		*bytes = 0;
		return 0;
	}
	char m[256];
	if (as_parse_size(val, bytes, m, sizeof m))
		return as_fail(err, AS_EXIT_USAGE, "option %s: %s", name, m);
	*pct = 0;
	return 0;
}

static int parse_initial(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	rp_conf *c = conf;
	return parse_size_pct(d->name, val, &c->initial, &c->initial_pct, err);
}

static int parse_maximum(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	rp_conf *c = conf;
	return parse_size_pct(d->name, val, &c->maximum, &c->maximum_pct, err);
}

#define OFF(f) offsetof(rp_conf, f)
static const as_optdesc rp_opts[] = {
	{ "initial_pool_size", "size|N%", "50%", "the pool allocated at construction: bytes (a multiple of 256), or N% of the free device memory (Python's default: 50%)", parse_initial, OFF(initial) },
	{ "maximum_pool_size", "size|N%", "0", "the most the pool may hold (a multiple of 256, or N% of the free memory); 0 = no maximum", parse_maximum, OFF(maximum) },
	{ "ptds", "True|False", "False", "built with CUDA_API_PER_THREAD_DEFAULT_STREAM: stream 0 is each thread's own default stream", as_opt_parse_bool, OFF(ptds) },
	{ "empty_cache_releases", "True|False", "False", "an empty_cache event releases every wholly free upstream block (RMM has no such call, so by default it does nothing)", as_opt_parse_bool, OFF(empty_cache_releases) },
	{ NULL, NULL, NULL, NULL, NULL, 0 },
};

static uint64_t align_up(uint64_t v)
{
	return (v + RMM_ALIGN - 1) / RMM_ALIGN * RMM_ALIGN;
}

/* rmm::percent_of_free_device_memory */
static uint64_t pct_of_free(const as_device *d, double pct)
{
	return (uint64_t)((double)as_dev_mem_free(d) * (pct / 100.0)) / RMM_ALIGN * RMM_ALIGN;
}

static rpblk *blk_new(rmm_pool *p)
{
	rpblk *b = p->spare;
	if (b)
		p->spare = b->lnext;
	else
		b = xmalloc(sizeof(*b));
	memset(b, 0, sizeof(*b));
	return b;
}

static void blk_del(rmm_pool *p, rpblk *b)
{
	b->lnext = p->spare;
	p->spare = b;
}

/* get_event: the list of a request's stream (created, in event order, when first seen). */
static rplist *list_for(rmm_pool *p, uint64_t stream, uint64_t thread)
{
	int pt = stream == STREAM_PER_THREAD || (p->c.ptds && stream == 0);
	uint64_t key = pt ? thread : stream == 0 ? STREAM_LEGACY : stream;
	for (size_t i = 0; i < p->nlists; i++)
		if (p->lists[i]->per_thread == pt && p->lists[i]->key == key)
			return p->lists[i];
	AS_GROW(p->lists, p->nlists, p->caplists, 8);
	rplist *l = xcalloc(1, sizeof(*l));
	l->per_thread = pt;
	l->key = key;
	RB_INIT(&l->addr);
	RB_INIT(&l->size);
	p->lists[p->nlists++] = l;
	return l;
}

static void list_remove(rplist *l, rpblk *b)
{
	RB_REMOVE(rp_addr, &l->addr, b);
	RB_REMOVE(rp_size, &l->size, b);
	l->bytes -= b->size;
	l->n--;
}

static void list_add(rplist *l, rpblk *b)
{
	b->list = l;
	b->is_free = 1;
	RB_INSERT(rp_addr, &l->addr, b);
	RB_INSERT(rp_size, &l->size, b);
	l->bytes += b->size;
	l->n++;
}

/* coalescing_free_list::insert: merge with the previous block when contiguous and b is not a head,
 * with the next when contiguous and the next is not a head. */
static void list_insert(rmm_pool *p, rplist *l, rpblk *b)
{
	rpblk *next = RB_NFIND(rp_addr, &l->addr, b);
	rpblk *prev = next ? RB_PREV(rp_addr, &l->addr, next) : RB_MAX(rp_addr, &l->addr);
	int mp = prev && prev->addr + prev->size == b->addr && !b->head;
	int mn = next && b->addr + b->size == next->addr && !next->head;
	if (mp) {
		list_remove(l, prev);
		prev->size += b->size;
		blk_del(p, b);
		b = prev;
	}
	if (mn) {
		list_remove(l, next);
		b->size += next->size;
		blk_del(p, next);
	}
	list_add(l, b);
}

/* coalescing_free_list::get_block: the best fit, removed from the list; NULL if none fits. */
static rpblk *list_best_fit(rplist *l, uint64_t size)
{
	rpblk key = { .addr = 0, .size = size };
	rpblk *b = RB_NFIND(rp_size, &l->size, &key);
	if (b)
		list_remove(l, b);
	return b;
}

/* allocate_and_insert_remainder: b keeps size bytes, the rest (not a head) goes into l. */
static rpblk *take(rmm_pool *p, rpblk *b, uint64_t size, rplist *l)
{
	if (b->size > size) {
		rpblk *r = blk_new(p);
		r->addr = b->addr + size;
		r->size = b->size - size;
		r->head = 0;
		list_insert(p, l, r);
		b->size = size;
	}
	b->is_free = 0;
	return b;
}

/* block_from_upstream: one upstream allocation, a head block. */
static rpblk *from_upstream(rmm_pool *p, uint64_t size, uint64_t stream)
{
	uint64_t addr;
	if (size == 0 || as_dev_alloc(p->dev, size, stream, &addr))
		return NULL;
	rpup *u = xmalloc(sizeof(*u));
	u->addr = addr;
	u->size = size;
	RB_INSERT(rp_ups, &p->ups, u);
	p->nups++;
	p->pool_size += size;
	if (p->pool_size > p->peak_pool)
		p->peak_pool = p->pool_size;
	rpblk *b = blk_new(p);
	b->addr = addr;
	b->size = size;
	b->head = 1;
	return b;
}

/* try_to_expand: from try_size down, halving, to min_size; NULL when min_size itself fails. */
static rpblk *try_to_expand(rmm_pool *p, uint64_t try_size, uint64_t min_size, uint64_t stream)
{
	while (try_size >= min_size) {
		rpblk *b = from_upstream(p, try_size, stream);
		if (b)
			return b;
		if (try_size == min_size)
			return NULL;
		try_size = try_size / 2 > min_size ? try_size / 2 : min_size;
	}
	return NULL; /* "Not enough room to grow" */
}

/* size_to_grow */
static uint64_t size_to_grow(const rmm_pool *p, uint64_t size)
{
	if (p->maximum) {
		uint64_t remaining = align_up(p->maximum - p->pool_size);
		uint64_t aligned = align_up(size);
		return aligned <= remaining ? (aligned > remaining / 2 ? aligned : remaining / 2) : 0;
	}
	return size > p->pool_size ? size : p->pool_size;
}

static int rp_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	extern const as_policy_ops as_policy_rmm_pool;
	rmm_pool *p = xcalloc(1, sizeof(*p));
	if (as_conf_defaults(rp_opts, &p->c, err) || as_conf_parse(config, rp_opts, &p->c, err)) {
		free(p);
		return -1;
	}
	p->base.ops = &as_policy_rmm_pool;
	p->dev = dev;
	p->ctr = ctr;
	RB_INIT(&p->ups);
	uint64_t initial = p->c.initial_pct > 0 ? pct_of_free(dev, p->c.initial_pct) : p->c.initial; /* default 50% */
	p->maximum = p->c.maximum_pct > 0 ? pct_of_free(dev, p->c.maximum_pct) : p->c.maximum;
	int rc = 0;
	if (initial % RMM_ALIGN)
		rc = as_fail(err, AS_EXIT_USAGE, "rmm-pool: Error, Initial pool size required to be a multiple of 256 bytes (%" PRIu64 ")", initial);
	else if (p->maximum % RMM_ALIGN)
		rc = as_fail(err, AS_EXIT_USAGE, "rmm-pool: Error, Maximum pool size required to be a multiple of 256 bytes (%" PRIu64 ")", p->maximum);
	else if (p->maximum && initial > p->maximum)
		rc = as_fail(err, AS_EXIT_USAGE, "rmm-pool: Initial pool size exceeds the maximum pool size! (%" PRIu64 " > %" PRIu64 ")", initial, p->maximum);
	if (rc) {
		free(p);
		return -1;
	}
	if (initial > 0) { /* initialize_pool: the initial block on the legacy stream's list, the first event */
		rpblk *b = try_to_expand(p, initial, initial, STREAM_LEGACY);
		if (!b) {
			free(p);
			return as_fail(err, AS_EXIT_USAGE, "rmm-pool: the initial pool of %" PRIu64 " bytes does not fit the device (rmm::out_of_memory at construction)", initial);
		}
		list_insert(p, list_for(p, STREAM_LEGACY, 0), b);
	}
	*out = &p->base;
	return 0;
}

/* stream_ordered_memory_resource::get_block */
static rpblk *get_block(rmm_pool *p, uint64_t size, rplist *own, uint64_t stream)
{
	rpblk *b = list_best_fit(own, size);
	if (b)
		return take(p, b, size, own);
	for (size_t i = 0; i < p->nlists; i++) { /* get_block_from_other_stream(merge_first = false) */
		rplist *o = p->lists[i];
		if (o == own || !o->n)
			continue;
		b = list_best_fit(o, size);
		if (b) {
			p->steals++;
			return take(p, b, size, o);
		}
	}
	for (size_t i = 0; i < p->nlists; i++) { /* get_block_from_other_stream(merge_first = true) */
		rplist *o = p->lists[i];
		if (o == own || !o->n)
			continue;
		p->merges++;
		rpblk *x, *nx;
		RB_FOREACH_SAFE(x, rp_addr, &o->addr, nx) {
			list_remove(o, x);
			list_insert(p, own, x);
		}
		b = list_best_fit(own, size);
		if (b)
			return take(p, b, size, own);
	}
	uint64_t grow = size_to_grow(p, size);
	b = try_to_expand(p, grow, size, stream);
	if (!b)
		return NULL;
	p->grows++;
	return take(p, b, size, own);
}

static int rp_malloc(as_policy *pol, const as_request *rq, void **handle, uint64_t *bsize, uint64_t *addr)
{
	rmm_pool *p = (rmm_pool *)pol;
	if (rq->size == 0) {
		*handle = &p->zero;
		*bsize = 0;
		*addr = 0;
		return 0;
	}
	if (rq->size > UINT64_MAX - RMM_ALIGN)
		return 1;
	uint64_t size = align_up(rq->size);
	rplist *own = list_for(p, rq->stream, rq->thread);
	rpblk *b = get_block(p, size, own, rq->stream);
	if (!b)
		return 1;
	b->req = rq->size;
	b->list = own;
	b->lprev = NULL;
	b->lnext = p->live;
	if (p->live)
		p->live->lprev = b;
	p->live = b;
	p->used += b->size;
	p->rounding += b->size - b->req;
	if (p->used > p->peak_used)
		p->peak_used = p->used;
	*handle = b;
	*bsize = b->size;
	*addr = b->addr;
	return 0;
}

/* deallocate(stream): the block goes into the free list of the stream it is freed on (l), or of
 * the stream it was allocated on when the trace does not say (free). */
static void free_into(rmm_pool *p, rpblk *b, rplist *l)
{
	if (b->lprev)
		b->lprev->lnext = b->lnext;
	else
		p->live = b->lnext;
	if (b->lnext)
		b->lnext->lprev = b->lprev;
	p->used -= b->size;
	p->rounding -= b->size - b->req;
	b->req = 0;
	list_insert(p, l, b);
}

static void rp_free(as_policy *pol, void *h)
{
	rmm_pool *p = (rmm_pool *)pol;
	rpblk *b = h;
	if (b != &p->zero)
		free_into(p, b, b->list);
}

static void rp_free_from(as_policy *pol, void *h, const as_request *rq)
{
	rmm_pool *p = (rmm_pool *)pol;
	rpblk *b = h;
	if (b != &p->zero)
		free_into(p, b, list_for(p, rq->stream, rq->thread));
}

static rpup *up_of(rmm_pool *p, uint64_t addr)
{
	rpup key = { .addr = addr };
	rpup *u = RB_NFIND(rp_ups, &p->ups, &key);
	if (!u || u->addr != addr)
		u = u ? RB_PREV(rp_ups, &p->ups, u) : RB_MAX(rp_ups, &p->ups);
	return u;
}

/* Releases every upstream block in which nothing is allocated (its free pieces may lie in several
 * streams' lists), as the pool's release() does at its destruction for all of them. */
static void rp_empty_cache(as_policy *pol)
{
	rmm_pool *p = (rmm_pool *)pol;
	if (!p->c.empty_cache_releases)
		return;
	rpup *u, *nu;
	RB_FOREACH(u, rp_ups, &p->ups)
		u->busy = 0;
	for (rpblk *b = p->live; b; b = b->lnext)
		up_of(p, b->addr)->busy = 1;
	for (size_t i = 0; i < p->nlists; i++) {
		rplist *l = p->lists[i];
		rpblk *b, *nb;
		RB_FOREACH_SAFE(b, rp_addr, &l->addr, nb)
			if (!up_of(p, b->addr)->busy) {
				list_remove(l, b);
				blk_del(p, b);
			}
	}
	RB_FOREACH_SAFE(u, rp_ups, &p->ups, nu) {
		if (u->busy)
			continue;
		RB_REMOVE(rp_ups, &p->ups, u);
		p->nups--;
		p->pool_size -= u->size;
		as_dev_free(p->dev, u->addr, u->size, STREAM_LEGACY);
		free(u);
	}
}

static int rp_check(as_policy *pol, as_err *err)
{
	rmm_pool *p = (rmm_pool *)pol;
	uint64_t fr = 0, up = 0, used = 0, rounding = 0;
	for (size_t i = 0; i < p->nlists; i++) {
		rplist *l = p->lists[i];
		uint64_t bytes = 0;
		size_t n = 0;
		rpblk *b, *prev = NULL;
		RB_FOREACH(b, rp_addr, &l->addr) {
			rpup key = { .addr = b->addr };
			rpup *u = RB_NFIND(rp_ups, &p->ups, &key);
			if (!u || u->addr != b->addr)
				u = u ? RB_PREV(rp_ups, &p->ups, u) : RB_MAX(rp_ups, &p->ups);
			if (!b->is_free || b->list != l || b->size == 0 || !u || b->addr + b->size > u->addr + u->size || b->head != (u->addr == b->addr))
				return as_fail(err, AS_EXIT_SOFTWARE, "rmm-pool: free block 0x%" PRIx64 " (%" PRIu64 " bytes) lies outside its upstream block or has a wrong head flag", b->addr, b->size);
			if (prev && prev->addr + prev->size == b->addr && !b->head)
				return as_fail(err, AS_EXIT_SOFTWARE, "rmm-pool: free blocks 0x%" PRIx64 " and 0x%" PRIx64 " of one list are not coalesced", prev->addr, b->addr);
			if (prev && prev->addr + prev->size > b->addr)
				return as_fail(err, AS_EXIT_SOFTWARE, "rmm-pool: free blocks overlap at 0x%" PRIx64, b->addr);
			bytes += b->size;
			n++;
			prev = b;
		}
		if (bytes != l->bytes || n != l->n)
			return as_fail(err, AS_EXIT_SOFTWARE, "rmm-pool: a free list holds %" PRIu64 " bytes in %zu blocks, its counts say %" PRIu64 " in %zu", bytes, n, l->bytes, l->n);
		fr += bytes;
	}
	for (rpblk *b = p->live; b; b = b->lnext) {
		used += b->size;
		rounding += b->size - b->req;
	}
	rpup *u;
	RB_FOREACH(u, rp_ups, &p->ups)
		up += u->size;
	if (up != p->pool_size || used != p->used || rounding != p->rounding || fr + used != up || up != p->dev->reserved)
		return as_fail(err, AS_EXIT_SOFTWARE, "rmm-pool: upstream blocks hold %" PRIu64 " bytes (pool_size %" PRIu64 ", device %" PRIu64 "), free %" PRIu64 " + used %" PRIu64 " (counted %" PRIu64 ")",
			up, p->pool_size, p->dev->reserved, fr, used, p->used);
	if (p->maximum && p->pool_size > p->maximum)
		return as_fail(err, AS_EXIT_SOFTWARE, "rmm-pool: pool size %" PRIu64 " above the maximum %" PRIu64, p->pool_size, p->maximum);
	return 0;
}

static void rp_stats(rmm_pool *p, as_stat_cb cb, void *ctx)
{
	uint64_t nfree = 0;
	for (size_t i = 0; i < p->nlists; i++)
		nfree += p->lists[i]->n;
	cb(ctx, "pool_size", (int64_t)p->pool_size);
	cb(ctx, "peak_pool_size", (int64_t)p->peak_pool);
	cb(ctx, "maximum_pool_size", (int64_t)p->maximum);
	cb(ctx, "used_bytes", (int64_t)p->used);
	cb(ctx, "peak_used_bytes", (int64_t)p->peak_used);
	cb(ctx, "free_bytes", (int64_t)(p->pool_size - p->used));
	cb(ctx, "upstream_blocks", (int64_t)p->nups);
	cb(ctx, "free_blocks", (int64_t)nfree);
	cb(ctx, "stream_free_lists", (int64_t)p->nlists);
	cb(ctx, "grows", (int64_t)p->grows);
	cb(ctx, "taken_from_other_stream", (int64_t)p->steals);
	cb(ctx, "merged_stream_lists", (int64_t)p->merges);
}

/* One view per upstream block, blocks in address order (free ones from every list). */
typedef struct rpview {
	uint64_t addr, size;
	int state;
} rpview;
static int view_cmp(const void *a, const void *b)
{
	const rpview *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void rp_segments(rmm_pool *p, as_seg_cb cb, void *ctx)
{
	size_t n = 0, cap = 16;
	rpview *v = xmalloc(cap * sizeof(*v));
	for (size_t i = 0; i < p->nlists; i++) {
		rpblk *b;
		RB_FOREACH(b, rp_addr, &p->lists[i]->addr) {
			AS_GROW(v, n, cap, 1);
			v[n++] = (rpview){ b->addr, b->size, 0 };
		}
	}
	for (rpblk *b = p->live; b; b = b->lnext) {
		AS_GROW(v, n, cap, 1);
		v[n++] = (rpview){ b->addr, b->size, 1 };
	}
	qsort(v, n, sizeof(*v), view_cmp);
	uint64_t *sizes = xmalloc((n + 1) * sizeof(*sizes));
	int *states = xmalloc((n + 1) * sizeof(*states));
	size_t k = 0;
	rpup *u;
	RB_FOREACH(u, rp_ups, &p->ups) {
		size_t nb = 0;
		for (; k < n && v[k].addr < u->addr + u->size; k++, nb++) {
			sizes[nb] = v[k].size;
			states[nb] = v[k].state;
		}
		as_seg_view s = { .addr = u->addr, .size = u->size, .nblocks = nb, .block_sizes = sizes, .block_states = states };
		cb(ctx, &s);
	}
	free(v);
	free(sizes);
	free(states);
}

static int rp_query(as_policy *pol, int what, void *arg)
{
	rmm_pool *p = (rmm_pool *)pol;
	switch (what) {
	case AS_Q_STATS: {
		as_q_stats *q = arg;
		rp_stats(p, q->cb, q->ctx);
		return 0;
	}
	case AS_Q_SEGMENTS: {
		as_q_segments *q = arg;
		rp_segments(p, q->cb, q->ctx);
		return 0;
	}
	case AS_Q_FREE_STATS: {
		as_q_free_stats *q = arg;
		q->largest = 0;
		for (size_t i = 0; i < p->nlists; i++) {
			rpblk *b = RB_MAX(rp_size, &p->lists[i]->size);
			if (b && b->size > q->largest)
				q->largest = b->size;
		}
		q->total = p->pool_size - p->used;
		return 0;
	}
	case AS_Q_WASTE: {
		as_waste *w = arg;
		memset(w, 0, sizeof(*w));
		w->rounding = p->rounding;
		w->free_cached = p->pool_size - p->used;
		return 0;
	}
	default:
		return AS_Q_UNKNOWN;
	}
}

static void rp_destroy(as_policy *pol)
{
	rmm_pool *p = (rmm_pool *)pol;
	for (size_t i = 0; i < p->nlists; i++) {
		rpblk *b;
		while ((b = RB_MIN(rp_addr, &p->lists[i]->addr))) { /* removed first: freed nodes break the walk */
			list_remove(p->lists[i], b);
			free(b);
		}
		free(p->lists[i]);
	}
	for (rpblk *b = p->live, *nb; b; b = nb) {
		nb = b->lnext;
		free(b);
	}
	for (rpblk *b = p->spare, *nb; b; b = nb) {
		nb = b->lnext;
		free(b);
	}
	rpup *u;
	while ((u = RB_MIN(rp_ups, &p->ups))) { /* release(): the upstream blocks go back */
		RB_REMOVE(rp_ups, &p->ups, u);
		free(u);
	}
	free(p->lists);
	free(p);
}

const as_policy_ops as_policy_rmm_pool = {
	.name = "rmm-pool",
	.summary = "RMM 26.06's pool_memory_resource: 256-byte alignment, coalescing best fit over per-stream free lists, initial/maximum pool size, growth by the pool's size",
	.opts = rp_opts,
	.flags = AS_CAP_STATS | AS_CAP_SEGMENTS | AS_CAP_FREE_STATS | AS_CAP_WASTE | AS_CAP_NO_INFERRED_EMPTY | AS_CAP_FREE_AT_REQUEST,
	.create = rp_create,
	.malloc = rp_malloc,
	.free = rp_free,
	.free_from = rp_free_from,
	.empty_cache = rp_empty_cache,
	.check = rp_check,
	.query = rp_query,
	.destroy = rp_destroy,
};
