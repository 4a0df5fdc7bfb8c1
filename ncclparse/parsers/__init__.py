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
from typing import IO

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
    parse: Callable[[Iterable[Line], str], tuple[list[Run], Counter[str]]]
    # The parser also takes Skipped items: runs of plain NCCL debug lines it need not
    # read (see _lines.without_nccl_debug).
    skips_nccl_debug: bool = False


def _registry() -> list[LogParser]:
    # Most specific first: the nccl-tests text parser accepts rows-only fragments,
    # so it must come after formats with unmistakable markers.
    from . import imb, nccl_tests, nccl_tests_json, oneccl, oneccl_csv

    modules = [oneccl_csv, oneccl, imb, nccl_tests_json, nccl_tests]
    return [
        LogParser(m.NAME, m.sniff, m.parse, getattr(m, "SKIPS_NCCL_DEBUG", False))
        for m in modules
    ]


PARSERS: list[LogParser] = _registry()


def parse_lines(handle: IO[str], source: str) -> tuple[list[Run], Counter[str]]:
    """Detect the format of the text in ``handle`` and parse it.

    Raises UnknownLogFormatError when no parser recognises the input.
    """
    lines = numbered(handle)
    head = list(itertools.islice(lines, SNIFF_LINES))
    for parser in PARSERS:
        if parser.sniff(head):
            rest: Iterable[Line | Skipped] = lines
            if parser.skips_nccl_debug:
                rest = without_nccl_debug(handle, len(head) + 1)
            return parser.parse(itertools.chain(head, rest), source)
    first = next(((ln.number, ln.text) for ln in head if ln.text.strip()), None)
    if first is None:
        raise UnknownLogFormatError(source, None)
    raise UnknownLogFormatError(source, first[1].strip(), first[0])
