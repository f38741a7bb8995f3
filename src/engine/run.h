/* run.h - one whole replay as a library call: the one replay loop (replay, validate, transfer, sweep,
 * compare, fit, advise, predict). */
#ifndef ALLOCSIM_RUN_H
#define ALLOCSIM_RUN_H
#include "engine/engine.h"
#include "readers/evbuf.h"
#include "readers/source.h"

/* A command's outputs around the one replay loop (replay, validate, transfer): every callback optional. */
typedef struct as_run_sink {
	/* after the engine is made (settings parsed), before an offline plan and the first event: the
	 * engine's own outputs (as_engine_outputs), warnings about the settings; -1 (err set) ends it */
	int (*start)(void *ctx, as_engine *e, as_err *err);
	/* before each event reaches the engine */
	void (*before)(void *ctx, as_engine *e, const as_event *ev);
	/* after each event (every type); nonzero ends the replay there, as a result, not an error. Once
	 * more with ev NULL after the last event, before the engine's finish (the policy's end state) */
	int (*event)(void *ctx, as_engine *e, const as_event *ev);
	/* after the whole replay, the summary complete; -1 (err set) fails the run */
	int (*row)(void *ctx, as_engine *e, const as_summary *s, as_err *err);
	void *ctx;
} as_run_sink;

typedef struct as_run_opts {
	const char *path;       /* read through as_source_open, unless events or source is set */
	const as_evbuf *events; /* the trace decoded once (shared read-only between threads) */
	as_source *source;      /* an open source (readers/source.h), read and left open; its metadata is
	                         * complete, and the recorded settings come from it (recorded unset) */
	const as_policy_ops *ops;
	const char *config;
	uint64_t capacity;      /* 0: the trace's; with device set: as given */
	int addr_mode;
	int stop_at_oom;
	int free_at;            /* AS_FREE_AT_* (engine.h): 0 the policy's default */
	const char *recorded;   /* the trace's recorded settings, or NULL if none/unknown */
	int resolve_maybe;      /* when recorded is NULL: whether the replay runs the recorded settings (reconcile.h) */
	const as_reader_opts *reader; /* optional: which device of a snapshot (--device) */
	const struct as_lat_model *model; /* optional: the device-call latency model (read-only, shared) */
	as_device *device;      /* optional: the caller's device (kept); else a simulated one of addr_mode and model */
	int prepared;           /* config went through as_policy_prepare already (the caller printed its warnings) */
	int no_stage;           /* no reconciliation stage: the trace is no recording allocator's (transfer) */
	int full_stats;         /* the policy keeps every statistic (--stats, --summary, --check): no AS_Q_LEAN */
	int wall;               /* the replay's wall time into wall_seconds */
	const as_run_sink *sink; /* optional */
	uint64_t *recorded_ooms; /* optional: the requests replayed that failed in the recording (EVF_OOM) */
} as_run_opts;

/* Replays a trace; fills *out (timing columns left 0). */
int as_run(const as_run_opts *o, as_summary *out, as_err *err);
/* The smallest capacity k*g, lo <= k <= hi, at which fits(ctx, k*g, ...) says 1 (no out-of-memory), by
 * bisection to within tol units (1: to g), hi being known to fit; lo is tried first (fitting there
 * ends the search). step, if not NULL, sees every bisection probe. fits returns 1, 0, or -1 on error
 * (err set), which ends the search with -1. The answer, *best, is a capacity seen to fit.
 * With ahead > 0, fits also gets next[0..nnext): the probes that may follow the one asked (the lower
 * end while it is to be asked, then as_bisect_probes of the interval, at most ahead), for a caller
 * that runs several replays at once (fit -j, advise -j); with ahead 0, nnext is 0. */
int as_bisect_capacity(uint64_t g, uint64_t lo, uint64_t hi, uint64_t tol, size_t ahead,
	int (*fits)(void *ctx, uint64_t cap, const uint64_t *next, size_t nnext, as_err *err),
	void (*step)(void *ctx, uint64_t cap, int ok), void *ctx, uint64_t *best, as_err *err);
/* The probes (capacities) that as_bisect_capacity's loop over (lo, hi) may make next, breadth first:
 * its next one, then the next of each half, ...; at most max into out. Run together, they settle
 * log2(n + 1) steps of the bisection at once. */
size_t as_bisect_probes(uint64_t g, uint64_t lo, uint64_t hi, uint64_t tol, uint64_t *out, size_t max);
/* The recorded settings of a trace's metadata (a copy); NULL when none. */
char *as_recorded_settings(const as_meta *m);
/* A parameter's values: "21,64,none", ranges "32..1024:x2" (geometric) and "0..512:+64". */
int as_parse_values(const char *spec, char ***vals, size_t *n, char *msg, size_t len);
#endif
