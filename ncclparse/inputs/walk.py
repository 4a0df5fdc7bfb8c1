"""Command-line inputs: files, directories (recursively) and ``-`` for stdin.

What a directory walk skips is never silent (docs/robustness.md, "Inputs"): hidden
entries are counted; anything that is not a regular file (FIFO, socket, device, a
symbolic link to a directory) and files that are not logs (ncclparse's own outputs,
images, Markdown prose) are named in a :class:`Note`, with what ``--include`` and
``--exclude`` left out counted; a broken symbolic link or an unreadable directory is
an error, and a directory that holds no log is an error.
"""

from __future__ import annotations

import contextlib
import fnmatch
import io
import os
import re
import stat
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

import pyarrow as pa

from ncclparse.errors import InputError, NcclParseError, first_line
from ncclparse.parsers import PARSERS, SNIFF_LINES, Source, numbered, open_source

if TYPE_CHECKING:
    from ncclparse.store.locations import Location

__all__ = [
    "FIFO_WAIT",
    "FIFO_WAIT_VARIABLE",
    "STDIN",
    "Filters",
    "Note",
    "expand",
    "not_a_log",
    "walk",
]

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
    inputs: tuple[str, ...],
    notes: list[Note] | None = None,
    *,
    filters: Filters | None = None,
) -> Iterator[tuple[Source, str] | InputError]:
    """Yield ``(source, name)`` for every input, or an InputError for a bad one.

    Directories are walked recursively in sorted order, skipping hidden entries,
    entries that are not regular files, files that are not logs (:func:`not_a_log`)
    and what ``filters`` leave out (:class:`Filters`): one :class:`Note` per walked
    directory that skipped any names or counts them (appended to ``notes`` when
    given, else written to standard error). A missing input, a broken symbolic link,
    an unreadable directory and a directory without any log are InputErrors. A file
    named explicitly is read whatever its name. ``-`` is standard input (read as
    bytes, decoded leniently by the parser). A FIFO named explicitly is read as a
    stream once a writer has opened it (see :data:`FIFO_WAIT`). Compressed files
    (gzip, xz, zstd) are decompressed as they are read, by the parser.
    """
    for item in inputs:
        if item == STDIN:
            yield sys.stdin.buffer, STDIN
            continue
        if "://" in item:  # pyarrow.fs only for URIs: start-up stays light
            from ncclparse.store.locations import is_uri, location

            if is_uri(item) and not item.lower().startswith("file://"):
                yield from _expand_uri(item, notes, filters)
                continue
            if item.lower().startswith("file://"):
                item = location(item).root  # a local path: walked as any other
        path = Path(item)
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            if _is_link(path):
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
            yield from _walk_reporting(item, notes, filters)
        elif stat.S_ISFIFO(mode):
            yield _fifo(item)
        else:
            yield path, item


def _is_link(path: Path) -> bool:
    """Whether ``path`` is a symbolic link (no: a name the OS refuses, too long)."""
    try:
        return path.is_symlink()
    except OSError:
        return False


def walk(
    directory: str, filters: Filters | None = None
) -> tuple[list[tuple[Path, str] | InputError], list[Note]]:
    """The log files under ``directory`` (sorted, hidden entries skipped) with the
    errors met, and the note on what was skipped (at most one: see :func:`expand`).
    A directory that yields no file (and met no other error) gives an InputError
    saying so."""
    walker = _Walker(filters or Filters())
    walker.walk(Path(directory), "")
    found = walker.found
    notes = []
    said = walker.skipped()
    if said:
        notes.append(Note(directory, f"{directory}: skipped {'; '.join(said)}"))
    if not found:
        why = walker.counts()
        found.append(
            InputError(
                f"{directory}: directory holds no log file"
                + (f" ({_and(why)} skipped)" if why else "")
            )
        )
    return found, notes


def _walk_reporting(
    directory: str, notes: list[Note] | None, filters: Filters | None
) -> Iterator[tuple[Source, str] | InputError]:
    found, mine = walk(directory, filters)
    if notes is None:
        for note in mine:
            sys.stderr.write(f"Note: {note.text}\n")
    else:
        notes.extend(mine)
    yield from found


@dataclass(frozen=True, slots=True)
class Filters:
    """``--include`` / ``--exclude`` patterns for directory walks.

    fnmatch-style, case-sensitive (``*`` also matches ``/``), each matched against
    an entry's path relative to the walked directory (``node1/a.log``) and against
    its name (``a.log``). A file matching an ``exclude`` pattern is skipped, and so
    is a directory (not entered; ``old`` and ``old/`` alike); with ``include``
    patterns, a file matching none of them is skipped. Files named on the command
    line are not filtered.
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def excludes(self, relative: str, name: str, *, directory: bool = False) -> bool:
        patterns = self.exclude
        if directory:
            patterns = tuple(p.rstrip("/") or p for p in patterns)
        return _matches(patterns, relative, name)

    def includes(self, relative: str, name: str) -> bool:
        return not self.include or _matches(self.include, relative, name)


def _matches(patterns: tuple[str, ...], relative: str, name: str) -> bool:
    return any(
        fnmatch.fnmatchcase(relative, p) or fnmatch.fnmatchcase(name, p)
        for p in patterns
    )


# What a walk does not read, by (lower-case) extension: ncclparse's own outputs and
# other files that are never a benchmark log. A compression suffix is looked
# through (`report.html.gz` is HTML).
_NOT_LOGS = {
    ".html": "HTML",
    ".htm": "HTML",
    ".xml": "XML",
    ".prom": "Prometheus text",
    ".parquet": "Parquet/Arrow table",
    ".pq": "Parquet/Arrow table",
    ".arrow": "Parquet/Arrow table",
    ".feather": "Parquet/Arrow table",
    ".ipc": "Parquet/Arrow table",
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".gif": "image",
    ".svg": "image",
    ".webp": "image",
    ".pdf": "PDF",
    # A rules file kept beside the logs (examples/nightly-rules.toml).
    ".toml": "TOML",
}
_COMPRESSED = (".gz", ".xz", ".zst")
_MARKDOWN = (".md", ".markdown")
# `check --json` and `compare --format json` documents open with their format.
_OWN_JSON = re.compile(r'\A\ufeff?\s*\{\s*"format"\s*:\s*"ncclparse-')
# The measurements, runs, analysis and fits tables of `parse` and `analyze`.
_OWN_TABLE = re.compile(r'\A(?:"source","run",|\{"source": "(?:[^"\\]|\\.)*", "run": )')
_HEAD = 4096  # characters read of a .json, .csv or .jsonl file to tell whose it is
_LINE = 1 << 20  # as the parsers' reader: a longer line is read in pieces


def not_a_log(path: Path, opened: Callable[[], Source] | None = None) -> str | None:
    """Why a directory walk does not read the file ``path`` (a few words), or None;
    ``opened`` gives its content when it is not a local path (a remote object).

    By extension: HTML, XML, Prometheus text, Parquet/Arrow tables, images, PDF,
    TOML (a rules file).
    By content: ncclparse's JSON outputs (``"format": "ncclparse-..."``), its CSV
    and JSON Lines tables (``source,run,...``), and Markdown holding no benchmark
    output (no parser recognises its first :data:`SNIFF_LINES` lines, as for any
    log). A file that cannot be read is not judged here: reading it says why.
    """
    name = path.name.lower()
    for suffix in _COMPRESSED:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    extension = os.path.splitext(name)[1]
    if extension in _NOT_LOGS:
        return _NOT_LOGS[extension]
    try:
        if extension == ".json":
            head = _head(opened or path, lambda h: h.read(_HEAD))
            return "ncclparse JSON output" if _OWN_JSON.match(head) else None
        if extension in (".csv", ".jsonl"):
            head = _head(opened or path, lambda h: h.readline(_HEAD))
            return "ncclparse CSV/JSONL table" if _OWN_TABLE.match(head) else None
        if extension in _MARKDOWN and not _holds_benchmark_output(opened or path):
            return "Markdown without benchmark output"
    except (NcclParseError, OSError):
        return None
    return None


def _head(path: Path | Callable[[], Source], read: Callable[[IO[str]], str]) -> str:
    _, handle, _ = open_source(path if isinstance(path, Path) else path())
    with handle:
        return read(handle)


def _holds_benchmark_output(path: Path | Callable[[], Source]) -> bool:
    """Whether a parser recognises the start of ``path``, as it would for a log."""

    def lines(handle: IO[str]) -> Iterator[str]:
        for _ in range(SNIFF_LINES):
            raw = handle.readline(_LINE)
            if not raw:
                return
            yield raw

    _, handle, _ = open_source(path if isinstance(path, Path) else path())
    with handle:
        head = list(numbered(lines(handle)))
    return any(parser.sniff(head) for parser in PARSERS)


class _Walker:
    """One directory walk: the files found (and errors met) in sorted path order,
    and what was skipped, by kind."""

    def __init__(self, filters: Filters) -> None:
        self.filters = filters
        self.found: list[tuple[Path, str] | InputError] = []
        self.special: list[str] = []  # "path (kind)" of entries not regular files
        self.not_logs: list[tuple[str, str]] = []  # (path or URI, why)
        self.hidden = 0  # a hidden directory counts once
        self.unmatched = 0  # files matching no --include pattern
        self.excluded_files = 0
        self.excluded_directories = 0

    def walk(self, directory: Path, relative: str) -> None:
        """Visit ``directory`` (``relative`` to the root, "" for the root itself)
        depth first, by name: the order of sorted paths."""
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError as exc:
            self.found.append(
                InputError(f"{directory}: cannot read directory: {exc.strerror}")
            )
            return
        for entry in entries:
            if entry.name.startswith("."):
                self.hidden += 1
                continue
            path = directory / entry.name
            inner = f"{relative}{entry.name}"
            try:
                is_directory = entry.is_dir(follow_symlinks=False)
            except OSError as exc:
                self.found.append(InputError(f"{path}: cannot read: {exc.strerror}"))
                continue
            if is_directory:
                if self.filters.excludes(inner, entry.name, directory=True):
                    self.excluded_directories += 1
                else:
                    self.walk(path, f"{inner}/")
                continue
            if self.filters.excludes(inner, entry.name):
                self.excluded_files += 1
            elif not self.filters.includes(inner, entry.name):
                self.unmatched += 1
            else:
                self.file(entry, path)

    def file(self, entry: os.DirEntry[str], path: Path) -> None:
        try:
            kind = "file" if entry.is_file(follow_symlinks=False) else _kind(path)
        except OSError as exc:
            self.found.append(InputError(f"{path}: cannot read: {exc.strerror}"))
            return
        if kind == "broken":
            self.found.append(
                InputError(f"{path}: broken symbolic link (no such file)")
            )
        elif kind != "file":
            self.special.append(f"{path} ({kind})")
        elif (why := not_a_log(path)) is not None:
            self.not_logs.append((str(path), why))
        else:  # a regular file, or a symbolic link to one
            self.found.append((path, str(path)))

    def skipped(self) -> list[str]:
        """What the walk skipped, one clause per kind (hidden entries are only
        counted, in the error of a directory without a log)."""
        said = []
        if self.special:
            are = "is" if len(self.special) == 1 else "are"
            said.append(
                f"{_count(len(self.special), 'entry', 'entries')} that {are} not a "
                f"regular file: {_shown(self.special)}"
            )
        if self.not_logs:
            kinds = Counter(why for _, why in self.not_logs)
            by_kind = ", ".join(f"{why}: {n}" for why, n in kinds.items())
            are = "is not a log" if len(self.not_logs) == 1 else "are not logs"
            said.append(
                f"{_count(len(self.not_logs), 'file', 'files')} that {are} "
                f"({by_kind}): {_shown([p for p, _ in self.not_logs])}"
            )
        return said + self._filtered()

    def _filtered(self) -> list[str]:
        said = []
        if self.unmatched:
            said.append(
                f"{_count(self.unmatched, 'file', 'files')} not matching --include"
            )
        excluded = []
        if self.excluded_files:
            excluded.append(_count(self.excluded_files, "file", "files"))
        if self.excluded_directories:
            excluded.append(
                _count(self.excluded_directories, "directory", "directories")
            )
        if excluded:
            said.append(f"{' and '.join(excluded)} matching --exclude")
        return said

    def counts(self) -> list[str]:
        """What was skipped, counted: for the error of a directory without a log."""
        why = []
        if self.hidden:
            why.append(_count(self.hidden, "hidden entry", "hidden entries"))
        if self.special:
            n = len(self.special)
            why.append(f"{_count(n, 'entry', 'entries')} not a regular file")
        if self.not_logs:
            n = len(self.not_logs)
            are = "is not a log" if n == 1 else "are not logs"
            why.append(f"{_count(n, 'file', 'files')} that {are}")
        return why + self._filtered()


class RemoteFile(io.RawIOBase):
    """An object of a remote file system, opened when first read and closed at its
    end (a walk of 1,000 objects holds one connection at a time)."""

    def __init__(self, where: Location, path: str) -> None:
        super().__init__()
        self.where, self.path = where, path
        self.name = where.uri(path)
        self._stream: Any = None
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if self._done:
            return 0
        if self._stream is None:
            # compression=None: the parser tells compressed content by its bytes.
            self._stream = self.where.fs.open_input_stream(self.path, compression=None)
        data = self._stream.read(len(buffer))
        n = len(data)
        memoryview(buffer)[:n] = data
        if n == 0:  # the end: let the connection go now, not when collected
            self._stream.close()
            self._stream, self._done = None, True
        return n

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        super().close()


def _expand_uri(
    item: str, notes: list[Note] | None, filters: Filters | None
) -> Iterator[tuple[Source, str] | InputError]:
    """The objects an input URI names: one object, or every object under a prefix
    (sorted; hidden names, what ``filters`` leave out and files that are not logs
    skipped, as in a directory walk)."""
    from pyarrow.fs import FileType

    from ncclparse.store.locations import location

    try:
        where = location(item)
        info = where.fs.get_file_info(where.root)
    except (InputError, OSError, pa.ArrowException) as exc:
        yield _error(item, f"cannot read: {first_line(exc)}")
        return
    if info.type == FileType.File:
        yield _remote_source(where, where.root), item
        return
    if info.type != FileType.Directory:
        yield _error(item, "no such file or directory")
        return
    try:
        listing = where.listing(recursive=True)
    except (OSError, pa.ArrowException) as exc:
        yield _error(item, f"cannot list: {first_line(exc)}")
        return
    walker = _Walker(filters or Filters())
    start = len(where.root.rstrip("/")) + 1
    objects: list[str] = []  # paths (of the file system) of the logs found
    for entry in listing:
        if entry.type != FileType.File:
            continue
        relative = entry.path[start:]
        parts = relative.split("/")
        if any(p.startswith(".") for p in parts):
            walker.hidden += 1
        elif any(
            walker.filters.excludes("/".join(parts[: i + 1]), p, directory=True)
            for i, p in enumerate(parts[:-1])
        ) or walker.filters.excludes(relative, parts[-1]):
            walker.excluded_files += 1
        elif not walker.filters.includes(relative, parts[-1]):
            walker.unmatched += 1
        else:
            opened = partial(_remote_source, where, entry.path)
            reason = not_a_log(Path(parts[-1]), opened)
            if reason is not None:
                walker.not_logs.append((where.uri(entry.path), reason))
            else:
                objects.append(entry.path)
    said = walker.skipped()
    if said:
        note = Note(item, f"{item}: skipped {'; '.join(said)}")
        if notes is None:
            sys.stderr.write(f"Note: {note.text}\n")
        else:
            notes.append(note)
    if not objects:
        counted = walker.counts()
        skipped = f" ({_and(counted)} skipped)" if counted else ""
        yield _error(item, f"directory holds no log file{skipped}")
    for path in objects:
        yield _remote_source(where, path), where.uri(path)


def _error(item: str, text: str) -> InputError:
    """The InputError of the input URI ``item``, which names it as its source (a
    URI holds colons: the message cannot be split to find it)."""
    return InputError(f"{item}: {text}", source=item)


def _remote_source(where: Location, path: str) -> Source:
    # A binary stream: the Source union names IO[bytes], which RawIOBase is.
    return cast("IO[bytes]", RemoteFile(where, path))


def _shown(names: list[str]) -> str:
    """The first names, and how many more there are."""
    more = len(names) - _SHOWN
    return ", ".join(names[:_SHOWN]) + (f" and {more} more" if more > 0 else "")


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


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
