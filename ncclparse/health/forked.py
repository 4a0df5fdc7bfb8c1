"""Work done in forked child processes, its results taken in order.

A check of many logs judges batch after batch of runs; each batch's temporaries
(frames, the analysis of every column) fragment the heap around the small results
kept of it, so the heap grew by more than twice what it keeps. Done in a forked
child, a batch's temporaries end with the child: the parent's heap holds only the
results, unpickled compactly (docs/robustness.md, "Memory").
"""

from __future__ import annotations

import functools
import gc
import os
import pickle
import select
import signal
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Generator, Iterable
from typing import Generic, TypeVar

__all__ = ["AT_ONCE", "CHILD_SECONDS", "ChildDied", "can_fork", "in_children"]

T = TypeVar("T")
R = TypeVar("R")

# Children at work at once: the parent reads the next item meanwhile.
AT_ONCE = 2
# Seconds a child may take for one item (a batch of runs takes a few seconds):
# past them it is taken for stuck (a lock a native library held at the fork) and
# killed, and the item done here, so that a nightly check never hangs.
CHILD_SECONDS = 600.0


class ChildDied(Exception):
    """A child process ended without giving its result: killed by a signal (the
    out-of-memory killer sends SIGKILL), or exited without one."""


def can_fork() -> bool:
    """True where a forked child may run Python without exec: Linux (macOS's
    system libraries, which NumPy may use, are not safe after fork: multiprocessing
    spawns there) with no other Python thread alive, whose locks the child would
    inherit held."""
    return (
        sys.platform.startswith("linux")
        and hasattr(os, "fork")
        and threading.active_count() == 1
    )


def in_children(
    work: Callable[[T], R], items: Iterable[T], *, doing: str, at_once: int = AT_ONCE
) -> Generator[R, None, None]:
    """``work(item)`` of each of ``items``, in the order of ``items``: each done in
    a forked child (up to ``at_once`` at a time, while the next item is read) when
    :func:`can_fork` at that moment, else here. An exception ``work`` raises in a
    child is raised here (its type and message; as a RuntimeError naming them when
    it cannot be pickled). Results and exceptions cross a pipe pickled.

    Raises ChildDied, saying it was ``doing`` (e.g. "judging a batch of runs") and
    the signal or exit status, when a child ends without its result. Children still
    at work when the iteration stops are killed."""
    pending: deque[_Pending[R]] = deque()
    try:
        for item in items:
            pending.append(_started(work, item, doing))
            while len(pending) >= at_once:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for left in pending:
            left.stop()


def _started(work: Callable[[T], R], item: T, doing: str) -> _Pending[R]:
    """``work(item)`` begun in a child, or done here when forking is not safe or
    fails (no memory or process left for a child: the same result, here)."""
    if can_fork():
        try:
            return _Child(work, item, doing)
        except OSError:
            pass
    return _Done(work(item))


class _Pending(Generic[R]):
    """A result to come."""

    def result(self) -> R:
        raise NotImplementedError

    def stop(self) -> None:
        """Give up the result (the iteration stopped)."""


class _Done(_Pending[R]):
    """A result done in this process."""

    def __init__(self, value: R) -> None:
        self.value = value

    def result(self) -> R:
        return self.value


class _Child(_Pending[R]):
    """``work(item)`` in a forked child, its result pickled into a pipe; done
    here instead when the child takes more than CHILD_SECONDS."""

    def __init__(self, work: Callable[[T], R], item: T, doing: str) -> None:
        self.doing = doing
        self.redo: Callable[[], R] = functools.partial(work, item)
        read, write = os.pipe()
        # The child would copy every page of the parent its collector visits:
        # frozen, the parent's objects are not the child's to collect.
        gc.freeze()
        try:
            with warnings.catch_warnings():
                # Python 3.12+ warns of the native threads (Arrow's, the BLAS'),
                # whose libraries reset their pools in a forked child.
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError:
            gc.unfreeze()
            os.close(read)
            os.close(write)
            raise
        if pid == 0:
            _child(work, item, read, write)  # never returns
        gc.unfreeze()
        os.close(write)
        self.pid, self.pipe = pid, open(read, "rb")  # noqa: SIM115 (closed by result, stop)

    def result(self) -> R:
        with self.pipe:
            data = self._read()
        if data is None:  # stuck: killed, and the work done here
            self.stop()
            return self.redo()
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        if os.WIFSIGNALED(status):
            name = signal.Signals(os.WTERMSIG(status)).name
            raise ChildDied(
                f"the process {self.doing} was killed by {name}"
                + (_OOM if name == "SIGKILL" else "")
            )
        if status != 0 or not data:
            code = os.waitstatus_to_exitcode(status)
            raise ChildDied(
                f"the process {self.doing} exited with status {code} without a result"
            )
        done, value = pickle.loads(data)
        if done:
            return value  # type: ignore[no-any-return]
        raise value

    def _read(self) -> bytes | None:
        """What the child wrote until it closed the pipe; None when it took more
        than CHILD_SECONDS."""
        deadline = time.monotonic() + CHILD_SECONDS
        parts: list[bytes] = []
        fd = self.pipe.fileno()
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            part = os.read(fd, 1 << 20)
            if not part:
                return b"".join(parts)
            parts.append(part)

    def stop(self) -> None:
        self.pipe.close()
        if self.pid:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)


_OOM = (
    " (what the out-of-memory killer sends: give the check more memory, or check "
    "fewer logs at a time)"
)


def _child(work: Callable[[T], R], item: T, read: int, write: int) -> None:
    """The forked child: ``work(item)``, or the exception it raised, pickled into
    ``write``; then exit without the parent's clean-up (its atexit handlers, its
    buffered output)."""
    status = 1
    try:
        os.close(read)
        # A signal the parent handles (SIGTERM, Ctrl-C) ends the child as it is.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        try:
            data = pickle.dumps((True, work(item)), pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # raised in the parent, as it would be here
            data = _pickled_error(exc)
        with open(write, "wb") as pipe:
            pipe.write(data)
        status = 0
    finally:
        os._exit(status)


def _pickled_error(exc: BaseException) -> bytes:
    """``exc`` pickled, or a RuntimeError naming it when it cannot be (or cannot be
    read back)."""
    try:
        data = pickle.dumps((False, exc), pickle.HIGHEST_PROTOCOL)
        pickle.loads(data)
    except Exception:
        named = RuntimeError(f"{type(exc).__name__}: {exc}")
        data = pickle.dumps((False, named), pickle.HIGHEST_PROTOCOL)
    return data
