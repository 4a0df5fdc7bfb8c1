"""Charts for notebooks: a parse result (or its table, or an analysis) in, a matplotlib
:class:`~matplotlib.figure.Figure` out.

>>> import ncclparse
>>> from ncclparse.report.notebook import plot_bandwidth
>>> result = ncclparse.parse("all_reduce.log")          # doctest: +SKIP
>>> plot_bandwidth(result)                               # doctest: +SKIP

Every function takes a :class:`~ncclparse.parsers.ParseResult`, an
:class:`~ncclparse.efficiency.Analysis`, or a measurements table (Arrow or pandas,
analysed or not), and draws one line per series: a source's run, collective, dtype,
redop, root, rank count and placement (the legend names what differs between the
lines drawn; it is left out beyond :data:`LEGEND_LINES` lines). ``source=``, ``run=``
(0-based, as the tables' ``run`` column) and ``collective=`` keep only matching rows.
With ``ax=`` the chart is drawn on that axes and its figure is returned; without, on a
new figure. Only :class:`matplotlib.figure.Figure` is used, never pyplot: no GUI
backend is needed, and nothing is shown or kept by matplotlib (a notebook shows the
returned figure). 0-byte rows are left out (no place on a log axis). Raises ValueError
when no row is left to draw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import pandas as pd
import pyarrow as pa
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

from ncclparse.efficiency import (
    Analysis,
    HardwareOptions,
    HardwareProfile,
    analyze,
    bandwidth_columns,
)
from ncclparse.formatting import format_time_us
from ncclparse.parsers import ParseResult
from ncclparse.report.figure import COLORS, MARKERS, PLACEMENT_STYLE, plain, size_axis
from ncclparse.report.figure import figure as new_figure

__all__ = [
    "LEGEND_LINES",
    "Plottable",
    "plot_bandwidth",
    "plot_efficiency",
    "plot_time",
]

Plottable: TypeAlias = ParseResult | Analysis | pa.Table | pd.DataFrame
Hardware: TypeAlias = HardwareOptions | HardwareProfile | str | Path | None
LEGEND_LINES = 12  # more lines than this: no legend (select with source=/run=)
# What tells series apart, in legend order.
SERIES = ("source", "run", "collective", "dtype", "redop", "root", "nranks")
_IDEAL: dict[str, Any] = {"color": "black", "linestyle": (0, (6, 3)), "linewidth": 1.1}


def plot_bandwidth(
    result: Plottable,
    *,
    ax: Axes | None = None,
    source: str | None = None,
    run: int | None = None,
    collective: str | None = None,
    hardware: Hardware = None,
) -> Figure:
    """Bus bandwidth (GB/s) against message size (log axis), one line per series.

    The busbw is the log's, or recomputed from size and time where the log prints
    none (IMB, oneCCL). The ideal bus bandwidth is drawn (dashed, black) when the
    input is analysed, or when ``hardware`` (as for
    :func:`ncclparse.efficiency.analyze`) is given to analyse it.
    """
    rows = _rows(result, source, run, collective, hardware, need="busbw_calc_gbps")
    rows["y"] = rows["busbw_gbps"].fillna(rows["busbw_calc_gbps"])
    fig, ax = _axes(ax)
    drawn = _lines(ax, rows.dropna(subset=["y"]))
    if "ideal_busbw_gbps" in rows:
        _ideal(ax, rows, "ideal_busbw_gbps", "ideal")
    _finish(ax, rows, drawn)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("bus bandwidth (GB/s)")
    return fig


def plot_time(
    result: Plottable,
    *,
    ax: Axes | None = None,
    source: str | None = None,
    run: int | None = None,
    collective: str | None = None,
    hardware: Hardware = None,
) -> Figure:
    """Time per operation (µs) against message size, log-log, one line per series;
    with an analysis (or ``hardware``), the ideal time (the bus bytes at the ideal bus
    bandwidth, no latency) dashed."""
    rows = _rows(result, source, run, collective, hardware, need=None)
    rows["y"] = rows["time_us"]
    fig, ax = _axes(ax)
    drawn = _lines(ax, rows.dropna(subset=["y"]))
    if "ideal_time_us" in rows:
        _ideal(ax, rows, "ideal_time_us", "ideal (no latency)")
    _finish(ax, rows, drawn)
    ax.set_yscale("log")
    # The ideal of an 8-byte message is picoseconds: let it leave the axes rather
    # than squash the measured decades into a corner.
    measured = rows["y"].dropna()
    if not measured.empty:
        ax.set_ylim(bottom=float(measured.min()) / 10)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_time_us(v)))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_ylabel("time per operation")
    return fig


def plot_efficiency(
    result: Plottable,
    *,
    ax: Axes | None = None,
    source: str | None = None,
    run: int | None = None,
    collective: str | None = None,
    hardware: Hardware = None,
) -> Figure:
    """Efficiency (recomputed busbw / ideal busbw, in %) against message size, one
    line per series, with 100 % dashed.

    An input that is not analysed is analysed here, against ``hardware`` (default: a
    preset matching each row's GPU). Raises ValueError, with the reasons the
    analysis gives, when no row has an efficiency.
    """
    rows = _rows(result, source, run, collective, hardware, need="efficiency")
    judged = rows.dropna(subset=["efficiency"])
    if judged.empty:
        notes = [str(n) for n in rows.get("efficiency_note", []) if n]
        notes = list(dict.fromkeys(p for n in notes for p in n.split("; ")))
        why = f": {'; '.join(notes)}" if notes else ""
        raise ValueError(
            f"no efficiency to plot{why}; give hardware= (a profile, or "
            "HardwareOptions(intra_bw=..., inter_bw=...))"
        )
    judged = judged.assign(y=judged["efficiency"] * 100)
    fig, ax = _axes(ax)
    drawn = _lines(ax, judged)
    ax.axhline(100, label="ideal", **_IDEAL)
    _finish(ax, judged, drawn + 1)
    ax.set_ylim(0, max(110.0, float(judged["y"].max()) * 1.05))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f} %"))
    ax.set_ylabel("efficiency")
    return fig


def _rows(
    result: Plottable,
    source: str | None,
    run: int | None,
    collective: str | None,
    hardware: Hardware,
    need: str | None,
) -> pd.DataFrame:
    """The rows to draw, as pandas: analysed when ``hardware`` is given or ``need``
    is ``"efficiency"``, bandwidths recomputed when ``need`` is busbw_calc_gbps."""
    runs = result.runs if isinstance(result, ParseResult) else None
    if isinstance(result, ParseResult):
        table = result.measurements
    elif isinstance(result, Analysis):
        table = result.rows
    elif isinstance(result, pd.DataFrame):
        table = pa.Table.from_pandas(result, preserve_index=False)
    else:
        table = result
    table = _selected(table, source, run, collective)
    analysed = "efficiency" in table.column_names
    if not analysed and (hardware is not None or need == "efficiency"):
        table = analyze(table, hardware, runs).rows
    elif need is not None and need not in table.column_names:
        table = bandwidth_columns(table)
    keep = [c for c in table.column_names if c in _COLUMNS]
    frame = table.select(keep).to_pandas()
    frame = frame[frame["size_bytes"] > 0]
    if frame.empty:
        raise ValueError(f"no measurement to plot{_filters(source, run, collective)}")
    return frame.reset_index(drop=True)


_COLUMNS = {
    *SERIES,
    "placement",
    "size_bytes",
    "time_us",
    "busbw_gbps",
    "busbw_calc_gbps",
    "ideal_busbw_gbps",
    "ideal_time_us",
    "efficiency",
    "efficiency_note",
}


def _selected(
    table: pa.Table, source: str | None, run: int | None, collective: str | None
) -> pa.Table:
    mask = np.ones(table.num_rows, dtype=bool)
    for name, value in (("source", source), ("run", run), ("collective", collective)):
        if value is not None:
            mask &= np.asarray(table.column(name).to_pylist(), dtype=object) == value
    return table if mask.all() else table.filter(pa.array(mask))


def _filters(source: str | None, run: int | None, collective: str | None) -> str:
    given = [
        f"{name}={value!r}"
        for name, value in (
            ("source", source),
            ("run", run),
            ("collective", collective),
        )
        if value is not None
    ]
    return f" ({', '.join(given)})" if given else ""


def _axes(ax: Axes | None) -> tuple[Figure, Axes]:
    if ax is None:
        return new_figure()
    # The root Figure of a SubFigure's axes too (get_figure(root=) is matplotlib
    # 3.10 only: the floor is 3.8).
    fig: Any = ax.figure
    while not isinstance(fig, Figure):
        fig = fig.figure
    return fig, ax


def _series(rows: pd.DataFrame) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    """(key, rows sorted by size) per series, sorted by key, placements in the
    order of PLACEMENT_STYLE."""
    keys = [k for k in (*SERIES, "placement") if k in rows]
    order: dict[Any, int] = {p: i for i, p in enumerate(PLACEMENT_STYLE)}
    groups = []
    for values, group in rows.groupby(keys, dropna=False, sort=False):
        key = dict(zip(keys, values, strict=True))
        groups.append((key, group.sort_values("size_bytes", kind="stable")))

    def rank(item: tuple[dict[str, Any], pd.DataFrame]) -> tuple[Any, ...]:
        key = item[0]
        parts = [_text(key[k]) for k in keys if k != "placement"]
        return (*parts, order.get(key.get("placement"), len(order)))

    return sorted(groups, key=rank)


def _text(value: Any) -> str:
    """A key value as sortable text (numbers zero-padded, null first)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    if isinstance(value, int | float | np.integer | np.floating):
        return f"{float(value):020.3f}"
    return str(value)


def _lines(ax: Axes, rows: pd.DataFrame) -> int:
    """Draw ``rows``'s ``y`` against size, one line per series; return how many.

    Placements differ by dash and hollow markers; series otherwise alike (one run,
    both placements) take the placement colours, else a colour and marker each."""
    series = _series(rows)
    varying = _varying([key for key, _ in series])
    groups: dict[tuple[str, ...], int] = {}
    for key, _ in series:
        groups.setdefault(_group(key), len(groups))
    for key, group in series:
        placement = str(key.get("placement"))
        style: dict[str, Any] = dict(PLACEMENT_STYLE.get(placement, {}))
        if len(groups) > 1 or "color" not in style:
            index = groups[_group(key)]
            style["color"] = COLORS[index % len(COLORS)]
            style["marker"] = MARKERS[index % len(MARKERS)]
        ax.plot(
            group["size_bytes"].to_numpy(dtype=float),
            group["y"].to_numpy(dtype=float),
            label=_label(key, varying),
            **style,
        )
    return len(series)


def _group(key: dict[str, Any]) -> tuple[str, ...]:
    return tuple(_text(v) for k, v in key.items() if k != "placement")


def _varying(keys: list[dict[str, Any]]) -> list[str]:
    """The key names whose values differ between ``keys`` (the legend's words)."""
    names = list(keys[0]) if keys else []
    return [n for n in names if len({_text(k.get(n)) for k in keys}) > 1]


def _label(key: dict[str, Any], varying: list[str]) -> str:
    """The legend text of a series: what tells it from the others drawn."""
    words = []
    for name in varying or ["placement" if key.get("placement") else "collective"]:
        value: Any = key.get(name)
        if _text(value) == "":
            continue
        if name == "source":
            words.append(Path(str(value)).name)
        elif name == "run":
            words.append(f"run {int(value)}")
        elif name == "nranks":
            words.append(f"{int(value)} ranks")
        elif name == "root":
            words.append(f"root {int(value)}")
        else:
            words.append(str(value))
    return plain(", ".join(words) or "measured")


def _ideal(ax: Axes, rows: pd.DataFrame, column: str, label: str) -> None:
    """The ideal of each series but placement (it does not depend on it): dashed."""
    data = rows.dropna(subset=[column])
    if data.empty:
        return
    keys = [k for k in SERIES if k in data]
    first = True
    for _, group in data.groupby(keys, dropna=False, sort=True):
        points = group.drop_duplicates("size_bytes").sort_values("size_bytes")
        ax.plot(
            points["size_bytes"].to_numpy(dtype=float),
            points[column].to_numpy(dtype=float),
            label=label if first else "_nolegend_",
            **_IDEAL,
        )
        first = False


def _finish(ax: Axes, rows: pd.DataFrame, lines: int) -> None:
    """Size axis, grid, and a legend unless there are too many lines."""
    size_axis(ax, rows["size_bytes"].astype(float))
    ax.grid(True, color="#d9d9d9", linewidth=0.6)
    if 0 < lines <= LEGEND_LINES:
        ax.legend(fontsize=8)
