#!/usr/bin/env python3
"""Policy comparison against the lower bound, as a heat map: one row per policy, one column per
trace (grouped by workload), each cell coloured by peak reserved / lower bound (1.0 = no byte
wasted; a logarithmic, colour-blind-safe scale) and labelled with the ratio itself, so that a
72x outlier and a 1.02x policy are both read off exactly. Runs that hit out-of-memory are hatched
(the one meaning of hatching in allocsim's figures); a policy without a row for a trace (not run,
or no bound) is a grey n/a cell. Each row name carries the policy's fixed colour and marker.
Input: the CSV of 'allocsim compare -p all TRACE...' (or summary CSVs with the columns policy,
trace, peak_reserved_bytes and overhead_vs_bound or lower_bound_bytes).
Example: plot_policies.py compare.csv --width double -o fig/policies"""
import math
import os

import plotstyle as ps

CAP = 4.0
SRC = "the CSV of 'allocsim compare' (or summary CSVs with lower_bound_bytes)"


def ratio(r):
    """peak reserved / lower bound of a row, or None when it has no bound."""
    v = r.get("overhead_vs_bound", "")
    if v not in ("", "nan", "-", None):
        try:
            x = float(v)
            return x if x > 0 and math.isfinite(x) else None
        except ValueError:
            return None
    lb = r.get("lower_bound_bytes", "")
    if lb not in ("", "0", None):
        return int(r["peak_reserved_bytes"]) / int(lb)
    return None


def split(trace):
    """'traces/x/gpt2_train_varlen__ms40.pickle.gz' -> ('gpt2_train_varlen', 'ms40')."""
    name = os.path.basename(trace)
    for ext in (".gz", ".xz", ".pickle", ".pkl", ".csv", ".txt", ".log", ".bin", ".asbin"):
        name = name[: -len(ext)] if name.endswith(ext) else name
    work, _, setting = name.partition("__")
    return work, setting or work


def fmt(v):
    return "%.2f" % v if v < 9.995 else "%.0f" % v


def main():
    p = ps.parser(__doc__)
    p.add_argument("csv", nargs="+")
    p.add_argument("--policies", help="comma list: these policies in this order (default: all, in file order)")
    p.add_argument("--title", help="the title (default: what the rows have in common, from the data)")
    a = p.parse_args()
    rows = []
    for f in a.csv:
        rs = ps.read_csv(f)
        ps.need(rs, f, "policy", "trace", "peak_reserved_bytes", source=SRC, ints=("peak_reserved_bytes",))
        if "overhead_vs_bound" not in rs[0] and "lower_bound_bytes" not in rs[0]:
            ps.die("%s: no column overhead_vs_bound or lower_bound_bytes: write it with 'allocsim compare'" % f)
        rows += rs
    configs = {}
    for r in rows:
        configs.setdefault(r["policy"], set()).add(r.get("config", ""))

    def setup(r):  # a policy, with its config when one policy appears with several
        return r["policy"] if len(configs[r["policy"]]) == 1 or not r.get("config") else "%s %s" % (r["policy"], r["config"])

    traces, setups, cell = [], [], {}
    for r in rows:
        if r["trace"] not in traces:
            traces.append(r["trace"])
        s = setup(r)
        if s not in setups:
            setups.append(s)
        cell[(r["trace"], s)] = r
    if a.policies:
        want = a.policies.split(",")
        unknown = [w for w in want if w not in setups]
        if unknown:
            ps.die("no rows of %s in %s (policies there: %s)" % (", ".join(unknown), ", ".join(a.csv), ", ".join(setups)))
        setups = want
    # a setup with no bound on any trace (a host-memory policy over device traces) is no row
    setups = [s for s in setups if any(ratio(cell[(t, s)]) is not None for t in traces if (t, s) in cell)]
    if not setups:
        ps.die("%s: no row has a lower bound" % ", ".join(a.csv))
    traces.sort(key=split)  # grouped by workload
    vals = [ratio(cell[(t, s)]) for t in traces for s in setups if (t, s) in cell and ratio(cell[(t, s)]) is not None]

    import matplotlib
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Patch, Rectangle
    cmap = matplotlib.colormaps["cividis_r"] if hasattr(matplotlib, "colormaps") else matplotlib.cm.get_cmap("cividis_r")
    # the colours resolve 1x to CAP x (where policies differ); above it a cell is the darkest
    # colour, and its number says how far above (one 70 GiB pool must not flatten the rest)
    hi = min(max(max(vals), 1.5), CAP)
    norm = LogNorm(vmin=1.0, vmax=hi, clip=True)
    nr, nc = len(setups), len(traces)
    cw = ps.WIDTHS[a.width]
    fig, ax = ps.figure(a, height=0.17 * nr + 1.5)
    fs = 4.6 if cw / max(nc, 1) < 0.32 else 5.5
    for i, s in enumerate(setups):
        for j, t in enumerate(traces):
            r = cell.get((t, s))
            v = ratio(r) if r else None
            if v is None:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="0.93", edgecolor="white", lw=0.6))
                ax.text(j, i, "n/a", ha="center", va="center", fontsize=fs, color="0.45")
                continue
            c = cmap(norm(max(v, 1.0)))
            oom = int(r.get("num_ooms") or 0) > 0
            lum = 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
            ink = "black" if lum > 0.45 else "white"
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=c, edgecolor="white", lw=0.6))
            if oom:  # hatched in the ink colour, the number on a plain patch
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="none", edgecolor=ink, lw=0, hatch=ps.OOM_HATCH, gid="oom"))
            ax.text(j, i, fmt(v), ha="center", va="center", fontsize=fs, color=ink,
                    bbox=dict(boxstyle="square,pad=0.15", fc=c, ec="none") if oom else None)
    ax.set_xlim(-0.5, nc - 0.5)
    ax.set_ylim(nr - 0.5, -0.5)
    ax.set_aspect("auto")
    ax.grid(False)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.tick_params(length=0)
    # columns: the setting of each trace; the workload once above its group
    works = [split(t) for t in traces]
    ax.set_xticks(range(nc))
    ax.set_xticklabels([w[1] for w in works], rotation=90, fontsize=5.5)
    ax.set_yticks(range(nr))
    ax.set_yticklabels(setups, fontsize=6)
    ax.tick_params(axis="y", pad=9)  # room for the policy's marker
    groups = []
    for j, (w, _) in enumerate(works):
        if groups and groups[-1][0] == w:
            groups[-1][2] = j
        else:
            groups.append([w, j, j])
    for w, j0, j1 in groups:
        ax.annotate(w, xy=((j0 + j1) / 2, -0.5), xycoords="data", xytext=(0, 3), textcoords="offset points",
                    ha="center", va="bottom", fontsize=6, annotation_clip=False)
        if j1 < nc - 1:
            ax.axvline(j1 + 0.5, color="white", lw=2.0)
    # each row's fixed policy colour and marker, left of its name
    for i, s in enumerate(setups):
        pol = ps.policy_of(s)
        if pol:
            col, mk = ps.POLICY_STYLE[pol]
            ax.plot([-0.012], [i], marker=mk, color=col, ms=3.5, mec="0.2", mew=0.3, ls="none", clip_on=False,
                    transform=ax.get_yaxis_transform(), label="_policy:" + pol)
    over = max(vals) > hi
    cb = fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, pad=0.01, fraction=0.03, aspect=30,
                      extend="max" if over else "neither")
    cb.set_label("peak reserved / lower bound", fontsize=6)
    ticks = [t for t in (1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0) if t <= hi]
    cb.set_ticks(ticks)
    cb.set_ticklabels([("≥ %g" if over and t == ticks[-1] else "%g") % t for t in ticks])
    cb.ax.minorticks_off()
    cb.ax.tick_params(labelsize=5.5)
    cb.outline.set_visible(False)
    title = a.title
    if not title:
        same = {r.get("config", "") for r in cell.values()}
        title = "peak reserved over the lower bound (the peak of live bytes)\n%d traces × %d policies%s" % (
            nc, nr, ", each policy with its default settings" if same == {""} else "")
    import textwrap
    wrap = int(cw * 72 / (7 * 0.58))  # characters of 7 pt text in the column
    ax.set_title("\n".join(textwrap.fill(t, wrap) for t in title.split("\n")), fontsize=7, pad=12)
    h, l = [], []
    if any(int(r.get("num_ooms") or 0) > 0 for r in cell.values()):
        h.append(Patch(facecolor="white", edgecolor="black", hatch=ps.OOM_HATCH, linewidth=0.3))
        l.append("out of memory (num_ooms > 0)")
    if any((t, s) not in cell or ratio(cell[(t, s)]) is None for t in traces for s in setups):
        h.append(Patch(facecolor="0.93", edgecolor="none"))
        l.append("n/a: no run or no bound")
    if h:
        fig.legend(h, l, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(h), frameon=False, fontsize=6)
    print("\n".join(ps.save(fig, a.output)))


if __name__ == "__main__":
    main()
