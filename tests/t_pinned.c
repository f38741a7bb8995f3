/* t_pinned.c - the pytorch-pinned policy against the rules of PyTorch 2.11's CachingHostAllocator
 * (aten/src/ATen/core/CachingHostAllocator.h, aten/src/ATen/cuda/CachingHostAllocator.cpp; the line
 * each test encodes is named in src/policies/pytorch_pinned.c), driven through the policy interface, and
 * the hand-made host log traces/fixtures/pinned-synthetic.host.csv read through the host log reader,
 * with its host_memory_stats() worked out by hand (doc/policies.md) and its address reuse checked. */
#include "tap.h"
#include "polstat.h"
#include "util/common.h"
#include "util/idmap.h"
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include <stdlib.h>
#include <unistd.h>
#include <glob.h>

#define KiB 1024ULL
#define MiB (1024ULL * 1024)

typedef struct pool {
	as_device *dev;
	as_counters ctr;
	as_policy *p;
} pool;

static int pool_open(pool *t, const char *conf, uint64_t capacity, char *msg, size_t n)
{
	as_err err = { 0, "" };
	t->dev = as_sim_device_new(capacity, ADDR_MODEL);
	t->ctr.alloc_retries = 0;
	int rc = as_policy_create(as_policy_find("pytorch-pinned"), &t->p, conf, t->dev, &t->ctr, &err);
	if (msg)
		snprintf(msg, n, "%s", err.msg);
	if (rc)
		as_device_destroy(t->dev);
	return rc;
}

static void pool_close(pool *t, const char *what)
{
	as_err err = { 0, "" };
	int rc = t->p->ops->check(t->p, &err);
	ok(rc == 0, "%s: invariants hold at the end%s%s", what, rc ? ": " : "", rc ? err.msg : "");
	t->p->ops->destroy(t->p);
	as_device_destroy(t->dev);
}

/* allocate(size): the pointer (0 for a null one or a failure); *h the block, *bs its size. */
static uint64_t pm(pool *t, uint64_t size, void **h, uint64_t *bs)
{
	uint64_t addr = 0, b = 0;
	as_request rq = { .size = size, .time_us = -1 };
	if (t->p->ops->malloc(t->p, &rq, h, &b, &addr)) {
		*h = NULL;
		addr = 0;
	}
	if (bs)
		*bs = b;
	return addr;
}

/* The program frees a block a copy used (free_requested), and later its event completes (free). */
static void freed(pool *t, void *h) { t->p->ops->free_requested(t->p, h); }
static void done(pool *t, void *h) { t->p->ops->free(t->p, h); }
/* A free of a block no stream used: straight back to its free list. */
static void plain_free(pool *t, void *h) { t->p->ops->free(t->p, h); }

static int64_t st(as_policy *p, const char *key)
{
	int64_t v;
	return policy_stat(p, key, &v) ? v : INT64_MIN;
}
#define is_i64(a, b, ...) do { int64_t _a = (a), _b = (b); ok(_a == _b, __VA_ARGS__); \
	if (_a != _b) printf("#   got %" PRId64 ", expected %" PRId64 "\n", _a, _b); } while (0)

/* allocate: 0 -> null, else PowerOf2Ceil (c10::llvm), one cudaHostAlloc per new block */
static void test_rounding(void)
{
	pool t;
	pool_open(&t, "", 0, NULL, 0);
	void *h;
	uint64_t bs;
	ok(pm(&t, 0, &h, &bs) == 0 && h == NULL && bs == 0 && t.dev->num_alloc == 0 && st(t.p, "allocations.allocated") == 0,
		"a 0-byte request gets a null pointer and touches nothing");
	static const uint64_t req[] = { 1, 10, 4096, 4097, MiB + 1, 3 * MiB + 63 }, want[] = { 1, 16, 4096, 8192, 2 * MiB, 4 * MiB };
	uint64_t sum = 0;
	for (int i = 0; i < 6; i++) {
		pm(&t, req[i], &h, &bs);
		is_u64(bs, want[i], "%" PRIu64 " bytes round to the next power of two, %" PRIu64, req[i], want[i]);
		sum += want[i];
		as_q_round q = { req[i], 7 };
		ok(as_policy_query(t.p, AS_Q_ROUND, &q) == 0 && q.size == want[i] && q.granule == 0, "round query agrees for %" PRIu64, req[i]);
	}
	is_u64(t.dev->num_alloc, 6, "six new blocks are six cudaHostAlloc calls");
	is_u64(t.dev->reserved, sum, "pinned bytes held are the rounded sizes (%" PRIu64 ")", sum);
	is_i64(st(t.p, "allocated_bytes.current"), (int64_t)sum, "allocated_bytes.current counts rounded bytes");
	is_i64(st(t.p, "num_host_alloc"), 6, "num_host_alloc = allocations.allocated");
	pool_close(&t, "rounding");
}

/* get_free_block: the back of the bucket's deque (the block freed last), exactly that size only */
static void test_lifo_exact(void)
{
	pool t;
	pool_open(&t, "", 0, NULL, 0);
	void *a, *b, *c, *d;
	uint64_t pa = pm(&t, 5000, &a, NULL), pb = pm(&t, 6000, &b, NULL), pc = pm(&t, 9000, &c, NULL);
	plain_free(&t, a);
	plain_free(&t, b);
	plain_free(&t, c);
	is_u64(pm(&t, 8000, &d, NULL), pb, "an 8 KiB request takes the 8 KiB block freed last (LIFO)");
	is_u64(pm(&t, 4097, &d, NULL), pa, "the next one takes the one freed before it");
	uint64_t n = t.dev->num_alloc;
	pm(&t, 8192, &d, NULL);
	is_u64(t.dev->num_alloc, n + 1, "with only a 16 KiB block cached, an 8 KiB request makes a new block (no splitting)");
	is_u64(pm(&t, 16 * KiB, &d, NULL), pc, "the 16 KiB block is reused by a 16 KiB request");
	pool_close(&t, "lifo");
}

/* free with streams: events; process_events at the start of the next allocate, oldest first, stopping
 * at the first event not completed */
static void test_events(void)
{
	pool t;
	pool_open(&t, "", 0, NULL, 0);
	void *a, *b, *x;
	uint64_t pa = pm(&t, 4096, &a, NULL), pb = pm(&t, 4096, &b, NULL);
	freed(&t, a);
	freed(&t, b);
	done(&t, b);
	uint64_t n = t.dev->num_alloc;
	uint64_t px = pm(&t, 4096, &x, NULL);
	ok(px != pa && px != pb && t.dev->num_alloc == n + 1,
		"a completed event behind an older pending one is not processed: the request makes a new block");
	done(&t, a);
	is_i64(st(t.p, "active_requests.current"), 3, "a completed free counts as active until the next request processes it");
	is_u64(pm(&t, 4096, &x, NULL), pb, "then both go back in event order and the request takes the later one (b)");
	is_u64(pm(&t, 4096, &x, NULL), pa, "and the next one a");
	is_u64(t.dev->num_alloc, n + 1, "no more cudaHostAlloc calls");
	void *c;
	uint64_t pc = pm(&t, 100, &c, NULL);
	freed(&t, c);
	is_u64(pm(&t, 100, &x, NULL) == pc, 0, "a block whose event is pending is not reused");
	pool_close(&t, "events");
}

/* the statistics as HostStatsStaged keeps them, including active_bytes' decrease(size) with size -1
 * and the free without events that decreases nothing */
static void test_stats(void)
{
	pool t;
	pool_open(&t, "", 0, NULL, 0);
	void *a, *b;
	pm(&t, 10, &a, NULL);
	freed(&t, a);
	done(&t, a);
	pm(&t, 4096, &b, NULL);
	is_i64(st(t.p, "active_requests.current"), 1, "the processed block leaves active_requests (1 - 1 + 1)");
	is_i64(st(t.p, "active_requests.freed"), 1, "active_requests.freed 1");
	is_i64(st(t.p, "active_bytes.current"), 16 + 1 + 4096, "active_bytes: +16, then decrease(-1) adds 1, then +4096");
	is_i64(st(t.p, "active_bytes.freed"), -1, "active_bytes.freed is -1 after one processed event");
	is_i64(st(t.p, "active_bytes.allocated"), 16 + 4096, "active_bytes.allocated counts handed-out bytes");
	plain_free(&t, b);
	is_i64(st(t.p, "active_requests.current"), 1, "a free without events puts the block back without a decrease");
	void *c;
	pm(&t, 4000, &c, NULL);
	is_i64(st(t.p, "active_requests.current"), 2, "and its reuse counts it again");
	is_i64(st(t.p, "active_requests.peak"), 1 + 2, "the active peak is the sum of the per-bucket peaks (1 + 2)");
	is_i64(st(t.p, "active_bytes.peak"), 16 + 8192, "active_bytes.peak: 16 B bucket 16 (Stat::decrease never moves a peak, so its +1 does not count), 4 KiB bucket 8192");
	is_i64(st(t.p, "allocations.current"), 2, "allocations: blocks owned (2)");
	is_i64(st(t.p, "allocations.peak"), 2, "allocations.peak 2");
	t.p->ops->empty_cache(t.p);
	is_i64(st(t.p, "allocations.current"), 1, "empty_cache releases the cached 16 B block (the 4 KiB one is handed out)");
	is_i64(st(t.p, "num_host_free"), 1, "num_host_free = allocations.freed = 1");
	is_i64(st(t.p, "host_free_time.count"), 1, "one cudaFreeHost");
	is_i64(st(t.p, "allocated_bytes.current"), 4096, "allocated_bytes.current 4096");
	is_i64(st(t.p, "active_bytes.current"), 16 + 1 + 4096 + 4096, "empty_cache does not touch the active stats");
	pool_close(&t, "stats");
}

/* empty_cache: process_events, then every free-list block is freed; pending blocks stay */
static void test_empty_cache(void)
{
	pool t;
	pool_open(&t, "", 0, NULL, 0);
	void *a, *b, *c, *x;
	pm(&t, MiB, &a, NULL);
	uint64_t pb = pm(&t, MiB, &b, NULL);
	pm(&t, 64, &c, NULL);
	freed(&t, a);
	done(&t, a);   /* completed, not yet processed */
	freed(&t, b);  /* still pending */
	plain_free(&t, c);
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->num_free, 2, "empty_cache processes the completed event and frees both cached blocks");
	is_u64(t.dev->reserved, MiB, "the block whose event is pending stays");
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->num_free, 2, "a second empty_cache frees nothing more");
	done(&t, b);
	is_u64(pm(&t, MiB, &x, NULL), pb, "the pending block is reused once its event completed");
	pool_close(&t, "empty_cache");
}

/* pinned_reserve_segment_size_mb: one reserve at the first miss, carves rounded to 4 KiB, never freed */
static void test_reserve(void)
{
	pool t;
	pool_open(&t, "pinned_reserve_segment_size_mb:1", 0, NULL, 0);
	void *a, *b, *c, *d;
	uint64_t pa = pm(&t, 10, &a, NULL);
	is_u64(t.dev->reserved, MiB, "the first miss creates the 1 MiB reserve (one cudaHostAlloc)");
	uint64_t pb = pm(&t, 5000, &b, NULL);
	is_u64(pb, pa + 4096, "a 16 B block takes 4 KiB of the reserve: the next carve starts 4 KiB on");
	uint64_t pc = pm(&t, 600000, &c, NULL);
	ok(pc < pa || pc >= pa + MiB, "a 1 MiB block no longer fits (12 KiB used): its own cudaHostAlloc");
	is_u64(t.dev->num_alloc, 2, "two cudaHostAlloc calls: the reserve and the 1 MiB block");
	is_i64(st(t.p, "host_alloc_time.count"), 2, "host_alloc_time.count counts those two calls");
	is_i64(st(t.p, "num_host_alloc"), 3, "num_host_alloc counts the three blocks (carves included)");
	plain_free(&t, a);
	plain_free(&t, b);
	plain_free(&t, c);
	t.p->ops->empty_cache(t.p);
	is_u64(t.dev->num_free, 1, "empty_cache returns only the 1 MiB block: the reserve's carves are never freed");
	is_u64(t.dev->reserved, MiB, "the reserve stays");
	is_i64(st(t.p, "num_host_free"), 3, "num_host_free still counts the three blocks");
	is_i64(st(t.p, "host_free_time.count"), 1, "host_free_time.count one cudaFreeHost");
	is_u64(pm(&t, 10, &d, NULL), pa + 12288, "the bump pointer never moves back: a new 16 B block is carved at 12 KiB");
	pool_close(&t, "reserve");
}

/* c10/cuda/CUDAAllocatorConfig.cpp: parsePinnedNumRegisterThreads, parsePinnedReserveSegmentSize */
static void test_options(void)
{
	static const struct { const char *conf, *msg; } bad[] = {
		{ "pinned_num_register_threads:3", "Number of register threads has to be power of 2, got 3" },
		{ "pinned_num_register_threads:0", "Number of register threads has to be power of 2, got 0" },
		{ "pinned_num_register_threads:256", "Number of register threads should be less than or equal to 128, got 256" },
		{ "pinned_reserve_segment_size_mb:0", "Pinned reserve segment size has to be greater than 0" },
		{ "pinned_use_cuda_host_register:yes", "pinned_use_cuda_host_register: 'yes' is not True or False" },
		{ "max_split_size_mb:128", "max_split_size_mb is an option of pytorch, not pytorch-pinned (see 'allocsim policies')" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		pool t;
		char msg[256];
		int rc = pool_open(&t, bad[i].conf, 0, msg, sizeof msg);
		ok(rc != 0 && !strcmp(msg, bad[i].msg), "'%s' is refused: %s", bad[i].conf, msg);
		if (!rc)
			pool_close(&t, bad[i].conf);
	}
	/* accepted, and the blocks are the same: register and background threads change costs and timing */
	static const char *const same[] = { "pinned_num_register_threads:128,pinned_use_cuda_host_register:True", "pinned_use_background_threads:True" };
	for (int k = 0; k < 2; k++) {
		pool t;
		char msg[256];
		ok(pool_open(&t, same[k], 0, msg, sizeof msg) == 0, "'%s' is accepted (%s)", same[k], msg);
		void *a, *b;
		uint64_t pa = pm(&t, 3000, &a, NULL);
		freed(&t, a);
		done(&t, a);
		is_u64(pm(&t, 2500, &b, NULL), pa, "'%s': the same reuse as the defaults", same[k]);
		pool_close(&t, same[k]);
	}
}

/* a failed cudaHostAlloc throws: the request fails and nothing changes */
static void test_oom(void)
{
	pool t;
	pool_open(&t, "", 2 * MiB, NULL, 0);
	void *a, *b;
	pm(&t, MiB + 1, &a, NULL);
	ok(pm(&t, 5, &b, NULL) == 0 && b == NULL, "at a 2 MiB capacity a 2 MiB block leaves no room: the next request fails");
	is_i64(st(t.p, "allocations.current"), 1, "the failure changes no statistic");
	is_i64(st(t.p, "active_requests.allocated"), 1, "nor the active ones");
	pool_close(&t, "oom");
}

/* ---- a host log through the reader: statistics and address reuse ---- */

typedef struct reuse {
	idmap owned;       /* simulated address -> recorded ptr + 1, for every block the policy owns */
	uint64_t mismatches, reuses;
} reuse;

static void on_device(void *ctx, int op, uint64_t addr, uint64_t size, uint64_t stream)
{
	(void)size; (void)stream;
	if (op == DEV_OP_FREE)
		idmap_del(&((reuse *)ctx)->owned, addr);
}

/* Replays a host log through the policy and checks that a block the policy reuses was reused in the
 * recording (the same recorded ptr as when it was made) and that a block it makes is at no recorded
 * ptr of a block it still owns. */
static int replay_log(const char *path, pool *t, reuse *r, char *why, size_t n)
{
	as_err err = { 0, "" };
	as_reader *rd;
	if (as_reader_open(&rd, path, NULL, &err)) {
		snprintf(why, n, "%s", err.msg);
		return -1;
	}
	idmap_init(&r->owned);
	r->mismatches = r->reuses = 0;
	as_dev_set_observer(t->dev, on_device, r);
	idmap handles;
	idmap_init(&handles);
	as_event ev;
	int rc;
	while ((rc = as_reader_next(rd, &ev, &err)) == 1) {
		void *h;
		switch (ev.type) {
		case EV_ALLOC: {
			uint64_t bs, a = pm(t, ev.size, &h, &bs);
			if (!h) {
				snprintf(why, n, "allocation %" PRIu64 " failed", ev.id);
				rc = -1;
				break;
			}
			idmap_put(&handles, ev.id, h);
			void *rec = idmap_get(&r->owned, a);
			if (rec) {
				r->reuses++;
				r->mismatches += (uint64_t)(uintptr_t)rec - 1 != ev.addr;
			} else {
				for (size_t i = 0; i < r->owned.cap; i++)
					if (idmap_live(&r->owned, i) && (uint64_t)(uintptr_t)r->owned.vals[i] - 1 == ev.addr)
						r->mismatches++;
				idmap_put(&r->owned, a, (void *)(uintptr_t)(ev.addr + 1));
			}
			break;
		}
		case EV_FREE_REQ:
			freed(t, idmap_get(&handles, ev.id));
			break;
		case EV_FREE:
			done(t, idmap_del(&handles, ev.id));
			break;
		case EV_EMPTY_CACHE:
			t->p->ops->empty_cache(t->p);
			break;
		default:
			break;
		}
		if (rc == -1)
			break;
	}
	if (rc == -1 && err.code)
		snprintf(why, n, "%s", err.msg);
	idmap_free(&handles);
	idmap_free(&r->owned);
	as_reader_close(rd);
	as_dev_set_observer(t->dev, NULL, NULL);
	return rc;
}

static void test_synthetic_log(void)
{
	const char *path = ALLOCSIM_SRCDIR "/traces/fixtures/pinned-synthetic.host.csv";
	pool t;
	pool_open(&t, "", 0, NULL, 0);
	reuse r;
	char why[512] = "";
	int rc = replay_log(path, &t, &r, why, sizeof why);
	ok(rc == 0, "the synthetic host log replays (%s)", why);
	is_u64(r.reuses, 3, "three requests reuse a cached block (ids 5, 6 and 8; 9 gets a new one after empty_cache)");
	is_u64(r.mismatches, 0, "every simulated reuse is a reuse at the recorded ptr, every new block a new ptr");
	/* worked out by hand from the rules above: doc/policies.md, pytorch-pinned */
	static const struct { const char *k; int64_t v; } want[] = {
		{ "active_bytes.allocated", 49185 }, { "active_bytes.current", 49190 }, { "active_bytes.freed", -5 }, { "active_bytes.peak", 49189 },
		{ "active_requests.allocated", 9 }, { "active_requests.current", 4 }, { "active_requests.freed", 5 }, { "active_requests.peak", 5 },
		{ "allocated_bytes.allocated", 32785 }, { "allocated_bytes.current", 24593 }, { "allocated_bytes.freed", 8192 }, { "allocated_bytes.peak", 24593 },
		{ "allocations.allocated", 6 }, { "allocations.current", 5 }, { "allocations.freed", 1 }, { "allocations.peak", 5 },
		{ "host_alloc_time.count", 6 }, { "host_free_time.count", 1 }, { "num_host_alloc", 6 }, { "num_host_free", 1 },
	};
	for (size_t i = 0; i < sizeof want / sizeof *want; i++)
		is_i64(st(t.p, want[i].k), want[i].v, "synthetic log: %s = %" PRId64, want[i].k, want[i].v);
	pool_close(&t, "synthetic log");

	/* a recording the rules cannot give: id 3 at a new ptr where the policy reuses id 1's block, and
	 * a 100-byte id 4 at id 2's ptr (another bucket) where the policy makes a new block */
	pool_open(&t, "", 0, NULL, 0);
	char tmp[] = "/tmp/t_pinned_XXXXXX";
	int fd = mkstemp(tmp);
	FILE *f = fdopen(fd, "w");
	fputs("op,id,size,ptr\na,1,8192,0x1000\na,2,8192,0x9000\nf,1,0,0\nd,1,0,0\na,3,8192,0x5000\n"
	      "f,2,0,0\nd,2,0,0\na,4,100,0x9000\n", f);
	fclose(f);
	rc = replay_log(tmp, &t, &r, why, sizeof why);
	ok(rc == 0 && r.mismatches == 2,
		"both disagreements are caught (%" PRIu64 " mismatches)", r.mismatches);
	unlink(tmp);
	pool_close(&t, "mismatch log");
}

/* Real captures (the .host.csv files in traces/captured, scripts/capture-beyond.py's pinned scenario): a reuse in
 * the recorded ptr column is a reuse in the simulation and the other way round. Their statistics are
 * compared with PyTorch's host_memory_stats() by tests/pinned.sh. */
static void test_captures(void)
{
	glob_t g;
	if (glob(ALLOCSIM_SRCDIR "/traces/captured/*.host.csv", 0, NULL, &g))
		return; /* none bundled (yet) */
	for (size_t i = 0; i < g.gl_pathc; i++) {
		pool t;
		pool_open(&t, "", 0, NULL, 0);
		reuse r;
		char why[512] = "";
		const char *name = strrchr(g.gl_pathv[i], '/') + 1;
		int rc = replay_log(g.gl_pathv[i], &t, &r, why, sizeof why);
		ok(rc == 0 && r.mismatches == 0, "%s: %" PRIu64 " reuses, every one at the recorded ptr, no new block at a cached block's ptr "
			"(%" PRIu64 " mismatches%s%s)", name, r.reuses, r.mismatches, *why ? "; " : "", why);
		ok(r.reuses > 0, "%s: the capture reuses blocks (%" PRIu64 ")", name, r.reuses);
		pool_close(&t, name);
	}
	globfree(&g);
}

int main(void)
{
	test_rounding();
	test_lifo_exact();
	test_events();
	test_stats();
	test_empty_cache();
	test_reserve();
	test_options();
	test_oom();
	test_synthetic_log();
	test_captures();
	return done_testing();
}
