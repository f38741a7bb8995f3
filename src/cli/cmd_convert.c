/* cmd_convert.c - allocsim convert: any readable trace to the native format. */
#include "cli/cli.h"
#include "cli/devopts.h"
#include "readers/evbuf.h"
#include "readers/binfmt.h"
#include "util/strtab.h"
#include "util/outfile.h"
#include <getopt.h>
#include <string.h>

static const char convert_usage[] =
	"usage: allocsim convert [--device N] TRACE -o OUT\n"
	"\n"
	"Rewrites TRACE (any readable format, '-' for standard input) in allocsim's native text format\n"
	"(doc/trace-format.md); OUT is gzip-compressed when its name ends in .gz, '-' is standard output.\n"
	"An OUT ending in .asbin gets the binary event format instead (fixed-size records, mapped in place\n"
	"when read, never compressed: X.asbin.gz is refused; doc/trace-format.md). Allocation sites (a\n"
	"snapshot's frames, native site=) are kept in the native format; the binary format has no field\n"
	"for them.\n"
	"The output appears only when the whole input was read without error. --device N picks the\n"
	"device of a multi-device snapshot (default: the one device with history).\n";

/* The allocation sites of a decoded trace, by record (native output keeps them; the binary format
 * has no field for them): each record's site as a number in one table of interned strings. */
typedef struct site_keep {
	as_strtab tab;
	uint32_t *ids;       /* ids[record]: 0 none */
	size_t n, cap;
} site_keep;

static void keep_site(void *ctx, const as_event *ev)
{
	site_keep *k = ctx;
	if (!ev) { /* the trace is read again (as_ev_observer) */
		k->n = 0;
		return;
	}
	if (k->n == k->cap) {
		k->cap = k->cap ? 2 * k->cap : 4096;
		k->ids = xrealloc(k->ids, k->cap * sizeof(*k->ids));
	}
	k->ids[k->n++] = ev->site && *ev->site ? as_strtab_id(&k->tab, ev->site, 0) : 0;
}

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
	static const struct option lo[] = { { "output", required_argument, 0, 'o' }, CLI_DEVOPT(DEVICE),
		{ "help", no_argument, 0, 'h' },
		{ "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 } };
	const char *out = NULL;
	as_reader_opts ro = { 0 };
	cli_dev dv = { .ro = &ro };
	int c, dr;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
		if ((dr = cli_devopt("convert", &dv, c, optarg)) >= 0) {
			if (dr)
				return dr;
			continue;
		}
		switch (c) {
		case 'o': out = optarg; break;
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
	size_t ol = strlen(out);
	for (const char *z = ".asbin.gz\0.asbin.bz2\0.asbin.xz\0.asbin.zst\0"; *z; z += strlen(z) + 1)
		if (ol > strlen(z) && !strcmp(out + ol - strlen(z), z))
			return cli_usage_error("convert", "-o '%s': the binary format is not compressed (it is mapped in place when "
				"read): name the output %.*s.asbin for the binary format, or %.*s.trace.gz for compressed text", out,
				(int)(ol - strlen(z)), out, (int)(ol - strlen(z)), out);
	as_err err = { 0, "" };
	if (as_outputs_check(&out, 1, &path, 1, &err))
		return cli_report(&err);
	cli_catch_signals(); /* Ctrl-C/SIGTERM: the temporary output is removed, exit 130 */
	/* Snapshots store their settings at the end and the header carries them: the input is decoded
	 * once into memory, then written. */
	as_reader *r;
	as_evbuf buf;
	site_keep sk = { 0 };
	int native = !as_binfmt_path(out);
	ro.keep_sites = native;
	if (as_reader_open(&r, path, &ro, &err))
		return convert_report(&err);
	int rc = native ? as_evbuf_from_reader_observed(&buf, r, 1, keep_site, &sk, &err) : as_evbuf_from_reader(&buf, r, 1, &err);
	as_reader_close(r);
	if (rc) {
		free(sk.ids);
		as_strtab_free(&sk.tab);
		return convert_report(&err);
	}
	if (cli_interrupted) {
		as_evbuf_free(&buf);
		free(sk.ids);
		as_strtab_free(&sk.tab);
		as_fail(&err, AS_EXIT_INTERRUPTED, "interrupted; nothing was written");
		return convert_report(&err);
	}
	if (!buf.meta.source[0])
		snprintf(buf.meta.source, sizeof buf.meta.source, "%s", buf.meta.format);
	as_writer *w = NULL;
	if (as_binfmt_path(out))
		as_binfmt_write(&buf, out, NULL, &err);
	else
		w = as_native_writer_open(out, &buf.meta, &err);
	if (w) {
		as_event ev;
		for (size_t i = 0; i < buf.n; i++) {
			if (cli_interrupted) {
				as_fail(&err, AS_EXIT_INTERRUPTED, "interrupted; nothing was written");
				break;
			}
			as_evbuf_event(&buf, i, &ev);
			ev.site = i < sk.n && sk.ids[i] ? as_strtab_str(&sk.tab, sk.ids[i]) : NULL;
			if (as_native_writer_event(w, &ev, &err))
				break;
			if (!(i & 4095) && as_stdout_gone())
				break; /* -o - into a pipe whose reader closed it (| head): the output ends here */
		}
		as_native_writer_close(w, !err.code, &err);
	}
	as_evbuf_free(&buf);
	free(sk.ids);
	as_strtab_free(&sk.tab);
	return err.code ? convert_report(&err) : 0;
}
