"""Where inputs and histories live: a local path or an object-store URI.

A :class:`Location` is a ``pyarrow.fs`` file system and a path in it, made from what
the user typed: a plain path is the local file system; ``s3://``, ``gs://``,
``abfs://``, ``hdfs://`` and ``file://`` URIs go through
``pyarrow.fs.FileSystem.from_uri`` (no other dependency), with the options it
takes in the query string (``s3://bucket/h?endpoint_override=host:9000&scheme=http``)
and the credentials of the usual environment (``AWS_ACCESS_KEY_ID``, ...).

Writes are whole or absent: a local file is written beside its target and renamed
(:func:`ncclparse.store.atomic.atomic_output`); an object is uploaded from memory in one
stream whose close publishes it, so a failed upload publishes nothing.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.fs as pafs

from ncclparse.errors import InputError
from ncclparse.store.atomic import atomic_output

__all__ = ["Location", "is_uri", "location"]

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_uri(text: str) -> bool:
    """True when ``text`` names a location by URI (``scheme://...``), not a path."""
    return bool(_URI.match(text))


@dataclass(frozen=True, slots=True)
class Location:
    """A directory (or prefix) in a file system: ``root`` is its path in ``fs``,
    ``name`` what the user typed (for messages), ``local`` the directory when it is
    on the local file system (None for an object store)."""

    fs: pafs.FileSystem
    root: str
    name: str
    local: Path | None

    def path(self, relative: str) -> str:
        """The file system path of ``relative`` (``/``-separated) under the root."""
        return f"{self.root.rstrip('/')}/{relative}" if relative else self.root

    def uri(self, path: str) -> str:
        """How messages name ``path`` (a path of this file system)."""
        if self.local is not None:
            return path
        relative = path[len(self.root) :].lstrip("/")
        return f"{self.name.split('?')[0].rstrip('/')}/{relative}"

    def kind(self, relative: str = "") -> pafs.FileType:
        """What is at ``relative``: a file, a directory, or nothing (NotFound)."""
        return self.fs.get_file_info(self.path(relative)).type

    def listing(self, relative: str = "", *, recursive: bool = False) -> list[Any]:
        """``FileInfo`` of the entries under ``relative`` (none when it is absent),
        sorted by path."""
        selector = pafs.FileSelector(
            self.path(relative), allow_not_found=True, recursive=recursive
        )
        return sorted(self.fs.get_file_info(selector), key=lambda i: i.path)

    def files(self, relative: str = "") -> list[str]:
        """Paths of every file under ``relative``, recursively, sorted; entries whose
        name starts with ``.`` or ``_`` (temporary, hidden, markers) and what lies
        under them are left out, as dataset readers do."""
        start = len(self.path(relative).rstrip("/")) + 1
        return [
            info.path
            for info in self.listing(relative, recursive=True)
            if info.type == pafs.FileType.File
            and not any(p.startswith((".", "_")) for p in info.path[start:].split("/"))
        ]

    def make_directory(self, relative: str = "") -> None:
        """Create the directory ``relative`` and its parents (object stores have no
        directories: nothing to do there)."""
        if self.local is not None:
            (self.local / relative).mkdir(parents=True, exist_ok=True)

    @contextmanager
    def output(self, relative: str) -> Iterator[IO[bytes]]:
        """A binary stream for the new file ``relative``, published whole when the
        block ends without error, and not at all otherwise. A local file is written
        beside its target and renamed; an object is gathered in memory and uploaded
        in one stream. Raises NcclParseError (local) or OSError/ArrowException
        (object store) when it cannot be written."""
        if self.local is not None:
            with atomic_output(Path(self.path(relative)), binary=True) as handle:
                yield handle
            return
        buffer = io.BytesIO()
        yield buffer
        with self.fs.open_output_stream(self.path(relative)) as stream:
            stream.write(buffer.getbuffer())

    def delete(self, path: str) -> None:
        """Remove the file ``path`` (of this file system)."""
        self.fs.delete_file(path)


def location(text: str | Path) -> Location:
    """The :class:`Location` of a path or URI. Raises InputError when the URI names
    no file system pyarrow knows, or its file system cannot be set up (missing
    credentials, a bad option)."""
    if isinstance(text, Path) or not is_uri(text):
        path = Path(text)
        return Location(pafs.LocalFileSystem(), str(path), str(text), path)
    try:
        fs, root = pafs.FileSystem.from_uri(text)
    except (pa.ArrowException, OSError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        raise InputError(f"{text}: cannot use this location: {reason}") from exc
    if isinstance(fs, pafs.LocalFileSystem):
        return Location(fs, root, text, Path(root))
    return Location(fs, root.rstrip("/"), text, None)
