/* shard.c - sweep --shard: the shard from the command line or a job array's variables, the
 * cost-balanced plan of which shard runs what, and the provenance file that merge checks. */
#include "cli/shard.h"
#include "readers/binfmt.h"
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---- which shard ------------------------------------------------------------------------ */

/* A variable's value as a number: 1 set and numeric, 0 unset (or SGE's "undefined"), -1 set but
 * not a number (msg says which). */
static int env_num(const char *name, int64_t *v, char *msg, size_t len)
{
	const char *s = getenv(name);
	if (!s || !*s || !strcmp(s, "undefined"))
		return 0;
	char *end;
	errno = 0;
	long long x = strtoll(s, &end, 10);
	if (*end || errno || x < 0) {
		snprintf(msg, len, "--shard auto: %s='%s' is not a job-array index or count", name, s);
		return -1;
	}
	*v = x;
	return 1;
}

typedef struct found {
	const char *sched;
	int64_t k, n; /* 0-based, count (0: not known) */
} found;

/* Slurm: SLURM_ARRAY_TASK_ID, and SLURM_ARRAY_TASK_COUNT or MIN/MAX (and STEP). */
static int from_slurm(found *f, char *msg, size_t len)
{
	int64_t id, cnt = 0, min = 0, max = 0, step = 1;
	int r = env_num("SLURM_ARRAY_TASK_ID", &id, msg, len);
	if (r <= 0)
		return r;
	int hc = env_num("SLURM_ARRAY_TASK_COUNT", &cnt, msg, len), hmin = env_num("SLURM_ARRAY_TASK_MIN", &min, msg, len),
	    hmax = env_num("SLURM_ARRAY_TASK_MAX", &max, msg, len), hs = env_num("SLURM_ARRAY_TASK_STEP", &step, msg, len);
	if (hc < 0 || hmin < 0 || hmax < 0 || hs < 0)
		return -1;
	if (!hs || !step)
		step = 1;
	f->sched = "Slurm";
	if (hmin && hmax && (max < min || (max - min) % step)) {
		snprintf(msg, len, "--shard auto: SLURM_ARRAY_TASK_MIN=%" PRId64 ", MAX=%" PRId64 " and STEP=%" PRId64
			" do not describe a range", min, max, step);
		return -1;
	}
	int64_t span = hmin && hmax ? (max - min) / step + 1 : 0;
	if (hc && span && cnt != span) {
		snprintf(msg, len, "--shard auto: SLURM_ARRAY_TASK_COUNT=%" PRId64 " but MIN..MAX (%" PRId64 "..%" PRId64
			", step %" PRId64 ") holds %" PRId64 " tasks: the array must be one range, e.g. --array=0-%" PRId64,
			cnt, min, max, step, span, cnt - 1);
		return -1;
	}
	f->n = hc ? cnt : span;
	if (!f->n) {
		snprintf(msg, len, "--shard auto: SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_COUNT nor "
			"SLURM_ARRAY_TASK_MIN/MAX");
		return -1;
	}
	if (id < min || (id - min) % step || (id - min) / step >= f->n) {
		snprintf(msg, len, "--shard auto: SLURM_ARRAY_TASK_ID=%" PRId64 " is not one of the %" PRId64
			" tasks from %" PRId64 " (step %" PRId64 ")", id, f->n, min, step);
		return -1;
	}
	f->k = (id - min) / step;
	return 1;
}

/* PBS Pro (PBS_ARRAY_INDEX) or Torque (PBS_ARRAYID): no count is exported, so N comes from
 * --shard auto/N and the indices must run 1..N. */
static int from_pbs(found *f, char *msg, size_t len)
{
	int64_t id;
	const char *var = "PBS_ARRAY_INDEX";
	int r = env_num(var, &id, msg, len);
	if (!r) {
		var = "PBS_ARRAYID";
		r = env_num(var, &id, msg, len);
	}
	if (r <= 0)
		return r;
	f->sched = "PBS";
	if (id < 1) {
		snprintf(msg, len, "--shard auto: %s=%" PRId64 ": number a PBS array 1..N (#PBS -J 1-N)", var, id);
		return -1;
	}
	f->k = id - 1;
	f->n = 0;
	return 1;
}

/* SGE (and its descendants): SGE_TASK_ID, FIRST, LAST, STEPSIZE, 1-based. */
static int from_sge(found *f, char *msg, size_t len)
{
	int64_t id, first = 1, last = 0, step = 1;
	int r = env_num("SGE_TASK_ID", &id, msg, len);
	if (r <= 0)
		return r;
	int hf = env_num("SGE_TASK_FIRST", &first, msg, len), hl = env_num("SGE_TASK_LAST", &last, msg, len),
	    hs = env_num("SGE_TASK_STEPSIZE", &step, msg, len);
	if (hf < 0 || hl < 0 || hs < 0)
		return -1;
	f->sched = "SGE";
	if (!hf)
		first = 1;
	if (!hs || !step)
		step = 1;
	if (!hl || last < first || id < first || id > last || (id - first) % step) {
		snprintf(msg, len, "--shard auto: SGE_TASK_ID=%" PRId64 " is not in SGE_TASK_FIRST..SGE_TASK_LAST (%" PRId64
			"..%s, step %" PRId64 ")", id, first, hl ? getenv("SGE_TASK_LAST") : "unset", step);
		return -1;
	}
	f->k = (id - first) / step;
	f->n = (last - first) / step + 1;
	return 1;
}

/* LSF: LSB_JOBINDEX (0 outside an array), LSB_JOBINDEX_END, LSB_JOBINDEX_STEP; arrays start at 1. */
static int from_lsf(found *f, char *msg, size_t len)
{
	int64_t id, end = 0, step = 1;
	int r = env_num("LSB_JOBINDEX", &id, msg, len);
	if (r <= 0 || !id)
		return r < 0 ? -1 : 0;
	int he = env_num("LSB_JOBINDEX_END", &end, msg, len), hs = env_num("LSB_JOBINDEX_STEP", &step, msg, len);
	if (he < 0 || hs < 0)
		return -1;
	f->sched = "LSF";
	if (!hs || !step)
		step = 1;
	if (!he || end < id || (id - 1) % step) {
		snprintf(msg, len, "--shard auto: LSB_JOBINDEX=%" PRId64 " with LSB_JOBINDEX_END=%s (step %" PRId64 "): number the"
			" array 1..N (bsub -J \"name[1-N]\")", id, he ? getenv("LSB_JOBINDEX_END") : "unset", step);
		return -1;
	}
	f->k = (id - 1) / step;
	f->n = (end - 1) / step + 1;
	return 1;
}

int as_shard_from_env(uint64_t n_given, uint64_t *k, uint64_t *n, const char **sched, char *msg, size_t len)
{
	int (*const from[])(found *, char *, size_t) = { from_slurm, from_pbs, from_sge, from_lsf };
	found got[4];
	size_t nf = 0;
	for (size_t i = 0; i < 4; i++) {
		int r = from[i](&got[nf], msg, len);
		if (r < 0)
			return -1;
		nf += (size_t)r;
	}
	if (!nf) {
		snprintf(msg, len, "--shard auto: no job-array variable is set (SLURM_ARRAY_TASK_ID, PBS_ARRAY_INDEX or "
			"PBS_ARRAYID, SGE_TASK_ID, LSB_JOBINDEX); outside a job array give --shard K/N");
		return -1;
	}
	if (nf > 1) {
		snprintf(msg, len, "--shard auto: the job-array variables of %s and %s are both set; give --shard K/N",
			got[0].sched, got[1].sched);
		return -1;
	}
	found *f = &got[0];
	if (!f->n && !n_given) {
		snprintf(msg, len, "--shard auto: %s exports no array size; give it as --shard auto/N", f->sched);
		return -1;
	}
	if (f->n && n_given && (uint64_t)f->n != n_given) {
		snprintf(msg, len, "--shard auto/%" PRIu64 ": the %s array has %" PRId64 " tasks", n_given, f->sched, f->n);
		return -1;
	}
	uint64_t nn = f->n ? (uint64_t)f->n : n_given;
	if ((uint64_t)f->k >= nn) {
		snprintf(msg, len, "--shard auto/%" PRIu64 ": %s task %" PRId64 " is beyond the %" PRIu64 " shards", nn, f->sched,
			f->k + 1, nn);
		return -1;
	}
	*k = (uint64_t)f->k + 1;
	*n = nn;
	if (sched)
		*sched = f->sched;
	return 0;
}

int as_shard_parse(const char *arg, uint64_t *k, uint64_t *n, char *msg, size_t len)
{
	char c;
	uint64_t nn = 0;
	if (!strcmp(arg, "auto") || (sscanf(arg, "auto/%" SCNu64 "%c", &nn, &c) == 1 && nn && !strncmp(arg, "auto/", 5)))
		return as_shard_from_env(nn, k, n, NULL, msg, len);
	if (sscanf(arg, "%" SCNu64 "/%" SCNu64 "%c", k, n, &c) != 2 || !*n || !*k || *k > *n || *n > UINT32_MAX) {
		snprintf(msg, len, "--shard: expected K/N with 1 <= K <= N, or auto, got '%s'", arg);
		return -1;
	}
	return 0;
}

/* ---- what each run costs ---------------------------------------------------------------- */

uint64_t as_trace_cost(const char *path)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		return 1; /* a pipe or an unreadable file (its error comes when it is decoded) */
	}
	unsigned char head[AS_BIN_HEADER];
	ssize_t got = pread(fd, head, sizeof head, 0);
	uint64_t bytes = (uint64_t)st.st_size, per = 64, est;
	if (got >= 32 && !memcmp(head, AS_BIN_MAGIC, AS_BIN_MAGIC_LEN)) {
		est = bytes / sizeof(as_rec); /* the records dominate a binary file */
	} else {
		if (got >= 2 && head[0] == 0x1f && head[1] == 0x8b && bytes >= 18) {
			unsigned char t[4];
			if (pread(fd, t, 4, st.st_size - 4) == 4) { /* gzip's ISIZE: the size modulo 2^32 */
				uint64_t isz = (uint64_t)t[0] | (uint64_t)t[1] << 8 | (uint64_t)t[2] << 16 | (uint64_t)t[3] << 24;
				while (isz < bytes) /* a member above 4 GiB */
					isz += (uint64_t)1 << 32;
				bytes = isz;
			}
			gzFile gz = gzdopen(dup(fd), "rb"); /* the first bytes of the content tell the format */
			got = gz ? gzread(gz, head, 32) : 0;
			if (gz)
				gzclose(gz);
		}
		/* bytes per event measured on the bundled traces: a snapshot's pickle about 80, a
		 * native text trace's line about 30 */
		per = got > 0 && head[0] == 0x80 ? 80 : got > 0 && head[0] == '#' ? 30 : 64;
		est = bytes / per;
	}
	close(fd);
	return est ? est : 1;
}

/* ---- the plan ----------------------------------------------------------------------------- */

/* How many shards contiguous ranges need with at most cap each (blocks of equal-cost runs). */
static uint64_t ranges_needed(const uint64_t *cost, size_t ntr, size_t per, uint64_t cap, uint64_t limit)
{
	uint64_t shards = 1, load = 0;
	for (size_t t = 0; t < ntr && shards <= limit; t++) {
		uint64_t c = cost[t], m = per;
		while (m && shards <= limit) {
			uint64_t fit = (cap - load) / c;
			if (fit >= m) {
				load += m * c;
				m = 0;
			} else {
				m -= fit;
				shards++;
				load = 0;
			}
		}
	}
	return shards;
}

static void ranges_fill(const uint64_t *cost, size_t ntr, size_t per, uint64_t cap, uint32_t *owner, uint64_t *load)
{
	uint64_t s = 0, l = 0;
	size_t i = 0;
	for (size_t t = 0; t < ntr; t++)
		for (size_t m = 0; m < per; m++, i++) {
			if (l + cost[t] > cap) {
				s++;
				l = 0;
			}
			owner[i] = (uint32_t)s;
			l += cost[t];
			load[s] += cost[t];
		}
}

/* Longest first, each to the least loaded shard (ties: the lower number); runs of equal cost keep
 * grid order. */
typedef struct lpt_item {
	uint64_t cost;
	size_t i;
} lpt_item;

static int lpt_cmp(const void *a, const void *b)
{
	const lpt_item *x = a, *y = b;
	if (x->cost != y->cost)
		return x->cost < y->cost ? 1 : -1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static void lpt_fill(const uint64_t *cost, size_t ntr, size_t per, uint64_t n, uint32_t *owner, uint64_t *load)
{
	size_t nj = ntr * per;
	lpt_item *it = xmalloc((nj ? nj : 1) * sizeof(*it));
	for (size_t i = 0; i < nj; i++)
		it[i] = (lpt_item){ cost[i / per], i };
	qsort(it, nj, sizeof(*it), lpt_cmp);
	for (size_t i = 0; i < nj; i++) {
		uint64_t best = 0;
		for (uint64_t s = 1; s < n; s++)
			if (load[s] < load[best])
				best = s;
		owner[it[i].i] = (uint32_t)best;
		load[best] += it[i].cost;
	}
	free(it);
}

static uint64_t max_of(const uint64_t *v, uint64_t n)
{
	uint64_t m = 0;
	for (uint64_t i = 0; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

uint32_t *as_shard_plan(const uint64_t *cost, size_t ntr, size_t per, uint64_t n, uint64_t *load)
{
	size_t nj = ntr * per;
	uint32_t *owner = xcalloc(nj ? nj : 1, sizeof(uint32_t));
	memset(load, 0, n * sizeof(uint64_t));
	if (!nj)
		return owner;
	uint64_t total = 0, big = 0;
	for (size_t t = 0; t < ntr; t++) {
		total += cost[t] * per;
		big = cost[t] > big ? cost[t] : big;
	}
	/* the smallest cap that n contiguous ranges meet (bisection: ranges_needed falls as cap grows) */
	uint64_t lo = big > (total + n - 1) / n ? big : (total + n - 1) / n, hi = total;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (ranges_needed(cost, ntr, per, mid, n) <= n)
			hi = mid;
		else
			lo = mid + 1;
	}
	ranges_fill(cost, ntr, per, lo, owner, load);
	uint64_t slowest = max_of(load, n);
	/* greedy placement when ranges leave the slowest shard beyond the tolerance (few, unequal runs);
	 * bounded so that its n x runs steps stay small */
	if ((double)slowest * (double)n > AS_SHARD_TOLERANCE * (double)total && nj <= 1000000 && n <= 4096) {
		uint32_t *o2 = xcalloc(nj, sizeof(uint32_t));
		uint64_t *l2 = xcalloc(n, sizeof(uint64_t));
		lpt_fill(cost, ntr, per, n, o2, l2);
		if (max_of(l2, n) < slowest) {
			memcpy(owner, o2, nj * sizeof(uint32_t));
			memcpy(load, l2, n * sizeof(uint64_t));
		}
		free(o2);
		free(l2);
	}
	return owner;
}

/* ---- provenance --------------------------------------------------------------------------- */

int as_shard_checksum(const char *path, uint64_t *bytes, uint32_t *crc, as_err *err)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return as_fail(err, AS_EXIT_NOINPUT, "cannot read '%s': %s", path, strerror(errno));
	unsigned char buf[1 << 16];
	uLong c = crc32(0L, Z_NULL, 0);
	uint64_t n = 0;
	size_t got;
	while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
		c = crc32(c, buf, (uInt)got);
		n += got;
	}
	int bad = ferror(f);
	fclose(f);
	if (bad)
		return as_fail(err, AS_EXIT_NOINPUT, "cannot read '%s'", path);
	*bytes = n;
	*crc = (uint32_t)c;
	return 0;
}

char *as_shard_build(void)
{
	uint64_t n;
	uint32_t crc;
	as_err e;
	char b[128];
	if (as_shard_checksum("/proc/self/exe", &n, &crc, &e))
		snprintf(b, sizeof b, "allocsim %s", PACKAGE_VERSION);
	else
		snprintf(b, sizeof b, "allocsim %s exe-crc32=%08" PRIx32, PACKAGE_VERSION, crc);
	return xstrdup(b);
}

/* Appends s to the memstream, single-quoted for a POSIX shell where it needs it. */
static void put_quoted(FILE *f, const char *s)
{
	if (*s && !s[strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=/.,:@%^")]) {
		fputs(s, f);
		return;
	}
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", f);
		else if (*s == '\n')
			fputs("'\"\\n\"'", f); /* (keeps the file one line per field; never in practice) */
		else
			fputc(*s, f);
	}
	fputc('\'', f);
}

char *as_shard_args(int argc, char **argv)
{
	static const char *const with_arg[] = { "-o", "--output", "-j", "--jobs", "--shard" };
	char *b = NULL;
	size_t l = 0;
	FILE *f = open_memstream(&b, &l);
	int first = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int skip = 0;
		if (!strcmp(a, "--"))
			break;
		for (size_t w = 0; w < sizeof with_arg / sizeof *with_arg && !skip; w++) {
			size_t wl = strlen(with_arg[w]);
			if (!strcmp(a, with_arg[w])) {
				skip = 1;
				i++; /* and its value */
			} else if (!strncmp(a, with_arg[w], wl) && (a[wl] == '=' || (wl == 2 && a[wl]))) {
				skip = 1; /* --output=X, -oX */
			}
		}
		if (skip || !strcmp(a, "--resume"))
			continue;
		if (!first)
			fputc(' ', f);
		put_quoted(f, a);
		first = 0;
	}
	fclose(f);
	return b;
}

int as_shard_note(const char *csv, as_shard_prov *p, as_err *err)
{
	if (as_shard_checksum(csv, &p->bytes, &p->crc, err))
		return -1;
	size_t pl = strlen(csv) + sizeof AS_SHARD_EXT;
	char *path = xmalloc(pl), *tmp = xmalloc(pl + 8);
	snprintf(path, pl, "%s%s", csv, AS_SHARD_EXT);
	snprintf(tmp, pl + 8, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	int rc = 0;
	if (!f) {
		rc = as_fail(err, AS_EXIT_IOERR, "cannot write '%s': %s", tmp, strerror(errno));
		goto out;
	}
	fprintf(f, "%s\nbuild %s\nargs %s\ngrid %08" PRIx32 " %" PRIu64 "\nshard %" PRIu64 "/%" PRIu64 "\nruns %" PRIu64
		" %" PRIu64 "\ncost %" PRIu64 " %" PRIu64 " %" PRIu64 "\ncsv %" PRIu64 " %08" PRIx32 "\n",
		AS_SHARD_MAGIC, p->build, p->args, p->grid, p->jobs, p->k, p->n, p->owned, p->done, p->cost, p->total, p->slowest,
		p->bytes, p->crc);
	if (ferror(f) | fclose(f) || rename(tmp, path)) {
		rc = as_fail(err, AS_EXIT_IOERR, "cannot write '%s': %s", path, strerror(errno));
		unlink(tmp);
	}
out:
	free(path);
	free(tmp);
	return rc;
}

void as_shard_prov_free(as_shard_prov *p)
{
	free(p->build);
	free(p->args);
	memset(p, 0, sizeof(*p));
}

int as_shard_read(const char *csv, as_shard_prov *p, as_err *err)
{
	memset(p, 0, sizeof(*p));
	size_t pl = strlen(csv) + sizeof AS_SHARD_EXT;
	char *path = xmalloc(pl);
	snprintf(path, pl, "%s%s", csv, AS_SHARD_EXT);
	FILE *f = fopen(path, "r");
	if (!f) {
		as_fail(err, AS_EXIT_NOINPUT, "'%s' has no provenance file '%s' (%s): merge takes the files that sweep --shard "
			"-o FILE wrote", csv, path, strerror(errno));
		free(path);
		return -1;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int seen = 0, lineno = 0, bad = 0;
	while (!bad && (len = getline(&line, &cap, f)) > 0) {
		lineno++;
		if (line[len - 1] != '\n') {
			bad = 1;
			break;
		}
		line[--len] = 0;
		char c;
		if (lineno == 1)
			bad = strcmp(line, AS_SHARD_MAGIC) != 0;
		else if (!strncmp(line, "build ", 6) && !p->build)
			p->build = xstrdup(line + 6), seen |= 1;
		else if (!strncmp(line, "args ", 5) && !p->args)
			p->args = xstrdup(line + 5), seen |= 2;
		else if (sscanf(line, "grid %8" SCNx32 " %" SCNu64 "%c", &p->grid, &p->jobs, &c) == 2)
			seen |= 4;
		else if (sscanf(line, "shard %" SCNu64 "/%" SCNu64 "%c", &p->k, &p->n, &c) == 2 && p->k >= 1 && p->k <= p->n)
			seen |= 8;
		else if (sscanf(line, "runs %" SCNu64 " %" SCNu64 "%c", &p->owned, &p->done, &c) == 2 && p->done <= p->owned)
			seen |= 16;
		else if (sscanf(line, "cost %" SCNu64 " %" SCNu64 " %" SCNu64 "%c", &p->cost, &p->total, &p->slowest, &c) == 3)
			seen |= 32;
		else if (sscanf(line, "csv %" SCNu64 " %8" SCNx32 "%c", &p->bytes, &p->crc, &c) == 2)
			seen |= 64;
		else
			bad = 1;
	}
	free(line);
	fclose(f);
	if (bad || seen != 127) {
		as_fail(err, AS_EXIT_DATAERR, "'%s', line %d: not a shard provenance file written by this version of allocsim",
			path, bad ? lineno : lineno + 1);
		free(path);
		as_shard_prov_free(p);
		return -1;
	}
	free(path);
	return 0;
}
