#!/usr/bin/env python3
"""Per-trace fidelity table (markdown) for doc/pytorch-policy.md: replay each trace of a folder with
its recorded settings and capacity, compare with PyTorch's memory_stats() and run validate.
usage: scripts/fidelity-table.py ALLOCSIM TRACE_DIR [TRACE_DIR ...]"""
import csv, os, subprocess, sys, tempfile
A = sys.argv[1]
print("| trace | setting | capacity | PyTorch peak reserved | allocsim | cudaMalloc (PyTorch / allocsim) | retries | OOMs | memory_stats keys equal | validate |")
print("|---|---|---|---|---|---|---|---|---|---|")
for D in sys.argv[2:]:
    for g in csv.DictReader(open(os.path.join(D, "ground-truth.csv"))):
        st = tempfile.NamedTemporaryFile(suffix=".csv", delete=False).name
        cap = ["--capacity", g["capacity_bytes"]] if g["capacity_bytes"] else []
        path = os.path.join(D, g["name"] + ".pickle.gz")
        out = subprocess.run([A, "replay", "-c", g["alloc_conf"], "--stats", st, "--no-timing"] + cap + [path], capture_output=True, text=True).stdout
        r = list(csv.DictReader(out.splitlines()))[0]
        got = dict(l.strip().split(",") for l in open(st).readlines()[1:])
        want = {}
        for row in csv.DictReader(open(os.path.join(D, "memory-stats.csv"))):
            if row["name"] == g["name"]:
                want[row["key"]] = row["value"]
        same = sum(1 for k in want if got.get(k) == want[k])
        v = subprocess.run([A, "validate"] + cap + [path], capture_output=True, text=True).stdout.strip()
        v = "exact" if ": exact" in v else "diverges"
        os.unlink(st)
        print("| %s | %s | %s | %s | %s | %s / %s | %s / %s | %s / %s | %d / %d | %s |" % (
            g["name"], g["alloc_conf"] or "(default)", g["capacity_bytes"] or "-", g["peak_reserved"], r["peak_reserved_bytes"],
            g["num_device_alloc"], r["num_device_alloc"], g["num_alloc_retries"], r["num_alloc_retries"], g["num_ooms"], r["num_ooms"],
            same, len(want), v))
