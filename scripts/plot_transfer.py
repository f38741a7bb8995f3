#!/usr/bin/env python3
"""Transfer bandwidth: host-to-device and device-to-host GB/s against copy size, pageable vs pinned
host memory. Input: the CSV of 'allocsim transfer'."""
import plotstyle as ps


def main():
    p = ps.parser(__doc__)
    p.add_argument("csv")
    a = p.parse_args()
    rows = ps.read_csv(a.csv)
    ps.need(rows, a.csv, "size_bytes", "host_memory", "operation", "gb_per_s", source="the CSV of 'allocsim transfer -o'")
    rows = [r for r in rows if r["operation"] in ("H2D", "D2H")]
    if not rows:
        ps.die("%s: no H2D or D2H row" % a.csv)
    fig, ax = ps.figure(a)
    i = 0
    for host in ("pageable", "pinned"):
        for op in ("H2D", "D2H"):
            sel = sorted((r for r in rows if r["host_memory"] == host and r["operation"] == op), key=lambda r: int(r["size_bytes"]))
            if not sel:
                continue
            ax.plot([int(r["size_bytes"]) for r in sel], [float(r["gb_per_s"]) for r in sel], marker="o", ms=3,
                    color=ps.PALETTE[i % 8], ls="-" if host == "pinned" else "--", label="%s %s" % (host, op))
            i += 1
    ax.set_xscale("log")
    sizes = sorted({int(r["size_bytes"]) for r in rows})
    ax.set_xticks(sizes, [ps.fmt_bytes(v) for v in sizes])  # the measured sizes, in KiB/MiB/GiB
    ax.xaxis.set_minor_locator(ps.ticker.NullLocator())
    ax.set_xlabel("copy size")
    ax.set_ylabel("bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    ps.thin_labels(fig, [ax], "x")
    ps.legend_above(fig, ax)
    print("\n".join(ps.save(fig, a.output)))


if __name__ == "__main__":
    main()
