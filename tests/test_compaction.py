"""``history compact`` cut short, or run twice at once: every reader (read_history,
scan_history, the SQL of docs/nightly.md) gives each row once, and the next
compaction leaves one file with exactly the rows there were."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner

from ncclparse.cli.app import cli
from ncclparse.store import history
from ncclparse.store.locations import Location
from tests._compaction import (
    KILL_STEPS,
    NIGHT,
    Stopped,
    compact_in_child,
    kill_compaction,
    make_history,
    night,
    rows_of,
    stop_at_delete,
)
from tests._docs import code_block


def account(where: str | Path) -> list[tuple[Any, ...]]:
    """scan_history's runs, and the rows of every date it reads, sorted."""
    view = history.scan_history(where)
    runs = sorted(
        tuple(row.values())
        for row in view.runs.select(["ingest_id", "run"]).to_pylist()
    )
    rows = sum((view.rows_of(date).num_rows for date in view.dates), 0)
    return [*runs, ("rows", rows)]


@pytest.mark.parametrize("removed", [0, 1, 2])
def test_a_compaction_cut_short_is_read_once_and_healed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, removed: int
) -> None:
    before = make_history(tmp_path)
    assert before.num_rows == 62 * 4
    expected = account(tmp_path)
    assert len(expected) == 4 + 1  # 4 logs of one run (the second copy left out)
    with monkeypatch.context() as patch:
        patch.setattr(Location, "delete", stop_at_delete(removed))
        with pytest.raises(Stopped):
            history.compact(tmp_path)
    night = tmp_path / "date=2026-03-01"
    files = sorted(p.name for p in night.glob("*.parquet"))
    assert len(files) == 4 + 1 - removed  # the merged file beside 4 - removed
    assert sum(name.startswith("compacted-") for name in files) == 1
    assert rows_of(tmp_path).equals(before)
    assert account(tmp_path) == expected
    done = history.compact(tmp_path)
    assert [(name, len(replaced)) for name, replaced, _ in done.merged] == [
        ("date=2026-03-01", 4 + 1 - removed)
    ]
    assert done.rows == 62 * 4  # each ingest once: the night's four files' rows
    (merged,) = night.glob("*.parquet")
    assert merged.name.startswith("compacted-")
    assert rows_of(tmp_path).equals(before)
    assert account(tmp_path) == expected


def test_a_second_compaction_cut_short_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merged file merged again with a new ingest: the older merged file's ingests
    are in both merged files."""
    for seed in (1, 2):
        history.ingest(night(seed), tmp_path, now=NIGHT + dt.timedelta(minutes=seed))
    history.compact(tmp_path)
    history.ingest(night(3), tmp_path, now=NIGHT + dt.timedelta(minutes=3))
    before = rows_of(tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(Location, "delete", stop_at_delete(0))
        with pytest.raises(Stopped):
            history.compact(tmp_path)
    assert len(list(tmp_path.rglob("compacted-*.parquet"))) == 2
    assert rows_of(tmp_path).equals(before)
    history.compact(tmp_path)
    assert len(list(tmp_path.rglob("*.parquet"))) == 1
    assert rows_of(tmp_path).equals(before)


def test_two_compactions_at_once_converge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the lock (as on an object store): one compaction runs whole while
    another is between writing its merged file and removing what it replaced, and
    again while another has listed the files but not read them."""
    before = make_history(tmp_path)
    original = Location.delete
    inner: list[history.CompactReport] = []
    started: list[bool] = []

    def delete(self: Location, path: str) -> None:
        if not started:
            started.append(True)
            inner.append(history.compact(tmp_path, lock=False))
        original(self, path)

    with monkeypatch.context() as patch:
        patch.setattr(Location, "delete", delete)
        outer = history.compact(tmp_path, lock=False)
    # The inner one merged the outer one's merged file with the files it replaces.
    assert [len(replaced) for _, replaced, _ in inner[0].merged] == [5]
    assert [len(replaced) for _, replaced, _ in outer.merged] == [4]
    assert len(list(tmp_path.rglob("*.parquet"))) == 2
    assert rows_of(tmp_path).equals(before)

    history.ingest(night(5), tmp_path, now=NIGHT + dt.timedelta(minutes=30))
    before = rows_of(tmp_path)
    read = history._read
    ran: list[history.CompactReport] = []
    raced: list[bool] = []

    def racing_read(*args: Any, **kwargs: Any) -> pa.Table:
        if not raced:
            raced.append(True)
            ran.append(history.compact(tmp_path, lock=False))
        return read(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(history, "_read", racing_read)
        late = history.compact(tmp_path, lock=False)
    assert [len(replaced) for _, replaced, _ in ran[0].merged] == [2]
    assert late.merged == ()  # its files were gone: it found the partition merged
    assert len(list(tmp_path.rglob("*.parquet"))) == 2
    assert rows_of(tmp_path).equals(before)


def test_a_stale_temporary_file_of_a_killed_compaction_is_removed(
    tmp_path: Path, runner: CliRunner
) -> None:
    make_history(tmp_path)
    night = tmp_path / "date=2026-03-01"
    left = night / ".compacted-0123456789abcdef.parquet.x1y2z3.tmp"
    left.write_bytes(b"PAR1 half a file")
    young = night / ".compacted-fedcba9876543210.parquet.a1b2c3.tmp"
    young.write_bytes(b"PAR1 a file being written")
    hours_ago = time.time() - history.STALE_AFTER - 60
    os.utime(left, (hours_ago, hours_ago))
    done = runner.invoke(cli, ["history", "compact", "--history", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert done.stderr == (
        f"{tmp_path}: 1 partition(s) compacted, 4 files into 1 (248 rows); "
        "1 stale temporary file(s) of killed writers removed\n"
    )
    assert not left.exists()
    assert young.exists()  # a live writer's, maybe: left for an hour


def _sql_statements(root: Path) -> list[str]:
    block = code_block("nightly.md", "Querying the history", "sql")
    block = block.replace("/data/nccl-history", str(root))
    return [s for s in block.split(";") if s.strip()]


def test_the_documented_sql_counts_each_row_once_after_a_compaction_cut_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    duckdb = pytest.importorskip("duckdb")
    make_history(tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(Location, "delete", stop_at_delete(1))
        with pytest.raises(Stopped):
            history.compact(tmp_path)
    assert len(list(tmp_path.rglob("*.parquet"))) == 5
    connection = duckdb.connect()
    *views, query = _sql_statements(tmp_path)
    for statement in views:
        connection.execute(statement)
    assert connection.execute("SELECT count(*) FROM history").fetchone() == (62 * 4,)
    got = connection.execute(query).df()
    rows = history.read_history(tmp_path).to_pandas()
    rows["cluster"] = rows["tags"].map(lambda tags: dict(tags).get("cluster"))
    big = rows[
        (rows["collective"] == "all_reduce")
        & (rows["size_bytes"] >= 2**30)
        & (rows["status"] == "complete")
    ]
    expected = (
        big.assign(algbw=big["size_bytes"] / big["time_us"] / 1e3)
        .groupby(["date", "cluster", "size_bytes"], dropna=False)["algbw"]
        .agg(["median", "count"])
        .reset_index()
    )

    def plain(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
        day = [pd.Timestamp(d).date().isoformat() for d in frame.iloc[:, 0]]
        return [
            (d, None if pd.isna(c) else c, int(s), round(float(m), 6), int(n))
            for d, (_, c, s, m, n) in zip(
                day, frame.itertuples(index=False), strict=True
            )
        ]

    assert plain(got) == plain(expected)
    assert plain(got)[0][:3] == ("2026-03-01", None, 2**30)
    assert list(got["n"]) == [6] * 4 + [2] * 4  # 2 placements of 3 logs, then of 1


@pytest.mark.slow
@pytest.mark.parametrize("step", KILL_STEPS)
def test_a_compaction_killed_at_any_step_loses_and_doubles_nothing(
    tmp_path: Path, step: str
) -> None:
    before = make_history(tmp_path)
    expected = account(tmp_path)
    kill_compaction(tmp_path, step)
    night = tmp_path / "date=2026-03-01"
    files = sorted(p.name for p in night.glob("*.parquet"))
    merged = [name for name in files if name.startswith("compacted-")]
    left = list(night.glob(".*.tmp"))
    if step == "write":  # killed before the rename: its temporary file, no more
        assert (len(files), merged, len(left)) == (4, [], 1)
        hours_ago = time.time() - history.STALE_AFTER - 60
        os.utime(left[0], (hours_ago, hours_ago))
    else:
        removed = int(step.split(":")[1])
        assert (len(files), len(merged), left) == (4 + 1 - removed, 1, [])
    assert rows_of(tmp_path).equals(before)
    assert account(tmp_path) == expected
    done = history.compact(tmp_path)
    assert len(done.removed) == (step == "write")
    (only,) = night.iterdir()  # the merged file, no temporary one
    assert only.name.startswith("compacted-")
    assert rows_of(tmp_path).equals(before)
    assert account(tmp_path) == expected


@pytest.mark.slow
@pytest.mark.parametrize("lock", [True, False])
def test_two_compactions_at_once_in_processes(tmp_path: Path, lock: bool) -> None:
    before = make_history(tmp_path)
    options = () if lock else ("--no-lock",)
    both = [compact_in_child(tmp_path, *options) for _ in range(2)]
    for child in both:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    assert rows_of(tmp_path).equals(before)
    history.compact(tmp_path)
    assert len(list((tmp_path / "date=2026-03-01").glob("*.parquet"))) == 1
    assert rows_of(tmp_path).equals(before)


def test_a_file_removed_while_the_history_is_read_is_named_as_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check reading while a compaction removes the files it merged is told to run
    again, not that a file is corrupt."""
    make_history(tmp_path)
    view = history.scan_history(tmp_path)
    first = min((tmp_path / "date=2026-03-01").glob("*.parquet"))
    history.compact(tmp_path)
    with pytest.raises(history.HistoryError) as raised:
        view.rows_of("2026-03-01")
    assert str(raised.value) == (
        f"{tmp_path}: cannot read history: {first} was removed while it was read "
        "(a history compact at the same time?); run again"
    )
