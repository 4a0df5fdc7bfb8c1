"""The host x host heatmap of a pairwise sweep: one cell per pair of hosts.

A pairwise sweep runs the same benchmark between every pair of N hosts (N(N-1)/2
two-host runs). Its numbers read best as a symmetric matrix: a slow host shows as a
dark row and column. :func:`is_pairwise` says whether a parse result is such a
sweep, :func:`pair_matrix` builds the matrix (exact values, testable without a
picture), :func:`heatmap_svg` draws it as a deterministic inline ``<svg>`` (the
house style and export of :mod:`ncclparse.report.figure`), and
:func:`pairwise_heatmap` does all three for a :class:`~ncclparse.parsers.ParseResult`,
blaming the slow host itself (:mod:`ncclparse.health.blame`) when not told.

Cell value: the pair's *plateau bus bandwidth*, the median of the recomputed busbw
(``busbw_calc_gbps``, :func:`ncclparse.efficiency.bandwidth_columns`) of its rows,
both placements, at the :data:`PLATEAU_SIZES` largest message sizes of the shape's
sweep (where a sweep is bandwidth-bound; the largest size alone is one noisy
point). A pair measured by several runs takes the median of their values. Pairs
without a run are blank (NaN), and so is the diagonal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
from matplotlib import colormaps
from matplotlib.patches import Rectangle

from ncclparse._arrow import key_text
from ncclparse.efficiency import bandwidth_columns
from ncclparse.formatting import series_label
from ncclparse.report.figure import PAGE_TEXT, finish, plain, styled

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ncclparse.health.blame import HostScore
    from ncclparse.parsers import ParseResult

__all__ = [
    "PLATEAU_SIZES",
    "PairMatrix",
    "heatmap_svg",
    "is_pairwise",
    "pair_matrix",
    "pairwise_heatmap",
    "slow_hosts",
]

# How many of the largest sizes make a pair's plateau (their median).
PLATEAU_SIZES = 4
# The shape of a pair's runs: SHAPE_KEYS without placement (both placements count).
_PAIR_SHAPE = ("tool", "collective", "dtype", "redop", "root", "nranks", "nnodes")
# Fewer hosts than this is a pair or two, not a matrix worth drawing.
_MIN_HOSTS = 3
# The map's side (inches): what a phone-wide figure (4.8 in, PAGE_FIGSIZE) leaves
# beside the host labels and the colour bar, or more when 10 pt labels need more.
_SIDE = 3.2
_LABEL_PITCH = 0.17  # inches per host label of 10 pt text
_AROUND = (1.6, 1.2)  # inches beside (labels, colour bar) and below (labels, legend)
# A cell this wide (inches) holds its value in 10 pt text ("1.23e+03" aside); in
# smaller cells the colour and the overview's plateau busbw of each pair remain.
_VALUE_CELL = 0.45
_OUTLINE = "#D55E00"  # Okabe-Ito vermillion: stands out from every cividis shade
_COLORMAP = "cividis"  # perceptually uniform and readable with colour-vision deficiency


@dataclass(frozen=True, slots=True)
class PairMatrix:
    """A pairwise sweep as a matrix.

    ``values[i, j]`` is the plateau busbw (GB/s) of hosts ``hosts[i]`` and
    ``hosts[j]`` (symmetric; NaN where no run measured the pair, and on the
    diagonal); ``runs[i, j]`` how many runs gave it. ``sizes`` are the message sizes
    (bytes) whose median makes a cell, ``shape`` the series shape drawn (keys of
    ``_PAIR_SHAPE``, as text) and ``label`` it in words.
    """

    hosts: tuple[str, ...]
    values: npt.NDArray[np.float64]
    runs: npt.NDArray[np.int64]
    sizes: tuple[int, ...]
    shape: dict[str, str]
    label: str

    def value(self, a: str, b: str) -> float:
        """The cell of hosts ``a`` and ``b`` (NaN when not measured)."""
        return float(self.values[self.hosts.index(a), self.hosts.index(b)])


def _host_pairs(runs: pa.Table) -> list[tuple[str, ...]]:
    """Each run's distinct named hosts, in rank order."""
    found = []
    for hosts in runs["hosts"].to_pylist():
        found.append(tuple(dict.fromkeys(h for h in (hosts or []) if h)))
    return found


def is_pairwise(runs: pa.Table) -> bool:
    """True when ``runs`` (a runs table, docs/schema.md) is a pairwise sweep: every
    run lists exactly two distinct hosts on its Rank lines (``hosts``), and the runs
    together name at least three hosts (one pair is not a matrix)."""
    if runs.num_rows == 0:
        return False
    pairs = _host_pairs(runs)
    if any(len(p) != 2 for p in pairs):
        return False
    return len({h for p in pairs for h in p}) >= _MIN_HOSTS


def _natural(name: str) -> tuple[Any, ...]:
    """Sort key putting node2 before node10."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def pair_matrix(
    measurements: pa.Table,
    runs: pa.Table,
    *,
    shape: Mapping[str, object] | None = None,
) -> PairMatrix:
    """The :class:`PairMatrix` of the two-host runs of ``runs`` (runs with another
    number of hosts are ignored) and their ``measurements`` rows.

    ``shape`` picks the series drawn (values of ``_PAIR_SHAPE`` keys, compared as
    text; keys left out match anything); default: the shape measured by the most
    pairs (ties: the first in sorted order). Rows of size 0, grouped or CPU-time
    rows and rows without a busbw are not used. Raises ValueError when no two-host
    run has a usable row of the shape.
    """
    pairs = {
        (str(s), int(r)): p
        for s, r, p in zip(
            cast("list[str]", runs["source"].to_pylist()),  # non-null in the schema
            cast("list[int]", runs["run"].to_pylist()),
            _host_pairs(runs),
            strict=True,
        )
        if len(p) == 2
    }
    from ncclparse.health.check import run_batches

    # Batch by batch of whole runs: a frame of every row of a night of 8,064 logs
    # took 0.3 GB.
    rows = pd.concat(
        [_pair_rows(batch, pairs) for batch, _ in run_batches(measurements, runs)],
        ignore_index=True,
    )
    for key, wanted in (shape or {}).items():
        rows = rows[rows[key] == str(wanted)]
    if rows.empty:
        raise ValueError("no two-host run with a usable row to draw")
    if shape is None or set(shape) != set(_PAIR_SHAPE):
        counts = rows.groupby(list(_PAIR_SHAPE))["pair"].nunique()
        # groupby sorts the shapes and max keeps the first of equal counts.
        best = cast("tuple[str, ...]", max(counts.items(), key=lambda kv: kv[1])[0])
        chosen = dict(zip(_PAIR_SHAPE, best, strict=True))
        for key, value in chosen.items():
            rows = rows[rows[key] == value]
    else:
        chosen = {k: str(v) for k, v in shape.items()}
    sizes = tuple(sorted(int(s) for s in rows["size_bytes"].unique())[-PLATEAU_SIZES:])
    top = rows[rows["size_bytes"].isin(sizes)]
    per_run = top.groupby(["source", "run"], sort=True)["busbw"].median()
    hosts = tuple(sorted({h for p in rows["pair"] for h in p}, key=_natural))
    where = {h: i for i, h in enumerate(hosts)}
    cells: dict[tuple[int, int], list[float]] = {}
    for group, value in per_run.items():
        source, run = cast("tuple[str, int]", group)  # the (source, run) group key
        a, b = pairs[(str(source), int(run))]
        i, j = sorted((where[a], where[b]))
        cells.setdefault((i, j), []).append(float(value))
    n = len(hosts)
    values = np.full((n, n), np.nan)
    counts_of = np.zeros((n, n), dtype=np.int64)
    for (i, j), found in cells.items():
        values[i, j] = values[j, i] = float(np.median(found))
        counts_of[i, j] = counts_of[j, i] = len(found)
    label = series_label({k: (v or None) for k, v in chosen.items()})
    return PairMatrix(hosts, values, counts_of, sizes, chosen, label)


def _pair_rows(
    measurements: pa.Table, pairs: Mapping[tuple[str, int], tuple[str, ...]]
) -> pd.DataFrame:
    """The usable rows of ``measurements`` (whole runs) of the two-host runs in
    ``pairs``, with their pair; of each run's series only its :data:`PLATEAU_SIZES`
    largest sizes: the largest sizes of a shape are among those of every run that
    measured them, and every run and pair of a shape keeps a row."""
    bw = bandwidth_columns(measurements)
    rows = pd.DataFrame({k: key_text(measurements[k]) for k in _PAIR_SHAPE})
    rows["source"] = measurements["source"].to_pandas().astype(object)
    rows["run"] = measurements["run"].to_numpy(zero_copy_only=False)
    rows["size_bytes"] = measurements["size_bytes"].to_numpy(zero_copy_only=False)
    rows["busbw"] = bw["busbw_calc_gbps"].to_numpy(zero_copy_only=False)
    grouped = measurements["grouped"].to_numpy(zero_copy_only=False)
    cputime = measurements["cputime"].to_numpy(zero_copy_only=False)
    keep = (
        (rows["size_bytes"] > 0)
        & np.isfinite(rows["busbw"].to_numpy(dtype=float))
        & ~pd.array(grouped, dtype="boolean").fillna(False).to_numpy(dtype=bool)
        & ~pd.array(cputime, dtype="boolean").fillna(False).to_numpy(dtype=bool)
    )
    rows = rows[keep]
    rows["pair"] = [
        pairs.get((s, int(r))) for s, r in zip(rows["source"], rows["run"], strict=True)
    ]
    usable: pd.DataFrame = rows[rows["pair"].notna()]
    if usable.empty:
        return usable
    largest = usable.groupby([*_PAIR_SHAPE, "source", "run"])["size_bytes"].rank(
        method="dense", ascending=False
    )
    return usable[largest <= PLATEAU_SIZES]


def slow_hosts(ranked: Sequence[HostScore]) -> tuple[str, ...]:
    """The hosts a blame ranking names slow, most suspicious first."""
    return tuple(h.host for h in ranked if h.slow)


@styled
def heatmap_svg(
    matrix: PairMatrix,
    *,
    blamed: Collection[str] = (),
    plot_id: str = "pairs",
    title: str | None = None,
) -> str:
    """Draw ``matrix`` as an inline ``<svg>``: one cell per pair, coloured by busbw
    (cividis, darker is slower; blank: not measured), with the row and column of
    each ``blamed`` host in ``matrix.hosts`` outlined. All text is 10 pt: values
    are printed in cells wide enough for them. Phone-wide (4.8 in) up to 18 hosts;
    beyond, as wide as their labels need, with a ``min-width`` style of one CSS px
    per point so that its text never renders under 10 px (a narrower screen scrolls
    it). Same input, same bytes (:func:`figure.finish`). ``title`` is the SVG's
    accessible label (default: one naming the series)."""
    from matplotlib.figure import Figure

    n = len(matrix.hosts)
    side = max(_SIDE, _LABEL_PITCH * n)
    width = side + _AROUND[0]
    fig = Figure(figsize=(width, side + _AROUND[1]), layout="constrained")
    ax = fig.add_subplot()
    ax.grid(False)
    cmap = colormaps[_COLORMAP].with_extremes(bad="#ffffff")
    low, high = _colour_range(matrix.values)
    image = ax.imshow(
        np.ma.masked_invalid(matrix.values),
        cmap=cmap,
        vmin=low,
        vmax=high,
        interpolation="nearest",
        aspect="equal",
    )
    _grid(ax, [plain(h) for h in matrix.hosts])
    if side / max(n, 1) >= _VALUE_CELL:
        _annotate(ax, matrix.values, (low + high) / 2)
    _outline(ax, matrix.hosts, blamed)
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(n - 0.5, -0.5)
    bar = fig.colorbar(image, ax=ax, shrink=0.8, pad=0.02)
    # The caption says which sizes make a cell: this label runs along a short bar.
    bar.set_label("plateau busbw (GB/s)")
    bar.ax.tick_params(labelsize=PAGE_TEXT)
    name = title or f"Host x host bus bandwidth: {matrix.label}"
    svg = finish(fig, ax, plot_id, name, legend_columns=1, legend_size=PAGE_TEXT)
    if side == _SIDE:  # phone-wide
        return svg
    # Whole px, rounded up: the browser's layout rounds, a 9.99 px label is too small.
    least = math.ceil(width * 72)
    return svg.replace("<svg ", f'<svg style="min-width: {least}px" ', 1)


def _colour_range(values: npt.NDArray[np.float64]) -> tuple[float, float]:
    """The busbw range the colours span: the measured one (0-1 when nothing was
    measured, one unit wide when every pair measured the same)."""
    finite = values[np.isfinite(values)]
    low = float(finite.min()) if finite.size else 0.0
    high = float(finite.max()) if finite.size else 1.0
    if high <= low:
        high = low + 1.0
    return low, high


def _grid(ax: Axes, labels: list[str]) -> None:
    """Host labels on both axes, no spines, thin white gaps between the cells (a
    missing pair reads as blank, not as a colour)."""
    n = len(labels)
    ax.set_xticks(range(n), labels, rotation=90, fontsize=PAGE_TEXT)
    ax.set_yticks(range(n), labels, fontsize=PAGE_TEXT)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_xticks(np.arange(-0.5, n, 1.0), minor=True)
    ax.set_yticks(np.arange(-0.5, n, 1.0), minor=True)
    ax.grid(which="minor", color="#ffffff", linewidth=0.8 if n <= 16 else 0.4)
    ax.tick_params(which="minor", length=0)


def _annotate(ax: Axes, values: npt.NDArray[np.float64], middle: float) -> None:
    """Each measured cell's busbw in the cell, light text below ``middle``."""
    n = len(values)
    for i in range(n):
        for j in range(n):
            value = values[i, j]
            if math.isfinite(value):
                ax.text(
                    j,
                    i,
                    f"{value:.3g}",
                    ha="center",
                    va="center",
                    fontsize=PAGE_TEXT,
                    # cividis is dark at low values: light text there.
                    color="#ffffff" if value < middle else "#1a1a1a",
                )


def _outline(ax: Axes, hosts: Sequence[str], blamed: Collection[str]) -> None:
    """The row and column of each blamed host outlined (one legend entry)."""
    n = len(hosts)
    outlined = [h for h in hosts if h in set(blamed)]
    for k, host in enumerate(outlined):
        i = hosts.index(host)
        label = f"slow host (blame): {', '.join(outlined)}" if k == 0 else None
        for xy, width, height in (((-0.5, i - 0.5), n, 1), ((i - 0.5, -0.5), 1, n)):
            ax.add_patch(
                Rectangle(
                    xy,
                    width,
                    height,
                    label=label if width == n else None,
                    fill=False,
                    edgecolor=_OUTLINE,
                    linewidth=2.2,
                    zorder=3,
                    clip_on=False,  # the outline's outer half lies beyond the axes
                )
            )


def pairwise_heatmap(
    result: ParseResult,
    *,
    ranked: Sequence[HostScore] | None = None,
    plot_id: str = "pairs",
) -> tuple[PairMatrix, str] | None:
    """The matrix and heatmap of ``result`` when it is a pairwise sweep
    (:func:`is_pairwise`), else None. ``ranked`` is the blame ranking whose slow
    hosts are outlined; when None it is computed here (run scores, default
    :class:`~ncclparse.health.rules.BlamePolicy`)."""
    if not is_pairwise(result.runs):
        return None
    if ranked is None:
        from ncclparse.health.blame import blame, run_scores
        from ncclparse.health.rules import BlamePolicy

        ranked = blame(run_scores(result.measurements, result.runs), BlamePolicy())
    try:
        matrix = pair_matrix(result.measurements, result.runs)
    except ValueError:
        return None
    return matrix, heatmap_svg(matrix, blamed=slow_hosts(ranked), plot_id=plot_id)
