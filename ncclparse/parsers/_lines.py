"""Numbered input lines: sources read as line streams, launcher prefixes stripped."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ncclparse.errors import InputError

# Launchers and log collectors put these before every line; they are not part of the
# benchmark's output (schema.md: stripped before reading, `line` unchanged).
_PREFIXES = re.compile(
    r"""^(?:
        \[(?P<ompi>\d+,\d+)\]<std(?:out|err)>:[ ]?     # OpenMPI --tag-output
      | \[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}     # ISO timestamps
        (?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?[ ]
      | [ ]*(?P<srun>\d+):[ ]                          # srun --label
      | \[(?P<rank>\d+)\][ ]                          # MPICH / Intel MPI -prepend-rank
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Line:
    """One input line: 1-based number, text without prefix or line ending."""

    number: int
    text: str
    complete: bool  # False for a last line cut off by the end of input (no newline)
    stream: str | None = None  # launcher rank tag, when the line carried one


def strip_prefix(text: str) -> tuple[str, str | None]:
    """Remove launcher prefixes; return the text and the rank tag (or None)."""
    stream = None
    for _ in range(3):
        match = _PREFIXES.match(text)
        if match is None:
            break
        tag = match.group("ompi") or match.group("srun") or match.group("rank")
        if tag is not None:
            stream = tag
        text = text[match.end() :]
    return text, stream


# Longer lines are cut here and marked incomplete (parsers read no value from them):
# this bounds the memory parsers use per line (docs/robustness.md).
MAX_LINE = 1 << 20


def numbered(raw_lines: Iterable[str]) -> Iterator[Line]:
    """Number raw lines (with their endings), strip CR/LF and launcher prefixes."""
    for number, raw in enumerate(raw_lines, start=1):
        # The reader splits at \r too (newline=""), so a lone \r also ends a line.
        complete = raw.endswith(("\n", "\r"))
        text = raw.rstrip("\r\n")
        if len(text) > MAX_LINE:  # no tool prints this; bound what parsers split
            text, complete = text[:MAX_LINE], False
        if "\r" in text:  # a carriage-return redraw: keep what was shown last
            text = text.rsplit("\r", 1)[-1] or text.replace("\r", "")
        text, stream = strip_prefix(text)
        yield Line(number, text, complete, stream)


Source = str | Path | IO[str] | IO[bytes]


def open_source(source: Source, name: str | None = None) -> tuple[str, Iterable[str]]:
    """Return (display name, raw line iterator) for a path, stream or string.

    A ``str`` containing a newline (or empty) is log text; any other ``str`` is a
    path. Bytes are decoded as UTF-8 with invalid sequences replaced (logs are not
    always clean). Raises InputError for a path that cannot be opened.
    """
    if isinstance(source, Path) or (
        isinstance(source, str) and source and "\n" not in source
    ):
        path = Path(source)
        display = name or str(source)
        if path.is_dir():
            raise InputError(f"{display}: is a directory, not a log file")
        try:
            handle = path.open("r", encoding="utf-8", errors="replace", newline="")
        except OSError as exc:
            raise InputError(f"{display}: cannot read: {exc.strerror}") from exc
        return display, _closing_lines(handle)
    if isinstance(source, str):
        return name or "<string>", io.StringIO(source, newline="")
    display = name or getattr(source, "name", None) or "<stream>"
    if isinstance(display, int):
        display = "<stream>"
    if isinstance(source, io.TextIOBase):
        return str(display), source
    return str(display), io.TextIOWrapper(
        source,  # type: ignore[arg-type]
        encoding="utf-8",
        errors="replace",
        newline="",
    )


def _closing_lines(handle: IO[str]) -> Iterator[str]:
    with handle:
        yield from handle
