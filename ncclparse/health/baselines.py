"""History baselines: per series and size, the recent runs' median and spread.

A run of tonight is judged against the runs of the same shape (``schema.SHAPE_KEYS``)
and size in the history (:mod:`ncclparse.health.history`), as a median and a median
absolute deviation (MAD) over a window of recent runs (:class:`HistoryPolicy`).
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ncclparse import schema
from ncclparse.columns import fill_null, key_text
from ncclparse.efficiency import bandwidth_columns
from ncclparse.health.rules import HistoryPolicy

__all__ = ["BASELINE_KEYS", "baselines"]

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
            "status": history["status"].to_pandas(),
            "bad": (
                fill_null(
                    pc.and_(
                        pc.equal(history["wrong_kind"], pa.scalar("count")),
                        pc.greater(history["wrong"], pa.scalar(0)),
                    ),
                    False,
                ).to_pandas()
                | history["cputime"].to_pandas()
                | history["grouped"].to_pandas()
            ),
        }
    )
    keep = (frame["status"] == "complete") & ~frame["bad"]
    keep &= ~frame["key"].isin(exclude_keys) & (frame["size_bytes"] > 0)
    if policy.max_age_days > 0:
        oldest = (today or dt.datetime.now(dt.UTC).date()) - dt.timedelta(
            days=policy.max_age_days
        )
        keep &= frame["date"] >= oldest.isoformat()
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
