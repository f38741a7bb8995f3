/* engine_impl.h - the replay engine's state: for src/engine's own files (and white-box tests, fuzz
 * harnesses) only; everyone else sees the opaque as_engine and engine.h's accessors. */
#ifndef ALLOCSIM_ENGINE_IMPL_H
#define ALLOCSIM_ENGINE_IMPL_H
#include "engine/engine.h"

typedef struct as_live {
	void *handle;         /* NULL if the allocation failed */
	uint64_t size, block_size;
	uint64_t rounded;     /* size as the policy rounds it (lower_bound_bytes; asked once, at the malloc) */
	uint32_t free_requested;
	uint32_t used;        /* the slot holds a live allocation */
	uint32_t freed_early; /* --free-at requested: the block went back to the policy at the free request */
} as_live;

/* A free a stage deferred (EVF_DEFER): its allocation, by the event's id, until as_engine_complete. */
typedef struct as_deferred {
	uint64_t id;
	as_live l;
} as_deferred;

struct as_engine {
	as_policy *pol;
	as_device *dev;
	as_counters ctr;
	as_live *slots;        /* indexed by as_event.slot (a flat array: no hashing, no allocation per event) */
	size_t nslots;
	as_deferred *deferred; /* deferred frees, in order (their slots may already be reused) */
	size_t ndeferred, capdeferred;
	as_summary s;
	uint64_t requested, allocated;
	uint64_t held;         /* live allocations (until their free completes), each rounded as the policy rounds (AS_Q_ROUND) */
	int rounds;            /* the policy answers AS_Q_ROUND */
	uint64_t round_granule; /* ... with a power-of-two granule: rounded here, without a query */
	int check;
	FILE *timeline;
	uint64_t every;
	as_reader *reader;     /* for error positions */
	uint64_t npending;     /* frees requested and not yet completed */
	int free_early;        /* a block returns to the policy at its free request (as_engine_free_at) */
	struct as_stage *stage; /* optional: sees every event before the engine (reconcile.c) */
	/* metric accumulators */
	double jw1_sum;
	uint64_t jw1_skipped;  /* events without requested bytes (no jw1 term) */
	uint64_t ext_n, last_reserved_peak;
	double ext_sum;
	uint64_t req_at_peak_res, alloc_at_peak_res, res_at_peak_req, req_at_peak_alloc;
	uint64_t peak_event;   /* index of the event after which reserved bytes peaked */
	as_quant lat_alloc, lat_free;
	int host_timing;       /* include the host time of the policy itself (not deterministic) */
	int clocked;           /* a malloc/free reads the clock: a measured device or host_timing */
	int timed;             /* ... or writes a --latency row */
	int zero_lat;          /* neither, nor a latency model: every malloc's and free's latency is 0 */
	int extras;            /* after an event: a --timeline row or --check */
	int free_stats;        /* the policy answers AS_Q_FREE_STATS */
	FILE *latency;         /* --latency: one row per malloc/free */
};

/* as_run's loop without a sink: the events of src through the stage and the engine until the end,
 * an error (in err), Ctrl-C, or with stop_at_oom the first out-of-memory (the rest of a binary trace
 * validated all the same). recorded_ooms, unless NULL: the requests that failed in the recording
 * (EVF_OOM) among those read. */
struct as_source;
void as_engine_replay(as_engine *e, struct as_source *src, int stop_at_oom, uint64_t *recorded_ooms, as_err *err);

/* as_engine_step, inline for the replay loop (run.c): an event the stage would pass on unchanged
 * (as_stage.pass, pass_settled) goes to as_engine_apply without the stage's call. */
static inline int as_engine_step_inline(as_engine *e, const as_event *ev, as_err *err)
{
	struct as_stage *st = e->stage;
	if (st) {
		uint32_t bit = 1u << ev->type;
		if (!(st->pass & bit) &&
		    (!(st->pass_settled & bit) || (ev->slot < e->nslots && e->slots[ev->slot].used && e->slots[ev->slot].free_requested)))
			return st->event(st, e, ev, err);
	}
	return as_engine_apply(e, ev, err);
}

#endif
