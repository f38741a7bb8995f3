/* cmd_predict.c - allocsim predict: will a program whose trace was captured without a GPU
 * (scripts/capture-fake.py) fit, and with how much to spare.
 *
 * The trace is replayed under PyTorch's caching allocator twice: as captured (the high end) and
 * without what the capture could only estimate (the low end): the entries scripts/capture-fake.py
 * added from its table of unseen allocations (each after a "p unseen:KIND" phase), and frees
 * requested on one stream and completed later (taken as completed at once). Each end is replayed
 * without a limit (peak reserved bytes, cudaMalloc calls) and at the target capacity (whether it
 * runs out of memory: the allocator may fit below its unlimited peak by releasing cached blocks),
 * and the least capacity at which it runs without out-of-memory is found by bisection, to the byte.
 * When the high end does not fit, advise's grid of settings runs at the same capacity. */
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
	"allocator and says whether it fits: the peak reserved bytes, the cudaMalloc calls, the margin,\n"
	"each as a range when the trace holds estimated entries. When it does not fit, runs 'allocsim\n"
	"advise' at the same capacity. Exit status 0: fits over the whole range; 3: does not fit at its\n"
	"low end; 4: fits at the low end only.\n"
	"\n"
	"      --gpu NAME          the memory of a common GPU (advise's table: 'allocsim advise --gpu list')\n"
	"      --capacity SIZE     the memory the allocator may reserve, e.g. 17.30GiB\n"
	"      --context SIZE      memory the process holds outside the allocator (CUDA context, NCCL),\n"
	"                          taken from --gpu's memory (default 0)\n"
	"  -c, --config STRING     PYTORCH_CUDA_ALLOC_CONF settings (default: none)\n"
	"      --format FMT        table (default) or csv\n"
	"      --no-advise         do not run advise when it does not fit\n"
	"  -h, --help              show this help\n";

typedef struct end {
	as_summary unl, cap;
	uint64_t need; /* the smallest capacity without out-of-memory (bisection, to the byte) */
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

struct probe {
	const as_evbuf *b;
	const char *conf;
};

static int fits_at(void *ctx, uint64_t cap, as_err *err)
{
	const struct probe *p = ctx;
	as_summary s;
	if (cli_interrupted)
		return as_fail(err, AS_EXIT_INTERRUPTED, "interrupted");
	if (replay(p->b, p->conf, cap, &s, err))
		return -1;
	return s.num_ooms == 0;
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
		{ "format", required_argument, 0, 'F' }, { "no-advise", no_argument, 0, 'N' },
		{ "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
	const char *conf = "", *format = "table";
	cli_dev dv = { 0 };
	uint64_t context = 0;
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
		struct probe pr = { bufs[k], conf };
		if (replay(bufs[k], conf, 0, &e[k].unl, &err) || replay(bufs[k], conf, capacity, &e[k].cap, &err))
			rc = -1;
		else if (as_bisect_capacity(1, e[k].unl.peak_requested_bytes ? e[k].unl.peak_requested_bytes : 1,
				 e[k].unl.peak_reserved_bytes ? e[k].unl.peak_reserved_bytes : 1, 1, fits_at, NULL, &pr, &e[k].need, &err))
			rc = -1;
	}
	as_evbuf_free(&lo);
	as_evbuf_free(&hi);
	if (rc)
		return cli_report(&err);
	int fit_lo = e[0].cap.num_ooms == 0, fit_hi = e[1].cap.num_ooms == 0;
	const char *fits = fit_hi ? "yes" : fit_lo ? "uncertain" : "no";
	uint64_t plo = e[0].unl.peak_reserved_bytes, phi = e[1].unl.peak_reserved_bytes;
	uint64_t nlo = e[0].unl.num_device_alloc, nhi = e[1].unl.num_device_alloc;
	if (plo > phi) { uint64_t t = plo; plo = phi; phi = t; }
	if (nlo > nhi) { uint64_t t = nlo; nlo = nhi; nhi = t; }
	uint64_t dlo = e[0].need < e[1].need ? e[0].need : e[1].need, dhi = e[0].need < e[1].need ? e[1].need : e[0].need;
	int64_t mlo = (int64_t)capacity - (int64_t)phi, mhi = (int64_t)capacity - (int64_t)plo;
	if (!strcmp(format, "csv")) {
		printf("trace,capacity_bytes,config,peak_reserved_low,peak_reserved_high,num_device_alloc_low,num_device_alloc_high,"
		       "margin_low,margin_high,needs_low,needs_high,fits,unseen_entries,unseen_bytes,pending_frees\n");
		printf("%s,%" PRIu64 ",%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRId64 ",%" PRId64 ",%" PRIu64 ",%" PRIu64 ",%s,%" PRIu64
		       ",%" PRIu64 ",%" PRIu64 "\n", path, capacity, conf, plo, phi, nlo, nhi, mlo, mhi, dlo, dhi, fits, nunseen, unseen_bytes,
		       npending);
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
		printf("\nneeds (the least capacity without out-of-memory): ");
		gib(stdout, dlo);
		if (dhi != dlo) {
			printf(" .. ");
			gib(stdout, dhi);
		}
		printf("\nestimated entries: %" PRIu64 " (%" PRIu64 " bytes), frees completed later on another stream: %" PRIu64 "\n",
		       nunseen, unseen_bytes, npending);
		printf("fits: %s", fits);
		if (fit_hi && phi > capacity)
			printf(" (by releasing cached blocks: %" PRIu64 " retries)", e[1].cap.num_alloc_retries);
		printf("\nmargin: %+" PRId64 " bytes (%+.2f GiB)", mlo, (double)mlo / (double)AS_GiB);
		if (mhi != mlo)
			printf(" .. %+" PRId64 " bytes (%+.2f GiB)", mhi, (double)mhi / (double)AS_GiB);
		printf("\n");
	}
	rc = fit_hi ? 0 : fit_lo ? 4 : 3;
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
