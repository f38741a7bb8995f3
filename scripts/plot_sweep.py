#!/usr/bin/env python3
"""Sweep curves: peak reserved bytes and cudaMalloc count against a swept parameter, one line per
trace. Input: the CSV of 'allocsim sweep' (the parameter is a column of it); 'none' is drawn first."""
import csv
import os

import plotstyle as ps


def key(v):
    return (0, 0) if v == "none" else (1, float(v))


def main():
    p = ps.parser(__doc__)
    p.add_argument("csv", help="sweep CSV")
    p.add_argument("--param", required=True, help="the swept column (e.g. max_split_size_mb)")
    a = p.parse_args()
    rows = list(csv.DictReader(open(a.csv)))
    values = sorted({r[a.param] for r in rows}, key=key)
    pos = {v: i for i, v in enumerate(values)}
    fig, (ax1, ax2) = ps.figure(a, 1, 2, height=ps.WIDTHS[a.width] * 0.45)
    traces = []
    for r in rows:
        if r["trace"] not in traces:
            traces.append(r["trace"])
    top = max(int(r["peak_reserved_bytes"]) for r in rows)
    for i, t in enumerate(traces):
        sel = sorted((r for r in rows if r["trace"] == t), key=lambda r: key(r[a.param]))
        xs = [pos[r[a.param]] for r in sel]
        name = os.path.basename(t).split(".")[0].replace("__", " ")
        res, unit = ps.scaled([int(r["peak_reserved_bytes"]) for r in sel], top)
        ax1.plot(xs, res, marker="o", ms=3, color=ps.PALETTE[i % 8], label=name)
        ax2.plot(xs, [int(r["num_device_alloc"]) for r in sel], marker="o", ms=3, color=ps.PALETTE[i % 8])
    for ax in (ax1, ax2):
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels(values, rotation=45)
        ax.set_xlabel(a.param)
    ax1.set_ylabel("peak reserved (%s)" % unit)
    ax2.set_ylabel("cudaMalloc calls")
    ax2.set_yscale("log")
    ax1.set_ylim(bottom=0)
    fig.legend(loc="upper center", ncol=min(3, len(traces)), frameon=False, bbox_to_anchor=(0.5, 1.08))
    print("\n".join(ps.save(fig, a.output)))


if __name__ == "__main__":
    main()
