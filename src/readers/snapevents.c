/* snapevents.c - a snapshot's trace entries -> events: entry fields -> a record (snap_entry_fields,
 * snap_entry_pool), records -> as_events in a queue (snap_translate), with the slots, the inferred
 * empty_cache() calls and the private pools' releases a snapshot does not record. */
#include "readers/snapevents.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static as_event *qpush(snapev *p)
{
	if (p->qhead + p->qlen == p->qcap) {
		if (p->qhead) {
			memmove(p->q, p->q + p->qhead, p->qlen * sizeof(*p->q));
			p->qhead = 0;
		} else {
			p->qcap = p->qcap ? p->qcap * 2 : 256;
			p->q = xrealloc(p->q, p->qcap * sizeof(*p->q));
		}
	}
	return &p->q[p->qhead + p->qlen++];
}

static as_event *emit(snapev *p, int type, const rec *x, uint64_t id, uint32_t flags)
{
	as_event *e = qpush(p);
	e->type = (as_ev_type)type;
	e->id = id;
	e->size = x->size;
	e->stream = x->stream;
	e->addr = x->addr;
	e->time_us = x->time_us;
	e->pos = x->pos;
	e->index = x->index;
	e->flags = flags;
	e->site = x->site;
	e->thread = 0;
	e->label = NULL;
	e->slot = 0;
	e->pool = type == EV_ALLOC || type == EV_POOL_RELEASE ? x->pool : 0; /* (segment entries' pools stay in the reader) */
	return e;
}

/* A slot for a new allocation (id), or -1 when 2^32-1 are live. */
static int64_t slot_take(snapev *p, uint64_t id)
{
	uint32_t s;
	if (p->nfreeslots)
		s = p->freeslots[--p->nfreeslots];
	else if (p->nextslot == UINT32_MAX)
		return -1;
	else
		s = p->nextslot++;
	if (s >= p->slotcap) {
		size_t n = p->slotcap ? p->slotcap * 2 : 1024;
		p->slot_id = xrealloc(p->slot_id, n * sizeof(*p->slot_id));
		p->slot_req = xrealloc(p->slot_req, n);
		p->slotcap = n;
	}
	p->slot_id[s] = id;
	p->slot_req[s] = 0;
	return s;
}

static void slot_give(snapev *p, uint32_t s)
{
	AS_GROW(p->freeslots, p->nfreeslots, p->capfreeslots, 256);
	p->freeslots[p->nfreeslots++] = s;
}

/* The free of the block at x->addr (its slot + 1 from the live map). */
static void emit_free(snapev *p, const rec *x, uintptr_t slot1)
{
	uint32_t s = (uint32_t)(slot1 - 1);
	emit(p, EV_FREE, x, p->slot_id[s], 0)->slot = s;
	slot_give(p, s);
}

static void emit_seg(snapev *p, const rec *x)
{
	static const int map[] = { [A_SEG_ALLOC] = EV_SEG_ALLOC, [A_SEG_FREE] = EV_SEG_FREE,
		[A_SEG_MAP] = EV_SEG_MAP, [A_SEG_UNMAP] = EV_SEG_UNMAP };
	emit(p, map[x->action], x, 0, 0);
}

/* ---- the live blocks by address: an idmap cost 84 instructions a trace entry (its mix hash, two
 * probes an allocation, tombstones to rehash away) ---- */

static size_t live_home(const snapev *p, uint64_t addr)
{
	return (size_t)((addr * 0x9e3779b97f4a7c15ULL) >> (64 - p->livebits));
}

/* The index of ADDR's entry, or of the empty one where it would go. */
static size_t live_at(const snapev *p, uint64_t addr)
{
	size_t mask = ((size_t)1 << p->livebits) - 1, i = live_home(p, addr);
	while (p->live_slot1[i] && p->live_addr[i] != addr)
		i = (i + 1) & mask;
	return i;
}

/* 1 + the slot of the block at ADDR, 0: none. */
static uint32_t live_get(const snapev *p, uint64_t addr)
{
	return p->nlive ? p->live_slot1[live_at(p, addr)] : 0;
}

/* ADDR (not live) holds slot1 - 1. */
static void live_put(snapev *p, uint64_t addr, uint32_t slot1)
{
	if (!p->live_slot1 || 2 * (p->nlive + 1) > ((size_t)1 << p->livebits)) { /* at most half full */
		uint64_t *oa = p->live_addr;
		uint32_t *os = p->live_slot1;
		size_t on = os ? (size_t)1 << p->livebits : 0;
		p->livebits = os ? p->livebits + 1 : 10;
		p->live_addr = xmalloc(((size_t)1 << p->livebits) * sizeof(uint64_t));
		p->live_slot1 = xcalloc((size_t)1 << p->livebits, sizeof(uint32_t));
		for (size_t i = 0; i < on; i++)
			if (os[i]) {
				size_t j = live_at(p, oa[i]);
				p->live_addr[j] = oa[i];
				p->live_slot1[j] = os[i];
			}
		free(oa);
		free(os);
	}
	size_t i = live_at(p, addr);
	p->live_addr[i] = addr;
	p->live_slot1[i] = slot1;
	p->nlive++;
}

/* Removes ADDR: 1 + its slot, 0 when it was not live. */
static uint32_t live_del(snapev *p, uint64_t addr)
{
	if (!p->nlive)
		return 0;
	size_t mask = ((size_t)1 << p->livebits) - 1, i = live_at(p, addr);
	uint32_t s1 = p->live_slot1[i];
	if (!s1)
		return 0;
	p->nlive--;
	/* backward shift: an entry after the hole moves into it unless its home lies cyclically in (i, j] */
	for (size_t j = (i + 1) & mask; p->live_slot1[j]; j = (j + 1) & mask) {
		size_t h = live_home(p, p->live_addr[j]);
		if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
			continue;
		p->live_addr[i] = p->live_addr[j];
		p->live_slot1[i] = p->live_slot1[j];
		i = j;
	}
	p->live_slot1[i] = 0;
	return s1;
}

/*
 * Snapshots do not record torch.cuda.empty_cache(). A run of segment_free/segment_unmap
 * entries happens either inside a malloc (garbage collection, the oversize release, the
 * out-of-memory flush) or in empty_cache(). Inside a malloc, the run is followed by that
 * malloc asking the device again (segment_alloc/segment_map) or giving up (oom). So a run
 * followed by anything else - an alloc served from the cache, a free, the end - was an
 * empty_cache(), emitted before it. A run followed by segment_alloc/segment_map is ambiguous
 * (empty_cache() then a malloc that misses looks the same): it is emitted as a "maybe"
 * empty_cache that the engine resolves by asking the policy whether the next allocation's own
 * fallback would release memory. See doc/pytorch-policy.md.
 */
static void free_done(snapev *p, const rec *x, as_meta *m)
{
	uint32_t s1 = live_del(p, x->addr);
	if (!s1) {
		m->unmatched_frees++;
		m->history_truncated = 1;
		return;
	}
	emit_free(p, x, s1);
}

/* The private pool whose device memory a segment_free/segment_unmap gives back (0: none). */
static uint32_t range_pool(snapev *p, const rec *x)
{
	if (AS_POOL_INDEX(x->pool))
		return x->pool; /* the entry says (pool_id, PyTorch > 2.11) */
	for (size_t i = 0; i < p->npranges; i++)
		if (x->addr >= p->pranges[i].addr && x->addr - p->pranges[i].addr < p->pranges[i].size)
			return p->pranges[i].pool;
	return 0;
}

static void range_forget(snapev *p, const rec *x)
{
	for (size_t i = 0; i < p->npranges; i++)
		if (p->pranges[i].addr == x->addr) {
			p->pranges[i] = p->pranges[--p->npranges];
			return;
		}
}

/*
 * A private pool's cached segments are released only once the program has let go of the pool (its
 * graphs destroyed, its MemPool deleted: use count 0), by empty_cache or the out-of-memory flush;
 * snapshots do not record that moment. The first release of a pool's memory proves it happened
 * before that flush: the pool is released (EV_POOL_RELEASE) there, the latest moment consistent
 * with the recording.
 */
static void release_pools(snapev *p, int pool_only)
{
	for (size_t i = 0; i < p->nrun; i++) {
		if (p->run[i].action != A_SEG_FREE && p->run[i].action != A_SEG_UNMAP)
			continue;
		uint32_t pool = range_pool(p, &p->run[i]);
		if (p->run[i].action == A_SEG_FREE)
			range_forget(p, &p->run[i]);
		/* a pool-only run empties each of its pools (released before or not); a global flush
		 * only needs each pool released once */
		for (size_t k = 0; pool && k < p->npools; k++)
			if (p->pools[k].pool == pool && (!p->pools[k].released || (pool_only && p->pools[k].emptied_run != p->nruns))) {
				p->pools[k].released = 1;
				if (pool_only)
					p->pools[k].emptied_run = p->nruns;
				rec x = p->run[0]; /* before the flush, at its start */
				x.pool = pool;
				emit(p, EV_POOL_RELEASE, &x, 0, pool_only ? EVF_POOL_EMPTY : 0)->size = 0;
			}
	}
}

void snap_flush_run(snapev *p, int next_action, as_meta *meta)
{
	if (!p->nrun)
		return;
	int maybe = next_action == A_SEG_ALLOC || next_action == A_SEG_MAP;
	if (p->npools) {
		/* a definite empty_cache() whose releases are all private pools' memory was the pool's own
		 * emptyCache (a MemPool's destructor): a global one would have released the default pool's
		 * free segments too, and a simulation exact so far has none then */
		int pool_only = next_action != A_OOM && !maybe;
		for (size_t i = 0; pool_only && i < p->nrun; i++)
			if ((p->run[i].action == A_SEG_FREE || p->run[i].action == A_SEG_UNMAP) && !range_pool(p, &p->run[i]))
				pool_only = 0;
		p->nruns++;
		release_pools(p, pool_only);
		if (pool_only)
			goto entries;
	}
	if (next_action != A_OOM) {
		emit(p, EV_EMPTY_CACHE, &p->run[0], 0, maybe ? EVF_MAYBE : 0);
		if (!maybe)
			meta->inferred_empty_cache++;
	}
entries:
	for (size_t i = 0; i < p->nrun; i++) {
		if (p->run[i].action == A_FREE_DONE)
			free_done(p, &p->run[i], meta);
		else
			emit_seg(p, &p->run[i]);
	}
	p->nrun = 0;
}

int snap_flush_freereq(as_reader *r, snapev *p, as_err *err)
{
	if (!p->have_freereq)
		return 0;
	uint32_t s = live_get(p, p->freereq.addr) - 1;
	p->have_freereq = 0;
	if (p->slot_req[s])
		return pkvm_err(r, p->freereq.pos, err, "free of id %" PRIu64 " requested twice", p->slot_id[s]);
	p->slot_req[s] = 1;
	emit(p, EV_FREE_REQ, &p->freereq, p->slot_id[s], 0)->slot = s;
	return 0;
}

int snap_translate(as_reader *r, snapev *p, const rec *x, as_err *err)
{
	as_meta *m = &r->meta;
	/* A free_requested directly followed by its free_completed becomes one EV_FREE. */
	if (p->have_freereq) {
		if (x->action == A_FREE_DONE && x->addr == p->freereq.addr) {
			p->have_freereq = 0;
			emit_free(p, x, live_del(p, x->addr));
			return 0;
		}
		if (snap_flush_freereq(r, p, err))
			return -1;
	}
	/* Releases, and completions of pending frees among them (a flush synchronizes between the
	 * garbage collector's releases and its own), are classified together. */
	if (x->action == A_SEG_FREE || x->action == A_SEG_UNMAP || (x->action == A_FREE_DONE && p->nrun)) {
		/* The run waits for the entry after it (see flush_run), so its length is bounded: a device
		 * holds far fewer segments (141 GB / 2 MiB = 67,000 on an H200) than MAX_RUN. */
		if (p->nrun == MAX_RUN)
			return pkvm_err(r, x->pos, err, "trace entry %" PRIu64 ": more than %u segment releases in a row "
				"(reader limit; a device holds far fewer segments)", x->index, MAX_RUN);
		AS_GROW(p->run, p->nrun, p->caprun, 16);
		p->run[p->nrun++] = *x;
		return 0;
	}
	snap_flush_run(p, x->action, m);
	switch (x->action) {
	case A_ALLOC: {
		if (live_get(p, x->addr))
			return pkvm_err(r, x->pos, err, "trace entry %" PRIu64 ": alloc at address 0x%" PRIx64 " which is still allocated",
				x->index, x->addr);
		uint64_t id = ++p->next_id;
		int64_t s = slot_take(p, id);
		if (s < 0)
			return pkvm_err(r, x->pos, err, "more than 2^32-1 allocations live at once");
		live_put(p, x->addr, (uint32_t)s + 1);
		emit(p, EV_ALLOC, x, id, 0)->slot = (uint32_t)s;
		break;
	}
	case A_FREE_REQ:
		if (!live_get(p, x->addr)) {
			m->unmatched_frees++;
			m->history_truncated = 1;
			break;
		}
		p->have_freereq = 1;
		p->freereq = *x;
		break;
	case A_FREE_DONE:
		free_done(p, x, m);
		break;
	case A_OOM: { /* a slot too, never given back (as reader.c numbers other formats' events) */
		uint64_t id = ++p->next_id;
		int64_t s = slot_take(p, id);
		if (s < 0)
			return pkvm_err(r, x->pos, err, "more than 2^32-1 allocations live at once");
		emit(p, EV_ALLOC, x, id, EVF_OOM)->slot = (uint32_t)s;
		break;
	}
	case A_SEG_ALLOC: case A_SEG_MAP:
		if (AS_POOL_INDEX(x->pool)) {
			AS_GROW(p->pranges, p->npranges, p->cappranges, 16);
			p->pranges[p->npranges++] = (struct pkrange){ x->addr, x->size, x->pool };
		}
		emit_seg(p, x);
		break;
	default:
		break;
	}
	return 0;
}

/* What a string is as a trace entry's key, found once per (interned, shared) string. */
int snap_key_id_find(pv *k)
{
	{
		static const char *const names[] = { "action", "addr", "size", "stream", "time_us", "frames", "user_metadata",
			"pool_id" };
		k->kid = K_OTHER;
		for (int i = 0; i < 8; i++)
			if (!strcmp(k->s, names[i]))
				k->kid = (unsigned char)(K_ACTION + i);
	}
	return k->kid;
}

/* ... and as an action: 1 + A_*, or A_OTHER + 1 (recorded but not replayed), A_OTHER + 2 (unknown). */
int snap_action_id_find(pv *a)
{
	{
		static const char *const names[] = { "alloc", "free_requested", "free_completed", "segment_alloc",
			"segment_free", "segment_map", "segment_unmap", "oom" };
		a->aid = A_OTHER + 2;
		for (int i = 0; i < 8; i++)
			if (!strcmp(a->s, names[i]))
				a->aid = (unsigned char)(i + 1);
		if (!strcmp(a->s, "snapshot") || !strcmp(a->s, "annotate") || !strcmp(a->s, "user_defined"))
			a->aid = A_OTHER + 1;
	}
	return a->aid;
}

/* The dense number of the pool (a, b) (0 for the default pool (0, 0)), or -1 when the trace names
 * more pools than AS_POOL_MAX. */
int64_t snap_pool_number(snapev *p, uint64_t a, uint64_t b, uint32_t flags)
{
	if (!a && !b)
		return 0;
	for (size_t i = 0; i < p->npools; i++)
		if (p->pools[i].a == a && p->pools[i].b == b) {
			p->pools[i].released = 0; /* a new request: the pool is in use again */
			return p->pools[i].pool;
		}
	if (p->npools == AS_POOL_MAX)
		return -1;
	p->pools = xrealloc(p->pools, (p->npools + 1) * sizeof(*p->pools));
	uint32_t n = (uint32_t)(p->npools + 1) | flags;
	p->pools[p->npools++] = (struct pkpool){ a, b, n, 0, 0 };
	return n;
}

/*
 * The memory pool of an allocation or segment entry. PyTorch newer than 2.11 records it
 * ('pool_id': (int, int), (0, 0) the default pool); 2.11 does not, so a capture can name it in the
 * entry's 'user_metadata' (torch.cuda.memory._set_memory_metadata) as "allocsim.pool=A,B", with
 * "+custom" after it for a MemPool with its own allocator, "+nosplit" for no_split=True, "+oom" for
 * use_on_oom=True (scripts/capture-beyond.py does this
 * around graph capture and use_mem_pool). Without either, the entry is the default pool's
 * (doc/pytorch-policy.md says what that misses). 0 or -1 when the trace names too many pools.
 */
int snap_entry_pool_of(snapev *p, rec *x, const val *meta, const val *pool_id)
{
	uint64_t a = 0, b = 0;
	uint32_t flags = 0;
	const pv *t = pool_id ? as_obj(pool_id, V_TUPLE) : NULL;
	if (t && t->n == 2 && !u64_of(&t->items[0], &a) && !u64_of(&t->items[1], &b)) {
		;
	} else {
		const pv *m = meta ? as_obj(meta, V_STR) : NULL;
		const char *s = m && m->n >= 14 ? strstr(m->s, "allocsim.pool=") : NULL; /* (shorter: no match) */
		if (!s)
			return 0;
		char *end;
		s += 14;
		a = strtoull(s, &end, 10);
		if (*end != ',')
			return 0;
		b = strtoull(end + 1, &end, 10);
		for (;;) { /* "+custom", "+nosplit", "+oom", in any order */
			if (!strncmp(end, "+custom", 7))
				flags |= AS_POOL_CUSTOM, end += 7;
			else if (!strncmp(end, "+nosplit", 8))
				flags |= AS_POOL_NOSPLIT, end += 8;
			else if (!strncmp(end, "+oom", 4))
				flags |= AS_POOL_ONOOM, end += 4;
			else
				break;
		}
	}
	if (x->action == A_SEG_FREE || x->action == A_SEG_UNMAP) {
		/* only the recorded pool_id names the pool of a release (metadata is the moment's, not the segment's) */
		if (!t)
			return 0;
		for (size_t i = 0; i < p->npools; i++)
			if (p->pools[i].a == a && p->pools[i].b == b)
				x->pool = p->pools[i].pool;
		return 0;
	}
	int64_t n = snap_pool_number(p, a, b, flags);
	if (n < 0)
		return -1;
	x->pool = (uint32_t)n;
	return 0;
}

void snap_init(snapev *p)
{
	(void)p; /* (all zero) */
}

void snap_free(snapev *p)
{
	free(p->live_addr);
	free(p->live_slot1);
	free(p->slot_id);
	free(p->slot_req);
	free(p->freeslots);
	free(p->q);
	free(p->run);
	free(p->pools);
	free(p->pranges);
}
