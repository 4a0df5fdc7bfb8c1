"""Command-line inputs: directories walked in order, hidden entries skipped and what is
not a regular file named (never silently), a directory without a log an error; one
side of a comparison loaded from a table, a history directory or logs. FIFOs named on
the command line: tests/test_check_fail_closed.py."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import ncclparse
from ncclparse.errors import InputError
from ncclparse.health import history
from ncclparse.inputs import Note, expand, load_measurements
from ncclparse.storage import write_table
from tests import _derive as derive


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
