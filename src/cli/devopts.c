/* devopts.c - the device options' parsing, one place for every command (devopts.h). */
#include "cli/devopts.h"
#include "cli/cli.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_devopt(const char *cmd, cli_dev *d, int c, const char *arg)
{
	char m[256];
	switch (c) {
	case CLI_OPT_DEVICE: { /* a number, or host (a snapshot's pinned host history; as_reader_opts_device) */
		unsigned max = d->device_max ? d->device_max : 4095;
		as_reader_opts scratch = { 0 }, *ro = d->ro ? d->ro : &scratch;
		if (as_reader_opts_device(ro, arg) || (ro->device != AS_DEVICE_HOST && (unsigned)ro->device > max))
			return cli_usage_error(cmd, "--device: '%s' is not a device number (0 .. %u)%s", arg, max,
				d->device_host_named ? " or host" : "");
		return 0;
	}
	case CLI_OPT_CAPACITY:
		if (as_parse_capacity(arg, &d->capacity, m, sizeof m)) /* prints a rounded size's note once */
			return cli_usage_error(cmd, "--capacity: %s", m);
		uint64_t again;
		(void)as_parse_size_note(arg, &again, d->capacity_note, sizeof d->capacity_note, m, sizeof m);
		d->capacity_set = 1;
		d->capacity_arg = arg;
		return 0;
	case CLI_OPT_FRACTION:
		if (cli_parse_fraction(arg, &d->fraction))
			return cli_usage_error(cmd, "--fraction: '%s' is not a number in (0, 1]", arg);
		return 0;
	case CLI_OPT_DEVICE_TOTAL:
		if (as_parse_capacity(arg, &d->total, m, sizeof m))
			return cli_usage_error(cmd, "--device-total: %s", m);
		return 0;
	case CLI_OPT_GPU:
		d->gpu = arg;
		return 0;
	case CLI_OPT_BACKEND:
		if (!strcmp(arg, "cuda")) d->backend = CLI_BACKEND_CUDA;
		else if (!strcmp(arg, "shuffled")) d->backend = CLI_BACKEND_SHUFFLED;
		else if (!strcmp(arg, "sim")) d->backend = CLI_BACKEND_SIM;
		else return cli_usage_error(cmd, "--backend: sim, cuda or shuffled, not '%s'", arg);
		return 0;
	default:
		return -1;
	}
}
