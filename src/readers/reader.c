/* reader.c - format detection (a table: name, sniff, open) and the consistency checks every reader's
 * events go through. */
#include "readers/trace.h"
#include "util/idmap.h"
#include "readers/tracecheck.h"
#include "readers/binfmt.h"
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

/* The live-id map holds, for each live id, (slot << 1 | free requested) + 1: never NULL, and far
 * below the address of idmap's tombstone marker since slots are 32-bit. */
#define LIVE_VAL(slot, req) ((void *)(uintptr_t)((((uint64_t)(slot) << 1) | (uint64_t)(req)) + 1))
#define LIVE_SLOT(v) ((uint32_t)(((uintptr_t)(v) - 1) >> 1))
#define LIVE_REQ(v) ((int)(((uintptr_t)(v) - 1) & 1))

/* The ids live in the trace and the slots they hold; freed slots are reused most recent first (a stack),
 * so the slot numbers stay below the most allocations ever live at once. */
typedef struct live_ids {
	idmap ids;
	uint32_t *free;
	size_t nfree, capfree;
	uint32_t next;
} live_ids;

/* The formats, told apart by their first bytes (at most 64; n of them there): one row each. The
 * prefixes exclude each other, so the order is only the one the unknown-format message lists them in. */
typedef struct as_format {
	const char *name;
	int (*sniff)(const unsigned char *b, size_t n);
	int (*open)(as_reader *r, const as_reader_opts *o, as_err *err);
	const char *expect; /* for the message on a file of no format */
} as_format;

static int sniff_pickle(const unsigned char *b, size_t n)
{
	return n >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5; /* PROTO 2..5 */
}

static int sniff_native(const unsigned char *b, size_t n)
{
	return n >= 15 && !memcmp(b, "#allocsim-trace", 15);
}

static int sniff_binary(const unsigned char *b, size_t n)
{
	return n >= AS_BIN_MAGIC_LEN && !memcmp(b, AS_BIN_MAGIC, AS_BIN_MAGIC_LEN);
}

static int sniff_rmm(const unsigned char *b, size_t n)
{
	return n >= 6 && !memcmp(b, "Thread", 6);
}

static int sniff_hostlog(const unsigned char *b, size_t n)
{
	return n >= 14 && !memcmp(b, "op,id,size,ptr", 14);
}

static const as_format formats[] = {
	{ "pytorch snapshot", sniff_pickle, as_pickle_open, "a PyTorch memory snapshot pickle" },
	{ "native", sniff_native, as_native_open, "an allocsim trace starting with '#allocsim-trace'" },
	{ "binary", sniff_binary, as_binfmt_open, "an allocsim binary trace" },
	{ "rmm log", sniff_rmm, as_rmm_open, "an RMM log CSV starting with 'Thread,'" },
	{ "host log", sniff_hostlog, as_hostlog_open, "a pinned host log starting with 'op,id,size,ptr'" },
};
#define NFORMATS (sizeof formats / sizeof formats[0])

static int reader_start(as_reader *r, as_reader **out, const as_reader_opts *opts, as_err *err);

int as_reader_opts_device(as_reader_opts *o, const char *arg)
{
	uint64_t v;
	if (!strcmp(arg, "host")) {
		o->has_device = 1;
		o->device = AS_DEVICE_HOST;
		return 0;
	}
	if (as_parse_u64(arg, &v) || v >= 4096)
		return -1;
	o->has_device = 1;
	o->device = (int)v;
	return 0;
}

int as_reader_open(as_reader **out, const char *path, const as_reader_opts *opts, as_err *err)
{
	as_reader *r = xcalloc(1, sizeof(*r));
	if (as_input_open(&r->in, path, err)) {
		free(r);
		return -1;
	}
	return reader_start(r, out, opts, err);
}

int as_reader_open_fd(as_reader **out, int fd, const char *name, const as_reader_opts *opts, as_err *err)
{
	as_reader *r = xcalloc(1, sizeof(*r));
	if (as_input_open_fd(&r->in, fd, name, err)) {
		free(r);
		return -1;
	}
	return reader_start(r, out, opts, err);
}

static int reader_start(as_reader *r, as_reader **out, const as_reader_opts *opts, as_err *err)
{
	static const as_reader_opts none;
	int rc;
	if (!opts)
		opts = &none;
	r->opts = *opts;
	size_t n = as_input_fill(&r->in, 64, err);
	if (r->in.error)
		goto fail;
	const unsigned char *b = r->in.buf + r->in.pos;
	if (n == 0) {
		as_fail(err, AS_EXIT_DATAERR, "%s: empty file (not a trace)", r->in.path);
		goto fail;
	}
	const as_format *f = formats;
	while (f < formats + NFORMATS && !f->sniff(b, n))
		f++;
	if (f == formats + NFORMATS) {
		char expect[400];
		size_t len = 0;
		for (size_t i = 0; i < NFORMATS; i++)
			len += (size_t)snprintf(expect + len, sizeof expect - len, "%s%s", i == 0 ? "" : i + 1 < NFORMATS ? ", " : " or ",
				formats[i].expect);
		as_fail(err, AS_EXIT_DATAERR, "%s: byte offset 0: unknown trace format (expected %s)", r->in.path, expect);
		goto fail;
	}
	rc = f->open(r, opts, err);
	if (rc)
		goto fail;
	if (opts->has_device && opts->device != 0 && (strcmp(r->meta.format, "pytorch") || !strcmp(r->ops->name, "binary"))) {
		as_fail(err, AS_EXIT_DATAERR, "%s: a %s trace holds one device (0), not device %d", r->in.path,
			strcmp(r->ops->name, "binary") ? r->meta.format : "binary", opts->device);
		goto fail;
	}
	live_ids *live = xcalloc(1, sizeof(*live));
	idmap_init(&live->ids);
	r->live = live;
	r->check = as_tracecheck_new(r->time_unordered);
	*out = r;
	return 0;
fail:
	if (r->ops && r->ops->close)
		r->ops->close(r); /* the format's state from a failed open (found by fuzz_native) */
	as_input_close(&r->in);
	as_meta_free(&r->meta);
	free(r);
	return -1;
}

static int bad_event(as_reader *r, const as_event *ev, as_err *err, const char *what)
{
	if (r->pos_is_line)
		return as_fail(err, AS_EXIT_DATAERR, "%s:%" PRIu64 ": %s", r->in.path, ev->pos, what);
	return as_fail(err, AS_EXIT_DATAERR, "%s: byte offset %" PRIu64 ": %s", r->in.path, ev->pos, what);
}

int as_reader_next(as_reader *r, as_event *ev, as_err *err)
{
	char msg[240];
	if (r->finished)
		return 0;
	int rc = r->ops->next(r, ev, err);
	if (rc <= 0) {
		if (rc == 0)
			r->finished = 1;
		return rc;
	}
	live_ids *live = r->live;
	void *st;
	/* a format that numbers its live allocations itself (slots_assigned) has kept these rules */
	switch (r->slots_assigned ? EV_PHASE : ev->type) {
	case EV_ALLOC:
		if (ev->size == 0 || ev->size >= AS_MAX_REQUEST) {
			snprintf(msg, sizeof msg, "allocation %" PRIu64 " has size %" PRIu64 " (must be 1 .. 2^60-1)", ev->id, ev->size);
			return bad_event(r, ev, err, msg);
		}
		if (idmap_get(&live->ids, ev->id)) {
			snprintf(msg, sizeof msg, "allocation id %" PRIu64 " is already live", ev->id);
			return bad_event(r, ev, err, msg);
		}
		if (live->nfree)
			ev->slot = live->free[--live->nfree];
		else if (live->next == UINT32_MAX)
			return bad_event(r, ev, err, "more than 2^32-1 allocations live at once");
		else
			ev->slot = live->next++;
		idmap_put(&live->ids, ev->id, LIVE_VAL(ev->slot, 0));
		break;
	case EV_FREE_REQ:
		st = idmap_get(&live->ids, ev->id);
		if (!st || LIVE_REQ(st)) {
			snprintf(msg, sizeof msg, st ? "free of id %" PRIu64 " requested twice" : "free of unknown id %" PRIu64, ev->id);
			return bad_event(r, ev, err, msg);
		}
		ev->slot = LIVE_SLOT(st);
		idmap_put(&live->ids, ev->id, LIVE_VAL(ev->slot, 1));
		break;
	case EV_FREE:
		if (!(st = idmap_del(&live->ids, ev->id))) {
			snprintf(msg, sizeof msg, "free of unknown id %" PRIu64, ev->id);
			return bad_event(r, ev, err, msg);
		}
		ev->slot = LIVE_SLOT(st);
		AS_GROW(live->free, live->nfree, live->capfree, 64);
		live->free[live->nfree++] = ev->slot;
		break;
	default:
		break;
	}
	if (as_tracecheck_event(r->check, ev, msg, sizeof msg))
		return bad_event(r, ev, err, msg);
	return 1;
}

int as_reader_again(const as_reader *r)
{
	return r->finished && r->again;
}

int as_reader_reopen(const as_reader *r, as_reader **out, as_err *err)
{
	int fd = dup(r->in.fd); /* (a pipe was spooled to a file: input.c) */
	if (fd < 0)
		return as_fail(err, AS_EXIT_NOINPUT, "%s: cannot read it again: %s", r->in.path, strerror(errno));
	as_reader_opts o = r->opts;
	o.pool_reread = 1;
	return as_reader_open_fd(out, fd, r->in.path, &o, err);
}

void as_reader_close(as_reader *r)
{
	if (!r)
		return;
	if (r->ops && r->ops->close)
		r->ops->close(r);
	if (r->live) {
		live_ids *live = r->live;
		idmap_free(&live->ids);
		free(live->free);
		free(live);
	}
	as_tracecheck_free(r->check);
	as_input_close(&r->in);
	as_meta_free(&r->meta);
	free(r);
}
