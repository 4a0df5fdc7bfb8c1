"""The chart of a baseline/candidate comparison, as a deterministic inline ``<svg>``.

Two panels on one log2 size axis: above, bus bandwidth against size for each series,
the baseline dashed with hollow markers and the candidate solid (one colour per
series); below, the bus bandwidth change per size in %, with the ``threshold`` band
shaded and regressed sizes outlined in red. Drawn with the report's figure machinery
(:mod:`ncclparse.report.figure`): the same comparison gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from ncclparse.health.compare import CompareRow, Comparison
from ncclparse.report.figure import COLORS, MARKERS, finish, plain, size_axis, styled

__all__ = ["MAX_SERIES", "charted_series", "charts_busbw", "comparison_chart"]

MAX_SERIES = len(COLORS)  # one colour each; more would not tell apart
_FIGSIZE = (7.2, 5.6)
_REGRESSION = "#b3261e"


def charted_series(comparison: Comparison) -> list[str]:
    """The series the chart draws, in row order: all of them, or the
    :data:`MAX_SERIES` whose worst size lost the most bus bandwidth (ties: row
    order)."""
    worst: dict[str, float] = {}
    for row in comparison.rows:
        worst[row.series] = min(worst.get(row.series, row.change), row.change)
    order = list(worst)
    chosen = set(sorted(order, key=lambda name: worst[name])[:MAX_SERIES])
    return [name for name in order if name in chosen]


def charts_busbw(comparison: Comparison) -> bool:
    """Whether the chart has its bus bandwidth panel: some charted size has a busbw
    (else only the change is drawn)."""
    names = set(charted_series(comparison))
    return any(
        r.baseline_busbw_gbps is not None or r.candidate_busbw_gbps is not None
        for r in comparison.rows
        if r.series in names
    )


@styled
def comparison_chart(comparison: Comparison, *, plot_id: str = "compare") -> str:
    """Bus bandwidth of both sides, and the change, against size (module doc).

    An empty string when the sides have no size in common.
    """
    if not comparison.rows:
        return ""
    if charts_busbw(comparison):
        fig = Figure(figsize=_FIGSIZE, layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    else:  # no busbw factor for these collectives: the change alone
        fig = Figure(figsize=(_FIGSIZE[0], _FIGSIZE[1] * 0.6), layout="constrained")
        top = bottom = fig.add_subplot()
    sizes = pd.Series([float(r.size_bytes) for r in comparison.rows], dtype=float)
    for index, name in enumerate(charted_series(comparison)):
        rows = sorted(
            (r for r in comparison.rows if r.series == name),
            key=lambda r: r.size_bytes,
        )
        _draw_series(top, bottom, rows, index, name)
    band = comparison.threshold * 100
    bottom.axhspan(-band, band, color="#ececec", zorder=0, linewidth=0)
    bottom.axhline(0, color="#555555", linewidth=0.8)
    bad = [r for r in comparison.rows if r.verdict == "regression"]
    if bad:
        # Circled at the worst run's change when a run regressed beyond the median.
        bottom.scatter(
            [r.size_bytes for r in bad],
            [min(r.change, _or(r.worst_change, r.change)) * 100 for r in bad],
            s=70,
            facecolors="none",
            edgecolors=_REGRESSION,
            linewidths=1.2,
            zorder=3,
            label="regression",
        )
    for ax in {id(top): top, id(bottom): bottom}.values():
        size_axis(ax, sizes)
    if top is not bottom:
        top.set_xlabel("")
        top.set_ylim(bottom=0)
        top.set_ylabel("bus bandwidth (GB/s)")
        # The style key: baseline dashed and hollow, candidate solid.
        top.plot([], [], color="#555555", linestyle="--", marker="o",
                 markerfacecolor="none", label="baseline (dashed, hollow)")  # fmt: skip
        top.plot([], [], color="#555555", linestyle="-", marker="o",
                 label="candidate (solid)")  # fmt: skip
    bottom.set_ylabel("busbw change")
    bottom.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:+.0f} %"))
    low, high = bottom.get_ylim()
    bottom.set_ylim(min(low, -band * 2), max(high, band * 2))
    title = (
        "Bus bandwidth of the baseline and the candidate, and its change, per size"
        if top is not bottom
        else "Bus bandwidth change per size"
    )
    return finish(fig, top, plot_id, title, legend_columns=1)


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _draw_series(
    top: Axes, bottom: Axes, rows: Sequence[CompareRow], index: int, name: str
) -> None:
    color = COLORS[index % len(COLORS)]
    marker = MARKERS[index % len(MARKERS)]
    xs = [float(r.size_bytes) for r in rows]
    for busbw, style in (
        ([r.baseline_busbw_gbps for r in rows], {"linestyle": "--",
                                                 "markerfacecolor": "none"}),
        ([r.candidate_busbw_gbps for r in rows], {"linestyle": "-"}),
    ):  # fmt: skip
        points = [(x, y) for x, y in zip(xs, busbw, strict=True) if y is not None]
        if points:
            top.plot(
                [x for x, _ in points],
                [y for _, y in points],
                color=color,
                marker=marker,
                **style,  # type: ignore[arg-type]
            )
    bottom.plot(
        xs,
        [r.change * 100 for r in rows],
        color=color,
        marker=marker,
        linestyle="-",
        label=plain(name),
    )
