#!/usr/bin/env python3
"""Sweep curves: peak reserved bytes and cudaMalloc count against a swept parameter, one colour and
marker per trace, one line style per value of a second swept parameter (or policy), OOM runs marked.
Input: the CSV of 'allocsim sweep' (each parameter is a column between 'run' and 'trace'). The
swept parameter is inferred when one column varies; name it with --param (and the second with
--by) when several do. Values may carry units (16GiB, 512MiB); 'none' is drawn first.
Example: plot_sweep.py sweep.csv -o fig/sweep"""
import os

import plotstyle as ps


def param_columns(rows):
    """The parameter columns of a sweep CSV: those between 'run' and 'trace'."""
    cols = list(rows[0])
    if cols and cols[0] == "run" and "trace" in cols:
        return cols[1:cols.index("trace")]
    return []


def distinct(rows, col):
    out = []
    for r in rows:
        if r[col] not in out:
            out.append(r[col])
    return out


class Values:
    """The values of one parameter in drawing order, with their tick labels."""

    def __init__(self, name, vals):
        self.name = name
        rest = [v for v in vals if v != "none"]
        sizes = [ps.parse_size(v) for v in rest]
        numeric = all(s is not None for s in sizes) and rest
        self.bytes = bool(numeric) and (name == "capacity" or name.endswith("_bytes") or any(ps.has_unit(v) for v in rest))
        if numeric:
            order = sorted(zip(sizes, rest))
            self.order = (["none"] if "none" in vals else []) + [v for _, v in order]
            num = dict(zip(rest, sizes))
            self.labels = ["none" if v == "none" else ps.fmt_bytes(num[v]) if self.bytes else ("%g" % num[v]) for v in self.order]
        else:  # categories (True/False, policy names) in order of appearance
            self.order = list(vals)
            self.labels = list(vals)
        self.pos = {v: i for i, v in enumerate(self.order)}


def short(trace):
    name = os.path.basename(trace)
    for ext in (".gz", ".xz", ".pickle", ".pkl", ".csv", ".txt", ".log", ".bin", ".asbin"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    return name.replace("__", " ")


def main():
    p = ps.parser(__doc__)
    p.add_argument("csv", help="sweep CSV")
    p.add_argument("--param", help="the swept column on the x axis (default: inferred)")
    p.add_argument("--by", help="a second swept column (or 'policy'), one line style per value (default: inferred)")
    p.add_argument("--where", action="append", default=[], metavar="NAME=VALUE", help="keep only rows with this value (repeatable)")
    a = p.parse_args()
    rows = ps.read_csv(a.csv)
    ps.need(rows, a.csv, "trace", "peak_reserved_bytes", "num_device_alloc", source="the CSV of 'allocsim sweep'",
            ints=("peak_reserved_bytes", "num_device_alloc"))
    for w in a.where:
        k, _, v = w.partition("=")
        ps.need(rows, a.csv, k)
        rows = [r for r in rows if r[k] == v or (ps.parse_size(v) is not None and ps.parse_size(v) == ps.parse_size(r[k]))]
        if not rows:
            ps.die("%s: no row has %s" % (a.csv, w))
    cands = param_columns(rows) + (["policy"] if "policy" in rows[0] else [])
    varying = [c for c in cands if len(distinct(rows, c)) > 1]
    for c in (a.param, a.by):
        if c:
            ps.need(rows, a.csv, c)
    x = a.param or next((c for c in varying if c != a.by and c != "policy"), None) or next((c for c in varying if c != a.by), None)
    if x is None:
        ps.die("%s: no swept parameter: no column between 'run' and 'trace' takes more than one value; name one with --param" % a.csv, 64)
    others = [c for c in varying if c not in (x, a.by)]
    by = a.by or (others[0] if others else None)
    left = [c for c in varying if c not in (x, by)]
    if left:
        ps.die("%s: %s vary too; the figure shows two parameters (x: %s, line style: %s): select the others with --where %s=VALUE"
               % (a.csv, ", ".join(left), x, by, left[0]), 64)
    xv = Values(x, distinct(rows, x))
    bv = Values(by, distinct(rows, by)) if by else None
    if bv and len(bv.order) > len(ps.DASHES):
        ps.die("%s: %s takes %d values, more than the %d line styles; select some with --where" % (a.csv, by, len(bv.order), len(ps.DASHES)), 64)
    traces = distinct(rows, "trace")

    single = a.width == "single"
    fig, (ax1, ax2) = ps.figure(a, 2 if single else 1, 1 if single else 2, sharex=True,
                                height=ps.WIDTHS[a.width] * (0.95 if single else 0.36))
    top = max(int(r["peak_reserved_bytes"]) for r in rows)
    div, unit = ps.byte_unit(top)
    ooms = []
    for i, t in enumerate(traces):
        st = ps.style(i)
        for j, b in enumerate(bv.order if bv else [None]):
            sel = sorted((r for r in rows if r["trace"] == t and (b is None or r[by] == b)), key=lambda r: xv.pos[r[x]])
            if not sel:
                continue
            xs = [xv.pos[r[x]] for r in sel]
            kw = dict(color=st["color"], marker=st["marker"], ms=3.5, ls=ps.DASHES[j] if bv else "-")
            ax1.plot(xs, [int(r["peak_reserved_bytes"]) / div for r in sel], **kw)
            ax2.plot(xs, [max(int(r["num_device_alloc"]), 1) for r in sel], **kw)
            ooms += [r for r in sel if int(r.get("num_ooms") or 0) > 0]
    for ax, col, f in ((ax1, "peak_reserved_bytes", lambda v: int(v) / div), (ax2, "num_device_alloc", lambda v: max(int(v), 1))):
        if ooms:
            ax.plot([xv.pos[r[x]] for r in ooms], [f(r[col]) for r in ooms], gid="oom", zorder=5, **ps.OOM_MARKER)
    ax1.set_ylabel("peak reserved (%s)" % unit)
    ax1.set_ylim(bottom=0)
    ps.byte_ticks(ax1.yaxis)
    ax2.set_ylabel("cudaMalloc calls")
    ax2.set_yscale("log")
    ps.log_ticks(ax2, "y")
    xlabel = x
    for ax in ((ax2,) if single else (ax1, ax2)):
        ax.set_xlabel(xlabel)
    for ax in (ax1, ax2):
        ax.set_xticks(range(len(xv.order)))
        ax.set_xticklabels(xv.labels)  # thin_labels tilts them when they do not fit upright
        ax.set_xlim(-0.4, len(xv.order) - 0.6)

    from matplotlib.lines import Line2D
    handles = [Line2D([], [], ls="-", **dict(ps.style(i), ms=3.5)) for i in range(len(traces))]
    labels = [short(t) for t in traces]
    if bv:
        handles += [Line2D([], [], color="0.3", ls=ps.DASHES[j]) for j in range(len(bv.order))]
        labels += ["%s=%s" % (by, v) for v in bv.labels]
    if ooms:
        handles.append(Line2D([], [], **ps.OOM_MARKER))
        labels.append("OOM (num_ooms > 0)")
    # the title, from the data: the policy (and its fixed settings) and what was swept
    pols = distinct(rows, "policy") if "policy" in rows[0] else []
    fixed = [c for c in param_columns(rows) if c not in (x, by) and len(distinct(rows, c)) == 1 and distinct(rows, c)[0] not in ("", "none")]
    title = "%s swept over %d trace%s" % (x + (" and " + by if by else ""), len(traces), "" if len(traces) == 1 else "s")
    if pols and "policy" not in (x, by):
        title = "%s policy: %s" % (", ".join(pols), title)
    if fixed:
        title += " (%s)" % ", ".join("%s=%s" % (c, rows[0][c]) for c in fixed)
    fig.suptitle(title, fontsize=7)
    ps.legend_above(fig, None, handles, labels)
    ps.thin_labels(fig, (ax1, ax2), "x")
    print("\n".join(ps.save(fig, a.output)))


if __name__ == "__main__":
    main()
