/* csvline.c - the line-oriented readers' shared helpers (RMM logs, pinned host logs): the next
 * non-empty line split into its CSV fields, and a data error at a line. They sit below the readers
 * and reader.c's detection, so that no reader calls back into reader.c. */
#include "readers/trace.h"
#include <inttypes.h>
#include <stdio.h>

int as_reader_line_err(as_reader *r, uint64_t line, as_err *err, const char *what, const char *arg)
{
	return as_fail(err, AS_EXIT_DATAERR, "%s:%" PRIu64 ": %s%s%s%s", r->in.path, line, what,
		arg ? " '" : "", arg ? arg : "", arg ? "'" : "");
}

int as_reader_csv_line(as_reader *r, char **line, size_t *cap, uint64_t *lineno, char **f, int n, const char *cols,
	as_err *err)
{
	for (;;) {
		int rc = as_input_line(&r->in, line, cap, err);
		if (rc <= 0)
			return rc;
		++*lineno;
		if (!(*line)[0])
			continue;
		int nf = as_split_csv(*line, f, n);
		if (nf == n)
			return 1;
		char msg[160];
		if (nf > n)
			snprintf(msg, sizeof msg, "too many fields (expected %s)", cols);
		else
			snprintf(msg, sizeof msg, "expected %d fields (%s)", n, cols);
		return as_reader_line_err(r, *lineno, err, msg, NULL);
	}
}
