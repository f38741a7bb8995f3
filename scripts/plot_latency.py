#!/usr/bin/env python3
"""Latency CDF: the distribution of per-call malloc (and free) latency, one line per run.
Input: CSVs from 'allocsim replay --latency FILE' given as LABEL=FILE (or FILE)."""
import csv

import plotstyle as ps


def main():
    p = ps.parser(__doc__)
    p.add_argument("runs", nargs="+", help="LABEL=latency.csv")
    p.add_argument("--op", choices=["malloc", "free", "both"], default="malloc")
    a = p.parse_args()
    fig, ax = ps.figure(a)
    for i, run in enumerate(a.runs):
        label, _, path = run.rpartition("=")
        ns = sorted(float(r["ns"]) for r in csv.DictReader(open(path)) if a.op == "both" or r["op"] == a.op)
        ns = [max(v, 1.0) for v in ns]  # log axis: a call that cost nothing is drawn at 1 ns
        if not ns:
            continue
        ys = [(k + 1) / len(ns) for k in range(len(ns))]
        ax.step(ns, ys, where="post", color=ps.PALETTE[i % 8], label=label or path)
    ax.set_xscale("log")
    ax.set_xlabel("%s latency (ns)" % (a.op if a.op != "both" else "malloc and free"))
    ax.set_ylabel("fraction of calls")
    ax.set_ylim(0, 1.01)
    ax.legend(frameon=False, loc="lower right")
    print("\n".join(ps.save(fig, a.output)))


if __name__ == "__main__":
    main()
