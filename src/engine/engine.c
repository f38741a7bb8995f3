/* engine.c - the replay loop's accounting, identical for every policy. */
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include "readers/source.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Latency of one malloc/free: host time (measured backends always; the simulation only with host
 * timing on) plus the device time charged during it (measured, or modelled). Inline: on the hot
 * path a simulation without host timing reads no clock, and its zero samples are only counted. */
static inline __attribute__((always_inline)) double op_begin(as_engine *e)
{
	as_dev_begin_event(e->dev, e->s.events);
	return e->clocked ? mono_ns() : 0;
}

static inline __attribute__((always_inline)) void op_end(as_engine *e, double t0, int is_alloc, uint64_t size)
{
	double ns;
	if (__builtin_expect(e->zero_lat, 1)) { /* a simulated device without a model: every sample is 0 */
		(is_alloc ? &e->lat_alloc : &e->lat_free)->n++; /* as as_quant_add counts a 0 before any other */
		return;
	}
	if (!e->timed) { /* no clock, no --latency file: the model's time alone */
		as_quant_add(is_alloc ? &e->lat_alloc : &e->lat_free, e->dev->op_us * 1000.0 + 0.0);
		return;
	}
	if (e->dev->measured)
		ns = mono_ns() - t0;
	else
		ns = e->dev->op_us * 1000.0 + (e->host_timing ? mono_ns() - t0 : 0.0);
	as_quant_add(is_alloc ? &e->lat_alloc : &e->lat_free, ns);
	if (e->latency)
		fprintf(e->latency, "%" PRIu64 ",%s,%" PRIu64 ",%.0f,%.3f,%s\n", e->s.events, is_alloc ? "malloc" : "free",
			size, ns, e->dev->op_us, /* what ns is: */
			e->dev->measured ? "measured" : e->host_timing ? "model+host" : "model");
}

/* What op_begin and op_end need to know once, not per event. */
static void set_timing(as_engine *e)
{
	e->clocked = e->dev->measured || e->host_timing;
	e->timed = e->clocked || e->latency;
	e->extras = e->timeline || e->check;
	e->zero_lat = !e->timed && !e->dev->model; /* (a device's model is set before the engine starts) */
}

int as_engine_init(as_engine *e, const as_policy_ops *ops, const char *config, as_device *dev, as_err *err)
{
	memset(e, 0, sizeof(*e));
	as_quant_init(&e->lat_alloc);
	as_quant_init(&e->lat_free);
	e->dev = dev;
	e->s.first_oom_event = -1;
	e->every = 1;
	if (as_policy_create(ops, &e->pol, config ? config : "", dev, &e->ctr, err)) {
		as_engine_free(e); /* the quantile workspaces (found by fuzz_config) */
		return -1;
	}
	e->rounds = (e->pol->ops->flags & AS_CAP_ROUND) != 0;
	e->free_stats = (e->pol->ops->flags & AS_CAP_FREE_STATS) != 0;
	set_timing(e);
	as_engine_free_at(e, AS_FREE_AT_POLICY);
	as_q_round q = { 1, 0 };
	if (e->rounds && as_policy_query(e->pol, AS_Q_ROUND, &q) == 0 && q.granule && !(q.granule & (q.granule - 1)))
		e->round_granule = q.granule;
	return 0;
}

void as_engine_free_at(as_engine *e, int mode)
{
	e->free_early = mode == AS_FREE_AT_REQUESTED || (mode == AS_FREE_AT_POLICY && (e->pol->ops->flags & AS_CAP_FREE_AT_REQUEST));
}

int as_free_at_parse(const char *s)
{
	return !strcmp(s, "requested") ? AS_FREE_AT_REQUESTED : !strcmp(s, "completed") ? AS_FREE_AT_COMPLETED : -1;
}

/* A request's bytes as the policy rounds them (lower_bound_bytes); unrounded for a policy that does
 * not say how it rounds. */
static inline uint64_t rounded(as_engine *e, uint64_t size)
{
	uint64_t g = e->round_granule;
	if (g)
		return size > UINT64_MAX - (g - 1) ? size : (size + g - 1) & ~(g - 1);
	as_q_round q = { size, 0 };
	if (e->rounds && as_policy_query(e->pol, AS_Q_ROUND, &q) == 0)
		return q.size;
	return size;
}

/* Grows the slot array to hold slot (slots are dense: see as_event.slot). */
static void slots_grow(as_engine *e, uint32_t slot)
{
	size_t n = e->nslots ? e->nslots : 256;
	while (n <= slot)
		n *= 2;
	e->slots = xrealloc(e->slots, n * sizeof(*e->slots));
	memset(e->slots + e->nslots, 0, (n - e->nslots) * sizeof(*e->slots));
	e->nslots = n;
}

/* The slot of an event (a flat array: no hashing, no allocation per event once grown). */
static inline as_live *slot_at(as_engine *e, uint32_t slot)
{
	if (slot >= e->nslots)
		slots_grow(e, slot);
	return &e->slots[slot];
}

/* Completes one free (the block returns to the policy); l is a copy the caller owns; rq, when not
 * NULL, the free's own request (a free that names its stream: free_from). */
static inline __attribute__((always_inline)) void complete_free(as_engine *e, const as_live *l, const as_request *rq)
{
	if (l->handle) {
		if (!l->free_requested)
			e->allocated -= l->block_size;
		e->requested -= l->size;
		e->held -= l->rounded;
		double t0 = op_begin(e);
		if (rq && e->pol->ops->free_from)
			e->pol->ops->free_from(e->pol, l->handle, rq);
		else
			e->pol->ops->free(e->pol, l->handle);
		op_end(e, t0, 0, l->size);
	}
	if (l->free_requested)
		e->npending--;
}

int as_engine_pending(as_engine *e, uint32_t slot)
{
	return slot < e->nslots && e->slots[slot].used && e->slots[slot].free_requested; /* never after a free at the request */
}

void as_engine_complete(as_engine *e, uint64_t id)
{
	for (size_t i = 0; i < e->ndeferred; i++)
		if (e->deferred[i].id == id) {
			as_live l = e->deferred[i].l;
			memmove(e->deferred + i, e->deferred + i + 1, (e->ndeferred - i - 1) * sizeof(*e->deferred));
			e->ndeferred--;
			complete_free(e, &l, NULL);
			return;
		}
}

/* Johnstone & Wilson's fragmentation measures, external fragmentation (sampled every 64 events
 * and at each new reserved peak) and the waste attribution at the reserved peak. */
static inline __attribute__((always_inline)) void update_metrics(as_engine *e)
{
	uint64_t res = e->dev->reserved;
	if (e->requested)
		e->jw1_sum += ((double)res - (double)e->requested) / (double)e->requested;
	else
		e->jw1_skipped++; /* (the rare case counted: jw1's terms are the other events) */
	int new_peak = res > e->last_reserved_peak;
	if (new_peak) {
		e->last_reserved_peak = res;
		e->peak_event = e->s.events - 1;
		e->req_at_peak_res = e->requested;
		e->alloc_at_peak_res = e->allocated;
		as_waste w;
		if ((e->pol->ops->flags & AS_CAP_WASTE) && as_policy_query(e->pol, AS_Q_WASTE, &w) == 0) {
#define X(n, d) e->s.waste_##n = (double)w.n;
			AS_WASTE_CATEGORIES(X)
#undef X
		}
	}
	as_q_free_stats fs;
	if ((new_peak || e->s.events % 64 == 0) && e->free_stats &&
	    as_policy_query(e->pol, AS_Q_FREE_STATS, &fs) == 0) {
		double x = fs.total ? 1.0 - (double)fs.largest / (double)fs.total : 0.0;
		e->ext_sum += x;
		e->ext_n++;
		if (x > e->s.frag_external_max)
			e->s.frag_external_max = x;
	}
}

static void timeline_row(as_engine *e, const as_event *ev)
{
	fprintf(e->timeline, "%" PRIu64 ",%s,%" PRId64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", e->s.events - 1,
		as_ev_names[ev->type], ev->time_us, e->requested, e->allocated, e->dev->reserved);
}

/* --timeline's row and --check's invariants after an event (out of the common path). */
static int extras(as_engine *e, const as_event *ev, as_err *err)
{
	if (e->timeline && (e->s.events - 1) % e->every == 0)
		timeline_row(e, ev);
	if (e->check && e->pol->ops->check(e->pol, err)) {
		char m[sizeof err->msg];
		snprintf(m, sizeof m, "%s", err->msg);
		err->code = 0;
		return as_fail(err, AS_EXIT_SOFTWARE, "invariant check failed at trace entry %" PRIu64 " (%s, replayed event %" PRIu64 "): %s",
			ev->index, as_ev_names[ev->type], e->s.events - 1, m);
	}
	return 0;
}

int as_engine_step(as_engine *e, const as_event *ev, as_err *err)
{
	return as_engine_step_inline(e, ev, err);
}

/* as_engine_apply's body: inline in the replay loop (as_engine_replay), one call elsewhere. */
static inline __attribute__((always_inline)) int apply(as_engine *e, const as_event *ev, as_err *err)
{
	as_live *l;
	switch (ev->type) {
	case EV_ALLOC: {
		e->s.allocs++;
		/* The slot is written after the malloc: a flush inside it may complete deferred frees.
		 * Field by field, from scalars: a struct built on the stack from the policy's separate
		 * 8-byte stores and copied with 16-byte moves stalls on store forwarding (measured). */
		void *handle = NULL;
		uint64_t bsize = 0, r = 0, addr;
		double t0 = op_begin(e);
		as_request rq = as_event_request(ev);
		int failed = e->pol->ops->malloc(e->pol, &rq, &handle, &bsize, &addr);
		op_end(e, t0, 1, ev->size);
		if (failed) {
			handle = NULL;
			bsize = 0;
			if (!e->s.num_ooms)
				e->s.first_oom_event = (int64_t)ev->index; /* the trace entry */
			e->s.num_ooms++;
		} else {
			r = rounded(e, ev->size);
			if (e->check && r > bsize)
				return as_fail(err, AS_EXIT_SOFTWARE, "invariant check failed at trace entry %" PRIu64 " (alloc, replayed event %" PRIu64
					"): %s rounds %" PRIu64 " bytes to %" PRIu64 " but hands out a block of %" PRIu64, ev->index, e->s.events,
					e->pol->ops->name, ev->size, r, bsize);
			e->requested += ev->size;
			e->allocated += bsize;
			e->held += r;
			/* the peaks: only an allocation raises these three (every other event lowers them or
			 * leaves them), so only an allocation looks */
			if (e->requested > e->s.peak_requested_bytes) {
				e->s.peak_requested_bytes = e->requested;
				e->res_at_peak_req = e->dev->reserved;
			}
			if (e->held > e->s.lower_bound_bytes)
				e->s.lower_bound_bytes = e->held;
			if (e->allocated > e->s.peak_allocated_bytes) {
				e->s.peak_allocated_bytes = e->allocated;
				e->req_at_peak_alloc = e->requested;
			}
		}
		l = slot_at(e, ev->slot);
		if (l->used)
			return as_fail(err, AS_EXIT_SOFTWARE, "internal: allocation into live slot %" PRIu32, ev->slot);
		l->handle = handle;
		l->size = ev->size;
		l->block_size = bsize;
		l->rounded = r;
		l->free_requested = 0;
		l->freed_early = 0;
		l->used = 1;
		break;
	}
	case EV_FREE_REQ:
		l = slot_at(e, ev->slot);
		if (!l->used)
			return as_fail(err, AS_EXIT_SOFTWARE, "internal: free_requested of unknown id %" PRIu64, ev->id);
		if (e->free_early) {
			/* --free-at requested: the block goes back now; the completion only ends the slot */
			if (!l->free_requested && !l->freed_early) {
				complete_free(e, l, NULL);
				l->handle = NULL;
				l->freed_early = 1;
			}
			break;
		}
		if (l->handle && !l->free_requested) {
			e->allocated -= l->block_size;
			if (e->pol->ops->free_requested)
				e->pol->ops->free_requested(e->pol, l->handle);
		}
		if (!l->free_requested)
			e->npending++;
		l->free_requested = 1;
		break;
	case EV_FREE: {
		l = slot_at(e, ev->slot);
		if (!l->used)
			return as_fail(err, AS_EXIT_SOFTWARE, "internal: free of unknown id %" PRIu64, ev->id);
		e->s.frees++;
		if (l->free_requested && (ev->flags & EVF_DEFER)) {
			/* completed later by the stage (as_engine_complete) */
			AS_GROW(e->deferred, e->ndeferred, e->capdeferred, 16);
			e->deferred[e->ndeferred++] = (as_deferred){ ev->id, *l };
			l->used = 0; /* the reader may give the slot to the next allocation, even while deferred */
			break;
		}
		/* completed now, from the slot itself (the policy's free completes no other slot's) */
		l->used = 0;
		if (ev->flags & EVF_STREAM) {
			as_request frq = as_event_request(ev);
			frq.size = 0;
			complete_free(e, l, &frq);
		} else {
			complete_free(e, l, NULL);
		}
		break;
	}
	case EV_EMPTY_CACHE:
		if (ev->flags & EVF_MAYBE)
			return 0; /* inferred: only a stage can tell whether it happened */
		e->pol->ops->empty_cache(e->pol);
		break;
	case EV_SEG_ALLOC: case EV_SEG_FREE: case EV_SEG_MAP: case EV_SEG_UNMAP:
		return 0; /* what the recorded allocator did: informational */
	case EV_POOL_RELEASE:
		/* not counted as an event: a trace that names no pools replays the same */
		if (e->pol->ops->pool_release)
			e->pol->ops->pool_release(e->pol, ev->pool, (ev->flags & EVF_POOL_EMPTY) != 0);
		return 0;
	default:
		break;
	}
	e->s.events++;
	update_metrics(e);
	return e->extras ? extras(e, ev, err) : 0;
}

int as_engine_apply(as_engine *e, const as_event *ev, as_err *err)
{
	return apply(e, ev, err);
}

/* One event of as_engine_replay: 1 to stop at an error (in err), 2 at the first out-of-memory with
 * stop_at_oom, 0 to go on. as_engine_step_inline, with the engine's part inline too. */
static inline __attribute__((always_inline)) int replay_one(as_engine *e, const as_event *ev, as_err *err, int stop_at_oom)
{
	as_stage *st = e->stage;
	int rc;
	uint32_t bit = 1u << ev->type;
	if (st && !(st->pass & bit) &&
	    (!(st->pass_settled & bit) || (ev->slot < e->nslots && e->slots[ev->slot].used && e->slots[ev->slot].free_requested)))
		rc = st->event(st, e, ev, err);
	else
		rc = apply(e, ev, err);
	return rc ? 1 : stop_at_oom && e->s.num_ooms ? 2 : 0;
}

void as_engine_replay(as_engine *e, as_source *src, int stop_at_oom, uint64_t *recorded_ooms, as_err *err)
{
	as_event ev;
	uint64_t rec_ooms = 0;
	int count = recorded_ooms != NULL;
	int r = 0;
	if (src->b) {
		/* a decoded buffer (as_source_next's first case), its bounds and ids read once */
		const as_evbuf *b = src->b;
		const as_rec *recs = b->recs;
		const uint64_t *ids = b->ids;
		size_t i = src->i, n = b->n;
		as_stage *st = e->stage;
		if (b->nslots > e->nslots)
			slots_grow(e, b->nslots - 1); /* once, not doubling as the slots come */
		memset(&ev, 0, sizeof ev); /* (the fields the engine's own events leave as they were) */
		while (i < n) {
			const as_rec *x = &recs[i];
			uint64_t id = ids ? ids[i] : (uint64_t)x->slot + 1;
			i++;
			if (cli_interrupted)
				break;
			if (count)
				rec_ooms += x->type == EV_ALLOC && (x->flags & EVF_OOM);
			uint32_t bit = 1u << x->type;
			int rc;
			if (!st || (st->pass & bit) ||
			    ((st->pass_settled & bit) && !(x->slot < e->nslots && e->slots[x->slot].used && e->slots[x->slot].free_requested))) {
				/* the engine's own: only the fields apply reads (not addr, pos, label, site) */
				ev.type = (as_ev_type)x->type;
				ev.flags = x->flags;
				ev.slot = x->slot;
				ev.pool = x->pool;
				ev.id = id;
				ev.size = x->size;
				ev.stream = x->stream;
				ev.time_us = x->time_us;
				ev.index = x->index;
				ev.thread = x->thread;
				rc = apply(e, &ev, err);
			} else {
				as_rec_event(x, b->labels, id, &ev);
				rc = st->event(st, e, &ev, err);
			}
			if ((r = rc ? 1 : stop_at_oom && e->s.num_ooms ? 2 : 0))
				break;
		}
		src->i = i; /* (the events read, as as_source_next leaves it) */
		if (r)
			goto stop;
		goto done;
	}
	while (as_source_next(src, &ev, err) > 0) {
		if (cli_interrupted)
			break;
		if (count)
			rec_ooms += ev.type == EV_ALLOC && (ev.flags & EVF_OOM);
		if ((r = replay_one(e, &ev, err, stop_at_oom)))
			goto stop;
	}
	goto done;
stop:
	if (r == 2) /* stopped at the first out-of-memory */
		as_source_check_rest(src, err); /* the rest of a binary trace is validated all the same */
done:
	if (recorded_ooms)
		*recorded_ooms = rec_ooms;
}

void as_engine_finish(as_engine *e)
{
	if (e->stage && e->stage->finish && e->pol)
		e->stage->finish(e->stage, e);
	e->s.peak_reserved_bytes = e->dev->peak_reserved;
	e->s.final_reserved_bytes = e->dev->reserved;
	e->s.final_allocated_bytes = e->allocated;
	e->s.num_device_alloc = e->dev->num_alloc;
	e->s.num_device_free = e->dev->num_free;
	e->s.num_alloc_retries = e->ctr.alloc_retries;
	as_summary *s = &e->s;
	s->alloc_ns_p50 = as_quant_p50(&e->lat_alloc);
	s->alloc_ns_p99 = as_quant_p99(&e->lat_alloc);
	s->alloc_ns_max = e->lat_alloc.max;
	s->free_ns_p50 = as_quant_p50(&e->lat_free);
	s->free_ns_p99 = as_quant_p99(&e->lat_free);
	s->free_ns_max = e->lat_free.max;
	s->device_calls = e->dev->calls;
	s->device_time_us = e->dev->time_us;
	s->latency_source = e->dev->measured ? "measured" : e->dev->model ? "model" : "none";
	double pr = (double)s->peak_requested_bytes;
	s->wasted_bytes_at_peak = (double)s->peak_reserved_bytes - (double)e->alloc_at_peak_res;
	s->requested_at_peak_reserved = (double)e->req_at_peak_res;
	uint64_t jw1_n = e->s.events - e->jw1_skipped; /* update_metrics runs once per counted event */
	s->frag_jw1 = jw1_n ? e->jw1_sum / (double)jw1_n : 0.0;
	s->frag_jw2 = pr ? ((double)e->res_at_peak_req - pr) / pr : 0.0;
	s->frag_jw3 = e->req_at_peak_res ? ((double)s->peak_reserved_bytes - (double)e->req_at_peak_res) / (double)e->req_at_peak_res : 0.0;
	s->frag_jw4 = pr ? ((double)s->peak_reserved_bytes - pr) / pr : 0.0;
	s->frag_external_mean = e->ext_n ? e->ext_sum / (double)e->ext_n : 0.0;
	s->frag_internal_at_peak = (double)s->peak_allocated_bytes - (double)e->req_at_peak_alloc;
}

void as_engine_free(as_engine *e)
{
	free(e->slots);
	free(e->deferred);
	e->slots = NULL;
	e->deferred = NULL;
	e->nslots = e->ndeferred = e->capdeferred = 0;
	as_quant_free(&e->lat_alloc);
	as_quant_free(&e->lat_free);
	if (e->stage && e->stage->destroy)
		e->stage->destroy(e->stage);
	e->stage = NULL;
	if (e->pol)
		e->pol->ops->destroy(e->pol);
	e->pol = NULL;
}

as_policy *as_engine_policy(const as_engine *e)
{
	return e->pol;
}

as_device *as_engine_device(const as_engine *e)
{
	return e->dev;
}

const as_summary *as_engine_summary(const as_engine *e)
{
	return &e->s;
}

uint64_t as_engine_peak_event(const as_engine *e)
{
	return e->peak_event;
}

void as_engine_set_outputs(as_engine *e, const as_engine_outputs *o)
{
	e->timeline = o->timeline;
	e->every = o->every ? o->every : 1;
	e->latency = o->latency;
	e->check = o->check;
	e->host_timing = o->host_timing;
	set_timing(e);
}
