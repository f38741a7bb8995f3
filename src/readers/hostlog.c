/* hostlog.c - reader for pinned host-memory logs (header op,id,size,ptr), as scripts/capture-beyond.py's
 * pinned scenario writes them beside a run's torch.cuda.host_memory_stats():
 *   a,ID,SIZE,PTR  a pinned allocation of SIZE requested bytes that PyTorch placed at PTR
 *   f,ID,0,0       the program freed ID after a copy used it: the event recorded at the free may still be
 *                  pending (free_requested)
 *   d,ID,0,0       that event was seen complete before the next request (free_completed)
 *   e,0,0,0        torch._C._host_emptyCache()
 * Numbers are decimal (or 0x hex); every request is on stream 0 (the host cache is not per stream). */
#include "readers/trace.h"
#include "util/idmap.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define HOSTLOG_HEADER "op,id,size,ptr"

typedef struct host_state {
	char *line;
	size_t cap;
	uint64_t lineno, nrec;
	idmap freed; /* ids freed by the program ('f') whose 'd' has not come */
} host_state;

static int herr(as_reader *r, uint64_t line, as_err *err, const char *what, const char *arg)
{
	return as_fail(err, AS_EXIT_DATAERR, "%s:%" PRIu64 ": %s%s%s%s", r->in.path, line, what,
		arg ? " '" : "", arg ? arg : "", arg ? "'" : "");
}

static int host_next(as_reader *r, as_event *ev, as_err *err)
{
	host_state *s = r->priv;
	for (;;) {
		int rc = as_input_line(&r->in, &s->line, &s->cap, err);
		if (rc <= 0)
			return rc;
		s->lineno++;
		if (!s->line[0])
			continue;
		char *f[4];
		int nf = 0;
		for (char *p = s->line;;) {
			if (nf == 4)
				return herr(r, s->lineno, err, "too many fields (expected op,id,size,ptr)", NULL);
			f[nf++] = p;
			char *c = strchr(p, ',');
			if (!c)
				break;
			*c = 0;
			p = c + 1;
		}
		if (nf != 4)
			return herr(r, s->lineno, err, "expected 4 fields (op,id,size,ptr)", NULL);
		uint64_t id, size, ptr;
		if (as_parse_num(f[1], &id))
			return herr(r, s->lineno, err, "invalid id", f[1]);
		if (as_parse_num(f[2], &size))
			return herr(r, s->lineno, err, "invalid size", f[2]);
		if (as_parse_num(f[3], &ptr))
			return herr(r, s->lineno, err, "invalid pointer", f[3]);
		memset(ev, 0, sizeof(*ev));
		ev->pos = s->lineno;
		ev->index = s->nrec++;
		ev->time_us = -1;
		ev->id = id;
		if (!strcmp(f[0], "a")) {
			ev->type = EV_ALLOC;
			ev->size = size;
			ev->addr = ptr;
			return 1;
		}
		if (strcmp(f[0], "f") && strcmp(f[0], "d") && strcmp(f[0], "e"))
			return herr(r, s->lineno, err, "unknown op (expected a, f, d or e)", f[0]);
		if (size || ptr)
			return herr(r, s->lineno, err, "size and ptr must be 0 but for an allocation (op a)", NULL);
		if (f[0][0] == 'e') {
			if (id)
				return herr(r, s->lineno, err, "id must be 0 for empty_cache (op e)", NULL);
			ev->type = EV_EMPTY_CACHE;
		} else if (f[0][0] == 'f') {
			ev->type = EV_FREE_REQ; /* the reader's own checks refuse an id that is not live, or freed twice */
			idmap_put(&s->freed, id, (void *)1);
		} else {
			if (!idmap_del(&s->freed, id)) {
				char m[96];
				snprintf(m, sizeof m, "event of id %" PRIu64 " completed (op d) before the program freed it (op f)", id);
				return herr(r, s->lineno, err, m, NULL);
			}
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
	idmap_free(&s->freed);
	free(s);
}

static const struct as_reader_ops host_ops = { "host", host_next, host_close };

int as_hostlog_open(as_reader *r, const as_reader_opts *o, as_err *err)
{
	(void)o;
	host_state *s = xcalloc(1, sizeof(*s));
	idmap_init(&s->freed);
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
		return herr(r, 1, err, "bad pinned host log header (expected '" HOSTLOG_HEADER "'):", s->line);
	return 0;
}
