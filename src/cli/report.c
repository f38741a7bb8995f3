/* report.c - what every command shares below the command table: option errors and usage messages,
 * error reports, the version, Ctrl-C, the latency model's default, and the settings, capacity and
 * warnings of a replay (main.c dispatches to cmd_*.c; they call here, never back up into main.c). */
#include "cli/cli.h"
#include "policies/policy.h"
#include "config.h"
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- option errors ---------------------------------------------------------------------------- */
#undef getopt_long
static int opt_reported; /* cli_getopt_long has printed the message of the last '?' */

/* The suggestion is as_closest's (src/util/common.c): an optimal-string-alignment (Damerau-
 * Levenshtein) distance of at most 2 over the names, hand-written in a few lines because the names
 * are a dozen short strings and no library the project uses offers it; the commands' misspelt
 * keys and policies use the same one. */
static void bad_option(const char *cmd, char *const argv[], const char *shortopts, const struct option *lo)
{
	const char *tok = optind > 0 ? argv[optind - 1] : "";
	opt_reported = 1;
	if (!strncmp(tok, "--", 2) && tok[2]) {
		char name[128];
		snprintf(name, sizeof name, "%.*s", (int)strcspn(tok + 2, "="), tok + 2);
		const char *names[256];
		size_t n = 0, pre = 0;
		const struct option *exact = NULL, *first = NULL;
		char which[160] = "";
		for (const struct option *o = lo; o && o->name && n < 256; o++) {
			names[n++] = o->name;
			if (!strcmp(o->name, name))
				exact = o;
			else if (!strncmp(o->name, name, strlen(name)) && ++pre) {
				first = first ? first : o;
				if (strlen(which) + strlen(o->name) + 6 < sizeof which)
					snprintf(which + strlen(which), sizeof which - strlen(which), "%s--%s", pre > 1 ? ", " : "", o->name);
			}
		}
		if (!exact && pre == 1) /* an abbreviation getopt accepted: its value is what is wrong */
			exact = first, snprintf(name, sizeof name, "%s", first->name);
		if (exact && exact->has_arg == required_argument && !strchr(tok, '='))
			fprintf(stderr, "%s: error: %s: option '--%s' needs a value\n", as_progname, cmd, name);
		else if (exact && exact->has_arg == no_argument)
			fprintf(stderr, "%s: error: %s: option '--%s' takes no value\n", as_progname, cmd, name);
		else if (!exact && pre > 1)
			fprintf(stderr, "%s: error: %s: option '--%s' is ambiguous: %s?\n", as_progname, cmd, name, which);
		else {
			const char *near = as_closest(name, names, n);
			if (near)
				fprintf(stderr, "%s: error: %s: unknown option '--%s': did you mean '--%s'?\n", as_progname, cmd, name, near);
			else
				fprintf(stderr, "%s: error: %s: unknown option '--%s'\n", as_progname, cmd, name);
		}
		return;
	}
	const char *p = optopt > 0 && optopt != ':' ? strchr(shortopts, optopt) : NULL;
	if (p && p[1] == ':')
		fprintf(stderr, "%s: error: %s: option '-%c' needs a value\n", as_progname, cmd, optopt);
	else
		fprintf(stderr, "%s: error: %s: unknown option '-%c'\n", as_progname, cmd, optopt > 0 ? optopt : '?');
}

int cli_getopt_long(int argc, char *const argv[], const char *shortopts, const struct option *longopts, int *longind)
{
	opterr = 0;
	int c = getopt_long(argc, argv, shortopts, longopts, longind);
	if (c == '?')
		bad_option(argv[0], argv, shortopts, longopts);
	return c;
}

void cli_version(void)
{
	printf("allocsim %s\n", PACKAGE_VERSION);
}

int cli_report(const as_err *err)
{
	if (cli_interrupted && err->code != AS_EXIT_INTERRUPTED) { /* whatever failed, a signal cut it short */
		fprintf(stderr, "%s: error: interrupted; nothing was written\n", as_progname);
		return AS_EXIT_INTERRUPTED;
	}
	fprintf(stderr, "%s: error: %s\n", as_progname, err->msg[0] ? err->msg : "unknown error");
	return err->code ? err->code : AS_EXIT_SOFTWARE;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	if (opt_reported && !strcmp(fmt, "invalid option")) { /* cli_getopt_long said which and why */
		opt_reported = 0;
		fprintf(stderr, "Try 'allocsim %s --help'.\n", cmd);
		return AS_EXIT_USAGE;
	}
	fprintf(stderr, "%s: error: %s: ", as_progname, cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'allocsim %s --help'.\n", cmd);
	return AS_EXIT_USAGE;
}

static void on_signal(int sig)
{
	(void)sig;
	cli_interrupted = 1;
}

void cli_catch_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* The latency model: explicit path, 'none', or the bundled H200 calibration (installed, or in the
 * source tree when run uninstalled); without one the simulation reports latency_source none. */
int cli_load_model(const char *path, as_lat_model *m, int *have, as_err *err)
{
	*have = 0;
	if (path && !strcmp(path, "none"))
		return 0;
	if (path) {
		if (as_lat_model_load(m, path, err))
			return -1;
		*have = 1;
		return 0;
	}
	static const char *const where[] = { ALLOCSIM_PKGDATADIR "/h200-latency-model.csv",
		ALLOCSIM_SRCDIR "/traces/h200-latency-model.csv" };
	for (size_t i = 0; i < 2; i++)
		if (access(where[i], R_OK) == 0) {
			if (as_lat_model_load(m, where[i], err))
				return -1;
			*have = 1;
			return 0;
		}
	return 0;
}

/* A recording with out-of-memory entries ran under a memory limit: without one the replay differs. */
void cli_warn_recorded_ooms(const char *path, uint64_t ooms, const as_meta *m)
{
	char total[96] = "the device's total memory: --device-total SIZE";
	if (m->device_total)
		snprintf(total, sizeof total, "the recorded device total, %" PRIu64 " bytes", m->device_total);
	fprintf(stderr, "%s: warning: %s: the recorded run ran out of memory %" PRIu64 " time(s), so it had a memory limit, "
		"and this replay has none: --capacity SIZE or --fraction F (set_per_process_memory_fraction(F) x %s) reproduces it\n",
		as_progname, path, ooms, total);
}

/* A snapshot whose entries name no pool (PyTorch <= 2.11 records none) where the reader could not place
 * every request (src/readers/poolinfer.c, doc/pytorch-policy.md "Private pools without annotation"). */
void cli_warn_unnamed_pools(const char *path, const as_meta *m)
{
	if (m->private_segments && !m->named_pools)
		fprintf(stderr, "%s: warning: %s: %" PRIu32 " segment(s) belong to private pools (CUDA graphs or "
			"torch.cuda.MemPool), but the trace does not say which requests went to them (PyTorch 2.11 records no "
			"pool per entry) and ALLOCSIM_POOLS=annotation reads no other evidence: they are replayed in the default "
			"pool; see doc/pytorch-policy.md, \"Private pools\"\n", as_progname, path, m->private_segments);
	if (m->pool_evidence && !m->named_pools)
		fprintf(stderr, "%s: warning: %s: private pools (CUDA graphs or torch.cuda.MemPool) were used and released "
			"before the snapshot, which names none (%" PRIu64 " segment(s) show it): their requests are replayed in the "
			"default pool; ALLOCSIM_POOLS=infer places them (doc/pytorch-policy.md, \"Private pools without annotation\")\n",
			as_progname, path, m->pool_evidence);
	if (m->pool_unplaced)
		fprintf(stderr, "%s: warning: %s: %" PRIu64 " request(s) lie in segments made before the history began (it "
			"was cut short) that the end state does not hold: their pool is only guessed from the requests around them "
			"(doc/pytorch-policy.md, \"Private pools without annotation\")\n", as_progname, path, m->pool_unplaced);
}

/* garbage_collection_threshold acts only under a memory limit (PyTorch: set_per_process_memory_fraction);
 * warn: as_policy_prepare's bits */
void cli_warn_gc(unsigned warn)
{
	if (warn & AS_WARN_GC_NO_CAPACITY)
		fprintf(stderr, "%s: warning: garbage_collection_threshold does nothing without a capacity (PyTorch applies it "
			"only under set_per_process_memory_fraction): give --capacity or --fraction\n", as_progname);
	if (warn & AS_WARN_FRACTION_NO_CAPACITY)
		fprintf(stderr, "%s: warning: per_process_memory_fraction in -c is not this run's limit (PyTorch sets its limit "
			"from it at start): give --fraction F or --capacity%s\n", as_progname, (warn & AS_WARN_THROW_NO_CAPACITY) ?
			"; without one, throw_on_cudamalloc_oom rejects every new segment past F x the device total where PyTorch "
			"would first fail its own limit check and free its cache" : "");
}

/* --fraction F [--device-total SIZE]: the capacity F x the device total (the trace's, or SIZE); a
 * --device-total alone is the simulated device's total (the command gives it to the device) */
int cli_fraction_capacity(const char *path, const as_meta *m, double fraction, uint64_t dev_total, uint64_t *capacity,
	int *capacity_set, as_err *err)
{
	if (fraction > 0 && *capacity_set)
		return as_fail(err, AS_EXIT_USAGE, "give --capacity or --fraction, not both");
	if (!(fraction > 0))
		return 0;
	uint64_t t = dev_total ? dev_total : m->device_total;
	if (!t)
		return as_fail(err, AS_EXIT_USAGE, "--fraction: %s does not record the device's total memory: add --device-total SIZE "
			"(torch.cuda.get_device_properties(0).total_memory)", path);
	*capacity = (uint64_t)floor(fraction * (double)t);
	if (!*capacity)
		return as_fail(err, AS_EXIT_USAGE, "--fraction: %g of %" PRIu64 " bytes holds nothing", fraction, t);
	*capacity_set = 1;
	return 0;
}

/* --fraction's argument: a number in (0, 1] */
int cli_parse_fraction(const char *s, double *f)
{
	char *end;
	*f = strtod(s, &end);
	return end == s || *end || !(*f > 0 && *f <= 1);
}

int cli_resolve_config(const char *path, const as_meta *m, const char *config, char **out, as_err *err)
{
	if (config && strcmp(config, "recorded")) {
		*out = xstrdup(config);
		return 0;
	}
	if (!m->has_settings)
		return as_fail(err, AS_EXIT_DATAERR, "%s: the trace records no allocator settings; pass -c explicitly", path);
	*out = xstrdup(m->settings ? m->settings : "");
	return 0;
}

