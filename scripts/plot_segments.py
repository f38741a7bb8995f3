#!/usr/bin/env python3
"""Segment map: every segment as a horizontal bar of its blocks, coloured by state (allocated,
free, pending free), like PyTorch's memory viewer. The title names the trace and the settings
(from the replay's summary CSV, --summary, or --trace/--settings). By default each row spans the
full width and its size is its label, so a 2 MiB segment stays as visible as a 1.5 GiB one;
--scale absolute draws offsets in bytes on one axis instead (small segments then become slivers).
Input: 'allocsim replay --segments FILE [-o SUMMARY]'.
Example: plot_segments.py seg.csv --summary sum.csv -o fig/segments"""
import os

import plotstyle as ps

COLORS = {"allocated": ps.PALETTE[0], "free": "#DDDDDD", "pending_free": ps.PALETTE[1]}


def main():
    p = ps.parser(__doc__)
    p.add_argument("csv")
    p.add_argument("--moment", choices=["peak", "end"], default="peak")
    p.add_argument("--max-segments", type=int, default=40,
                   help="draw at most this many segments: one of every size, then the largest (default 40)")
    p.add_argument("--scale", choices=["segment", "absolute"], default="segment",
                   help="segment: each row is its own segment's width (default); absolute: one byte axis")
    p.add_argument("--summary", help="the replay's summary CSV: the title names its trace, policy and config")
    p.add_argument("--trace", help="the trace named in the title (instead of --summary)")
    p.add_argument("--settings", help="the policy and settings named in the title (with --trace)")
    a = p.parse_args()
    if a.summary:
        srows = ps.read_csv(a.summary)
        ps.need(srows, a.summary, "trace", "policy", "config", source="the summary CSV of the same replay ('allocsim replay -o')")
        trace, settings = srows[0]["trace"], "%s %s" % (srows[0]["policy"], srows[0]["config"] or "(defaults)")
    elif a.trace:
        trace, settings = a.trace, a.settings or "settings not given"
    else:
        ps.die("name the trace in the title: --summary SUMMARY.csv (the replay's -o) or --trace NAME [--settings TEXT]", 64)
    trace = os.path.basename(trace)
    for ext in (".gz", ".xz", ".pickle", ".pkl"):
        trace = trace[: -len(ext)] if trace.endswith(ext) else trace
    rows = ps.read_csv(a.csv)
    ps.need(rows, a.csv, "moment", "segment", "segment_bytes", "block_offset", "block_bytes", "state",
            source="'allocsim replay --segments FILE'", ints=("segment", "segment_bytes", "block_offset", "block_bytes"))
    rows = [r for r in rows if r["moment"] == a.moment]
    segs = {}
    for r in rows:
        segs.setdefault(int(r["segment"]), []).append(r)
    if not segs:
        ps.die("%s: no segment at moment '%s'" % (a.csv, a.moment))
    size = {s: int(segs[s][0]["segment_bytes"]) for s in segs}
    byself = sorted(segs, key=lambda s: (-size[s], s))
    # when not all fit: one segment of every size first (small ones too), then the largest others
    pick, seen = [], set()
    for s in byself:
        if size[s] not in seen:
            seen.add(size[s])
            pick.append(s)
    pick = pick[: a.max_segments]
    pick += [s for s in byself if s not in pick][: a.max_segments - len(pick)]
    order = sorted(pick, key=lambda s: (-size[s], s))
    fig, ax = ps.figure(a, height=max(2.0, 0.1 * len(order) + 1.0))
    top = max(int(segs[s][0]["segment_bytes"]) for s in order)
    div, unit = ps.byte_unit(top)
    for y, s in enumerate(order):
        size = int(segs[s][0]["segment_bytes"])
        d = size if a.scale == "segment" else div
        for r in segs[s]:
            ax.barh(y, int(r["block_bytes"]) / d, left=int(r["block_offset"]) / d, height=0.8,
                    color=COLORS.get(r["state"], "#999999"), edgecolor="white", linewidth=0.2)
    if a.scale == "segment":
        ax.set_yticks(range(len(order)))
        ax.set_yticklabels([ps.fmt_bytes(int(segs[s][0]["segment_bytes"])) for s in order], fontsize=5)
        ax.tick_params(axis="y", length=0, pad=1)
        ax.set_xlim(0, 1)
        ax.xaxis.set_major_formatter(ps.ticker.PercentFormatter(1.0))
        ax.set_xlabel("offset in segment (share of its size)")
        ax.grid(False, axis="y")
    else:
        ax.set_yticks([])
        ax.set_xlabel("offset in segment (%s)" % unit)
    shown = "segments, largest first" if len(order) == len(segs) else \
        "%d of %d segments: every size, then the largest" % (len(order), len(segs))
    ax.set_ylabel(shown)
    ax.set_ylim(len(order) - 0.5, -0.5)
    ax.set_axisbelow(True)  # the grid behind the blocks
    from matplotlib.patches import Patch
    handles = [Patch(color=c) for c in COLORS.values()]
    fig.legend(handles, [st.replace("_", " ") for st in COLORS], loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=len(COLORS), frameon=False)
    total = sum(int(segs[s][0]["segment_bytes"]) for s in segs)
    ax.set_title("%s, %s\n%d segments, %s reserved at the %s" % (trace, settings, len(segs), ps.fmt_bytes(total),
                                                                "peak" if a.moment == "peak" else "end"))
    print("\n".join(ps.save(fig, a.output)))


if __name__ == "__main__":
    main()
