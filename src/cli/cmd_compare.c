/* cmd_compare.c - allocsim compare: every policy on every trace, one summary row each, the rows
 * 'allocsim replay' writes. Each trace is decoded once and shared read-only by the worker threads
 * (as sweep does); rows come in a fixed order (trace by trace, policies in the order given) and the
 * output is byte-identical whatever -j is. */
#include "cli/cli.h"
#include "cli/devopts.h"
#include "cli/batch.h"
#include "cli/progress.h"
#include "cli/journal.h"
#include "cli/resume.h"
#include "engine/run.h"
#include "util/outfile.h"
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char compare_usage[] =
	"usage: allocsim compare [-p POLICIES] [options] TRACE...\n"
	"\n"
	"Replays every trace against every policy (each with its default settings) and writes one summary\n"
	"CSV row per trace and policy: the row 'allocsim replay --no-timing' writes, trace by trace, the\n"
	"policies in the order given. lower_bound_bytes and overhead_vs_bound state each policy's peak\n"
	"against the peak of live bytes (doc/metrics.md).\n"
	"\n"
	"  -p, --policy LIST       comma-separated policies or stacks (repeatable); 'all' (the default)\n"
	"                          is every policy 'allocsim policies' lists, in its order\n"
	"      --capacity SIZE     memory every replay may reserve (default: the trace's, or unlimited)\n"
	"  -j, --jobs N            worker threads (default 1); the output does not depend on it\n"
	"  -o, --output FILE       write the CSV to FILE (default standard output); written whole at the end;\n"
	"                          meanwhile each finished row is appended to FILE.partial (a killed\n"
	"                          compare keeps them) and FILE is locked (FILE.lock)\n"
	"      --resume            keep the rows in FILE.partial (a killed or interrupted compare's) and run\n"
	"                          only the missing ones\n"
	"      --latency-model F   device-call latency model (default: the bundled H200 calibration, as\n"
	"                          replay); 'none' for none\n"
	"      --device N          the device of multi-GPU snapshots (default: the one with history)\n"
	"      --free-at WHEN      requested or completed: where a cross-stream free reaches every policy\n"
	"                          (default: each policy's own; doc/policies.md); not with --resume\n"
	"      --timing            fill wall_seconds and events_per_second (then not byte-identical)\n"
	"  -k, --keep-going        an unreadable trace (or a failed replay) does not stop the others: their\n"
	"                          rows are written, one 'error: input K of N: ...' line on stderr per\n"
	"                          failure, exit 5 when some failed (doc/batches.md)\n"
	"  -h, --help              show this help\n";

typedef struct cjob {
	size_t trace;
	const as_policy_ops *ops;
	char *config;     /* "" as the policy prepares it for the trace (pytorch: the snapshot's version:2.N) */
	char *row;
	as_err err;       /* --keep-going: this run's failure */
} cjob;

typedef struct compare {
	const char **traces;
	size_t ntraces;
	as_evbuf *bufs;
	char **recorded;
	as_reader_opts ro;
	cjob *jobs;
	size_t njobs, next;
	size_t *order;    /* the jobs in the order they are started: costliest first (job_order) */
	uint64_t capacity;
	const as_lat_model *model;
	int timing;
	int free_at;      /* AS_FREE_AT_* */
	pthread_mutex_t mu;
	as_err err;       /* the first failure in job order */
	size_t err_job;
	int keep_going;
	as_err *load_errs; /* per trace: code 0 = loaded */
	cli_progress prog;
	as_journal journal; /* -o FILE: FILE.partial, rows "JOB,ROW" */
} compare;

static void *worker(void *arg)
{
	compare *c = arg;
	for (;;) {
		pthread_mutex_lock(&c->mu);
		size_t k = c->next++;
		int stop = k >= c->njobs || cli_interrupted;
		pthread_mutex_unlock(&c->mu);
		if (stop)
			return NULL;
		size_t i = c->order[k];
		cjob *j = &c->jobs[i];
		if (j->row || c->load_errs[j->trace].code) { /* --resume's, or (--keep-going) the trace was not read */
			cli_progress_add(&c->prog, 1);
			continue;
		}
		as_run_opts o = { .path = c->traces[j->trace], .events = &c->bufs[j->trace], .ops = j->ops, .config = j->config,
			.capacity = c->capacity, .addr_mode = ADDR_AUTO, .recorded = c->recorded[j->trace], .reader = &c->ro,
			.model = c->model, .free_at = c->free_at };
		as_summary s;
		as_err err = { 0, "" };
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int rc = as_run(&o, &s, &err);
		double wall = as_seconds_since(&t0);
		char *buf = NULL;
		size_t len = 0;
		if (!rc) {
			s.wall_seconds = c->timing ? wall : 0.0;
			uint64_t cap = c->capacity ? c->capacity : c->bufs[j->trace].meta.capacity;
			FILE *f = open_memstream(&buf, &len);
			as_summary_row(f, c->traces[j->trace], j->ops->name, j->config, cap, &s);
			fclose(f);
		}
		pthread_mutex_lock(&c->mu);
		if (rc)
			cli_name_input(&err, c->traces[j->trace]);
		if (rc && (!c->err.code || i < c->err_job)) {
			c->err = err;
			c->err_job = i;
		}
		if (rc)
			j->err = err;
		j->row = buf;
		pthread_mutex_unlock(&c->mu);
		if (buf && c->journal.fd >= 0) {
			char *jr = xmalloc(len + 32);
			snprintf(jr, len + 32, "%zu,%.*s", i, (int)(len && buf[len - 1] == '\n' ? len - 1 : len), buf);
			as_journal_add(&c->journal, jr);
			free(jr);
		}
		cli_progress_add(&c->prog, 1);
	}
}

/* The order the workers take the jobs in: the costliest first (cli_cost_order); ties keep the output's
 * order. ALLOCSIM_JOBS_DEBUG prints the order. */
static void job_order(compare *c)
{
	uint64_t *cost = xmalloc((c->njobs ? c->njobs : 1) * sizeof(*cost));
	for (size_t i = 0; i < c->njobs; i++) {
		const cjob *j = &c->jobs[i];
		cost[i] = cli_run_cost(c->load_errs[j->trace].code ? 0 : c->bufs[j->trace].n, j->ops);
	}
	c->order = xmalloc((c->njobs ? c->njobs : 1) * sizeof(size_t));
	cli_cost_order(cost, c->njobs, c->order);
	if (getenv("ALLOCSIM_JOBS_DEBUG"))
		for (size_t i = 0; i < c->njobs; i++)
			fprintf(stderr, "allocsim: jobs: compare: %zu: %s %s (cost %" PRIu64 ")\n", i + 1,
				c->traces[c->jobs[c->order[i]].trace], c->jobs[c->order[i]].ops->name, cost[c->order[i]]);
	free(cost);
}

/* Adds the policies of one -p argument ("all" or a comma list). */
static int add_policies(const char *arg, const as_policy_ops ***pols, size_t *n)
{
	char *copy = xstrdup(arg), *save = NULL;
	size_t before = *n;
	int rc = 0;
	for (char *it = strtok_r(copy, ",", &save); it && !rc; it = strtok_r(NULL, ",", &save)) {
		if (!strcmp(it, "all")) {
			for (size_t i = 0; as_policies[i]; i++) {
				*pols = xrealloc(*pols, (*n + 1) * sizeof(**pols));
				(*pols)[(*n)++] = as_policies[i];
			}
			continue;
		}
		const as_policy_ops *o = as_policy_find(it);
		if (!o) {
			rc = cli_usage_error("compare", "unknown policy '%s' (see 'allocsim policies')", it);
			break;
		}
		*pols = xrealloc(*pols, (*n + 1) * sizeof(**pols));
		(*pols)[(*n)++] = o;
	}
	if (!rc && *n == before)
		rc = cli_usage_error("compare", "-p: no policy in '%s'", arg);
	free(copy);
	return rc;
}

/* -o FILE: the journal FILE.partial, rows "JOB,ROW" in completion order; with --resume first the
 * verified rows of an earlier journal (resume.c: keyed by trace, policy, config and capacity), which
 * fill their jobs and start the new journal. */
static int compare_journal(compare *c, const as_outfile *of, int resume, as_err *err)
{
	char *hb = NULL, *header, **keys = xcalloc(c->njobs ? c->njobs : 1, sizeof(char *)), *sample = NULL;
	size_t hl = 0;
	FILE *f = open_memstream(&hb, &hl);
	fputs("run,", f);
	as_summary_header(f);
	fclose(f);
	if (hl && hb[hl - 1] == '\n')
		hb[hl - 1] = 0;
	header = hb;
	as_summary zero;
	memset(&zero, 0, sizeof zero);
	for (size_t i = 0; i < c->njobs; i++) {
		char *kb = NULL;
		size_t kl = 0;
		FILE *kf = open_memstream(&kb, &kl);
		uint64_t cap = c->capacity ? c->capacity : c->bufs[c->jobs[i].trace].meta.capacity;
		fputs("0,", kf);
		as_summary_row(kf, c->traces[c->jobs[i].trace], c->jobs[i].ops->name, c->jobs[i].config, cap, &zero);
		fclose(kf);
		if (kl && kb[kl - 1] == '\n')
			kb[kl - 1] = 0;
		keys[i] = as_resume_key(kb, 4);
		if (!sample)
			sample = kb;
		else
			free(kb);
	}
	char **kept = xcalloc(c->njobs ? c->njobs : 1, sizeof(char *));
	int rc = 0;
	if (resume) {
		char *jp = as_journal_path(of->target);
		as_resume_spec sp = { .header = header, .sample = sample ? sample : "", .nkey = 4,
			.keys = (const char *const *)keys, .njobs = c->njobs, .timing = c->timing };
		long n = as_resume_load(jp, &sp, kept, err);
		if (n < 0)
			rc = -1;
		else if (n > 0)
			fprintf(stderr, "%s: %ld finished row%s taken from '%s'\n", as_progname, n, n == 1 ? "" : "s", jp);
		free(jp);
		for (size_t i = 0; !rc && i < c->njobs; i++)
			if (kept[i] && !c->load_errs[c->jobs[i].trace].code) { /* "JOB,ROW" -> "ROW\n" */
				const char *row = strchr(kept[i], ',') + 1;
				size_t l = strlen(row);
				c->jobs[i].row = xmalloc(l + 2);
				memcpy(c->jobs[i].row, row, l);
				memcpy(c->jobs[i].row + l, "\n", 2);
			}
	} else {
		char *jp = as_journal_path(of->target);
		if (access(jp, F_OK) == 0)
			fprintf(stderr, "%s: warning: '%s' (the finished rows of an earlier run that did not end) is replaced; "
				"--resume would have kept them\n", as_progname, jp);
		free(jp);
	}
	if (!rc)
		rc = as_journal_open(&c->journal, of->target, header, kept, c->njobs, err);
	for (size_t i = 0; i < c->njobs; i++) {
		free(keys[i]);
		free(kept[i]);
	}
	free(keys);
	free(kept);
	free(sample);
	free(header);
	return rc;
}

int cmd_compare(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "policy", required_argument, 0, 'p' }, CLI_DEVOPT(CAPACITY),
		{ "jobs", required_argument, 0, 'j' }, { "output", required_argument, 0, 'o' },
		{ "latency-model", required_argument, 0, 'M' }, CLI_DEVOPT(DEVICE),
		{ "timing", no_argument, 0, 'T' }, { "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' },
		{ "keep-going", no_argument, 0, 'k' }, { "resume", no_argument, 0, 'R' },
		{ "free-at", required_argument, 0, OPT_FREE_AT },
		{ 0, 0, 0, 0 },
	};
	compare c;
	memset(&c, 0, sizeof c);
	const as_policy_ops **pols = NULL;
	size_t npol = 0;
	const char *out = NULL, *model_path = NULL;
	uint64_t jobs = 1;
	cli_dev dv = { .ro = &c.ro };
	int ch, dr, rc = 0, resume = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "p:j:o:hk", lo, NULL)) != -1) {
		if ((dr = cli_devopt("compare", &dv, ch, optarg)) >= 0) {
			if ((rc = dr))
				goto args_out;
			continue;
		}
		switch (ch) {
		case 'p':
			if ((rc = add_policies(optarg, &pols, &npol)))
				goto args_out;
			break;
		case 'j':
			if (as_parse_u64(optarg, &jobs) || !jobs || jobs > 1024)
				{ rc = cli_usage_error("compare", "-j: '%s' is not a number of workers (1..1024)", optarg); goto args_out; }
			break;
		case 'o': out = optarg; break;
		case 'M': model_path = optarg; break;
		case 'T': c.timing = 1; break;
		case 'k': c.keep_going = 1; break;
		case 'R': resume = 1; break;
		case OPT_FREE_AT:
			if ((c.free_at = as_free_at_parse(optarg)) < 0)
				{ rc = cli_usage_error("compare", "--free-at: requested or completed, not '%s'", optarg); goto args_out; }
			break;
		case 'h': fputs(compare_usage, stdout); free(pols); return 0;
		case 'V': cli_version(); free(pols); return 0;
		default: rc = cli_usage_error("compare", "invalid option"); goto args_out;
		}
	}
	if (optind >= argc)
		{ rc = cli_usage_error("compare", "no trace"); goto args_out; }
	if (resume && (!out || !strcmp(out, "-")))
		{ rc = cli_usage_error("compare", "--resume needs -o FILE"); goto args_out; }
	if (resume && c.free_at != AS_FREE_AT_POLICY) /* the rows on file do not say when their frees were applied */
		{ rc = cli_usage_error("compare", "--free-at cannot be combined with --resume"); goto args_out; }
	if (!npol && (rc = add_policies("all", &pols, &npol)))
		goto args_out;
	if (0) {
args_out:
		free(pols);
		return rc;
	}
	c.traces = (const char **)(argv + optind);
	c.ntraces = (size_t)(argc - optind);
	c.capacity = dv.capacity;
	as_err err = { 0, "" };
	as_outfile of;
	as_lat_model model;
	int have_model = 0;
	memset(&model, 0, sizeof model);
	cli_catch_signals();
	/* the output first, so that a bad -o fails before any work */
	c.journal.fd = -1;
	if (as_outputs_check(&out, 1, c.traces, c.ntraces, &err) || as_outfile_open_locked(&of, out, &err)) {
		free(pols);
		return cli_report(&err);
	}
	pthread_mutex_init(&c.mu, NULL);
	c.bufs = xcalloc(c.ntraces, sizeof(*c.bufs));
	c.recorded = xcalloc(c.ntraces, sizeof(char *));
	if (cli_load_model(model_path, &model, &have_model, &err))
		goto done;
	c.model = have_model ? &model : NULL;
	c.load_errs = xcalloc(c.ntraces ? c.ntraces : 1, sizeof(as_err));
	size_t bad_traces = as_evbuf_load_each(c.bufs, c.traces, c.ntraces, &c.ro, jobs, c.load_errs);
	if (bad_traces && (cli_interrupted || !c.keep_going)) {
		for (size_t t = 0; t < c.ntraces; t++)
			if (c.load_errs[t].code) {
				err = c.load_errs[t];
				cli_name_input(&err, c.traces[t]);
				break;
			}
		goto done;
	}
	for (size_t t = 0; t < c.ntraces; t++)
		c.recorded[t] = as_recorded_settings(&c.bufs[t].meta);
	c.njobs = c.ntraces * npol;
	c.jobs = xcalloc(c.njobs, sizeof(*c.jobs));
	for (size_t t = 0, k = 0; t < c.ntraces; t++)
		for (size_t p = 0; p < npol; p++, k++) {
			c.jobs[k] = (cjob){ t, pols[p], xstrdup(""), NULL, { 0, "" } };
			uint64_t cap = c.capacity ? c.capacity : c.bufs[t].meta.capacity;
			as_policy_prepare(pols[p], &c.bufs[t].meta, cap, &c.jobs[k].config); /* as every command (issue 36) */
		}
	if (of.tmp && compare_journal(&c, &of, resume, &err))
		goto done;
	job_order(&c);
	cli_progress_start(&c.prog, "compare", c.njobs, cli_progress_delay());
	as_run_threads(jobs < c.njobs ? jobs : c.njobs, worker, &c);
	cli_progress_end(&c.prog);
	if (cli_interrupted) {
		size_t have = 0;
		for (size_t i = 0; i < c.njobs; i++)
			have += c.jobs[i].row != NULL;
		as_err_clear(&err);
		if (have && c.journal.path)
			as_fail(&err, AS_EXIT_INTERRUPTED, "interrupted: '%s' holds the %zu finished rows, %zu are not done; run the "
				"same command with --resume to do only those", c.journal.path, have, c.njobs - have);
		else
			as_fail(&err, AS_EXIT_INTERRUPTED, "interrupted; nothing was written");
		goto done;
	}
	if (c.err.code && !c.keep_going) {
		err = c.err;
		goto done;
	}
	/* --keep-going: one line per unreadable trace and per failed replay, in input order */
	size_t failed = 0, rows = 0;
	as_err first = { 0, "" };
	for (size_t t = 0; t < c.ntraces; t++) {
		if (c.load_errs[t].code) {
			cli_batch_error(t, c.ntraces, c.traces[t], NULL, &c.load_errs[t]);
			if (!failed++)
				first = c.load_errs[t];
			continue;
		}
		for (size_t p = 0; p < npol; p++) {
			cjob *j = &c.jobs[t * npol + p];
			rows += j->row != NULL;
			if (!j->err.code)
				continue;
			char what[128];
			snprintf(what, sizeof what, "policy %s", j->ops->name);
			cli_batch_error(t, c.ntraces, c.traces[t], what, &j->err);
			if (!failed++)
				first = j->err;
		}
	}
	if (failed && !rows) {
		as_err ignore = { 0, "" };
		as_outfile_close(&of, 0, &ignore); /* nothing to write: an earlier output stays as it was */
		fprintf(stderr, "%s: error: every input failed; nothing was written\n", as_progname);
		rc = first.code;
		goto cleanup;
	}
	as_summary_header(of.fp);
	for (size_t i = 0; i < c.njobs; i++)
		if (c.jobs[i].row)
			fputs(c.jobs[i].row, of.fp);
	as_outfile_close(&of, 1, &err);
	as_journal_close(&c.journal, !err.code); /* its rows are in the output now */
	rc = err.code ? cli_report(&err) : cli_batch_status(failed, rows, &first);
	if (!err.code && failed)
		fprintf(stderr, "%s: %zu failure%s (listed above); the other %zu rows were written (exit %d)\n", as_progname,
			failed, failed == 1 ? "" : "s", rows, rc);
	goto cleanup;
done: {
	as_err ignore = { 0, "" };
	as_outfile_close(&of, 0, &ignore); /* nothing written: an earlier output stays as it was */
	rc = cli_report(&err);
}
cleanup:
	as_journal_close(&c.journal, 0); /* (after a failure or an interrupt it stays, for --resume) */
	for (size_t i = 0; i < c.njobs; i++) {
		free(c.jobs[i].row);
		free(c.jobs[i].config);
	}
	free(c.jobs);
	free(c.order);
	for (size_t t = 0; t < c.ntraces; t++) {
		free(c.recorded[t]);
		as_evbuf_free(&c.bufs[t]);
	}
	free(c.recorded);
	free(c.bufs);
	free(c.load_errs);
	as_lat_model_free(&model);
	free(pols);
	pthread_mutex_destroy(&c.mu);
	return rc;
}
