/* cmd_calibrate.c - allocsim calibrate: measure the GPU's allocation primitives and fit the
 * piecewise-linear latency model the simulation uses (--latency-model). */
#include "cli.h"
#include "device.h"
#include <getopt.h>
#include <gsl/gsl_fit.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char calibrate_usage[] =
	"usage: allocsim calibrate [-n N] [-o MODEL] [--raw FILE]\n"
	"\n"
	"On the real GPU, times cudaMalloc and cudaFree across sizes (512 B to 4 GiB) and the VMM\n"
	"primitives that expandable segments use (cuMemCreate + cuMemMap per granule + cuMemSetAccess;\n"
	"cuMemUnmap + cuMemRelease) from 2 MiB to 1 GiB: N successive allocations held together, then\n"
	"their frees, as an allocator makes them. Takes the mean per call (device time adds up) and fits\n"
	"t = a + b * MiB by least squares (GSL) in size bands: the model 'replay --latency-model' reads.\n"
	"\n"
	"  -n N            calls per point (default 15)\n"
	"  -o, --output F  the model CSV (default standard output)\n"
	"      --raw FILE  also write every measured mean (op,size_bytes,mean_us)\n";

typedef struct band {
	int op;
	uint64_t lo, hi;
} band;

static const band bands[] = {
	{ LAT_MALLOC, 0, 64ULL << 20 }, { LAT_MALLOC, 64ULL << 20, UINT64_MAX },
	{ LAT_FREE, 0, 64ULL << 20 }, { LAT_FREE, 64ULL << 20, UINT64_MAX },
	{ LAT_MAP, 0, UINT64_MAX }, { LAT_UNMAP, 0, UINT64_MAX },
};

int cmd_calibrate(int argc, char **argv)
{
	static const struct option lo[] = { { "output", required_argument, 0, 'o' }, { "raw", required_argument, 0, 'R' },
		{ "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 } };
	const char *out = NULL, *raw = NULL;
	uint64_t reps = 15;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:o:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (as_parse_u64(optarg, &reps) || !reps || reps > 10000)
				return cli_usage_error("calibrate", "-n: '%s' is not a number of repetitions", optarg);
			break;
		case 'o': out = optarg; break;
		case 'R': raw = optarg; break;
		case 'h': fputs(calibrate_usage, stdout); return 0;
		case 'V': cli_version(); return 0;
		default: return cli_usage_error("calibrate", "invalid option");
		}
	}
	if (optind != argc)
		return cli_usage_error("calibrate", "takes no arguments");
	static const uint64_t msizes[] = { 512, 4096, 65536, 1ULL << 20, 2ULL << 20, 8ULL << 20, 20ULL << 20, 64ULL << 20,
		256ULL << 20, 1ULL << 30, 4ULL << 30 };
	static const uint64_t vsizes[] = { 2ULL << 20, 20ULL << 20, 64ULL << 20, 256ULL << 20, 1ULL << 30 };
	enum { NM = sizeof msizes / sizeof msizes[0], NV = sizeof vsizes / sizeof vsizes[0] };
	double med[LAT_NOPS][NM];
	uint64_t size_of[LAT_NOPS][NM];
	size_t npts[LAT_NOPS] = { 0 };
	as_err err = { 0, "" };
	for (int op = 0; op < LAT_NOPS; op++) {
		const uint64_t *sz = op < LAT_MAP ? msizes : vsizes;
		size_t n = op < LAT_MAP ? NM : NV;
		for (size_t i = 0; i < n; i++) {
			double us;
			if (as_cuda_measure(op, sz[i], (int)reps, &us, &err))
				return cli_report(&err);
			med[op][npts[op]] = us;
			size_of[op][npts[op]++] = sz[i];
			fprintf(stderr, "%-6s %12" PRIu64 " bytes  mean %10.2f us\n", as_lat_op_names[op], sz[i], us);
		}
	}
	as_outfile of, rf;
	if (raw) {
		if (as_outfile_open(&rf, raw, &err))
			return cli_report(&err);
		fputs("op,size_bytes,mean_us\n", rf.fp);
		for (int op = 0; op < LAT_NOPS; op++)
			for (size_t i = 0; i < npts[op]; i++)
				fprintf(rf.fp, "%s,%" PRIu64 ",%.3f\n", as_lat_op_names[op], size_of[op][i], med[op][i]);
		if (as_outfile_close(&rf, 1, &err))
			return cli_report(&err);
	}
	if (as_outfile_open(&of, out, &err))
		return cli_report(&err);
	uint64_t fr = 0, tot = 0;
	as_cuda_mem_info(&fr, &tot);
	time_t now = time(NULL);
	char date[32];
	strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
	fprintf(of.fp, "# allocsim calibrate, %s, GPU memory %" PRIu64 " bytes, %" PRIu64 " calls per point\n", date, tot, reps);
	fputs("op,size_lo,size_hi,a_us,b_us_per_mib\n", of.fp);
	for (size_t b = 0; b < sizeof bands / sizeof bands[0]; b++) {
		double x[NM], y[NM];
		size_t k = 0;
		for (size_t i = 0; i < npts[bands[b].op]; i++)
			if (size_of[bands[b].op][i] >= bands[b].lo && size_of[bands[b].op][i] < bands[b].hi) {
				x[k] = (double)size_of[bands[b].op][i] / 1048576.0;
				y[k++] = med[bands[b].op][i];
			}
		double a = 0, sl = 0, c00, c01, c11, ss;
		if (k >= 2)
			gsl_fit_linear(x, 1, y, 1, k, &a, &sl, &c00, &c01, &c11, &ss);
		else if (k == 1)
			a = y[0];
		if (a < 0) /* a fixed cost below zero means none: keep the per-MiB cost */
			a = 0;
		fprintf(of.fp, "%s,%" PRIu64 ",%" PRIu64 ",%.4f,%.6f\n", as_lat_op_names[bands[b].op], bands[b].lo, bands[b].hi, a, sl);
	}
	if (as_outfile_close(&of, 1, &err))
		return cli_report(&err);
	return 0;
}

static const char transfer_usage[] =
	"usage: allocsim transfer [-n N] [-o FILE]\n"
	"\n"
	"On the real GPU: host-to-device and device-to-host copy time and bandwidth from pageable (malloc)\n"
	"and pinned (cudaHostAlloc) host memory, and the cost of cudaHostAlloc/cudaFreeHost, for sizes from\n"
	"4 KiB to 1 GiB (median of N, default 10). CSV: size_bytes,host_memory,operation,median_us,gb_per_s;\n"
	"scripts/plot_transfer.py draws it.\n";

int cmd_transfer(int argc, char **argv)
{
	static const struct option lo[] = { { "output", required_argument, 0, 'o' }, { "help", no_argument, 0, 'h' },
		{ "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 } };
	const char *out = NULL;
	uint64_t reps = 10;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:o:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (as_parse_u64(optarg, &reps) || !reps || reps > 10000)
				return cli_usage_error("transfer", "-n: '%s' is not a number of repetitions", optarg);
			break;
		case 'o': out = optarg; break;
		case 'h': fputs(transfer_usage, stdout); return 0;
		case 'V': cli_version(); return 0;
		default: return cli_usage_error("transfer", "invalid option");
		}
	}
	if (optind != argc)
		return cli_usage_error("transfer", "takes no arguments");
	as_err err = { 0, "" };
	as_outfile of;
	if (as_outfile_open(&of, out, &err))
		return cli_report(&err);
	int rc = as_cuda_transfer(of.fp, (int)reps, &err);
	as_outfile_close(&of, rc == 0, &err);
	return err.code ? cli_report(&err) : 0;
}
