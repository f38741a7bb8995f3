/* policy.h - the interface every allocator policy implements, and its option tables. */
#ifndef ALLOCSIM_POLICY_H
#define ALLOCSIM_POLICY_H
#include "../src/common.h"
#include "../src/device.h"

typedef struct as_policy as_policy;

/* Counters a policy reports into; the engine owns them. */
typedef struct as_counters {
	uint64_t alloc_retries;   /* allocations that released cached memory and tried again */
} as_counters;

/* One option of a policy: the same row parses `-c` and prints `allocsim policies`. */
typedef struct as_optdesc {
	const char *name;
	const char *type;      /* shown to users: "MiB", "bool", "size", ... */
	const char *def;       /* default, as text */
	const char *help;
	int (*parse)(void *conf, const struct as_optdesc *d, const char *val, as_err *err);
	size_t off;            /* field offset in the policy's config struct (generic parsers) */
} as_optdesc;

/* A block in the segment map (for validate and --segments). */
typedef struct as_seg_view {
	uint64_t addr, size, stream;
	int is_small, is_expandable;
	size_t nblocks;
	const uint64_t *block_sizes;
	const int *block_states; /* 0 free, 1 allocated, 2 pending free */
} as_seg_view;
typedef void (*as_seg_cb)(void *ctx, const as_seg_view *seg);
typedef void (*as_stat_cb)(void *ctx, const char *key, int64_t value);

/* Where reserved bytes go beyond the requested ones, at one moment (doc/metrics.md). */
#define AS_WASTE_CATEGORIES(X) \
	X(rounding, "allocated block's rounded size minus the requested bytes") \
	X(unsplit, "block bytes beyond the rounded size that were not split off") \
	X(oversize, "the same for blocks at or above the policy's oversize limit") \
	X(free_cached, "free cached blocks") \
	X(pending_free, "blocks freed by the program but still in use by other streams")
typedef struct as_waste {
#define X(n, d) uint64_t n;
	AS_WASTE_CATEGORIES(X)
#undef X
} as_waste;

typedef struct as_policy_ops {
	const char *name;
	const char *summary;
	const as_optdesc *opts;
	/* config: the -c string ("" = defaults). */
	int (*create)(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err);
	/* 0 served (handle, block size, block address), 1 out of memory. */
	int (*malloc)(as_policy *p, uint64_t size, uint64_t stream, void **handle, uint64_t *block_size, uint64_t *addr);
	void (*free_requested)(as_policy *p, void *handle); /* optional */
	void (*free)(as_policy *p, void *handle);
	void (*empty_cache)(as_policy *p);
	/* optional: would a request of this size, now, make the policy itself release exactly
	 * these device ranges (sizes in order: frees and unmaps) through its fallback on a miss?
	 * Used to tell a snapshot's empty_cache() from the allocator's own releases. */
	int (*explains_release)(as_policy *p, uint64_t size, uint64_t stream, const uint64_t *sizes, size_t n);
	/* optional: would this request reach the policy's full flush (which first waits for all
	 * pending cross-stream frees)? If so the engine hands those frees to flush_hook, which the
	 * policy calls at the start of its flush. */
	int (*needs_flush)(as_policy *p, uint64_t size, uint64_t stream);
	void (*set_flush_hook)(as_policy *p, void (*hook)(void *ctx), void *ctx);
	int (*check)(as_policy *p, as_err *err);            /* invariants; 0 ok */
	void (*stats)(as_policy *p, as_stat_cb cb, void *ctx);        /* optional: detailed statistics */
	void (*segments)(as_policy *p, as_seg_cb cb, void *ctx);      /* optional: segment map */
	/* optional: largest free block and total free cached bytes (external fragmentation) */
	void (*free_stats)(as_policy *p, uint64_t *largest, uint64_t *total);
	/* optional: waste attribution now; requested bytes per live block are known to the policy */
	void (*waste)(as_policy *p, as_waste *w);
	void (*destroy)(as_policy *p);
} as_policy_ops;

struct as_policy {
	const as_policy_ops *ops;
};

/* registry.c */
extern const as_policy_ops *const as_policies[];
const as_policy_ops *as_policy_find(const char *name);

/* options.c: "key:value,key:[a:b,c:d]" with PyTorch's tokenising rules (whitespace dropped). */
int as_conf_parse(const char *s, const as_optdesc *tab, void *conf, as_err *err);
int as_opt_parse_size(void *conf, const as_optdesc *d, const char *val, as_err *err);
int as_opt_parse_mib(void *conf, const as_optdesc *d, const char *val, as_err *err);
int as_opt_parse_bool(void *conf, const as_optdesc *d, const char *val, as_err *err);
#endif
