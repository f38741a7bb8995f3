/*
 * pytorch_pinned.c - PyTorch's pinned host-memory cache (CachingHostAllocator, the allocator behind
 * pin_memory=True and torch.empty(..., pin_memory=True)), as of PyTorch 2.11: the generic part in
 * aten/src/ATen/core/CachingHostAllocator.h (CachingHostAllocatorImpl, the version with per-pool
 * HostBlockPool and active_requests/allocations stats; reference/pytorch-caching-allocator.md §16) and
 * the CUDA part in aten/src/ATen/cuda/CachingHostAllocator.cpp (CUDACachingHostAllocatorImpl, commit
 * 03258ab2aaee392cfb6772e9add73f1621d434d8). Options: c10/cuda/CUDAAllocatorConfig.cpp (§17.3).
 *
 * - allocate(size): 0 bytes give a null pointer and touch nothing. Otherwise, unless background
 *   threads are on, process_events() first; the size is rounded up to the next power of two
 *   (c10::llvm::PowerOf2Ceil) and the block of that bucket (Log2_64_Ceil, 64 buckets) most recently
 *   put on the bucket's free list is taken (get_free_block: deque back, pop_back). No splitting, no
 *   merging: only a free block of exactly the rounded size is reused.
 * - A miss creates a block of the rounded size (allocate_host_memory): from the reserve segment if
 *   pinned_reserve_segment_size_mb > 0 (created by the first miss, one cudaHostAlloc of the whole
 *   reserve; a bump pointer, each carve rounded up to 4 KiB; PinnedReserveSegment::allocate), else,
 *   or when the reserve has no room left, one cudaHostAlloc (or malloc + cudaHostRegister with
 *   pinned_use_cuda_host_register) of the rounded size (allocate_host_memory_slowpath).
 * - free(block): a block with recorded streams (record_event: a non_blocking copy used it) gets one
 *   CUDA event per stream and waits in the event queue (emplace_front); a block without goes straight
 *   back to the back of its bucket's free list. In allocsim's trace model the first is a
 *   free_requested (the program freed it, the copy may still run) and the block returns when the free
 *   completes (free_completed: its events were seen complete); the second is a free without an
 *   earlier free_requested.
 * - process_events(): from the oldest event (the deque's back), every completed event is taken out;
 *   the first one not completed stops the walk (it stays). A block whose last event completed goes
 *   to the back of its bucket's free list. A completed free is therefore reusable only from the next
 *   request (or empty_cache) on, and only once every older event completed.
 * - empty_cache(): process_events(), then every block on the free lists (bucket 0 to 63, each from
 *   the front) is released: cudaFreeHost (or cudaHostUnregister + free), except blocks carved from
 *   the reserve, which are forgotten without returning memory (free_block: the reserve is never
 *   freed and its bump pointer never moves back).
 * - A failed cudaHostAlloc throws: the request fails (out of memory) and nothing else changes; there
 *   is no flush-and-retry as in the device allocator.
 *
 * Statistics (host_memory_stats(), getStats and the HostStatsStaged updates):
 * - allocations / allocated_bytes: blocks owned (handed out or cached): +1 / +size when a block is
 *   created (add_allocated_block), -1 / -size when empty_cache releases it (free_from_pool); the
 *   peak is a true peak.
 * - active_requests / active_bytes: per bucket, +1 / +size when a block is handed out (created or
 *   taken from a free list); -1 when process_events returns a block whose events completed, and
 *   active_bytes decreases there by the function's size argument, which is -1 for a full walk
 *   (process_events_for_specific_size(-1, pool): `decrease(size)` with size -1 converted to size_t),
 *   so each such return adds 1 to active_bytes.current and subtracts 1 from active_bytes.freed. A
 *   block freed without events goes back to its free list with no decrease at all. The reported
 *   active peak is the sum of the per-bucket peaks (getStats: add_bucket_stats). These are
 *   PyTorch's numbers as it computes them; doc/policies.md.
 * - num_host_alloc = allocations.allocated (so blocks carved from the reserve count too),
 *   num_host_free = allocations.freed; host_alloc_time.count counts the actual cudaHostAlloc /
 *   cudaHostRegister calls (the reserve's own included), host_free_time.count the cudaFreeHost /
 *   cudaHostUnregister calls. The timings themselves are wall-clock and not simulated.
 *
 * Simplifications (doc/policies.md): one event per freed block (a trace's free_completed says all of
 * a block's events completed); private host pools of CUDA graph capture are not modelled; with
 * pinned_use_background_threads the events are still processed at requests (PyTorch's thread polls
 * every 100 µs, which changes when a completed block becomes reusable, not which).
 */
#include "policy.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#define PP_BUCKETS 64               /* MAX_SIZE_INDEX */
#define PP_RESERVE_PAGE 4096ULL     /* PinnedReserveSegment::allocate rounds each carve to 4 KiB */
#define PP_MAX_REGISTER_THREADS 128 /* CUDAAllocatorConfig::pinned_max_register_threads() */

typedef struct pp_conf {
	int host_register;          /* pinned_use_cuda_host_register */
	uint64_t register_threads;  /* pinned_num_register_threads */
	int background;             /* pinned_use_background_threads */
	uint64_t reserve_mb;        /* pinned_reserve_segment_size_mb, 0 = none */
} pp_conf;

/* c10::CachingAllocator::Stat */
typedef struct pp_stat {
	int64_t current, peak, allocated, freed;
} pp_stat;

static void st_inc(pp_stat *s, uint64_t n)
{
	s->current += (int64_t)n;
	if (s->current > s->peak)
		s->peak = s->current;
	s->allocated += (int64_t)n;
}

/* Stat::decrease(size_t amount), which casts the amount back to int64_t: n is that value (-1 for
 * PyTorch's size -1, see the top). */
static void st_dec(pp_stat *s, int64_t n)
{
	s->current -= n;
	s->freed += n;
}

enum { PB_ACTIVE, PB_PENDING, PB_FREE };

typedef struct pp_block {
	uint64_t addr, size;        /* size: the power of two */
	int state, from_reserve;
	int done;                   /* PB_PENDING: its event completed (the trace's free_completed) */
	TAILQ_ENTRY(pp_block) link; /* PB_FREE: its bucket's free list; PB_PENDING: the event queue */
	LIST_ENTRY(pp_block) all;   /* every block owned */
} pp_block;
TAILQ_HEAD(pp_list, pp_block);

typedef struct pinned {
	as_policy base;
	pp_conf conf;
	as_device *dev;
	struct pp_list free_list[PP_BUCKETS];
	struct pp_list events;      /* oldest first (PyTorch's deque read from the back) */
	LIST_HEAD(, pp_block) blocks;
	uint64_t reserve_addr, reserve_size, reserve_used; /* reserve_size 0: not created */
	pp_stat allocations, allocated_bytes;
	pp_stat active[PP_BUCKETS], active_bytes[PP_BUCKETS];
	uint64_t host_alloc_calls, host_free_calls;
} pinned;

/* pinned_num_register_threads: stoull, then "has to be power of 2" and "<= 128" (CUDAAllocatorConfig::
 * parsePinnedNumRegisterThreads, PyTorch's messages). */
static int parse_threads(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	uint64_t v;
	if (as_parse_u64(val, &v))
		return as_fail(err, AS_EXIT_USAGE, "%s: '%s' is not a number", d->name, val);
	if (!v || (v & (v - 1)))
		return as_fail(err, AS_EXIT_USAGE, "Number of register threads has to be power of 2, got %" PRIu64, v);
	if (v > PP_MAX_REGISTER_THREADS)
		return as_fail(err, AS_EXIT_USAGE, "Number of register threads should be less than or equal to %d, got %" PRIu64,
			PP_MAX_REGISTER_THREADS, v);
	((pp_conf *)conf)->register_threads = v;
	return 0;
}

/* pinned_reserve_segment_size_mb: "has to be greater than 0" (parsePinnedReserveSegmentSize). */
static int parse_reserve(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	uint64_t v;
	if (as_parse_u64(val, &v))
		return as_fail(err, AS_EXIT_USAGE, "%s: '%s' is not a number of MiB", d->name, val);
	if (!v)
		return as_fail(err, AS_EXIT_USAGE, "Pinned reserve segment size has to be greater than 0");
	if (v > (UINT64_MAX >> 20))
		return as_fail(err, AS_EXIT_USAGE, "%s: %s MiB is more than 2^64 bytes", d->name, val);
	((pp_conf *)conf)->reserve_mb = v;
	return 0;
}

/* Keys of newer releases' host allocator, refused (not silently ignored): pinned_max_round_threshold_mb
 * and pinned_max_cached_size_mb (2.13, PR #171662; parsed by c10/core/AllocatorConfig.cpp
 * parsePinnedMaxRoundThreshold / parsePinnedMaxCachedSize at cyyever/pytorch 106319cb: requests above
 * the threshold are not rounded to a power of two, freed blocks above the cached size are released)
 * change which blocks exist, and the 2.13+ CachingHostAllocator that applies them (its buckets for
 * blocks that are not powers of two) is in no source read; pinned_free_catch_all (2.12) likewise. */
static int parse_newer(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	(void)conf; (void)val;
	return as_fail(err, AS_EXIT_USAGE, "%s: not simulated: pytorch-pinned is PyTorch 2.11's pinned host cache, and the "
		"newer CachingHostAllocator that applies this key was not in the sources read (doc/policies.md)", d->name);
}

#define OFF(f) offsetof(pp_conf, f)
static const as_optdesc pp_opts[] = {
	{ "pinned_use_cuda_host_register", "True|False", "False", "malloc + cudaHostRegister instead of cudaHostAlloc (same blocks; another cost)", as_opt_parse_bool, OFF(host_register) },
	{ "pinned_num_register_threads", "int", "1", "threads that pre-fault pages with host_register: a power of 2 up to 128", parse_threads, 0 },
	{ "pinned_use_background_threads", "True|False", "False", "accepted: PyTorch polls events in a thread (timing only, doc/policies.md)", as_opt_parse_bool, OFF(background) },
	{ "pinned_reserve_segment_size_mb", "MiB", "0", "one reserve of this size at the first miss; blocks are carved from it (4 KiB steps), never returned", parse_reserve, 0 },
	{ "pinned_max_round_threshold_mb", "MiB", "-", "refused: 2.13's exact-size blocks above it are not simulated", parse_newer, 0 },
	{ "pinned_max_cached_size_mb", "MiB", "-", "refused: 2.13's release of freed blocks above it is not simulated", parse_newer, 0 },
	{ "pinned_free_catch_all", "True|False", "-", "refused: 2.12's catch-all free is not simulated", parse_newer, 0 },
	{ NULL, NULL, NULL, NULL, NULL, 0 },
};

/* c10::llvm::PowerOf2Ceil; 0 when the result does not fit 64 bits. */
static uint64_t pow2_ceil(uint64_t n)
{
	if (n <= 1)
		return n;
	if (n > (1ULL << 63))
		return 0;
	return 1ULL << (64 - __builtin_clzll(n - 1));
}

/* c10::llvm::Log2_64_Ceil of a power of two */
static int bucket(uint64_t size)
{
	return size <= 1 ? 0 : 63 - __builtin_clzll(size);
}

static int pp_create(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err)
{
	extern const as_policy_ops as_policy_pytorch_pinned;
	(void)ctr;
	pinned *p = xcalloc(1, sizeof(*p));
	p->base.ops = &as_policy_pytorch_pinned;
	p->dev = dev;
	p->conf.register_threads = 1;
	if (as_conf_parse(config, pp_opts, &p->conf, err)) {
		free(p);
		return -1;
	}
	for (int i = 0; i < PP_BUCKETS; i++)
		TAILQ_INIT(&p->free_list[i]);
	TAILQ_INIT(&p->events);
	LIST_INIT(&p->blocks);
	*out = &p->base;
	return 0;
}

/* process_events_for_specific_size(-1, pool): completed events from the oldest, up to the first one
 * not completed. */
static void process_events(pinned *p)
{
	pp_block *b;
	while ((b = TAILQ_FIRST(&p->events)) && b->done) {
		TAILQ_REMOVE(&p->events, b, link);
		int i = bucket(b->size);
		b->state = PB_FREE;
		b->done = 0;
		TAILQ_INSERT_TAIL(&p->free_list[i], b, link);
		st_dec(&p->active[i], 1);
		st_dec(&p->active_bytes[i], -1); /* decrease(size) with size == -1: see the top */
	}
}

/* allocate_host_memory: a carve of the reserve (created by the first call), else the slow path. */
static int host_memory(pinned *p, uint64_t size, uint64_t *addr, int *from_reserve)
{
	*from_reserve = 0;
	if (p->conf.reserve_mb && !p->reserve_size) {
		uint64_t sz = p->conf.reserve_mb << 20; /* get_reserve_segment: a static made on first use */
		if (as_dev_alloc(p->dev, sz, 0, &p->reserve_addr))
			return 1; /* the exception leaves the static uninitialised: the next miss tries again */
		p->host_alloc_calls++;
		p->reserve_size = sz;
	}
	if (p->reserve_size) {
		uint64_t r = (size + PP_RESERVE_PAGE - 1) & ~(PP_RESERVE_PAGE - 1);
		if (r >= size && r <= p->reserve_size - p->reserve_used) {
			*addr = p->reserve_addr + p->reserve_used;
			p->reserve_used += r;
			*from_reserve = 1;
			return 0;
		}
	}
	if (as_dev_alloc(p->dev, size, 0, addr) /* host memory: no stream */)
		return 1;
	p->host_alloc_calls++;
	return 0;
}

static int pp_malloc(as_policy *pol, const as_request *rq, void **handle, uint64_t *bsize, uint64_t *addr)
{
	pinned *p = (pinned *)pol;
	*handle = NULL;
	*bsize = 0;
	*addr = 0;
	if (!rq->size)
		return 0; /* {nullptr, nullptr} */
	process_events(p);
	uint64_t size = pow2_ceil(rq->size);
	if (!size)
		return 1;
	int i = bucket(size);
	pp_block *b = TAILQ_LAST(&p->free_list[i], pp_list);
	if (b) {
		TAILQ_REMOVE(&p->free_list[i], b, link);
	} else {
		uint64_t a;
		int res;
		if (host_memory(p, size, &a, &res))
			return 1;
		b = xcalloc(1, sizeof(*b));
		b->addr = a;
		b->size = size;
		b->from_reserve = res;
		LIST_INSERT_HEAD(&p->blocks, b, all);
		st_inc(&p->allocations, 1);
		st_inc(&p->allocated_bytes, size);
	}
	b->state = PB_ACTIVE;
	st_inc(&p->active[i], 1);
	st_inc(&p->active_bytes[i], size);
	*handle = b;
	*bsize = size;
	*addr = b->addr;
	return 0;
}

/* The program frees a block a copy used: its event is recorded and it waits in the queue. */
static void pp_free_requested(as_policy *pol, void *h)
{
	pinned *p = (pinned *)pol;
	pp_block *b = h;
	b->state = PB_PENDING;
	b->done = 0;
	TAILQ_INSERT_TAIL(&p->events, b, link);
}

/* The free completed: after a free_requested the block's event completed (it returns at the next
 * process_events); without one, a block no stream used goes straight to its free list. */
static void pp_free(as_policy *pol, void *h)
{
	pinned *p = (pinned *)pol;
	pp_block *b = h;
	if (b->state == PB_PENDING) {
		b->done = 1;
		return;
	}
	b->state = PB_FREE;
	TAILQ_INSERT_TAIL(&p->free_list[bucket(b->size)], b, link);
}

/* free_block: the reserve's carves are never returned. */
static void release(pinned *p, pp_block *b)
{
	if (!b->from_reserve) {
		as_dev_free(p->dev, b->addr, b->size, 0);
		p->host_free_calls++;
	}
	st_dec(&p->allocations, 1);
	st_dec(&p->allocated_bytes, (int64_t)b->size);
	LIST_REMOVE(b, all);
	free(b);
}

static void pp_empty_cache(as_policy *pol)
{
	pinned *p = (pinned *)pol;
	process_events(p);
	for (int i = 0; i < PP_BUCKETS; i++) {
		pp_block *b;
		while ((b = TAILQ_FIRST(&p->free_list[i]))) {
			TAILQ_REMOVE(&p->free_list[i], b, link);
			release(p, b);
		}
	}
}

static int pp_check(as_policy *pol, as_err *err)
{
	pinned *p = (pinned *)pol;
	uint64_t n = 0, bytes = 0, own = 0, active = 0;
	pp_block *b;
	LIST_FOREACH(b, &p->blocks, all) {
		if (!b->size || (b->size & (b->size - 1)))
			return as_fail(err, AS_EXIT_SOFTWARE, "pytorch-pinned: block at 0x%" PRIx64 " of %" PRIu64 " bytes is not a power of two", b->addr, b->size);
		n++;
		bytes += b->size;
		own += b->from_reserve ? 0 : b->size;
		active += b->state == PB_ACTIVE;
	}
	if ((int64_t)n != p->allocations.current || (int64_t)bytes != p->allocated_bytes.current)
		return as_fail(err, AS_EXIT_SOFTWARE, "pytorch-pinned: %" PRIu64 " blocks of %" PRIu64 " bytes but allocations.current %" PRId64
			", allocated_bytes.current %" PRId64, n, bytes, p->allocations.current, p->allocated_bytes.current);
	if (own + p->reserve_size != p->dev->reserved)
		return as_fail(err, AS_EXIT_SOFTWARE, "pytorch-pinned: blocks and reserve hold %" PRIu64 " bytes, the device %" PRIu64,
			own + p->reserve_size, p->dev->reserved);
	uint64_t listed = 0;
	for (int i = 0; i < PP_BUCKETS; i++)
		TAILQ_FOREACH(b, &p->free_list[i], link) {
			if (b->state != PB_FREE || bucket(b->size) != i)
				return as_fail(err, AS_EXIT_SOFTWARE, "pytorch-pinned: block at 0x%" PRIx64 " on free list %d is not a free block of that bucket", b->addr, i);
			listed++;
		}
	TAILQ_FOREACH(b, &p->events, link) {
		if (b->state != PB_PENDING)
			return as_fail(err, AS_EXIT_SOFTWARE, "pytorch-pinned: block at 0x%" PRIx64 " in the event queue is not pending", b->addr);
		listed++;
	}
	if (listed + active != n)
		return as_fail(err, AS_EXIT_SOFTWARE, "pytorch-pinned: %" PRIu64 " blocks, %" PRIu64 " handed out and %" PRIu64 " listed", n, active, listed);
	if (p->reserve_used > p->reserve_size)
		return as_fail(err, AS_EXIT_SOFTWARE, "pytorch-pinned: reserve overrun");
	return 0;
}

/* host_memory_stats(): the keys Python's flattening gives, sorted. */
static void emit_stat(as_stat_cb cb, void *ctx, const char *name, const pp_stat *s)
{
	char k[64];
	snprintf(k, sizeof k, "%s.allocated", name); cb(ctx, k, s->allocated);
	snprintf(k, sizeof k, "%s.current", name); cb(ctx, k, s->current);
	snprintf(k, sizeof k, "%s.freed", name); cb(ctx, k, s->freed);
	snprintf(k, sizeof k, "%s.peak", name); cb(ctx, k, s->peak);
}

static void pp_stats(pinned *p, as_stat_cb cb, void *ctx)
{
	pp_stat act = { 0 }, actb = { 0 };
	for (int i = 0; i < PP_BUCKETS; i++) { /* add_bucket_stats: peaks are summed too */
		act.current += p->active[i].current, act.peak += p->active[i].peak;
		act.allocated += p->active[i].allocated, act.freed += p->active[i].freed;
		actb.current += p->active_bytes[i].current, actb.peak += p->active_bytes[i].peak;
		actb.allocated += p->active_bytes[i].allocated, actb.freed += p->active_bytes[i].freed;
	}
	emit_stat(cb, ctx, "active_bytes", &actb);
	emit_stat(cb, ctx, "active_requests", &act);
	emit_stat(cb, ctx, "allocated_bytes", &p->allocated_bytes);
	emit_stat(cb, ctx, "allocations", &p->allocations);
	cb(ctx, "host_alloc_time.count", (int64_t)p->host_alloc_calls);
	cb(ctx, "host_free_time.count", (int64_t)p->host_free_calls);
	cb(ctx, "num_host_alloc", p->allocations.allocated);
	cb(ctx, "num_host_free", p->allocations.freed);
}

static int pp_query(as_policy *pol, int what, void *arg)
{
	pinned *p = (pinned *)pol;
	switch (what) {
	case AS_Q_STATS: {
		as_q_stats *q = arg;
		pp_stats(p, q->cb, q->ctx);
		return 0;
	}
	case AS_Q_ROUND: { /* PowerOf2Ceil; not a fixed granule */
		as_q_round *q = arg;
		uint64_t r = pow2_ceil(q->size);
		q->size = r ? r : q->size;
		q->granule = 0;
		return 0;
	}
	default:
		return AS_Q_UNKNOWN;
	}
}

static void pp_destroy(as_policy *pol)
{
	pinned *p = (pinned *)pol;
	pp_block *b;
	while ((b = LIST_FIRST(&p->blocks))) {
		LIST_REMOVE(b, all);
		free(b);
	}
	free(p);
}

/* The warnings of the pytorch policy (pytorch_settings.c); no release to imply. */
unsigned as_pytorch_warnings(const char *config, uint64_t capacity);
static unsigned pp_prepare(char **config, const struct as_meta *m, uint64_t capacity)
{
	(void)m;
	return as_pytorch_warnings(*config, capacity);
}

const as_policy_ops as_policy_pytorch_pinned = {
	.name = "pytorch-pinned",
	.summary = "PyTorch 2.11's pinned host-memory cache (CachingHostAllocator): power-of-two blocks, reuse after the copies' events",
	.opts = pp_opts,
	.flags = AS_CAP_STATS | AS_CAP_ROUND | AS_CAP_NO_INFERRED_EMPTY,
	.create = pp_create,
	.malloc = pp_malloc,
	.free_requested = pp_free_requested,
	.free = pp_free,
	.empty_cache = pp_empty_cache,
	.check = pp_check,
	.query = pp_query,
	.destroy = pp_destroy,
	.prepare = pp_prepare,
};
