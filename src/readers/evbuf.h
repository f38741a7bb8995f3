/* evbuf.h - a whole trace decoded once into fixed-size records (decode once, replay many).
 *
 * sweep, fit and replay's second passes replay every configuration from one decoded copy, shared
 * read-only by all worker threads. The records carry dense slot numbers instead of ids (see
 * as_event.slot), phase labels live in a side arena, and the metadata is complete (a snapshot's
 * settings, stored at its end, are known once the buffer is loaded). The record layout is also
 * the binary trace format's (doc/trace-format.md, src/readers/binfmt.c), so a binary file is used in
 * place through mmap. */
#ifndef ALLOCSIM_EVBUF_H
#define ALLOCSIM_EVBUF_H
#include "readers/trace.h"

/* One event, 56 bytes, no padding (the binary format's record, little-endian on disk). */
typedef struct as_rec {
	uint8_t type;        /* as_ev_type */
	uint8_t flags;       /* EVF_* */
	uint16_t pool;       /* EV_ALLOC, EV_POOL_RELEASE: as_event.pool (binary version 2); else 0 */
	uint32_t slot;       /* alloc/free events: the dense slot; otherwise 0 */
	uint64_t size;       /* requested bytes (alloc) or bytes (segment events) */
	uint64_t stream;
	uint64_t addr;       /* recorded address; EV_PHASE: the label's offset in the label arena */
	int64_t time_us;     /* -1 if unknown */
	uint64_t index;      /* the source record's index (trace entry) */
	uint64_t thread;     /* the requesting thread (0 unknown) */
} as_rec;

typedef struct as_evbuf {
	const as_rec *recs;
	size_t n;
	const char *labels;  /* NUL-terminated labels, back to back */
	size_t nlabels;      /* bytes */
	uint32_t nslots;     /* every slot is below this */
	const uint64_t *ids; /* the trace's own ids, one per record (only with keep_ids: convert) */
	as_meta meta;        /* complete (no end-state segments) */
	char *path;          /* the trace's name, for messages */
	/* storage: owned arrays, or a mapping of a binary file */
	as_rec *own;
	size_t cap;
	char *ownlab;
	size_t caplab;
	void *map;
	size_t maplen;
	uint64_t *ownids;
	int keep_ids;
	uint64_t src_size;   /* a binary cache: the size and modification time (ns) of its trace */
	int64_t src_mtime_ns;
} as_evbuf;

/* Decodes a whole trace (any format; a binary file is mapped, not copied; ro: which device of a
 * snapshot, may be NULL). Errors as the readers'. */
int as_evbuf_load(as_evbuf *b, const char *path, const as_reader_opts *ro, as_err *err);
/* Decodes the rest of an open reader (it is left at its end; the caller closes it); with keep_ids,
 * the events keep the trace's own ids (otherwise an event's id is its slot + 1). */
int as_evbuf_from_reader(as_evbuf *b, as_reader *r, int keep_ids, as_err *err);
/* The same, showing each event to observe(ctx, ev) after it is added (record b->n - 1). */
/* EV NULL: the events start again from the first (as_reader_again): forget those seen. */
typedef void (*as_ev_observer)(void *ctx, const as_event *ev);
int as_evbuf_from_reader_observed(as_evbuf *b, as_reader *r, int keep_ids, as_ev_observer observe, void *ctx, as_err *err);
/* The same, showing every event to observe(ctx, ev) as it is decoded (with the reader's options:
 * ro->keep_sites gives sites); a mapped binary trace's events are shown after the mapping. */
int as_evbuf_load_observed(as_evbuf *b, const char *path, const as_reader_opts *ro, as_ev_observer observe, void *ctx,
	as_err *err);
/* Decodes paths[0..n) into bufs[0..n) (zeroed) with up to jobs threads, each trace once (with one,
 * in this thread, where Ctrl-C/SIGTERM interrupt a read of a FIFO or pipe), each trace's failure in
 * errs[t] (n zeroed entries; code 0: loaded). Returns the number that failed. The caller frees every
 * buffer, loaded or not. */
size_t as_evbuf_load_each(as_evbuf *bufs, const char *const *paths, size_t n, const as_reader_opts *ro, uint64_t jobs,
	as_err *errs);
void as_evbuf_free(as_evbuf *b);
/* Requests that failed with out-of-memory in the recording (EVF_OOM). */
uint64_t as_evbuf_recorded_ooms(const as_evbuf *b);
/* Appends one decoded event (readers, tests). */
void as_evbuf_add(as_evbuf *b, const as_event *ev);

/* One record as an event (labels: the phase label arena; id: the event's id). */
static inline void as_rec_event(const as_rec *x, const char *labels, uint64_t id, as_event *ev)
{
	ev->type = (as_ev_type)x->type;
	ev->flags = x->flags;
	ev->slot = x->slot;
	ev->pool = x->pool;
	ev->id = id;
	ev->size = x->size;
	ev->stream = x->stream;
	ev->addr = x->type == EV_PHASE ? 0 : x->addr;
	ev->time_us = x->time_us;
	ev->pos = x->index;
	ev->index = x->index;
	ev->thread = x->thread;
	ev->label = x->type == EV_PHASE ? labels + x->addr : NULL;
	ev->site = NULL;
}

static inline void as_evbuf_event(const as_evbuf *b, size_t i, as_event *ev)
{
	const as_rec *x = &b->recs[i];
	as_rec_event(x, b->labels, b->ids ? b->ids[i] : (uint64_t)x->slot + 1, ev);
}

/* A binary trace read in chunks (readers/binfmt.h). */
typedef struct as_binstream as_binstream;
int as_binstream_next(as_binstream *s, as_event *ev, as_err *err);

/* A trace decoded into a temporary file (readers/spool.h). */
typedef struct as_spool as_spool;
int as_spool_next(as_spool *s, as_event *ev, as_err *err);

/* Where replayed events come from: a reader (streaming, constant memory), a decoded buffer, a
 * binary trace read in chunks, or a spooled trace. */
typedef struct as_source {
	as_reader *r;
	const as_evbuf *b;
	size_t i;
	as_binstream *bs;
	as_spool *sp;
	int owned;           /* opened by as_source_open (readers/source.h): as_source_close releases it */
} as_source;

static inline int as_source_next(as_source *s, as_event *ev, as_err *err)
{
	if (s->b) {
		if (s->i >= s->b->n)
			return 0;
		as_evbuf_event(s->b, s->i++, ev);
		return 1;
	}
	if (s->bs)
		return as_binstream_next(s->bs, ev, err);
	if (s->sp)
		return as_spool_next(s->sp, ev, err);
	return as_reader_next(s->r, ev, err);
}
#endif
