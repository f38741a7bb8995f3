/* cmd_replay.c - allocsim replay: one trace, one policy, one summary row. */
#include "cli/cli.h"
#include "cli/devopts.h"
#include "util/oommsg.h"
#include "engine/engine.h"
#include "policies/policy.h"
#include "engine/run.h"
#include "engine/reconcile.h"
#include "readers/source.h"
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char replay_usage[] =
	"usage: allocsim replay [options] TRACE\n"
	"\n"
	"  -p, --policy NAME       policy to replay against (default pytorch; see 'allocsim policies')\n"
	"  -c, --config STRING     policy settings, e.g. 'max_split_size_mb:128' for pytorch;\n"
	"                          'recorded' uses the trace's own settings (default: policy defaults)\n"
	"      --capacity SIZE     memory the allocator may reserve (e.g. 80GiB); requests beyond it OOM\n"
	"      --fraction F        the capacity as set_per_process_memory_fraction(F): F x the device's\n"
	"                          total memory (the trace's, or --device-total SIZE)\n"
	"      --device-total SIZE the simulated device's total memory (cudaMemGetInfo's: rmm-pool's 50%\n"
	"                          pool, expandable segments' reservation) and --fraction's; default:\n"
	"                          the trace's, else an H200's 150109880320\n"
	"      --oom-message MSG   the capacity from PyTorch's out-of-memory message (or @FILE holding it)\n"
	"  -o, --output FILE       write the summary CSV to FILE (default: standard output)\n"
	"      --timeline FILE     write requested/allocated/reserved bytes after every event\n"
	"      --every N           with --timeline, only every N-th event\n"
	"      --stats FILE        write every statistic the policy keeps (pytorch: memory_stats() keys)\n"
	"      --summary           print the policy's statistics table (pytorch: torch.cuda.memory_summary())\n"
	"      --segments FILE     write the segment and block map at the reserved peak and at the end\n"
	"      --check             verify the policy's invariants after every event\n"
	"      --addresses MODE    auto (recorded segment addresses while the calls agree, default),\n"
	"                          model (the driver model only), recorded, or ascending (bottom-up,\n"
	"                          as the driver placed JAX's regions; bfc's default)\n"
	"      --stop-at-oom       end the replay at the first out-of-memory, as the program would\n"
	"      --free-at WHEN      requested or completed: a free the program made while other streams\n"
	"                          still used the block (record_stream) reaches the policy at the request\n"
	"                          or at its completion (default: the policy's own; doc/policies.md)\n"
	"      --backend NAME      sim (default: the simulated device), cuda (the real GPU: the calls of\n"
	"                          the simulation's decisions, at the driver's addresses), or shuffled\n"
	"                          (the same over a simulated driver placing elsewhere: no GPU needed)\n"
	"      --device N          the device of a multi-GPU snapshot to replay (default: the one with\n"
	"                          history); with --backend cuda also the GPU ordinal (default 0);\n"
	"                          host: the snapshot's pinned host history (PyTorch 2.14+ host_traces,\n"
	"                          recorded with record_pinned_host_memory=True), for -p pytorch-pinned\n"
	"      --latency FILE      write one row per malloc/free: event,op,bytes,ns,device_us,timing\n"
	"      --device-log FILE   write one row per device call: call,event,gap,op,model_op,bytes,\n"
	"                          address,result,us,reserved_bytes (doc/real-gpu.md)\n"
	"      --latency-model F   device-call latency model for the simulation (default: the bundled\n"
	"                          H200 calibration, h200-latency-model.csv); 'none' for none\n"
	"      --no-timing         print 0 for wall_seconds and events_per_second (byte-identical output)\n"
	"      --cache             keep the trace's binary form beside it (TRACE.asbin) and replay from it\n"
	"                          while the trace is unchanged (a snapshot is then decoded only once)\n"
	"  -h, --help              show this help\n";

typedef struct seg_out {
	FILE *f;
	const char *moment;
	uint64_t n;
} seg_out;

static void seg_rows(void *ctx, const as_seg_view *v)
{
	seg_out *o = ctx;
	uint64_t off = 0;
	for (size_t i = 0; i < v->nblocks; i++) {
		static const char *const st[] = { "free", "allocated", "pending_free" };
		fprintf(o->f, "%s,%" PRIu64 ",0x%" PRIx64 ",%" PRIu64 ",%" PRIu64 ",%s,%d,%" PRIu64 ",%" PRIu64 ",%s\n", o->moment, o->n,
			v->addr, v->size, v->stream, v->is_small ? "small" : "large", v->is_expandable, off, v->block_sizes[i],
			st[v->block_states[i]]);
		off += v->block_sizes[i];
	}
	o->n++;
}

typedef struct seg_pass {
	seg_out so;
	uint64_t peak_event;
	int written;
} seg_pass;

static int seg_event(void *ctx, as_engine *e, const as_event *ev)
{
	seg_pass *sp = ctx;
	as_q_segments q = { seg_rows, &sp->so };
	if (!ev) {
		sp->so.moment = "end";
		sp->so.n = 0;
		as_policy_query(as_engine_policy(e), AS_Q_SEGMENTS, &q);
	} else if (!sp->written && as_engine_summary(e)->events == sp->peak_event + 1) {
		as_policy_query(as_engine_policy(e), AS_Q_SEGMENTS, &q);
		sp->written = 1;
	}
	return 0;
}

/* The segment map needs the state at the reserved peak, known only after a first pass: replay
 * again, writing the map after the peak's event and at the end. */
static int write_segments(const char *path, const as_evbuf *events, const as_policy_ops *ops, const char *conf,
	uint64_t capacity, int addr_mode, int free_at, int resolve_maybe, uint64_t peak_event, FILE *f, as_err *err)
{
	fputs("moment,segment,segment_address,segment_bytes,stream,pool,expandable,block_offset,block_bytes,state\n", f);
	seg_pass sp = { { f, "peak", 0 }, peak_event, 0 };
	as_run_sink sk = { .event = seg_event, .ctx = &sp };
	as_run_opts o = { .path = path, .events = events, .ops = ops, .config = conf, .capacity = capacity, .addr_mode = addr_mode,
		.free_at = free_at, .resolve_maybe = resolve_maybe > 0, .sink = &sk };
	as_summary s;
	return as_run(&o, &s, err);
}

/* Every output is checked (and opened: a FIFO blocks here until its reader comes) before the
 * replay, so a bad path fails at once; none is committed unless all were written. */
static int open_outputs(as_outfile *const *of, const char *const *paths, size_t n, const char *input, as_err *err)
{
	if (as_outputs_check(paths, n, &input, 1, err))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (paths[i] && as_outfile_open(of[i], paths[i], err))
			return -1;
	return 0;
}

typedef struct stat_out {
	FILE *f;
} stat_out;

/* ALLOCSIM_RAW_ADDRESSES=1: the policy sees the driver's addresses (--backend cuda before issue 31),
 * to measure what that changes; the default is the simulation's addresses (device_map.c). */
static int raw_addresses(void)
{
	const char *v = getenv("ALLOCSIM_RAW_ADDRESSES");
	return v && *v && strcmp(v, "0");
}

static void stat_line(void *ctx, const char *key, int64_t v)
{
	fprintf(((stat_out *)ctx)->f, "%s,%" PRId64 "\n", key, v);
}

/* replay's outputs around the replay loop (engine/run.h) */
typedef struct replay_sink {
	const char *path, *policy, *conf;
	const as_meta *meta;
	as_source *src;
	const as_policy_ops *ops;
	uint64_t capacity, every, recorded_ooms;
	int addr_mode, free_at, check, no_timing, table, table_flush;
	unsigned warn;
	FILE *timeline, *latency, *stats, *segments, *summary, *devlog;
} replay_sink;

static int replay_start(void *ctx, as_engine *e, as_err *err)
{
	replay_sink *r = ctx;
	(void)err;
	cli_warn_gc(r->warn); /* (after the settings parsed) */
	as_engine_outputs eo = { .timeline = r->timeline, .every = r->every, .latency = r->latency, .check = r->check,
		.host_timing = !r->no_timing };
	as_engine_set_outputs(e, &eo);
	if (r->timeline)
		fputs("event,type,time_us,requested_bytes,allocated_bytes,reserved_bytes\n", r->timeline);
	if (r->latency)
		fputs("event,op,bytes,ns,device_us,timing\n", r->latency);
	if (r->devlog) {
		as_dev_set_log(as_engine_device(e), r->devlog);
		as_dev_log_header(r->devlog);
	}
	return 0;
}

static int replay_row(void *ctx, as_engine *e, const as_summary *s, as_err *err)
{
	replay_sink *r = ctx;
	const as_meta *meta = r->meta;
	if (r->recorded_ooms && (r->warn & AS_WARN_RECORDED_OOMS)) /* (other policies take limits in -c) */
		cli_warn_recorded_ooms(r->path, r->recorded_ooms, meta);
	if (r->warn & AS_WARN_UNNAMED_POOLS)
		cli_warn_unnamed_pools(r->path, meta);
	if (meta->trace_overflowed)
		fprintf(stderr, "%s: warning: %s: the snapshot's history ring overflowed (trace_alloc_overflowed; it keeps %" PRIu64
			" entries): the recorded history begins mid-run\n", as_progname, as_source_name(r->src, r->path), meta->trace_max_entries);
	if (meta->history_truncated)
		fprintf(stderr, "%s: warning: %s: the recorded history is truncated (%" PRIu64 " frees of allocations made "
			"before it began were skipped); results cover the recorded part only\n", as_progname, as_source_name(r->src, r->path),
			meta->unmatched_frees);
	if (r->segments && write_segments(r->path, r->src->b, r->ops, r->conf, r->capacity, r->addr_mode, r->free_at,
		as_reconcile_resolved(e), as_engine_peak_event(e), r->segments, err))
		return -1;
	if (r->stats) {
		fputs("key,value\n", r->stats);
		stat_out so_ctx = { r->stats };
		as_q_stats q = { stat_line, &so_ctx };
		as_policy_query(as_engine_policy(e), AS_Q_STATS, &q);
		as_summary_stats(r->stats, s);
	}
	as_summary_header(r->summary);
	as_summary_row(r->summary, r->path, r->policy, r->conf, r->capacity, s);
	if (r->table) {
		if (r->table_flush)
			fflush(stdout);
		as_policy_query(as_engine_policy(e), AS_Q_SUMMARY, stdout);
	}
	return 0;
}

int cmd_replay(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "policy", required_argument, 0, 'p' }, { "config", required_argument, 0, 'c' },
		CLI_DEVOPT(CAPACITY), { "output", required_argument, 0, 'o' },
		{ "timeline", required_argument, 0, 'T' }, { "every", required_argument, 0, 'E' },
		{ "stats", required_argument, 0, 'S' }, { "summary", no_argument, 0, 'Y' },
		{ "check", no_argument, 0, 'K' }, { "addresses", required_argument, 0, 'A' },
		{ "no-timing", no_argument, 0, 'N' }, { "stop-at-oom", no_argument, 0, 'O' },
		{ "segments", required_argument, 0, 'G' }, CLI_DEVOPT(BACKEND),
		CLI_DEVOPT(DEVICE), { "latency", required_argument, 0, 'L' },
		{ "latency-model", required_argument, 0, 'M' }, { "device-log", required_argument, 0, 'J' },
		{ "cache", no_argument, 0, 'W' }, CLI_DEVOPT(FRACTION),
		CLI_DEVOPT(DEVICE_TOTAL), { "oom-message", required_argument, 0, 'Q' },
		{ "free-at", required_argument, 0, OPT_FREE_AT },
		{ "help", no_argument, 0, 'h' }, { "version", no_argument, 0, 'V' }, { 0, 0, 0, 0 },
	};
	const char *policy = "pytorch", *config = NULL, *out = NULL, *timeline = NULL, *stats = NULL, *segments = NULL;
	const char *latency = NULL, *model_path = NULL, *devlog = NULL;
	uint64_t every = 1;
	int cache = 0, summary = 0, check = 0, addr_mode = ADDR_AUTO, no_timing = 0, stop_at_oom = 0, c, dr;
	int free_at = AS_FREE_AT_POLICY;
	as_reader_opts ro = { 0 };
	cli_dev dv = { .ro = &ro, .device_max = 1024, .device_host_named = 1 }; /* --device N is also the GPU's ordinal */
	optind = 1;
	cli_catch_signals();
	while ((c = getopt_long(argc, argv, "p:c:o:h", lo, NULL)) != -1) {
		if ((dr = cli_devopt("replay", &dv, c, optarg)) >= 0) {
			if (dr)
				return dr;
			continue;
		}
		switch (c) {
		case 'p': policy = optarg; break;
		case 'c': config = optarg; break;
		case 'Q': { /* PyTorch's OOM message: its limit as the capacity (doc/advise.md, "Target memory") */
			char why[300];
			as_oom_msg om;
			char *text = as_oom_msg_arg(optarg, why, sizeof why);
			int bad = !text || as_oom_msg_parse(text, &om, why, sizeof why);
			free(text);
			if (bad)
				return cli_usage_error("replay", "--oom-message: %s", why);
			if (dv.capacity_set)
				return cli_usage_error("replay", "give --capacity or --oom-message, not both");
			dv.capacity = om.capacity;
			dv.capacity_set = 1;
			fprintf(stderr, "%s: note: --oom-message: capacity %" PRIu64 " bytes (%s, +-%" PRIu64 " bytes as PyTorch prints it)\n",
				as_progname, dv.capacity, om.capacity_from_allowed ? "its 'allowed' limit" : "allocated + reserved-unallocated + free",
				om.capacity_ulp);
			break;
		}
		case 'o': out = optarg; break;
		case 'T': timeline = optarg; break;
		case 'E':
			if (as_parse_u64(optarg, &every) || !every)
				return cli_usage_error("replay", "--every: '%s' is not a positive number", optarg);
			break;
		case 'S': stats = optarg; break;
		case 'Y': summary = 1; break;
		case 'K': check = 1; break;
		case 'A':
			if (!strcmp(optarg, "auto")) addr_mode = ADDR_AUTO;
			else if (!strcmp(optarg, "model")) addr_mode = ADDR_MODEL;
			else if (!strcmp(optarg, "recorded")) addr_mode = ADDR_RECORDED;
			else if (!strcmp(optarg, "ascending")) addr_mode = ADDR_ASCENDING;
			else return cli_usage_error("replay", "--addresses: expected auto, model, recorded or ascending, not '%s'", optarg);
			break;
		case 'N': no_timing = 1; break;
		case 'O': stop_at_oom = 1; break;
		case 'G': segments = optarg; break;
		case 'L': latency = optarg; break;
		case 'M': model_path = optarg; break;
		case 'J': devlog = optarg; break;
		case 'W': cache = 1; break;
		case OPT_FREE_AT:
			if ((free_at = as_free_at_parse(optarg)) < 0)
				return cli_usage_error("replay", "--free-at: requested or completed, not '%s'", optarg);
			break;
		case 'h': fputs(replay_usage, stdout); return 0;
		case 'V': cli_version(); return 0;
		default: return cli_usage_error("replay", "invalid option");
		}
	}
	uint64_t capacity = dv.capacity, dev_total = dv.total, ordinal = ro.device > 0 ? (uint64_t)ro.device : 0;
	double fraction = dv.fraction;
	int capacity_set = dv.capacity_set, use_cuda = dv.backend; /* 1: the GPU, 2: the shuffled driver */
	if (cache && ro.has_device)
		return cli_usage_error("replay", "--cache keeps the default device's events; not with --device");
	if (optind != argc - 1)
		return cli_usage_error("replay", optind >= argc ? "missing TRACE" : "expected one TRACE, got %d", argc - optind);
	const char *path = argv[optind];
	const as_policy_ops *ops = as_policy_find(policy);
	if (!ops) {
		char um[256];
		as_policy_unknown(policy, um, sizeof um);
		return cli_usage_error("replay", "%s", um);
	}
	if (ro.has_device && ro.device == AS_DEVICE_HOST && strcmp(ops->name, "pytorch-pinned"))
		fprintf(stderr, "%s: warning: --device host: the history is PyTorch's pinned host cache's (CachingHostAllocator), "
			"replayed here with the %s policy; -p pytorch-pinned simulates that cache\n", as_progname, ops->name);
	if (segments && !(ops->flags & AS_CAP_SEGMENTS))
		return cli_usage_error("replay", "--segments: the %s policy has no segment map", ops->name);
	if (summary && !(ops->flags & AS_CAP_SUMMARY))
		return cli_usage_error("replay", "--summary: the %s policy has no statistics table", ops->name);

	as_err err = { 0, "" };
	char *conf = NULL;
	as_device *dev = NULL;
	replay_sink rs;
	as_outfile tl = { 0 }, so = { 0 }, sf = { 0 }, lf = { 0 }, df = { 0 }, gf = { 0 }, po = { 0 };
	/* the summary (stdout without -o), the other files, and stdout again for --summary after -o */
	as_outfile *const ofs[] = { &so, &tl, &sf, &gf, &lf, &df, &po };
	const char *const opaths[] = { out ? out : "-", timeline, stats, segments, latency, devlog };
	const size_t nofs = sizeof ofs / sizeof ofs[0];
	as_lat_model model = { 0 };
	int have_model = 0;

	as_source src;
	memset(&src, 0, sizeof src);
	cli_catch_signals(); /* from here: an output FIFO's open waits for its reader */
	if (open_outputs(ofs, opaths, sizeof opaths / sizeof opaths[0], path, &err))
		goto done;
	if (summary && out && as_outfile_open(&po, "-", &err))
		goto done;
	/* how the trace is read (readers/source.c): --segments' second pass needs the events whole, an
	 * offline policy plans over them where they are decoded whole anyway */
	as_source_opts sopt = { .ro = &ro, .flags = (segments ? AS_SRC_WHOLE : 0) | ((ops->flags & AS_CAP_PLAN) ? AS_SRC_KEEP : 0) |
		(cache ? AS_SRC_CACHE : 0) };
	if (as_source_open(&src, path, &sopt, &err))
		goto done;
	const as_meta *meta = as_source_meta(&src);
	if (cli_resolve_config(path, meta, config ? config : "", &conf, &err))
		goto done;
	if (cli_fraction_capacity(path, meta, fraction, dev_total, &capacity, &capacity_set, &err))
		goto done;
	if (!capacity_set && meta->capacity)
		capacity = meta->capacity;
	unsigned warn = as_policy_prepare(ops, meta, capacity, &conf); /* the policy's settings on this trace */
	if (ro.has_device && ro.device == AS_DEVICE_HOST && meta->settings &&
	    (strstr(meta->settings, "pinned_max_round_threshold_mb") || strstr(meta->settings, "pinned_max_cached_size_mb") ||
	     strstr(meta->settings, "pinned_free_catch_all")))
		fprintf(stderr, "%s: warning: %s: the recording set pinned host keys of PyTorch 2.12+ (%s) that the replayed "
			"host cache (2.11's) does not apply: its blocks may differ (doc/policies.md)\n", as_progname, path, meta->settings);
	if (use_cuda == 1) {
		as_device *gpu = as_cuda_device_new((int)ordinal, capacity, &err);
		if (!gpu)
			goto done;
		dev = raw_addresses() ? gpu : as_mapped_device_new(gpu, capacity, addr_mode);
	} else {
		if (use_cuda == 2) {
			as_device *drv = as_sim_device_new(capacity, ADDR_SHUFFLED);
			as_dev_set_total(drv, dev_total ? dev_total : meta->device_total);
			dev = raw_addresses() ? drv : as_mapped_device_new(drv, capacity, addr_mode);
		} else {
			dev = as_sim_device_new(capacity, addr_mode);
			as_dev_set_total(dev, dev_total ? dev_total : meta->device_total);
		}
		if (cli_load_model(model_path, &model, &have_model, &err))
			goto done;
		if (have_model)
			as_dev_set_model(dev, &model);
	}
	rs = (replay_sink){ .path = path, .policy = policy, .meta = meta, .src = &src, .ops = ops, .conf = conf, .capacity = capacity,
		.addr_mode = addr_mode, .free_at = free_at, .warn = warn, .check = check, .no_timing = no_timing, .every = every,
		.timeline = timeline ? tl.fp : NULL, .latency = latency ? lf.fp : NULL, .stats = stats ? sf.fp : NULL,
		.segments = segments ? gf.fp : NULL, .summary = so.fp, .devlog = devlog ? df.fp : NULL, .table = summary, .table_flush = summary && !out };
	as_run_sink sink = { replay_start, NULL, NULL, replay_row, &rs };
	as_run_opts run = { .path = path, .source = &src, .ops = ops, .config = conf, .capacity = capacity, .addr_mode = addr_mode,
		.stop_at_oom = stop_at_oom, .free_at = free_at, .device = dev, .prepared = 1, .full_stats = stats || summary || check,
		.wall = !no_timing, .sink = &sink, .recorded_ooms = &rs.recorded_ooms };
	as_summary s;
	as_run(&run, &s, &err);
done:
	if (err.code && cli_interrupted) {
		/* a read cut short by the signal (a pipe, a FIFO) is no data error; nothing is left on the device */
		as_err_clear(&err);
		as_fail(&err, AS_EXIT_INTERRUPTED, "interrupted; every device allocation was released, nothing was written");
	}
	if (dev)
		as_dev_set_log(dev, NULL);
	as_outfiles_close(ofs, nofs, !err.code, &err);
	as_device_destroy(dev);
	as_lat_model_free(&model);
	as_source_close(&src);
	free(conf);
	if (err.code)
		return cli_report(&err);
	return 0;
}
