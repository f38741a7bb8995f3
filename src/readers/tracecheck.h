/* tracecheck.h - the sanity rules on times, recorded addresses and segment sizes that every
 * reader's events go through (doc/trace-format.md, "Checks"). */
#ifndef ALLOCSIM_TRACECHECK_H
#define ALLOCSIM_TRACECHECK_H
#include "readers/trace.h"

typedef struct as_tracecheck as_tracecheck;
/* time_unordered: times may go backwards (RMM logs: lines of different threads interleave). */
as_tracecheck *as_tracecheck_new(int time_unordered);
void as_tracecheck_free(as_tracecheck *c);
/* 0 when the event keeps the rules, else -1 and why. */
int as_tracecheck_event(as_tracecheck *c, const as_event *ev, char *why, size_t n);
#endif
