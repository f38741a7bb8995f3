/* main.c - git-style subcommand dispatch: the command table calls cmd_*.c, which call report.c's helpers
 * (no command calls back into main.c). */
#include "cli/cli.h"
#include "util/heap.h"
#include "util/outfile.h"
#include "util/work.h"
#include "cli/progress.h"
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

static void usage(FILE *f)
{
	fprintf(f, "usage: allocsim <command> [options] [args]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		fprintf(f, "   %-10s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "\n'allocsim help <command>' or 'allocsim <command> --help' describes a command; see allocsim(1).\n");
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
