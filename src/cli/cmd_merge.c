/* cmd_merge.c - allocsim merge: the shards of one sweep into the file the sweep would have written
 * in one process, after checking that every shard is there, complete and of the same sweep. */
#include "cli/cli.h"
#include "cli/shard.h"
#include "util/outfile.h"
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char merge_usage[] =
	"usage: allocsim merge SHARD.csv... [-o FILE]\n"
	"\n"
	"Merges the outputs of 'allocsim sweep --shard K/N -o SHARD.csv' (or --shard auto) into the CSV the\n"
	"sweep writes in one process, byte for byte. Every shard's provenance file (SHARD.csv.shard) is\n"
	"checked first: the same build, arguments and grid, each of the N shards exactly once, each\n"
	"complete and its CSV unchanged since it was written. Anything else is refused (exit 65; 66 for a\n"
	"missing file) and nothing is written.\n"
	"\n"
	"  -o, --output FILE  write the merged CSV to FILE (default standard output)\n"
	"  -h, --help         show this help\n";

typedef struct mrow {
	uint64_t run;
	char *line; /* with its newline */
} mrow;

static int cmp_row(const void *a, const void *b)
{
	const mrow *x = a, *y = b;
	return x->run < y->run ? -1 : x->run > y->run;
}

/* Whether two shards' provenance describe one sweep; msg names what differs. */
static int same_sweep(const as_shard_prov *a, const as_shard_prov *b, const char *fa, const char *fb, as_err *err)
{
	if (strcmp(a->build, b->build))
		return as_fail(err, AS_EXIT_DATAERR, "'%s' and '%s' come from different builds (%s; %s): run every shard with one "
			"allocsim", fa, fb, a->build, b->build);
	if (strcmp(a->args, b->args))
		return as_fail(err, AS_EXIT_DATAERR, "'%s' and '%s' come from different arguments (%s; %s)", fa, fb, a->args, b->args);
	if (a->n != b->n)
		return as_fail(err, AS_EXIT_DATAERR, "'%s' is shard %" PRIu64 "/%" PRIu64 " but '%s' is %" PRIu64 "/%" PRIu64
			": one sweep has one shard count", fa, a->k, a->n, fb, b->k, b->n);
	if (a->grid != b->grid || a->jobs != b->jobs || a->total != b->total)
		return as_fail(err, AS_EXIT_DATAERR, "'%s' and '%s' have the same arguments but not the same runs (the traces "
			"or the settings they resolve to differ between the machines)", fa, fb);
	return 0;
}

/* Reads one shard's CSV: its header (checked against *header, or kept) and its rows. */
static int read_shard(const char *path, const as_shard_prov *p, char **header, mrow **rows, size_t *nrows, size_t *cap,
	as_err *err)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return as_fail(err, AS_EXIT_NOINPUT, "cannot read '%s'", path);
	char *line = NULL;
	size_t lc = 0, lineno = 0, mine = 0;
	ssize_t len;
	int rc = 0;
	while ((len = getline(&line, &lc, f)) > 0) {
		lineno++;
		if (line[len - 1] != '\n') {
			rc = as_fail(err, AS_EXIT_DATAERR, "'%s', line %zu: the last row is cut short", path, lineno);
			break;
		}
		if (lineno == 1) {
			if (!*header)
				*header = xstrdup(line);
			else if (strcmp(*header, line)) {
				rc = as_fail(err, AS_EXIT_DATAERR, "'%s': its header differs from the first shard's", path);
				break;
			}
			continue;
		}
		char *end;
		uint64_t run = strtoull(line, &end, 10);
		if (end == line || *end != ',' || run >= p->jobs) {
			rc = as_fail(err, AS_EXIT_DATAERR, "'%s', line %zu: not a row of this sweep (no run index below %" PRIu64 ")",
				path, lineno, p->jobs);
			break;
		}
		AS_GROW(*rows, *nrows, *cap, 1024);
		(*rows)[(*nrows)++] = (mrow){ run, xstrdup(line) };
		mine++;
	}
	free(line);
	fclose(f);
	if (!rc && !lineno)
		rc = as_fail(err, AS_EXIT_DATAERR, "'%s' is empty", path);
	if (!rc && mine != p->owned)
		rc = as_fail(err, AS_EXIT_DATAERR, "'%s' holds %zu rows but shard %" PRIu64 "/%" PRIu64 " has %" PRIu64 " runs",
			path, mine, p->k, p->n, p->owned);
	return rc;
}

static int merge(char **files, size_t nf, const char *out, as_err *err)
{
	as_shard_prov *p = xcalloc(nf, sizeof(*p));
	size_t *by_k = NULL, nrows = 0, cap = 0;
	mrow *rows = NULL;
	char *header = NULL;
	as_outfile of = { 0 };
	int rc = 0, opened = 0;
	for (size_t i = 0; i < nf && !rc; i++) {
		uint64_t bytes;
		uint32_t crc;
		if (as_shard_read(files[i], &p[i], err) || as_shard_checksum(files[i], &bytes, &crc, err))
			rc = -1;
		else if (bytes != p[i].bytes || crc != p[i].crc)
			rc = as_fail(err, AS_EXIT_DATAERR, "'%s' changed after its shard run wrote it (%" PRIu64 " bytes, CRC-32 %08"
				PRIx32 "; recorded %" PRIu64 ", %08" PRIx32 "): an interrupted or later run? Run shard %" PRIu64 "/%"
				PRIu64 " again to its end", files[i], bytes, crc, p[i].bytes, p[i].crc, p[i].k, p[i].n);
		else if (p[i].done != p[i].owned)
			rc = as_fail(err, AS_EXIT_DATAERR, "'%s': shard %" PRIu64 "/%" PRIu64 " is incomplete (%" PRIu64 " of %" PRIu64
				" runs): run it again with --resume", files[i], p[i].k, p[i].n, p[i].done, p[i].owned);
		else if (i)
			rc = same_sweep(&p[0], &p[i], files[0], files[i], err);
	}
	if (rc)
		goto out;
	by_k = xmalloc(p[0].n * sizeof(size_t));
	for (uint64_t k = 0; k < p[0].n; k++)
		by_k[k] = SIZE_MAX;
	for (size_t i = 0; i < nf && !rc; i++) {
		size_t *s = &by_k[p[i].k - 1];
		if (*s != SIZE_MAX)
			rc = as_fail(err, AS_EXIT_DATAERR, "shard %" PRIu64 "/%" PRIu64 " is given twice ('%s' and '%s')", p[i].k, p[i].n,
				files[*s], files[i]);
		*s = i;
	}
	for (uint64_t k = 0; k < p[0].n && !rc; k++)
		if (by_k[k] == SIZE_MAX) {
			uint64_t missing = 0;
			for (uint64_t j = k; j < p[0].n; j++)
				missing += by_k[j] == SIZE_MAX;
			rc = as_fail(err, AS_EXIT_DATAERR, "shard %" PRIu64 "/%" PRIu64 " is missing (%" PRIu64 " of %" PRIu64 " shards "
				"not given)", k + 1, p[0].n, missing, p[0].n);
		}
	for (size_t i = 0; i < nf && !rc; i++)
		rc = read_shard(files[i], &p[i], &header, &rows, &nrows, &cap, err);
	if (rc)
		goto out;
	qsort(rows, nrows, sizeof(mrow), cmp_row);
	for (size_t i = 0; i < nrows && !rc; i++)
		if (rows[i].run != i)
			rc = as_fail(err, AS_EXIT_DATAERR, rows[i].run < i ? "run %" PRIu64 " is in two shards" :
				"run %" PRIu64 " is in no shard", rows[i].run < i ? rows[i].run : (uint64_t)i);
	if (!rc && nrows != p[0].jobs)
		rc = as_fail(err, AS_EXIT_DATAERR, "the shards hold %zu runs of %" PRIu64, nrows, p[0].jobs);
	if (rc)
		goto out;
	if (as_outfile_open(&of, out, err)) {
		rc = -1;
		goto out;
	}
	opened = 1;
	fputs(header, of.fp);
	for (size_t i = 0; i < nrows; i++)
		fputs(rows[i].line, of.fp);
	opened = 0;
	rc = as_outfile_close(&of, 1, err);
	if (!rc) {
		uint64_t mean = p[0].total / p[0].n;
		fprintf(stderr, "%s: merged %" PRIu64 " shards, %zu runs; estimated cost of the slowest shard %.3fx the mean\n",
			as_progname, p[0].n, nrows, mean ? (double)p[0].slowest * (double)p[0].n / (double)p[0].total : 1.0);
	}
out:
	if (opened)
		as_outfile_close(&of, 0, err);
	for (size_t i = 0; i < nrows; i++)
		free(rows[i].line);
	free(rows);
	free(header);
	free(by_k);
	for (size_t i = 0; i < nf; i++)
		as_shard_prov_free(&p[i]);
	free(p);
	return rc;
}

int cmd_merge(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "output", required_argument, 0, 'o' }, { "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' },
		{ 0, 0, 0, 0 },
	};
	const char *out = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'h': fputs(merge_usage, stdout); return 0;
		case 'V': cli_version(); return 0;
		default: return cli_usage_error("merge", "invalid option");
		}
	}
	if (optind >= argc)
		return cli_usage_error("merge", "no shard (SHARD.csv...)");
	as_err err = { 0, "" };
	char **files = argv + optind;
	size_t nf = (size_t)(argc - optind);
	if (as_outputs_check(&out, 1, (const char *const *)files, nf, &err) || merge(files, nf, out, &err))
		return cli_report(&err);
	return as_stdout_finish(0);
}
