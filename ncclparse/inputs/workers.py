"""Parsing many log files at once, in worker processes (``parse_many(jobs=N)``).

:func:`parse_in_workers` goes through the sources in order as ``parse_many`` does,
but hands runs of consecutive small files (chunks) to forked worker processes and
merges what they give back in input order: the tables, the accounting and the
failures are those of a parse in this process (tests/test_workers.py compares them).

What stays in this process, in its place in the order: streams and log text (they
cannot be sent), and files larger than WORKER_BYTES (here their rows stream to
``on_batch`` as they are read; a worker gives its tables whole). What a worker holds
is bounded too: a chunk whose rows pass CHUNK_ROWS (a compressed file may hold far
more than its size says) is given up and parsed here. So is a chunk whose worker
fails or dies: nothing is lost, and a bug raises here, with its traceback.

Workers are forked, so they start with this process's imports (from a fork server
when this process runs other threads); where neither is available, or no worker can
be started, everything is parsed here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import sys
import threading
import time
import warnings
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from ncclparse.errors import NcclParseError
from ncclparse.inputs.progress import Progress, tracked
from ncclparse.parsers import Collector, Source, parse_source

if TYPE_CHECKING:  # imported where a pool is made: not on every command's start-up
    import multiprocessing.context
    from concurrent.futures import Future, ProcessPoolExecutor
from ncclparse.schema import MEASUREMENTS_SCHEMA

__all__ = ["Parsed", "available_cpus", "merged_into", "parse_in_workers"]

# Files up to this size go to workers (larger ones stream here, with flat memory).
WORKER_BYTES = 4 << 20
# Files looked at ahead (their paths), for chunks of an even size.
WINDOW = 4096
# Chunks of files a worker parses at a time: about this many per worker, each of
# at most this many files and bytes.
CHUNKS_PER_JOB = 4
CHUNK_FILES = 256
CHUNK_BYTES = 4 << 20
# Workers are worth starting from this many bytes of files to send.
MIN_BYTES = 1 << 20
# A worker gives up its chunk past this many rows (about 36 MB of Arrow columns,
# sent whole): only a compressed log can hold that many in CHUNK_BYTES (the densest
# rows, two a line, are about 72,000 in 4 MiB).
CHUNK_ROWS = 1 << 17
# Seconds between a worker's looks at whether its parent is still there.
ORPHAN_POLL = 0.5
# prctl(2): the signal a process gets when its parent ends.
_PR_SET_PDEATHSIG = 1

Item = tuple[Source, str | None]


@dataclass(frozen=True)
class Parsed:
    """What parsing one chunk gave: its tables (each in one piece, so that they go
    to the parent whole: a pickled slice carries the buffers it shares), accounting
    and failures."""

    measurements: pa.Table
    runs: pa.Table
    accounting: dict[str, Counter[str]]
    failures: list[NcclParseError]


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def parse_in_workers(
    items: Iterable[Item],
    jobs: int,
    here: Callable[[Source, str | None], None],
    merge: Callable[[Parsed], None],
    progress: Progress | None = None,
) -> None:
    """Parse ``items`` in order: each by ``here`` (in this process), or in a chunk by
    a worker, whose :class:`Parsed` goes to ``merge`` in the chunk's place.

    ``items`` are taken as they come: a stream or log text is parsed before the next
    item is asked for (a generator may close it then), and at most WINDOW files are
    looked at ahead. ``here`` parses one source into the caller's tables (and keeps
    its failure); it gets every item when there are too few files to share out. Each
    source is reported to ``progress``: as it is read here, or when its chunk is
    merged.
    """
    steps = _Steps(here, merge, progress)
    pool: ProcessPoolExecutor | None = None
    tried = False
    pending: deque[tuple[_Chunk, Future[Parsed] | None]] = deque()
    try:
        for files, other in _windows(items):
            chunks = _chunks(files, jobs)
            if (
                not tried
                and len(chunks) > 1
                and sum(c.size for c in chunks) >= MIN_BYTES
            ):
                tried, pool = True, _pool(min(jobs, len(chunks)))
            for chunk in chunks:
                pending.append((chunk, _submit(pool, chunk)))
                # Merged in order; a few chunks ahead keep the workers busy.
                while len(pending) >= jobs:
                    steps.finish(*pending.popleft())
            if other is not None:
                while pending:
                    steps.finish(*pending.popleft())
                steps.here([other])
        while pending:
            steps.finish(*pending.popleft())
    finally:
        if pool is not None:
            pool.shutdown(wait=not pending, cancel_futures=True)


@dataclass(frozen=True)
class _Chunk:
    items: list[tuple[Path, str]]
    sizes: list[int]

    @property
    def size(self) -> int:
        return sum(self.sizes)


_File = tuple[Path, str, int]  # a file a worker may parse: path, name, size


def _windows(items: Iterable[Item]) -> Iterator[tuple[list[_File], Item | None]]:
    """``items`` in order as (files a worker may parse, the item after them that it
    may not, if any): at most WINDOW files at a time."""
    files: list[_File] = []
    for source, name in items:
        file = _sendable(source, name)
        if file is None:
            yield files, (source, name)
            files = []
            continue
        files.append(file)
        if len(files) >= WINDOW:
            yield files, None
            files = []
    if files:
        yield files, None


def _chunks(files: list[_File], jobs: int) -> list[_Chunk]:
    """``files`` in chunks of consecutive files: about CHUNKS_PER_JOB a worker (each
    chunk costs a table build and a transfer; a few per worker keep them evenly busy
    to the end), within CHUNK_FILES and CHUNK_BYTES."""
    share = CHUNKS_PER_JOB * jobs
    most_files = min(max(-(-len(files) // share), 1), CHUNK_FILES)
    most_bytes = min(max(-(-sum(f[2] for f in files) // share), 1), CHUNK_BYTES)
    chunks: list[_Chunk] = []
    chunk = _Chunk([], [])
    for path, name, size in files:
        # Closed before a file would take it past most_bytes (CHUNK_ROWS assumes
        # CHUNK_BYTES of rows at most).
        if chunk.items and (
            len(chunk.items) >= most_files or chunk.size + size > most_bytes
        ):
            chunks.append(chunk)
            chunk = _Chunk([], [])
        chunk.items.append((path, name))
        chunk.sizes.append(size)
    if chunk.items:
        chunks.append(chunk)
    return chunks


def _sendable(source: Source, name: str | None) -> _File | None:
    """The file ``source`` names as a worker gets it, if one may parse it (a regular
    file up to WORKER_BYTES), else None. The name is the one a parse here shows: the
    path as given (a str path is no log text for the worker: it is sent as a Path)."""
    if isinstance(source, str) and (not source or "\n" in source):
        return None  # log text
    if not isinstance(source, (str, Path)):
        return None  # a stream
    try:
        status = os.stat(source)
    except (OSError, ValueError):
        return None  # the parser here names the error
    if not stat.S_ISREG(status.st_mode) or status.st_size > WORKER_BYTES:
        return None
    return Path(source), str(source) if name is None else name, status.st_size


def _submit(pool: ProcessPoolExecutor | None, chunk: _Chunk) -> Future[Parsed] | None:
    """``chunk`` given to a worker, or None: no pool, or one that cannot take it (a
    worker died, which breaks the pool; the interpreter is shutting down)."""
    if pool is None:
        return None
    from concurrent.futures.process import BrokenProcessPool

    try:
        return pool.submit(_parse_chunk, chunk.items)
    except (BrokenProcessPool, RuntimeError):
        return None


def _pool(jobs: int) -> ProcessPoolExecutor | None:
    """``jobs`` workers, or None where they cannot be had.

    Forked from this process (they start with its imports, in milliseconds) when it
    runs no other Python thread; else from a fork server, a fresh process that
    imports ncclparse once: a lock another thread held at the fork (the import lock,
    a stream's) would stay held in the child, which would then hang.
    """
    try:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
    except Exception:  # shutting down: no new import, no atexit (RuntimeError)
        return None
    methods = multiprocessing.get_all_start_methods()
    context: multiprocessing.context.BaseContext
    if "fork" in methods and threading.active_count() == 1:
        context = multiprocessing.get_context("fork")
    elif "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["ncclparse.inputs.workers"])
    else:
        return None
    # A forked child flushes its copy of what this process has buffered: flush first,
    # or that text would be written once more per worker.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
    try:
        # A forked worker's parent is this process: named here, for a worker that
        # starts after this process was killed (its parent is then init already).
        parent = os.getpid() if context.get_start_method() == "fork" else None
        pool = ProcessPoolExecutor(
            jobs, mp_context=context, initializer=_worker_start, initargs=(parent,)
        )
    except Exception:  # no semaphores (/dev/shm), a daemonic process (no children)
        return None
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns of fork in a process with threads it cannot see
            # (OpenBLAS's, Arrow's): those libraries prepare for fork themselves.
            warnings.simplefilter("ignore", DeprecationWarning)
            # Start the workers now, before any thread of this process's parsing runs.
            pool.submit(int).result()
    except Exception:  # no processes left, the interpreter shutting down, ...
        pool.shutdown(wait=False, cancel_futures=True)
        return None
    return pool


def _worker_start(parent: int | None) -> None:
    """In a worker, first: ``parent`` is its parent's pid (None: the fork server's,
    which is alive while the workers start)."""
    # Ctrl-C reaches the whole process group: the parent stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A parent killed (SIGTERM, SIGKILL) cannot: a worker waiting for work would wait
    # for ever (it holds the other end of its own queue), and with it the pipes of
    # whoever reads the parent's output.
    if parent is None:
        parent = os.getppid()
    _killed_with(parent)
    # And, where there is no prctl (not Linux), a thread looks twice a second.
    threading.Thread(
        target=_exit_when_orphaned, args=(parent,), name="ncclparse-orphan", daemon=True
    ).start()


def _killed_with(parent: int) -> None:
    """On Linux, have the kernel kill this worker when ``parent`` ends; end now if
    it has ended already."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the thread only
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _exit_when_orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(ORPHAN_POLL)
    os._exit(1)


class _Steps:
    """Ends each step of the plan in order, reporting its sources to ``progress``."""

    def __init__(
        self,
        here: Callable[[Source, str | None], None],
        merge: Callable[[Parsed], None],
        progress: Progress | None,
    ) -> None:
        self._here, self._merge, self.progress = here, merge, progress

    def here(self, items: Iterable[Item]) -> None:
        """Parse ``items`` in this process."""
        progress = self.progress
        for source, name in items if progress is None else tracked(items, progress):
            self._here(source, name)

    def finish(self, chunk: _Chunk, future: Future[Parsed] | None) -> None:
        """Merge what the worker gave for ``chunk``, or (none, or it failed) parse
        the chunk here."""
        if future is None:
            self.here(chunk.items)
            return
        try:
            parsed = future.result()
        except Exception:  # the worker's trouble (any): the chunk is parsed here
            self.here(chunk.items)
            return
        self._merge(parsed)
        if self.progress is not None:
            for size in chunk.sizes:
                self.progress.parsed(size)


class _TooManyRows(Exception):
    """A chunk passed CHUNK_ROWS rows: it is parsed by the caller instead."""


def _parse_chunk(items: list[tuple[Path, str]]) -> Parsed:
    """In a worker: parse ``items`` as ``parse_many`` would."""
    measurements: list[pa.RecordBatch] = []
    rows = 0

    def keep(batch: pa.RecordBatch) -> None:
        nonlocal rows
        rows += batch.num_rows
        if rows > CHUNK_ROWS:
            raise _TooManyRows
        measurements.append(batch)

    collector = Collector(keep)
    failures: list[NcclParseError] = []
    for path, name in items:
        try:
            parse_source(collector, path, name)
        except NcclParseError as exc:
            failures.append(exc)
    collector.flush()
    # Row batches share buffers (a run's source, its spilled columns): pickled as
    # they are, each would carry all of them (195 MB for a 12 MiB log of 215,000 rows,
    # 59 MB in one piece).
    table = pa.Table.from_batches(measurements, schema=MEASUREMENTS_SCHEMA)
    runs = collector.runs_table().combine_chunks()
    return Parsed(table.combine_chunks(), runs, collector.accounting, failures)


def merged_into(
    collector: Collector, failures: list[NcclParseError]
) -> Callable[[Parsed], None]:
    """The ``merge`` of :func:`parse_in_workers` for ``collector`` and ``failures``."""

    def merge(parsed: Parsed) -> None:
        collector.add_parsed(parsed.measurements, parsed.runs, parsed.accounting)
        failures.extend(parsed.failures)

    return merge
