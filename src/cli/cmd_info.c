/* cmd_info.c - allocsim info: what is in a trace. */
#include "cli/cli.h"
#include "cli/devopts.h"
#include "util/idmap.h"
#include "engine/engine.h"
#include "cli/batch.h"
#include <getopt.h>
#include <gsl/gsl_histogram.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char info_usage[] =
	"usage: allocsim info [--device N] [--format text|json|csv] [-k] TRACE...\n"
	"\n"
	"Prints the trace's format and settings, its event counts, streams, time span, the peak of\n"
	"live requested bytes (a lower bound on what any allocator must reserve) and a histogram of\n"
	"request sizes in power-of-two buckets. For a snapshot it lists the devices with their history\n"
	"entries; the counts are for --device N (default: the first device with history).\n"
	"--format json prints one JSON object a trace (one a line), --format csv a header and one row a\n"
	"trace (the same columns for every trace); the fields are in doc/batches.md. Several traces are\n"
	"reported one after another; the first unreadable one stops it (exit 65), unless -k, --keep-going:\n"
	"an 'error: input K of N' line for it, the others reported, exit 5.\n";

/* What info found, for the three printers. */
typedef struct info {
	const char *path;
	const as_meta *m;
	int binary;
	uint64_t counts[EV__COUNT], replay_events, ooms, peak;
	size_t streams, live_at_end;
	int64_t tmin, tmax;
	const gsl_histogram *h;
} info;

/* pytorch_version as text ("2.5 to 2.11"), "" when the trace is no snapshot, and the reason. */
static void pyver_text(const as_meta *m, char *buf, size_t len, char *why, size_t wlen)
{
	int lo, hi;
	int k = as_pyver_range(m, &lo, &hi, why, wlen);
	if (!k)
		snprintf(buf, len, "%s", "");
	else if (k < 0)
		snprintf(buf, len, "unknown");
	else if (lo == 12)
		snprintf(buf, len, "newer than 2.11");
	else if (lo == hi)
		snprintf(buf, len, "2.%d%s", lo, lo == 1 ? " or older" : "");
	else
		snprintf(buf, len, "2.%d to 2.%d", lo, hi);
}

static void print_json(const info *in)
{
	const as_meta *m = in->m;
	char pv[64], why[512];
	printf("{\"trace\": ");
	as_json_str(stdout, in->path);
	printf(", \"format\": ");
	as_json_str(stdout, in->binary ? "binary" : m->format);
	printf(", \"source\": ");
	as_json_str(stdout, m->source);
	printf(", \"device\": ");
	as_json_str(stdout, m->device);
	printf(", \"devices\": [");
	for (size_t d = 0; m->device_entries && d < m->ndevices; d++)
		printf("%s{\"index\": %zu, \"history_entries\": %" PRIu64 "}", d ? ", " : "", d, m->device_entries[d]);
	printf("], \"replayed_device\": ");
	if (m->device_entries)
		printf("%d", m->device_index);
	else
		printf("null");
	printf(", \"device_total_bytes\": %" PRIu64 ", \"capacity_bytes\": %" PRIu64 ", \"allocator_settings\": ",
		m->device_total, m->capacity);
	if (m->has_settings)
		as_json_str(stdout, m->settings ? m->settings : "");
	else
		printf("null");
	pyver_text(m, pv, sizeof pv, why, sizeof why);
	printf(", \"pytorch_version\": ");
	as_json_str(stdout, pv);
	for (int t = 0; t < EV__COUNT; t++)
		printf(", \"%s_events\": %" PRIu64, as_ev_names[t], in->counts[t]);
	printf(", \"events\": %" PRIu64 ", \"recorded_ooms\": %" PRIu64 ", \"streams\": %zu, \"live_at_end\": %zu, "
		"\"time_span_us\": ", in->replay_events, in->ooms, in->streams, in->live_at_end);
	if (in->tmax >= in->tmin)
		printf("%" PRId64, in->tmax - in->tmin);
	else
		printf("null");
	printf(", \"peak_live_requested_bytes\": %" PRIu64 ", \"inferred_empty_cache\": %" PRIu64
		", \"history_truncated\": %s, \"unmatched_frees\": %" PRIu64 ", \"size_histogram\": [", in->peak,
		m->inferred_empty_cache, m->history_truncated ? "true" : "false", m->unmatched_frees);
	int first = 1;
	for (size_t k = 0; k < gsl_histogram_bins(in->h); k++)
		if (gsl_histogram_get(in->h, k) > 0) {
			printf("%s{\"bucket_low_bytes\": %" PRIu64 ", \"count\": %.0f}", first ? "" : ", ", (uint64_t)1 << k,
				gsl_histogram_get(in->h, k));
			first = 0;
		}
	printf("]}\n");
}

static void csv_field(const char *s)
{
	putchar(',');
	as_csv_str(stdout, s);
}

static void print_csv(const info *in, int header)
{
	const as_meta *m = in->m;
	char pv[64], why[512];
	if (header) {
		printf("trace,format,source,device,devices,replayed_device,device_total_bytes,capacity_bytes,allocator_settings,"
			"pytorch_version");
		for (int t = 0; t < EV__COUNT; t++)
			printf(",%s_events", as_ev_names[t]);
		printf(",events,recorded_ooms,streams,live_at_end,time_span_us,peak_live_requested_bytes,inferred_empty_cache,"
			"history_truncated,unmatched_frees,size_histogram\n");
	}
	as_csv_str(stdout, in->path);
	csv_field(in->binary ? "binary" : m->format);
	csv_field(m->source);
	csv_field(m->device);
	if (m->device_entries)
		printf(",%zu,%d", m->ndevices, m->device_index);
	else
		printf(",,");
	printf(",%" PRIu64 ",%" PRIu64, m->device_total, m->capacity);
	if (m->has_settings)
		csv_field(m->settings ? m->settings : "");
	else
		putchar(',');
	pyver_text(m, pv, sizeof pv, why, sizeof why);
	csv_field(pv);
	for (int t = 0; t < EV__COUNT; t++)
		printf(",%" PRIu64, in->counts[t]);
	printf(",%" PRIu64 ",%" PRIu64 ",%zu,%zu,", in->replay_events, in->ooms, in->streams, in->live_at_end);
	if (in->tmax >= in->tmin)
		printf("%" PRId64, in->tmax - in->tmin);
	printf(",%" PRIu64 ",%" PRIu64 ",%d,%" PRIu64 ",", in->peak, m->inferred_empty_cache, m->history_truncated ? 1 : 0,
		m->unmatched_frees);
	int first = 1;
	for (size_t k = 0; k < gsl_histogram_bins(in->h); k++)
		if (gsl_histogram_get(in->h, k) > 0) {
			printf("%s%" PRIu64 ":%.0f", first ? "" : ";", (uint64_t)1 << k, gsl_histogram_get(in->h, k));
			first = 0;
		}
	putchar('\n');
}

/* pytorch_version: the releases whose snapshots have this one's fields (src/readers/pyversion.c). */
static void print_pytorch_version(const as_meta *m)
{
	int lo, hi;
	char why[512];
	int k = as_pyver_range(m, &lo, &hi, why, sizeof why);
	if (!k)
		return;
	if (k < 0)
		printf("pytorch_version: unknown (the fields contradict each other: %s)\n", why);
	else if (lo == hi)
		printf("pytorch_version: 2.%d%s (%s)\n", lo, lo == 1 ? " or older" : "", why);
	else
		printf("pytorch_version: 2.%d to 2.%d (%s)\n", lo, hi, why);
}

/* One trace's report in format fmt (csv: the header before the first); -1 with err. */
/* Requested bytes by allocation slot (as_event.slot). */
typedef struct slot_sizes {
	uint64_t *v;
	size_t cap, count; /* count: the slots holding an allocation (not a recorded OOM) */
} slot_sizes;

static void slot_sizes_grow(slot_sizes *z, uint32_t slot)
{
	size_t nc = z->cap ? z->cap : 1024;
	while (nc <= slot)
		nc *= 2;
	z->v = xrealloc(z->v, nc * sizeof(*z->v));
	memset(z->v + z->cap, 0, (nc - z->cap) * sizeof(*z->v));
	z->cap = nc;
}

static inline uint64_t *slot_size(slot_sizes *z, uint32_t slot)
{
	if (slot >= z->cap)
		slot_sizes_grow(z, slot);
	return &z->v[slot];
}

static int info_one(const char *path, const as_reader_opts *ro, int fmt, int first, as_err *err)
{
	as_reader *r;
	char hb[48];
	if (as_reader_open(&r, path, ro, err))
		return -1;
again:; /* (as_reader_again: every count from the read again) */
	uint64_t counts[EV__COUNT] = { 0 }, live = 0, peak = 0, ooms = 0, maybe = 0;
	uint64_t buckets[61] = { 0 }; /* the histogram's counts, into h once at the end (not a search of its ranges per event) */
	int64_t tmin = INT64_MAX, tmax = INT64_MIN;
	idmap streams;
	idmap_init(&streams);
	/* the requested bytes of each live allocation by its slot (as_event.slot: dense, below the most
	 * allocations live at once), 0 for a free slot or a recorded OOM's; a map by id cost 100
	 * instructions an event */
	slot_sizes sizes = { 0 };
	uint64_t last_stream = 0;
	int any_stream = 0;
	/* Buckets: [2^k, 2^(k+1)) for k = 0..60. */
	gsl_histogram *h = gsl_histogram_alloc(61);
	gsl_histogram_set_ranges_uniform(h, 0.0, 61.0);
	as_event ev;
	int rc = 0;
	static char one;
	while (!cli_interrupted && (rc = as_reader_next(r, &ev, err)) > 0) {
		counts[ev.type]++;
		maybe += ev.type == EV_EMPTY_CACHE && (ev.flags & EVF_MAYBE); /* not an event replay counts */
		if (ev.time_us >= 0) {
			if (ev.time_us < tmin)
				tmin = ev.time_us;
			if (ev.time_us > tmax)
				tmax = ev.time_us;
		}
		if (ev.type == EV_ALLOC) {
			if (!any_stream || ev.stream != last_stream) { /* (most requests are on the last one's stream) */
				idmap_put(&streams, ev.stream, &one);
				last_stream = ev.stream;
				any_stream = 1;
			}
			buckets[63 - __builtin_clzll(ev.size)]++; /* (sizes 1 .. 2^60-1: buckets 0 .. 59) */
			uint64_t *sz = slot_size(&sizes, ev.slot);
			if (ev.flags & EVF_OOM) {
				*sz = 0;
				ooms++;
				continue;
			}
			*sz = ev.size;
			sizes.count++;
			live += ev.size;
			if (live > peak)
				peak = live;
		} else if (ev.type == EV_FREE) {
			uint64_t *sz = slot_size(&sizes, ev.slot);
			if (*sz) {
				live -= *sz;
				sizes.count--;
				*sz = 0;
			}
		}
	}
	for (int k = 0; k < 61; k++)
		if (buckets[k])
			gsl_histogram_accumulate(h, k + 0.5, (double)buckets[k]);
	if (as_check_interrupted(err))
		rc = -1;
	if (rc < 0) {
		gsl_histogram_free(h);
		free(sizes.v);
		idmap_free(&streams);
		as_reader_close(r);
		return -1;
	}
	if (as_reader_again(r)) { /* private pools released before the snapshot's end: read with them */
		gsl_histogram_free(h);
		free(sizes.v);
		idmap_free(&streams);
		as_reader *q;
		rc = as_reader_reopen(r, &q, err);
		as_reader_close(r);
		if (rc)
			return -1;
		r = q;
		goto again;
	}
	as_meta *m = &r->meta;
	if (fmt) {
		info in = { .path = r->in.path, .m = m, .binary = !strcmp(r->ops->name, "binary"), .ooms = ooms, .peak = peak,
			.streams = streams.count, .live_at_end = sizes.count, .tmin = tmin, .tmax = tmax, .h = h };
		for (int t = 0; t < EV__COUNT; t++) {
			in.counts[t] = counts[t];
			if (t < EV_SEG_ALLOC)
				in.replay_events += counts[t];
		}
		in.replay_events -= maybe; /* (as the text's 'events') */
		if (fmt == 1)
			print_json(&in);
		else
			print_csv(&in, first);
		gsl_histogram_free(h);
		free(sizes.v);
		idmap_free(&streams);
		as_reader_close(r);
		return 0;
	}
	if (!first)
		putchar('\n'); /* (between two traces' reports) */
	/* one "key: value" a line: strings from the trace are escaped as in the native format */
	const char *keys[] = { "trace", "format", "source", "device" };
	const char *vals[] = { r->in.path, m->format, m->source, m->device };
	for (int k = 0; k < 4; k++)
		if (vals[k][0] || k < 2) {
			char *e = as_escape(vals[k], 0);
			if (k == 1 && !strcmp(r->ops->name, "binary"))
				printf("%s: binary (converted from %s)\n", keys[k], e);
			else
				printf("%s: %s\n", keys[k], e);
			free(e);
		}
	if (m->device_entries) {
		printf("devices: %zu\n", m->ndevices);
		for (size_t d = 0; d < m->ndevices; d++)
			printf("device_%zu_history_entries: %" PRIu64 "\n", d, m->device_entries[d]);
		printf("replayed_device: %d\n", m->device_index);
	}
	if (m->device_total)
		printf("device_total_bytes: %" PRIu64 "%s\n", m->device_total, as_size_paren(m->device_total, hb, sizeof hb));
	if (m->capacity)
		printf("capacity_bytes: %" PRIu64 "%s\n", m->capacity, as_size_paren(m->capacity, hb, sizeof hb));
	if (m->has_settings) {
		char *e = as_escape(m->settings ? m->settings : "", 0);
		printf("allocator_settings: %s\n", e);
		free(e);
	}
	print_pytorch_version(m);
	if (m->host_traces) /* 2.14+ snapshots: the pinned host allocator's history (memory_snapshot.cpp) */
		printf("host_history: %" PRIu64 " entries%s\n", m->host_entries, m->host_entries ?
			" (pinned host memory: replay --device host -p pytorch-pinned)" :
			" (recorded without record_pinned_host_memory=True)");
	uint64_t replay_events = 0;
	for (int t = 0; t < EV__COUNT; t++) {
		if (t < EV_SEG_ALLOC)
			replay_events += counts[t];
		printf("%s_events: %" PRIu64 "\n", as_ev_names[t], counts[t]);
	}
	/* the number replay's 'events' column and advise give: an empty_cache inferred only maybe is left out */
	printf("events: %" PRIu64 "\n", replay_events - maybe);
	printf("recorded_ooms: %" PRIu64 "\n", ooms);
	printf("streams: %zu\n", streams.count);
	printf("live_at_end: %zu\n", sizes.count);
	if (tmax >= tmin)
		printf("time_span_us: %" PRId64 "\n", tmax - tmin);
	printf("peak_live_requested_bytes: %" PRIu64 "%s\n", peak, as_size_paren(peak, hb, sizeof hb));
	if (strcmp(m->format, "pytorch") == 0)
		printf("inferred_empty_cache: %" PRIu64 "\n", m->inferred_empty_cache);
	if (m->named_pools)
		printf("private_pools: %" PRIu32 " (%s)\n", m->named_pools,
			m->inferred_pools ? "inferred from its segments: doc/pytorch-policy.md" : "named by its entries");
	if (m->pool_evidence && !m->named_pools)
		printf("private_pools: none named; used and released before the snapshot, %" PRIu64 " segment(s) show it "
			"(ALLOCSIM_POOLS=infer places them)\n", m->pool_evidence);
	if (m->pool_unplaced)
		printf("pool_guessed_requests: %" PRIu64 " (in segments the cut history never shows made)\n", m->pool_unplaced);
	if (m->history_truncated)
		printf("history_truncated: yes (%" PRIu64 " frees of earlier allocations skipped)\n", m->unmatched_frees);
	if (m->trace_max_entries)
		printf("trace_ring: %" PRIu64 " entries (trace_alloc_max_entries), %s\n", m->trace_max_entries,
			m->trace_overflowed ? "overflowed: the oldest entries were overwritten" : "not overflowed");
	printf("size_histogram (bucket_low_bytes,count):\n");
	for (size_t k = 0; k < gsl_histogram_bins(h); k++)
		if (gsl_histogram_get(h, k) > 0)
			printf("  %" PRIu64 ",%.0f\n", (uint64_t)1 << k, gsl_histogram_get(h, k));
	gsl_histogram_free(h);
	free(sizes.v);
	idmap_free(&streams);
	as_reader_close(r);
	return 0; /* main() checks the writes to stdout */
}

int cmd_info(int argc, char **argv)
{
	static const struct option lo[] = { CLI_DEVOPT(DEVICE), { "help", no_argument, 0, 'h' },
		{ "format", required_argument, 0, 'F' }, { "keep-going", no_argument, 0, 'k' },
		{ "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 } };
	as_reader_opts ro = { .any_device = 1 };
	cli_dev dv = { .ro = &ro };
	int c, dr, fmt = 0, keep_going = 0; /* fmt: text, json, csv */
	optind = 1;
	while ((c = getopt_long(argc, argv, "hk", lo, NULL)) != -1) {
		if ((dr = cli_devopt("info", &dv, c, optarg)) >= 0) {
			if (dr)
				return dr;
			continue;
		}
		if (c == 'k') {
			keep_going = 1;
			continue;
		}
		if (c == 'F') {
			if (!strcmp(optarg, "text"))
				fmt = 0;
			else if (!strcmp(optarg, "json"))
				fmt = 1;
			else if (!strcmp(optarg, "csv"))
				fmt = 2;
			else
				return cli_usage_error("info", "--format: '%s' is not text, json or csv", optarg);
			continue;
		}
		if (c == 'h') {
			fputs(info_usage, stdout);
			return 0;
		}
		if (c == 'V') {
			cli_version();
			return 0;
		}
		return cli_usage_error("info", "invalid option");
	}
	if (optind >= argc)
		return cli_usage_error("info", "expected a TRACE");
	cli_catch_signals();
	/* several traces: one report each (text: a blank line between; csv: one header; json: one object
	 * a line); with --keep-going an unreadable one is an error line and the others go on (exit 5) */
	size_t n = (size_t)(argc - optind), failed = 0, done = 0;
	as_err first = { 0, "" };
	for (size_t k = 0; k < n && !cli_interrupted; k++) {
		as_err err = { 0, "" };
		if (info_one(argv[optind + k], &ro, fmt, !done, &err) == 0) {
			done++;
			continue;
		}
		if (!keep_going || cli_interrupted) {
			if (!cli_interrupted)
				cli_name_input(&err, argv[optind + k]);
			return cli_report(&err);
		}
		cli_batch_error(k, n, argv[optind + k], NULL, &err);
		if (!failed++)
			first = err;
	}
	if (cli_interrupted) {
		as_err e = { AS_EXIT_INTERRUPTED, "interrupted" };
		return cli_report(&e);
	}
	if (failed && done)
		fprintf(stderr, "%s: %zu failure%s (listed above); the other %zu trace%s reported (exit %d)\n", as_progname,
			failed, failed == 1 ? "" : "s", done, done == 1 ? " was" : "s were", AS_EXIT_PARTIAL);
	else if (failed)
		fprintf(stderr, "%s: error: every input failed; nothing was reported\n", as_progname);
	return cli_batch_status(failed, done, &first); /* main() checks the writes to stdout */
}
