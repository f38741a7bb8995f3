/* spool.c - a decoded trace in a temporary file, read back in chunks (see spool.h). */
#include "readers/spool.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int spool_open(as_spool *s, as_err *err)
{
	const char *dir;
	s->fd = as_tmpfile("allocsim-spool", &dir);
	if (s->fd < 0)
		return as_fail(err, AS_EXIT_IOERR, "cannot create a temporary file in %s for the decoded events: %s", dir,
			strerror(errno));
	return 0;
}

/* Writes the chunk's records to the file and empties it (its labels stay: records point into them). */
static int spool_flush(as_spool *s, as_err *err)
{
	if (as_write_all(s->fd, s->w.own, s->w.n * sizeof(as_rec)))
		return as_fail(err, AS_EXIT_IOERR, "cannot write the decoded events to a temporary file (%s); set TMPDIR to "
			"a file system with room for %zu bytes an event", strerror(errno), sizeof(as_rec));
	s->n += s->w.n;
	s->w.n = 0;
	return 0;
}

int as_spool_from_reader(as_spool *s, as_reader *r, as_err *err)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	if (spool_open(s, err))
		return -1;
	as_event ev;
	as_reader *cur = r, *q = NULL; /* q: a reader reopened by as_reader_again (ours to close) */
	int rc;
	for (;;) {
		while (!cli_interrupted && (rc = as_reader_next(cur, &ev, err)) > 0) {
			as_evbuf_add(&s->w, &ev); /* (the first add sizes the chunk: 4096 records) */
			s->recorded_ooms += ev.type == EV_ALLOC && (ev.flags & EVF_OOM);
			if (s->w.n == AS_SPOOL_CHUNK && spool_flush(s, err)) {
				rc = -1;
				break;
			}
		}
		if (as_check_interrupted(err))
			rc = -1;
		if (rc >= 0 && as_reader_again(cur)) { /* private pools found released (snapshot.c): all again, with them */
			as_reader *nq;
			if (as_reader_reopen(cur, &nq, err)) {
				rc = -1;
			} else {
				as_reader_close(q);
				cur = q = nq;
				as_evbuf_free(&s->w);
				s->n = 0;
				s->recorded_ooms = 0;
				if (ftruncate(s->fd, 0) || lseek(s->fd, 0, SEEK_SET) < 0) {
					rc = as_fail(err, AS_EXIT_IOERR, "cannot empty the temporary file of decoded events: %s", strerror(errno));
				} else {
					continue;
				}
			}
		}
		break;
	}
	if (rc >= 0 && spool_flush(s, err))
		rc = -1;
	if (rc < 0) {
		as_reader_close(q);
		as_spool_free(s);
		return -1;
	}
	s->meta = cur->meta; /* complete now (a snapshot's settings come last) */
	memset(&cur->meta, 0, sizeof cur->meta);
	as_reader_close(q);
	s->chunk = s->w.own; /* the write buffer serves for reading */
	return 0;
}

int as_spool_next(as_spool *s, as_event *ev, as_err *err)
{
	if (s->at == s->have) {
		if (s->next >= s->n)
			return 0;
		size_t want = s->n - s->next < AS_SPOOL_CHUNK ? (size_t)(s->n - s->next) : AS_SPOOL_CHUNK;
		size_t bytes = want * sizeof(as_rec), done = 0;
		while (done < bytes) {
			ssize_t got = pread(s->fd, (char *)s->chunk + done, bytes - done, (off_t)(s->next * sizeof(as_rec) + done));
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0)
				return as_fail(err, AS_EXIT_IOERR, "cannot read the decoded events back from their temporary file: %s",
					got < 0 ? strerror(errno) : "it is shorter than written");
			done += (size_t)got;
		}
		s->have = want;
		s->at = 0;
		s->next += want;
	}
	const as_rec *x = &s->chunk[s->at++];
	as_rec_event(x, s->w.labels, (uint64_t)x->slot + 1, ev);
	return 1;
}

void as_spool_free(as_spool *s)
{
	if (s->fd >= 0)
		close(s->fd);
	as_evbuf_free(&s->w);
	as_meta_free(&s->meta);
	memset(s, 0, sizeof(*s));
	s->fd = -1;
}
