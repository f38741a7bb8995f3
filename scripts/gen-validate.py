#!/usr/bin/env python3
"""gen-validate.py - does a generated trace make the allocators behave as the real one does?

For each real trace: allocsim gen --fit, then allocsim gen phase (seeds given); replays both under
the pytorch policy's settings and every policy (allocsim compare), and prints, per trace, the peak
reserved bytes of the real and the generated trace under default, max_split_size_mb:128 and
expandable_segments:True, and Kendall's tau-b between the real and the generated ranking of the
settings and of the policies. Exit 1 when a target (10 %, tau >= 0.8) is missed and --strict.

usage: gen-validate.py ALLOCSIM OUTDIR TRACE... [--seeds 1,2,3 | --seeds A..B] [--scale-draw HOW] [--strict]
       [--fit-model iid] [--markdown] [--summary]

--scale-draw passes gen's option (the fit writes 'sequence': the fitted steps' scales in their order);
--fit-model iid fits the iid model instead of the phase model (the baseline without structure).

--summary prints, per trace, the median and range of each error over the seeds and how many seeds
meet every target, instead of one row per seed.
"""
import csv, io, os, subprocess, sys

SETTINGS = [("default", ""), ("ms40", "max_split_size_mb:40"), ("ms128", "max_split_size_mb:128"),
            ("ms512", "max_split_size_mb:512"), ("exp", "expandable_segments:True"),
            ("rp4", "roundup_power2_divisions:4"), ("gc", "garbage_collection_threshold:0.6")]
TARGET = ["default", "ms128", "exp"]


def run(args):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        sys.exit("failed (%d): %s\n%s" % (r.returncode, " ".join(args), r.stderr))
    return r.stdout


def peak(allocsim, trace, conf):
    out = run([allocsim, "replay", "--no-timing", "-c", conf, "-o", "-", trace])
    return int(next(csv.DictReader(io.StringIO(out)))["peak_reserved_bytes"])


def policies(allocsim, trace):
    out = run([allocsim, "compare", "-p", "all", "-o", "-", trace])
    return {r["policy"]: int(r["peak_reserved_bytes"]) for r in csv.DictReader(io.StringIO(out))}


def tau_b(x, y):
    """Kendall's tau-b of two equally long lists (ties counted as scipy does)."""
    n = len(x)
    c = d = tx = ty = 0
    for i in range(n):
        for j in range(i + 1, n):
            a = (x[i] > x[j]) - (x[i] < x[j])
            b = (y[i] > y[j]) - (y[i] < y[j])
            if a == 0 and b == 0:
                continue
            if a == 0:
                tx += 1
            elif b == 0:
                ty += 1
            elif a == b:
                c += 1
            else:
                d += 1
    den = ((c + d + tx) * (c + d + ty)) ** 0.5
    return (c - d) / den if den else 1.0


def main():
    argv = sys.argv[1:]
    seeds, strict, md = [1], False, False
    if "--seeds" in argv:
        i = argv.index("--seeds")
        spec = argv[i + 1]
        if ".." in spec:
            lo, hi = spec.split("..")
            seeds = list(range(int(lo), int(hi) + 1))
        else:
            seeds = [int(s) for s in spec.split(",")]
        del argv[i:i + 2]
    if "--strict" in argv:
        strict = True
        argv.remove("--strict")
    extra, fitm = [], []
    if "--fit-model" in argv:
        i = argv.index("--fit-model")
        fitm = ["--model", argv[i + 1]]
        del argv[i:i + 2]
    if "--scale-draw" in argv:
        i = argv.index("--scale-draw")
        extra = ["--scale-draw", argv[i + 1]]
        del argv[i:i + 2]
    summary = "--summary" in argv
    if summary:
        argv.remove("--summary")
    if "--markdown" in argv:
        md = True
        argv.remove("--markdown")
    allocsim, outdir, traces = argv[0], argv[1], argv[2:]
    os.makedirs(outdir, exist_ok=True)
    rows, ok = [], True
    for t in traces:
        name = os.path.basename(t).split(".")[0]
        params = os.path.join(outdir, name + ".params")
        run([allocsim, "gen", "--fit", t] + fitm + ["-o", params])
        real = {k: peak(allocsim, t, c) for k, c in SETTINGS}
        rpol = policies(allocsim, t)
        for s in seeds:
            g = os.path.join(outdir, "%s.seed%d.trace" % (name, s))
            run([allocsim, "gen", "--params", params, "--seed", str(s)] + extra + ["-o", g])
            gen = {k: peak(allocsim, g, c) for k, c in SETTINGS}
            gpol = policies(allocsim, g)
            pols = [p for p in rpol if p in gpol]
            ts = tau_b([real[k] for k, _ in SETTINGS], [gen[k] for k, _ in SETTINGS])
            tp = tau_b([rpol[p] for p in pols], [gpol[p] for p in pols])
            errs = {k: (gen[k] - real[k]) / real[k] * 100 for k in TARGET}
            met = all(abs(e) <= 10 for e in errs.values()) and ts >= 0.8 and tp >= 0.8
            ok &= met
            rows.append((name, s, real, gen, errs, ts, tp, met))
    if summary:
        print("| trace | seeds | " + " | ".join("%s error: median (min .. max)" % k for k in TARGET) +
              " | tau settings: median (min) | tau policies: median (min) | seeds meeting every target |")
        print("|---|---|" + "---|" * len(TARGET) + "---|---|---|")
        names = []
        for r in rows:
            if r[0] not in names:
                names.append(r[0])
        med = lambda v: sorted(v)[len(v) // 2]
        for name in names:
            rs = [r for r in rows if r[0] == name]
            cells = []
            for k in TARGET:
                e = [r[4][k] for r in rs]
                cells.append("%+.1f%% (%+.1f .. %+.1f)" % (med(e), min(e), max(e)))
            ts = [r[5] for r in rs]
            tp = [r[6] for r in rs]
            print("| %s | %d | %s | %.2f (%.2f) | %.2f (%.2f) | %d of %d |" % (name, len(rs), " | ".join(cells), med(ts), min(ts),
                                                                     med(tp), min(tp), sum(r[7] for r in rs), len(rs)))
    elif md:
        print("| trace | seed | " + " | ".join("%s real / gen (GiB, err)" % k for k in TARGET) +
              " | tau settings | tau policies | met |")
        print("|---|---|" + "---|" * len(TARGET) + "---|---|---|")
        for name, s, real, gen, errs, ts, tp, met in rows:
            cells = ["%.2f / %.2f (%+.1f%%)" % (real[k] / 2**30, gen[k] / 2**30, errs[k]) for k in TARGET]
            print("| %s | %d | %s | %.2f | %.2f | %s |" % (name, s, " | ".join(cells), ts, tp, "yes" if met else "no"))
    else:
        print("trace,seed," + ",".join("real_%s,gen_%s,err_%s" % (k, k, k) for k in TARGET) +
              ",tau_settings,tau_policies,met")
        for name, s, real, gen, errs, ts, tp, met in rows:
            print("%s,%d,%s,%.3f,%.3f,%d" % (name, s, ",".join("%d,%d,%.2f" % (real[k], gen[k], errs[k]) for k in TARGET),
                                          ts, tp, met))
    return 1 if strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
