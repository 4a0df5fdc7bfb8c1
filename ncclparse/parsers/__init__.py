"""Format detection and dispatch: one parser module per tool output format.

Every parser module satisfies :class:`Parser`: a ``NAME``, ``sniff(head)`` (does this
look like my format? ``head`` is the first lines of the input) and
``parse(lines, source, emit)``, which consumes a stream of numbered lines in bounded
memory, hands each run to ``emit`` once it is final (in source order) and returns the
line accounting. Nothing outside this package imports its private modules: what the
rest of ncclparse needs (:data:`Source`, :func:`open_source`, :class:`Collector`,
:data:`LINE_KINDS`, :func:`numbered`, :class:`ParseResult`) is re-exported here,
with :func:`parse_source`, which parses one source into a Collector.
"""

from __future__ import annotations

import contextlib
import io
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import IO, Protocol, cast

from ncclparse.errors import InputError, UnknownLogFormatError

from . import imb, nccl_tests, nccl_tests_json, oneccl, oneccl_csv
from ._gc import rarer_collections
from ._lines import (
    Line,
    Rows,
    Skipped,
    Source,
    is_whole,
    numbered,
    open_source,
    read_lines,
    without_nccl_debug,
)
from ._model import LINE_KINDS, Collector, Run
from ._spill import SpillError
from .result import ParseResult, result_of

__all__ = [
    "LINE_KINDS",
    "PARSERS",
    "SNIFF_LINES",
    "Collector",
    "Line",
    "ParseResult",
    "Parser",
    "Run",
    "Source",
    "SpillError",
    "numbered",
    "open_source",
    "parse_lines",
    "parse_source",
    "result_of",
]

# How far into an input detection looks: NCCL_DEBUG=INFO start-up chatter of many
# ranks can precede the first line of the benchmark itself by thousands of lines.
SNIFF_LINES = 20_000


class Parser(Protocol):
    """The contract of a parser module.

    ``READS_SKIPPED``: the parser also takes :class:`Skipped` items, runs of plain NCCL
    debug lines counted in bulk instead of read one by one (``_lines``), and
    :class:`Rows` batches of lines that may be data rows (with the native reader);
    the others get every line as a :class:`Line`.
    """

    NAME: str
    READS_SKIPPED: bool

    def sniff(self, head: Sequence[Line]) -> bool: ...

    def parse(
        self, lines: Iterable[Line], source: str, emit: Callable[[Run], None]
    ) -> Counter[str]: ...


# Most specific first: the nccl-tests text parser accepts rows-only fragments, so it
# must come after formats with unmistakable markers.
PARSERS: tuple[Parser, ...] = (oneccl_csv, oneccl, imb, nccl_tests_json, nccl_tests)


def parse_lines(
    handle: IO[str], source: str, emit: Callable[[Run], None]
) -> Counter[str]:
    """Detect the format of the text in ``handle``, parse it, return the accounting.

    Runs go to ``emit`` in source order (by first line), as soon as they are final.
    Raises UnknownLogFormatError when no parser recognises the input.
    """
    raw_lines = read_lines(handle, source)
    raws = list(itertools.islice(raw_lines, SNIFF_LINES))
    head = list(numbered(raws))
    for parser in PARSERS:
        if parser.sniff(head):
            # Skipped and Rows items reach only parsers that declare READS_SKIPPED;
            # they read the lines detection looked at through the block filter too.
            stream: Iterable[Line | Skipped | Rows]
            rest: Iterable[Line | Skipped | Rows]
            if parser.READS_SKIPPED and all(map(is_whole, raws)):
                stream = rest = without_nccl_debug(handle, 1, source, "".join(raws))
            else:
                rest = numbered(raw_lines, len(raws) + 1)
                if parser.READS_SKIPPED:
                    rest = without_nccl_debug(handle, len(raws) + 1, source)
                stream = itertools.chain(head, rest)
            try:
                return parser.parse(cast("Iterable[Line]", stream), source, emit)
            finally:
                # Now, not when collected: the block reader's thread stops here even
                # when the parse failed (its traceback would keep the reader alive).
                close = getattr(rest, "close", None)
                if close is not None:
                    close()
    first = next(((ln.number, ln.text) for ln in head if ln.text.strip()), None)
    if first is None:
        raise UnknownLogFormatError(source, None)
    raise UnknownLogFormatError(source, first[1].strip(), first[0])


def parse_source(collector: Collector, source: Source, name: str | None) -> None:
    """Parse one source (as :func:`open_source` takes it, shown as ``name`` if given)
    into ``collector``: its runs, and its line accounting.

    Raises InputError when it cannot be opened or read (the runs it completed before
    a read failed are kept) and UnknownLogFormatError when no parser recognises it.
    """
    display, handle, owned = open_source(source, name)
    numbers = itertools.count()
    try:
        with rarer_collections():
            accounting = parse_lines(
                handle,
                display,
                lambda run: collector.add_run(display, next(numbers), run),
            )
    except SpillError as exc:
        raise InputError(f"{display}: {exc.strerror}") from exc
    except OSError as exc:  # EIO, a vanished network file system, ...
        raise InputError(
            f"{display}: read failed: {exc.strerror or exc} (only runs this input "
            "completed before the failure, if any, are kept)"
        ) from exc
    finally:
        if owned:
            handle.close()
        elif handle is not source and isinstance(handle, io.TextIOWrapper):
            # Our text wrapper over the caller's binary stream: let go of it without
            # closing it (collected, the wrapper would close the caller's file).
            with contextlib.suppress(ValueError):
                handle.detach()
    collector.accounting[display] = accounting
