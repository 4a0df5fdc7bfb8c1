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
import multiprocessing
import os
import signal
import stat
import sys
import threading
import time
import warnings
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from ncclparse import api
from ncclparse.errors import NcclParseError
from ncclparse.parsers import Collector, Source
from ncclparse.progress import Progress, tracked

__all__ = ["Parsed", "available_cpus", "merged_into", "parse_in_workers"]

# Files up to this size go to workers (larger ones stream here, with flat memory).
WORKER_BYTES = 16 << 20
# Chunks of files a worker parses at a time: about this many per worker, each of
# at most this many files and bytes.
CHUNKS_PER_JOB = 4
CHUNK_FILES = 256
CHUNK_BYTES = 16 << 20
# Workers are worth starting from this many bytes of files to send.
MIN_BYTES = 1 << 20
# A worker gives up its chunk past this many rows (about 25 MB of Arrow columns).
CHUNK_ROWS = 1 << 18
# Seconds between a worker's looks at whether its parent is still there.
ORPHAN_POLL = 0.5

Item = tuple[Source, str | None]


@dataclass(frozen=True)
class Parsed:
    """What parsing one chunk gave: as :class:`Collector` and ``parse_many`` keep it."""

    measurements: list[pa.RecordBatch]
    runs: list[pa.RecordBatch]
    accounting: dict[str, Counter[str]]
    failures: list[NcclParseError]


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def parse_in_workers(
    items: Sequence[Item],
    jobs: int,
    here: Callable[[Source, str | None], None],
    merge: Callable[[Parsed], None],
    progress: Progress | None = None,
) -> None:
    """Parse ``items`` in order: each by ``here`` (in this process), or in a chunk by
    a worker, whose :class:`Parsed` goes to ``merge`` in the chunk's place.

    ``here`` parses one source into the caller's tables (and keeps its failure);
    with fewer than two chunks' worth of files, every item goes to it. Each source
    is reported to ``progress``: as it is read here, or when its chunk is merged.
    """
    plan = _plan(items, jobs)
    chunks = sum(isinstance(step, _Chunk) for step in plan)
    sent = sum(step.size for step in plan if isinstance(step, _Chunk))
    pool = _pool(min(jobs, chunks)) if chunks > 1 and sent >= MIN_BYTES else None
    steps = _Steps(here, merge, progress)
    if pool is None:
        steps.here(items)
        return
    pending: deque[tuple[_Chunk | Item, Future[Parsed] | None]] = deque()
    try:
        for step in plan:
            future = None
            if isinstance(step, _Chunk):
                # A dead worker breaks the pool: what is left is parsed here.
                with contextlib.suppress(BrokenProcessPool):
                    future = pool.submit(_parse_chunk, step.items)
            pending.append((step, future))
            # Results are merged in order; a few chunks ahead keep workers busy.
            while pending and (
                pending[0][1] is None or sum(f is not None for _, f in pending) > jobs
            ):
                steps.finish(*pending.popleft())
        while pending:
            steps.finish(*pending.popleft())
    finally:
        pool.shutdown(wait=not pending, cancel_futures=True)


@dataclass(frozen=True)
class _Chunk:
    items: list[tuple[str, str | None]]
    sizes: list[int]

    @property
    def size(self) -> int:
        return sum(self.sizes)


def _plan(items: Sequence[Item], jobs: int) -> list[_Chunk | Item]:
    """``items`` in order, runs of files to send grouped in chunks: about CHUNKS_PER_JOB
    a worker (each chunk costs a table build and a transfer; a few per worker keep
    them evenly busy to the end), within CHUNK_FILES and CHUNK_BYTES."""
    sendable = [_sendable(source) for source, _ in items]
    files = sum(s is not None for s in sendable)
    size = sum(s[1] for s in sendable if s is not None)
    share = CHUNKS_PER_JOB * jobs
    most_files = min(max(-(-files // share), 1), CHUNK_FILES)
    most_bytes = min(max(-(-size // share), 1), CHUNK_BYTES)
    plan: list[_Chunk | Item] = []
    chunk = _Chunk([], [])
    for (source, name), file in zip(items, sendable, strict=True):
        if file is None:
            if chunk.items:
                plan.append(chunk)
                chunk = _Chunk([], [])
            plan.append((source, name))
            continue
        chunk.items.append((file[0], name))
        chunk.sizes.append(file[1])
        if len(chunk.items) >= most_files or chunk.size >= most_bytes:
            plan.append(chunk)
            chunk = _Chunk([], [])
    if chunk.items:
        plan.append(chunk)
    return plan


def _sendable(source: Source) -> tuple[str, int] | None:
    """The path and size of the file ``source`` names if a worker may parse it,
    else None."""
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
    return os.fspath(source), status.st_size


def _pool(jobs: int) -> ProcessPoolExecutor | None:
    """``jobs`` workers, or None where they cannot be had.

    Forked from this process (they start with its imports, in milliseconds) when it
    runs no other Python thread; else from a fork server, a fresh process that
    imports ncclparse once: a lock another thread held at the fork (the import lock,
    a stream's) would stay held in the child, which would then hang.
    """
    methods = multiprocessing.get_all_start_methods()
    context: multiprocessing.context.BaseContext
    if "fork" in methods and threading.active_count() == 1:
        context = multiprocessing.get_context("fork")
    elif "forkserver" in methods:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["ncclparse.workers"])
    else:
        return None
    # A forked child flushes its copy of what this process has buffered: flush first,
    # or that text would be written once more per worker.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
    try:
        pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_start)
    except (OSError, NotImplementedError, ImportError):
        return None  # no semaphores (/dev/shm), no processes left, ...
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns of fork in a process with threads it cannot see
            # (OpenBLAS's, Arrow's): those libraries prepare for fork themselves.
            warnings.simplefilter("ignore", DeprecationWarning)
            # Start the workers now, before any thread of this process's parsing runs.
            pool.submit(int).result()
    except (OSError, BrokenProcessPool):
        pool.shutdown(wait=False, cancel_futures=True)
        return None
    return pool


def _worker_start() -> None:
    # Ctrl-C reaches the whole process group: the parent stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A parent killed (SIGTERM, SIGKILL) cannot: a worker waiting for work would wait
    # for ever (it holds the other end of its own queue), and with it the pipes of
    # whoever reads the parent's output.
    parent = os.getppid()
    threading.Thread(
        target=_exit_when_orphaned, args=(parent,), name="ncclparse-orphan", daemon=True
    ).start()


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

    def finish(self, step: _Chunk | Item, future: Future[Parsed] | None) -> None:
        if not isinstance(step, _Chunk):
            self.here([step])
            return
        if future is None:
            self.here(step.items)
            return
        try:
            parsed = future.result()
        except Exception:  # the worker's trouble (any): the chunk is parsed here
            self.here(step.items)
            return
        self._merge(parsed)
        if self.progress is not None:
            for (path, name), size in zip(step.items, step.sizes, strict=True):
                self.progress.start(name or path, size)
                self.progress.read(size)
                self.progress.done()


class _TooManyRows(Exception):
    """A chunk passed CHUNK_ROWS rows: it is parsed by the caller instead."""


def _parse_chunk(items: list[tuple[str, str | None]]) -> Parsed:
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
            api._parse_into(collector, path, name)
        except NcclParseError as exc:
            failures.append(exc)
    collector.flush()
    runs = collector.runs_table().to_batches()
    return Parsed(measurements, runs, collector.accounting, failures)


def merged_into(
    collector: Collector, failures: list[NcclParseError]
) -> Callable[[Parsed], None]:
    """The ``merge`` of :func:`parse_in_workers` for ``collector`` and ``failures``."""

    def merge(parsed: Parsed) -> None:
        collector.add_parsed(parsed.measurements, parsed.runs, parsed.accounting)
        failures.extend(parsed.failures)

    return merge
