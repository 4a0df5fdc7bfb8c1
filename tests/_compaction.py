"""Histories for the compaction tests (tests/test_compaction.py, and on an object
store tests/test_object_store.py), and a compaction stopped at each of its steps:
in this process, or killed outright in a child process."""

from __future__ import annotations

import datetime as dt
import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pytest

import ncclparse
from ncclparse.store import history
from ncclparse.store.locations import Location
from tests import _derive as derive

ROOT = Path(__file__).resolve().parents[1]
NIGHT = dt.datetime(2026, 3, 1, 2, tzinfo=dt.UTC)
ORDER: list[tuple[str, Literal["ascending", "descending"]]] = [
    (name, "ascending")
    for name in ("date", "ingest_key", "ingest_id", "run", "size_bytes", "placement")
]


class Stopped(BaseException):
    """A compaction stopped where a kill would stop it (nothing cleans up)."""


def night(seed: int) -> ncclparse.ParseResult:
    jitter = derive.jitter(seed)
    text = derive.scale(derive.healthy(), jitter)
    return ncclparse.parse(io.StringIO(text), name=f"night{seed}.log")


def make_history(where: str | Path) -> pa.Table:
    """Three ingests on one night (three files) and one the night after, of which
    one log is ingested twice; returns read_history's rows, sorted."""
    for seed in (1, 2, 3):
        history.ingest(night(seed), where, now=NIGHT + dt.timedelta(minutes=seed))
    history.ingest(
        night(4), where, tags={"cluster": "b"}, now=NIGHT + dt.timedelta(days=1)
    )
    with pytest.MonkeyPatch.context() as patch:  # a racing writer's second copy
        patch.setattr(history, "_present_keys", lambda *where: set())
        history.ingest(night(2), where, now=NIGHT + dt.timedelta(minutes=9))
    return rows_of(where)


def rows_of(where: str | Path) -> pa.Table:
    return history.read_history(where).sort_by(ORDER)


def stop_at_delete(number: int) -> Callable[..., None]:
    """Location.delete that stops the compaction at its ``number``-th call (0: the
    first), after the merged file is written."""
    calls = iter(range(1_000_000))
    original = Location.delete

    def delete(self: Location, path: str) -> None:
        if next(calls) == number:
            raise Stopped
        original(self, path)

    return delete


# A compaction killed (SIGKILL) at STEP: "write" once the merged file's bytes are
# written but before it is published (renamed, or uploaded), "delete:N" before the
# N-th removal of a file it replaced (0: the first, just after it was published).
_KILLED = """
import os, signal, sys
import pyarrow.parquet as pq
from ncclparse.store import history
from ncclparse.store.locations import Location

where, step = sys.argv[1], sys.argv[2]
if step == "write":
    write = pq.write_table
    def write_then_die(*args, **kwargs):
        write(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
    pq.write_table = write_then_die
else:
    number, calls, delete = int(step.split(":")[1]), [0], Location.delete
    def delete_or_die(self, path):
        if calls[0] == number:
            os.kill(os.getpid(), signal.SIGKILL)
        calls[0] += 1
        delete(self, path)
    Location.delete = delete_or_die
history.compact(where)
"""


def kill_compaction(where: str | Path, step: str) -> None:
    """Run a compaction of ``where`` in a child process killed at ``step``."""
    done = subprocess.run(
        [sys.executable, "-c", _KILLED, str(where), step],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == -9, done.stderr


def compact_in_child(where: str | Path, *options: str) -> subprocess.Popen[str]:
    """``ncclparse history compact`` of ``where``, started in a child process."""
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from ncclparse.cli.app import cli; cli()",
            *("history", "compact", "--history", str(where), *options),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


# Kill points of make_history's first night (four files): every step.
KILL_STEPS = ("write", "delete:0", "delete:1", "delete:2", "delete:3")
