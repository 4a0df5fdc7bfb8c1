"""The library entry points: parse one source or many into the result tables."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pyarrow as pa

from ncclparse.inputs.parsing import parse_sources
from ncclparse.parsers import Collector, ParseResult, Source, parse_source, result_of

__all__ = ["ParseResult", "parse", "parse_many"]


def parse(source: Source, *, name: str | None = None) -> ParseResult:
    """Parse one benchmark log: a path, a text or binary stream, or log text.

    A ``str`` holding a newline is log text, any other ``str`` a path. ``name`` is the
    ``source`` value in the tables (default: the path, or ``<string>``/the stream name).
    Raises InputError for an unreadable path and UnknownLogFormatError for input no
    parser recognises.
    """
    collector = Collector()
    parse_source(collector, source, name)
    return result_of(collector, ())


def parse_many(
    sources: Iterable[Source | tuple[Source, str | None]],
    *,
    on_batch: Callable[[pa.RecordBatch], None] | None = None,
    jobs: int = 1,
) -> ParseResult:
    """Parse many sources into one result; a source that fails does not stop the rest.

    Each item is a source as for :func:`parse`, or a ``(source, name)`` pair. The
    error of each failed source is in ``failures`` (in input order). With
    ``on_batch``, measurements go to it as record batches while parsing goes on
    (memory stays flat however large the input) and the result's ``measurements``
    table is empty. ``jobs`` > 1 parses small files in that many worker processes
    (:mod:`ncclparse.inputs.workers`); the result is the same.
    """
    return parse_sources(sources, on_batch, jobs, None)
