/*
 * reconcile.c - the reconciliation stage between reader and engine (reconcile.h).
 *
 * A snapshot records what the recording allocator did, not only what the program asked: it shows
 * releases that may be an empty_cache() call or the allocator's own fallback (the reader marks
 * them as an EV_EMPTY_CACHE with EVF_MAYBE, followed by the releases), cross-stream frees that
 * complete either before a malloc or inside its out-of-memory flush, and the segment addresses it
 * obtained. This stage resolves those against the replayed policy through the policy's optional
 * queries (AS_Q_EXPLAINS_RELEASE, AS_Q_NEEDS_FLUSH, AS_Q_FLUSH_HOOK); a policy that does not answer
 * them gets the plain reading (no empty_cache, frees completed before the next request). A policy
 * with AS_CAP_NO_INFERRED_EMPTY (one that models another allocator than the recording one) never
 * gets an inferred empty_cache. The engine only applies what the stage hands it (as_engine_apply,
 * as_engine_complete).
 */
#include "engine/reconcile.h"
#include "engine/engine_impl.h"
#include <stdlib.h>
#include <string.h>

typedef struct as_reconcile {
	as_stage base;
	as_engine *e;
	int resolve;           /* the replay runs the recorded settings */
	int maybe_empty;       /* an EVF_MAYBE empty_cache waits for the next allocation */
	uint64_t *run;         /* the recorded releases that followed it (sizes, in order) */
	size_t nrun, caprun;
	uint64_t *held;        /* completions of cross-stream frees held back */
	size_t nheld, capheld;
	int seg_since_alloc;   /* the recording obtained device memory since completions were held (a malloc's
	                        * segment_alloc/map comes right before its alloc, so: since the last allocation) */
} as_reconcile;

/*
 * Cross-stream frees complete either at the start of a malloc (process_events) or inside the
 * out-of-memory flush, whose synchronize completes every pending free before releasing the
 * cache; a snapshot shows both as free_completed entries before the malloc's own entries. When
 * the replay runs the recorded settings, the stage holds such completions back until the next
 * allocation and asks the policy whether that request reaches its flush: then the policy
 * completes them there (flush hook), otherwise they complete before the request. A flush ends in a
 * new segment or an out-of-memory error (malloc calls alloc_block again, never get_free_block), so
 * an allocation the recording served without obtaining device memory had no flush: its held
 * completions were process_events' at its start.
 */
/* What the engine may apply without this stage (as_stage.pass): with nothing held and no release
 * run waiting, an allocation, a free request, a phase and a pool's release go through unchanged,
 * and so does a free, unless the replay resolves (then only a free whose request is not pending). */
static void rc_settle(as_reconcile *r)
{
	uint32_t free_bit = 1u << EV_FREE;
	int idle = !r->nheld && !r->maybe_empty;
	r->base.pass = idle ? (1u << EV_ALLOC) | (1u << EV_FREE_REQ) | (1u << EV_PHASE) | (1u << EV_POOL_RELEASE) |
		(r->resolve ? 0 : free_bit) : 0;
	r->base.pass_settled = idle && r->resolve ? free_bit : 0;
}

static void release_held(void *ctx)
{
	as_reconcile *r = ctx;
	for (size_t i = 0; i < r->nheld; i++)
		as_engine_complete(r->e, r->held[i]);
	r->nheld = 0;
	r->seg_since_alloc = 0;
	rc_settle(r);
}

static void push(uint64_t **v, size_t *n, size_t *cap, uint64_t x)
{
	AS_GROW(*v, *n, *cap, 16);
	(*v)[(*n)++] = x;
}

/* Resolves what waits for this event (held completions, an ambiguous release run); only called
 * while something waits, so the common event costs two tests. */
static void rc_pending(as_reconcile *r, as_engine *e, const as_event *ev)
{
	if (r->nheld && ev->type != EV_ALLOC && ev->type < EV_SEG_ALLOC &&
	    !(ev->type == EV_FREE && r->resolve > 0) && !(ev->type == EV_EMPTY_CACHE && (ev->flags & EVF_MAYBE)))
		release_held(r);
	as_request rq = as_event_request(ev);
	if (ev->type == EV_ALLOC && r->nheld) {
		/* all pending frees complete at once, and the request would reach the flush */
		as_q_flush qf = { .rq = &rq };
		as_q_hook qh = { release_held, r };
		if ((r->seg_since_alloc || (ev->flags & EVF_OOM)) && e->npending == r->nheld &&
		    as_policy_query(e->pol, AS_Q_NEEDS_FLUSH, &qf) == 0 && qf.answer &&
		    as_policy_query(e->pol, AS_Q_FLUSH_HOOK, &qh) == 0)
			r->maybe_empty = 0; /* the flush explains the releases */
		else
			release_held(r);
		r->seg_since_alloc = 0;
	}
	if (r->maybe_empty && ev->type < EV_SEG_ALLOC && ev->type != EV_EMPTY_CACHE &&
	    !(ev->type == EV_FREE && r->resolve > 0)) {
		/* Resolve an ambiguous release run: an empty_cache() unless this allocation's own
		 * fallback (GC, oversize release, flush) is what released the memory. Only a replay
		 * of the recorded settings can ask its policy that; otherwise the run is taken to be
		 * the recording allocator's own doing (doc/pytorch-policy.md). */
		r->maybe_empty = 0;
		if (r->resolve) {
			as_q_release q = { .rq = &rq, .sizes = r->run, .n = r->nrun };
			if (ev->type != EV_ALLOC || as_policy_query(e->pol, AS_Q_EXPLAINS_RELEASE, &q) || !q.answer)
				e->pol->ops->empty_cache(e->pol);
		}
	}
}

static int rc_step(as_reconcile *r, as_engine *e, const as_event *ev, as_err *err)
{
	if (r->nheld || r->maybe_empty)
		rc_pending(r, e, ev);
	switch (ev->type) {
	case EV_FREE:
		/* resolve 0: nothing is ever held (and no lookup on the hot path) */
		if (r->resolve && as_engine_pending(e, ev->slot)) {
			push(&r->held, &r->nheld, &r->capheld, ev->id);
			as_event d = *ev;
			d.flags |= EVF_DEFER;
			return as_engine_apply(e, &d, err);
		}
		break;
	case EV_EMPTY_CACHE:
		if (ev->flags & EVF_MAYBE) {
			/* a policy that is not the recording allocator: the run is not its program's call,
			 * whatever the settings (nothing to resolve, no probe of the trace's end) */
			if (e->pol->ops->flags & AS_CAP_NO_INFERRED_EMPTY)
				return 0;
			if (r->maybe_empty)
				release_held(r);
			r->maybe_empty = 1;
			r->nrun = 0;
			return 0;
		}
		break;
	case EV_SEG_ALLOC:
		/* the simulated device hands out the recorded address while its calls agree */
		as_dev_hint(e->dev, ev->addr, ev->size);
		r->seg_since_alloc = r->nheld != 0;
		return 0;
	case EV_SEG_MAP:
		r->seg_since_alloc = r->nheld != 0;
		return 0;
	case EV_SEG_FREE: case EV_SEG_UNMAP:
		if (r->maybe_empty)
			push(&r->run, &r->nrun, &r->caprun, ev->size);
		return 0;
	default:
		break;
	}
	return as_engine_apply(e, ev, err);
}

static int rc_event(as_stage *st, as_engine *e, const as_event *ev, as_err *err)
{
	as_reconcile *r = (as_reconcile *)st;
	int rc = rc_step(r, e, ev, err);
	rc_settle(r);
	return rc;
}

static void rc_finish(as_stage *st, as_engine *e)
{
	as_reconcile *r = (as_reconcile *)st;
	(void)e;
	if (r->nheld)
		release_held(r);
}

static void rc_destroy(as_stage *st)
{
	as_reconcile *r = (as_reconcile *)st;
	free(r->run);
	free(r->held);
	free(r);
}

void as_reconcile_attach(as_engine *e, int resolve)
{
	as_reconcile *r = xcalloc(1, sizeof(*r));
	r->base = (as_stage){ rc_event, rc_finish, rc_destroy, 0, 0 };
	r->e = e;
	r->resolve = resolve > 0;
	rc_settle(r);
	if (e->stage && e->stage->destroy)
		e->stage->destroy(e->stage);
	e->stage = &r->base;
}

void as_reconcile_for_trace(as_engine *e, const as_meta *m, const char *path, const char *conf)
{
	(void)path; /* the metadata is complete: every command decodes a snapshot before its replay */
	as_reconcile_attach(e, as_policy_recorded(e->pol->ops, m->has_settings ? (m->settings ? m->settings : "") : NULL, conf));
}

int as_reconcile_resolved(const as_engine *e)
{
	return e->stage && e->stage->event == rc_event && ((const as_reconcile *)e->stage)->resolve > 0;
}
