#!/usr/bin/env python3
"""latency-validation.py - modelled against measured device time on the bundled H200 device logs.

For each validation replay (3 workloads x 5 settings, several real runs each, in a logs archive
written by scripts/gpu-validate.sh) it prints the measured device times, their mean and coefficient
of variation, and the simulation's device time under: the given model (default: the bundled one),
a model fitted from the archive's calibration replays only (the captured traces: other workloads,
same machine, same minutes), a model fitted from those and the other two validation workloads
(leave one workload out; only where the archive has the validation replays' own device logs), and
the micro-benchmark calibration (the archive's micro-model.csv, else the bundled one). With
--single it also says how many single runs lie within 15% and 25% of the model and of their own mean
(how far one measurement strays). Markdown on standard output. Needs only the Python standard
library.

With --measured CSV --machine M it compares the model with the measured device times of machine M
in a table like traces/h200-device-time.csv instead (no logs: the model column only). With several
machines (--machine A,C,E or --machine all) it compares the model with the mean of the machines'
means (every machine weighted alike), says how often it is within 15% of each machine, and how far
apart the machines are: where their means differ by more than 1.15/0.85 = 1.35 times, no single
value can be within 15% of every one of them.

usage: latency-validation.py [--allocsim PATH] [--traces DIR] [--logs ARCHIVE] [--model CSV]
                             [--micro CSV] [--single]
       latency-validation.py [--allocsim PATH] [--traces DIR] [--model CSV] --measured CSV --machine M[,M...]|all
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


def runs(rows, machine, w, p, c):
    """The measured device times of one replay on one machine."""
    return [float(r["device_time_us"]) for r in rows
            if r["machine"] == machine and (r["trace"], r["policy"], r["config"]) == (w, p, c)]


def within15(errs):
    return sum(abs(x) <= 0.15 for x in errs)


def from_table(o):
    rows = [r for r in csv.DictReader(l for l in open(o.measured) if not l.startswith("#"))]
    machines = sorted({r["machine"] for r in rows}) if o.machine == "all" else o.machine.split(",")
    for m in machines:
        if not any(r["machine"] == m for r in rows):
            sys.exit("latency-validation.py: %s: no rows for machine %s" % (o.measured, m))
    if len(machines) > 1:
        return fleet(o, rows, machines)
    print("| trace | policy | settings | runs | measured mean (µs) | CV | model | err |")
    print("|---|---|---|---|---|---|---|---|")
    errs = []
    for w in WORKLOADS:
        for p, c in SETTINGS:
            meas = runs(rows, machines[0], w, p, c)
            mean = statistics.mean(meas)
            cv = statistics.stdev(meas) / mean if len(meas) > 1 else 0.0
            v = simulate(o.allocsim, o.model, p, c, os.path.join(o.traces, w + ".pickle.gz"))
            errs.append(v / mean - 1)
            print("| %s | %s | %s | %d | %.0f | %.0f%% | %.0f | %+.0f%% |" % (w, p, c or "(defaults)", len(meas), mean, 100 * cv, v, 100 * errs[-1]))
    print()
    print("- model: " + within(errs, "the measured mean"))


def within(errs, what):
    return "within 15%% of %s in %d of %d, median |error| %.0f%%, max %.0f%%" % (
        what, within15(errs), len(errs), 100 * statistics.median(abs(x) for x in errs),
        100 * max(abs(x) for x in errs))


# One number x is within 15% of every machine's mean m (|x/m - 1| <= 0.15) only if
# 0.85 * max(m) <= x <= 1.15 * min(m), that is if max(m) / min(m) <= 1.15 / 0.85.
SPREAD_LIMIT = 1.15 / 0.85


def fleet(o, rows, machines):
    """Several machines: each machine's mean per replay, the mean of those means (every machine
    weighted alike, however many runs it made), the model against that, and how far apart the
    machines are."""
    print("| trace | policy | settings | " + " | ".join(machines) + " | mean of machines (µs) | max/min | model | err |")
    print("|---|---|---|" + "---|" * len(machines) + "---|---|---|---|")
    errs, spreads, per = [], [], {m: [] for m in machines}
    for w in WORKLOADS:
        for p, c in SETTINGS:
            means = []
            for m in machines:
                meas = runs(rows, m, w, p, c)
                if not meas:
                    sys.exit("latency-validation.py: %s: machine %s has no runs of %s %s %s" % (o.measured, m, w, p, c))
                means.append(statistics.mean(meas))
            v = simulate(o.allocsim, o.model, p, c, os.path.join(o.traces, w + ".pickle.gz"))
            mean = statistics.mean(means)
            errs.append(v / mean - 1)
            spreads.append(max(means) / min(means))
            for m, x in zip(machines, means):
                per[m].append(v / x - 1)
            print("| %s | %s | %s | %s | %.0f | %.2f | %.0f | %+.0f%% |" % (w, p, c or "(defaults)", " | ".join("%.0f" % x for x in means),
                                                                      mean, spreads[-1], v, 100 * errs[-1]))
    print()
    print("- model: " + within(errs, "the mean of %d machines" % len(machines)))
    print("- per machine, within 15%% of that machine's mean: %s of %d" %
          (", ".join("%s %d" % (m, within15(per[m])) for m in machines), len(errs)))
    print("- the machines' means of one replay are %.2f to %.2f times apart (median %.2f); more than %.2f times "
          "(no single value within 15%% of every machine's mean) in %d of %d" %
          (min(spreads), max(spreads), statistics.median(spreads), SPREAD_LIMIT, sum(x > SPREAD_LIMIT for x in spreads), len(spreads)))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--allocsim", default=os.path.join(top, "allocsim"))
    ap.add_argument("--traces", default=os.path.join(top, "traces", "pytorch-h200"))
    ap.add_argument("--logs", default=os.path.join(top, "traces", "h200-device-logs.tar.xz"))
    ap.add_argument("--model", default=os.path.join(top, "traces", "h200-latency-model.csv"))
    ap.add_argument("--micro", help="micro-benchmark model (default: the archive's micro-model.csv, else the bundled one)")
    ap.add_argument("--single", action="store_true", help="also compare single runs")
    ap.add_argument("--measured", help="a table of measured device times (machine,trace,policy,config,run,device_time_us,...)")
    ap.add_argument("--machine", help="the machine of --measured to compare with; several, comma-separated, or all")
    o = ap.parse_args()
    if o.measured:
        return from_table(o)
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(o.logs) as t:
            t.extractall(tmp, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(tmp)
        L = os.path.join(tmp, "h200-device-logs")
        if not o.micro:
            o.micro = os.path.join(L, "micro-model.csv")
            if not os.path.exists(o.micro):
                o.micro = os.path.join(top, "traces", "h200-latency-model-micro.csv")
        cal = os.path.join(tmp, "calibration-set.csv")
        fit(o.allocsim, sorted(glob.glob(os.path.join(L, "C.*.dl.csv"))), cal)
        print("| trace | policy | settings | runs | measured mean (µs) | CV | model | err | calibration set | err | leave-workload-out | err | micro-benchmarks | err |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        errs = {"model": [], "cal": [], "loo": [], "micro": []}
        single, own = [], []
        have_v = bool(glob.glob(os.path.join(L, "V.*.dl.csv")))  # else no leave-one-workload-out column
        for w in WORKLOADS:
            loo = os.path.join(tmp, "loo-" + w + ".csv")
            if have_v:
                fit(o.allocsim, sorted(glob.glob(os.path.join(L, "C.*.dl.csv"))) +
                    sorted(f for f in glob.glob(os.path.join(L, "V.*.dl.csv")) if ".%s." % w not in os.path.basename(f)), loo)
            for p, c in SETTINGS:
                pre = "V.%s.%s.%s." % (w, p, c.replace(":", "="))
                runs = [f for f in glob.glob(os.path.join(L, pre + "*.sum.csv"))
                        if os.path.basename(f)[len(pre):-len(".sum.csv")].isdigit()]
                meas = [float(summary(open(f).read())["device_time_us"]) for f in runs]
                mean = statistics.mean(meas)
                cv = statistics.stdev(meas) / mean if len(meas) > 1 else 0.0
                trace = os.path.join(o.traces, w + ".pickle.gz")
                row = ["%s | %s | %s | %d | %.0f | %.0f%%" % (w, p, c or "(defaults)", len(meas), mean, 100 * cv)]
                for key, m in (("model", o.model), ("cal", cal), ("loo", loo), ("micro", o.micro)):
                    if key == "loo" and not have_v:
                        row.append("n/a | n/a")
                        continue
                    v = simulate(o.allocsim, m, p, c, trace)
                    errs[key].append(v / mean - 1)
                    if key == "model":
                        single += [v / x - 1 for x in meas]
                        own += [x / mean - 1 for x in meas]
                    row.append("%.0f | %+.0f%%" % (v, 100 * (v / mean - 1)))
                print("| " + " | ".join(row) + " |")
        print()
        for key, name in (("model", "model"), ("cal", "calibration set (captured traces only)"),
                          ("loo", "leave one workload out"), ("micro", "micro-benchmarks")):
            e = errs[key]
            if not e:
                continue
            print("- %s: %s" % (name, within(e, "the measured mean")))
        if o.single:
            for t in (0.15, 0.25):
                print("- single runs within %.0f%%: of the model %d of %d, of their own replay's mean %d of %d" %
                      (100 * t, sum(abs(x) <= t for x in single), len(single), sum(abs(x) <= t for x in own), len(own)))


if __name__ == "__main__":
    main()
