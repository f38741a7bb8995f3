/* transfer_model.c - allocsim transfer --table TABLE HOSTTRACE: what pinning a host trace's buffers
 * costs in host memory and cudaHostAlloc/cudaFreeHost time and gains in copy time, from the table
 * 'allocsim transfer' measured (traces/h200-transfer.csv) and a replay of the trace with the
 * pytorch-pinned policy (PyTorch's pinned host cache). Modelled, not measured: doc/policies.md. */
#include "cli/cli.h"
#include "engine/run.h"
#include "util/idmap.h"
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TX_HEADER "size_bytes,host_memory,operation,median_us,gb_per_s"
#define TX_MAXPTS 64

/* One measured series (pageable/pinned x H2D/D2H, pinned cudaHostAlloc/cudaFreeHost), sizes ascending. */
enum { S_PAGE_H2D, S_PAGE_D2H, S_PIN_H2D, S_PIN_D2H, S_HOSTALLOC, S_FREEHOST, S_N };
static const char *const series_names[S_N][2] = {
	{ "pageable", "H2D" }, { "pageable", "D2H" }, { "pinned", "H2D" }, { "pinned", "D2H" },
	{ "pinned", "cudaHostAlloc" }, { "pinned", "cudaFreeHost" },
};
typedef struct series {
	size_t n;
	double size[TX_MAXPTS], us[TX_MAXPTS];
} series;

/* The time of one operation on n bytes: the measured median at the table's sizes, linear between them,
 * the smallest size's time below it (latency-bound) and the largest size's bandwidth above it. */
static double tx_time(const series *s, uint64_t bytes)
{
	double x = (double)bytes;
	if (x <= s->size[0])
		return s->us[0];
	for (size_t i = 1; i < s->n; i++)
		if (x <= s->size[i])
			return s->us[i - 1] + (s->us[i] - s->us[i - 1]) * (x - s->size[i - 1]) / (s->size[i] - s->size[i - 1]);
	return s->us[s->n - 1] * x / s->size[s->n - 1];
}

static int tx_load(const char *path, series *sv, as_err *err)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return as_fail(err, AS_EXIT_NOINPUT, "%s: %s", path, strerror(errno));
	char line[512];
	uint64_t ln = 0;
	int rc = 0;
	memset(sv, 0, S_N * sizeof(*sv));
	while (!rc && fgets(line, sizeof line, f)) {
		ln++;
		size_t len = strlen(line);
		if (len && line[len - 1] != '\n' && !feof(f)) {
			rc = as_fail(err, AS_EXIT_DATAERR, "%s:%" PRIu64 ": line too long", path, ln);
			break;
		}
		line[strcspn(line, "\r\n")] = 0;
		if (ln == 1) {
			if (strcmp(line, TX_HEADER))
				rc = as_fail(err, AS_EXIT_DATAERR, "%s:1: not a transfer table (expected the header '%s')", path, TX_HEADER);
			continue;
		}
		if (!line[0])
			continue;
		char *fld[5];
		if (as_split_csv(line, fld, 5) != 5) {
			rc = as_fail(err, AS_EXIT_DATAERR, "%s:%" PRIu64 ": expected 5 fields (%s)", path, ln, TX_HEADER);
			break;
		}
		uint64_t size;
		char *end;
		errno = 0;
		double us = strtod(fld[3], &end);
		if (as_parse_u64(fld[0], &size) || !size || size > (1ULL << 60)) {
			rc = as_fail(err, AS_EXIT_DATAERR, "%s:%" PRIu64 ": invalid size '%s'", path, ln, fld[0]);
			break;
		}
		if (end == fld[3] || *end || errno || !isfinite(us) || us <= 0) {
			rc = as_fail(err, AS_EXIT_DATAERR, "%s:%" PRIu64 ": invalid time '%s' (microseconds > 0)", path, ln, fld[3]);
			break;
		}
		int k = -1;
		for (int i = 0; i < S_N; i++)
			if (!strcmp(fld[1], series_names[i][0]) && !strcmp(fld[2], series_names[i][1]))
				k = i;
		if (k < 0) {
			rc = as_fail(err, AS_EXIT_DATAERR, "%s:%" PRIu64 ": unknown measurement '%s,%s'", path, ln, fld[1], fld[2]);
			break;
		}
		series *s = &sv[k];
		if (s->n && (double)size <= s->size[s->n - 1]) {
			rc = as_fail(err, AS_EXIT_DATAERR, "%s:%" PRIu64 ": sizes of %s %s must increase", path, ln, fld[1], fld[2]);
			break;
		}
		if (s->n == TX_MAXPTS) {
			rc = as_fail(err, AS_EXIT_DATAERR, "%s:%" PRIu64 ": more than %d sizes of %s %s", path, ln, TX_MAXPTS, fld[1], fld[2]);
			break;
		}
		s->size[s->n] = (double)size;
		s->us[s->n++] = us;
	}
	if (!rc && ferror(f))
		rc = as_fail(err, AS_EXIT_NOINPUT, "%s: read error", path);
	if (!rc && ln == 0)
		rc = as_fail(err, AS_EXIT_DATAERR, "%s: empty file (not a transfer table)", path);
	for (int i = 0; !rc && i < S_N; i++)
		if (!sv[i].n)
			rc = as_fail(err, AS_EXIT_DATAERR, "%s: no %s %s rows", path, series_names[i][0], series_names[i][1]);
	fclose(f);
	return rc ? -1 : 0;
}

typedef struct tx_cost {
	const series *sv;
	uint64_t allocs, frees;
	double alloc_us, free_us;
} tx_cost;

/* Each host allocation and free of the pinned cache is one cudaHostAlloc / cudaFreeHost of its size. */
static void on_call(void *ctx, int op, uint64_t addr, uint64_t size, uint64_t stream)
{
	tx_cost *c = ctx;
	(void)addr; (void)stream;
	if (op == DEV_OP_ALLOC)
		c->allocs++, c->alloc_us += tx_time(&c->sv[S_HOSTALLOC], size);
	else if (op == DEV_OP_FREE)
		c->frees++, c->free_us += tx_time(&c->sv[S_FREEHOST], size);
}

/* The same buffers in pageable memory, and every pinned buffer's one copy, seen before each event
 * reaches the pinned cache's replay (engine/run.h). */
typedef struct tx_host {
	const series *cp, *cg;   /* the copy's time from pinned and from pageable memory */
	uint64_t copies, bytes, page_cur, page_peak;
	double pinned_us, pageable_us;
	idmap live;              /* id -> requested bytes + 1 */
} tx_host;

static void tx_event(void *ctx, as_engine *e, const as_event *ev)
{
	tx_host *h = ctx;
	(void)e;
	if (ev->type == EV_ALLOC && !(ev->flags & EVF_OOM)) { /* every pinned buffer is copied once */
		h->copies++;
		h->bytes += ev->size;
		h->pinned_us += tx_time(h->cp, ev->size);
		h->pageable_us += tx_time(h->cg, ev->size);
		idmap_put(&h->live, ev->id, (void *)(uintptr_t)(ev->size + 1));
		h->page_cur += ev->size;
		if (h->page_cur > h->page_peak)
			h->page_peak = h->page_cur;
	} else if (ev->type == EV_FREE_REQ || ev->type == EV_FREE) {
		/* a pageable buffer goes when the program frees it: a copy from pageable memory has read
		 * it by the time cudaMemcpy returns */
		void *v = idmap_del(&h->live, ev->id);
		if (v)
			h->page_cur -= (uint64_t)(uintptr_t)v - 1;
	}
}

int cli_transfer_weigh(const char *table, const char *trace, const char *conf, int d2h, const char *out)
{
	as_err err = { 0, "" };
	series sv[S_N];
	if (tx_load(table, sv, &err))
		return cli_report(&err);
	as_device *dev = as_sim_device_new(0, ADDR_MODEL);
	tx_cost cost = { sv, 0, 0, 0, 0 };
	as_dev_set_observer(dev, on_call, &cost);
	tx_host h = { &sv[d2h ? S_PIN_D2H : S_PIN_H2D], &sv[d2h ? S_PAGE_D2H : S_PAGE_H2D], 0, 0, 0, 0, 0, 0, { 0 } };
	idmap_init(&h.live);
	as_run_sink sink = { .before = tx_event, .ctx = &h };
	as_run_opts run = { .path = trace, .ops = as_policy_find("pytorch-pinned"), .config = conf, .addr_mode = ADDR_MODEL,
		.device = dev, .prepared = 1, .no_stage = 1, .full_stats = 1, .sink = &sink };
	as_summary s;
	int rc = as_run(&run, &s, &err);
	idmap_free(&h.live);
	as_device_destroy(dev);
	if (rc)
		return cli_report(&err);
	uint64_t copies = h.copies, bytes = h.bytes, page_cur = h.page_cur, page_peak = h.page_peak;
	double pinned_us = h.pinned_us, pageable_us = h.pageable_us;
	if (s.num_ooms)
		fprintf(stderr, "allocsim: warning: %" PRIu64 " pinned allocations failed in the replay\n", s.num_ooms);
	as_outfile of;
	if (as_outfile_open(&of, out, &err))
		return cli_report(&err);
	const char *dir = d2h ? "D2H" : "H2D";
	fprintf(of.fp, "host_memory,host_bytes_peak,host_bytes_final,host_alloc_calls,host_alloc_us,host_free_calls,host_free_us,"
		"copies,direction,copy_bytes,copy_us,copy_gb_per_s,total_us\n");
	fprintf(of.fp, "pageable,%" PRIu64 ",%" PRIu64 ",0,0.000,0,0.000,%" PRIu64 ",%s,%" PRIu64 ",%.3f,%.3f,%.3f\n",
		page_peak, page_cur, copies, dir, bytes, pageable_us,
		pageable_us > 0 ? (double)bytes / pageable_us / 1e3 : 0.0, pageable_us);
	fprintf(of.fp, "pinned,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.3f,%" PRIu64 ",%.3f,%" PRIu64 ",%s,%" PRIu64 ",%.3f,%.3f,%.3f\n",
		s.peak_reserved_bytes, s.final_reserved_bytes, cost.allocs, cost.alloc_us, cost.frees, cost.free_us, copies, dir, bytes,
		pinned_us, pinned_us > 0 ? (double)bytes / pinned_us / 1e3 : 0.0, cost.alloc_us + cost.free_us + pinned_us);
	return as_outfile_close(&of, 1, &err) ? cli_report(&err) : 0;
}
