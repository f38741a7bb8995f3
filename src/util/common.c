/* common.c - error objects, checked allocation, size parsing. */
#include "util/common.h"
#include <pthread.h>
#include <errno.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <strings.h>

const char *as_progname = "allocsim";

volatile sig_atomic_t cli_interrupted;

int as_check_interrupted(as_err *err)
{
	if (!cli_interrupted)
		return 0;
	as_err_clear(err);
	return as_fail(err, AS_EXIT_INTERRUPTED, "interrupted; nothing was written");
}

int as_fail(as_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	if (!err)
		return -1;
	/* Keep the first error: it names the root cause. */
	if (err->code)
		return -1;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -1;
}

void as_err_clear(as_err *err)
{
	err->code = 0;
	err->msg[0] = 0;
}

/* Edit distance with transpositions (optimal string alignment), on names of at most 63 bytes;
 * written here because no library the build uses (libc, libbsd, GSL) has one. */
static size_t edits(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b), d[64][64];
	if (n > 63 || m > 63)
		return SIZE_MAX;
	for (size_t i = 0; i <= n; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= m; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= n; i++)
		for (size_t j = 1; j <= m; j++) {
			size_t c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < c)
				c = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < c)
				c = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < c)
				c = d[i - 2][j - 2] + 1;
			d[i][j] = c;
		}
	return d[n][m];
}

const char *as_closest(const char *word, const char *const *cands, size_t n)
{
	const char *best = NULL;
	size_t bd = SIZE_MAX, len = strlen(word);
	for (size_t i = 0; i < n; i++) {
		size_t e = cands[i] ? edits(word, cands[i]) : SIZE_MAX;
		if (e < bd) {
			bd = e;
			best = cands[i];
		}
	}
	if (bd <= 2 && 2 * bd < len)
		return best;
	/* or the one name that word begins (max_split_size for max_split_size_mb) */
	best = NULL;
	for (size_t i = 0; len >= 4 && i < n; i++)
		if (cands[i] && !strncmp(cands[i], word, len)) {
			if (best)
				return NULL;
			best = cands[i];
		}
	return best;
}

static void oom_die(size_t n)
{
	fprintf(stderr, "%s: error: out of host memory allocating %zu bytes\n", as_progname, n);
	exit(AS_EXIT_SOFTWARE);
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom_die(n);
	return p;
}

void *xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);
	if (!p)
		oom_die(n * m);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom_die(n);
	return p;
}

char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(xmalloc(n), s, n);
}

/* Written out rather than strtoull: strtoull's base 0 reads "0100" as octal and its base 10 takes
 * signs and leading spaces. */
static int parse_digits(const char *s, unsigned base, uint64_t *out)
{
	uint64_t v = 0;
	if (!s || !*s)
		return -1;
	for (; *s; s++) {
		unsigned d;
		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = (unsigned)(*s - 'A' + 10);
		else
			return -1;
		if (v > (UINT64_MAX - d) / base)
			return -1;
		v = v * base + d;
	}
	*out = v;
	return 0;
}

int as_parse_u64(const char *s, uint64_t *out)
{
	return parse_digits(s, 10, out);
}

int as_parse_num(const char *s, uint64_t *out)
{
	if (s && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		return parse_digits(s + 2, 16, out);
	return parse_digits(s, 10, out);
}

/* One rule for units, in any case: a letter alone or with "iB" is a power of 1024 (K, k, KiB, kib:
 * 1024; M, m, MiB; G, g, GiB; T, t, TiB), the letter with "B" alone a power of 1000 (KB, kB, MB,
 * GB, TB), B or nothing a byte. */
static const struct {
	const char *suffix;
	uint64_t mult;
} size_units[] = {
	{ "", 1 }, { "B", 1 },
	{ "K", 1024 }, { "KiB", 1024 }, { "KB", 1000 },
	{ "M", 1024ull << 10 }, { "MiB", 1024ull << 10 }, { "MB", 1000000ull },
	{ "G", 1024ull << 20 }, { "GiB", 1024ull << 20 }, { "GB", 1000000000ull },
	{ "T", 1024ull << 30 }, { "TiB", 1024ull << 30 }, { "TB", 1000000000000ull },
};

#define SIZE_UNITS "B; K, KiB, M, MiB, G, GiB, T, TiB (powers of 1024); KB, MB, GB, TB (powers of 1000); in any case"

/*
 * Exact decimal parsing in integers: "1.5GB" must be exactly 1500000000, which a double
 * cannot promise for every input, so the mantissa is kept as an integer and a power of ten.
 * With round, a size that is not a whole number of bytes ("17.30GiB") is rounded down and note
 * says so; without, it is an error. A count of bytes ("0.5", "0.5B") must be whole either way.
 */
static int parse_size(const char *s, uint64_t *out, int round, char *note, size_t notelen, char *msg, size_t msglen)
{
	const char *p = s;
	unsigned __int128 mant = 0, div = 1;
	int digits = 0, frac = 0, fdigits = 0;

	if (note && notelen)
		note[0] = 0;
	if (!s || !*s) {
		snprintf(msg, msglen, "empty size");
		return -1;
	}
	for (; *p; p++) {
		if (isdigit((unsigned char)*p)) {
			mant = mant * 10 + (unsigned)(*p - '0');
			if (frac) {
				div *= 10;
				fdigits++;
			}
			if (mant > ((unsigned __int128)1 << 100) || div > ((unsigned __int128)1 << 60)) {
				snprintf(msg, msglen, "size '%s' is too large", s);
				return -1;
			}
			digits++;
		} else if (*p == '.' && !frac) {
			frac = 1;
		} else {
			break;
		}
	}
	if (!digits) {
		snprintf(msg, msglen, "invalid size '%s' (expected a number with an optional unit: " SIZE_UNITS ")", s);
		return -1;
	}
	for (size_t i = 0; i < sizeof(size_units) / sizeof(size_units[0]); i++) {
		if (strcasecmp(p, size_units[i].suffix))
			continue;
		unsigned __int128 v = mant * size_units[i].mult, rem = v % div;
		if (rem && (!round || size_units[i].mult == 1)) {
			snprintf(msg, msglen, "size '%s' is not a whole number of bytes", s);
			return -1;
		}
		v /= div;
		if (v > UINT64_MAX) {
			snprintf(msg, msglen, "size '%s' overflows 64 bits", s);
			return -1;
		}
		if (rem && note && notelen) {
			/* the exact value: rem / div has at most fdigits decimals */
			char f[64];
			int k = fdigits;
			for (f[k] = 0; k-- > 0; rem /= 10)
				f[k] = (char)('0' + (int)(rem % 10));
			for (k = fdigits; k > 1 && f[k - 1] == '0'; k--)
				f[k - 1] = 0;
			snprintf(note, notelen, "size '%s' is %" PRIu64 ".%s bytes: rounded down to %" PRIu64 " bytes", s, (uint64_t)v, f,
				(uint64_t)v);
		}
		*out = (uint64_t)v;
		return 0;
	}
	snprintf(msg, msglen, "unknown unit '%s' in size '%s' (use " SIZE_UNITS ")", p, s);
	return -1;
}

/* Each note once per run (sizes are parsed again per job and per thread). */
static void note_once(const char *note)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static char seen[16][256];
	static size_t nseen;
	pthread_mutex_lock(&mu);
	int dup = 0;
	for (size_t i = 0; i < nseen && !dup; i++)
		dup = !strncmp(seen[i], note, sizeof seen[i] - 1);
	if (!dup) {
		if (nseen < 16)
			snprintf(seen[nseen++], sizeof seen[0], "%s", note);
		fprintf(stderr, "%s: note: %s\n", as_progname, note);
	}
	pthread_mutex_unlock(&mu);
}

int as_parse_size_note(const char *s, uint64_t *out, char *note, size_t notelen, char *msg, size_t msglen)
{
	return parse_size(s, out, 1, note, notelen, msg, msglen);
}

int as_parse_size(const char *s, uint64_t *out, char *msg, size_t msglen)
{
	char note[256];
	if (parse_size(s, out, 1, note, sizeof note, msg, msglen))
		return -1;
	if (note[0])
		note_once(note);
	return 0;
}

int as_parse_size_exact(const char *s, uint64_t *out, char *msg, size_t msglen)
{
	return parse_size(s, out, 0, NULL, 0, msg, msglen);
}

char *as_escape(const char *s, int spaces)
{
	size_t n = strlen(s);
	char *out = xmalloc(4 * n + 1), *o = out;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f || c == '\\' || (c == ' ' && (spaces || i == 0)))
			o += sprintf(o, "\\x%02x", c);
		else
			*o++ = (char)c;
	}
	*o = 0;
	return out;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int as_unescape(char *s)
{
	char *o = s;
	for (; *s; s++) {
		int hi, lo;
		if (s[0] == '\\' && s[1] == 'x' && (hi = hexval(s[2])) >= 0 && (lo = hexval(s[3])) >= 0) {
			if (!hi && !lo)
				return -1;
			*o++ = (char)(hi * 16 + lo);
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
	return 0;
}

int as_parse_capacity(const char *s, uint64_t *out, char *msg, size_t msglen)
{
	if (as_parse_size(s, out, msg, msglen))
		return -1;
	if (!*out) {
		snprintf(msg, msglen, "a capacity of 0 bytes holds nothing (leave the option out for the device's whole memory)");
		return -1;
	}
	return 0;
}

const char *as_size_paren(uint64_t b, char *buf, size_t len)
{
	if (b <= 1024 || len < 4)
		return "";
	buf[0] = ' ';
	buf[1] = '(';
	as_format_size(b, buf + 2, len - 3);
	strcat(buf, ")");
	return buf;
}

void as_format_size(uint64_t b, char *buf, size_t len)
{
	if (b <= 1024)
		snprintf(buf, len, "%" PRIu64 " bytes", b);
	else if (b <= 1048576)
		snprintf(buf, len, "%.2f KiB", b / 1024.0);
	else if (b <= 1073741824)
		snprintf(buf, len, "%.2f MiB", b / 1048576.0);
	else
		snprintf(buf, len, "%.2f GiB", b / 1073741824.0);
}

void as_run_threads(uint64_t n, void *(*fn)(void *), void *arg)
{
	if (n <= 1) {
		fn(arg);
		return;
	}
	pthread_t *th = xcalloc(n, sizeof(pthread_t));
	for (uint64_t w = 0; w < n; w++)
		pthread_create(&th[w], NULL, fn, arg);
	for (uint64_t w = 0; w < n; w++)
		pthread_join(th[w], NULL);
	free(th);
}

struct indexed {
	void (*fn)(void *, size_t);
	void *ctx;
	size_t n, next;
	pthread_mutex_t mu;
};

static void *indexed_worker(void *arg)
{
	struct indexed *q = arg;
	for (;;) {
		pthread_mutex_lock(&q->mu);
		size_t k = q->next++;
		pthread_mutex_unlock(&q->mu);
		if (k >= q->n)
			return NULL;
		q->fn(q->ctx, k);
	}
}

void as_run_indexed(uint64_t threads, size_t n, void (*fn)(void *ctx, size_t k), void *ctx)
{
	struct indexed q = { fn, ctx, n, 0, PTHREAD_MUTEX_INITIALIZER };
	as_run_threads(threads < n ? threads : n, indexed_worker, &q);
	pthread_mutex_destroy(&q.mu);
}

int as_split_csv(char *line, char **f, int max)
{
	int nf = 0;
	for (char *p = line;;) {
		if (nf == max)
			return max + 1;
		f[nf++] = p;
		char *c = strchr(p, ',');
		if (!c)
			return nf;
		*c = 0;
		p = c + 1;
	}
}

/* Writes s as a JSON string: quotes and backslashes escaped, control characters and DEL as \u00XX
 * (the JSON output of info and advise). */
void as_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

int as_write_all(int fd, const void *buf, size_t n)
{
	const char *b = buf;
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = ENOSPC;
			return -1;
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int as_tmpfile(const char *prefix, const char **dir)
{
	const char *d = getenv("TMPDIR");
	if (!d || !*d)
		d = "/tmp";
	if (dir)
		*dir = d;
	char tmpl[4096];
	snprintf(tmpl, sizeof tmpl, "%s/%s.XXXXXX", d, prefix);
	int fd = mkstemp(tmpl);
	if (fd >= 0)
		unlink(tmpl);
	return fd;
}

double as_seconds_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) * 1e-9;
}
