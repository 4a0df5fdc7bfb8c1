"""Files written whole or not at all.

:func:`atomic_output` writes to a temporary file beside the target and renames it
over the target only when complete, so a reader never sees half a file and a failed
write leaves yesterday's file as it was. :func:`append_block` appends to a file that
other processes append to, losing none of their blocks.
"""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from ncclparse.errors import NcclParseError

# atomic_output's temporary files: `.<target name>.<random>.tmp`, beside the target.
_TEMP_SUFFIX = ".tmp"


@contextmanager
def atomic_output(path: Path, *, binary: bool) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; rename it to ``path`` on success.

    On any error (or interruption) the temporary file is removed and ``path`` is left
    as it was; only a process killed outright (SIGKILL, power loss) leaves it behind
    (see :func:`remove_stale_temporaries`). A symbolic link is followed: the file
    it names is replaced, the link kept. A ``path`` that is no regular file (a
    device such as ``/dev/null`` or ``/dev/stdout``, a FIFO) is written as it is:
    renaming over it would replace the device with a file. Raises NcclParseError
    when the directory or the file cannot be written.
    """
    if _is_special(path):
        with _written_in_place(path, binary) as handle:
            yield handle
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, temp_name = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=_TEMP_SUFFIX, dir=directory
        )
        # mkstemp makes the file private (0600); the output should get the mode any
        # new file gets, so that a shared report stays readable.
        os.chmod(temp_name, 0o666 & ~_umask())
    except OSError as exc:
        raise NcclParseError(f"{path}: cannot write: {exc.strerror}") from exc
    try:
        mode, encoding = ("wb", None) if binary else ("w", "utf-8")
        with os.fdopen(fd, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException as exc:
        Path(temp_name).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise NcclParseError(f"{path}: cannot write: {exc.strerror}") from exc
        raise


def _is_special(path: Path) -> bool:
    """Whether ``path`` exists and is no regular file (links followed)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:  # missing, or a link to nothing: a file is made
        return False


@contextmanager
def _written_in_place(path: Path, binary: bool) -> Iterator[IO[Any]]:
    """``path`` (a device, a FIFO) opened for writing; an OSError (``/dev/full``:
    no space left) raised as NcclParseError naming it."""
    mode, encoding = ("wb", None) if binary else ("w", "utf-8")
    try:
        with open(path, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
    except OSError as exc:
        raise NcclParseError(f"{path}: cannot write: {exc.strerror}") from exc


def append_block(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` (created if missing) as one block, after a blank
    line when the file holds text (and a newline when it lacks its last one).

    Processes appending at once (a CI job's steps writing its step summary) each
    keep their block: the file is locked (flock) for the append, and the append is
    made to the file itself, never by replacing it with a copy that another's
    block may be missing from. A failed write is undone (the file is cut back).
    Raises NcclParseError when the file cannot be opened, locked or written.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
    except OSError as exc:
        raise NcclParseError(f"{path}: cannot append to it: {exc.strerror}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        last = os.pread(fd, 1, size - 1) if size else b""
        lead = "" if not size else "\n" if last == b"\n" else "\n\n"
        data = (lead + text).encode("utf-8")
        try:
            while data:
                data = data[os.write(fd, data) :]
        except OSError:
            # What the write said is the error (a device cannot be cut back).
            with suppress(OSError):
                os.ftruncate(fd, size)
            raise
    except OSError as exc:
        raise NcclParseError(f"{path}: cannot append to it: {exc.strerror}") from exc
    finally:
        os.close(fd)  # and so unlocked


def remove_stale_temporaries(
    directory: Path, *, older_than: float, now: float | None = None
) -> tuple[Path, ...]:
    """Remove the temporary files :func:`atomic_output` left in ``directory`` that
    were not modified for ``older_than`` seconds; return those removed, sorted.

    Only the caller knows that no live writer still uses them (it holds the lock
    every writer there holds): the age is a second guard, for file systems whose
    locks do not reach other hosts. A file that cannot be removed is left.
    """
    now = time.time() if now is None else now
    removed = []
    for path in sorted(directory.glob(f".*{_TEMP_SUFFIX}")):
        try:
            if path.is_file() and now - path.stat().st_mtime > older_than:
                path.unlink()
                removed.append(path)
        except OSError:  # gone meanwhile, or not ours to remove
            continue
    return tuple(removed)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
