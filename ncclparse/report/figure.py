"""The chart machinery of :mod:`ncclparse.report.plots`: house style, axes, SVG export.

Every chart draws on a :func:`figure` under the rc settings of :func:`styled`, shares
the size axis, latency-bound shading and per-placement styles defined here, and ends in
:func:`finish`, which turns the figure into a deterministic ``<svg>`` element ready to
inline: no XML prolog, no metadata, element ids prefixed with the chart's ``plot_id``
(fixed ``svg.hashsalt``, no date). Only :class:`matplotlib.figure.Figure`, never pyplot
(no global figure registry, no GUI backend).
"""

from __future__ import annotations

import functools
import html
import io
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, NotRequired, ParamSpec, TypedDict

import matplotlib as mpl
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from ncclparse.formatting import format_bytes

if TYPE_CHECKING:
    # Only matplotlib >= 3.11 has it; the run time needs no name for a dict key type.
    from matplotlib.typing import RcKeyType

# Okabe-Ito: distinguishable with colour-vision deficiency.
COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
DASHES = ("-", "--", "-.", ":")


class _LineStyle(TypedDict):
    """Keyword arguments of Axes.plot for one placement's line."""

    color: str
    marker: str
    linestyle: str
    markerfacecolor: NotRequired[str]


PLACEMENT_STYLE: dict[str, _LineStyle] = {
    "out-of-place": {"color": COLORS[0], "marker": "o", "linestyle": "-"},
    # Hollow markers: in-place often lies exactly on out-of-place, which shows through.
    "in-place": {
        "color": COLORS[1],
        "marker": "s",
        "linestyle": "--",
        "markerfacecolor": "none",
    },
}
_RC: dict[RcKeyType, object] = {
    "svg.hashsalt": "ncclparse",
    # Text stays text: a quarter of the bytes of outlined glyphs, and selectable.
    "svg.fonttype": "none",
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#d9d9d9",
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "lines.markersize": 4,
    "lines.linewidth": 1.4,
}
_FIGSIZE = (7.2, 3.4)  # inches: fills a laptop-width column, two per printed page
# The report's charts: as wide as a phone shows them (a 390 px screen less margins is
# 350 px, 4.8 in = 345.6 pt), so their 10 pt text stays 10 px there; wider screens
# scale them up.
PAGE_FIGSIZE = (4.8, 3.8)
PAGE_TEXT = 10  # pt: legends and labels of the report's charts, as large as ticks
_LATENCY_FILL = "#ececec"
_P = ParamSpec("_P")


def styled(draw: Callable[_P, str]) -> Callable[_P, str]:
    """Run ``draw`` under the report's rc settings (artists read rc when created)."""

    @functools.wraps(draw)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> str:
        with mpl.rc_context(_RC):
            return draw(*args, **kwargs)

    return wrapper


def figure(figsize: tuple[float, float] = _FIGSIZE) -> tuple[Figure, Axes]:
    """A new figure of ``figsize`` inches (default: a laptop column) with one axes."""
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def size_axis(ax: Axes, sizes: pd.Series, labels: int = 9) -> None:
    """Log2 size axis with at most ``labels`` labelled powers of two ("8 B" ...
    "8 GiB")."""
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size")
    ax.xaxis.set_minor_locator(NullLocator())
    if sizes.empty:
        return
    lo = math.floor(math.log2(float(sizes.min())))
    hi = math.ceil(math.log2(float(sizes.max())))
    step = max(1, math.ceil((hi - lo + 1) / labels))
    ax.xaxis.set_major_locator(FixedLocator([2.0**e for e in range(lo, hi + 1, step)]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_bytes(v)))
    pad = 2 ** (0.3 * step)
    ax.set_xlim(float(sizes.min()) / pad, float(sizes.max()) * pad)


def regions(ax: Axes, crossover: float | None, sizes: pd.Series) -> None:
    """Shade the latency-bound sizes, below ``crossover`` (the size where the rows'
    regime turns bandwidth-bound), and mark where the bandwidth-bound sizes start."""
    if crossover is None or math.isnan(crossover) or sizes.empty or crossover <= 0:
        return
    left, right = ax.get_xlim()
    if crossover <= left:
        return
    edge = min(crossover, right)
    ax.axvspan(left, edge, color=_LATENCY_FILL, zorder=0, linewidth=0)
    # Labels sit above the axes: inside they collide with the ideal line.
    ax.text(
        left * 1.15,
        1.01,
        "latency-bound",
        transform=ax.get_xaxis_transform(),
        va="bottom",
        ha="left",
        fontsize=PAGE_TEXT,
        color="#555555",
    )
    if crossover < right:
        ax.axvline(crossover, color="#555555", linewidth=0.9)
        ax.text(
            crossover * 1.1,
            1.01,
            "bandwidth-bound",
            transform=ax.get_xaxis_transform(),
            va="bottom",
            ha="left",
            fontsize=PAGE_TEXT,
            color="#555555",
        )
    ax.set_xlim(left, right)


def _compact(match: re.Match[str]) -> str:
    """One coordinate attribute with 1/100 pt precision and no line breaks."""
    return _DECIMALS.sub(r"\1", match.group(0)).replace(" \n", " ").replace("\n", " ")


def plain(text: str) -> str:
    """Text from a log, shown literally: ``$`` would otherwise start mathtext."""
    return text.replace("$", r"\$")


_ID = re.compile(r'\sid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^)"]+)')
_ATTRIBUTE = re.compile(r'\s(?:d|x|y|x1|x2|y1|y2|transform|points)="[^"]*"')
_DECIMALS = re.compile(r"(\.\d\d)\d+")
_BETWEEN = re.compile(r">\s+<")
_NO_ROTATION = re.compile(r' transform="rotate\(-0 [^"]*\)"')


def finish(
    fig: Figure,
    ax: Axes,
    plot_id: str,
    title: str,
    legend_columns: int = 3,
    legend_size: float = 8,
) -> str:
    """Legend (``legend_size`` pt), SVG export, and clean-up for inlining (see the
    module docstring)."""
    if ax.get_legend_handles_labels()[0]:
        # Below the axes, so every chart's plot area has the same width.
        fig.legend(
            loc="outside lower center", ncols=legend_columns, fontsize=legend_size
        )
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, flags=re.S)
    # The page's CSS sets one font; per-element font lists are a third of the bytes.
    svg = re.sub(r"font-family: [^;\"]*;? ?", "", svg)
    # Coordinates to 1/100 pt and path data on one line: a third fewer bytes, same look.
    svg = _ATTRIBUTE.sub(_compact, svg)
    # Whitespace between elements is matplotlib's indentation: a fifth of the bytes;
    # every unrotated text carries an identity rotation.
    svg = _BETWEEN.sub("><", svg)
    svg = _NO_ROTATION.sub("", svg)
    # Links out of the chart (a small multiple's "#run5") are no reference to an id.
    ids = set(_ID.findall(svg))
    referenced = {m.group(2) for m in _REF.finditer(svg)} & ids
    svg = _ID.sub(
        lambda m: f' id="{plot_id}-{m.group(1)}"' if m.group(1) in referenced else "",
        svg,
    )
    svg = _REF.sub(
        lambda m: (
            f"{m.group(1)}{plot_id}-{m.group(2)}"
            if m.group(2) in referenced
            else m.group(0)
        ),
        svg,
    )
    label = html.escape(title, quote=True)
    return svg.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1).strip()
