"""Command-line inputs: files, directories (recursively) and ``-`` for stdin; a
measurements table from a table file, a history directory or logs."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from ncclparse import schema
from ncclparse.errors import InputError
from ncclparse.parsers import Source

STDIN = "-"


def expand(inputs: tuple[str, ...]) -> Iterator[tuple[Source, str] | InputError]:
    """Yield ``(source, name)`` for every input, or an InputError for a missing one.

    Directories are walked recursively in sorted order, skipping hidden entries; ``-``
    is standard input (read as bytes, decoded leniently by the parser).
    """
    for item in inputs:
        if item == STDIN:
            yield sys.stdin.buffer, STDIN
            continue
        path = Path(item)
        if path.is_dir():
            for found in sorted(path.rglob("*")):
                relative = found.relative_to(path).parts
                if found.is_file() and not any(p.startswith(".") for p in relative):
                    yield found, str(found)
        elif path.exists():
            yield path, item
        else:
            yield InputError(f"{item}: no such file or directory")


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
