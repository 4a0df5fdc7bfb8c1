"""Baselines: median, MAD, window and age over a history of derived nights; the
account of the runs a baseline did not use."""

from __future__ import annotations

import datetime as dt
import io
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import ncclparse
from ncclparse.health.baselines import baselines, select_baseline
from ncclparse.health.rules import HistoryPolicy
from ncclparse.store import history
from tests import _derive as derive

NOW = dt.datetime(2026, 3, 1, 2, 0, tzinfo=dt.UTC)


def _night(seed: int, factor: float = 1.0) -> ncclparse.ParseResult:
    """Derived: the real log with per-size jitter ``seed`` and a global slowdown."""
    jitter = derive.jitter(seed)
    text = derive.scale(derive.healthy(), lambda s: jitter(s) * factor)
    return ncclparse.parse(io.StringIO(text), name=f"night{seed}.log")


def test_baseline_median_mad_and_window(tmp_path: Path) -> None:
    # Six nights, night k uniformly k % slower (factor 1.00 .. 1.05), one per day.
    for k in range(6):

        def factor(size: int, k: int = k) -> float:
            return 1 + k / 100

        text = derive.scale(derive.healthy(), factor)
        day = NOW - dt.timedelta(days=6 - k)
        history.ingest(
            ncclparse.parse(io.StringIO(text), name=f"n{k}.log"), tmp_path, now=day
        )
    table = history.read_history(tmp_path)
    policy = HistoryPolicy(window=4, max_age_days=0)
    base = baselines(table, policy)
    key = ("nccl-tests", "all_reduce", "float32", "sum", "", "out-of-place", "16", "2",
           8589934592)  # fmt: skip
    # pandas-stubs type no MultiIndex row key longer than (row, column).
    row = base.loc[key]  # type: ignore[index]
    # The 4 most recent nights: 1.02..1.05 x 47535 us.
    times = [47535 * (1 + k / 100) for k in (2, 3, 4, 5)]
    assert row["runs"] == 4
    assert row["time_median"] == pytest.approx(pd.Series(times).median(), abs=1)
    assert row["time_mad"] == pytest.approx(475.35, abs=1)
    assert (row["first_date"], row["last_date"]) == ("2026-02-25", "2026-02-28")
    # Age limit: only the last 2 days count.
    recent = baselines(table, HistoryPolicy(max_age_days=2), today=NOW.date())
    assert recent["runs"].max() == 2
    # The candidate itself is never its own baseline.
    key = table["ingest_key"][0].as_py()
    excluded = baselines(
        table, HistoryPolicy(max_age_days=0), exclude_keys=frozenset({key})
    )
    assert excluded["runs"].max() == 5


def test_the_selection_accounts_for_every_run(tmp_path: Path) -> None:
    # Derived nights: 2 of cluster=a within the window, 1 of cluster=a 40 days old,
    # 1 of cluster=a whose run failed (its footer cut), 1 of cluster=b, and tonight's
    # own log ingested with cluster=a before the check.
    def add(result: ncclparse.ParseResult, tags: dict[str, str], days: int) -> None:
        history.ingest(result, tmp_path, tags=tags, now=NOW - dt.timedelta(days=days))

    add(_night(1), {"cluster": "a"}, 2)
    add(_night(2), {"cluster": "a"}, 1)
    add(_night(3), {"cluster": "a"}, 40)
    failed = derive.cut(derive.healthy(), 2**30)
    add(ncclparse.parse(io.StringIO(failed), name="cut.log"), {"cluster": "a"}, 1)
    add(_night(5), {"cluster": "b", "job": "7"}, 1)
    tonight = _night(6)
    add(tonight, {"cluster": "a"}, 0)
    table = history.read_history(tmp_path)
    mine = frozenset(history.source_keys(tonight).values())
    chosen = select_baseline(
        table,
        HistoryPolicy(max_age_days=30),
        tags={"cluster": "a"},
        exclude_keys=mine,
        today=NOW.date(),
    )
    assert chosen.held == (
        "2026-01-20", "2026-02-27", "2026-02-28", "2026-02-28", "2026-02-28",
        "2026-03-01",
    )  # fmt: skip
    assert chosen.tagged == ("2026-01-20", "2026-02-27", "2026-02-28", "2026-02-28",
                             "2026-03-01")  # fmt: skip
    assert chosen.tonight == ("2026-03-01",)
    assert chosen.unusable == ("2026-02-28",)
    assert chosen.old == ("2026-01-20",)
    assert chosen.selected == ("2026-02-27", "2026-02-28")
    assert chosen.oldest == "2026-01-30"
    assert chosen.tag_values == {"cluster": Counter({"a": 5, "b": 1})}
    assert chosen.table["runs"].max() == 2  # the baseline is the selected runs
    # Without an age limit the old night counts too, and nothing is "old".
    unlimited = select_baseline(
        table, HistoryPolicy(max_age_days=0), tags={"cluster": "a"}, exclude_keys=mine
    )
    assert (list(unlimited.old), unlimited.oldest, len(unlimited.selected)) == (
        [],
        None,
        3,
    )
    assert unlimited.table["runs"].max() == 3
