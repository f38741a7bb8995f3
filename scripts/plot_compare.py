#!/usr/bin/env python3
"""Policy comparison: grouped bars of peak reserved bytes (and peak requested as a reference line)
per trace, one bar per policy/config, the legend above the axes. Input: summary CSVs from 'allocsim replay' or 'allocsim sweep'."""
import os

import plotstyle as ps


def main():
    p = ps.parser(__doc__)
    p.add_argument("csv", nargs="+")
    a = p.parse_args()
    rows = []
    for f in a.csv:
        rs = ps.read_csv(f)
        ps.need(rs, f, "trace", "policy", "config", "peak_reserved_bytes", "peak_requested_bytes")
        rows += rs
    traces, setups = [], []
    for r in rows:
        s = "%s %s" % (r["policy"], r["config"] or "(defaults)")
        if r["trace"] not in traces:
            traces.append(r["trace"])
        if s not in setups:
            setups.append(s)
    fig, ax = ps.figure(a)
    w = 0.8 / len(setups)
    top = max(int(r["peak_reserved_bytes"]) for r in rows)
    div, unit = ps.byte_unit(top)
    for j, s in enumerate(setups):
        for i, t in enumerate(traces):
            for r in rows:
                if r["trace"] == t and "%s %s" % (r["policy"], r["config"] or "(defaults)") == s:
                    v = int(r["peak_reserved_bytes"]) / div
                    ax.bar(i + (j - (len(setups) - 1) / 2) * w, v, w, color=ps.PALETTE[j % 8], label=s if i == 0 else None,
                           hatch=["", "////", "....", "xxxx"][(j // 8) % 4], edgecolor="white", linewidth=0.3)
                    ax.plot([i - 0.4, i + 0.4], [int(r["peak_requested_bytes"]) / div] * 2, color="black", lw=0.8, ls=":",
                            label="peak requested" if i == 0 and j == 0 else None)
    ax.set_xticks(range(len(traces)))
    ax.set_xticklabels([os.path.basename(t).split("__")[0] for t in traces])
    ax.set_ylabel("peak reserved (%s)" % unit)
    ps.byte_ticks(ax.yaxis)
    ps.legend_above(fig, ax)  # outside the axes: no bar or line under it
    print("\n".join(ps.save(fig, a.output)))


if __name__ == "__main__":
    main()
