// c10_replay.cpp - replay a trace's allocations and frees through PyTorch's own CUDA caching
// allocator (c10::cuda::CUDACachingAllocator of libc10_cuda, the installed torch), for the
// side-by-side of doc/real-gpu.md (issue 15): the cost per event of the real allocator, warm, against
// allocsim's simulation of the same trace, and the real allocator's statistics as a cross-check.
//
// Input: allocsim's native text format (`allocsim convert T -o T.trace`, doc/trace-format.md), plain.
// Settings: PYTORCH_CUDA_ALLOC_CONF must be set in the environment (libc10_cuda reads it when it is
// loaded, before main); --capacity BYTES sets the per-process memory fraction so that the allowed
// memory is exactly BYTES (allocsim's --capacity).
//
// What is replayed, in trace order, on one thread:
//   a ID SIZE STREAM   raw_alloc_with_stream(SIZE, stream): stream 0 is the default stream, every
//                      other trace stream a cudaStreamCreate'd stream of its own; an out-of-memory
//                      (c10::OutOfMemoryError) is counted and the id stays unallocated
//   f ID               raw_delete
//   r ID               nothing (the free happens at f: this program makes no cross-stream use)
//   e                  emptyCache()
//   e maybe            resolved as allocsim's reconciliation stage does for a replay of the recorded
//                      settings (src/engine/reconcile.c, doc/pytorch-policy.md): at the next
//                      allocation, the release run that followed it (the X/U records) is the
//                      allocator's own when that allocation's fallback releases it (here: the number
//                      of device frees and the bytes released equal the run's); otherwise the
//                      snapshot saw an empty_cache(), which is then called before that allocation.
//                      A phase or free_requested record resolves it as an empty_cache() too.
//                      Since the real allocator cannot be asked beforehand, a mismatch restarts the
//                      first pass from an empty cache with that decision fixed (--max-restarts).
//   p, S, X, M, U      nothing
//
// Passes: pass 0 starts from an empty cache with the statistics reset; its statistics are the
// cross-check (printed as the c10_* columns). Then --passes N timed passes replay the same
// operations warm (the cache holds what the previous pass left); after each pass the allocations
// still live are freed, outside the timed part. ns/event = wall time of a pass (CLOCK_MONOTONIC) /
// (allocations + frees); the median, minimum and maximum over the timed passes are printed.
//
// usage: PYTORCH_CUDA_ALLOC_CONF=CONF c10_replay [--capacity BYTES] [--passes N] [--name NAME]
//            [--max-restarts N] [--header] TRACE
//        c10_replay --parse-only TRACE       (no GPU: what would be replayed)
// Output: one CSV row (with --header, the header line first). Exit status: 0 ok, 64 usage,
// 65 bad trace, 66 missing file, 70 CUDA/c10 error.
//
// Build (scripts/c10-side-by-side.sh does it): g++ -O2 -std=c++17 against torch's include paths
// (torch.utils.cpp_extension.include_paths()) and CUDA's, -lc10_cuda -lc10 -lcudart.

#ifndef C10_REPLAY_NO_TORCH
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

enum Kind : uint8_t { OP_ALLOC, OP_FREE, OP_FREE_REQ, OP_EMPTY, OP_MAYBE, OP_PHASE };

struct Op {
	Kind kind;
	uint8_t oom;       // OP_ALLOC: the recording's request failed
	uint32_t stream;   // OP_ALLOC: index into the stream table
	uint32_t slot;     // OP_ALLOC/OP_FREE/OP_FREE_REQ: dense slot; OP_MAYBE: index of the run
	uint64_t size;     // OP_ALLOC: requested bytes
};

struct Run {                // the release run recorded after an `e maybe`
	uint64_t count = 0, bytes = 0;
};

struct Trace {
	std::vector<Op> ops;
	std::vector<Run> runs;
	std::vector<uint64_t> stream_ids; // trace stream numbers, in order of first use
	uint32_t nslots = 0;
	uint64_t allocs = 0, frees = 0, empties = 0, oom_marked = 0;
};

[[noreturn]] void die(int code, const char *fmt, const char *a = "", long b = 0, const char *c = "")
{
	fprintf(stderr, "c10_replay: ");
	fprintf(stderr, fmt, a, b, c);
	fputc('\n', stderr);
	exit(code);
}

bool parse_u64(const char *s, uint64_t *out)
{
	if (!s || !*s || *s == '-' || *s == '+')
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ? 16 : 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

// Reads allocsim's native text format (doc/trace-format.md), version 1.
Trace read_trace(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		die(66, "%s: %s", path, 0, strerror(errno));
	Trace t;
	std::unordered_map<uint64_t, uint32_t> live;   // trace id -> slot, while allocated
	std::unordered_map<uint64_t, uint32_t> streams;
	std::vector<uint32_t> free_slots;
	char line[4096];
	long lineno = 0;
	bool in_run = false;   // X/U records after an `e maybe` count into the last run
	while (fgets(line, sizeof line, f)) {
		lineno++;
		size_t len = strlen(line);
		if (len == sizeof line - 1 && line[len - 1] != '\n')
			die(65, "%s:%ld: line too long", path, lineno);
		if (lineno == 1) {
			if (strncmp(line, "#allocsim-trace 1", 17) != 0 || (line[17] != '\n' && line[17] != '\r' && line[17] != ' ' && line[17]))
				die(65, "%s:%ld: not an allocsim native trace, version 1 (convert it with 'allocsim convert')", path, lineno);
			continue;
		}
		char *fld[8];
		int n = 0;
		for (char *p = strtok(line, " \t\r\n"); p && n < 8; p = strtok(nullptr, " \t\r\n"))
			fld[n++] = p;
		if (n == 0 || fld[0][0] == '#')
			continue;
		char k = fld[0][1] ? '?' : fld[0][0];
		Op op{};
		uint64_t id = 0, v = 0;
		switch (k) {
		case 'a': {
			if (n < 4 || !parse_u64(fld[1], &id) || !parse_u64(fld[2], &v) || v == 0)
				die(65, "%s:%ld: bad allocation record", path, lineno);
			uint64_t s;
			if (!parse_u64(fld[3], &s))
				die(65, "%s:%ld: bad stream", path, lineno);
			for (int i = 4; i < n; i++)
				if (!strcmp(fld[i], "oom"))
					op.oom = 1;
			if (live.count(id))
				die(65, "%s:%ld: id %s allocated while live", path, lineno, fld[1]);
			auto it = streams.find(s);
			if (it == streams.end()) {
				it = streams.emplace(s, (uint32_t)t.stream_ids.size()).first;
				t.stream_ids.push_back(s);
			}
			uint32_t slot;
			if (!free_slots.empty()) {
				slot = free_slots.back();
				free_slots.pop_back();
			} else {
				slot = t.nslots++;
			}
			live.emplace(id, slot);
			op.kind = OP_ALLOC;
			op.size = v;
			op.stream = it->second;
			op.slot = slot;
			t.allocs++;
			t.oom_marked += op.oom;
			in_run = false;
			break;
		}
		case 'f':
		case 'r': {
			if (n < 2 || !parse_u64(fld[1], &id))
				die(65, "%s:%ld: bad free record", path, lineno);
			auto it = live.find(id);
			if (it == live.end())
				die(65, "%s:%ld: free of id %s, which is not live", path, lineno, fld[1]);
			op.kind = k == 'f' ? OP_FREE : OP_FREE_REQ;
			op.slot = it->second;
			if (k == 'f') {
				free_slots.push_back(it->second);
				live.erase(it);
				t.frees++;
			}
			in_run = false;
			break;
		}
		case 'e': {
			bool maybe = false;
			for (int i = 1; i < n; i++)
				if (!strcmp(fld[i], "maybe"))
					maybe = true;
			if (maybe) {
				op.kind = OP_MAYBE;
				op.slot = (uint32_t)t.runs.size();
				t.runs.emplace_back();
				in_run = true;
			} else {
				op.kind = OP_EMPTY;
				t.empties++;
				in_run = false;
			}
			break;
		}
		case 'p':
			op.kind = OP_PHASE;
			in_run = false;
			break;
		case 'X':
		case 'U':
			if (n < 3 || !parse_u64(fld[2], &v))
				die(65, "%s:%ld: bad segment record", path, lineno);
			if (in_run) {
				t.runs.back().count++;
				t.runs.back().bytes += v;
			}
			continue;
		case 'S':
		case 'M':
			continue;
		default:
			die(65, "%s:%ld: unknown record '%s'", path, lineno, fld[0]);
		}
		t.ops.push_back(op);
	}
	if (ferror(f))
		die(66, "%s: read error", path);
	fclose(f);
	return t;
}

int print_parsed(const char *name, const Trace &t)
{
	uint64_t rc = 0, rb = 0;
	for (auto &r : t.runs) {
		rc += r.count;
		rb += r.bytes;
	}
	printf("%s: %" PRIu64 " allocs, %" PRIu64 " frees, %zu e maybe (%" PRIu64 " releases, %" PRIu64
	       " bytes), %" PRIu64 " e, %" PRIu64 " oom-marked, %zu streams, %u slots\n", name, t.allocs, t.frees,
	       t.runs.size(), rc, rb, t.empties, t.oom_marked, t.stream_ids.size(), t.nslots);
	return 0;
}

} // namespace

#ifndef C10_REPLAY_NO_TORCH
namespace {

namespace CA = c10::cuda::CUDACachingAllocator;

double now_s()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define CUDA_OK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) die(70, "%s: %s", #x, 0, cudaGetErrorString(e_)); } while (0)

struct Counters {
	int64_t device_alloc, device_free, retries, ooms, reserved_freed;
};

Counters counters(int dev)
{
	auto s = CA::getDeviceStats(dev);
	return { s.num_device_alloc, s.num_device_free, s.num_alloc_retries, s.num_ooms,
		 s.reserved_bytes[0].freed };
}

struct Replayer {
	const Trace &t;
	int dev;
	std::vector<cudaStream_t> streams;
	std::vector<void *> ptr;         // per slot; nullptr when not allocated (or refused)
	std::vector<int8_t> decision;    // per run: -1 unknown, 0 the allocator's own, 1 empty_cache()
	uint64_t ooms = 0;               // refusals seen in the last pass

	Replayer(const Trace &tr, int d) : t(tr), dev(d), ptr(tr.nslots, nullptr), decision(tr.runs.size(), -1)
	{
		for (size_t i = 0; i < t.stream_ids.size(); i++) {
			cudaStream_t s = nullptr;
			if (t.stream_ids[i] != 0)
				CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
			streams.push_back(s);
		}
	}

	void alloc(const Op &op)
	{
		try {
			ptr[op.slot] = CA::raw_alloc_with_stream(op.size, streams[op.stream]);
		} catch (const c10::OutOfMemoryError &) {
			ptr[op.slot] = nullptr;
			ooms++;
		}
	}

	// One pass over the operations. learn: resolve unknown `e maybe` decisions (pass 0); returns
	// false when a decision was fixed that needs the pass to start again.
	bool pass(bool learn)
	{
		ooms = 0;
		long pending = -1; // the run of an unresolved `e maybe`
		for (const Op &op : t.ops) {
			if (pending >= 0 && (op.kind == OP_ALLOC || op.kind == OP_FREE_REQ || op.kind == OP_PHASE)) {
				long k = pending;
				pending = -1;
				if (op.kind != OP_ALLOC && decision[k] < 0)
					decision[k] = 1;
				if (decision[k] == 1) {
					CA::emptyCache();
				} else if (decision[k] < 0 && learn) {
					// learn: does this allocation's own fallback release what was recorded?
					Counters b = counters(dev);
					alloc(op);
					Counters a = counters(dev);
					bool own = (uint64_t)(a.device_free - b.device_free) == t.runs[k].count &&
						   (uint64_t)(a.reserved_freed - b.reserved_freed) == t.runs[k].bytes;
					decision[k] = own ? 0 : 1;
					if (!own)
						return false; // an empty_cache() was due before this allocation
					continue;
				}
			}
			switch (op.kind) {
			case OP_ALLOC:
				alloc(op);
				break;
			case OP_FREE:
				if (ptr[op.slot]) {
					CA::raw_delete(ptr[op.slot]);
					ptr[op.slot] = nullptr;
				}
				break;
			case OP_EMPTY:
				CA::emptyCache();
				break;
			case OP_MAYBE:
				pending = op.slot; // a later `e maybe` replaces an unresolved one (as allocsim does)
				break;
			case OP_FREE_REQ:
			case OP_PHASE:
				break;
			}
		}
		return true;
	}

	void free_live()
	{
		for (auto &p : ptr)
			if (p) {
				CA::raw_delete(p);
				p = nullptr;
			}
	}
};

} // namespace

int replay_main(int argc, char **argv)
{
	uint64_t capacity = 0;
	long passes = 11, max_restarts = 1000;
	const char *name = nullptr, *path = nullptr;
	bool header = false, parse_only = false;
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		auto val = [&](void) -> const char * {
			if (i + 1 >= argc)
				die(64, "%s needs a value", argv[i]);
			return argv[++i];
		};
		if (a == "--capacity") {
			if (!parse_u64(val(), &capacity) || capacity == 0)
				die(64, "--capacity: expected bytes, got '%s'", argv[i]);
		} else if (a == "--passes") {
			passes = atol(val());
			if (passes < 1 || passes > 100000)
				die(64, "--passes: expected 1 to 100000, got '%s'", argv[i]);
		} else if (a == "--max-restarts") {
			max_restarts = atol(val());
		} else if (a == "--name") {
			name = val();
		} else if (a == "--header") {
			header = true;
		} else if (a == "--parse-only") {
			parse_only = true;
		} else if (a[0] == '-' || path) {
			die(64, "usage: PYTORCH_CUDA_ALLOC_CONF=CONF c10_replay [--capacity BYTES] [--passes N] [--name NAME] [--max-restarts N] [--header] [--parse-only] TRACE%s", "");
		} else {
			path = argv[i];
		}
	}
	if (!path)
		die(64, "no trace given (usage: c10_replay [options] TRACE)");
	Trace t = read_trace(path);
	if (!name)
		name = path;
	if (parse_only)
		return print_parsed(name, t);
	const char *conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
	int dev = 0, ndev = 0;
	CUDA_OK(cudaGetDeviceCount(&ndev));
	if (ndev < 1)
		die(70, "no CUDA device");
	CUDA_OK(cudaSetDevice(dev));
	CA::init(ndev);
	size_t freeb = 0, total = 0;
	CUDA_OK(cudaMemGetInfo(&freeb, &total));
	double fraction = 0;
	if (capacity) {
		// the fraction whose int(fraction * total) is exactly the capacity
		fraction = ((double)capacity + 0.5) / (double)total;
		if ((uint64_t)(fraction * (double)total) != capacity)
			die(70, "no fraction of %s bytes gives the capacity", std::to_string(total).c_str());
		CA::setMemoryFraction(fraction, dev);
	}
	Replayer r(t, dev);
	const uint64_t events = t.allocs + t.frees;

	// pass 0: from an empty cache, statistics reset; restarted while `e maybe` decisions are learnt
	long restarts = 0;
	double cold = 0;
	Counters c0{};
	for (;;) {
		r.free_live();
		CA::emptyCache();
		CUDA_OK(cudaDeviceSynchronize());
		CA::resetAccumulatedStats(dev);
		CA::resetPeakStats(dev);
		c0 = counters(dev);
		double s = now_s();
		bool done = r.pass(true);
		cold = now_s() - s;
		if (done)
			break;
		if (++restarts > max_restarts)
			die(70, "%s: more than --max-restarts restarts", name);
	}
	auto st = CA::getDeviceStats(dev);
	Counters c1 = counters(dev);
	uint64_t cold_ooms = r.ooms;
	int64_t final_reserved = st.reserved_bytes[0].current, final_allocated = st.allocated_bytes[0].current;
	uint64_t resolved_empty = 0;
	for (auto d : r.decision)
		resolved_empty += d == 1;
	r.free_live();

	// warm passes, timed
	std::vector<double> ns;
	Counters w0{}, w1{};
	for (long p = 0; p < passes; p++) {
		w0 = counters(dev);
		double s = now_s();
		r.pass(false);
		double e = now_s() - s;
		w1 = counters(dev);
		r.free_live();
		ns.push_back(e * 1e9 / (double)(events ? events : 1));
	}
	std::vector<double> sorted = ns;
	std::sort(sorted.begin(), sorted.end());
	double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
					   : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
	r.free_live();
	CA::emptyCache();

	if (header)
		printf("trace,conf,capacity_bytes,device_total_bytes,events,allocs,frees,e_maybe,e_maybe_empty_cache,restarts,"
		       "c10_peak_reserved_bytes,c10_peak_allocated_bytes,c10_peak_requested_bytes,c10_final_reserved_bytes,"
		       "c10_final_allocated_bytes,c10_num_device_alloc,c10_num_device_free,c10_num_alloc_retries,c10_num_ooms,"
		       "c10_cold_ns_per_event,passes,c10_warm_ns_per_event_median,c10_warm_ns_per_event_min,"
		       "c10_warm_ns_per_event_max,c10_warm_last_pass_device_alloc,c10_warm_last_pass_device_free,c10_warm_last_pass_ooms\n");
	printf("%s,\"%s\",%" PRIu64 ",%zu,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%zu,%" PRIu64 ",%ld,"
	       "%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ","
	       "%.1f,%ld,%.1f,%.1f,%.1f,%" PRId64 ",%" PRId64 ",%" PRIu64 "\n",
	       name, conf ? conf : "", capacity, total, events, t.allocs, t.frees, t.runs.size(), resolved_empty, restarts,
	       st.reserved_bytes[0].peak, st.allocated_bytes[0].peak, st.requested_bytes[0].peak, final_reserved,
	       final_allocated, c1.device_alloc - c0.device_alloc, c1.device_free - c0.device_free, c1.retries - c0.retries,
	       c1.ooms - c0.ooms, cold * 1e9 / (double)(events ? events : 1), passes, median, sorted.front(), sorted.back(),
	       w1.device_alloc - w0.device_alloc, w1.device_free - w0.device_free, r.ooms);
	if (cold_ooms != (uint64_t)(c1.ooms - c0.ooms))
		fprintf(stderr, "c10_replay: %s: %" PRIu64 " refusals caught, num_ooms %" PRId64 "\n", name, cold_ooms, c1.ooms - c0.ooms);
	return 0;
}

int main(int argc, char **argv)
{
	try {
		return replay_main(argc, argv);
	} catch (const c10::Error &e) {
		die(70, "c10 error: %s", e.what_without_backtrace());
	}
}

#else  // C10_REPLAY_NO_TORCH: the trace reader alone (checked without torch: --parse-only)

int main(int argc, char **argv)
{
	if (argc != 3 || strcmp(argv[1], "--parse-only"))
		die(64, "built without torch: only --parse-only TRACE");
	return print_parsed(argv[2], read_trace(argv[2]));
}
#endif
