#!/usr/bin/env python3
"""Segment map: every segment as a horizontal bar of its blocks, coloured by state (allocated,
free, pending free), like PyTorch's memory viewer. Input: 'allocsim replay --segments FILE'."""
import csv

import plotstyle as ps

COLORS = {"allocated": ps.PALETTE[0], "free": "#DDDDDD", "pending_free": ps.PALETTE[1]}


def main():
    p = ps.parser(__doc__)
    p.add_argument("csv")
    p.add_argument("--moment", choices=["peak", "end"], default="peak")
    p.add_argument("--max-segments", type=int, default=60, help="draw at most this many segments, largest first")
    a = p.parse_args()
    rows = [r for r in csv.DictReader(open(a.csv)) if r["moment"] == a.moment]
    segs = {}
    for r in rows:
        segs.setdefault(int(r["segment"]), []).append(r)
    order = sorted(segs, key=lambda s: -int(segs[s][0]["segment_bytes"]))[: a.max_segments]
    fig, ax = ps.figure(a, height=max(2.0, 0.09 * len(order) + 0.8))
    top = max((int(segs[s][0]["segment_bytes"]) for s in order), default=1)
    div, unit = ps.byte_unit(top)
    for y, s in enumerate(order):
        for r in segs[s]:
            ax.barh(y, int(r["block_bytes"]) / div, left=int(r["block_offset"]) / div, height=0.8,
                    color=COLORS[r["state"]], edgecolor="white", linewidth=0.2)
    ax.set_yticks([])
    ax.set_ylabel("segments (largest first)")
    ax.set_xlabel("offset in segment (%s)" % unit)
    ax.invert_yaxis()
    for st, c in COLORS.items():
        ax.barh(0, 0, color=c, label=st.replace("_", " "))
    ax.legend(frameon=False, loc="lower right")
    total = sum(int(segs[s][0]["segment_bytes"]) for s in segs)
    ax.set_title("%d segments, %.2f %s reserved (%s)" % (len(segs), total / ps.byte_unit(total)[0], ps.byte_unit(total)[1], a.moment))
    print("\n".join(ps.save(fig, a.output)))


if __name__ == "__main__":
    main()
