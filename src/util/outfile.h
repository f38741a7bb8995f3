/* outfile.h - output files: checked before the work, written to a temporary name and renamed at the
 * end (regular files), written in place (devices, FIFOs), optionally locked, every write checked.
 * The guarantees are in doc/reliability.md, "Outputs". */
#ifndef ALLOCSIM_OUTFILE_H
#define ALLOCSIM_OUTFILE_H
#include "util/common.h"
#include <stdio.h>

typedef struct as_outfile {
	FILE *fp;
	char *path;    /* the name given; NULL for standard output */
	char *target;  /* the regular file the rename replaces (a symlink's target); NULL when written in place */
	char *tmp;     /* the temporary file beside target */
	char *lock;    /* the lock file beside target (as_outfile_open_locked); NULL without one */
	int lockfd;
} as_outfile;

/* path "-" or NULL = standard output. A regular file (or a name not yet there) is written to a
 * temporary file beside it and renamed over it by as_outfile_close(commit=1); anything else (a
 * character or block device, a FIFO) is opened and written in place. */
int as_outfile_open(as_outfile *o, const char *path, as_err *err);
/* The same, holding an exclusive lock (flock on TARGET.lock) until as_outfile_close, so that two
 * runs writing one file fail at once (exit 75) instead of one silently replacing the other's rows. */
int as_outfile_open_locked(as_outfile *o, const char *path, as_err *err);
/* Flushes and closes; with commit and no write error, renames the temporary file over the target,
 * otherwise removes it. A write error at any point (the stream's error flag) fails with exit 74. */
int as_outfile_close(as_outfile *o, int commit, as_err *err);
/* Several outputs as one: all are flushed and closed first, and renamed only if every one
 * succeeded (and commit); otherwise none is. */
int as_outfiles_close(as_outfile *const *o, size_t n, int commit, as_err *err);

/* Checks, before any work, the output paths (NULL entries and "-"/NULL for stdout allowed) against
 * each other and against the input paths: a directory, a missing or unwritable directory (exit 74),
 * two outputs on one file or an output that is an input (exit 64, compared by device and inode
 * where they exist, by canonical name where not). Character devices may be named twice
 * (/dev/null). */
int as_outputs_check(const char *const *outs, size_t nouts, const char *const *ins, size_t nins, as_err *err);

/* A reader that closed the pipe on standard output (allocsim ... | head) ends the output, not the
 * command: SIGPIPE is caught (as_stdout_pipe_guard, from main) and the failed writes to that pipe
 * are no error (as_stdout_gone); every command then exits as it would have, 0 on success, as
 * 'head' users expect. A closed FIFO given with -o is still a write error (exit 74). */
void as_stdout_pipe_guard(void);
int as_stdout_gone(void);

/* Flushes stdout and reports a write error on it (exit 74) unless one was reported already;
 * returns rc unchanged when all went well, else 74 (or rc when rc is already an error >= 64). */
int as_stdout_finish(int rc);
#endif
