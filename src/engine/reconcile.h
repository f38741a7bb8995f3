/* reconcile.h - the stage between reader and engine that reconciles a recorded allocator's trace
 * (a PyTorch snapshot) with the replayed policy: inferred empty_cache() calls, cross-stream frees
 * the recording completed inside a flush, and the recorded segment addresses (doc/internals.md). */
#ifndef ALLOCSIM_RECONCILE_H
#define ALLOCSIM_RECONCILE_H
#include "engine/engine.h"

/* Attaches the stage to e. resolve: 1 the replay runs the recorded settings (the stage may ask the
 * policy, through AS_CAP_RECONCILE's queries, what its own fallback would release), 0 it does not.
 * (Callers know it before the replay: a snapshot's settings come at its end, so they decode it first.) */
void as_reconcile_attach(as_engine *e, int resolve);
/* The same for a replay of the trace at path with settings conf, from its complete metadata m (a
 * snapshot stores its settings at its end: the callers decode it first, so they are known). */
void as_reconcile_for_trace(as_engine *e, const as_meta *m, const char *path, const char *conf);
/* After a replay: 1 if it ran the recorded settings (resolve as decided), 0 if not or no stage. */
int as_reconcile_resolved(const as_engine *e);
#endif
