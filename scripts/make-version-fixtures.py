#!/usr/bin/env python3
"""make-version-fixtures.py - the snapshot fixtures of tests/versions.sh (traces/fixtures/versions/).

1. seed-p2.pickle.gz: the bundled 2.11 snapshot traces/pytorch-h200/seed_example__default (written by
   PyTorch with pickle protocol 4) re-pickled with protocol 2 (no FRAME, MEMOIZE or SHORT_BINUNICODE;
   BINPUT and BINUNICODE instead); the dict is unchanged, so `allocsim replay` must give the same row.
   (Protocols 3 and 5 write this dict byte for byte like 2 and 4 but for the PROTO byte;
   tests/versions.sh makes them from $PYTHON when it is set, else by patching that byte.)
2. fields-V.pickle.gz: a small synthetic snapshot with the field set PyTorch release V writes
   (doc/pytorch-policy.md, "Versions"), for `allocsim info`'s pytorch_version line. From 2.12 on the
   layout is the writer's own, read in its source (no v2.12.0-v2.14.0 tag is in the code store; the
   newest, cyyever/pytorch at 2.15.0a0): torch/csrc/cuda/Module.cpp 25c86035, THCPModule_memorySnapshot
   (what torch.cuda.memory._snapshot() returns and _dump_snapshot pickles) and memory_snapshot.cpp
   021c4c1a, _memory_snapshot_pickled (the same dict from C++). A trace entry is action, addr (device_free
   for an oom), size, stream, time_us, compile_context, user_metadata, internal_metadata (only when
   set, e.g. 'mallocWithAddress'), pool_id (a tuple; 2.12, PR #177717), frames (only with a context).
   allocator_settings gains max_round_threshold and max_cached_size (the pinned keys of #171662, 2.13
   release notes); the top level gains host_segments and host_traces (2.14, PR #182407), written
   always, empty unless _record_memory_history(record_pinned_host_memory=True).
   fields-writer.pickle.gz: that whole layout, with an oom entry, an annotate entry and an entry with
   internal_metadata. fields-host.pickle.gz: the same with a pinned host history: host_segments as the
   writer builds them (device -1, one block each) and host_traces entries (traceEntryToDict, as a
   device's), for `replay --device host -p pytorch-pinned`; fields-host-keys.pickle.gz: the same recorded
   with pinned_max_round_threshold_mb:1 (which pytorch-pinned does not apply: replay warns).
   fields-overflow.pickle.gz: a 2.12 field set plus the ring-buffer flags trace_alloc_overflowed and
   trace_alloc_max_entries, which the memory visualizer reads (torch/utils/viz/process_alloc_data.js
   ad7e69ae) but the writer above does not write; its ring (3 entries) lost its first entry, the
   segment_alloc.
Deterministic: gzip with mtime 0. Run from the repository root: python3 scripts/make-version-fixtures.py
"""
import gzip
import io
import pickle

OUT = "traces/fixtures/versions/"


def write(name, obj, protocol):
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as g:
        g.write(pickle.dumps(obj, protocol=protocol))
    with open(OUT + name, "wb") as f:
        f.write(raw.getvalue())


with gzip.open("traces/pytorch-h200/seed_example__default.pickle.gz") as f:
    seed = pickle.load(f)
write("seed-p2.pickle.gz", seed, 2)

# --- field sets by release (sources in doc/pytorch-policy.md, "Versions") ---
SETTINGS_23 = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
               "expandable_segments": False, "pinned_num_register_threads": 1,
               "release_lock_on_cudamalloc": False, "pinned_use_cuda_host_register": False,
               "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}


def snapshot(version):
    v = tuple(int(x) for x in version.split("."))
    base = 0x7F0000000000

    def entry(action, addr, size):
        if v >= (2, 12):
            return writer_entry(action, addr, size, 1700000000000000 + addr % 1000)
        e = {"action": action, "addr": addr, "size": size, "stream": 0}
        if v >= (2, 2):
            e["time_us"] = 1700000000000000 + addr % 1000
        if v >= (2, 6):
            e["compile_context"] = "N/A"
        if v >= (2, 7):
            e["user_metadata"] = ""
        return e
    trace = [entry("segment_alloc", base, 2097152), entry("alloc", base, 1000),
             entry("free_requested", base, 1000), entry("free_completed", base, 1000)]
    seg = {"device": 0, "address": base, "total_size": 2097152, "allocated_size": 0, "active_size": 0,
           "requested_size": 0, "stream": 0, "segment_type": "small", "segment_pool_id": (0, 0),
           "is_expandable": False, "frames": [],
           "blocks": [{"address": base, "size": 2097152, "requested_size": 1000, "state": "inactive",
                       "frames": []}]}
    d = {"segments": [seg], "device_traces": [trace]}
    if v >= (2, 3):
        s = dict(SETTINGS_23)
        if v >= (2, 9):
            s["graph_capture_record_stream_reuse"] = False
        if v >= (2, 13):
            # int64_t(config_metadata.max_round_threshold / max_cached_size): the defaults, unset (-1 =
            # int64_t(SIZE_MAX), if SIZE_MAX is the default: AllocatorConfig.h was not read)
            s["max_round_threshold"] = -1
            s["max_cached_size"] = -1
        if v >= (2, 12):  # the writer's order: roundup_power2_divisions last
            s["roundup_power2_divisions"] = s.pop("roundup_power2_divisions")
        d["allocator_settings"] = s
    if v >= (2, 5):
        d["external_annotations"] = []
    if v >= (2, 14):
        d["host_segments"] = []
        d["host_traces"] = []
    return d


def writer_entry(action, addr, size, time_us, pool=(0, 0), internal=None, user=""):
    """traceEntryToDict of THCPModule_memorySnapshot (Module.cpp 25c86035), in its insertion order."""
    e = {"action": action, ("device_free" if action == "oom" else "addr"): addr, "size": size, "stream": 0,
         "time_us": time_us, "compile_context": "N/A", "user_metadata": user}
    if internal:
        e["internal_metadata"] = internal
    e["pool_id"] = pool
    return e


for ver in ("2.1", "2.2", "2.3", "2.5", "2.6", "2.7", "2.9", "2.12", "2.13"):
    write("fields-%s.pickle.gz" % ver, snapshot(ver), 2 if ver == "2.1" else 4)

# contradicting fields (2.6's compile_context without 2.2's time_us): no release wrote this
bad = snapshot("2.1")
for e in bad["device_traces"][0]:
    e["compile_context"] = "N/A"
write("fields-contradict.pickle.gz", bad, 4)

# the whole 2.14+ layout (fields-writer): an oom entry (device_free, no addr), an annotate entry
# (_annotate_tensor: size 0, the annotation in user_metadata) and a mallocWithAddress entry
wr = snapshot("2.14")
base = 0x7F0000000000
wr["device_traces"][0] += [
    writer_entry("alloc", base + 1024, 512, 1700000000000600, internal="mallocWithAddress"),
    writer_entry("annotate", base + 1024, 0, 1700000000000700, user="weights"),
    writer_entry("free_requested", base + 1024, 512, 1700000000000800, internal="mallocWithAddress"),
    writer_entry("free_completed", base + 1024, 512, 1700000000000900, internal="mallocWithAddress"),
    writer_entry("oom", 1 << 30, 1 << 40, 1700000000001000),
]
write("fields-writer.pickle.gz", wr, 4)

# a pinned host history (record_pinned_host_memory=True, 2.14): host_traces entries as a device's, and
# host_segments as the writer builds them from the host allocator's segments (device -1, stream 0,
# small, one block); the requests: 1000 B, freed (its copy's event done), 1000 B again (the cached
# 1 KiB block), 5000 B (a new 8 KiB block), both freed: pytorch-pinned makes 2 blocks, 9216 bytes.
host = snapshot("2.14")
hb = 0x10000
H = [("segment_alloc", hb, 1024), ("alloc", hb, 1000), ("free_requested", hb, 1000), ("free_completed", hb, 1000),
     ("alloc", hb, 1000), ("segment_alloc", hb + 0x1000, 8192), ("alloc", hb + 0x1000, 5000),
     ("free_requested", hb, 1000), ("free_completed", hb, 1000),
     ("free_requested", hb + 0x1000, 5000), ("free_completed", hb + 0x1000, 5000)]
host["host_traces"] = [writer_entry(a, ad, sz, 1700000000001000 + 10 * k) for k, (a, ad, sz) in enumerate(H)]
for ad, sz in ((hb, 1024), (hb + 0x1000, 8192)):
    host["host_segments"].append({"device": -1, "address": ad, "total_size": sz, "allocated_size": 0,
                                  "active_size": 0, "requested_size": sz, "stream": 0, "segment_type": "small",
                                  "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
                                  "blocks": [{"address": ad, "size": sz, "requested_size": sz, "state": "inactive",
                                              "frames": []}]})
write("fields-host.pickle.gz", host, 5)
# the same recorded with 2.13's pinned threshold set (exact-size blocks above 1 MiB in PyTorch; the
# replayed 2.11 host cache rounds them: replay --device host warns)
host["allocator_settings"]["PYTORCH_CUDA_ALLOC_CONF"] = "pinned_max_round_threshold_mb:1"
host["allocator_settings"]["max_round_threshold"] = 1 << 20
write("fields-host-keys.pickle.gz", host, 5)

# a 2.12 snapshot whose history ring (3 entries) overflowed: its oldest entry, the segment_alloc, was
# overwritten, and allocator_settings says so (nothing else in the history shows it)
ovf = snapshot("2.12")
ovf["allocator_settings"]["trace_alloc_max_entries"] = 3
ovf["allocator_settings"]["trace_alloc_overflowed"] = True
ovf["device_traces"][0] = ovf["device_traces"][0][1:4]
write("fields-overflow.pickle.gz", ovf, 4)
