"""Draw the report's charts as deterministic, inline-ready SVG strings.

Each public function takes analysed rows (a pandas DataFrame with the columns of
:func:`ncclparse.efficiency.analyze`, one series group: one collective, dtype, redop,
root and rank count, either placement) and returns an ``<svg>`` element as a string,
ready to paste into HTML: no XML prolog, no metadata, element ids prefixed with
``plot_id`` so that several charts in one page never share an id. The same rows give the
same bytes (fixed ``svg.hashsalt``, no date).

This module holds the charts themselves; the style, axes and SVG export they share
(on :class:`matplotlib.figure.Figure` directly, never pyplot) are in
:mod:`ncclparse.report.figure`.
Lines differ by marker and dash as well as colour, so they stay apart when printed in
grey scale. Text that may come from a log (series labels) passes through
:func:`~ncclparse.report.figure.plain` so that ``$`` never switches on mathtext.
"""

from __future__ import annotations

import html
import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from ncclparse.formatting import format_bytes, format_time_us
from ncclparse.report.figure import (
    COLORS,
    DASHES,
    MARKERS,
    PAGE_FIGSIZE,
    PAGE_TEXT,
    PLACEMENT_STYLE,
    figure,
    finish,
    plain,
    regions,
    size_axis,
    styled,
)

__all__ = [
    "OverlaySeries",
    "Panel",
    "bandwidth_plot",
    "efficiency_plot",
    "gap_plot",
    "overlay_plot",
    "small_multiples",
    "time_plot",
]


@dataclass(frozen=True, slots=True)
class OverlaySeries:
    """One line of :func:`overlay_plot`: a label and its (size, busbw) points."""

    label: str
    size_bytes: Sequence[float]
    busbw_gbps: Sequence[float]


@dataclass(frozen=True, slots=True)
class Panel:
    """One panel of :func:`small_multiples`: a ``title`` (the run), a ``subtitle``
    (the series), the in-page ``link`` it leads to and its (size, busbw) points."""

    title: str
    subtitle: str
    link: str
    size_bytes: Sequence[float]
    busbw_gbps: Sequence[float]


# Two panels across the width of a run's charts (PAGE_FIGSIZE), so that their 10 pt
# text stays 10 px on a phone; three across made it 5 px.
_PANEL_COLUMNS = 2
_PANEL = (PAGE_FIGSIZE[0] / _PANEL_COLUMNS, 1.75)  # inches
_INSET = (0.42, 0.1, 0.3, 0.52)  # plot area inside a panel: left, right, bottom, top
_LINE = PAGE_TEXT * 1.2 / 72  # inches: one line of 10 pt text
_TITLE_CHARS = 30  # a longer title runs into the next panel: cut, whole in its tooltip
_LEGEND_CHARS = 52  # a longer overlay label runs past the chart's edge: wrapped
_PLOT_HEIGHT = 2.9  # inches: the overlay's axes with its labels, its legend aside
_GREY = "#555555"
_SIZE_LABELS = 5  # labelled sizes on a chart as narrow as a phone: 10 pt labels fit


@styled
def small_multiples(panels: Sequence[Panel], *, plot_id: str, title: str) -> str:
    """A grid of small busbw-against-size charts, one per panel, on shared scales
    (log2 size, busbw from 0 to the largest of all panels).

    Every panel is drawn on one axes in inch coordinates, with its frame, ticks and
    labels as plain lines and text: a hundred matplotlib axes took five seconds and
    a hundred full charts a minute, this a fraction of a second. Each panel's title
    links to its ``link``; a panel without a positive size keeps only its frame.
    """
    rows = max(1, math.ceil(len(panels) / _PANEL_COLUMNS))
    width, height = _PANEL[0] * _PANEL_COLUMNS, _PANEL[1] * rows + 0.05
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    points = [
        [
            (math.log2(x), y)
            for x, y in zip(p.size_bytes, p.busbw_gbps, strict=True)
            if x > 0 and not math.isnan(y)
        ]
        for p in panels
    ]
    found = [pt for panel in points for pt in panel]
    lo = min((x for x, _ in found), default=0.0)
    hi = max((x for x, _ in found), default=1.0)
    hi = hi if hi > lo else lo + 1
    top = _nice(max((y for _, y in found), default=0.0))
    inner_w = _PANEL[0] - _INSET[0] - _INSET[1]
    inner_h = _PANEL[1] - _INSET[2] - _INSET[3]
    frame: dict[str, Any] = {"color": "#999999", "linewidth": 0.6}
    label: dict[str, Any] = {"fontsize": PAGE_TEXT, "color": _GREY}
    for index, (panel, mine) in enumerate(zip(panels, points, strict=True)):
        column, row = index % _PANEL_COLUMNS, index // _PANEL_COLUMNS
        x0 = column * _PANEL[0] + _INSET[0]
        y0 = height - (row + 1) * _PANEL[1] + _INSET[2]
        x1, y1 = x0 + inner_w, y0 + inner_h
        ax.plot([x0, x0, x1], [y1, y0, y0], **frame)
        ax.plot([x0, x1], [(y0 + y1) / 2] * 2, color="#d9d9d9", linewidth=0.4)
        left = x0 - _INSET[0] + 0.04
        # Above the top busbw label, whose upper half reaches 0.07 in over y1.
        title_y = y1 + 0.1 + _LINE
        text = ax.text(left, title_y, plain(_cut(panel.title)), va="bottom")
        text.set_url(panel.link)
        ax.text(left, y1 + 0.1, plain(_cut(panel.subtitle)), va="bottom", **label)
        # Shared scales: the first column names busbw, the lowest panel of each
        # column the sizes (two thirds of the text of labelling every panel).
        if column == 0:
            for y, value in ((y0, 0.0), ((y0 + y1) / 2, top / 2), (y1, top)):
                ax.text(x0 - 0.04, y, f"{value:.3g}", ha="right", va="center", **label)
        if index + _PANEL_COLUMNS >= len(panels):
            for x, ha in ((x0, "left"), (x1, "right")):
                size = 2 ** (lo if ha == "left" else hi)
                ax.text(x, y0 - 0.05, format_bytes(size), ha=ha, va="top", **label)
        if mine:
            xs = [x0 + (x - lo) / (hi - lo) * inner_w for x, _ in mine]
            ys = [y0 + y / top * inner_h for _, y in mine]
            ax.plot(xs, ys, color=COLORS[0], linewidth=1.2)
    return _tooltips(finish(fig, ax, plot_id, title), panels)


def _cut(text: str) -> str:
    """``text`` in at most :data:`_TITLE_CHARS` characters: its start and its end
    (where a log's name differs from its neighbours', and the run's number) around
    an ellipsis."""
    if len(text) <= _TITLE_CHARS:
        return text
    tail = _TITLE_CHARS // 2
    return text[: _TITLE_CHARS - tail - 1] + "…" + text[-tail:]


def _tooltips(svg: str, panels: Sequence[Panel]) -> str:
    """Each panel's link with its whole title and subtitle as its tooltip (an SVG
    ``<title>``): the drawn ones may be cut."""
    at = 0
    for panel in panels:
        anchor = re.compile(
            f'<a xlink:href="{re.escape(html.escape(panel.link))}"[^>]*>'
        )
        found = anchor.search(svg, at)
        if found is None:
            continue  # matplotlib drops the link of a title that draws nothing
        at = found.end()
        tip = html.escape(f"{panel.title}: {panel.subtitle}", quote=False)
        svg = f"{svg[:at]}<title>{tip}</title>{svg[at:]}"
    return svg


def _nice(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 x 10^k at or above ``value`` (1 for nothing)."""
    if not value > 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(float(m * power) for m in (1, 2, 2.5, 5, 10) if m * power >= value)


@styled
def bandwidth_plot(
    rows: pd.DataFrame, fits: pd.DataFrame, *, plot_id: str, crossover: float | None
) -> str:
    """Bus bandwidth against size: measured (both placements), ideal, fitted model.

    ``rows`` needs size_bytes, placement, busbw_calc_gbps, ideal_busbw_gbps and
    busbw_factor; ``fits`` one row per placement with its expected curve's
    ``segments`` (or alpha_us and beta_gbps). Sizes below ``crossover`` are shaded
    as latency-bound. 0-byte rows are left out (no place on a log axis).
    """
    fig, ax = figure(PAGE_FIGSIZE)
    data = _positive(rows)
    for placement, group in _by_placement(data):
        ax.plot(
            group["size_bytes"],
            group["busbw_calc_gbps"],
            label=f"measured, {placement}",
            **PLACEMENT_STYLE[placement],
        )
    ideal = data["ideal_busbw_gbps"].dropna()
    if not ideal.empty:
        ax.plot(
            data["size_bytes"],
            data["ideal_busbw_gbps"],
            color="black",
            linestyle=(0, (6, 3)),
            linewidth=1.1,
            label="ideal (line rate)",
        )
    factors = data["busbw_factor"].dropna()
    factor = float(factors.iloc[0]) if not factors.empty else 1.0
    _draw_curves(ax, _fit_curves(data, fits), lambda n, t: factor * n / t * 1e-3)
    size_axis(ax, data["size_bytes"], labels=_SIZE_LABELS)
    regions(ax, crossover, data["size_bytes"])
    ax.set_ylim(bottom=0)
    ax.set_ylabel("bus bandwidth (GB/s)")
    return finish(
        fig,
        ax,
        plot_id,
        "Bus bandwidth against message size",
        legend_columns=2,
        legend_size=PAGE_TEXT,
    )


@styled
def time_plot(
    rows: pd.DataFrame, fits: pd.DataFrame, *, plot_id: str, crossover: float | None
) -> str:
    """Time per operation against size, log-log: measured, expected curve, ideal.

    The ideal time is the bus bytes moved at the ideal bus bandwidth (no latency).
    """
    fig, ax = figure(PAGE_FIGSIZE)
    data = _positive(rows)
    for placement, group in _by_placement(data):
        ax.plot(
            group["size_bytes"],
            group["time_us"],
            label=f"measured, {placement}",
            **PLACEMENT_STYLE[placement],
        )
    _draw_curves(ax, _fit_curves(data, fits), lambda _, t: t)
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
    size_axis(ax, data["size_bytes"], labels=_SIZE_LABELS)
    regions(ax, crossover, data["size_bytes"])
    ax.set_yscale("log")
    # The ideal of an 8-byte message is picoseconds: let it leave the axes rather
    # than squash the measured decades into a corner.
    if not data["time_us"].dropna().empty:
        ax.set_ylim(bottom=float(data["time_us"].min()) / 10)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_time_us(v)))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_ylabel("time per operation")
    return finish(
        fig,
        ax,
        plot_id,
        "Time against message size",
        legend_columns=2,
        legend_size=PAGE_TEXT,
    )


@styled
def efficiency_plot(
    rows: pd.DataFrame, *, plot_id: str, crossover: float | None
) -> str:
    """Efficiency (recomputed busbw / ideal) against size, in percent, with 100 %."""
    fig, ax = figure(PAGE_FIGSIZE)
    data = _positive(rows).dropna(subset=["efficiency"])
    for placement, group in _by_placement(data):
        ax.plot(
            group["size_bytes"],
            group["efficiency"] * 100,
            label=placement,
            **PLACEMENT_STYLE[placement],
        )
    ax.axhline(100, color="black", linestyle=(0, (6, 3)), linewidth=1.1, label="ideal")
    size_axis(ax, data["size_bytes"], labels=_SIZE_LABELS)
    regions(ax, crossover, data["size_bytes"])
    top = max(110.0, float((data["efficiency"] * 100).max()) * 1.05)
    ax.set_ylim(0, top)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f} %"))
    ax.set_ylabel("efficiency")
    return finish(
        fig,
        ax,
        plot_id,
        "Efficiency against message size",
        legend_columns=2,
        legend_size=PAGE_TEXT,
    )


# (column, legend label, colour, hatch): hatches keep the stack legible in grey scale.
_GAP_PARTS = (
    ("ideal_time_us", "ideal transfer", "#bdbdbd", ""),
    ("gap_hw_latency_us", "hardware latency", "#56B4E9", ".."),
    ("gap_latency_us", "software latency (alpha)", "#0072B2", "//"),
    ("gap_staging_us", "host staging", "#E69F00", "xx"),
    ("gap_bandwidth_us", "bandwidth shortfall", "#D55E00", "\\\\"),
    ("gap_residual_us", "unexplained", "#CC79A7", "--"),
)


@styled
def gap_plot(rows: pd.DataFrame, *, plot_id: str) -> str:
    """Where the time goes, per size: stacked shares of the measured time.

    One bar per size (``rows`` of one placement): the ideal transfer time plus each gap
    component of docs/efficiency.md sec. 4, as a percentage of the measured time, so
    the stack reaches 100 %. A negative residual (faster than the fitted line) is
    drawn below zero. Components that are null for every size are left out.
    """
    fig, ax = figure(PAGE_FIGSIZE)
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
    step = max(1, math.ceil(len(labels) / _SIZE_LABELS))
    ax.xaxis.set_major_locator(FixedLocator(x[::step].tolist()))
    ax.set_xticklabels(labels[::step])
    ax.set_xlim(-0.6, max(len(data), 1) - 0.4)
    ax.grid(axis="x", visible=False)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f} %"))
    ax.set_ylabel("share of measured time")
    ax.set_xlabel("message size")
    return finish(
        fig,
        ax,
        plot_id,
        "Where the time goes, per message size",
        legend_columns=2,
        legend_size=PAGE_TEXT,
    )


@styled
def overlay_plot(series: Sequence[OverlaySeries], *, plot_id: str) -> str:
    """Bus bandwidth against size for several runs on one axis, one style per run.

    Phone-wide like a run's charts; a label longer than the chart is wide (a run and
    its series) wraps onto a second line of the legend, and the chart grows taller
    with its legend so that the plot area keeps its height.
    """
    # Half a line between the legend's entries.
    lines = sum(len(_wrap(item.label).split("\n")) + 0.5 for item in series)
    height = max(PAGE_FIGSIZE[1], _PLOT_HEIGHT + lines * _LINE)
    fig, ax = figure((PAGE_FIGSIZE[0], height))
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
            color=COLORS[index % len(COLORS)],
            marker=MARKERS[index % len(MARKERS)],
            linestyle=DASHES[index % len(DASHES)],
            label=plain(_wrap(item.label)),
        )
    size_axis(ax, pd.Series(sizes, dtype=float), labels=_SIZE_LABELS)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("bus bandwidth (GB/s)")
    return finish(
        fig,
        ax,
        plot_id,
        "Bus bandwidth of every run",
        legend_columns=1,
        legend_size=PAGE_TEXT,
    )


def _wrap(text: str) -> str:
    """``text`` on lines of at most :data:`_LEGEND_CHARS` characters."""
    return "\n".join(textwrap.wrap(text, _LEGEND_CHARS, break_on_hyphens=False))


def _positive(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["size_bytes"] > 0].sort_values(["placement", "size_bytes"])


def _by_placement(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    found = []
    for placement in PLACEMENT_STYLE:
        group = rows[rows["placement"] == placement]
        if not group.empty:
            found.append((placement, group))
    return found


# One piece of an expected curve: its protocol (or segment) name, sizes, T(n) in µs.
_Piece = tuple[str, np.ndarray, np.ndarray]


def _fit_curves(
    rows: pd.DataFrame, fits: pd.DataFrame
) -> list[tuple[str, list[_Piece]]]:
    """Per placement with a finite fit, the pieces of its expected curve.

    Each segment of the fits' ``segments`` is drawn over its sizes, extended halfway
    (geometrically) to the next segment's first size, so the curve jumps where the
    protocol changes; without segments, the alpha-beta line over the data.
    """
    if rows.empty:
        return []
    lo, hi = float(rows["size_bytes"].min()), float(rows["size_bytes"].max())
    curves = []
    for placement in PLACEMENT_STYLE:
        fit = fits[fits["placement"] == placement]
        if fit.empty or pd.isna(fit["alpha_us"].iloc[0]):
            continue
        segments = fit["segments"].iloc[0] if "segments" in fit else None
        if segments is None or len(segments) == 0:
            alpha, beta = float(fit["alpha_us"].iloc[0]), fit["beta_gbps"].iloc[0]
            # beta null means unbounded (time does not grow with size): T = alpha.
            slope = 0.0 if pd.isna(beta) else 1e-3 / float(beta)
            sizes = np.geomspace(lo, hi, 64) if hi > lo else np.array([lo])
            curves.append((placement, [("", sizes, alpha + slope * sizes)]))
            continue
        pieces = []
        for index, segment in enumerate(segments):
            start = (
                lo
                if index == 0
                else math.sqrt(
                    float(segments[index - 1]["to_bytes"]) * segment["from_bytes"]
                )
            )
            end = hi
            if index + 1 < len(segments):
                end = math.sqrt(
                    float(segment["to_bytes"]) * segments[index + 1]["from_bytes"]
                )
            start, end = max(start, lo), min(end, hi)
            if not end >= start > 0:
                continue
            sizes = np.geomspace(start, end, 24) if end > start else np.array([start])
            time = segment["alpha_us"] + sizes * 1e-3 / segment["beta_gbps"]
            pieces.append((str(segment["protocol"]), sizes, time))
        curves.append((placement, pieces))
    return curves


def _draw_curves(
    ax: Any,
    curves: list[tuple[str, list[_Piece]]],
    value: Any,
) -> None:
    """Each placement's expected curve, a band in its colour; ``value(n, T)`` is the
    quantity drawn. The first placement's segments are named where they are drawn:
    the protocol NCCL's model would typically choose there (docs/efficiency.md)."""
    for number, (placement, pieces) in enumerate(curves):
        color = PLACEMENT_STYLE[placement]["color"]
        for index, (name, sizes, time) in enumerate(pieces):
            # A wide translucent band under the measured line: a thin one hides
            # behind it where the curve explains the sweep.
            ax.plot(
                sizes,
                value(sizes, time),
                color=color,
                linestyle="-",
                linewidth=5,
                alpha=0.3,
                solid_capstyle="butt",
                zorder=1.5,
                label=f"expected curve, {placement}" if index == 0 else None,
            )
            if number == 0 and name and len(pieces) > 1:
                middle = len(sizes) // 2
                ax.annotate(
                    plain(name),
                    (float(sizes[middle]), float(value(sizes, time)[middle])),
                    xytext=(0, 6),
                    textcoords="offset points",
                    ha="center",
                    va="bottom",
                    fontsize=PAGE_TEXT,
                    color=color,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"},
                )
