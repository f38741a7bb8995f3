/* reconcile.h - the stage between reader and engine that reconciles a recorded allocator's trace
 * (a PyTorch snapshot) with the replayed policy: inferred empty_cache() calls, cross-stream frees
 * the recording completed inside a flush, and the recorded segment addresses (doc/internals.md). */
#ifndef ALLOCSIM_RECONCILE_H
#define ALLOCSIM_RECONCILE_H
#include "engine.h"

/* Attaches the stage to e. resolve: 1 the replay runs the recorded settings (the stage may ask the
 * policy, through AS_CAP_RECONCILE's queries, what its own fallback would release), 0 it does not,
 * -1 unknown until first needed: then probe(ctx) decides (NULL probe = 0). */
void as_reconcile_attach(as_engine *e, int resolve, int (*probe)(void *ctx), void *ctx);
/* The same for a replay of rd's trace with settings conf: the recorded settings come from
 * the reader's metadata, or, for a snapshot (which stores them at its end), from a second read of
 * rd's data (the same reader, from its start) when first needed; rd must outlive the replay. */
void as_reconcile_for_trace(as_engine *e, const as_reader *rd, const char *conf);
/* After a replay: 1 if it ran the recorded settings (resolve as decided), 0 if not or no stage. */
int as_reconcile_resolved(const as_engine *e);
#endif
