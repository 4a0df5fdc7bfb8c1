"""`ncclparse parse` under faults: bad inputs, unwritable outputs, interruption.

Exit status: 0 all inputs parsed and written, 1 an input could not be read or
recognised (the others are still written) or an output could not be written, 2 a
usage error. A failed or interrupted write leaves no partial file: no ``.tmp``
remains and an output that existed before is untouched.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import IO, Any

import pyarrow.csv as pa_csv
import pytest
from click.testing import CliRunner

from ncclparse.cli.app import cli
from ncclparse.store import tables as storage
from tests.conftest import NCCL_LOGS

GOOD = [p for p in NCCL_LOGS if p.name.endswith("_complete.log")][:2]
BEFORE = b"source,line\nbefore,1\n"


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    directory = tmp_path / "logs"
    directory.mkdir()
    for path in GOOD:
        shutil.copy(path, directory / path.name)
    return directory


def test_good_inputs_exit_0(runner: CliRunner, logs: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.csv"
    result = runner.invoke(cli, ["parse", str(logs), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert pa_csv.read_csv(out).num_rows > 0
    assert _leftovers(tmp_path) == []


def test_missing_input_exit_1_others_written(
    runner: CliRunner, logs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "m.csv"
    missing = tmp_path / "nope.log"
    result = runner.invoke(cli, ["parse", str(missing), str(logs), "-o", str(out)])
    assert result.exit_code == 1
    assert f"{missing}: no such file or directory" in result.stderr
    sources = set(pa_csv.read_csv(out).column("source").to_pylist())
    assert sources == {str(logs / p.name) for p in GOOD}


def test_bad_file_among_good_ones(
    runner: CliRunner, logs: Path, tmp_path: Path
) -> None:
    bad = logs / "b_bad.log"
    bad.write_bytes(b"\x00\xff garbage that is no benchmark log\n" * 3)
    empty = logs / "c_empty.log"
    empty.write_bytes(b"")
    out = tmp_path / "m.parquet"
    runs = tmp_path / "r.parquet"
    result = runner.invoke(
        cli, ["parse", str(logs), "-o", str(out), "--runs", str(runs)]
    )
    assert result.exit_code == 1
    assert f"Error: {bad}:1: not a recognised benchmark log" in result.stderr
    assert f"Error: {empty}: empty input" in result.stderr
    table = storage.read_table(out)
    assert set(table.column("source").to_pylist()) == {str(logs / p.name) for p in GOOD}
    assert storage.read_table(runs).num_rows >= len(GOOD)
    assert _leftovers(tmp_path) == []


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() == 0,
    reason="root reads files whatever their mode (see test_unreadable_input_simulated)",
)
def test_unreadable_input_chmod(runner: CliRunner, logs: Path, tmp_path: Path) -> None:
    locked = logs / "locked.log"
    shutil.copy(GOOD[0], locked)
    locked.chmod(0)
    try:
        result = runner.invoke(
            cli, ["parse", str(locked), "-o", str(tmp_path / "m.csv")]
        )
    finally:
        locked.chmod(0o644)
    assert result.exit_code == 1
    assert f"{locked}: cannot read: Permission denied" in result.stderr


def test_unreadable_input_simulated(
    runner: CliRunner, logs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As root chmod 000 does not stop reading: make open() fail the way it would."""
    locked = logs / "a_locked.log"
    shutil.copy(GOOD[0], locked)
    real_open = Path.open

    def deny(self: Path, *args: Any, **kwargs: Any) -> IO[Any]:
        # Any: the arguments go through to Path.open unchanged, whatever its overload.
        if self.name == locked.name:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        opened: IO[Any] = real_open(self, *args, **kwargs)
        return opened

    monkeypatch.setattr(Path, "open", deny)
    out = tmp_path / "m.csv"
    result = runner.invoke(cli, ["parse", str(logs), "-o", str(out)])
    assert result.exit_code == 1
    assert f"Error: {locked}: cannot read: Permission denied" in result.stderr
    sources = set(pa_csv.read_csv(out).column("source").to_pylist())
    assert sources == {str(logs / p.name) for p in GOOD}


def test_a_directory_where_a_file_is_expected(
    runner: CliRunner, logs: Path, tmp_path: Path
) -> None:
    target = tmp_path / "out.csv"
    target.mkdir()
    result = runner.invoke(cli, ["parse", str(logs), "-o", str(target)])
    assert result.exit_code == 2  # click refuses a directory for -o
    assert target.is_dir()


@pytest.mark.parametrize("where", ["missing-dir", "under-a-file"])
def test_output_in_a_directory_that_cannot_hold_it(
    runner: CliRunner, logs: Path, tmp_path: Path, where: str
) -> None:
    if where == "missing-dir":
        out = tmp_path / "no" / "such" / "m.parquet"
    else:
        (tmp_path / "afile").write_text("x")
        out = tmp_path / "afile" / "m.parquet"
    result = runner.invoke(cli, ["parse", str(logs), "-o", str(out)])
    assert result.exit_code == 1
    assert f"Error: {out}: cannot write: " in result.stderr
    assert "Traceback" not in result.output
    assert not out.exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() == 0,
    reason="root writes into a directory whatever its mode (see the ENOSPC test)",
)
def test_unwritable_output_directory(
    runner: CliRunner, logs: Path, tmp_path: Path
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        out = locked / "m.csv"
        result = runner.invoke(cli, ["parse", str(logs), "-o", str(out)])
        assert result.exit_code == 1
        assert f"{out}: cannot write: Permission denied" in result.stderr
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o700)


@pytest.mark.parametrize("fault", ["disk-full", "interrupted"])
@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_failed_write_leaves_no_partial_file(
    runner: CliRunner,
    logs: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
    suffix: str,
) -> None:
    out = tmp_path / f"m{suffix}"
    out.write_bytes(BEFORE)

    def failing(fd: int) -> None:  # the table is out, but not yet on disk
        assert os.fstat(fd).st_size > 0
        if fault == "disk-full":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", failing)
    result = runner.invoke(cli, ["parse", str(logs), "-o", str(out)])
    assert result.exit_code == 1
    if fault == "disk-full":
        assert f"Error: {out}: cannot write: No space left on device" in result.stderr
    else:
        assert "Aborted" in result.stderr
    assert out.read_bytes() == BEFORE  # untouched
    assert _leftovers(tmp_path) == []


def test_failed_runs_output_keeps_the_old_runs_file(
    runner: CliRunner, logs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "m.csv"
    runs = tmp_path / "nodir" / "r.csv"
    result = runner.invoke(
        cli, ["parse", str(logs), "-o", str(out), "--runs", str(runs)]
    )
    assert result.exit_code == 1
    assert f"{runs}: cannot write" in result.stderr
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "args",
    [
        ["parse", "--no-such-option"],
        ["parse", "--format", "xml", "x.log"],
        ["no-such-command"],
    ],
)
def test_usage_errors_exit_2(runner: CliRunner, args: list[str]) -> None:
    result = runner.invoke(cli, args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_unknown_output_extension_exit_1(
    runner: CliRunner, logs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "m.xlsx"
    result = runner.invoke(cli, ["parse", str(logs), "-o", str(out)])
    assert result.exit_code == 1
    assert "cannot tell the format from the extension" in result.stderr
    assert not out.exists()


def test_hostile_stdin(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["parse", "-q", "-"], input=b"\x00\xff" * 1000)
    assert result.exit_code == 1
    assert "Error: -:" in result.stderr


def test_a_path_with_a_nul_byte_is_an_input_error() -> None:
    # Found by the atheris fuzzer (fuzz/): a str without a newline is a path, and a
    # NUL byte made pathlib raise a bare ValueError.
    import ncclparse

    with pytest.raises(ncclparse.InputError) as caught:
        ncclparse.parse("run\x00.log")
    assert str(caught.value) == ("run\\x00.log: not a valid path (embedded null byte)")


LONG = "x" * 300  # over NAME_MAX (255): stat() fails with ENAMETOOLONG


@pytest.mark.parametrize("command", ["parse", "analyze", "report", "compare"])
def test_a_name_too_long_for_the_os_is_an_input_error(
    runner: CliRunner, logs: Path, tmp_path: Path, command: str
) -> None:
    # Found by hand: pathlib's is_symlink/is_dir raise on ENAMETOOLONG, which gave
    # a traceback (and, under `parse -o`, "cannot write" naming the output).
    out = tmp_path / ("r.html" if command == "report" else "m.csv")
    args = {
        "parse": ["parse", LONG, str(logs), "-o", str(out)],
        "analyze": ["analyze", LONG, str(logs), "-o", str(out)],
        "report": ["report", LONG, str(logs), "-o", str(out)],
        "compare": ["compare", str(logs), LONG],
    }[command]
    result = runner.invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"{LONG}: cannot read: File name too long" in result.stderr
    if command == "parse":
        sources = set(pa_csv.read_csv(out).column("source").to_pylist())
        assert sources == {str(logs / p.name) for p in GOOD}
