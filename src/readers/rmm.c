/* rmm.c - reader for RMM logging_resource_adaptor CSV logs (Thread,Time,Action,Pointer,Size,Stream);
 * the Thread column becomes the event's thread (per-thread allocators read it from the request). */
#include "readers/trace.h"
#include "util/idmap.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct rmm_state {
	char *line;
	size_t cap;
	uint64_t lineno, nrec, next_id;
	idmap live; /* pointer -> id */
} rmm_state;

/* "HH:MM:SS.micro" (what RMM's logger writes since 0.16: spdlog's "%H:%M:%S.%f"), "HH:MM:SS:micro"
 * (RMM 0.15's "%H:%M:%S:%f"; each part decimal digits) or a plain decimal number of microseconds;
 * -1 for an empty field (no time), -2 for anything else. */
static int64_t parse_time(const char *s)
{
	uint64_t part[4], v;
	char buf[64];
	if (!*s)
		return -1;
	if (strchr(s, ':')) {
		if (strlen(s) >= sizeof buf)
			return -2;
		strcpy(buf, s);
		/* the seconds' fraction after a '.': the one '.' of the field, after its last ':' */
		char *dot = strchr(buf, '.');
		if (dot) {
			if (strchr(dot + 1, '.') || strchr(dot, ':') || strchr(buf, ':') == strrchr(buf, ':') ||
			    strchr(strchr(buf, ':') + 1, ':') != strrchr(buf, ':'))
				return -2;
			*dot = ':';
		}
		char *save = NULL, *t = strtok_r(buf, ":", &save);
		int n = 0;
		for (; t && n < 4; t = strtok_r(NULL, ":", &save))
			if (as_parse_u64(t, &part[n++]))
				return -2;
		/* a clock time: parts in range, and no empty part (strtok_r would skip one) */
		if (t || n != 4 || strstr(s, "::") || s[0] == ':' || s[strlen(s) - 1] == ':' ||
		    part[0] > 1000000 || part[1] > 59 || part[2] > 60 || part[3] > 999999)
			return -2;
		return (int64_t)((part[0] * 3600 + part[1] * 60 + part[2]) * 1000000 + part[3]);
	}
	if (!as_parse_u64(s, &v) && v <= INT64_MAX)
		return (int64_t)v;
	return -2;
}

static int rmm_next(as_reader *r, as_event *ev, as_err *err)
{
	rmm_state *s = r->priv;
	for (;;) {
		char *f[6];
		int rc = as_reader_csv_line(r, &s->line, &s->cap, &s->lineno, f, 6, "Thread,Time,Action,Pointer,Size,Stream", err);
		if (rc <= 0)
			return rc;
		memset(ev, 0, sizeof(*ev));
		ev->pos = s->lineno;
		ev->index = s->nrec++;
		ev->time_us = parse_time(f[1]);
		if (ev->time_us == -2)
			return as_reader_line_err(r, s->lineno, err, "invalid time (expected HH:MM:SS.microseconds, HH:MM:SS:microseconds or microseconds)", f[1]);
		uint64_t ptr = 0, size = 0, stream = 0, thread = 0;
		if (as_parse_num(f[0], &thread))
			return as_reader_line_err(r, s->lineno, err, "invalid thread", f[0]);
		ev->thread = thread;
		if (as_parse_num(f[3], &ptr) && strcmp(f[3], "") && strcmp(f[3], "(nil)"))
			return as_reader_line_err(r, s->lineno, err, "invalid pointer", f[3]);
		if (as_parse_u64(f[4], &size))
			return as_reader_line_err(r, s->lineno, err, "invalid size", f[4]);
		if (as_parse_num(f[5], &stream))
			return as_reader_line_err(r, s->lineno, err, "invalid stream", f[5]);
		ev->stream = stream;
		ev->size = size;
		if (!strcmp(f[2], "allocate")) {
			if (idmap_get(&s->live, ptr))
				return as_reader_line_err(r, s->lineno, err, "allocation at a pointer that is still allocated:", f[3]);
			ev->type = EV_ALLOC;
			ev->id = ++s->next_id;
			ev->addr = ptr;
			idmap_put(&s->live, ptr, (void *)(uintptr_t)ev->id);
		} else if (!strcmp(f[2], "allocate failure")) {
			ev->type = EV_ALLOC;
			ev->id = ++s->next_id;
			ev->flags = EVF_OOM;
		} else if (!strcmp(f[2], "free") || !strcmp(f[2], "deallocate")) {
			void *id = idmap_del(&s->live, ptr);
			if (!id)
				return as_reader_line_err(r, s->lineno, err, "free of a pointer that is not allocated:", f[3]);
			ev->type = EV_FREE;
			ev->flags = EVF_STREAM; /* deallocate(stream, ...): the stream the program frees on */
			ev->id = (uint64_t)(uintptr_t)id;
		} else {
			return as_reader_line_err(r, s->lineno, err, "unknown action", f[2]);
		}
		return 1;
	}
}

static void rmm_close(as_reader *r)
{
	rmm_state *s = r->priv;
	if (!s)
		return;
	free(s->line);
	idmap_free(&s->live);
	free(s);
}

/* The header names the six columns, each exactly (a misnamed one, the last included, would have
 * its values read as another column's): the first that differs is named with its column number. */
static int check_header(as_reader *r, const char *line, as_err *err)
{
	static const char *const want[] = { "Thread", "Time", "Action", "Pointer", "Size", "Stream" };
	char msg[256];
	const char *p = line;
	for (int c = 0; c < 6; c++) {
		size_t n = strcspn(p, ",");
		size_t w = strlen(want[c]);
		if (n != w || memcmp(p, want[c], w)) {
			snprintf(msg, sizeof msg, "bad RMM log header: column %d is '%.*s', expected '%s' (the header is "
				"'Thread,Time,Action,Pointer,Size,Stream'):", c + 1, (int)(n > 64 ? 64 : n), p, want[c]);
			return as_reader_line_err(r, 1, err, msg, line);
		}
		p += n;
		if (c < 5) {
			if (*p != ',') {
				snprintf(msg, sizeof msg, "bad RMM log header: it has %d columns, expected 6 "
					"('Thread,Time,Action,Pointer,Size,Stream'):", c + 1);
				return as_reader_line_err(r, 1, err, msg, line);
			}
			p++;
		}
	}
	if (*p) {
		snprintf(msg, sizeof msg, "bad RMM log header: column 7 ('%.64s') after 'Stream', expected the end of the line "
			"(the header is 'Thread,Time,Action,Pointer,Size,Stream'):", *p == ',' ? p + 1 : p);
		return as_reader_line_err(r, 1, err, msg, line);
	}
	return 0;
}

static const struct as_reader_ops rmm_ops = { "rmm", rmm_next, rmm_close };

int as_rmm_open(as_reader *r, const as_reader_opts *o, as_err *err)
{
	(void)o; /* (one device: nothing to choose) */
	rmm_state *s = xcalloc(1, sizeof(*s));
	idmap_init(&s->live);
	r->priv = s;
	r->ops = &rmm_ops;
	r->pos_is_line = 1;
	r->time_unordered = 1; /* the logger can write two threads' lines out of order */
	snprintf(r->meta.format, sizeof r->meta.format, "rmm");
	snprintf(r->meta.source, sizeof r->meta.source, "rmm-log");
	int rc = as_input_line(&r->in, &s->line, &s->cap, err);
	s->lineno = 1;
	if (rc <= 0)
		return -1;
	return check_header(r, s->line, err);
}
