"""Command-line inputs: files, directories (recursively) and ``-`` for stdin; a
measurements table from a table file, a history directory or logs.

What a directory walk skips is never silent (docs/robustness.md, "Inputs"): hidden
entries are counted, anything that is not a regular file (FIFO, socket, device, a
symbolic link to a directory) is named in a :class:`Note`, a broken symbolic link or
an unreadable directory is an error, and a directory that holds no log is an error.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from ncclparse import schema
from ncclparse.errors import InputError
from ncclparse.parsers import Source

__all__ = ["FIFO_WAIT", "FIFO_WAIT_VARIABLE", "STDIN", "Note", "expand", "walk"]

STDIN = "-"
# How long a FIFO named on the command line may wait for a writer before it is an
# error: opening a FIFO for reading blocks until a writer opens it, forever if none
# ever does. Process substitution (<(cmd), /dev/fd/N) already has its writer.
FIFO_WAIT = 10.0
FIFO_WAIT_VARIABLE = "NCCLPARSE_FIFO_WAIT"
_SHOWN = 5  # skipped entries named in one note; the rest are counted


@dataclass(frozen=True, slots=True)
class Note:
    """Something an input walk skipped that is not an error: ``source`` is the
    directory as given, ``text`` one line naming what was skipped and why."""

    source: str
    text: str


def expand(
    inputs: tuple[str, ...], notes: list[Note] | None = None
) -> Iterator[tuple[Source, str] | InputError]:
    """Yield ``(source, name)`` for every input, or an InputError for a bad one.

    Directories are walked recursively in sorted order, skipping hidden entries and
    entries that are not regular files (each named in a :class:`Note`: appended to
    ``notes`` when given, else written to standard error). A missing input, a broken
    symbolic link, an unreadable directory and a directory without any log are
    InputErrors. ``-`` is standard input (read as bytes, decoded leniently by the
    parser). A FIFO named explicitly is read as a stream once a writer has opened it
    (see :data:`FIFO_WAIT`).
    """
    for item in inputs:
        if item == STDIN:
            yield sys.stdin.buffer, STDIN
            continue
        path = Path(item)
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            if path.is_symlink():
                yield InputError(f"{item}: broken symbolic link (no such file)")
            elif isinstance(exc, FileNotFoundError):
                yield InputError(f"{item}: no such file or directory")
            else:  # the parser names it ("cannot read: ...")
                yield path, item
            continue
        except ValueError:  # a NUL byte: the parser names it as an invalid path
            yield path, item
            continue
        if stat.S_ISDIR(mode):
            yield from _walk_reporting(item, notes)
        elif stat.S_ISFIFO(mode):
            yield _fifo(item)
        else:
            yield path, item


def walk(directory: str) -> tuple[list[tuple[Path, str] | InputError], list[Note]]:
    """The log files under ``directory`` (sorted, hidden entries skipped) with the
    errors met, and the notes on what was skipped. A directory that yields no file
    (and met no other error) gives an InputError saying so."""
    found: list[tuple[Path, str] | InputError] = []
    skipped: list[str] = []
    hidden = _walk(Path(directory), found, skipped)
    notes = []
    if skipped:
        shown = ", ".join(skipped[:_SHOWN])
        more = len(skipped) - _SHOWN
        are = "is" if len(skipped) == 1 else "are"
        notes.append(
            Note(
                directory,
                f"{directory}: skipped {_count(len(skipped), 'entry', 'entries')} "
                f"that {are} not a regular file: {shown}"
                + (f" and {more} more" if more > 0 else ""),
            )
        )
    if not found:
        why = []
        if hidden:
            why.append(_count(hidden, "hidden entry", "hidden entries"))
        if skipped:
            why.append(f"{_count(len(skipped), 'entry', 'entries')} not a regular file")
        found.append(
            InputError(
                f"{directory}: directory holds no log file"
                + (f" ({' and '.join(why)} skipped)" if why else "")
            )
        )
    return found, notes


def _walk_reporting(
    directory: str, notes: list[Note] | None
) -> Iterator[tuple[Source, str] | InputError]:
    found, mine = walk(directory)
    if notes is None:
        for note in mine:
            sys.stderr.write(f"Note: {note.text}\n")
    else:
        notes.extend(mine)
    yield from found


def _walk(
    directory: Path, found: list[tuple[Path, str] | InputError], skipped: list[str]
) -> int:
    """Append the files under ``directory`` to ``found`` (depth first, by name: the
    order of sorted paths) and what is not a regular file to ``skipped``; return the
    number of hidden entries skipped (a hidden directory counts once)."""
    try:
        with os.scandir(directory) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except OSError as exc:
        found.append(InputError(f"{directory}: cannot read directory: {exc.strerror}"))
        return 0
    hidden = 0
    for entry in entries:
        path = directory / entry.name
        if entry.name.startswith("."):
            hidden += 1
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                hidden += _walk(path, found, skipped)
                continue
            if entry.is_file(follow_symlinks=False):
                found.append((path, str(path)))
                continue
            kind = _kind(path)
        except OSError as exc:
            found.append(InputError(f"{path}: cannot read: {exc.strerror}"))
            continue
        if kind == "broken":
            found.append(InputError(f"{path}: broken symbolic link (no such file)"))
        elif kind == "file":  # a symbolic link to a regular file is a log
            found.append((path, str(path)))
        else:
            skipped.append(f"{path} ({kind})")
    return hidden


def _kind(path: Path) -> str:
    """What a directory entry that is neither a directory nor a regular file is."""
    try:
        mode = path.stat().st_mode  # follows a symbolic link
    except FileNotFoundError:
        return "broken" if path.is_symlink() else "vanished"
    link = path.is_symlink()
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        # Not followed: a link can loop, or repeat logs the walk already reads.
        return "symbolic link to a directory, not followed"
    kinds = (
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
    )
    name = next((text for test, text in kinds if test(mode)), "special file")
    return f"symbolic link to a {name}" if link else name


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _fifo(item: str) -> tuple[Source, str] | InputError:
    """Open the FIFO ``item`` for reading once a writer has opened it.

    Opening a FIFO blocks until a writer opens it; with none it would block forever.
    The open runs in a thread for at most :data:`FIFO_WAIT` seconds (the environment
    variable :data:`FIFO_WAIT_VARIABLE` overrides it). A pipe with a writer (process
    substitution) opens at once. Without a writer in time it is an InputError.
    """
    text = os.environ.get(FIFO_WAIT_VARIABLE)
    wait = FIFO_WAIT
    if text is not None:
        try:
            wait = float(text)
        except ValueError:
            wait = float("nan")
        if not 0 < wait < float("inf"):
            return InputError(
                f"{item}: {FIFO_WAIT_VARIABLE}={text!r} is not a positive number of "
                "seconds"
            )
    opened: list[int] = []
    failed: list[OSError] = []

    def reader() -> None:
        try:
            opened.append(os.open(item, os.O_RDONLY))
        except OSError as exc:
            failed.append(exc)

    thread = threading.Thread(target=reader, name=f"open {item}", daemon=True)
    thread.start()
    thread.join(wait)
    if thread.is_alive():
        # Wake the blocked open by being its writer for an instant (the waiting
        # reader counts as one, so a non-blocking open for writing succeeds), then
        # close both ends. Were the wake-up refused, the daemon thread stays blocked
        # and ends with the process.
        with contextlib.suppress(OSError):
            os.close(os.open(item, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(1.0)
        for fd in opened:
            os.close(fd)
        return InputError(
            f"{item}: FIFO (named pipe) without a writer after {wait:g} s; start the "
            f"writer first, or set {FIFO_WAIT_VARIABLE} to wait longer"
        )
    if failed:
        return InputError(f"{item}: cannot read: {failed[0].strerror}")
    return io.BufferedReader(_Pipe(opened[0], item)), item


class _Pipe(io.RawIOBase):
    """The read end of a pipe, its descriptor closed as soon as it reads end of file
    (the parser does not close a stream it was given) or when closed."""

    def __init__(self, fd: int, name: str) -> None:
        super().__init__()
        self._fd: int | None = fd
        self.name = name

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._fd is None:
            return 0
        count = os.readv(self._fd, [buffer])
        if count == 0:
            self._release()
        return count

    def close(self) -> None:
        self._release()
        super().close()

    def _release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def load_measurements(path: str) -> pa.Table:
    """Read one side: a Parquet/Arrow table, a history directory, or benchmark logs.

    Raises NcclParseError (InputError, SchemaError, UnknownLogFormatError) naming the
    input when it cannot be read.
    """
    # Imported here: this module is on every command's start-up path.
    from ncclparse.api import parse_many
    from ncclparse.health.history import read_history
    from ncclparse.storage import read_table

    candidate = Path(path)
    if candidate.suffix.lower() in (".parquet", ".pq", ".arrow", ".feather", ".ipc"):
        return read_table(candidate)
    if candidate.is_dir() and any(candidate.glob("date=*")):
        return read_history(candidate).select(list(schema.MEASUREMENT_COLUMNS))

    items = list(expand((path,)))
    errors = [e for e in items if isinstance(e, Exception)]
    if errors:
        raise errors[0]
    result = parse_many(e for e in items if not isinstance(e, Exception))
    if result.failures:
        raise result.failures[0]
    return result.measurements
