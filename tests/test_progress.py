"""The progress line on standard error: drawn on a terminal (or when forced), never
otherwise, wiped at the end; the parsed tables are the same with it as without.

The clock is injected (ncclparse.inputs.progress.CLOCK, or a Progress's ``clock``): every
draw asserted here is decided by counted ticks, not by wall time.
"""

from __future__ import annotations

import gzip
import io
import itertools
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import ncclparse
from ncclparse.cli.app import cli
from ncclparse.inputs import progress
from ncclparse.inputs.progress import Progress, tracked
from ncclparse.parsers import Source
from tests.conftest import FIXTURES

NCCL = FIXTURES / "nccl"
ALLTOALL = NCCL / "superbench-testdata_alltoall_a100_8gpu_c0_blank_redop_complete.log"
BROADCAST = (
    NCCL
    / "superbench-testdata_broadcast_a100_8gpu_c0_root_col_ncclinfo_line_complete.log"
)
REDUCE = NCCL / "superbench-testdata_reduce_a100_8gpu_c0_redop_root_cols_complete.log"
SUMMARY = (
    "a.log: nccl-tests, 1 run (1 complete), 68 rows, 1 warning\n"
    "b.log: nccl-tests, 1 run (1 complete), 68 rows, 1 warning\n"
    "c.log.gz: nccl-tests, 1 run (1 complete), 68 rows, 1 warning\n"
)
# Every draw of the three files, one tick of the clock apart (sizes: 4679, 4733 and
# 1241 bytes, the last gzip-compressed: counted as read from the file).
LINES = [
    "[0/3 files] a.log: 0 B of 4.57 KiB read",
    "[0/3 files] a.log: 4.57 KiB of 4.57 KiB read",
    "[1/3 files] 4.57 KiB read                   ",
    "[1/3 files] b.log: 0 B of 4.62 KiB read",
    "[1/3 files] b.log: 4.62 KiB of 4.62 KiB read",
    "[2/3 files] 9.19 KiB read                   ",
    "[2/3 files] c.log.gz: 0 B of 1.21 KiB read",
    "[2/3 files] c.log.gz: 1.21 KiB of 1.21 KiB read",
    "[3/3 files] 10.4 KiB read                      ",
]
WIPE = "\r" + " " * len("[3/3 files] 10.4 KiB read") + "\r"


class Terminal(io.StringIO):
    """What a terminal was sent; says it is one."""

    def isatty(self) -> bool:
        return True


class Ticks:
    """A clock that returns the times it is given, then stays at the last."""

    def __init__(self, *times: float) -> None:
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0) if len(self.times) > 1 else self.times[0]


@pytest.fixture
def three_logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """a.log, b.log and c.log.gz (gzip) in the working directory."""
    shutil.copy(ALLTOALL, tmp_path / "a.log")
    shutil.copy(BROADCAST, tmp_path / "b.log")
    (tmp_path / "c.log.gz").write_bytes(gzip.compress(REDUCE.read_bytes(), mtime=0))
    assert [(tmp_path / n).stat().st_size for n in ("a.log", "b.log")] == [4679, 4733]
    assert (tmp_path / "c.log.gz").stat().st_size == 1241
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def every_tick_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock moves a second each time it is read: past the delay and the
    interval every time."""
    monkeypatch.setattr(progress, "CLOCK", itertools.count().__next__)


# --- the command line ---------------------------------------------------------


@pytest.mark.usefixtures("three_logs", "every_tick_draws")
def test_forced_progress_counts_files_and_bytes_then_wipes_itself() -> None:
    runner = CliRunner(env={progress.ENV: "1"})
    result = runner.invoke(cli, ["parse", "-o", "out.parquet", *_names()])
    assert result.exit_code == 0, result.output
    assert result.stderr == "".join("\r" + line for line in LINES) + WIPE + SUMMARY


@pytest.mark.usefixtures("three_logs", "every_tick_draws")
def test_report_and_check_show_it_too() -> None:
    runner = CliRunner(env={progress.ENV: "1"})
    for command in (["report", "-o", "page.html"], ["analyze", "-o", "rows.parquet"]):
        result = runner.invoke(cli, [*command, *_names()])
        assert "\r[3/3 files] 10.4 KiB read" in result.stderr, command
        assert result.stderr.count(WIPE) == 1


@pytest.mark.usefixtures("three_logs", "every_tick_draws")
@pytest.mark.parametrize(
    ("env", "args"),
    [
        ({}, []),  # CliRunner's stderr is no terminal
        ({progress.ENV: "0"}, []),
        ({progress.ENV: "1"}, ["-q"]),  # --quiet wins
    ],
)
def test_no_progress_unless_a_terminal_or_forced(
    env: dict[str, str], args: list[str]
) -> None:
    result = CliRunner(env=env).invoke(
        cli, ["parse", "-o", "out.parquet", *args, *_names()]
    )
    assert result.exit_code == 0
    assert result.stderr == ("" if args else SUMMARY)


def test_a_real_terminal_gets_it(three_logs: Path) -> None:
    """stderr on a pseudo-terminal, no NCCLPARSE_PROGRESS: the line is drawn."""
    primary, secondary = pty.openpty()
    script = (
        "import itertools, ncclparse.inputs.progress as p\n"
        "p.CLOCK = itertools.count().__next__\n"
        "from ncclparse.cli.app import cli\n"
        "cli(['parse', '-o', 'out.parquet', 'a.log', 'b.log', 'c.log.gz'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != progress.ENV}
    env["COLUMNS"] = "80"
    try:
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=three_logs,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=secondary,
            timeout=120,
            check=False,
        )
        os.close(secondary)
        received = _drain(primary)
    finally:
        os.close(primary)
    assert done.returncode == 0
    # The terminal turns "\n" into "\r\n".
    text = received.decode().replace("\r\n", "\n")
    assert text == "".join("\r" + line for line in LINES) + WIPE + SUMMARY


def _drain(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other end is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _names() -> list[str]:
    return ["a.log", "b.log", "c.log.gz"]


# --- the line itself ------------------------------------------------------------


def test_draws_are_throttled_by_the_clock() -> None:
    terminal = Terminal()
    # Made at 0: nothing before 0.5 s; then at most one draw per 0.1 s.
    line = Progress(1, terminal, clock=Ticks(0, 0.2, 0.4, 0.5, 0.55, 0.6, 0.61, 2.0))
    line.start("big.log", 3 << 30)  # 0.2: too early
    line.read(1 << 30)  # 0.4: too early
    line.read(1 << 30)  # 0.5: drawn
    line.read(1 << 29)  # 0.55: within the interval
    line.read(1 << 29)  # 0.6: drawn
    line.done()  # 0.61: within the interval
    assert terminal.getvalue() == (
        "\r[0/1 files] big.log: 2 GiB of 3 GiB read"
        "\r[0/1 files] big.log: 3 GiB of 3 GiB read"
    )
    line.close()
    wipe = "\r" + " " * len("[0/1 files] big.log: 3 GiB of 3 GiB read") + "\r"
    assert terminal.getvalue().endswith("read" + wipe)


def test_quick_work_draws_nothing() -> None:
    terminal = Terminal()
    line = Progress(2, terminal, clock=Ticks(0, 0.1, 0.2, 0.3))
    line.start("a.log", 10)
    line.read(10)
    line.done()
    line.close()
    assert terminal.getvalue() == ""


def test_unknown_size_and_a_long_name() -> None:
    terminal = Terminal()
    line = Progress(340, terminal, clock=itertools.count().__next__, width=40)
    line.start("logs/node07/all_reduce\n.log", None)
    assert line.line() == "[0/340 files] logs/node07/all_reduce?.log: 0 B read"
    line.read(1288490189)
    assert line.line(39) == "[0/340 files] ...uce?.log: 1.2 GiB read"
    # Drawn cut to the width less one (a character in the last column wraps).
    assert terminal.getvalue().split("\r")[-1] == line.line(39)
    assert len(line.line(39)) == 39


def test_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.ENV, raising=False)
    assert progress.enabled(False, Terminal())
    assert not progress.enabled(True, Terminal())
    assert not progress.enabled(False, io.StringIO())
    monkeypatch.setenv(progress.ENV, "0")
    assert not progress.enabled(False, Terminal())
    monkeypatch.setenv(progress.ENV, "1")
    assert progress.enabled(False, io.StringIO())
    assert not progress.enabled(True, io.StringIO())


# --- what the parser sees ---------------------------------------------------------


def test_tracked_sources_parse_to_the_same_tables(three_logs: Path) -> None:
    # As standard input: buffered (it can peek), counted as read.
    stream = io.BufferedReader(io.BytesIO(ALLTOALL.read_bytes()))
    sources: list[tuple[Source, str]] = [
        (three_logs / "a.log", "a.log"),
        (three_logs / "c.log.gz", "c.log.gz"),
        (three_logs / "missing.log", "missing.log"),  # the parser names the error
        (three_logs, "a directory"),
        (stream, "-"),
        (ALLTOALL.read_text(), "text"),
    ]
    terminal = Terminal()
    line = Progress(len(sources), terminal, clock=itertools.count().__next__)
    with_progress = ncclparse.parse_many(tracked(sources, line))
    without = ncclparse.parse_many(
        [*sources[:4], (io.BytesIO(ALLTOALL.read_bytes()), "-"), *sources[5:]]
    )
    assert with_progress.measurements.equals(without.measurements)
    assert with_progress.runs.equals(without.runs)
    assert [str(e) for e in with_progress.failures] == [
        "missing.log: cannot read: No such file or directory",
        "a directory: is a directory, not a log file",
    ]
    assert [str(e) for e in with_progress.failures] == [
        str(e) for e in without.failures
    ]
    assert not stream.closed  # a caller's stream stays open
    assert "\r[4/6 files] -: 4.57 KiB read" in terminal.getvalue()
    assert "\r[5/6 files] text: 0 B read" in terminal.getvalue()  # text: not counted
    assert "\r[6/6 files] 10.4 KiB read" in terminal.getvalue()


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        (Path("logs/a\nb.log"), "logs/a?b.log"),  # a Path is a path, newline or not
        ("logs/a.log", "logs/a.log"),
        ("line one\nline two\n", "<log text>"),
        (io.BytesIO(b""), "<stream>"),
    ],
    ids=["path", "str path", "text", "stream"],
)
def test_an_unnamed_source_on_the_line(source: Source, shown: str) -> None:
    line = Progress(1, Terminal(), clock=itertools.count().__next__, delay=0)
    for _ in tracked([(source, None)], line):
        assert line.line().startswith(f"[0/1 files] {shown}")
