/* input.c - buffered, gzip-transparent input and atomic output files. */
#include "config.h"
#include "readers/trace.h"
#ifdef HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AS_INBUF (1u << 16)

const char *const as_ev_names[EV__COUNT] = {
	"alloc", "free_requested", "free", "empty_cache", "phase",
	"segment_alloc", "segment_free", "segment_map", "segment_unmap", "pool_release",
};

#define AS_RAWBUF (1u << 16) /* compressed bytes read at a time (the pages touched: small files stay small) */

/* Copies a non-seekable input to an unlinked temporary file (in $TMPDIR, else /tmp): the reader
 * never needs the input twice, but -c recorded, validate and convert read a snapshot's settings,
 * stored at its end, before replaying it, and --segments replays twice. */
static int spool(int fd, const char *name, as_err *err)
{
	const char *dir;
	int out = as_tmpfile("allocsim-input", &dir);
	if (out < 0) {
		int e = errno;
		close(fd);
		return as_fail(err, AS_EXIT_IOERR, "cannot copy '%s' to a temporary file in %s: %s", name, dir, strerror(e));
	}
	unsigned char *b = xmalloc(AS_RAWBUF);
	int rc = 0;
	for (;;) {
		ssize_t got = read(fd, b, AS_RAWBUF);
		if (got < 0 && errno == EINTR && cli_interrupted) { /* SIGINT/SIGTERM cut a blocked read short */
			rc = as_fail(err, AS_EXIT_INTERRUPTED, "interrupted; nothing was written");
			break;
		}
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			rc = as_fail(err, AS_EXIT_NOINPUT, "cannot read '%s': %s", name, strerror(errno));
			break;
		}
		if (got == 0)
			break;
		if (as_write_all(out, b, (size_t)got)) {
			rc = as_fail(err, AS_EXIT_IOERR, "cannot copy '%s' to a temporary file: %s", name, strerror(errno));
			break;
		}
	}
	free(b);
	close(fd);
	if (rc) {
		close(out);
		return -1;
	}
	return out;
}

static int input_start(as_input *in, int fd, const char *name, as_err *err)
{
	memset(in, 0, sizeof(*in));
	in->fd = fd;
	in->path = xstrdup(name);
	in->buf = xmalloc(AS_INBUF * 2);
	in->raw = xmalloc(AS_RAWBUF);
	unsigned char magic[2];
	ssize_t got = pread(fd, magic, 2, 0);
	if (got < 0) {
		int e = errno;
		as_input_close(in);
		return as_fail(err, AS_EXIT_NOINPUT, "cannot read '%s': %s", name, strerror(e));
	}
	if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
		in->gzip = 1;
		if (inflateInit2(&in->zs, 16 + MAX_WBITS) != Z_OK) {
			in->gzip = 0;
			as_input_close(in);
			return as_fail(err, AS_EXIT_SOFTWARE, "zlib: cannot start inflating '%s'", name);
		}
#ifdef HAVE_ISAL
		struct inflate_state *s = xmalloc(sizeof(*s));
		isal_inflate_init(s);
		s->crc_flag = ISAL_GZIP;
		in->isal = s;
#endif
	}
	return 0;
}

int as_input_open_fd(as_input *in, int fd, const char *name, as_err *err)
{
	struct stat st;
	if (fstat(fd, &st)) {
		int e = errno;
		close(fd);
		memset(in, 0, sizeof(*in));
		return as_fail(err, AS_EXIT_NOINPUT, "cannot read '%s': %s", name, strerror(e));
	}
	if (!S_ISREG(st.st_mode) && (fd = spool(fd, name, err)) < 0) {
		memset(in, 0, sizeof(*in));
		return -1;
	}
	return input_start(in, fd, name, err);
}

int as_input_open(as_input *in, const char *path, as_err *err)
{
	int fd = !strcmp(path, "-") ? dup(0) : open(path, O_RDONLY);
	if (fd < 0) {
		memset(in, 0, sizeof(*in));
		return as_fail(err, AS_EXIT_NOINPUT, "cannot open '%s': %s", path, strerror(errno));
	}
	return as_input_open_fd(in, fd, !strcmp(path, "-") ? "<stdin>" : path, err);
}

void as_input_close(as_input *in)
{
	if (in->gzip)
		inflateEnd(&in->zs);
	free(in->isal);
	if (in->path)
		close(in->fd);
	free(in->raw);
	free(in->buf);
	free(in->path);
	memset(in, 0, sizeof(*in));
}

/* Reads more file bytes into the inflater; returns the count, 0 at end of file, -1 on error. */
static ssize_t raw_more(as_input *in, as_err *err)
{
	ssize_t got;
	do
		got = pread(in->fd, in->raw, AS_RAWBUF, (off_t)in->raw_off);
	while (got < 0 && errno == EINTR);
	if (got < 0) {
		in->error = in->eof = 1;
		as_fail(err, AS_EXIT_NOINPUT, "%s: read error near byte %llu: %s", in->path,
			(unsigned long long)in->raw_off, strerror(errno));
		return -1;
	}
	in->raw_off += (uint64_t)got;
	in->zs.next_in = in->raw;
	in->zs.avail_in = (uInt)got;
	return got;
}

static size_t produce_zlib(as_input *in, unsigned char *dst, size_t room, as_err *err);

#ifdef HAVE_ISAL
/*
 * ISA-L's inflater (igzip: 3x zlib's speed here) reads a gzip'd input of one member. Whatever
 * else it meets - a second member, bytes after the member, damaged or truncated data, a read
 * error - hands the input over to zlib, which inflates it again from its start, passes over what
 * was already delivered and goes on: so every input reads, and every error is reported, exactly
 * as with zlib alone (a damaged file costs a second pass, up to the damage).
 */
static size_t produce_isal(as_input *in, unsigned char *dst, size_t room)
{
	struct inflate_state *s = in->isal;
	s->next_out = dst;
	s->avail_out = (uint32_t)room;
	while (s->avail_out == room) {
		if (s->block_state == ISAL_BLOCK_FINISH) {
			unsigned char b;
			if (!s->avail_in && !s->read_in_length && pread(in->fd, &b, 1, (off_t)in->raw_off) == 0) {
				in->eof = 1;
				return 0;
			}
			return SIZE_MAX; /* more after the member: zlib's rules */
		}
		if (!s->avail_in) {
			ssize_t got;
			do
				got = pread(in->fd, in->raw, AS_RAWBUF, (off_t)in->raw_off);
			while (got < 0 && errno == EINTR);
			if (got <= 0)
				return SIZE_MAX; /* a read error, or truncated: zlib says which */
			in->raw_off += (uint64_t)got;
			s->next_in = in->raw;
			s->avail_in = (uint32_t)got;
		}
		int rc = isal_inflate(s);
		if (rc != ISAL_DECOMP_OK && rc != ISAL_END_INPUT && rc != ISAL_OUT_OVERFLOW)
			return SIZE_MAX;
	}
	return room - s->avail_out;
}

/* Hands the input over to zlib: inflates it from its start again, up to what was delivered. */
static int isal_to_zlib(as_input *in, as_err *err)
{
	uint64_t done = in->offset + in->len;
	free(in->isal);
	in->isal = NULL;
	inflateReset(&in->zs);
	in->zs.avail_in = 0;
	in->zdone = 0;
	in->raw_off = 0;
	unsigned char *scratch = xmalloc(AS_INBUF);
	int rc = 0;
	while (done && !in->eof) {
		size_t got = produce_zlib(in, scratch, done < AS_INBUF ? (size_t)done : AS_INBUF, err);
		if (!got) {
			rc = -1; /* zlib refuses what igzip delivered (its message is set), or ends before */
			break;
		}
		done -= got;
	}
	free(scratch);
	return rc;
}
#endif

/* Appends up to room uncompressed bytes at dst; returns the count (0 at the end or on error). */
static size_t produce(as_input *in, unsigned char *dst, size_t room, as_err *err)
{
#ifdef HAVE_ISAL
	if (in->isal) {
		size_t got = produce_isal(in, dst, room);
		if (got != SIZE_MAX)
			return got;
		if (isal_to_zlib(in, err)) {
			if (!in->error) {
				in->error = in->eof = 1;
				as_fail(err, AS_EXIT_DATAERR, "%s: corrupt compressed data near byte %llu", in->path,
					(unsigned long long)(in->offset + in->len));
			}
			return 0;
		}
	}
#endif
	return produce_zlib(in, dst, room, err);
}

/* ... through zlib. */
static size_t produce_zlib(as_input *in, unsigned char *dst, size_t room, as_err *err)
{
	if (!in->gzip) {
		ssize_t got;
		do
			got = pread(in->fd, dst, room, (off_t)in->raw_off);
		while (got < 0 && errno == EINTR);
		if (got < 0) {
			in->error = in->eof = 1;
			as_fail(err, AS_EXIT_NOINPUT, "%s: read error near byte %llu: %s", in->path,
				(unsigned long long)in->raw_off, strerror(errno));
			return 0;
		}
		in->raw_off += (uint64_t)got;
		if (!got)
			in->eof = 1;
		return (size_t)got;
	}
	in->zs.next_out = dst;
	in->zs.avail_out = (uInt)room;
	while (in->zs.avail_out == room) {
		if (in->zdone) {
			/* After a member: another gzip member, or the end (trailing bytes that are not a
			 * gzip header are ignored, as gzread does). */
			if (in->zs.avail_in < 2) {
				unsigned char keep = in->zs.avail_in ? in->zs.next_in[0] : 0;
				size_t had = in->zs.avail_in;
				if (had)
					in->raw[0] = keep;
				ssize_t got;
				do
					got = pread(in->fd, in->raw + had, AS_RAWBUF - had, (off_t)in->raw_off);
				while (got < 0 && errno == EINTR);
				if (got < 0) {
					in->error = in->eof = 1;
					as_fail(err, AS_EXIT_NOINPUT, "%s: read error: %s", in->path, strerror(errno));
					return 0;
				}
				in->raw_off += (uint64_t)got;
				in->zs.next_in = in->raw;
				in->zs.avail_in = (uInt)(had + (size_t)got);
			}
			if (in->zs.avail_in < 2 || in->zs.next_in[0] != 0x1f || in->zs.next_in[1] != 0x8b) {
				in->eof = 1;
				return 0;
			}
			inflateReset(&in->zs);
			in->zdone = 0;
		}
		if (!in->zs.avail_in) {
			ssize_t got = raw_more(in, err);
			if (got < 0)
				return 0;
			if (!got) {
				in->error = in->eof = 1;
				as_fail(err, AS_EXIT_DATAERR, "%s: truncated gzip data (ends after %llu uncompressed bytes)",
					in->path, (unsigned long long)(in->offset + in->len + (room - in->zs.avail_out)));
				return 0;
			}
		}
		int zr = inflate(&in->zs, Z_NO_FLUSH);
		if (zr == Z_STREAM_END) {
			in->zdone = 1;
		} else if (zr != Z_OK && !(zr == Z_BUF_ERROR && !in->zs.avail_in)) {
			in->error = in->eof = 1;
			as_fail(err, AS_EXIT_DATAERR, "%s: corrupt compressed data near byte %llu: %s", in->path,
				(unsigned long long)(in->offset + in->len + (room - in->zs.avail_out)),
				in->zs.msg ? in->zs.msg : zr == Z_MEM_ERROR ? "out of memory" : "invalid data");
			return 0;
		}
	}
	return room - in->zs.avail_out;
}

size_t as_input_fill(as_input *in, size_t n, as_err *err)
{
	if (in->len - in->pos >= n || in->eof)
		return in->len - in->pos;
	if (n > AS_INBUF)
		n = AS_INBUF;
	memmove(in->buf, in->buf + in->pos, in->len - in->pos);
	in->offset += in->pos;
	in->len -= in->pos;
	in->pos = 0;
	while (in->len < n && !in->eof)
		in->len += produce(in, in->buf + in->len, AS_INBUF * 2 - in->len, err);
	return in->len - in->pos;
}

int as_input_line(as_input *in, char **line, size_t *cap, as_err *err)
{
	size_t n = 0;
	for (;;) {
		if (in->pos >= in->len) {
			as_input_fill(in, 1, err);
			if (in->error)
				return -1;
			if (in->pos >= in->len) {
				if (!n)
					return 0;
				break;
			}
		}
		unsigned char *s = in->buf + in->pos;
		size_t avail = in->len - in->pos;
		unsigned char *nl = memchr(s, '\n', avail);
		size_t take = nl ? (size_t)(nl - s) : avail;
		if (n + take + 1 > *cap) {
			*cap = (n + take + 1) * 2;
			*line = xrealloc(*line, *cap);
		}
		if (memchr(s, 0, take))
			return as_fail(err, AS_EXIT_DATAERR, "%s: byte offset %llu: NUL byte in a text trace (binary data?)",
				in->path, (unsigned long long)as_input_tell(in));
		memcpy(*line + n, s, take);
		n += take;
		in->pos += take + (nl ? 1 : 0);
		if (nl)
			break;
		if (n > (1u << 20))
			return as_fail(err, AS_EXIT_DATAERR, "%s: byte offset %llu: line longer than 1 MiB",
				in->path, (unsigned long long)as_input_tell(in));
	}
	if (n && (*line)[n - 1] == '\r')
		n--;
	(*line)[n] = 0;
	return 1;
}
