"""A progress line on standard error while inputs are parsed, when it is a terminal.

One line, redrawn in place (``\\r``) at most every :data:`INTERVAL` seconds, never
before :data:`DELAY` seconds have passed (quick work shows nothing), and wiped when
the work ends so that the messages that follow start on a clean line::

    [12/340 files] logs/node07/all_reduce.log: 1.2 GiB of 4 GiB read

Shown only when standard error is a terminal and ``--quiet`` is not given; the
environment variable :data:`ENV` forces it off (``0``) or on (``1``) whatever the
terminal (``--quiet`` still wins). The clock is :data:`CLOCK`, read when a
:class:`Progress` is made: tests replace it, so no test depends on wall time.

Why not ``click.progressbar`` (checked against click 8.5.1): it leaves its bar on
screen and ends it with a newline (and cursor escapes), where this line is wiped so
that the summary and warnings after it stand alone; it draws as soon as it is
entered (no :data:`DELAY`) and limits redraws by step count, not by time (its clock
is the global ``time.time``, not one a test can pass); on a stream that is no
terminal it prints its label once, and it cannot be forced on there
(``NCCLPARSE_PROGRESS=1``); it has one position over one length, where this line
counts files and bytes (of the current file and of all, with files merged from
worker processes adding both at once); it fits the terminal by shortening its bar,
not the file name, and passes control characters of a name through; a closed
terminal raises. Nor may this layer import click (the library never does; cli/ is
the only user of it). About half of this module is not the line but the byte
counting (:func:`tracked`), which click does not offer in any form.
"""

from __future__ import annotations

import io
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, TextIO, cast

from ncclparse.formatting import format_bytes
from ncclparse.parsers import Source

__all__ = ["CLOCK", "DELAY", "ENV", "INTERVAL", "Progress", "enabled", "tracked"]

ENV = "NCCLPARSE_PROGRESS"
INTERVAL = 0.1  # seconds between redraws: at most ~10 a second
DELAY = 0.5  # seconds of work before the first draw
CLOCK: Callable[[], float] = time.monotonic
_WIDTH = 80  # columns when the terminal's cannot be asked
_BUFFER = 1 << 20


def enabled(quiet: bool, stream: TextIO | None = None) -> bool:
    """Whether to show progress on ``stream`` (default: standard error): not with
    ``quiet``; else as :data:`ENV` says (``0`` off, ``1`` on); else when ``stream``
    is a terminal."""
    if quiet:
        return False
    forced = os.environ.get(ENV, "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


class Progress:
    """The progress line of ``total`` files written to ``stream``.

    :meth:`start` a file (its name and size in bytes, None when unknown), report
    :meth:`read` bytes, :meth:`done` the file (or report a file :meth:`parsed`
    elsewhere); :meth:`close` wipes the line. Draws are throttled by ``clock``
    (seconds): the first after ``delay``, then at most one
    per ``interval``. ``width`` (default: the terminal's, else 80) bounds the line:
    a long name loses its start.
    """

    def __init__(
        self,
        total: int,
        stream: TextIO,
        *,
        clock: Callable[[], float] | None = None,
        interval: float = INTERVAL,
        delay: float = DELAY,
        width: int | None = None,
    ) -> None:
        self.total = total
        self.stream = stream
        self._clock = clock or CLOCK
        self._interval = interval
        self._next = self._clock() + delay
        self._width = width or _terminal_width(stream)
        self._done = 0
        self._name: str | None = None
        self._size: int | None = None
        self._read = 0  # bytes of the current file
        self._all = 0  # bytes of every file
        self._shown = 0  # length of the line on screen (0: none)

    def start(self, name: str, size: int | None) -> None:
        """A file starts: ``size`` bytes long (None: unknown, e.g. a pipe)."""
        self._name, self._size, self._read = name, size, 0
        self._tick()

    def read(self, count: int) -> None:
        """``count`` more bytes of the current file were read."""
        self._read += count
        self._all += count
        self._tick()

    def done(self) -> None:
        """The current file is parsed (or failed)."""
        self._done += 1
        self._name = None
        self._tick()

    def parsed(self, size: int) -> None:
        """A file of ``size`` bytes was parsed elsewhere (by a worker process): read
        and done at once."""
        self._all += size
        self._done += 1
        self._name = None
        self._tick()

    def line(self, width: int | None = None) -> str:
        """The text of the line now; with ``width``, cut to that many characters by
        shortening the file name from its start (``...``)."""
        head = f"[{self._done}/{self.total} files]"
        if self._name is None:
            return _fit(f"{head} {format_bytes(self._all)} read", width)
        read = format_bytes(self._read)
        if self._size is None:
            tail = f": {read} read"
        else:
            tail = f": {read} of {format_bytes(self._size)} read"
        name = _printable(self._name)
        if width is not None and len(head) + 1 + len(name) + len(tail) > width:
            room = width - len(head) - 1 - len(tail) - 3
            name = "..." + name[len(name) - max(0, room) :]
        return _fit(f"{head} {name}{tail}", width)

    def close(self) -> None:
        """Wipe the line, if one was drawn."""
        if self._shown:
            self._write("\r" + " " * self._shown + "\r")
            self._shown = 0

    def _tick(self) -> None:
        now = self._clock()
        if now < self._next:
            return
        self._next = now + self._interval
        text = self.line(self._width - 1)  # a character in the last column wraps
        self._write("\r" + text + " " * max(0, self._shown - len(text)))
        self._shown = len(text)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken terminal: no progress
            self._shown = 0


def tracked(
    sources: Iterable[tuple[Source, str | None]], progress: Progress
) -> Iterator[tuple[Source, str | None]]:
    """The ``(source, name)`` pairs of ``sources`` for :func:`ncclparse.parse_many`,
    each file reported to ``progress`` as it is read and when the next is asked for.

    A path is opened here (and closed once parsed) through a byte counter; a path
    that cannot be opened is passed on as it is, for the parser to name the error.
    A binary stream is read through a byte counter and left open, as the parser
    leaves it. Text streams and log text are passed on uncounted. The parsed tables
    are the same as without progress.
    """
    for source, name in sources:
        counted, size = _counted(source, progress)
        progress.start(_shown_name(source, name), size)
        try:
            yield (source if counted is None else counted), name
        finally:
            if counted is not None:
                counted.close()  # closes an opened path, not a stream given
            progress.done()


def _shown_name(source: Source, name: str | None) -> str:
    """The name of ``source`` on the line: ``name``, else its path, else a stand-in."""
    if name is not None:
        return name
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source):
        return str(source)
    return "<log text>" if isinstance(source, str) else "<stream>"


def _counted(source: Source, progress: Progress) -> tuple[Any, int | None]:
    """(a byte-counting stand-in for ``source`` or None, its size if known)."""
    if isinstance(source, Path):
        try:
            raw = source.open("rb", buffering=0)
        except (OSError, ValueError):
            return None, None
        try:
            mode = os.fstat(raw.fileno())
        except OSError:
            raw.close()
            return None, None
        size = mode.st_size if stat.S_ISREG(mode.st_mode) else None
        if stat.S_ISDIR(mode.st_mode):
            raw.close()
            return None, None
        counter = _Counter(raw, progress, owned=True)
        return io.BufferedReader(counter, _BUFFER), size
    if isinstance(source, str | io.TextIOBase):
        return None, None
    if callable(getattr(source, "peek", None)):  # buffered: so is its stand-in
        counter = _Counter(cast("IO[bytes]", source), progress, owned=False)
        return io.BufferedReader(counter, _BUFFER), None
    if isinstance(source, io.RawIOBase) and not source.seekable():
        # Unbuffered and unseekable (a remote object): the parser sees the same.
        return _Counter(cast("IO[bytes]", source), progress, owned=False), None
    return None, None


class _Counter(io.RawIOBase):
    """``inner``'s bytes, each read reported to ``progress``; closes ``inner`` only
    when ``owned``."""

    def __init__(self, inner: IO[bytes], progress: Progress, *, owned: bool) -> None:
        super().__init__()
        self._inner = inner
        self._progress = progress
        self._owned = owned
        self.name = getattr(inner, "name", None)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        # At most one read of the inner stream: a pipe's bytes reach the parser as
        # they come, not once a buffer is full.
        for method in ("readinto1", "readinto"):
            readinto = getattr(self._inner, method, None)
            if callable(readinto):
                count = int(readinto(buffer) or 0)
                break
        else:
            data = self._inner.read(len(buffer))
            count = len(data)
            memoryview(buffer).cast("B")[:count] = data
        if count:
            self._progress.read(count)
        return count

    def close(self) -> None:
        if not self.closed and self._owned:
            self._inner.close()
        super().close()


def _terminal_width(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns or _WIDTH
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return _WIDTH


def _printable(text: str) -> str:
    """``text`` with control characters (a file name may hold any) as ``?``."""
    return "".join(c if c.isprintable() else "?" for c in text)


def _fit(text: str, width: int | None) -> str:
    """``text`` cut to ``width`` characters (None: as it is)."""
    return text if width is None else text[: max(0, width)]
