/* outfile.c - output files: pre-checks, atomic commit of regular files, in-place writes to devices
 * and FIFOs, locks, and checked flushes (doc/reliability.md, "Outputs"). */
#include "util/outfile.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static int stdout_reported;
static volatile sig_atomic_t pipe_broken;

static void on_sigpipe(int sig)
{
	(void)sig;
	pipe_broken = 1;
}

void as_stdout_pipe_guard(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigpipe;
	sigaction(SIGPIPE, &sa, NULL);
}

int as_stdout_gone(void)
{
	struct stat st;
	return pipe_broken && fstat(STDOUT_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

static int is_stdout(const char *path)
{
	return !path || !strcmp(path, "-");
}

/* A regular file that is our standard output already (-o /dev/stdout, /proc/self/fd/1 or a link to
 * it, with stdout redirected to a file): written through stdout, for replacing it would leave the
 * shell's redirection pointing at a removed file. */
static int is_our_stdout(const char *path)
{
	struct stat a, b;
	return stat(path, &a) == 0 && S_ISREG(a.st_mode) && fstat(STDOUT_FILENO, &b) == 0 && a.st_dev == b.st_dev &&
		a.st_ino == b.st_ino;
}

/* dirname of a path as a new string ("." for a bare name). */
static char *dir_of(const char *path)
{
	const char *s = strrchr(path, '/');
	if (!s)
		return xstrdup(".");
	if (s == path)
		return xstrdup("/");
	char *d = xmalloc((size_t)(s - path) + 1);
	memcpy(d, path, (size_t)(s - path));
	d[s - path] = 0;
	return d;
}

/* Follows a chain of symlinks (at most 16): for a dangling link, the output is created where the
 * link points, as the shell's '>' would. */
static char *follow_links(const char *path)
{
	char *cur = xstrdup(path);
	struct stat st;
	for (int i = 0; i < 16 && lstat(cur, &st) == 0 && S_ISLNK(st.st_mode); i++) {
		char buf[PATH_MAX];
		ssize_t n = readlink(cur, buf, sizeof buf - 1);
		if (n <= 0)
			break;
		buf[n] = 0;
		char *next;
		if (buf[0] == '/') {
			next = xstrdup(buf);
		} else {
			char *d = dir_of(cur);
			next = xmalloc(strlen(d) + (size_t)n + 2);
			sprintf(next, "%s/%s", d, buf);
			free(d);
		}
		free(cur);
		cur = next;
	}
	return cur;
}

/* Where a regular output goes: *target is the file to replace (NULL: write path in place). */
static int resolve(const char *path, char **target, as_err *err)
{
	struct stat st, lst;
	*target = NULL;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return as_fail(err, AS_EXIT_IOERR, "cannot write '%s': it is a directory", path);
		if (!S_ISREG(st.st_mode))
			return 0; /* a device, FIFO or socket: written in place */
		if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
			char *rp = realpath(path, NULL);
			if (!rp)
				return as_fail(err, AS_EXIT_IOERR, "cannot create '%s': %s", path, strerror(errno));
			*target = xstrdup(rp);
			free(rp);
		} else {
			*target = xstrdup(path);
		}
		return 0;
	}
	if (errno != ENOENT)
		return as_fail(err, AS_EXIT_IOERR, "cannot create '%s': %s", path, strerror(errno));
	*target = follow_links(path);
	return 0;
}

/* The target's directory must exist and be writable (the temporary file and the rename need it). */
static int check_dir(const char *path, const char *target, as_err *err)
{
	char *d = dir_of(target);
	struct stat st;
	int rc = 0;
	if (stat(d, &st) != 0)
		rc = as_fail(err, AS_EXIT_IOERR, "cannot create '%s': %s", path, strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		rc = as_fail(err, AS_EXIT_IOERR, "cannot create '%s': %s", path, strerror(ENOTDIR));
	else if (access(d, W_OK | X_OK) != 0)
		rc = as_fail(err, AS_EXIT_IOERR, "cannot create '%s': %s", path, strerror(errno));
	free(d);
	return rc;
}

static int take_lock(as_outfile *o, as_err *err)
{
	size_t n = strlen(o->target) + 6;
	o->lock = xmalloc(n);
	snprintf(o->lock, n, "%s.lock", o->target);
	/* The lock file is removed when the lock is released; a run that opened it just before then
	 * holds a lock on a removed file, so the inode is compared after locking and the lock retaken. */
	for (int tries = 0; tries < 100; tries++) {
		int fd = open(o->lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		if (fd < 0)
			return as_fail(err, AS_EXIT_IOERR, "cannot create the lock file '%s': %s", o->lock, strerror(errno));
		if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
			int e = errno;
			close(fd);
			if (e == EWOULDBLOCK)
				return as_fail(err, AS_EXIT_TEMPFAIL, "'%s' is being written by another allocsim run (it holds "
					"'%s'); give each run (each --shard) its own -o, or wait for the other to finish", o->path, o->lock);
			return as_fail(err, AS_EXIT_IOERR, "cannot lock '%s': %s", o->lock, strerror(e));
		}
		struct stat a, b;
		if (fstat(fd, &a) == 0 && stat(o->lock, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
			o->lockfd = fd;
			return 0;
		}
		close(fd);
	}
	return as_fail(err, AS_EXIT_IOERR, "cannot lock '%s': it keeps changing", o->lock);
}

static void release(as_outfile *o)
{
	if (o->lock && o->lockfd >= 0) {
		unlink(o->lock);
		close(o->lockfd);
	}
	free(o->path);
	free(o->target);
	free(o->tmp);
	free(o->lock);
	memset(o, 0, sizeof(*o));
	o->lockfd = -1;
}

/* Temporary files that killed runs (SIGKILL, the OOM killer) left beside target: TARGET.tmpPID and
 * TARGET.partial.tmpPID whose process is gone (kill(PID, 0) says no such process) are removed.
 * A live process's, or one of another user's, is left alone. */
static void remove_stale(const char *target)
{
	char *d = dir_of(target);
	const char *base = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
	size_t bl = strlen(base);
	DIR *dir = opendir(d);
	struct dirent *e;
	while (dir && (e = readdir(dir))) {
		const char *n = e->d_name;
		if (strncmp(n, base, bl))
			continue;
		n += bl;
		if (!strncmp(n, ".partial", 8))
			n += 8;
		if (strncmp(n, ".tmp", 4) || !n[4])
			continue;
		n += 4;
		char *end;
		errno = 0;
		long pid = strtol(n, &end, 10);
		if (*end || errno || pid <= 0 || pid == (long)getpid() || n[0] == '0' || n[0] == '+' || n[0] == '-')
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue; /* alive (or not ours to ask about) */
		size_t pl = strlen(d) + strlen(e->d_name) + 2;
		char *p = xmalloc(pl);
		snprintf(p, pl, "%s/%s", d, e->d_name);
		struct stat st;
		if (lstat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
			unlink(p);
		free(p);
	}
	if (dir)
		closedir(dir);
	free(d);
}

static int open_file(as_outfile *o, const char *path, int locked, as_err *err)
{
	memset(o, 0, sizeof(*o));
	o->lockfd = -1;
	if (is_stdout(path) || is_our_stdout(path)) {
		o->fp = stdout;
		return 0;
	}
	o->path = xstrdup(path);
	if (resolve(path, &o->target, err))
		goto fail;
	if (!o->target) {
		/* In place: no O_CREAT, no O_TRUNC; if a regular file appeared meanwhile, stop. */
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		struct stat st;
		if (fd < 0) {
			/* a FIFO's open waits for a reader; SIGINT/SIGTERM (cli_catch_signals) end the wait */
			if (errno == EINTR)
				as_fail(err, AS_EXIT_INTERRUPTED, "interrupted while waiting for a reader of '%s'; nothing was written", path);
			else
				as_fail(err, AS_EXIT_IOERR, "cannot open '%s' for writing: %s", path, strerror(errno));
			goto fail;
		}
		if (fstat(fd, &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
			close(fd);
			as_fail(err, AS_EXIT_IOERR, "cannot write '%s': it changed while being opened", path);
			goto fail;
		}
		if (!(o->fp = fdopen(fd, "wb"))) {
			close(fd);
			as_fail(err, AS_EXIT_IOERR, "cannot open '%s' for writing: %s", path, strerror(errno));
			goto fail;
		}
		return 0;
	}
	if (check_dir(path, o->target, err))
		goto fail;
	if (locked && take_lock(o, err))
		goto fail;
	remove_stale(o->target);
	size_t n = strlen(o->target) + 32;
	o->tmp = xmalloc(n);
	snprintf(o->tmp, n, "%s.tmp%ld", o->target, (long)getpid());
	int fd = -1;
	for (int i = 0; i < 2 && fd < 0; i++) {
		fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd < 0 && errno == EEXIST && i == 0)
			unlink(o->tmp); /* left by a killed run whose process id was ours */
		else if (fd < 0)
			break;
	}
	struct stat old;
	if (fd >= 0 && stat(o->target, &old) == 0)
		(void)fchmod(fd, old.st_mode & 07777); /* the replaced file's permissions, not the umask's */
	if (fd < 0 || !(o->fp = fdopen(fd, "wb"))) {
		int e = errno;
		if (fd >= 0) {
			close(fd);
			unlink(o->tmp);
		}
		as_fail(err, AS_EXIT_IOERR, "cannot create '%s': %s", path, strerror(e));
		goto fail;
	}
	return 0;
fail:
	release(o);
	return -1;
}

int as_outfile_open(as_outfile *o, const char *path, as_err *err)
{
	return open_file(o, path, 0, err);
}

int as_outfile_open_locked(as_outfile *o, const char *path, as_err *err)
{
	return open_file(o, path, 1, err);
}

/* Flushes and closes the stream (a no-op for stdout beyond the flush); -1 with a message on a
 * write error at any point (the stream's error flag is sticky). */
static int finish(as_outfile *o, as_err *err)
{
	int rc = 0;
	if (!o->fp)
		return 0;
	if (o->fp == stdout) {
		errno = 0;
		if ((fflush(stdout) != 0 || ferror(stdout)) && !as_stdout_gone()) {
			int e = errno ? errno : EIO;
			stdout_reported = 1;
			rc = as_fail(err, AS_EXIT_IOERR, "write error on standard output: %s", strerror(e));
		}
		o->fp = NULL;
		return rc;
	}
	errno = 0;
	int e = 0;
	if (fflush(o->fp) != 0 || ferror(o->fp))
		e = errno ? errno : EIO;
	if (fclose(o->fp) != 0 && !e)
		e = errno ? errno : EIO;
	o->fp = NULL;
	if (e)
		rc = as_fail(err, AS_EXIT_IOERR, "write error on '%s': %s", o->path, strerror(e));
	return rc;
}

static int commit_one(as_outfile *o, int commit, as_err *err)
{
	int rc = 0;
	if (o->tmp) {
		if (commit && rename(o->tmp, o->target) != 0)
			rc = as_fail(err, AS_EXIT_IOERR, "cannot rename '%s' to '%s': %s", o->tmp, o->target, strerror(errno));
		if (!commit || rc)
			unlink(o->tmp);
	}
	release(o);
	return rc;
}

int as_outfiles_close(as_outfile *const *o, size_t n, int commit, as_err *err)
{
	int bad = 0;
	for (size_t i = 0; i < n; i++)
		if (o[i] && finish(o[i], err))
			bad = 1;
	int rc = bad ? -1 : 0;
	for (size_t i = 0; i < n; i++)
		if (o[i] && commit_one(o[i], commit && !bad, err))
			rc = -1;
	return rc;
}

int as_outfile_close(as_outfile *o, int commit, as_err *err)
{
	as_outfile *one[1] = { o };
	return as_outfiles_close(one, 1, commit, err);
}

/* ---- pre-checks ------------------------------------------------------------------------ */

typedef struct ident {
	const char *path;
	char *canon;     /* canonical name ("-" for stdout) */
	int exists, chardev;
	dev_t dev;
	ino_t ino;
} ident;

static void identify(ident *id, const char *path)
{
	struct stat st;
	memset(id, 0, sizeof(*id));
	id->path = path;
	if (is_stdout(path) || is_our_stdout(path)) {
		id->canon = xstrdup("-");
		return;
	}
	if (stat(path, &st) == 0) {
		id->exists = 1;
		id->chardev = S_ISCHR(st.st_mode);
		id->dev = st.st_dev;
		id->ino = st.st_ino;
	}
	char *t = follow_links(path), *d = dir_of(t), *rd = realpath(d, NULL);
	const char *base = strrchr(t, '/') ? strrchr(t, '/') + 1 : t;
	if (rd) {
		id->canon = xmalloc(strlen(rd) + strlen(base) + 2);
		sprintf(id->canon, "%s/%s", rd, base);
		free(rd);
	} else {
		id->canon = xstrdup(t);
	}
	free(d);
	free(t);
}

static int same(const ident *a, const ident *b)
{
	if (a->exists && b->exists)
		return a->dev == b->dev && a->ino == b->ino;
	return !strcmp(a->canon, b->canon);
}

int as_outputs_check(const char *const *outs, size_t nouts, const char *const *ins, size_t nins, as_err *err)
{
	ident *o = xcalloc(nouts ? nouts : 1, sizeof(ident));
	size_t no = 0;
	int rc = 0;
	for (size_t i = 0; i < nouts && !rc; i++) {
		if (!outs[i])
			continue;
		identify(&o[no], outs[i]);
		no++;
		if (!strcmp(o[no - 1].canon, "-"))
			continue;
		char *target;
		if (resolve(outs[i], &target, err))
			rc = -1;
		else if (target && check_dir(outs[i], target, err))
			rc = -1;
		free(target);
	}
	for (size_t i = 0; i < no && !rc; i++)
		for (size_t j = i + 1; j < no && !rc; j++)
			if (same(&o[i], &o[j]) && !o[i].chardev)
				rc = !strcmp(o[i].canon, "-") ? as_fail(err, AS_EXIT_USAGE, "two outputs go to standard output")
					: as_fail(err, AS_EXIT_USAGE, "two outputs go to one file ('%s' and '%s')", o[i].path, o[j].path);
	for (size_t k = 0; k < nins && !rc; k++) {
		if (!ins[k] || is_stdout(ins[k]))
			continue;
		ident in;
		identify(&in, ins[k]);
		for (size_t i = 0; i < no && !rc; i++)
			if (strcmp(o[i].canon, "-") && in.exists && same(&o[i], &in) && !o[i].chardev)
				rc = as_fail(err, AS_EXIT_USAGE, "the output '%s' is the input '%s'", o[i].path, ins[k]);
		free(in.canon);
	}
	for (size_t i = 0; i < no; i++)
		free(o[i].canon);
	free(o);
	return rc;
}

int as_stdout_finish(int rc)
{
	errno = 0;
	if ((fflush(stdout) == 0 && !ferror(stdout)) || as_stdout_gone())
		return rc;
	int e = errno ? errno : EIO;
	if (!stdout_reported)
		fprintf(stderr, "%s: error: write error on standard output: %s\n", as_progname, strerror(e));
	stdout_reported = 1;
	return rc >= 64 ? rc : AS_EXIT_IOERR;
}
