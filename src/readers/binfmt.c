/* binfmt.c - allocsim's binary event format: writer, validated mapping, chunked and streaming readers.
 * The layout is in binfmt.h and doc/trace-format.md. Written by hand: it is allocsim's own format
 * (a fixed record array meant to be mapped in place), which no serialisation library describes. */
#include "readers/binfmt.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the binary event format is read in place: little-endian hosts only"
#endif

/* Header field offsets. */
enum {
	H_VERSION = 8, H_RECSIZE = 12, H_NREC = 16, H_NSLOTS = 24, H_LABELS = 32, H_SETTINGS = 40,
	H_DEVTOTAL = 48, H_CAPACITY = 56, H_UNMATCHED = 64, H_INFERRED = 72, H_FLAGS = 80, H_RES1 = 84,
	H_SRCSIZE = 88, H_SRCMTIME = 96, H_FORMAT = 104, H_SOURCE = 120, H_DEVICE = 184, H_RES2 = 248,
};
#define F_TRUNCATED 1u
#define MAX_STRINGS (1ull << 30) /* settings + labels: a bound for streamed input */

static uint64_t pad8(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

int as_binfmt_path(const char *path)
{
	size_t n = strlen(path), e = strlen(AS_BIN_EXT);
	return n > e && !strcmp(path + n - e, AS_BIN_EXT);
}

typedef as_binhdr bhdr;

static int berr(as_err *err, const char *path, uint64_t off, const char *what)
{
	return as_fail(err, AS_EXIT_DATAERR, "%s: byte offset %" PRIu64 ": %s", path, off, what);
}

/* A fixed-size string field must hold a NUL. */
static int field_str(const unsigned char *h, size_t at, size_t len, char *out, size_t outlen)
{
	if (!memchr(h + at, 0, len))
		return -1;
	snprintf(out, outlen, "%s", (const char *)(h + at));
	return 0;
}

/* Checks the fixed header and fills hd and the metadata (settings excepted). */
static int check_header(const unsigned char *h, const char *path, bhdr *hd, as_meta *m, as_evbuf *b, as_err *err)
{
	char msg[160];
	if (memcmp(h, AS_BIN_MAGIC, AS_BIN_MAGIC_LEN))
		return berr(err, path, 0, "not an allocsim binary trace (bad magic)");
	uint32_t v = get32(h + H_VERSION);
	if (v < 1 || v > AS_BIN_VERSION) {
		snprintf(msg, sizeof msg, "unsupported binary trace version %" PRIu32 " (this allocsim reads versions 1 to %d)", v,
			AS_BIN_VERSION);
		return berr(err, path, H_VERSION, msg);
	}
	hd->version = v;
	if (get32(h + H_RECSIZE) != sizeof(as_rec)) {
		snprintf(msg, sizeof msg, "record size %" PRIu32 ", expected %zu", get32(h + H_RECSIZE), sizeof(as_rec));
		return berr(err, path, H_RECSIZE, msg);
	}
	hd->nrec = get64(h + H_NREC);
	hd->nslots = get64(h + H_NSLOTS);
	hd->nlabels = get64(h + H_LABELS);
	hd->nsettings = get64(h + H_SETTINGS);
	if (hd->nslots > hd->nrec || hd->nslots > UINT32_MAX)
		return berr(err, path, H_NSLOTS, "more slots than records");
	if (hd->nlabels > MAX_STRINGS || hd->nsettings > MAX_STRINGS)
		return berr(err, path, H_LABELS, "settings or labels larger than 1 GiB");
	if (hd->nrec > (UINT64_MAX - (AS_BIN_HEADER + 2 * MAX_STRINGS + 8)) / sizeof(as_rec))
		return berr(err, path, H_NREC, "record count out of range");
	hd->records_at = AS_BIN_HEADER + pad8(hd->nsettings + hd->nlabels);
	uint32_t flags = get32(h + H_FLAGS);
	if (flags & ~F_TRUNCATED)
		return berr(err, path, H_FLAGS, "unknown flags");
	if (get32(h + H_RES1))
		return berr(err, path, H_RES1, "reserved field is not 0");
	for (size_t i = H_RES2; i < AS_BIN_HEADER; i++)
		if (h[i])
			return berr(err, path, i, "reserved header bytes are not 0");
	memset(m, 0, sizeof(*m));
	if (field_str(h, H_FORMAT, 16, m->format, sizeof m->format))
		return berr(err, path, H_FORMAT, "format name is not NUL-terminated");
	if (field_str(h, H_SOURCE, 64, m->source, sizeof m->source))
		return berr(err, path, H_SOURCE, "source is not NUL-terminated");
	if (field_str(h, H_DEVICE, 64, m->device, sizeof m->device))
		return berr(err, path, H_DEVICE, "device is not NUL-terminated");
	m->device_total = get64(h + H_DEVTOTAL);
	m->capacity = get64(h + H_CAPACITY);
	m->unmatched_frees = get64(h + H_UNMATCHED);
	m->inferred_empty_cache = get64(h + H_INFERRED);
	m->history_truncated = (flags & F_TRUNCATED) != 0;
	if (b) {
		b->src_size = get64(h + H_SRCSIZE);
		b->src_mtime_ns = (int64_t)get64(h + H_SRCMTIME);
	}
	return 0;
}

/* Checks the settings and label strings (s: nsettings bytes, then nlabels). */
static int check_strings(const unsigned char *s, const bhdr *hd, const char *path, as_meta *m, as_err *err)
{
	if (hd->nsettings) {
		if (s[hd->nsettings - 1] || memchr(s, 0, hd->nsettings - 1))
			return berr(err, path, AS_BIN_HEADER, "recorded settings are not one NUL-terminated string");
		m->has_settings = 1;
		m->settings = xstrdup((const char *)s);
	}
	if (hd->nlabels && s[hd->nsettings + hd->nlabels - 1])
		return berr(err, path, AS_BIN_HEADER + hd->nsettings + hd->nlabels - 1, "phase labels do not end with a NUL");
	for (uint64_t i = hd->nsettings + hd->nlabels; i < pad8(hd->nsettings + hd->nlabels); i++)
		if (s[i])
			return berr(err, path, AS_BIN_HEADER + i, "padding before the records is not 0");
	return 0;
}

/* Checks one record's own fields (slot consistency is checked by the caller). */
static inline const char *check_rec(const as_rec *x, const bhdr *hd, const char *labels)
{
	if (x->type >= EV__COUNT)
		return "unknown event type";
	if (x->pool && (hd->version < 2 || (x->type != EV_ALLOC && x->type != EV_POOL_RELEASE) || !as_pool_valid(x->pool)))
		return hd->version < 2 ? "pool set in a version 1 file" : "pool not allowed for its event type, or invalid";
	if (x->type == EV_POOL_RELEASE && (hd->version < 2 || !AS_POOL_INDEX(x->pool)))
		return "pool_release without a private pool";
	uint8_t allowed = x->type == EV_ALLOC ? EVF_OOM : x->type == EV_EMPTY_CACHE ? EVF_MAYBE : x->type == EV_FREE ? EVF_STREAM
		: x->type == EV_POOL_RELEASE ? EVF_POOL_EMPTY : 0;
	if (x->flags & ~allowed)
		return "flags not allowed for its event type";
	if (x->type <= EV_FREE) {
		if (x->slot >= hd->nslots)
			return "slot beyond the header's slot count";
	} else if (x->slot) {
		return "slot set on an event without one";
	}
	if (x->type == EV_ALLOC && (x->size == 0 || x->size >= AS_MAX_REQUEST))
		return "allocation size out of range (must be 1 .. 2^60-1)";
	if (x->time_us < -1)
		return "negative time";
	if (x->type == EV_PHASE && (x->addr >= hd->nlabels || (x->addr && labels[x->addr - 1])))
		return "phase label offset is not the start of a label";
	return NULL;
}

/* Slot states while checking a whole file: 0 free, 1 allocated, 2 free requested. */
static inline const char *check_slot(unsigned char *st, const as_rec *x)
{
	switch (x->type) {
	case EV_ALLOC:
		if (st[x->slot])
			return "allocation into a slot that is live";
		st[x->slot] = 1;
		break;
	case EV_FREE_REQ:
		if (st[x->slot] != 1)
			return st[x->slot] ? "free of a slot requested twice" : "free request of a slot that is not live";
		st[x->slot] = 2;
		break;
	case EV_FREE:
		if (!st[x->slot])
			return "free of a slot that is not live";
		st[x->slot] = 0;
		break;
	default:
		break;
	}
	return NULL;
}

/* Checks record i (both kinds of check); its message names the record and its byte offset. */
static inline int check_one(const as_rec *x, uint64_t i, unsigned char *st, const bhdr *hd, const char *labels,
	const char *path, as_err *err)
{
	const char *why = check_rec(x, hd, labels);
	if (!why)
		why = check_slot(st, x);
	if (!why)
		return 0;
	char msg[200];
	snprintf(msg, sizeof msg, "record %" PRIu64 ": %s", i, why);
	return berr(err, path, hd->records_at + i * sizeof(as_rec), msg);
}

static int check_records(const as_rec *recs, const bhdr *hd, const char *labels, const char *path, as_err *err)
{
	unsigned char *st = xcalloc(hd->nslots ? hd->nslots : 1, 1);
	int rc = 0;
	for (uint64_t i = 0; i < hd->nrec && !rc; i++)
		rc = check_one(&recs[i], i, st, hd, labels, path, err);
	free(st);
	return rc;
}

/* A header whose file is not the size it describes. */
static int size_err(const bhdr *hd, uint64_t size, const char *path, as_err *err)
{
	uint64_t want = hd->records_at + hd->nrec * sizeof(as_rec);
	char msg[200];
	snprintf(msg, sizeof msg, "%s binary trace: the header describes %" PRIu64 " bytes, the file has %" PRIu64,
		want > size ? "truncated" : "overlong", want, size);
	return berr(err, path, want > size ? size : want, msg);
}

int as_binfmt_map(as_evbuf *b, const char *path, as_err *err)
{
	struct stat sb;
	if (!strcmp(path, "-") || stat(path, &sb) || !S_ISREG(sb.st_mode))
		return 1; /* not a regular file: never opened here (a FIFO could be opened only once) */
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return as_fail(err, AS_EXIT_NOINPUT, "cannot open '%s': %s", path, strerror(errno));
	unsigned char magic[AS_BIN_MAGIC_LEN];
	if (pread(fd, magic, sizeof magic, 0) != (ssize_t)sizeof magic || memcmp(magic, AS_BIN_MAGIC, sizeof magic) ||
	    fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		close(fd);
		return 1; /* not ours: the readers decide (and report) */
	}
	if ((uint64_t)sb.st_size < AS_BIN_HEADER) {
		close(fd);
		char msg[120];
		snprintf(msg, sizeof msg, "truncated binary trace: %lld bytes, shorter than its %d-byte header", (long long)sb.st_size, AS_BIN_HEADER);
		return berr(err, path, (uint64_t)sb.st_size, msg);
	}
	/* Every record is validated right away: populate the mapping in one call rather than
	 * fault each page in (Linux). */
#ifdef MAP_POPULATE
	int mflags = MAP_PRIVATE | MAP_POPULATE;
#else
	int mflags = MAP_PRIVATE;
#endif
	void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, mflags, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return as_fail(err, AS_EXIT_NOINPUT, "cannot map '%s': %s", path, strerror(errno));
	as_evbuf nb;
	memset(&nb, 0, sizeof nb);
	nb.map = map;
	nb.maplen = (size_t)sb.st_size;
	const unsigned char *h = map;
	bhdr hd;
	if (check_header(h, path, &hd, &nb.meta, &nb, err))
		goto bad;
	if (hd.records_at + hd.nrec * sizeof(as_rec) != (uint64_t)sb.st_size) {
		size_err(&hd, (uint64_t)sb.st_size, path, err);
		goto bad;
	}
	if (check_strings(h + AS_BIN_HEADER, &hd, path, &nb.meta, err))
		goto bad;
	nb.labels = (const char *)h + AS_BIN_HEADER + hd.nsettings;
	nb.nlabels = hd.nlabels;
	nb.recs = (const as_rec *)(const void *)(h + hd.records_at);
	nb.n = hd.nrec;
	nb.nslots = (uint32_t)hd.nslots;
	if (check_records(nb.recs, &hd, nb.labels, path, err))
		goto bad;
	nb.path = xstrdup(path);
	*b = nb;
	return 0;
bad: /* (what as_evbuf_free would release of it: the mapping and the metadata; evbuf.c calls us) */
	munmap(map, nb.maplen);
	as_meta_free(&nb.meta);
	return -1;
}

int as_binfmt_cache_ok(const as_evbuf *b, const struct stat *src)
{
	return b->src_size == (uint64_t)src->st_size &&
		b->src_mtime_ns == (int64_t)src->st_mtim.tv_sec * 1000000000 + src->st_mtim.tv_nsec;
}

static void put_str(unsigned char *h, size_t at, size_t len, const char *s)
{
	size_t n = strlen(s);
	memcpy(h + at, s, n < len ? n : len - 1);
}

int as_binfmt_write(const as_evbuf *b, const char *path, const struct stat *src, as_err *err)
{
	const as_meta *m = &b->meta;
	bhdr hd = { b->n, b->nslots, b->nlabels, m->has_settings ? strlen(m->settings ? m->settings : "") + 1 : 0, 0, 1 };
	/* version 2 only where a record names a pool: a trace without pools keeps version 1's bytes */
	for (size_t i = 0; i < b->n && hd.version == 1; i++)
		if (b->recs[i].pool || b->recs[i].type == EV_POOL_RELEASE)
			hd.version = 2;
	hd.records_at = AS_BIN_HEADER + pad8(hd.nsettings + hd.nlabels);
	/* Validated when written: the same checks as when read. */
	if (check_records(b->recs, &hd, b->labels, path, err))
		return as_fail(err, AS_EXIT_SOFTWARE, "internal: refusing to write an invalid binary trace: %s", err->msg);
	unsigned char h[AS_BIN_HEADER];
	memset(h, 0, sizeof h);
	memcpy(h, AS_BIN_MAGIC, AS_BIN_MAGIC_LEN);
	uint32_t v32 = hd.version;
	memcpy(h + H_VERSION, &v32, 4);
	v32 = sizeof(as_rec);
	memcpy(h + H_RECSIZE, &v32, 4);
	uint64_t v[] = { hd.nrec, hd.nslots, hd.nlabels, hd.nsettings, m->device_total, m->capacity, m->unmatched_frees,
		m->inferred_empty_cache };
	memcpy(h + H_NREC, v, sizeof v);
	v32 = m->history_truncated ? F_TRUNCATED : 0;
	memcpy(h + H_FLAGS, &v32, 4);
	if (src) {
		uint64_t sz = (uint64_t)src->st_size;
		int64_t mt = (int64_t)src->st_mtim.tv_sec * 1000000000 + src->st_mtim.tv_nsec;
		memcpy(h + H_SRCSIZE, &sz, 8);
		memcpy(h + H_SRCMTIME, &mt, 8);
	}
	put_str(h, H_FORMAT, 16, m->format);
	put_str(h, H_SOURCE, 64, m->source);
	put_str(h, H_DEVICE, 64, m->device);
	as_outfile of;
	if (as_outfile_open(&of, path, err))
		return -1;
	static const unsigned char zeros[8];
	fwrite(h, 1, sizeof h, of.fp);
	if (hd.nsettings)
		fwrite(m->settings ? m->settings : "", 1, hd.nsettings, of.fp);
	if (hd.nlabels)
		fwrite(b->labels, 1, hd.nlabels, of.fp);
	fwrite(zeros, 1, pad8(hd.nsettings + hd.nlabels) - (hd.nsettings + hd.nlabels), of.fp);
	if (b->n)
		fwrite(b->recs, sizeof(as_rec), b->n, of.fp);
	return as_outfile_close(&of, 1, err);
}

/* ---- chunked reader (replay of a regular file): pread into a small buffer ---- */

/* Records read at a time: 28 KiB, which stays in the first-level caches (and costs a handful of
 * page faults once). */
#define CHUNK_RECS 512

/* Reads exactly n bytes at off; a short read (the file shrank since it was checked) is an error. */
static int pread_all(int fd, void *buf, size_t n, uint64_t off, const char *path, as_err *err)
{
	while (n) {
		ssize_t got = pread(fd, buf, n, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return as_fail(err, AS_EXIT_NOINPUT, "%s: read error near byte %" PRIu64 ": %s", path, off, strerror(errno));
		if (!got)
			return berr(err, path, off, "truncated binary trace (the file shrank while it was read)");
		buf = (char *)buf + got;
		n -= (size_t)got;
		off += (uint64_t)got;
	}
	return 0;
}

int as_binfmt_stream_open(as_binstream *s, const char *path, as_err *err)
{
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	struct stat sb;
	if (!strcmp(path, "-") || stat(path, &sb) || !S_ISREG(sb.st_mode))
		return 1; /* as as_binfmt_map: a FIFO could be opened only once */
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return as_fail(err, AS_EXIT_NOINPUT, "cannot open '%s': %s", path, strerror(errno));
	unsigned char h[AS_BIN_HEADER];
	if (pread(fd, h, AS_BIN_MAGIC_LEN, 0) != AS_BIN_MAGIC_LEN || memcmp(h, AS_BIN_MAGIC, AS_BIN_MAGIC_LEN) ||
	    fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		close(fd);
		return 1; /* not ours: the readers decide (and report) */
	}
	s->fd = fd;
	s->path = xstrdup(path);
	uint64_t size = (uint64_t)sb.st_size;
	if (size < AS_BIN_HEADER) {
		char msg[120];
		snprintf(msg, sizeof msg, "truncated binary trace: %" PRIu64 " bytes, shorter than its %d-byte header", size, AS_BIN_HEADER);
		berr(err, path, size, msg);
		goto bad;
	}
	if (pread_all(fd, h, sizeof h, 0, path, err) || check_header(h, path, &s->hd, &s->meta, NULL, err))
		goto bad;
	if (s->hd.records_at + s->hd.nrec * sizeof(as_rec) != size) {
		size_err(&s->hd, size, path, err);
		goto bad;
	}
	/* the file's size is checked: what follows is bounded by it (the strings are read once and
	 * kept: the labels are read in place, each NUL-terminated as check_strings makes sure) */
	size_t nstr = (size_t)(s->hd.records_at - AS_BIN_HEADER);
	s->strings = xmalloc(nstr ? nstr : 1);
	if (pread_all(fd, s->strings, nstr, AS_BIN_HEADER, path, err) || check_strings(s->strings, &s->hd, path, &s->meta, err))
		goto bad;
	s->labels = (const char *)s->strings + s->hd.nsettings;
	s->st = xcalloc(s->hd.nslots ? s->hd.nslots : 1, 1);
	s->chunk = xmalloc(CHUNK_RECS * sizeof(as_rec));
	return 0;
bad:
	as_binstream_close(s);
	return -1;
}

static int refill(as_binstream *s, as_err *err)
{
	uint64_t left = s->hd.nrec - s->i;
	size_t n = left < CHUNK_RECS ? (size_t)left : CHUNK_RECS;
	if (pread_all(s->fd, s->chunk, n * sizeof(as_rec), s->hd.records_at + s->i * sizeof(as_rec), s->path, err))
		return -1;
	s->have = n;
	s->at = 0;
	return 0;
}

/* The next record, checked (NULL: at the end, *rc 0; or an error, *rc -1). */
static inline const as_rec *take(as_binstream *s, int *rc, as_err *err)
{
	*rc = 0;
	if (s->at == s->have && (s->i == s->hd.nrec || (*rc = refill(s, err))))
		return NULL;
	const as_rec *x = &s->chunk[s->at];
	if ((*rc = check_one(x, s->i, s->st, &s->hd, s->labels, s->path, err)))
		return NULL;
	s->at++;
	s->i++;
	return x;
}

int as_binstream_next(as_binstream *s, as_event *ev, as_err *err)
{
	int rc;
	const as_rec *x = take(s, &rc, err);
	if (!x)
		return rc;
	as_rec_event(x, s->labels, (uint64_t)x->slot + 1, ev);
	return 1;
}

int as_binstream_check_rest(as_binstream *s, as_err *err)
{
	int rc;
	while (take(s, &rc, err))
		;
	return rc;
}

void as_binstream_close(as_binstream *s)
{
	if (s->fd >= 0)
		close(s->fd);
	as_meta_free(&s->meta);
	free(s->path);
	free(s->strings);
	free(s->st);
	free(s->chunk);
	memset(s, 0, sizeof(*s));
	s->fd = -1;
}

/* ---- streaming reader (standard input, info, validate): record by record ---- */

typedef struct bin_state {
	bhdr hd;
	char *labels;
	uint64_t i;
} bin_state;

/* Reads exactly n bytes at the input's position into out (NULL: into the input buffer only). */
static int read_exact(as_reader *r, void *out, size_t n, as_err *err)
{
	while (n) {
		size_t want = n < 65536 ? n : 65536;
		size_t got = as_input_fill(&r->in, want, err);
		if (r->in.error)
			return -1;
		if (!got) {
			char msg[120];
			snprintf(msg, sizeof msg, "truncated binary trace (%zu more bytes expected)", n);
			return berr(err, r->in.path, as_input_tell(&r->in), msg);
		}
		size_t take = got < n ? got : n;
		if (out) {
			memcpy(out, r->in.buf + r->in.pos, take);
			out = (char *)out + take;
		}
		r->in.pos += take;
		n -= take;
	}
	return 0;
}

static int bin_next(as_reader *r, as_event *ev, as_err *err)
{
	bin_state *s = r->priv;
	if (s->i == s->hd.nrec) {
		if (as_input_fill(&r->in, 1, err))
			return berr(err, r->in.path, as_input_tell(&r->in), "data after the last record");
		return r->in.error ? -1 : 0;
	}
	uint64_t at = as_input_tell(&r->in);
	as_rec x;
	if (read_exact(r, &x, sizeof x, err))
		return -1;
	const char *why = check_rec(&x, &s->hd, s->labels);
	if (why) {
		char msg[200];
		snprintf(msg, sizeof msg, "record %" PRIu64 ": %s", s->i, why);
		return berr(err, r->in.path, at, msg);
	}
	as_evbuf b = { .recs = &x, .labels = s->labels };
	as_evbuf_event(&b, 0, ev);
	ev->pos = at;
	s->i++;
	return 1;
}

static void bin_close(as_reader *r)
{
	bin_state *s = r->priv;
	if (s)
		free(s->labels);
	free(s);
	r->priv = NULL;
}

static const struct as_reader_ops bin_ops = { "binary", bin_next, bin_close };

int as_binfmt_open(as_reader *r, const as_reader_opts *o, as_err *err)
{
	(void)o;
	bin_state *s = xcalloc(1, sizeof(*s));
	r->ops = &bin_ops;
	r->priv = s;
	r->pos_is_line = 0;
	unsigned char h[AS_BIN_HEADER];
	if (read_exact(r, h, sizeof h, err) || check_header(h, r->in.path, &s->hd, &r->meta, NULL, err))
		return -1;
	/* The strings are read in growing steps: a header cannot make us allocate more than the input holds. */
	uint64_t n = pad8(s->hd.nsettings + s->hd.nlabels), have = 0, cap = 0;
	unsigned char *str = NULL;
	while (have < n) {
		uint64_t step = n - have < (1u << 20) ? n - have : (1u << 20);
		if (have + step > cap) {
			cap = cap * 2 > have + step ? cap * 2 : have + step;
			str = xrealloc(str, cap);
		}
		if (read_exact(r, str + have, step, err)) {
			free(str);
			return -1;
		}
		have += step;
	}
	if (check_strings(str, &s->hd, r->in.path, &r->meta, err)) {
		free(str);
		return -1;
	}
	s->labels = xmalloc(s->hd.nlabels + 1);
	if (s->hd.nlabels)
		memcpy(s->labels, str + s->hd.nsettings, s->hd.nlabels);
	free(str);
	return 0;
}
