/* hostlog.c - reader for pinned host-memory logs (header op,id,size,ptr), as scripts/capture-beyond.py's
 * pinned scenario writes them beside a run's torch.cuda.host_memory_stats():
 *   a,ID,SIZE,PTR  a pinned allocation of SIZE requested bytes that PyTorch placed at PTR
 *   f,ID,0,0       the program freed ID after a copy used it: the event recorded at the free may still be
 *                  pending (free_requested)
 *   d,ID,0,0       that event was seen complete before the next request (free_completed)
 *   e,0,0,0        torch._C._host_emptyCache()
 * Numbers are decimal (or 0x hex); every request is on stream 0 (the host cache is not per stream).
 *
 * The capture polls its own event just before each request and PyTorch queries its event a moment
 * later, inside the request, so PyTorch can see a copy complete that the log's d line shows only later.
 * The ptr column tells: a request placed at the ptr of a block freed (f) whose d has not come yet reuses
 * that block, so its event, and every event recorded before it on the copy stream (events complete in
 * order), had completed. The reader then completes those frees first (free events before the alloc)
 * and skips their later d lines; doc/trace-format.md. */
#include "readers/trace.h"
#include "util/idmap.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define HOSTLOG_HEADER "op,id,size,ptr"

/* A block freed by the program (f) whose event is not known to be complete, in the order of the frees. */
typedef struct host_pend {
	uint64_t id, ptr;
	int done;     /* its free was completed (by its d, or early: see the top) */
} host_pend;

typedef struct host_state {
	char *line;
	size_t cap;
	uint64_t lineno, nrec;
	idmap ptrs;      /* id -> recorded ptr + 1, of every live allocation with a ptr */
	idmap freed;     /* id -> index + 1 in pend, for ids freed whose d has not come */
	idmap early;     /* ids completed early: their d line is skipped */
	idmap pend_at;   /* recorded ptr -> index + 1 in pend, of pending frees not done */
	host_pend *pend;
	size_t npend, cappend, head; /* pend[head..npend) may hold pending frees */
	as_event alloc;  /* an alloc held back while the frees before it are emitted */
	size_t upto;     /* emit the frees pend[head..upto), then the held alloc */
	int holding;
} host_state;

/* The next early-completed free before the held alloc, or the alloc itself; 0 when nothing is held. */
static int host_release(host_state *s, as_event *ev)
{
	while (s->head < s->upto) {
		host_pend *p = &s->pend[s->head++];
		if (p->done)
			continue;
		p->done = 1;
		idmap_del(&s->freed, p->id);
		idmap_del(&s->ptrs, p->id);
		if (p->ptr)
			idmap_del(&s->pend_at, p->ptr);
		idmap_put(&s->early, p->id, (void *)1);
		memset(ev, 0, sizeof(*ev));
		ev->type = EV_FREE;
		ev->id = p->id;
		ev->pos = s->alloc.pos;
		ev->index = s->alloc.index;
		ev->time_us = -1;
		return 1;
	}
	if (s->head == s->npend)
		s->head = s->npend = s->upto = 0; /* nothing pending: start the array over */
	if (!s->holding)
		return 0;
	s->holding = 0;
	*ev = s->alloc;
	return 1;
}

static int host_next(as_reader *r, as_event *ev, as_err *err)
{
	host_state *s = r->priv;
	if (host_release(s, ev))
		return 1;
	for (;;) {
		char *f[4];
		int rc = as_reader_csv_line(r, &s->line, &s->cap, &s->lineno, f, 4, "op,id,size,ptr", err);
		if (rc <= 0)
			return rc;
		uint64_t id, size, ptr;
		if (as_parse_num(f[1], &id))
			return as_reader_line_err(r, s->lineno, err, "invalid id", f[1]);
		if (as_parse_num(f[2], &size))
			return as_reader_line_err(r, s->lineno, err, "invalid size", f[2]);
		if (as_parse_num(f[3], &ptr))
			return as_reader_line_err(r, s->lineno, err, "invalid pointer", f[3]);
		memset(ev, 0, sizeof(*ev));
		ev->pos = s->lineno;
		ev->index = s->nrec++;
		ev->time_us = -1;
		ev->id = id;
		if (!strcmp(f[0], "a")) {
			ev->type = EV_ALLOC;
			ev->size = size;
			ev->addr = ptr;
			if (idmap_get(&s->early, id)) {
				char m[128];
				snprintf(m, sizeof m, "id %" PRIu64 " allocated again before the d line of its earlier allocation", id);
				return as_reader_line_err(r, s->lineno, err, m, NULL);
			}
			void *k = ptr ? idmap_get(&s->pend_at, ptr) : NULL;
			if (ptr && !idmap_get(&s->ptrs, id))
				idmap_put(&s->ptrs, id, (void *)(uintptr_t)(ptr + 1));
			if (!k)
				return 1;
			/* PyTorch reused a block whose d is not logged yet: complete it and the frees before it */
			s->alloc = *ev;
			s->holding = 1;
			s->upto = (size_t)(uintptr_t)k;
			return host_release(s, ev);
		}
		if (strcmp(f[0], "f") && strcmp(f[0], "d") && strcmp(f[0], "e"))
			return as_reader_line_err(r, s->lineno, err, "unknown op (expected a, f, d or e)", f[0]);
		if (size || ptr)
			return as_reader_line_err(r, s->lineno, err, "size and ptr must be 0 but for an allocation (op a)", NULL);
		if (f[0][0] == 'e') {
			if (id)
				return as_reader_line_err(r, s->lineno, err, "id must be 0 for empty_cache (op e)", NULL);
			ev->type = EV_EMPTY_CACHE;
		} else if (f[0][0] == 'f') {
			ev->type = EV_FREE_REQ; /* the reader's own checks refuse an id that is not live, or freed twice */
			if (idmap_get(&s->freed, id))
				return 1; /* freed twice: as_reader_next says so */
			if (s->npend == s->cappend) {
				s->cappend = s->cappend ? 2 * s->cappend : 64;
				s->pend = xrealloc(s->pend, s->cappend * sizeof(*s->pend));
			}
			uint64_t p = (uint64_t)(uintptr_t)idmap_get(&s->ptrs, id);
			host_pend *hp = &s->pend[s->npend++];
			*hp = (host_pend){ id, p ? p - 1 : 0, 0 };
			idmap_put(&s->freed, id, (void *)(uintptr_t)s->npend);
			if (hp->ptr)
				idmap_put(&s->pend_at, hp->ptr, (void *)(uintptr_t)s->npend);
		} else {
			if (idmap_del(&s->early, id))
				continue; /* completed early already */
			void *k = idmap_del(&s->freed, id);
			if (!k) {
				char m[96];
				snprintf(m, sizeof m, "event of id %" PRIu64 " completed (op d) before the program freed it (op f)", id);
				return as_reader_line_err(r, s->lineno, err, m, NULL);
			}
			host_pend *hp = &s->pend[(size_t)(uintptr_t)k - 1];
			hp->done = 1;
			if (hp->ptr)
				idmap_del(&s->pend_at, hp->ptr);
			idmap_del(&s->ptrs, id);
			while (s->head < s->npend && s->pend[s->head].done)
				s->head++;
			if (s->head == s->npend)
				s->head = s->npend = s->upto = 0; /* nothing pending: start the array over */
			ev->type = EV_FREE;
		}
		return 1;
	}
}

static void host_close(as_reader *r)
{
	host_state *s = r->priv;
	if (!s)
		return;
	free(s->line);
	idmap_free(&s->ptrs);
	idmap_free(&s->freed);
	idmap_free(&s->early);
	idmap_free(&s->pend_at);
	free(s->pend);
	free(s);
}

static const struct as_reader_ops host_ops = { "host", host_next, host_close };

int as_hostlog_open(as_reader *r, const as_reader_opts *o, as_err *err)
{
	(void)o;
	host_state *s = xcalloc(1, sizeof(*s));
	idmap_init(&s->ptrs);
	idmap_init(&s->freed);
	idmap_init(&s->early);
	idmap_init(&s->pend_at);
	r->priv = s;
	r->ops = &host_ops;
	r->pos_is_line = 1;
	snprintf(r->meta.format, sizeof r->meta.format, "host");
	snprintf(r->meta.source, sizeof r->meta.source, "pytorch-host-log");
	int rc = as_input_line(&r->in, &s->line, &s->cap, err);
	s->lineno = 1;
	if (rc <= 0)
		return -1;
	if (strcmp(s->line, HOSTLOG_HEADER))
		return as_reader_line_err(r, 1, err, "bad pinned host log header (expected '" HOSTLOG_HEADER "'):", s->line);
	return 0;
}
