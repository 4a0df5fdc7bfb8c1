"""History: idempotent, concurrent and interrupted ingests; tags."""

from __future__ import annotations

import datetime as dt
import io
import shutil
import threading
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import ncclparse
from ncclparse.health import history as history
from tests import _derive as derive

NOW = dt.datetime(2026, 3, 1, 2, 0, tzinfo=dt.UTC)


def _night(seed: int, factor: float = 1.0) -> ncclparse.ParseResult:
    """Derived: the real log with per-size jitter ``seed`` and a global slowdown."""
    jitter = derive.jitter(seed)
    text = derive.scale(derive.healthy(), lambda s: jitter(s) * factor)
    return ncclparse.parse(io.StringIO(text), name=f"night{seed}.log")


def test_ingest_writes_a_date_partition_with_tags(tmp_path: Path) -> None:
    done = history.ingest(
        ncclparse.parse_many([derive.HEALTHY]), tmp_path, tags={"cluster": "a"}, now=NOW
    )
    assert done.added == (str(derive.HEALTHY),)
    assert done.rows == 62
    assert done.path is not None
    assert done.path.parent.name == "date=2026-03-01"
    table = history.read_history(tmp_path)
    assert table.num_rows == 62
    assert table["date"][0].as_py() == "2026-03-01"
    assert table["tags"][0].as_py() == [("cluster", "a")]
    assert table["hosts"][0].as_py()[0] == derive.HOSTS[0]
    # Any Parquet reader sees the dataset: pandas with Hive partitions.
    frame = pd.read_parquet(tmp_path)
    assert len(frame) == 62
    assert set(frame["date"].astype(str)) == {"2026-03-01"}


def test_same_log_twice_changes_nothing(tmp_path: Path) -> None:
    result = ncclparse.parse_many([derive.HEALTHY])
    history.ingest(result, tmp_path, now=NOW)
    before = sorted(tmp_path.rglob("*.parquet"))
    # Same bytes under another name and other tags, another day: still the same log.
    copy = tmp_path.parent / "copy.log"
    shutil.copy(derive.HEALTHY, copy)
    again = history.ingest(
        ncclparse.parse_many([copy, derive.HEALTHY]),
        tmp_path,
        tags={"job": "2"},
        now=NOW + dt.timedelta(days=1),
    )
    assert again.added == ()
    assert again.path is None
    assert again.skipped == (str(copy), str(derive.HEALTHY))
    assert sorted(tmp_path.rglob("*.parquet")) == before


def test_standard_input_is_keyed_by_its_rows(tmp_path: Path) -> None:
    first = history.ingest(_night(1), tmp_path, now=NOW)
    second = history.ingest(_night(1), tmp_path, now=NOW)
    assert first.added == ("night1.log",)
    assert second.skipped == ("night1.log",)
    assert history.ingest(_night(2), tmp_path, now=NOW).added == ("night2.log",)


def test_concurrent_ingests_lose_nothing(tmp_path: Path) -> None:
    results = [_night(seed) for seed in range(8)]
    # Every night twice, from 16 threads at once: each once in the end.
    threads = [
        threading.Thread(target=history.ingest, args=(r, tmp_path)) for r in results * 2
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    table = history.read_history(tmp_path)
    assert table.num_rows == 8 * 62
    assert len(set(table["ingest_key"].to_pylist())) == 8
    assert len(list(tmp_path.rglob("*.parquet"))) == 8


def test_interrupted_ingest_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history.ingest(_night(1), tmp_path, now=NOW)

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("ncclparse.health.history.pq.write_table", killed)
    with pytest.raises(KeyboardInterrupt):
        history.ingest(_night(2), tmp_path, now=NOW)
    monkeypatch.undo()
    names = [p.name for p in tmp_path.rglob("*") if p.is_file()]
    assert sorted(n for n in names if not n.startswith(".ncclparse")) == [
        p.name for p in tmp_path.rglob("*.parquet")
    ]
    assert history.read_history(tmp_path).num_rows == 62
    # The interrupted log was not recorded, so it can be ingested again.
    assert history.ingest(_night(2), tmp_path, now=NOW).added == ("night2.log",)


def test_read_dedupes_a_log_written_twice_without_the_lock(tmp_path: Path) -> None:
    done = history.ingest(_night(1), tmp_path, now=NOW)
    assert done.path is not None
    # As if a second host wrote the same log where flock is not honoured.
    table = pq.read_table(done.path)
    later = table.set_column(
        table.schema.get_field_index("ingest_id"), "ingest_id",
        [["ffffffffffffffff"] * table.num_rows],
    )  # fmt: skip
    pq.write_table(later, done.path.parent / "20260301T020001-ffffffffffffffff.parquet")
    read = history.read_history(tmp_path)
    assert read.num_rows == 62
    assert set(read["ingest_id"].to_pylist()) == {table["ingest_id"][0].as_py()}


def test_read_filters_by_tags(tmp_path: Path) -> None:
    history.ingest(_night(1), tmp_path, tags={"cluster": "a", "job": "1"}, now=NOW)
    history.ingest(_night(2), tmp_path, tags={"cluster": "b"}, now=NOW)
    assert history.read_history(tmp_path, tags={"cluster": "a"}).num_rows == 62
    assert history.read_history(tmp_path, tags={"job": "1"}).num_rows == 62
    assert history.read_history(tmp_path, tags={"cluster": "c"}).num_rows == 0
    assert history.read_history(tmp_path).num_rows == 124


def test_missing_history_directory_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(ncclparse.InputError, match="history directory not found"):
        history.read_history(tmp_path / "nope")
