"""The trend page: bus bandwidth per series and size over the nights of a history.

:func:`trend_of` reads a history (:mod:`ncclparse.store.history`, a directory or
URI) one date at a time, oldest first, and replays for every night what ``check``
would have judged had it run that night against the nights before it:

* the night's value of a series and size is the median, over the night's runs,
  of each run's busbw (the median of its rows: recomputed ``busbw_calc_gbps``,
  :func:`ncclparse.efficiency.bandwidth_columns`), using only the rows a baseline
  may use (:func:`~ncclparse.store.history.usable`);
* its baseline is :func:`~ncclparse.health.baselines.baselines`' for that night:
  the ``policy.window`` most recent runs of earlier nights (ties of date and ingest
  time broken by ingest key and run) no older than ``policy.max_age_days``, their
  busbw median and raw MAD, when at least ``policy.min_runs`` runs are there;
* its band is median +/- max(``mad_k`` x 1.4826 x MAD, ``min_drop`` x median), and
  the night is *flagged* when its value is below the band, as ``check`` fails a
  bandwidth-bound size's busbw;
* the same is done per run identity (the run's host set,
  :func:`~ncclparse.inputs.sides.run_identity`: a nightly's host pair), each
  compared with its own past (with the series' while it has fewer than
  ``policy.min_runs`` runs of its own): one slow pair of three does not move the
  median, so the night is flagged too when any identity's value (the median of its
  runs that night) is below its own band. Each point names its *worst run*: the identity
  furthest below its own band (or baseline median, when none is below), with its
  value, baseline median and lower limit.

Only the :data:`DEFAULT_SIZES` (or ``sizes``) largest message sizes of each series
are followed (the plateau of a sweep; a sweep that never leaves the latency-bound
sizes shows its largest sizes all the same). Memory holds, per followed series and
size, the window of runs and one point per night, never the history: a year of
1,000 logs a night is read in bounded memory (see docs/trend.md for figures).

:func:`trend_svg` draws one series as small multiples (one panel per size) and
:func:`render_trend` the page (``templates/trend.html``).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure

from ncclparse import schema
from ncclparse._arrow import distinct_rows, key_codes
from ncclparse._version import __version__
from ncclparse.efficiency import bandwidth_columns
from ncclparse.formatting import format_bytes, series_label
from ncclparse.health.baselines import tag_values, window_start
from ncclparse.health.rules import HistoryPolicy
from ncclparse.inputs.sides import run_identity
from ncclparse.report.figure import COLORS, finish, plain, styled
from ncclparse.store.history import HISTORY_COLUMNS, scan_history, usable
from ncclparse.store.locations import Location

__all__ = [
    "DEFAULT_SIZES",
    "POINT_COLUMNS",
    "Trend",
    "TrendFigure",
    "TrendPage",
    "render_trend",
    "trend_of",
    "trend_page",
    "trend_svg",
]

DEFAULT_SIZES = 3
# One row per series, size and night of Trend.points.
POINT_COLUMNS = (
    *schema.SHAPE_KEYS,
    "size_bytes",
    "date",
    "runs",
    "busbw",
    "base_runs",
    "base_median",
    "base_mad",
    "lower",
    "upper",
    "flagged",
    "worst_run",
    "worst_busbw",
    "worst_median",
    "worst_lower",
)
_BAND = "#cfe3f1"  # a light tint of COLORS[0]: the band sits behind the line
_FLAG = COLORS[1]  # Okabe-Ito vermillion


@dataclass(frozen=True, slots=True)
class Trend:
    """What :func:`trend_of` found.

    ``points``: one row per series, size and night that has a value
    (:data:`POINT_COLUMNS`; shape keys as text, "" for none; ``date`` ISO;
    ``base_*``, ``lower`` and ``upper`` NaN when the night has no baseline, i.e.
    fewer than ``policy.min_runs`` runs before it; ``flagged``: the value is below
    ``lower``, or a run identity's below its own; ``worst_*``: the worst identity,
    "" and NaN when none has a baseline), sorted by series, size and date.
    ``dates``: every date the history holds (ISO, oldest first); ``runs``: its runs
    (each log's earliest ingest);
    ``matched``: how many of them carry every ``tags`` item; ``tag_values``: for each
    key of ``tags``, the history's runs by their value of it (None: no such tag).
    """

    points: pd.DataFrame
    history: str
    tags: dict[str, str]
    policy: HistoryPolicy
    dates: tuple[str, ...]
    runs: int
    matched: int
    tag_values: Mapping[str, Mapping[str | None, int]] = field(default_factory=dict)

    def series(self) -> list[tuple[dict[str, str], pd.DataFrame]]:
        """The points of each series (its shape keys, then its rows), in order."""
        if self.points.empty:
            return []
        keys = list(schema.SHAPE_KEYS)
        found = []
        for key, rows in self.points.groupby(keys, sort=True):
            shape = {k: str(v) for k, v in zip(keys, key, strict=True)}
            found.append((shape, rows))
        return found

    def describe(self) -> str:
        """What the history holds, in one sentence (for messages and the page)."""
        if not self.dates:
            return f"{self.history} holds no run"
        span = (
            f"on {len(self.dates)} date(s) from {self.dates[0]} to {self.dates[-1]}"
            if len(self.dates) > 1
            else f"on {self.dates[0]}"
        )
        text = f"{self.history} holds {self.runs:,} run(s) {span}"
        if self.tags:
            wanted = ", ".join(f"{k}={v}" for k, v in self.tags.items())
            text += f", {self.matched:,} of them with {wanted}"
            held = "; ".join(
                f"{key}: "
                + ", ".join(
                    f"{'(none)' if value is None else value} in {n:,} run(s)"
                    for value, n in sorted(
                        counts.items(), key=lambda kv: (kv[0] is None, kv[0] or "")
                    )
                )
                for key, counts in self.tag_values.items()
            )
            if self.matched == 0 and held:
                text += f" (it holds {held})"
        return text


def trend_of(
    history: str | Path | Location,
    *,
    tags: Mapping[str, str] | None = None,
    policy: HistoryPolicy | None = None,
    sizes: int = DEFAULT_SIZES,
) -> Trend:
    """The :class:`Trend` of the history at ``history`` (a directory, URI or
    Location) for the runs with every ``tags`` item, following the ``sizes``
    largest sizes of each series (see the module docstring for what a night's
    value, baseline and flag are).

    Reads a few columns of every file once (:func:`scan_history`), then the rows of
    one date at a time. Raises HistoryError when the history does not exist or a
    file cannot be read.
    """
    policy = policy or HistoryPolicy()
    tags = dict(tags or {})
    name = history.name if isinstance(history, Location) else str(history)
    view = scan_history(history, with_tags=True)
    wanted = sorted(
        ingest
        for ingest, found in view.tags.items()
        if all(found.get(k) == v for k, v in tags.items())
    )
    runs = view.runs.to_pandas()
    matched = int(runs["ingest_id"].isin(wanted).sum()) if tags else len(runs)
    values = tag_values(view, runs, tags) if tags else {}
    dates = tuple(sorted(view.dates))
    replay = _Replay(policy, max(1, sizes))
    if matched:
        for date in dates:
            rows = view.rows_of(date, wanted if tags else None, extra=("hosts",))
            replay.night(date, rows)
    return Trend(
        replay.points(),
        name,
        tags,
        policy,
        dates,
        len(runs),
        matched,
        values,
    )


# What a night's rows need: the shape, the size, the run, its hosts and the busbw
# inputs.
_READ = (*(c for c in HISTORY_COLUMNS if c not in ("ingest_id", "date")), "hosts")


@dataclass
class _Window:
    """The baseline window of one series and size: its most recent runs, oldest
    first, as (day, ingested_at, rank of the key among the night's, run) order
    keys and busbw values."""

    order: list[tuple[int, int, int, int]] = field(default_factory=list)
    busbw: list[float] = field(default_factory=list)


class _Replay:
    """Nights fed oldest first; per followed series and size, its window and its
    points (one per night)."""

    def __init__(self, policy: HistoryPolicy, sizes: int) -> None:
        self.policy = policy
        self.sizes = sizes
        self.followed: dict[tuple[str, ...], list[int]] = {}  # shape -> sizes, desc
        self.windows: dict[tuple[tuple[str, ...], int], _Window] = {}
        # Per series, size and run identity: that identity's own window.
        self.run_windows: dict[tuple[tuple[str, ...], int, str], _Window] = {}
        self.rows: list[tuple[Any, ...]] = []

    def night(self, date: str, table: pa.Table) -> None:
        """Judge the night ``date`` (its rows: HISTORY_COLUMNS) against the windows,
        then add its runs to them. NumPy on dictionary codes throughout: a night of
        1,000 logs is 66,500 rows and a year is 365 of them."""
        if table.num_rows == 0:
            return
        table = table.select(list(_READ))
        table = table.filter(usable(table))
        if table.num_rows == 0:
            return
        first, shape_id = distinct_rows(
            [key_codes(table[k]) for k in schema.SHAPE_KEYS]
        )
        texts = [_texts(table[k].take(first)) for k in schema.SHAPE_KEYS]
        shape_of = [tuple(t[g] for t in texts) for g in range(len(first))]
        size = np.asarray(table["size_bytes"].to_numpy(), dtype=np.int64)
        distinct, size_code = np.unique(size, return_inverse=True)
        pair = shape_id * len(distinct) + size_code.ravel()
        present = np.unique(pair)
        by_shape: dict[int, list[int]] = {}
        for code in present.tolist():
            by_shape.setdefault(code // len(distinct), []).append(
                int(distinct[code % len(distinct)])
            )
        index = {int(v): i for i, v in enumerate(distinct.tolist())}
        wanted = []
        for g, found in by_shape.items():
            shape = shape_of[g]
            # Sizes only grow in number: a size out of the largest few now never
            # comes back in, and one that enters later had no earlier nights.
            top = sorted({*self.followed.get(shape, []), *found}, reverse=True)
            self.followed[shape] = top[: self.sizes]
            wanted += [
                g * len(distinct) + index[s] for s in found if s in top[: self.sizes]
            ]
        keep = np.isin(pair, np.asarray(wanted, dtype=np.int64))
        if not keep.any():
            return
        rows = np.flatnonzero(keep)
        table = table.take(rows)
        pair = pair[rows]
        row = np.arange(len(pair), dtype=np.int64)  # into table, through the sorts
        key_code, key_names = _encoded(table["ingest_key"])
        # Ties of date and ingest time go to the ingest key's text, not its code.
        name_rank = np.argsort(np.argsort(np.asarray(key_names, dtype=object)))
        run = np.asarray(table["run"].to_numpy(), dtype=np.int64)
        at = np.asarray(table["ingested_at"].cast(pa.int64()).to_numpy(), np.int64)
        busbw = np.asarray(
            bandwidth_columns(table)["busbw_calc_gbps"].to_numpy(zero_copy_only=False),
            dtype=float,
        )
        finite = np.isfinite(busbw)
        pair, key_code, run, at, busbw, row = (
            a[finite] for a in (pair, key_code, run, at, busbw, row)
        )
        if len(pair) == 0:
            return
        # Each run's value: the median of its rows (one row, almost always).
        order = np.lexsort((run, key_code, pair))
        pair, key_code, run, at, busbw, row = (
            a[order] for a in (pair, key_code, run, at, busbw, row)
        )
        new_run = np.ones(len(pair), dtype=bool)
        new_run[1:] = (
            (pair[1:] != pair[:-1])
            | (key_code[1:] != key_code[:-1])
            | (run[1:] != run[:-1])
        )
        starts = np.flatnonzero(new_run)
        ends = np.append(starts[1:], len(pair))
        value = busbw[starts].copy()
        for i in np.flatnonzero(ends - starts > 1).tolist():
            value[i] = float(np.median(busbw[starts[i] : ends[i]]))
        at_max = np.maximum.reduceat(at, starts)
        run_pair = pair[starts]
        run_rank = name_rank[key_code[starts]]
        run_number = run[starts]
        # A run's hosts are the same on each of its rows: its first row's, read
        # once per run (not per size it has).
        _, first, which = np.unique(
            np.stack([key_code[starts], run_number]),
            axis=1,
            return_index=True,
            return_inverse=True,
        )
        hosts = table["hosts"].take(pa.array(row[starts][first])).to_pylist()
        names = [run_identity(h) for h in hosts]
        identity = [names[i] for i in which.ravel().tolist()]
        day = _day(date)
        oldest = window_start(self.policy, dt.date.fromisoformat(date))
        oldest_day = _day(oldest) if oldest is not None else None
        bounds = np.flatnonzero(np.diff(run_pair)) + 1
        for segment in np.split(np.arange(len(run_pair)), bounds):
            code = int(run_pair[segment[0]])
            shape = shape_of[code // len(distinct)]
            size_bytes = int(distinct[code % len(distinct)])
            window = self.windows.setdefault((shape, size_bytes), _Window())
            base = self._baseline(window, oldest_day)
            night_value = float(np.median(value[segment]))
            worst = self._worst_run(
                (shape, size_bytes), segment, value, identity, (oldest_day, base)
            )
            self.rows.append(
                (
                    *shape,
                    size_bytes,
                    date,
                    len(segment),
                    night_value,
                    *base,
                    night_value < base[-2] or worst[1] < worst[3],
                    *worst,
                )
            )
            # Tonight's runs join the window in check's order: by ingest time, then
            # key and run; only the newest policy.window can matter.
            newest = segment[
                np.lexsort((run_number[segment], run_rank[segment], at_max[segment]))
            ][-self.policy.window :]
            for i in newest.tolist():
                order_key = (day, int(at_max[i]), int(run_rank[i]), int(run_number[i]))
                own = self.run_windows.setdefault(
                    (shape, size_bytes, identity[i]), _Window()
                )
                for kept in (window, own):
                    kept.order.append(order_key)
                    kept.busbw.append(float(value[i]))
                    excess = len(kept.order) - self.policy.window
                    if excess > 0:
                        del kept.order[:excess]
                        del kept.busbw[:excess]

    def _worst_run(
        self,
        at: tuple[tuple[str, ...], int],
        segment: npt.NDArray[np.int64],
        value: npt.NDArray[np.float64],
        identity: list[str],
        baseline: tuple[int | None, tuple[int, float, float, float, float]],
    ) -> tuple[str, float, float, float]:
        """The night's worst run identity of one series and size (``at``): each
        judged against its own window, or the series' (``baseline``: the window's
        oldest day and the series' baseline) while its own holds fewer than
        ``policy.min_runs`` runs. (identity, its value, the median and lower limit
        it was judged by); ("", NaN, NaN, NaN) when no baseline judges any."""
        oldest_day, series = baseline
        by_identity: dict[str, list[float]] = {}
        for i in segment.tolist():
            by_identity.setdefault(identity[i], []).append(float(value[i]))
        judged = []
        for name, values in by_identity.items():
            own = self.run_windows.get((*at, name), _Window())
            _, median, _, lower, _ = self._baseline(own, oldest_day)
            if math.isnan(median):  # too few runs of its own: the series' past
                _, median, _, lower, _ = series
            if not math.isnan(median):
                judged.append((name, float(np.median(values)), median, lower))
        if not judged:
            return ("", math.nan, math.nan, math.nan)
        below = [j for j in judged if j[1] < j[3]]
        if below:  # furthest below its own limit
            return min(below, key=lambda j: (j[1] / j[3], j[0]))
        return min(judged, key=lambda j: (j[1] / j[2], j[0]))

    def _baseline(
        self, window: _Window, oldest_day: int | None
    ) -> tuple[int, float, float, float, float]:
        """runs, median, MAD, lower, upper of ``window`` (NaN: no baseline)."""
        values = np.asarray(
            [
                v
                for o, v in zip(window.order, window.busbw, strict=True)
                if oldest_day is None or o[0] >= oldest_day
            ],
            dtype=float,
        )
        nan = math.nan
        if len(values) < self.policy.min_runs:
            return (len(values), nan, nan, nan, nan)
        median = float(np.median(values))
        mad = float(np.median(np.abs(values - median)))
        lower = self.policy.busbw_floor(median, mad)
        return (len(values), median, mad, lower, 2 * median - lower)

    def points(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.rows, columns=list(POINT_COLUMNS))
        if frame.empty:
            return frame
        order = [*schema.SHAPE_KEYS, "size_bytes", "date"]
        # Only the sizes still among the largest at the end: a size followed for a
        # while and then outgrown is dropped.
        top = frame.apply(
            lambda r: (
                r["size_bytes"] in self.followed[tuple(r[k] for k in schema.SHAPE_KEYS)]
            ),
            axis=1,
        )
        frame = frame[top.astype(bool)]
        frame["flagged"] = frame["flagged"].astype(bool)
        return frame.sort_values(order, kind="stable").reset_index(drop=True)


def _encoded(column: Any) -> tuple[npt.NDArray[np.int64], list[str]]:
    """A text column as dictionary codes and the text of each code."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    codes = np.asarray(column.indices.to_numpy(zero_copy_only=False), np.int64)
    return codes, [str(v) for v in column.dictionary.to_pylist()]


def _texts(column: Any) -> list[str]:
    """A key column as text per row, "" for null (numbers without a decimal)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type) or not pa.types.is_string(column.type):
        column = pc.cast(column, pa.string())
    return [v if v is not None else "" for v in column.to_pylist()]


def _day(date: str) -> int:
    return int(np.datetime64(date, "D").astype(np.int64))


# Up to this many nights a marker shows each; beyond, the line alone (a year of
# markers is most of a page's bytes and hides the line).
_MARKERS_UP_TO = 60


@styled
def trend_svg(rows: pd.DataFrame, *, plot_id: str, title: str) -> str:
    """One series' points (rows of :attr:`Trend.points` of one series) as small
    multiples: a panel per size, largest first, busbw over the nights with the
    baseline band (median +/- allowed drop) and its median, flagged nights marked
    (at the worst run's value when that run is below its own limit). Same rows,
    same bytes."""
    sizes = sorted({int(s) for s in rows["size_bytes"]}, reverse=True)
    # Narrower than the report's 7.2 in: scaled to a 390 px phone, its 8 pt text
    # stays about 8 px high (a 7.2 in figure's would be 5 px).
    fig = Figure(figsize=(5.2, 0.9 + 1.5 * len(sizes)), layout="constrained")
    axes = fig.subplots(len(sizes), 1, sharex=True, squeeze=False)[:, 0]
    many = rows["date"].nunique() > _MARKERS_UP_TO
    locator = AutoDateLocator(minticks=3, maxticks=7)  # type: ignore[no-untyped-call]
    for k, (ax, size) in enumerate(zip(axes, sizes, strict=True)):
        part = rows[rows["size_bytes"] == size].sort_values("date")
        days = part["date"].to_numpy(dtype="datetime64[D]")
        first = k == 0

        def named(text: str, first: bool = first) -> str:
            return text if first else "_nolegend_"

        ax.fill_between(
            days,
            part["lower"].to_numpy(dtype=float),
            part["upper"].to_numpy(dtype=float),
            step="mid",
            color=_BAND,
            linewidth=0,
            label=named("baseline band"),
        )
        ax.plot(
            days,
            part["base_median"].to_numpy(dtype=float),
            drawstyle="steps-mid",
            color=COLORS[0],
            linestyle=":",
            linewidth=1.0,
            label=named("baseline median"),
        )
        ax.plot(
            days,
            part["busbw"].to_numpy(dtype=float),
            color=COLORS[6],
            linewidth=1.1,
            marker="none" if many else "o",
            markersize=2.5,
            label=named("night (median of its runs)"),
        )
        flagged = part[part["flagged"]]
        # A night flagged by one run: the mark at that run's value, below the line.
        by_run = flagged["worst_busbw"] < flagged["worst_lower"]
        ax.plot(
            flagged["date"].to_numpy(dtype="datetime64[D]"),
            flagged["worst_busbw"].where(by_run, flagged["busbw"]).to_numpy(float),
            linestyle="none",
            marker="X",
            markersize=7,
            color=_FLAG,
            markeredgecolor="#ffffff",
            markeredgewidth=0.5,
            zorder=4,
            label=named("flagged: below the band, or a run below its own"),
        )
        ax.set_title(format_bytes(size), loc="left", fontsize=9, pad=3)
        ax.set_ylabel("busbw (GB/s)", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.xaxis.set_major_locator(locator)
        formatter = ConciseDateFormatter(locator)  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_formatter(formatter)
    return finish(fig, axes[0], plot_id, title, legend_columns=2)


@dataclass(frozen=True, slots=True)
class TrendFigure:
    """One series on the page: its label, chart and flagged nights (rows of
    :attr:`Trend.points`, newest first)."""

    label: str
    anchor: str
    svg: str
    sizes: tuple[int, ...]
    nights: int
    flagged: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class TrendPage:
    """What ``templates/trend.html`` renders. ``title``, ``ncclparse_version`` and
    ``checks`` are what ``base.html`` reads of every page."""

    title: str
    trend: Trend
    description: str
    figures: tuple[TrendFigure, ...]
    command_line: str
    ncclparse_version: str = __version__
    checks: tuple[Any, ...] = ()


def trend_page(
    trend: Trend, *, title: str | None = None, command_line: str = ""
) -> TrendPage:
    """The page context of ``trend``: one :class:`TrendFigure` per series."""
    figures = []
    for number, (key, rows) in enumerate(trend.series(), start=1):
        label = plain(series_label({k: (v or None) for k, v in key.items()}))
        tool = key.get("tool") or ""
        if tool:
            label = f"{tool} {label}"
        sizes = tuple(sorted({int(s) for s in rows["size_bytes"]}, reverse=True))
        svg = trend_svg(
            rows,
            plot_id=f"trend-{number}",
            title=f"Bus bandwidth over nights: {label}",
        )
        flagged = rows[rows["flagged"]].sort_values(
            ["date", "size_bytes"], ascending=[False, False]
        )
        figures.append(
            TrendFigure(
                label=label,
                anchor=f"series-{number}",
                svg=svg,
                sizes=sizes,
                nights=int(rows["date"].nunique()),
                flagged=tuple(
                    {
                        "date": r["date"],
                        "size_bytes": int(r["size_bytes"]),
                        "busbw": float(r["busbw"]),
                        "median": float(r["base_median"]),
                        "lower": float(r["lower"]),
                        "change": float(r["busbw"]) / float(r["base_median"]) - 1,
                        **_run_flag(r),
                    }
                    for r in flagged.to_dict("records")
                ),
            )
        )
    name = title or f"ncclparse trend: {trend.history}"
    return TrendPage(name, trend, trend.describe(), tuple(figures), command_line)


def _run_flag(point: Mapping[Any, Any]) -> dict[str, Any]:
    """What a flagged point says of its worst run: ``run`` (its identity, "" when
    no run is below its own limit), its busbw, its own median and limit, and its
    change against that median."""
    below = bool(point["worst_busbw"] < point["worst_lower"])
    if not below:
        return {"run": ""}
    return {
        "run": str(point["worst_run"]) or "(hosts unknown)",
        "run_busbw": float(point["worst_busbw"]),
        "run_median": float(point["worst_median"]),
        "run_lower": float(point["worst_lower"]),
        "run_change": float(point["worst_busbw"]) / float(point["worst_median"]) - 1,
    }


def render_trend(page: TrendPage) -> str:
    """The self-contained HTML page of ``page`` (no script, no network)."""
    from ncclparse.report.render import environment

    return environment().get_template("trend.html").render(report=page, page=page)
