"""Expand command-line inputs: files, directories (recursively) and ``-`` for stdin."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from ncclparse.errors import InputError
from ncclparse.parsers._lines import Source

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
