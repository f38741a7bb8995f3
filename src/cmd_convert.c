/* cmd_convert.c - allocsim convert: any readable trace to the native format. */
#include "cli.h"
#include <getopt.h>
#include <string.h>

static const char convert_usage[] =
	"usage: allocsim convert [--device N] TRACE -o OUT\n"
	"\n"
	"Rewrites TRACE (any readable format, '-' for standard input) in allocsim's native text format\n"
	"(doc/trace-format.md); OUT is gzip-compressed when its name ends in .gz, '-' is standard output.\n"
	"The output appears only when the whole input was read without error. --device N picks the\n"
	"device of a multi-device snapshot (default: the one device with history).\n";

/* After Ctrl-C/SIGTERM a read cut short by the signal is no data error: report the interruption. */
static int convert_report(as_err *err)
{
	if (cli_interrupted) {
		as_err_clear(err);
		as_fail(err, AS_EXIT_INTERRUPTED, "interrupted; nothing was written");
	}
	return cli_report(err);
}

int cmd_convert(int argc, char **argv)
{
	static const struct option lo[] = { { "output", required_argument, 0, 'o' }, { "device", required_argument, 0, 'D' },
		{ "help", no_argument, 0, 'h' },
		{ "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 } };
	const char *out = NULL;
	as_reader_opts ro = { 0 };
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'D':
			if (as_reader_opts_device(&ro, optarg))
				return cli_usage_error("convert", "--device: '%s' is not a device number (0 .. 4095)", optarg);
			break;
		case 'h': fputs(convert_usage, stdout); return 0;
		case 'V': cli_version(); return 0;
		default: return cli_usage_error("convert", "invalid option");
		}
	}
	if (optind != argc - 1)
		return cli_usage_error("convert", "expected one TRACE");
	if (!out)
		return cli_usage_error("convert", "missing -o OUT");
	const char *path = argv[optind];
	as_err err = { 0, "" };
	as_meta meta;
	memset(&meta, 0, sizeof meta);
	if (as_outputs_check(&out, 1, &path, 1, &err))
		return cli_report(&err);
	cli_catch_signals(); /* Ctrl-C/SIGTERM: the temporary output is removed, exit 130 */
	as_reader *r;
	if (as_reader_open(&r, path, &ro, &err))
		return convert_report(&err);
	/* Snapshots store their settings at the end: read them first (a second pass over the same data,
	 * standard input included) so the header can carry them. */
	if (as_reader_probe_meta(r, &meta, &err)) {
		as_reader_close(r);
		return convert_report(&err);
	}
	if (!meta.source[0])
		snprintf(meta.source, sizeof meta.source, "%s", r->meta.format);
	as_writer *w = as_native_writer_open(out, &meta, &err);
	as_event ev;
	int rc = 0;
	if (w) {
		while ((rc = as_reader_next(r, &ev, &err)) > 0) {
			if (cli_interrupted) {
				as_fail(&err, AS_EXIT_INTERRUPTED, "interrupted; nothing was written");
				break;
			}
			if (as_native_writer_event(w, &ev, &err))
				break;
		}
		as_check_interrupted(&err); /* a read the signal cut short */
		as_native_writer_close(w, !err.code, &err);
	}
	as_meta_free(&meta);
	as_reader_close(r);
	return err.code ? convert_report(&err) : 0;
}
