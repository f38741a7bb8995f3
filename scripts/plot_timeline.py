#!/usr/bin/env python3
"""Timeline: requested / allocated / reserved bytes over the replay, one reserved line per run
(the allocated and requested lines are the first run's), the legend above the axes.
Input: CSV files from 'allocsim replay --timeline FILE' given as LABEL=FILE (or FILE).
Example: plot_timeline.py -o tl default=a.csv expandable=b.csv"""
import plotstyle as ps


def main():
    p = ps.parser(__doc__)
    p.add_argument("runs", nargs="+", help="LABEL=timeline.csv")
    p.add_argument("--x", choices=["event", "time"], default="event", help="x axis: event index or time_us")
    a = p.parse_args()
    fig, ax = ps.figure(a)
    runs = []
    for run in a.runs:
        label, _, path = run.rpartition("=")
        rows = ps.read_csv(path)
        ps.need(rows, path, "event", "time_us", "requested_bytes", "allocated_bytes", "reserved_bytes")
        runs.append((label or path, rows))
    top = max(max((int(r["reserved_bytes"]) for r in rows), default=1) for _, rows in runs)
    for i, (label, rows) in enumerate(runs):
        xs = [int(r["event"]) if a.x == "event" else (int(r["time_us"]) - int(rows[0]["time_us"])) / 1e6 for r in rows]
        res, unit = ps.scaled([int(r["reserved_bytes"]) for r in rows], top)
        ax.plot(xs, res, color=ps.PALETTE[i % len(ps.PALETTE)], ls=ps.DASHES[(i // len(ps.PALETTE)) % len(ps.DASHES)],
                label="%s reserved" % label)  # beyond 8 runs: dashed
        if i == 0:
            ax.plot(xs, ps.scaled([int(r["allocated_bytes"]) for r in rows], top)[0], color="0.45", lw=0.8, label="allocated")
            ax.plot(xs, ps.scaled([int(r["requested_bytes"]) for r in rows], top)[0], color="0.7", lw=0.8, ls="--", label="requested")
    ax.set_xlabel("event" if a.x == "event" else "time (s)")
    ax.set_ylabel("memory (%s)" % unit)
    ax.set_ylim(bottom=0)
    ps.byte_ticks(ax.yaxis)
    h, l = ax.get_legend_handles_labels()
    order = [k for k in range(len(l)) if l[k].endswith(" reserved")] + [k for k in range(len(l)) if not l[k].endswith(" reserved")]
    ps.legend_above(fig, ax, [h[k] for k in order], [l[k] for k in order])  # outside the axes: no line passes under it
    print("\n".join(ps.save(fig, a.output)))


if __name__ == "__main__":
    main()
