"""History baselines: per series and size, the recent runs' median and spread.

A run of tonight is judged against the runs of the same shape (``schema.SHAPE_KEYS``)
and size in the history (:mod:`ncclparse.health.history`), as a median and a median
absolute deviation (MAD) over a window of recent runs (:class:`HistoryPolicy`).
:func:`select_baseline` also accounts for the runs it did not use (other tags,
tonight's own, unusable, older than the window), so that a check can say why it has
no baseline instead of passing without one.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ncclparse import schema
from ncclparse.columns import fill_null, frame, key_codes
from ncclparse.efficiency import bandwidth_columns
from ncclparse.health.history import HistoryView, usable, view_of
from ncclparse.health.rules import HistoryPolicy

__all__ = [
    "BASELINE_KEYS",
    "RunDates",
    "Selection",
    "baselines",
    "select_baseline",
    "window_start",
]

# What makes two rows the same series for a baseline (schema.md names); tags are
# matched separately. Hosts are deliberately not part of it: a pairwise test meets a
# new pair every night, and its baseline is the fabric's norm for that shape.
BASELINE_KEYS = (*schema.SHAPE_KEYS, "size_bytes")


def baselines(
    history: pa.Table | Iterable[pa.Table],
    policy: HistoryPolicy,
    *,
    exclude_keys: frozenset[str] = frozenset(),
    today: dt.date | None = None,
) -> pd.DataFrame:
    """Return one baseline per series and size (index: BASELINE_KEYS) of the
    ``history`` rows: a table with (at least) ``ROW_COLUMNS``, or such tables one
    date after another, newest first (:meth:`HistoryView.rows_of`), which are
    reduced as they come so that memory holds the window, not the history.

    Only complete runs without ``#wrong`` count, and not the sources in
    ``exclude_keys`` (the candidate itself, if already ingested). Each run counts once
    (the median of its rows); the ``policy.window`` most recent runs (by ``date``,
    then ingest time) within ``policy.max_age_days`` of ``today`` are kept. Columns:
    ``runs``, ``busbw_median``, ``busbw_mad``, ``time_median``, ``time_mad``,
    ``first_date``, ``last_date``. MADs are raw (not scaled by 1.4826).
    """
    oldest = window_start(policy, today)
    tables = [history] if isinstance(history, pa.Table) else history
    kept: pd.DataFrame | None = None
    pending: list[pa.Table] = []

    def reduce(kept: pd.DataFrame | None) -> pd.DataFrame:
        merged = pa.concat_tables(pending).unify_dictionaries()
        pending.clear()
        points = frame(_run_points(merged))
        both = points if kept is None else pd.concat([kept, points], ignore_index=True)
        return _newest(both, policy.window)

    for table in tables:
        table = _candidates(table, exclude_keys, oldest)
        if table.num_rows:
            pending.append(table)
        if sum(t.num_rows for t in pending) >= _CHUNK_ROWS:
            kept = reduce(kept)
    if pending:
        kept = reduce(kept)
    if kept is None or kept.empty:
        columns = [*BASELINE_KEYS, "busbw", "time_us"]
        return pd.DataFrame(columns=columns).set_index(list(BASELINE_KEYS))
    runs = kept
    grouped = runs.groupby(list(BASELINE_KEYS))
    out = grouped.agg(
        runs=("time_us", "size"),
        busbw_median=("busbw", "median"),
        time_median=("time_us", "median"),
        first_date=("date", "min"),
        last_date=("date", "max"),
    )
    out["busbw_mad"] = grouped["busbw"].agg(_mad)
    out["time_mad"] = grouped["time_us"].agg(_mad)
    for name in ("first_date", "last_date"):
        days = out[name].to_numpy(dtype="int64")
        out[name] = np.datetime_as_string(days.astype("datetime64[D]")).astype(object)
    return out


# Rows reduced to the window's runs at a time: a few nights of 1,000 logs.
_CHUNK_ROWS = 1 << 18


def _candidates(
    history: pa.Table, exclude_keys: frozenset[str], oldest: str | None
) -> pa.Table:
    """The rows a baseline may use: usable (:func:`usable`), not of
    ``exclude_keys``, dated ``oldest`` or later."""
    keep = usable(history)
    if exclude_keys:
        mine = pc.is_in(
            pc.cast(history["ingest_key"], pa.string()),
            value_set=pa.array(sorted(exclude_keys), pa.string()),
        )
        keep = pc.and_(keep, pc.invert(mine))
    if oldest is not None:
        dates = pc.cast(history["date"], pa.string())
        keep = pc.and_(keep, pc.greater_equal(dates, pa.scalar(oldest)))
    return history.filter(keep)


def _newest(points: pd.DataFrame, window: int) -> pd.DataFrame:
    """The ``window`` most recent runs (by date, then ingest time) of each series
    and size of ``points``."""
    points = points.sort_values(["date", "ingested_at"], ascending=False, kind="stable")
    newest = points.groupby(list(BASELINE_KEYS), sort=False).head(window)
    return newest.reset_index(drop=True)


def _run_points(history: pa.Table) -> pa.Table:
    """One row per run, series and size of ``history`` rows: the median busbw and
    time of its rows (almost always one). Grouped in Arrow: a month of nightly
    history is millions of rows."""
    measured = bandwidth_columns(history.select(list(_BANDWIDTH_INPUTS)))
    columns: dict[str, Any] = {k: _key(history[k]) for k in BASELINE_KEYS[:-1]}
    columns |= {
        "size_bytes": history["size_bytes"],
        "key": history["ingest_key"],
        "run": history["run"],
        # Days since 1970 (sorts and aggregates as numbers); ISO again at the end.
        "date": pc.cast(
            pc.cast(pc.cast(history["date"], pa.string()), pa.date32()), pa.int32()
        ),
        "ingested_at": history["ingested_at"],
        "busbw": measured["busbw_calc_gbps"],
        "time_us": history["time_us"],
    }
    table = pa.table(columns)
    if _one_row_each(table, [*BASELINE_KEYS, "key", "run"]):
        return table  # the usual case: each run measured each size once
    keys = [*BASELINE_KEYS, "key", "run", "date", "ingested_at"]
    stats: list[Any] = [
        (v, f) for v in ("busbw", "time_us") for f in ("count", "min", "max")
    ]
    grouped = table.group_by(keys).aggregate(stats)
    points: dict[str, Any] = {k: grouped[k] for k in keys}
    for value in ("busbw", "time_us"):
        count = grouped[f"{value}_count"]
        low, high = grouped[f"{value}_min"], grouped[f"{value}_max"]
        # The median of one value is it, of two their mean; more are rare (a
        # size repeated in one run) and taken exactly below.
        points[value] = pc.if_else(
            pc.equal(count, pa.scalar(1)), low, pc.divide(pc.add(low, high), 2.0)
        )
    result = pa.table(points)
    many = pc.or_(
        pc.greater(grouped["busbw_count"], pa.scalar(2)),
        pc.greater(grouped["time_us_count"], pa.scalar(2)),
    )
    if pc.any(many).as_py():
        result = _exact_medians(result, table, keys, many)
    return result


def _one_row_each(table: pa.Table, keys: list[str]) -> bool:
    """True when no two rows of ``table`` share their ``keys`` (checked on
    dictionary codes: Arrow's hash grouping on a dozen text keys holds hundreds of
    MB for a few nights of 1,000 logs)."""
    if table.num_rows < 2:
        return True
    codes = np.column_stack([key_codes(table[k]) for k in keys])
    ordered = codes[np.lexsort(codes.T[::-1])]
    return not bool((ordered[1:] == ordered[:-1]).all(axis=1).any())


def _exact_medians(
    points: pa.Table, rows: pa.Table, keys: list[str], many: Any
) -> pa.Table:
    """``points`` with the medians of the groups flagged ``many`` computed exactly
    from their ``rows`` (pandas, on those groups only)."""
    frame = rows.to_pandas()
    medians = frame.groupby(keys, observed=True, sort=False)[["busbw", "time_us"]]
    exact = medians.median()
    fixed = points.to_pandas()
    flagged = many.to_numpy(zero_copy_only=False)
    index = pd.MultiIndex.from_frame(fixed.loc[flagged, keys])
    for value in ("busbw", "time_us"):
        fixed.loc[flagged, value] = exact[value].reindex(index).to_numpy()
    return pa.Table.from_pandas(fixed, preserve_index=False)


def _key(column: Any) -> Any:
    """A key column as text, "" for null (as key_text)."""
    return fill_null(pc.cast(column, pa.string()), "")


# What bandwidth_columns reads.
_BANDWIDTH_INPUTS = (
    "size_bytes",
    "time_us",
    "nranks",
    "nnodes",
    "algbw_gbps",
    "busbw_gbps",
    "grouped",
    "cputime",
    "wrong_kind",
    "collective",
    "device",
)


def _mad(values: pd.Series) -> float:
    """Median absolute deviation from the median (NaN ignored)."""
    return float((values - values.median()).abs().median())


def window_start(policy: HistoryPolicy, today: dt.date | None = None) -> str | None:
    """The oldest ``date`` a baseline run may have (ISO), or None without age limit."""
    if policy.max_age_days <= 0:
        return None
    today = today or dt.datetime.now(dt.UTC).date()
    return (today - dt.timedelta(days=policy.max_age_days)).isoformat()


class RunDates(Sequence[str]):
    """The dates (ISO) of some runs, sorted: a sequence of strings, held as day
    numbers (a year of nightly history is hundreds of thousands of runs)."""

    __slots__ = ("_days",)

    def __init__(self, days: npt.NDArray[np.int64] | None = None) -> None:
        found = np.zeros(0, np.int64) if days is None else np.asarray(days, np.int64)
        self._days = np.sort(found)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> RunDates: ...
    def __getitem__(self, index: int | slice) -> str | RunDates:
        if isinstance(index, slice):
            return RunDates(self._days[index])
        return _iso(self._days[[index]])[0]

    def __len__(self) -> int:
        return len(self._days)

    def __iter__(self) -> Iterator[str]:
        return iter(_iso(self._days))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RunDates):
            return bool(np.array_equal(self._days, other._days))
        if isinstance(other, tuple | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RunDates({tuple(self)!r})"

    def distinct(self) -> list[str]:
        """The dates once each, in order."""
        return _iso(np.unique(self._days))


def _iso(days: npt.NDArray[np.int64]) -> list[str]:
    return [str(d) for d in days.astype("datetime64[D]")]


def _days(dates: pd.Series) -> npt.NDArray[np.int64]:
    """ISO dates as day numbers."""
    return np.asarray(dates.to_numpy(dtype="datetime64[D]"), dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Selection:
    """Which runs of a history make the baseline, and what became of the others.

    A run is one run of one ingested log, counted once however many rows it has;
    each list below holds one ``date`` per run, sorted. ``held`` is every run of the
    history; of those with every tag in ``tags`` (``tagged``), ``tonight`` are the
    candidate's own logs, ``unusable`` have no row a baseline may use (failed or
    truncated, or ``#wrong`` > 0 at every size), ``old`` are older than the window
    (which starts on ``oldest``; None: no age limit) and ``selected`` make
    ``table`` (:func:`baselines`). ``tag_values`` counts, for each key of ``tags``,
    the runs of the whole history by their value of it (None: no such tag).
    """

    table: pd.DataFrame
    tags: dict[str, str]
    held: RunDates
    tagged: RunDates
    tonight: RunDates
    unusable: RunDates
    old: RunDates
    selected: RunDates
    oldest: str | None
    tag_values: dict[str, Counter[str | None]] = field(default_factory=dict)


def select_baseline(
    history: pa.Table | HistoryView,
    policy: HistoryPolicy,
    *,
    tags: Mapping[str, str] | None = None,
    exclude_keys: frozenset[str] = frozenset(),
    today: dt.date | None = None,
) -> Selection:
    """The baseline of ``history`` (a whole history, any tags: a table as
    :func:`ncclparse.health.history.read_history` gives, or the view
    :func:`~ncclparse.health.history.scan_history` gives) for the runs with every
    ``tags`` item, as :func:`baselines` builds it, with the account of every run
    (:class:`Selection`)."""
    tags = dict(tags or {})
    oldest = window_start(policy, today)
    view = history if isinstance(history, HistoryView) else view_of(history)
    wanted = sorted(
        ingest
        for ingest, found in view.tags.items()
        if all(found.get(k) == v for k, v in tags.items())
    )
    in_window = [d for d in view.dates if oldest is None or d >= oldest]
    ingests = wanted if tags else None
    rows = (view.rows_of(date, ingests) for date in in_window)
    table = baselines(rows, policy, exclude_keys=exclude_keys, today=today)
    if view.runs.num_rows == 0:
        none = RunDates()
        return Selection(table, tags, none, none, none, none, none, none, oldest)
    runs = view.runs.to_pandas().sort_values("date", kind="stable")
    runs["tagged"] = runs["ingest_id"].isin(wanted) if tags else True
    tagged = runs[runs["tagged"]]
    mine = tagged["ingest_key"].isin(list(exclude_keys)).to_numpy(dtype=bool)
    fit = tagged["usable"].to_numpy(dtype=bool)
    recent = np.ones(len(tagged), dtype=bool)
    if oldest is not None:
        recent = (tagged["date"] >= oldest).to_numpy(dtype=bool)

    def dates(frame: pd.DataFrame) -> RunDates:
        return RunDates(_days(frame["date"]))

    return Selection(
        table,
        tags,
        held=dates(runs),
        tagged=dates(tagged),
        tonight=dates(tagged[mine]),
        unusable=dates(tagged[~mine & ~fit]),
        old=dates(tagged[~mine & fit & ~recent]),
        selected=dates(tagged[~mine & fit & recent]),
        oldest=oldest,
        tag_values=_tag_values(view, runs, tags) if tags else {},
    )


def _tag_values(
    view: HistoryView, runs: pd.DataFrame, tags: Mapping[str, str]
) -> dict[str, Counter[str | None]]:
    """For each key of ``tags``, the runs of the history by their value of it."""
    counts: dict[str, Counter[str | None]] = {key: Counter() for key in tags}
    for ingest, n in runs.groupby("ingest_id", sort=False).size().items():
        found = view.tags.get(str(ingest), {})
        for key, counter in counts.items():
            counter[found.get(key)] += int(n)
    return counts
