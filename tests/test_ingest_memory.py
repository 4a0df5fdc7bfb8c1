"""``ingest`` in bounded memory: a log's rows wait in a temporary file for their
runs and are written a row group at a time (docs/robustness.md, "Memory")."""

from __future__ import annotations

import datetime as dt
import errno
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import ncclparse
from ncclparse.cli.app import cli
from ncclparse.store import history
from ncclparse.store.spool import Spool
from tests import _derive
from tests.test_memory import peak_rss_mb

NOW = dt.datetime(2026, 3, 1, 2, 0, tzinfo=dt.UTC)


def _logs() -> list[tuple[str, str]]:
    """Four logs, the second twice as long (a sweep repeated): runs that span
    row groups once these are 100 rows."""
    healthy = _derive.healthy()
    return [
        (healthy, "a.log"),
        (_derive.repeat_sweep(healthy, 3), "b.log"),
        (_derive.scale(healthy, lambda _size: 2.0), "c.log"),
        (healthy + "# again\n", "d.log"),
    ]


def _written(directory: Path, done: history.IngestReport) -> tuple[object, ...]:
    assert done.path is not None
    rows = pq.read_table(done.path).drop_columns(["ingest_id"])
    runs = history._runs_of(history._where(directory), str(done.path))
    assert runs is not None
    return rows, runs.drop_columns(["ingest_id"]), done.rows


def test_rows_written_in_row_groups_are_the_rows_of_one_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Row groups of 100 rows, the rows read back from a spool: the same rows and
    the same runs in the footer as one row group of the parsed table."""
    result = ncclparse.parse_many(_logs())
    tags = {"cluster": "a", "rack": "7"}
    whole = history.ingest(result, tmp_path / "whole", tags=tags, now=NOW)
    monkeypatch.setattr(history, "_BATCH", 100)
    with Spool() as spool:
        spooled = ncclparse.parse_many(_logs(), on_batch=spool.write)
        assert spooled.measurements.num_rows == 0
        assert spool.sources == {"a.log", "b.log", "c.log", "d.log"}
        grouped = history.ingest(
            spooled, tmp_path / "grouped", tags=tags, now=NOW, spool=spool
        )
    assert grouped.rows == whole.rows == 62 * 6
    assert grouped.path is not None
    assert pq.ParquetFile(grouped.path).metadata.num_row_groups == 4
    assert _written(tmp_path / "grouped", grouped) == _written(
        tmp_path / "whole", whole
    )
    runs = history._runs_of(history._where(tmp_path / "grouped"), str(grouped.path))
    assert runs is not None
    assert runs["run"].to_pylist() == [0, 0, 0, 0]
    assert runs["tags"].to_pylist()[0] == [("cluster", "a"), ("rack", "7")]


def _ingest_code(path: Path, history_dir: Path, rows: int) -> str:
    return (
        "from ncclparse.cli.app import cli\n"
        f"cli(['ingest', '-q', {str(path)!r}, '--history', {str(history_dir)!r}],"
        " standalone_mode=False)\n"
        "import pyarrow.dataset as ds\n"
        f"n = ds.dataset({str(history_dir)!r}, partitioning='hive').count_rows()\n"
        f"assert n == {rows}, n\n"
    )


@pytest.mark.slow
def test_memory_of_ingest_does_not_grow_with_the_rows_of_one_run(
    tmp_path: Path,
) -> None:
    """One run of 0.5 M and of 2 M rows (a real sweep repeated, 29 and 116 MB):
    730 MB and 2.5 GB before the rows were written a row group at a time."""
    peaks = []
    for times in (7_984, 31_936):
        path = tmp_path / f"run{times}.log"
        path.write_text(_derive.repeat_sweep(_derive.healthy(), times))
        code = _ingest_code(path, tmp_path / f"history{times}", 62 * times)
        peaks.append(peak_rss_mb(code))
        path.unlink()
    assert peaks[1] < 1.3 * peaks[0] + 30, peaks


def test_rows_that_cannot_be_kept_aside_add_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A full TMPDIR while the log is parsed: exit 4 naming what to do, no file in
    the history, and the log not recorded (a later ingest adds it)."""

    args = ["ingest", "-q", str(_derive.HEALTHY), "--history", str(tmp_path / "h")]
    monkeypatch.setattr(pa.ipc, "new_stream", lambda *_a, **_k: _Full())
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 4, done.output
    assert done.stderr == (
        "Error: cannot keep the parsed rows in a temporary file (No space left "
        "on device); set TMPDIR to a directory with free space\n"
    )
    assert list(tmp_path.rglob("*.parquet")) == []
    monkeypatch.undo()
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0, again.output
    assert history.read_history(tmp_path / "h").num_rows == 62


class _Full:
    """An IPC writer on a full disk."""

    def write_batch(self, batch: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def close(self) -> None:
        pass
