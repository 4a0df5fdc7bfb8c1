"""Format detection and dispatch: one parser module per tool output format.

A parser module exposes ``NAME``, ``sniff(head) -> bool`` (does this look like my
format? ``head`` is the first lines of the input) and
``parse(lines, source) -> (runs, accounting)`` which consumes a stream of numbered
lines in bounded memory (beyond the rows it returns).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from ncclparse.errors import UnknownLogFormatError

from ._lines import Line, Skipped, numbered, without_nccl_debug
from ._model import Run

# How far into an input detection looks: NCCL_DEBUG=INFO start-up chatter of many
# ranks can precede the first line of the benchmark itself by thousands of lines.
SNIFF_LINES = 20_000


@dataclass(frozen=True)
class LogParser:
    """A registered format: its name, detector and line-stream parser."""

    name: str
    sniff: Callable[[Sequence[Line]], bool]
    parse: Callable[..., Any]
    # A streaming parser is called as parse(lines, source, emit): it hands each run to
    # emit once final, returns the accounting, and also takes Skipped items (runs of
    # plain NCCL debug lines it need not read, see _lines.without_nccl_debug).
    streams: bool = False


def _registry() -> list[LogParser]:
    # Most specific first: the nccl-tests text parser accepts rows-only fragments,
    # so it must come after formats with unmistakable markers.
    from . import imb, nccl_tests, nccl_tests_json, oneccl, oneccl_csv

    modules = [oneccl_csv, oneccl, imb, nccl_tests_json, nccl_tests]
    return [
        LogParser(m.NAME, m.sniff, m.parse, getattr(m, "STREAMS", False))
        for m in modules
    ]


PARSERS: list[LogParser] = _registry()


def parse_lines(
    handle: IO[str], source: str, emit: Callable[[Run], None]
) -> Counter[str]:
    """Detect the format of the text in ``handle``, parse it, return the accounting.

    Runs go to ``emit`` in source order (by first line), as soon as they are final
    where the parser streams. Raises UnknownLogFormatError when no parser recognises
    the input.
    """
    lines = numbered(handle)
    head = list(itertools.islice(lines, SNIFF_LINES))
    for parser in PARSERS:
        if parser.sniff(head):
            rest: Iterable[Line | Skipped] = lines
            if parser.streams:
                rest = without_nccl_debug(handle, len(head) + 1)
                counts: Counter[str] = parser.parse(
                    itertools.chain(head, rest), source, emit
                )
                return counts
            parsed: tuple[list[Run], Counter[str]] = parser.parse(
                itertools.chain(head, rest), source
            )
            runs, accounting = parsed
            for run in sorted(runs, key=lambda r: r.first_line):
                emit(run)
            return accounting
    first = next(((ln.number, ln.text) for ln in head if ln.text.strip()), None)
    if first is None:
        raise UnknownLogFormatError(source, None)
    raise UnknownLogFormatError(source, first[1].strip(), first[0])
