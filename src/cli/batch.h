/* batch.h - commands over many inputs (compare, sweep): --keep-going's per-input error lines and
 * its exit status (doc/batches.md). */
#ifndef ALLOCSIM_BATCH_H
#define ALLOCSIM_BATCH_H
#include "policies/policy.h"
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
/* The order many runs start in (compare, sweep -j): costliest first, so that the last to finish, which
 * decides the wall time, is a cheap one. A run's cost is its trace's events, 16 times that for an
 * offline policy (AS_CAP_PLAN: optimal's plan costs 4 to 25 times an online policy's replay on the
 * bundled snapshots, and grows as about N^1.5). */
uint64_t cli_run_cost(uint64_t events, const as_policy_ops *ops);
/* idx[0..n) = 0 .. n-1 by cost[] descending, ties in index order. */
void cli_cost_order(const uint64_t *cost, size_t n, size_t *idx);
#endif
