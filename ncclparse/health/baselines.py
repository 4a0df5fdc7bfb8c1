"""History baselines: per series and size, the recent runs' median and spread.

A run of tonight is judged against the runs of the same shape (``schema.SHAPE_KEYS``)
and size in the history (:mod:`ncclparse.store.history`), as a median and a median
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
from ncclparse._arrow import distinct_rows, fill_null, key_codes
from ncclparse.efficiency import bandwidth_columns
from ncclparse.health.rules import HistoryPolicy
from ncclparse.store.history import DATE_AHEAD, HistoryView, usable, view_of

__all__ = [
    "BASELINE_KEYS",
    "DATE_AHEAD",
    "RunDates",
    "Selection",
    "baselines",
    "select_baseline",
    "tag_values",
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
    ``history`` rows: a table with (at least) ``HISTORY_COLUMNS``, or such tables one
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
    window = _Window(policy.window)
    for table in tables:
        table = _candidates(table, exclude_keys, oldest)
        if table.num_rows:
            window.add(table)
    runs = window.points()
    if runs.empty:
        columns = [*BASELINE_KEYS, "busbw", "time_us"]
        return pd.DataFrame(columns=columns).set_index(list(BASELINE_KEYS))
    grouped = runs.groupby(list(BASELINE_KEYS))
    out = grouped.agg(
        runs=("time_us", "size"),
        busbw_median=("busbw", "median"),
        time_median=("time_us", "median"),
        first_date=("date", "min"),
        last_date=("date", "max"),
    )
    for value, name in (("busbw", "busbw_mad"), ("time_us", "time_mad")):
        # Median absolute deviation from the median (NaN ignored), all at once.
        spread = (runs[value] - grouped[value].transform("median")).abs()
        out[name] = spread.groupby([runs[k] for k in BASELINE_KEYS]).median()
    for name in ("first_date", "last_date"):
        days = out[name].to_numpy(dtype="int64")
        out[name] = np.datetime_as_string(days.astype("datetime64[D]")).astype(object)
    return out


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


# A null ingest time sorts after every real one (as pandas puts NaT last).
_NO_TIME = -(1 << 62)


class _Window:
    """The ``size`` most recent run points (by date, then ingest time) of each
    series and size seen so far, in NumPy: a month of nightly history is millions
    of rows, of which the window keeps a few thousand.

    A series and size is a small integer (its key in :attr:`_keys`), so that
    reducing a night costs a sort of integers, not a grouping of text."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._ids: dict[tuple[Any, ...], int] = {}
        self._keys: list[tuple[Any, ...]] = []
        empty = np.zeros(0, np.int64)
        self._group, self._date, self._ingested = empty, empty, empty
        self._busbw, self._time = np.zeros(0), np.zeros(0)

    def add(self, rows: pa.Table) -> None:
        """Reduce ``rows`` (usable history rows) into the window."""
        group, date, ingested, busbw, time = _run_points(rows, self._series(rows))
        group = np.concatenate([self._group, group])
        date = np.concatenate([self._date, date])
        ingested = np.concatenate([self._ingested, ingested])
        # Stable: on a tie, the rows already kept come first, as they came.
        order = np.lexsort((-ingested, -date, group))
        ranked = group[order]
        starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
        rank = np.arange(len(ranked)) - np.repeat(
            starts, np.diff([*starts, len(ranked)])
        )
        keep = order[rank < self._size]
        self._group, self._date, self._ingested = (
            group[keep],
            date[keep],
            ingested[keep],
        )
        self._busbw = np.concatenate([self._busbw, busbw])[keep]
        self._time = np.concatenate([self._time, time])[keep]

    def points(self) -> pd.DataFrame:
        """The kept run points: BASELINE_KEYS, ``date`` (days since 1970),
        ``busbw`` and ``time_us``."""
        keys = [self._keys[g] for g in self._group.tolist()]
        columns: dict[str, Any] = {
            name: [key[i] for key in keys] for i, name in enumerate(BASELINE_KEYS)
        }
        columns["size_bytes"] = np.asarray(columns["size_bytes"], np.int64)
        columns |= {"date": self._date, "busbw": self._busbw, "time_us": self._time}
        return pd.DataFrame(columns)

    def _series(self, rows: pa.Table) -> npt.NDArray[np.int64]:
        """Each row's series and size as the window's integer for it."""
        codes = [key_codes(rows[k]) for k in BASELINE_KEYS]
        first, inverse = distinct_rows(codes)
        ids = np.empty(len(first), np.int64)
        texts = rows.select(list(BASELINE_KEYS[:-1])).take(first)
        values = [_key(texts[k]).to_pylist() for k in BASELINE_KEYS[:-1]]
        sizes = rows["size_bytes"].take(first).to_pylist()
        for i, key in enumerate(zip(*values, sizes, strict=True)):
            ids[i] = self._ids.setdefault(key, len(self._ids))
            if ids[i] == len(self._keys):
                self._keys.append(key)
        return ids[inverse]


def _run_points(
    history: pa.Table, group: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[Any], ...]:
    """One point per run, series and size of ``history`` rows whose series and size
    is ``group``: the median busbw and time of its rows (almost always one row).
    Returns group, date (days since 1970), ingest time (ns), busbw and time."""
    measured = bandwidth_columns(history.select(list(_BANDWIDTH_INPUTS)))
    busbw = _floats(measured["busbw_calc_gbps"])
    time = _floats(history["time_us"])
    date = _floats(
        pc.cast(pc.cast(pc.cast(history["date"], pa.string()), pa.date32()), pa.int32())
    ).astype(np.int64)
    ingested = np.asarray(
        fill_null(pc.cast(history["ingested_at"], pa.int64()), _NO_TIME).to_numpy(
            zero_copy_only=False
        ),
        np.int64,
    )
    run = [group, key_codes(history["ingest_key"]), key_codes(history["run"])]
    first, inverse = distinct_rows(run)
    if len(first) == len(group):
        return group, date, ingested, busbw, time  # each run measured each size once
    # A size repeated in one run: the median of its rows.
    table = pd.DataFrame({"point": inverse, "busbw": busbw, "time": time})
    medians = table.groupby("point", sort=True).median()
    return (
        group[first],
        date[first],
        ingested[first],
        medians["busbw"].to_numpy(np.float64),
        medians["time"].to_numpy(np.float64),
    )


def _floats(column: Any) -> npt.NDArray[np.float64]:
    """A numeric column as float64, null as NaN."""
    return np.asarray(
        pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False), np.float64
    )


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
    # The candidate's own logs the history got on another night than ``today``
    # (dated earlier or beyond tomorrow, or ingested on an earlier UTC day): the
    # first such date by ingest key (a logs directory that was not refreshed),
    # whatever their tags; for a log dated tonight, the day it was ingested on.
    stale: dict[str, str] = field(default_factory=dict)


def select_baseline(
    history: pa.Table | HistoryView,
    policy: HistoryPolicy,
    *,
    tags: Mapping[str, str] | None = None,
    exclude_keys: frozenset[str] = frozenset(),
    today: dt.date | None = None,
) -> Selection:
    """The baseline of ``history`` (a whole history, any tags: a table as
    :func:`ncclparse.store.history.read_history` gives, or the view
    :func:`~ncclparse.store.history.scan_history` gives) for the runs with every
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

    tonight = today or dt.datetime.now(dt.UTC).date()
    night = runs["date"].between(
        tonight.isoformat(), (tonight + DATE_AHEAD).isoformat()
    )
    # A site ahead of UTC files a night under tomorrow's date: last night's log is
    # then under tonight's date, but it was ingested on an earlier day.
    ingested_on = runs["ingested_at"].dt.strftime("%Y-%m-%d")
    earlier = ingested_on < tonight.isoformat()
    runs["stale_on"] = runs["date"].where(~night, ingested_on)
    again = runs[runs["ingest_key"].isin(list(exclude_keys)) & (~night | earlier)]

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
        tag_values=tag_values(view, runs, tags) if tags else {},
        stale={
            str(key): str(date)
            for key, date in again.groupby("ingest_key")["stale_on"].min().items()
        },
    )


def tag_values(
    view: HistoryView, runs: pd.DataFrame, tags: Mapping[str, str]
) -> dict[str, Counter[str | None]]:
    """For each key of ``tags``, the runs of the history by their value of it."""
    counts: dict[str, Counter[str | None]] = {key: Counter() for key in tags}
    for ingest, n in runs.groupby("ingest_id", sort=False).size().items():
        found = view.tags.get(str(ingest), {})
        for key, counter in counts.items():
            counter[found.get(key)] += int(n)
    return counts
