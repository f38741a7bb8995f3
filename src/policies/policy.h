/* policy.h - the interface every allocator policy implements, and its option tables. */
#ifndef ALLOCSIM_POLICY_H
#define ALLOCSIM_POLICY_H
#include "util/common.h"
#include "device/device.h"

typedef struct as_policy as_policy;

/* One allocation request, as the trace gives it: per-thread or time-aware policies read what they need. */
typedef struct as_request {
	uint64_t id;       /* the trace's allocation id */
	uint64_t size;     /* requested bytes */
	uint64_t stream;
	uint64_t thread;   /* the requesting thread; 0 when the trace records none */
	int64_t time_us;   /* -1 when unknown */
	uint32_t pool;     /* the memory pool (as_event.pool): 0 the default one, else a private pool */
} as_request;

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
/* Builds the block arrays of segment views, one segment after another (src/policies/segview.c):
 * push each block in address order, then emit the segment (blocks and, where the view's size is 0,
 * their sum as its size) and start the next one; free at the end. */
typedef struct as_segbuf {
	uint64_t *sizes, bytes;
	int *states;
	size_t n, cap;
} as_segbuf;
void as_segbuf_push(as_segbuf *b, uint64_t size, int state);
void as_segbuf_emit(as_segbuf *b, as_seg_view *v, as_seg_cb cb, void *ctx);
void as_segbuf_free(as_segbuf *b);
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

/*
 * Capabilities (as_policy_ops.flags): what a policy answers through its query entry, so a caller
 * can refuse an option before a replay instead of branching on the policy's name.
 */
#define AS_CAP_STATS       (1u << 0) /* AS_Q_STATS: every statistic the policy keeps (--stats) */
#define AS_CAP_SEGMENTS    (1u << 1) /* AS_Q_SEGMENTS: the segment and block map (--segments, validate) */
#define AS_CAP_FREE_STATS  (1u << 2) /* AS_Q_FREE_STATS: largest free block, free cached bytes */
#define AS_CAP_WASTE       (1u << 3) /* AS_Q_WASTE: where reserved bytes go beyond the requested ones */
#define AS_CAP_SUMMARY     (1u << 4) /* AS_Q_SUMMARY: a human-readable statistics table (--summary) */
#define AS_CAP_RECONCILE   (1u << 5) /* AS_Q_EXPLAINS_RELEASE, AS_Q_NEEDS_FLUSH, AS_Q_FLUSH_HOOK (reconcile.c) */
#define AS_CAP_PLAN        (1u << 6) /* offline: needs AS_Q_PLAN, the whole trace's lifetimes, before the replay */
#define AS_CAP_ROUND       (1u << 8) /* AS_Q_ROUND: the size a request is rounded to (lower_bound_bytes) */
/* Properties (no query behind them): */
#define AS_CAP_NO_INFERRED_EMPTY (1u << 7) /* a snapshot's inferred empty_cache (EVF_MAYBE) never applies: the
                                            * policy models an allocator other than the recording one, so such a
                                            * run is the recording allocator's own doing (src/engine/reconcile.c) */
#define AS_CAP_FREE_AT_REQUEST (1u << 9) /* the real allocator's user hands a block back when the program lets go of it
                                          * (the trace's free_requested), not when the other streams' use of it has
                                          * completed (free_completed): stream-ordered pools (CuPy, RMM, cudaMallocAsync,
                                          * cudaFree). The engine's default for --free-at (engine.h, as_engine_free_at) */
#define AS_CAP_PROPERTIES  (AS_CAP_NO_INFERRED_EMPTY | AS_CAP_FREE_AT_REQUEST) /* the bits that are not queries */

/* The optional queries (curl's connection-filter queries): query(p, AS_Q_..., arg) returns 0 when
 * answered (arg filled), AS_Q_UNKNOWN when the policy does not answer this query. */
enum {
	AS_Q_STATS,            /* as_q_stats *: calls cb for every statistic */
	AS_Q_SEGMENTS,         /* as_q_segments *: calls cb for every segment */
	AS_Q_FREE_STATS,       /* as_q_free_stats *: largest free block, total free cached bytes */
	AS_Q_WASTE,            /* as_waste *: the attribution now */
	AS_Q_SUMMARY,          /* FILE *: write the summary table */
	AS_Q_FIT_VALUES,       /* as_q_fit_values *: the values 'allocsim fit param' tries for an option */
	/* Snapshot reconciliation (src/engine/reconcile.c; doc/internals.md): */
	AS_Q_EXPLAINS_RELEASE, /* as_q_release *: would this request, now, make the policy itself release
	                        * exactly these device ranges (sizes in order) through its fallback on a miss? */
	AS_Q_NEEDS_FLUSH,      /* as_q_flush *: would this request reach the policy's full flush (which
	                        * first waits for all pending cross-stream frees)? */
	AS_Q_FLUSH_HOOK,       /* as_q_hook *: call hook(ctx) once, at the start of the next full flush */
	AS_Q_PLAN,             /* as_q_plan *: every allocation's lifetime, before the first malloc */
	AS_Q_ROUND,            /* as_q_round *: the size a request of n bytes is rounded to before it is placed
	                        * (never above the block it gets: the engine checks this under --check) */
	AS_Q_LEAN,             /* NULL: the caller will not ask AS_Q_STATS or AS_Q_SUMMARY: the policy may stop
	                        * keeping what only they report (asked before the first event; a policy that
	                        * answers then declines those two queries with AS_Q_UNKNOWN) */
	AS_Q_SAME_RUN,         /* as_q_same *: asked after a whole replay: would a replay of the same events with
	                        * this other configuration (same capacity, same reconciliation) have made the
	                        * same decisions, so that its summary is this one's? Answered yes only when
	                        * the policy proves it from what the replay compared (sweep shares the run) */
	AS_Q__COUNT
};
#define AS_Q_UNKNOWN 1

typedef struct as_q_stats {
	as_stat_cb cb;
	void *ctx;
} as_q_stats;
typedef struct as_q_segments {
	as_seg_cb cb;
	void *ctx;
} as_q_segments;
typedef struct as_q_free_stats {
	uint64_t largest, total;
} as_q_free_stats;
typedef struct as_q_fit_values {
	const char *option;    /* in */
	const char *values;    /* out: e.g. "none,20..2048:x2" */
} as_q_fit_values;
typedef struct as_q_release {
	const as_request *rq;      /* the request */
	const uint64_t *sizes;     /* the recorded releases (frees and unmaps), in order */
	size_t n;
	int answer;
} as_q_release;
typedef struct as_q_flush {
	const as_request *rq;
	int answer;
} as_q_flush;
/* One allocation's lifetime, from a first pass over the trace (src/engine/lifetimes.c). Event indices count
 * the events the engine replays (as summary.events does); the k-th lifetime is the k-th malloc. */
#define AS_NEVER UINT64_MAX
typedef struct as_lifetime {
	uint64_t alloc;    /* index of the allocation event */
	uint64_t free;     /* index of the event that returns the block (EV_FREE); AS_NEVER if none */
	uint64_t size, stream;
} as_lifetime;
typedef struct as_q_plan {
	const as_lifetime *v;  /* in allocation order; valid for the policy's whole life */
	size_t n;
} as_q_plan;
typedef struct as_q_round {
	uint64_t size;         /* in: requested bytes; out: rounded bytes */
	uint64_t granule;      /* out, optional: nonzero when every size rounds up to a multiple of this
	                        * power of two (0 to 0), so the caller may round without asking again */
} as_q_round;
typedef struct as_q_same {
	const char *config;    /* in: the other configuration (-c string) */
	int answer;            /* out: 1 the same run */
} as_q_same;
typedef struct as_q_hook {
	void (*hook)(void *ctx);
	void *ctx;
} as_q_hook;

/* What a policy makes of its settings on one trace (as_policy_ops.prepare): the warnings that apply
 * to the run, for the command to print where it prints them (the AS_WARN_* bits). */
#define AS_WARN_GC_NO_CAPACITY (1u << 0) /* a setting that acts only under a memory limit, and the run has none */
#define AS_WARN_RECORDED_OOMS  (1u << 1) /* the run's limit is --capacity's alone: a recording's out-of-memory
                                          * errors are not reproduced without one (cli_warn_recorded_ooms) */
#define AS_WARN_FRACTION_NO_CAPACITY (1u << 3) /* per_process_memory_fraction below 1 in -c, no --capacity/--fraction:
                                          * PyTorch's limit from that key is not applied (cli_warn_gc) */
#define AS_WARN_THROW_NO_CAPACITY (1u << 4) /* ... and throw_on_cudamalloc_oom:True: rejections where PyTorch, under
                                          * its limit, would first free its cache (cli_warn_gc) */
#define AS_WARN_UNNAMED_POOLS  (1u << 2) /* the policy keeps private pools: a snapshot that does not say which
                                          * requests went to them matters (cli_warn_unnamed_pools) */
struct as_meta;

typedef struct as_policy_ops {
	const char *name;
	const char *summary;
	const as_optdesc *opts;
	unsigned flags;        /* AS_CAP_* */
	/* config: the -c string ("" = defaults). */
	int (*create)(as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err);
	/* 0 served (handle, block size, block address), 1 out of memory. */
	int (*malloc)(as_policy *p, const as_request *rq, void **handle, uint64_t *block_size, uint64_t *addr);
	void (*free_requested)(as_policy *p, void *handle); /* optional */
	void (*free)(as_policy *p, void *handle);
	/* optional: a free that names its stream and thread (EVF_STREAM: RMM logs' free lines), rq being
	 * the free's own (id, stream, thread, time; size 0); called instead of free */
	void (*free_from)(as_policy *p, void *handle, const as_request *rq);
	void (*empty_cache)(as_policy *p);
	/* optional: the program let go of private pool `pool` (EV_POOL_RELEASE); a policy without
	 * private pools serves every pool's requests from its one pool and needs no such call */
	void (*pool_release)(as_policy *p, uint32_t pool, int empty); /* empty: and empty its cache (EVF_POOL_EMPTY) */
	int (*check)(as_policy *p, as_err *err);            /* invariants; 0 ok */
	/* optional: everything else (AS_Q_*); 0 answered, AS_Q_UNKNOWN not */
	int (*query)(as_policy *p, int what, void *arg);
	void (*destroy)(as_policy *p);
	/* optional, the settings from string to decision (as_policy_prepare): every command calls it once per
	 * run, before the policy is created, so that rows of one trace under one setting are the same whatever
	 * command produced them. *config (malloc'd, the -c string) may be replaced with the run's settings
	 * (what the trace implies added); m is the trace's metadata, capacity the run's limit (0 none).
	 * Returns the AS_WARN_* bits that apply. NULL: the settings as given, no warning. */
	unsigned (*prepare)(char **config, const struct as_meta *m, uint64_t capacity);
	/* optional: whether config (prepared) is the settings the trace recorded, the policy's own keys
	 * aside (the reconciliation resolves then). NULL: the same string. */
	int (*same_settings)(const char *recorded, const char *config);
} as_policy_ops;

struct as_policy {
	const as_policy_ops *ops;
};

/* The query entry, AS_Q_UNKNOWN for a policy without one. */
static inline int as_policy_query(as_policy *p, int what, void *arg)
{
	return p->ops->query ? p->ops->query(p, what, arg) : AS_Q_UNKNOWN;
}

/* registry.c */
extern const as_policy_ops *const as_policies[];
/* A registered policy, or a stack "A>B>..." of them (stack.c: A takes its device memory from B). */
const as_policy_ops *as_policy_find(const char *name);
/* The message of an unknown policy name: "unknown policy 'X'", with the closest name if there is one. */
void as_policy_unknown(const char *name, char *msg, size_t len);
/* Creates a policy (or a stack, whose config is one ';'-separated part per layer, top first). */
int as_policy_create(const as_policy_ops *ops, as_policy **out, const char *config, as_device *dev, as_counters *ctr, as_err *err);
/* The one settings step of every command: ops's prepare entry (or the settings as given). */
unsigned as_policy_prepare(const as_policy_ops *ops, const struct as_meta *m, uint64_t capacity, char **config);
/* Whether config (prepared) runs the settings a trace recorded, recorded (ops's same_settings entry, or
 * the same string); 0 when recorded is NULL (the trace records none). */
int as_policy_recorded(const as_policy_ops *ops, const char *recorded, const char *config);
/* The AS_CAP_* bit's name ("stats", "segments", ...), NULL past the last. */
const char *as_cap_name(unsigned bit);

/* The registered policies (registry.c hands its table over at start-up), for the message naming the
 * policy that takes a key another policy was given. */
void as_conf_policies(const as_policy_ops *const *list);
/* options.c: "key:value,key:[a:b,c:d]" with PyTorch's tokenising rules (whitespace dropped). */
int as_conf_parse(const char *s, const as_optdesc *tab, void *conf, as_err *err);
/* Each row's default (def, the text 'allocsim policies' shows) through the row's own parser, in the
 * table's order: a policy starts from the settings its table prints, written nowhere else. A default
 * that does not parse is the table's bug (AS_EXIT_SOFTWARE). Every policy but pytorch and
 * pytorch-pinned, whose defaults include values their keys refuse ("unlimited", 0 = off). */
int as_conf_defaults(const as_optdesc *tab, void *conf, as_err *err);
/* base with "key:val" added to its top layer's settings (before the first ';' of a stack's). */
char *as_conf_with(const char *base, const char *key, const char *val);
/* The settings CURRENT with CAND's keys set, key by key ("key:value" items split at the commas
 * outside brackets): a key CURRENT has takes CAND's value in place, a new key is appended, so no key
 * appears twice ("max_split_size_mb:40" + "expandable_segments:True,max_split_size_mb:128" =
 * "max_split_size_mb:128,expandable_segments:True"). *changes: CAND's keys that change CURRENT.
 * malloc'd. */
char *as_conf_merge(const char *current, const char *cand, int *changes);
int as_opt_parse_size(void *conf, const as_optdesc *d, const char *val, as_err *err);
int as_opt_parse_bool(void *conf, const as_optdesc *d, const char *val, as_err *err);
#endif
