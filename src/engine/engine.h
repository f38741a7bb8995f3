/* engine.h - replays events against a policy and keeps the accounting every policy shares. */
#ifndef ALLOCSIM_ENGINE_H
#define ALLOCSIM_ENGINE_H
#include "readers/trace.h"
#include "device/device.h"
#include "util/idmap.h"
#include "device/latency.h"
#include "policies/policy.h"
#include <stdio.h>

#include "engine/columns.h"

/* The summary of a replay: one field per CNT or SUM column of AS_COLUMNS (columns.h). */
typedef struct as_summary {
	AS_COLUMNS(AS_COL_FIELD)
} as_summary;

/* The replay engine: opaque outside src/engine (its fields: engine_impl.h); what others read of it
 * goes through the accessors below. */
typedef struct as_engine as_engine;

/*
 * A stage between the reader and the engine: with one set, as_engine_step hands it every event,
 * and it applies them through as_engine_apply and the calls below (src/engine/reconcile.c reconciles a
 * snapshot's record with the replayed policy this way). The engine itself knows no allocator.
 */
typedef struct as_stage {
	int (*event)(struct as_stage *st, as_engine *e, const as_event *ev, as_err *err);
	void (*finish)(struct as_stage *st, as_engine *e);   /* at as_engine_finish, before the summary */
	void (*destroy)(struct as_stage *st);                /* at as_engine_free */
	/* What the stage, as it stands, would hand to as_engine_apply unchanged (bits 1u << type), so
	 * that as_engine_step applies it without the call: pass, every such event; pass_settled, such an
	 * event unless its slot holds an allocation whose free was requested (as_engine_pending). The
	 * stage keeps both up to date after each of its calls (0: it sees every event). */
	uint32_t pass, pass_settled;
} as_stage;

/* The request an EV_ALLOC event makes. */
static inline as_request as_event_request(const as_event *ev)
{
	return (as_request){ .id = ev->id, .size = ev->size, .stream = ev->stream, .thread = ev->thread, .time_us = ev->time_us, .pool = ev->pool };
}

int as_engine_init(as_engine *e, const as_policy_ops *ops, const char *config, as_device *dev, as_err *err);
/* When a free the trace requested before the other streams were done with the block (free_requested,
 * then free_completed: record_stream) reaches the policy: AS_FREE_AT_POLICY the policy's own default
 * (AS_CAP_FREE_AT_REQUEST: at the request; else at the completion), AS_FREE_AT_REQUESTED, AS_FREE_AT_COMPLETED.
 * Set after as_engine_init, before the first event (and before an offline policy's plan). */
enum { AS_FREE_AT_POLICY, AS_FREE_AT_REQUESTED, AS_FREE_AT_COMPLETED };
void as_engine_free_at(as_engine *e, int mode);
/* "requested" / "completed" -> AS_FREE_AT_*; -1 for anything else. */
int as_free_at_parse(const char *s);
/* Applies one event (through the stage, if one is set); -1 on an internal error (or a --check failure). */
int as_engine_step(as_engine *e, const as_event *ev, as_err *err);
/* Applies one event directly. EV_FREE with EVF_DEFER counts the free but leaves a free-requested
 * block with its owner until as_engine_complete; EV_EMPTY_CACHE with EVF_MAYBE and the segment
 * events are a stage's business and change nothing here. */
int as_engine_apply(as_engine *e, const as_event *ev, as_err *err);
/* Whether the allocation in this slot (as_event.slot) is live with its free requested. */
int as_engine_pending(as_engine *e, uint32_t slot);
/* Completes a deferred free (the earliest deferred with this id): the block returns to the policy. */
void as_engine_complete(as_engine *e, uint64_t id);
void as_engine_finish(as_engine *e);
void as_engine_free(as_engine *e);

/* Accessors (the engine's state is its own). */
as_policy *as_engine_policy(const as_engine *e);
as_device *as_engine_device(const as_engine *e);
/* The summary so far (complete after as_engine_finish). */
const as_summary *as_engine_summary(const as_engine *e);
/* The index of the event after which reserved bytes peaked. */
uint64_t as_engine_peak_event(const as_engine *e);
/* The engine's own outputs and checks, set before the first event (replay's --timeline, --every,
 * --latency, --check and host timing); NULL files: none. */
typedef struct as_engine_outputs {
	FILE *timeline;        /* requested/allocated/reserved after every every-th event (header written by the caller) */
	uint64_t every;        /* >= 1 */
	FILE *latency;         /* one row per malloc/free */
	int check;             /* the policy's invariants after every event */
	int host_timing;       /* include the host time of the policy itself (not deterministic) */
} as_engine_outputs;
void as_engine_set_outputs(as_engine *e, const as_engine_outputs *o);

/* Summary CSV (summary.c, from AS_COLUMNS). */
/* A CSV field, quoted when it holds a comma, quote or line break (RFC 4180); NULL is empty. */
void as_csv_str(FILE *f, const char *s);
void as_summary_header(FILE *f);
void as_summary_row(FILE *f, const char *trace, const char *policy, const char *config, uint64_t capacity,
	const as_summary *s);
/* --stats: summary.NAME,VALUE for every CNT column. */
void as_summary_stats(FILE *f, const as_summary *s);
/* 'allocsim columns': the column table of doc/metrics.md (markdown). */
void as_columns_markdown(FILE *f);

#endif
