#!/usr/bin/env python3
"""Timeline: requested / allocated / reserved bytes over the replay, one reserved line per run
(the allocated and requested lines are the first run's), the legend above the axes. Long
timelines are downsampled by keeping the minimum and maximum of each bucket of events, so every
peak is drawn at its height (never every k-th event, which drops the peaks between samples).
The title names the trace and policy (from --summary, the replay's -o CSV, or --title).
Input: CSV files from 'allocsim replay --timeline FILE' given as LABEL=FILE (or FILE); write them
without --every: a sampled file lacks the events between its samples, and a warning says so.
Example: plot_timeline.py -o tl --summary sum.csv default=a.csv expandable=b.csv"""
import os
import sys

import plotstyle as ps

COLS = ("event", "time_us", "requested_bytes", "allocated_bytes", "reserved_bytes")


def main():
    p = ps.parser(__doc__)
    p.add_argument("runs", nargs="+", help="LABEL=timeline.csv")
    p.add_argument("--x", choices=["event", "time"], default="event", help="x axis: event index or time_us")
    p.add_argument("--summary", help="the first run's summary CSV (replay -o): the title names its trace and policy")
    p.add_argument("--title", help="the title (instead of --summary's)")
    a = p.parse_args()
    runs = []
    for run in a.runs:
        label, _, path = run.rpartition("=")
        rows = ps.read_csv(path)
        ps.need(rows, path, *COLS, source="'allocsim replay --timeline FILE'", ints=COLS)
        ev = [int(r["event"]) for r in rows]
        step = min((b - a_ for a_, b in zip(ev, ev[1:])), default=1)
        if step > 1:
            sys.stderr.write("%s: warning: %s holds every %d-th event (replay --every %d): the peaks between "
                             "samples are not in the file; write the timeline without --every\n"
                             % (os.path.basename(sys.argv[0]), path, step, step))
        runs.append((label or path, rows))
    title = a.title
    if a.summary and not title:
        srows = ps.read_csv(a.summary)
        ps.need(srows, a.summary, "trace", "policy", source="the summary CSV of the same replay ('allocsim replay -o')")
        t = os.path.basename(srows[0]["trace"])
        for ext in (".gz", ".xz", ".pickle", ".pkl", ".asbin"):
            t = t[: -len(ext)] if t.endswith(ext) else t
        title = "%s, %s policy" % (t, srows[0]["policy"])
    fig, ax = ps.figure(a)
    top = max(max(int(r["reserved_bytes"]) for r in rows) for _, rows in runs)
    div, unit = ps.byte_unit(top)
    for i, (label, rows) in enumerate(runs):
        xs = [int(r["event"]) if a.x == "event" else (int(r["time_us"]) - int(rows[0]["time_us"])) / 1e6 for r in rows]

        def line(col, **kw):
            x, y = ps.minmax(xs, [int(r[col]) for r in rows])
            ax.plot(x, [v / div for v in y], **kw)
        line("reserved_bytes", color=ps.PALETTE[i % len(ps.PALETTE)], ls=ps.DASHES[(i // len(ps.PALETTE)) % len(ps.DASHES)],
             label="%s reserved" % label, gid="reserved:%s" % label)  # beyond 8 runs: dashed
        if i == 0:
            k = max(range(len(rows)), key=lambda k: int(rows[k]["allocated_bytes"]))  # the first peak
            peak = int(rows[k]["allocated_bytes"])
            line("allocated_bytes", color="0.45", lw=0.8, label="allocated (peak %s, marked)" % ps.fmt_bytes(peak), gid="allocated")
            ax.plot([xs[k]], [peak / div], marker="v", ms=4, color="0.3", ls="none", zorder=4, label="_peak")
            line("requested_bytes", color="0.7", lw=0.8, ls="--", label="requested", gid="requested")
    ax.set_xlabel("event" if a.x == "event" else "time (s)")
    ax.set_ylabel("memory (%s)" % unit)
    ax.set_ylim(bottom=0)
    ps.byte_ticks(ax.yaxis)
    if title:
        ax.set_title(title)
    h, l = ax.get_legend_handles_labels()
    order = [k for k in range(len(l)) if l[k].endswith(" reserved")] + [k for k in range(len(l)) if not l[k].endswith(" reserved")]
    ps.legend_above(fig, ax, [h[k] for k in order], [l[k] for k in order])  # outside the axes: no line passes under it
    print("\n".join(ps.save(fig, a.output)))


if __name__ == "__main__":
    main()
