"""Files written whole or not at all.

:func:`atomic_output` writes to a temporary file beside the target and renames it
over the target only when complete, so a reader never sees half a file and a failed
write leaves yesterday's file as it was.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
    (see :func:`remove_stale_temporaries`). Raises NcclParseError when the directory
    cannot be written.
    """
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
