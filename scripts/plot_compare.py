#!/usr/bin/env python3
"""Policy comparison: grouped bars of peak reserved bytes (and peak requested as a reference line)
per trace, one bar per policy/config, the legend above the axes. Each policy has its fixed colour
(several settings of one policy: the palette in order); runs that hit out-of-memory are hatched.
The title says what is compared, from the data.
Input: summary CSVs from 'allocsim replay', 'sweep' or 'compare'."""
import os

import plotstyle as ps


def main():
    p = ps.parser(__doc__)
    p.add_argument("csv", nargs="+")
    a = p.parse_args()
    rows = []
    for f in a.csv:
        rs = ps.read_csv(f)
        ps.need(rs, f, "trace", "policy", "config", "peak_reserved_bytes", "peak_requested_bytes",
                source="summary CSVs ('allocsim replay -o', 'sweep', 'compare')", ints=("peak_reserved_bytes", "peak_requested_bytes"))
        rows += rs
    traces, setups = [], []
    for r in rows:
        s = "%s %s" % (r["policy"], r["config"] or "(defaults)")
        if r["trace"] not in traces:
            traces.append(r["trace"])
        if s not in setups:
            setups.append(s)
    colors = ps.series_colors(setups)
    fig, ax = ps.figure(a)
    w = 0.8 / len(setups)
    labelled = set()
    top = max(int(r["peak_reserved_bytes"]) for r in rows)
    div, unit = ps.byte_unit(top)
    for j, s in enumerate(setups):
        for i, t in enumerate(traces):
            for r in rows:
                if r["trace"] == t and "%s %s" % (r["policy"], r["config"] or "(defaults)") == s:
                    v = int(r["peak_reserved_bytes"]) / div
                    oom = int(r.get("num_ooms") or 0) > 0
                    ax.bar(i + (j - (len(setups) - 1) / 2) * w, v, w, color=colors[j], label=None if s in labelled else s,
                           hatch=ps.OOM_HATCH if oom else None, edgecolor="black" if oom else "white", linewidth=0.3,
                           gid="oom" if oom else None)
                    labelled.add(s)
                    ax.plot([i - 0.4, i + 0.4], [int(r["peak_requested_bytes"]) / div] * 2, color="black", lw=0.8, ls=":",
                            label="peak requested" if i == 0 and j == 0 else None)
    ax.set_xticks(range(len(traces)))
    ax.set_xticklabels([os.path.basename(t).split("__")[0] for t in traces])
    ax.set_ylabel("peak reserved (%s)" % unit)
    ps.byte_ticks(ax.yaxis)
    pols = sorted({r["policy"] for r in rows})
    ax.set_title("peak reserved by %s, %d settings" % (", ".join(pols), len(setups)) if len(pols) == 1 else
                 "peak reserved by %d policies" % len(pols), fontsize=7)
    h, l = ax.get_legend_handles_labels()
    if any(int(r.get("num_ooms") or 0) > 0 for r in rows):
        from matplotlib.patches import Patch
        h.append(Patch(facecolor="white", edgecolor="black", hatch=ps.OOM_HATCH, linewidth=0.3))
        l.append("out of memory (num_ooms > 0)")
    ps.legend_above(fig, ax, h, l)  # outside the axes: no bar or line under it
    print("\n".join(ps.save(fig, a.output)))


if __name__ == "__main__":
    main()
