"""plotstyle.py - shared look of allocsim's figures: paper column widths, a colour-blind-safe
palette (Okabe & Ito), embedded TrueType fonts, byte axes in MiB/GiB, PDF + PNG output."""
import argparse
import os

import matplotlib

matplotlib.use(os.environ.get("MPLBACKEND", "Agg"))
import matplotlib.pyplot as plt  # noqa: E402

# Okabe & Ito (2008), distinguishable under the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
WIDTHS = {"single": 3.5, "double": 7.16}  # inches: one and two columns of a two-column paper

matplotlib.rcParams.update({
    "pdf.fonttype": 42, "ps.fonttype": 42,  # embed TrueType, no Type 3 fonts
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7,
    "xtick.labelsize": 7, "ytick.labelsize": 7, "lines.linewidth": 1.2,
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE), "axes.grid": True, "grid.alpha": 0.3,
    "savefig.bbox": "tight", "savefig.dpi": 300,
})


def parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("-o", "--output", required=True, help="output file name without extension, or ending in .pdf/.png")
    p.add_argument("--width", choices=WIDTHS, default="single", help="single or double column")
    p.add_argument("--height", type=float, default=None, help="height in inches")
    return p


def figure(args, nrows=1, ncols=1, height=None, **kw):
    h = args.height or height or WIDTHS[args.width] * 0.62
    return plt.subplots(nrows, ncols, figsize=(WIDTHS[args.width], h), **kw)


def byte_unit(max_bytes):
    return (1 << 30, "GiB") if max_bytes >= (1 << 30) else (1 << 20, "MiB")


def scaled(values, max_bytes):
    """Values in MiB or GiB (chosen from max_bytes), so that ticks fall on round numbers."""
    div, unit = byte_unit(max_bytes)
    return [v / div for v in values], unit


def save(fig, output):
    base, ext = os.path.splitext(output)
    outs = [output] if ext in (".pdf", ".png") else [base + ".pdf", base + ".png"]
    for o in outs:
        d = os.path.dirname(o)
        if d:
            os.makedirs(d, exist_ok=True)
        fig.savefig(o)
    plt.close(fig)
    return outs
