#!/usr/bin/env python3
"""plotcheck.py - runs a plot script and checks the figure it saves, as drawn (tests/plots.sh).

usage: plotcheck.py [CHECK...] -- SCRIPT [ARG...]
       plotcheck.py --batch FILE      (one case a line: NAME [CHECK...] -- SCRIPT [ARG...])

The script runs in this process; the first time it saves a figure, the figure is drawn and the
CHECKs are applied to what matplotlib laid out (window extents in pixels). Exit 0 when the script
succeeded and every check passed, 1 otherwise, with one line per failed check (--batch: one line
per case, 'NAME: ok' or 'NAME: ' and its failures; matplotlib is loaded once). Checks:
  --legend-clear         no data line, marker or bar passes under any legend
  --legend-outside       no legend overlaps any axes
  --no-overlap           no two texts overlap (tick labels, axis labels, titles, legend), no
                         text lies on another axes, and none is wider than the figure (the column)
  --log-ticks N          every log-scaled axis shows at least N tick labels
  --oom N                a legend entry names OOM (or "out of memory"), and the first axes marks
                         exactly N points, bars or cells with artists whose gid is 'oom'
  --distinct-styles      the legend's line entries differ in (colour, marker, line style)
  --monotone-x           every data line's x values increase (no zig-zag back and forth)
  --text-has S           some text of the figure contains S (repeatable)
  --xticks-match RE      every visible x tick label matches the regular expression RE
  --min-row-width F      bars grouped by row (same y) each span at least F of the axes width
  --log-y                the first axes has a log y axis
  --policy-colors        every legend entry, line or row marker that names one policy is drawn in
                         that policy's fixed colour (scripts/plotstyle.py POLICY_STYLE)
  --hatch-means-oom      every hatched bar or cell is an out-of-memory run (gid 'oom')
  --ymax GID=V           the largest y of the lines whose gid is GID is V (data units, to 1e-9):
                         a downsampled line keeps its peak
  --tick-labels          every major tick in view has its label (none hidden or empty; an axes
                         that shows no labels at all must share that axis with one that does)
  --min-cell-pt F        every text inside a bar or cell (heat map) is at least F points high
                         and lies inside its cell
  --exit N               the script must exit with status N (no figure expected unless N is 0)
  --stderr-has S         the script's messages contain S (repeatable)
  --env NAME=VALUE       run the script with this environment variable
"""
import os
import re
import runpy
import sys

import matplotlib

matplotlib.use("Agg")
try:  # a private table of matplotlib's, present from 3.0 to 3.10 at least
    from matplotlib.cbook import STEP_LOOKUP_MAP  # noqa: E402
except ImportError:  # a step line is then checked as the straight line through its points
    STEP_LOOKUP_MAP = {}
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.text import Text  # noqa: E402
import numpy as np  # noqa: E402


def clip_hits(x0, y0, x1, y1, b):
    """Liang-Barsky: does the segment (x0,y0)-(x1,y1) meet the box b?"""
    dx, dy = x1 - x0, y1 - y0
    t0, t1 = 0.0, 1.0
    for p, q in ((-dx, x0 - b.x0), (dx, b.x1 - x0), (-dy, y0 - b.y0), (dy, b.y1 - y0)):
        if p == 0:
            if q < 0:
                return False
        else:
            t = q / p
            if p < 0:
                t0 = max(t0, t)
            else:
                t1 = min(t1, t)
            if t0 > t1:
                return False
    return True


def shrink(b, px):
    from matplotlib.transforms import Bbox
    return Bbox.from_extents(b.x0 + px, b.y0 + px, b.x1 - px, b.y1 - px)


def legends(fig):
    out = list(fig.legends)
    for ax in fig.axes:
        if ax.get_legend():
            out.append(ax.get_legend())
    return out


def line_pixels(line):
    x, y = (np.asarray(v, dtype=float) for v in line.get_data())
    if len(x) == 0:
        return np.zeros((0, 2))
    ds = line.get_drawstyle()
    if ds in STEP_LOOKUP_MAP and ds != "default":
        x, y = STEP_LOOKUP_MAP[ds](x, y)
    xy = line.get_transform().transform(np.column_stack([x, y]))
    return xy[np.all(np.isfinite(xy), axis=1)]


def data_hits_box(ax, box, r):
    """What data of ax passes through box (pixels): a description, or None."""
    clip = ax.get_window_extent(r)
    for line in ax.lines:
        if not line.get_visible():
            continue
        pts = line_pixels(line)
        name = line.get_label()
        if line.get_linestyle() not in ("None", "none", "", " ") and len(pts) > 1:
            for (xa, ya), (xb, yb) in zip(pts[:-1], pts[1:]):
                if clip_hits(xa, ya, xb, yb, box) and clip_hits(xa, ya, xb, yb, clip):
                    return "line %r" % name
        if line.get_marker() not in (None, "None", "none", "", " "):
            for xa, ya in pts:
                if box.contains(xa, ya) and clip.contains(xa, ya):
                    return "marker of %r" % name
    for p in ax.patches:
        if isinstance(p, Rectangle) and p.get_visible() and p.get_width() != 0 and p.get_height() != 0:
            pb = p.get_window_extent(r)
            if pb.overlaps(box) and pb.overlaps(clip):
                return "bar %r" % p.get_label()
    for c in ax.collections:
        offs = c.get_offset_transform().transform(c.get_offsets()) if len(c.get_offsets()) else []
        for xa, ya in offs:
            if box.contains(xa, ya):
                return "collection %r" % c.get_label()
    return None


def visible_ticklabels(ax, r):
    out = []
    for axis, lo_hi in ((ax.xaxis, "x"), (ax.yaxis, "y")):
        box = ax.get_window_extent(r)
        for t in axis.get_ticklabels(which="both"):
            if not t.get_visible() or not t.get_text():
                continue
            b = t.get_window_extent(r)
            c = (b.x0 + b.x1) / 2 if lo_hi == "x" else (b.y0 + b.y1) / 2
            if (box.x0 - 1 <= c <= box.x1 + 1) if lo_hi == "x" else (box.y0 - 1 <= c <= box.y1 + 1):
                out.append((t, b))
    return out


def ax_texts(ax):
    """The texts an axes holds itself: its three titles (centre, left, right) and its ax.text()s.
    Public API only (get_children), so that it holds on matplotlib 3.6 to the newest."""
    return [c for c in ax.get_children() if isinstance(c, Text)]


def handles_of(lg):
    """A legend's handles: legend_handles since matplotlib 3.7, legendHandles (removed in 3.9) before."""
    h = getattr(lg, "legend_handles", None)
    return h if h is not None else lg.legendHandles


def texts(fig, r):
    """(owner, description, bbox) of every visible, non-empty text."""
    out = []
    for i, ax in enumerate(fig.axes):
        for t, b in visible_ticklabels(ax, r):
            out.append((ax, "tick label %r" % t.get_text(), b))
        for t in [ax.xaxis.label, ax.yaxis.label] + ax_texts(ax):
            if t.get_visible() and t.get_text():
                out.append((ax, "text %r" % t.get_text(), t.get_window_extent(r)))
    for t in fig.texts:
        if t.get_visible() and t.get_text():
            out.append((None, "text %r" % t.get_text(), t.get_window_extent(r)))
    for lg in legends(fig):
        out.append((lg, "legend", lg.get_window_extent(r)))
    return out


def all_texts(fig):
    out = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        out += [ax.xaxis.label.get_text(), ax.yaxis.label.get_text()]
        out += [t.get_text() for t in ax_texts(ax)]
    for lg in legends(fig):
        out += [t.get_text() for t in lg.get_texts()]
        if lg.get_title():
            out.append(lg.get_title().get_text())
    return out


def check(fig, opts):
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    fails = []
    if "legend-clear" in opts:
        if not legends(fig):
            fails.append("legend-clear: the figure has no legend")
        for lg in legends(fig):
            box = shrink(lg.get_window_extent(r), 1)
            for ax in fig.axes:
                hit = data_hits_box(ax, box, r)
                if hit:
                    fails.append("legend-clear: %s passes under the legend" % hit)
    if "legend-outside" in opts:
        for lg in legends(fig):
            for i, ax in enumerate(fig.axes):
                if shrink(lg.get_window_extent(r), 1).overlaps(ax.get_window_extent(r)):
                    fails.append("legend-outside: the legend overlaps axes %d" % i)
    if "no-overlap" in opts:
        ts = texts(fig, r)
        for i in range(len(ts)):
            for j in range(i + 1, len(ts)):
                (oa, da, ba), (ob, db, bb) = ts[i], ts[j]
                if shrink(ba, 0.5).overlaps(shrink(bb, 0.5)):
                    fails.append("no-overlap: %s overlaps %s" % (da, db))
            owner, d, b = ts[i]
            fb = fig.bbox
            if owner in fig.axes and (b.x0 < fb.x0 - 1 or b.x1 > fb.x1 + 1):  # wider than the column
                fails.append("no-overlap: %s runs off the figure's width" % d)
            if owner in fig.axes:  # a text of one axes must not lie on another
                for ax in fig.axes:
                    if ax is not owner and shrink(b, 0.5).overlaps(ax.get_window_extent(r)):
                        fails.append("no-overlap: %s of axes %d lies on axes %d" % (d, fig.axes.index(owner), fig.axes.index(ax)))
    if "log-ticks" in opts:
        n = int(opts["log-ticks"])
        logs = 0
        for i, ax in enumerate(fig.axes):
            for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
                if axis.get_scale() == "log":
                    logs += 1
                    k = sum(1 for t, b in visible_ticklabels(ax, r)
                            if (t in axis.get_ticklabels(which="both")))
                    if k < n:
                        fails.append("log-ticks: axes %d's log %s axis has %d tick labels, fewer than %d" % (i, which, k, n))
        if not logs:
            fails.append("log-ticks: no log axis")
    if "oom" in opts:
        n = int(opts["oom"])
        if not any("OOM" in t or "out of memory" in t for t in all_texts(fig)):
            fails.append("oom: no legend entry or text names OOM")
        ax = fig.axes[0]
        k = sum(len(a.get_xdata()) for a in ax.lines if a.get_gid() == "oom") + \
            sum(len(c.get_offsets()) for c in ax.collections if c.get_gid() == "oom") + \
            sum(1 for p in ax.patches if p.get_gid() == "oom")
        if k != n:
            fails.append("oom: %d points marked as OOM in the first axes, expected %d" % (k, n))
    if "distinct-styles" in opts:
        seen = {}
        for lg in legends(fig):
            for h, t in zip(handles_of(lg), lg.get_texts()):
                if isinstance(h, Line2D):
                    key = (matplotlib.colors.to_hex(h.get_color()), str(h.get_marker()), str(h.get_linestyle()))
                    if key in seen:
                        fails.append("distinct-styles: %r and %r are drawn alike %s" % (seen[key], t.get_text(), key))
                    seen[key] = t.get_text()
        if not seen:
            fails.append("distinct-styles: no line entries in a legend")
    if "monotone-x" in opts:
        for i, ax in enumerate(fig.axes):
            for line in ax.lines:
                x = np.asarray(line.get_xdata(), dtype=float)
                if line.get_gid() != "oom" and len(x) > 1 and not np.all(np.diff(x) > 0):
                    fails.append("monotone-x: line %r of axes %d goes back and forth in x" % (line.get_label(), i))
    for s in opts.get("text-has", []):
        if not any(s in t for t in all_texts(fig)):
            fails.append("text-has: no text contains %r (texts: %s)" % (s, [t for t in all_texts(fig) if t]))
    if "xticks-match" in opts:
        rx = re.compile(opts["xticks-match"])
        for ax in fig.axes:
            for t, b in visible_ticklabels(ax, r):
                if t in ax.xaxis.get_ticklabels(which="both") and not rx.search(t.get_text()):
                    fails.append("xticks-match: x tick label %r does not match %r" % (t.get_text(), rx.pattern))
    if "min-row-width" in opts:
        f = float(opts["min-row-width"])
        for i, ax in enumerate(fig.axes):
            rows = {}
            for p in ax.patches:
                if isinstance(p, Rectangle) and p.get_width() != 0 and p.get_height() != 0:
                    b = p.get_window_extent(r)
                    key = round((b.y0 + b.y1) / 2)
                    lo, hi = rows.get(key, (b.x0, b.x1))
                    rows[key] = (min(lo, b.x0), max(hi, b.x1))
            w = ax.get_window_extent(r).width
            narrow = [k for k, (lo, hi) in rows.items() if hi - lo < f * w]
            if narrow:
                fails.append("min-row-width: %d of %d rows of axes %d are narrower than %.0f%% of the axes" % (len(narrow), len(rows), i, f * 100))
            if not rows:
                fails.append("min-row-width: axes %d has no bars" % i)
    for ym in opts.get("ymax", []):
        gid, _, v = ym.partition("=")
        ys = [float(np.nanmax(np.asarray(l.get_ydata(), dtype=float))) for ax in fig.axes for l in ax.lines
              if l.get_gid() == gid and len(l.get_ydata())]
        if not ys:
            fails.append("ymax: no line has gid %r" % gid)
        elif abs(max(ys) - float(v)) > 1e-9 * max(1.0, abs(float(v))):
            fails.append("ymax: the highest point of %r is drawn at %.12g, the data's maximum is %s" % (gid, max(ys), v))
    if "tick-labels" in opts:
        for i, ax in enumerate(fig.axes):
            for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
                lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
                ticks = [t for t in axis.get_major_ticks() if t.tick1line.get_visible() or t.label1.get_visible()]
                locs = axis.get_majorticklocs()
                inview = [(loc, t) for loc, t in zip(locs, ticks) if lo - 1e-9 * abs(hi - lo) <= loc <= hi + 1e-9 * abs(hi - lo)]
                shown = [(loc, t) for loc, t in inview if (t.label1.get_visible() and t.label1.get_text()) or
                         (t.label2.get_visible() and t.label2.get_text())]
                if not inview or not axis.get_visible():
                    continue
                if not shown:
                    grp = ax.get_shared_x_axes() if which == "x" else ax.get_shared_y_axes()
                    if any(o is not ax and grp.joined(ax, o) for o in fig.axes):
                        continue  # the axes that shares it labels it
                    if all(not t.tick1line.get_visible() and not t.tick2line.get_visible() for _, t in inview):
                        continue
                missing = [loc for loc, t in inview if (loc, t) not in shown]
                if missing and len(shown) < len(inview):
                    fails.append("tick-labels: axes %d's %s axis has %d ticks in view without a label (at %s)"
                                 % (i, which, len(missing), ", ".join("%g" % m for m in missing[:4])))
    if "min-cell-pt" in opts:
        f = float(opts["min-cell-pt"])
        for i, ax in enumerate(fig.axes):
            cells = [p.get_window_extent(r) for p in ax.patches if isinstance(p, Rectangle)]
            for t in ax.texts:
                if not t.get_visible() or not t.get_text():
                    continue
                if t.get_fontsize() < f:
                    fails.append("min-cell-pt: text %r of axes %d is %.1f pt, under %.1f" % (t.get_text(), i, t.get_fontsize(), f))
                    break
                b = t.get_window_extent(r)
                home = [c for c in cells if c.contains((b.x0 + b.x1) / 2, (b.y0 + b.y1) / 2)]
                if home and not all(c.x0 <= b.x0 + 0.5 and b.x1 - 0.5 <= c.x1 and c.y0 <= b.y0 + 0.5 and b.y1 - 0.5 <= c.y1 for c in home[:1]):
                    fails.append("min-cell-pt: text %r of axes %d spills out of its cell" % (t.get_text(), i))
                    break
    if "policy-colors" in opts:
        import plotstyle
        from matplotlib.colors import to_hex
        seen = 0

        def want(name, color, what):
            pol = plotstyle.policy_of(name)
            if pol and to_hex(color) != to_hex(plotstyle.POLICY_STYLE[pol][0]):
                fails.append("policy-colors: %s %r is %s, %s's colour is %s" % (what, name, to_hex(color), pol, plotstyle.POLICY_STYLE[pol][0]))
            return 1 if pol else 0
        for lg in legends(fig):
            names = [t.get_text() for t in lg.get_texts()]
            pols = [plotstyle.policy_of(n) for n in names if plotstyle.policy_of(n)]
            if len(set(pols)) != len(pols):
                continue  # several settings of one policy: the palette in order
            for h, n in zip(handles_of(lg), names):
                c = h.get_color() if isinstance(h, Line2D) else h.get_facecolor()
                seen += want(n, c, "legend entry")
        for ax in fig.axes:
            for line in ax.lines:
                if line.get_label().startswith("_policy:"):
                    seen += want(line.get_label()[8:], line.get_color(), "row marker")
        if not seen:
            fails.append("policy-colors: nothing in the figure names a policy")
    if "hatch-means-oom" in opts:
        for i, ax in enumerate(fig.axes):
            for p in ax.patches:
                if p.get_hatch() and p.get_gid() != "oom":
                    fails.append("hatch-means-oom: a hatched patch of axes %d is no out-of-memory run" % i)
                    break
    if "log-y" in opts and fig.axes[0].get_yscale() != "log":
        fails.append("log-y: the first axes' y axis is %s, not log" % fig.axes[0].get_yscale())
    return fails


VALUED = ("log-ticks", "oom", "xticks-match", "min-row-width", "exit", "env", "min-cell-pt")
LISTS = ("text-has", "stderr-has", "ymax")


def parse(mine):
    opts = {}
    i = 0
    while i < len(mine):
        name = mine[i][2:]
        if name in LISTS:
            opts.setdefault(name, []).append(mine[i + 1])
            i += 2
        elif name in VALUED:
            opts[name] = mine[i + 1]
            i += 2
        else:
            opts[name] = True
            i += 1
    return opts


def run_case(opts, script):
    """Runs one script with its arguments in this process; the failed checks."""
    import io
    import matplotlib.pyplot as plt
    results = []
    orig = Figure.savefig

    def savefig(self, *a, **kw):
        if not results:
            results.append(check(self, opts))
        return orig(self, *a, **kw)

    Figure.savefig = savefig
    saved_env = dict(os.environ)
    if "env" in opts:
        k, _, v = opts["env"].partition("=")
        os.environ[k] = v
    argv, err = sys.argv, sys.stderr
    sys.argv = script
    sys.stderr = io.StringIO()
    sys.path.insert(0, os.path.dirname(os.path.abspath(script[0])))
    status = 0
    try:
        runpy.run_path(script[0], run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception as e:  # a crash is a failed case, not the end of the batch
        status = 1
        sys.stderr.write("%s: %s\n" % (type(e).__name__, e))
    finally:
        Figure.savefig = orig
        errtext = sys.stderr.getvalue()
        sys.argv, sys.stderr = argv, err
        sys.path.pop(0)
        os.environ.clear()
        os.environ.update(saved_env)
        plt.close("all")
    want = int(opts.get("exit", 0))
    fails = []
    if status != want:
        fails.append("the script exited %d, expected %d%s" % (status, want, (": " + errtext.strip().splitlines()[-1]) if errtext.strip() else ""))
    if want == 0:
        fails += results[0] if results else ["the script saved no figure"]
    for s in opts.get("stderr-has", []):
        if s not in errtext:
            fails.append("stderr-has: the script's messages do not contain %r (they are %r)" % (s, errtext.strip()))
    return fails


def main():
    import shlex
    argv = sys.argv[1:]
    if argv[:1] == ["--batch"]:  # one case a line: NAME [CHECK...] -- SCRIPT [ARG...]; one result line each
        bad = 0
        for line in open(argv[1]):
            if not line.strip() or line.startswith("#"):
                continue
            words = shlex.split(line)
            name, rest = words[0], words[1:]
            k = rest.index("--")
            fails = run_case(parse(rest[:k]), rest[k + 1:])
            print("%s: %s" % (name, "ok" if not fails else " | ".join(fails)))
            bad += bool(fails)
        sys.exit(1 if bad else 0)
    if "--" not in argv:
        sys.exit(__doc__)
    k = argv.index("--")
    fails = run_case(parse(argv[:k]), argv[k + 1:])
    for f in fails:
        print("plotcheck: " + f)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
