/* resume.c - sweep --resume: verifies the rows of an earlier output before keeping them.
 * CSV fields are split by hand: the files are allocsim's own (RFC 4180 quoting of text fields,
 * engine.c's csv_str), and no CSV library is among the project's dependencies. */
#include "cli/resume.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Splits one CSV line (no newline) into fields, unquoting; returns the count, or -1 for an
 * unterminated quote or a quote inside an unquoted field. */
static long csv_split(const char *s, char ***out)
{
	size_t n = 0, cap = 16, len = strlen(s);
	char **f = xmalloc(cap * sizeof(char *));
	char *buf = xmalloc(len + 1);
	const char *p = s;
	for (;;) {
		size_t k = 0;
		if (*p == '"') {
			for (p++;; p++) {
				if (!*p)
					goto bad;
				if (*p == '"') {
					if (p[1] != '"')
						break;
					p++;
				}
				buf[k++] = *p;
			}
			p++;
			if (*p && *p != ',')
				goto bad;
		} else {
			for (; *p && *p != ','; p++) {
				if (*p == '"')
					goto bad;
				buf[k++] = *p;
			}
		}
		buf[k] = 0;
		if (n == cap)
			f = xrealloc(f, (cap *= 2) * sizeof(char *));
		f[n++] = xstrdup(buf);
		if (!*p)
			break;
		p++; /* the comma */
	}
	free(buf);
	*out = f;
	return (long)n;
bad:
	for (size_t i = 0; i < n; i++)
		free(f[i]);
	free(f);
	free(buf);
	*out = NULL;
	return -1;
}

static void free_fields(char **f, long n)
{
	for (long i = 0; i < n; i++)
		free(f[i]);
	free(f);
}

static int is_number(const char *s)
{
	char *end;
	if (!*s)
		return 0;
	errno = 0;
	(void)strtod(s, &end);
	return *end == 0 && errno != ERANGE;
}

static int is_index(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

char *as_resume_key(const char *row, size_t nkey)
{
	const char *p = strchr(row, ',');
	if (!p)
		return NULL;
	p++;
	const char *q = p;
	int quote = 0;
	size_t f = 0;
	for (; *q && *q != '\n'; q++) {
		if (*q == '"')
			quote = !quote;
		else if (*q == ',' && !quote && ++f == nkey)
			break;
	}
	if (f < nkey && !(f + 1 == nkey && !*q))
		return NULL;
	char *k = xmalloc((size_t)(q - p) + 1);
	memcpy(k, p, (size_t)(q - p));
	k[q - p] = 0;
	return k;
}

typedef struct keyidx {
	const char *key;
	size_t job;
} keyidx;

static int cmp_key(const void *a, const void *b)
{
	return strcmp(((const keyidx *)a)->key, ((const keyidx *)b)->key);
}

static int col_of(char **h, long n, const char *name)
{
	for (long i = 0; i < n; i++)
		if (!strcmp(h[i], name))
			return (int)i;
	return -1;
}

long as_resume_load(const char *path, const as_resume_spec *sp, char **kept, as_err *err)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		return as_fail(err, AS_EXIT_NOINPUT, "--resume: cannot read '%s': %s", path, strerror(errno));
	}
	char **hf = NULL, **sf = NULL, *line = NULL;
	long nh = csv_split(sp->header, &hf), ns = csv_split(sp->sample, &sf), kept_n = 0, rc = 0;
	int ooms = col_of(hf, nh, "num_ooms"), wall = col_of(hf, nh, "wall_seconds"), eps = col_of(hf, nh, "events_per_second");
	keyidx *idx = xmalloc((sp->njobs ? sp->njobs : 1) * sizeof(keyidx));
	size_t *line_of = xcalloc(sp->njobs ? sp->njobs : 1, sizeof(size_t));
	char *redo_of = xcalloc(sp->njobs ? sp->njobs : 1, 1);
	for (size_t i = 0; i < sp->njobs; i++)
		idx[i] = (keyidx){ sp->keys[i], i };
	qsort(idx, sp->njobs, sizeof(keyidx), cmp_key);
	size_t cap = 0, lineno = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, f)) > 0) {
		lineno++;
		int complete = line[len - 1] == '\n';
		if (complete)
			line[--len] = 0;
		if (len && line[len - 1] == '\r')
			line[--len] = 0;
		if (lineno == 1) {
			if (!complete || strcmp(line, sp->header)) {
				rc = as_fail(err, AS_EXIT_DATAERR, "--resume: '%s' was not written by this sweep (its header differs: "
					"other --param names, or another allocsim version); give another -o, or remove it to start again", path);
				break;
			}
			continue;
		}
		if (!len)
			continue;
		char **rf = NULL;
		long nr = complete ? csv_split(line, &rf) : -1;
		int whole = nr == nh && is_index(rf[0]);
		for (long c = 1 + (long)sp->nkey; whole && c < nh; c++)
			if (c < ns && is_number(sf[c]) && !is_number(rf[c]))
				whole = 0;
		char *key = whole ? as_resume_key(line, sp->nkey) : NULL;
		if (!key) {
			fprintf(stderr, "%s: warning: %s line %zu: an incomplete row (%s); its run is done again\n", as_progname, path,
				lineno, !complete ? "no end of line" : nr != nh ? "wrong number of fields" : "not a number where one belongs");
			free_fields(rf, nr);
			continue;
		}
		keyidx probe = { key, 0 }, *hit = bsearch(&probe, idx, sp->njobs, sizeof(keyidx), cmp_key);
		int redo = (ooms >= 0 && strcmp(rf[ooms], "0")) ||
			(!sp->timing && ((wall >= 0 && strtod(rf[wall], NULL) != 0) || (eps >= 0 && strtod(rf[eps], NULL) != 0)));
		free_fields(rf, nr);
		free(key);
		if (!hit) {
			rc = as_fail(err, AS_EXIT_DATAERR, "--resume: %s line %zu: the row is of no run of this sweep (other "
				"traces, values or settings); give another -o, or remove it to start again", path, lineno);
			break;
		}
		size_t j = hit->job;
		const char *rest = strchr(line, ',');
		char *row = xmalloc(strlen(rest) + 32);
		sprintf(row, "%zu%s", j, rest);
		if (line_of[j]) {
			int differs = strcmp(kept[j], row);
			free(row);
			if (differs) {
				rc = as_fail(err, AS_EXIT_DATAERR, "--resume: %s lines %zu and %zu are two different rows for run %zu; "
					"remove one", path, line_of[j], lineno, j);
				break;
			}
			continue;
		}
		line_of[j] = lineno;
		kept[j] = row;
		redo_of[j] = (char)redo;
	}
	/* Rows with an out-of-memory or with timing depend on options the file does not record
	 * (--stop-at-oom, --timing): they are run again. */
	for (size_t j = 0; j < sp->njobs; j++)
		if (kept[j] && redo_of[j]) {
			free(kept[j]);
			kept[j] = NULL;
		} else if (kept[j]) {
			kept_n++;
		}
	if (!rc && ferror(f))
		rc = as_fail(err, AS_EXIT_NOINPUT, "--resume: cannot read '%s': %s", path, strerror(errno));
	fclose(f);
	free(line);
	free(idx);
	free(line_of);
	free(redo_of);
	free_fields(hf, nh);
	free_fields(sf, ns);
	if (rc) {
		for (size_t i = 0; i < sp->njobs; i++) {
			free(kept[i]);
			kept[i] = NULL;
		}
		return -1;
	}
	return kept_n;
}
