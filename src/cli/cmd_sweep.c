/* cmd_sweep.c - allocsim sweep: traces x policies x parameter values, in parallel, in order. */
#include "cli/cli.h"
#include "cli/devopts.h"
#include "engine/run.h"
#include "cli/resume.h"
#include "cli/shard.h"
#include "cli/batch.h"
#include "cli/journal.h"
#include "cli/progress.h"
#include "util/outfile.h"
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <zlib.h>

static const char sweep_usage[] =
	"usage: allocsim sweep -t TRACE... [-p POLICY...] [--param NAME=VALUES]... [options]\n"
	"\n"
	"Replays every combination of traces, policies and parameter values and writes one summary CSV\n"
	"row per run, in grid order, with a 'run' index column and one column per parameter. The output\n"
	"is byte-identical whatever -j is (timing columns are 0 unless --timing).\n"
	"\n"
	"  -t, --trace TRACE       a trace (repeat, or several after one -t)\n"
	"  -p, --policy NAME       a policy (repeat; default pytorch)\n"
	"      --param NAME=VALUES a policy option (e.g. max_split_size_mb) or 'capacity'; VALUES is a\n"
	"                          comma list of values, 'none' (option left out) and ranges A..B:xK\n"
	"                          (geometric) or A..B:+K (arithmetic)\n"
	"  -c, --config STRING     settings common to every run (the parameters are appended)\n"
	"      --capacity SIZE     capacity of every run (unless a 'capacity' parameter is swept)\n"
	"  -j, --jobs N            worker threads (default 1)\n"
	"  -o, --output FILE       write the CSV to FILE (default standard output)\n"
	"      --resume            keep the rows already in FILE (and in FILE.partial, the journal of the\n"
	"                          finished rows a killed sweep leaves) and run only the missing ones\n"
	"      --shard K/N         run only shard K of N (contiguous parts of the grid of equal estimated\n"
	"                          cost); 'auto' takes K and N from a Slurm, PBS, SGE or LSF job array;\n"
	"                          with -o FILE, FILE.shard records what 'allocsim merge' checks\n"
	"      --stop-at-oom       end each replay at its first out-of-memory\n"
	"      --free-at WHEN      requested or completed: where a cross-stream free reaches the policy\n"
	"                          (default: each policy's own; doc/policies.md); not with --resume\n"
	"      --device N          the device of multi-GPU snapshots (default: the one with history)\n"
	"      --timing            fill wall_seconds and events_per_second\n"
	"      --no-share          replay every configuration, even one that a finished replay proves\n"
	"                          would give its own summary (see doc/sweeps.md)\n"
	"  -k, --keep-going        an unreadable trace (or a failed run) does not stop the others: their rows\n"
	"                          are written, one 'error: input K of N: ...' line on stderr per failure,\n"
	"                          exit 5 when some failed (doc/batches.md)\n"
	"  -q, --quiet             no warnings and no progress bar (errors are still reported)\n"
	"  -h, --help              show this help\n"
	"\n"
	"With -o FILE every finished row is also appended to FILE.partial as it finishes, so that a sweep\n"
	"killed outright (SIGKILL, the OOM killer) keeps them for --resume; FILE itself appears whole, in grid\n"
	"order, at the end (doc/batches.md).\n";

typedef struct param {
	char *name;
	char **vals;
	size_t n;
} param;

typedef struct job {
	size_t index;
	const char *trace;
	const as_policy_ops *ops;
	char *config;
	uint64_t capacity;
	char **pvals;   /* one value per parameter */
	char *row;      /* result (CSV row without header), NULL if not run */
	char *key;      /* identity for --resume */
	const char *recorded;
	const as_evbuf *events; /* the trace, decoded once for all its runs */
	size_t tindex;  /* the trace's position among the inputs */
	as_err *err;    /* --keep-going: this run's failure (NULL: none) */
	int started;    /* a worker took it (under the lock) */
} job;

typedef struct sweep {
	job *jobs;
	size_t njobs, next, done, torun, active;
	size_t *order;       /* the jobs in the order the workers take them (run_order) */
	pthread_mutex_t mu;
	int timing, stop_at_oom, no_share, free_at;
	size_t shared;       /* rows given by another run of the same trace (AS_Q_SAME_RUN) */
	as_reader_opts ro;   /* --device */
	size_t nparams;
	as_err err;
	/* decoding: each trace once, by the same workers, before any run */
	const char **traces;
	as_evbuf *bufs;
	size_t ntraces;
	int keep_going;
	as_err *load_errs;   /* per trace (--keep-going): code 0 = decoded */
	as_journal journal;  /* -o FILE: FILE.partial */
	cli_progress prog;
} sweep;

static int parse_values(param *p, const char *spec, char *msg, size_t len)
{
	return as_parse_values(spec, &p->vals, &p->n, msg, len);
}

static void free_params(param *params, size_t npar)
{
	for (size_t k = 0; k < npar; k++) {
		for (size_t v = 0; v < params[k].n; v++)
			free(params[k].vals[v]);
		free(params[k].vals);
		free(params[k].name);
	}
	free(params);
}

/* A job's row (index, parameter values, summary), without the newline. */
/* replay's warnings, where a run would get them: a trace whose recording ran out of memory replayed
 * by pytorch without a capacity (once per trace), garbage_collection_threshold without a capacity
 * (once) */
static void sweep_warnings(const sweep *sw)
{
	int gc = 0;
	size_t more = 0;
	uint64_t more_ooms = 0;
	const char *first = NULL, *names[3];
	for (size_t t = 0; t < sw->ntraces; t++) {
		uint64_t ooms = as_evbuf_recorded_ooms(&sw->bufs[t]);
		for (size_t i = 0; i < sw->njobs; i++) {
			const job *j = &sw->jobs[i];
			if (j->events != &sw->bufs[t])
				continue;
			char *conf = xstrdup(!strcmp(j->config, "recorded") && j->recorded ? j->recorded : j->config);
			unsigned warn = as_policy_prepare(j->ops, &j->events->meta, j->capacity, &conf);
			free(conf);
			if (!(warn & AS_WARN_RECORDED_OOMS)) /* (other policies take limits in -c) */
				continue;
			if (!gc && (warn & AS_WARN_GC_NO_CAPACITY)) {
				cli_warn_gc(warn);
				gc = 1;
			}
			if (ooms && !first) { /* the whole explanation once ... */
				cli_warn_recorded_ooms(sw->traces[t], ooms, &sw->bufs[t].meta);
				first = sw->traces[t];
			} else if (ooms) { /* ... and the other traces counted */
				if (more < 3)
					names[more] = sw->traces[t];
				more++;
				more_ooms += ooms;
			}
			ooms = 0;
		}
	}
	if (more) {
		char *list = NULL;
		size_t ll = 0;
		FILE *f = open_memstream(&list, &ll);
		for (size_t k = 0; k < more && k < 3; k++)
			fprintf(f, "%s'%s'", k ? ", " : "", names[k]);
		if (more > 3)
			fprintf(f, " and %zu more", more - 3);
		fclose(f);
		fprintf(stderr, "%s: warning: the same holds for %zu more trace%s whose recording ran out of memory (%" PRIu64
			" time(s) in all): %s\n", as_progname, more, more == 1 ? "" : "s", more_ooms, list);
		free(list);
	}
}

static char *job_row(const sweep *sw, const job *j, uint64_t capacity, const as_summary *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	fprintf(f, "%zu", j->index);
	for (size_t k = 0; k < sw->nparams; k++)
		fprintf(f, ",%s", j->pvals[k]);
	fputc(',', f);
	as_summary_row(f, j->trace, j->ops->name, j->config, capacity, s);
	fclose(f);
	if (len && buf[len - 1] == '\n')
		buf[len - 1] = 0;
	return buf;
}

/* Whether the replay runs the trace's recorded settings (as as_run decides for the reconciliation). */
static int job_resolves(const job *j)
{
	return as_policy_recorded(j->ops, j->recorded, j->config); /* (version:2.N aside) */
}

typedef struct share_ctx {
	sweep *sw;
	const job *j;
	const as_summary *s;
} share_ctx;

/* After job j's replay (its sink's row): the jobs not yet started with the same trace, policy,
 * capacity and reconciliation that the policy proves would replay identically (AS_Q_SAME_RUN) get
 * j's summary as their row instead of a replay of their own. The rows are the ones those replays
 * would write, so the output is the same bytes with or without this (--no-share) and for any -j;
 * only the work differs. Jobs of one trace and policy are contiguous in the grid. */
static int share_run(void *ctx, as_engine *e, const as_summary *s, as_err *err)
{
	as_policy *pol = as_engine_policy(e);
	(void)s; (void)err;
	share_ctx *c = ctx;
	sweep *sw = c->sw;
	const job *a = c->j;
	size_t *cand = NULL, n = 0, cap = 0;
	pthread_mutex_lock(&sw->mu);
	for (size_t i = a->index + 1; i < sw->njobs; i++) {
		const job *b = &sw->jobs[i];
		if (b->trace != a->trace || b->ops != a->ops)
			break;
		if (b->started || b->row || b->capacity != a->capacity || job_resolves(b) != job_resolves(a))
			continue;
		AS_GROW(cand, n, cap, 16);
		cand[n++] = i;
	}
	pthread_mutex_unlock(&sw->mu);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) { /* (the policy is this thread's) */
		as_q_same q = { sw->jobs[cand[i]].config, 0 };
		if (as_policy_query(pol, AS_Q_SAME_RUN, &q) == 0 && q.answer)
			cand[k++] = cand[i];
	}
	for (size_t i = 0; i < k; i++) {
		job *b = &sw->jobs[cand[i]];
		char *row = job_row(sw, b, b->capacity, c->s);
		int mine = 0;
		pthread_mutex_lock(&sw->mu);
		if (!b->started && !b->row) { /* not started meanwhile */
			b->row = row;
			row = NULL;
			sw->done++;
			sw->shared++;
			mine = 1;
		}
		pthread_mutex_unlock(&sw->mu);
		free(row);
		if (mine) { /* (the row is no longer changed: read outside the lock) */
			as_journal_add(&sw->journal, b->row);
			cli_progress_add(&sw->prog, 1);
		}
	}
	free(cand);
	return 0;
}

/* The order the workers take the runs in: the first value of every (trace, policy), then the second of
 * every one, ...; the (trace, policy) pairs costliest first (cli_run_cost,
 * cli_cost_order). So -j N workers replay N different traces at once, and the first run of
 * each can give its row to the later ones of its trace that it proves identical (share_run) before
 * they start, as with -j 1, instead of N runs of one trace starting together; and the last runs to
 * finish are cheap ones. Within a (trace, policy) the grid's order stays (-j 1 runs what it ran). */
static void run_order(sweep *sw, size_t ngroups, size_t per)
{
	uint64_t *cost = xmalloc((ngroups ? ngroups : 1) * sizeof(*cost));
	size_t *g = xmalloc((ngroups ? ngroups : 1) * sizeof(*g));
	for (size_t i = 0; i < ngroups; i++) {
		const job *j = &sw->jobs[i * per];
		cost[i] = cli_run_cost(sw->load_errs[j->tindex].code ? 0 : j->events->n, j->ops);
	}
	cli_cost_order(cost, ngroups, g);
	sw->order = xmalloc((sw->njobs ? sw->njobs : 1) * sizeof(size_t));
	size_t k = 0;
	for (size_t c = 0; c < per; c++)
		for (size_t i = 0; i < ngroups; i++)
			sw->order[k++] = g[i] * per + c;
	if (getenv("ALLOCSIM_JOBS_DEBUG"))
		for (size_t i = 0; i < ngroups; i++)
			fprintf(stderr, "allocsim: jobs: sweep: %zu: %s %s (cost %" PRIu64 ", %zu runs)\n", i + 1,
				sw->jobs[g[i] * per].trace, sw->jobs[g[i] * per].ops->name, cost[g[i]], per);
	free(cost);
	free(g);
}

static void *worker(void *arg)
{
	sweep *sw = arg;
	for (;;) {
		pthread_mutex_lock(&sw->mu);
		while (sw->next < sw->njobs && sw->jobs[sw->order[sw->next]].row)
			sw->next++; /* already present (--resume), given by a finished run (share_run) or not in this shard */
		if (sw->next >= sw->njobs || (sw->err.code && !sw->keep_going) || cli_interrupted) {
			sw->active--;
			pthread_mutex_unlock(&sw->mu);
			return NULL;
		}
		job *j = &sw->jobs[sw->order[sw->next++]];
		j->started = 1;
		pthread_mutex_unlock(&sw->mu);

		as_run_opts o = { .path = j->trace, .events = j->events, .ops = j->ops, .config = j->config, .capacity = j->capacity,
			.addr_mode = ADDR_AUTO, .stop_at_oom = sw->stop_at_oom, .recorded = j->recorded, .reader = &sw->ro,
			.free_at = sw->free_at };
		as_summary s;
		as_err err = { 0, "" };
		share_ctx sc = { sw, j, &s };
		as_run_sink sk = { .row = share_run, .ctx = &sc };
		if (!sw->no_share && !sw->timing) /* (a shared row would carry another run's time) */
			o.sink = &sk;
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int rc = as_run(&o, &s, &err);
		double wall = as_seconds_since(&t0);
		char *buf = NULL;
		if (!rc) {
			s.wall_seconds = sw->timing ? wall : 0.0;
			buf = job_row(sw, j, o.capacity, &s);
		}
		if (rc)
			cli_name_input(&err, j->trace);
		pthread_mutex_lock(&sw->mu);
		if (rc && !sw->err.code && !cli_interrupted)
			sw->err = err;
		if (rc && sw->keep_going && !cli_interrupted) { /* the run is done, without a row */
			j->err = xmalloc(sizeof(as_err));
			*j->err = err;
			buf = xstrdup("");
		}
		j->row = buf;
		sw->done++;
		pthread_mutex_unlock(&sw->mu);
		as_journal_add(&sw->journal, buf);
		cli_progress_add(&sw->prog, 1);
	}
}

/* ---- output, --resume and interruption ------------------------------------------------- */

/* A parameter's name is a CSV column name and its values are written unquoted: nothing in them
 * may end a field or a line. */
static int check_param(const param *p, char *msg, size_t len)
{
	static const char bad[] = ",\"\n\r";
	const char *what = NULL, *s = NULL;
	if (strpbrk(p->name, bad)) {
		what = "name";
		s = p->name;
	}
	for (size_t v = 0; !what && v < p->n; v++)
		if (strpbrk(p->vals[v], bad)) {
			what = "value";
			s = p->vals[v];
		}
	if (!what)
		return 0;
	char c = *strpbrk(s, bad);
	snprintf(msg, len, "the %s '%s' contains %s, which a CSV column cannot hold unquoted", what, s,
		c == ',' ? "a comma" : c == '"' ? "a double quote" : "a line break");
	return -1;
}

/* The header line this sweep writes, without the newline. */
static char *sweep_header(const param *params, size_t npar)
{
	char *b = NULL;
	size_t l = 0;
	FILE *f = open_memstream(&b, &l);
	fputs("run", f);
	for (size_t k = 0; k < npar; k++)
		fprintf(f, ",%s", params[k].name);
	fputc(',', f);
	as_summary_header(f);
	fclose(f);
	if (l && b[l - 1] == '\n')
		b[l - 1] = 0;
	return b;
}

/* --resume: the verified rows of the earlier output (resume.c) fill their jobs, this shard's or
 * another's (so that shards run one after another into one file keep each other's rows). */
static int sweep_resume(sweep *sw, const as_outfile *of, const char *header, const char *sample, size_t npar, int timing,
	as_err *err)
{
	if (!of->tmp)
		return as_fail(err, AS_EXIT_USAGE, "--resume needs -o a regular file, not %s", of->path ? of->path : "standard output");
	const char **keys = xmalloc((sw->njobs ? sw->njobs : 1) * sizeof(char *));
	char **kept = xcalloc(sw->njobs ? sw->njobs : 1, sizeof(char *));
	for (size_t i = 0; i < sw->njobs; i++)
		keys[i] = sw->jobs[i].key;
	as_resume_spec sp = { .header = header, .sample = sample, .nkey = npar + 4, .keys = keys, .njobs = sw->njobs,
		.timing = timing };
	long n = as_resume_load(of->target, &sp, kept, err);
	/* the journal a killed run left beside it: the rows the output does not hold yet */
	char *jpath = as_journal_path(of->target), **jkept = xcalloc(sw->njobs ? sw->njobs : 1, sizeof(char *));
	long nj = n < 0 ? 0 : as_resume_load(jpath, &sp, jkept, err);
	size_t from_journal = 0;
	for (size_t i = 0; n >= 0 && nj >= 0 && i < sw->njobs; i++) {
		if (!kept[i] && jkept[i]) {
			kept[i] = jkept[i];
			jkept[i] = NULL;
			from_journal++;
		}
		free(jkept[i]);
	}
	if (from_journal)
		fprintf(stderr, "%s: %zu finished row%s taken from '%s' (a run that was killed)\n", as_progname, from_journal,
			from_journal == 1 ? "" : "s", jpath);
	free(jpath);
	free(jkept);
	for (size_t i = 0; n >= 0 && nj >= 0 && i < sw->njobs; i++)
		if (kept[i]) {
			free(sw->jobs[i].row);
			sw->jobs[i].row = kept[i];
		}
	if (n < 0 || nj < 0)
		for (size_t i = 0; i < sw->njobs; i++)
			free(kept[i]);
	free(keys);
	free(kept);
	return n < 0 || nj < 0 ? -1 : 0;
}

static size_t rows_done(const sweep *sw)
{
	size_t n = 0;
	for (size_t i = 0; i < sw->njobs; i++)
		n += sw->jobs[i].row && sw->jobs[i].row[0];
	return n;
}

/* Writes the header and every finished row, in grid order, and commits the file. */
static int sweep_write(as_outfile *of, const char *header, const sweep *sw, as_err *err)
{
	fprintf(of->fp, "%s\n", header);
	for (size_t i = 0; i < sw->njobs; i++)
		if (sw->jobs[i].row && sw->jobs[i].row[0])
			fprintf(of->fp, "%s\n", sw->jobs[i].row);
	return as_outfile_close(of, 1, err);
}

/* Ctrl-C or SIGTERM: the runs that finished are written (whole rows, in grid order) and the user
 * is told how to go on; nothing replaces an earlier output if no run finished. Exit 130. */
static int sweep_interrupted(as_outfile *of, const char *header, const sweep *sw, const char *out)
{
	as_err err = { 0, "" };
	size_t have = rows_done(sw), left = 0;
	for (size_t i = 0; i < sw->njobs; i++)
		left += !sw->jobs[i].row;
	if (!have) {
		as_outfile_close(of, 0, &err);
		fprintf(stderr, "%s: error: interrupted before any run finished; %s\n", as_progname,
			out && strcmp(out, "-") ? "the output was left as it was" : "nothing was written");
		return AS_EXIT_INTERRUPTED;
	}
	if (sweep_write(of, header, sw, &err))
		return cli_report(&err);
	if (out && strcmp(out, "-"))
		fprintf(stderr, "%s: error: interrupted: '%s' holds the %zu finished runs, %zu are not done; run the same command "
			"with --resume to do only those\n", as_progname, out, have, left);
	else
		fprintf(stderr, "%s: error: interrupted: %zu finished runs were written, %zu are not done; to resume, write to a "
			"file (-o FILE) and run again with --resume\n", as_progname, have, left);
	return AS_EXIT_INTERRUPTED;
}

/* --keep-going after some traces could not be read or some runs failed: one line each on stderr,
 * in input (then grid) order, the rows of the others written; exit 5 (every one failed: nothing is
 * written, the first failure's status). */
static int sweep_keep_going(as_outfile *of, const char *header, const sweep *sw, as_err *err, int *committed)
{
	size_t failed = 0;
	as_err first = { 0, "" };
	for (size_t t = 0; t < sw->ntraces; t++) {
		if (sw->load_errs[t].code) {
			cli_batch_error(t, sw->ntraces, sw->traces[t], NULL, &sw->load_errs[t]);
			if (!failed++)
				first = sw->load_errs[t];
			continue;
		}
		for (size_t i = 0; i < sw->njobs; i++) {
			const job *j = &sw->jobs[i];
			if (j->tindex != t || !j->err)
				continue;
			char what[64];
			snprintf(what, sizeof what, "run %zu", j->index);
			cli_batch_error(t, sw->ntraces, sw->traces[t], what, j->err);
			if (!failed++)
				first = *j->err;
		}
	}
	size_t rows = rows_done(sw);
	if (!rows) {
		fprintf(stderr, "%s: error: every input failed; nothing was written\n", as_progname);
		return first.code ? first.code : AS_EXIT_SOFTWARE;
	}
	if (sweep_write(of, header, sw, err))
		return cli_report(err);
	*committed = 1;
	fprintf(stderr, "%s: %zu failure%s (listed above); the other %zu rows were written (exit %d)\n", as_progname, failed,
		failed == 1 ? "" : "s", rows, AS_EXIT_PARTIAL);
	return cli_batch_status(failed, rows, &first);
}

/* ---- --shard (shard.c) ------------------------------------------------------------------- */

/* The shard plan of ntr traces x per runs each: owner of each run and each shard's estimated cost
 * (*loads). Without --shard (n = 1) all runs are shard 1's. Every shard still decodes every trace:
 * a run's settings (its row and identity) include the PyTorch release its snapshot implies. */
static uint32_t *sweep_plan(const char *const *traces, size_t ntr, size_t per, uint64_t n, uint64_t **loads)
{
	uint64_t *cost = xmalloc((ntr ? ntr : 1) * sizeof(uint64_t));
	for (size_t t = 0; t < ntr; t++)
		cost[t] = n > 1 ? as_trace_cost(traces[t]) : 1;
	*loads = xcalloc(n, sizeof(uint64_t));
	uint32_t *plan = as_shard_plan(cost, ntr, per, n, *loads);
	free(cost);
	return plan;
}

/* After a shard's output is committed: OUT.shard, its provenance (build, arguments, the grid's
 * identity, which shard, how many runs, the file's checksum) for allocsim merge. */
static int sweep_note_shard(const sweep *sw, const char *out, const char *header, const uint32_t *plan,
	const uint64_t *loads, uint64_t k, uint64_t n, int argc, char **argv)
{
	if (!out || !strcmp(out, "-")) {
		fprintf(stderr, "%s: warning: --shard to standard output: no provenance file, so 'allocsim merge' will not take "
			"this output (use -o FILE)\n", as_progname);
		return 0;
	}
	struct stat st;
	if (stat(out, &st) || !S_ISREG(st.st_mode))
		return 0; /* a device or a FIFO: nothing to check later */
	as_shard_prov p = { .build = as_shard_build(), .args = as_shard_args(argc, argv), .k = k, .n = n,
		.jobs = sw->njobs, .cost = loads[k - 1] };
	uLong crc = crc32(0L, Z_NULL, 0);
	char flags[64];
	snprintf(flags, sizeof flags, "timing=%d stop_at_oom=%d device=%d:%u free_at=%d\n", sw->timing, sw->stop_at_oom,
		sw->ro.has_device, (unsigned)sw->ro.device, sw->free_at);
	crc = crc32(crc, (const Bytef *)flags, (uInt)strlen(flags));
	crc = crc32(crc, (const Bytef *)header, (uInt)strlen(header) + 1); /* (the NUL separates) */
	for (size_t i = 0; i < sw->njobs; i++) {
		const job *j = &sw->jobs[i];
		crc = crc32(crc, (const Bytef *)j->key, (uInt)strlen(j->key) + 1);
		if (plan[i] == k - 1) {
			p.owned++;
			p.done += j->row && j->row[0];
		}
	}
	p.grid = (uint32_t)crc;
	for (uint64_t s = 0; s < n; s++) {
		p.total += loads[s];
		p.slowest = loads[s] > p.slowest ? loads[s] : p.slowest;
	}
	as_err err = { 0, "" };
	int rc = as_shard_note(out, &p, &err) ? cli_report(&err) : 0;
	as_shard_prov_free(&p);
	return rc;
}

int cmd_sweep(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "trace", required_argument, 0, 't' }, { "policy", required_argument, 0, 'p' },
		{ "param", required_argument, 0, 'P' }, { "config", required_argument, 0, 'c' },
		CLI_DEVOPT(CAPACITY), { "jobs", required_argument, 0, 'j' },
		{ "output", required_argument, 0, 'o' }, { "resume", no_argument, 0, 'R' },
		{ "shard", required_argument, 0, 'S' }, { "timing", no_argument, 0, 'T' },
		{ "stop-at-oom", no_argument, 0, 'O' }, CLI_DEVOPT(DEVICE),
		{ "no-share", no_argument, 0, 'N' },
		{ "keep-going", no_argument, 0, 'k' }, { "quiet", no_argument, 0, 'q' }, /* (issue 32) */
		{ "free-at", required_argument, 0, OPT_FREE_AT },
		{ "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 },
	};
	as_reader_opts ro = { 0 };
	cli_dev dv = { .ro = &ro };
	const char **traces = NULL;
	const as_policy_ops **pols = NULL;
	param *params = NULL;
	size_t ntr = 0, npol = 0, npar = 0;
	const char *base = "", *out = NULL;
	uint64_t jobs = 1, shard_k = 1, shard_n = 1;
	int resume = 0, timing = 0, stop_at_oom = 0, no_share = 0, free_at = AS_FREE_AT_POLICY, c, dr, rc = 0;
	int keep_going = 0, quiet = 0, sharded = 0;
	char m[256];
	optind = 1;
	cli_catch_signals(); /* every replay under way stops at its next event */
	while ((c = getopt_long(argc, argv, "-t:p:c:j:o:hkq", lo, NULL)) != -1) {
		if ((dr = cli_devopt("sweep", &dv, c, optarg)) >= 0) {
			if ((rc = dr))
				goto args_out;
			continue;
		}
		switch (c) {
		case 1: /* a trace following -t */
		case 't':
			traces = xrealloc(traces, (ntr + 1) * sizeof(*traces));
			traces[ntr++] = optarg;
			break;
		case 'p': {
			const as_policy_ops *o = as_policy_find(optarg);
			if (!o) {
				char um[256];
				as_policy_unknown(optarg, um, sizeof um);
				rc = cli_usage_error("sweep", "%s", um);
				goto args_out;
			}
			pols = xrealloc(pols, (npol + 1) * sizeof(*pols));
			pols[npol++] = o;
			break;
		}
		case 'P': {
			char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg)
				{ rc = cli_usage_error("sweep", "--param needs NAME=VALUES, got '%s'", optarg); goto args_out; }
			params = xrealloc(params, (npar + 1) * sizeof(*params));
			param *p = &params[npar++];
			memset(p, 0, sizeof(*p));
			p->name = xmalloc((size_t)(eq - optarg) + 1);
			memcpy(p->name, optarg, (size_t)(eq - optarg));
			p->name[eq - optarg] = 0;
			if (parse_values(p, eq + 1, m, sizeof m) || check_param(p, m, sizeof m))
				{ rc = cli_usage_error("sweep", "--param %s: %s", p->name, m); goto args_out; }
			break;
		}
		case 'c': base = optarg; break;
		case 'j':
			if (as_parse_u64(optarg, &jobs) || !jobs || jobs > 1024)
				{ rc = cli_usage_error("sweep", "-j: '%s' is not a number of workers (1..1024)", optarg); goto args_out; }
			break;
		case 'o': out = optarg; break;
		case 'R': resume = 1; break;
		case 'S':
			if (as_shard_parse(optarg, &shard_k, &shard_n, m, sizeof m))
				{ rc = cli_usage_error("sweep", "%s", m); goto args_out; }
			sharded = 1;
			break;
		case 'T': timing = 1; break;
		case 'O': stop_at_oom = 1; break;
		case 'N': no_share = 1; break;
		case 'k': keep_going = 1; break;
		case 'q': quiet = 1; break;
		case OPT_FREE_AT:
			if ((free_at = as_free_at_parse(optarg)) < 0)
				{ rc = cli_usage_error("sweep", "--free-at: requested or completed, not '%s'", optarg); goto args_out; }
			break;
		case 'h': fputs(sweep_usage, stdout); return 0;
		case 'V': cli_version(); return 0;
		default: { rc = cli_usage_error("sweep", "invalid option"); goto args_out; }
		}
	}
	if (!ntr)
		{ rc = cli_usage_error("sweep", "no trace (-t TRACE)"); goto args_out; }
	if (resume && !out)
		{ rc = cli_usage_error("sweep", "--resume needs -o FILE"); goto args_out; }
	if (resume && free_at != AS_FREE_AT_POLICY) /* the rows on file do not say when their frees were applied */
		{ rc = cli_usage_error("sweep", "--free-at cannot be combined with --resume"); goto args_out; }
	if (!npol) {
		pols = xmalloc(sizeof(*pols));
		pols[npol++] = as_policy_find("pytorch");
	}

	if (0) {
args_out:
		free_params(params, npar);
		free(traces);
		free(pols);
		return rc;
	}
	sweep sw;
	memset(&sw, 0, sizeof sw);
	as_err err = { 0, "" };
	as_outfile of;
	char **recorded = NULL, *header = NULL, *sample = NULL;
	uint32_t *plan = NULL;
	uint64_t *loads = NULL;
	int committed = 0;
	/* The output first, so that a bad -o fails before any work; the lock is held from here, while
	 * --resume reads the file, to the rename. */
	cli_catch_signals();
	if (as_outputs_check(&out, 1, traces, ntr, &err) || as_outfile_open_locked(&of, out, &err)) {
		rc = cli_report(&err);
		goto args_out;
	}
	header = sweep_header(params, npar);
	pthread_mutex_init(&sw.mu, NULL);
	sw.timing = timing;
	sw.stop_at_oom = stop_at_oom;
	sw.free_at = free_at;
	sw.no_share = no_share;
	sw.keep_going = keep_going;
	sw.journal.fd = -1;
	sw.ro = ro;
	sw.nparams = npar;
	size_t ncomb = 1;
	for (size_t k = 0; k < npar; k++) {
		if (ncomb > 10000000 / params[k].n) {
			rc = cli_usage_error("sweep", "the grid is larger than 10 million runs");
			goto done;
		}
		ncomb *= params[k].n;
	}
	sw.njobs = ntr * npol * ncomb;
	sw.jobs = xcalloc(sw.njobs, sizeof(job));
	recorded = xcalloc(ntr, sizeof(char *));
	sw.traces = traces;
	sw.ntraces = ntr;
	sw.bufs = xcalloc(sw.ntraces, sizeof(*sw.bufs));
	sw.load_errs = xcalloc(ntr, sizeof(as_err));
	plan = sweep_plan(traces, ntr, npol * ncomb, shard_n, &loads); /* which runs are this shard's */
	size_t bad_traces = as_evbuf_load_each(sw.bufs, sw.traces, sw.ntraces, &sw.ro, jobs, sw.load_errs);
	if (bad_traces && (cli_interrupted || !keep_going)) {
		for (size_t t = 0; t < ntr && !cli_interrupted; t++)
			if (sw.load_errs[t].code) {
				err = sw.load_errs[t];
				cli_name_input(&err, traces[t]);
				break;
			}
		rc = cli_interrupted ? sweep_interrupted(&of, header, &sw, out) : cli_report(&err);
		goto done;
	}
	for (size_t t = 0; t < ntr; t++)
		recorded[t] = as_recorded_settings(&sw.bufs[t].meta);
	size_t idx = 0;
	for (size_t t = 0; t < ntr; t++)
		for (size_t p = 0; p < npol; p++)
			for (size_t cmb = 0; cmb < ncomb; cmb++, idx++) {
				job *j = &sw.jobs[idx];
				j->index = idx;
				j->trace = traces[t];
				j->ops = pols[p];
				j->recorded = recorded[t];
				j->events = &sw.bufs[t];
				j->tindex = t;
				j->capacity = dv.capacity;
				j->pvals = xcalloc(npar + 1, sizeof(char *));
				size_t rest = cmb;
				for (size_t k = npar; k-- > 0;) {
					j->pvals[k] = params[k].vals[rest % params[k].n];
					rest /= params[k].n;
				}
				j->config = xstrdup(base);
				for (size_t k = 0; k < npar; k++) {
					if (!strcmp(j->pvals[k], "none"))
						continue;
					if (!strcmp(params[k].name, "capacity")) {
						if (as_parse_capacity(j->pvals[k], &j->capacity, m, sizeof m)) {
							rc = cli_usage_error("sweep", "--param capacity: %s", m);
							goto done;
						}
						continue;
					}
					char *nc = as_conf_with(j->config, params[k].name, j->pvals[k]); /* a stack: the top layer's */
					free(j->config);
					j->config = nc;
				}
				/* the policy's settings on this trace, as every command takes them (pytorch: the
				 * release the snapshot implies, version:2.N; issue 36) */
				as_policy_prepare(j->ops, &j->events->meta, j->capacity, &j->config);
				/* identity for --resume: params, trace, policy, config, capacity (as CSV text) */
				char *kb = NULL;
				size_t kl = 0;
				FILE *kf = open_memstream(&kb, &kl);
				fprintf(kf, "0");
				for (size_t k = 0; k < npar; k++)
					fprintf(kf, ",%s", j->pvals[k]);
				fputc(',', kf);
				as_summary zero;
				memset(&zero, 0, sizeof zero);
				as_summary_row(kf, j->trace, j->ops->name, j->config, j->capacity, &zero);
				fclose(kf);
				j->key = as_resume_key(kb, npar + 4);
				if (!sample) {
					sample = kb;
					size_t sl = strlen(sample);
					if (sl && sample[sl - 1] == '\n')
						sample[sl - 1] = 0;
				} else {
					free(kb);
				}
				if (plan[idx] != shard_k - 1)
					j->row = xstrdup(""); /* another shard's */
				else if (sw.load_errs[t].code)
					j->row = xstrdup(""); /* --keep-going: the trace could not be read */
			}
	if (!quiet && shard_k == 1) /* (once for all shards: shard 1 tells) */
		sweep_warnings(&sw);
	if (resume && sweep_resume(&sw, &of, header, sample, npar, timing, &err)) {
		rc = cli_report(&err);
		goto done;
	}
	if (of.tmp) { /* -o FILE: the journal of finished rows, FILE.partial */
		char *jp = as_journal_path(of.target);
		if (!resume && access(jp, F_OK) == 0 && !quiet)
			fprintf(stderr, "%s: warning: '%s' (the finished rows of an earlier run that did not end) is replaced; "
				"--resume would have kept them\n", as_progname, jp);
		free(jp);
		char **rows = xcalloc(sw.njobs ? sw.njobs : 1, sizeof(char *));
		for (size_t i = 0; i < sw.njobs; i++)
			rows[i] = sw.jobs[i].row;
		int jr = as_journal_open(&sw.journal, of.target, header, rows, sw.njobs, &err);
		free(rows);
		if (jr) {
			rc = cli_report(&err);
			goto done;
		}
	}
	for (size_t i = 0; i < sw.njobs; i++)
		if (!sw.jobs[i].row)
			sw.torun++;
	run_order(&sw, ntr * npol, ncomb);
	pthread_t *th = xcalloc(jobs, sizeof(pthread_t));
	sw.active = jobs;
	if (quiet)
		cli_progress_quiet();
	else
		cli_progress_start(&sw.prog, NULL, sw.torun, 0);
	for (uint64_t w = 0; w < jobs; w++)
		pthread_create(&th[w], NULL, worker, &sw);
	for (uint64_t w = 0; w < jobs; w++)
		pthread_join(th[w], NULL);
	free(th);
	if (getenv("ALLOCSIM_JOBS_DEBUG"))
		fprintf(stderr, "allocsim: jobs: sweep: %zu run(s) to do, %zu replayed, %zu given by a finished run of their trace\n",
			sw.torun, sw.done - sw.shared, sw.shared);
	cli_progress_end(&sw.prog); /* at once: no sleep after the work */
	if (keep_going && !cli_interrupted && (sw.err.code || bad_traces)) {
		rc = sweep_keep_going(&of, header, &sw, &err, &committed);
		goto done;
	}
	if (sw.err.code) {
		rc = cli_report(&sw.err);
		goto done;
	}
	if (cli_interrupted) {
		rc = sweep_interrupted(&of, header, &sw, out);
		committed = rows_done(&sw) > 0;
		goto done;
	}
	if (sweep_write(&of, header, &sw, &err))
		rc = cli_report(&err);
	else
		committed = 1;
	if (committed && sharded)
		rc = sweep_note_shard(&sw, out, header, plan, loads, shard_k, shard_n, argc, argv);
done:
	/* the journal goes once its rows are in the output; after an error it stays for --resume */
	as_journal_close(&sw.journal, committed);
	as_outfile_close(&of, 0, &err); /* after an error: the temporary file goes, the lock is released */
	free(header);
	free(sample);
	for (size_t i = 0; i < sw.njobs; i++) {
		free(sw.jobs[i].config);
		free(sw.jobs[i].pvals);
		free(sw.jobs[i].row);
		free(sw.jobs[i].key);
		free(sw.jobs[i].err);
	}
	free(sw.load_errs);
	free(sw.jobs);
	free(sw.order);
	for (size_t t = 0; recorded && t < ntr; t++) {
		free(recorded[t]);
		if (sw.bufs)
			as_evbuf_free(&sw.bufs[t]);
	}
	free(recorded);
	free(sw.bufs);
	free(plan);
	free(loads);
	free_params(params, npar);
	free(traces);
	free(pols);
	pthread_mutex_destroy(&sw.mu);
	return rc;
}
