#!/usr/bin/env python3
"""predict-table.py - doc/predict.md's table: allocsim predict on CPU-captured traces vs the real runs.

usage: predict-table.py ALLOCSIM DIR
DIR holds, per workload W, W.trace.gz (scripts/capture-fake.py fake), W.fake.json (its analytic
estimate) and W.real.json (the same workload's memory_stats() on the GPU: capture-fake.py real).
Prints a Markdown table and the median / worst absolute error of both estimates."""
import csv, io, json, os, statistics, subprocess, sys


def main():
    allocsim, d = sys.argv[1], sys.argv[2]
    rows, errs, aerrs, conv = [], [], [], []
    for f in sorted(os.listdir(d)):
        if not f.endswith(".real.json"):
            continue
        w = f[:-len(".real.json")]
        real = json.load(open(os.path.join(d, f)))["memory_stats"]
        fk = json.load(open(os.path.join(d, w + ".fake.json")))
        tr = os.path.join(d, w + ".trace.gz")
        if not os.path.exists(tr):
            continue
        out = subprocess.run([allocsim, "predict", "--capacity", "1TiB", "--format", "csv", tr], check=True,
                             capture_output=True, text=True).stdout
        p = next(csv.DictReader(io.StringIO(out)))
        if fk.get("cudnn_table_hits") or fk.get("cudnn_table_misses"):
            conv.append("%s %d/%d" % (w, fk["cudnn_table_hits"], fk["cudnn_table_hits"] + fk["cudnn_table_misses"]))
        R = real["reserved_bytes.all.peak"]
        hi = int(p["peak_reserved_high"])
        e = 100.0 * (hi - R) / R
        errs.append(abs(e))
        an = (fk.get("analytic") or {}).get("total")
        ae = 100.0 * (an - R) / R if an else None
        if ae is not None:
            aerrs.append(abs(ae))
        rows.append("| %s | %.3f | %.3f | %+.1f%% | %s..%s | %d | %s | %s |" % (
            w, R / 2**30, hi / 2**30, e, p["num_device_alloc_low"], p["num_device_alloc_high"], real["num_device_alloc"],
            "%.3f" % (an / 2**30) if an else "n/a", "%+.1f%%" % ae if ae is not None else "n/a"))
    print("| workload | real peak reserved (GiB) | predicted (GiB) | error | predicted cudaMallocs | real cudaMallocs | analytic (GiB) | analytic error |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("\nallocsim predict: median |error| %.1f%%, worst %.1f%% over %d workloads; analytic: median %.1f%%, worst %.1f%% over %d"
          % (statistics.median(errs), max(errs), len(errs), statistics.median(aerrs), max(aerrs), len(aerrs)))
    if conv:
        print("convolution calls found in cudnn-sm90.json (the rest counted in W.fake.json's cudnn_missing_keys): " + ", ".join(conv))


if __name__ == "__main__":
    main()
