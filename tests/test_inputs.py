"""Command-line inputs: directories walked in order, hidden entries skipped; one side
of a comparison loaded from a table, a history directory or logs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import ncclparse
from ncclparse.errors import InputError
from ncclparse.health import history
from ncclparse.inputs import expand, load_measurements
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
