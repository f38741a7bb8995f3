/* run.h - one whole replay as a library call (sweep, fit). */
#ifndef ALLOCSIM_RUN_H
#define ALLOCSIM_RUN_H
#include "engine/engine.h"
#include "readers/evbuf.h"

/* Called after every replayed event, and once with ev NULL at the end (as_run_opts.hook). */
typedef void (*as_run_hook)(as_engine *e, const as_event *ev, void *ctx);

typedef struct as_run_opts {
	const char *path;       /* read with a streaming reader, unless events is set */
	const as_evbuf *events; /* the trace decoded once (shared read-only between threads) */
	const as_policy_ops *ops;
	const char *config;
	uint64_t capacity;
	int addr_mode;
	int stop_at_oom;
	int free_at;            /* AS_FREE_AT_* (engine.h): 0 the policy's default */
	const char *recorded;   /* the trace's recorded settings, or NULL if none/unknown */
	int resolve_maybe;      /* when recorded is NULL: whether the replay runs the recorded settings (reconcile.h) */
	as_run_hook hook;       /* optional */
	void *hook_ctx;
	const as_reader_opts *reader; /* optional: which device of a snapshot (--device) */
	const struct as_lat_model *model; /* optional: the device-call latency model (read-only, shared) */
	void (*after)(as_policy *pol, void *ctx); /* optional: sees the policy after a whole replay */
	void *after_ctx;
} as_run_opts;

/* Replays a trace; fills *out (timing columns left 0). */
int as_run(const as_run_opts *o, as_summary *out, as_err *err);
/* The smallest capacity k*g, lo <= k <= hi, at which fits(ctx, k*g) says 1 (no out-of-memory), by
 * bisection to within tol units (1: to g), hi being known to fit; lo is tried first (fitting there
 * ends the search). step, if not NULL, sees every bisection probe. fits returns 1, 0, or -1 on error
 * (err set), which ends the search with -1. The answer, *best, is a capacity seen to fit. */
int as_bisect_capacity(uint64_t g, uint64_t lo, uint64_t hi, uint64_t tol, int (*fits)(void *ctx, uint64_t cap, as_err *err),
	void (*step)(void *ctx, uint64_t cap, int ok), void *ctx, uint64_t *best, as_err *err);
/* The recorded settings of a trace's metadata (a copy); NULL when none. */
char *as_recorded_settings(const as_meta *m);
/* A parameter's values: "21,64,none", ranges "32..1024:x2" (geometric) and "0..512:+64". */
int as_parse_values(const char *spec, char ***vals, size_t *n, char *msg, size_t len);
#endif
