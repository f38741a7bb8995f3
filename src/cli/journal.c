/* journal.c - a sweep's durable rows (journal.h). */
#include "cli/journal.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *as_journal_path(const char *target)
{
	size_t n = strlen(target) + 9;
	char *p = xmalloc(n);
	snprintf(p, n, "%s.partial", target);
	return p;
}

static int put_line(int fd, const char *s)
{
	size_t l = strlen(s);
	char *b = xmalloc(l + 1);
	memcpy(b, s, l);
	b[l] = '\n';
	int rc = as_write_all(fd, b, l + 1);
	free(b);
	return rc;
}

int as_journal_open(as_journal *j, const char *target, const char *header, char *const *rows, size_t n, as_err *err)
{
	memset(j, 0, sizeof(*j));
	j->fd = -1;
	j->path = as_journal_path(target);
	size_t tl = strlen(j->path) + 32;
	char *tmp = xmalloc(tl);
	snprintf(tmp, tl, "%s.tmp%ld", j->path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	int bad = fd < 0 || put_line(fd, header);
	/* the rows known already (a --resume of many), through one buffer */
	char *buf = NULL;
	size_t len = 0;
	FILE *mf = bad ? NULL : open_memstream(&buf, &len);
	for (size_t i = 0; mf && !bad && i < n; i++) {
		if (rows[i] && rows[i][0])
			fprintf(mf, "%s\n", rows[i]);
		if (len >= (1 << 20) || i + 1 == n) {
			fflush(mf);
			bad = as_write_all(fd, buf, len);
			rewind(mf);
			len = 0;
		}
	}
	if (mf)
		fclose(mf);
	free(buf);
	if (!bad)
		bad = fdatasync(fd) != 0 || rename(tmp, j->path) != 0;
	if (bad) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		unlink(tmp);
		free(tmp);
		free(j->path);
		j->path = NULL;
		return as_fail(err, AS_EXIT_IOERR, "cannot write the journal of finished rows '%s.partial': %s", target, strerror(e));
	}
	free(tmp);
	/* (the fd stays the renamed file's: appends go to OUT.partial) */
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_APPEND);
	j->fd = fd;
	pthread_mutex_init(&j->mu, NULL);
	clock_gettime(CLOCK_MONOTONIC, &j->synced);
	return 0;
}

void as_journal_add(as_journal *j, const char *row)
{
	if (j->fd < 0 || !row || !row[0])
		return;
	pthread_mutex_lock(&j->mu);
	if (j->fd >= 0) {
		struct timespec now;
		int bad = put_line(j->fd, row);
		j->unsynced++;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!bad && (double)(now.tv_sec - j->synced.tv_sec) + (double)(now.tv_nsec - j->synced.tv_nsec) * 1e-9 >= 1.0) {
			bad = fdatasync(j->fd) != 0;
			j->synced = now;
			j->unsynced = 0;
		}
		if (bad) {
			fprintf(stderr, "%s: warning: cannot write the journal '%s' (%s): the rows finished from now on are kept "
				"only in memory until the end\n", as_progname, j->path, strerror(errno));
			close(j->fd);
			j->fd = -2; /* stopped; still removed at the end */
		}
	}
	pthread_mutex_unlock(&j->mu);
}

void as_journal_close(as_journal *j, int remove)
{
	if (!j->path)
		return;
	if (j->fd >= 0)
		close(j->fd);
	if (remove)
		unlink(j->path);
	pthread_mutex_destroy(&j->mu);
	free(j->path);
	j->path = NULL;
	j->fd = -1;
}
