/* t_cupy.c - the cupy policy against CuPy's own pool tests (tests/cupy_tests/cuda_tests/test_memory.py
 * at v14.2.0, TestSingleDeviceMemoryPool), driven through the policy interface, plus random
 * workloads under the invariant check. */
#include "tap.h"
#include "polstat.h"
#include "util/common.h"
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include <gsl/gsl_rng.h>
#include <stdlib.h>

#define U 512ULL /* memory._allocation_unit_size */

typedef struct pool {
	as_device *dev;
	as_counters ctr;
	as_policy *p;
} pool;

static int pool_open(pool *t, const char *conf, uint64_t capacity)
{
	as_err err = { 0, "" };
	t->dev = as_sim_device_new(capacity, ADDR_MODEL);
	t->ctr.alloc_retries = 0;
	int rc = as_policy_create(as_policy_find("cupy"), &t->p, conf, t->dev, &t->ctr, &err);
	if (rc)
		printf("# %s\n", err.msg);
	return rc;
}

static void pool_close(pool *t)
{
	as_err err = { 0, "" };
	int rc = t->p->ops->check(t->p, &err);
	ok(rc == 0, "invariants hold at the end%s%s", rc ? ": " : "", rc ? err.msg : "");
	t->p->ops->destroy(t->p);
	as_device_destroy(t->dev);
}

/* pool.malloc(size) on a stream: the pointer, 0 on out-of-memory; *h gets the handle. */
static uint64_t pmalloc(pool *t, uint64_t size, uint64_t stream, void **h)
{
	uint64_t bs, addr;
	as_request rq = { .size = size, .stream = stream, .time_us = -1 };
	if (t->p->ops->malloc(t->p, &rq, h, &bs, &addr)) {
		*h = NULL;
		return 0;
	}
	return addr;
}

static void pfree(pool *t, void *h)
{
	t->p->ops->free(t->p, h);
}

static uint64_t pstat(pool *t, const char *key) { return policy_stat_u64(t->p, key); }

static void test_round_size(void)
{
	pool t;
	pool_open(&t, "", 0);
	static const uint64_t req[] = { U - 1, U, U + 1, 1 }, got[] = { U, U, 2 * U, U };
	for (int i = 0; i < 4; i++) {
		void *h;
		uint64_t bs, addr;
		as_request rq = { .size = req[i], .time_us = -1 };
		t.p->ops->malloc(t.p, &rq, &h, &bs, &addr);
		is_u64(bs, got[i], "test_round_size: %" PRIu64 " bytes round to %" PRIu64, req[i], got[i]);
	}
	is_u64(t.dev->num_alloc, 4, "each request is its own cudaMalloc of the rounded size (no free chunk)");
	void *hb;
	uint64_t bsb, ab;
	as_request big = { .size = UINT64_MAX - 1, .time_us = -1 };
	ok(t.p->ops->malloc(t.p, &big, &hb, &bsb, &ab) == 1, "a request that cannot be rounded is out of memory");
	is_u64(pstat(&t, "total_bytes"), 5 * U, "total_bytes is the sum of the rounded sizes");
	pool_close(&t);
}

static void test_alloc_split_free_merge(void)
{
	pool t;
	void *p1, *p2, *p3, *head, *tail, *p;
	pool_open(&t, "", 0);
	uint64_t a1 = pmalloc(&t, U * 4, 0, &p1), a2 = pmalloc(&t, U * 4, 0, &p2), a3 = pmalloc(&t, U * 8, 0, &p3);
	ok(a1 && a2 && a3 && a1 != a2 && a1 != a3 && a2 != a3, "test_alloc: three allocations, three pointers");
	pfree(&t, p1), pfree(&t, p2), pfree(&t, p3);
	pool_close(&t);

	pool_open(&t, "", 0);
	uint64_t ptr = pmalloc(&t, U * 4, 0, &p);
	pfree(&t, p);
	uint64_t h = pmalloc(&t, U * 2, 0, &head), tl = pmalloc(&t, U * 2, 0, &tail);
	ok(h == ptr && tl == ptr + U * 2, "test_alloc_split: head at the freed pointer, tail 2 units on");
	is_u64(t.dev->num_alloc, 1, "test_alloc_split: both halves come from the one cudaMalloc");
	/* test_free_merge: merge head into tail, then tail into head */
	pfree(&t, tail);
	pfree(&t, head);
	is_u64(pmalloc(&t, U * 4, 0, &p), ptr, "test_free_merge: tail then head freed merge back into 4 units");
	pfree(&t, p);
	pmalloc(&t, U * 2, 0, &head), pmalloc(&t, U * 2, 0, &tail);
	pfree(&t, head);
	pfree(&t, tail);
	is_u64(pmalloc(&t, U * 4, 0, &p), ptr, "test_free_merge: head then tail freed merge back into 4 units");
	is_u64(t.dev->num_alloc, 1, "test_free_merge: no cudaMalloc after the first");
	pfree(&t, p);
	/* test_free_different_size */
	ok(pmalloc(&t, U * 8, 0, &p) != ptr, "test_free_different_size: 8 units do not fit the free 4");
	pfree(&t, p);
	pool_close(&t);
}

static void test_streams(void)
{
	pool t;
	void *p1, *p2, *p3, *p4;
	pool_open(&t, "", 0);
	uint64_t a1 = pmalloc(&t, U * 4, 0, &p1);
	pfree(&t, p1);
	ok(pmalloc(&t, U * 4, 7, &p2) != a1, "test_free_stream: a chunk freed on stream 0 is not reused on another stream");
	is_u64(pstat(&t, "total_bytes"), 8 * U, "test_total_bytes_stream: one free chunk per arena");
	is_u64(pstat(&t, "used_bytes"), 4 * U, "test_used_bytes_stream");
	is_u64(pstat(&t, "arenas"), 2, "one arena per stream");
	pfree(&t, p2);
	pool_close(&t);

	/* test_free_all_blocks_all_streams */
	pool_open(&t, "", 0);
	a1 = pmalloc(&t, U * 4, 0, &p1);
	pfree(&t, p1);
	uint64_t a2 = pmalloc(&t, U * 4, 7, &p2);
	pfree(&t, p2);
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->reserved, 0, "test_free_all_blocks_all_streams: both arenas released");
	uint64_t a3 = pmalloc(&t, U * 4, 0, &p3), a4 = pmalloc(&t, U * 4, 7, &p4);
	is_u64(t.dev->num_alloc, 4, "test_free_all_blocks_all_streams: both streams allocate afresh");
	(void)a1, (void)a2, (void)a3, (void)a4;
	pfree(&t, p3), pfree(&t, p4);
	pool_close(&t);
}

static void test_free_all_blocks(void)
{
	pool t;
	void *p, *head, *tail;
	pool_open(&t, "", 0);
	uint64_t a1 = pmalloc(&t, U * 4, 0, &p);
	pfree(&t, p);
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->num_free, 1, "test_free_all_blocks: the free chunk goes back to the device");
	pmalloc(&t, U * 4, 0, &p);
	is_u64(t.dev->num_alloc, 2, "test_free_all_blocks: the next request allocates afresh");
	(void)a1;
	pfree(&t, p);
	pool_close(&t);

	pool_open(&t, "", 0);
	pmalloc(&t, U * 4, 0, &p);
	pfree(&t, p);
	pmalloc(&t, U * 2, 0, &head);
	uint64_t tp = pmalloc(&t, U * 2, 0, &tail);
	pfree(&t, tail);
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->num_free, 0, "test_free_all_blocks_split: a split chunk is not released");
	is_u64(pmalloc(&t, U * 2, 0, &p), tp, "test_free_all_blocks_split: the free tail is reused");
	pfree(&t, p), pfree(&t, head);
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->reserved, 0, "merged back whole, it is released");
	pool_close(&t);
}

static void test_bytes(void)
{
	pool t;
	void *p1, *p2, *p3;
	pool_open(&t, "", 0);
	pmalloc(&t, U * 2, 0, &p1);
	is_u64(pstat(&t, "used_bytes"), 2 * U, "test_used_bytes: 2 units");
	pmalloc(&t, U * 4, 0, &p2);
	is_u64(pstat(&t, "used_bytes"), 6 * U, "test_used_bytes: 6 units");
	is_u64(pstat(&t, "free_bytes"), 0, "test_free_bytes: 0");
	pfree(&t, p2);
	is_u64(pstat(&t, "used_bytes"), 2 * U, "test_used_bytes: 2 units after a free");
	is_u64(pstat(&t, "free_bytes"), 4 * U, "test_free_bytes: 4 units");
	pfree(&t, p1);
	is_u64(pstat(&t, "free_bytes"), 6 * U, "test_free_bytes: 6 units");
	is_u64(pstat(&t, "total_bytes"), 6 * U, "test_total_bytes: 6 units");
	pmalloc(&t, U, 0, &p3);
	is_u64(pstat(&t, "used_bytes"), U, "test_used_bytes: 1 unit");
	is_u64(pstat(&t, "free_bytes"), 5 * U, "test_free_bytes: 5 units");
	is_u64(pstat(&t, "total_bytes"), 6 * U, "test_total_bytes: still 6 units");
	pfree(&t, p3);
	t.p->ops->empty_cache(t.p);
	is_u64(pstat(&t, "total_bytes"), 0, "test_total_bytes: 0 after free_all_blocks");
	is_u64(pstat(&t, "peak_used_bytes"), 6 * U, "peak used_bytes");
	pool_close(&t);
}

static void test_limits(void)
{
	pool t;
	void *p1, *p2, *p3;
	pool_open(&t, "limit:3072", 0);
	ok(pmalloc(&t, U * 5, 0, &p1) && pmalloc(&t, U, 0, &p2), "test_alloc_limit: 5 + 1 units fit the 6-unit limit");
	ok(!pmalloc(&t, U, 0, &p3), "test_alloc_limit: one more unit is out of memory");
	is_u64(t.ctr.alloc_retries, 1, "test_alloc_limit: it freed blocks and checked again first");
	pfree(&t, p1), pfree(&t, p2);
	pool_close(&t);

	pool_open(&t, "limit:3584", 0);
	pmalloc(&t, U * 5, 0, &p1), pmalloc(&t, U, 0, &p2);
	ok(pmalloc(&t, U, 0, &p3) != 0, "test_alloc_limit: with a 7-unit limit it fits");
	pfree(&t, p1), pfree(&t, p2), pfree(&t, p3);
	pool_close(&t);

	pool_open(&t, "limit:3072", 0);
	pmalloc(&t, U * 5, 0, &p1);
	pfree(&t, p1);
	ok(pmalloc(&t, U * 6, 0, &p2) != 0, "test_alloc_limit_fragmented (#7678): the free 5 units are released for 6");
	is_u64(t.dev->num_free, 1, "test_alloc_limit_fragmented: one release");
	uint64_t retries = t.ctr.alloc_retries;
	pfree(&t, p2);
	ok(!pmalloc(&t, U * 7, 0, &p3), "a request above the limit fails");
	is_u64(t.ctr.alloc_retries, retries, "... at once, without releasing anything");
	is_u64(t.dev->num_free, 1, "... and the cached chunk stays");
	pool_close(&t);

	pool_open(&t, "limit:50%", 0);
	is_u64(pstat(&t, "limit"), AS_H200_TOTAL_MEMORY / 2, "test_set_limit_fraction: 50%% of the device's memory");
	pool_close(&t);
	pool_open(&t, "limit:0", 0);
	is_u64(pstat(&t, "limit"), 0, "test_get_limit: 0 is no limit");
	pool_close(&t);
	static const char *const bad[] = { "limit:101%", "limit:-1", "limit:x%", "tie:lowest", "bins:2" };
	for (int i = 0; i < 5; i++) {
		as_err err = { 0, "" };
		as_policy *p;
		as_device *d = as_sim_device_new(0, ADDR_MODEL);
		as_counters c = { 0 };
		ok(as_policy_find("cupy")->create(&p, bad[i], d, &c, &err) && err.code == AS_EXIT_USAGE, "'%s' is refused: %s", bad[i], err.msg);
		as_device_destroy(d);
	}
}

/* cudaMalloc out of memory: free_all_blocks and retry, twice, then OutOfMemoryError. */
static void test_device_oom(void)
{
	pool t;
	void *a, *b, *c;
	pool_open(&t, "", 10 * U);
	pmalloc(&t, U * 4, 0, &a);
	pmalloc(&t, U * 4, 0, &b);
	pfree(&t, a);
	ok(pmalloc(&t, U * 6, 0, &c) != 0, "a failed cudaMalloc releases the free chunk and the retry succeeds");
	is_u64(t.dev->num_failed, 1, "one failed cudaMalloc");
	is_u64(t.ctr.alloc_retries, 1, "one retried request");
	void *d;
	ok(!pmalloc(&t, U * 8, 0, &d), "no room even after releasing: out of memory");
	is_u64(t.dev->num_failed, 4, "the request tried cudaMalloc three times");
	pfree(&t, b), pfree(&t, c);
	pool_close(&t);
}

/* Random workloads on three streams with every invariant checked after each event. */
static void test_random(const char *conf, uint64_t capacity)
{
	gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(rng, 7);
	as_err err = { 0, "" };
	as_device *dev = as_sim_device_new(capacity, ADDR_MODEL);
	as_engine e;
	int good = as_engine_init(&e, as_policy_find("cupy"), conf, dev, &err) == 0;
	e.check = 1;
	uint64_t live[256] = { 0 }, next = 1, ooms = 0;
	for (int i = 0; good && i < 20000; i++) {
		int slot = (int)gsl_rng_uniform_int(rng, 256);
		as_event ev = { .time_us = -1, .stream = gsl_rng_uniform_int(rng, 3), .slot = (uint32_t)slot };
		if (live[slot]) {
			ev.type = EV_FREE;
			ev.id = live[slot];
			live[slot] = 0;
		} else if (gsl_rng_uniform(rng) < 0.002) {
			ev.type = EV_EMPTY_CACHE;
		} else {
			ev.type = EV_ALLOC;
			ev.id = next++;
			ev.size = 1 + gsl_rng_uniform_int(rng, gsl_rng_uniform(rng) < 0.8 ? 64 << 10 : 32 << 20);
			live[slot] = ev.id;
		}
		if (as_engine_step(&e, &ev, &err)) {
			printf("# %s\n", err.msg);
			good = 0;
		}
	}
	for (int s = 0; good && s < 256; s++)
		if (live[s]) {
			as_event ev = { .type = EV_FREE, .id = live[s], .slot = (uint32_t)s, .time_us = -1 };
			good = !as_engine_step(&e, &ev, &err);
		}
	as_event ec = { .type = EV_EMPTY_CACHE, .time_us = -1 };
	good = good && !as_engine_step(&e, &ec, &err);
	as_engine_finish(&e);
	ooms = e.s.num_ooms;
	ok(good, "cupy %s: 20000 random events on 3 streams keep every invariant (%" PRIu64 " OOMs)", conf, ooms);
	is_u64(dev->reserved, 0, "cupy %s: everything freed, free_all_blocks returns all memory", conf);
	ok(e.s.peak_reserved_bytes <= capacity, "cupy %s: never above the %" PRIu64 " MiB capacity", conf, capacity >> 20);
	ok(ooms > 0 && e.s.num_alloc_retries > 0, "cupy %s: the capacity was reached (out-of-memory path taken)", conf);
	as_engine_free(&e);
	as_device_destroy(dev);
	gsl_rng_free(rng);
}

int main(void)
{
	test_round_size();
	test_alloc_split_free_merge();
	test_streams();
	test_free_all_blocks();
	test_bytes();
	test_limits();
	test_device_oom();
	test_random("", 384ULL << 20);
	test_random("tie:newest", 384ULL << 20);
	test_random("tie:address,limit:256MiB", 1ULL << 30);
	return done_testing();
}
