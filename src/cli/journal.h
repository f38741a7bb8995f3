/* journal.h - durable rows: every finished row of a sweep appended to OUT.partial as it finishes
 * (completion order; each row keyed by its run), so that a SIGKILL (OOM killer, preemption) loses
 * no finished run; --resume reads the journal beside OUT; OUT itself is written whole, in grid
 * order, and renamed at the end, when the journal goes (doc/batches.md). */
#ifndef ALLOCSIM_JOURNAL_H
#define ALLOCSIM_JOURNAL_H
#include "util/common.h"
#include <pthread.h>
#include <time.h>

typedef struct as_journal {
	int fd;             /* -1: no journal (standard output, a device) */
	char *path;         /* OUT.partial */
	pthread_mutex_t mu;
	struct timespec synced;
	size_t unsynced;
} as_journal;

/* TARGET.partial, malloc'd. */
char *as_journal_path(const char *target);
/* Starts TARGET's journal: header and the rows already known (n of them, NULL or "" skipped), written
 * to a temporary file, synced, and renamed over TARGET.partial; later rows are appended. */
int as_journal_open(as_journal *j, const char *target, const char *header, char *const *rows, size_t n, as_err *err);
/* Appends one row (without its newline) in one write; the file is synced (fdatasync) at most once a
 * second: a killed process loses nothing written, a crashed machine at most the last second. A
 * write error is reported once on stderr and the journal stops (the sweep goes on). */
void as_journal_add(as_journal *j, const char *row);
/* Closes; with remove, deletes TARGET.partial (its rows are in TARGET now). */
void as_journal_close(as_journal *j, int remove);
#endif
