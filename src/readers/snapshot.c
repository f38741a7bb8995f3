/*
 * snapshot.c - reader for PyTorch memory snapshots (torch.cuda.memory._dump_snapshot): the snapshot's
 * interpretation of the values the pickle VM (pkvm.c) builds, as the VM's sink.
 *
 * It streams: trace-entry dicts are turned into events (snapevents.c) as soon as the pickle appends
 * them to a device trace list (or as they are read, pkfast.c), and then dropped, so memory follows the
 * number of live allocations and the pickler's batch size (1000 entries), not the trace length. Here:
 * which lists are 'device_traces', its device lists and 'segments' (the top-level dict's keys), each
 * entry's fields and pool, the segments, the checks on the history at STOP, allocator_settings into
 * the metadata, and the pool inference's passes (poolinfer.c). Hand-written because no C library
 * parses pickles without a Python interpreter.
 */
#include "readers/pkfast.h"
#include "readers/sites.h"
#include "readers/poolinfer.h"
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_DEVICES 4096         /* device lists in 'device_traces' */

enum { POOLS_AUTO, POOLS_ANNOTATION, POOLS_INFER };

typedef struct pk {
	pkvm vm;             /* the pickle VM (its sink: this reader) */
	snapev ev;           /* the translation into events */
	pv *traces;          /* the top-level 'device_traces' list being streamed (a reference) */
	pv *seglist;         /* the top-level 'segments' list being streamed (a reference) */
	int ndevtraces;      /* device lists seen in it */
	uint64_t *dev_entries; /* trace entries per device */
	int want_device;     /* --device N, or -1: the one device with history; AS_DEVICE_HOST: 'host_traces' */
	int any_device;      /* with several devices with history and none chosen: take the first */
	int device;          /* which device trace is replayed (-1 until known; AS_DEVICE_HOST: the host list) */
	pv *hostlist;        /* the top-level 'host_traces' list being streamed (a reference; 2.14+) */
	uint64_t host_entries; /* its entries */
	int *seg_dev;        /* the device of each segment in meta (-1: not recorded) */
	int stopped;
	uint64_t nentries, other_device_entries;
	int want_segments;
	int keep_sites;      /* give allocations their site from the entry's frames */
	as_sites sites;
	/* pools of a snapshot that names none (poolinfer.c): ALLOCSIM_POOLS, and the first pass */
	int pools_mode;      /* POOLS_AUTO, POOLS_ANNOTATION, POOLS_INFER */
	int prepass;         /* this reader is the first pass: entries go to pinf, no events */
	int reread;          /* this reader reads again what an auto pass found private pools in (as_reader_again) */
	int pools_decided;   /* the main pass has decided (at its first entry) */
	int annotated;       /* an entry names its pool (pool_id, user_metadata) */
	as_poolinfer *pinf;  /* the first pass's answers (main pass), or what it gathers (first pass) */
	as_poolinfer *detect; /* auto without private segments at the end: the evidence that pools were used */
	/* auto: the end state's segments, for the evidence (a segment held at the history's end that the
	 * end state lacks shows nothing: as_poolinfer_evidence) */
	struct pkend { uint64_t addr, size; int exp, dev; } *ends;
	size_t nends, capends;
	int pools_debug;     /* ALLOCSIM_POOLS_DEBUG: each read and each decision on stderr */
} pk;

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

static int get_u64(const pv *d, const char *key, uint64_t *out)
{
	return u64_of(dict_get(d, key), out);
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

/*
 * Pools of a 2.11 snapshot that names none (ALLOCSIM_POOLS=auto|infer; poolinfer.c). The main pass,
 * at its first entry, reads the whole snapshot once more in a first pass (its own reader over the
 * same file) that gives every entry to the inference; then each entry takes the pool found. auto
 * does this only when the end state has private segments; infer always, and ignores user_metadata.
 */
static int pickle_next(as_reader *r, as_event *ev, as_err *err);
static void pickle_close(as_reader *r);

static int pools_prepass(as_reader *r, pk *p, as_err *err)
{
	int fd = dup(r->in.fd);
	if (fd < 0)
		return as_fail(err, AS_EXIT_NOINPUT, "%s: cannot read it again: %s", r->in.path, strerror(errno));
	as_reader_opts o;
	memset(&o, 0, sizeof o);
	o.has_device = 1;
	o.device = p->device;
	o.max_bytes = p->vm.max_bytes;
	o.pool_prepass = 1;
	/* its own reader over the same file, as as_reader_open_fd would make one (reader.c calls this
	 * file: no call goes back to it); a first pass hands out no events, so none are checked */
	as_reader *q = xcalloc(1, sizeof(*q));
	if (as_input_open_fd(&q->in, fd, r->in.path, err)) {
		free(q);
		return -1;
	}
	q->opts = o;
	int rc = -1;
	size_t n = as_input_fill(&q->in, 64, err);
	if (q->in.error)
		;
	else if (n == 0)
		as_fail(err, AS_EXIT_DATAERR, "%s: empty file (not a trace)", q->in.path);
	else if (!as_pickle_open(q, &o, err)) {
		as_event ev;
		while ((rc = pickle_next(q, &ev, err)) > 0)
			;
	}
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
	pickle_close(q);
	as_input_close(&q->in);
	as_meta_free(&q->meta);
	free(q);
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
		const char *why;
		if (p->pools_mode == POOLS_INFER || (p->pools_mode == POOLS_AUTO && (r->meta.private_segments || p->reread) && !x->pool)) {
			why = p->pools_mode == POOLS_INFER ? "ALLOCSIM_POOLS=infer: inferring" : p->reread ? "read again: inferring"
				: "its end state holds private segments: inferring";
			if (p->pools_debug)
				fprintf(stderr, "allocsim: pools: %s: decision: %s\n", r->in.path, why);
			if (pools_prepass(r, p, err))
				return -1;
		} else {
			if (p->pools_mode == POOLS_AUTO && !x->pool)
				p->detect = as_poolinfer_new_light(); /* pools released before the snapshot: a warning */
			why = x->pool ? "the trace names its pools" : p->detect ? "no private segment in its end state: watching for released pools"
				: "ALLOCSIM_POOLS=annotation: none inferred";
			if (p->pools_debug)
				fprintf(stderr, "allocsim: pools: %s: decision: %s\n", r->in.path, why);
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
		int64_t n = snap_pool_number(&p->ev, a, b, flags);
		if (n < 0)
			return pkvm_err(r, x->pos, err, "trace entry %" PRIu64 ": more than %u memory pools", x->index, AS_POOL_MAX);
		x->pool = (uint32_t)n;
	}
	return 0;
}

/* The keys of a dict, for the writer's release (pyversion.c): the top level, allocator_settings and
 * the first trace entry (the fast path notes that one's itself). */
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
		switch (snap_key_id(k->u.p)) {
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
	switch (snap_entry_fields(a, size, addr, stream, time, &x)) {
	case EF_OK:
		if (p->keep_sites && x.action == A_ALLOC && frames && VKIND(*frames) == V_LIST)
			x.site = entry_site(p, frames->u.p);
		if (p->pools_mode == POOLS_INFER)
			meta = NULL; /* the capture's own names are not read */
		if ((meta || pid) && snap_entry_pool(&p->ev, &x, meta, pid))
			return pkvm_err(r, d->pos, err, "trace entry %" PRIu64 ": more than %u memory pools", x.index, AS_POOL_MAX);
		if (pools_entry(r, p, &x, EF_OK, err))
			return -1;
		if (p->prepass)
			return 0;
		r->meta.named_pools = (uint32_t)p->ev.npools;
		return snap_translate(r, &p->ev, &x, err);
	case EF_SKIP:
		return pools_entry(r, p, &x, EF_SKIP, err);
	case EF_NOACTION:
		return pkvm_err(r, d->pos, err, "trace entry %" PRIu64 " has no 'action' string", x.index);
	case EF_UNKNOWN:
		return pkvm_err(r, d->pos, err, "trace entry %" PRIu64 ": unknown action '%.60s'", x.index, as);
	case EF_SIZE:
		return pkvm_err(r, d->pos, err, "trace entry %" PRIu64 " (%s) has no valid 'size'", x.index, as);
	case EF_ADDR:
		return pkvm_err(r, d->pos, err, "trace entry %" PRIu64 " (%s) has no valid 'addr'", x.index, as);
	case EF_TIME:
		return pkvm_err(r, d->pos, err, "trace entry %" PRIu64 " (%s) has an invalid 'time_us' (must be a whole number 0 .. 2^63-1)",
			x.index, as);
	default:
		return pkvm_err(r, d->pos, err, "trace entry %" PRIu64 ": %s of %" PRIu64 " bytes (must be 1 .. 2^60-1)",
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
	} else if (!p->prepass && p->pools_mode == POOLS_AUTO) {
		uint64_t addr, size;
		const val *ex = dict_get(d, "is_expandable");
		if (!get_u64(d, "address", &addr) && !get_u64(d, "total_size", &size)) {
			if (p->nends == p->capends) {
				p->capends = p->capends ? 2 * p->capends : 64;
				p->ends = xrealloc(p->ends, p->capends * sizeof(*p->ends));
			}
			p->ends[p->nends++] = (struct pkend){ addr, size, ex && VKIND(*ex) == V_BOOL && ex->u.i, sdev };
		}
	}
	if (!p->want_segments)
		return 0;
	as_snap_segment s;
	memset(&s, 0, sizeof s);
	if (get_u64(d, "address", &s.addr) || get_u64(d, "total_size", &s.total_size))
		return pkvm_err(r, d->pos, err, "segment without 'address'/'total_size'");
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

/* One more entry of device list l (AS_DEVICE_HOST: 'host_traces'), counted; whether it is the one
 * replayed (the first device list with history, unless --device chose). */
static inline int entry_counts(pk *p, const pv *l)
{
	if (l->dev == AS_DEVICE_HOST)
		p->host_entries++;
	else
		p->dev_entries[l->dev]++;
	if (p->device == -1 && l->dev >= 0)
		p->device = l->dev; /* the first device with history, unless another has too */
	return l->dev == p->device;
}

/* Items are being appended to list L with a role (which stays on the stack): consume them. */
static int append_items(as_reader *r, pk *p, pv *list, val *items, size_t n, as_err *err)
{
	size_t i = 0;
	int rc = 0;
	for (; i < n && !rc; i++) {
		val it = items[i];
		if (list->role == ROLE_DEVTRACE && VKIND(it) == V_GHOST) {
			p->vm.nghosts--; /* replayed as it was read (ghost_misplaced checked the list) */
			continue;
		}
		if (list->role == ROLE_DEVTRACE) {
			if (VKIND(it) != V_DICT) {
				rc = list->dev == AS_DEVICE_HOST ?
					pkvm_err(r, VPOS(it), err, "host trace entry %" PRIu64 " is not a dict", p->host_entries) :
					pkvm_err(r, VPOS(it), err, "device %d's trace entry %" PRIu64 " is not a dict", list->dev,
					p->dev_entries[list->dev]);
			} else {
				if (entry_counts(p, list))
					rc = trace_entry(r, p, it.u.p, err);
				else
					p->other_device_entries++;
				pkvm_memo_forget(&p->vm, it.u.p);
			}
		} else if (list->role == ROLE_SEGMENTS) {
			if (VKIND(it) != V_DICT) {
				rc = pkvm_err(r, VPOS(it), err, "an item of 'segments' is not a dict");
			} else {
				rc = segment_entry(r, p, it.u.p, err);
				pkvm_memo_forget(&p->vm, it.u.p);
			}
		} else if (list->role == ROLE_TRACES) {
			/* a device's list, already consumed */
			if (VKIND(it) != V_LIST || it.u.p->role != ROLE_DEVTRACE)
				rc = pkvm_err(r, VPOS(it), err, "an item of 'device_traces' is not a list of trace entries");
		}
		val_drop(&p->vm, it);
	}
	for (; i < n; i++)
		val_drop(&p->vm, items[i]);
	pkvm_memo_pack(&p->vm); /* (once a batch: the memo's older pages) */
	return rc;
}

/* Whether the string on top of the stack is a key of the top-level dict (stack[0]) with that name:
 * the dict's own pending items sit directly above it (pickle protocols 2+ write
 * EMPTY_DICT [MARK] key value ... SETITEM[S]), so a key inside any value is never taken. */
static int top_key(const pk *p, const char *name)
{
	if (p->vm.sp < 2 || VKIND(p->vm.stack[0]) != V_DICT)
		return 0;
	const val *k = &p->vm.stack[p->vm.sp - 1];
	if (VKIND(*k) != V_STR || strcmp(k->u.p->s, name))
		return 0;
	size_t at = p->vm.sp - 1;
	if (!p->vm.nmarks)
		return at == 1;
	return p->vm.nmarks == 1 && p->vm.marks[0] == 1 && (at - 1) % 2 == 0;
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
	p->nends = 0;
}

/* List l is the next device's list of trace entries. */
static int new_device(as_reader *r, pk *p, pv *l, as_err *err)
{
	if (p->ndevtraces == MAX_DEVICES)
		return pkvm_err(r, l->pos, err, "'device_traces' holds more than %d devices (reader limit)", MAX_DEVICES);
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
	p->vm.bytes -= l->cap * sizeof(val);
	l->items = NULL;
	l->n = l->cap = 0;
	l->role = (unsigned char)role;
	int rc = 0;
	size_t i = 0;
	for (; i < n && !rc; i++) {
		val it = items[i];
		if (role == ROLE_TRACES) {
			if (VKIND(it) != V_LIST) {
				rc = pkvm_err(r, VPOS(it), err, "an item of 'device_traces' is not a list of trace entries");
				break;
			}
			if ((rc = new_device(r, p, it.u.p, err)))
				break;
			rc = consume_list(r, p, it.u.p, ROLE_DEVTRACE, err);
		} else {
			rc = append_items(r, p, l, &items[i], 1, err);
			continue; /* append_items dropped the reference */
		}
		val_drop(&p->vm, it);
	}
	for (; i < n; i++)
		val_drop(&p->vm, items[i]);
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
	const val *ht = dict_get(top, "host_traces");
	m->host_traces = ht && VKIND(*ht) == V_LIST;
	if (m->host_traces && ht->u.p != p->hostlist) {
		/* a 'host_traces' not streamed (another pickler): its entries now */
		if (p->hostlist && p->host_entries && p->want_device == AS_DEVICE_HOST)
			return pkvm_err(r, pos, err, "the snapshot's last 'host_traces' is not the list replayed: a "
				"pickle Python reads differently from its stream");
		p->host_entries = 0;
		ht->u.p->dev = AS_DEVICE_HOST;
		if (consume_list(r, p, ht->u.p, ROLE_DEVTRACE, err))
			return -1;
	}
	m->host_entries = m->host_traces ? p->host_entries : 0;
	if (p->want_device == AS_DEVICE_HOST) {
		if (!m->host_entries)
			return pkvm_err(r, pos, err, "the snapshot has no pinned host-memory history (%s): record it with "
				"torch.cuda.memory._record_memory_history(record_pinned_host_memory=True) (PyTorch 2.14+)",
				m->host_traces ? "its 'host_traces' is empty" : "no 'host_traces'");
		/* the device segments are not the host allocator's: none kept, nor their private pools */
		for (size_t i = 0; i < m->nsegments; i++)
			free(m->segments[i].blocks);
		m->nsegments = 0;
		m->private_segments = 0;
		m->device_index = 0;
		m->ndevices = 1;
		return 0;
	}
	if (!dt)
		return pkvm_err(r, pos, err, "the snapshot has no allocation history (no 'device_traces', only the end "
			"state): %s", how);
	if (VKIND(*dt) != V_LIST)
		return pkvm_err(r, pos, err, "the snapshot's 'device_traces' is not a list (no allocation history): %s", how);
	if (dt->u.p != p->traces) {
		if (history_entries(p))
			return pkvm_err(r, pos, err, "the snapshot's last 'device_traces' is not the list replayed: a "
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
		return pkvm_err(r, pos, err, "the snapshot has no allocation history ('device_traces' holds %d empty "
			"device list%s): %s", p->ndevtraces, p->ndevtraces == 1 ? "" : "s", how);
	if (p->want_device >= 0 && (p->want_device >= p->ndevtraces || !p->dev_entries[p->want_device]))
		return pkvm_err(r, pos, err, "device %d has no allocation history in this snapshot (devices with "
			"history: %s)", p->want_device, list);
	if (p->want_device < 0 && with > 1 && !p->any_device)
		return pkvm_err(r, pos, err, "the snapshot has allocation history on %d devices (%s): choose one with "
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
		for (size_t i = 0; i < p->nends; i++)
			if (p->ends[i].dev < 0 || p->ends[i].dev == p->device)
				as_poolinfer_end_segment(p->detect, p->ends[i].addr, p->ends[i].size, 0, 0, p->ends[i].exp);
		m->pool_evidence = as_poolinfer_evidence(p->detect);
		r->again = m->pool_evidence > 0; /* pools used and released: read again, inferring them */
		if (p->pools_debug) {
			as_poolinfer_stats st;
			as_poolinfer_get_stats(p->detect, &st);
			fprintf(stderr, "allocsim: pools: %s: decision: %" PRIu64 " segment(s) show private pools released before its end, "
				"%" PRIu64 " held at its end outside its end state not counted: %s\n", r->in.path, m->pool_evidence,
				st.outside_end, r->again ? "read again, inferring" : "none inferred, read once");
		}
	}
}

static int sink_list(void *ctx, as_reader *r, pv *l, as_err *err)
{
	pk *p = ctx;
	if (top_key(p, "device_traces")) {
		if (p->traces) {
			/* Python keeps a duplicate key's last value; this one can still be followed unless
			 * the first has already been replayed. */
			if (history_entries(p))
				return pkvm_err(r, l->pos, err, "a second 'device_traces' key after a replayed one: Python "
					"keeps the last, which a streaming reader cannot (remove the duplicate)");
			pv_unref(&p->vm, p->traces);
		}
		p->ndevtraces = 0;
		l->role = ROLE_TRACES;
		l->refs++;
		p->traces = l;
	} else if (top_key(p, "host_traces")) {
		/* 2.14+: the pinned host allocator's history, entries as a device's (traceEntryToDict) */
		if (p->hostlist)
			pv_unref(&p->vm, p->hostlist);
		p->host_entries = 0;
		l->role = ROLE_DEVTRACE;
		l->dev = AS_DEVICE_HOST;
		l->refs++;
		p->hostlist = l;
	} else if (top_key(p, "segments")) {
		if (p->seglist)
			pv_unref(&p->vm, p->seglist);
		drop_segments(p, &r->meta);
		l->role = ROLE_SEGMENTS;
		l->refs++;
		p->seglist = l;
	} else if (p->traces) {
		/* A device's list is an item of the device_traces list: directly above it (APPEND), or
		 * above the MARK that follows it with earlier device lists in between (APPENDS). */
		size_t i = p->vm.sp;
		while (i > 0 && VKIND(p->vm.stack[i - 1]) == V_LIST && p->vm.stack[i - 1].u.p->role == ROLE_DEVTRACE)
			i--;
		if (i > 0 && VKIND(p->vm.stack[i - 1]) == V_LIST && p->vm.stack[i - 1].u.p == p->traces &&
		    (mark_base(&p->vm) == i || (mark_base(&p->vm) < i && p->vm.sp == i))) {
			if (new_device(r, p, l, err))
				return -1;
		}
	}
	return 0;
}

/* ---- the sink: what the VM reports (pkvm.h) ------------------------------------------------ */

/* Events to hand out, or the end: the VM returns. */
static inline void yield(pk *p)
{
	p->vm.yield = p->ev.qlen || p->stopped;
}

/* The next entry of a device's list, read whole by the fast path (pkfast.c) when it can: then what
 * APPENDS would do with the dict, at once. */
static int sink_entry(void *ctx, as_reader *r, pv *list, as_err *err)
{
	pk *p = ctx;
	pkfast e;
	/* the first entry's keys date the writer (pyversion.c); noted once it is read whole */
	const int first = !(r->meta.pyfields & AS_PF_ENTRY);
	if (!pkfast_entry(r, &p->vm, list, first, &e, err))
		return 0;
	rec *x = &e.x;
	int poolerr = 0;
	/* the pool now, while the metadata string is held */
	if (e.code == EF_OK && (e.have & (1u << K_META | 1u << K_POOL)))
		poolerr = snap_entry_pool(&p->ev, x, e.have & 1u << K_META && p->pools_mode != POOLS_INFER ? &e.f[K_META] : NULL,
			e.have & 1u << K_POOL ? &e.f[K_POOL] : NULL);
	r->meta.named_pools = (uint32_t)p->ev.npools;
	if (first)
		r->meta.pyfields |= e.pyf | AS_PF_SNAPSHOT | AS_PF_ENTRY;
	pkfast_done(&p->vm, &e);
	if (!entry_counts(p, list)) {
		p->other_device_entries++;
		return 1;
	}
	x->pos = e.pos;
	x->index = p->nentries++;
	if (poolerr)
		return pkvm_err(r, e.pos, err, "trace entry %" PRIu64 ": more than %u memory pools", x->index, AS_POOL_MAX);
	if (pools_entry(r, p, x, e.code, err))
		return -1;
	if (e.code == EF_OK && !p->prepass && snap_translate(r, &p->ev, x, err))
		return -1;
	yield(p);
	return 1;
}

static int sink_append(void *ctx, as_reader *r, pv *list, val *items, size_t n, as_err *err)
{
	pk *p = ctx;
	if (append_items(r, p, list, items, n, err))
		return -1;
	yield(p);
	return 0;
}

static int sink_stop(void *ctx, as_reader *r, val top, uint64_t pos, as_err *err)
{
	pk *p = ctx;
	if (VKIND(top) != V_DICT)
		return pkvm_err(r, pos, err, "pickle is not a dict: not a PyTorch memory snapshot");
	pv *v = top.u.p;
	if (!dict_get(v, "device_traces") && !dict_get(v, "segments"))
		return pkvm_err(r, pos, err, "pickle has neither 'segments' nor 'device_traces': not a PyTorch memory snapshot");
	if (check_history(r, p, v, pos, err))
		return -1;
	if (snap_flush_freereq(r, &p->ev, err))
		return -1;
	snap_flush_run(&p->ev, -1, &r->meta);
	finish_top(r, p, v);
	p->stopped = 1;
	yield(p);
	return 0;
}

static const pk_sink sink = { sink_list, sink_entry, sink_append, sink_stop };

/* ---- the reader ------------------------------------------------------------------------------ */

/* The next trace entry handed to sink_entry without a trip into the opcode loop: pkvm_run's
 * EMPTY_DICT case and the tests it makes before every opcode, here first (one call less per entry).
 * 1: taken; 0: not (pkvm_run goes on from the same input, and asks sink_entry again); -1: error. */
static int entry_direct(as_reader *r, pk *p, as_err *err)
{
	const pkvm *vm = &p->vm;
	const as_input *in = &r->in;
	if (in->len - in->pos < 16 || vm->bytes > vm->max_bytes || in->buf[in->pos] != '}' || !vm->nmarks)
		return 0;
	size_t base = vm->marks[vm->nmarks - 1];
	if (!base || VKIND(vm->stack[base - 1]) != V_LIST || vm->stack[base - 1].u.p->role != ROLE_DEVTRACE ||
	    vm->sp - base != vm->nghosts)
		return 0;
	return sink_entry(p, r, vm->stack[base - 1].u.p, err);
}

static int pickle_next(as_reader *r, as_event *ev, as_err *err)
{
	pk *p = r->priv;
	if (!p->ev.qlen) {
		p->vm.yield = p->stopped;
		int fr = 1;
		while (!p->vm.yield && (fr = entry_direct(r, p, err)) > 0)
			;
		if (fr < 0 || (!p->vm.yield && pkvm_run(r, &p->vm, err)))
			return -1;
	}
	if (!p->ev.qlen) {
		/* Anything after STOP is not part of the snapshot. */
		if (as_input_fill(&r->in, 1, err) > 0)
			return pkvm_err(r, as_input_tell(&r->in), err, "trailing data after the end of the pickle");
		if (r->in.error)
			return -1;
		return 0;
	}
	*ev = p->ev.q[p->ev.qhead++];
	p->ev.qlen--;
	if (!p->ev.qlen)
		p->ev.qhead = 0;
	return 1;
}

static void pickle_close(as_reader *r)
{
	pk *p = r->priv;
	if (!p)
		return;
	pv_unref(&p->vm, p->traces);
	pv_unref(&p->vm, p->seglist);
	pv_unref(&p->vm, p->hostlist);
	pkvm_free(&p->vm);
	snap_free(&p->ev);
	free(p->dev_entries);
	free(p->seg_dev);
	free(p->ends);
	as_sites_free(&p->sites);
	as_poolinfer_free(p->pinf);
	as_poolinfer_free(p->detect);
	free(p);
}
static const struct as_reader_ops pickle_ops = { "pytorch", pickle_next, pickle_close };

int as_pickle_open(as_reader *r, const as_reader_opts *o, as_err *err)
{
	pk *p = xcalloc(1, sizeof(*p));
	pkvm_init(&p->vm, o->max_bytes ? o->max_bytes : MAX_BYTES, &sink, p);
	snap_init(&p->ev);
	p->want_segments = o->want_segments;
	p->keep_sites = o->keep_sites;
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
	if (p->want_device == AS_DEVICE_HOST)
		p->pools_mode = POOLS_ANNOTATION; /* the device's segments say nothing of host pools */
	p->pools_debug = getenv("ALLOCSIM_POOLS_DEBUG") != NULL;
	if (p->pools_debug) /* each read of the file (tests/pools.sh counts them) */
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
