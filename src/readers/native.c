/* native.c - allocsim's own text trace format (doc/trace-format.md): reader and writer. */
#include "readers/trace.h"
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NATIVE_VERSION 1

typedef struct native_state {
	char *line;
	size_t cap;
	uint64_t lineno;
	uint64_t nrec;
	int have_pending;
} native_state;

static int nerr(as_reader *r, uint64_t line, as_err *err, const char *fmt, const char *arg)
{
	char m[300];
	snprintf(m, sizeof m, fmt, arg);
	return as_fail(err, AS_EXIT_DATAERR, "%s:%" PRIu64 ": %s", r->in.path, line, m);
}

static int set_meta(as_reader *r, const char *key, char *val, uint64_t line, as_err *err)
{
	as_meta *m = &r->meta;
	int text = !strcmp(key, "source") || !strcmp(key, "device") || !strcmp(key, "allocator_settings");
	if (text && as_unescape(val)) /* the writer escapes control bytes (doc/trace-format.md) */
		return nerr(r, line, err, "escaped NUL byte in header value '%s'", val);
	if (!strcmp(key, "source"))
		snprintf(m->source, sizeof m->source, "%s", val);
	else if (!strcmp(key, "device"))
		snprintf(m->device, sizeof m->device, "%s", val);
	else if (!strcmp(key, "device_total") || !strcmp(key, "capacity")) {
		uint64_t v;
		char why[200];
		if (as_parse_size_exact(val, &v, why, sizeof why))
			return nerr(r, line, err, "invalid size '%s' in header", val);
		if (!v)
			return nerr(r, line, err, "%s of 0 bytes in header (leave the line out when unknown)", key);
		if (key[0] == 'd')
			m->device_total = v;
		else
			m->capacity = v;
	} else if (!strcmp(key, "allocator_settings")) {
		free(m->settings);
		m->settings = xstrdup(val);
		m->has_settings = 1;
	}
	/* Unknown keys are kept for forward compatibility and ignored. */
	return 0;
}

static int native_next(as_reader *r, as_event *ev, as_err *err)
{
	native_state *s = r->priv;
	for (;;) {
		int rc;
		if (s->have_pending) {
			s->have_pending = 0;
			rc = 1;
		} else {
			rc = as_input_line(&r->in, &s->line, &s->cap, err);
			s->lineno++;
		}
		if (rc <= 0)
			return rc;
		char *p = s->line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p || *p == '#')
			continue;
		memset(ev, 0, sizeof(*ev));
		ev->time_us = -1;
		ev->pos = s->lineno;
		ev->index = s->nrec++;
		char *tok[8];
		int nt = 0;
		char *save = NULL;
		for (char *t = strtok_r(p, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
			if (nt == 8)
				return nerr(r, s->lineno, err, "too many fields%s", "");
			tok[nt++] = t;
		}
		if (strlen(tok[0]) != 1)
			return nerr(r, s->lineno, err, "unknown record type '%s'", tok[0]);
		int npos;
		switch (tok[0][0]) {
		case 'a': ev->type = EV_ALLOC; npos = 4; break;
		case 'r': ev->type = EV_FREE_REQ; npos = 2; break;
		case 'f': ev->type = EV_FREE; npos = 2; break;
		case 'e': ev->type = EV_EMPTY_CACHE; npos = 1; break;
		case 'p': ev->type = EV_PHASE; npos = 2; break;
		case 'S': ev->type = EV_SEG_ALLOC; npos = 4; break;
		case 'X': ev->type = EV_SEG_FREE; npos = 4; break;
		case 'M': ev->type = EV_SEG_MAP; npos = 4; break;
		case 'U': ev->type = EV_SEG_UNMAP; npos = 4; break;
		case 'P': ev->type = EV_POOL_RELEASE; npos = 2; break;
		default: return nerr(r, s->lineno, err, "unknown record type '%s'", tok[0]);
		}
		if (nt < npos)
			return nerr(r, s->lineno, err, "record '%s' has too few fields", tok[0]);
		uint64_t v[3] = { 0, 0, 0 };
		if (ev->type == EV_PHASE) {
			if (as_unescape(tok[1]))
				return nerr(r, s->lineno, err, "escaped NUL byte in phase label '%s'", tok[1]);
			ev->label = tok[1];
		} else {
			for (int i = 1; i < npos; i++)
				if (as_parse_num(tok[i], &v[i - 1]))
					return nerr(r, s->lineno, err, "invalid number '%s'", tok[i]);
		}
		if (ev->type == EV_POOL_RELEASE) {
			if (!v[0] || v[0] > AS_POOL_MAX)
				return nerr(r, s->lineno, err, "pool_release of pool '%s' (private pools are 1 .. 4095)", tok[1]);
			ev->pool = (uint32_t)v[0];
		} else if (ev->type >= EV_SEG_ALLOC) {
			ev->addr = v[0];
			ev->size = v[1];
			ev->stream = v[2];
		} else {
			ev->id = v[0];
			ev->size = v[1];
			ev->stream = v[2];
		}
		for (int i = npos; i < nt; i++) {
			uint64_t x;
			if (!strcmp(tok[i], "oom") && ev->type == EV_ALLOC)
				ev->flags |= EVF_OOM;
			else if (!strcmp(tok[i], "maybe") && ev->type == EV_EMPTY_CACHE)
				ev->flags |= EVF_MAYBE;
			else if (!strcmp(tok[i], "empty") && ev->type == EV_POOL_RELEASE)
				ev->flags |= EVF_POOL_EMPTY;
			else if (!strncmp(tok[i], "t=", 2) && !as_parse_num(tok[i] + 2, &x) && x <= INT64_MAX)
				ev->time_us = (int64_t)x;
			else if (!strncmp(tok[i], "addr=", 5) && !as_parse_num(tok[i] + 5, &x))
				ev->addr = x;
			else if (!strncmp(tok[i], "pool=", 5) && ev->type == EV_ALLOC) {
				if (as_parse_u64(tok[i] + 5, &x) || !x || x > AS_POOL_MAX)
					return nerr(r, s->lineno, err, "invalid pool in '%s' (private pools are 1 .. 4095)", tok[i]);
				ev->pool = (ev->pool & AS_POOL_FLAGS) | (uint32_t)x;
			} else if (!strcmp(tok[i], "custom") && ev->type == EV_ALLOC && ev->pool)
				ev->pool |= AS_POOL_CUSTOM;
			else if (!strcmp(tok[i], "nosplit") && ev->type == EV_ALLOC && ev->pool)
				ev->pool |= AS_POOL_NOSPLIT;
			else if (!strcmp(tok[i], "use_on_oom") && ev->type == EV_ALLOC && ev->pool)
				ev->pool |= AS_POOL_ONOOM;
			else if (!strncmp(tok[i], "th=", 3) && ev->type <= EV_FREE && !as_parse_u64(tok[i] + 3, &x))
				ev->thread = x;
			else if (!strncmp(tok[i], "s=", 2) && ev->type == EV_FREE && !as_parse_num(tok[i] + 2, &x)) {
				ev->stream = x;
				ev->flags |= EVF_STREAM;
			}
			else if (!strncmp(tok[i], "site=", 5) && ev->type == EV_ALLOC && tok[i][5]) {
				if (as_unescape(tok[i] + 5))
					return nerr(r, s->lineno, err, "escaped NUL byte in '%s'", tok[i]);
				ev->site = tok[i] + 5;
			} else
				return nerr(r, s->lineno, err, "invalid field '%s'", tok[i]);
		}
		return 1;
	}
}

static void native_close(as_reader *r)
{
	native_state *s = r->priv;
	if (s)
		free(s->line);
	free(s);
}

static const struct as_reader_ops native_ops = { "native", native_next, native_close };

int as_native_open(as_reader *r, const as_reader_opts *o, as_err *err)
{
	(void)o; /* (one device: nothing to choose) */
	native_state *s = xcalloc(1, sizeof(*s));
	r->priv = s;
	r->ops = &native_ops;
	r->pos_is_line = 1;
	snprintf(r->meta.format, sizeof r->meta.format, "native");
	int rc = as_input_line(&r->in, &s->line, &s->cap, err);
	s->lineno = 1;
	if (rc <= 0)
		return -1;
	/* "#allocsim-trace VERSION", the version in decimal digits (sscanf's %u wrapped 2^32+1 to 1) */
	const char *vs = s->line + 15;
	uint64_t ver;
	if (*vs != ' ' || !vs[1] || vs[1 + strspn(vs + 1, "0123456789")])
		return nerr(r, 1, err, "bad header line '%s' (expected '#allocsim-trace 1')", s->line);
	if (as_parse_u64(vs + 1, &ver) || ver != NATIVE_VERSION)
		return as_fail(err, AS_EXIT_DATAERR, "%s:1: unsupported trace format version %s (this allocsim reads version %d)",
			r->in.path, vs + 1, NATIVE_VERSION);
	for (;;) {
		rc = as_input_line(&r->in, &s->line, &s->cap, err);
		if (rc < 0)
			return -1;
		if (rc == 0)
			break;
		s->lineno++;
		if (s->line[0] != '#') {
			s->have_pending = 1;
			break;
		}
		char *colon = strchr(s->line, ':');
		if (!colon)
			continue; /* a plain comment */
		*colon = 0;
		char *val = colon + 1;
		while (*val == ' ')
			val++;
		if (set_meta(r, s->line + 1, val, s->lineno, err))
			return -1;
	}
	return 0;
}

/* ---- writer ---------------------------------------------------------------------------- */

struct as_writer {
	as_outfile out;   /* the file (temporary name or in place); gz writes through a dup of its descriptor */
	gzFile gz;
	int is_gz;
	int failed;
};

/* A write error on the output, its name quoted unless it is standard output. */
static int wfail(as_writer *w, as_err *err)
{
	int e = errno ? errno : EIO;
	if (!w->out.path && as_stdout_gone())
		return 0; /* | head: the reader has what it wanted */
	if (!w->out.path)
		return as_fail(err, AS_EXIT_IOERR, "write error on standard output: %s", strerror(e));
	return as_fail(err, AS_EXIT_IOERR, "write error on '%s': %s", w->out.path, strerror(e));
}

static int wprintf(as_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int wprintf(as_writer *w, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof buf)
		n = (int)strlen(buf);
	if (w->is_gz) {
		if (gzwrite(w->gz, buf, (unsigned)n) != n)
			w->failed = 1;
	} else if (fwrite(buf, 1, (size_t)n, w->out.fp) != (size_t)n) {
		w->failed = 1;
	}
	return w->failed ? -1 : 0;
}

/* KEY and VALUE escaped (no length limit: wprintf's buffer would cut a long setting). */
static void wfield(as_writer *w, const char *prefix, const char *val, int spaces)
{
	char *e = as_escape(val, spaces);
	wprintf(w, "%s", prefix);
	size_t n = strlen(e);
	if (w->is_gz) {
		if (n && gzwrite(w->gz, e, (unsigned)n) != (int)n)
			w->failed = 1;
	} else if (fwrite(e, 1, n, w->out.fp) != n) {
		w->failed = 1;
	}
	wprintf(w, "\n");
	free(e);
}

as_writer *as_native_writer_open(const char *path, const as_meta *meta, as_err *err)
{
	as_writer *w = xcalloc(1, sizeof(*w));
	size_t n = path ? strlen(path) : 0;
	if (as_outfile_open(&w->out, path, err)) {
		free(w);
		return NULL;
	}
	if (n > 3 && !strcmp(path + n - 3, ".gz")) {
		int fd = dup(fileno(w->out.fp));
		w->is_gz = 1;
		if (fd < 0 || !(w->gz = gzdopen(fd, "wb6"))) {
			as_fail(err, AS_EXIT_IOERR, "cannot create '%s': %s", path, strerror(errno));
			if (fd >= 0)
				close(fd);
			as_outfile_close(&w->out, 0, err);
			free(w);
			return NULL;
		}
	}
	wprintf(w, "#allocsim-trace %d\n", NATIVE_VERSION);
	if (meta->source[0])
		wfield(w, "#source: ", meta->source, 0);
	if (meta->device[0])
		wfield(w, "#device: ", meta->device, 0);
	if (meta->device_total)
		wprintf(w, "#device_total: %" PRIu64 "\n", meta->device_total);
	if (meta->capacity)
		wprintf(w, "#capacity: %" PRIu64 "\n", meta->capacity);
	if (meta->has_settings)
		wfield(w, "#allocator_settings: ", meta->settings ? meta->settings : "", 0);
	return w;
}

int as_native_writer_event(as_writer *w, const as_event *ev, as_err *err)
{
	char extra[96] = "";
	int n = 0;
	if (ev->time_us >= 0)
		n += snprintf(extra + n, sizeof extra - (size_t)n, " t=%" PRId64, ev->time_us);
	if (ev->thread && ev->type <= EV_FREE)
		n += snprintf(extra + n, sizeof extra - (size_t)n, " th=%" PRIu64, ev->thread);
	if (ev->type == EV_FREE && (ev->flags & EVF_STREAM))
		n += snprintf(extra + n, sizeof extra - (size_t)n, " s=0x%" PRIx64, ev->stream);
	switch (ev->type) {
	case EV_ALLOC:
		if (ev->addr)
			n += snprintf(extra + n, sizeof extra - (size_t)n, " addr=0x%" PRIx64, ev->addr);
		if (AS_POOL_INDEX(ev->pool))
			n += snprintf(extra + n, sizeof extra - (size_t)n, " pool=%u%s%s%s", AS_POOL_INDEX(ev->pool),
				(ev->pool & AS_POOL_CUSTOM) ? " custom" : "", (ev->pool & AS_POOL_NOSPLIT) ? " nosplit" : "",
				(ev->pool & AS_POOL_ONOOM) ? " use_on_oom" : "");
		wprintf(w, "a %" PRIu64 " %" PRIu64 " %" PRIu64 "%s%s", ev->id, ev->size, ev->stream, extra,
			(ev->flags & EVF_OOM) ? " oom" : "");
		if (ev->site && *ev->site)
			wfield(w, " site=", ev->site, 1);
		else
			wprintf(w, "\n");
		break;
	case EV_FREE_REQ: wprintf(w, "r %" PRIu64 "%s\n", ev->id, extra); break;
	case EV_FREE: wprintf(w, "f %" PRIu64 "%s\n", ev->id, extra); break;
	case EV_EMPTY_CACHE: wprintf(w, "e%s%s\n", extra, (ev->flags & EVF_MAYBE) ? " maybe" : ""); break;
	case EV_POOL_RELEASE:
		wprintf(w, "P %u%s%s\n", AS_POOL_INDEX(ev->pool), extra, (ev->flags & EVF_POOL_EMPTY) ? " empty" : "");
		break;
	case EV_PHASE: wfield(w, "p ", ev->label && *ev->label ? ev->label : "-", 1); break;
	case EV_SEG_ALLOC: case EV_SEG_FREE: case EV_SEG_MAP: case EV_SEG_UNMAP:
		wprintf(w, "%c 0x%" PRIx64 " %" PRIu64 " %" PRIu64 "%s\n", "SXMU"[ev->type - EV_SEG_ALLOC],
			ev->addr, ev->size, ev->stream, extra);
		break;
	default: break;
	}
	if (w->failed)
		return wfail(w, err);
	return 0;
}

int as_native_writer_close(as_writer *w, int commit, as_err *err)
{
	int rc = 0;
	errno = 0;
	if (w->is_gz && gzclose(w->gz) != Z_OK) {
		w->failed = 1;
		rc = wfail(w, err);
	}
	if (w->failed)
		rc = wfail(w, err);
	if (as_outfile_close(&w->out, commit && !w->failed, err))
		rc = -1;
	free(w);
	return rc;
}
