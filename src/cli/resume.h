/* resume.h - sweep --resume: which rows of an earlier output may be kept, verified
 * (doc/reliability.md, "Outputs"). */
#ifndef ALLOCSIM_RESUME_H
#define ALLOCSIM_RESUME_H
#include "util/common.h"

typedef struct as_resume_spec {
	const char *header;      /* the header line this run writes, without the newline */
	const char *sample;      /* a row this run could write (any job, counters 0), without the newline:
	                          * its columns after the key tell numbers from text */
	size_t nkey;             /* the fields after the run index that identify a run */
	const char *const *keys; /* job i's key: as_resume_key() of the row it would write */
	size_t njobs;
	int timing;              /* 0: rows with non-zero timing columns are run again */
} as_resume_spec;

/* The identity of a row: its fields 1..nkey (after the run index) as CSV text; NULL if it has fewer. */
char *as_resume_key(const char *row, size_t nkey);

/* Reads the earlier output at path (missing or empty: nothing kept). kept[i] receives job i's row,
 * renumbered to i, without the newline, or stays NULL. A row is kept only if it is complete (ends
 * in a newline, as many fields as the header, numbers where numbers belong), names a job of this
 * grid, is the only row for it, has no out-of-memory (those depend on --stop-at-oom, not recorded
 * in the file) and, without --timing, zero timing columns. Incomplete rows are run again with a
 * warning; a different header, a complete row of no job, or two different rows for one job are
 * errors (exit 65). Returns the number of rows kept, or -1. */
long as_resume_load(const char *path, const as_resume_spec *sp, char **kept, as_err *err);
#endif
