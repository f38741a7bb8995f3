/* t_bfc.c - the bfc policy against the cases of TensorFlow's own BFC tests (gpu_bfc_allocator_test.cc:
 * NoDups, ExerciseCoalescing, AllocateZeroBufSize, AllocatedVsRequested, TestCustomMemoryLimit,
 * ForceAllowGrowth, PhysicalAllocatorOomsFragmentation, TestRegionDeallocation), the split rule,
 * best fit by (size, address), and what one device_put of n bytes allocated in JAX 0.11.2 on the H200
 * (scripts/replay_jax.py --probe). */
#include "tap.h"
#include "polstat.h"
#include "util/common.h"
#include "device/device.h"
#include "policies/policy.h"
#include <stdlib.h>

#define MiB (1ULL << 20)

typedef struct bfc_t {
	as_device *dev;
	as_policy *pol;
	as_counters ctr;
} bfc_t;

static int open_bfc(bfc_t *t, const char *conf, uint64_t capacity)
{
	as_err err = { 0, "" };
	t->dev = as_sim_device_new(capacity, ADDR_AUTO);
	t->ctr.alloc_retries = 0;
	if (as_policy_find("bfc")->create(&t->pol, conf, t->dev, &t->ctr, &err)) {
		printf("# %s\n", err.msg);
		as_device_destroy(t->dev);
		return -1;
	}
	return 0;
}

static void close_bfc(bfc_t *t)
{
	as_err err = { 0, "" };
	ok(t->pol->ops->check(t->pol, &err) == 0, "invariants hold at the end %s", err.msg);
	t->pol->ops->destroy(t->pol);
	as_device_destroy(t->dev);
}

static uint64_t st(bfc_t *t, const char *key) { return policy_stat_u64(t->pol, key); }

/* malloc; returns the handle, NULL on OOM; block size and address through the pointers */
static void *al(bfc_t *t, uint64_t n, uint64_t *bs, uint64_t *addr)
{
	void *h;
	uint64_t b, a;
	as_request rq = { .size = n, .time_us = -1 };
	if (t->pol->ops->malloc(t->pol, &rq, &h, &b, &a))
		return NULL;
	if (bs)
		*bs = b;
	if (addr)
		*addr = a;
	return h;
}

/* free; a NULL handle (a request that failed) is skipped */
static void fr(bfc_t *t, void *h)
{
	if (h)
		t->pol->ops->free(t->pol, h);
}

static void check_stats(bfc_t *t, uint64_t num_allocs, uint64_t in_use, uint64_t peak, uint64_t largest, const char *what)
{
	is_u64(st(t, "num_allocs"), num_allocs, "%s: num_allocs", what);
	is_u64(st(t, "bytes_in_use"), in_use, "%s: bytes_in_use", what);
	is_u64(st(t, "peak_bytes_in_use"), peak, "%s: peak_bytes_in_use", what);
	is_u64(st(t, "largest_alloc_size"), largest, "%s: largest_alloc_size", what);
}

/* NoDups: 1..1023 bytes, each rounded to 256, none overlapping. */
static void test_no_dups(const char *conf)
{
	bfc_t t;
	if (open_bfc(&t, conf, 0))
		return;
	static void *h[1024];
	static uint64_t addr[1024];
	int overlap = 0;
	for (uint64_t s = 1; s < 1024; s++)
		h[s] = al(&t, s, NULL, &addr[s]);
	for (uint64_t s = 2; s < 1024; s++)
		for (uint64_t r = 1; r < s; r++)
			if (addr[r] < addr[s] + s && addr[s] < addr[r] + r)
				overlap = 1;
	ok(!overlap, "NoDups (%s): no two of 1023 blocks overlap", conf);
	check_stats(&t, 1023, 654336, 654336, 1024, "NoDups");
	for (uint64_t s = 1; s < 1024; s++)
		fr(&t, h[s]);
	check_stats(&t, 1023, 0, 654336, 1024, "NoDups after the frees");
	close_bfc(&t);
}

/* ExerciseCoalescing: the same four sizes 1024 times neither grow the pool nor move the first block. */
static void test_coalescing(void)
{
	bfc_t t;
	if (open_bfc(&t, "memory_limit:1GiB,allow_growth:False", 0))
		return;
	uint64_t first, again, pool;
	fr(&t, al(&t, 4096, NULL, &first));
	check_stats(&t, 1, 0, 4096, 4096, "ExerciseCoalescing, one block");
	pool = st(&t, "pool_bytes");
	for (int i = 0; i < 1024; i++) {
		void *a = al(&t, 4096, NULL, NULL), *b = al(&t, 8 * MiB, NULL, NULL), *c = al(&t, 16384, NULL, NULL),
		     *d = al(&t, 40 * MiB, NULL, NULL);
		fr(&t, a);
		fr(&t, b);
		fr(&t, c);
		fr(&t, d);
	}
	check_stats(&t, 4097, 0, 4096 + 8 * MiB + 16384 + 40 * MiB, 40 * MiB, "ExerciseCoalescing");
	is_u64(st(&t, "pool_bytes"), pool, "ExerciseCoalescing: the pool did not grow (one region of 1 GiB)");
	fr(&t, al(&t, 4096, NULL, &again));
	is_u64(again, first, "ExerciseCoalescing: everything coalesced, the next block starts where the first did");
	close_bfc(&t);
}

static void test_small_cases(void)
{
	bfc_t t;
	uint64_t bs;
	if (open_bfc(&t, "memory_limit:1GiB", 0))
		return;
	void *h = al(&t, 0, &bs, NULL);
	ok(h != NULL && bs == 0, "AllocateZeroBufSize: a 0-byte request holds nothing");
	is_u64(st(&t, "num_allocs"), 0, "AllocateZeroBufSize: and is not counted");
	is_u64(st(&t, "pool_bytes"), 0, "AllocateZeroBufSize: and does not extend the pool");
	fr(&t, h);
	h = al(&t, 4, &bs, NULL);
	is_u64(bs, 256, "AllocatedVsRequested: 4 bytes hold 256");
	fr(&t, h);
	close_bfc(&t);

	if (open_bfc(&t, "memory_limit:2MiB", 0))
		return;
	h = al(&t, 256, NULL, NULL);
	ok(h != NULL, "TestCustomMemoryLimit: 256 bytes fit a 2 MiB limit");
	ok(al(&t, 8 * MiB, NULL, NULL) == NULL, "TestCustomMemoryLimit: 8 MiB do not");
	fr(&t, h);
	close_bfc(&t);

	if (open_bfc(&t, "memory_limit:2GiB", 0))
		return;
	is_u64(st(&t, "curr_region_allocation_bytes"), 2 * MiB, "ForceAllowGrowth: growth starts at 2 MiB regions");
	close_bfc(&t);
	if (open_bfc(&t, "memory_limit:2GiB,allow_growth:False", 0))
		return;
	is_u64(st(&t, "curr_region_allocation_bytes"), 2048 * MiB, "ForceAllowGrowth: without growth, one region of the limit");
	close_bfc(&t);
	if (open_bfc(&t, "memory_limit:1000", 0))
		return;
	is_u64(st(&t, "curr_region_allocation_bytes"), 1024, "a limit under 2 MiB: the first region is the rounded limit");
	close_bfc(&t);
	if (open_bfc(&t, "mem_fraction:0.5", 0))
		return;
	is_u64(st(&t, "bytes_limit"), AS_H200_TOTAL_MEMORY / 2, "mem_fraction: the limit is the fraction of the device's memory");
	close_bfc(&t);
}

/* 128 blocks of 4 MiB, all but the last freed: regions 4,4,8,...,256 MiB; the last holds the live one. */
static void fill_and_free(bfc_t *t)
{
	void *h[128];
	for (int i = 0; i < 128; i++)
		h[i] = al(t, 4 * MiB, NULL, NULL);
	for (int i = 0; i < 127; i++)
		fr(t, h[i]);
}

static void test_regions(void)
{
	bfc_t t;
	if (open_bfc(&t, "memory_limit:512MiB", 0))
		return;
	fill_and_free(&t);
	is_u64(st(&t, "regions"), 8, "region growth: 128 x 4 MiB make regions of 4, 4, 8, 16, 32, 64, 128 and 256 MiB");
	is_u64(st(&t, "pool_bytes"), 512 * MiB, "region growth: 512 MiB in all");
	ok(al(&t, 508 * MiB, NULL, NULL) == NULL, "PhysicalAllocatorOomsFragmentation: 508 MiB do not fit the freed regions");
	close_bfc(&t);

	if (open_bfc(&t, "memory_limit:2GiB", 0))
		return;
	fill_and_free(&t);
	ok(al(&t, 1792 * MiB, NULL, NULL) == NULL, "no garbage collection: 1792 MiB fail with 1536 MiB left to extend");
	close_bfc(&t);

	if (open_bfc(&t, "memory_limit:2GiB,garbage_collection:True", 0))
		return;
	fill_and_free(&t);
	ok(al(&t, 1792 * MiB, NULL, NULL) != NULL, "garbage collection: releasing the seven free regions makes room for 1792 MiB");
	is_u64(st(&t, "regions_freed"), 7, "TestRegionDeallocation: seven free regions released, one left with the live block");
	is_u64(st(&t, "pool_bytes"), 2048 * MiB, "garbage collection: the 256 MiB region and a new 1792 MiB one");
	is_u64(t.ctr.alloc_retries, 1, "garbage collection counts as a retry");
	close_bfc(&t);

	if (open_bfc(&t, "memory_limit:2GiB,empty_cache_releases:True", 0))
		return;
	fill_and_free(&t);
	t.pol->ops->empty_cache(t.pol);
	is_u64(st(&t, "regions"), 1, "empty_cache_releases:True: one region left (TestRegionDeallocation)");
	is_u64(st(&t, "pool_bytes"), 256 * MiB, "empty_cache: the region with the live block stays");
	close_bfc(&t);
	if (open_bfc(&t, "memory_limit:2GiB", 0))
		return;
	fill_and_free(&t);
	t.pol->ops->empty_cache(t.pol);
	is_u64(st(&t, "pool_bytes"), 512 * MiB, "by default (JAX has no such call) empty_cache keeps every region");
	is_u64(st(&t, "regions_freed"), 0, "by default empty_cache frees no region");
	close_bfc(&t);
}

/* What one device_put of n bytes allocated in JAX 0.11.2 on the H200, each freed before the next:
 * chunk bytes and pool growth (scripts/replay_jax.py --probe; doc/policies.md). */
static void test_jax_probe(void)
{
	static const struct { uint64_t n, chunk, pool_growth; } p[] = {
		{ 1, 256, 2 * MiB }, { 255, 256, 0 }, { 256, 256, 0 }, { 257, 512, 0 }, { 1000, 1024, 0 }, { 4096, 4096, 0 },
		{ MiB, MiB, 0 }, { MiB + 1, 2 * MiB, 0 }, { 2 * MiB - 255, 2 * MiB, 0 }, { 2 * MiB, 2 * MiB, 0 },
		{ 2 * MiB + 1, 4 * MiB, 4 * MiB }, { 3 * MiB, 4 * MiB, 0 }, { 5 * MiB, 8 * MiB, 8 * MiB }, { 33 * MiB, 64 * MiB, 64 * MiB },
	};
	bfc_t t;
	if (open_bfc(&t, "memory_limit:112583507968", 0))
		return;
	for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
		uint64_t pool = st(&t, "pool_bytes"), bs = 0;
		void *h = al(&t, p[i].n, &bs, NULL);
		is_u64(bs, p[i].chunk, "JAX probe: %" PRIu64 " bytes hold %" PRIu64, p[i].n, p[i].chunk);
		is_u64(st(&t, "pool_bytes") - pool, p[i].pool_growth, "JAX probe: %" PRIu64 " bytes grow the pool by %" PRIu64, p[i].n, p[i].pool_growth);
		if (h)
			fr(&t, h);
	}
	is_u64(st(&t, "largest_free_block_bytes"), 64 * MiB, "JAX probe: the largest free block is the 64 MiB region");
	close_bfc(&t);
}

/* The split rule and best fit by (size, address), in one region of 1 GiB. */
static void test_split_and_fit(void)
{
	bfc_t t;
	uint64_t bs, a[6], x;
	if (open_bfc(&t, "memory_limit:1GiB,allow_growth:False", 0))
		return;
	void *big = al(&t, 512 * MiB, NULL, NULL), *h;
	void *rest = al(&t, 512 * MiB, NULL, NULL);
	fr(&t, big);
	h = al(&t, 300 * MiB, &bs, NULL);
	is_u64(bs, 300 * MiB, "split: 212 MiB left over (>= 128 MiB) are split off a 512 MiB chunk");
	fr(&t, h);
	h = al(&t, 400 * MiB, &bs, NULL);
	is_u64(bs, 512 * MiB, "no split: 112 MiB left over (< 128 MiB, chunk < 2 x request) stay with the block");
	fr(&t, h);
	h = al(&t, 256 * MiB, &bs, NULL);
	is_u64(bs, 256 * MiB, "split: a chunk of twice the request is split");
	fr(&t, h);
	fr(&t, rest);
	close_bfc(&t);

	if (open_bfc(&t, "memory_limit:1GiB,allow_growth:False,fragmentation_fraction:0.5", 0))
		return;
	big = al(&t, 512 * MiB, NULL, NULL);
	rest = al(&t, 512 * MiB, NULL, NULL);
	fr(&t, big);
	h = al(&t, 300 * MiB, &bs, NULL);
	is_u64(bs, 512 * MiB, "fragmentation_fraction:0.5: 212 MiB left over are under the 512 MiB cap, no split");
	fr(&t, h);
	fr(&t, rest);
	close_bfc(&t);

	if (open_bfc(&t, "memory_limit:1GiB,allow_growth:False", 0))
		return;
	void *hs[6];
	uint64_t sz[6] = { MiB, 64 * 1024, MiB, 64 * 1024, 3 * MiB, 64 * 1024 };
	for (int i = 0; i < 6; i++)
		hs[i] = al(&t, sz[i], NULL, &a[i]);
	fr(&t, hs[2]);
	fr(&t, hs[0]);
	fr(&t, hs[4]);
	h = al(&t, MiB - 1000, &bs, &x);
	is_u64(x, a[0], "best fit: of two free 1 MiB chunks the lower address serves first");
	is_u64(bs, MiB, "best fit: the 1 MiB chunk, not the 3 MiB one, nor the large tail");
	void *h2 = al(&t, 2 * MiB, &bs, &x);
	is_u64(x, a[4], "best fit: 2 MiB go to the 3 MiB chunk (bin 13), before the tail of the region");
	is_u64(bs, 3 * MiB, "best fit: and hold all 3 MiB (less than twice the request)");
	fr(&t, h);
	fr(&t, h2);
	for (int i = 0; i < 6; i++)
		if (i != 0 && i != 2 && i != 4)
			fr(&t, hs[i]);
	is_u64(st(&t, "largest_free_block_bytes"), 1024 * MiB, "merge: everything freed coalesces into the whole region");
	close_bfc(&t);
}

/* Extend's back-off. The sizes are the cudaMalloc attempts XLA logged in JAX 0.11.2 on the H200 when
 * a 16 GiB region did not fit (traces/README.md, jax-h200-contended.csv): 90% each time, in float. */
static const uint64_t backpedal_real[] = {
	17179869184ULL, 15461881856ULL, 13915693056ULL, 12524123136ULL, 11271710720ULL, 10144539648ULL,
	9130085376ULL, 8217076736ULL, 7395368960ULL, 6655832064ULL, 5990248448ULL, 5391223296ULL, 4852100608ULL,
	4366890496ULL, 3930201344ULL, 3537181184ULL, 3183462912ULL, 2865116672ULL, 2578605056ULL, 2320744448ULL,
	2088669952ULL, 1879802880ULL, 1691822592ULL, 1522640384ULL,
};

static void test_backpedal(void)
{
	bfc_t t;
	uint64_t bs;
	/* a device of 1.5 GiB: every attempt above it fails, the first one under it is the region */
	if (open_bfc(&t, "memory_limit:16GiB,allow_growth:False", 1536 * MiB))
		return;
	void *h = al(&t, 1450618000, &bs, NULL);
	ok(h != NULL, "backpedal: a 16 GiB region backs off until the 1.5 GiB device holds it");
	is_u64(st(&t, "pool_bytes"), backpedal_real[23], "backpedal: the region is XLA's 24th attempt, 1522640384 bytes");
	is_u64(t.dev->num_failed, 23, "backpedal: after XLA's 23 failed attempts");
	fr(&t, h);
	close_bfc(&t);
	/* 1.4 GiB: the next step (1370376448) is below the rounded request (1450618112): out of memory */
	if (open_bfc(&t, "memory_limit:16GiB,allow_growth:False", 1400 * MiB))
		return;
	ok(al(&t, 1450618000, &bs, NULL) == NULL, "backpedal: below the request the allocation fails, as XLA's did");
	is_u64(t.dev->num_failed, 24, "backpedal: after all 24 of XLA's attempts");
	is_u64(st(&t, "pool_bytes"), 0, "backpedal: nothing reserved");
	close_bfc(&t);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_no_dups("memory_limit:1GiB,allow_growth:False");
	test_no_dups("memory_limit:1GiB");
	test_coalescing();
	test_small_cases();
	test_regions();
	test_jax_probe();
	test_split_and_fit();
	test_backpedal();
	return done_testing();
}
