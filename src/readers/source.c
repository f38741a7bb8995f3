/* source.c - how a trace file is read for a replay (source.h). */
#include "readers/source.h"
#include "readers/binfmt.h"
#include "readers/spool.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* --cache: the binary form of a trace, kept beside it as TRACE.asbin and used while it was made
 * from the trace as it is now (same size and modification time); otherwise (re)written. */
static int use_cache(const char *path, as_evbuf *b, as_err *err)
{
	struct stat st;
	if (!strcmp(path, "-"))
		return as_fail(err, AS_EXIT_USAGE, "--cache needs a file, not standard input");
	if (stat(path, &st))
		return as_fail(err, AS_EXIT_NOINPUT, "cannot open '%s': %s", path, strerror(errno));
	char *cpath = xmalloc(strlen(path) + sizeof AS_BIN_EXT);
	sprintf(cpath, "%s%s", path, AS_BIN_EXT);
	int rc = -1;
	as_err cerr = { 0, "" };
	int m = access(cpath, F_OK) ? 1 : as_binfmt_map(b, cpath, &cerr);
	if (m == 0 && as_binfmt_cache_ok(b, &st)) {
		free(cpath);
		return 0;
	}
	if (m == 0)
		as_evbuf_free(b);
	else if (m == 1 && !access(cpath, F_OK)) {
		as_fail(err, AS_EXIT_USAGE, "--cache: '%s' exists and is not an allocsim binary trace; not overwritten", cpath);
		goto out;
	} else if (m < 0)
		fprintf(stderr, "%s: warning: rewriting the cache: %s\n", as_progname, cerr.msg);
	if (as_evbuf_load(b, path, NULL, err))
		goto out;
	if (as_binfmt_write(b, cpath, &st, err)) {
		as_evbuf_free(b);
		goto out;
	}
	rc = 0;
out:
	free(cpath);
	return rc;
}

/* The reader's events decoded into a temporary file (the metadata complete before the replay). */
static int spool(as_source *s, as_err *err)
{
	as_spool *sp = xcalloc(1, sizeof *sp);
	if (as_spool_from_reader(sp, s->r, err)) {
		free(sp);
		return -1;
	}
	s->sp = sp;
	return 0;
}

/* The rest of the reader's events decoded into memory. */
static int decode(as_source *s, as_err *err)
{
	as_evbuf *b = xcalloc(1, sizeof *b);
	if (as_evbuf_from_reader(b, s->r, 0, err)) {
		as_evbuf_free(b);
		free(b);
		return -1;
	}
	s->b = b;
	return 0;
}

/*
 * The input is read once (standard input and FIFOs too: the reader spools them). A binary trace is
 * read in chunks, each record checked before it is replayed (binfmt.h says why it is not mapped),
 * unless the events are wanted whole (an offline policy's first pass, --segments' second pass): then
 * it is mapped in place, as --cache's file beside the trace is. Which settings were recorded decides
 * how ambiguous empty_cache() inferences resolve (and -c recorded needs them): a snapshot stores them
 * at its end, so it is decoded first, into a temporary file read back in chunks (spool.h: memory
 * stays flat however long the snapshot), or into memory where the events are wanted whole; other
 * traces stream.
 */
int as_source_open(as_source *s, const char *path, const as_source_opts *o, as_err *err)
{
	static const as_source_opts none = { 0 };
	if (!o)
		o = &none;
	const as_reader_opts *ro = o->ro;
	memset(s, 0, sizeof *s);
	s->owned = 1;
	if (o->flags & AS_SRC_SPOOL) {
		if (as_reader_open(&s->r, path, ro, err))
			return -1;
		if (o->no_binary && !strcmp(s->r->ops->name, "binary")) {
			as_fail(err, AS_EXIT_USAGE, "%s: %s", path, o->no_binary);
			goto fail;
		}
		if (spool(s, err))
			goto fail;
		return 0;
	}
	int mapped;
	as_evbuf *b;
	if (!(o->flags & (AS_SRC_WHOLE | AS_SRC_KEEP))) {
		as_binstream *bs = xcalloc(1, sizeof *bs);
		mapped = as_binfmt_stream_open(bs, path, err);
		if (mapped == 0)
			s->bs = bs;
		else
			free(bs);
	} else {
		b = xcalloc(1, sizeof *b);
		mapped = as_binfmt_map(b, path, err);
		if (mapped == 0)
			s->b = b;
		else {
			as_evbuf_free(b);
			free(b);
		}
	}
	if (mapped < 0)
		return -1;
	if (mapped == 0) {
		if (ro && ro->has_device && ro->device != 0) {
			as_fail(err, AS_EXIT_DATAERR, "%s: a binary trace holds one device (0), not device %d", path, ro->device);
			goto fail;
		}
		return 0;
	}
	if (o->flags & AS_SRC_CACHE) {
		b = xcalloc(1, sizeof *b);
		if (use_cache(path, b, err)) {
			as_evbuf_free(b);
			free(b);
			return -1;
		}
		s->b = b;
		return 0;
	}
	if (as_reader_open(&s->r, path, ro, err))
		return -1;
	int snapshot = !s->r->meta.has_settings && !strcmp(s->r->meta.format, "pytorch");
	if ((o->flags & AS_SRC_WHOLE) || (snapshot && (o->flags & AS_SRC_KEEP))) {
		if (decode(s, err))
			goto fail;
	} else if (snapshot && spool(s, err))
		goto fail;
	return 0;
fail:
	as_source_close(s);
	return -1;
}

const as_meta *as_source_meta(const as_source *s)
{
	return s->bs ? &s->bs->meta : s->b ? &s->b->meta : s->sp ? &s->sp->meta : &s->r->meta;
}

const char *as_source_name(const as_source *s, const char *path)
{
	return s->r ? s->r->in.path : path;
}

uint64_t as_source_recorded_ooms(const as_source *s)
{
	return s->sp ? s->sp->recorded_ooms : 0;
}

int as_source_check_rest(as_source *s, as_err *err)
{
	return s->bs ? as_binstream_check_rest(s->bs, err) : 0;
}

int as_source_rewind(as_source *s)
{
	if (!s->b)
		return -1;
	s->i = 0;
	return 0;
}

void as_source_close(as_source *s)
{
	if (!s->owned)
		return;
	as_reader_close(s->r);
	if (s->b) {
		as_evbuf_free((as_evbuf *)s->b);
		free((as_evbuf *)s->b);
	}
	if (s->sp) {
		as_spool_free(s->sp);
		free(s->sp);
	}
	if (s->bs) {
		as_binstream_close(s->bs);
		free(s->bs);
	}
	memset(s, 0, sizeof *s);
}
