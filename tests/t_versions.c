/* t_versions.c - the pytorch policy's version:2.N setting: one test per rule that differs between
 * PyTorch 2.1 and 2.11. Only 2.11 is checked against real runs (tests/fidelity.sh); the older rules
 * are implemented from the sources named at each test (doc/pytorch-policy.md, "Versions", gives the
 * table; "ref" is /work/shared/reference/pytorch-caching-allocator.md, whose boundaries come from the
 * PRs' merge dates where the release tag was not read). */
#include "tap.h"
#include "polstat.h"
#include "util/common.h"
#include "policies/pytorch.h"
#include "engine/run.h"
#include <stdlib.h>

#define MiB (1ULL << 20)

static int parses(const char *conf, pt_conf *c, as_err *e)
{
	memset(e, 0, sizeof *e);
	return pt_conf_parse(c, conf, e) == 0;
}

static int refused(const char *conf, const char *msg)
{
	pt_conf c;
	as_err e;
	if (parses(conf, &c, &e))
		return 0;
	if (!strstr(e.msg, msg) || e.code != AS_EXIT_USAGE) {
		printf("#   message: %s (exit %d)\n", e.msg, e.code);
		return 0;
	}
	return 1;
}

/* ---- throw_on_cudamalloc_oom (2.12+): the pytorch policy driven through its interface -------- */
typedef struct drv {
	as_device *dev;
	as_counters ctr;
	as_policy *p;
	void *h[64];
	int n;
} drv;

static int drv_open(drv *t, const char *conf, uint64_t capacity)
{
	as_err err = { 0, "" };
	memset(t, 0, sizeof *t);
	t->dev = as_sim_device_new(capacity, ADDR_MODEL);
	if (as_policy_create(as_policy_find("pytorch"), &t->p, conf, t->dev, &t->ctr, &err)) {
		printf("#   %s\n", err.msg);
		as_device_destroy(t->dev);
		return -1;
	}
	return 0;
}

/* malloc(size): 1 served (its handle kept as h[n]), 0 out of memory */
static int drv_malloc(drv *t, uint64_t size)
{
	uint64_t bs, addr;
	as_request rq = { .size = size, .time_us = -1 };
	void *h;
	if (t->p->ops->malloc(t->p, &rq, &h, &bs, &addr))
		return 0;
	t->h[t->n++] = h;
	return 1;
}

static int drv_needs_flush(drv *t, uint64_t size)
{
	as_request rq = { .size = size, .time_us = -1 };
	as_q_flush q = { .rq = &rq };
	return !as_policy_query(t->p, AS_Q_NEEDS_FLUSH, &q) && q.answer;
}

static int64_t drv_stat(drv *t, const char *key)
{
	int64_t v;
	return policy_stat(t->p, key, &v) ? v : INT64_MIN;
}

static void drv_close(drv *t, const char *what)
{
	as_err err = { 0, "" };
	int rc = t->p->ops->check(t->p, &err);
	ok(rc == 0, "%s: invariants hold%s%s", what, rc ? ": " : "", rc ? err.msg : "");
	t->p->ops->destroy(t->p);
	as_device_destroy(t->dev);
}

#define is_i64(a, b, ...) do { int64_t _a = (a), _b = (b); ok(_a == _b, __VA_ARGS__); \
	if (_a != _b) printf("#   got %lld, expected %lld\n", (long long)_a, (long long)_b); } while (0)

/* malloc(size) into private pool number pool (a CUDA graph's or MemPool's) */
static int drv_malloc_pool(drv *t, uint64_t size, uint32_t pool)
{
	uint64_t bs, addr;
	as_request rq = { .size = size, .time_us = -1, .pool = pool };
	void *h;
	if (t->p->ops->malloc(t->p, &rq, &h, &bs, &addr))
		return 0;
	t->h[t->n++] = h;
	return 1;
}

/* reserved_bytes_by_private_pools (memory_stats(), torch/cuda/memory.py 0011014f; kept by alloc_block,
 * map_block, release_block and unmap_block of CUDACachingAllocator.cpp 076f0279 for blocks whose pool has
 * an owner PrivatePool): here under allocsim's pool number, not PyTorch's (a, b) id */
static void test_private_pool_reserved(void)
{
	drv t;
	drv_open(&t, "", 0);
	drv_malloc_pool(&t, MiB, 1);
	ok(drv_stat(&t, "reserved_bytes_by_private_pools.1.all.current") == INT64_MIN,
		"without version:2.12+ in -c no reserved_bytes_by_private_pools (2.11's keys: tests/fidelity.sh)");
	drv_close(&t, "no version given");
	drv_open(&t, "version:2.12", 0);
	drv_malloc(&t, MiB);                 /* default pool: a 2 MiB small segment */
	drv_malloc_pool(&t, MiB, 1);         /* pool 1: a 2 MiB small segment */
	drv_malloc_pool(&t, 12 * MiB, 1);    /* pool 1: a 12 MiB large segment */
	drv_malloc_pool(&t, 3 * MiB, 2);     /* pool 2: a 20 MiB large segment */
	is_i64(drv_stat(&t, "reserved_bytes.all.current"), 36 * (int64_t)MiB, "reserved 2 + 2 + 12 + 20 MiB");
	is_i64(drv_stat(&t, "reserved_bytes_by_private_pools.1.all.current"), 14 * (int64_t)MiB, "pool 1 reserves 14 MiB");
	is_i64(drv_stat(&t, "reserved_bytes_by_private_pools.1.small_pool.current"), 2 * (int64_t)MiB, "... 2 MiB small");
	is_i64(drv_stat(&t, "reserved_bytes_by_private_pools.1.large_pool.current"), 12 * (int64_t)MiB, "... 12 MiB large");
	is_i64(drv_stat(&t, "reserved_bytes_by_private_pools.2.all.current"), 20 * (int64_t)MiB, "pool 2 reserves 20 MiB");
	ok(drv_stat(&t, "reserved_bytes_by_private_pools.0.all.current") == INT64_MIN, "the default pool has no such entry");
	/* the program lets pool 1 go with its cache emptied (a MemPool's destructor): its free segments go */
	t.p->ops->free(t.p, t.h[1]);
	t.p->ops->free(t.p, t.h[2]);
	t.p->ops->pool_release(t.p, 1, 1);
	is_i64(drv_stat(&t, "reserved_bytes_by_private_pools.1.all.current"), 0, "pool 1 released: 0 reserved");
	is_i64(drv_stat(&t, "reserved_bytes_by_private_pools.1.all.peak"), 14 * (int64_t)MiB, "... its peak 14 MiB");
	is_i64(drv_stat(&t, "reserved_bytes_by_private_pools.1.all.freed"), 14 * (int64_t)MiB, "... 14 MiB freed");
	is_i64(drv_stat(&t, "reserved_bytes.all.current"), 22 * (int64_t)MiB, "reserved 22 MiB");
	drv_close(&t, "private pool reserved bytes");
	/* expandable segments: map_block and unmap_block keep it too */
	drv_open(&t, "expandable_segments:True,version:2.14", 0);
	drv_malloc_pool(&t, 30 * MiB, 1);
	is_i64(drv_stat(&t, "reserved_bytes_by_private_pools.1.large_pool.current"), 40 * (int64_t)MiB, "expandable: 30 MiB maps two 20 MiB pages in pool 1");
	t.p->ops->free(t.p, t.h[0]);
	t.p->ops->pool_release(t.p, 1, 1);
	is_i64(drv_stat(&t, "reserved_bytes_by_private_pools.1.large_pool.current"), 0, "... unmapped when pool 1 goes");
	drv_close(&t, "private pool reserved bytes, expandable");
}

/* 7 small segments (14 requests of 1 MiB, two to a 2 MiB segment), the first segment freed whole: 14 MiB
 * reserved, 2 MiB of it cached and free */
static void seven_segments(drv *t)
{
	for (int i = 0; i < 14; i++)
		drv_malloc(t, MiB);
	t->p->ops->free(t->p, t->h[0]);
	t->p->ops->free(t->p, t->h[1]);
}

/* cyyever/pytorch 076f0279 c10/cuda/CUDACachingAllocator.cpp: DeviceCachingAllocator::alloc_block
 * (the check after the fraction check: total_allocated_memory + size > static_cast<size_t>(
 * per_process_memory_fraction() * totalGlobalMem) -> num_oom_rejections++, rejected) and malloc
 * ("If allocation was rejected by OOM policy, skip retry chain"; no num_ooms, no oom entry).
 * The sim device's total is the H200's, 150109880320 bytes: fraction 0.0001 allows 15010988 bytes
 * (7 segments of 2 MiB), 0.0002 allows 30021976. */
static void test_throw_on_oom(void)
{
	drv t;
	/* 1. the 8th small segment is past the bound: rejected at once */
	drv_open(&t, "throw_on_cudamalloc_oom:True,per_process_memory_fraction:0.0001", 0);
	int served = 0;
	for (int i = 0; i < 15; i++)
		served += drv_malloc(&t, MiB);
	is_i64(served, 14, "throw_on_cudamalloc_oom, fraction 0.0001: 14 of 15 1-MiB requests served (7 segments)");
	is_i64(drv_stat(&t, "num_oom_rejections"), 1, "the 15th: num_oom_rejections 1");
	is_i64(drv_stat(&t, "num_ooms"), 0, "... and num_ooms 0 (malloc returns before the OOM path)");
	is_i64(drv_stat(&t, "reserved_bytes.all.current"), 7 * 2 * (int64_t)MiB, "reserved 14 MiB");
	drv_close(&t, "rejection at the 8th segment");

	/* 2. a rejection skips the retry chain: the free cached segment is not released */
	drv_open(&t, "throw_on_cudamalloc_oom:True,per_process_memory_fraction:0.0001", 0);
	seven_segments(&t);
	ok(!drv_needs_flush(&t, 2 * MiB), "the chain's prediction (AS_Q_NEEDS_FLUSH): no flush before a rejection");
	ok(!drv_malloc(&t, 2 * MiB), "a 2 MiB request (a 20 MiB segment) is rejected");
	is_i64(drv_stat(&t, "num_device_free"), 0, "no segment released (no flush)");
	is_i64(drv_stat(&t, "num_alloc_retries"), 0, "no retry (num_alloc_retries 0)");
	is_i64(drv_stat(&t, "num_oom_rejections"), 1, "num_oom_rejections 1");
	is_i64(drv_stat(&t, "num_ooms"), 0, "num_ooms 0");
	is_i64(drv_stat(&t, "reserved_bytes.all.current"), 14 * (int64_t)MiB, "reserved stays 14 MiB");
	drv_close(&t, "rejection skips the chain");

	/* the same without the key: no bound but the device's */
	drv_open(&t, "per_process_memory_fraction:0.0001", 0);
	seven_segments(&t);
	ok(drv_malloc(&t, 2 * MiB), "without throw_on_cudamalloc_oom the 2 MiB request is served (no limit in this run)");
	is_i64(drv_stat(&t, "reserved_bytes.all.current"), 34 * (int64_t)MiB, "reserved 34 MiB");
	ok(drv_stat(&t, "num_oom_rejections") == INT64_MIN, "num_oom_rejections is not emitted without the key (outputs unchanged)");
	drv_close(&t, "no key");

	/* 3. the fraction check comes first: with a capacity of 33 MiB the first try fails it (not a
	 * rejection), the flush frees the cached segment, and the retry (12 + 20 MiB <= 33) passes it but
	 * is past 0.0002's bound: rejected in the chain, after the flush */
	drv_open(&t, "throw_on_cudamalloc_oom:True,per_process_memory_fraction:0.0002", 33 * MiB);
	seven_segments(&t);
	ok(drv_needs_flush(&t, 2 * MiB), "the prediction: a flush (the fraction check fails first)");
	ok(!drv_malloc(&t, 2 * MiB), "capacity 33 MiB, fraction 0.0002: the 2 MiB request fails");
	is_i64(drv_stat(&t, "num_device_free"), 1, "the flush released the free segment (the capacity check failed first)");
	is_i64(drv_stat(&t, "num_alloc_retries"), 1, "one retry");
	is_i64(drv_stat(&t, "num_oom_rejections"), 1, "the retry was rejected: num_oom_rejections 1");
	is_i64(drv_stat(&t, "num_ooms"), 0, "... so num_ooms stays 0");
	drv_close(&t, "rejection in the retry");

	/* and without the key the same run is an ordinary OOM */
	drv_open(&t, "per_process_memory_fraction:0.0002", 33 * MiB);
	seven_segments(&t);
	ok(drv_malloc(&t, 2 * MiB), "capacity 33 MiB without the key: served after the flush (12 + 20 MiB)");
	is_i64(drv_stat(&t, "num_device_free"), 1, "one segment released");
	is_i64(drv_stat(&t, "num_ooms"), 0, "no OOM");
	drv_close(&t, "capacity only");

	/* the warning: a fraction in -c without --capacity/--fraction */
	unsigned w = as_pytorch_warnings("throw_on_cudamalloc_oom:True,per_process_memory_fraction:0.5", 0);
	ok((w & AS_WARN_FRACTION_NO_CAPACITY) && (w & AS_WARN_THROW_NO_CAPACITY), "fraction and throw without a capacity warn");
	w = as_pytorch_warnings("per_process_memory_fraction:0.5", 1ULL << 30);
	ok(!(w & AS_WARN_FRACTION_NO_CAPACITY), "with a capacity no fraction warning");
	w = as_pytorch_warnings("throw_on_cudamalloc_oom:True", 0);
	ok(!(w & AS_WARN_FRACTION_NO_CAPACITY), "throw alone (fraction 1): no warning");
}

int main(void)
{
	pt_conf c;
	as_err e;

	/* the key itself: allocsim's, 2.1 .. 2.11, default 2.11 */
	ok(parses("", &c, &e) && c.version == 14, "no version: the 2.14 keys (the replay's behaviour is 2.11's)");
	ok(parses("version:2.5", &c, &e) && c.version == 5, "version:2.5 selects 2.5");
	ok(parses("max_split_size_mb:64, version:2.1", &c, &e) && c.version == 1 && c.max_split_size == 64 * MiB,
		"version may come anywhere in the string, blanks allowed");
	ok(parses("version:2.12", &c, &e) && c.version == 12 && parses("version:2.14", &c, &e) && c.version == 14,
		"version:2.12 and 2.14 selected (the v2.12.0-v2.14.0 keys)");
	ok(refused("version:2.15", "the pytorch policy has the rules of 2.1 to 2.14"), "version:2.15 refused (newer than 2.14)");
	ok(refused("version:2.0", "rules of 2.1 to 2.14"), "version:2.0 refused (older than 2.1)");
	ok(refused("version:2.x", "rules of 2.1 to 2.14") && refused("version:3.1", "rules of 2.1 to 2.14"), "a malformed version refused");

	/* max_non_split_rounding_mb: PR #136174 (merged Sep 2024, after the 2.5 branch cut) -> 2.6;
	 * c10/cuda/CUDAAllocatorConfig.cpp parseArgs; ref §5.1 "Oversize rule B", §17.3 */
	ok(refused("version:2.5,max_non_split_rounding_mb:40", "Unrecognized key 'max_non_split_rounding_mb' in allocator config: not a key in PyTorch 2.5 (version:2.5); it came with 2.6"),
		"2.5: max_non_split_rounding_mb is not a key (PR #136174 came with 2.6)");
	ok(parses("version:2.6,max_non_split_rounding_mb:40", &c, &e) && c.max_non_split_rounding == 40 * MiB,
		"2.6: max_non_split_rounding_mb:40 sets the oversize tolerance");
	ok(parses("version:2.5", &c, &e) && c.max_non_split_rounding == 20 * MiB,
		"2.5: the oversize tolerance is kLargeBuffer, 20 MiB (CUDACachingAllocator.cpp get_free_block)");

	/* max_split_size_mb minimum: <= 2.8 CUDAAllocatorConfig::parseMaxSplitSize "must be > 20" (lexer
	 * parser); >= 2.9 AcceleratorAllocatorConfig "must be >= 20" (PRs #149601/#150312); ref §17.3 */
	ok(refused("version:2.8,max_split_size_mb:20", "max_split_size_mb: 20 is too small: more than 20 up to PyTorch 2.8 (version:2.8)"),
		"2.8: max_split_size_mb:20 refused (must be > 20)");
	ok(parses("version:2.8,max_split_size_mb:21", &c, &e) && c.max_split_size == 21 * MiB, "2.8: max_split_size_mb:21 accepted");
	ok(parses("version:2.9,max_split_size_mb:20", &c, &e) && c.max_split_size == 20 * MiB, "2.9: max_split_size_mb:20 accepted (>= 20)");
	ok(refused("version:2.7,max_non_split_rounding_mb:20", "max_non_split_rounding_mb: 20 is too small: more than 20 up to PyTorch 2.8"),
		"2.7: max_non_split_rounding_mb:20 refused too (same check)");

	/* roundup_power2_divisions '>:v': <= 2.8 fills from the last boundary's entry inclusive, >= 2.9
	 * (AcceleratorAllocatorConfig::parseRoundUpPower2Divisions) from the entry after it; ref §3.2 */
	ok(parses("version:2.8,roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", &c, &e) &&
		c.divisions[8] == 1 && c.divisions[9] == 2 && c.divisions[10] == 8 && c.divisions[15] == 8,
		"2.8: '>:8' overwrites the 1 GiB interval's 4 (entries 10-15 = 8)");
	is_u64(pt_round_size(&c, 1100 * MiB), 1152 * MiB, "2.8: a 1100 MiB request rounds to 1152 MiB (8 divisions)");
	ok(parses("version:2.9,roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", &c, &e) &&
		c.divisions[10] == 4 && c.divisions[11] == 8, "2.9: '>:8' starts after the last boundary (entry 10 stays 4)");
	is_u64(pt_round_size(&c, 1100 * MiB), 1280 * MiB, "2.9: a 1100 MiB request rounds to 1280 MiB (4 divisions)");

	/* a list value of 0 ("no rounding" for that interval): refused by the 2.1-era parser, accepted
	 * from about 2.3; ref §17.3 roundup_power2_divisions */
	ok(refused("version:2.2,roundup_power2_divisions:[64:0,128:4]", "roundup_power2_divisions: 0 in '[64:0,128:4]' is not a power of 2 (0 disables roundup from PyTorch 2.3 on; version:2.2)"),
		"2.2: a list value of 0 refused");
	ok(parses("version:2.3,roundup_power2_divisions:[64:0,128:4]", &c, &e) && c.divisions[6] == 0 && c.divisions[7] == 4,
		"2.3: a list value of 0 accepted");

	/* keys that came later (ref §17.3 table; CUDAAllocatorConfig.cpp parseArgs at each era) */
	static const struct { const char *key; int since; } k[] = {
		{ "pinned_use_background_threads:True", 5 }, { "pinned_reserve_segment_size_mb:64", 8 },
		{ "graph_capture_record_stream_reuse:True", 9 }, { "per_process_memory_fraction:0.5", 10 },
		{ "large_segment_size_mb:40", 11 },
		/* 2.12: throw_on_cudamalloc_oom (v2.12.0 release notes, CUDA, PR #179473); pinned_free_catch_all
		 * (parseArgs tests it just before throw_on_cudamalloc_oom; absent from the 2.11 parser) */
		{ "throw_on_cudamalloc_oom:True", 12 }, { "pinned_free_catch_all:True", 12 },
		/* 2.13: the pinned thresholds (v2.13.0 release notes, PR #171662; AcceleratorAllocatorConfig::parseArgs) */
		{ "pinned_max_round_threshold_mb:64", 13 }, { "pinned_max_cached_size_mb:0", 13 },
	};
	for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
		char before[128], since[128];
		snprintf(before, sizeof before, "version:2.%d,%s", k[i].since - 1, k[i].key);
		snprintf(since, sizeof since, "version:2.%d,%s", k[i].since, k[i].key);
		ok(refused(before, "in allocator config: not a key in PyTorch"), "%s refused", before);
		ok(parses(since, &c, &e), "%s accepted", since);
	}
	ok(parses("version:2.11,large_segment_size_mb:40", &c, &e) && c.large_segment_size == 40 * MiB, "2.11: large_segment_size_mb applies");
	/* PR #192269's keys are in no release notes up to v2.14.0: refused under every version */
	ok(refused("expandable_segments_reserve:0.5", "not a key in PyTorch 2.14 (version:2.14); it is newer than 2.14") &&
		refused("version:2.12,expandable_segments_reserve_by_class:[tiny:0.05]", "it is newer than 2.14"),
		"expandable_segments_reserve(_by_class) refused: newer than 2.14");
	ok(parses("throw_on_cudamalloc_oom:False", &c, &e) && c.throw_on_oom == 0 && refused("throw_on_cudamalloc_oom:maybe", "throw_on_cudamalloc_oom"),
		"throw_on_cudamalloc_oom takes a boolean");
	ok(parses("throw_on_cudamalloc_oom:True", &c, &e) && c.throw_on_oom == 1, "throw_on_cudamalloc_oom:True sets the rule");
	ok(refused("pinned_max_round_threshold_mb:x", "pinned_max_round_threshold_mb: 'x' is not a number"), "pinned_max_round_threshold_mb takes a number");
	/* pytorch-pinned (2.11's host cache) refuses the newer host keys instead of ignoring them */
	{
		as_device *dev = as_sim_device_new(0, ADDR_MODEL);
		as_counters ctr = { 0 };
		as_policy *pp = NULL;
		static const char *const nk[] = { "pinned_max_round_threshold_mb:64", "pinned_max_cached_size_mb:64", "pinned_free_catch_all:True" };
		for (size_t i = 0; i < 3; i++) {
			memset(&e, 0, sizeof e);
			int rc = as_policy_create(as_policy_find("pytorch-pinned"), &pp, nk[i], dev, &ctr, &e);
			ok(rc != 0 && e.code == AS_EXIT_USAGE && strstr(e.msg, "not simulated: pytorch-pinned is PyTorch 2.11's pinned host cache"),
				"pytorch-pinned refuses %s (%s)", nk[i], e.msg);
			if (!rc)
				pp->ops->destroy(pp);
		}
		as_device_destroy(dev);
	}

	/* version is allocsim's key: stripped before a config is compared with the recorded settings */
	static const struct { const char *in, *out; } st[] = {
		{ "max_split_size_mb:64,version:2.8", "max_split_size_mb:64" }, { "version:2.8", "" },
		{ " version : 2.3,expandable_segments:True", "expandable_segments:True" },
		{ "roundup_power2_divisions:[64:8,>:2],version:2.1,max_split_size_mb:40", "roundup_power2_divisions:[64:8,>:2],max_split_size_mb:40" },
		{ "expandable_segments:True", "expandable_segments:True" },
	};
	const as_policy_ops *pt = as_policy_find("pytorch");
	for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
		ok(as_policy_recorded(pt, st[i].out, st[i].in), "'%s' runs the recorded settings '%s' (version aside)", st[i].in, st[i].out);
	}
	const char *es = "expandable_segments:True";
	ok(as_policy_recorded(pt, es, "expandable_segments:True,version:2.4") && !as_policy_recorded(pt, es, "version:2.4"),
		"the recorded settings match a config that adds only version");
	ok(!as_policy_recorded(as_policy_find("bestfit"), es, "expandable_segments:True,version:2.4")
		&& as_policy_recorded(as_policy_find("bestfit"), es, "expandable_segments:True"),
		"other policies: the recorded settings are the same string");
	ok(!as_policy_recorded(pt, NULL, ""), "a trace that records no settings matches none");

	/* the one settings step (as_policy_prepare): the version a snapshot's fields imply, the warnings */
	as_meta m;
	memset(&m, 0, sizeof m);
	m.pyfields = AS_PF_SNAPSHOT | AS_PF_ENTRY; /* no time_us: 2.1 */
	char *conf = xstrdup("max_split_size_mb:64");
	unsigned w = as_policy_prepare(pt, &m, 0, &conf);
	ok(!strcmp(conf, "max_split_size_mb:64,version:2.1"), "prepare: a 2.1 snapshot's version appended (got '%s')", conf);
	ok(w == (AS_WARN_UNNAMED_POOLS | AS_WARN_RECORDED_OOMS), "prepare: without a capacity, the OOM and pool warnings (got %u)", w);
	free(conf);
	conf = xstrdup("version:2.8,garbage_collection_threshold:0.5");
	w = as_policy_prepare(pt, &m, 0, &conf);
	ok(!strcmp(conf, "version:2.8,garbage_collection_threshold:0.5") && (w & AS_WARN_GC_NO_CAPACITY),
		"prepare: a given version wins; garbage_collection_threshold without a capacity warns");
	w = as_policy_prepare(pt, &m, 1 << 30, &conf);
	ok(w == AS_WARN_UNNAMED_POOLS, "prepare: with a capacity, only the pool warning (got %u)", w);
	free(conf);
	conf = xstrdup("");
	w = as_policy_prepare(as_policy_find("pytorch-pinned"), &m, 0, &conf);
	ok(!strcmp(conf, "") && w == (AS_WARN_UNNAMED_POOLS | AS_WARN_RECORDED_OOMS), "prepare: pytorch-pinned implies no version");
	w = as_policy_prepare(as_policy_find("bestfit"), &m, 0, &conf);
	ok(!strcmp(conf, "") && w == 0, "prepare: bestfit takes the settings as given, no warning");
	free(conf);
	test_throw_on_oom();
	test_private_pool_reserved();
	return done_testing();
}
