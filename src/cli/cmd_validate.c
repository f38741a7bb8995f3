/* cmd_validate.c - allocsim validate: does the simulation make PyTorch's device calls? */
#include "cli/cli.h"
#include "cli/devopts.h"
#include "engine/engine.h"
#include "engine/run.h"
#include "readers/source.h"
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char validate_usage[] =
	"usage: allocsim validate [options] SNAPSHOT\n"
	"\n"
	"Replays a PyTorch memory snapshot with the pytorch policy and compares, call by call, the\n"
	"segment allocations, frees, maps and unmaps (kind and size, in order) with the ones PyTorch\n"
	"recorded, then the simulated end state with the snapshot's segments. Prints 'exact' or the\n"
	"first divergence; exits 0 when exact, 1 on a divergence.\n"
	"\n"
	"  -c, --config STRING     PYTORCH_CUDA_ALLOC_CONF to simulate (default: the recorded settings)\n"
	"      --capacity SIZE     the allowed memory (set_per_process_memory_fraction x device total)\n"
	"      --fraction F        the capacity as F x the device's total memory (the trace's, or\n"
	"                          --device-total SIZE)\n"
	"      --device-total SIZE the simulated device's total memory (default: the trace's, else an\n"
	"                          H200's 150109880320)\n"
	"      --addresses MODE    auto (default), model or recorded; see allocsim replay --help\n"
	"      --device N          the device of a multi-GPU snapshot (default: the one with history)\n"
	"  -h, --help              show this help\n";

typedef struct op {
	int kind;
	uint64_t size, index;
} op;

typedef struct opq {
	op *v;
	size_t head, len, cap;
} opq;

static void opq_push(opq *q, int kind, uint64_t size, uint64_t index)
{
	if (q->head + q->len == q->cap) {
		if (q->head) {
			memmove(q->v, q->v + q->head, q->len * sizeof(op));
			q->head = 0;
		} else {
			q->cap = q->cap ? q->cap * 2 : 64;
			q->v = xrealloc(q->v, q->cap * sizeof(op));
		}
	}
	q->v[q->head + q->len++] = (op){ kind, size, index };
}

static const char *const op_names[] = { "segment_alloc", "segment_free", "segment_map", "segment_unmap" };

typedef struct vstate {
	opq sim, rec;
	uint64_t cur_index;
	int diverged;
	char msg[512];
	uint64_t ncompared;
	uint64_t ooms;        /* the replay's out-of-memory errors before the current event */
	unsigned warn;        /* as_policy_prepare's */
	const as_meta *meta;
} vstate;

static void observe(void *ctx, int kind, uint64_t addr, uint64_t size, uint64_t stream)
{
	vstate *v = ctx;
	(void)addr; (void)stream;
	opq_push(&v->sim, kind, size, v->cur_index);
}

static void compare(vstate *v)
{
	while (!v->diverged && v->sim.len && v->rec.len) {
		op a = v->rec.v[v->rec.head], b = v->sim.v[v->sim.head];
		if (a.kind != b.kind || a.size != b.size) {
			v->diverged = 1;
			snprintf(v->msg, sizeof v->msg,
				"diverged at trace entry %" PRIu64 " (device call %" PRIu64 "): PyTorch did %s of %" PRIu64
				" bytes, the simulation did %s of %" PRIu64 " bytes (while replaying trace entry %" PRIu64 ")",
				a.index, v->ncompared, op_names[a.kind], a.size, op_names[b.kind], b.size, b.index);
			return;
		}
		v->ncompared++;
		v->rec.head++;
		v->rec.len--;
		v->sim.head++;
		v->sim.len--;
	}
}

typedef struct segv {
	int is_small;
	uint64_t size;
	size_t n;
	uint64_t *sizes;
	int *states;
} segv;

typedef struct segs {
	segv *v;
	size_t n;
} segs;

static void collect(void *ctx, const as_seg_view *s)
{
	segs *g = ctx;
	g->v = xrealloc(g->v, (g->n + 1) * sizeof(segv));
	segv *d = &g->v[g->n++];
	d->is_small = s->is_small;
	d->size = s->size;
	d->n = s->nblocks;
	d->sizes = xmalloc(s->nblocks * sizeof(uint64_t) + 1);
	d->states = xmalloc(s->nblocks * sizeof(int) + 1);
	if (s->nblocks) { /* a segment may have no blocks: then the pointers may be NULL */
		memcpy(d->sizes, s->block_sizes, s->nblocks * sizeof(uint64_t));
		memcpy(d->states, s->block_states, s->nblocks * sizeof(int));
	}
}

static int segv_cmp(const void *pa, const void *pb)
{
	const segv *a = pa, *b = pb;
	if (a->is_small != b->is_small)
		return a->is_small - b->is_small;
	if (a->size != b->size)
		return a->size < b->size ? -1 : 1;
	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	for (size_t i = 0; i < a->n; i++) {
		if (a->sizes[i] != b->sizes[i])
			return a->sizes[i] < b->sizes[i] ? -1 : 1;
		if (a->states[i] != b->states[i])
			return a->states[i] - b->states[i];
	}
	return 0;
}

static void segs_free(segs *g)
{
	for (size_t i = 0; i < g->n; i++) {
		free(g->v[i].sizes);
		free(g->v[i].states);
	}
	free(g->v);
}

/* Compares end states as multisets of segments (pool, size, block sizes and states). */
static int compare_end_state(const as_meta *m, as_policy *pol, char *msg, size_t len)
{
	segs sim = { 0 }, rec = { 0 };
	as_q_segments q = { collect, &sim };
	as_policy_query(pol, AS_Q_SEGMENTS, &q);
	rec.v = xcalloc(m->nsegments + 1, sizeof(segv));
	for (size_t i = 0; i < m->nsegments; i++) {
		const as_snap_segment *s = &m->segments[i];
		segv *d = &rec.v[rec.n++];
		d->is_small = s->is_small;
		d->size = s->total_size;
		d->n = s->nblocks;
		d->sizes = xmalloc(s->nblocks * sizeof(uint64_t) + 1);
		d->states = xmalloc(s->nblocks * sizeof(int) + 1);
		for (size_t k = 0; k < s->nblocks; k++) {
			d->sizes[k] = s->blocks[k].size;
			d->states[k] = s->blocks[k].state;
		}
	}
	if (sim.n > 1) /* sim.v is NULL when the simulation holds no segment: qsort may not get it */
		qsort(sim.v, sim.n, sizeof(segv), segv_cmp);
	if (rec.n > 1)
		qsort(rec.v, rec.n, sizeof(segv), segv_cmp);
	int bad = 0;
	if (sim.n != rec.n) {
		snprintf(msg, len, "end state: the snapshot has %zu segments, the simulation %zu", rec.n, sim.n);
		bad = 1;
	}
	for (size_t i = 0; !bad && i < sim.n; i++) {
		if (segv_cmp(&sim.v[i], &rec.v[i])) {
			snprintf(msg, len, "end state: snapshot %s segment of %" PRIu64 " bytes with %zu blocks differs from "
				"the simulation's %s segment of %" PRIu64 " bytes with %zu blocks",
				rec.v[i].is_small ? "small" : "large", rec.v[i].size, rec.v[i].n,
				sim.v[i].is_small ? "small" : "large", sim.v[i].size, sim.v[i].n);
			bad = 1;
		}
	}
	segs_free(&sim);
	segs_free(&rec);
	return bad;
}

/* validate's side of the replay loop (engine/run.h): the recorded device calls queued before each
 * event, the simulation's compared after it; at the end, what is left and the end state. */
static int validate_start(void *ctx, as_engine *e, as_err *err)
{
	(void)e; (void)err;
	cli_warn_gc(((vstate *)ctx)->warn); /* (after the settings parsed) */
	return 0;
}

static void validate_before(void *ctx, as_engine *e, const as_event *ev)
{
	vstate *v = ctx;
	v->cur_index = ev->index;
	if (ev->type >= EV_SEG_ALLOC && ev->type <= EV_SEG_UNMAP)
		opq_push(&v->rec, ev->type - EV_SEG_ALLOC, ev->size, ev->index);
	v->ooms = as_engine_summary(e)->num_ooms;
}

static int validate_event(void *ctx, as_engine *e, const as_event *ev)
{
	vstate *v = ctx;
	if (!ev) {
		if (!v->diverged && (v->rec.len || v->sim.len)) {
			v->diverged = 1;
			if (v->rec.len)
				snprintf(v->msg, sizeof v->msg, "diverged at trace entry %" PRIu64 ": PyTorch did %s of %" PRIu64
					" bytes, the simulation did no further device call", v->rec.v[v->rec.head].index,
					op_names[v->rec.v[v->rec.head].kind], v->rec.v[v->rec.head].size);
			else
				snprintf(v->msg, sizeof v->msg, "diverged at the end of the trace: the simulation did %s of %" PRIu64
					" bytes that PyTorch did not", op_names[v->sim.v[v->sim.head].kind], v->sim.v[v->sim.head].size);
		}
		if (!v->diverged && !v->meta->history_truncated && compare_end_state(v->meta, as_engine_policy(e), v->msg, sizeof v->msg))
			v->diverged = 1;
		return 0;
	}
	compare(v);
	if (!v->diverged && ev->type == EV_ALLOC && (as_engine_summary(e)->num_ooms > v->ooms) != !!(ev->flags & EVF_OOM)) {
		v->diverged = 1;
		snprintf(v->msg, sizeof v->msg, "diverged at trace entry %" PRIu64 ": PyTorch %s the request of %" PRIu64
			" bytes, the simulation %s it", ev->index, (ev->flags & EVF_OOM) ? "failed (OOM)" : "served",
			ev->size, (ev->flags & EVF_OOM) ? "served" : "failed (OOM)");
	}
	return v->diverged;
}

int cmd_validate(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "config", required_argument, 0, 'c' }, CLI_DEVOPT(CAPACITY),
		CLI_DEVOPT(FRACTION), CLI_DEVOPT(DEVICE_TOTAL),
		{ "addresses", required_argument, 0, 'A' }, CLI_DEVOPT(DEVICE),
		{ "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 },
	};
	as_reader_opts ro = { .want_segments = 1 };
	const char *config = NULL;
	uint64_t recorded_ooms = 0;
	int addr_mode = ADDR_AUTO, c, dr;
	cli_dev dv = { .ro = &ro };
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:h", lo, NULL)) != -1) {
		if ((dr = cli_devopt("validate", &dv, c, optarg)) >= 0) {
			if (dr)
				return dr;
			continue;
		}
		switch (c) {
		case 'c': config = optarg; break;
		case 'A':
			if (!strcmp(optarg, "auto")) addr_mode = ADDR_AUTO;
			else if (!strcmp(optarg, "model")) addr_mode = ADDR_MODEL;
			else if (!strcmp(optarg, "recorded")) addr_mode = ADDR_RECORDED;
			else return cli_usage_error("validate", "--addresses: expected auto, model or recorded");
			break;
		case 'h': fputs(validate_usage, stdout); return 0;
		case 'V': cli_version(); return 0;
		default: return cli_usage_error("validate", "invalid option");
		}
	}
	uint64_t capacity = dv.capacity, dev_total = dv.total;
	double fraction = dv.fraction;
	int capacity_set = dv.capacity_set;
	if (optind != argc - 1)
		return cli_usage_error("validate", "expected one SNAPSHOT");
	const char *path = argv[optind];
	as_err err = { 0, "" };
	char *conf = NULL;
	as_device *dev = NULL;
	vstate v;
	memset(&v, 0, sizeof v);

	cli_catch_signals();
	/* the input is read once, into a temporary file: a snapshot's settings come at its end */
	as_source src;
	as_source_opts sopt = { .ro = &ro, .flags = AS_SRC_SPOOL,
		.no_binary = "a binary trace keeps no end-state segments; validate the snapshot it was made from" };
	memset(&src, 0, sizeof src);
	if (as_source_open(&src, path, &sopt, &err))
		goto done;
	const as_meta *meta = as_source_meta(&src);
	if (cli_resolve_config(path, meta, config ? config : "recorded", &conf, &err))
		goto done;
	if (strcmp(meta->format, "pytorch") && strcmp(meta->format, "native")) {
		as_fail(&err, AS_EXIT_USAGE, "%s: validate needs a trace with recorded device calls (a PyTorch snapshot)", path);
		goto done;
	}
	if (cli_fraction_capacity(path, meta, fraction, dev_total, &capacity, &capacity_set, &err))
		goto done;
	recorded_ooms = as_source_recorded_ooms(&src);
	const as_policy_ops *ops = as_policy_find("pytorch");
	v.warn = as_policy_prepare(ops, meta, capacity, &conf); /* the policy's settings on this trace */
	v.meta = meta;
	dev = as_sim_device_new(capacity, addr_mode);
	as_dev_set_total(dev, dev_total ? dev_total : meta->device_total);
	as_dev_set_observer(dev, observe, &v);
	as_run_sink sink = { validate_start, validate_before, validate_event, NULL, &v };
	as_run_opts run = { .path = path, .source = &src, .ops = ops, .config = conf, .capacity = capacity, .addr_mode = addr_mode,
		.device = dev, .prepared = 1, .full_stats = 1, .sink = &sink };
	as_summary s;
	if (as_run(&run, &s, &err))
		goto done;
	unsigned warn = v.warn;
	if (v.diverged) {
		if (recorded_ooms && (warn & AS_WARN_RECORDED_OOMS))
			cli_warn_recorded_ooms(path, recorded_ooms, meta);
		if (warn & AS_WARN_UNNAMED_POOLS)
			cli_warn_unnamed_pools(path, meta);
		printf("%s: %s%s\n", path, v.msg, meta->history_truncated ?
			" (the recorded history is truncated: segments PyTorch obtained before it began are not in the trace)" : "");
	} else {
		printf("%s: exact (%" PRIu64 " device calls, %zu end-state segments%s)\n", path, v.ncompared,
			meta->nsegments, meta->history_truncated ? "; history truncated, end state not compared" : "");
	}
done:
	as_device_destroy(dev);
	as_source_close(&src);
	free(conf);
	free(v.sim.v);
	free(v.rec.v);
	if (err.code)
		return cli_report(&err);
	return v.diverged ? AS_EXIT_DIVERGED : 0;
}
