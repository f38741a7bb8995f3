#!/usr/bin/env python3
"""make-version-fixtures.py - the snapshot fixtures of tests/versions.sh (traces/fixtures/versions/).

1. seed-p2.pickle.gz: the bundled 2.11 snapshot traces/pytorch-h200/seed_example__default (written by
   PyTorch with pickle protocol 4) re-pickled with protocol 2 (no FRAME, MEMOIZE or SHORT_BINUNICODE;
   BINPUT and BINUNICODE instead); the dict is unchanged, so `allocsim replay` must give the same row.
   (Protocols 3 and 5 write this dict byte for byte like 2 and 4 but for the PROTO byte;
   tests/versions.sh makes them from $PYTHON when it is set, else by patching that byte.)
2. fields-V.pickle.gz: a small synthetic snapshot with the field set PyTorch release V writes
   (doc/pytorch-policy.md, "Versions"), for `allocsim info`'s pytorch_version line. From 2.12 on:
   every entry's pool_id (PR #177717) and allocator_settings' ring-buffer flags trace_alloc_overflowed
   and trace_alloc_max_entries (PR #179276); 2.14 adds the pinned host history host_segments and
   host_traces (PR #182407, in the v2.14.0 release notes) when record_pinned_host_memory=True.
   fields-overflow.pickle.gz: a 2.12 field set whose ring buffer overflowed (its history lost its
   first entry, the segment_alloc).
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
        e = {"action": action, "addr": addr, "size": size, "stream": 0}
        if v >= (2, 2):
            e["time_us"] = 1700000000000000 + addr % 1000
        if v >= (2, 6):
            e["compile_context"] = "N/A"
        if v >= (2, 7):
            e["user_metadata"] = ""
        if v >= (2, 12):
            e["pool_id"] = (0, 0)
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
        if v >= (2, 12):
            s["trace_alloc_max_entries"] = 1000
            s["trace_alloc_overflowed"] = False
        d["allocator_settings"] = s
    if v >= (2, 5):
        d["external_annotations"] = []
    return d


for ver in ("2.1", "2.2", "2.3", "2.5", "2.6", "2.7", "2.9", "2.12"):
    write("fields-%s.pickle.gz" % ver, snapshot(ver), 2 if ver == "2.1" else 4)

# contradicting fields (2.6's compile_context without 2.2's time_us): no release wrote this
bad = snapshot("2.1")
for e in bad["device_traces"][0]:
    e["compile_context"] = "N/A"
write("fields-contradict.pickle.gz", bad, 4)

# a 2.12 field set plus the pinned-host history of 2.14 (PR #182407): read, dated 2.14
host = snapshot("2.12")
host["host_segments"] = []
host["host_traces"] = [{"action": "alloc", "addr": 0x10000, "size": 4096, "stream": 0, "time_us": 1700000000000000}]
write("fields-host.pickle.gz", host, 5)

# a 2.12 snapshot whose history ring (3 entries) overflowed: its oldest entry, the segment_alloc, was
# overwritten, and allocator_settings says so (nothing else in the history shows it)
ovf = snapshot("2.12")
ovf["allocator_settings"]["trace_alloc_max_entries"] = 3
ovf["allocator_settings"]["trace_alloc_overflowed"] = True
ovf["device_traces"][0] = ovf["device_traces"][0][1:4]
write("fields-overflow.pickle.gz", ovf, 4)
