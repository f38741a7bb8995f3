/* evbuf.c - a whole trace decoded once (see evbuf.h). */
#include "readers/evbuf.h"
#include "readers/binfmt.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

_Static_assert(sizeof(as_rec) == 56, "as_rec is the binary format's 56-byte record");

void as_evbuf_add(as_evbuf *b, const as_event *ev)
{
	if (b->n == b->cap) {
		b->cap = b->cap ? b->cap * 2 : 4096;
		b->own = xrealloc(b->own, b->cap * sizeof(*b->own));
		b->recs = b->own;
		if (b->keep_ids)
			b->ids = b->ownids = xrealloc(b->ownids, b->cap * sizeof(*b->ownids));
	}
	if (b->keep_ids)
		b->ownids[b->n] = ev->id;
	as_rec *x = &b->own[b->n++];
	x->type = (uint8_t)ev->type;
	x->flags = (uint8_t)ev->flags;
	x->pool = (uint16_t)ev->pool;
	x->slot = ev->type <= EV_FREE ? ev->slot : 0;
	x->size = ev->size;
	x->stream = ev->stream;
	x->addr = ev->addr;
	x->time_us = ev->time_us;
	x->index = ev->index;
	x->thread = ev->thread;
	if (ev->type <= EV_FREE && ev->slot >= b->nslots)
		b->nslots = ev->slot + 1;
	if (ev->type == EV_PHASE) {
		const char *l = ev->label ? ev->label : "";
		size_t len = strlen(l) + 1;
		while (b->nlabels + len > b->caplab) {
			b->caplab = b->caplab ? b->caplab * 2 : 256;
			b->ownlab = xrealloc(b->ownlab, b->caplab);
			b->labels = b->ownlab;
		}
		memcpy(b->ownlab + b->nlabels, l, len);
		x->addr = b->nlabels;
		b->nlabels += len;
	}
}

static int from_reader(as_evbuf *b, as_reader *r, int keep_ids, as_ev_observer observe, void *ctx, as_err *err);

int as_evbuf_from_reader(as_evbuf *b, as_reader *r, int keep_ids, as_err *err)
{
	return from_reader(b, r, keep_ids, NULL, NULL, err);
}

int as_evbuf_from_reader_observed(as_evbuf *b, as_reader *r, int keep_ids, as_ev_observer observe, void *ctx, as_err *err)
{
	return from_reader(b, r, keep_ids, observe, ctx, err);
}

static int from_reader(as_evbuf *b, as_reader *r, int keep_ids, as_ev_observer observe, void *ctx, as_err *err)
{
	as_event ev;
	int rc = 0;
	memset(b, 0, sizeof(*b));
	b->keep_ids = keep_ids;
	b->path = xstrdup(r->in.path ? r->in.path : "-");
	while (!cli_interrupted && (rc = as_reader_next(r, &ev, err)) > 0) {
		as_evbuf_add(b, &ev);
		if (observe)
			observe(ctx, &ev);
	}
	if (as_check_interrupted(err)) /* Ctrl-C: stop decoding (a read the signal cut short too) */
		rc = -1;
	if (rc < 0) {
		as_evbuf_free(b);
		return -1;
	}
	if (as_reader_again(r)) { /* private pools found released (snapshot.c): all again, with their pools */
		as_evbuf_free(b);
		as_reader *q;
		if (as_reader_reopen(r, &q, err))
			return -1;
		if (observe)
			observe(ctx, NULL);
		rc = from_reader(b, q, keep_ids, observe, ctx, err);
		as_reader_close(q);
		return rc;
	}
	/* The metadata is complete now (a snapshot's settings come last): take it over. */
	b->meta = r->meta;
	memset(&r->meta, 0, sizeof r->meta);
	if (b->cap > b->n && b->n) { /* give back the doubling's slack */
		b->own = xrealloc(b->own, b->n * sizeof(*b->own));
		b->recs = b->own;
		if (b->keep_ids)
			b->ids = b->ownids = xrealloc(b->ownids, b->n * sizeof(*b->ownids));
		b->cap = b->n;
	}
	return 0;
}

int as_evbuf_load(as_evbuf *b, const char *path, const as_reader_opts *ro, as_err *err)
{
	return as_evbuf_load_observed(b, path, ro, NULL, NULL, err);
}

int as_evbuf_load_observed(as_evbuf *b, const char *path, const as_reader_opts *ro, as_ev_observer observe, void *ctx,
	as_err *err)
{
	int m = as_binfmt_map(b, path, err);
	if (m == 0 && ro && ro->has_device && ro->device != 0) {
		as_fail(err, AS_EXIT_DATAERR, "%s: a binary trace holds one device (0), not device %d", path, ro->device);
		as_evbuf_free(b);
		return -1;
	}
	if (m < 0)
		return m; /* a bad binary trace */
	if (m == 0) { /* mapped in place */
		if (observe)
			for (size_t i = 0; i < b->n; i++) {
				as_event ev;
				as_evbuf_event(b, i, &ev);
				observe(ctx, &ev);
			}
		return 0;
	}
	as_reader *r;
	if (as_reader_open(&r, path, ro, err))
		return -1;
	int rc = from_reader(b, r, 0, observe, ctx, err);
	as_reader_close(r);
	return rc;
}

typedef struct loadmany {
	as_evbuf *bufs;
	const char *const *paths;
	const as_reader_opts *ro;
	as_err *errs;
} loadmany;

static void load_one(void *arg, size_t t)
{
	loadmany *l = arg;
	as_evbuf_load(&l->bufs[t], l->paths[t], l->ro, &l->errs[t]);
}

size_t as_evbuf_load_each(as_evbuf *bufs, const char *const *paths, size_t n, const as_reader_opts *ro, uint64_t jobs,
	as_err *errs)
{
	loadmany l = { bufs, paths, ro, errs };
	as_run_indexed(jobs, n, load_one, &l);
	size_t bad = 0;
	for (size_t t = 0; t < n; t++)
		bad += errs[t].code != 0;
	return bad;
}

void as_evbuf_free(as_evbuf *b)
{
	free(b->own);
	free(b->ownlab);
	free(b->ownids);
	free(b->path);
	if (b->map)
		munmap(b->map, b->maplen);
	as_meta_free(&b->meta);
	memset(b, 0, sizeof(*b));
}

uint64_t as_evbuf_recorded_ooms(const as_evbuf *b)
{
	uint64_t n = 0;
	for (size_t i = 0; i < b->n; i++)
		n += b->recs[i].type == EV_ALLOC && (b->recs[i].flags & EVF_OOM);
	return n;
}
