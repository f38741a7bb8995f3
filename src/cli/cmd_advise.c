/* cmd_advise.c - allocsim advise: from a snapshot to the PyTorch settings that would have fitted.
 *
 * The snapshot is decoded once; a curated grid of PYTORCH_CUDA_ALLOC_CONF settings (the current
 * one first) is replayed from it in parallel, each at the target capacity and without a limit, and
 * for each the smallest capacity it needs is found by bisection. The recommendation is the fitting
 * setting that needs the least memory. Output: a table (sizes in GiB), CSV or JSON. */
#include "cli/cli.h"
#include "cli/devopts.h"
#include "cli/progress.h"
#include "engine/run.h"
#include "engine/blame.h"
#include "util/outfile.h"
#include "util/oommsg.h"
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

static const char advise_usage[] =
	"usage: allocsim advise [options] SNAPSHOT\n"
	"\n"
	"Replays a PyTorch trace under a grid of PYTORCH_CUDA_ALLOC_CONF settings at a target memory and\n"
	"recommends the one that needs the least memory. Exit status 0 if some setting fits the target,\n"
	"3 if none does; without a target, for a recording that ran out of memory: 0 if some setting is\n"
	"shown to fit its limit (it needs no more than the recording held), 4 if none is (give a target).\n"
	"\n"
	"Target memory (default: the limit the trace records, if any; otherwise none):\n"
	"      --capacity SIZE     e.g. 40GiB, 17.30GiB (rounded down to bytes; K, M, G = KiB, MiB, GiB)\n"
	"      --oom-message MSG   PyTorch's out-of-memory message, or @FILE holding it: the target is its\n"
	"                          'X allowed' (a memory fraction), else what PyTorch held plus what was free\n"
	"      --gpu NAME          the memory of a common GPU ('--gpu list' shows the table)\n"
	"      --fraction F        set_per_process_memory_fraction(F) x the device total: --device-total,\n"
	"                          --gpu's memory, the --oom-message's total capacity, or the trace's\n"
	"      --device-total SIZE the device's total memory, for --fraction\n"
	"\n"
	"  -c, --config STRING     the current settings (default: the recorded ones; none if not recorded)\n"
	"  -j, --jobs N            worker threads (default: the number of processors)\n"
	"      --format FMT        table (default), csv or json\n"
	"  -o, --output FILE       write there instead of standard output\n"
	"      --no-fit            skip the search for each setting's smallest capacity (faster)\n"
	"      --latency-model F   device-call latency model (default: the bundled H200 calibration)\n"
	"      --device N          the device of a multi-GPU snapshot\n"
	"  -h, --help              show this help\n";

/* The memory PyTorch reports as a card's total capacity (its OOM message: "GPU 0 has a total
 * capacity of X GiB"); doc/gpus.md gives the sources. Approximate to about 0.1 GiB: it varies with
 * the driver, ECC and the board. */
static const struct gpu {
	const char *name;
	double gib;
	const char *note;
	uint64_t bytes; /* exact, where measured; else gib x 2^30 */
} gpus[] = {
	{ "H200", 139.80, "NVIDIA H200 141GB (measured here: 150109880320 bytes)", 150109880320ULL },
	{ "H100", 79.11, "NVIDIA H100 80GB HBM3 (SXM)", 0 },
	{ "H100-PCIe", 79.11, "NVIDIA H100 PCIe 80GB", 0 },
	{ "A100-80GB", 79.15, "NVIDIA A100 80GB (SXM4/PCIe)", 0 },
	{ "A100-40GB", 39.39, "NVIDIA A100 40GB", 0 },
	{ "L40S", 44.39, "NVIDIA L40S 48GB", 0 },
	{ "A10G", 22.06, "NVIDIA A10G 24GB (AWS g5)", 0 },
	{ "L4", 22.03, "NVIDIA L4 24GB", 0 },
	{ "RTX4090", 23.64, "GeForce RTX 4090 24GB", 0 },
	{ "RTX3090", 23.69, "GeForce RTX 3090 24GB", 0 },
	{ "V100-32GB", 31.74, "Tesla V100 32GB", 0 },
	{ "V100-16GB", 15.77, "Tesla V100 16GB", 0 },
	{ "T4", 14.75, "Tesla T4 16GB", 0 },
};

static const struct gpu *find_gpu(const char *name)
{
	for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++)
		if (!strcasecmp(gpus[i].name, name))
			return &gpus[i];
	return NULL;
}

/* predict's --gpu: the table's memory of a GPU (0 if unknown). */
uint64_t cli_gpu_bytes(const char *name)
{
	const struct gpu *g = find_gpu(name);
	return !g ? 0 : g->bytes ? g->bytes : (uint64_t)llround(g->gib * (double)AS_GiB);
}

/* The grid, applied on top of the current settings (a later key overrides an earlier one, as in
 * PyTorch's parser). Entries that act only under a limit (the policy's prepare says so:
 * garbage_collection_threshold) are not run without a target. */
static const struct cand {
	const char *label;
	const char *set; /* appended to the current settings; "" = the current settings */
} grid[] = {
	{ "current", "" },
	{ "expandable_segments", "expandable_segments:True" },
	{ "max_split_size_mb:64", "max_split_size_mb:64" },
	{ "max_split_size_mb:128", "max_split_size_mb:128" },
	{ "max_split_size_mb:256", "max_split_size_mb:256" },
	{ "max_split_size_mb:512", "max_split_size_mb:512" },
	{ "roundup_power2_divisions:4", "roundup_power2_divisions:4" },
	{ "roundup_power2_divisions:8", "roundup_power2_divisions:8" },
	{ "roundup_power2_divisions:[list]", "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]" },
	{ "garbage_collection_threshold:0.6", "garbage_collection_threshold:0.6" },
	{ "garbage_collection_threshold:0.8", "garbage_collection_threshold:0.8" },
	{ "expandable+roundup:4", "expandable_segments:True,roundup_power2_divisions:4" },
	{ "expandable+gc:0.8", "expandable_segments:True,garbage_collection_threshold:0.8" },
	{ "max_split:128+gc:0.8", "max_split_size_mb:128,garbage_collection_threshold:0.8" },
	{ "expandable+max_split:128", "expandable_segments:True,max_split_size_mb:128" },
};
#define NGRID (sizeof grid / sizeof grid[0])
#define IDX_EXPANDABLE 1
#define IDX_HARMFUL (NGRID - 1)

typedef struct result {
	const struct cand *c;
	char *config;
	int skip;                 /* same settings as an earlier entry, or gc without a capacity */
	as_summary unl;           /* without a limit */
	as_summary tgt;           /* at the target (when there is one) */
	int64_t oom_entry;        /* the trace entry of the first OOM at the target; -1 if none */
	uint64_t need;            /* the smallest capacity found (2 MiB steps); 0 if not searched */
	int changes;              /* keys whose value differs from the current settings' (its simplicity) */
	int fit;                  /* FIT_YES, FIT_NO or FIT_UNKNOWN (set once the grid has run: classify) */
	int done;
	as_err err;
} result;

enum { FIT_NO = 0, FIT_YES = 1, FIT_UNKNOWN = -1 };

/* One trace (one rank of a job) and its grid. */
typedef struct advise {
	result *res;
	size_t n;
	const char *path;
	as_evbuf buf;
	int loaded;
	as_blame blame;           /* who fenced the memory in the recording */
	const as_evbuf *bufp;     /* &buf (NULL for a job's aggregate) */
	const as_lat_model *model;
	char *recorded;
	char *current;
	uint64_t recorded_ooms;
	uint64_t held;            /* the most the recording reserved (its limit was at least this) */
	int ran;                  /* the current settings are what the recording ran (no -c, or -c equal to them) */
	uint64_t target;
	int fit;
	const as_reader_opts *ro;
} advise;

/* The work queue over every rank's grid. A worker takes a setting and runs its replays; where fewer
 * settings are left than threads, the threads left over help the workers: a setting's unlimited run
 * and its run at the target together, and its bisection's next probes with those that may follow. */
typedef struct pool {
	advise *ranks;
	size_t nranks, next;
	uint64_t threads;  /* -j */
	uint64_t busy;     /* threads replaying: the workers holding a setting and their helpers */
	uint64_t asked, ran; /* bisection probes asked (-j 1's) and run (ALLOCSIM_JOBS_DEBUG) */
	pthread_mutex_t mu;
	cli_progress prog; /* on a terminal, after 0.5 s (progress.h) */
} pool;

/* Up to WANT more threads for a worker (0 when every one of -j is busy); given back with give(). */
static uint64_t claim(pool *q, uint64_t want)
{
	pthread_mutex_lock(&q->mu);
	uint64_t n = q->threads > q->busy ? q->threads - q->busy : 0;
	if (n > want)
		n = want;
	q->busy += n;
	pthread_mutex_unlock(&q->mu);
	return n;
}

static void give(pool *q, uint64_t n)
{
	pthread_mutex_lock(&q->mu);
	q->busy -= n;
	pthread_mutex_unlock(&q->mu);
}

typedef struct oomhook {
	int64_t entry;
} oomhook;

static int first_oom(void *ctx, as_engine *e, const as_event *ev)
{
	oomhook *h = ctx;
	if (ev && as_engine_summary(e)->num_ooms && h->entry < 0)
		h->entry = (int64_t)ev->index;
	return 0;
}

static int run_one(const advise *a, const char *conf, uint64_t cap, int stop, as_summary *s, int64_t *oom_entry, as_err *err)
{
	oomhook h = { -1 };
	as_run_sink sk = { .event = first_oom, .ctx = &h };
	as_run_opts o = { .events = a->bufp, .ops = as_policy_find("pytorch"), .config = conf, .capacity = cap,
		.addr_mode = ADDR_AUTO, .stop_at_oom = stop, .recorded = a->recorded, .model = a->model,
		.sink = oom_entry ? &sk : NULL, .reader = a->ro };
	if (as_run(&o, s, err))
		return -1;
	if (oom_entry)
		*oom_entry = h.entry;
	return 0;
}

/* A probe of a setting's bisection: a capacity, whether it fits (1, 0; -1 error in err). */
typedef struct probe {
	uint64_t cap;
	int r;
	as_err err;
} probe;

struct probes {
	const advise *a;
	const result *r;
	probe *p;
	size_t n, cap;     /* every probe made, the helpers' included */
	size_t asked;
	pool *q;
};

static void probe_one(void *ctx, size_t k)
{
	struct probes *ps = ctx;
	probe *x = &ps->p[ps->n + k];
	as_summary s;
	as_err_clear(&x->err);
	x->r = -1;
	if (cli_interrupted)
		as_fail(&x->err, AS_EXIT_INTERRUPTED, "interrupted");
	else if (!run_one(ps->a, ps->r->config, x->cap, 1, &s, NULL, &x->err))
		x->r = s.num_ooms == 0;
}

/* Whether the setting fits at CAP, as the bisection asks it (its probes in -j 1's order): from a probe
 * made, else from a round of CAP and, on the threads left over (claim), the probes in next (those
 * that may follow, as_bisect_capacity's). */
static int fits_at(void *ctx, uint64_t cap, const uint64_t *next, size_t nnext, as_err *err)
{
	struct probes *ps = ctx;
	probe *x = NULL;
	ps->asked++;
	for (size_t i = 0; i < ps->n && !x; i++)
		if (ps->p[i].cap == cap)
			x = &ps->p[i];
	if (!x) {
		uint64_t more = claim(ps->q, nnext);
		size_t m = 0;
		if (ps->n + more + 1 > ps->cap) {
			ps->cap = 2 * (ps->n + more + 1);
			ps->p = xrealloc(ps->p, ps->cap * sizeof(probe));
		}
		ps->p[ps->n + m++].cap = cap;
		for (size_t i = 0; i < nnext && m < more + 1; i++) {
			int dup = 0;
			for (size_t k = 0; k < ps->n + m && !dup; k++)
				dup = ps->p[k].cap == next[i];
			if (!dup)
				ps->p[ps->n + m++].cap = next[i];
		}
		as_run_indexed(m, m, probe_one, ps);
		give(ps->q, more);
		x = &ps->p[ps->n];
		ps->n += m;
	}
	if (x->r < 0)
		*err = x->err;
	return x->r;
}

/* The smallest capacity at which the replay has no OOM, by bisection between the peak of live
 * requested bytes and the unlimited peak reserved bytes, narrowed by the run at the target, to
 * within max(2 MiB, 1/256 of the upper end) (about 0.4%: advice, not `fit capacity`'s exact answer,
 * and half the replays). The answer is a capacity that was seen to fit, a multiple of 2 MiB. Where
 * threads are left over, the probes that may follow the next one run beside it (fits_at); the answer
 * is the same. */
static int smallest(pool *q, const advise *a, const result *r, uint64_t *need, as_err *err)
{
	const uint64_t g = 2 * AS_MiB;
	uint64_t lo = r->unl.peak_requested_bytes / g, hi = (r->unl.peak_reserved_bytes + g - 1) / g;
	if (a->target) {
		uint64_t t = a->target / g;
		if (!r->tgt.num_ooms && t * g == a->target && t < hi)
			hi = t;
		else if (r->tgt.num_ooms && t > lo && t < hi)
			lo = t;
	}
	uint64_t tol = hi / 256 ? hi / 256 : 1;
	struct probes ps = { .a = a, .r = r, .q = q };
	/* the probes to speculate on: as many as threads are free, of those as_bisect_capacity lists (the
	 * tree from (lo, hi) stays a superset of the one from any later interval only near its root, so it
	 * lists them again before each probe) */
	size_t ahead = q->threads > 64 ? 64 : (size_t)q->threads;
	int rc = as_bisect_capacity(g, lo, hi, tol, ahead, fits_at, NULL, &ps, need, err);
	pthread_mutex_lock(&q->mu);
	q->asked += ps.asked;
	q->ran += ps.n;
	pthread_mutex_unlock(&q->mu);
	free(ps.p);
	return rc;
}

/* A setting's unlimited run (k 0) and its run at the target (k 1), side by side. */
struct pair {
	const advise *a;
	result *r;
	int rc[2];
	as_err err[2];
};

static void pair_one(void *ctx, size_t k)
{
	struct pair *p = ctx;
	as_err_clear(&p->err[k]);
	p->rc[k] = k ? run_one(p->a, p->r->config, p->a->target, 0, &p->r->tgt, &p->r->oom_entry, &p->err[k])
		     : run_one(p->a, p->r->config, 0, 0, &p->r->unl, NULL, &p->err[k]);
}

static void *worker(void *arg)
{
	pool *q = arg;
	for (int first = 1;; first = 0) {
		if (!first)
			cli_progress_add(&q->prog, 1); /* the item before this one is done */
		pthread_mutex_lock(&q->mu);
		size_t k = q->next, skipped = 0;
		while (k < q->nranks * NGRID && q->ranks[k / NGRID].res[k % NGRID].skip)
			k++, skipped++;
		q->next = k + 1;
		int stop = k >= q->nranks * NGRID || cli_interrupted;
		if (stop)
			q->busy--; /* this worker's thread is free for the others' probes */
		pthread_mutex_unlock(&q->mu);
		cli_progress_add(&q->prog, skipped);
		if (stop)
			return NULL;
		advise *a = &q->ranks[k / NGRID];
		result *r = &a->res[k % NGRID];
		as_err *err = &r->err;
		struct pair p = { a, r, { 0, 0 }, { { 0, "" }, { 0, "" } } };
		uint64_t more = a->target ? claim(q, 1) : 0;
		as_run_indexed(1 + more, a->target ? 2 : 1, pair_one, &p); /* (-j 1: one after the other, here) */
		give(q, more);
		if (p.rc[0] || p.rc[1]) { /* the first failure, as one after the other would meet it */
			*err = p.err[p.rc[0] ? 0 : 1];
			continue;
		}
		if (a->fit && smallest(q, a, r, &r->need, err))
			continue;
		r->done = 1;
	}
}

/* Decoding the ranks: each worker takes the next file. */
typedef struct loadq {
	advise *ranks;
	char **files;
	const as_reader_opts *ro;
	const char *config;
	as_err *errs;
} loadq;

static void load_rank(void *arg, size_t k)
{
	loadq *q = arg;
	advise *a = &q->ranks[k];
	a->path = q->files[k];
	as_blame_init(&a->blame, 5);
	a->loaded = 1;
	if (as_evbuf_load_observed(&a->buf, a->path, q->ro, as_blame_observe, &a->blame, &q->errs[k])) {
		a->loaded = 0;
		as_blame_free(&a->blame);
		return;
	}
	as_blame_finish(&a->blame);
	a->bufp = &a->buf;
	a->recorded = as_recorded_settings(&a->buf.meta);
	a->current = xstrdup(q->config ? q->config : a->recorded ? a->recorded : "");
	a->recorded_ooms = as_evbuf_recorded_ooms(&a->buf);
}

/* ---- output ------------------------------------------------------------------------------ */

static const as_summary *shown(const advise *a, const result *r)
{
	return a->target ? &r->tgt : &r->unl;
}

/* Whether the setting fits: at the target, as the replay found; without a target, when the recording
 * ran out of memory (under a limit it does not record): no for the settings it ran, yes for a setting
 * that needs no more than the recording held (the limit was at least that), else unknown; without
 * either, yes (no limit). */
static int fits(const advise *a, const result *r)
{
	(void)a; /* decided once by classify */
	return r->fit;
}

/* What a setting needs: its smallest capacity, or (--no-fit) its peak reserved bytes. */
static uint64_t need_of(const advise *a, const result *r)
{
	return a->fit ? r->need : shown(a, r)->peak_reserved_bytes;
}

static void classify(advise *a)
{
	for (size_t i = 0; i < a->n; i++) {
		result *r = &a->res[i];
		if (a->target)
			r->fit = r->tgt.num_ooms == 0 ? FIT_YES : FIT_NO;
		else if (!a->recorded_ooms)
			r->fit = FIT_YES;
		else if (a->ran && !strcmp(r->config, a->res[0].config))
			r->fit = FIT_NO;
		else if (need_of(a, r) <= a->held)
			r->fit = FIT_YES;
		else
			r->fit = FIT_UNKNOWN;
	}
}

/* The precision of the comparison: settings whose needs differ by less than 1% (the bisection finds
 * each to within 0.4%) are equal in memory. */
#define NEED_TIE 1.01

/* The recommendation: of the settings that fit, those that need within 1% of the least need; of
 * these the simplest (the fewest keys changed from the current settings: the current settings
 * themselves when they are among them), then the least modelled allocator time (device calls), then
 * the least need, then the first in the grid. So a setting that saves a few MiB, within the
 * precision, at the price of another key and more device calls (expandable_segments with
 * max_split_size_mb) does not win. When nothing fits: the least need. */
static size_t pick(const advise *a)
{
	uint64_t least = UINT64_MAX;
	for (size_t i = 0; i < a->n; i++)
		if (!a->res[i].skip && fits(a, &a->res[i]) == FIT_YES && need_of(a, &a->res[i]) < least)
			least = need_of(a, &a->res[i]);
	size_t best = SIZE_MAX;
	for (size_t i = 0; i < a->n; i++) {
		const result *r = &a->res[i];
		if (r->skip)
			continue;
		if (least == UINT64_MAX) { /* nothing fits: the least need */
			if (best == SIZE_MAX || need_of(a, r) < need_of(a, &a->res[best]))
				best = i;
			continue;
		}
		if (fits(a, r) != FIT_YES || (double)need_of(a, r) > (double)least * NEED_TIE)
			continue;
		if (best == SIZE_MAX) {
			best = i;
			continue;
		}
		const result *b = &a->res[best];
		double tr = shown(a, r)->device_time_us, tb = shown(a, b)->device_time_us;
		if (r->changes != b->changes ? r->changes < b->changes :
		    tr != tb ? tr < tb : need_of(a, r) < need_of(a, b))
			best = i;
	}
	return best;
}

typedef struct report {
	const char *target_from;
	int recorded_settings;
	size_t best;
	int harmful;              /* expandable + max_split measured worse than expandable alone */
	advise *ranks;            /* a job: its ranks (a is then their aggregate) */
	size_t nranks;
} report;

static double eff(const as_summary *s)
{
	return s->peak_reserved_bytes ? (double)s->peak_allocated_bytes / (double)s->peak_reserved_bytes : 0.0;
}

/* The rank that needs most under setting i (the job's worst rank). */
static size_t worst_rank(const advise *a, const report *rp, size_t i)
{
	size_t w = 0;
	for (size_t k = 1; k < rp->nranks; k++)
		if (need_of(a, &rp->ranks[k].res[i]) > need_of(a, &rp->ranks[w].res[i]))
			w = k;
	return w;
}

/* The events a replay counts (its 'events' column, info's 'events'): allocations, frees, free requests,
 * empty_cache and phase markers, not the recorded segment calls nor an empty_cache inferred only maybe. */
static uint64_t replay_events(const as_evbuf *b)
{
	uint64_t n = 0;
	for (size_t i = 0; i < b->n; i++)
		n += b->recs[i].type < EV_SEG_ALLOC && !(b->recs[i].type == EV_EMPTY_CACHE && (b->recs[i].flags & EVF_MAYBE));
	return n;
}

/* The trace's entries (a snapshot's device history; the native format's records): what "trace entry N"
 * numbers, from 0. */
static uint64_t trace_entries(const as_evbuf *b)
{
	const as_meta *m = &b->meta;
	if (m->device_entries && m->device_index >= 0 && (size_t)m->device_index < m->ndevices)
		return m->device_entries[m->device_index];
	return b->n ? b->recs[b->n - 1].index + 1 : 0;
}

/* The table's fits column: yes, no, ? (not known without a target), - (no limit at all). */
static const char *fit_word(const advise *a, const result *r)
{
	if (!a->target && !a->recorded_ooms)
		return "-";
	return r->fit == FIT_YES ? "yes" : r->fit == FIT_NO ? "no" : "?";
}

static const char *rank_word(const advise *a, const result *r)
{
	if (!a->target && !a->recorded_ooms)
		return "-";
	return r->fit == FIT_YES ? "fits" : r->fit == FIT_NO ? "OOM" : "?";
}

static void print_table(FILE *f, const advise *a, const report *rp)
{
	const result *b = &a->res[rp->best], *cur = &a->res[0];
	if (rp->nranks) {
		uint64_t ev = 0, te = 0;
		for (size_t k = 0; k < rp->nranks; k++) {
			ev += replay_events(rp->ranks[k].bufp);
			te += trace_entries(rp->ranks[k].bufp);
		}
		fprintf(f, "job: %s (%zu ranks, %" PRIu64 " trace entries, %" PRIu64 " events", a->path, rp->nranks, te, ev);
	} else {
		fprintf(f, "trace: %s (%" PRIu64 " trace entries, %" PRIu64 " events", a->path, trace_entries(a->bufp), replay_events(a->bufp));
	}
	if (a->recorded_ooms)
		fprintf(f, "; %" PRIu64 " out-of-memory in the recording", a->recorded_ooms);
	fprintf(f, ")\ncurrent settings: %s%s\n", a->current[0] ? a->current : "(none)",
		rp->recorded_settings ? " (recorded)" : "");
	if (a->target)
		fprintf(f, "target: %.2f GiB (%" PRIu64 " bytes, %s)\n", as_gib(a->target), a->target, rp->target_from);
	else if (a->recorded_ooms)
		fprintf(f, "target: none given; the recording ran out of memory under a limit it does not record, of at least %.2f GiB%s (the most"
			" it held): a setting that needs no more fits it (give --capacity, --oom-message, --fraction or --gpu to check the others)\n",
			as_gib(a->held), rp->nranks ? " (a rank that ran out)" : "");
	else
		fprintf(f, "target: none (no limit recorded; give --capacity, --oom-message, --fraction or --gpu)\n");
	fputc('\n', f);
	if (!a->target && fits(a, b) != FIT_YES) {
		fprintf(f, "No setting of the grid is shown to fit the limit the recording ran out of: each needs more than the %.2f GiB it held.",
			as_gib(a->held));
		if (a->fit)
			fprintf(f, " The one that needs least: PYTORCH_CUDA_ALLOC_CONF=\"%s\" (needs %.2f GiB). Give the limit (--oom-message).",
				b->config, as_gib(b->need));
		fputc('\n', f);
	} else if (fits(a, b) != FIT_YES) {
		fprintf(f, "No setting of the grid fits %.2f GiB%s.", as_gib(a->target), rp->nranks ? " on every rank" : "");
		if (a->fit)
			fprintf(f, " The one that needs least: PYTORCH_CUDA_ALLOC_CONF=\"%s\" (needs %.2f GiB).", b->config, as_gib(b->need));
		fputc('\n', f);
	} else if (rp->best == 0) {
		fprintf(f, "Recommendation: keep the current settings; no setting of the grid needs 1%% less memory.\n");
	} else {
		fprintf(f, "Recommendation: PYTORCH_CUDA_ALLOC_CONF=\"%s\"\n", b->config);
		if (a->fit)
			fprintf(f, "  needs %.2f GiB instead of %.2f GiB (saves %.2f GiB)", as_gib(b->need), as_gib(cur->need),
				cur->need > b->need ? as_gib(cur->need - b->need) : 0.0);
		else
			fprintf(f, "  peak reserved %.2f GiB instead of %.2f GiB", as_gib(shown(a, b)->peak_reserved_bytes),
				as_gib(shown(a, cur)->peak_reserved_bytes));
		if (!a->target && fits(a, cur) == FIT_NO)
			fprintf(f, "; the current settings ran out of memory in the recording");
		if (a->target && fits(a, cur) != FIT_YES) {
			if (rp->nranks)
				fprintf(f, "; the current settings run out of memory on %" PRIu64 " of %zu ranks", cur->tgt.num_ooms, rp->nranks);
			else
				fprintf(f, "; the current settings run out of memory at trace entry %" PRId64, cur->oom_entry);
		}
		fputc('\n', f);
	}
	fputc('\n', f);
	fprintf(f, "%-34s %-5s %-9s %13s %11s %10s %10s %12s\n", "setting", "fits", rp->nranks ? "oom_ranks" : "oom_entry",
		"peak_reserved", "needs", "efficiency", "cudaMalloc", "alloc_ms");
	for (size_t i = 0; i < a->n; i++) {
		const result *r = &a->res[i];
		if (r->skip)
			continue;
		const as_summary *s = shown(a, r);
		char oom[24] = "-", need[24] = "-";
		if (a->target && rp->nranks && r->tgt.num_ooms)
			snprintf(oom, sizeof oom, "%" PRIu64, r->tgt.num_ooms);
		else if (a->target && !rp->nranks && r->oom_entry >= 0)
			snprintf(oom, sizeof oom, "%" PRId64, r->oom_entry);
		if (a->fit)
			snprintf(need, sizeof need, "%.2f GiB", as_gib(r->need));
		fprintf(f, "%-34s %-5s %-9s %9.2f GiB %11s %10.3f %10" PRIu64 " %12.3f%s\n", r->c->label,
			fit_word(a, r), oom, as_gib(s->peak_reserved_bytes), need, eff(s),
			s->num_device_alloc, s->device_time_us / 1000.0, i == rp->best ? "  <- recommended" : "");
	}
	if (rp->nranks) {
		size_t w = worst_rank(a, rp, rp->best);
		fprintf(f, "\n%-40s %-12s %11s %-12s %11s\n", "rank", "current", "needs", "recommended", "needs");
		for (size_t k = 0; k < rp->nranks; k++) {
			const advise *rk = &rp->ranks[k];
			const result *c = &rk->res[0], *r = &rk->res[rp->best];
			char cn[24] = "-", rn[24] = "-";
			if (a->fit) {
				snprintf(cn, sizeof cn, "%.2f GiB", as_gib(c->need));
				snprintf(rn, sizeof rn, "%.2f GiB", as_gib(r->need));
			}
			fprintf(f, "%-40s %-12s %11s %-12s %11s%s\n", rk->path, rank_word(rk, c), cn, rank_word(rk, r), rn,
				k == w ? "  <- worst rank" : "");
		}
		fprintf(f, "worst rank under the recommendation: %s\n", rp->ranks[w].path);
	}
	for (size_t k = 0; k < (rp->nranks ? rp->nranks : 1); k++) {
		const advise *rk = rp->nranks ? &rp->ranks[k] : a;
		const as_blame *bl = &rk->blame;
		if (!bl->peak_m.valid)
			continue;
		const char *on = rp->nranks ? " on " : "", *rk_path = rp->nranks ? rk->path : "";
		const as_blame_moment *mo = bl->oom_m.valid ? &bl->oom_m : &bl->peak_m;
		if (bl->oom_m.valid) {
			/* an OOM snapshot: the moment that failed, not the peak */
			const as_blame_moment *o = &bl->oom_m;
			fprintf(f, "\nWho fenced the memory%s%s (in the recording, at its out-of-memory, trace entry %" PRIu64 ": a request of %.2f GiB"
				" with %.2f GiB reserved, %.2f GiB of it requested by live blocks):\n"
				"  %.2f GiB reserved but not requested sat in %" PRIu64 " of %" PRIu64 " segments that live blocks kept from being released;"
				" the largest free range in one segment was %.2f GiB%s\n"
				"  %.2f GiB sat in segments with no live block: %s\n",
				on, rk_path, o->index, as_gib(o->request), as_gib(o->reserved), as_gib(o->allocated), as_gib(o->fenced),
				o->nfenced_segments, o->nsegments, as_gib(o->largest_free),
				o->largest_free < o->request ? ", smaller than the request" : "", as_gib(o->cached),
				o->cached ? "empty_cache could have released them" :
				"empty_cache could release nothing (PyTorch releases its cached segments before it gives up)");
			if (bl->peak_m.valid)
				fprintf(f, "  (earlier, at the peak of reserved memory, %.2f GiB at trace entry %" PRIu64 ": %.2f GiB fenced, %.2f GiB in"
					" segments with no live block)\n", as_gib(bl->peak_m.reserved), bl->peak_m.index, as_gib(bl->peak_m.fenced),
					as_gib(bl->peak_m.cached));
		} else {
			fprintf(f, "\nWho fenced the memory%s%s (in the recording, at its peak of reserved memory, %.2f GiB at trace entry %" PRIu64
				"):\n  %.2f GiB reserved but not requested sat in segments that live blocks kept from being released;"
				" %.2f GiB in segments with no live block\n", on, rk_path,
				as_gib(bl->peak_m.reserved), bl->peak_m.index, as_gib(bl->peak_m.fenced), as_gib(bl->peak_m.cached));
		}
		if (bl->with_site && bl->oom_m.valid) {
			fprintf(f, "  the code that held the memory at the out-of-memory (live bytes by allocation site):\n");
			cli_blame_held(f, mo, 5, 2);
			fprintf(f, "  the code that fenced it:\n");
			cli_blame_sites(f, mo, 5, 2);
		} else if (bl->with_site)
			cli_blame_sites(f, mo, 5, 2);
		else
			fprintf(f, "  (the snapshot has no stack frames: record with torch.cuda.memory._record_memory_history(context=\"all\","
				" stacks=\"python\") to see the allocation sites (doc/capture.md); 'allocsim blame' gives the full table)\n");
	}
	if (rp->harmful) {
		const result *e = &a->res[IDX_EXPANDABLE], *h = &a->res[IDX_HARMFUL];
		fprintf(f, "\nwarning: max_split_size_mb together with expandable_segments costs more here than expandable_segments\n"
			"  alone (pytorch#123548): %s %.2f GiB vs %.2f GiB, %" PRIu64 " vs %" PRIu64 " cudaMalloc/map calls, %.3f vs %.3f ms\n",
			a->fit ? "needs" : "peak reserved", as_gib(need_of(a, h)), as_gib(need_of(a, e)), shown(a, h)->num_device_alloc,
			shown(a, e)->num_device_alloc, shown(a, h)->device_time_us / 1000.0, shown(a, e)->device_time_us / 1000.0);
	}
	if (!a->target)
		fprintf(f, "\nnote: garbage_collection_threshold acts only under a memory limit: its settings were not replayed.\n");
	fprintf(f, "\n(peak_reserved, efficiency, cudaMalloc and alloc_ms are %s%s; needs: the smallest capacity without\n"
		"out-of-memory found by bisection, to within 0.4%%; alloc_ms: modelled device time of the allocator's calls.\n"
		"Recommended: of the settings that fit, those within 1%% of the least need (equal, as each need is known to 0.4%%); of these\n"
		"the simplest (fewest keys changed: the current settings first), then the least alloc_ms.%s)\n",
		a->target ? "at the target" : "without a limit", rp->nranks ? ", the largest over the ranks" : "",
		!a->target && a->recorded_ooms ? "\nfits without a target: no for the settings the recording ran out of memory with, yes for one\n"
		"that needs no more than the recording held, ? for the others" : "");
}

static void print_csv_rows(FILE *f, const advise *a, size_t best)
{
	for (size_t i = 0; i < a->n; i++) {
		const result *r = &a->res[i];
		if (r->skip)
			continue;
		const as_summary *s = shown(a, r);
		as_csv_str(f, a->path);
		fputc(',', f);
		as_csv_str(f, r->c->label);
		fputc(',', f);
		as_csv_str(f, r->config);
		fprintf(f, ",%" PRIu64 ",%s,%" PRId64 ",%" PRIu64 ",%" PRIu64 ",%.6f,%" PRIu64 ",%" PRIu64 ",%.3f,%" PRIu64 ",%d\n",
			a->target, r->fit == FIT_YES ? "1" : r->fit == FIT_NO ? "0" : "", a->target ? r->oom_entry : -1, s->peak_reserved_bytes,
			s->peak_allocated_bytes,
			eff(s), s->num_device_alloc, s->num_ooms, s->device_time_us, r->need, i == best);
	}
}

static void print_csv(FILE *f, const advise *a, const report *rp)
{
	fputs("trace,setting,config,target_bytes,fits,oom_entry,peak_reserved_bytes,peak_allocated_bytes,efficiency,"
	      "num_device_alloc,num_ooms,device_time_us,needed_bytes,recommended\n", f);
	if (!rp->nranks)
		print_csv_rows(f, a, rp->best);
	for (size_t k = 0; k < rp->nranks; k++)
		print_csv_rows(f, &rp->ranks[k], rp->best);
}

static void print_json_settings(FILE *f, const advise *a)
{
	int first = 1;
	for (size_t i = 0; i < a->n; i++) {
		const result *r = &a->res[i];
		if (r->skip)
			continue;
		const as_summary *s = shown(a, r);
		fprintf(f, "%s  {\"setting\": ", first ? "" : ",\n");
		first = 0;
		as_json_str(f, r->c->label);
		fputs(", \"config\": ", f);
		as_json_str(f, r->config);
		fprintf(f, ", \"fits\": %s, \"oom_entry\": %" PRId64 ", \"peak_reserved_bytes\": %" PRIu64
			", \"peak_allocated_bytes\": %" PRIu64 ", \"num_device_alloc\": %" PRIu64 ", \"num_ooms\": %" PRIu64
			", \"device_time_us\": %.3f, \"needed_bytes\": %" PRIu64 "}",
			r->fit == FIT_YES ? "true" : r->fit == FIT_NO ? "false" : "null", a->target ? r->oom_entry : -1, s->peak_reserved_bytes,
			s->peak_allocated_bytes, s->num_device_alloc, s->num_ooms, s->device_time_us, r->need);
	}
}

static void print_json(FILE *f, const advise *a, const report *rp)
{
	const result *b = &a->res[rp->best];
	fputs(rp->nranks ? "{\"job\": " : "{\"trace\": ", f);
	as_json_str(f, a->path);
	fprintf(f, ", \"recorded_ooms\": %" PRIu64 ", \"current\": ", a->recorded_ooms);
	as_json_str(f, a->current);
	fprintf(f, ", \"target_bytes\": %" PRIu64 ", \"target_from\": ", a->target);
	as_json_str(f, rp->target_from);
	fprintf(f, ", \"recorded_held_bytes\": %" PRIu64, a->held);
	fprintf(f, ",\n \"fits\": %s, \"recommended\": ", b->fit == FIT_YES ? "true" : b->fit == FIT_NO ? "false" : "null");
	as_json_str(f, b->config);
	fprintf(f, ", \"harmful_combination\": %s,\n", rp->harmful ? "true" : "false");
	if (!rp->nranks) {
		fprintf(f, " \"trace_entries\": %" PRIu64 ", \"events\": %" PRIu64 ", \"settings\": [\n", trace_entries(a->bufp),
			replay_events(a->bufp));
		print_json_settings(f, a);
		fputs("\n ]}\n", f);
		return;
	}
	fputs(" \"worst_rank\": ", f);
	as_json_str(f, rp->ranks[worst_rank(a, rp, rp->best)].path);
	fputs(", \"ranks\": [\n", f);
	for (size_t k = 0; k < rp->nranks; k++) {
		fprintf(f, "%s {\"trace\": ", k ? ",\n" : "");
		as_json_str(f, rp->ranks[k].path);
		fprintf(f, ", \"trace_entries\": %" PRIu64 ", \"events\": %" PRIu64 ", \"settings\": [\n",
			trace_entries(rp->ranks[k].bufp), replay_events(rp->ranks[k].bufp));
		print_json_settings(f, &rp->ranks[k]);
		fputs("\n ]}", f);
	}
	fputs("\n]}\n", f);
}

/* ---- the command ------------------------------------------------------------------------- */

/* The traces of a directory of per-rank snapshots: regular files named *.pickle, *.pickle.gz,
 * *.pkl, *.pkl.gz or *.asbin, in version order (rank2 before rank10). */
static int rank_files(const char *dir, char ***out, size_t *n, as_err *err)
{
	struct dirent **ents;
	int m = scandir(dir, &ents, NULL, versionsort);
	if (m < 0)
		return as_fail(err, AS_EXIT_NOINPUT, "cannot read directory '%s': %s", dir, strerror(errno));
	static const char *const ext[] = { ".pickle", ".pickle.gz", ".pkl", ".pkl.gz", ".asbin" };
	*out = NULL;
	*n = 0;
	for (int i = 0; i < m; i++) {
		const char *nm = ents[i]->d_name;
		size_t l = strlen(nm);
		int take = 0;
		for (size_t e = 0; e < sizeof ext / sizeof ext[0]; e++)
			if (l > strlen(ext[e]) && !strcmp(nm + l - strlen(ext[e]), ext[e]))
				take = 1;
		char *path = NULL;
		struct stat st;
		if (take && asprintf(&path, "%s/%s", dir, nm) > 0 && !stat(path, &st) && S_ISREG(st.st_mode)) {
			*out = xrealloc(*out, (*n + 1) * sizeof(char *));
			(*out)[(*n)++] = path;
		} else {
			free(path);
		}
		free(ents[i]);
	}
	free(ents);
	if (!*n)
		return as_fail(err, AS_EXIT_NOINPUT, "directory '%s' holds no snapshots (*.pickle, *.pickle.gz, *.pkl, *.pkl.gz, *.asbin)", dir);
	return 0;
}

/* Whether the pytorch policy says settings set act only under a memory limit (as_policy_prepare). */
static int acts_under_limit_only(const advise *a, const char *set)
{
	static const as_meta none;
	char *c = xstrdup(set);
	unsigned w = as_policy_prepare(as_policy_find("pytorch"), a->bufp ? &a->bufp->meta : &none, 0, &c);
	free(c);
	return (w & AS_WARN_GC_NO_CAPACITY) != 0;
}

/* A rank's grid on top of its current settings; a setting that comes out the same as an earlier one
 * (max_split_size_mb:128 when it is current) is not replayed twice. */
static void make_grid(advise *a)
{
	a->n = NGRID;
	a->res = xcalloc(NGRID, sizeof(*a->res));
	for (size_t i = 0; i < NGRID; i++) {
		result *r = &a->res[i];
		r->c = &grid[i];
		r->config = as_conf_merge(a->current, grid[i].set, &r->changes);
		r->oom_entry = -1;
		r->skip = !a->target && acts_under_limit_only(a, grid[i].set);
		for (size_t j = 0; j < i && !r->skip; j++)
			r->skip = !strcmp(a->res[j].config, r->config);
	}
}

/* The job's aggregate of its ranks: a setting fits if it fits on every rank; the sizes, calls and
 * times are the largest over the ranks; num_ooms (at the target) counts the ranks that run out. */
static void aggregate(advise *agg, const advise *ranks, size_t nranks)
{
	for (size_t i = 0; i < NGRID; i++) {
		result *g = &agg->res[i];
		for (size_t k = 0; k < nranks; k++) {
			const result *r = &ranks[k].res[i];
			as_summary *dst[] = { &g->unl, &g->tgt };
			const as_summary *src[] = { &r->unl, &r->tgt };
			for (int j = 0; j < 2; j++) {
				if (src[j]->peak_reserved_bytes > dst[j]->peak_reserved_bytes) {
					dst[j]->peak_reserved_bytes = src[j]->peak_reserved_bytes;
					dst[j]->peak_allocated_bytes = src[j]->peak_allocated_bytes;
				}
				if (src[j]->num_device_alloc > dst[j]->num_device_alloc)
					dst[j]->num_device_alloc = src[j]->num_device_alloc;
				if (src[j]->device_time_us > dst[j]->device_time_us)
					dst[j]->device_time_us = src[j]->device_time_us;
			}
			g->tgt.num_ooms += r->tgt.num_ooms > 0;
			if (r->need > g->need)
				g->need = r->need;
		}
	}
}

int cmd_advise(int argc, char **argv)
{
	static const struct option lo[] = {
		CLI_DEVOPT(CAPACITY), CLI_DEVOPT(FRACTION),
		CLI_DEVOPT(DEVICE_TOTAL), CLI_DEVOPT(GPU),
		{ "config", required_argument, 0, 'c' }, { "jobs", required_argument, 0, 'j' },
		{ "format", required_argument, 0, 'f' }, { "output", required_argument, 0, 'o' },
		{ "no-fit", no_argument, 0, 'N' }, { "latency-model", required_argument, 0, 'M' },
		CLI_DEVOPT(DEVICE), { "help", no_argument, 0, 'h' },
		{ "oom-message", required_argument, 0, 'O' }, { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 },
	};
	as_reader_opts ro = { .keep_sites = 1 };
	const char *config = NULL, *format = "table", *out = NULL, *model_path = NULL, *oomarg = NULL;
	cli_dev dv = { .ro = &ro };
	as_oom_msg om;
	uint64_t jobs = 0;
	int fit = 1, c, dr;
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:j:o:h", lo, NULL)) != -1) {
		if ((dr = cli_devopt("advise", &dv, c, optarg)) >= 0) {
			if (dr)
				return dr;
			continue;
		}
		switch (c) {
		case 'O': oomarg = optarg; break;
		case 'c': config = optarg; break;
		case 'j':
			if (as_parse_u64(optarg, &jobs) || !jobs || jobs > 1024)
				return cli_usage_error("advise", "-j: '%s' is not a number of workers (1..1024)", optarg);
			break;
		case 'f':
			if (strcmp(optarg, "table") && strcmp(optarg, "csv") && strcmp(optarg, "json"))
				return cli_usage_error("advise", "--format: table, csv or json, not '%s'", optarg);
			format = optarg;
			break;
		case 'o': out = optarg; break;
		case 'N': fit = 0; break;
		case 'M': model_path = optarg; break;
		case 'h': fputs(advise_usage, stdout); return 0;
		case 'V': cli_version(); return 0;
		default: return cli_usage_error("advise", "invalid option");
		}
	}
	const char *gpu = dv.gpu, *capnote = dv.capacity_note;
	uint64_t capacity = dv.capacity, total = dv.total;
	double fraction = dv.fraction;
	if (gpu && !strcmp(gpu, "list")) {
		printf("%-10s %9s  %s\n", "name", "GiB", "card");
		for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++)
			printf("%-10s %9.2f  %s\n", gpus[i].name, gpus[i].gib, gpus[i].note);
		return 0;
	}
	if (argc - optind != 1)
		return cli_usage_error("advise", "expected one trace (or a directory of per-rank snapshots)");
	/* a target: --capacity, the --oom-message's limit, --gpu's memory, or --fraction x a device total
	 * (--device-total, --gpu, --oom-message or the trace's) */
	if (capacity && (gpu || fraction > 0 || oomarg || total))
		return cli_usage_error("advise", "--capacity is the target: not with --fraction, --gpu, --oom-message or --device-total");
	if ((total != 0) + (gpu != NULL) + (oomarg != NULL) > 1)
		return cli_usage_error("advise", "give at most one of --device-total, --gpu and --oom-message");
	if (total && !(fraction > 0))
		return cli_usage_error("advise", "--device-total goes with --fraction");
	const struct gpu *g = NULL;
	if (gpu && !(g = find_gpu(gpu)))
		return cli_usage_error("advise", "--gpu: unknown GPU '%s' ('--gpu list' shows the known ones)", gpu);
	if (oomarg) {
		char why[300];
		char *text = as_oom_msg_arg(oomarg, why, sizeof why);
		int bad = !text || as_oom_msg_parse(text, &om, why, sizeof why);
		free(text);
		if (bad)
			return cli_usage_error("advise", "--oom-message: %s", why);
	}
	const char *trace = argv[optind];
	as_err err = { 0, "" };
	int rc = 0;
	char **files = NULL;
	size_t nfiles = 0;
	struct stat st;
	int is_dir = !stat(trace, &st) && S_ISDIR(st.st_mode);
	if (is_dir) {
		if (rank_files(trace, &files, &nfiles, &err))
			return cli_report(&err);
	} else {
		files = xmalloc(sizeof(char *));
		files[0] = xstrdup(trace);
		nfiles = 1;
	}
	advise *ranks = xcalloc(nfiles, sizeof(*ranks)), agg = { 0 };
	report rp = { .target_from = "", .ranks = is_dir ? ranks : NULL, .nranks = is_dir ? nfiles : 0 };
	as_lat_model model = { 0 };
	int have_model = 0;
	char tf[400];
	{
		const char *outs[] = { out };
		if (out && as_outputs_check(outs, 1, (const char *const *)files, nfiles, &err)) {
			rc = cli_report(&err);
			goto out;
		}
	}
	cli_catch_signals();
	if (!jobs) {
		long np = sysconf(_SC_NPROCESSORS_ONLN);
		jobs = np > 0 ? (uint64_t)np : 1;
	}
	{
		/* the ranks decoded side by side (-j of them at once): with one after the other, a
		 * directory of ranks spent its decode on one core while the others waited */
		loadq lq = { .ranks = ranks, .files = files, .ro = &ro, .config = config, .errs = xcalloc(nfiles, sizeof(as_err)) };
		as_run_indexed(jobs, nfiles, load_rank, &lq);
		for (size_t k = 0; k < nfiles && !rc; k++)
			if (lq.errs[k].code) /* the first file's error, whatever -j is */
				rc = cli_report(&lq.errs[k]);
		free(lq.errs);
		if (rc)
			goto out;
	}
	if (fraction > 0) {
		uint64_t t = total;
		const char *whence = "--device-total";
		if (g) {
			t = g->bytes ? g->bytes : (uint64_t)llround(g->gib * (double)AS_GiB);
			whence = g->name;
		} else if (oomarg) {
			t = om.total.bytes;
			whence = "the --oom-message's total capacity";
		} else if (!t) {
			t = ranks[0].buf.meta.device_total;
			whence = "the trace's device total";
		}
		if (!t) {
			rc = cli_usage_error("advise", "--fraction needs the device's total memory, which %s does not record: add --device-total SIZE"
				" or --gpu NAME", trace);
			goto out;
		}
		capacity = (uint64_t)floor(fraction * (double)t);
		snprintf(tf, sizeof tf, "--fraction %g x %" PRIu64 " bytes (%s)", fraction, t, whence);
		rp.target_from = tf;
	} else if (g) {
		capacity = g->bytes ? g->bytes : (uint64_t)llround(g->gib * (double)AS_GiB);
		snprintf(tf, sizeof tf, "--gpu %s", g->name);
		rp.target_from = tf;
	} else if (oomarg) {
		capacity = om.capacity;
		if (om.capacity_from_allowed)
			snprintf(tf, sizeof tf, "--oom-message: its '%.2f GiB allowed' (set_per_process_memory_fraction), printed to +-%.3f GiB",
				as_gib(om.allowed.bytes), as_gib(om.capacity_ulp));
		else
			snprintf(tf, sizeof tf, "--oom-message: %.2f GiB allocated + %.2f GiB reserved but unallocated by PyTorch + %.2f GiB "
				"free, each printed to +-0.005 of its unit (+-%.3f GiB)", as_gib(om.allocated.bytes), as_gib(om.unallocated.bytes),
				as_gib(om.free.bytes), as_gib(om.capacity_ulp));
		rp.target_from = tf;
	} else if (capacity) {
		if (capnote[0])
			snprintf(tf, sizeof tf, "--capacity; %s", capnote);
		rp.target_from = capnote[0] ? tf : "--capacity";
	} else if (ranks[0].buf.meta.capacity) {
		capacity = ranks[0].buf.meta.capacity;
		rp.target_from = "recorded in the trace";
	}
	rp.recorded_settings = !config && ranks[0].recorded;
	if (oomarg) {
		/* the message should be this recording's: its request is the failed one's, rounded as PyTorch
		 * rounds an allocation (to 2 MiB, or a 20 MiB segment for 1-10 MiB) */
		uint64_t req = 0;
		for (size_t k = 0; k < nfiles && !req; k++)
			for (size_t i = 0; i < ranks[k].buf.n && !req; i++)
				if (ranks[k].buf.recs[i].type == EV_ALLOC && (ranks[k].buf.recs[i].flags & EVF_OOM))
					req = ranks[k].buf.recs[i].size;
		uint64_t rlo = om.request.bytes > om.request.ulp ? om.request.bytes - om.request.ulp : 0, rhi = om.request.bytes + om.request.ulp;
		if (!req)
			fprintf(stderr, "%s: warning: %s records no out-of-memory; the --oom-message's limit is used all the same\n",
				as_progname, trace);
		else if (req > rhi || req + 20 * AS_MiB < rlo)
			fprintf(stderr, "%s: warning: the --oom-message's request (%.2f GiB) is not the one that failed in %s (%" PRIu64
				" bytes): is the message from this run?\n", as_progname, as_gib(om.request.bytes), trace, req);
	}
	if (cli_load_model(model_path, &model, &have_model, &err)) {
		rc = cli_report(&err);
		goto out;
	}
	uint64_t ooms = 0;
	for (size_t k = 0; k < nfiles; k++) {
		advise *a = &ranks[k];
		a->model = have_model ? &model : NULL;
		a->target = capacity;
		a->fit = fit;
		a->ro = &ro;
		make_grid(a);
		ooms += a->recorded_ooms;
		/* the current settings must parse: a bad one is the user's error, found before the work */
		as_device *dev = as_sim_device_new(0, ADDR_MODEL);
		as_counters ctr = { 0 };
		as_policy *pol;
		if (as_policy_create(as_policy_find("pytorch"), &pol, a->current, dev, &ctr, &err) == 0)
			pol->ops->destroy(pol);
		as_device_destroy(dev);
		if (err.code) {
			rc = cli_usage_error("advise", "%s%s: %s", config ? "-c" : "the recorded settings of ", config ? "" : a->path, err.msg);
			goto out;
		}
	}
	if (ooms && !capacity)
		fprintf(stderr, "%s: warning: the recording ran out of memory %" PRIu64 " time(s) under a limit the trace does not record; "
			"advising without a limit: only the settings that need no more than the recording held are known to fit (give "
			"--oom-message, --capacity, --fraction or --gpu)\n", as_progname, ooms);
	{
		pool q = { .ranks = ranks, .nranks = nfiles, .threads = jobs };
		pthread_mutex_init(&q.mu, NULL);
		size_t items = 0; /* the settings to replay: one worker each at most */
		for (size_t k = 0; k < nfiles; k++)
			for (size_t i = 0; i < NGRID; i++)
				items += !ranks[k].res[i].skip;
		if (jobs > items)
			jobs = items ? items : 1;
		q.busy = jobs;
		cli_progress_start(&q.prog, "advise", nfiles * NGRID, cli_progress_delay());
		as_run_threads(jobs, worker, &q);
		if (getenv("ALLOCSIM_JOBS_DEBUG"))
			fprintf(stderr, "%s: jobs: advise: %zu setting(s) on %" PRIu64 " worker(s) of %" PRIu64 " thread(s); bisection probes: %"
				PRIu64 " asked, %" PRIu64 " run\n", as_progname, items, jobs, q.threads, q.asked, q.ran);
		cli_progress_end(&q.prog);
		pthread_mutex_destroy(&q.mu);
	}
	if (cli_interrupted) {
		fprintf(stderr, "%s: error: interrupted; nothing was written\n", as_progname);
		rc = AS_EXIT_INTERRUPTED;
		goto out;
	}
	for (size_t k = 0; k < nfiles; k++)
		for (size_t i = 0; i < NGRID; i++)
			if (!ranks[k].res[i].skip && !ranks[k].res[i].done) {
				rc = cli_report(&ranks[k].res[i].err);
				goto out;
			}
	for (size_t k = 0; k < nfiles; k++) {
		ranks[k].held = ranks[k].blame.peak;
		ranks[k].ran = !config || !strcmp(config, ranks[k].recorded ? ranks[k].recorded : "");
		classify(&ranks[k]);
	}
	advise *a = &ranks[0];
	if (is_dir) {
		agg = (advise){ .path = trace, .current = ranks[0].current, .target = capacity, .fit = fit, .n = NGRID,
			.recorded_ooms = ooms };
		agg.res = xcalloc(NGRID, sizeof(*agg.res));
		for (size_t i = 0; i < NGRID; i++) {
			agg.res[i].c = &grid[i];
			agg.res[i].config = xstrdup(ranks[0].res[i].config);
			agg.res[i].skip = ranks[0].res[i].skip;
			agg.res[i].oom_entry = -1;
		}
		aggregate(&agg, ranks, nfiles);
		for (size_t i = 0; i < NGRID; i++) { /* fits on every rank; not on one: no; else unknown */
			result *ag = &agg.res[i];
			ag->changes = ranks[0].res[i].changes;
			ag->fit = FIT_YES;
			for (size_t k = 0; k < nfiles; k++) {
				int fk = ranks[k].res[i].fit;
				if (fk == FIT_NO || (fk == FIT_UNKNOWN && ag->fit == FIT_YES))
					ag->fit = fk;
			}
		}
		for (size_t k = 0; k < nfiles; k++)
			if (ranks[k].recorded_ooms && ranks[k].held > agg.held)
				agg.held = ranks[k].held;
		a = &agg;
		for (size_t k = 1; k < nfiles; k++)
			if (strcmp(ranks[k].current, ranks[0].current))
				fprintf(stderr, "%s: warning: %s records other settings (%s) than %s (%s); the job's rows name the first one's\n",
					as_progname, ranks[k].path, ranks[k].current, ranks[0].path, ranks[0].current);
	}
	rp.best = pick(a);
	{
		const result *e = &a->res[IDX_EXPANDABLE], *h = &a->res[IDX_HARMFUL];
		if (!e->skip && !h->skip)
			rp.harmful = need_of(a, h) > need_of(a, e) ||
			             shown(a, h)->device_time_us > 2 * shown(a, e)->device_time_us;
	}
	as_outfile of = { 0 };
	if (as_outfile_open(&of, out, &err)) {
		rc = cli_report(&err);
		goto out;
	}
	if (!strcmp(format, "csv"))
		print_csv(of.fp, a, &rp);
	else if (!strcmp(format, "json"))
		print_json(of.fp, a, &rp);
	else
		print_table(of.fp, a, &rp);
	if (as_outfile_close(&of, 1, &err)) {
		rc = cli_report(&err);
		goto out;
	}
	/* 0: the recommendation fits (the target, or the limit an OOM recording ran under, or no limit);
	 * 3: nothing fits the target; 4: no target, and nothing is shown to fit the recording's limit */
	rc = fits(a, &a->res[rp.best]) == FIT_YES ? 0 : a->target ? 3 : 4;
out:
	for (size_t k = 0; k < nfiles; k++) {
		if (ranks[k].res)
			for (size_t i = 0; i < NGRID; i++)
				free(ranks[k].res[i].config);
		free(ranks[k].res);
		free(ranks[k].current);
		free(ranks[k].recorded);
		if (ranks[k].loaded) {
			as_evbuf_free(&ranks[k].buf);
			as_blame_free(&ranks[k].blame);
		}
		free(files[k]);
	}
	if (agg.res)
		for (size_t i = 0; i < NGRID; i++)
			free(agg.res[i].config);
	free(agg.res);
	free(ranks);
	free(files);
	as_lat_model_free(&model);
	return rc;
}
