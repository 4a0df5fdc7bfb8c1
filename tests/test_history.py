"""History: idempotent, concurrent and interrupted ingests; tags; a history that is
not there yet, or cannot be read, written or locked (HistoryError, exit 4)."""

from __future__ import annotations

import datetime as dt
import errno
import io
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import ncclparse
from ncclparse.cli.app import cli
from ncclparse.health.baselines import select_baseline
from ncclparse.health.rules import HistoryPolicy
from ncclparse.store import history
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


def test_ingest_refuses_a_date_beyond_tomorrow(tmp_path: Path) -> None:
    """The library refused nothing: a night dated years ahead never aged out of the
    baseline window. Same words as ``ingest --date``; nothing is written."""
    with pytest.raises(ValueError, match="is in the future") as caught:
        history.ingest(_night(1), tmp_path, date=dt.date(2026, 3, 3), now=NOW)
    assert str(caught.value) == (
        "2026-03-03 is in the future: at most 2026-03-02 (today, UTC, and one day "
        "ahead for time zones)"
    )
    assert list(tmp_path.iterdir()) == []
    # A clock in another time zone: today is its UTC date.
    late = dt.datetime(2026, 3, 1, 20, 0, tzinfo=dt.timezone(dt.timedelta(hours=-8)))
    done = history.ingest(_night(1), tmp_path, date=dt.date(2026, 3, 3), now=late)
    assert done.path is not None
    assert done.path.parent.name == "date=2026-03-03"


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

    monkeypatch.setattr("ncclparse.store.history._write", killed)
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
    with pytest.raises(history.HistoryError) as caught:
        history.read_history(tmp_path / "nope")
    assert str(caught.value) == f"{tmp_path / 'nope'}: history directory not found"
    assert isinstance(caught.value, ncclparse.InputError)


def test_a_missing_or_empty_history_reads_as_an_empty_table(tmp_path: Path) -> None:
    # check --first-night: a directory ingest has not created yet is empty history.
    missing = history.read_history(tmp_path / "nope", missing_ok=True)
    assert missing.num_rows == 0
    assert not (tmp_path / "nope").exists()  # reading creates nothing
    (tmp_path / "empty").mkdir()
    empty = history.read_history(tmp_path / "empty", tags={"cluster": "a"})
    assert empty.schema == missing.schema  # every column, filterable by tags
    assert {"tags", "ingest_key", "date"} <= set(empty.column_names)
    # A file where the directory should be is not a missing history.
    (tmp_path / "file").write_text("")
    with pytest.raises(history.HistoryError) as caught:
        history.read_history(tmp_path / "file", missing_ok=True)
    assert str(caught.value) == (
        f"{tmp_path / 'file'}: not a history directory: it is a file"
    )


def test_tags_select_after_the_earliest_ingest_of_each_log(tmp_path: Path) -> None:
    # Without working locks one log was ingested twice, with other tags the second
    # time: it counts once, with the tags of its first ingest, however it is read.
    history.ingest(_night(1), tmp_path, tags={"cluster": "a"}, now=NOW)
    (tmp_path / ".ncclparse.lock").unlink()
    later = NOW + dt.timedelta(hours=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(history, "_present_keys", lambda *where: set())
        history.ingest(_night(1), tmp_path, tags={"cluster": "b"}, now=later)
    everything = history.read_history(tmp_path)
    assert everything.num_rows == 62
    assert history.read_history(tmp_path, tags={"cluster": "a"}).num_rows == 62
    assert history.read_history(tmp_path, tags={"cluster": "b"}).num_rows == 0
    assert history.select_tags(everything, {"cluster": "b"}).num_rows == 0
    assert history.has_tags(everything, {}).to_pylist() == [True] * 62


# --- histories that cannot be written, locked or read, and killed ingests -----------


@pytest.mark.parametrize(
    "code", [errno.ENOLCK, errno.EOPNOTSUPP], ids=["ENOLCK", "EOPNOTSUPP"]
)
def test_file_system_without_locks_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    # Lustre without -o flock, NFS without a lock service: flock() fails.
    def no_locks(fd: int, operation: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr("ncclparse.store.history.fcntl.flock", no_locks)
    with pytest.raises(ncclparse.NcclParseError) as caught:
        history.ingest(_night(1), tmp_path / "h", now=NOW)
    assert str(caught.value) == (
        f"{tmp_path / 'h'}: cannot ingest: cannot lock .ncclparse.lock "
        f"({os.strerror(code)}); its file system does not provide file locks (e.g. "
        "NFS without a lock service, Lustre mounted without -o flock): keep the "
        "history on a file system with locks, such as a local disk, or run without "
        "the lock (--no-lock), one ingest at a time"
    )
    assert not list((tmp_path / "h").rglob("*.parquet"))


def test_read_only_history_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history.ingest(_night(1), tmp_path, now=NOW)
    opened = Path.open

    def read_only(path: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "r" not in mode or "+" in mode:  # as a read-only mount answers writes
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return opened(path, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", read_only)
    with pytest.raises(ncclparse.NcclParseError) as caught:
        history.ingest(_night(2), tmp_path, now=NOW)
    assert str(caught.value) == (
        f"{tmp_path}: cannot ingest: the history directory is not writable "
        "(Read-only file system); make it writable for this user, or give a "
        "directory on a writable file system"
    )
    monkeypatch.undo()
    assert history.read_history(tmp_path).num_rows == 62  # still readable


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes whatever the mode")
def test_history_without_write_permission_is_a_clear_error(tmp_path: Path) -> None:
    history.ingest(_night(1), tmp_path / "h", now=NOW)
    (tmp_path / "h" / ".ncclparse.lock").unlink()
    (tmp_path / "h").chmod(0o555)
    try:
        with pytest.raises(ncclparse.NcclParseError, match="not writable"):
            history.ingest(_night(2), tmp_path / "h", now=NOW)
    finally:
        (tmp_path / "h").chmod(0o755)


def test_cli_reports_a_lock_failure_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runner: CliRunner
) -> None:
    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr("ncclparse.store.history.fcntl.flock", no_locks)
    args = ["ingest", str(derive.HEALTHY), "--history", str(tmp_path), "-q"]
    done = runner.invoke(cli, args)
    assert done.exit_code == 4  # infrastructure: the logs are fine
    assert done.stderr.startswith(f"Error: {tmp_path}: cannot ingest: cannot lock ")
    assert "Traceback" not in done.output
    assert len(done.stderr.splitlines()) == 1


_KILLED = """
import os, signal, sys
from pathlib import Path
import ncclparse
from ncclparse.store import history

def killed(handle, rows, additions):  # half a file written, then SIGKILL: no clean-up runs
    handle.write(b"PAR1" + bytes(1000))
    handle.flush()
    os.kill(os.getpid(), signal.SIGKILL)

history._write = killed
history.ingest(ncclparse.parse_many([sys.argv[1]]), Path(sys.argv[2]))
"""


def test_stale_temporary_of_a_killed_ingest_is_removed(tmp_path: Path) -> None:
    # A real kill -9 in the middle of writing.
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED, str(derive.HEALTHY), str(tmp_path)],
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL
    (left,) = tmp_path.glob("date=*/.*.tmp")
    assert left.name.startswith(".")
    assert ".parquet." in left.name
    # Another ingest at once: the file may belong to a live writer on a host whose
    # locks this one does not see, so it stays until it is an hour old.
    assert history.ingest(_night(1), tmp_path, now=NOW).removed == ()
    assert left.exists()
    hour_ago = time.time() - history.STALE_AFTER - 1
    os.utime(left, (hour_ago, hour_ago))
    fresh = left.with_name(".20260301T020000-0123456789abcdef.parquet.x1y2z3.tmp")
    fresh.write_bytes(b"PAR1")  # as if a live ingest were writing it
    done = history.ingest(_night(2), tmp_path, now=NOW)
    assert done.removed == (left,)
    assert not left.exists()
    assert fresh.exists()
    assert done.added == ("night2.log",)
    # The killed ingest added nothing: its log can be ingested now.
    again = history.ingest(ncclparse.parse_many([derive.HEALTHY]), tmp_path, now=NOW)
    assert again.added == (str(derive.HEALTHY),)


def _corrupt_pages(path: Path, column: str) -> None:
    """Overwrite the data of ``column``'s pages, keeping the footer readable."""
    chunk = pq.read_metadata(path).row_group(0)
    (meta,) = [
        chunk.column(i)
        for i in range(chunk.num_columns)
        if chunk.column(i).path_in_schema == column
    ]
    start = meta.dictionary_page_offset or meta.data_page_offset
    data = bytearray(path.read_bytes())
    data[start + 30 : start + meta.total_compressed_size - 5] = b"U" * (
        meta.total_compressed_size - 35
    )
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ("pages", "Corrupt snappy compressed data."),
        ("garbage", "Parquet magic bytes not found in footer. Either the file is "
                    "corrupted or this is not a parquet file."),
    ],
)  # fmt: skip
def test_ingest_refuses_a_history_with_a_corrupt_file(
    tmp_path: Path, damage: str, why: str
) -> None:
    first = history.ingest(_night(1), tmp_path, now=NOW)
    assert first.path is not None
    if damage == "pages":  # the footer and ingest_key are intact: the key look-up
        _corrupt_pages(first.path, "time_us")  # alone passed it
    else:
        first.path.write_bytes(b"not parquet\n")
    expected = (
        f"{tmp_path}: cannot read history: {first.path} is not a readable Parquet "
        f"file ({why}); move it out of the history directory (or restore it from "
        "a backup) and run again"
    )
    with pytest.raises(history.HistoryError) as refused:
        history.ingest(_night(2), tmp_path, now=NOW)
    assert str(refused.value) == expected
    assert isinstance(refused.value, ncclparse.InputError)  # as it always was
    assert list(tmp_path.rglob("*.parquet")) == [first.path]  # nothing added
    # read_history and check's scan of the window read it: the same message.
    with pytest.raises(history.HistoryError) as unread:
        history.read_history(tmp_path)
    assert str(unread.value) == expected

    def baseline() -> None:  # a bad footer fails the scan, bad pages the rows
        view = history.scan_history(tmp_path, since=NOW.date().isoformat())
        select_baseline(view, HistoryPolicy(), today=NOW.date())

    with pytest.raises(history.HistoryError) as scanned:
        baseline()
    assert str(scanned.value) == expected
    # ingest on the command line: one line, exit 4 (infrastructure), nothing added.
    args = ["ingest", str(derive.HEALTHY), "--history", str(tmp_path), "-q"]
    done = CliRunner().invoke(cli, [*args, "--date", "2026-03-05"])
    assert (done.exit_code, done.stderr) == (4, f"Error: {expected}\n")
    assert list(tmp_path.rglob("*.parquet")) == [first.path]
    # An ingest dated beyond LOOKBACK_DAYS reads nothing of that partition: its cost
    # does not grow with the history (check still reads what it uses of every file).
    far = NOW.date() + dt.timedelta(days=history.LOOKBACK_DAYS + 1)
    done = CliRunner().invoke(cli, [*args, "--date", far.isoformat()])
    assert done.exit_code == 0, done.output
    assert len(list(tmp_path.rglob("*.parquet"))) == 2


def test_a_lock_held_past_the_timeout_is_a_clear_error(tmp_path: Path) -> None:
    import fcntl

    history.ingest(_night(1), tmp_path, now=NOW)
    with (tmp_path / ".ncclparse.lock").open("a") as holder:
        fcntl.flock(holder.fileno(), fcntl.LOCK_EX)  # another ingest, hung
        with pytest.raises(history.HistoryError) as caught:
            history.ingest(_night(2), tmp_path, now=NOW, lock_timeout=0.2)
        assert str(caught.value) == (
            f"{tmp_path}: cannot ingest: another ingest has held .ncclparse.lock for "
            "0.2 s; wait for it (or find the one that hangs), or raise --lock-timeout"
        )
        # Lock-free (a file system without flock): writes beside the holder.
        done = history.ingest(_night(2), tmp_path, now=NOW, lock=False)
        assert done.added == ("night2.log",)
    # Released: a locked ingest goes ahead (and finds the log already there).
    again = history.ingest(_night(2), tmp_path, now=NOW, lock_timeout=0.2)
    assert (again.added, again.skipped) == ((), ("night2.log",))


def test_lock_free_ingests_of_one_log_are_read_once(tmp_path: Path) -> None:
    # Two hosts ingest the same log at once, neither seeing the other's file: both
    # write it; every reader keeps the earliest ingest's rows.
    barrier = threading.Barrier(2)
    real = history._present_keys

    def racing(*where: Any) -> set[str]:
        found = real(*where)
        barrier.wait(timeout=10)  # both looked before either wrote
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(history, "_present_keys", racing)
        threads = [
            threading.Thread(
                target=history.ingest,
                args=(_night(1), tmp_path),
                kwargs={"now": NOW + dt.timedelta(seconds=k), "lock": False},
            )
            for k in (0, 1)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(list(tmp_path.rglob("*.parquet"))) == 2
    table = history.read_history(tmp_path)
    assert table.num_rows == 62
    assert set(table["ingested_at"].to_pylist()) == {NOW}  # the earlier one
    view = history.scan_history(tmp_path)
    assert view.runs.num_rows == 1
    assert view.rows_of(NOW.date().isoformat()).num_rows == 62
    assert len(view.later) == 1


def test_cli_lock_options(tmp_path: Path, runner: CliRunner) -> None:
    import fcntl

    args = ["ingest", str(derive.HEALTHY), "--history", str(tmp_path), "-q"]
    tmp_path.mkdir(exist_ok=True)
    with (tmp_path / ".ncclparse.lock").open("a") as holder:
        fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
        waited = runner.invoke(cli, [*args, "--lock-timeout", "0.1"])
        assert (waited.exit_code, waited.stderr) == (
            4,
            f"Error: {tmp_path}: cannot ingest: another ingest has held "
            ".ncclparse.lock for 0.1 s; wait for it (or find the one that hangs), "
            "or raise --lock-timeout\n",
        )
        free = runner.invoke(cli, [*args, "--no-lock"])
        assert free.exit_code == 0, free.output
        assert "1 added (62 rows)" in free.stderr


def _strip_footer_runs(path: Path, value: bytes | None = None) -> None:
    """Rewrite the file at ``path`` as an older version wrote it (no runs in its
    footer) or, with ``value``, with that instead of the runs."""
    table = pq.read_table(path)
    metadata = dict(table.schema.metadata or {})
    del metadata[history._RUNS_KEY]
    if value is not None:
        metadata[history._RUNS_KEY] = value
    pq.write_table(table.replace_schema_metadata(metadata), path)


def _account(view: history.HistoryView) -> tuple[Any, ...]:
    runs = view.runs.sort_by([("ingest_key", "ascending"), ("run", "ascending")])
    return runs.to_pylist(), view.tags, view.dates, sorted(view.later.to_pylist())


def test_a_scan_reads_runs_from_footers_as_from_the_columns(tmp_path: Path) -> None:
    # Four nights, two clusters, one log ingested twice (a later ingest) and one cut
    # short (its run not usable): the account read from the footers equals the one
    # read from the columns, whichever files carry footers.
    def add(result: ncclparse.ParseResult, cluster: str, days: int) -> None:
        at = NOW - dt.timedelta(days=days)
        history.ingest(result, tmp_path, tags={"cluster": cluster}, now=at, lock=False)

    add(_night(1), "a", 3)
    add(_night(2), "b", 2)
    cut = derive.cut(derive.healthy(), 2**30)
    add(ncclparse.parse(io.StringIO(cut), name="cut.log"), "a", 1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(history, "_present_keys", lambda *where: set())
        add(_night(1), "a", 0)  # the same log again, as a racing writer would
    files = sorted(tmp_path.rglob("*.parquet"))
    assert len(files) == 4
    from_footers = history.scan_history(tmp_path)
    assert len(from_footers.later) == 1
    assert sorted(bool(u) for u in from_footers.runs["usable"].to_pylist()) == [
        False,
        True,
        True,
    ]
    assert sorted(map(str, from_footers.tags.values())) == [
        "{'cluster': 'a'}",
        "{'cluster': 'a'}",
        "{'cluster': 'a'}",
        "{'cluster': 'b'}",
    ]
    _strip_footer_runs(files[0])
    _strip_footer_runs(files[2], b"not base64 at all!")
    mixed = history.scan_history(tmp_path)
    for path in (files[1], files[3]):
        _strip_footer_runs(path)
    from_columns = history.scan_history(tmp_path)
    assert _account(from_footers) == _account(mixed) == _account(from_columns)


def test_compact_gives_a_file_without_footer_runs_its_runs(
    tmp_path: Path, runner: CliRunner
) -> None:
    history.ingest(_night(1), tmp_path, now=NOW)
    (path,) = tmp_path.rglob("*.parquet")
    before = history.scan_history(tmp_path)
    _strip_footer_runs(path)
    done = runner.invoke(cli, ["history", "compact", "--history", str(tmp_path)])
    assert done.exit_code == 0, done.output
    (merged,) = tmp_path.rglob("*.parquet")
    assert merged.name.startswith("compacted-")
    assert history._RUNS_KEY in (pq.read_schema(merged).metadata or {})
    assert _account(history.scan_history(tmp_path)) == _account(before)
    again = runner.invoke(cli, ["history", "compact", "--history", str(tmp_path)])
    assert again.exit_code == 0, again.output
    assert list(tmp_path.rglob("*.parquet")) == [merged]  # left as it is
