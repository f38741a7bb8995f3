/* input.c - buffered, gzip-transparent input and atomic output files. */
#include "trace.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AS_INBUF (1u << 16)

const char *const as_ev_names[EV__COUNT] = {
	"alloc", "free_requested", "free", "empty_cache", "phase",
	"segment_alloc", "segment_free", "segment_map", "segment_unmap",
};

int as_input_open_fd(as_input *in, int fd, const char *name, as_err *err)
{
	memset(in, 0, sizeof(*in));
	in->gz = gzdopen(fd, "rb");
	if (!in->gz) {
		close(fd);
		return as_fail(err, AS_EXIT_NOINPUT, "cannot read '%s'", name);
	}
	gzbuffer(in->gz, 1u << 17);
	in->path = xstrdup(name);
	in->buf = xmalloc(AS_INBUF * 2);
	return 0;
}

int as_input_open(as_input *in, const char *path, as_err *err)
{
	int fd = !strcmp(path, "-") ? dup(0) : open(path, O_RDONLY);
	if (fd < 0)
		return as_fail(err, AS_EXIT_NOINPUT, "cannot open '%s': %s", path, strerror(errno));
	return as_input_open_fd(in, fd, !strcmp(path, "-") ? "<stdin>" : path, err);
}

void as_input_close(as_input *in)
{
	if (in->gz)
		gzclose(in->gz);
	free(in->buf);
	free(in->path);
	memset(in, 0, sizeof(*in));
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
	while (in->len < n && !in->eof) {
		int got = gzread(in->gz, in->buf + in->len, (unsigned)(AS_INBUF * 2 - in->len));
		if (got < 0) {
			int zerr;
			const char *m = gzerror(in->gz, &zerr);
			in->error = 1;
			in->eof = 1;
			as_fail(err, AS_EXIT_DATAERR, "%s: corrupt compressed data near byte %llu: %s", in->path,
				(unsigned long long)(in->offset + in->len), m);
			break;
		}
		if (got == 0) {
			int zerr;
			gzerror(in->gz, &zerr);
			/* zlib reports a truncated gzip stream as Z_BUF_ERROR at end of file. */
			if (zerr == Z_BUF_ERROR) {
				in->error = 1;
				as_fail(err, AS_EXIT_DATAERR, "%s: truncated gzip data (ends after %llu uncompressed bytes)",
					in->path, (unsigned long long)(in->offset + in->len));
			}
			in->eof = 1;
		}
		in->len += (size_t)got;
	}
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
