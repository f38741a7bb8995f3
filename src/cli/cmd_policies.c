/* cmd_policies.c - allocsim policies: the registry and each policy's option table; allocsim columns:
 * the summary CSV's columns. */
#include "cli/cli.h"
#include "policies/policy.h"
#include "engine/engine.h"
#include <getopt.h>
#include <string.h>

int cmd_policies(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		puts("usage: allocsim policies\n\nLists every registered policy with its options (key, type, default, meaning).\n"
		     "Options are given to -c as 'key:value,key:value'.");
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "--version")) {
		cli_version();
		return 0;
	}
	if (argc > 1)
		return cli_usage_error("policies", "takes no arguments");
	/* the whole list in one buffer, written at the end: a write that fails part-way leaves glibc's
	 * stream with its error flag but, depending on where the buffer boundaries fall, without the
	 * errno (a full device then read as "Input/output error"); one final write reports it exactly */
	static char buf[1 << 16];
	setvbuf(stdout, buf, _IOFBF, sizeof buf);
	for (size_t i = 0; as_policies[i]; i++) {
		const as_policy_ops *p = as_policies[i];
		printf("%s\n    %s\n", p->name, p->summary);
		/* the queries it answers, then its properties (policy.h's AS_CAP_PROPERTIES) */
		for (int props = 0; props < 2; props++) {
			unsigned bits = p->flags & (props ? AS_CAP_PROPERTIES : ~AS_CAP_PROPERTIES);
			if (!bits)
				continue;
			fputs(props ? "    properties:" : "    answers:", stdout);
			for (unsigned b = 0; as_cap_name(b); b++)
				if (bits & (1u << b))
					printf(" %s", as_cap_name(b));
			putchar('\n');
		}
		for (const as_optdesc *o = p->opts; o && o->name; o++)
			printf("    %-32s %-24s default %-10s %s\n", o->name, o->type, o->def, o->help);
		putchar('\n');
	}
	puts("Policies stack: -p 'A>B' makes A take its device memory from B (each of A's segments is one\n"
	     "malloc of B); -c then gives one ';'-separated part per layer, top first, e.g.\n"
	     "-p 'bestfit>passthrough' -c 'min_segment:20MiB;granule:2MiB' (doc/internals.md).");
	return 0; /* main() checks the writes to stdout */
}

int cmd_columns(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		puts("usage: allocsim columns\n\nPrints every column of the summary CSV, in order, as the markdown table of\n"
		     "doc/metrics.md (one list in the source defines both).");
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "--version")) {
		cli_version();
		return 0;
	}
	if (argc > 1)
		return cli_usage_error("columns", "takes no arguments");
	as_columns_markdown(stdout);
	return 0; /* main() checks the writes to stdout */
}
