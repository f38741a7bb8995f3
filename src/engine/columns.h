/* columns.h - every column of the summary CSV, in order, in one X-macro list (mimalloc style): the
 * as_summary struct, the header, the row, the --stats lines, 'allocsim columns' and the table in
 * doc/metrics.md (tests/cli.sh checks that table against 'allocsim columns') all come from it.
 *
 * X(name, type, where, description)
 *   type  how it is printed: U64, I64, F0 ("%.0f"), F3, F6 (decimals), STR (CSV-quoted text)
 *   where ROW  the replay's identity (as_row: trace, policy, config, capacity_bytes)
 *         CNT  an as_summary counter (uint64), also written by --stats as summary.NAME
 *         SUM  another as_summary field, of the type's C type
 *         DER  derived when printed (as_col_NAME in summary.c)
 * A new column is one line here (at the end, before schema_version, and AS_SCHEMA_VERSION + 1), its value where the engine
 * fills the summary (SUM, CNT) or a function in summary.c (DER), and the regenerated table in
 * doc/metrics.md ('allocsim columns'). */
#ifndef ALLOCSIM_COLUMNS_H
#define ALLOCSIM_COLUMNS_H

/* 1: the columns up to events_per_second; 2: schema_version appended; 3: lower_bound_bytes and
 * overhead_vs_bound before it. (first_oom_event holds the trace entry since issue 32, the numbering
 * of every message; it was an index among the replayed events.) */
#define AS_SCHEMA_VERSION 3

#define AS_COLUMNS(X) \
	X(trace, STR, ROW, "the trace file") \
	X(policy, STR, ROW, "the policy (or stack of policies)") \
	X(config, STR, ROW, "the policy's settings (-c)") \
	X(capacity_bytes, U64, ROW, "the memory the allocator may hold; 0 = unlimited") \
	X(events, U64, CNT, "events replayed (allocations, frees, free requests, empty_cache, phase markers)") \
	X(allocs, U64, CNT, "allocation requests") \
	X(frees, U64, CNT, "completed frees") \
	X(peak_requested_bytes, U64, CNT, "maximum of live requested bytes (requested_bytes.all.peak)") \
	X(peak_allocated_bytes, U64, CNT, "maximum of bytes in blocks handed out (allocated_bytes.all.peak)") \
	X(peak_reserved_bytes, U64, CNT, "maximum of bytes obtained from the device (reserved_bytes.all.peak)") \
	X(final_allocated_bytes, U64, CNT, "allocated bytes at the end") \
	X(final_reserved_bytes, U64, CNT, "reserved bytes at the end") \
	X(num_device_alloc, U64, CNT, "device calls that obtain memory: cudaMalloc, a page-mapping call, a pool call that grew the pool") \
	X(num_device_free, U64, CNT, "device calls that return memory: cudaFree, a page-unmapping call, a trim that shrank the pool") \
	X(num_alloc_retries, U64, CNT, "requests that released cached memory and tried again") \
	X(num_ooms, U64, CNT, "requests that failed with out-of-memory") \
	X(first_oom_event, I64, SUM, "the trace entry (as every message numbers them, not an index among the replayed events) of the first failed allocation; -1 if none") \
	X(efficiency, F6, DER, "peak_allocated_bytes / peak_reserved_bytes") \
	X(requested_at_peak_reserved, F0, SUM, "requested bytes at the moment of peak reserved bytes") \
	X(wasted_bytes_at_peak, F0, SUM, "reserved - allocated bytes at the moment of peak reserved bytes") \
	X(frag_jw1, F6, SUM, "mean over events with L > 0 of (H - L) / L (H reserved, L requested bytes)") \
	X(frag_jw2, F6, SUM, "(H - L) / L at the moment of maximum L") \
	X(frag_jw3, F6, SUM, "(H - L) / L at the moment of maximum H") \
	X(frag_jw4, F6, SUM, "(max H - max L) / max L") \
	X(frag_external_max, F6, SUM, "maximum of 1 - largest free cached block / free cached bytes (sampled)") \
	X(frag_external_mean, F6, SUM, "mean of the same") \
	X(frag_internal_at_peak, F0, SUM, "allocated - requested bytes at the moment of peak allocated bytes") \
	X(waste_rounding, F0, SUM, "at the reserved peak: live blocks' rounded sizes minus requested bytes") \
	X(waste_unsplit, F0, SUM, "at the reserved peak: live blocks' bytes beyond the rounded size, below the oversize limit") \
	X(waste_oversize, F0, SUM, "at the reserved peak: the same at or above the oversize limit") \
	X(waste_free_cached, F0, SUM, "at the reserved peak: free cached blocks") \
	X(waste_pending_free, F0, SUM, "at the reserved peak: blocks waiting for other streams, minus their requested bytes") \
	X(alloc_ns_p50, F0, SUM, "median malloc latency, nanoseconds") \
	X(alloc_ns_p99, F0, SUM, "99th percentile malloc latency") \
	X(alloc_ns_max, F0, SUM, "largest malloc latency") \
	X(free_ns_p50, F0, SUM, "median free latency") \
	X(free_ns_p99, F0, SUM, "99th percentile free latency") \
	X(free_ns_max, F0, SUM, "largest free latency") \
	X(device_calls, U64, SUM, "all device calls") \
	X(device_time_us, F3, SUM, "their time, microseconds (measured or modelled)") \
	X(latency_source, STR, SUM, "measured, model or none") \
	X(wall_seconds, F6, SUM, "the replay's wall-clock time (0 with --no-timing)") \
	X(events_per_second, F0, DER, "events / wall_seconds (0 without timing)") \
	X(lower_bound_bytes, U64, CNT, "maximum of live bytes, each allocation rounded as the policy rounds (AS_Q_ROUND), from its allocation until its free completes: no allocator that rounds so can reserve less") \
	X(overhead_vs_bound, F6, DER, "peak_reserved_bytes / lower_bound_bytes (0 when the bound is 0)") \
	X(schema_version, U64, DER, "the version of this column list (AS_SCHEMA_VERSION)")

#define AS_CTYPE_U64 uint64_t
#define AS_CTYPE_I64 int64_t
#define AS_CTYPE_F0 double
#define AS_CTYPE_F3 double
#define AS_CTYPE_F6 double
#define AS_CTYPE_STR const char *

/* The as_summary fields: CNT and SUM columns. */
#define AS_COL_FIELD(n, t, w, d) AS_COL_FIELD_##w(n, t)
#define AS_COL_FIELD_ROW(n, t)
#define AS_COL_FIELD_DER(n, t)
#define AS_COL_FIELD_CNT(n, t) AS_CTYPE_##t n;
#define AS_COL_FIELD_SUM(n, t) AS_CTYPE_##t n;

/* The replay's identity: the ROW columns. */
typedef struct as_row {
	const char *trace, *policy, *config;
	uint64_t capacity_bytes;
} as_row;
#endif
