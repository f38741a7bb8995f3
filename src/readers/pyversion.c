/* pyversion.c - which PyTorch release wrote a memory snapshot, from the fields it has.
 *
 * Each release's _snapshot() builds the dict the same way whatever the program did, so some fields
 * are there from a release on, always: those give bounds both ways (present: at least that release;
 * absent: older). Fields a user must ask for (compile_context, user_metadata) give only a lower bound.
 * Releases are from the PRs that added the fields and, for 2.12-2.14, the release notes of the v2.12.0,
 * v2.13.0 and v2.14.0 tags; the writer's layout from its source at cyyever/pytorch 25c86035
 * torch/csrc/cuda/Module.cpp (THCPModule_memorySnapshot) and 021c4c1a memory_snapshot.cpp
 * (_memory_snapshot_pickled), which write host_segments and host_traces always (empty lists unless
 * record_pinned_host_memory=True) and allocator_settings' max_round_threshold and max_cached_size, and
 * not the ring flags trace_alloc_overflowed/trace_alloc_max_entries (which the memory visualizer,
 * torch/utils/viz/process_alloc_data.js at ad7e69ae, reads; still read here). doc/pytorch-policy.md,
 * "Versions"; only 2.11 is checked against snapshots recorded here. */
#include "readers/trace.h"
#include <stdio.h>
#include <string.h>

uint32_t as_pyver_bit(int where, const char *key)
{
	static const struct { int where; const char *key; uint32_t bit; } k[] = {
		{ AS_PF_IN_ENTRY, "time_us", AS_PF_TIME_US },
		{ AS_PF_IN_ENTRY, "compile_context", AS_PF_COMPILE_CONTEXT },
		{ AS_PF_IN_ENTRY, "user_metadata", AS_PF_USER_METADATA },
		{ AS_PF_IN_ENTRY, "pool_id", AS_PF_POOL_ID },
		{ AS_PF_TOP, "allocator_settings", AS_PF_SETTINGS },
		{ AS_PF_TOP, "external_annotations", AS_PF_EXT_ANNOTATIONS },
		{ AS_PF_TOP, "host_segments", AS_PF_HOST },
		{ AS_PF_TOP, "host_traces", AS_PF_HOST },
		{ AS_PF_IN_SETTINGS, "graph_capture_record_stream_reuse", AS_PF_STREAM_REUSE },
		{ AS_PF_IN_SETTINGS, "trace_alloc_overflowed", AS_PF_RING_FLAGS },
		{ AS_PF_IN_SETTINGS, "trace_alloc_max_entries", AS_PF_RING_FLAGS },
		{ AS_PF_IN_SETTINGS, "max_round_threshold", AS_PF_PINNED_SETTINGS },
		{ AS_PF_IN_SETTINGS, "max_cached_size", AS_PF_PINNED_SETTINGS },
	};
	for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
		if (k[i].where == where && !strcmp(k[i].key, key))
			return k[i].bit;
	return 0;
}

void as_pyver_note(as_meta *m, int where, const char *key)
{
	m->pyfields |= AS_PF_SNAPSHOT | (where == AS_PF_IN_ENTRY ? AS_PF_ENTRY : 0) | as_pyver_bit(where, key);
}

void as_pyver_ring(as_meta *m, int overflowed, int64_t max_entries)
{
	m->trace_overflowed = overflowed != 0;
	m->trace_max_entries = max_entries > 0 ? (uint64_t)max_entries : 0;
	if (overflowed)
		m->history_truncated = 1; /* older entries were overwritten: the history begins mid-run */
}

static void add(char *why, size_t n, const char *s)
{
	size_t l = strlen(why);
	if (l < n)
		snprintf(why + l, n - l, "%s%s", l ? "; " : "", s);
}

int as_pyver_range(const as_meta *m, int *lo, int *hi, char *why, size_t whylen)
{
	uint32_t f = m->pyfields;
	*lo = 1;
	*hi = 14; /* the newest release read (its tag's release notes) */
	why[0] = 0;
	if (!(f & AS_PF_SNAPSHOT))
		return 0;
	/* lower bounds: the newest field present decides */
	static const struct { uint32_t bit; int since; const char *what; } up[] = {
		{ AS_PF_HOST, 14, "host_segments/host_traces (>= 2.14)" },
		{ AS_PF_PINNED_SETTINGS, 13, "allocator_settings has max_round_threshold/max_cached_size (>= 2.13)" },
		{ AS_PF_POOL_ID, 12, "entries have pool_id (>= 2.12)" },
		{ AS_PF_RING_FLAGS, 12, "allocator_settings has trace_alloc_overflowed (>= 2.12)" },
		{ AS_PF_STREAM_REUSE, 9, "allocator_settings has graph_capture_record_stream_reuse (>= 2.9)" },
		{ AS_PF_USER_METADATA, 7, "entries have user_metadata (>= 2.7)" },
		{ AS_PF_COMPILE_CONTEXT, 6, "entries have compile_context (>= 2.6)" },
		{ AS_PF_EXT_ANNOTATIONS, 5, "external_annotations (>= 2.5)" },
		{ AS_PF_SETTINGS, 3, "allocator_settings (>= 2.3)" },
		{ AS_PF_TIME_US, 2, "entries have time_us (>= 2.2)" },
	};
	for (size_t i = 0; i < sizeof up / sizeof up[0]; i++)
		if ((f & up[i].bit) && up[i].since > *lo) {
			*lo = up[i].since;
			add(why, whylen, up[i].what);
			break;
		}
	/* upper bounds: fields every later release writes, absent (the oldest decides) */
	if ((f & AS_PF_ENTRY) && !(f & AS_PF_TIME_US)) {
		*hi = 1;
		add(why, whylen, "entries have no time_us (<= 2.1)");
	} else if (!(f & AS_PF_SETTINGS)) {
		*hi = 2;
		add(why, whylen, "no allocator_settings (<= 2.2)");
	} else if (!(f & AS_PF_STREAM_REUSE)) {
		*hi = 8;
		add(why, whylen, "allocator_settings has no graph_capture_record_stream_reuse (<= 2.8)");
	} else if ((f & AS_PF_ENTRY) && !(f & AS_PF_POOL_ID)) {
		*hi = 11;
		add(why, whylen, "entries have no pool_id (<= 2.11)");
	} else if (!(f & AS_PF_HOST)) {
		/* the writer puts both lists in every snapshot from 2.14 on, empty unless
		 * record_pinned_host_memory=True (Module.cpp THCPModule_memorySnapshot, memory_snapshot.cpp) */
		*hi = 13;
		add(why, whylen, "no host_segments/host_traces (<= 2.13)");
	}
	return *lo <= *hi ? 1 : -1;
}
