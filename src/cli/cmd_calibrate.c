/* cmd_calibrate.c - allocsim calibrate: measure the GPU's allocation primitives and fit the
 * piecewise-linear latency model the simulation uses (--latency-model). */
#include "cli/cli.h"
#include "device/device.h"
#include <getopt.h>
#include <gsl/gsl_fit.h>
#include <inttypes.h>
#include <math.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char calibrate_usage[] =
	"usage: allocsim calibrate [-n N] [-o MODEL] [--raw FILE]\n"
	"       allocsim calibrate --from-log [-o MODEL] LOG...\n"
	"\n"
	"On the real GPU, times the device primitives allocators use, as they use them (N successive\n"
	"allocations held together, then their frees): cudaMalloc and cudaFree from 512 B to 4 GiB;\n"
	"cudaMallocAsync on a pool, split into calls that made the pool grow (cold) and calls it served\n"
	"from memory it held (warm), and cudaFreeAsync; and the CUDA VMM primitives of expandable\n"
	"segments from 2 MiB to 1 GiB: cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease,\n"
	"each timed, and per mapping call (create + map per granule, then set-access) and unmapping call.\n"
	"Fits t = a + b * MiB per operation by weighted least squares (GSL; weights make the error\n"
	"relative) in up to 6 size bands, placed where they fit best: the model 'replay --latency-model'\n"
	"reads.\n"
	"\n"
	"With --from-log, fits the same model from the device calls of real replays instead: the LOGs\n"
	"that 'replay --backend cuda --device-log' wrote (no GPU needed). Calls are grouped by their\n"
	"model_op in half-octave size bins; each bin's mean is one point (calls within 16 trace events of\n"
	"the previous device call). Calls after longer gaps give idle factors per gap band, apart for\n"
	"calls under and over 64 MiB. Such a model predicts device time inside replays, which isolated\n"
	"calls under-predict (doc/real-gpu.md).\n"
	"\n"
	"  -n N            calls per point (default 15; fewer where the GPU's free memory is short)\n"
	"      --from-log  fit from device logs of real replays\n"
	"  -o, --output F  the model CSV (default standard output)\n"
	"      --raw FILE  also write every measurement (op,size_bytes,calls,mean_us)\n";

#define MAXPTS 80
#define MAXBANDS 6

typedef struct pts {
	size_t n;
	double x[MAXPTS], y[MAXPTS], w[MAXPTS]; /* MiB, mean us, weight */
	uint64_t size[MAXPTS];
} pts;

/* One measured point: the mean time of `calls` calls of (on average) `bytes` bytes, weighted so
 * that the fit minimises relative error. */
static void add_point(pts *p, double bytes, double us, double calls)
{
	if (p->n == MAXPTS || us <= 0)
		return;
	p->x[p->n] = bytes / 1048576.0;
	p->y[p->n] = us;
	p->w[p->n] = calls / (us * us);
	p->size[p->n++] = (uint64_t)bytes;
}

/* The first line of a model file: what made it, and when. */
static void model_header(FILE *f, const char *what)
{
	time_t now = time(NULL);
	char date[32];
	strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
	fprintf(f, "# allocsim calibrate%s, %s, ", what, date);
}

/* Weighted chi-square of the straight line through points i..j (relative error: w = calls/y^2). */
static double seg_fit(const pts *p, size_t i, size_t j, double *a, double *b)
{
	size_t k = j - i + 1;
	double c00, c01, c11, chisq = 0;
	if (k == 1) {
		*a = p->y[i];
		*b = 0;
		return 0;
	}
	gsl_fit_wlinear(p->x + i, 1, p->w + i, 1, p->y + i, 1, k, a, b, &c00, &c01, &c11, &chisq);
	return chisq;
}

/* Segmented least squares: the split of the points into at most MAXBANDS runs (of two or more) that
 * minimises the total chi-square for each number of bands; the fewest bands whose RMS relative error
 * is within 5% (or 1.1x the best) are written. Written by hand: GSL has no segmented regression. */
static void fit_bands(FILE *f, const char *op, const pts *p)
{
	size_t n = p->n;
	if (!n)
		return;
	double cost[MAXBANDS + 1][MAXPTS + 1];
	size_t from[MAXBANDS + 1][MAXPTS + 1];
	for (int k = 0; k <= MAXBANDS; k++)
		for (size_t j = 0; j <= n; j++)
			cost[k][j] = HUGE_VAL;
	cost[0][0] = 0;
	size_t minrun = n >= 6 ? 3 : n >= 2 ? 2 : 1;
	for (int k = 1; k <= MAXBANDS; k++)
		for (size_t j = minrun; j <= n; j++)          /* the first j points in k bands */
			for (size_t i = (size_t)(k - 1) * minrun; i + minrun <= j; i++) {
				if (cost[k - 1][i] == HUGE_VAL)
					continue;
				double a, b, c = cost[k - 1][i] + seg_fit(p, i, j - 1, &a, &b);
				if (c < cost[k][j]) {
					cost[k][j] = c;
					from[k][j] = i;
				}
			}
	double wsum = 0, best = HUGE_VAL;
	for (size_t i = 0; i < n; i++)
		wsum += p->w[i] * p->y[i] * p->y[i];
	for (int k = 1; k <= MAXBANDS; k++)
		if (cost[k][n] < best)
			best = cost[k][n];
	int K = 1;
	for (; K < MAXBANDS; K++) {
		double rms = sqrt(cost[K][n] / wsum), rbest = sqrt(best / wsum);
		if (cost[K][n] != HUGE_VAL && (rms <= 0.05 || rms <= 1.1 * rbest))
			break;
	}
	size_t cut[MAXBANDS + 1];
	cut[K] = n;
	for (int k = K; k >= 1; k--)
		cut[k - 1] = from[k][cut[k]];
	for (int k = 0; k < K; k++) {
		double a, b;
		seg_fit(p, cut[k], cut[k + 1] - 1, &a, &b);
		/* a band runs from the geometric middle between its first point and the one before */
		uint64_t lo = k == 0 ? 0 : (uint64_t)sqrt((double)p->size[cut[k] - 1] * (double)p->size[cut[k]]);
		uint64_t hi = k == K - 1 ? UINT64_MAX : (uint64_t)sqrt((double)p->size[cut[k + 1] - 1] * (double)p->size[cut[k + 1]]);
		fprintf(f, "%s,%" PRIu64 ",%" PRIu64 ",%.4f,%.6f\n", op, lo, hi, a, b);
	}
	fprintf(f, "# %s: %d band(s), RMS relative error %.1f%% over %zu sizes\n", op, K, 100.0 * sqrt(cost[K][n] / wsum), n);
}

/* Gap bands (events since the previous device call) of the idle factors: the first call, calls in
 * quick succession (the size model's own), then wider and wider gaps. */
static const uint64_t gap_edges[] = { 0, 1, 16, 64, 256, 1024, 4096, UINT64_MAX };
#define NGAPS (sizeof gap_edges / sizeof gap_edges[0] - 1)
/* Idle factors are fitted apart for calls under and of IDLE_LARGE bytes or more (a side with fewer
 * than 5 calls takes the band's factor): on the H200 an idle gap costs large cudaMallocs more than
 * small ones (doc/real-gpu.md; of the cuts 8, 32, 64 and 128 MiB, 64 fitted the means of machines
 * A-E best). */
#define IDLE_LARGE ((uint64_t)64 << 20)
#define HOT_LO 1
#define HOT_HI 16
#define NBINS 80

static int size_bin(uint64_t bytes) /* half-octave bins */
{
	int b = bytes ? (int)floor(2.0 * log2((double)bytes)) : 0;
	return b < NBINS ? b : NBINS - 1;
}

/* The size model from calls in quick succession (all calls of an op whose quick ones cover fewer
 * than 3 size bins): per op, the mean of each half-octave size bin is a point, fitted in bands.
 * Then each op's idle factor per gap band: measured time over the size model's, where the band has
 * 5 calls or more. */
static int calibrate_from_logs(char **logs, int n, const char *out)
{
	as_devcalls cs = { 0 };
	as_err err = { 0, "" };
	if (as_outputs_check(&out, 1, (const char *const *)logs, (size_t)n, &err))
		return cli_report(&err);
	for (int i = 0; i < n; i++)
		if (as_devlog_load(&cs, logs[i], &err)) {
			free(cs.v);
			return cli_report(&err);
		}
	static double bc[LAT_NOPS][NBINS], bb[LAT_NOPS][NBINS], bu[LAT_NOPS][NBINS];
	static pts per[LAT_NOPS];
	memset(bc, 0, sizeof bc);
	memset(bb, 0, sizeof bb);
	memset(bu, 0, sizeof bu);
	memset(per, 0, sizeof per);
	/* an op's size model comes from its calls in quick succession where they cover 3 size bins or
	 * more, else from all its calls */
	int hot[LAT_NOPS] = { 0 };
	static char seen[LAT_NOPS][NBINS];
	memset(seen, 0, sizeof seen);
	for (size_t i = 0; i < cs.n; i++)
		if (cs.v[i].gap >= HOT_LO && cs.v[i].gap < HOT_HI) {
			int b = size_bin(cs.v[i].bytes);
			hot[cs.v[i].op] += !seen[cs.v[i].op][b];
			seen[cs.v[i].op][b] = 1;
		}
	for (int k = 0; k < LAT_NOPS; k++)
		hot[k] = hot[k] >= 3;
	for (size_t i = 0; i < cs.n; i++) {
		const as_devcall *c = &cs.v[i];
		if (hot[c->op] && (c->gap < HOT_LO || c->gap >= HOT_HI))
			continue;
		int b = size_bin(c->bytes);
		bc[c->op][b]++;
		bb[c->op][b] += (double)c->bytes;
		bu[c->op][b] += c->us;
	}
	for (int k = 0; k < LAT_NOPS; k++)
		for (int b = 0; b < NBINS; b++)
			if (bc[k][b])
				add_point(&per[k], bb[k][b] / bc[k][b], bu[k][b] / bc[k][b], bc[k][b]);
	/* the size model goes to a temporary file first: the idle factors are computed with it */
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	model_header(mem, " --from-log");
	fprintf(mem, "%zu device calls from %d log(s)\n", cs.n, n);
	fputs("op,size_lo,size_hi,a_us,b_us_per_mib\n", mem);
	for (int k = 0; k < LAT_NOPS; k++) {
		if (k == LAT_POOL_INIT) { /* a one-off cost: the mean of the first calls */
			double c = 0, us = 0;
			for (size_t i = 0; i < cs.n; i++)
				if (cs.v[i].op == k) {
					c++;
					us += cs.v[i].us;
				}
			if (c)
				fprintf(mem, "%s,0,%" PRIu64 ",%.4f,0\n", as_lat_op_names[k], UINT64_MAX, us / c);
			continue;
		}
		fit_bands(mem, as_lat_op_names[k], &per[k]);
	}
	fflush(mem);
	as_lat_model m = { 0 };
	/* read the bands back with replay's own reader */
	int rc = 0;
	FILE *back = fmemopen(text, len, "r");
	if (!back)
		rc = as_fail(&err, AS_EXIT_SOFTWARE, "fmemopen: %s", strerror(errno));
	else if (as_lat_model_read(&m, back, "(the fitted model)", &err))
		rc = -1;
	if (!rc) {
		for (int k = 0; k < LAT_NOPS; k++) {
			if (k == LAT_POOL_INIT)
				continue;
			/* [g][0]: calls under IDLE_LARGE bytes, [g][1]: the others */
			double meas[NGAPS][2] = { { 0 } }, mod[NGAPS][2] = { { 0 } }, cnt[NGAPS][2] = { { 0 } };
			for (size_t i = 0; i < cs.n; i++) {
				const as_devcall *c = &cs.v[i];
				if (c->op != k)
					continue;
				size_t g = 0;
				while (g + 1 < NGAPS && c->gap >= gap_edges[g + 1])
					g++;
				int l = c->bytes >= IDLE_LARGE;
				meas[g][l] += c->us;
				mod[g][l] += as_lat_model_us(&m, k, c->bytes);
				cnt[g][l]++;
			}
			for (size_t g = 0; g < NGAPS; g++) {
				if (gap_edges[g] == HOT_LO)
					continue;
				double all_c = cnt[g][0] + cnt[g][1], all_m = mod[g][0] + mod[g][1];
				if (all_c < 5 || all_m <= 0)
					continue; /* too few calls: factor 1 */
				/* each side its own factor where it has 5 calls, else the band's */
				double f[2];
				for (int l = 0; l < 2; l++)
					f[l] = cnt[g][l] >= 5 && mod[g][l] > 0 ? meas[g][l] / mod[g][l] : (meas[g][0] + meas[g][1]) / all_m;
				fprintf(mem, "idle:%s,%" PRIu64 ",%" PRIu64 ",%.4f,0\n", as_lat_op_names[k], gap_edges[g], gap_edges[g + 1], f[0]);
				if (fabs(f[1] - f[0]) >= 5e-5)
					fprintf(mem, "idle:%s,%" PRIu64 ",%" PRIu64 ",%.4f,%" PRIu64 "\n", as_lat_op_names[k], gap_edges[g],
						gap_edges[g + 1], f[1], (uint64_t)IDLE_LARGE);
			}
		}
	}
	fclose(mem);
	as_lat_model_free(&m);
	free(cs.v);
	if (rc) {
		free(text);
		return cli_report(&err);
	}
	as_outfile of;
	if (as_outfile_open(&of, out, &err)) {
		free(text);
		return cli_report(&err);
	}
	fputs(text, of.fp);
	free(text);
	if (as_outfile_close(&of, 1, &err))
		return cli_report(&err);
	return 0;
}

int cmd_calibrate(int argc, char **argv)
{
	static const struct option lo[] = { { "output", required_argument, 0, 'o' }, { "raw", required_argument, 0, 'R' },
		{ "from-log", no_argument, 0, 'F' }, { "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' },
		{ 0, 0, 0, 0 } };
	const char *out = NULL, *raw = NULL;
	uint64_t reps = 15;
	int c, from_log = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:o:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (as_parse_u64(optarg, &reps) || !reps || reps > 10000)
				return cli_usage_error("calibrate", "-n: '%s' is not a number of repetitions", optarg);
			break;
		case 'o': out = optarg; break;
		case 'R': raw = optarg; break;
		case 'F': from_log = 1; break;
		case 'h': fputs(calibrate_usage, stdout); return 0;
		case 'V': cli_version(); return 0;
		default: return cli_usage_error("calibrate", "invalid option");
		}
	}
	if (from_log) {
		if (optind == argc)
			return cli_usage_error("calibrate", "--from-log needs at least one device log");
		if (raw)
			return cli_usage_error("calibrate", "--raw goes with measuring, not with --from-log");
		return calibrate_from_logs(argv + optind, argc - optind, out);
	}
	if (optind != argc)
		return cli_usage_error("calibrate", "takes no arguments (device logs go with --from-log)");
#define K 1024ULL
#define M (1024ULL * K)
	static const uint64_t ms[] = { 512, K, 2 * K, 4 * K, 8 * K, 16 * K, 32 * K, 64 * K, 128 * K, 256 * K, 512 * K, 768 * K, M,
		3 * M / 2, 2 * M, 3 * M, 4 * M, 6 * M, 8 * M, 12 * M, 16 * M, 20 * M, 32 * M, 64 * M, 128 * M, 256 * M, 512 * M,
		1024 * M, 2048 * M, 4096 * M };
	static const uint64_t vs[] = { 2 * M, 4 * M, 6 * M, 8 * M, 12 * M, 16 * M, 20 * M, 32 * M, 64 * M, 128 * M, 256 * M,
		512 * M, 1024 * M };
#undef K
#undef M
	static const struct { int family; const uint64_t *sizes; size_t n; } plan[] = {
		{ CAL_MALLOC, ms, sizeof ms / sizeof ms[0] }, { CAL_POOL, ms, sizeof ms / sizeof ms[0] },
		{ CAL_VMM, vs, sizeof vs / sizeof vs[0] },
	};
	static pts per[CAL_NRESULTS];
	memset(per, 0, sizeof per);
	as_err err = { 0, "" };
	as_outfile of, rf;
	const char *const outs[] = { raw, out };
	if (as_outputs_check(outs, 2, NULL, 0, &err))
		return cli_report(&err);
	if (raw) {
		if (as_outfile_open(&rf, raw, &err))
			return cli_report(&err);
		fputs("op,size_bytes,calls,mean_us\n", rf.fp);
	}
	for (size_t f = 0; f < sizeof plan / sizeof plan[0]; f++) {
		const uint64_t *sz = plan[f].sizes;
		for (size_t i = 0; i < plan[f].n; i++) {
			as_cal_result res;
			if (as_cuda_measure(plan[f].family, sz[i], (int)reps, &res, &err)) {
				if (raw)
					as_outfile_close(&rf, 0, &err);
				return cli_report(&err);
			}
			for (int k = 0; k < CAL_NRESULTS; k++) {
				if (!res.calls[k])
					continue;
				fprintf(stderr, "%-13s %12" PRIu64 " bytes  %5" PRIu64 " calls  mean %10.2f us\n", as_cal_result_names[k],
					sz[i], res.calls[k], res.us[k]);
				if (raw)
					fprintf(rf.fp, "%s,%" PRIu64 ",%" PRIu64 ",%.3f\n", as_cal_result_names[k], sz[i], res.calls[k], res.us[k]);
				add_point(&per[k], (double)sz[i], res.us[k], (double)res.calls[k]);
			}
		}
	}
	if (raw && as_outfile_close(&rf, 1, &err))
		return cli_report(&err);
	if (as_outfile_open(&of, out, &err))
		return cli_report(&err);
	uint64_t fr = 0, tot = 0;
	as_cuda_mem_info(&fr, &tot);
	model_header(of.fp, "");
	fprintf(of.fp, "GPU memory %" PRIu64 " bytes, %" PRIu64 " calls per point\n", tot, reps);
	fputs("op,size_lo,size_hi,a_us,b_us_per_mib\n", of.fp);
	for (int k = 0; k < LAT_NOPS; k++)
		fit_bands(of.fp, as_lat_op_names[k], &per[k]);
	if (as_outfile_close(&of, 1, &err))
		return cli_report(&err);
	return 0;
}

static const char transfer_usage[] =
	"usage: allocsim transfer [-n N] [-o FILE]\n"
	"       allocsim transfer [--table FILE] [-c CONFIG] [--direction H2D|D2H] [-o FILE] HOSTTRACE\n"
	"\n"
	"On the real GPU: host-to-device and device-to-host copy time and bandwidth from pageable (malloc)\n"
	"and pinned (cudaHostAlloc) host memory, and the cost of cudaHostAlloc/cudaFreeHost, for sizes from\n"
	"4 KiB to 1 GiB (median of N, default 10). CSV: size_bytes,host_memory,operation,median_us,gb_per_s;\n"
	"scripts/plot_transfer.py draws it.\n"
	"\n"
	"With a HOSTTRACE (a pinned host log, or any trace of host buffers), no GPU: what pinning those\n"
	"buffers costs and gains, modelled from such a table. The trace is replayed with the pytorch-pinned\n"
	"policy (PyTorch's pinned host cache; -c its options); each of its cudaHostAlloc/cudaFreeHost calls\n"
	"costs the table's time for its size, and every allocation is one copy of its bytes in the given\n"
	"direction, timed from pinned and from pageable memory. Two CSV rows, pageable and pinned:\n"
	"host_memory,host_bytes_peak,host_bytes_final,host_alloc_calls,host_alloc_us,host_free_calls,\n"
	"host_free_us,copies,direction,copy_bytes,copy_us,copy_gb_per_s,total_us (doc/policies.md).\n"
	"\n"
	"  -n N               repetitions per measurement (default 10)\n"
	"      --table FILE   the measured table (default: the bundled H200 one, h200-transfer.csv)\n"
	"  -c, --config S     pytorch-pinned options, e.g. pinned_reserve_segment_size_mb:64\n"
	"      --direction D  H2D (default) or D2H\n"
	"  -o, --output FILE  the CSV (default standard output)\n";

int cmd_transfer(int argc, char **argv)
{
	static const struct option lo[] = { { "output", required_argument, 0, 'o' }, { "help", no_argument, 0, 'h' },
		{ "version", no_argument, 0, 'V' }, { "table", required_argument, 0, 't' }, { "config", required_argument, 0, 'c' },
		{ "direction", required_argument, 0, 'd' }, { 0, 0, 0, 0 } };
	const char *out = NULL, *table = NULL, *conf = "";
	uint64_t reps = 10;
	int c, d2h = 0, modelled = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:o:hc:", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (as_parse_u64(optarg, &reps) || !reps || reps > 10000)
				return cli_usage_error("transfer", "-n: '%s' is not a number of repetitions", optarg);
			break;
		case 'o': out = optarg; break;
		case 't': table = optarg; modelled = 1; break;
		case 'c': conf = optarg; modelled = 1; break;
		case 'd':
			if (strcmp(optarg, "H2D") && strcmp(optarg, "D2H"))
				return cli_usage_error("transfer", "--direction: '%s' is not H2D or D2H", optarg);
			d2h = !strcmp(optarg, "D2H");
			modelled = 1;
			break;
		case 'h': fputs(transfer_usage, stdout); return 0;
		case 'V': cli_version(); return 0;
		default: return cli_usage_error("transfer", "invalid option");
		}
	}
	if (optind < argc || modelled) {
		if (optind != argc - 1)
			return cli_usage_error("transfer", "--table, -c and --direction take one HOSTTRACE");
		if (!table) {
			static const char *const where[] = { ALLOCSIM_PKGDATADIR "/h200-transfer.csv", ALLOCSIM_SRCDIR "/traces/h200-transfer.csv" };
			for (size_t i = 0; i < 2 && !table; i++)
				if (access(where[i], R_OK) == 0)
					table = where[i];
			if (!table)
				return cli_usage_error("transfer", "no bundled transfer table found: give --table FILE");
		}
		return cli_transfer_weigh(table, argv[optind], conf, d2h, out);
	}
	as_err err = { 0, "" };
	as_outfile of;
	if (as_outfile_open(&of, out, &err))
		return cli_report(&err);
	int rc = as_cuda_transfer(of.fp, (int)reps, &err);
	as_outfile_close(&of, rc == 0, &err);
	return err.code ? cli_report(&err) : 0;
}
