"""Tables on disk: round trips keep types and metadata; writes are atomic."""

from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path

import pyarrow as pa
import pytest

import ncclparse
from ncclparse import schema
from ncclparse.store import atomic
from ncclparse.store import tables as storage
from tests.conftest import FIXTURES

LOG = (
    FIXTURES
    / "nccl"
    / "nccltests-214_sendrecv_a40_2node_sum_redop_inplace_NA_truncated.log"
)


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_round_trip_keeps_types_values_and_metadata(
    tmp_path: Path, suffix: str
) -> None:
    result = ncclparse.parse(LOG)
    for table in (result.measurements, result.runs):
        path = tmp_path / f"t{suffix}"
        storage.write_table(table, path)
        back = storage.read_table(path)
        assert back.schema.equals(table.schema, check_metadata=True)
        assert back.equals(table)
    assert schema.conform(back, schema.RUNS_SCHEMA).num_rows == 1


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "m.parquet"
    target.write_text("previous")

    def interrupted_write() -> None:
        with atomic.atomic_output(target, binary=True) as out:
            out.write(b"half")
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        interrupted_write()
    assert target.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["m.parquet"]


def test_a_fifo_is_written_not_replaced(tmp_path: Path) -> None:
    """``report -o`` a FIFO (as ``/dev/stdout`` or ``/dev/null`` are no regular
    files): the page goes through it, and it stays a FIFO. It was renamed over:
    as root, ``-o /dev/null`` replaced the machine's /dev/null with the page."""
    fifo = tmp_path / "page.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, before the writer
    got = bytearray()
    try:
        with atomic.atomic_output(fifo, binary=False) as out:
            out.write("<!doctype html>\n")
        while chunk := os.read(reader, 65536):
            got += chunk
    finally:
        os.close(reader)
    assert bytes(got) == b"<!doctype html>\n"
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["page.fifo"]


def test_a_symbolic_link_is_followed_and_kept(tmp_path: Path) -> None:
    """``-o latest.html``, a link to tonight's page: the page it names is
    replaced, the link stays a link (it was replaced by a file)."""
    (tmp_path / "2026-11-29.html").write_text("yesterday")
    link = tmp_path / "latest.html"
    link.symlink_to("2026-11-29.html")
    with atomic.atomic_output(link, binary=False) as out:
        out.write("tonight")
    assert link.is_symlink()
    assert (tmp_path / "2026-11-29.html").read_text() == "tonight"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "2026-11-29.html",
        "latest.html",
    ]


def test_a_device_that_is_full_is_named(tmp_path: Path) -> None:
    """A device written in place says why it failed (a character device of
    Linux's /dev/full, reached through a link so the test never writes over
    /dev itself)."""
    if not (os.path.exists("/dev/full") and stat.S_ISCHR(os.stat("/dev/full").st_mode)):
        pytest.skip("no /dev/full device on this system")
    link = tmp_path / "full"
    link.symlink_to("/dev/full")
    with (
        pytest.raises(ncclparse.NcclParseError) as raised,
        atomic.atomic_output(link, binary=False) as out,
    ):
        out.write("page")
    assert str(raised.value) == f"{link}: cannot write: No space left on device"
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_unwritable_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ncclparse.NcclParseError, match="cannot write"):
        storage.write_table(
            ncclparse.parse(LOG).measurements, tmp_path / "missing" / "m.parquet"
        )


def test_conform_rejects_other_schema_versions() -> None:
    table = ncclparse.parse(LOG).measurements
    old = table.replace_schema_metadata({schema.VERSION_KEY: b"0"})
    with pytest.raises(ncclparse.SchemaError) as caught:
        schema.conform(old, schema.MEASUREMENTS_SCHEMA)
    assert str(caught.value) == (
        "table was written with ncclparse schema 0; this version reads schema 1: "
        "upgrade ncclparse"
    )


def test_streamed_batches_hold_exactly_the_rows_of_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ncclparse.parsers import _model
    from tests.conftest import NCCL_LOGS

    whole = ncclparse.parse_many(NCCL_LOGS)
    monkeypatch.setattr(_model, "BATCH_ROWS", 10)
    monkeypatch.setattr(_model, "BATCH_RUNS", 3)
    batches: list[pa.RecordBatch] = []
    streamed = ncclparse.parse_many(NCCL_LOGS, on_batch=batches.append)
    assert streamed.measurements.num_rows == 0
    assert len(batches) > 10
    assert pa.Table.from_batches(batches).equals(whole.measurements)
    assert streamed.runs.equals(whole.runs)


def test_written_files_get_the_usual_mode_not_a_private_one(tmp_path: Path) -> None:
    import os

    target = tmp_path / "m.csv"
    storage.write_table(ncclparse.parse(LOG).measurements, target)
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask


def test_stale_temporaries_are_removed_and_others_kept(tmp_path: Path) -> None:
    now = 1_800_000_000.0
    stale = tmp_path / ".m.parquet.abc123.tmp"  # as atomic_output names them
    fresh = tmp_path / ".m.parquet.def456.tmp"
    kept = [tmp_path / ".ncclparse.lock", tmp_path / "m.parquet", tmp_path / "x.tmp"]
    for path in (stale, fresh, *kept):
        path.write_bytes(b"")
    os.utime(stale, (now - 3601, now - 3601))
    os.utime(fresh, (now - 3599, now - 3599))
    for path in kept:
        os.utime(path, (now - 86400, now - 86400))
    removed = atomic.remove_stale_temporaries(tmp_path, older_than=3600, now=now)
    assert removed == (stale,)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in (fresh, *kept)
    )


def test_the_temporary_of_an_abandoned_write_is_found(tmp_path: Path) -> None:
    # A writer killed mid-write never leaves the block: entered and abandoned here.
    writing = atomic.atomic_output(tmp_path / "m.parquet", binary=True)
    handle = writing.__enter__()
    handle.write(b"PAR1")
    handle.close()
    (temporary,) = tmp_path.iterdir()
    assert atomic.remove_stale_temporaries(tmp_path, older_than=60) == ()  # young
    later = temporary.stat().st_mtime + 61
    found = atomic.remove_stale_temporaries(tmp_path, older_than=60, now=later)
    assert found == (temporary,)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        ("m.parquet", b"not parquet\n",
         "Could not open Parquet input source '{path}': Parquet magic bytes not "
         "found in footer. Either the file is corrupted or this is not a parquet "
         "file."),
        ("m.arrow", b"ARROW1xx", "File is too small to be a well-formed file"),
    ],
)  # fmt: skip
def test_a_file_that_is_not_a_table_is_an_input_error(
    tmp_path: Path, name: str, content: bytes, why: str
) -> None:
    # pyarrow raises ArrowInvalid (a ValueError): `compare bad.parquet` gave a traceback.
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ncclparse.InputError) as caught:
        storage.read_table(path)
    assert str(caught.value) == f"{path}: cannot read table: " + why.format(path=path)


def test_a_parquet_write_error_in_the_writer_thread_reaches_the_caller() -> None:
    """Row groups are written by a thread: its error (here a full disk) is raised to
    the caller at its next write of a row group, not only at the end, and nothing
    hangs."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    table = ncclparse.parse(FIXTURES / "nccl" / _LOG).measurements
    rows = pa.concat_tables([table] * (3 * storage.ROW_GROUP_ROWS // table.num_rows))
    batches = rows.to_batches(max_chunksize=1_000)
    written = 0

    def write_all() -> None:
        nonlocal written
        with (
            open("/dev/full", "wb") as full,
            storage.batch_writer(full, rows.schema, "parquet") as write,
        ):
            for batch in batches:
                write(batch)
                written += 1

    with pytest.raises(OSError, match="No space left on device"):
        write_all()
    # The first row group failed in the thread; the write that makes the second
    # one full raised it.
    ends = list(itertools.accumulate(b.num_rows for b in batches))
    first = next(i for i, end in enumerate(ends) if end >= storage.ROW_GROUP_ROWS)
    second = next(
        i
        for i in range(first + 1, len(ends))
        if ends[i] - ends[first] >= storage.ROW_GROUP_ROWS
    )
    assert written == second < len(batches) - 1


_LOG = "superbench-testdata_reduce_a100_8gpu_c0_redop_root_cols_complete.log"


def test_append_block_separates_blocks_with_a_blank_line(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    atomic.append_block(path, "## one\n")
    atomic.append_block(path, "## two\n")
    path.write_text(path.read_text() + "no newline")
    atomic.append_block(path, "## three\n")
    assert path.read_text() == "## one\n\n## two\nno newline\n\n## three\n"


def test_a_failed_append_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Disk full half-way: the half block is cut off again."""
    path = tmp_path / "summary.md"
    path.write_text("## before\n")
    real = os.write

    def half_then_full(fd: int, data: bytes) -> int:
        if len(data) > 4:
            return real(fd, data[:4])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(ncclparse.NcclParseError) as raised:
        atomic.append_block(path, "## after\n")
    assert str(raised.value) == f"{path}: cannot append to it: No space left on device"
    assert path.read_text() == "## before\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="Linux's /dev/full")
def test_a_full_device_is_named_as_full() -> None:
    """``--markdown /dev/full`` said "Invalid argument": the device cannot be cut
    back, and that error hid the write's (found by the re-run of issue 30)."""
    with pytest.raises(ncclparse.NcclParseError) as raised:
        atomic.append_block(Path("/dev/full"), "## after\n")
    assert (
        str(raised.value) == "/dev/full: cannot append to it: No space left on device"
    )
