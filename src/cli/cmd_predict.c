/* cmd_predict.c - allocsim predict: will a program whose trace was captured without a GPU
 * (scripts/capture-fake.py) fit, and with how much to spare.
 *
 * The trace is replayed under PyTorch's caching allocator twice: as captured (the high end) and
 * without what the capture could only estimate (the low end): the entries scripts/capture-fake.py
 * added from its table of unseen allocations (each after a "p unseen:KIND" phase), and frees
 * requested on one stream and completed later (taken as completed at once). Each end is replayed
 * without a limit (peak reserved bytes, cudaMalloc calls) and at the target capacity (whether it
 * runs out of memory: the allocator may fit below its unlimited peak by releasing cached blocks).
 * Whether a capacity fits is not monotone (the release-and-retry after a failed cudaMalloc changes
 * the layout that follows: a capacity may fit where a larger one fails), so the need is the least
 * capacity from which every larger one fits, found by a downward scan (scan_need). A capacity within
 * --margin percent of the need at either end answers "uncertain". When the high end does not fit,
 * advise's grid of settings runs at the same capacity. */
#include "cli/cli.h"
#include "cli/devopts.h"
#include "engine/run.h"
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char predict_usage[] =
	"usage: allocsim predict [options] (--gpu NAME | --capacity SIZE) TRACE\n"
	"\n"
	"Replays a trace captured without a GPU (scripts/capture-fake.py) under PyTorch's caching\n"
	"allocator and says whether it fits: the peak reserved bytes, the cudaMalloc calls, the least\n"
	"capacity from which every larger one fits (the need), the margin, each as a range when the trace\n"
	"holds estimated entries. When the high end does not fit, runs 'allocsim advise' at the same\n"
	"capacity. Exit status 0: fits (at least --margin above the need at both ends); 3: does not fit\n"
	"(at least --margin below both needs); 4: uncertain (in between, or within --margin of a need).\n"
	"\n"
	"      --gpu NAME          the memory of a common GPU (advise's table: 'allocsim advise --gpu list')\n"
	"      --capacity SIZE     the memory the allocator may reserve, e.g. 17.30GiB\n"
	"      --context SIZE      memory the process holds outside the allocator (CUDA context, NCCL),\n"
	"                          taken from --gpu's memory (default 0)\n"
	"  -c, --config STRING     PYTORCH_CUDA_ALLOC_CONF settings (default: none)\n"
	"      --format FMT        table (default) or csv\n"
	"      --margin PCT        a capacity within PCT percent of the need at either end is uncertain\n"
	"                          (default 4: the predictions' error against real H200 runs, doc/predict.md)\n"
	"      --no-advise         do not run advise when it does not fit\n"
	"  -h, --help              show this help\n";

typedef struct end {
	as_summary unl, cap;
	uint64_t need;      /* the least capacity from which every larger one fits (scan_need) */
	unsigned nreplays;  /* the scan's replays */
} end;

/* The low end: the trace less its estimated entries; frees requested on one stream complete at once. */
static void low_end(const as_evbuf *in, as_evbuf *out, uint64_t *nunseen, uint64_t *unseen_bytes, uint64_t *npending)
{
	uint8_t *mark = xcalloc(in->nslots ? in->nslots : 1, 1);
	int pending = 0;
	memset(out, 0, sizeof *out);
	for (size_t i = 0; i < in->n; i++) {
		as_event ev;
		as_evbuf_event(in, i, &ev);
		if (ev.type == EV_PHASE && ev.label && !strncmp(ev.label, "unseen:", 7)) {
			pending = 1;
			continue;
		}
		if (ev.type == EV_ALLOC && pending) {
			pending = 0;
			mark[ev.slot] = 1;
			(*nunseen)++;
			*unseen_bytes += ev.size;
			continue;
		}
		if (ev.type == EV_ALLOC)
			mark[ev.slot] = 0; /* a slot may be reused */
		if ((ev.type == EV_FREE_REQ || ev.type == EV_FREE) && mark[ev.slot]) {
			if (ev.type == EV_FREE)
				mark[ev.slot] = 0;
			continue;
		}
		if (ev.type == EV_FREE_REQ) {
			ev.type = EV_FREE;
			mark[ev.slot] = 2;
			(*npending)++;
		}
		as_evbuf_add(out, &ev);
	}
	free(mark);
}

static int replay(const as_evbuf *b, const char *conf, uint64_t cap, as_summary *s, as_err *err)
{
	as_run_opts o = { .events = b, .ops = as_policy_find("pytorch"), .config = conf, .capacity = cap,
		.addr_mode = ADDR_AUTO, .stop_at_oom = cap != 0 };
	return as_run(&o, s, err);
}

#define SCAN_STEP (2u << 20) /* the allocator's granularity: every segment is a multiple of 2 MiB */

/* The least capacity from which every larger capacity fits. The unlimited run's peak fits (its
 * replay never reaches the limit), and so does every capacity above it. Downward from there in
 * 2 MiB steps until a capacity does not fit; the need is the last one that did. The skip: a run
 * that fits at capacity c with peak reserved P <= c is the same run at every capacity in [P, c]
 * (the capacity enters the allocator only through "reserved + size > capacity", which has the same
 * answer for every request there), so the next capacity tried is P - 2 MiB, and the need is P
 * itself. Reserved bytes are multiples of 2 MiB, so every capacity in [P - 2 MiB, P) behaves as
 * P - 2 MiB: the need is exact to the byte. Not with garbage_collection_threshold (its threshold
 * is a share of the capacity): then plain 2 MiB steps, the need to 2 MiB. */
static int scan_need(const as_evbuf *b, const char *conf, uint64_t peak, uint64_t *need, unsigned *nreplays, as_err *err)
{
	int skip = !strstr(conf, "garbage_collection_threshold");
	uint64_t c = peak, p = peak;
	*nreplays = 0;
	for (;;) {
		uint64_t next = (skip ? p : c);
		if (next <= SCAN_STEP)
			break;
		next -= SCAN_STEP;
		as_summary s;
		if (cli_interrupted)
			return as_fail(err, AS_EXIT_INTERRUPTED, "interrupted");
		if (replay(b, conf, next, &s, err))
			return -1;
		(*nreplays)++;
		if (s.num_ooms)
			break;
		c = next;
		p = s.peak_reserved_bytes < c ? s.peak_reserved_bytes : c;
	}
	*need = skip ? p : c;
	return 0;
}

static void gib(FILE *f, uint64_t v)
{
	fprintf(f, "%" PRIu64 " (%.2f GiB)", v, (double)v / (double)AS_GiB);
}

int cmd_predict(int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_DEVOPT(GPU), CLI_DEVOPT(CAPACITY),
		{ "context", required_argument, 0, 'X' }, { "config", required_argument, 0, 'c' },
		{ "format", required_argument, 0, 'F' }, { "no-advise", no_argument, 0, 'N' }, { "margin", required_argument, 0, 'M' },
		{ "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
	const char *conf = "", *format = "table";
	cli_dev dv = { 0 };
	uint64_t context = 0;
	double margin = 4.0;
	int context_set = 0, no_advise = 0, c, dr;
	char msg[256];
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:h", opts, NULL)) != -1) {
		if ((dr = cli_devopt("predict", &dv, c, optarg)) >= 0) {
			if (dr)
				return dr;
			continue;
		}
		switch (c) {
		case 'X':
			if (as_parse_size(optarg, &context, msg, sizeof msg))
				return cli_usage_error("predict", "--context: %s", msg);
			context_set = 1;
			break;
		case 'c': conf = optarg; break;
		case 'F':
			if (strcmp(optarg, "table") && strcmp(optarg, "csv"))
				return cli_usage_error("predict", "--format: '%s' is not table or csv", optarg);
			format = optarg;
			break;
		case 'N': no_advise = 1; break;
		case 'M': {
			char *endp;
			margin = strtod(optarg, &endp);
			if (endp == optarg || *endp || !(margin >= 0.0 && margin < 100.0))
				return cli_usage_error("predict", "--margin: '%s' is not a percentage in [0, 100)", optarg);
			break;
		}
		case 'h': fputs(predict_usage, stdout); return 0;
		case ':': return cli_usage_error("predict", "option '%s' needs a value", argv[optind - 1]);
		default: return cli_usage_error("predict", "unknown option '%s'", argv[optind - 1]);
		}
	}
	const char *gpu = dv.gpu, *capstr = dv.capacity_arg;
	uint64_t capacity = dv.capacity;
	if (optind != argc - 1)
		return cli_usage_error("predict", optind >= argc ? "a TRACE is needed" : "one TRACE only");
	if (!gpu == !capstr)
		return cli_usage_error("predict", "give one of --gpu NAME and --capacity SIZE");
	if (context_set && !gpu)
		return cli_usage_error("predict", "--context goes with --gpu (--capacity is already what the allocator may use)");
	if (gpu) {
		uint64_t total = cli_gpu_bytes(gpu);
		if (!total)
			return cli_usage_error("predict", "--gpu: unknown GPU '%s' ('allocsim advise --gpu list' shows the known ones)", gpu);
		if (context >= total)
			return cli_usage_error("predict", "--context: %" PRIu64 " bytes leave nothing of %s's %" PRIu64, context, gpu, total);
		capacity = total - context;
	}
	const char *path = argv[optind];
	as_err err = { 0, "" };
	as_evbuf hi, lo;
	if (as_evbuf_load(&hi, path, NULL, &err))
		return cli_report(&err);
	uint64_t nunseen = 0, unseen_bytes = 0, npending = 0;
	low_end(&hi, &lo, &nunseen, &unseen_bytes, &npending);
	end e[2];
	int rc = 0;
	const as_evbuf *bufs[2] = { &lo, &hi };
	for (int k = 0; k < 2 && !rc; k++) {
		if (replay(bufs[k], conf, 0, &e[k].unl, &err) || replay(bufs[k], conf, capacity, &e[k].cap, &err) ||
		    scan_need(bufs[k], conf, e[k].unl.peak_reserved_bytes, &e[k].need, &e[k].nreplays, &err))
			rc = -1;
	}
	as_evbuf_free(&lo);
	as_evbuf_free(&hi);
	if (rc)
		return cli_report(&err);
	int fit_lo = e[0].cap.num_ooms == 0, fit_hi = e[1].cap.num_ooms == 0;
	uint64_t plo = e[0].unl.peak_reserved_bytes, phi = e[1].unl.peak_reserved_bytes;
	uint64_t nlo = e[0].unl.num_device_alloc, nhi = e[1].unl.num_device_alloc;
	if (plo > phi) { uint64_t t = plo; plo = phi; phi = t; }
	if (nlo > nhi) { uint64_t t = nlo; nlo = nhi; nhi = t; }
	uint64_t dlo = e[0].need < e[1].need ? e[0].need : e[1].need, dhi = e[0].need < e[1].need ? e[1].need : e[0].need;
	int64_t mlo = (int64_t)capacity - (int64_t)phi, mhi = (int64_t)capacity - (int64_t)plo;
	/* yes: at least the margin above both needs (every capacity from a need up fits); no: at least the
	 * margin below both, and neither end fits there; otherwise uncertain */
	int above = (double)capacity >= (double)dhi * (1.0 + margin / 100.0);
	int below = (double)capacity < (double)dlo * (1.0 - margin / 100.0) && !fit_lo && !fit_hi;
	const char *fits = above ? "yes" : below ? "no" : "uncertain";
	if (!strcmp(format, "csv")) {
		printf("trace,capacity_bytes,config,peak_reserved_low,peak_reserved_high,num_device_alloc_low,num_device_alloc_high,"
		       "margin_low,margin_high,fits_from_low,fits_from_high,fits,unseen_entries,unseen_bytes,pending_frees,margin_pct\n");
		printf("%s,%" PRIu64 ",%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRId64 ",%" PRId64 ",%" PRIu64 ",%" PRIu64 ",%s,%" PRIu64
		       ",%" PRIu64 ",%" PRIu64 ",%g\n", path, capacity, conf, plo, phi, nlo, nhi, mlo, mhi, dlo, dhi, fits, nunseen, unseen_bytes,
		       npending, margin);
	} else {
		printf("trace: %s\n", path);
		printf("capacity: ");
		gib(stdout, capacity);
		if (gpu)
			printf(" (--gpu %s less a context of %" PRIu64 " bytes)", gpu, context);
		printf("\nsettings: %s\n", *conf ? conf : "(defaults)");
		printf("peak reserved: ");
		gib(stdout, plo);
		if (phi != plo) {
			printf(" .. ");
			gib(stdout, phi);
		}
		printf("\ncudaMalloc calls: %" PRIu64, nlo);
		if (nhi != nlo)
			printf(" .. %" PRIu64, nhi);
		printf("\nneeds (every capacity from this one up fits): ");
		gib(stdout, dlo);
		if (dhi != dlo) {
			printf(" .. ");
			gib(stdout, dhi);
		}
		printf("\nestimated entries: %" PRIu64 " (%" PRIu64 " bytes), frees completed later on another stream: %" PRIu64 "\n",
		       nunseen, unseen_bytes, npending);
		printf("fits: %s", fits);
		if (!above && !below)
			printf(" (%s; the replay at this capacity %s)",
			       capacity >= dlo && capacity < dhi ? "between the two ends' needs"
			       : (double)capacity >= (double)dlo * (1.0 - margin / 100.0) ? "within the margin of a need"
			       : "below the needs, where fitting is not monotone",
			       fit_hi && fit_lo ? "fits" : fit_lo ? "fits at the low end only" : fit_hi ? "fits at the high end only" : "does not fit");
		else if (fit_hi && phi > capacity)
			printf(" (by releasing cached blocks: %" PRIu64 " retries)", e[1].cap.num_alloc_retries);
		printf("\nmargin: %+" PRId64 " bytes (%+.2f GiB)", mlo, (double)mlo / (double)AS_GiB);
		if (mhi != mlo)
			printf(" .. %+" PRId64 " bytes (%+.2f GiB)", mhi, (double)mhi / (double)AS_GiB);
		printf("\n");
	}
	rc = above ? 0 : below ? 3 : 4;
	if (!fit_hi && !no_advise) {
		fflush(stdout);
		printf("\nadvise at the same capacity:\n");
		fflush(stdout);
		char cbuf[32];
		snprintf(cbuf, sizeof cbuf, "%" PRIu64, capacity);
		char *av[] = { "advise", "--capacity", cbuf, "-c", (char *)conf, "--format", (char *)format, (char *)path, NULL };
		int arc = cmd_advise(8, av);
		if (arc != 0 && arc != 3)
			return arc;
	}
	return rc;
}
