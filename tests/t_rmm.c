/* t_rmm.c - the rmm-pool, rmm-arena and rmm-binning policies against RMM's own tests (rapidsai/rmm
 * v26.06.00: cpp/tests/mr/pool_mr_tests.cpp, arena_mr_tests.cpp, binning_mr_tests.cpp), driven
 * through the policy interface, with the exact addresses, sizes and device bytes that RMM's code
 * gives (the source lines are named at each test), plus random workloads under the invariant check. */
#include "tap.h"
#include "polstat.h"
#include "util/common.h"
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include <gsl/gsl_rng.h>
#include <stdlib.h>

#define KiB (1ULL << 10)
#define MiB (1ULL << 20)
#define PT 2 /* cudaStreamPerThread */

typedef struct mr {
	as_device *dev;
	as_counters ctr;
	as_policy *p;
	char msg[512];
} mr;

static int mr_open(mr *t, const char *name, const char *conf, uint64_t capacity)
{
	as_err err = { 0, "" };
	t->dev = as_sim_device_new(capacity, ADDR_MODEL);
	t->ctr.alloc_retries = 0;
	int rc = as_policy_create(as_policy_find(name), &t->p, conf, t->dev, &t->ctr, &err);
	snprintf(t->msg, sizeof t->msg, "%s", err.msg);
	if (rc) {
		as_device_destroy(t->dev);
		t->p = NULL;
	}
	return rc;
}

static void mr_close(mr *t)
{
	as_err err = { 0, "" };
	int rc = t->p->ops->check(t->p, &err);
	ok(rc == 0, "invariants hold at the end%s%s", rc ? ": " : "", rc ? err.msg : "");
	t->p->ops->destroy(t->p);
	as_device_destroy(t->dev);
}

/* allocate(stream, size) by a thread: the pointer, 0 when it fails (*h NULL) */
static uint64_t al(mr *t, uint64_t size, uint64_t stream, uint64_t thread, void **h)
{
	uint64_t bs, addr;
	as_request rq = { .size = size, .stream = stream, .thread = thread, .time_us = -1 };
	if (t->p->ops->malloc(t->p, &rq, h, &bs, &addr)) {
		*h = NULL;
		return 0;
	}
	return addr;
}

static void fr(mr *t, void *h)
{
	t->p->ops->free(t->p, h);
}

/* deallocate(stream) by a thread: a free that names its stream (RMM logs' free lines) */
static void fr_on(mr *t, void *h, uint64_t stream, uint64_t thread)
{
	as_request rq = { .stream = stream, .thread = thread, .time_us = -1 };
	t->p->ops->free_from(t->p, h, &rq);
}

static int checked(mr *t)
{
	as_err err = { 0, "" };
	return t->p->ops->check(t->p, &err) == 0;
}

static uint64_t st(mr *t, const char *key) { return policy_stat_u64(t->p, key); }

/* ---- rmm-pool ---- */

/* pool_mr_tests.cpp PoolTest.ForceGrowth: a limiting_resource_adaptor of 6000 bytes (here the
 * device's capacity) under a pool with no initial pool. size_to_grow = max(size, pool_size());
 * try_to_expand halves a refused size down to the request (pool_memory_resource_impl.cpp). */
static void test_pool_force_growth(void)
{
	mr t;
	void *h;
	mr_open(&t, "rmm-pool", "initial_pool_size:0", 6000);
	ok(al(&t, 1000, 0, 0, &h) != 0, "ForceGrowth: 1000 bytes");
	is_u64(t.dev->reserved, 1024, "ForceGrowth: the pool grew by max(1024, 0) = 1024");
	ok(al(&t, 4000, 0, 0, &h) != 0, "ForceGrowth: 4000 bytes");
	is_u64(t.dev->reserved, 5120, "ForceGrowth: the pool grew by max(4096, 1024)");
	uint64_t a = al(&t, 500, 0, 0, &h);
	ok(a != 0, "ForceGrowth: 500 bytes");
	is_u64(t.dev->reserved, 5760, "ForceGrowth: 5120 and 2560 and 1280 refused, 640 taken (halving down to the request)");
	is_u64(t.dev->num_failed, 3, "ForceGrowth: three refused upstream allocations");
	ok(al(&t, 2000, 0, 0, &h) == 0, "ForceGrowth: 2000 bytes are too much (rmm::out_of_memory)");
	is_u64(t.dev->num_failed, 6, "ForceGrowth: 5760, 2880 and 2048 refused");
	is_u64(st(&t, "free_bytes"), 128, "ForceGrowth: the 640-byte block keeps its 128-byte remainder");
	mr_close(&t);

	/* the same with maximum_pool_size 8192: size_to_grow = max(size, remaining / 2) */
	mr_open(&t, "rmm-pool", "initial_pool_size:0,maximum_pool_size:8192", 6000);
	uint64_t base = al(&t, 1000, 0, 0, &h);
	is_u64(t.dev->reserved, 4096, "ForceGrowth with a maximum: 1000 bytes grow the pool by max(1024, 8192 / 2)");
	ok(al(&t, 4000, 0, 0, &h) == 0, "ForceGrowth with a maximum: 4000 bytes are too much (4096 more refused, nothing smaller tried)");
	is_u64(al(&t, 500, 0, 0, &h), base + 1024, "ForceGrowth with a maximum: 500 bytes fit after the first block");
	is_u64(al(&t, 2000, 0, 0, &h), base + 1536, "ForceGrowth with a maximum: 2000 bytes fit the rest");
	is_u64(t.dev->num_alloc, 1, "ForceGrowth with a maximum: one upstream allocation");
	mr_close(&t);
}

/* PoolTest.ThrowMaxLessThanInitial, NonAlignedPoolSize, InitialAndMaxPoolSizeEqual
 * (pool_memory_resource_impl.cpp: the RMM_EXPECTS of the constructor and initialize_pool). */
static void test_pool_sizes(void)
{
	mr t;
	void *h;
	ok(mr_open(&t, "rmm-pool", "initial_pool_size:1024,maximum_pool_size:256", 0) != 0 && strstr(t.msg, "Initial pool size exceeds the maximum pool size"),
		"ThrowMaxLessThanInitial: refused (%s)", t.msg);
	ok(mr_open(&t, "rmm-pool", "initial_pool_size:1000031,maximum_pool_size:1000192", 0) != 0 && strstr(t.msg, "Initial pool size required to be a multiple of 256 bytes"),
		"NonAlignedPoolSize: an initial size not a multiple of 256 is refused (%s)", t.msg);
	ok(mr_open(&t, "rmm-pool", "initial_pool_size:1000192,maximum_pool_size:1000200", 0) != 0 && strstr(t.msg, "Maximum pool size required to be a multiple of 256 bytes"),
		"NonAlignedPoolSize: a maximum not a multiple of 256 is refused (%s)", t.msg);
	ok(mr_open(&t, "rmm-pool", "initial_pool_size:1000192,maximum_pool_size:1000192", 0) == 0, "InitialAndMaxPoolSizeEqual: accepted");
	ok(al(&t, 1000, 0, 0, &h) != 0 && t.dev->reserved == 1000192 && t.dev->num_alloc == 1, "InitialAndMaxPoolSizeEqual: 1000 bytes from the initial pool");
	ok(al(&t, 1000192, 0, 0, &h) == 0, "a request above what the maximum leaves fails (size_to_grow is 0)");
	is_u64(t.dev->reserved, 1000192, "the failed request reserved nothing");
	mr_close(&t);
	ok(mr_open(&t, "rmm-pool", "initial_pool_size:2MiB", MiB) != 0 && strstr(t.msg, "does not fit"), "an initial pool above the device's memory is refused (%s)", t.msg);
	/* Python's default: percent_of_free_device_memory(50), aligned down to 256 */
	mr_open(&t, "rmm-pool", "", 1000000);
	is_u64(t.dev->reserved, 499968, "the default initial pool is half the free memory, aligned down to 256");
	mr_close(&t);
	mr_open(&t, "rmm-pool", "initial_pool_size:25%,maximum_pool_size:50%", 1000000);
	is_u64(t.dev->reserved, 249856, "initial_pool_size:25%% of 1000000 free bytes is 249856");
	is_u64(st(&t, "maximum_pool_size"), 499968, "maximum_pool_size:50%% of the free memory");
	mr_close(&t);
}

/* coalescing_free_list: best fit (the smallest block that fits, the lowest address among equals),
 * coalescing of adjacent frees in either order, 256-byte alignment, 0 bytes. */
static void test_pool_best_fit(void)
{
	mr t;
	void *a, *b, *c, *d, *e, *x;
	mr_open(&t, "rmm-pool", "initial_pool_size:1MiB", 0);
	uint64_t base = al(&t, 2048, 0, 0, &a);
	is_u64(al(&t, 256, 0, 0, &b), base + 2048, "the second block follows the first");
	is_u64(al(&t, 1, 0, 0, &c), base + 2304, "1 byte takes 256 (CUDA_ALLOCATION_ALIGNMENT)");
	is_u64(al(&t, 1024, 0, 0, &d), base + 2560, "then 1024 bytes");
	is_u64(al(&t, 256, 0, 0, &e), base + 3584, "then 256 bytes");
	fr(&t, a);   /* free: [0, 2048) */
	fr(&t, d);   /* free: [2560, 3584) */
	is_u64(al(&t, 1000, 0, 0, &x), base + 2560, "best fit: 1000 bytes take the 1024-byte block, not the first (2048)");
	fr(&t, x);
	is_u64(al(&t, 1024, 0, 0, &x), base + 2560, "an exact fit");
	fr(&t, x);
	fr(&t, c);   /* [2304, 2560) merges with the next free [2560, 3584) */
	is_u64(st(&t, "free_blocks"), 3, "a free merges with its free next block: [0,2048), [2304,3584), the rest");
	fr(&t, b);   /* [2048, 2304) merges with both neighbours */
	is_u64(st(&t, "free_blocks"), 2, "a free between two free blocks merges all three");
	is_u64(al(&t, 3584, 0, 0, &x), base, "the merged block serves 3584 bytes at the base");
	fr(&t, x);
	fr(&t, e);
	is_u64(st(&t, "free_blocks"), 1, "everything freed coalesces into the one upstream block");
	ok(al(&t, 0, 0, 0, &x) == 0 && x != NULL && t.dev->num_alloc == 1 && st(&t, "used_bytes") == 0, "0 bytes: a null pointer, nothing taken");
	fr(&t, x);
	/* ties: two free 512-byte blocks, the lower address wins */
	void *p[4];
	for (int i = 0; i < 4; i++)
		al(&t, 512, 0, 0, &p[i]);
	fr(&t, p[2]);
	fr(&t, p[0]);
	is_u64(al(&t, 512, 0, 0, &x), base, "among equal free blocks the lowest address wins (std::min_element keeps the first)");
	fr(&t, x), fr(&t, p[1]), fr(&t, p[3]);
	mr_close(&t);
}

/* stream_ordered_memory_resource::get_block: the own list, then another stream's list (its
 * remainder stays there), then the other lists merged into the own one, then growth. */
static void test_pool_streams(void)
{
	mr t;
	void *x, *y, *z;
	mr_open(&t, "rmm-pool", "initial_pool_size:4096", 0);
	uint64_t base = al(&t, 1024, 5, 0, &x);
	ok(base != 0 && t.dev->num_alloc == 1, "stream 5 takes its block from the legacy stream's list (the initial pool)");
	is_u64(st(&t, "taken_from_other_stream"), 1, "counted as taken from another stream");
	is_u64(al(&t, 3072, 0, 0, &y), base + 1024, "stream 0 (the legacy stream's list) takes the remainder");
	fr(&t, x); /* into stream 5's list */
	fr(&t, y); /* into the legacy list */
	is_u64(st(&t, "stream_free_lists"), 2, "two free lists: legacy, stream 5");
	is_u64(al(&t, 4096, 7, 0, &z), base, "stream 7: no list has 4096 bytes; merged, legacy's [1024,4096) and stream 5's [0,1024) coalesce");
	is_u64(t.dev->num_alloc, 1, "the merge served it without growing");
	is_u64(st(&t, "merged_stream_lists"), 2, "both other lists were merged into stream 7's");
	fr(&t, z);
	is_u64(al(&t, 1024, 0, 0, &x), base, "the legacy stream takes stream 7's free block now (its own list is empty)");
	fr(&t, x);
	/* per-thread default stream: one list per thread (its event is thread_local) */
	mr_close(&t);
	mr_open(&t, "rmm-pool", "initial_pool_size:0", 0);
	uint64_t a = al(&t, 1024, PT, 1, &x);
	fr(&t, x);
	is_u64(al(&t, 1024, PT, 1, &y), a, "stream 0x2: the thread's own list gives back its block");
	void *w;
	uint64_t b2 = al(&t, 1024, PT, 2, &w);
	ok(b2 != a && t.dev->num_alloc == 2, "stream 0x2 of another thread: its own list is empty, the other thread's is empty too: growth");
	fr(&t, y), fr(&t, w);
	is_u64(st(&t, "stream_free_lists"), 2, "thread 1's and thread 2's per-thread lists (no initial pool: no legacy event yet)");
	mr_close(&t);
}

/* stream_ordered_memory_resource::deallocate: the block goes into the list of the stream the free
 * is made on (stream_free_blocks_[get_event(stream)]), not the allocating stream's */
static void test_pool_free_stream(void)
{
	mr t;
	void *x, *y;
	mr_open(&t, "rmm-pool", "initial_pool_size:0", 0);
	uint64_t a = al(&t, 1024, 5, 0, &x);
	fr_on(&t, x, 7, 0);
	is_u64(al(&t, 1024, 7, 0, &y), a, "a block freed on stream 7 is in stream 7's list");
	is_u64(st(&t, "taken_from_other_stream"), 0, "... its own list: nothing taken from another stream");
	fr_on(&t, y, PT, 3);
	is_u64(al(&t, 1024, PT, 3, &x), a, "freed by thread 3 on stream 0x2: thread 3's list");
	fr_on(&t, x, PT, 4);
	is_u64(al(&t, 1024, PT, 4, &y), a, "freed by thread 4 on stream 0x2: thread 4's list serves thread 4");
	is_u64(st(&t, "taken_from_other_stream"), 0, "never from another stream's list");
	fr(&t, y);
	mr_close(&t);
}

/* the maximum pool size and the growth rule with it (size_to_grow) */
static void test_pool_maximum(void)
{
	mr t;
	void *x, *y;
	mr_open(&t, "rmm-pool", "initial_pool_size:0,maximum_pool_size:1MiB", 0);
	ok(al(&t, 2 * MiB, 0, 0, &x) == 0 && t.dev->num_alloc == 0, "a request above the maximum pool size fails without asking the upstream");
	al(&t, 1000, 0, 0, &x);
	is_u64(t.dev->reserved, 512 * KiB, "1000 bytes grow the pool by max(1024, 1 MiB / 2)");
	ok(al(&t, 600000, 0, 0, &y) == 0, "600000 bytes do not fit the 512 KiB the maximum leaves");
	al(&t, 400000, 0, 0, &y);
	is_u64(t.dev->reserved, 512 * KiB, "400000 bytes fit the free rest of the first block (523264 bytes): no growth");
	fr(&t, x), fr(&t, y);
	mr_close(&t);
}

/* empty_cache (allocsim's mapping; RMM releases only when destroyed): wholly free upstream blocks */
static void test_pool_empty_cache(void)
{
	mr t;
	void *x, *y;
	mr_open(&t, "rmm-pool", "initial_pool_size:1MiB,empty_cache_releases:True", 0);
	al(&t, 2 * MiB, 0, 0, &x);
	al(&t, 1000, 0, 0, &y);
	is_u64(t.dev->num_alloc, 2, "a second upstream block for 2 MiB");
	fr(&t, x);
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->reserved, MiB, "empty_cache releases the wholly free 2 MiB block, keeps the one in use");
	fr(&t, y);
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->reserved, 0, "and the other once it is free");
	al(&t, 1000, 0, 0, &x);
	is_u64(t.dev->reserved, 1024, "the pool grows again from nothing: max(1024, 0)");
	fr(&t, x);
	mr_close(&t);
	mr_open(&t, "rmm-pool", "initial_pool_size:1MiB", 0);
	al(&t, 2 * MiB, 0, 0, &x);
	fr(&t, x);
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->reserved, 3 * MiB, "by default empty_cache keeps the whole pool (RMM has no such call: release() is protected)");
	mr_close(&t);
}

/* ---- rmm-arena (arena_mr_tests.cpp; a 4 MiB arena like ArenaTest's fixture) ---- */

static void test_arena(void)
{
	mr t;
	void *h[8], *x, *y;
	/* ArenaTest.ArenaAllocate: 1 MiB at the arena's start, then 256 bytes in a new superblock */
	mr_open(&t, "rmm-arena", "arena_size:4MiB", 0);
	uint64_t base = al(&t, MiB, PT, 1, &h[0]);
	is_u64(t.dev->reserved, 4 * MiB, "the arena is one upstream allocation of arena_size");
	is_u64(al(&t, 256, PT, 1, &h[1]), base + MiB, "ArenaAllocate: 256 bytes go to a second superblock at +1 MiB");
	fr(&t, h[0]), fr(&t, h[1]);
	mr_close(&t);

	/* ArenaDeallocateMergePrevious / MergeNext: the two freed 256-byte blocks serve 512 */
	for (int order = 0; order < 2; order++) {
		mr_open(&t, "rmm-arena", "arena_size:4MiB", 0);
		base = al(&t, 256, PT, 1, &h[0]);
		al(&t, 256, PT, 1, &h[1]);
		al(&t, 256, PT, 1, &h[2]);
		fr(&t, h[order]);
		fr(&t, h[1 - order]);
		is_u64(al(&t, 512, PT, 1, &x), base, "ArenaDeallocateMerge%s: 512 bytes at the start", order ? "Next" : "Previous");
		fr(&t, x), fr(&t, h[2]);
		mr_close(&t);
	}

	/* GlobalArenaAcquire: each thread's arena acquires a 1 MiB superblock in address order; the
	 * last 1 MiB is taken whole. A fifth thread finds the global arena empty: defragment() hands
	 * every arena's superblocks back and the first one with room serves it. */
	mr_open(&t, "rmm-arena", "arena_size:4MiB", 0);
	base = al(&t, 256, PT, 1, &h[0]);
	is_u64(al(&t, KiB, PT, 2, &h[1]), base + MiB, "GlobalArenaAcquire: thread 2's superblock at +1 MiB");
	is_u64(al(&t, 512, PT, 3, &h[2]), base + 2 * MiB, "thread 3's at +2 MiB");
	is_u64(al(&t, 512, PT, 4, &h[3]), base + 3 * MiB, "thread 4's at +3 MiB (the last 1 MiB, not split)");
	is_u64(st(&t, "global_superblocks"), 0, "the global arena is empty (acquire(512) is invalid)");
	is_u64(al(&t, 512, PT, 5, &h[4]), base + 256, "thread 5: defragmented, the superblock at the start has room after thread 1's block");
	is_u64(st(&t, "defragmentations"), 1, "one defragmentation");
	is_u64(st(&t, "thread_arenas"), 5, "five per-thread arenas");
	for (int i = 0; i < 5; i++)
		fr(&t, h[i]);
	mr_close(&t);

	/* GlobalArenaAllocate / Deallocate / DeallocateAlignUp: above 1 MiB the global arena serves */
	mr_open(&t, "rmm-arena", "arena_size:4MiB", 0);
	base = al(&t, 2 * MiB, 0, 0, &x);
	ok(checked(&t), "GlobalArenaAllocate: 2 MiB");
	fr(&t, x);
	is_u64(al(&t, 2 * MiB, 0, 0, &x), base, "GlobalArenaDeallocate: freed and allocated again at the same place");
	fr(&t, x);
	is_u64(al(&t, MiB + 256, 0, 0, &x), base, "GlobalArenaDeallocateAlignUp: 1 MiB + 256");
	is_u64(al(&t, MiB + 512, 0, 0, &y), base + MiB + 256, "1 MiB + 512 right after it (superblocks split at the size)");
	fr(&t, x), fr(&t, y);
	is_u64(st(&t, "global_superblocks"), 1, "both freed: the empty superblocks merged back into one");
	is_u64(al(&t, 4 * MiB, 0, 0, &x), base, "the whole arena at the start");
	ok(al(&t, 256, 0, 0, &y) == 0, "nothing more fits (rmm::out_of_memory, No room in arena)");
	fr(&t, x);
	mr_close(&t);

	/* ArenaDefragment: four empty superblocks in a thread arena; a 4 MiB request defragments */
	mr_open(&t, "rmm-arena", "arena_size:4MiB", 0);
	for (int i = 0; i < 4; i++)
		al(&t, MiB, PT, 1, &h[i]);
	for (int i = 0; i < 4; i++)
		fr(&t, h[i]);
	is_u64(st(&t, "superblocks"), 4, "ArenaDefragment: four empty superblocks stay in the thread's arena");
	is_u64(al(&t, 4 * MiB, PT, 1, &x), base, "ArenaDefragment: 4 MiB after the defragmentation merged them");
	is_u64(st(&t, "defragmentations"), 1, "one defragmentation");
	fr(&t, x);
	mr_close(&t);

	/* PerThreadToStreamDealloc: a 2 MiB arena */
	mr_open(&t, "rmm-arena", "arena_size:2MiB", 0);
	void *thread_ptr, *sp, *p1, *p2;
	base = al(&t, 256, PT, 1, &thread_ptr);
	is_u64(al(&t, 32 * KiB, 9, 1, &sp), base + MiB, "PerThreadToStreamDealloc: stream 9's arena takes the other superblock");
	fr(&t, sp);
	is_u64(al(&t, MiB, 0, 1, &p1), base + MiB, "stream 0 defragments and acquires the empty superblock");
	is_u64(al(&t, 32 * KiB, 0, 1, &p2), base + 256, "stream 0 then acquires the thread's former superblock");
	fr(&t, thread_ptr);
	ok(checked(&t), "the thread's block, now in a stream arena's superblock, is freed there");
	fr(&t, p1), fr(&t, p2);
	mr_close(&t);

	/* DumpLogOnFailure: a 1 MiB arena, four threads allocate and free 32 KiB, then 8 MiB fails */
	mr_open(&t, "rmm-arena", "arena_size:1MiB", 0);
	int good = 1;
	for (uint64_t th = 1; th <= 4; th++) {
		good &= al(&t, 32 * KiB, PT, th, &x) != 0;
		fr(&t, x);
	}
	ok(good, "DumpLogOnFailure: each thread gets its 32 KiB (defragmenting for threads 2..4)");
	ok(al(&t, 8 * MiB, PT, 1, &x) == 0, "DumpLogOnFailure: 8 MiB fails");
	is_u64(st(&t, "defragmentations"), 4, "three defragmentations for the threads and one for the failed request");
	mr_close(&t);

	ok(mr_open(&t, "rmm-arena", "arena_size:256", 0) != 0 && strstr(t.msg, "Arena size smaller than minimum superblock size"),
		"SizeSmallerThanSuperblockSize (%s)", t.msg);
	mr_open(&t, "rmm-arena", "", 10 * MiB);
	is_u64(t.dev->reserved, 5 * MiB, "the default arena is half the free memory");
	mr_close(&t);
	/* empty_cache: defragment, and the arena goes back when nothing is allocated */
	mr_open(&t, "rmm-arena", "arena_size:4MiB", 0);
	al(&t, 256, PT, 1, &x);
	fr(&t, x);
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->reserved, 4 * MiB, "by default empty_cache keeps the arena (RMM has no such call)");
	mr_close(&t);
	mr_open(&t, "rmm-arena", "arena_size:4MiB,empty_cache_releases:True", 0);
	al(&t, 256, PT, 1, &x);
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->reserved, 4 * MiB, "empty_cache keeps the arena while a block is allocated");
	fr(&t, x);
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->reserved, 0, "and releases it when nothing is");
	ok(al(&t, 256, PT, 1, &x) != 0 && t.dev->reserved == 4 * MiB, "the next request allocates the arena again");
	fr(&t, x);
	mr_close(&t);
}

/* ---- rmm-binning ---- */

static void test_binning(void)
{
	mr t;
	void *a, *b, *c, *d, *x;
	/* bins 2^10 .. 2^12: each fixed_size_memory_resource preallocates 128 blocks at construction */
	mr_open(&t, "rmm-binning", "min_size_exponent:10,max_size_exponent:12", 0);
	is_u64(t.dev->reserved, 128 * (1024 + 2048 + 4096), "three bins preallocate 128 blocks each");
	is_u64(t.dev->num_alloc, 3, "one upstream chunk per bin");
	uint64_t a1 = al(&t, 512, 0, 0, &a);
	is_u64(al(&t, 1024, 0, 0, &b), a1 + 1024, "512 and 1024 bytes: the 1024-byte bin (lower_bound), consecutive blocks");
	uint64_t c1 = al(&t, 1025, 0, 0, &c);
	ok(c1 < a1 || c1 >= a1 + 128 * 1024, "1025 bytes: the 2048-byte bin");
	al(&t, 5000, 0, 0, &d);
	is_u64(t.dev->reserved, 128 * 7168 + 5000, "5000 bytes (above every bin): the upstream, unaligned");
	fr(&t, d);
	is_u64(t.dev->reserved, 128 * 7168, "and back to it at the free");
	fr(&t, a);
	fr(&t, b);
	is_u64(al(&t, 1000, 0, 0, &x), a1 + 2 * 1024, "a freed block goes to the back of the list: the next one in order comes first");
	fr(&t, x), fr(&t, c);
	mr_close(&t);

	/* exponents below 8 give 256-byte bins; a size already present is not added again */
	mr_open(&t, "rmm-binning", "min_size_exponent:7,max_size_exponent:9", 0);
	is_u64(st(&t, "bins"), 2, "2^7 and 2^8 both align to 256: two bins (256, 512)");
	mr_close(&t);

	/* the default: no bins, every request to the upstream */
	mr_open(&t, "rmm-binning", "", 0);
	al(&t, 100, 0, 0, &x);
	ok(st(&t, "bins") == 0 && t.dev->reserved == 100 && t.dev->num_alloc == 1, "no bins by default (RMM's and Python's): 100 bytes straight upstream");
	fr(&t, x);
	mr_close(&t);

	/* streams and growth: a two-block chunk; stream 5 takes the legacy list's front block */
	mr_open(&t, "rmm-binning", "min_size_exponent:10,max_size_exponent:10,blocks_to_preallocate:2,empty_cache_releases:True", 0);
	uint64_t s0 = al(&t, 1024, 5, 0, &a);
	uint64_t s1 = al(&t, 1024, 5, 0, &b);
	is_u64(s1, s0 + 1024, "stream 5 takes the legacy list's blocks in order");
	is_u64(t.dev->num_alloc, 1, "both from the preallocated chunk");
	uint64_t c2 = al(&t, 1024, 5, 0, &c);
	is_u64(t.dev->num_alloc, 2, "the third request allocates a second chunk, appended to stream 5's list; it takes the front");
	fr(&t, a);
	fr(&t, b);
	is_u64(al(&t, 1024, 5, 0, &x), c2 + 1024, "stream 5's list: the new chunk's second block first, then the freed ones at the back");
	is_u64(al(&t, 1024, 5, 0, &d), s0, "then the first block freed");
	void *e;
	is_u64(al(&t, 1024, 0, 0, &e), s1, "stream 0 (legacy, empty list) takes the front of stream 5's list");
	is_u64(t.dev->num_alloc, 2, "no third chunk");
	fr(&t, x), fr(&t, c), fr(&t, d), fr(&t, e);
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->reserved, 0, "empty_cache_releases:True: empty_cache returns the chunks whose blocks are all free");
	mr_close(&t);
	mr_open(&t, "rmm-binning", "min_size_exponent:10,max_size_exponent:10,blocks_to_preallocate:2", 0);
	al(&t, 1024, 5, 0, &a);
	fr(&t, a);
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->reserved, 2048, "by default empty_cache keeps every chunk (RMM has no such call)");
	mr_close(&t);

	/* a free names its stream: the block goes to the back of that stream's list */
	mr_open(&t, "rmm-binning", "min_size_exponent:10,max_size_exponent:10,blocks_to_preallocate:2", 0);
	s0 = al(&t, 1024, 0, 0, &a);
	fr_on(&t, a, 9, 0);
	is_u64(al(&t, 1024, 0, 0, &b), s0 + 1024, "stream 0's list keeps its other block first");
	is_u64(al(&t, 1024, 0, 0, &c), s0, "then takes stream 9's front block (the one freed on stream 9)");
	fr(&t, b), fr(&t, c);
	mr_close(&t);

	ok(mr_open(&t, "rmm-binning", "min_size_exponent:18,max_size_exponent:22", 64 * MiB) != 0 && strstr(t.msg, "cannot preallocate"),
		"the bins' preallocation (992 MiB for 2^18..2^22) refused by a 64 MiB device fails the construction (%s)", t.msg);

	/* stacked on rmm-pool (binning_memory_resource over pool_memory_resource) */
	mr_open(&t, "rmm-binning>rmm-pool", "min_size_exponent:10,max_size_exponent:11;initial_pool_size:1MiB", 0);
	ok(t.p != NULL, "rmm-binning>rmm-pool is created (%s)", t.msg);
	if (t.p) {
		is_u64(t.dev->num_alloc, 1, "the stack's device holds the one 1 MiB pool: the bins' chunks come from the pool");
		al(&t, 4096, 0, 0, &x);
		ok(t.dev->num_alloc == 1 && t.dev->reserved == MiB, "4096 bytes (above the bins) come from the pool too");
		fr(&t, x);
		mr_close(&t);
	}
}

/* random workloads with check() after every call, for configurations the conformance test's
 * defaults do not reach (bins, maxima, per-thread streams, small arenas) */
static void test_random(const char *name, const char *conf, uint64_t cap)
{
	mr t;
	if (mr_open(&t, name, conf, cap)) {
		ok(0, "%s -c '%s': created (%s)", name, conf, t.msg);
		return;
	}
	gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(rng, 5);
	void *live[128] = { 0 };
	int good = 1, ooms = 0;
	for (int i = 0; i < 20000 && good; i++) {
		size_t s = gsl_rng_uniform_int(rng, 128);
		if (live[s]) {
			fr(&t, live[s]);
			live[s] = NULL;
		} else {
			double u = gsl_rng_uniform(rng);
			uint64_t size = u < 0.7 ? 1 + gsl_rng_uniform_int(rng, 64 * KiB) : u < 0.95 ? 1 + gsl_rng_uniform_int(rng, 2 * MiB)
				: 1 + gsl_rng_uniform_int(rng, 16 * MiB);
			uint64_t stream = gsl_rng_uniform_int(rng, 4), thread = 1 + gsl_rng_uniform_int(rng, 3);
			if (!al(&t, size, stream, thread, &live[s]))
				ooms++;
		}
		if (gsl_rng_uniform(rng) < 0.002)
			t.p->ops->empty_cache(t.p);
		good = checked(&t);
	}
	ok(good, "%s -c '%s': 20000 random calls with check() after each (%d out of memory)", name, conf, ooms);
	for (int s = 0; s < 128; s++)
		if (live[s])
			fr(&t, live[s]);
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->reserved, 0, "%s -c '%s': everything freed, empty_cache returns every byte", name, conf);
	gsl_rng_free(rng);
	mr_close(&t);
}

/* destroying a resource that still holds many free blocks and superblocks (found by ASan: the trees
 * were freed while being walked) */
static void test_destroy_full(const char *name, const char *conf)
{
	mr t;
	static void *h[2000];
	mr_open(&t, name, conf, 0);
	for (int i = 0; i < 2000; i++)
		al(&t, (uint64_t)(1 + i % 7) * 40 * KiB, (uint64_t)(i % 3), (uint64_t)(i % 4), &h[i]);
	for (int i = 0; i < 2000; i += 2)
		fr(&t, h[i]);
	ok(checked(&t), "%s: 1000 free blocks among 1000 live ones on three streams", name);
	t.p->ops->destroy(t.p); /* with live blocks, as at a replay's end */
	as_device_destroy(t.dev);
}

int main(void)
{
	test_pool_force_growth();
	test_pool_sizes();
	test_pool_best_fit();
	test_pool_streams();
	test_pool_free_stream();
	test_pool_maximum();
	test_pool_empty_cache();
	test_arena();
	test_binning();
	test_destroy_full("rmm-pool", "initial_pool_size:64MiB");
	test_destroy_full("rmm-arena", "arena_size:1GiB");
	test_destroy_full("rmm-binning", "min_size_exponent:15,max_size_exponent:18,blocks_to_preallocate:8");
	/* empty_cache_releases:True: the what-if release is exercised too (RMM itself has no such call) */
	test_random("rmm-pool", "initial_pool_size:0,maximum_pool_size:64MiB,empty_cache_releases:True", 0);
	test_random("rmm-pool", "initial_pool_size:8MiB,empty_cache_releases:True", 48 * MiB);
	test_random("rmm-arena", "arena_size:48MiB,empty_cache_releases:True", 0);
	test_random("rmm-arena", "ptds:True,empty_cache_releases:True", 40 * MiB);
	test_random("rmm-binning", "min_size_exponent:8,max_size_exponent:14,blocks_to_preallocate:16,empty_cache_releases:True", 64 * MiB);
	test_random("rmm-binning>rmm-pool", "min_size_exponent:10,max_size_exponent:16,empty_cache_releases:True;initial_pool_size:4MiB,empty_cache_releases:True", 64 * MiB);
	return done_testing();
}
