"""plotstyle.py - shared look of allocsim's figures: paper column widths, a colour-blind-safe
palette (Okabe & Ito) with a marker per trace beyond its 8 colours, one fixed colour and marker per
policy in every figure, hatching that means one thing (out of memory), embedded TrueType fonts, byte
axes in MiB/GiB, sizes with units, legends outside the data, tick labels that do not collide,
min/max downsampling that keeps every peak, and reproducible PDF + SVG + PNG output (no dates or
versions in the files: the same bytes on every run). Uses only matplotlib's public API, so that it
holds on 3.6 (Debian 12, Ubuntu 24.04) to the newest (tests/plots-newer.sh)."""
import argparse
import os
import re
import sys

import matplotlib

matplotlib.use(os.environ.get("MPLBACKEND", "Agg"))
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402

# Okabe & Ito (2008), distinguishable under the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
# 7 markers (coprime with the 8 colours): trace i gets colour i % 8 and marker i % 7, so the first
# 56 traces all differ in (colour, marker). 'X' is kept for out-of-memory runs.
MARKERS = ["o", "s", "^", "D", "v", "P", "*"]
OOM_MARKER = dict(marker="X", ms=6, mfc="none", mec="#D55E00", mew=1.0, ls="none")
# dash patterns for a second swept parameter (one per value)
DASHES = ["-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 2))]
# One colour and marker per policy, the same in every figure. The first eight are Okabe & Ito's;
# the others are Paul Tol's muted colours, and each policy also keeps its marker, so that no two
# policies rest on colour alone.
POLICY_STYLE = {
    "pytorch": ("#0072B2", "o"), "bestfit": ("#E69F00", "s"), "passthrough": ("#000000", "^"),
    "cuda-async": ("#D55E00", "D"), "cupy": ("#CC79A7", "v"), "bfc": ("#009E73", "P"),
    "rmm-pool": ("#56B4E9", "*"), "optimal": ("#F0E442", "h"), "rmm-arena": ("#882255", "X"),
    "rmm-binning": ("#44AA99", "<"), "buddy": ("#999933", ">"), "stitch": ("#332288", "p"),
    "pytorch-pinned": ("#888888", "d"),
}
# every colour a figure may use for its series: Okabe & Ito's 8, then Tol's muted 5
COLORS = PALETTE + ["#882255", "#44AA99", "#999933", "#332288", "#888888"]
# hatching means one thing in every figure: the run hit out-of-memory
OOM_HATCH = "xxxx"
WIDTHS = {"single": 3.5, "double": 7.16}  # inches: one and two columns of a two-column paper

matplotlib.rcParams.update({
    "pdf.fonttype": 42, "ps.fonttype": 42,  # embed TrueType, no Type 3 fonts
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7,
    "xtick.labelsize": 7, "ytick.labelsize": 7, "lines.linewidth": 1.2,
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE), "axes.grid": True, "grid.alpha": 0.3,
    "savefig.bbox": "tight", "savefig.dpi": 300,
    "svg.hashsalt": "allocsim",  # fixed ids in SVG output
    "path.simplify": True,
})


def style(i):
    """Colour and marker of the i-th trace (distinct for the first 56)."""
    return dict(color=PALETTE[i % len(PALETTE)], marker=MARKERS[i % len(MARKERS)])


def policy_of(name):
    """The policy a label names ('pytorch', 'pytorch max_split_size_mb:128', 'rmm-binning>rmm-pool'), or None."""
    head = name.split()[0] if name.split() else ""
    head = head.split(">")[0]
    return head if head in POLICY_STYLE else None


def policy_color(name, i=0):
    """The fixed colour of the policy a label names; the i-th palette colour for other labels."""
    p = policy_of(name)
    return POLICY_STYLE[p][0] if p else PALETTE[i % len(PALETTE)]


def series_colors(names):
    """A colour per series name: each policy's fixed colour when the names are distinct policies,
    else the palette in order (several settings of one policy)."""
    pols = [policy_of(n) for n in names]
    if all(pols) and len(set(pols)) == len(pols):
        return [POLICY_STYLE[p][0] for p in pols]
    if len(names) > len(COLORS):
        die("%d series, more than the %d colours a figure tells apart: select fewer" % (len(names), len(COLORS)), 64)
    return COLORS[:len(names)]


def minmax(xs, ys, buckets=1500):
    """At most 2 x buckets points of the line (xs, ys) that keep its extremes: each bucket of
    consecutive points keeps its minimum and its maximum, in the order they occur (sampling every
    k-th point drops the peaks that fall between samples)."""
    n = len(xs)
    if n <= 2 * buckets:
        return list(xs), list(ys)
    ox, oy = [], []
    for b in range(buckets):
        lo, hi = b * n // buckets, (b + 1) * n // buckets
        seg = range(lo, hi)
        kmin = min(seg, key=lambda k: ys[k])
        kmax = max(seg, key=lambda k: ys[k])
        for k in sorted({kmin, kmax}):
            ox.append(xs[k])
            oy.append(ys[k])
    return ox, oy


def parser(description):
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", required=True, help="output file name without extension (PDF, SVG and PNG), or ending in .pdf/.svg/.png (that one)")
    p.add_argument("--width", choices=WIDTHS, default="single", help="single or double column")
    p.add_argument("--height", type=float, default=None, help="height in inches")
    return p


def die(msg, status=65):
    """A clear message on standard error, and a documented exit status (65: bad data, 66: missing input)."""
    sys.stderr.write("%s: %s\n" % (os.path.basename(sys.argv[0]), msg))
    sys.exit(status)


class Rows(list):
    """The rows of a CSV file (dicts), with the file's line number of each (lines[i])."""
    path = ""
    lines = ()


# what each of allocsim's CSVs holds first: a file of the wrong kind is named as what it is
KINDS = [("run", "a sweep CSV ('allocsim sweep')"), ("trace", "a summary CSV ('allocsim replay -o', 'compare')"),
         ("event", "a timeline CSV ('allocsim replay --timeline')"), ("moment", "a segment map CSV ('allocsim replay --segments')"),
         ("size_bytes", "a transfer CSV ('allocsim transfer')")]


def kind_of(cols):
    if "op" in cols and "ns" in cols:
        return "a latency CSV ('allocsim replay --latency')"
    return next((what for first, what in KINDS if cols and cols[0] == first), "not a CSV that allocsim writes")


def read_csv(path):
    """Rows of a CSV file ('#' comment lines skipped), or a message naming the file; a row whose
    field count is not the header's is refused with its line number."""
    import csv
    rows = Rows()
    rows.path, lines = path, []
    try:
        with open(path, newline="") as f:
            numbered = [(k + 1, line) for k, line in enumerate(f) if not line.startswith("#")]
    except (OSError, UnicodeDecodeError) as e:
        die("%s: %s" % (path, getattr(e, "strerror", None) or "not a text file"), 66 if isinstance(e, OSError) else 65)
    if not numbered:
        die("%s: empty: no header and no data rows" % path)
    reader = csv.reader(line for _, line in numbered)
    try:
        header = next(reader)
        for k, fields in enumerate(reader, 1):
            if not fields:
                continue
            if len(fields) != len(header):
                die("%s:%d: %d fields where the header has %d" % (path, numbered[k][0], len(fields), len(header)))
            rows.append(dict(zip(header, fields)))
            lines.append(numbered[k][0])
    except csv.Error as e:
        die("%s: not a CSV file (%s)" % (path, e))
    rows.lines = lines
    if not rows:
        die("%s: no data rows (columns: %s)" % (path, ", ".join(header)))
    return rows


def need(rows, path, *cols, source=None, ints=(), floats=()):
    """Refuses, with a message, a file that lacks a column (naming what the file is and what the
    script reads: source), or whose int/float columns hold something else (file:line: column)."""
    missing = [c for c in cols if c not in rows[0]]
    if missing:
        cols0 = list(rows[0])
        die("%s: no column %s: the file is %s (columns: %s)%s" % (
            path, ", ".join(missing), kind_of(cols0), ", ".join(cols0[:8]) + (", ..." if len(cols0) > 8 else ""),
            "; this script reads %s" % source if source else ""))
    lines = getattr(rows, "lines", None) or range(2, len(rows) + 2)
    for conv, names in ((int, ints), (float, floats)):
        for c in names:
            for r, ln in zip(rows, lines):
                try:
                    conv(r[c])
                except (TypeError, ValueError):
                    die("%s:%d: column %s is %r, not %s" % (path, ln, c, r[c], "an integer" if conv is int else "a number"))


def figure(args, nrows=1, ncols=1, height=None, **kw):
    h = args.height or height or WIDTHS[args.width] * 0.62
    kw.setdefault("layout", "constrained")
    return plt.subplots(nrows, ncols, figsize=(WIDTHS[args.width], h), **kw)


# ---- sizes ------------------------------------------------------------------------------------
UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 1000 ** 2, "mib": 1 << 20,
         "g": 1 << 30, "gb": 1000 ** 3, "gib": 1 << 30, "t": 1 << 40, "tb": 1000 ** 4, "tib": 1 << 40}
SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text):
    """'16GiB', '1.5 GB', '512M', '17179869184' -> bytes (int); None when text is not a size."""
    m = SIZE_RE.match(text)
    if not m or m.group(2).lower() not in UNITS:
        return None
    return int(round(float(m.group(1)) * UNITS[m.group(2).lower()]))


def has_unit(text):
    m = SIZE_RE.match(text)
    return bool(m and m.group(2) and m.group(2).lower() in UNITS)


def fmt_bytes(n):
    """Bytes as a short label: '16 GiB', '1.5 GiB', '512 MiB', '4 KiB', '100 B'."""
    for div, unit in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if abs(n) >= div:
            return "%s %s" % (("%.2f" % (n / div)).rstrip("0").rstrip("."), unit)
    return "%d B" % n


def byte_unit(max_bytes):
    return (1 << 30, "GiB") if max_bytes >= (1 << 30) else (1 << 20, "MiB")


def scaled(values, max_bytes):
    """Values in MiB or GiB (chosen from max_bytes), so that ticks fall on round numbers."""
    div, unit = byte_unit(max_bytes)
    return [v / div for v in values], unit


def byte_ticks(axis):
    """Round ticks (1, 2, 2.5, 5, 10 steps) on an axis whose values are in GiB or MiB."""
    axis.set_major_locator(ticker.MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: ("%.2f" % v).rstrip("0").rstrip(".")))


def log_ticks(ax, which="y"):
    """At least 3 labelled ticks on a log axis: decades when the data spans several, else 1-2-5
    steps, else every integer multiple (matplotlib labels only decades, so a range within one
    decade shows a single label, or none)."""
    axis = ax.yaxis if which == "y" else ax.xaxis
    lo, hi = sorted(ax.get_ylim() if which == "y" else ax.get_xlim())
    for subs in ((1.0,), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)):
        loc = ticker.LogLocator(base=10, subs=subs, numticks=30)
        n = sum(1 for t in loc.tick_values(lo, hi) if lo <= t <= hi)
        if n >= 3:
            break
    axis.set_major_locator(loc)
    if subs == (1.0,) and hi > 1e4:  # decades far from 1: 10^k
        axis.set_major_formatter(ticker.LogFormatterSciNotation())
    else:
        axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: "{:,.0f}".format(v) if v >= 1 else "%g" % v))
    axis.set_minor_formatter(ticker.NullFormatter())


def thin_labels(fig, axes, which="x"):
    """Makes every tick label readable without hiding any (a category or a measured size whose
    label is missing cannot be read off): upright, else tilted 45 degrees, else vertical, else
    smaller, until no two visible labels overlap."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    for ax in axes:
        labels = [t for t in (ax.get_xticklabels() if which == "x" else ax.get_yticklabels()) if t.get_text() and t.get_visible()]
        if not labels:
            continue
        size = labels[0].get_fontsize()
        for rot, fs in ((0, size), (45, size), (90, size), (90, size * 0.85), (90, size * 0.7)):
            for t in labels:
                t.set_rotation(rot)
                t.set_fontsize(fs)
                if which == "x":
                    t.set_ha("right" if rot == 45 else "center")
                    t.set_rotation_mode("anchor" if rot == 45 else "default")
            vis = [t.get_window_extent(r) for t in labels]
            if all(not a.overlaps(b) for a, b in zip(vis, vis[1:])):
                break


def legend_above(fig, axes, handles=None, labels=None, ncol=None, **kw):
    """The legend outside the axes, centred above them: it covers no data."""
    if handles is None:
        handles, labels = [], []
        for ax in (axes if isinstance(axes, (list, tuple)) else [axes]):
            for h, l in zip(*ax.get_legend_handles_labels()):
                if l not in labels:
                    handles.append(h)
                    labels.append(l)
    if not handles:
        return None
    kw = dict(loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False, borderaxespad=0.2, **kw)
    if ncol is not None:
        return fig.legend(handles, labels, ncol=ncol, **kw)
    # as many columns as fit the figure's width, measured
    r = fig.canvas.get_renderer()
    for n in range(len(labels), 0, -1):
        lg = fig.legend(handles, labels, ncol=n, **kw)
        if n == 1 or lg.get_window_extent(r).width <= fig.get_figwidth() * fig.dpi:
            return lg
        lg.remove()


def save(fig, output):
    """PDF, SVG and PNG without dates or versions: the same bytes on every run (make figures is
    reproducible); the PDF's producer is named without matplotlib's version."""
    base, ext = os.path.splitext(output)
    outs = [output] if ext in (".pdf", ".png", ".svg") else [base + ".pdf", base + ".svg", base + ".png"]
    for o in outs:
        d = os.path.dirname(o)
        if d:
            os.makedirs(d, exist_ok=True)
        if o.endswith(".pdf"):
            meta = {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": "allocsim " + os.path.basename(sys.argv[0])}
        elif o.endswith(".svg"):
            meta = {"Date": None, "Creator": "allocsim " + os.path.basename(sys.argv[0])}
        else:
            meta = {"Software": None}
        fig.savefig(o, metadata=meta)
    plt.close(fig)
    return outs
