#!/usr/bin/env python3
"""Cross-setting fidelity: replay each real trace under the *other* recorded settings (and
capacities) of the same workload, and compare with PyTorch's numbers for that setting.
Only non-OOM source traces are used (an OOM'd run stops early, so its request stream is shorter).
usage: scripts/cross-fidelity.py ALLOCSIM TRACE_DIR [--addresses MODE]  -> markdown table on stdout"""
import csv, os, subprocess, sys
A, D = sys.argv[1], sys.argv[2]
addr = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--addresses" else "auto"
rows = list(csv.DictReader(open(os.path.join(D, "ground-truth.csv"))))
cols = [("peak_reserved_bytes", "peak_reserved"), ("peak_allocated_bytes", "peak_allocated"),
        ("num_device_alloc", "num_device_alloc"), ("num_device_free", "num_device_free"),
        ("num_alloc_retries", "num_alloc_retries"), ("num_ooms", "num_ooms")]
total = exact = 0
worst = 0.0
print("| workload | source trace | target setting | exact | peak reserved: sim / PyTorch |")
print("|---|---|---|---|---|")
for src in rows:
    if src["oom"] == "1":
        continue
    for tgt in rows:
        if tgt["workload"] != src["workload"] or tgt is src:
            continue
        cmd = [A, "replay", "-p", "pytorch", "-c", tgt["alloc_conf"], "--no-timing", "--addresses", addr]
        if tgt["capacity_bytes"]:
            cmd += ["--capacity", tgt["capacity_bytes"]]
        if tgt["oom"] == "1":
            cmd += ["--stop-at-oom"]  # the recorded program ended at its OOM
        out = subprocess.run(cmd + [os.path.join(D, src["name"] + ".pickle.gz")], capture_output=True, text=True, check=True).stdout
        r = list(csv.DictReader(out.splitlines()))[0]
        ok = all(r[a] == tgt[b] for a, b in cols)
        total += 1; exact += ok
        err = abs(int(r["peak_reserved_bytes"]) - int(tgt["peak_reserved"])) / int(tgt["peak_reserved"])
        worst = max(worst, err)
        print("| %s | %s | %s | %s | %s / %s |" % (src["workload"], src["tag"], tgt["tag"], "yes" if ok else "**no**", r["peak_reserved_bytes"], tgt["peak_reserved"]))
print()
print("%d of %d cross-setting replays exact; worst peak-reserved error %.3f%%" % (exact, total, 100 * worst))
