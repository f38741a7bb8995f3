/* run.c - one whole replay as a library call. */
#include "engine/run.h"
#include "engine/engine_impl.h"
#include "engine/reconcile.h"
#include "engine/lifetimes.h"
#include "readers/source.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

char *as_recorded_settings(const as_meta *m)
{
	return m->has_settings ? xstrdup(m->settings ? m->settings : "") : NULL;
}

int as_run(const as_run_opts *o, as_summary *out, as_err *err)
{
	as_engine e;
	int rc = -1;
	as_source own = { .b = o->events }, *src = o->source ? o->source : &own;
	if (!o->source && !o->events) {
		as_source_opts so = { .ro = o->reader };
		if (as_source_open(&own, o->path, &so, err))
			return -1;
	}
	const as_meta *meta = as_source_meta(src);
	const as_run_sink *sk = o->sink;
	uint64_t cap = o->device || o->capacity ? o->capacity : meta->capacity;
	as_device *dev = o->device;
	if (!dev) {
		dev = as_sim_device_new(cap, o->addr_mode);
		as_dev_set_total(dev, meta->device_total); /* the recorded card's, where the trace says */
		as_dev_set_model(dev, o->model);
	}
	as_lifetimes lt;
	as_lifetimes_init(&lt);
	/* the policy's settings on this trace, as every command takes them (a no-op on settings already
	 * prepared: sweep's and compare's rows show them; fit and advise run them) */
	char *conf = xstrdup(o->config);
	if (!o->prepared)
		as_policy_prepare(o->ops, meta, cap, &conf);
	int ok = as_engine_init(&e, o->ops, conf, dev, err) == 0;
	if (ok)
		as_engine_free_at(&e, o->free_at);
	if (ok && sk && sk->start && sk->start(sk->ctx, &e, err)) {
		as_engine_free(&e);
		ok = 0;
	}
	if (ok && (src->b ? as_plan_from_events(&e, &lt, src->b, err) : as_plan_from_trace(&e, &lt, o->path, err))) {
		as_engine_free(&e);
		ok = 0;
	}
	if (ok) {
		if (!o->full_stats)
			as_policy_query(e.pol, AS_Q_LEAN, NULL); /* a run's summary needs no memory_stats() */
		if (o->source && !o->recorded && !o->no_stage) /* the metadata is complete: the recorded settings are known */
			as_reconcile_for_trace(&e, meta, o->path, conf);
		else if (!o->no_stage)
			as_reconcile_attach(&e, o->recorded ? as_policy_recorded(o->ops, o->recorded, conf) : o->resolve_maybe);
		struct timespec t0;
		if (o->wall)
			clock_gettime(CLOCK_MONOTONIC, &t0);
		as_event ev;
		int st;
		void (*before)(void *, as_engine *, const as_event *) = sk ? sk->before : NULL;
		int (*on_event)(void *, as_engine *, const as_event *) = sk ? sk->event : NULL;
		void *sctx = sk ? sk->ctx : NULL;
		int stop = o->stop_at_oom;
		uint64_t rec_ooms = 0;
		if (!before && !on_event) { /* sweep's, fit's runs: the engine's own loop */
			as_engine_replay(&e, src, stop, o->recorded_ooms ? &rec_ooms : NULL, err);
		} else {
			while ((st = as_source_next(src, &ev, err)) > 0) {
				if (cli_interrupted)
					break;
				rec_ooms += ev.type == EV_ALLOC && (ev.flags & EVF_OOM);
				if (before)
					before(sctx, &e, &ev);
				if (as_engine_step_inline(&e, &ev, err))
					break;
				if (on_event && on_event(sctx, &e, &ev))
					break;
				if (stop && e.s.num_ooms) {
					as_source_check_rest(src, err); /* the rest of a binary trace is validated all the same */
					break;
				}
			}
		}
		if (o->recorded_ooms)
			*o->recorded_ooms = rec_ooms;
		as_check_interrupted(err);
		if (!err->code) {
			double wall = o->wall ? as_seconds_since(&t0) : 0.0;
			if (sk && sk->event)
				sk->event(sk->ctx, &e, NULL);
			as_engine_finish(&e);
			e.s.wall_seconds = wall;
			*out = e.s;
			rc = 0;
			if (sk && sk->row && sk->row(sk->ctx, &e, out, err))
				rc = -1;
		}
		as_engine_free(&e);
	}
	if (!o->device)
		as_device_destroy(dev);
	as_lifetimes_free(&lt);
	as_source_close(&own);
	free(conf);
	return rc;
}

int as_bisect_capacity(uint64_t g, uint64_t lo, uint64_t hi, uint64_t tol, size_t ahead,
	int (*fits)(void *ctx, uint64_t cap, const uint64_t *next, size_t nnext, as_err *err),
	void (*step)(void *ctx, uint64_t cap, int ok), void *ctx, uint64_t *best, as_err *err)
{
	uint64_t *next = ahead ? xmalloc((ahead + 1) * sizeof(uint64_t)) : NULL;
	size_t n = 0;
	int r, rc = -1;
	if (lo) {
		if (ahead) { /* the lower end, asked first, then the bisection's tree */
			next[0] = lo * g;
			n = 1 + as_bisect_probes(g, lo, hi, tol, next + 1, ahead);
		}
		if ((r = fits(ctx, lo * g, next, n, err)) < 0)
			goto out;
		if (r)
			hi = lo; /* already fits at the lower bound */
	}
	while (hi > lo && hi - lo > tol) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (ahead)
			n = as_bisect_probes(g, lo, hi, tol, next, ahead);
		if ((r = fits(ctx, mid * g, next, n, err)) < 0)
			goto out;
		if (step)
			step(ctx, mid * g, r);
		if (r)
			hi = mid;
		else
			lo = mid;
	}
	*best = hi * g;
	rc = 0;
out:
	free(next);
	return rc;
}

size_t as_bisect_probes(uint64_t g, uint64_t lo, uint64_t hi, uint64_t tol, uint64_t *out, size_t max)
{
	size_t n = 0, qn = 0, qh = 0, qcap = 2 * max + 2;
	uint64_t (*q)[2] = xmalloc(qcap * sizeof(*q));
	q[qn][0] = lo, q[qn++][1] = hi;
	while (qh < qn && n < max) {
		uint64_t l = q[qh][0], h = q[qh++][1];
		if (h <= l || h - l <= tol)
			continue;
		uint64_t mid = l + (h - l) / 2;
		out[n++] = mid * g;
		if (qn + 2 <= qcap) {
			q[qn][0] = l, q[qn++][1] = mid;
			q[qn][0] = mid, q[qn++][1] = h;
		}
	}
	free(q);
	return n;
}

static void add_val(char ***vals, size_t *n, const char *v)
{
	*vals = xrealloc(*vals, (*n + 1) * sizeof(char *));
	(*vals)[(*n)++] = xstrdup(v);
}

int as_parse_values(const char *spec, char ***vals, size_t *n, char *msg, size_t len)
{
	char *copy = xstrdup(spec), *save = NULL;
	int rc = 0;
	for (char *it = strtok_r(copy, ",", &save); it && !rc; it = strtok_r(NULL, ",", &save)) {
		char *dots = strstr(it, "..");
		if (!dots) {
			add_val(vals, n, it);
			continue;
		}
		*dots = 0;
		char *hi = dots + 2, *step = strchr(hi, ':');
		uint64_t a, b, k;
		if (!step || (step[1] != 'x' && step[1] != '+')) {
			snprintf(msg, len, "range '%s..%s' needs a step ':xK' or ':+K'", it, hi);
			rc = -1;
			break;
		}
		*step = 0;
		/* the ends and an arithmetic step are sizes: 16GiB..24GiB:+2GiB (plain numbers read as before) */
		char m2[128];
		if (as_parse_size(it, &a, m2, sizeof m2) || as_parse_size(hi, &b, m2, sizeof m2) ||
		    (step[1] == 'x' ? as_parse_u64(step + 2, &k) : as_parse_size(step + 2, &k, m2, sizeof m2)) || a > b ||
		    (step[1] == 'x' && (k < 2 || !a)) || (step[1] == '+' && !k)) {
			snprintf(msg, len, "bad range '%s..%s:%c%s' (expected A..B:+STEP or A..B:xFACTOR, A <= B; A, B and STEP "
				"numbers or sizes such as 16GiB)", it, hi, step[1], step + 2);
			rc = -1;
			break;
		}
		char buf[32];
		for (uint64_t v = a; v <= b; v = step[1] == 'x' ? v * k : v + k) {
			snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
			add_val(vals, n, buf);
			if (*n > 100000 || (step[1] == 'x' && v > UINT64_MAX / k) || (step[1] == '+' && v > UINT64_MAX - k))
				break;
		}
	}
	free(copy);
	if (!rc && !*n) {
		snprintf(msg, len, "no values");
		rc = -1;
	}
	return rc;
}
