/* common.h - error reporting, exit codes, small helpers shared by every part of allocsim. */
#ifndef ALLOCSIM_COMMON_H
#define ALLOCSIM_COMMON_H

#include <signal.h>
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

/* Exit statuses (sysexits.h values; documented in allocsim(1)). */
enum {
	AS_EXIT_OK = 0,
	AS_EXIT_USAGE = 64,     /* bad command line or option value */
	AS_EXIT_DATAERR = 65,   /* malformed input data */
	AS_EXIT_NOINPUT = 66,   /* input missing or unreadable */
	AS_EXIT_UNAVAILABLE = 69, /* no usable GPU for --backend cuda */
	AS_EXIT_SOFTWARE = 70,  /* internal error */
	AS_EXIT_IOERR = 74,     /* write error */
	AS_EXIT_TEMPFAIL = 75,  /* the output is locked by another run: try again later */
	AS_EXIT_DIVERGED = 1,   /* validate: simulation diverged from the recording */
	AS_EXIT_PARTIAL = 5,    /* --keep-going: some inputs failed; the rows of the others were written */
	AS_EXIT_INTERRUPTED = 130 /* SIGINT/SIGTERM: resources released, no output */
};

/* An error carries the exit status it should end the program with and one message line. */
typedef struct as_err {
	int code;
	char msg[1024];
} as_err;

int as_fail(as_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void as_err_clear(as_err *err);

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* Room for one more element in the array v, of which n are used and cap allocated: when full, cap
 * doubles (from first) and v is reallocated. AS_GROW2 grows two arrays that share n and cap. */
#define AS_GROW(v, n, cap, first) do { \
	if ((n) == (cap)) { \
		(cap) = (cap) ? 2 * (cap) : (first); \
		(v) = xrealloc((v), (size_t)(cap) * sizeof(*(v))); \
	} \
} while (0)
#define AS_GROW2(v, w, n, cap, first) do { \
	if ((n) == (cap)) { \
		(cap) = (cap) ? 2 * (cap) : (first); \
		(v) = xrealloc((v), (size_t)(cap) * sizeof(*(v))); \
		(w) = xrealloc((w), (size_t)(cap) * sizeof(*(w))); \
	} \
} while (0)

/* Sizes as the command line takes them: "512", "64KiB", "16k" (= 16K = 16KiB), "20MiB", "1.5GB",
 * "17.30GiB"; a letter alone or with "iB" is a power of 1024, with "B" a power of 1000, in any case.
 * A size that is not a whole number of bytes is rounded down, and a note on stderr (once per size)
 * says so; a count of bytes must be whole. Returns 0 or -1 with a message. */
int as_parse_size(const char *s, uint64_t *out, char *msg, size_t msglen);
/* The same, the note (or "") into note instead of stderr. */
int as_parse_size_note(const char *s, uint64_t *out, char *note, size_t notelen, char *msg, size_t msglen);
/* The same without rounding: a size that is not a whole number of bytes is an error (trace files). */
int as_parse_size_exact(const char *s, uint64_t *out, char *msg, size_t msglen);
/* Set by the SIGINT/SIGTERM handler (cli_catch_signals); every long loop checks it and ends with
 * AS_EXIT_INTERRUPTED, committing no output. */
extern volatile sig_atomic_t cli_interrupted;
/* Replaces err with "interrupted" when a signal came (a read it cut short fails otherwise). */
int as_check_interrupted(as_err *err);

/* Escaping for line-based outputs (native traces, info): control bytes (< 0x20, 0x7f), '\\', a
 * leading space, and with spaces != 0 every space become \xHH; the result is malloc'd. as_unescape
 * undoes it in place (other backslashes stay as they are); -1 for an escaped NUL. */
char *as_escape(const char *s, int spaces);
int as_unescape(char *s);
/* A capacity: a size of at least 1 byte (0 once meant "no limit"; leaving the option out says that). */
int as_parse_capacity(const char *s, uint64_t *out, char *msg, size_t msglen);
/* Formats bytes as PyTorch's format_size does ("2.00 MiB"). */
void as_format_size(uint64_t bytes, char *buf, size_t len);
/* " (14.47 GiB)" beside a byte count above 1 KiB, "" otherwise (in buf, at least 4 bytes) */
const char *as_size_paren(uint64_t b, char *buf, size_t len);
/* Whole-string unsigned numbers without overflow, signs or spaces: decimal only (leading zeros are
 * decimal: "0100" is 100, "08" is 8, as PyTorch reads its settings), or with as_parse_num also
 * 0x-prefixed hex where a format documents it (native traces, RMM pointers and streams). */
int as_parse_u64(const char *s, uint64_t *out);
void as_json_str(FILE *f, const char *s); /* s as a JSON string, escaped */
int as_write_all(int fd, const void *buf, size_t n); /* 0, or -1 with errno (ENOSPC for a write of 0) */
/* An unlinked temporary file in $TMPDIR, else /tmp, named PREFIX.XXXXXX: its descriptor, or -1 with
 * errno; *dir (if given) names the folder for messages. */
int as_tmpfile(const char *prefix, const char **dir);
int as_parse_num(const char *s, uint64_t *out);
/* Splits line in place at each ',' into f[0..max): the number of fields, or max + 1 when there
 * are more than max (the CSV logs' readers: no quoting in them). */
int as_split_csv(char *line, char **f, int max);

/* Runs fn(arg) in n threads and waits for them; with n <= 1 in this thread (where Ctrl-C/SIGTERM
 * interrupt a blocking read). fn takes its work from arg (a locked counter). */
void as_run_threads(uint64_t n, void *(*fn)(void *), void *arg);
/* fn(ctx, k) for every k in [0, n), on up to `threads` threads, each taking the next k */
void as_run_indexed(uint64_t threads, size_t n, void (*fn)(void *ctx, size_t k), void *ctx);

extern const char *as_progname;
/* The closest of the n names in cands to word (a misspelling: at most 2 edits, and fewer than half
 * of word's letters; or the one name that begins with word), or NULL: the "did you mean" of messages. */
const char *as_closest(const char *word, const char *const *cands, size_t n);

#define AS_MiB ((uint64_t)1 << 20)
#define AS_GiB ((uint64_t)1 << 30)
static inline double as_gib(uint64_t bytes) { return (double)bytes / (double)AS_GiB; }
#define AS_MAX_REQUEST ((uint64_t)1 << 60)

/* Memory pools (as_event.pool): 0 is the allocator's default pool; a private pool (a CUDA graph's
 * or a torch.cuda.MemPool's) is a number 1 .. AS_POOL_MAX, in the order the trace first names it,
 * with flags of the MemPool it is: AS_POOL_CUSTOM when its segments come from a custom allocator
 * (a CUDAPluggableAllocator: PyTorch gives it no expandable segments), AS_POOL_NOSPLIT for
 * MemPool(no_split=True), AS_POOL_ONOOM for MemPool(use_on_oom=True). */
#define AS_POOL_MAX 0x0fffu
#define AS_POOL_CUSTOM 0x8000u
#define AS_POOL_NOSPLIT 0x4000u
#define AS_POOL_ONOOM 0x2000u
#define AS_POOL_FLAGS (AS_POOL_CUSTOM | AS_POOL_NOSPLIT | AS_POOL_ONOOM)
#define AS_POOL_INDEX(p) ((p) & AS_POOL_MAX)
static inline int as_pool_valid(uint64_t p)
{
	return p <= 0xffff && !(p & 0x1000u) && (AS_POOL_INDEX(p) || !(p & AS_POOL_FLAGS));
}

/* Seconds on CLOCK_MONOTONIC since *t0 (taken with clock_gettime(CLOCK_MONOTONIC, t0)). */
double as_seconds_since(const struct timespec *t0);
#endif
