/* cmd_blame.c - allocsim blame: who fenced the memory at the recording's peak (and its OOM). */
#include "cli/cli.h"
#include "cli/devopts.h"
#include "engine/blame.h"
#include "engine/engine.h"
#include "readers/evbuf.h"
#include "util/outfile.h"
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char blame_usage[] =
	"usage: allocsim blame [options] SNAPSHOT\n"
	"\n"
	"At the recording's peak of reserved memory (and at its first out-of-memory, if any), attributes\n"
	"every reserved byte that was not allocated to the live allocations that kept its segment from\n"
	"being released (shared equally among a segment's live blocks), by allocation site (the\n"
	"innermost Python frame outside torch); at the out-of-memory, also the sites by the bytes they\n"
	"held. Needs a snapshot recorded with frames (doc/capture.md):\n"
	"torch.cuda.memory._record_memory_history(enabled=\"all\", context=\"all\", stacks=\"python\").\n"
	"\n"
	"      --largest           (csv) the largest live allocations at each moment instead of the sites,\n"
	"                          each with its whole stack, innermost frame first; columns\n"
	"                          moment,rank,bytes,trace_entry,frames\n"
	"      --top N             rows per moment: sites (default: all), or allocations with --largest\n"
	"                          (default: 20)\n"
	"      --format FMT        csv (default) or table (the sites, then the 5 largest allocations, or\n"
	"                          --top of them with --largest)\n"
	"  -o, --output FILE       write there instead of standard output\n"
	"      --device N          the device of a multi-GPU snapshot\n"
	"  -h, --help              show this help\n";



void cli_blame_sites(FILE *f, const as_blame_moment *m, size_t top, int indent)
{
	fprintf(f, "%*s%12s %7s %8s %12s  %s\n", indent, "", "fenced", "blocks", "segments", "live", "site");
	for (size_t i = 0; i < m->nsites && i < top; i++) {
		const as_blame_site *s = &m->sites[i];
		fprintf(f, "%*s%8.3f GiB %7" PRIu64 " %8" PRIu64 " %8.3f GiB  %s\n", indent, "", as_gib(s->fenced), s->blocks, s->segments,
			as_gib(s->live), s->name ? s->name : "(no stack)");
	}
}

static const as_blame_site *held_base;
static int held_cmp(const void *pa, const void *pb)
{
	const as_blame_site *a = &held_base[*(const size_t *)pa], *b = &held_base[*(const size_t *)pb];
	if (a->live != b->live)
		return a->live > b->live ? -1 : 1;
	return *(const size_t *)pa < *(const size_t *)pb ? -1 : 1; /* the fenced order */
}

void cli_blame_held(FILE *f, const as_blame_moment *m, size_t top, int indent)
{
	size_t *ix = xcalloc(m->nsites ? m->nsites : 1, sizeof(*ix));
	for (size_t i = 0; i < m->nsites; i++)
		ix[i] = i;
	held_base = m->sites; /* single-threaded: the output */
	qsort(ix, m->nsites, sizeof(*ix), held_cmp);
	fprintf(f, "%*s%12s %6s %8s %12s  %s\n", indent, "", "held", "share", "blocks", "fenced", "site");
	for (size_t i = 0; i < m->nsites && i < top; i++) {
		const as_blame_site *s = &m->sites[ix[i]];
		fprintf(f, "%*s%8.3f GiB %5.1f%% %8" PRIu64 " %8.3f GiB  %s\n", indent, "", as_gib(s->live),
			m->allocated ? 100.0 * (double)s->live / (double)m->allocated : 0.0, s->nlive, as_gib(s->fenced),
			s->name ? s->name : "(no stack)");
	}
	free(ix);
}

static void moment_header(FILE *f, const char *what, const as_blame_moment *m)
{
	fprintf(f, "%s (trace entry %" PRIu64 "): reserved %.3f GiB (%" PRIu64 " bytes), requested by live blocks %.3f GiB (%" PRIu64 " bytes)\n"
		"  the rest: %.3f GiB (%" PRIu64 " bytes) fenced by live blocks in %" PRIu64 " of %" PRIu64 " segments; %.3f GiB (%" PRIu64
		" bytes) in segments with no live block (empty_cache would release them)\n",
		what, m->index, as_gib(m->reserved), m->reserved, as_gib(m->allocated), m->allocated, as_gib(m->fenced), m->fenced,
		m->nfenced_segments, m->nsegments, as_gib(m->cached), m->cached);
	if (m->request)
		fprintf(f, "  the failed request: %.3f GiB (%" PRIu64 " bytes); the largest free range in one segment: %.3f GiB (%" PRIu64 " bytes)%s\n",
			as_gib(m->request), m->request, as_gib(m->largest_free), m->largest_free,
			m->cached ? "" : "; nothing for empty_cache to release (PyTorch released its cached segments before it gave up)");
}

int cmd_blame(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "largest", no_argument, 0, 'L' }, { "top", required_argument, 0, 'n' },
		{ "format", required_argument, 0, 'f' }, { "output", required_argument, 0, 'o' },
		CLI_DEVOPT(DEVICE), { "help", no_argument, 0, 'h' },
		{ "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 },
	};
	as_reader_opts ro = { .keep_sites = 1 };
	const char *format = "csv", *out = NULL;
	uint64_t top = 0;
	cli_dev dv = { .ro = &ro };
	int largest = 0, c, dr;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
		if ((dr = cli_devopt("blame", &dv, c, optarg)) >= 0) {
			if (dr)
				return dr;
			continue;
		}
		switch (c) {
		case 'L': largest = 1; break;
		case 'n':
			if (as_parse_u64(optarg, &top) || !top || top > 1000000)
				return cli_usage_error("blame", "--top: '%s' is not a number of rows (1..1000000)", optarg);
			break;
		case 'f':
			if (strcmp(optarg, "csv") && strcmp(optarg, "table"))
				return cli_usage_error("blame", "--format: csv or table, not '%s'", optarg);
			format = optarg;
			break;
		case 'o': out = optarg; break;
		case 'h': fputs(blame_usage, stdout); return 0;
		case 'V': cli_version(); return 0;
		default: return cli_usage_error("blame", "invalid option");
		}
	}
	if (argc - optind != 1)
		return cli_usage_error("blame", "expected one trace");
	const char *trace = argv[optind];
	as_err err = { 0, "" };
	const char *outs[] = { out }, *ins[] = { trace };
	if (out && as_outputs_check(outs, 1, ins, 1, &err))
		return cli_report(&err);
	cli_catch_signals();
	size_t nlargest = largest ? (top ? top : 20) : 5;
	as_blame bl;
	as_blame_init(&bl, nlargest);
	as_evbuf buf;
	int rc = 0;
	if (as_evbuf_load_observed(&buf, trace, &ro, as_blame_observe, &bl, &err)) {
		as_blame_free(&bl);
		return cli_report(&err);
	}
	as_blame_finish(&bl);
	if (!bl.peak_m.valid) {
		fprintf(stderr, "%s: error: %s records no segment allocations with addresses: blame needs a PyTorch snapshot's history\n",
			as_progname, trace);
		rc = AS_EXIT_DATAERR;
		goto out;
	}
	if (!bl.with_site)
		fprintf(stderr, "%s: warning: %s has no stack frames: every block is '(no stack)'; record with "
			"torch.cuda.memory._record_memory_history(enabled=\"all\", context=\"all\", stacks=\"python\") (doc/capture.md)\n",
			as_progname, trace);
	as_outfile of = { 0 };
	if (as_outfile_open(&of, out, &err)) {
		rc = cli_report(&err);
		goto out;
	}
	const as_blame_moment *ms[] = { &bl.peak_m, &bl.oom_m };
	const char *names[] = { "peak", "oom" };
	size_t ntop = top ? top : SIZE_MAX;
	FILE *f = of.fp;
	if (!strcmp(format, "table")) {
		for (int k = 0; k < 2; k++) {
			if (!ms[k]->valid)
				continue;
			moment_header(f, k ? "At the first out-of-memory" : "At the peak of reserved memory", ms[k]);
			if (k) {
				fprintf(f, "  the code that held the memory (live bytes by allocation site):\n");
				cli_blame_held(f, ms[k], ntop, 2);
				fprintf(f, "  the code that fenced it (reserved, unrequested bytes by allocation site):\n");
			}
			cli_blame_sites(f, ms[k], ntop, 2);
			fprintf(f, "  largest live allocations:\n");
			for (size_t i = 0; i < ms[k]->nlargest; i++) {
				const as_blame_block *x = &ms[k]->largest[i];
				fprintf(f, "  %10.3f GiB  trace entry %-8" PRIu64 " %s\n", as_gib(x->size), x->index,
					x->site ? as_strtab_str(&bl.names, x->site) : "(no stack)");
			}
			fputc('\n', f);
		}
	} else if (largest) {
		fputs("moment,rank,bytes,trace_entry,frames\n", f);
		for (int k = 0; k < 2; k++)
			for (size_t i = 0; ms[k]->valid && i < ms[k]->nlargest; i++) {
				const as_blame_block *x = &ms[k]->largest[i];
				fprintf(f, "%s,%zu,%" PRIu64 ",%" PRIu64 ",", names[k], i + 1, x->size, x->index);
				as_csv_str(f, x->site ? as_strtab_str(&bl.names, x->site) : "");
				fputc('\n', f);
			}
	} else {
		fputs("moment,rank,site,fenced_bytes,fencing_blocks,segments,live_bytes,live_blocks\n", f);
		for (int k = 0; k < 2; k++)
			for (size_t i = 0; ms[k]->valid && i < ms[k]->nsites && i < ntop; i++) {
				const as_blame_site *s = &ms[k]->sites[i];
				fprintf(f, "%s,%zu,", names[k], i + 1);
				as_csv_str(f, s->name ? s->name : "(no stack)");
				fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", s->fenced, s->blocks, s->segments,
					s->live, s->nlive);
			}
	}
	if (as_outfile_close(&of, 1, &err))
		rc = cli_report(&err);
out:
	as_blame_free(&bl);
	as_evbuf_free(&buf);
	return rc;
}
