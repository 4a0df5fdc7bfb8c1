"""ingest, check and compact when the machine fails: a full disk or a read-only
history is exit 4 (docs/nightly.md, exit status), never exit 1 ("an input could
not be read"), and nothing half-written is left in the history."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ncclparse.cli.app import cli
from tests import _derive as derive

ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _disk_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file renamed into place (every whole file written) finds the disk full."""

    def full(*args: Any, **kwargs: Any) -> None:
        raise ENOSPC

    monkeypatch.setattr(os, "replace", full)


def _ingest(runner: CliRunner, history: Path, log: Path, *extra: str) -> Any:
    return runner.invoke(
        cli, ["ingest", str(log), "--history", str(history), "-q", *extra]
    )


def test_ingest_on_a_full_disk_exits_4(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = tmp_path / "history"
    _disk_full(monkeypatch)
    result = _ingest(runner, history, derive.HEALTHY)
    assert result.exit_code == 4, result.output
    said = result.stderr.splitlines()[-1]
    assert said.startswith(f"Error: {history}: cannot ingest: cannot write date=")
    assert said.endswith(": cannot write: No space left on device")
    assert [
        p for p in history.rglob("*") if p.is_file() and p.name != ".ncclparse.lock"
    ] == []


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_ingest_into_a_read_only_history_exits_4(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    history = tmp_path / "history"
    assert (
        _ingest(runner, history, derive.HEALTHY, "--date", "2026-01-01").exit_code == 0
    )
    real_open = Path.open

    def read_only(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if self.parent == history and "r" not in mode:
            raise OSError(code, os.strerror(code))
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", read_only)
    log = tmp_path / "tonight.log"
    log.write_text(derive.scale(derive.healthy(), derive.jitter(3)))
    result = _ingest(runner, history, log)
    assert result.exit_code == 4, result.output
    assert result.stderr.splitlines()[-1].startswith(
        f"Error: {history}: cannot ingest: the history directory is not writable "
        f"({os.strerror(code)})"
    )


def test_compact_on_a_full_disk_exits_4(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = tmp_path / "history"
    for night in range(2):  # two files in one partition: something to merge
        log = tmp_path / f"night{night}.log"
        log.write_text(derive.scale(derive.healthy(), derive.jitter(night)))
        assert _ingest(runner, history, log, "--date", "2026-01-01").exit_code == 0
    files = sorted(history.rglob("*.parquet"))
    _disk_full(monkeypatch)
    result = runner.invoke(cli, ["history", "compact", "--history", str(history)])
    assert result.exit_code == 4, result.output
    assert result.stderr.splitlines()[-1].endswith(
        ": cannot write: No space left on device"
    )
    assert sorted(history.rglob("*.parquet")) == files  # nothing lost


def test_check_on_a_full_disk_exits_4(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "check.json"
    _disk_full(monkeypatch)
    result = runner.invoke(cli, ["check", str(derive.HEALTHY), "--json", str(out)])
    assert result.exit_code == 4, result.output
    assert f"Error: {out}: cannot write: No space left on device" in result.stderr
    assert not out.exists()
