/* main.c - git-style subcommand dispatch. */
#include "cli/cli.h"
#include "util/heap.h"
#include "util/outfile.h"
#include "util/work.h"
#include "cli/progress.h"
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} cmds[] = {
	{ "advise", cmd_advise, "from a snapshot to the PYTORCH_CUDA_ALLOC_CONF that fits, with the numbers" },
	{ "blame", cmd_blame, "who fenced the memory: unallocated reserved bytes by allocation site, at the peak and the OOM" },
	{ "replay", cmd_replay, "replay a trace against a policy and write summary CSV" },
	{ "validate", cmd_validate, "replay a PyTorch snapshot and compare with what PyTorch recorded" },
	{ "info", cmd_info, "describe a trace: events, streams, peak live bytes, size histogram" },
	{ "convert", cmd_convert, "rewrite a trace in allocsim's native format" },
	{ "policies", cmd_policies, "list the policies with their options" },
	{ "columns", cmd_columns, "list the summary CSV's columns (the table in doc/metrics.md)" },
	{ "sweep", cmd_sweep, "replay traces x policies x parameter values in parallel, one CSV row each" },
	{ "compare", cmd_compare, "replay traces against every policy, one CSV row each, with the lower bound" },
	{ "merge", cmd_merge, "merge the shards of a sweep (sweep --shard) into the one-process CSV, checked" },
	{ "calibrate", cmd_calibrate, "measure the GPU's allocation primitives and fit a latency model" },
	{ "transfer", cmd_transfer, "measure pageable vs pinned host<->GPU copies and cudaHostAlloc cost" },
	{ "predict", cmd_predict, "will a trace captured without a GPU fit: peak reserved, cudaMalloc calls, margin" },
	{ "fit", cmd_fit, "find the smallest capacity without OOM, or the best parameter value" },
	{ "gen", cmd_gen, "draw a synthetic trace (train, serve, iid, phase), or fit the phase model to a trace" },
};

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

static void usage(FILE *f)
{
	fprintf(f, "usage: allocsim <command> [options] [args]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		fprintf(f, "   %-10s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "\n'allocsim help <command>' or 'allocsim <command> --help' describes a command; see allocsim(1).\n");
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

static int dispatch(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return AS_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "help") && argc > 2) { /* allocsim help CMD: CMD's own --help */
		for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
			if (!strcmp(argv[2], cmds[i].name)) {
				char *av[] = { argv[2], "--help", NULL };
				return cmds[i].fn(2, av);
			}
		argv++; /* an unknown command: the message below, with its suggestion */
	} else if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		cli_version();
		return 0;
	}
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	const char *names[sizeof cmds / sizeof cmds[0]];
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		names[i] = cmds[i].name;
	const char *near = as_closest(argv[1], names, sizeof cmds / sizeof cmds[0]);
	if (near)
		fprintf(stderr, "%s: error: '%s' is not an allocsim command: did you mean '%s'? See 'allocsim --help'.\n", as_progname, argv[1], near);
	else
		fprintf(stderr, "%s: error: '%s' is not an allocsim command. See 'allocsim --help'.\n", as_progname, argv[1]);
	return AS_EXIT_USAGE;
}

/* Every command's standard output is checked once more at the end (a full disk, a closed pipe):
 * whatever a command printed, a lost write is an error (doc/reliability.md, "Outputs"). */
int main(int argc, char **argv)
{
	as_heap_init();
	as_stdout_pipe_guard(); /* allocsim ... | head: the closed pipe ends the output, exit as usual */
	as_work_hook(cli_progress_work); /* long computations (optimal's placement) draw a bar on a terminal */
	return as_stdout_finish(dispatch(argc, argv));
}
