/* pytorch_conf.c - PYTORCH_CUDA_ALLOC_CONF parsing (2.11 rules, older releases' with version:2.N)
 * and size rounding. The version differences and their sources: doc/pytorch-policy.md, "Versions". */
#include "pytorch.h"
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static int log2u(uint64_t v)
{
	return 63 - __builtin_clzll(v);
}

static int parse_num(const char *s, uint64_t *v)
{
	return as_parse_u64(s, v);
}

/* max_split_size_mb / max_non_split_rounding_mb: MiB, at least large_segment_size (20 MiB); up to
 * 2.8 (the lexer-based CUDAAllocatorConfig::parseMaxSplitSize) more than 20. */
static int parse_mb_min20(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	pt_conf *c = conf;
	uint64_t v;
	if (parse_num(val, &v))
		return as_fail(err, AS_EXIT_USAGE, "%s: '%s' is not a number of MiB", d->name, val);
	uint64_t min_mb = c->large_segment_size >> 20;
	if (c->version <= 8 && v <= min_mb)
		return as_fail(err, AS_EXIT_USAGE, "%s: %s is too small: more than %llu up to PyTorch 2.8 (version:2.%d)", d->name,
			val, (unsigned long long)min_mb, c->version);
	if (v < min_mb)
		return as_fail(err, AS_EXIT_USAGE, "%s: %s is too small: at least %llu (the large segment size, in MiB)", d->name,
			val, (unsigned long long)min_mb);
	uint64_t bytes = v > (UINT64_MAX >> 20) ? UINT64_MAX : v << 20;
	*(uint64_t *)((char *)conf + d->off) = bytes;
	return 0;
}

static int parse_large_seg(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	pt_conf *c = conf;
	uint64_t v;
	if (parse_num(val, &v) || v <= 10 || v > (1u << 20))
		return as_fail(err, AS_EXIT_USAGE, "large_segment_size_mb: '%s' is not a number of MiB above 10", val);
	c->large_segment_size = v << 20;
	if (c->max_non_split_rounding < c->large_segment_size)
		c->max_non_split_rounding = c->large_segment_size;
	(void)d;
	return 0;
}

static int parse_gc(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	char *end;
	errno = 0;
	double v = strtod(val, &end);
	if (errno || *end || !(v > 0.0) || !(v < 1.0))
		return as_fail(err, AS_EXIT_USAGE, "%s: '%s' is not a number in (0.0, 1.0)", d->name, val);
	((pt_conf *)conf)->gc_threshold = v;
	(void)d;
	return 0;
}

static int parse_fraction(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	char *end;
	errno = 0;
	double v = strtod(val, &end);
	if (errno || *end || !(v >= 0.0) || !(v <= 1.0))
		return as_fail(err, AS_EXIT_USAGE, "%s: '%s' is not a number in [0.0, 1.0]", d->name, val);
	((pt_conf *)conf)->fraction = v;
	(void)d;
	return 0;
}

static int parse_roundup(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	pt_conf *c = conf;
	uint64_t v;
	(void)d;
	memset(c->divisions, 0, sizeof c->divisions);
	if (val[0] != '[') {
		if (parse_num(val, &v))
			return as_fail(err, AS_EXIT_USAGE, "%s: '%s' is not a number", d->name, val);
		if (!is_pow2(v) || v > UINT32_MAX)
			return as_fail(err, AS_EXIT_USAGE, "%s: %s is not a power of 2", d->name, val);
		for (int i = 0; i < 16; i++)
			c->divisions[i] = (uint32_t)v;
		return 0;
	}
	size_t n = strlen(val);
	if (n < 2 || val[n - 1] != ']')
		return as_fail(err, AS_EXIT_USAGE, "%s: '%s': expected ']'", d->name, val);
	char *body = xmalloc(n);
	memcpy(body, val + 1, n - 2);
	body[n - 2] = 0;
	int first = 1, last = -1, rc = 0;
	char *save = NULL;
	for (char *item = strtok_r(body, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(item, ':');
		if (!colon) {
			rc = as_fail(err, AS_EXIT_USAGE, "%s: '%s': expected ':' in '%s'", d->name, val, item);
			break;
		}
		*colon = 0;
		if (parse_num(colon + 1, &v) || (v && !is_pow2(v)) || v > UINT32_MAX) {
			rc = as_fail(err, AS_EXIT_USAGE, "%s: %s in '%s' is not a power of 2 (or 0 to disable roundup)", d->name, colon + 1, val);
			break;
		}
		if (!v && c->version <= 2) { /* 0 = "no rounding" for an interval came with 2.3 */
			rc = as_fail(err, AS_EXIT_USAGE, "%s: 0 in '%s' is not a power of 2 (0 disables roundup from PyTorch 2.3 on; version:2.%d)",
				d->name, val, c->version);
			break;
		}
		if (!strcmp(item, ">")) {
			/* 2.9+ (AcceleratorAllocatorConfig): fill from the entry after the last boundary; up to
			 * 2.8 (CUDAAllocatorConfig's own parser) from the last boundary's entry itself. */
			for (int i = c->version <= 8 && last >= 0 ? last : last + 1; i < 16; i++)
				c->divisions[i] = (uint32_t)v;
			continue;
		}
		uint64_t b;
		if (parse_num(item, &b) || !is_pow2(b)) {
			rc = as_fail(err, AS_EXIT_USAGE, "%s: the interval %s in '%s' is not a power of 2", d->name, item, val);
			break;
		}
		int idx = log2u(b);
		if (idx > 15)
			idx = 15;
		if (first)
			for (int i = 0; i < idx; i++)
				c->divisions[i] = (uint32_t)v;
		c->divisions[idx] = (uint32_t)v;
		last = idx;
		first = 0;
	}
	free(body);
	return rc;
}

static int parse_backend(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	(void)conf; (void)d;
	if (!strcmp(val, "native"))
		return 0;
	if (!strcmp(val, "cudaMallocAsync"))
		return as_fail(err, AS_EXIT_USAGE, "backend:cudaMallocAsync is not simulated by the pytorch policy: replay with -p cuda-async (the cudaMallocAsync pool)");
	return as_fail(err, AS_EXIT_USAGE, "%s: '%s' is not native or cudaMallocAsync", d->name, val);
}

static int parse_ignored_bool(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	return as_opt_parse_bool(conf, d, val, err);
}

static int parse_ignored_num(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	uint64_t v;
	if (parse_num(val, &v))
		return as_fail(err, AS_EXIT_USAGE, "%s: '%s' is not a number", d->name, val);
	if (!strcmp(d->name, "pinned_num_register_threads") && (!is_pow2(v) || v > 128))
		return as_fail(err, AS_EXIT_USAGE, "%s: %s is not a power of 2 up to 128", d->name, val);
	if (!strcmp(d->name, "pinned_reserve_segment_size_mb") && !v)
		return as_fail(err, AS_EXIT_USAGE, "%s: must be more than 0", d->name);
	((pt_conf *)conf)->dummy_u64 = v;
	return 0;
}

/* version:2.N is allocsim's key, not PyTorch's: applied before every other key (parse_version). */
static int skip_version(void *conf, const as_optdesc *d, const char *val, as_err *err)
{
	(void)conf; (void)d; (void)val; (void)err;
	return 0;
}

#define OFF(f) offsetof(pt_conf, f)
const as_optdesc pt_opts[] = {
	{ "max_split_size_mb", "MiB", "unlimited", "blocks this large or larger are never split; >= 20", parse_mb_min20, OFF(max_split_size) },
	{ "max_non_split_rounding_mb", "MiB", "20", "an oversize request may take a cached block up to this much larger", parse_mb_min20, OFF(max_non_split_rounding) },
	{ "roundup_power2_divisions", "int|[MiB:int,...,>:int]", "0", "round requests up to one of N divisions between powers of two", parse_roundup, 0 },
	{ "garbage_collection_threshold", "(0,1)", "0", "with a capacity: free old cached segments above this share of it", parse_gc, 0 },
	{ "expandable_segments", "True|False", "False", "grow segments by mapping 2 MiB / 20 MiB pages (CUDA VMM)", as_opt_parse_bool, OFF(expandable) },
	{ "large_segment_size_mb", "MiB", "20", "segment size for 1-10 MiB requests and large page size (newest PyTorch)", parse_large_seg, 0 },
	{ "per_process_memory_fraction", "[0,1]", "1", "accepted; use --capacity to set the allowed memory", parse_fraction, 0 },
	{ "backend", "native", "native", "only the native allocator is simulated by this policy", parse_backend, 0 },
	{ "release_lock_on_cudamalloc", "True|False", "False", "accepted, no effect on a single-threaded replay", parse_ignored_bool, OFF(dummy_bool) },
	{ "release_lock_on_hipmalloc", "True|False", "False", "accepted, no effect", parse_ignored_bool, OFF(dummy_bool) },
	{ "pinned_use_cuda_host_register", "True|False", "False", "accepted; pinned host memory: policy pytorch-pinned", parse_ignored_bool, OFF(dummy_bool) },
	{ "pinned_use_hip_host_register", "True|False", "False", "accepted, no effect", parse_ignored_bool, OFF(dummy_bool) },
	{ "pinned_num_register_threads", "int", "1", "accepted; pinned host memory: policy pytorch-pinned", parse_ignored_num, 0 },
	{ "pinned_use_background_threads", "True|False", "False", "accepted, no effect", parse_ignored_bool, OFF(dummy_bool) },
	{ "pinned_reserve_segment_size_mb", "MiB", "0", "accepted, no effect", parse_ignored_num, 0 },
	{ "graph_capture_record_stream_reuse", "True|False", "False", "accepted, CUDA graphs are not simulated", parse_ignored_bool, OFF(dummy_bool) },
	{ "pinned_free_catch_all", "True|False", "False", "accepted (2.12 on), no effect: pinned host memory is policy pytorch-pinned", parse_ignored_bool, OFF(dummy_bool) },
	{ "pinned_max_round_threshold_mb", "MiB", "unset", "accepted (2.13 on), no effect on device memory: a pinned host key (AcceleratorAllocatorConfig)", parse_ignored_num, 0 },
	{ "pinned_max_cached_size_mb", "MiB", "unset", "accepted (2.13 on), no effect on device memory: a pinned host key (AcceleratorAllocatorConfig)", parse_ignored_num, 0 },
	{ "throw_on_cudamalloc_oom", "True|False", "False", "2.12 on: a new segment that would take the reserved bytes past per_process_memory_fraction x the device total fails at once, without the free-and-retry chain (num_oom_rejections)", as_opt_parse_bool, OFF(throw_on_oom) },
	{ "version", "2.N", "2.14", "allocsim's own key (not PyTorch's, stripped before settings are compared): the release whose rules apply, 2.1 .. 2.14; 2.12-2.14 add keys only, the behaviour replayed is 2.11's (default: what a snapshot's fields imply, else 2.14)", skip_version, 0 },
	{ NULL, NULL, NULL, NULL, NULL, 0 },
};

/* The first release whose PYTORCH_CUDA_ALLOC_CONF accepts a key (PR dates; doc/pytorch-policy.md). */
static const struct { const char *key; int since; } key_since[] = {
	{ "pinned_use_background_threads", 5 },
	{ "max_non_split_rounding_mb", 6 },     /* PR #136174 */
	{ "pinned_reserve_segment_size_mb", 8 },
	{ "graph_capture_record_stream_reuse", 9 },
	{ "per_process_memory_fraction", 10 },
	{ "large_segment_size_mb", 11 },
	{ "pinned_free_catch_all", 12 },        /* parser order (before throw_on_cudamalloc_oom); ≈ */
	{ "throw_on_cudamalloc_oom", 12 },      /* v2.12.0 release notes, CUDA: PR #179473 */
	{ "pinned_max_round_threshold_mb", 13 }, /* v2.13.0 release notes (releng): PR #171662 */
	{ "pinned_max_cached_size_mb", 13 },    /* parsed beside it (AllocatorConfig.cpp 106319cb parseArgs); ≈ */
	/* CUDAAllocatorConfig.cpp 0b2b76de (2.15.0a0) parseArgs parses them; in no release notes up to
	 * v2.14.0 (PR #192269): newer than every version here */
	{ "expandable_segments_reserve", 15 },
	{ "expandable_segments_reserve_by_class", 15 },
};

/* The value of the top-level item KEY of a config string, blanks dropped, into buf; 1 if present. */
static int conf_item(const char *s, const char *key, char *buf, size_t n)
{
	size_t kl = strlen(key);
	int depth = 0;
	for (const char *p = s; *p; p++) {
		if (*p == '[')
			depth++;
		else if (*p == ']')
			depth--;
		if (depth || (p != s && p[-1] != ',' && !isspace((unsigned char)p[-1])) || strncmp(p, key, kl))
			continue;
		const char *v = p + kl;
		while (isspace((unsigned char)*v))
			v++;
		if (*v != ':')
			continue;
		size_t k = 0;
		for (v++; *v && *v != ',' && k + 1 < n; v++)
			if (!isspace((unsigned char)*v))
				buf[k++] = *v;
		buf[k] = 0;
		return 1;
	}
	return 0;
}

/* version:2.N (allocsim's key): which release's rules; then the keys that release did not know. */
static int parse_version(pt_conf *c, const char *s, as_err *err)
{
	char buf[32], *end;
	if (conf_item(s, "version", buf, sizeof buf)) {
		errno = 0;
		long minor = strncmp(buf, "2.", 2) ? -1 : strtol(buf + 2, &end, 10);
		if (minor < 1 || minor > PT_VERSION_MAX || errno || *end || !isdigit((unsigned char)buf[2]))
			return as_fail(err, AS_EXIT_USAGE, "version:%s: the pytorch policy has the rules of 2.1 to 2.%d "
				"(version is allocsim's key, not PyTorch's)", buf, PT_VERSION_MAX);
		c->version = (int)minor;
		c->version_given = 1;
	}
	for (size_t i = 0; i < sizeof key_since / sizeof key_since[0]; i++)
		if (c->version < key_since[i].since && conf_item(s, key_since[i].key, buf, sizeof buf)) {
			if (key_since[i].since > PT_VERSION_MAX)
				return as_fail(err, AS_EXIT_USAGE, "Unrecognized key '%s' in allocator config: not a key in PyTorch "
					"2.%d (version:2.%d); it is newer than 2.%d", key_since[i].key, c->version, c->version, PT_VERSION_MAX);
			return as_fail(err, AS_EXIT_USAGE, "Unrecognized key '%s' in allocator config: not a key in PyTorch "
				"2.%d (version:2.%d); it came with 2.%d", key_since[i].key, c->version, c->version, key_since[i].since);
		}
	return 0;
}

int pt_conf_parse(pt_conf *c, const char *s, as_err *err)
{
	memset(c, 0, sizeof(*c));
	c->version = PT_VERSION_MAX;
	if (parse_version(c, s, err))
		return -1;
	c->max_split_size = PT_NO_LIMIT;
	c->large_segment_size = 20ULL << 20;
	c->max_non_split_rounding = c->large_segment_size;
	c->fraction = 1.0;
	/* large_segment_size_mb is parsed before every other key, as in PyTorch. */
	const char *ls = strstr(s, "large_segment_size_mb");
	if (ls) {
		const char *v = strchr(ls, ':');
		char buf[32];
		size_t k = 0;
		if (v)
			for (v++; *v && *v != ',' && k < sizeof buf - 1; v++)
				if (!isspace((unsigned char)*v))
					buf[k++] = *v;
		buf[k] = 0;
		if (parse_large_seg(c, NULL, buf, err))
			return -1;
	}
	return as_conf_parse(s, pt_opts, c, err);
}

uint64_t pt_round_size(const pt_conf *c, uint64_t n)
{
	if (n < PT_MIN_BLOCK)
		return PT_MIN_BLOCK;
	int lg = log2u(n);
	int idx = lg > 20 ? lg - 20 : 0;
	if (idx > 15)
		idx = 15;
	uint64_t d = c->divisions[idx];
	if (d > 1 && n > PT_MIN_BLOCK * d) {
		if (is_pow2(n))
			return n;
		uint64_t floor2 = 1ULL << lg;
		uint64_t step = floor2 >> log2u(d);
		if (!step)
			return floor2 << 1;
		uint64_t f = n & ~(step - 1);
		return f == n ? n : f + step;
	}
	return (n + PT_MIN_BLOCK - 1) / PT_MIN_BLOCK * PT_MIN_BLOCK;
}

