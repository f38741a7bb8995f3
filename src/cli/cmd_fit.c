/* cmd_fit.c - allocsim fit: what-if searches over capacity and parameters. */
#include "cli/cli.h"
#include "cli/devopts.h"
#include "cli/progress.h"
#include "engine/run.h"
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char fit_usage[] =
	"usage: allocsim fit capacity [options] TRACE\n"
	"       allocsim fit param NAME [options] --capacity SIZE TRACE\n"
	"\n"
	"fit capacity: the smallest capacity (a multiple of 2 MiB, or to the byte with --exact) at which\n"
	"  the replay has no out-of-memory, by bisection between the peak of live requested bytes and the\n"
	"  unlimited run's peak reserved bytes. Caching allocators need not be monotonic in capacity, so\n"
	"  the answer is checked just below, and capacities above and below it are sampled; any sample that\n"
	"  contradicts monotonicity is reported. The last line is the capacity in bytes.\n"
	"fit param: the value of option NAME that minimises the objective with no out-of-memory at the\n"
	"  given capacity. The last line is the best value.\n"
	"\n"
	"  -p, --policy NAME       policy (default pytorch)\n"
	"  -c, --config STRING     other settings\n"
	"      --capacity SIZE     (fit param) the capacity\n"
	"      --exact             (fit capacity) to the byte instead of 2 MiB\n"
	"      --samples N         (fit capacity) monotonicity samples on each side (default 8)\n"
	"      --values LIST       (fit param) values to try (default: the option's own, where it has\n"
	"                          one, e.g. pytorch's max_split_size_mb: none,20..2048:x2)\n"
	"      --objective NAME    (fit param) peak_reserved (default) or num_device_alloc\n"
	"      --device N          the device of a multi-GPU snapshot (default: the one with history)\n"
	"  -j, --jobs N            replays at once (default 1); the output does not depend on it\n"
	"  -h, --help              show this help\n";

/* A replay that a batch ran (fit_batch): at a capacity, or with a configuration (fit param). */
typedef struct fitres {
	uint64_t cap;
	const char *config;
	int r;            /* 1 no out-of-memory, 0 out of memory, -1 error (err) */
	as_summary s;
	as_err err;
} fitres;

typedef struct fitctx {
	as_run_opts o;
	uint64_t runs;     /* the replays the answer used: those -j 1 runs, whatever -j */
	uint64_t jobs;     /* -j: replays at once */
	fitres *known;     /* fit capacity: every capacity replayed so far, and its answer */
	size_t nknown, capknown;
	cli_progress prog; /* on a terminal, after 0.5 s (progress.h) */
} fitctx;

/*
 * -j N: fit's replays are independent of one another, and the search asks for them in an order that a
 * run decides; so fit runs in parallel what the search may ask next and answers each question, in
 * -j 1's order, from what was run. fit capacity's bisection: a round replays the next probe and, on the
 * other threads, the probes that may follow it (both halves, breadth first: log2(N + 1) steps a round);
 * its monotonicity samples, known once the answer is, all at once. fit param: every value at once, on a
 * queue that hands the next value to the first free thread (values cost unequal times: a setting that
 * runs out of memory stops there), printed in order when all are done; with -j 1 one at a time, each
 * line as it comes. The lines, the answer and the replay count printed are -j 1's; the probes a round
 * ran and the search did not ask for are not counted.
 */
typedef struct fitbatch {
	fitctx *f;
	fitres *res;
	int tick; /* each replay done moves the progress bar (fit param; capacity counts what it asks) */
} fitbatch;

static void fit_one(void *ctx, size_t k)
{
	fitbatch *b = ctx;
	fitres *x = &b->res[k];
	as_run_opts o = b->f->o;
	o.capacity = x->cap;
	o.config = x->config;
	o.stop_at_oom = 1;
	as_err_clear(&x->err);
	x->r = -1;
	if (cli_interrupted) {
		as_fail(&x->err, AS_EXIT_INTERRUPTED, "interrupted");
		return;
	}
	if (!as_run(&o, &x->s, &x->err))
		x->r = x->s.num_ooms == 0;
	if (cli_interrupted) {
		as_err_clear(&x->err);
		x->r = -1;
		as_fail(&x->err, AS_EXIT_INTERRUPTED, "interrupted");
	}
	if (b->tick)
		cli_progress_add(&b->f->prog, 1);
}

/* Replays RES[0..n) (their cap and config set) on up to -j threads (with -j 1 in this thread);
 * TICK: each one moves the progress bar. */
static void fit_batch(fitctx *f, fitres *res, size_t n, int tick)
{
	fitbatch b = { f, res, tick };
	if (getenv("ALLOCSIM_JOBS_DEBUG"))
		fprintf(stderr, "allocsim: jobs: fit: %zu replay(s) at once\n", n);
	as_run_indexed(f->jobs, n, fit_one, &b);
}

static fitres *fit_known(fitctx *f, uint64_t cap)
{
	for (size_t i = 0; i < f->nknown; i++)
		if (f->known[i].cap == cap)
			return &f->known[i];
	return NULL;
}

/* Whether capacity C fits (1, 0; -1 on error, err set), as fit's search asks it: from an earlier
 * batch, else from a batch of C and the first of SPEC[0..nspec) not yet known, -j in all. */
static int fit_at(fitctx *f, uint64_t c, const uint64_t *spec, size_t nspec, size_t max, as_err *err)
{
	fitres *x = fit_known(f, c);
	if (!x) {
		fitres *batch = xcalloc(max ? max : 1, sizeof(*batch));
		size_t n = 0;
		batch[n++].cap = c;
		for (size_t i = 0; i < nspec && n < max; i++) {
			int dup = fit_known(f, spec[i]) != NULL;
			for (size_t k = 0; k < n && !dup; k++)
				dup = batch[k].cap == spec[i];
			if (!dup)
				batch[n++].cap = spec[i];
		}
		for (size_t k = 0; k < n; k++)
			batch[k].config = f->o.config;
		fit_batch(f, batch, n, 0);
		for (size_t k = 0; k < n; k++) {
			AS_GROW(f->known, f->nknown, f->capknown, 64);
			f->known[f->nknown++] = batch[k];
		}
		free(batch);
		x = fit_known(f, c);
	}
	f->runs++;
	cli_progress_add(&f->prog, 1); /* (the replays asked: -j 1's count) */
	if (x->r < 0) {
		*err = x->err;
		return -1;
	}
	return x->r;
}

/* One replay; -1 on error or after Ctrl-C/SIGTERM (err says which). */
static int fit_run(fitctx *f, as_summary *s, as_err *err)
{
	if (cli_interrupted)
		return as_fail(err, AS_EXIT_INTERRUPTED, "interrupted");
	f->runs++;
	int rc = as_run(&f->o, s, err);
	cli_progress_add(&f->prog, 1);
	if (cli_interrupted) {
		as_err_clear(err);
		return as_fail(err, AS_EXIT_INTERRUPTED, "interrupted");
	}
	return rc;
}

/* Reports an error, or an interruption: the lines already printed are whole; fit keeps no state. */
static int fit_fail(const fitctx *f, const as_err *err)
{
	if (err->code != AS_EXIT_INTERRUPTED)
		return cli_report(err);
	fprintf(stderr, "%s: error: interrupted after %" PRIu64 " replays: the lines above are complete, the answer is not; "
		"fit does not resume, run the same command again\n", as_progname, f->runs);
	return AS_EXIT_INTERRUPTED;
}

/* fit_at as as_bisect_capacity asks it, with -j's width */
static int fit_cb(void *ctx, uint64_t c, const uint64_t *next, size_t nnext, as_err *err)
{
	fitctx *f = ctx;
	return fit_at(f, c, next, nnext, (size_t)f->jobs, err);
}

static void print_step(void *ctx, uint64_t c, int ok)
{
	(void)ctx;
	printf("capacity %" PRIu64 ": %s\n", c, ok ? "ok" : "OOM");
}

/* HI, known to fit as the unlimited run's peak, checked first: 1 fits, 0 not, -1 error. Its round
 * runs beside it what the bisection asks next (the lower end, then its tree). */
static int fit_hi(fitctx *f, uint64_t g, uint64_t lo, uint64_t hi, as_err *err)
{
	size_t max = (size_t)f->jobs, n = 0;
	uint64_t *next = xmalloc((max + 1) * sizeof(uint64_t));
	if (lo)
		next[n++] = lo * g;
	n += as_bisect_probes(g, lo, hi, 1, next + n, max);
	int r = fit_at(f, hi * g, next, n, max, err);
	free(next);
	return r;
}

static int fit_capacity(fitctx *f, int exact, uint64_t samples)
{
	as_err err = { 0, "" };
	as_summary full;
	f->o.capacity = 0;
	f->o.stop_at_oom = 0;
	if (fit_run(f, &full, &err))
		return fit_fail(f, &err);
	uint64_t g = exact ? 1 : 2ULL << 20;
	uint64_t lo = full.peak_requested_bytes / g;                    /* in units of g; may fail */
	uint64_t hi = (full.peak_reserved_bytes + g - 1) / g;          /* succeeds: the unlimited run */
	/* the replays to come: the one at hi, the bisection's, the samples (at most) */
	size_t steps = 0;
	for (uint64_t w = hi > lo ? hi - lo : 1; w; w >>= 1)
		steps++;
	cli_progress_start(&f->prog, "fit", (size_t)(2 + steps + 2 * samples), cli_progress_delay());
	cli_progress_add(&f->prog, 1);
	char h1[48], h2[48];
	printf("unlimited: peak_reserved_bytes %" PRIu64 "%s, peak_requested_bytes %" PRIu64 "%s\n",
		full.peak_reserved_bytes, as_size_paren(full.peak_reserved_bytes, h1, sizeof h1),
		full.peak_requested_bytes, as_size_paren(full.peak_requested_bytes, h2, sizeof h2));
	int r = fit_hi(f, g, lo, hi, &err);
	if (r < 0)
		return fit_fail(f, &err);
	if (!r) {
		fprintf(stderr, "%s: error: the replay runs out of memory even at its own unlimited peak (%" PRIu64 " bytes)\n",
			as_progname, hi * g);
		return AS_EXIT_SOFTWARE;
	}
	uint64_t best;
	if (as_bisect_capacity(g, lo, hi, 1, (size_t)f->jobs, fit_cb, print_step, f, &best, &err))
		return fit_fail(f, &err);
	/* Monotonicity: samples above must fit, samples below must not; all known now, so replayed
	 * together (spec: every one, in the order asked) */
	int nonmono = 0;
	uint64_t top = full.peak_reserved_bytes, smaller_ok = 0;
	uint64_t *spec = xmalloc((2 * samples + 1) * sizeof(uint64_t));
	size_t nspec = 0;
	for (uint64_t k = 1; k <= samples; k++) {
		uint64_t above = best + (top > best ? (top - best) * k / (samples + 1) : 0);
		above = above / g * g;
		uint64_t below = (full.peak_requested_bytes + (best - full.peak_requested_bytes) * k / (samples + 1)) / g * g;
		if (above > best)
			spec[nspec++] = above;
		if (below < best && below >= g)
			spec[nspec++] = below;
	}
	for (size_t i = 0; i < nspec; i++) { /* above best: must fit; below: must not */
		uint64_t c = spec[i];
		if ((r = fit_at(f, c, spec, nspec, nspec + 1, &err)) < 0) {
			free(spec);
			return fit_fail(f, &err);
		}
		if (c > best && !r) {
			printf("non-monotonic: OOM at capacity %" PRIu64 " although %" PRIu64 " fits\n", c, best);
			nonmono = 1;
		} else if (c < best && r) {
			printf("non-monotonic: capacity %" PRIu64 " fits although %" PRIu64 " runs out of memory\n", c, best - g);
			nonmono = 1;
			if (!smaller_ok || c < smaller_ok)
				smaller_ok = c;
		}
	}
	free(spec);
	printf("checked: %" PRIu64 "%s fits, %" PRIu64 " runs out of memory; %" PRIu64 " replays%s\n", best,
		as_size_paren(best, h1, sizeof h1), best - g, f->runs,
		nonmono ? "; OOM is NOT monotonic in capacity for this trace" : "; no non-monotonic sample found");
	if (smaller_ok)
		printf("smallest capacity seen to fit: %" PRIu64 "\n", smaller_ok);
	printf("%" PRIu64 "\n", best);
	return 0;
}

static int fit_param(fitctx *f, const char *name, const char *values, const char *objective, const char *base)
{
	char **vals = NULL, m[256];
	size_t n = 0;
	if (!values) {
		/* the policy's own default search values for the option, if it has any */
		as_err e = { 0, "" };
		as_device *dev = as_sim_device_new(0, ADDR_MODEL);
		as_counters ctr = { 0 };
		as_policy *pol;
		as_q_fit_values q = { name, NULL };
		if (as_policy_create(f->o.ops, &pol, "", dev, &ctr, &e) == 0) {
			if (as_policy_query(pol, AS_Q_FIT_VALUES, &q))
				q.values = NULL;
			pol->ops->destroy(pol);
		}
		as_device_destroy(dev);
		if (!(values = q.values))
			return cli_usage_error("fit", "--values is required for '%s'", name);
	}
	if (as_parse_values(values, &vals, &n, m, sizeof m)) {
		for (size_t i = 0; i < n; i++)
			free(vals[i]);
		free(vals);
		return cli_usage_error("fit", "--values: %s", m);
	}
	int by_calls = !strcmp(objective, "num_device_alloc");
	if (!by_calls && strcmp(objective, "peak_reserved")) {
		for (size_t i = 0; i < n; i++)
			free(vals[i]);
		free(vals);
		return cli_usage_error("fit", "--objective: peak_reserved or num_device_alloc, not '%s'", objective);
	}
	printf("%s,peak_reserved_bytes,num_device_alloc,num_ooms\n", name);
	cli_progress_start(&f->prog, "fit", n, cli_progress_delay());
	const char *bestv = NULL;
	uint64_t bestobj = UINT64_MAX;
	int rc = 0;
	uint64_t cap = f->o.capacity;
	size_t chunk = f->jobs == 1 ? 1 : n; /* -j 1: a value at a time; else all at once, printed in order */
	fitres *res = xcalloc(chunk ? chunk : 1, sizeof(*res));
	char **confs = xcalloc(chunk ? chunk : 1, sizeof(char *));
	for (size_t i0 = 0; i0 < n && !rc; i0 += chunk) {
		size_t cnt = n - i0 < chunk ? n - i0 : chunk;
		for (size_t k = 0; k < cnt; k++) {
			confs[k] = !strcmp(vals[i0 + k], "none") ? xstrdup(base) : as_conf_with(base, name, vals[i0 + k]);
			res[k].cap = cap;
			res[k].config = confs[k];
		}
		fit_batch(f, res, cnt, 1);
		for (size_t k = 0; k < cnt && !rc; k++) {
			const as_summary *s = &res[k].s;
			f->runs++;
			if (res[k].r < 0) {
				rc = fit_fail(f, &res[k].err);
				break;
			}
			printf("%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", vals[i0 + k], s->peak_reserved_bytes, s->num_device_alloc, s->num_ooms);
			uint64_t obj = by_calls ? s->num_device_alloc : s->peak_reserved_bytes;
			if (!s->num_ooms && obj < bestobj) {
				bestobj = obj;
				bestv = vals[i0 + k];
			}
		}
		for (size_t k = 0; k < cnt; k++)
			free(confs[k]);
	}
	free(res);
	free(confs);
	if (!rc) {
		if (bestv) {
			printf("%s\n", bestv);
		} else {
			fprintf(stderr, "%s: error: no value of %s avoids out-of-memory at this capacity\n", as_progname, name);
			rc = 2;
		}
	}
	for (size_t i = 0; i < n; i++)
		free(vals[i]);
	free(vals);
	return rc;
}

int cmd_fit(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "policy", required_argument, 0, 'p' }, { "config", required_argument, 0, 'c' },
		CLI_DEVOPT(CAPACITY), { "exact", no_argument, 0, 'E' },
		{ "samples", required_argument, 0, 'N' }, { "values", required_argument, 0, 'v' },
		{ "objective", required_argument, 0, 'b' }, CLI_DEVOPT(DEVICE),
		{ "jobs", required_argument, 0, 'j' },
		{ "help", no_argument, 0, 'h' },
		{ "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 },
	};
	as_reader_opts ro = { 0 };
	const char *policy = "pytorch", *config = "", *values = NULL, *objective = "peak_reserved";
	cli_dev dv = { .ro = &ro };
	uint64_t samples = 8, jobs = 1;
	int exact = 0, c, dr;
	optind = 1;
	cli_catch_signals(); /* a replay under way stops at the next event: exit 130 */
	while ((c = getopt_long(argc, argv, "p:c:j:h", lo, NULL)) != -1) {
		if ((dr = cli_devopt("fit", &dv, c, optarg)) >= 0) {
			if (dr)
				return dr;
			continue;
		}
		switch (c) {
		case 'p': policy = optarg; break;
		case 'c': config = optarg; break;
		case 'E': exact = 1; break;
		case 'N':
			if (as_parse_u64(optarg, &samples) || samples > 1000)
				return cli_usage_error("fit", "--samples: '%s' is not a number up to 1000", optarg);
			break;
		case 'v': values = optarg; break;
		case 'j':
			if (as_parse_u64(optarg, &jobs) || !jobs || jobs > 1024)
				return cli_usage_error("fit", "-j: '%s' is not a number of workers (1..1024)", optarg);
			break;
		case 'b': objective = optarg; break;
		case 'h': fputs(fit_usage, stdout); return 0;
		case 'V': cli_version(); return 0;
		default: return cli_usage_error("fit", "invalid option");
		}
	}
	int nargs = argc - optind;
	if (nargs < 1 || (strcmp(argv[optind], "capacity") && strcmp(argv[optind], "param"))) {
		static const char *const subs[] = { "capacity", "param" };
		const char *near = nargs < 1 ? NULL : as_closest(argv[optind], subs, 2);
		if (near)
			return cli_usage_error("fit", "expected 'capacity' or 'param', not '%s': did you mean '%s'?", argv[optind], near);
		return cli_usage_error("fit", "expected 'capacity' or 'param'");
	}
	int is_param = !strcmp(argv[optind], "param");
	if (nargs != (is_param ? 3 : 2))
		return cli_usage_error("fit", is_param ? "expected: fit param NAME TRACE" : "expected: fit capacity TRACE");
	const char *trace = argv[argc - 1];
	fitctx f;
	memset(&f, 0, sizeof f);
	f.o.ops = as_policy_find(policy);
	if (!f.o.ops) {
		char um[256];
		as_policy_unknown(policy, um, sizeof um);
		return cli_usage_error("fit", "%s", um);
	}
	f.o.path = trace;
	f.jobs = jobs;
	f.o.config = config;
	f.o.addr_mode = ADDR_AUTO;
	f.o.reader = &ro;
	as_err err = { 0, "" };
	cli_catch_signals(); /* from here Ctrl-C/SIGTERM end the fit with 130 (fit_fail) */
	as_evbuf buf; /* decoded once; every trial replays it */
	if (as_evbuf_load(&buf, trace, &ro, &err))
		return cli_interrupted ? fit_fail(&f, &(as_err){ AS_EXIT_INTERRUPTED, "" }) : cli_report(&err);
	f.o.events = &buf;
	char *rec = as_recorded_settings(&buf.meta);
	f.o.recorded = rec;
	int rc;
	if (is_param) {
		if (!dv.capacity)
			rc = cli_usage_error("fit", "fit param needs --capacity");
		else {
			f.o.capacity = dv.capacity;
			rc = fit_param(&f, argv[optind + 1], values, objective, config);
		}
	} else {
		rc = fit_capacity(&f, exact, samples);
	}
	cli_progress_end(&f.prog);
	free(f.known);
	free(rec);
	as_evbuf_free(&buf);
	return rc;
}
