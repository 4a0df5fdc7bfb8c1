"""Command-line inputs: directories walked in order, hidden entries skipped and what is
not a regular file named (never silently), a directory without a log an error; one
side of a comparison loaded from a table, a history directory or logs; compressed
logs (gzip, xz, zstd) read as they are decompressed. FIFOs named on the command line:
tests/test_check_fail_closed.py; what walks skip as not logs, and --include/--exclude:
tests/test_input_filters.py."""

from __future__ import annotations

import errno
import gzip
import io
import lzma
import os
import shutil
import subprocess
import sys
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pytest
from click.testing import CliRunner

import ncclparse
from ncclparse.cli import cli
from ncclparse.errors import InputError
from ncclparse.inputs.sides import load_measurements
from ncclparse.inputs.walk import Note, expand
from ncclparse.store import history
from ncclparse.store.tables import write_table
from tests import _derive as derive

FIXTURES = Path(__file__).parent / "fixtures"


def test_directories_are_walked_in_order_without_hidden_entries(
    tmp_path: Path,
) -> None:
    for name in ("b.log", "a/c.log", ".hidden/d.log", "a/.e.log"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x\n")
    found = list(expand((str(tmp_path), str(tmp_path / "missing.log"))))
    names = [item[1] for item in found if isinstance(item, tuple)]
    assert names == [str(tmp_path / "a" / "c.log"), str(tmp_path / "b.log")]
    [missing] = [item for item in found if isinstance(item, InputError)]
    assert str(missing) == f"{tmp_path / 'missing.log'}: no such file or directory"


def test_a_side_is_a_table_a_history_or_logs(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(derive.HEALTHY, logs / "night.log")
    parsed = ncclparse.parse_many([logs / "night.log"])
    write_table(parsed.measurements, tmp_path / "t.parquet")
    history.ingest(parsed, tmp_path / "hist")
    for side in (logs, tmp_path / "t.parquet", tmp_path / "hist"):
        table = load_measurements(str(side))
        assert table.num_rows == 62, side
        assert table.column("size_bytes")[-1].as_py() == 8 * 2**30


def test_an_unreadable_side_raises_naming_it(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(ncclparse.UnknownLogFormatError, match=r"notes\.txt:1"):
        load_measurements(str(tmp_path / "notes.txt"))


def test_a_walk_names_what_it_skips(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    (logs / "sub" / "b.log").write_text("x\n")
    (logs / ".c.log").write_text("x\n")
    os.mkfifo(logs / "a.fifo")
    (logs / "latest").symlink_to("sub")
    (logs / "z.log").symlink_to(logs / "sub" / "b.log")
    notes: list[Note] = []
    found = list(expand((str(logs),), notes))
    assert found == [
        (logs / "sub" / "b.log", str(logs / "sub" / "b.log")),
        (logs / "z.log", str(logs / "z.log")),  # a link to a file is a log
    ]
    assert notes == [
        Note(
            str(logs),
            f"{logs}: skipped 2 entries that are not a regular file: {logs}/a.fifo "
            f"(FIFO), {logs}/latest (symbolic link to a directory, not followed)",
        )
    ]


def test_notes_go_to_stderr_when_not_collected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.log").write_text("x\n")
    os.mkfifo(tmp_path / "p")
    assert len(list(expand((str(tmp_path),)))) == 1
    assert capsys.readouterr().err == (
        f"Note: {tmp_path}: skipped 1 entry that is not a regular file: "
        f"{tmp_path}/p (FIFO)\n"
    )


@pytest.mark.parametrize(
    ("hidden", "fifos", "said"),
    [
        (0, 0, ""),
        (1, 0, " (1 hidden entry skipped)"),
        (2, 1, " (2 hidden entries and 1 entry not a regular file skipped)"),
        (0, 2, " (2 entries not a regular file skipped)"),
    ],
)
def test_a_directory_without_a_log_is_an_error(
    tmp_path: Path, hidden: int, fifos: int, said: str
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(hidden):
        (logs / f".h{i}").mkdir()
        (logs / f".h{i}" / "a.log").write_text("x\n")
    for i in range(fifos):
        os.mkfifo(logs / f"p{i}")
    notes: list[Note] = []
    [error] = [e for e in expand((str(logs),), notes) if isinstance(e, InputError)]
    assert str(error) == f"{logs}: directory holds no log file{said}"
    assert len(notes) == (1 if fifos else 0)


def test_a_broken_link_and_an_unreadable_directory_are_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.log").write_text("x\n")
    (tmp_path / "gone.log").symlink_to(tmp_path / "nowhere.log")
    (tmp_path / "locked").mkdir()
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        # As root a mode of 000 does not stop reading: fail the way it would.
        if Path(path).name == "locked":
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    found = list(expand((str(tmp_path), str(tmp_path / "gone.log"))))
    assert [str(e) if isinstance(e, InputError) else e[1] for e in found] == [
        str(tmp_path / "a.log"),
        f"{tmp_path / 'gone.log'}: broken symbolic link (no such file)",
        f"{tmp_path / 'locked'}: cannot read directory: Permission denied",
        f"{tmp_path / 'gone.log'}: broken symbolic link (no such file)",
    ]


# --- compressed logs -------------------------------------------------------------
# Told by their first bytes and decompressed while read (streamed); the source keeps
# the file's path. A cut or corrupt archive is an InputError naming the file.
ONECCL = FIXTURES / "oneccl" / "v2021.14_allgather_np4.log"
IMB = FIXTURES / "imb" / "imb_bcast_reduce_rs_np4.log"


def _zstd(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    return cast("bytes", zstandard.ZstdCompressor().compress(data))


COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gz": gzip.compress,
    "xz": lzma.compress,
    "zst": _zstd,
}


def _without_source(table: pa.Table) -> pa.Table:
    return table.drop_columns(["source"])


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
@pytest.mark.parametrize("log", [derive.HEALTHY, ONECCL, IMB], ids=lambda p: p.name)
def test_a_compressed_log_reads_as_the_log(
    tmp_path: Path, log: Path, suffix: str
) -> None:
    packed = tmp_path / f"{log.name}.{suffix}"
    packed.write_bytes(COMPRESSORS[suffix](log.read_bytes()))
    plain = ncclparse.parse(log)
    result = ncclparse.parse(packed)
    assert result.measurements.num_rows > 0
    assert _without_source(result.measurements).equals(
        _without_source(plain.measurements)
    )
    assert _without_source(result.runs).equals(_without_source(plain.runs))
    assert set(result.runs.column("source").to_pylist()) == {str(packed)}


def test_compression_is_told_by_content_not_name(tmp_path: Path) -> None:
    """A gzip file named .log, compressed standard input and a compressed binary
    stream (a library caller's) all read; a text file named .gz is text."""
    data = gzip.compress(derive.HEALTHY.read_bytes())
    (tmp_path / "night.log").write_bytes(data)
    shutil.copy(derive.HEALTHY, tmp_path / "text.gz")
    result = ncclparse.parse_many(
        [tmp_path / "night.log", tmp_path / "text.gz", (io.BytesIO(data), "bytes")]
    )
    assert result.failures == ()
    assert result.measurements.num_rows == 3 * 62


def test_compressed_standard_input_is_read(runner: CliRunner) -> None:
    data = lzma.compress(derive.HEALTHY.read_bytes())
    result = runner.invoke(cli, ["parse", "-"], input=data)
    assert result.exit_code == 0, result.output
    assert result.stderr == "-: nccl-tests, 1 run (1 complete), 62 rows, 0 warnings\n"


def test_compressed_process_substitution_is_read(tmp_path: Path) -> None:
    packed = tmp_path / "night.log.gz"
    packed.write_bytes(gzip.compress(derive.HEALTHY.read_bytes()))
    done = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m ncclparse parse <(cat "{packed}") -q'],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 63


def test_a_walk_reads_compressed_logs(tmp_path: Path) -> None:
    (tmp_path / "a.log.gz").write_bytes(gzip.compress(derive.HEALTHY.read_bytes()))
    (tmp_path / "b.log.xz").write_bytes(lzma.compress(ONECCL.read_bytes()))
    notes: list[Note] = []
    items = list(expand((str(tmp_path),), notes))
    assert [item[1] for item in items if isinstance(item, tuple)] == [
        str(tmp_path / "a.log.gz"),
        str(tmp_path / "b.log.xz"),
    ]
    result = ncclparse.parse_many(e for e in items if isinstance(e, tuple))
    assert result.failures == ()
    assert set(result.runs.column("tool").to_pylist()) == {
        "nccl-tests",
        "oneccl-benchmark",
    }


def _cut_gzip(first: bytes, second: bytes) -> bytes:
    """gzip of ``first + second`` cut halfway through ``second``'s compressed bytes
    (a sync flush after ``first``, so that all of it can be decompressed)."""
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    head = packer.compress(first) + packer.flush(zlib.Z_SYNC_FLUSH)
    rest = packer.compress(second) + packer.flush()
    return head + rest[: len(rest) // 2]


def test_a_truncated_gzip_is_an_error_naming_it_and_the_rest_is_read(
    tmp_path: Path,
) -> None:
    log = derive.HEALTHY.read_bytes()
    (tmp_path / "cut.log.gz").write_bytes(_cut_gzip(log, log))
    result = ncclparse.parse_many([tmp_path / "cut.log.gz", derive.HEALTHY])
    assert [str(e) for e in result.failures] == [
        f"{tmp_path / 'cut.log.gz'}: truncated gzip file: the compressed data ends "
        "before its end marker (`gzip -dc` recovers the text before the cut)"
    ]
    assert all(isinstance(e, InputError) for e in result.failures)
    # The whole file was shorter than what the parsers look at before reading a
    # run: nothing of it was parsed. The other input was.
    assert result.runs.column("source").to_pylist() == [str(derive.HEALTHY)]


def test_the_runs_parsed_before_a_cut_are_kept(tmp_path: Path) -> None:
    """Past the first 20,000 lines, the runs read before the cut stay, as for a read
    error; the run the cut falls in is not read."""
    log = derive.HEALTHY.read_bytes()
    copies = 20_000 // log.count(b"\n") + 2
    (tmp_path / "cut.log.gz").write_bytes(_cut_gzip(log * copies, log))
    result = ncclparse.parse_many([tmp_path / "cut.log.gz"])
    [error] = result.failures
    assert "truncated gzip file" in str(error)
    kept = result.runs.num_rows
    assert 0 < kept <= copies
    assert set(result.runs.column("status").to_pylist()) == {"complete"}
    assert result.measurements.num_rows == 62 * kept


@pytest.mark.parametrize(
    ("suffix", "damage", "said"),
    [
        ("gz", lambda d: d[:10] + b"\xff" * 16 + d[26:],
         "corrupt gzip data: Error -3 while decompressing data: invalid block type"),
        ("gz", lambda d: d[:-8] + b"\0" * 8, "corrupt gzip data: CRC check failed"),
        ("gz", lambda d: d[:5], "truncated gzip file"),
        ("xz", lambda d: d[:40] + b"\0" * 32 + d[72:],
         "corrupt xz data: Corrupt input data"),
        ("xz", lambda d: d[: len(d) // 2], "truncated xz file"),
    ],
)  # fmt: skip
def test_a_corrupt_archive_is_an_error_naming_it(
    tmp_path: Path, suffix: str, damage: Callable[[bytes], bytes], said: str
) -> None:
    packed = tmp_path / f"bad.log.{suffix}"
    packed.write_bytes(damage(COMPRESSORS[suffix](derive.HEALTHY.read_bytes())))
    result = ncclparse.parse_many([packed, derive.HEALTHY])
    [error] = result.failures
    assert isinstance(error, InputError)
    assert str(error).startswith(f"{packed}: {said}"), str(error)
    assert result.measurements.num_rows == 62  # the other input


def test_zstd_frames_cuts_and_corruption(tmp_path: Path) -> None:
    log = derive.HEALTHY.read_bytes()
    (tmp_path / "two.zst").write_bytes(_zstd(log) + _zstd(log))  # `cat a.zst b.zst`
    (tmp_path / "cut.zst").write_bytes(_zstd(log)[:-40])
    (tmp_path / "bad.zst").write_bytes(_zstd(log)[:6] + b"\xff" * 32)
    result = ncclparse.parse_many(
        [tmp_path / "two.zst", tmp_path / "cut.zst", tmp_path / "bad.zst"]
    )
    assert result.runs.column("status").to_pylist() == ["complete", "complete"]
    assert result.measurements.num_rows == 2 * 62
    assert [str(e).split(":", 2)[1] for e in result.failures] == [
        " truncated zstd file",
        " corrupt zstd data",
    ]


def test_zstd_without_zstandard_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "zstandard", None)  # import fails
    packed = tmp_path / "night.log.zst"
    packed.write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 16)  # a zstd magic number
    result = ncclparse.parse_many([packed, derive.HEALTHY])
    assert [str(e) for e in result.failures] == [
        f"{packed}: zstd-compressed: reading it needs the zstandard package (0.19 or "
        "later): pip install zstandard"
    ]
    assert result.measurements.num_rows == 62


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_a_decompression_bomb_is_read_in_bounded_memory(
    tmp_path: Path, suffix: str
) -> None:
    """80 MiB without a line end from a few kB: refused as not text once the line
    passes 64 MiB, never held whole."""
    bomb = tmp_path / f"bomb.{suffix}"
    bomb.write_bytes(COMPRESSORS[suffix](b"x" * (80 << 20)))
    assert bomb.stat().st_size < 200_000
    tracemalloc.start()
    try:
        result = ncclparse.parse_many([bomb])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [str(e) for e in result.failures] == [
        f"{bomb}: a line longer than 64 MiB characters: not a text log"
    ]
    assert peak < 64 << 20, peak
