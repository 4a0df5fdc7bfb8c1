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

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from ncclparse.formatting import format_bytes, format_time_us
from ncclparse.report.figure import (
    COLORS,
    DASHES,
    MARKERS,
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
    "bandwidth_plot",
    "efficiency_plot",
    "gap_plot",
    "overlay_plot",
    "time_plot",
]


@dataclass(frozen=True, slots=True)
class OverlaySeries:
    """One line of :func:`overlay_plot`: a label and its (size, busbw) points."""

    label: str
    size_bytes: Sequence[float]
    busbw_gbps: Sequence[float]


@styled
def bandwidth_plot(
    rows: pd.DataFrame, fits: pd.DataFrame, *, plot_id: str, crossover: float | None
) -> str:
    """Bus bandwidth against size: measured (both placements), ideal, fitted model.

    ``rows`` needs size_bytes, placement, busbw_calc_gbps, ideal_busbw_gbps and
    busbw_factor; ``fits`` one row per placement with alpha_us and beta_gbps. Sizes
    below ``crossover`` (bytes, the fit's alpha*beta) are shaded as latency-bound.
    0-byte rows are left out (no place on a log axis).
    """
    fig, ax = figure()
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
            label="ideal (AIBooster)",
        )
    for placement, fit in _fit_curves(data, fits):
        sizes, model_time = fit
        factor = float(data["busbw_factor"].dropna().iloc[0])
        ax.plot(
            sizes,
            factor * sizes / model_time * 1e-3,
            color=PLACEMENT_STYLE[placement]["color"],
            linestyle=":",
            linewidth=1.1,
            label=f"alpha-beta fit, {placement}",
        )
    size_axis(ax, data["size_bytes"])
    regions(ax, crossover, data["size_bytes"])
    ax.set_ylim(bottom=0)
    ax.set_ylabel("bus bandwidth (GB/s)")
    return finish(fig, ax, plot_id, "Bus bandwidth against message size")


@styled
def time_plot(
    rows: pd.DataFrame, fits: pd.DataFrame, *, plot_id: str, crossover: float | None
) -> str:
    """Time per operation against size, log-log: measured, alpha-beta model, ideal.

    The ideal time is the bus bytes moved at the ideal bus bandwidth (no latency).
    """
    fig, ax = figure()
    data = _positive(rows)
    for placement, group in _by_placement(data):
        ax.plot(
            group["size_bytes"],
            group["time_us"],
            label=f"measured, {placement}",
            **PLACEMENT_STYLE[placement],
        )
    for placement, (sizes, model_time) in _fit_curves(data, fits):
        ax.plot(
            sizes,
            model_time,
            color=PLACEMENT_STYLE[placement]["color"],
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
    size_axis(ax, data["size_bytes"])
    regions(ax, crossover, data["size_bytes"])
    ax.set_yscale("log")
    # The ideal of an 8-byte message is picoseconds: let it leave the axes rather
    # than squash the measured decades into a corner.
    if not data["time_us"].dropna().empty:
        ax.set_ylim(bottom=float(data["time_us"].min()) / 10)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_time_us(v)))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_ylabel("time per operation")
    return finish(fig, ax, plot_id, "Time against message size")


@styled
def efficiency_plot(
    rows: pd.DataFrame, *, plot_id: str, crossover: float | None
) -> str:
    """Efficiency (recomputed busbw / ideal) against size, in percent, with 100 %."""
    fig, ax = figure()
    data = _positive(rows).dropna(subset=["efficiency"])
    for placement, group in _by_placement(data):
        ax.plot(
            group["size_bytes"],
            group["efficiency"] * 100,
            label=placement,
            **PLACEMENT_STYLE[placement],
        )
    ax.axhline(100, color="black", linestyle=(0, (6, 3)), linewidth=1.1, label="ideal")
    size_axis(ax, data["size_bytes"])
    regions(ax, crossover, data["size_bytes"])
    top = max(110.0, float((data["efficiency"] * 100).max()) * 1.05)
    ax.set_ylim(0, top)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f} %"))
    ax.set_ylabel("efficiency")
    return finish(fig, ax, plot_id, "Efficiency against message size")


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
    fig, ax = figure()
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
    return finish(fig, ax, plot_id, "Where the time goes, per message size")


@styled
def overlay_plot(series: Sequence[OverlaySeries], *, plot_id: str) -> str:
    """Bus bandwidth against size for several runs on one axis, one style per run."""
    fig, ax = figure()
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
            label=plain(item.label),
        )
    size_axis(ax, pd.Series(sizes, dtype=float))
    ax.set_ylim(bottom=0)
    ax.set_ylabel("bus bandwidth (GB/s)")
    return finish(fig, ax, plot_id, "Bus bandwidth of every run", legend_columns=1)


def _positive(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["size_bytes"] > 0].sort_values(["placement", "size_bytes"])


def _by_placement(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    found = []
    for placement in PLACEMENT_STYLE:
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
    for placement in PLACEMENT_STYLE:
        fit = fits[fits["placement"] == placement]
        if fit.empty or pd.isna(fit["alpha_us"].iloc[0]):
            continue
        alpha, beta = float(fit["alpha_us"].iloc[0]), fit["beta_gbps"].iloc[0]
        # beta null means unbounded (time does not grow with size): T = alpha.
        slope = 0.0 if pd.isna(beta) else 1e-3 / float(beta)
        curves.append((placement, (sizes, alpha + slope * sizes)))
    return curves
