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
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ncclparse import schema
from ncclparse.columns import fill_null, key_text
from ncclparse.efficiency import bandwidth_columns
from ncclparse.health.history import has_tags, select_tags
from ncclparse.health.rules import HistoryPolicy

__all__ = ["BASELINE_KEYS", "Selection", "baselines", "select_baseline", "window_start"]

# What makes two rows the same series for a baseline (schema.md names); tags are
# matched separately. Hosts are deliberately not part of it: a pairwise test meets a
# new pair every night, and its baseline is the fabric's norm for that shape.
BASELINE_KEYS = (*schema.SHAPE_KEYS, "size_bytes")


def baselines(
    history: pa.Table,
    policy: HistoryPolicy,
    *,
    exclude_keys: frozenset[str] = frozenset(),
    today: dt.date | None = None,
) -> pd.DataFrame:
    """Return one baseline per series and size (index: BASELINE_KEYS).

    Only complete runs without ``#wrong`` count, and not the sources in
    ``exclude_keys`` (the candidate itself, if already ingested). Each run counts once
    (the median of its rows); the ``policy.window`` most recent runs (by ``date``,
    then ingest time) within ``policy.max_age_days`` of ``today`` are kept. Columns:
    ``runs``, ``busbw_median``, ``busbw_mad``, ``time_median``, ``time_mad``,
    ``first_date``, ``last_date``. MADs are raw (not scaled by 1.4826).
    """
    columns = [*BASELINE_KEYS, "busbw", "time_us", "date", "ingested_at", "run"]
    if history.num_rows == 0:
        return pd.DataFrame(columns=columns[:-3]).set_index(list(BASELINE_KEYS))
    measured = bandwidth_columns(history.select(list(schema.MEASUREMENT_COLUMNS)))
    frame = pd.DataFrame(
        {
            **{k: key_text(history[k]) for k in BASELINE_KEYS[:-1]},
            "size_bytes": history["size_bytes"].to_pandas(),
            "busbw": measured["busbw_calc_gbps"].to_pandas(),
            "time_us": history["time_us"].to_pandas(),
            "date": history["date"].to_pandas(),
            "ingested_at": history["ingested_at"].to_pandas(),
            "key": history["ingest_key"].to_pandas(),
            "run": history["run"].to_pandas(),
            "usable": _usable(history),
        }
    )
    keep = frame["usable"] & ~frame["key"].isin(exclude_keys)
    oldest = window_start(policy, today)
    if oldest is not None:
        keep &= frame["date"] >= oldest
    frame = frame[keep]
    runs = frame.groupby(
        [*BASELINE_KEYS, "key", "run"], dropna=False, sort=False, as_index=False
    ).agg(
        busbw=("busbw", "median"),
        time_us=("time_us", "median"),
        date=("date", "max"),
        ingested_at=("ingested_at", "max"),
    )
    runs = runs.sort_values(["date", "ingested_at"], ascending=False)
    runs = runs.groupby(list(BASELINE_KEYS), dropna=False, sort=False).head(
        policy.window
    )
    grouped = runs.groupby(list(BASELINE_KEYS), dropna=False)
    out = grouped.agg(
        runs=("time_us", "size"),
        busbw_median=("busbw", "median"),
        time_median=("time_us", "median"),
        first_date=("date", "min"),
        last_date=("date", "max"),
    )
    out["busbw_mad"] = grouped["busbw"].agg(_mad)
    out["time_mad"] = grouped["time_us"].agg(_mad)
    return out


def _mad(values: pd.Series) -> float:
    """Median absolute deviation from the median (NaN ignored)."""
    return float((values - values.median()).abs().median())


def window_start(policy: HistoryPolicy, today: dt.date | None = None) -> str | None:
    """The oldest ``date`` a baseline run may have (ISO), or None without age limit."""
    if policy.max_age_days <= 0:
        return None
    today = today or dt.datetime.now(dt.UTC).date()
    return (today - dt.timedelta(days=policy.max_age_days)).isoformat()


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
    held: tuple[str, ...]
    tagged: tuple[str, ...]
    tonight: tuple[str, ...]
    unusable: tuple[str, ...]
    old: tuple[str, ...]
    selected: tuple[str, ...]
    oldest: str | None
    tag_values: dict[str, Counter[str | None]] = field(default_factory=dict)


def select_baseline(
    history: pa.Table,
    policy: HistoryPolicy,
    *,
    tags: Mapping[str, str] | None = None,
    exclude_keys: frozenset[str] = frozenset(),
    today: dt.date | None = None,
) -> Selection:
    """The baseline of ``history`` (a whole history, any tags) for the runs with every
    ``tags`` item, as :func:`baselines` builds it, with the account of every run
    (:class:`Selection`)."""
    tags = dict(tags or {})
    oldest = window_start(policy, today)
    table = baselines(
        select_tags(history, tags), policy, exclude_keys=exclude_keys, today=today
    )
    if history.num_rows == 0:
        return Selection(table, tags, (), (), (), (), (), (), oldest)
    rows = pd.DataFrame(
        {
            "key": history["ingest_key"].to_pandas(),
            "run": history["run"].to_pandas(),
            "id": history["ingest_id"].to_pandas(),
            "date": history["date"].to_pandas(),
            "tagged": has_tags(history, tags).to_pandas(),
            "usable": _usable(history),
        }
    )
    runs = rows.groupby(["key", "run"], sort=False, dropna=False).agg(
        id=("id", "first"),
        date=("date", "max"),
        tagged=("tagged", "any"),
        usable=("usable", "any"),
    )
    runs = runs.sort_values("date", kind="stable")
    tagged = runs[runs["tagged"]]
    mine = tagged.index.get_level_values("key").isin(list(exclude_keys))
    usable = tagged["usable"].to_numpy(dtype=bool)
    recent = np.ones(len(tagged), dtype=bool)
    if oldest is not None:
        recent = (tagged["date"] >= oldest).to_numpy(dtype=bool)

    def dates(frame: pd.DataFrame) -> tuple[str, ...]:
        return tuple(str(d) for d in frame["date"])

    return Selection(
        table,
        tags,
        held=dates(runs),
        tagged=dates(tagged),
        tonight=dates(tagged[mine]),
        unusable=dates(tagged[~mine & ~usable]),
        old=dates(tagged[~mine & usable & ~recent]),
        selected=dates(tagged[~mine & usable & recent]),
        oldest=oldest,
        tag_values=_tag_values(history, rows, runs, tags) if tags else {},
    )


def _tag_values(
    history: pa.Table, rows: pd.DataFrame, runs: pd.DataFrame, tags: Mapping[str, str]
) -> dict[str, Counter[str | None]]:
    """For each key of ``tags``, the runs of the history by their value of it. Tags
    are an ingest's: read once per ingest, not per row."""
    first = rows.drop_duplicates("id")
    pairs = history["tags"].take(pa.array(first.index.to_numpy())).to_pylist()
    tags_of = {i: dict(p or []) for i, p in zip(first["id"], pairs, strict=True)}
    counts: dict[str, Counter[str | None]] = {key: Counter() for key in tags}
    for ingest, n in runs.groupby("id", sort=False).size().items():
        for key, counter in counts.items():
            counter[tags_of[str(ingest)].get(key)] += int(n)
    return counts


def _usable(history: pa.Table) -> pd.Series:
    """Per row: may a baseline use it? A complete run's row of a size above 0,
    without a ``#wrong`` count above 0, not a CPU time nor a grouped row."""
    wrong = fill_null(
        pc.and_(
            pc.equal(history["wrong_kind"], pa.scalar("count")),
            pc.greater(history["wrong"], pa.scalar(0)),
        ),
        False,
    ).to_pandas()
    bad = wrong | history["cputime"].to_pandas() | history["grouped"].to_pandas()
    complete = history["status"].to_pandas() == "complete"
    return complete & ~bad & (history["size_bytes"].to_pandas() > 0)
