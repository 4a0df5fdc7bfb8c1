"""Draw the report's charts as deterministic, inline-ready SVG strings.

Each public function takes analysed rows (a pandas DataFrame with the columns of
:func:`ncclparse.efficiency.analyze`, one series group: one collective, dtype, redop,
root and rank count, either placement) and returns an ``<svg>`` element as a string,
ready to paste into HTML: no XML prolog, no metadata, element ids prefixed with
``plot_id`` so that several charts in one page never share an id. The same rows give the
same bytes (fixed ``svg.hashsalt``, no date).

Charts are drawn on :class:`matplotlib.figure.Figure` directly, never pyplot (no global
figure registry, no GUI backend). Lines differ by marker and dash as well as colour, so
they stay apart when printed in grey scale. Text that may come from a log (series
labels) passes through :func:`_plain` so that ``$`` never switches on mathtext.
"""

from __future__ import annotations

import functools
import html
import io
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NotRequired, ParamSpec, TypedDict

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
from matplotlib.typing import RcKeyType

from .formatting import format_bytes, format_time_us

__all__ = [
    "OverlaySeries",
    "bandwidth_plot",
    "efficiency_plot",
    "gap_plot",
    "overlay_plot",
    "time_plot",
]

# Okabe-Ito: distinguishable with colour-vision deficiency.
_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_DASHES = ("-", "--", "-.", ":")


class _LineStyle(TypedDict):
    """Keyword arguments of Axes.plot for one placement's line."""

    color: str
    marker: str
    linestyle: str
    markerfacecolor: NotRequired[str]


_PLACEMENT_STYLE: dict[str, _LineStyle] = {
    "out-of-place": {"color": _COLORS[0], "marker": "o", "linestyle": "-"},
    # Hollow markers: in-place often lies exactly on out-of-place, which shows through.
    "in-place": {
        "color": _COLORS[1],
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
_LATENCY_FILL = "#ececec"
_P = ParamSpec("_P")


@dataclass(frozen=True, slots=True)
class OverlaySeries:
    """One line of :func:`overlay_plot`: a label and its (size, busbw) points."""

    label: str
    size_bytes: Sequence[float]
    busbw_gbps: Sequence[float]


def _styled(draw: Callable[_P, str]) -> Callable[_P, str]:
    """Run ``draw`` under the report's rc settings (artists read rc when created)."""

    @functools.wraps(draw)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> str:
        with mpl.rc_context(_RC):
            return draw(*args, **kwargs)

    return wrapper


@_styled
def bandwidth_plot(
    rows: pd.DataFrame, fits: pd.DataFrame, *, plot_id: str, crossover: float | None
) -> str:
    """Bus bandwidth against size: measured (both placements), ideal, fitted model.

    ``rows`` needs size_bytes, placement, busbw_calc_gbps, ideal_busbw_gbps and
    busbw_factor; ``fits`` one row per placement with alpha_us and beta_gbps. Sizes
    below ``crossover`` (bytes, the fit's alpha*beta) are shaded as latency-bound.
    0-byte rows are left out (no place on a log axis).
    """
    fig, ax = _figure()
    data = _positive(rows)
    for placement, group in _by_placement(data):
        ax.plot(
            group["size_bytes"],
            group["busbw_calc_gbps"],
            label=f"measured, {placement}",
            **_PLACEMENT_STYLE[placement],
        )
    ideal = data["ideal_busbw_gbps"].dropna()
    if not ideal.empty:
        ax.plot(
            data["size_bytes"],
            data["ideal_busbw_gbps"],
            color="black",
            linestyle=(0, (6, 3)),
            linewidth=1.1,
            label="ideal (seed 003)",
        )
    for placement, fit in _fit_curves(data, fits):
        sizes, model_time = fit
        factor = float(data["busbw_factor"].dropna().iloc[0])
        ax.plot(
            sizes,
            factor * sizes / model_time * 1e-3,
            color=_PLACEMENT_STYLE[placement]["color"],
            linestyle=":",
            linewidth=1.1,
            label=f"alpha-beta fit, {placement}",
        )
    _size_axis(ax, data["size_bytes"])
    _regions(ax, crossover, data["size_bytes"])
    ax.set_ylim(bottom=0)
    ax.set_ylabel("bus bandwidth (GB/s)")
    return _finish(fig, ax, plot_id, "Bus bandwidth against message size")


@_styled
def time_plot(
    rows: pd.DataFrame, fits: pd.DataFrame, *, plot_id: str, crossover: float | None
) -> str:
    """Time per operation against size, log-log: measured, alpha-beta model, ideal.

    The ideal time is the bus bytes moved at the ideal bus bandwidth (no latency).
    """
    fig, ax = _figure()
    data = _positive(rows)
    for placement, group in _by_placement(data):
        ax.plot(
            group["size_bytes"],
            group["time_us"],
            label=f"measured, {placement}",
            **_PLACEMENT_STYLE[placement],
        )
    for placement, (sizes, model_time) in _fit_curves(data, fits):
        ax.plot(
            sizes,
            model_time,
            color=_PLACEMENT_STYLE[placement]["color"],
            linestyle=":",
            linewidth=1.1,
            label=f"alpha-beta fit, {placement}",
        )
    ideal = data.dropna(subset=["ideal_busbw_gbps", "busbw_factor"])
    if not ideal.empty:
        ideal = ideal.drop_duplicates("size_bytes")
        ideal_time = (
            ideal["busbw_factor"] * ideal["size_bytes"] / ideal["ideal_busbw_gbps"]
        ) * 1e-3
        ax.plot(
            ideal["size_bytes"],
            ideal_time,
            color="black",
            linestyle=(0, (6, 3)),
            linewidth=1.1,
            label="ideal (no latency)",
        )
    _size_axis(ax, data["size_bytes"])
    _regions(ax, crossover, data["size_bytes"])
    ax.set_yscale("log")
    # The ideal of an 8-byte message is picoseconds: let it leave the axes rather
    # than squash the measured decades into a corner.
    if not data["time_us"].dropna().empty:
        ax.set_ylim(bottom=float(data["time_us"].min()) / 10)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_time_us(v)))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_ylabel("time per operation")
    return _finish(fig, ax, plot_id, "Time against message size")


@_styled
def efficiency_plot(
    rows: pd.DataFrame, *, plot_id: str, crossover: float | None
) -> str:
    """Efficiency (recomputed busbw / ideal) against size, in percent, with 100 %."""
    fig, ax = _figure()
    data = _positive(rows).dropna(subset=["efficiency"])
    for placement, group in _by_placement(data):
        ax.plot(
            group["size_bytes"],
            group["efficiency"] * 100,
            label=placement,
            **_PLACEMENT_STYLE[placement],
        )
    ax.axhline(100, color="black", linestyle=(0, (6, 3)), linewidth=1.1, label="ideal")
    _size_axis(ax, data["size_bytes"])
    _regions(ax, crossover, data["size_bytes"])
    top = max(110.0, float((data["efficiency"] * 100).max()) * 1.05)
    ax.set_ylim(0, top)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f} %"))
    ax.set_ylabel("efficiency")
    return _finish(fig, ax, plot_id, "Efficiency against message size")


# (column, legend label, colour, hatch): hatches keep the stack legible in grey scale.
_GAP_PARTS = (
    ("ideal_time_us", "ideal transfer", "#bdbdbd", ""),
    ("gap_hw_latency_us", "hardware latency", "#56B4E9", ".."),
    ("gap_latency_us", "software latency (alpha)", "#0072B2", "//"),
    ("gap_staging_us", "host staging", "#E69F00", "xx"),
    ("gap_bandwidth_us", "bandwidth shortfall", "#D55E00", "\\\\"),
    ("gap_residual_us", "unexplained", "#CC79A7", "--"),
)


@_styled
def gap_plot(rows: pd.DataFrame, *, plot_id: str) -> str:
    """Where the time goes, per size: stacked shares of the measured time.

    One bar per size (``rows`` of one placement): the ideal transfer time plus each gap
    component of docs/efficiency.md sec. 4, as a percentage of the measured time, so
    the stack reaches 100 %. A negative residual (faster than the fitted line) is
    drawn below zero. Components that are null for every size are left out.
    """
    fig, ax = _figure()
    data = rows.dropna(subset=["gap_us"]).sort_values("size_bytes")
    x = np.arange(len(data))
    time = data["time_us"].to_numpy(dtype=float)
    above, below = np.zeros(len(data)), np.zeros(len(data))
    for column, label, color, hatch in _GAP_PARTS:
        values = data[column].to_numpy(dtype=float)
        if np.isnan(values).all():
            continue
        share = np.nan_to_num(values) / time * 100
        base = np.where(share >= 0, above, below)
        # Slivers under 0.05 % are invisible; leaving them out halves the SVG.
        seen = np.abs(share) >= 0.05
        if not seen.any():
            continue
        ax.bar(
            x[seen],
            share[seen],
            bottom=base[seen],
            width=0.8,
            color=color,
            hatch=hatch,
            edgecolor="white",
            linewidth=0.4,
            label=label,
        )
        above, below = above + np.maximum(share, 0), below + np.minimum(share, 0)
    ax.axhline(0, color="black", linewidth=0.6)
    labels = [format_bytes(s) for s in data["size_bytes"]]
    step = max(1, math.ceil(len(labels) / 10))
    ax.xaxis.set_major_locator(FixedLocator(x[::step].tolist()))
    ax.set_xticklabels(labels[::step])
    ax.set_xlim(-0.6, max(len(data), 1) - 0.4)
    ax.grid(axis="x", visible=False)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f} %"))
    ax.set_ylabel("share of measured time")
    ax.set_xlabel("message size")
    return _finish(fig, ax, plot_id, "Where the time goes, per message size")


@_styled
def overlay_plot(series: Sequence[OverlaySeries], *, plot_id: str) -> str:
    """Bus bandwidth against size for several runs on one axis, one style per run."""
    fig, ax = _figure()
    sizes: list[float] = []
    for index, item in enumerate(series):
        pairs = [
            (s, b)
            for s, b in zip(item.size_bytes, item.busbw_gbps, strict=True)
            if s > 0 and not math.isnan(b)
        ]
        if not pairs:
            continue
        xs, ys = zip(*pairs, strict=True)
        sizes.extend(xs)
        ax.plot(
            xs,
            ys,
            color=_COLORS[index % len(_COLORS)],
            marker=_MARKERS[index % len(_MARKERS)],
            linestyle=_DASHES[index % len(_DASHES)],
            label=_plain(item.label),
        )
    _size_axis(ax, pd.Series(sizes, dtype=float))
    ax.set_ylim(bottom=0)
    ax.set_ylabel("bus bandwidth (GB/s)")
    return _finish(fig, ax, plot_id, "Bus bandwidth of every run", legend_columns=1)


def _figure() -> tuple[Figure, Axes]:
    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    return fig, fig.add_subplot()


def _positive(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["size_bytes"] > 0].sort_values(["placement", "size_bytes"])


def _by_placement(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    found = []
    for placement in _PLACEMENT_STYLE:
        group = rows[rows["placement"] == placement]
        if not group.empty:
            found.append((placement, group))
    return found


def _fit_curves(
    rows: pd.DataFrame, fits: pd.DataFrame
) -> list[tuple[str, tuple[np.ndarray, np.ndarray]]]:
    """Per placement with a finite fit: 64 sizes across the data and T(n) in µs."""
    if rows.empty:
        return []
    lo, hi = float(rows["size_bytes"].min()), float(rows["size_bytes"].max())
    sizes = np.geomspace(lo, hi, 64) if hi > lo else np.array([lo])
    curves = []
    for placement in _PLACEMENT_STYLE:
        fit = fits[fits["placement"] == placement]
        if fit.empty or pd.isna(fit["alpha_us"].iloc[0]):
            continue
        alpha, beta = float(fit["alpha_us"].iloc[0]), fit["beta_gbps"].iloc[0]
        # beta null means unbounded (time does not grow with size): T = alpha.
        slope = 0.0 if pd.isna(beta) else 1e-3 / float(beta)
        curves.append((placement, (sizes, alpha + slope * sizes)))
    return curves


def _size_axis(ax: Axes, sizes: pd.Series) -> None:
    """Log2 size axis with at most 9 labelled powers of two ("8 B" ... "8 GiB")."""
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size")
    ax.xaxis.set_minor_locator(NullLocator())
    if sizes.empty:
        return
    lo = math.floor(math.log2(float(sizes.min())))
    hi = math.ceil(math.log2(float(sizes.max())))
    step = max(1, math.ceil((hi - lo + 1) / 9))
    ax.xaxis.set_major_locator(FixedLocator([2.0**e for e in range(lo, hi + 1, step)]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_bytes(v)))
    pad = 2 ** (0.3 * step)
    ax.set_xlim(float(sizes.min()) / pad, float(sizes.max()) * pad)


def _regions(ax: Axes, crossover: float | None, sizes: pd.Series) -> None:
    """Shade the latency-bound sizes and mark the crossover n* = alpha*beta."""
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
        fontsize=8,
        color="#555555",
    )
    if crossover < right:
        ax.axvline(crossover, color="#555555", linewidth=0.9)
        ax.text(
            crossover * 1.1,
            1.01,
            f"n* = {format_bytes(crossover)}, bandwidth-bound",
            transform=ax.get_xaxis_transform(),
            va="bottom",
            ha="left",
            fontsize=8,
            color="#555555",
        )
    ax.set_xlim(left, right)


def _compact(match: re.Match[str]) -> str:
    """One coordinate attribute with 1/100 pt precision and no line breaks."""
    return _DECIMALS.sub(r"\1", match.group(0)).replace(" \n", " ").replace("\n", " ")


def _plain(text: str) -> str:
    """Text from a log, shown literally: ``$`` would otherwise start mathtext."""
    return text.replace("$", r"\$")


_ID = re.compile(r'\sid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^)"]+)')
_ATTRIBUTE = re.compile(r'\s(?:d|x|y|x1|x2|y1|y2|transform|points)="[^"]*"')
_DECIMALS = re.compile(r"(\.\d\d)\d+")


def _finish(
    fig: Figure, ax: Axes, plot_id: str, title: str, legend_columns: int = 3
) -> str:
    """Legend, SVG export, and clean-up for inlining (see the module docstring)."""
    if ax.get_legend_handles_labels()[0]:
        # Below the axes, so every chart's plot area has the same width.
        fig.legend(loc="outside lower center", ncols=legend_columns, fontsize=8)
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, flags=re.S)
    # The page's CSS sets one font; per-element font lists are a third of the bytes.
    svg = re.sub(r"font-family: [^;\"]*;? ?", "", svg)
    # Coordinates to 1/100 pt and path data on one line: a third fewer bytes, same look.
    svg = _ATTRIBUTE.sub(_compact, svg)
    referenced = {m.group(2) for m in _REF.finditer(svg)}
    svg = _ID.sub(
        lambda m: f' id="{plot_id}-{m.group(1)}"' if m.group(1) in referenced else "",
        svg,
    )
    svg = _REF.sub(lambda m: f"{m.group(1)}{plot_id}-{m.group(2)}", svg)
    label = html.escape(title, quote=True)
    return svg.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1).strip()
