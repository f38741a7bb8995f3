/* snapevents.h - a snapshot's trace entries -> events: an entry's fields as a record (rec), its memory
 * pool, and the translation of records into as_events (snapevents.c), below the snapshot reader
 * (snapshot.c) and its fast path (pkfast.c). */
#ifndef ALLOCSIM_SNAPEVENTS_H
#define ALLOCSIM_SNAPEVENTS_H
#include "readers/pkvm.h"

#define MAX_RUN     (1u << 18)   /* consecutive segment_free/segment_unmap entries (see snap_flush_run) */

typedef struct rec {
	int action;
	uint32_t pool;    /* the entry's memory pool (as_event.pool; see snap_entry_pool) */
	uint64_t addr, size, stream, pos, index;
	int64_t time_us;
	const char *site; /* interned in the snapshot reader's sites (alloc, with keep_sites) */
} rec;

enum { A_ALLOC, A_FREE_REQ, A_FREE_DONE, A_SEG_ALLOC, A_SEG_FREE, A_SEG_MAP, A_SEG_UNMAP, A_OOM, A_OTHER };

/* What a string is as a trace entry's key (snap_key_id). */
enum { K_OTHER = 1, K_ACTION, K_ADDR, K_SIZE, K_STREAM, K_TIME, K_FRAMES, K_META, K_POOL };
/* What a trace entry's fields make of it (snap_entry_fields): EF_OK (events), EF_SKIP (recorded, not
 * replayed), or what is wrong with it. */
enum { EF_OK, EF_SKIP, EF_NOACTION, EF_UNKNOWN, EF_SIZE, EF_ADDR, EF_TIME, EF_BOUNDS };

/* The translation's state. */
typedef struct snapev {
	/* event output queue */
	as_event *q;
	size_t qhead, qlen, qcap;
	/* address -> 1 + the slot of a block allocated in the trace (0: none): open addressing, linear
	 * probing, deletion by backward shift (snapevents.c's live_*) */
	uint64_t *live_addr;
	uint32_t *live_slot1;
	size_t nlive, livebits;
	/* Slots, numbered as as_reader_next numbers them for other formats (the lowest freed first:
	 * a stack), so that reader.c needs no map of its own for a snapshot (r->slots_assigned). */
	uint64_t *slot_id;   /* slot -> the id of the allocation holding it */
	unsigned char *slot_req; /* ... whose free was requested (an EV_FREE_REQ out) */
	size_t slotcap;
	uint32_t *freeslots;
	size_t nfreeslots, capfreeslots;
	uint32_t nextslot;
	uint64_t next_id;
	int have_freereq;    /* a free_requested waiting to see if free_completed follows */
	rec freereq;
	rec *run;            /* a run of segment_free/segment_unmap entries not yet classified */
	size_t nrun, caprun;
	/* private pools: the trace's pool ids, numbered 1.. in order of appearance (see snap_entry_pool) */
	struct pkpool {
		uint64_t a, b;
		uint32_t pool;
		int released;          /* its release is out (EV_POOL_RELEASE), and no request came since */
		uint64_t emptied_run;  /* the release run (nruns, counted from 1) whose pool-only release emptied it */
	} *pools;
	uint64_t nruns;      /* release runs flushed so far */
	size_t npools;
	/* the device memory of private pools (segment_alloc/segment_map of a pool's request), so a
	 * release of it names its pool (see snap_flush_run) */
	struct pkrange { uint64_t addr, size; uint32_t pool; } *pranges;
	size_t npranges, cappranges;
} snapev;

static inline int u64_of(const val *v, uint64_t *out)
{
	if (!v || (VKIND(*v) != V_INT && VKIND(*v) != V_BOOL) || v->u.i < 0)
		return -1;
	*out = (uint64_t)v->u.i;
	return 0;
}

/* What a string is as a trace entry's key (K_*), and as an action: 1 + A_*, or A_OTHER + 1 (recorded
 * but not replayed), A_OTHER + 2 (unknown); found once per (interned, shared) string, by the _find. */
int snap_key_id_find(pv *k);
int snap_action_id_find(pv *a);
static inline int snap_key_id(pv *k)
{
	return k->kid ? k->kid : snap_key_id_find(k);
}

static inline int snap_action_id(pv *a)
{
	return a->aid ? a->aid : snap_action_id_find(a);
}

/* What a trace entry's fields make of it (EF_*). */
static inline int snap_entry_fields(const val *a, const val *size, const val *addr, const val *stream, const val *time, rec *x)
{
	x->time_us = -1;
	x->addr = x->size = x->stream = 0;
	x->pool = 0;
	x->site = NULL;
	if (!a || VKIND(*a) != V_STR)
		return EF_NOACTION;
	x->action = snap_action_id(a->u.p) - 1;
	if (x->action == A_OTHER + 1)
		return EF_UNKNOWN;
	if (x->action == A_OTHER)
		return EF_SKIP;
	if (u64_of(size, &x->size))
		return EF_SIZE;
	if (x->action != A_OOM && u64_of(addr, &x->addr))
		return EF_ADDR;
	if (u64_of(stream, &x->stream))
		x->stream = 0;
	uint64_t t;
	if (time) { /* NaN, negative or fractional times are errors, not "no time" */
		if (u64_of(time, &t) || t > INT64_MAX)
			return EF_TIME;
		x->time_us = (int64_t)t;
	}
	if ((x->action == A_ALLOC || x->action == A_OOM) && (x->size == 0 || x->size >= AS_MAX_REQUEST))
		return EF_BOUNDS;
	return EF_OK;
}
/* The dense number of the pool (a, b) (0: the default pool), -1 past AS_POOL_MAX. */
int64_t snap_pool_number(snapev *p, uint64_t a, uint64_t b, uint32_t flags);
/* x->pool from the entry's pool_id or its user_metadata's "allocsim.pool=A,B[+flags]" (see snapevents.c);
 * -1 past AS_POOL_MAX. Only allocations and segment entries have one (tested here, inline: most
 * entries are frees). */
int snap_entry_pool_of(snapev *p, rec *x, const val *meta, const val *pool_id);
static inline int snap_entry_pool(snapev *p, rec *x, const val *meta, const val *pool_id)
{
	if (x->action != A_ALLOC && x->action != A_OOM && x->action != A_SEG_ALLOC && x->action != A_SEG_MAP &&
	    x->action != A_SEG_FREE && x->action != A_SEG_UNMAP)
		return 0;
	return snap_entry_pool_of(p, x, meta, pool_id);
}
/* One record of the replayed device: its events go to the queue (some wait for the next record). */
int snap_translate(as_reader *r, snapev *p, const rec *x, as_err *err);
/* At the end: the pending free request, the pending run of releases (next_action -1). */
int snap_flush_freereq(as_reader *r, snapev *p, as_err *err);
void snap_flush_run(snapev *p, int next_action, as_meta *meta);
void snap_init(snapev *p);
void snap_free(snapev *p);

#endif
