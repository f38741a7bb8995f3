/* summary.c - the summary CSV, its --stats lines and its documentation table, all from AS_COLUMNS
 * (columns.h). */
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include <inttypes.h>
#include <string.h>

void as_csv_str(FILE *f, const char *s)
{
	if (!s)
		s = "";
	if (!strpbrk(s, ",\"\n\r")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

/* The DER columns. */
static double as_col_efficiency(const as_row *r, const as_summary *s)
{
	(void)r;
	return s->peak_reserved_bytes ? (double)s->peak_allocated_bytes / (double)s->peak_reserved_bytes : 0.0;
}

static double as_col_events_per_second(const as_row *r, const as_summary *s)
{
	(void)r;
	return s->wall_seconds > 0 ? (double)s->events / s->wall_seconds : 0.0;
}

static double as_col_overhead_vs_bound(const as_row *r, const as_summary *s)
{
	(void)r;
	return s->lower_bound_bytes ? (double)s->peak_reserved_bytes / (double)s->lower_bound_bytes : 0.0;
}

static uint64_t as_col_schema_version(const as_row *r, const as_summary *s)
{
	(void)r; (void)s;
	return AS_SCHEMA_VERSION;
}

#define PUT_U64(f, v) fprintf(f, "%" PRIu64, (uint64_t)(v))
#define PUT_I64(f, v) fprintf(f, "%" PRId64, (int64_t)(v))
#define PUT_F0(f, v) fprintf(f, "%.0f", (double)(v))
#define PUT_F3(f, v) fprintf(f, "%.3f", (double)(v))
#define PUT_F6(f, v) fprintf(f, "%.6f", (double)(v))
#define PUT_STR(f, v) as_csv_str(f, (v) ? (v) : "none")
#define VALUE_ROW(n) r->n
#define VALUE_CNT(n) s->n
#define VALUE_SUM(n) s->n
#define VALUE_DER(n) as_col_##n(r, s)

void as_summary_header(FILE *f)
{
	const char *sep = "";
#define X(n, t, w, d) fputs(sep, f); fputs(#n, f); sep = ",";
	AS_COLUMNS(X)
#undef X
	fputc('\n', f);
}

void as_summary_row(FILE *f, const char *trace, const char *policy, const char *config, uint64_t capacity,
	const as_summary *s)
{
	const as_row row = { trace, policy, config, capacity }, *r = &row;
	const char *sep = "";
#define X(n, t, w, d) fputs(sep, f); PUT_##t(f, VALUE_##w(n)); sep = ",";
	AS_COLUMNS(X)
#undef X
	fputc('\n', f);
}

void as_summary_stats(FILE *f, const as_summary *s)
{
#define STAT_ROW(n)
#define STAT_SUM(n)
#define STAT_DER(n)
#define STAT_CNT(n) fprintf(f, "summary." #n ",%" PRIu64 "\n", s->n);
#define X(n, t, w, d) STAT_##w(n)
	AS_COLUMNS(X)
#undef X
}

void as_columns_markdown(FILE *f)
{
	fputs("| # | column | printed as | meaning |\n|---|---|---|---|\n", f);
	int i = 0;
#define TYPE_U64 "integer"
#define TYPE_I64 "integer"
#define TYPE_F0 "number, 0 decimals"
#define TYPE_F3 "number, 3 decimals"
#define TYPE_F6 "number, 6 decimals"
#define TYPE_STR "text"
#define X(n, t, w, d) fprintf(f, "| %d | `%s` | %s | %s |\n", ++i, #n, TYPE_##t, d);
	AS_COLUMNS(X)
#undef X
}
