/* t_versions.c - the pytorch policy's version:2.N setting: one test per rule that differs between
 * PyTorch 2.1 and 2.11. Only 2.11 is checked against real runs (tests/fidelity.sh); the older rules
 * are implemented from the sources named at each test (doc/pytorch-policy.md, "Versions", gives the
 * table; "ref" is /work/shared/reference/pytorch-caching-allocator.md, whose boundaries come from the
 * PRs' merge dates where the release tag was not read). */
#include "tap.h"
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
	ok(parses("throw_on_cudamalloc_oom:False", &c, &e) && refused("throw_on_cudamalloc_oom:maybe", "throw_on_cudamalloc_oom"),
		"throw_on_cudamalloc_oom takes a boolean");

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
	return done_testing();
}
