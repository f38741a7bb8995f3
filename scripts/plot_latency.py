#!/usr/bin/env python3
"""Latency CDF: the distribution of per-call malloc (and free) latency, one line per run, on a log
axis; the axis label says what the values are (the 'timing' column of the file): measured on the
GPU, modelled device time plus measured host time, or modelled device time only.
Input: CSVs from 'allocsim replay --latency FILE' given as LABEL=FILE (or FILE).
A file written with --no-timing holds the modelled device time only, 0 for every call that the
cache serves: such zeros cannot be drawn on a log axis and are refused, unless --device-calls
draws only the calls that reach the device (deterministic: make figures uses it).
Example: plot_latency.py -o lat pytorch=lat1.csv passthrough=lat2.csv"""
import plotstyle as ps

WHAT = {"measured": "measured on the GPU", "model+host": "modelled device time + measured host time",
        "model": "modelled device time"}


def timing_of(rows, path):
    """The 'timing' column's value (one per file); files from before the column: 'model' when every
    ns is the device time (--no-timing), else unknown."""
    if "timing" in rows[0]:
        kinds = {r["timing"] for r in rows}
        if len(kinds) != 1 or not kinds <= set(WHAT):
            ps.die("%s: timing column holds %s, expected one of %s" % (path, ", ".join(sorted(kinds)), ", ".join(WHAT)))
        return kinds.pop()
    if all(abs(float(r["ns"]) - 1000.0 * float(r["device_us"])) < 1.0 for r in rows):
        return "model"
    return "unknown"


def main():
    p = ps.parser(__doc__)
    p.add_argument("runs", nargs="+", help="LABEL=latency.csv")
    p.add_argument("--op", choices=["malloc", "free", "both"], default="malloc")
    p.add_argument("--device-calls", action="store_true",
                   help="only the calls that reach the device (device_us > 0), their device time")
    a = p.parse_args()
    fig, ax = ps.figure(a)
    kinds = []
    opname = a.op if a.op != "both" else "malloc and free"
    for i, run in enumerate(a.runs):
        label, _, path = run.rpartition("=")
        rows = ps.read_csv(path)
        ps.need(rows, path, "op", "ns", "device_us", source="'allocsim replay --latency FILE'", floats=("ns", "device_us"))
        kind = timing_of(rows, path)
        sel = [r for r in rows if a.op == "both" or r["op"] == a.op]
        if a.device_calls:
            ns = sorted(float(r["device_us"]) for r in sel if float(r["device_us"]) > 0)  # in µs
            kind = "measured" if kind == "measured" else "model"
            label = "%s (%d of %d calls)" % (label or path, len(ns), len(sel))
        else:
            ns = sorted(float(r["ns"]) for r in sel)
            zeros = sum(1 for v in ns if v <= 0)
            if zeros:
                ps.die("%s: %d of %d %s latencies are 0 ns: the file holds %s only (replay --no-timing), which is 0 for "
                       "every call the cache serves and has no place on a log axis; replay without --no-timing for the "
                       "latency of every call, or pass --device-calls to draw only the calls that reach the device"
                       % (path, zeros, len(ns), opname, WHAT.get(kind, "a latency")), 65)
        if not ns:
            ps.die("%s: no %s call%s" % (path, opname, " reaches the device" if a.device_calls else ""), 65)
        kinds.append(kind)
        ys = [(k + 1) / len(ns) for k in range(len(ns))]
        ax.step(ns, ys, where="post", color=ps.policy_color(label or "", i), label=label or path)
    ax.set_xscale("log")
    what = WHAT.get(kinds[0], "source unknown: no timing column") if len(set(kinds)) == 1 else "mixed sources"
    if len(set(kinds)) > 1:  # say it per line
        for line, k in zip(ax.lines, kinds):
            line.set_label("%s [%s]" % (line.get_label(), WHAT.get(k, "unknown")))
    if a.device_calls:
        ax.set_xlabel("device time of a %s that reaches the device (µs)\n%s" % (opname, what))
        ax.set_ylabel("fraction of those calls")
    else:
        ax.set_xlabel("%s latency (ns)\n%s" % (opname, what))
        ax.set_ylabel("fraction of calls")
    ax.set_ylim(0, 1.01)
    ps.log_ticks(ax, "x")
    ps.legend_above(fig, ax)
    print("\n".join(ps.save(fig, a.output)))


if __name__ == "__main__":
    main()
