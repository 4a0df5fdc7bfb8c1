"""Work in forked children, results in order (ncclparse.health.forked): what a check
of many logs judges its batches with (docs/robustness.md, "Memory")."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from ncclparse.health import forked
from ncclparse.health.forked import ChildDied, in_children

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="children are forked on Linux only"
)


def _pid_and_square(n: int) -> tuple[int, int]:
    return os.getpid(), n * n


@pytest.fixture
def forking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Children forked whatever idle threads an earlier test left in this worker
    (dask's pool, a test server's): the tests that need children."""
    monkeypatch.setattr(forked, "can_fork", lambda: True)


@pytest.mark.usefixtures("forking")
def test_results_come_in_order_each_from_a_child_of_its_own() -> None:
    done = list(in_children(_pid_and_square, range(5), doing="squaring"))
    assert [square for _, square in done] == [0, 1, 4, 9, 16]
    pids = {pid for pid, _ in done}
    assert len(pids) == 5
    assert os.getpid() not in pids


def test_with_another_thread_alive_the_work_is_done_here() -> None:
    """A thread would leave its locks held in a child: no fork then."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        done = list(in_children(_pid_and_square, range(3), doing="squaring"))
    finally:
        stop.set()
        thread.join()
    assert done == [(os.getpid(), 0), (os.getpid(), 1), (os.getpid(), 4)]


class _Unpicklable(Exception):
    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("not pickled")


def _raise_unpicklable(_n: int) -> None:
    raise _Unpicklable("a lock in it")


@pytest.mark.usefixtures("forking")
def test_an_exception_that_cannot_be_pickled_is_named() -> None:
    with pytest.raises(RuntimeError, match=r"^_Unpicklable: a lock in it$"):
        list(in_children(_raise_unpicklable, range(1), doing="failing"))


def _exit_without_result(_n: int) -> None:
    os._exit(3)


@pytest.mark.usefixtures("forking")
def test_a_child_that_exits_without_a_result_is_no_result() -> None:
    with pytest.raises(ChildDied) as raised:
        list(in_children(_exit_without_result, range(2), doing="exiting"))
    assert str(raised.value) == (
        "the process exiting exited with status 3 without a result"
    )


@pytest.mark.usefixtures("forking")
def test_children_still_at_work_when_the_iteration_stops_are_killed(
    tmp_path: Path,
) -> None:
    """The first result taken, the second child (asleep) is killed and reaped
    when the iteration is closed: none is left behind."""

    def note_then_sleep(n: int) -> int:
        (tmp_path / str(n)).write_text(str(os.getpid()))
        if n:
            time.sleep(60)
        return os.getpid()

    results = in_children(note_then_sleep, range(2), doing="sleeping")
    first = next(results)
    while not (tmp_path / "1").exists() or not (tmp_path / "1").read_text():
        time.sleep(0.01)
    results.close()
    assert int((tmp_path / "0").read_text()) == first
    for n in (0, 1):
        with pytest.raises(ChildProcessError):  # reaped: no such child left
            os.waitpid(int((tmp_path / str(n)).read_text()), os.WNOHANG)


_PARENT = os.getpid()


def _stuck_in_a_child(item: tuple[int, Path]) -> tuple[int, int]:
    """Squares ``n``, but never ends in a child (as one whose native library held
    a lock at the fork would), which writes its process id under ``directory``."""
    n, directory = item
    if os.getpid() != _PARENT:
        (directory / str(os.getpid())).touch()
        time.sleep(60)
    return os.getpid(), n * n


@pytest.mark.usefixtures("forking")
def test_a_child_stuck_is_killed_and_its_work_done_here(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A nightly check never hangs on a child: past CHILD_SECONDS it is killed
    (and reaped) and the item is done in this process, with the same result."""
    monkeypatch.setattr(forked, "CHILD_SECONDS", 2.0)
    items = [(n, tmp_path) for n in range(2)]
    done = list(in_children(_stuck_in_a_child, items, doing="squaring"))
    assert done == [(os.getpid(), 0), (os.getpid(), 1)]
    children = [int(p.name) for p in tmp_path.iterdir()]
    assert len(children) == 2
    for pid in children:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
