/* lifetimes.h - the first pass that gives an offline policy (AS_CAP_PLAN) the whole trace's
 * allocation lifetimes before the replay (AS_Q_PLAN). */
#ifndef ALLOCSIM_LIFETIMES_H
#define ALLOCSIM_LIFETIMES_H
#include "engine/engine.h"
#include "readers/evbuf.h"

typedef struct as_lifetimes {
	as_lifetime *v;
	size_t n, cap;
	uint64_t events;   /* events counted so far (the engine's numbering) */
	idmap open;        /* live id -> index + 1 into v */
	int at_request;    /* a lifetime ends at its free request (the engine's free_early), else at the free */
} as_lifetimes;

void as_lifetimes_init(as_lifetimes *l);
/* Feeds one decoded event, in trace order (works on a stream or an in-memory event array). */
void as_lifetimes_add(as_lifetimes *l, const as_event *ev);
void as_lifetimes_free(as_lifetimes *l);
/* Reads the trace at path once and collects its lifetimes; -1 on a read error. */
int as_lifetimes_from_trace(as_lifetimes *l, const char *path, as_err *err);
/* For a policy with AS_CAP_PLAN: the first pass over path, handed to the policy (the lifetimes are
 * kept in *l, which must outlive the replay). Nothing to do, and 0, for other policies. */
int as_plan_from_trace(as_engine *e, as_lifetimes *l, const char *path, as_err *err);
/* The same from a trace decoded once (sweep, fit, replay of a snapshot): no second read. */
int as_plan_from_events(as_engine *e, as_lifetimes *l, const as_evbuf *b, as_err *err);
/* The same from an array of events (tests, fuzzers: whatever replays an array it built). */
int as_plan_from_array(as_engine *e, as_lifetimes *l, const as_event *v, size_t n, as_err *err);
#endif
