/*
 * pickle.c - reader for PyTorch memory snapshots (torch.cuda.memory._dump_snapshot).
 *
 * A snapshot is a Python pickle. Python's own pickle.load would execute code named in an
 * untrusted file; this reader instead interprets only the data-building opcodes the snapshot
 * writer uses (protocols 2-5: dicts, lists, tuples, strings, ints, floats, bools, None, memo)
 * and rejects everything that could name or call code (GLOBAL, REDUCE, BUILD, ...).
 *
 * It streams: trace-entry dicts are turned into events as soon as the pickle appends them to a
 * device trace list, and then dropped, so memory follows the number of live allocations and
 * the pickler's batch size (1000 entries), not the trace length. Hand-written because no C
 * library parses pickles without a Python interpreter.
 *
 * Values are 16 bytes held by value on the stack, in the memo and in containers: numbers, None
 * and booleans need no object at all; strings and containers are shared, reference-counted
 * objects (pv) from a pool, so a memo GET costs a copy and a count, however large the value.
 */
#include "readers/trace.h"
#include "readers/sites.h"
#include "readers/poolinfer.h"
#include "util/idmap.h"
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <sys/mman.h>

/* Kinds of values. From V_STR on, a value is an object (pv), shared by reference. */
enum { V_EMPTY, V_NONE, V_BOOL, V_INT, V_FLOAT, V_GHOST, V_STR, V_BYTES, V_TUPLE, V_LIST, V_DICT };
/* V_GHOST: a trace entry already turned into events as it was read (see fast_entry); it stands in
 * its device's list until the pickle appends it there (u.i: the device). */
#define V_OBJ V_STR
enum pv_role { ROLE_NONE, ROLE_TRACES, ROLE_DEVTRACE, ROLE_SEGMENTS };

#define INLINE_STR 16 /* strings shorter than this live in the object itself (and are interned) */

struct pv;
/* A value: its kind and the byte offset where it starts (low 8 bits / high 56), and its content. */
typedef struct val {
	uint64_t kp;
	union {
		int64_t i;
		double f;
		struct pv *p;
	} u;
} val;

/* In the kind byte: an interned string, which lives as long as the reader (its table holds it), so
 * its references are not counted. */
#define V_IMMORTAL 0x80
#define VKIND(v) ((int)((v).kp & 0x7f))
#define VPOS(v) ((v).kp >> 8)
#define VOBJ(v) ((unsigned)((v).kp & 0xff) - V_OBJ < 0x80u - V_OBJ) /* an object whose references count */
#define MKKP(k, pos) (((uint64_t)(pos) << 8) | (uint64_t)(k))

typedef struct pv {
	unsigned char kind, role;
	unsigned char kid, aid; /* V_STR: what it is as a trace entry's key, as an action (0: not yet known) */
	unsigned char embedded; /* placed in a container: may no longer change (no cycles) */
	unsigned short depth; /* containers nested inside this value (0 for a string) */
	uint32_t refs;      /* references held by the stack, containers, the memo and the string table */
	int dev;            /* ROLE_DEVTRACE: device ordinal */
	uint64_t memo_at;   /* 1 + the memo index of its last PUT (0: none) */
	char *s;            /* V_STR/V_BYTES, NUL-terminated (inl when short) */
	size_t n;           /* string length, or item count */
	size_t cap;
	val *items;         /* tuple/list items; dict: key, value, key, value ... (kept in the pool) */
	uint64_t pos;       /* byte offset where the value starts */
	struct pv *next;    /* in the pool of free values */
	char inl[INLINE_STR];
} pv;

/* Limits that keep a hostile file from taking unbounded memory or stack (doc/reliability.md,
 * allocsim(1) LIMITS). Values are shared, never copied (a memo GET adds a reference), and every
 * byte a value holds counts against AS_PICKLE_MAX_BYTES, so memory follows the input's size. */
#define MAX_STACK   (4u << 20)   /* values on the stack */
#define MAX_MARKS   4096         /* MARKs open at once */
#define MAX_DEPTH   128          /* containers inside containers (however they were built) */
#define MAX_STRING  (1u << 20)   /* one string */
#define MAX_MEMO    (1u << 26)   /* memo index */
#define MAX_BYTES   ((uint64_t)1 << 30) /* bytes held by values, the stack and the memo at once (default) */
#define MAX_RUN     (1u << 18)   /* consecutive segment_free/segment_unmap entries (see flush_run) */
#define MAX_DEVICES 4096         /* device lists in 'device_traces' */
#define MEMO_SLOT   32           /* bytes a sparse memo entry costs (idmap key and value at half load) */
#define MEMO_DENSE  65536        /* the flat memo array covers indices below 2x the PUTs so far plus this */
#define MEMO_PAGE   4096         /* slots a page of the flat memo (32 KiB), the unit it is packed in */
#define MEMO_LAG    2            /* pages behind the newest slot kept as they are */

typedef struct rec {
	int action;
	uint32_t pool;    /* the entry's memory pool (as_event.pool; see entry_pool) */
	uint64_t addr, size, stream, pos, index;
	int64_t time_us;
	const char *site; /* interned in pk.sites (alloc, with keep_sites) */
} rec;

enum { A_ALLOC, A_FREE_REQ, A_FREE_DONE, A_SEG_ALLOC, A_SEG_FREE, A_SEG_MAP, A_SEG_UNMAP, A_OOM, A_OTHER };

typedef struct pk {
	val *stack;
	size_t sp, scap;
	size_t marks[MAX_MARKS];
	size_t nmarks;
	uintptr_t *memo;     /* index -> memo word (see memo_word), a flat array for the dense indices the pickler writes
	                      * (a reservation of MAX_MEMO words: pages are touched as they are written) */
	size_t memocap;
	struct mzpage *mz;   /* per page of the flat memo: packed or not (see memo_pack) */
	size_t mzcap, mzdone; /* pages in mz; the pages below mzdone were looked at */
	int memo_mapped;     /* memo is the reservation (else a heap array: nothing is packed) */
	size_t memohw;       /* slots below this are set or empty; those above, not yet written (no page touched) */
	uint64_t nputs;      /* PUTs so far: the flat array covers indices up to 2x this (+ MEMO_DENSE) */
	idmap memo_sparse;   /* indices beyond the flat array (a hostile pickle's): index -> memo word */
	val *scal;           /* numbers, None and booleans memoized (the snapshot writer memoizes none) */
	size_t nscal, capscal;
	pv *pool;            /* freed objects, reused (with their item arrays) */
	pv **strtab;         /* interned short strings (one reference each) */
	size_t strcap, strcount;
	uint64_t memo_next;  /* MEMOIZE's next index */
	uint64_t bytes;      /* bytes held by values, the stack and the memo */
	uint64_t max_bytes;  /* ... at most (MAX_BYTES unless the caller says) */
	pv **dead;           /* iterative freeing's work list */
	size_t ndead, capdead;
	pv *traces;          /* the top-level 'device_traces' list being streamed (a reference) */
	pv *seglist;         /* the top-level 'segments' list being streamed (a reference) */
	int ndevtraces;      /* device lists seen in it */
	uint64_t *dev_entries; /* trace entries per device */
	int want_device;     /* --device N, or -1: the one device with history */
	int any_device;      /* with several devices with history and none chosen: take the first */
	int device;          /* which device trace is replayed (-1 until known) */
	int *seg_dev;        /* the device of each segment in meta (-1: not recorded) */
	int stopped;
	size_t nghosts;      /* trace entries replayed as read (V_GHOST) on the stack */
	/* event output queue */
	as_event *q;
	size_t qhead, qlen, qcap;
	/* translation state */
	idmap live;          /* address -> 1 + the slot of a block allocated in the trace */
	/* Slots, numbered as as_reader_next numbers them for other formats (the lowest freed first:
	 * a stack), so that reader.c needs no map of its own for a snapshot (r->slots_assigned). */
	uint64_t *slot_id;   /* slot -> the id of the allocation holding it */
	unsigned char *slot_req; /* ... whose free was requested (an EV_FREE_REQ out) */
	size_t slotcap;
	uint32_t *freeslots;
	size_t nfreeslots, capfreeslots;
	uint32_t nextslot;
	uint64_t next_id;
	uint64_t nentries, other_device_entries;
	int have_freereq;    /* a free_requested waiting to see if free_completed follows */
	rec freereq;
	rec *run;            /* a run of segment_free/segment_unmap entries not yet classified */
	size_t nrun, caprun;
	int want_segments;
	int keep_sites;      /* give allocations their site from the entry's frames */
	/* private pools: the trace's pool ids, numbered 1.. in order of appearance (see entry_pool) */
	struct pkpool {
		uint64_t a, b;
		uint32_t pool;
		int released;          /* its release is out (EV_POOL_RELEASE), and no request came since */
		uint64_t emptied_run;  /* the release run (nruns, counted from 1) whose pool-only release emptied it */
	} *pools;
	uint64_t nruns;      /* release runs flushed so far */
	size_t npools;
	/* the device memory of private pools (segment_alloc/segment_map of a pool's request), so a
	 * release of it names its pool (see flush_run) */
	struct pkrange { uint64_t addr, size; uint32_t pool; } *pranges;
	size_t npranges, cappranges;
	as_sites sites;
	/* pools of a snapshot that names none (poolinfer.c): ALLOCSIM_POOLS, and the first pass */
	int pools_mode;      /* POOLS_AUTO, POOLS_ANNOTATION, POOLS_INFER */
	int prepass;         /* this reader is the first pass: entries go to pinf, no events */
	int reread;          /* this reader reads again what an auto pass found private pools in (as_reader_again) */
	int pools_decided;   /* the main pass has decided (at its first entry) */
	int annotated;       /* an entry names its pool (pool_id, user_metadata) */
	as_poolinfer *pinf;  /* the first pass's answers (main pass), or what it gathers (first pass) */
	as_poolinfer *detect; /* auto without private segments at the end: the evidence that pools were used */
} pk;

enum { POOLS_AUTO, POOLS_ANNOTATION, POOLS_INFER };

static void memo_forget(pk *p, pv *v);
static void memo_pack(pk *p);

static uint64_t pv_bytes(const pv *v)
{
	return sizeof(pv) + (v->s && v->s != v->inl ? v->n + 1 : 0) + v->cap * sizeof(val);
}

static void dead_push(pk *p, pv *v)
{
	if (p->ndead == p->capdead) {
		p->capdead = p->capdead ? p->capdead * 2 : 64;
		p->dead = xrealloc(p->dead, p->capdead * sizeof(pv *));
	}
	p->dead[p->ndead++] = v;
}

/* Frees an object no longer referenced, and what only it referenced, without recursion (the
 * nesting depth is the input's choice), through a work list. */
static void pv_release(pk *p, pv *v)
{
	size_t base = p->ndead;
	dead_push(p, v);
	while (p->ndead > base) {
		pv *d = p->dead[--p->ndead];
		if (d->kind >= V_TUPLE)
			for (size_t i = 0; i < d->n; i++)
				if (VOBJ(d->items[i]) && !--d->items[i].u.p->refs)
					dead_push(p, d->items[i].u.p);
		p->bytes -= pv_bytes(d);
		if (d->s != d->inl)
			free(d->s);
		if (d->cap > 64) {
			free(d->items);
			d->items = NULL;
			d->cap = 0;
		}
		d->next = p->pool;
		p->pool = d;
	}
}

/* Drops one reference to an object. */
static inline void pv_unref(pk *p, pv *v)
{
	if (v && !--v->refs)
		pv_release(p, v);
}

/* Drops a value (a reference, for an object). */
static inline void val_drop(pk *p, val v)
{
	if (VOBJ(v))
		pv_unref(p, v.u.p);
}

/* A new object (one reference, the caller's), from the pool when it has one: a snapshot's trace
 * entries come and go by the million. */
static pv *pv_new(pk *p, int kind, uint64_t pos)
{
	pv *v = p->pool;
	if (v) {
		p->pool = v->next;
	} else {
		v = xmalloc(sizeof(*v));
		v->items = NULL;
		v->cap = 0;
	}
	v->kind = (unsigned char)kind;
	v->role = v->kid = v->aid = v->embedded = 0;
	v->depth = 0;
	v->refs = 1;
	v->dev = 0;
	v->memo_at = 0;
	v->s = NULL;
	v->n = 0;
	v->pos = pos;
	p->bytes += sizeof(pv) + v->cap * sizeof(val);
	return v;
}

static inline val obj_val(pv *o)
{
	val v;
	v.kp = MKKP(o->kind, o->pos);
	v.u.p = o;
	return v;
}

/* The object a value is if it has that kind, else NULL. */
static inline pv *as_obj(const val *v, int kind)
{
	return v && VKIND(*v) == kind ? v->u.p : NULL;
}

/* Last key wins, as in a Python dict built by the unpickler. */
static const val *dict_get(const pv *d, const char *key)
{
	if (!d || d->kind != V_DICT)
		return NULL;
	for (size_t i = d->n & ~(size_t)1; i >= 2; i -= 2)
		if (VKIND(d->items[i - 2]) == V_STR && !strcmp(d->items[i - 2].u.p->s, key))
			return &d->items[i - 1];
	return NULL;
}

static inline int depth_of(val v)
{
	return VKIND(v) >= V_TUPLE ? v.u.p->depth : 0;
}

/* Adds item to container c (the item's reference moves into c); callers check too_deep first. */
static inline void pv_add(pk *p, pv *c, val item)
{
	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 8;
		c->items = xrealloc(c->items, nc * sizeof(val));
		p->bytes += (nc - c->cap) * sizeof(val);
		c->cap = nc;
	}
	c->items[c->n++] = item;
	if (VKIND(item) >= V_TUPLE) {
		item.u.p->embedded = 1;
		if (item.u.p->depth + 1 > c->depth)
			c->depth = (unsigned short)(item.u.p->depth + 1);
	} else if (!c->depth) {
		c->depth = 1;
	}
}

/* Whether putting these values into a container would nest containers deeper than MAX_DEPTH. */
static int too_deep(const pk *p, size_t from, size_t n)
{
	for (size_t i = from; i < from + n; i++)
		if (depth_of(p->stack[i]) + 1 > MAX_DEPTH)
			return 1;
	return 0;
}

/* Values are shared (the memo hands out references), so a container could be put inside itself;
 * that cannot happen when a container never changes once placed in another, and never holds
 * itself. Snapshots (and pickle.dump of acyclic data) fill every container before placing it. */
static int cycle(const pk *p, const pv *c, size_t from, size_t n)
{
	if (c->embedded)
		return 1;
	for (size_t i = from; i < from + n; i++)
		if (VKIND(p->stack[i]) >= V_TUPLE && p->stack[i].u.p == c)
			return 1;
	return 0;
}

static int perr(as_reader *r, uint64_t pos, as_err *err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int perr(as_reader *r, uint64_t pos, as_err *err, const char *fmt, ...)
{
	char m[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof m, fmt, ap);
	va_end(ap);
	return as_fail(err, AS_EXIT_DATAERR, "%s: byte offset %" PRIu64 ": %s", r->in.path, pos, m);
}

/* ---- event translation ------------------------------------------------------------------ */

static as_event *qpush(pk *p)
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

static as_event *emit(pk *p, int type, const rec *x, uint64_t id, uint32_t flags)
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
static int64_t slot_take(pk *p, uint64_t id)
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

static void slot_give(pk *p, uint32_t s)
{
	if (p->nfreeslots == p->capfreeslots) {
		p->capfreeslots = p->capfreeslots ? p->capfreeslots * 2 : 256;
		p->freeslots = xrealloc(p->freeslots, p->capfreeslots * sizeof(*p->freeslots));
	}
	p->freeslots[p->nfreeslots++] = s;
}

/* The free of the block at x->addr (its slot + 1 from the live map). */
static void emit_free(pk *p, const rec *x, uintptr_t slot1)
{
	uint32_t s = (uint32_t)(slot1 - 1);
	emit(p, EV_FREE, x, p->slot_id[s], 0)->slot = s;
	slot_give(p, s);
}

static void emit_seg(pk *p, const rec *x)
{
	static const int map[] = { [A_SEG_ALLOC] = EV_SEG_ALLOC, [A_SEG_FREE] = EV_SEG_FREE,
		[A_SEG_MAP] = EV_SEG_MAP, [A_SEG_UNMAP] = EV_SEG_UNMAP };
	emit(p, map[x->action], x, 0, 0);
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
static void free_done(pk *p, const rec *x, as_meta *m)
{
	void *s1 = idmap_del(&p->live, x->addr);
	if (!s1) {
		m->unmatched_frees++;
		m->history_truncated = 1;
		return;
	}
	emit_free(p, x, (uintptr_t)s1);
}

/* The private pool whose device memory a segment_free/segment_unmap gives back (0: none). */
static uint32_t range_pool(pk *p, const rec *x)
{
	if (AS_POOL_INDEX(x->pool))
		return x->pool; /* the entry says (pool_id, PyTorch > 2.11) */
	for (size_t i = 0; i < p->npranges; i++)
		if (x->addr >= p->pranges[i].addr && x->addr - p->pranges[i].addr < p->pranges[i].size)
			return p->pranges[i].pool;
	return 0;
}

static void range_forget(pk *p, const rec *x)
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
static void release_pools(pk *p, int pool_only)
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

static void flush_run(pk *p, int next_action, as_meta *meta)
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

static int flush_freereq(as_reader *r, pk *p, as_err *err)
{
	if (!p->have_freereq)
		return 0;
	uint32_t s = (uint32_t)((uintptr_t)idmap_get(&p->live, p->freereq.addr) - 1);
	p->have_freereq = 0;
	if (p->slot_req[s])
		return perr(r, p->freereq.pos, err, "free of id %" PRIu64 " requested twice", p->slot_id[s]);
	p->slot_req[s] = 1;
	emit(p, EV_FREE_REQ, &p->freereq, p->slot_id[s], 0)->slot = s;
	return 0;
}

static int translate(as_reader *r, pk *p, const rec *x, as_err *err)
{
	as_meta *m = &r->meta;
	/* A free_requested directly followed by its free_completed becomes one EV_FREE. */
	if (p->have_freereq) {
		if (x->action == A_FREE_DONE && x->addr == p->freereq.addr) {
			p->have_freereq = 0;
			emit_free(p, x, (uintptr_t)idmap_del(&p->live, x->addr));
			return 0;
		}
		if (flush_freereq(r, p, err))
			return -1;
	}
	/* Releases, and completions of pending frees among them (a flush synchronizes between the
	 * garbage collector's releases and its own), are classified together. */
	if (x->action == A_SEG_FREE || x->action == A_SEG_UNMAP || (x->action == A_FREE_DONE && p->nrun)) {
		/* The run waits for the entry after it (see flush_run), so its length is bounded: a device
		 * holds far fewer segments (141 GB / 2 MiB = 67,000 on an H200) than MAX_RUN. */
		if (p->nrun == MAX_RUN)
			return perr(r, x->pos, err, "trace entry %" PRIu64 ": more than %u segment releases in a row "
				"(reader limit; a device holds far fewer segments)", x->index, MAX_RUN);
		if (p->nrun == p->caprun) {
			p->caprun = p->caprun ? p->caprun * 2 : 16;
			p->run = xrealloc(p->run, p->caprun * sizeof(rec));
		}
		p->run[p->nrun++] = *x;
		return 0;
	}
	flush_run(p, x->action, m);
	switch (x->action) {
	case A_ALLOC: {
		if (idmap_get(&p->live, x->addr))
			return perr(r, x->pos, err, "trace entry %" PRIu64 ": alloc at address 0x%" PRIx64 " which is still allocated",
				x->index, x->addr);
		uint64_t id = ++p->next_id;
		int64_t s = slot_take(p, id);
		if (s < 0)
			return perr(r, x->pos, err, "more than 2^32-1 allocations live at once");
		idmap_put(&p->live, x->addr, (void *)(uintptr_t)(s + 1));
		emit(p, EV_ALLOC, x, id, 0)->slot = (uint32_t)s;
		break;
	}
	case A_FREE_REQ:
		if (!idmap_get(&p->live, x->addr)) {
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
			return perr(r, x->pos, err, "more than 2^32-1 allocations live at once");
		emit(p, EV_ALLOC, x, id, EVF_OOM)->slot = (uint32_t)s;
		break;
	}
	case A_SEG_ALLOC: case A_SEG_MAP:
		if (AS_POOL_INDEX(x->pool)) {
			if (p->npranges == p->cappranges) {
				p->cappranges = p->cappranges ? p->cappranges * 2 : 16;
				p->pranges = xrealloc(p->pranges, p->cappranges * sizeof(*p->pranges));
			}
			p->pranges[p->npranges++] = (struct pkrange){ x->addr, x->size, x->pool };
		}
		emit_seg(p, x);
		break;
	default:
		break;
	}
	return 0;
}

static int u64_of(const val *v, uint64_t *out)
{
	if (!v || (VKIND(*v) != V_INT && VKIND(*v) != V_BOOL) || v->u.i < 0)
		return -1;
	*out = (uint64_t)v->u.i;
	return 0;
}

static int get_u64(const pv *d, const char *key, uint64_t *out)
{
	return u64_of(dict_get(d, key), out);
}

/* What a string is as a trace entry's key, found once per (interned, shared) string. */
enum { K_OTHER = 1, K_ACTION, K_ADDR, K_SIZE, K_STREAM, K_TIME, K_FRAMES, K_META, K_POOL };
static int key_id(pv *k)
{
	if (!k->kid) {
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
static int action_id(pv *a)
{
	if (!a->aid) {
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

/* The site of an entry's frames (a list of {filename, line, name} dicts, innermost first); frames
 * of any other shape are left out. */
static const char *entry_site(pk *p, const pv *frames)
{
	as_sites_begin(&p->sites);
	for (size_t i = 0; i < frames->n; i++) {
		const pv *f = as_obj(&frames->items[i], V_DICT);
		if (!f)
			continue;
		const pv *file = as_obj(dict_get(f, "filename"), V_STR), *name = as_obj(dict_get(f, "name"), V_STR);
		uint64_t ln = 0;
		if (!file || u64_of(dict_get(f, "line"), &ln))
			continue;
		as_sites_frame(&p->sites, file->s, ln, name ? name->s : NULL);
	}
	return as_sites_end(&p->sites);
}

/* What a trace entry's fields make of it: EF_OK (events), EF_SKIP (recorded, not replayed), or
 * what is wrong with it. */
enum { EF_OK, EF_SKIP, EF_NOACTION, EF_UNKNOWN, EF_SIZE, EF_ADDR, EF_TIME, EF_BOUNDS };
static int entry_fields(const val *a, const val *size, const val *addr, const val *stream, const val *time, rec *x)
{
	x->time_us = -1;
	x->addr = x->size = x->stream = 0;
	x->pool = 0;
	x->site = NULL;
	if (!a || VKIND(*a) != V_STR)
		return EF_NOACTION;
	x->action = action_id(a->u.p) - 1;
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

/* The dense number of the pool (a, b) (0 for the default pool (0, 0)), or -1 when the trace names
 * more pools than AS_POOL_MAX. */
static int64_t pool_number(pk *p, uint64_t a, uint64_t b, uint32_t flags)
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
static int entry_pool(pk *p, rec *x, const val *meta, const val *pool_id)
{
	uint64_t a = 0, b = 0;
	uint32_t flags = 0;
	if (x->action != A_ALLOC && x->action != A_OOM && x->action != A_SEG_ALLOC && x->action != A_SEG_MAP &&
	    x->action != A_SEG_FREE && x->action != A_SEG_UNMAP)
		return 0;
	const pv *t = pool_id ? as_obj(pool_id, V_TUPLE) : NULL;
	if (t && t->n == 2 && !u64_of(&t->items[0], &a) && !u64_of(&t->items[1], &b)) {
		;
	} else {
		const pv *m = meta ? as_obj(meta, V_STR) : NULL;
		const char *s = m ? strstr(m->s, "allocsim.pool=") : NULL;
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
	int64_t n = pool_number(p, a, b, flags);
	if (n < 0)
		return -1;
	x->pool = (uint32_t)n;
	return 0;
}

/*
 * Pools of a 2.11 snapshot that names none (ALLOCSIM_POOLS=auto|infer; poolinfer.c). The main pass,
 * at its first entry, reads the whole snapshot once more in a first pass (its own reader over the
 * same file) that gives every entry to the inference; then each entry takes the pool found. auto
 * does this only when the end state has private segments; infer always, and ignores user_metadata.
 */
static int pools_prepass(as_reader *r, pk *p, as_err *err)
{
	int fd = dup(r->in.fd);
	if (fd < 0)
		return as_fail(err, AS_EXIT_NOINPUT, "%s: cannot read it again: %s", r->in.path, strerror(errno));
	as_reader_opts o;
	memset(&o, 0, sizeof o);
	o.has_device = 1;
	o.device = p->device;
	o.max_bytes = p->max_bytes;
	o.pool_prepass = 1;
	as_reader *q = NULL;
	if (as_reader_open_fd(&q, fd, r->in.path, &o, err))
		return -1;
	as_event ev;
	int rc;
	while ((rc = as_reader_next(q, &ev, err)) > 0)
		;
	pk *qp = q->priv;
	if (!rc && !qp->annotated) {
		as_poolinfer_solve(qp->pinf);
		p->pinf = qp->pinf;
		qp->pinf = NULL;
		as_poolinfer_stats st;
		as_poolinfer_get_stats(p->pinf, &st);
		r->meta.inferred_pools = st.pools ? st.pools : 1; /* 1: inferred, none found */
		r->meta.pool_unplaced = st.unplaced;
	}
	as_reader_close(q);
	return rc < 0 ? -1 : 0;
}

/* Each trace entry of the replayed device, before it is translated (x->pool from the snapshot). */
static int pools_entry(as_reader *r, pk *p, rec *x, int code, as_err *err)
{
	if (p->prepass) {
		if (x->pool)
			p->annotated = 1;
		as_poolinfer_entry(p->pinf, code == EF_OK ? x->action : PI_OTHER, x->index, x->addr, x->size, x->stream);
		return 0;
	}
	if (!p->pools_decided) {
		p->pools_decided = 1;
		if (p->pools_mode == POOLS_INFER || (p->pools_mode == POOLS_AUTO && (r->meta.private_segments || p->reread) && !x->pool)) {
			if (pools_prepass(r, p, err))
				return -1;
		} else if (p->pools_mode == POOLS_AUTO && !x->pool) {
			p->detect = as_poolinfer_new_light(); /* pools released before the snapshot: a warning */
		}
	}
	if (p->detect) {
		if (x->pool) { /* the trace names its pools after all */
			as_poolinfer_free(p->detect);
			p->detect = NULL;
		} else {
			as_poolinfer_entry(p->detect, code == EF_OK ? x->action : PI_OTHER, x->index, x->addr, x->size, x->stream);
		}
	}
	uint64_t a, b;
	uint32_t flags;
	if (p->pinf && code == EF_OK && !x->pool &&
	    (x->action == A_ALLOC || x->action == A_OOM || x->action == A_SEG_ALLOC || x->action == A_SEG_MAP) &&
	    as_poolinfer_pool(p->pinf, x->index, &a, &b, &flags)) {
		int64_t n = pool_number(p, a, b, flags);
		if (n < 0)
			return perr(r, x->pos, err, "trace entry %" PRIu64 ": more than %u memory pools", x->index, AS_POOL_MAX);
		x->pool = (uint32_t)n;
	}
	return 0;
}

/* The keys of a dict, for the writer's release (pyversion.c): the top level, allocator_settings and
 * the first trace entry (fast_entry leaves that one to the opcode loop). */
static void note_keys(as_meta *m, const pv *d, int where)
{
	for (size_t i = 0; i + 1 < d->n; i += 2)
		if (VKIND(d->items[i]) == V_STR)
			as_pyver_note(m, where, d->items[i].u.p->s);
}

static int trace_entry(as_reader *r, pk *p, const pv *d, as_err *err)
{
	if (!(r->meta.pyfields & AS_PF_ENTRY))
		note_keys(&r->meta, d, AS_PF_IN_ENTRY);
	rec x;
	x.pos = d->pos;
	x.index = p->nentries++;
	/* one pass over the items; a later duplicate key wins, as in Python */
	const val *a = NULL, *size = NULL, *addr = NULL, *stream = NULL, *time = NULL, *frames = NULL, *meta = NULL, *pid = NULL;
	for (size_t i = 0; i + 1 < d->n; i += 2) {
		const val *k = &d->items[i], *v = &d->items[i + 1];
		if (VKIND(*k) != V_STR)
			continue;
		switch (key_id(k->u.p)) {
		case K_ACTION: a = v; break;
		case K_ADDR: addr = v; break;
		case K_SIZE: size = v; break;
		case K_STREAM: stream = v; break;
		case K_TIME: time = v; break;
		case K_FRAMES: frames = v; break;
		case K_META: meta = v; break;
		case K_POOL: pid = v; break;
		default: break;
		}
	}
	const char *as = a && VKIND(*a) == V_STR ? a->u.p->s : "";
	switch (entry_fields(a, size, addr, stream, time, &x)) {
	case EF_OK:
		if (p->keep_sites && x.action == A_ALLOC && frames && VKIND(*frames) == V_LIST)
			x.site = entry_site(p, frames->u.p);
		if (p->pools_mode == POOLS_INFER)
			meta = NULL; /* the capture's own names are not read */
		if ((meta || pid) && entry_pool(p, &x, meta, pid))
			return perr(r, d->pos, err, "trace entry %" PRIu64 ": more than %u memory pools", x.index, AS_POOL_MAX);
		if (pools_entry(r, p, &x, EF_OK, err))
			return -1;
		if (p->prepass)
			return 0;
		r->meta.named_pools = (uint32_t)p->npools;
		return translate(r, p, &x, err);
	case EF_SKIP:
		return pools_entry(r, p, &x, EF_SKIP, err);
	case EF_NOACTION:
		return perr(r, d->pos, err, "trace entry %" PRIu64 " has no 'action' string", x.index);
	case EF_UNKNOWN:
		return perr(r, d->pos, err, "trace entry %" PRIu64 ": unknown action '%.60s'", x.index, as);
	case EF_SIZE:
		return perr(r, d->pos, err, "trace entry %" PRIu64 " (%s) has no valid 'size'", x.index, as);
	case EF_ADDR:
		return perr(r, d->pos, err, "trace entry %" PRIu64 " (%s) has no valid 'addr'", x.index, as);
	case EF_TIME:
		return perr(r, d->pos, err, "trace entry %" PRIu64 " (%s) has an invalid 'time_us' (must be a whole number 0 .. 2^63-1)",
			x.index, as);
	default:
		return perr(r, d->pos, err, "trace entry %" PRIu64 ": %s of %" PRIu64 " bytes (must be 1 .. 2^60-1)",
			x.index, as, x.size);
	}
}

static int segment_entry(as_reader *r, pk *p, const pv *d, as_err *err)
{
	as_meta *m = &r->meta;
	uint64_t dev = 0;
	const pv *spid = as_obj(dict_get(d, "segment_pool_id"), V_TUPLE);
	uint64_t pa = 0, pb = 0;
	if (spid && spid->n == 2 && !u64_of(&spid->items[0], &pa) && !u64_of(&spid->items[1], &pb) && (pa || pb))
		m->private_segments++;
	int sdev = get_u64(d, "device", &dev) ? -1 : dev > INT32_MAX ? INT32_MAX : (int)dev;
	if (p->prepass && (sdev < 0 || sdev == p->want_device)) {
		uint64_t addr, size;
		const val *ex = dict_get(d, "is_expandable");
		if (!get_u64(d, "address", &addr) && !get_u64(d, "total_size", &size))
			as_poolinfer_end_segment(p->pinf, addr, size, pa, pb, ex && VKIND(*ex) == V_BOOL && ex->u.i);
	}
	if (!p->want_segments)
		return 0;
	as_snap_segment s;
	memset(&s, 0, sizeof s);
	if (get_u64(d, "address", &s.addr) || get_u64(d, "total_size", &s.total_size))
		return perr(r, d->pos, err, "segment without 'address'/'total_size'");
	get_u64(d, "stream", &s.stream);
	const pv *t = as_obj(dict_get(d, "segment_type"), V_STR);
	s.is_small = t && !strcmp(t->s, "small");
	const val *e = dict_get(d, "is_expandable");
	s.is_expandable = e && VKIND(*e) == V_BOOL && e->u.i;
	const pv *bl = as_obj(dict_get(d, "blocks"), V_LIST);
	if (bl) {
		s.blocks = xcalloc(bl->n, sizeof(as_snap_block));
		for (size_t i = 0; i < bl->n; i++) {
			const pv *b = as_obj(&bl->items[i], V_DICT);
			get_u64(b, "size", &s.blocks[s.nblocks].size);
			const pv *st = as_obj(dict_get(b, "state"), V_STR);
			int state = 0;
			if (st)
				state = !strcmp(st->s, "active_allocated") ? 1 : !strcmp(st->s, "active_pending_free") ? 2 : 0;
			s.blocks[s.nblocks++].state = state;
		}
	}
	m->segments = xrealloc(m->segments, (m->nsegments + 1) * sizeof(*m->segments));
	p->seg_dev = xrealloc(p->seg_dev, (m->nsegments + 1) * sizeof(int));
	p->seg_dev[m->nsegments] = sdev;
	m->segments[m->nsegments++] = s;
	return 0;
}

/* Items are being appended to list L (which stays on the stack); consume or keep them. */
static int append_items(as_reader *r, pk *p, pv *list, val *items, size_t n, as_err *err)
{
	size_t i = 0;
	int rc = 0;
	if (list->role == ROLE_NONE) {
		for (; i < n; i++)
			pv_add(p, list, items[i]);
		return 0;
	}
	for (; i < n && !rc; i++) {
		val it = items[i];
		if (list->role == ROLE_DEVTRACE && VKIND(it) == V_GHOST) {
			p->nghosts--; /* replayed as it was read (ghost_misplaced checked the list) */
			continue;
		}
		if (list->role == ROLE_DEVTRACE) {
			if (VKIND(it) != V_DICT) {
				rc = perr(r, VPOS(it), err, "device %d's trace entry %" PRIu64 " is not a dict", list->dev,
					p->dev_entries[list->dev]);
			} else {
				p->dev_entries[list->dev]++;
				if (p->device < 0 && p->want_device < 0)
					p->device = list->dev; /* the first device with history, unless another has too */
				if (list->dev == p->device)
					rc = trace_entry(r, p, it.u.p, err);
				else
					p->other_device_entries++;
				memo_forget(p, it.u.p);
			}
		} else if (list->role == ROLE_SEGMENTS) {
			if (VKIND(it) != V_DICT) {
				rc = perr(r, VPOS(it), err, "an item of 'segments' is not a dict");
			} else {
				rc = segment_entry(r, p, it.u.p, err);
				memo_forget(p, it.u.p);
			}
		} else if (list->role == ROLE_TRACES) {
			/* a device's list, already consumed */
			if (VKIND(it) != V_LIST || it.u.p->role != ROLE_DEVTRACE)
				rc = perr(r, VPOS(it), err, "an item of 'device_traces' is not a list of trace entries");
		}
		val_drop(p, it);
	}
	for (; i < n; i++)
		val_drop(p, items[i]);
	memo_pack(p); /* (once a batch: the memo's older pages) */
	return rc;
}

/* Whether the string on top of the stack is a key of the top-level dict (stack[0]) with that name:
 * the dict's own pending items sit directly above it (pickle protocols 2+ write
 * EMPTY_DICT [MARK] key value ... SETITEM[S]), so a key inside any value is never taken. */
static int top_key(const pk *p, const char *name)
{
	if (p->sp < 2 || VKIND(p->stack[0]) != V_DICT)
		return 0;
	const val *k = &p->stack[p->sp - 1];
	if (VKIND(*k) != V_STR || strcmp(k->u.p->s, name))
		return 0;
	size_t at = p->sp - 1;
	if (!p->nmarks)
		return at == 1;
	return p->nmarks == 1 && p->marks[0] == 1 && (at - 1) % 2 == 0;
}

static uint64_t history_entries(const pk *p)
{
	uint64_t n = 0;
	for (int d = 0; d < p->ndevtraces; d++)
		n += p->dev_entries[d];
	return n;
}

static void drop_segments(pk *p, as_meta *m)
{
	for (size_t i = 0; i < m->nsegments; i++)
		free(m->segments[i].blocks);
	free(m->segments);
	m->segments = NULL;
	m->nsegments = 0;
	(void)p;
}

/* List l is the next device's list of trace entries. */
static int new_device(as_reader *r, pk *p, pv *l, as_err *err)
{
	if (p->ndevtraces == MAX_DEVICES)
		return perr(r, l->pos, err, "'device_traces' holds more than %d devices (reader limit)", MAX_DEVICES);
	if (!(p->ndevtraces & (p->ndevtraces - 1)))
		p->dev_entries = xrealloc(p->dev_entries, (size_t)(p->ndevtraces ? p->ndevtraces * 2 : 1) * sizeof(uint64_t));
	p->dev_entries[p->ndevtraces] = 0;
	l->role = ROLE_DEVTRACE;
	l->dev = p->ndevtraces++;
	return 0;
}

/* Consumes the items of a list that was built whole (not streamed): a 'device_traces' or
 * 'segments' that a pickle made in some other way than the snapshot writer does. */
static int consume_list(as_reader *r, pk *p, pv *l, int role, as_err *err)
{
	val *items = l->items;
	size_t n = l->n;
	p->bytes -= l->cap * sizeof(val);
	l->items = NULL;
	l->n = l->cap = 0;
	l->role = (unsigned char)role;
	int rc = 0;
	size_t i = 0;
	for (; i < n && !rc; i++) {
		val it = items[i];
		if (role == ROLE_TRACES) {
			if (VKIND(it) != V_LIST) {
				rc = perr(r, VPOS(it), err, "an item of 'device_traces' is not a list of trace entries");
				break;
			}
			if ((rc = new_device(r, p, it.u.p, err)))
				break;
			rc = consume_list(r, p, it.u.p, ROLE_DEVTRACE, err);
		} else {
			rc = append_items(r, p, l, &items[i], 1, err);
			continue; /* append_items dropped the reference */
		}
		val_drop(p, it);
	}
	for (; i < n; i++)
		val_drop(p, items[i]);
	free(items);
	return rc;
}

/* At STOP: the history is snapshot['device_traces'] of the top-level dict (its last such key), a
 * list with one list of trace entries per device; say what is missing and how to record it. */
static int check_history(as_reader *r, pk *p, pv *top, uint64_t pos, as_err *err)
{
	as_meta *m = &r->meta;
	static const char how[] = "record it with torch.cuda.memory._record_memory_history() before the workload "
		"runs, then torch.cuda.memory._dump_snapshot()";
	const val *dt = dict_get(top, "device_traces");
	const val *sg = dict_get(top, "segments");
	pv *sgl = as_obj(sg, V_LIST);
	if (!sg || sgl != p->seglist) {
		drop_segments(p, m);
		if (sgl && consume_list(r, p, sgl, ROLE_SEGMENTS, err))
			return -1;
	}
	if (!dt)
		return perr(r, pos, err, "the snapshot has no allocation history (no 'device_traces', only the end "
			"state): %s", how);
	if (VKIND(*dt) != V_LIST)
		return perr(r, pos, err, "the snapshot's 'device_traces' is not a list (no allocation history): %s", how);
	if (dt->u.p != p->traces) {
		if (history_entries(p))
			return perr(r, pos, err, "the snapshot's last 'device_traces' is not the list replayed: a "
				"pickle Python reads differently from its stream");
		p->ndevtraces = 0;
		if (consume_list(r, p, dt->u.p, ROLE_TRACES, err))
			return -1;
	}
	char list[256];
	size_t len = 0;
	int with = 0;
	list[0] = 0;
	for (int d = 0; d < p->ndevtraces; d++)
		if (p->dev_entries[d]) {
			with++;
			if (len < sizeof list - 40)
				len += (size_t)snprintf(list + len, sizeof list - len, "%s%d (%" PRIu64 " entries)",
					len ? ", " : "", d, p->dev_entries[d]);
		}
	if (!with)
		return perr(r, pos, err, "the snapshot has no allocation history ('device_traces' holds %d empty "
			"device list%s): %s", p->ndevtraces, p->ndevtraces == 1 ? "" : "s", how);
	if (p->want_device >= 0 && (p->want_device >= p->ndevtraces || !p->dev_entries[p->want_device]))
		return perr(r, pos, err, "device %d has no allocation history in this snapshot (devices with "
			"history: %s)", p->want_device, list);
	if (p->want_device < 0 && with > 1 && !p->any_device)
		return perr(r, pos, err, "the snapshot has allocation history on %d devices (%s): choose one with "
			"--device N", with, list);
	/* the chosen device's segments only (those without a device field belong to every one) */
	size_t k = 0;
	for (size_t i = 0; i < m->nsegments; i++) {
		if (p->seg_dev[i] < 0 || p->seg_dev[i] == p->device)
			m->segments[k++] = m->segments[i];
		else
			free(m->segments[i].blocks);
	}
	m->nsegments = k;
	m->device_index = p->device;
	m->ndevices = (size_t)p->ndevtraces;
	m->device_entries = xmalloc((size_t)p->ndevtraces * sizeof(uint64_t));
	memcpy(m->device_entries, p->dev_entries, (size_t)p->ndevtraces * sizeof(uint64_t));
	return 0;
}

/* The recording's settings that decide the pool inference: allocator_settings' fields, else the
 * PYTORCH_CUDA_ALLOC_CONF string. */
static void pools_settings(as_poolinfer *pi, const pv *s, const char *conf)
{
	const val *e = s ? dict_get(s, "expandable_segments") : NULL;
	int exp = e ? VKIND(*e) == V_BOOL && e->u.i : conf && strstr(conf, "expandable_segments:True") != NULL;
	const val *ms = s ? dict_get(s, "max_split_size") : NULL;
	uint64_t max_split = 0;
	if (ms && VKIND(*ms) == V_INT && ms->u.i > 0 && (uint64_t)ms->u.i < ((uint64_t)1 << 62))
		max_split = (uint64_t)ms->u.i;
	else if (!ms && conf && strstr(conf, "max_split_size_mb:"))
		max_split = strtoull(strstr(conf, "max_split_size_mb:") + 18, NULL, 10) << 20;
	const val *gc = s ? dict_get(s, "garbage_collection_threshold") : NULL;
	int g = gc ? (VKIND(*gc) == V_FLOAT ? gc->u.f > 0 : VKIND(*gc) == V_INT && gc->u.i > 0)
		   : conf && strstr(conf, "garbage_collection_threshold") != NULL;
	const pv *rd = s ? as_obj(dict_get(s, "roundup_power2_divisions"), V_DICT) : NULL;
	int roundup = !s && conf && strstr(conf, "roundup_power2_divisions") != NULL;
	for (size_t i = 1; rd && i < rd->n; i += 2)
		if (VKIND(rd->items[i]) == V_INT && rd->items[i].u.i > 0)
			roundup = 1;
	as_poolinfer_settings(pi, exp, max_split, g, roundup);
}

static void finish_top(as_reader *r, pk *p, const pv *top)
{
	as_meta *m = &r->meta;
	const pv *s = as_obj(dict_get(top, "allocator_settings"), V_DICT);
	snprintf(m->source, sizeof m->source, "pytorch-snapshot");
	note_keys(m, top, AS_PF_TOP);
	if (s)
		note_keys(m, s, AS_PF_IN_SETTINGS);
	if (s) {
		/* 2.12+: the history ring's capacity and whether it wrapped (pyversion.c) */
		const val *ov = dict_get(s, "trace_alloc_overflowed"), *mx = dict_get(s, "trace_alloc_max_entries");
		if (ov || mx)
			as_pyver_ring(m, ov && VKIND(*ov) == V_BOOL && ov->u.i,
				mx && (VKIND(*mx) == V_INT) ? mx->u.i : 0);
	}
	if (s) {
		const pv *c = as_obj(dict_get(s, "PYTORCH_CUDA_ALLOC_CONF"), V_STR);
		free(m->settings);
		m->settings = xstrdup(c ? c->s : "");
		m->has_settings = 1;
	}
	if (p->prepass)
		pools_settings(p->pinf, s, m->settings);
	if (p->detect) {
		pools_settings(p->detect, s, m->settings);
		m->pool_evidence = as_poolinfer_evidence(p->detect);
		r->again = m->pool_evidence > 0; /* pools used and released: read again, inferring them */
	}
}

/* ---- the opcode interpreter ----------------------------------------------------------- */

static inline int need(as_reader *r, size_t n, as_err *err)
{
	if (r->in.len - r->in.pos >= n)
		return 0;
	if (as_input_fill(&r->in, n, err) < n) {
		if (r->in.error)
			return -1;
		return perr(r, as_input_tell(&r->in), err, "truncated pickle (needs %zu more bytes)", n);
	}
	return 0;
}

static inline uint64_t rd_le(as_reader *r, int n)
{
	const unsigned char *b = r->in.buf + r->in.pos;
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)b[i] << (8 * i);
	r->in.pos += (size_t)n;
	return v;
}

static int push_slow(as_reader *r, pk *p, val v, as_err *err)
{
	if (p->sp == MAX_STACK) {
		val_drop(p, v);
		return perr(r, VPOS(v), err, "pickle stack exceeds %u values (reader memory cap)", MAX_STACK);
	}
	if (p->sp == p->scap) {
		size_t nc = p->scap ? p->scap * 2 : 1024;
		p->stack = xrealloc(p->stack, nc * sizeof(val));
		p->bytes += (nc - p->scap) * sizeof(val);
		p->scap = nc;
	}
	p->stack[p->sp++] = v;
	return 0;
}

static inline int push(as_reader *r, pk *p, val v, as_err *err)
{
	if (p->sp < p->scap) {
		p->stack[p->sp++] = v;
		return 0;
	}
	return push_slow(r, p, v, err);
}

static inline int push_scalar(as_reader *r, pk *p, int kind, uint64_t pos, int64_t i, as_err *err)
{
	val v;
	v.kp = MKKP(kind, pos);
	v.u.i = i;
	return push(r, p, v, err);
}

static inline int push_obj(as_reader *r, pk *p, pv *o, as_err *err)
{
	return push(r, p, obj_val(o), err);
}

static size_t mark_base(pk *p)
{
	return p->nmarks ? p->marks[p->nmarks - 1] : 0;
}

static int pop_mark(as_reader *r, pk *p, uint64_t pos, size_t *base, as_err *err)
{
	if (!p->nmarks)
		return perr(r, pos, err, "pickle opcode needs a MARK but none is set");
	*base = p->marks[--p->nmarks];
	return 0;
}

static inline uint64_t str_hash(const char *b, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)b[i]) * 0x100000001b3ULL;
	return h;
}

/* The interned string with these bytes, or NULL after adding v (given) to the table.
 * Short strings repeat in a snapshot: keys, actions, 'N/A' in every trace entry. */
static pv *intern(pk *p, const char *b, size_t n, pv *v)
{
	if (p->strcount * 2 >= p->strcap) {
		size_t nc = p->strcap ? p->strcap * 2 : 1024;
		pv **t = xcalloc(nc, sizeof(pv *));
		for (size_t i = 0; i < p->strcap; i++)
			if (p->strtab[i]) {
				size_t j = str_hash(p->strtab[i]->s, p->strtab[i]->n) & (nc - 1);
				while (t[j])
					j = (j + 1) & (nc - 1);
				t[j] = p->strtab[i];
			}
		free(p->strtab);
		p->bytes += (nc - p->strcap) * sizeof(pv *);
		p->strtab = t;
		p->strcap = nc;
	}
	size_t j = str_hash(b, n) & (p->strcap - 1);
	for (; p->strtab[j]; j = (j + 1) & (p->strcap - 1)) {
		pv *s = p->strtab[j];
		if (s->n == n) { /* short: compared here, not through a call */
			size_t i = 0;
			while (i < n && s->s[i] == b[i])
				i++;
			if (i == n)
				return s;
		}
	}
	if (v) {
		v->refs++;
		p->strtab[j] = v;
		p->strcount++;
	}
	return NULL;
}

static int read_string(as_reader *r, pk *p, uint64_t pos, size_t len, int kind, as_err *err)
{
	if (len > MAX_STRING)
		return perr(r, pos, err, "string of %zu bytes exceeds the reader's 1 MiB limit", len);
	if (len < INLINE_STR) {
		if (need(r, len, err))
			return -1;
		const char *b = (const char *)r->in.buf + r->in.pos;
		pv *v = kind == V_STR ? intern(p, b, len, NULL) : NULL;
		if (!v) {
			v = pv_new(p, kind, pos);
			v->s = v->inl;
			memcpy(v->s, b, len);
			v->s[len] = 0;
			v->n = len;
			if (kind == V_STR)
				intern(p, b, len, v);
		}
		r->in.pos += len;
		val sv;
		sv.kp = MKKP(kind == V_STR ? V_STR | V_IMMORTAL : kind, pos);
		sv.u.p = v;
		return push(r, p, sv, err);
	}
	pv *v = pv_new(p, kind, pos);
	v->s = xmalloc(len + 1);
	p->bytes += len + 1;
	size_t got = 0;
	while (got < len) {
		size_t chunk = len - got > 65536 ? 65536 : len - got;
		if (need(r, chunk, err)) {
			v->n = len;
			pv_unref(p, v);
			return -1;
		}
		memcpy(v->s + got, r->in.buf + r->in.pos, chunk);
		r->in.pos += chunk;
		got += chunk;
	}
	v->s[len] = 0;
	v->n = len;
	return push_obj(r, p, v, err);
}

static int new_list_role(as_reader *r, pk *p, pv *l, as_err *err)
{
	if (top_key(p, "device_traces")) {
		if (p->traces) {
			/* Python keeps a duplicate key's last value; this one can still be followed unless
			 * the first has already been replayed. */
			if (history_entries(p))
				return perr(r, l->pos, err, "a second 'device_traces' key after a replayed one: Python "
					"keeps the last, which a streaming reader cannot (remove the duplicate)");
			pv_unref(p, p->traces);
		}
		p->ndevtraces = 0;
		l->role = ROLE_TRACES;
		l->refs++;
		p->traces = l;
	} else if (top_key(p, "segments")) {
		if (p->seglist)
			pv_unref(p, p->seglist);
		drop_segments(p, &r->meta);
		l->role = ROLE_SEGMENTS;
		l->refs++;
		p->seglist = l;
	} else if (p->traces) {
		/* A device's list is an item of the device_traces list: directly above it (APPEND), or
		 * above the MARK that follows it with earlier device lists in between (APPENDS). */
		size_t i = p->sp;
		while (i > 0 && VKIND(p->stack[i - 1]) == V_LIST && p->stack[i - 1].u.p->role == ROLE_DEVTRACE)
			i--;
		if (i > 0 && VKIND(p->stack[i - 1]) == V_LIST && p->stack[i - 1].u.p == p->traces &&
		    (mark_base(p) == i || (mark_base(p) < i && p->sp == i))) {
			if (new_device(r, p, l, err))
				return -1;
		}
	}
	return 0;
}

/* A memo slot holds one word: 0 (empty), an object's address (| 1: an interned string, not
 * counted), or (i << 2 | 2): scalar i of p->scal. Eight bytes a slot: the writer memoizes every
 * trace entry's 'N/A' string, so the memo grows with the trace. A value fetched from the memo
 * carries the byte offset of the object (for an interned string, of its first occurrence). */
#define MW_INTERNED 1u
#define MW_SCALAR 2u

static uintptr_t memo_word(pk *p, val v)
{
	if (VKIND(v) >= V_OBJ)
		return (uintptr_t)v.u.p | ((v.kp & V_IMMORTAL) ? MW_INTERNED : 0);
	if (!v.kp || VKIND(v) == V_GHOST)
		return 0; /* a trace entry replayed as read: never fetched */
	if (p->nscal == p->capscal) {
		size_t nc = p->capscal ? p->capscal * 2 : 64;
		p->scal = xrealloc(p->scal, nc * sizeof(val));
		p->bytes += (nc - p->capscal) * sizeof(val);
		p->capscal = nc;
	}
	p->scal[p->nscal] = v;
	return (uintptr_t)p->nscal++ << 2 | MW_SCALAR;
}

static inline val word_val(const pk *p, uintptr_t w)
{
	if ((w & 3) == MW_SCALAR)
		return p->scal[w >> 2];
	pv *o = (pv *)(w & ~(uintptr_t)3);
	val v;
	v.kp = MKKP(o->kind | ((w & MW_INTERNED) ? V_IMMORTAL : 0), o->pos);
	v.u.p = o;
	return v;
}

/* Drops the reference a memo word holds (counted objects only). */
static inline void word_drop(pk *p, uintptr_t w)
{
	if (w && !(w & 3))
		pv_unref(p, (pv *)w);
}

/* Makes slot idx of the flat memo valid: the slots up to it are cleared as they are first reached,
 * so a grown array costs pages only as far as the pickle's indices go. */
static inline void memo_touch(pk *p, uint64_t idx)
{
	if (idx >= p->memohw) {
		memset(p->memo + p->memohw, 0, (idx + 1 - p->memohw) * sizeof(uintptr_t));
		p->memohw = idx + 1;
	}
}

/* A packed page of the flat memo. The writer memoizes every trace entry's 'N/A' string (a new
 * object each time) and the entry's dict, which leaves the memo when it is replayed: so a page the
 * writer has passed holds empty slots and one interned string. Such a page is packed into a bitmap
 * of its set slots and that word, and its memory given back (MADV_DONTNEED: it reads as zeros): 8
 * bytes a slot become 1 bit, and the memo no longer grows with the trace (a 2.5M-event snapshot:
 * 60 MB -> 1 MB). A GET of a packed slot takes the slow path (memo_at); a PUT or a clear there
 * unpacks the page first. Pages holding anything else (counted objects, scalars, two strings) stay. */
typedef struct mzpage {
	uint64_t *bits;  /* MEMO_PAGE bits: the slot holds word; NULL: not packed */
	uintptr_t word;
} mzpage;

static inline int memo_packed(const pk *p, uint64_t idx)
{
	return idx / MEMO_PAGE < p->mzcap && p->mz[idx / MEMO_PAGE].bits;
}

/* Whether a PUT at idx fills an empty slot of the flat memo (the fast path's own case). */
static inline int memo_fresh(const pk *p, uint64_t idx)
{
	return idx < MAX_MEMO && idx < p->memocap && (idx >= p->memohw || (!p->memo[idx] && !memo_packed(p, idx)));
}

static uintptr_t memo_at(const pk *p, uint64_t idx)
{
	if (idx < p->memohw && p->memo[idx])
		return p->memo[idx];
	if (idx < p->memohw && memo_packed(p, idx)) {
		const mzpage *z = &p->mz[idx / MEMO_PAGE];
		size_t i = idx % MEMO_PAGE;
		return (z->bits[i / 64] >> (i % 64)) & 1 ? z->word : 0;
	}
	return p->memo_sparse.count ? (uintptr_t)idmap_get(&p->memo_sparse, idx) : 0;
}

/* Grows the flat memo to cover idx (doubling). Up to MEMO_MAP_AT slots it is a heap array (on the
 * heap's huge pages: a small snapshot's memo costs no page faults of its own); beyond, it moves to a
 * reservation of MAX_MEMO slots, whose pages memo_pack can give back. */
#define MEMO_MAP_AT ((size_t)1 << 19) /* 4 MiB of slots */
static void memo_grow(pk *p, uint64_t idx)
{
	size_t nc = p->memocap ? p->memocap : 1024;
	while (nc <= idx)
		nc *= 2;
	if (nc <= MEMO_MAP_AT) {
		p->memo = xrealloc(p->memo, nc * sizeof(uintptr_t));
	} else if (!p->memo_mapped) {
		void *m = mmap(NULL, (size_t)MAX_MEMO * sizeof(uintptr_t), PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED) {
			p->memo = xrealloc(p->memo, nc * sizeof(uintptr_t)); /* (nothing packed then) */
		} else {
			if (p->memohw)
				memcpy(m, p->memo, p->memohw * sizeof(uintptr_t));
			free(p->memo);
			p->memo = m;
			p->memo_mapped = 1;
		}
	}
	p->bytes += (nc - p->memocap) * sizeof(uintptr_t);
	p->memocap = nc;
}

/* Restores a packed page's slots (a PUT or a clear there: never in a snapshot as written). */
static void memo_unpack(pk *p, uint64_t idx)
{
	mzpage *z = &p->mz[idx / MEMO_PAGE];
	uintptr_t *w = p->memo + idx / MEMO_PAGE * MEMO_PAGE;
	for (size_t i = 0; i < MEMO_PAGE; i++)
		if ((z->bits[i / 64] >> (i % 64)) & 1)
			w[i] = z->word;
	free(z->bits);
	z->bits = NULL;
	p->bytes -= MEMO_PAGE / 8;
}

/* Packs the pages of the flat memo that the pickle has left MEMO_LAG pages behind, where each holds
 * only empty slots and one interned string (see mzpage). */
static void memo_pack(pk *p)
{
	if (!p->memo_mapped)
		return;
	while ((p->mzdone + MEMO_LAG + 1) * MEMO_PAGE <= p->memohw) {
		size_t pg = p->mzdone++;
		uintptr_t *w = p->memo + pg * MEMO_PAGE, one = 0;
		size_t i;
		for (i = 0; i < MEMO_PAGE; i++) {
			if (!w[i])
				continue;
			if ((w[i] & 3) != MW_INTERNED || (one && w[i] != one))
				break;
			one = w[i];
		}
		if (i < MEMO_PAGE || !one)
			continue;
		if (pg >= p->mzcap) {
			size_t nc = p->mzcap ? p->mzcap : 64;
			while (nc <= pg)
				nc *= 2;
			p->mz = xrealloc(p->mz, nc * sizeof(mzpage));
			memset(p->mz + p->mzcap, 0, (nc - p->mzcap) * sizeof(mzpage));
			p->mzcap = nc;
		}
		mzpage *z = &p->mz[pg];
		z->bits = xcalloc(MEMO_PAGE / 64, sizeof(uint64_t));
		z->word = one;
		for (i = 0; i < MEMO_PAGE; i++)
			if (w[i])
				z->bits[i / 64] |= (uint64_t)1 << (i % 64);
		p->bytes += MEMO_PAGE / 8;
		if (madvise(w, MEMO_PAGE * sizeof(uintptr_t), MADV_DONTNEED)) {
			free(z->bits); /* (kept as it is) */
			z->bits = NULL;
			p->bytes -= MEMO_PAGE / 8;
		}
	}
}

/* Sets (w: one reference moves in) or clears (w == 0) memo slot idx. */
static void memo_set(pk *p, uint64_t idx, uintptr_t w)
{
	uintptr_t old = 0;
	if (p->memo_sparse.count && (old = (uintptr_t)idmap_del(&p->memo_sparse, idx)))
		p->bytes -= MEMO_SLOT;
	if (idx >= p->memocap && w && idx < 2 * p->nputs + MEMO_DENSE)
		memo_grow(p, idx);
	if (idx < p->memocap) {
		memo_touch(p, idx);
		if (memo_packed(p, idx))
			memo_unpack(p, idx);
		if (p->memo[idx])
			old = p->memo[idx];
		p->memo[idx] = w;
	} else if (w) {
		idmap_put(&p->memo_sparse, idx, (void *)w);
		p->bytes += MEMO_SLOT;
	}
	word_drop(p, old);
}

static int memo_put(pk *p, uint64_t idx)
{
	if (idx >= MAX_MEMO)
		return -1;
	/* The memo shares values (a reference each), so a GET costs nothing however large the value;
	 * containers are shared too, as Python does (frames shared between trace entries), with cycles
	 * refused (see cycle()). A trace entry leaves the memo when it is turned into events. */
	val v = p->stack[p->sp - 1];
	p->nputs++;
	if (VOBJ(v)) {
		v.u.p->refs++;
		v.u.p->memo_at = idx + 1;
	}
	uintptr_t w = memo_word(p, v);
	if (idx < p->memocap && (idx >= p->memohw || (!p->memo[idx] && !memo_packed(p, idx))) && !p->memo_sparse.count) {
		memo_touch(p, idx);
		p->memo[idx] = w; /* the common case: a fresh index in the flat array */
		return 0;
	}
	memo_set(p, idx, w);
	return 0;
}

static int memo_get(as_reader *r, pk *p, uint64_t idx, uint64_t pos, as_err *err)
{
	uintptr_t w = memo_at(p, idx);
	if (!w)
		return perr(r, pos, err, "pickle memo index %" PRIu64 " is undefined (or a trace entry already "
			"replayed, which snapshots do not refer to again)", idx);
	val v = word_val(p, w);
	if (VOBJ(v))
		v.u.p->refs++;
	return push(r, p, v, err);
}

/* A trace entry or segment turned into events leaves the memo, so memory does not grow with the
 * trace (the snapshot writer memoizes every dict). */
static void memo_forget(pk *p, pv *v)
{
	if (v->memo_at && v->refs > 1 && memo_at(p, v->memo_at - 1) == (uintptr_t)v)
		memo_set(p, v->memo_at - 1, 0);
}

static const char *opname(int op)
{
	switch (op) {
	case 'c': return "GLOBAL";
	case 0x93: return "STACK_GLOBAL";
	case 'R': return "REDUCE";
	case 'b': return "BUILD";
	case 'i': return "INST";
	case 'o': return "OBJ";
	case 0x81: return "NEWOBJ";
	case 0x92: return "NEWOBJ_EX";
	case 'P': case 'Q': return "PERSID";
	case 0x82: case 0x83: case 0x84: return "EXT";
	default: return NULL;
	}
}

/* ---- the trace-entry fast path ---------------------------------------------------------
 * The snapshot writer pickles each trace entry as EMPTY_DICT, MEMOIZE, MARK, key/value pairs of
 * memo GETs, strings and numbers (strings memoized as they first appear), SETITEMS, in batches of
 * a MARK, up to 1000 entries and APPENDS to its device's list. When such an entry lies whole in
 * the buffer, it is read here in one pass, keeping only the fields replayed, and turned into events
 * at once (not when its batch is appended); no dict is built, and a V_GHOST stands in the list's
 * batch on the stack until APPENDS. The memo gets what the opcodes put there, but for the entry
 * itself: the writer never fetches an entry again, and a pickle that does is refused (as one that
 * fetches an entry already appended always was). Anything else - another opcode (a frames list),
 * a container from the memo, an index that is not a fresh slot of the flat memo, an entry with a
 * bad field, an entry after one the opcode loop built in the same batch - is left to the opcode
 * loop, with nothing changed but strings interned: it then reports the same errors as before. */
#define FAST_PUTS 32
#define FAST_OBJS 32

static inline uint64_t le32(const unsigned char *c)
{
	return (uint64_t)c[0] | (uint64_t)c[1] << 8 | (uint64_t)c[2] << 16 | (uint64_t)c[3] << 24;
}

static int fast_entry(as_reader *r, pk *p, pv *list, as_err *err)
{
	as_input *in = &r->in;
	if (in->len - in->pos < 4096 && !in->eof) {
		as_input_fill(in, 4096, err); /* the entry whole in the buffer (the opcode loop sees any read error) */
		if (in->error)
			return 0;
	}
	const unsigned char *b = in->buf, *c = b + in->pos, *e = b + in->len;
	uint64_t off = in->offset;
	val puts_v[FAST_PUTS];
	uint64_t puts_i[FAST_PUTS];
	pv *objs[FAST_OBJS];
	int np = 0, nobj = 0, nv = 0, ok = 0, kid = 0, poolerr = 0;
	val cur, f[K_POOL + 1]; /* f[K_ACTION..K_POOL]: the last value of each key read */
	unsigned have = 0;
	uint64_t dict_idx = UINT64_MAX, next = p->memo_next;
	if (p->sp >= p->scap || p->memo_sparse.count || p->bytes + 65536 > p->max_bytes || e - c < 24)
		return 0;
	/* the first entry's keys date the writer (pyversion.c); noted once it is read whole */
	const int first = !(r->meta.pyfields & AS_PF_ENTRY);
	uint32_t pyf = 0;
	/* room for the entry's MEMOIZEs (the array grows as a PUT there would make it grow) */
	if (p->memo_next + FAST_PUTS >= p->memocap && p->memo_next + FAST_PUTS < 2 * p->nputs + MEMO_DENSE &&
	    p->memo_next + FAST_PUTS < MAX_MEMO)
		memo_grow(p, p->memo_next + FAST_PUTS);
	uint64_t dpos = off + (uint64_t)(c - b);
	const uintptr_t *memo = p->memo;
	const size_t memohw = p->memohw;
	c++; /* '}' */
	if (*c == 0x94) {
		dict_idx = next++;
		c++;
	} else if (*c == 'q') {
		dict_idx = c[1];
		c += 2;
	} else if (*c == 'r') {
		dict_idx = le32(c + 1);
		c += 5;
	}
	if (dict_idx != UINT64_MAX && !memo_fresh(p, dict_idx))
		return 0;
	if (*c == 0x95)
		c += 9;
	if (*c++ != '(')
		return 0;
	for (;;) {
		if (e - c < 24)
			goto out;
		uint64_t pos = off + (uint64_t)(c - b);
		int op = *c++;
		uint64_t idx;
		switch (op) {
		case 'u':
			goto done;
		case 0x95: /* FRAME: the pickler's framing (protocol 4), anywhere between opcodes */
			c += 8;
			continue;
		case 'h': case 'j': {
			if (op == 'h') {
				idx = *c++;
			} else {
				idx = le32(c);
				c += 4;
			}
			int k = np - 1;
			while (k >= 0 && puts_i[k] != idx)
				k--;
			if (k >= 0)
				cur = puts_v[k];
			else if (idx < memohw && memo[idx] && (cur = word_val(p, memo[idx]), VKIND(cur) < V_TUPLE))
				;
			else
				goto out; /* undefined or a container: the opcode loop decides */
			break;
		}
		case 0x8c: case 'X': {
			size_t len;
			if (op == 0x8c) {
				len = *c++;
			} else {
				len = le32(c);
				c += 4;
			}
			if (len > MAX_STRING || (size_t)(e - c) < len + 24)
				goto out;
			if (len < INLINE_STR) {
				pv *s = intern(p, (const char *)c, len, NULL);
				if (!s) {
					s = pv_new(p, V_STR, pos);
					s->s = s->inl;
					memcpy(s->s, c, len);
					s->s[len] = 0;
					s->n = len;
					intern(p, (const char *)c, len, s);
				}
				cur.kp = MKKP(V_STR | V_IMMORTAL, pos);
				cur.u.p = s;
			} else {
				if (nobj == FAST_OBJS)
					goto out;
				pv *s = pv_new(p, V_STR, pos);
				s->s = xmalloc(len + 1);
				p->bytes += len + 1;
				memcpy(s->s, c, len);
				s->s[len] = 0;
				s->n = len;
				objs[nobj++] = s;
				cur = obj_val(s);
			}
			c += len;
			break;
		}
		case 'K':
			cur.kp = MKKP(V_INT, pos);
			cur.u.i = *c++;
			break;
		case 'M':
			cur.kp = MKKP(V_INT, pos);
			cur.u.i = (int64_t)((uint64_t)c[0] | (uint64_t)c[1] << 8);
			c += 2;
			break;
		case 'J':
			cur.kp = MKKP(V_INT, pos);
			cur.u.i = (int32_t)(uint32_t)le32(c);
			c += 4;
			break;
		case 0x8a: {
			unsigned n = *c++;
			if (n > 8)
				goto out;
			uint64_t u = 0; /* little-endian, n bytes (the buffer holds 8 more: one load) */
			for (unsigned i = 0; i < 8; i++)
				u |= (uint64_t)c[i] << (8 * i);
			if (n < 8)
				u = n ? (u & ((1ULL << (8 * n)) - 1)) : 0;
			if (n && n < 8 && (u >> (8 * n - 1)) & 1)
				u |= ~0ULL << (8 * n);
			c += n;
			cur.kp = MKKP(V_INT, pos);
			cur.u.i = (int64_t)u;
			break;
		}
		case 'N':
			cur.kp = MKKP(V_NONE, pos);
			cur.u.i = 0;
			break;
		case 0x88: case 0x89:
			cur.kp = MKKP(V_BOOL, pos);
			cur.u.i = op == 0x88;
			break;
		case 'G': {
			uint64_t u = 0;
			for (int i = 0; i < 8; i++)
				u = (u << 8) | c[i];
			c += 8;
			cur.kp = MKKP(V_FLOAT, pos);
			memcpy(&cur.u.f, &u, 8);
			break;
		}
		case 0x94: case 'q': case 'r':
			/* memoizes the value just read (the stack's top); not the dict itself */
			if (!nv || np == FAST_PUTS)
				goto out;
			if (op == 0x94) {
				idx = next++;
			} else if (op == 'q') {
				idx = *c++;
			} else {
				idx = le32(c);
				c += 4;
			}
			if (!memo_fresh(p, idx) || idx == dict_idx)
				goto out;
			for (int k = 0; k < np; k++)
				if (puts_i[k] == idx)
					goto out;
			puts_i[np] = idx;
			puts_v[np++] = cur;
			continue;
		default:
			goto out;
		}
		/* a key, then its value */
		if (!(nv++ & 1)) {
			kid = VKIND(cur) == V_STR ? key_id(cur.u.p) : 0;
			if (first && kid)
				pyf |= as_pyver_bit(AS_PF_IN_ENTRY, cur.u.p->s);
		} else if (kid > K_OTHER) {
			f[kid] = cur;
			have |= 1u << kid;
		}
	}
done:
	/* an entry the writer has finished: its batch goes on (another entry, or APPENDS) */
	if (nv % 2 || e - c < 10 || (*c != '}' && *c != 'e' && (*c != 0x95 || (c[9] != '}' && c[9] != 'e'))))
		goto out;
	rec x;
	int code = entry_fields(have & 1u << K_ACTION ? &f[K_ACTION] : NULL, have & 1u << K_SIZE ? &f[K_SIZE] : NULL,
		have & 1u << K_ADDR ? &f[K_ADDR] : NULL, have & 1u << K_STREAM ? &f[K_STREAM] : NULL,
		have & 1u << K_TIME ? &f[K_TIME] : NULL, &x);
	if (code != EF_OK && code != EF_SKIP)
		goto out; /* the opcode loop builds it and says what is wrong when its batch is appended */
	ok = 1;
	/* the pool now, while the metadata string is held */
	if (code == EF_OK && (have & (1u << K_META | 1u << K_POOL)))
		poolerr = entry_pool(p, &x, have & 1u << K_META && p->pools_mode != POOLS_INFER ? &f[K_META] : NULL,
			have & 1u << K_POOL ? &f[K_POOL] : NULL);
	r->meta.named_pools = (uint32_t)p->npools;
	if (first)
		r->meta.pyfields |= pyf | AS_PF_SNAPSHOT | AS_PF_ENTRY;
out:
	if (!ok) {
		for (int i = 0; i < nobj; i++)
			pv_unref(p, objs[i]);
		return 0;
	}
	/* what the opcodes leave in the memo */
	for (int k = 0; k < np; k++) {
		val v = puts_v[k];
		if (VOBJ(v)) {
			v.u.p->refs++;
			v.u.p->memo_at = puts_i[k] + 1;
		}
		memo_touch(p, puts_i[k]);
		p->memo[puts_i[k]] = memo_word(p, v);
	}
	p->nputs += (uint64_t)np + (dict_idx != UINT64_MAX);
	p->memo_next = next;
	for (int i = 0; i < nobj; i++)
		pv_unref(p, objs[i]);
	in->pos = (size_t)(c - b);
	val g;
	g.kp = MKKP(V_GHOST, dpos);
	g.u.i = list->dev;
	p->stack[p->sp++] = g;
	p->nghosts++;
	/* what APPENDS would do with the dict */
	p->dev_entries[list->dev]++;
	if (p->device < 0 && p->want_device < 0)
		p->device = list->dev;
	if (list->dev != p->device) {
		p->other_device_entries++;
		return 1;
	}
	x.pos = dpos;
	x.index = p->nentries++;
	if (poolerr)
		return perr(r, dpos, err, "trace entry %" PRIu64 ": more than %u memory pools", x.index, AS_POOL_MAX);
	if (pools_entry(r, p, &x, code, err))
		return -1;
	if (code == EF_OK && !p->prepass && translate(r, p, &x, err))
		return -1;
	return 1;
}

/* Whether values from..from+n of the stack hold an entry already replayed (V_GHOST) that goes
 * anywhere but into its device's list (target: the container they go into). */
static int ghost_misplaced(const pk *p, size_t from, size_t n, const pv *target)
{
	if (!p->nghosts)
		return 0;
	for (size_t i = from; i < from + n; i++)
		if (VKIND(p->stack[i]) == V_GHOST &&
		    (!target || target->kind != V_LIST || target->role != ROLE_DEVTRACE || target->dev != p->stack[i].u.i))
			return 1;
	return 0;
}

static int ghost_err(as_reader *r, const pk *p, uint64_t pos, as_err *err)
{
	(void)p;
	return perr(r, pos, err, "pickle drops or moves a trace entry of a device's list after reading it (entries are "
		"replayed as they are read; a PyTorch snapshot appends each one to its list once)");
}

/* Runs opcodes until the event queue has something or the pickle ends. */
static int run_vm(as_reader *r, pk *p, as_err *err)
{
	as_input *in = &r->in;
	while (!p->qlen && !p->stopped) {
		/* every opcode's fixed-size argument (at most 8 bytes) is then in the buffer, but at the end */
		if (in->len - in->pos < 16 && need(r, 1, err))
			return -1;
		uint64_t pos = in->offset + in->pos;
		if (p->bytes > p->max_bytes)
			return perr(r, pos, err, "pickle values take more than %" PRIu64 " MiB at once (reader memory cap)",
				p->max_bytes >> 20);
		int op = in->buf[in->pos++];
		pv *v;
		size_t base = 0;
		uint64_t n;
		switch (op) {
		case 0x80: /* PROTO */
			if (need(r, 1, err))
				return -1;
			n = rd_le(r, 1);
			if (n < 2 || n > 5)
				return perr(r, pos, err, "unsupported pickle protocol %" PRIu64, n);
			break;
		case 0x95: /* FRAME */
			if (need(r, 8, err))
				return -1;
			rd_le(r, 8);
			break;
		case '.': /* STOP */
			if (p->sp != 1 || p->nmarks)
				return perr(r, pos, err, "pickle STOP with %zu values and %zu marks left (corrupt pickle)", p->sp, p->nmarks);
			if (VKIND(p->stack[0]) != V_DICT)
				return perr(r, pos, err, "pickle is not a dict: not a PyTorch memory snapshot");
			v = p->stack[0].u.p;
			if (!dict_get(v, "device_traces") && !dict_get(v, "segments"))
				return perr(r, pos, err, "pickle has neither 'segments' nor 'device_traces': not a PyTorch memory snapshot");
			if (check_history(r, p, v, pos, err))
				return -1;
			if (flush_freereq(r, p, err))
				return -1;
			flush_run(p, -1, &r->meta);
			finish_top(r, p, v);
			p->stopped = 1;
			break;
		case '(': /* MARK */
			if (p->nmarks == MAX_MARKS)
				return perr(r, pos, err, "pickle nesting deeper than %d (reader limit)", MAX_MARKS);
			p->marks[p->nmarks++] = p->sp;
			break;
		case '}': /* EMPTY_DICT */
			if (p->nmarks && (base = p->marks[p->nmarks - 1]) && VKIND(p->stack[base - 1]) == V_LIST &&
			    p->stack[base - 1].u.p->role == ROLE_DEVTRACE && p->sp - base == p->nghosts) {
				in->pos--;
				int fr = fast_entry(r, p, p->stack[base - 1].u.p, err);
				if (fr < 0)
					return -1;
				if (fr)
					break;
				in->pos++;
			}
			if (push_obj(r, p, pv_new(p, V_DICT, pos), err))
				return -1;
			break;
		case ']': /* EMPTY_LIST */
			v = pv_new(p, V_LIST, pos);
			if (new_list_role(r, p, v, err)) {
				pv_unref(p, v);
				return -1;
			}
			if (push_obj(r, p, v, err))
				return -1;
			break;
		case ')': /* EMPTY_TUPLE */
			if (push_obj(r, p, pv_new(p, V_TUPLE, pos), err))
				return -1;
			break;
		case 'N':
			if (push_scalar(r, p, V_NONE, pos, 0, err))
				return -1;
			break;
		case 0x88: case 0x89: /* NEWTRUE, NEWFALSE */
			if (push_scalar(r, p, V_BOOL, pos, op == 0x88, err))
				return -1;
			break;
		case 'K': /* BININT1 */
			if (need(r, 1, err))
				return -1;
			n = in->buf[in->pos++];
			if (push_scalar(r, p, V_INT, pos, (int64_t)n, err))
				return -1;
			break;
		case 'M': case 'J': /* BININT2, BININT */
			if (need(r, op == 'M' ? 2 : 4, err))
				return -1;
			if (push_scalar(r, p, V_INT, pos, op == 'J' ? (int32_t)(uint32_t)rd_le(r, 4) : (int64_t)rd_le(r, 2), err))
				return -1;
			break;
		case 0x8a: case 0x8b: { /* LONG1, LONG4 */
			if (need(r, op == 0x8a ? 1 : 4, err))
				return -1;
			n = rd_le(r, op == 0x8a ? 1 : 4);
			if (n > 8)
				return perr(r, pos, err, "integer of %" PRIu64 " bytes does not fit 64 bits", n);
			if (need(r, (size_t)n, err))
				return -1;
			uint64_t u = rd_le(r, (int)n);
			if (n && n < 8 && (u >> (8 * n - 1)) & 1)
				u |= ~0ULL << (8 * n); /* sign-extend */
			if (push_scalar(r, p, V_INT, pos, (int64_t)u, err))
				return -1;
			break;
		}
		case 'G': { /* BINFLOAT, big-endian */
			if (need(r, 8, err))
				return -1;
			uint64_t u = 0;
			for (int i = 0; i < 8; i++)
				u = (u << 8) | in->buf[in->pos + (size_t)i];
			in->pos += 8;
			val f;
			f.kp = MKKP(V_FLOAT, pos);
			memcpy(&f.u.f, &u, 8);
			if (push(r, p, f, err))
				return -1;
			break;
		}
		case 0x8c: case 'X': case 0x8d: /* SHORT_BINUNICODE, BINUNICODE, BINUNICODE8 */
		case 'C': case 'B': case 0x8e: { /* SHORT_BINBYTES, BINBYTES, BINBYTES8 */
			int w = (op == 0x8c || op == 'C') ? 1 : (op == 'X' || op == 'B') ? 4 : 8;
			if (need(r, (size_t)w, err))
				return -1;
			n = rd_le(r, w);
			if (read_string(r, p, pos, n > SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)n,
					(op == 'C' || op == 'B' || op == 0x8e) ? V_BYTES : V_STR, err))
				return -1;
			break;
		}
		case 0x96: /* BYTEARRAY8 (protocol 5): an in-band bytearray, kept as bytes */
			if (need(r, 8, err))
				return -1;
			n = rd_le(r, 8);
			if (read_string(r, p, pos, n > SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)n, V_BYTES, err))
				return -1;
			break;
		case 0x97: case 0x98: /* NEXT_BUFFER, READONLY_BUFFER (protocol 5) */
			return perr(r, pos, err, "pickle opcode %s (0x%02x) needs an out-of-band buffer (protocol 5 "
				"written with a buffer_callback); the buffers are not in the file, and a snapshot written "
				"by pickle.dump has none", op == 0x97 ? "NEXT_BUFFER" : "READONLY_BUFFER", op);
		case 0x94: /* MEMOIZE */
			if (!p->sp)
				return perr(r, pos, err, "MEMOIZE on an empty stack");
			if (memo_put(p, p->memo_next++))
				return perr(r, pos, err, "pickle memo grows beyond the reader limit");
			break;
		case 'q': case 'r': /* BINPUT, LONG_BINPUT */
			if (need(r, op == 'q' ? 1 : 4, err))
				return -1;
			n = rd_le(r, op == 'q' ? 1 : 4);
			if (!p->sp)
				return perr(r, pos, err, "PUT on an empty stack");
			if (memo_put(p, n))
				return perr(r, pos, err, "pickle memo index %" PRIu64 " beyond the reader limit", n);
			break;
		case 'h': case 'j': /* BINGET, LONG_BINGET */
			if (need(r, op == 'h' ? 1 : 4, err))
				return -1;
			n = rd_le(r, op == 'h' ? 1 : 4);
			if (memo_get(r, p, n, pos, err))
				return -1;
			break;
		case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
			size_t k = (size_t)(op - 0x84);
			if (p->sp < k + mark_base(p))
				return perr(r, pos, err, "TUPLE%zu with too few values on the stack", k);
			if (too_deep(p, p->sp - k, k))
				return perr(r, pos, err, "pickle nests containers deeper than %d (reader limit)", MAX_DEPTH);
			if (ghost_misplaced(p, p->sp - k, k, NULL))
				return ghost_err(r, p, pos, err);
			v = pv_new(p, V_TUPLE, pos);
			for (size_t i = p->sp - k; i < p->sp; i++)
				pv_add(p, v, p->stack[i]);
			p->sp -= k;
			if (push_obj(r, p, v, err))
				return -1;
			break;
		}
		case 't': /* TUPLE */
			if (pop_mark(r, p, pos, &base, err))
				return -1;
			if (too_deep(p, base, p->sp - base))
				return perr(r, pos, err, "pickle nests containers deeper than %d (reader limit)", MAX_DEPTH);
			if (ghost_misplaced(p, base, p->sp - base, NULL))
				return ghost_err(r, p, pos, err);
			v = pv_new(p, V_TUPLE, pos);
			for (size_t i = base; i < p->sp; i++)
				pv_add(p, v, p->stack[i]);
			p->sp = base;
			if (push_obj(r, p, v, err))
				return -1;
			break;
		case 'a': /* APPEND */
			if (p->sp < 2 + mark_base(p) || VKIND(p->stack[p->sp - 2]) != V_LIST)
				return perr(r, pos, err, "APPEND without a list");
			if (cycle(p, p->stack[p->sp - 2].u.p, p->sp - 1, 1))
				return perr(r, pos, err, "pickle changes a list already placed in a container, or puts it in "
					"itself (self-referencing data, not supported)");
			if (too_deep(p, p->sp - 1, 1))
				return perr(r, pos, err, "pickle nests containers deeper than %d (reader limit)", MAX_DEPTH);
			if (ghost_misplaced(p, p->sp - 1, 1, p->stack[p->sp - 2].u.p))
				return ghost_err(r, p, pos, err);
			p->sp--;
			if (append_items(r, p, p->stack[p->sp - 1].u.p, &p->stack[p->sp], 1, err))
				return -1;
			break;
		case 'e': /* APPENDS */
			if (pop_mark(r, p, pos, &base, err))
				return -1;
			if (base < 1 || VKIND(p->stack[base - 1]) != V_LIST)
				return perr(r, pos, err, "APPENDS without a list");
			if (cycle(p, p->stack[base - 1].u.p, base, p->sp - base))
				return perr(r, pos, err, "pickle changes a list already placed in a container, or puts it in "
					"itself (self-referencing data, not supported)");
			if (too_deep(p, base, p->sp - base))
				return perr(r, pos, err, "pickle nests containers deeper than %d (reader limit)", MAX_DEPTH);
			if (ghost_misplaced(p, base, p->sp - base, p->stack[base - 1].u.p))
				return ghost_err(r, p, pos, err);
			{
				size_t k = p->sp - base;
				p->sp = base;
				if (append_items(r, p, p->stack[base - 1].u.p, &p->stack[base], k, err))
					return -1;
			}
			break;
		case 's': /* SETITEM */
			if (p->sp < 3 + mark_base(p) || VKIND(p->stack[p->sp - 3]) != V_DICT)
				return perr(r, pos, err, "SETITEM without a dict");
			v = p->stack[p->sp - 3].u.p;
			if (cycle(p, v, p->sp - 2, 2))
				return perr(r, pos, err, "pickle changes a dict already placed in a container, or puts it in "
					"itself (self-referencing data, not supported)");
			if (too_deep(p, p->sp - 2, 2))
				return perr(r, pos, err, "pickle nests containers deeper than %d (reader limit)", MAX_DEPTH);
			if (ghost_misplaced(p, p->sp - 2, 2, v))
				return ghost_err(r, p, pos, err);
			pv_add(p, v, p->stack[p->sp - 2]);
			pv_add(p, v, p->stack[p->sp - 1]);
			p->sp -= 2;
			break;
		case 'u': /* SETITEMS */
			if (pop_mark(r, p, pos, &base, err))
				return -1;
			if (base < 1 || VKIND(p->stack[base - 1]) != V_DICT || (p->sp - base) % 2)
				return perr(r, pos, err, "SETITEMS without a dict or with an odd number of values");
			v = p->stack[base - 1].u.p;
			if (cycle(p, v, base, p->sp - base))
				return perr(r, pos, err, "pickle changes a dict already placed in a container, or puts it in "
					"itself (self-referencing data, not supported)");
			if (too_deep(p, base, p->sp - base))
				return perr(r, pos, err, "pickle nests containers deeper than %d (reader limit)", MAX_DEPTH);
			if (ghost_misplaced(p, base, p->sp - base, v))
				return ghost_err(r, p, pos, err);
			for (size_t i = base; i < p->sp; i++)
				pv_add(p, v, p->stack[i]);
			p->sp = base;
			break;
		case '0': /* POP */
			if (p->sp <= mark_base(p))
				return perr(r, pos, err, "POP on an empty stack");
			if (VKIND(p->stack[p->sp - 1]) == V_GHOST)
				return ghost_err(r, p, pos, err);
			val_drop(p, p->stack[--p->sp]);
			break;
		default: {
			const char *name = opname(op);
			if (name)
				return perr(r, pos, err, "pickle opcode %s (0x%02x) would call code; allocsim never executes "
					"code from a pickle, and PyTorch snapshots do not use it", name, op);
			return perr(r, pos, err, "unsupported pickle opcode 0x%02x", op);
		}
		}
	}
	return 0;
}

static int pickle_next(as_reader *r, as_event *ev, as_err *err)
{
	pk *p = r->priv;
	if (!p->qlen && run_vm(r, p, err))
		return -1;
	if (!p->qlen) {
		/* Anything after STOP is not part of the snapshot. */
		if (as_input_fill(&r->in, 1, err) > 0)
			return perr(r, as_input_tell(&r->in), err, "trailing data after the end of the pickle");
		if (r->in.error)
			return -1;
		return 0;
	}
	*ev = p->q[p->qhead++];
	p->qlen--;
	if (!p->qlen)
		p->qhead = 0;
	return 1;
}

static void pickle_close(as_reader *r)
{
	pk *p = r->priv;
	if (!p)
		return;
	for (size_t i = 0; i < p->sp; i++)
		val_drop(p, p->stack[i]);
	pv_unref(p, p->traces);
	pv_unref(p, p->seglist);
	free(p->stack);
	for (size_t i = 0; i < p->memohw; i++)
		word_drop(p, p->memo[i]); /* (a packed page's string is interned: nothing to drop) */
	if (p->memo_mapped)
		munmap(p->memo, (size_t)MAX_MEMO * sizeof(uintptr_t));
	else
		free(p->memo);
	for (size_t i = 0; i < p->mzcap; i++)
		free(p->mz[i].bits);
	free(p->mz);
	for (size_t i = 0; i < p->memo_sparse.cap; i++)
		if (idmap_live(&p->memo_sparse, i))
			word_drop(p, (uintptr_t)p->memo_sparse.vals[i]);
	free(p->scal);
	idmap_free(&p->memo_sparse);
	for (size_t i = 0; i < p->strcap; i++)
		if (p->strtab[i]) {
			p->bytes -= pv_bytes(p->strtab[i]);
			free(p->strtab[i]->items);
			free(p->strtab[i]);
		}
	free(p->strtab);
	while (p->pool) {
		pv *v = p->pool;
		p->pool = v->next;
		free(v->items);
		free(v);
	}
	idmap_free(&p->live);
	free(p->slot_id);
	free(p->slot_req);
	free(p->freeslots);
	free(p->q);
	free(p->run);
	free(p->pools);
	free(p->pranges);
	free(p->dead);
	free(p->dev_entries);
	free(p->seg_dev);
	as_sites_free(&p->sites);
	as_poolinfer_free(p->pinf);
	as_poolinfer_free(p->detect);
	free(p);
}
static const struct as_reader_ops pickle_ops = { "pytorch", pickle_next, pickle_close };

int as_pickle_open(as_reader *r, const as_reader_opts *o, as_err *err)
{
	pk *p = xcalloc(1, sizeof(*p));
	idmap_init(&p->memo_sparse);
	idmap_init(&p->live);
	p->want_segments = o->want_segments;
	p->keep_sites = o->keep_sites;
	p->max_bytes = o->max_bytes ? o->max_bytes : MAX_BYTES;
	p->want_device = o->has_device ? o->device : -1;
	p->any_device = o->any_device;
	p->device = p->want_device;
	p->prepass = o->pool_prepass;
	p->reread = o->pool_reread;
	if (p->prepass)
		p->pinf = as_poolinfer_new();
	const char *pm = getenv("ALLOCSIM_POOLS");
	if (pm && *pm && strcmp(pm, "auto")) {
		if (!strcmp(pm, "annotation"))
			p->pools_mode = POOLS_ANNOTATION;
		else if (!strcmp(pm, "infer"))
			p->pools_mode = POOLS_INFER;
		else {
			as_poolinfer_free(p->pinf);
			free(p);
			return as_fail(err, AS_EXIT_USAGE, "ALLOCSIM_POOLS='%.40s': must be auto, annotation or infer", pm);
		}
	}
	if (getenv("ALLOCSIM_POOLS_DEBUG")) /* each read of the file (tests/pools.sh counts them) */
		fprintf(stderr, "allocsim: pools: %s: read (%s)\n", r->in.path,
			p->prepass ? "the inference's first pass" : p->reread ? "again: private pools were released before its end" : "ordinary");
	r->priv = p;
	r->ops = &pickle_ops;
	r->pos_is_line = 0;
	r->slots_assigned = 1;
	snprintf(r->meta.format, sizeof r->meta.format, "pytorch");
	snprintf(r->meta.source, sizeof r->meta.source, "pytorch-snapshot");
	return 0;
}
