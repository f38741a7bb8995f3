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
 */
#include "trace.h"
#include "idmap.h"
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum pv_kind { PV_NONE, PV_BOOL, PV_INT, PV_FLOAT, PV_STR, PV_BYTES, PV_TUPLE, PV_LIST, PV_DICT };
enum pv_role { ROLE_NONE, ROLE_TRACES, ROLE_DEVTRACE, ROLE_SEGMENTS };

typedef struct pv {
	unsigned char kind, role;
	int dev;            /* ROLE_DEVTRACE: device ordinal */
	int64_t i;
	double f;
	char *s;            /* PV_STR/PV_BYTES, NUL-terminated */
	size_t n;           /* string length, or item count */
	size_t cap;
	struct pv **items;  /* tuple/list items; dict: key, value, key, value ... */
	uint64_t pos;       /* byte offset where the value starts */
} pv;

/* Limits that keep a hostile file from taking unbounded memory (documented in the man page). */
#define MAX_STACK   (4u << 20)   /* values on the stack */
#define MAX_MARKS   4096         /* nesting depth */
#define MAX_STRING  (1u << 20)   /* one string */
#define MAX_MEMO    (1u << 26)   /* memo index */
#define MAX_NODES   (4u << 20)   /* values alive at once (about 300 MiB) */

typedef struct rec {
	int action;
	uint64_t addr, size, stream, pos, index;
	int64_t time_us;
} rec;

enum { A_ALLOC, A_FREE_REQ, A_FREE_DONE, A_SEG_ALLOC, A_SEG_FREE, A_SEG_MAP, A_SEG_UNMAP, A_OOM, A_OTHER };

typedef struct pk {
	pv **stack;
	size_t sp, scap;
	size_t marks[MAX_MARKS];
	size_t nmarks;
	idmap memo;          /* index -> pv* (scalars and small tuples only) */
	uint64_t memo_next;  /* MEMOIZE's next index */
	int ndevtraces;
	int device;          /* which device trace to replay */
	int stopped;
	/* event output queue */
	as_event *q;
	size_t qhead, qlen, qcap;
	/* translation state */
	idmap live;          /* address -> id (uintptr) of blocks allocated in the trace */
	uint64_t next_id;
	uint64_t nentries, other_device_entries;
	int have_freereq;    /* a free_requested waiting to see if free_completed follows */
	rec freereq;
	rec *run;            /* a run of segment_free/segment_unmap entries not yet classified */
	size_t nrun, caprun;
	int want_segments;
} pk;


/* Values alive in the reader that is running (one reader runs at a time per thread). */
static _Thread_local uint64_t live_nodes;

static void pv_free(pv *v)
{
	if (!v)
		return;
	live_nodes--;
	for (size_t i = 0; i < v->n && v->items; i++)
		pv_free(v->items[i]);
	free(v->items);
	free(v->s);
	free(v);
}

static pv *pv_new(int kind, uint64_t pos)
{
	pv *v = xcalloc(1, sizeof(*v));
	live_nodes++;
	v->kind = (unsigned char)kind;
	v->pos = pos;
	return v;
}

static pv *pv_copy(const pv *v)
{
	pv *c = pv_new(v->kind, v->pos);
	c->i = v->i;
	c->f = v->f;
	c->n = v->n;
	if (v->s) {
		c->s = xmalloc(v->n + 1);
		memcpy(c->s, v->s, v->n + 1);
	}
	if (v->items) {
		c->items = xmalloc(v->n * sizeof(pv *));
		c->cap = v->n;
		for (size_t i = 0; i < v->n; i++)
			c->items[i] = pv_copy(v->items[i]);
	}
	return c;
}

static void pv_push_item(pv *c, pv *item)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 8;
		c->items = xrealloc(c->items, c->cap * sizeof(pv *));
	}
	c->items[c->n++] = item;
}

static const pv *dict_get(const pv *d, const char *key)
{
	if (!d || d->kind != PV_DICT)
		return NULL;
	for (size_t i = 0; i + 1 < d->n; i += 2)
		if (d->items[i]->kind == PV_STR && !strcmp(d->items[i]->s, key))
			return d->items[i + 1];
	return NULL;
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
	as_event *e = &p->q[p->qhead + p->qlen++];
	memset(e, 0, sizeof(*e));
	return e;
}

static void emit(pk *p, int type, const rec *x, uint64_t id, uint32_t flags)
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
	void *id = idmap_del(&p->live, x->addr);
	if (!id) {
		m->unmatched_frees++;
		m->history_truncated = 1;
		return;
	}
	emit(p, EV_FREE, x, (uint64_t)(uintptr_t)id, 0);
}

static void flush_run(pk *p, int next_action, as_meta *meta)
{
	if (!p->nrun)
		return;
	if (next_action != A_OOM) {
		int maybe = next_action == A_SEG_ALLOC || next_action == A_SEG_MAP;
		emit(p, EV_EMPTY_CACHE, &p->run[0], 0, maybe ? EVF_MAYBE : 0);
		if (!maybe)
			meta->inferred_empty_cache++;
	}
	for (size_t i = 0; i < p->nrun; i++) {
		if (p->run[i].action == A_FREE_DONE)
			free_done(p, &p->run[i], meta);
		else
			emit_seg(p, &p->run[i]);
	}
	p->nrun = 0;
}

static void flush_freereq(pk *p)
{
	if (!p->have_freereq)
		return;
	uint64_t id = (uint64_t)(uintptr_t)idmap_get(&p->live, p->freereq.addr);
	emit(p, EV_FREE_REQ, &p->freereq, id, 0);
	p->have_freereq = 0;
}

static int translate(as_reader *r, pk *p, const rec *x, as_err *err)
{
	as_meta *m = &r->meta;
	/* A free_requested directly followed by its free_completed becomes one EV_FREE. */
	if (p->have_freereq) {
		if (x->action == A_FREE_DONE && x->addr == p->freereq.addr) {
			p->have_freereq = 0;
			uint64_t id = (uint64_t)(uintptr_t)idmap_del(&p->live, x->addr);
			emit(p, EV_FREE, x, id, 0);
			return 0;
		}
		flush_freereq(p);
	}
	/* Releases, and completions of pending frees among them (a flush synchronizes between the
	 * garbage collector's releases and its own), are classified together. */
	if (x->action == A_SEG_FREE || x->action == A_SEG_UNMAP || (x->action == A_FREE_DONE && p->nrun)) {
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
		idmap_put(&p->live, x->addr, (void *)(uintptr_t)id);
		emit(p, EV_ALLOC, x, id, 0);
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
	case A_OOM:
		emit(p, EV_ALLOC, x, ++p->next_id, EVF_OOM);
		break;
	case A_SEG_ALLOC: case A_SEG_MAP:
		emit_seg(p, x);
		break;
	default:
		break;
	}
	return 0;
}

static int get_u64(const pv *d, const char *key, uint64_t *out)
{
	const pv *v = dict_get(d, key);
	if (!v || (v->kind != PV_INT && v->kind != PV_BOOL) || v->i < 0)
		return -1;
	*out = (uint64_t)v->i;
	return 0;
}

static int trace_entry(as_reader *r, pk *p, const pv *d, as_err *err)
{
	rec x;
	memset(&x, 0, sizeof x);
	x.pos = d->pos;
	x.index = p->nentries++;
	x.time_us = -1;
	const pv *a = dict_get(d, "action");
	if (!a || a->kind != PV_STR)
		return perr(r, d->pos, err, "trace entry %" PRIu64 " has no 'action' string", x.index);
	static const char *const names[] = { "alloc", "free_requested", "free_completed", "segment_alloc",
		"segment_free", "segment_map", "segment_unmap", "oom" };
	x.action = A_OTHER;
	for (int i = 0; i < 8; i++)
		if (!strcmp(a->s, names[i]))
			x.action = i;
	if (x.action == A_OTHER) {
		if (strcmp(a->s, "snapshot") && strcmp(a->s, "annotate") && strcmp(a->s, "user_defined"))
			return perr(r, d->pos, err, "trace entry %" PRIu64 ": unknown action '%.60s'", x.index, a->s);
		return 0;
	}
	if (get_u64(d, "size", &x.size))
		return perr(r, d->pos, err, "trace entry %" PRIu64 " (%s) has no valid 'size'", x.index, a->s);
	if (x.action != A_OOM && get_u64(d, "addr", &x.addr))
		return perr(r, d->pos, err, "trace entry %" PRIu64 " (%s) has no valid 'addr'", x.index, a->s);
	if (get_u64(d, "stream", &x.stream))
		x.stream = 0;
	uint64_t t;
	if (dict_get(d, "time_us")) { /* NaN, negative or fractional times are errors, not "no time" */
		if (get_u64(d, "time_us", &t) || t > INT64_MAX)
			return perr(r, d->pos, err, "trace entry %" PRIu64 " (%s) has an invalid 'time_us' (must be a whole number 0 .. 2^63-1)",
				x.index, a->s);
		x.time_us = (int64_t)t;
	}
	if ((x.action == A_ALLOC || x.action == A_OOM) && (x.size == 0 || x.size >= AS_MAX_REQUEST))
		return perr(r, d->pos, err, "trace entry %" PRIu64 ": %s of %" PRIu64 " bytes (must be 1 .. 2^60-1)",
			x.index, a->s, x.size);
	return translate(r, p, &x, err);
}

static int segment_entry(as_reader *r, pk *p, const pv *d, as_err *err)
{
	as_meta *m = &r->meta;
	uint64_t dev = 0;
	if (!p->want_segments)
		return 0;
	if (!get_u64(d, "device", &dev) && dev != (uint64_t)p->device)
		return 0;
	as_snap_segment s;
	memset(&s, 0, sizeof s);
	if (get_u64(d, "address", &s.addr) || get_u64(d, "total_size", &s.total_size))
		return perr(r, d->pos, err, "segment without 'address'/'total_size'");
	get_u64(d, "stream", &s.stream);
	const pv *t = dict_get(d, "segment_type");
	s.is_small = t && t->kind == PV_STR && !strcmp(t->s, "small");
	t = dict_get(d, "is_expandable");
	s.is_expandable = t && t->kind == PV_BOOL && t->i;
	const pv *bl = dict_get(d, "blocks");
	if (bl && bl->kind == PV_LIST) {
		s.blocks = xcalloc(bl->n, sizeof(as_snap_block));
		for (size_t i = 0; i < bl->n; i++) {
			const pv *b = bl->items[i];
			get_u64(b, "size", &s.blocks[s.nblocks].size);
			const pv *st = dict_get(b, "state");
			int state = 0;
			if (st && st->kind == PV_STR)
				state = !strcmp(st->s, "active_allocated") ? 1 : !strcmp(st->s, "active_pending_free") ? 2 : 0;
			s.blocks[s.nblocks++].state = state;
		}
	}
	m->segments = xrealloc(m->segments, (m->nsegments + 1) * sizeof(*m->segments));
	m->segments[m->nsegments++] = s;
	return 0;
}

/* Items are being appended to list L (which stays on the stack); consume or keep them. */
static int append_items(as_reader *r, pk *p, pv *list, pv **items, size_t n, as_err *err)
{
	for (size_t i = 0; i < n; i++) {
		pv *it = items[i];
		if (list->role == ROLE_DEVTRACE && it->kind == PV_DICT) {
			if (list->dev == p->device) {
				if (trace_entry(r, p, it, err)) {
					for (size_t j = i; j < n; j++)
						pv_free(items[j]);
					return -1;
				}
			} else {
				p->other_device_entries++;
			}
			pv_free(it);
		} else if (list->role == ROLE_SEGMENTS && it->kind == PV_DICT) {
			int rc = segment_entry(r, p, it, err);
			pv_free(it);
			if (rc) {
				for (size_t j = i + 1; j < n; j++)
					pv_free(items[j]);
				return -1;
			}
		} else if (list->role == ROLE_TRACES && it->kind == PV_LIST) {
			pv_free(it); /* an already consumed device trace */
		} else {
			pv_push_item(list, it);
		}
	}
	return 0;
}

static void finish_top(as_reader *r, pk *p, const pv *top)
{
	as_meta *m = &r->meta;
	const pv *s = dict_get(top, "allocator_settings");
	snprintf(m->source, sizeof m->source, "pytorch-snapshot");
	if (s && s->kind == PV_DICT) {
		const pv *c = dict_get(s, "PYTORCH_CUDA_ALLOC_CONF");
		free(m->settings);
		m->settings = xstrdup(c && c->kind == PV_STR ? c->s : "");
		m->has_settings = 1;
	}
	(void)p;
}

/* ---- the opcode interpreter ----------------------------------------------------------- */

static int need(as_reader *r, size_t n, as_err *err)
{
	if (as_input_fill(&r->in, n, err) < n) {
		if (r->in.error)
			return -1;
		return perr(r, as_input_tell(&r->in), err, "truncated pickle (needs %zu more bytes)", n);
	}
	return 0;
}

static uint64_t rd_le(as_reader *r, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)r->in.buf[r->in.pos + (size_t)i] << (8 * i);
	r->in.pos += (size_t)n;
	return v;
}

static int push(as_reader *r, pk *p, pv *v, as_err *err)
{
	if (live_nodes > MAX_NODES) {
		uint64_t pos = v ? v->pos : 0;
		pv_free(v);
		return perr(r, pos, err, "pickle holds more than %u values at once (reader memory cap)", MAX_NODES);
	}
	if (p->sp == MAX_STACK) {
		pv_free(v);
		return perr(r, v ? v->pos : 0, err, "pickle stack exceeds %u values (reader memory cap)", MAX_STACK);
	}
	if (p->sp == p->scap) {
		p->scap = p->scap ? p->scap * 2 : 1024;
		p->stack = xrealloc(p->stack, p->scap * sizeof(pv *));
	}
	p->stack[p->sp++] = v;
	return 0;
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

static int read_string(as_reader *r, pk *p, uint64_t pos, size_t len, int kind, as_err *err)
{
	if (len > MAX_STRING)
		return perr(r, pos, err, "string of %zu bytes exceeds the reader's 1 MiB limit", len);
	pv *v = pv_new(kind, pos);
	v->s = xmalloc(len + 1);
	size_t got = 0;
	while (got < len) {
		size_t chunk = len - got > 65536 ? 65536 : len - got;
		if (need(r, chunk, err)) {
			pv_free(v);
			return -1;
		}
		memcpy(v->s + got, r->in.buf + r->in.pos, chunk);
		r->in.pos += chunk;
		got += chunk;
	}
	v->s[len] = 0;
	v->n = len;
	return push(r, p, v, err);
}

static void new_list_role(pk *p, pv *l)
{
	if (!p->sp)
		return;
	pv *top = p->stack[p->sp - 1];
	if (top->kind == PV_STR && !strcmp(top->s, "device_traces")) {
		l->role = ROLE_TRACES;
	} else if (top->kind == PV_STR && !strcmp(top->s, "segments") && p->sp >= 2 && p->stack[0]->kind == PV_DICT &&
		   p->sp - 1 == mark_base(p)) {
		l->role = ROLE_SEGMENTS;
	} else {
		/* A list pushed above the device_traces list (possibly after other device lists). */
		for (size_t i = p->sp; i-- > 0;) {
			pv *v = p->stack[i];
			if (v->kind == PV_LIST && v->role == ROLE_DEVTRACE)
				continue;
			if (v->kind == PV_LIST && v->role == ROLE_TRACES) {
				l->role = ROLE_DEVTRACE;
				l->dev = p->ndevtraces++;
			}
			break;
		}
	}
}

static int memo_put(pk *p, uint64_t idx)
{
	if (idx >= MAX_MEMO)
		return -1;
	pv *v = p->stack[p->sp - 1];
	pv *old = idmap_get(&p->memo, idx);
	/* Lists and dicts are not kept: snapshots do not refer to a filled one twice, and keeping
	 * them would make memory grow with the trace. A later GET of one is reported as unsupported.
	 * Tuples are kept only when flat (no tuple inside), so GETs cannot nest copies exponentially
	 * (found by fuzz_pickle).
	 * An empty list is kept (as empty): the snapshot writer shares one empty 'frames' list. */
	if (v->kind == PV_LIST && v->n == 0 && !v->role) {
		idmap_put(&p->memo, idx, pv_copy(v));
		if (old)
			pv_free(old);
		return 0;
	}
	int nested = 0;
	for (size_t i = 0; v->kind == PV_TUPLE && i < v->n; i++)
		nested |= v->items[i]->kind == PV_TUPLE || v->items[i]->kind == PV_LIST || v->items[i]->kind == PV_DICT;
	if (v->kind == PV_LIST || v->kind == PV_DICT || (v->kind == PV_TUPLE && (v->n > 16 || nested))) {
		if (old) {
			idmap_del(&p->memo, idx);
			pv_free(old);
		}
	} else {
		idmap_put(&p->memo, idx, pv_copy(v));
		if (old)
			pv_free(old);
	}
	return 0;
}

static int memo_get(as_reader *r, pk *p, uint64_t idx, uint64_t pos, as_err *err)
{
	pv *v = idmap_get(&p->memo, idx);
	if (!v)
		return perr(r, pos, err, "pickle memo index %" PRIu64 " is undefined or refers to a list/dict "
			"(shared containers are not used by snapshots and not supported)", idx);
	return push(r, p, pv_copy(v), err);
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

/* Runs opcodes until the event queue has something or the pickle ends. */
static int run_vm(as_reader *r, pk *p, as_err *err)
{
	while (!p->qlen && !p->stopped) {
		if (need(r, 1, err))
			return -1;
		uint64_t pos = as_input_tell(&r->in);
		int op = r->in.buf[r->in.pos++];
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
			if (p->stack[0]->kind != PV_DICT)
				return perr(r, pos, err, "pickle is not a dict: not a PyTorch memory snapshot");
			if (!dict_get(p->stack[0], "device_traces") && !dict_get(p->stack[0], "segments"))
				return perr(r, pos, err, "pickle has neither 'segments' nor 'device_traces': not a PyTorch memory snapshot");
			flush_freereq(p);
			flush_run(p, -1, &r->meta);
			finish_top(r, p, p->stack[0]);
			p->stopped = 1;
			break;
		case '(': /* MARK */
			if (p->nmarks == MAX_MARKS)
				return perr(r, pos, err, "pickle nesting deeper than %d (reader limit)", MAX_MARKS);
			p->marks[p->nmarks++] = p->sp;
			break;
		case '}': /* EMPTY_DICT */
			if (push(r, p, pv_new(PV_DICT, pos), err))
				return -1;
			break;
		case ']': /* EMPTY_LIST */
			v = pv_new(PV_LIST, pos);
			new_list_role(p, v);
			if (push(r, p, v, err))
				return -1;
			break;
		case ')': /* EMPTY_TUPLE */
			if (push(r, p, pv_new(PV_TUPLE, pos), err))
				return -1;
			break;
		case 'N':
			if (push(r, p, pv_new(PV_NONE, pos), err))
				return -1;
			break;
		case 0x88: case 0x89: /* NEWTRUE, NEWFALSE */
			v = pv_new(PV_BOOL, pos);
			v->i = op == 0x88;
			if (push(r, p, v, err))
				return -1;
			break;
		case 'K': case 'M': case 'J': /* BININT1, BININT2, BININT */
			if (need(r, op == 'K' ? 1 : op == 'M' ? 2 : 4, err))
				return -1;
			v = pv_new(PV_INT, pos);
			if (op == 'J')
				v->i = (int32_t)(uint32_t)rd_le(r, 4);
			else
				v->i = (int64_t)rd_le(r, op == 'K' ? 1 : 2);
			if (push(r, p, v, err))
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
			v = pv_new(PV_INT, pos);
			v->i = (int64_t)u;
			if (push(r, p, v, err))
				return -1;
			break;
		}
		case 'G': { /* BINFLOAT, big-endian */
			if (need(r, 8, err))
				return -1;
			uint64_t u = 0;
			for (int i = 0; i < 8; i++)
				u = (u << 8) | r->in.buf[r->in.pos + (size_t)i];
			r->in.pos += 8;
			v = pv_new(PV_FLOAT, pos);
			memcpy(&v->f, &u, 8);
			if (push(r, p, v, err))
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
					(op == 'C' || op == 'B' || op == 0x8e) ? PV_BYTES : PV_STR, err))
				return -1;
			break;
		}
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
			v = pv_new(PV_TUPLE, pos);
			for (size_t i = p->sp - k; i < p->sp; i++)
				pv_push_item(v, p->stack[i]);
			p->sp -= k;
			if (push(r, p, v, err))
				return -1;
			break;
		}
		case 't': /* TUPLE */
			if (pop_mark(r, p, pos, &base, err))
				return -1;
			v = pv_new(PV_TUPLE, pos);
			for (size_t i = base; i < p->sp; i++)
				pv_push_item(v, p->stack[i]);
			p->sp = base;
			if (push(r, p, v, err))
				return -1;
			break;
		case 'a': /* APPEND */
			if (p->sp < 2 + mark_base(p) || p->stack[p->sp - 2]->kind != PV_LIST)
				return perr(r, pos, err, "APPEND without a list");
			p->sp--;
			if (append_items(r, p, p->stack[p->sp - 1], &p->stack[p->sp], 1, err))
				return -1;
			break;
		case 'e': /* APPENDS */
			if (pop_mark(r, p, pos, &base, err))
				return -1;
			if (base < 1 || p->stack[base - 1]->kind != PV_LIST)
				return perr(r, pos, err, "APPENDS without a list");
			{
				size_t k = p->sp - base;
				p->sp = base;
				if (append_items(r, p, p->stack[base - 1], &p->stack[base], k, err))
					return -1;
			}
			break;
		case 's': /* SETITEM */
			if (p->sp < 3 + mark_base(p) || p->stack[p->sp - 3]->kind != PV_DICT)
				return perr(r, pos, err, "SETITEM without a dict");
			pv_push_item(p->stack[p->sp - 3], p->stack[p->sp - 2]);
			pv_push_item(p->stack[p->sp - 3], p->stack[p->sp - 1]);
			p->sp -= 2;
			break;
		case 'u': /* SETITEMS */
			if (pop_mark(r, p, pos, &base, err))
				return -1;
			if (base < 1 || p->stack[base - 1]->kind != PV_DICT || (p->sp - base) % 2)
				return perr(r, pos, err, "SETITEMS without a dict or with an odd number of values");
			for (size_t i = base; i < p->sp; i++)
				pv_push_item(p->stack[base - 1], p->stack[i]);
			p->sp = base;
			break;
		case '0': /* POP */
			if (p->sp <= mark_base(p))
				return perr(r, pos, err, "POP on an empty stack");
			pv_free(p->stack[--p->sp]);
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
	/* (live_nodes returns to its value before this reader as its values are freed) */
	for (size_t i = 0; i < p->sp; i++)
		pv_free(p->stack[i]);
	free(p->stack);
	for (size_t i = 0; i < p->memo.cap; i++)
		if (idmap_live(&p->memo, i))
			pv_free(p->memo.vals[i]);
	idmap_free(&p->memo);
	idmap_free(&p->live);
	free(p->q);
	free(p->run);
	free(p);
}

static const struct as_reader_ops pickle_ops = { "pytorch", pickle_next, pickle_close };

int as_pickle_open(as_reader *r, const as_reader_opts *o, as_err *err)
{
	pk *p = xcalloc(1, sizeof(*p));
	idmap_init(&p->memo);
	idmap_init(&p->live);
	p->want_segments = o->want_segments;
	r->priv = p;
	r->ops = &pickle_ops;
	r->pos_is_line = 0;
	snprintf(r->meta.format, sizeof r->meta.format, "pytorch");
	snprintf(r->meta.source, sizeof r->meta.source, "pytorch-snapshot");
	return 0;
}
