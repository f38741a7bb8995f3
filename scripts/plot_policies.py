#!/usr/bin/env python3
"""Policy comparison against the lower bound: peak reserved / lower bound per trace and policy as
grouped bars (1.0 = no byte wasted), log scale when the ratios span more than a factor of 10.
Input: the CSV of 'allocsim compare -p all TRACE...' (or any summary CSVs with the columns policy,
trace, peak_reserved_bytes and overhead_vs_bound or lower_bound_bytes). A policy missing for a
trace (not run, or no bound) is marked n/a; runs that hit out-of-memory are hatched.
Traces side by side when their names fit; otherwise a few traces as rows of horizontal bars, or
many as columns with upright names (--orient to choose).
Example: plot_policies.py compare.csv --width double -o fig/policies"""
import os

import plotstyle as ps


def ratio(r):
    """peak reserved / lower bound of a row, or None when it has no bound."""
    v = r.get("overhead_vs_bound", "")
    if v not in ("", "nan", "-", None):
        try:
            x = float(v)
            return x if x > 0 else None
        except ValueError:
            return None
    lb = r.get("lower_bound_bytes", "")
    if lb not in ("", "0", None):
        return int(r["peak_reserved_bytes"]) / int(lb)
    return None


def short(trace):
    name = os.path.basename(trace)
    for ext in (".gz", ".xz", ".pickle", ".pkl", ".csv", ".txt", ".log", ".bin", ".asbin"):
        name = name[: -len(ext)] if name.endswith(ext) else name
    return name.replace("__", " ")


def main():
    p = ps.parser(__doc__)
    p.add_argument("csv", nargs="+")
    p.add_argument("--policies", help="comma list: these policies in this order (default: all, in file order)")
    p.add_argument("--orient", choices=["auto", "vertical", "horizontal"], default="auto",
                   help="bars up (traces side by side) or across (traces as rows); auto: by the names and count")
    p.add_argument("--scale", choices=["auto", "log", "linear"], default="auto", help="y scale (default: log when needed)")
    a = p.parse_args()
    rows = []
    for f in a.csv:
        rs = ps.read_csv(f)
        ps.need(rs, f, "policy", "trace", "peak_reserved_bytes")
        if "overhead_vs_bound" not in rs[0] and "lower_bound_bytes" not in rs[0]:
            ps.die("%s: no column overhead_vs_bound or lower_bound_bytes: write it with 'allocsim compare'" % f)
        rows += rs
    # a setup is a policy, with its config when one policy appears with several
    configs = {}
    for r in rows:
        configs.setdefault(r["policy"], set()).add(r.get("config", ""))

    def setup(r):
        return r["policy"] if len(configs[r["policy"]]) == 1 or not r.get("config") else "%s %s" % (r["policy"], r["config"])

    traces, setups, cell = [], [], {}
    for r in rows:
        if r["trace"] not in traces:
            traces.append(r["trace"])
        s = setup(r)
        if s not in setups:
            setups.append(s)
        cell[(r["trace"], s)] = r
    if a.policies:
        want = a.policies.split(",")
        unknown = [w for w in want if w not in setups]
        if unknown:
            ps.die("no rows of %s in %s (policies there: %s)" % (", ".join(unknown), ", ".join(a.csv), ", ".join(setups)))
        setups = want
    vals = [ratio(cell[k]) for k in cell if k[1] in setups and ratio(cell[k]) is not None]
    if not vals:
        ps.die("%s: no row has a lower bound" % ", ".join(a.csv))
    log = a.scale == "log" or (a.scale == "auto" and max(vals) / min(vals) > 10)
    names = [short(t) for t in traces]
    # names side by side when they fit; else a few traces as rows of horizontal bars, many traces
    # as columns with upright names (never tilted labels, which collide)
    fits = sum(len(s) + 2 for s in names) * 0.05 < ps.WIDTHS[a.width] * 0.85
    orient = a.orient if a.orient != "auto" else "vertical" if fits or len(traces) > 8 else "horizontal"
    horizontal = orient == "horizontal"
    upright = not horizontal and not fits
    n = len(setups)
    if horizontal:
        fig, ax = ps.figure(a, height=max(2.2, 0.06 * n * len(traces) + 0.9))
    else:
        fig, ax = ps.figure(a, height=ps.WIDTHS[a.width] * 0.62 * (1.0 if ps.WIDTHS[a.width] < 5 else 0.55)
                            + (0.05 * max(len(s) for s in names) if upright else 0))
    w = 0.8 / n
    labelled = set()
    lo, hi = min(min(vals), 1.0), max(vals)
    lim = (lo / 1.15, hi * 1.3) if log else (0, hi * 1.08)
    base = lim[0]  # bars start at the axis: one at the bound (1.0) still shows
    for j, s in enumerate(setups):
        col = ps.PALETTE[j % len(ps.PALETTE)]
        hatch = ["", "////", "....", "xxxx"][(j // len(ps.PALETTE)) % 4]  # beyond 8 colours
        for i, t in enumerate(traces):
            pos = i + (j - (n - 1) / 2) * w
            r = cell.get((t, s))
            v = ratio(r) if r else None
            if v is None:
                kw = dict(rotation=0 if horizontal else 90, fontsize=4.5, color="0.4",
                          ha="left" if horizontal else "center", va="center" if horizontal else "bottom")
                ax.text(*((base, pos) if horizontal else (pos, base)), " n/a", **kw)
                continue
            oom = int(r.get("num_ooms") or 0) > 0
            kw = dict(color=col, hatch="xxxxx" if oom else hatch, edgecolor="white" if not oom else "black",
                      linewidth=0.3, label=None if s in labelled else s)
            labelled.add(s)
            if horizontal:
                ax.barh(pos, v - base, w, left=base, **kw)
            else:
                ax.bar(pos, v - base, w, bottom=base, **kw)
    ref = ax.axvline if horizontal else ax.axhline
    ref(1.0, color="black", lw=0.8, ls=":", label="lower bound (1.0)")
    vax = ax.xaxis if horizontal else ax.yaxis
    if log:
        (ax.set_xscale if horizontal else ax.set_yscale)("log")
    (ax.set_xlim if horizontal else ax.set_ylim)(lim)
    if log:
        ps.log_ticks(ax, "x" if horizontal else "y")
    if horizontal:
        ax.set_yticks(range(len(traces)), names, fontsize=6)
        ax.set_ylim(len(traces) - 0.5, -0.5)
        ax.grid(False, axis="y")
    else:
        ax.set_xticks(range(len(traces)), names, rotation=90 if upright else 0)
        ax.set_xlim(-0.5, len(traces) - 0.5)
        ax.grid(False, axis="x")
    vax.set_label_text("reserved / lower bound")
    if all(not r.get("config") for r in cell.values()):  # say so: a trace's name may carry settings
        ax.set_title("every policy with its default settings", fontsize=7)
    h, l = ax.get_legend_handles_labels()
    if any(int(r.get("num_ooms") or 0) > 0 for r in cell.values()):
        from matplotlib.patches import Patch
        h.append(Patch(facecolor="white", edgecolor="black", hatch="xxxxx", linewidth=0.3))
        l.append("out of memory (num_ooms > 0)")
    ps.legend_above(fig, ax, h, l)
    print("\n".join(ps.save(fig, a.output)))


if __name__ == "__main__":
    main()
