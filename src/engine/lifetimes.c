/* lifetimes.c - allocation lifetimes from a first pass over the decoded events (lifetimes.h). */
#include "engine/lifetimes.h"
#include "engine/engine_impl.h"
#include <stdlib.h>
#include <string.h>

void as_lifetimes_init(as_lifetimes *l)
{
	memset(l, 0, sizeof(*l));
	idmap_init(&l->open);
}

void as_lifetimes_free(as_lifetimes *l)
{
	free(l->v);
	idmap_free(&l->open);
	memset(l, 0, sizeof(*l));
}

/* The engine numbers the events it replays: everything but the segment events (informational)
 * and inferred empty_cache() calls (a stage's business); see as_engine_apply. */
static int counted(const as_event *ev)
{
	return ev->type < EV_SEG_ALLOC && !(ev->type == EV_EMPTY_CACHE && (ev->flags & EVF_MAYBE));
}

void as_lifetimes_add(as_lifetimes *l, const as_event *ev)
{
	if (!counted(ev))
		return;
	uint64_t idx = l->events++;
	if (ev->type == EV_ALLOC) {
		AS_GROW(l->v, l->n, l->cap, 1024);
		l->v[l->n] = (as_lifetime){ .alloc = idx, .free = AS_NEVER, .size = ev->size, .stream = ev->stream };
		idmap_put(&l->open, ev->id, (void *)(uintptr_t)(l->n + 1));
		l->n++;
	} else if (ev->type == EV_FREE || (ev->type == EV_FREE_REQ && l->at_request)) {
		uintptr_t k = (uintptr_t)idmap_del(&l->open, ev->id);
		if (k)
			l->v[k - 1].free = idx;
	}
}

int as_lifetimes_from_trace(as_lifetimes *l, const char *path, as_err *err)
{
	as_reader *r;
	as_event ev;
	int rc;
	if (as_reader_open(&r, path, NULL, err))
		return -1;
	while ((rc = as_reader_next(r, &ev, err)) > 0)
		as_lifetimes_add(l, &ev);
	as_reader_close(r);
	return rc < 0 ? -1 : 0;
}

static int hand_plan(as_engine *e, as_lifetimes *l, as_err *err)
{
	as_q_plan q = { l->v, l->n };
	if (as_policy_query(e->pol, AS_Q_PLAN, &q))
		return as_fail(err, AS_EXIT_SOFTWARE, "internal: the %s policy declares a plan step but does not answer it", e->pol->ops->name);
	return 0;
}

int as_plan_from_events(as_engine *e, as_lifetimes *l, const as_evbuf *b, as_err *err)
{
	if (!(e->pol->ops->flags & AS_CAP_PLAN))
		return 0;
	as_event ev;
	l->at_request = e->free_early;
	for (size_t i = 0; i < b->n; i++) {
		as_evbuf_event(b, i, &ev);
		as_lifetimes_add(l, &ev);
	}
	return hand_plan(e, l, err);
}

int as_plan_from_array(as_engine *e, as_lifetimes *l, const as_event *v, size_t n, as_err *err)
{
	if (!(e->pol->ops->flags & AS_CAP_PLAN))
		return 0;
	l->at_request = e->free_early;
	for (size_t i = 0; i < n; i++)
		as_lifetimes_add(l, &v[i]);
	return hand_plan(e, l, err);
}

int as_plan_from_trace(as_engine *e, as_lifetimes *l, const char *path, as_err *err)
{
	if (!(e->pol->ops->flags & AS_CAP_PLAN))
		return 0;
	if (!strcmp(path, "-"))
		return as_fail(err, AS_EXIT_USAGE, "the %s policy plans over the whole trace first: it needs a file, not standard input",
			e->pol->ops->name);
	l->at_request = e->free_early;
	if (as_lifetimes_from_trace(l, path, err))
		return -1;
	as_q_plan q = { l->v, l->n };
	if (as_policy_query(e->pol, AS_Q_PLAN, &q))
		return as_fail(err, AS_EXIT_SOFTWARE, "internal: the %s policy declares a plan step but does not answer it", e->pol->ops->name);
	return 0;
}
