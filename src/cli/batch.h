/* batch.h - commands over many inputs (compare, sweep): --keep-going's per-input error lines and
 * its exit status (doc/batches.md). */
#ifndef ALLOCSIM_BATCH_H
#define ALLOCSIM_BATCH_H
#include "util/common.h"

/* err's message names the input path (prefixed "PATH: " when it did not), so that a failure among
 * hundreds of files says which one. */
void cli_name_input(as_err *err, const char *path);
/* --keep-going: one line on stderr for a failed input or run, "allocsim: error: input K of N: MSG"
 * (k from 0; MSG names the file and, where the reader knows it, the position in it; what names the
 * run when it is not the input that failed, or NULL). */
void cli_batch_error(size_t k, size_t n, const char *path, const char *what, const as_err *err);
/* The exit status of a batch with --keep-going: 0 when nothing failed; AS_EXIT_PARTIAL when some
 * inputs or runs failed and rows of others were written; the first failure's own status when no
 * row could be written. */
int cli_batch_status(size_t failed, size_t rows, const as_err *first);
#endif
