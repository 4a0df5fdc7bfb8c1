"""Parsing many files in worker processes gives what one process gives.

``parse_many(jobs=N)`` (``--jobs``) sends chunks of small files to forked workers
and merges their tables in input order (ncclparse.inputs.workers). Every test here compares
a parse in workers with the parse in one process: the tables row by row, the
accounting (in its order) and the failures; and checks that the workers did the
work (a pool that parsed nothing would pass the comparison), that a worker's death,
a chunk with too many rows and a bug each end as they would in one process.
"""

from __future__ import annotations

import gzip
import io
import os
import pickle
import select
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import ncclparse
from ncclparse import api, parsers
from ncclparse.cli.app import cli
from ncclparse.errors import InputError, UnknownLogFormatError
from ncclparse.inputs import workers
from ncclparse.inputs.parsing import parse_sources
from ncclparse.inputs.progress import Progress
from tests.conftest import FIXTURES
from tests.test_scanner import LOGS, _nan_free

if "fork" not in __import__("multiprocessing").get_all_start_methods():
    pytest.skip("no fork on this platform: everything is parsed in one process",
                allow_module_level=True)  # fmt: skip

NCCL_LOGS = sorted((FIXTURES / "nccl").glob("*.log"))


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers for a handful of small files, a few files a chunk."""
    monkeypatch.setattr(workers, "MIN_BYTES", 0)
    monkeypatch.setattr(workers, "CHUNK_FILES", 5)


@pytest.fixture
def forked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers forked from this process, so that they see what a test patched here,
    even when an earlier test left a thread behind (a FIFO's opener blocked for
    ever): that would get them from a fork server instead."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)


@pytest.fixture
def merges(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of files of each chunk merged from a worker."""
    counted: list[int] = []
    merged_into = workers.merged_into

    def counting(*args: Any) -> Callable[[workers.Parsed], None]:
        merge = merged_into(*args)

        def each(parsed: workers.Parsed) -> None:
            counted.append(len(parsed.accounting) + len(parsed.failures))
            merge(parsed)

        return each

    monkeypatch.setattr(workers, "merged_into", counting)
    return counted


def _everything(result: ncclparse.ParseResult) -> tuple[Any, ...]:
    return (
        _nan_free(result.measurements.to_pylist()),
        _nan_free(result.runs.to_pylist()),
        list(result.accounting.items()),
        [
            (type(f).__name__, str(f), getattr(f, "source", None))
            for f in result.failures
        ],
    )


def _sources(tmp_path: Path) -> list[Any]:
    """Every real log, with what stays in the parent and what fails put between."""
    empty = tmp_path / "empty.log"
    empty.write_text("")
    packed = tmp_path / "packed.log.gz"
    packed.write_bytes(gzip.compress(NCCL_LOGS[0].read_bytes()))
    text = NCCL_LOGS[1].read_text(errors="replace")
    sources: list[Any] = list(LOGS)
    sources[3:3] = [(io.StringIO(text, newline=""), "from a stream"), tmp_path / "gone"]
    sources[10:10] = [empty, tmp_path, packed, text]
    sources.append((io.BytesIO(NCCL_LOGS[2].read_bytes()), "bytes"))
    sources.append(str(NCCL_LOGS[3]))
    return sources


def test_every_log_in_workers_as_in_one_process(
    tmp_path: Path, small_chunks: None, merges: list[int]
) -> None:
    one = _everything(api.parse_many(_sources(tmp_path)))
    many = _everything(api.parse_many(_sources(tmp_path), jobs=3))
    assert many == one
    assert len(merges) > 10  # the workers parsed most files
    assert sum(merges) > len(LOGS) * 0.9
    assert ("UnknownLogFormatError", f"{tmp_path / 'empty.log'}: empty input: no "
            "benchmark output to parse", str(tmp_path / "empty.log")) in one[3]  # fmt: skip


def test_batches_stream_to_on_batch_in_order(
    tmp_path: Path, small_chunks: None
) -> None:
    batches: list[Any] = []
    result = api.parse_many(LOGS, on_batch=batches.append, jobs=2)
    assert result.measurements.num_rows == 0
    rows = [r for b in batches for r in b.to_pylist()]
    assert _nan_free(rows) == _nan_free(api.parse_many(LOGS).measurements.to_pylist())


def _dying_chunk(items: list[tuple[Path, str]]) -> workers.Parsed:
    """A worker that dies (killed, out of memory) on its third chunk."""
    if any(path.name == NCCL_LOGS[12].name for path, _ in items):
        os._exit(9)
    return _parse_chunk(items)


_parse_chunk = workers._parse_chunk


def test_a_dead_worker_loses_nothing(
    monkeypatch: pytest.MonkeyPatch, small_chunks: None, forked: None
) -> None:
    monkeypatch.setattr(workers, "_parse_chunk", _dying_chunk)
    assert _everything(api.parse_many(NCCL_LOGS, jobs=2)) == _everything(
        api.parse_many(NCCL_LOGS)
    )


def test_a_chunk_with_too_many_rows_is_parsed_here(
    monkeypatch: pytest.MonkeyPatch, small_chunks: None, forked: None, merges: list[int]
) -> None:
    monkeypatch.setattr(workers, "CHUNK_ROWS", 40)
    assert _everything(api.parse_many(NCCL_LOGS, jobs=2)) == _everything(
        api.parse_many(NCCL_LOGS)
    )
    rows = [ncclparse.parse(p).measurements.num_rows for p in NCCL_LOGS]
    chunks = [rows[i : i + 5] for i in range(0, len(rows), 5)]
    assert len(merges) == sum(sum(c) <= 40 for c in chunks)
    assert 0 < len(merges) < len(chunks)


def test_a_bug_raises_here_with_its_traceback(
    monkeypatch: pytest.MonkeyPatch, small_chunks: None, forked: None
) -> None:
    parse_lines = parsers.parse_lines

    def buggy(handle: Any, source: str, emit: Any) -> Any:
        if source.endswith(NCCL_LOGS[7].name):
            raise ZeroDivisionError("a bug")
        return parse_lines(handle, source, emit)

    monkeypatch.setattr(parsers, "parse_lines", buggy)
    with pytest.raises(ZeroDivisionError, match="a bug") as raised:
        api.parse_many(NCCL_LOGS, jobs=2)
    assert raised.traceback[-1].name == "buggy"  # raised here, not re-raised


def test_every_file_is_reported_to_progress(tmp_path: Path, small_chunks: None) -> None:
    """Files a worker parsed count as read and done when merged: the last line is
    the one a parse in one process ends with (every file; every byte, for logs that
    are read to their end)."""

    def last_line(sources: list[Any], jobs: int) -> str:
        items = [s if isinstance(s, tuple) else (s, None) for s in sources]
        line = Progress(len(items), io.StringIO(), delay=0, interval=0)
        parse_sources(items, None, jobs, line)
        return line.line()

    logs = [*NCCL_LOGS, *sorted((FIXTURES / "oneccl").glob("*.log"))]
    assert last_line(logs, 2) == last_line(logs, 1)
    assert last_line(logs, 2).startswith(f"[{len(logs)}/{len(logs)} files] ")
    odd = _sources(tmp_path)
    assert last_line(odd, 2).startswith(f"[{len(odd)}/{len(odd)} files] ")


def test_jobs_must_be_a_count() -> None:
    with pytest.raises(ValueError, match="jobs must be 1 or more, not 0"):
        api.parse_many([], jobs=0)


@pytest.mark.parametrize(
    "error",
    [
        UnknownLogFormatError("a.log", "hello", 3),
        UnknownLogFormatError("b.log", None),
        InputError("s3://b/k: cannot read: denied", source="s3://b/k"),
    ],
    ids=repr,
)
def test_failures_cross_from_a_worker_whole(error: Exception) -> None:
    back = pickle.loads(pickle.dumps(error))
    assert (type(back), str(back), vars(back)) == (type(error), str(error), vars(error))


def test_nothing_printed_before_is_printed_again(tmp_path: Path) -> None:
    """A forked worker does not write out its copy of the parent's buffered text."""
    script = (
        "import sys, ncclparse\n"
        "from ncclparse.inputs import workers\n"
        "workers.MIN_BYTES = 0\n"
        "sys.stdout.write('said once\\n')\n"
        "result = ncclparse.parse_many(sys.argv[1:], jobs=2)\n"
        "print(len(result.runs))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *map(str, NCCL_LOGS[:6])],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines()[0] == "said once"
    assert done.stdout.count("said once") == 1


def _csv(args: list[str], command: str = "parse") -> str:
    done = CliRunner().invoke(cli, [command, "-q", *args])
    assert done.exit_code == 0, done.output
    return done.stdout


def test_cli_jobs(small_chunks: None) -> None:
    directory = str(FIXTURES / "nccl")
    assert _csv(["-j", "2", directory]) == _csv(["--jobs", "1", directory])
    assert _csv([directory]) == _csv(["-j", "1", directory])  # auto
    intel = [str(FIXTURES / "oneccl"), str(FIXTURES / "imb")]
    analyzed = _csv(["-j", "1", *intel], "analyze")
    assert analyzed.count("\n") > 500
    assert _csv(["-j", "3", *intel], "analyze") == analyzed


def test_compare_jobs(small_chunks: None, merges: list[int], tmp_path: Path) -> None:
    sides = []
    for name, logs in (("base", NCCL_LOGS[:12]), ("cand", NCCL_LOGS[12:24])):
        (tmp_path / name).mkdir()
        for log in logs:
            shutil.copy(log, tmp_path / name / log.name)
        sides.append(str(tmp_path / name))
    one = CliRunner().invoke(cli, ["compare", "-j", "1", *sides, "--format", "json"])
    assert merges == []
    two = CliRunner().invoke(cli, ["compare", "-j", "2", *sides, "--format", "json"])
    assert merges  # the worker path was taken
    assert one.exit_code == two.exit_code == 0, one.output
    assert two.stdout == one.stdout
    assert '"verdict"' in one.stdout


@pytest.mark.parametrize("value", ["0", "-1", "two", ""])
def test_cli_jobs_refused(value: str) -> None:
    done = CliRunner().invoke(cli, ["parse", "-j", value, str(NCCL_LOGS[0])])
    assert done.exit_code == 2
    assert f"Invalid value for '-j' / '--jobs': {value!r} is not a count from 1 on, " \
        "nor 'auto'" in done.output  # fmt: skip


def test_auto_jobs_follow_the_cpus_this_process_may_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ncclparse.cli import options

    monkeypatch.setattr(workers, "available_cpus", lambda: 3)
    assert options._jobs(None, None, "auto") == 3
    monkeypatch.setattr(workers, "available_cpus", lambda: 64)
    assert options._jobs(None, None, "auto") == options.AUTO_JOBS


def test_workers_end_with_their_killed_parent(tmp_path: Path) -> None:
    """A parent killed outright (SIGKILL: no cleanup) leaves no worker behind, nor
    the pipes they hold open (a CI step reading them would hang)."""
    script = (
        "import os, sys, time\n"
        "from ncclparse import api\n"
        "from ncclparse.inputs import workers\n"
        "workers.MIN_BYTES = 0\n"
        "def slow(items):\n"
        "    print(os.getpid(), flush=True)\n"
        "    time.sleep(600)\n"
        "workers._parse_chunk = slow\n"
        "api.parse_many(sys.argv[1:], jobs=2)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, *map(str, NCCL_LOGS[:8])],
        stdout=subprocess.PIPE,
    )
    assert parent.stdout is not None
    with parent.stdout as pipe:
        said = pipe.readline()
        parent.kill()
        parent.wait()
        # The pipe ends once every process holding it has ended: the workers too
        # (within a minute; they look for their parent twice a second).
        while ready := select.select([pipe], [], [], 60)[0]:
            if not os.read(pipe.fileno(), 1 << 16):
                break
    assert said.strip().isdigit()
    assert ready, "a worker outlived its killed parent"


def test_a_process_with_threads_gets_its_workers_from_a_fork_server(
    small_chunks: None, merges: list[int]
) -> None:
    """Forking a process that runs other threads may copy a lock one of them holds
    into the child (a hang); then workers come from a fresh fork server."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, name="the notebook's")
    other.start()
    try:
        methods: list[str] = []
        pool = workers._pool

        def spy(jobs: int) -> Any:
            made = pool(jobs)
            assert made is not None
            assert made._mp_context is not None
            methods.append(made._mp_context.get_start_method())
            return made

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(workers, "_pool", spy)
            many = _everything(api.parse_many(NCCL_LOGS, jobs=2))
    finally:
        stop.set()
        other.join()
    assert methods == ["forkserver"]
    assert many == _everything(api.parse_many(NCCL_LOGS))
    assert len(merges) > 5


def test_odd_paths_show_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_chunks: None
) -> None:
    """A Path whose name holds a newline is a file in a worker too (a str holding
    one is log text, in one process as in workers), named with its newline escaped
    (formatting.shown_name); a path shows as given (``./a``, ``a//b``), as in one
    process."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    sources: list[Any] = []
    for i, log in enumerate(NCCL_LOGS[:8]):
        odd = tmp_path / f"log{i}\nx.log"
        odd.write_bytes(log.read_bytes())
        sources.append(odd if i % 4 else str(odd))
    (tmp_path / "d" / "a.log").write_bytes(NCCL_LOGS[8].read_bytes())
    sources += ["./d/a.log", "d//a.log", Path("d/../d/a.log"), ("d/a.log", None)]
    one = _everything(api.parse_many(sources))
    assert [name for name, _ in one[2]][:3] == [
        str(tmp_path / f"log{i}\\nx.log") for i in (1, 2, 3)
    ]
    assert [f[2] for f in one[3]] == ["<string>"] * 2  # each str: log text, no log
    assert _everything(api.parse_many(sources, jobs=2)) == one
    assert [name for name, _ in one[2]][-4:] == [
        "./d/a.log", "d//a.log", "d/../d/a.log", "d/a.log"
    ]  # fmt: skip


def test_sources_are_taken_as_they_come(small_chunks: None, merges: list[int]) -> None:
    """A stream is parsed before the next source is asked for: a generator that
    opens each file and closes it when resumed works as with one process."""
    asked: list[int] = []

    def sources() -> Any:
        for i, path in enumerate(NCCL_LOGS):
            asked.append(i)
            if i % 7 == 3:
                with path.open("rb") as handle:
                    yield handle, path.name
            else:
                yield path

    one = _everything(api.parse_many(sources()))
    asked.clear()
    assert _everything(api.parse_many(sources(), jobs=2)) == one
    assert asked == list(range(len(NCCL_LOGS)))
    assert len(merges) > 5


def _in_a_daemon(paths: list[Path]) -> int:
    return int(api.parse_many(paths, jobs=2).runs.num_rows)


def test_where_no_worker_can_start_everything_is_parsed_here() -> None:
    """A daemonic process (a multiprocessing pool's worker) may have no children;
    nor may a process shutting down (atexit): all is parsed in the process."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1) as daemons:
        runs = daemons.apply(_in_a_daemon, (NCCL_LOGS,))
    assert runs == api.parse_many(NCCL_LOGS).runs.num_rows
    script = (
        "import atexit, sys\n"
        "from ncclparse import api\n"
        "from ncclparse.inputs import workers\n"
        "workers.MIN_BYTES = 0\n"
        "atexit.register(lambda: print(api.parse_many(sys.argv[1:], jobs=2).runs"
        ".num_rows))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *map(str, NCCL_LOGS)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert (done.stdout, done.stderr) == (f"{runs}\n", "")


def test_a_worker_sends_its_rows_compactly(tmp_path: Path) -> None:
    """A chunk's tables cross to the parent in one piece: pickled as slices, row
    batches carried every buffer they share (3.3 times the rows of a dense log)."""
    example = (
        Path(__file__).parent.parent / "examples" / "all_reduce_16rank_2node_h100.log"
    )
    lines = example.read_text().splitlines(keepends=True)
    rows = "".join(
        line for line in lines if line[:1] == " " and line.split()[0].isdigit()
    )
    head = "".join(line for line in lines if line.startswith("#"))
    dense = tmp_path / "dense.log"
    dense.write_text(head + rows * 400)  # one run of 12,400 lines, 24,800 rows
    parsed = workers._parse_chunk([(dense, "dense.log")])
    assert parsed.measurements.num_rows == 24_800
    sent = len(pickle.dumps(parsed))
    assert sent < 1.2 * (parsed.measurements.nbytes + parsed.runs.nbytes)


@pytest.mark.parametrize(
    ("sizes", "jobs", "expected"),
    [
        # About four chunks a worker: 10 MiB in chunks of at most 2.5 MiB.
        ([1 << 20] * 10, 1, [[1 << 20] * 2] * 5),
        # A chunk closes before a file would take it past CHUNK_BYTES (4 MiB: 19
        # MiB is more than four chunks of it).
        (
            [m << 20 for m in (3, 3, 1, 3, 3, 3, 3)],
            1,
            [[m << 20 for m in c] for c in ([3], [3, 1], [3], [3], [3], [3])],
        ),
        # ... and holds a file alone that is as large by itself.
        ([1, 4 << 20, 1], 1, [[1], [4 << 20], [1]]),
        # At most CHUNK_FILES files (here 5, small_chunks), however small.
        ([10] * 12, 1, [[10] * 3] * 4),
        ([10] * 12, 3, [[10]] * 12),
    ],
)
def test_files_in_chunks(
    sizes: list[int], jobs: int, expected: list[list[int]], small_chunks: None
) -> None:
    files = [(Path(f"{i}.log"), f"{i}.log", size) for i, size in enumerate(sizes)]
    chunks = workers._chunks(files, jobs)
    assert [c.sizes for c in chunks] == expected
    assert [p for c in chunks for p, _ in c.items] == [f[0] for f in files]


@pytest.mark.parametrize("orphaned", [False, True])
def test_a_worker_that_starts_after_its_parent_ended_ends(orphaned: bool) -> None:
    """Regression (CI): a worker slow to start after its parent was killed took
    init for its parent and lived on; the parent's pid now comes from the parent."""
    script = (
        "import os, sys\n"
        "from ncclparse.inputs import workers\n"
        f"workers._worker_start({'1' if orphaned else 'os.getppid()'})\n"
        "print('working')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout) == ((1, "") if orphaned else (0, "working\n"))
