#!/usr/bin/env python3
"""latency-validation.py - modelled against measured device time on the bundled H200 device logs.

For each validation replay (3 workloads x 5 settings, 4 real runs each, in the logs archive) it
prints the measured device times, their mean and coefficient of variation, and the simulation's
device time under: the given model (default: the bundled one, fitted from all the logs), a model
refitted without the workload's own logs (leave one workload out), and the micro-benchmark
calibration. Markdown on standard output. Needs only the Python standard library.

usage: latency-validation.py [--allocsim PATH] [--traces DIR] [--logs ARCHIVE] [--model CSV]
                             [--micro CSV]
"""
import argparse, csv, glob, os, statistics, subprocess, sys, tarfile, tempfile

WORKLOADS = ["resnet50_train__default", "gpt2_train_varlen__default", "bert_infer_varlen__default"]
SETTINGS = [("pytorch", ""), ("pytorch", "max_split_size_mb:128"), ("pytorch", "expandable_segments:True"),
            ("passthrough", ""), ("cuda-async", "")]


def summary(text):
    return next(csv.DictReader(text.splitlines()))


def simulate(a, model, policy, conf, trace):
    r = subprocess.run([a, "replay", "-p", policy, "-c", conf, "--no-timing", "--latency-model", model, trace],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr)
    return float(summary(r.stdout)["device_time_us"])


def fit(a, logs, out):
    r = subprocess.run([a, "calibrate", "--from-log", "-o", out] + logs, capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--allocsim", default=os.path.join(top, "allocsim"))
    ap.add_argument("--traces", default=os.path.join(top, "traces", "pytorch-h200"))
    ap.add_argument("--logs", default=os.path.join(top, "traces", "h200-device-logs.tar.xz"))
    ap.add_argument("--model", default=os.path.join(top, "traces", "h200-latency-model.csv"))
    ap.add_argument("--micro", default=os.path.join(top, "traces", "h200-latency-model-micro.csv"))
    o = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(o.logs) as t:
            t.extractall(tmp, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(tmp)
        L = os.path.join(tmp, "h200-device-logs")
        print("| trace | policy | settings | measured runs (µs) | mean | CV | model | err | leave-workload-out | err | micro-benchmarks | err |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        errs = {"model": [], "loo": [], "micro": []}
        for w in WORKLOADS:
            loo = os.path.join(tmp, "loo-" + w + ".csv")
            fit(o.allocsim, sorted(glob.glob(os.path.join(L, "C.*.dl.csv"))) +
                sorted(f for f in glob.glob(os.path.join(L, "V.*.dl.csv")) if ".%s." % w not in os.path.basename(f)), loo)
            for p, c in SETTINGS:
                runs = sorted(glob.glob(os.path.join(L, "V.%s.%s.%s.[0-9].sum.csv" % (w, p, c.replace(":", "=")))))
                meas = [float(summary(open(f).read())["device_time_us"]) for f in runs]
                mean = statistics.mean(meas)
                cv = statistics.stdev(meas) / mean if len(meas) > 1 else 0.0
                trace = os.path.join(o.traces, w + ".pickle.gz")
                row = ["%s | %s | %s | %s | %.0f | %.0f%%" % (w, p, c or "(defaults)", " ".join("%.0f" % x for x in meas), mean, 100 * cv)]
                for key, m in (("model", o.model), ("loo", loo), ("micro", o.micro)):
                    v = simulate(o.allocsim, m, p, c, trace)
                    errs[key].append(v / mean - 1)
                    row.append("%.0f | %+.0f%%" % (v, 100 * (v / mean - 1)))
                print("| " + " | ".join(row) + " |")
        print()
        for key, name in (("model", "model"), ("loo", "leave one workload out"), ("micro", "micro-benchmarks")):
            e = errs[key]
            print("- %s: within 15%% of the measured mean in %d of %d, median |error| %.0f%%, max %.0f%%" %
                  (name, sum(abs(x) <= 0.15 for x in e), len(e), 100 * statistics.median(abs(x) for x in e), 100 * max(abs(x) for x in e)))


if __name__ == "__main__":
    main()
