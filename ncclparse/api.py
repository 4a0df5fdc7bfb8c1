"""The library entry points: parse one source or many into the result tables."""

from __future__ import annotations

import contextlib
import io
import itertools
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from ncclparse.errors import InputError, NcclParseError
from ncclparse.parsers import Collector, Source, SpillError, open_source, parse_lines


@dataclass(frozen=True)
class ParseResult:
    """The tables parsed from one or more sources.

    ``measurements`` and ``runs`` conform to schema.md; ``accounting`` maps each
    source to the number of its lines of each kind (``parsers.LINE_KINDS``);
    ``failures`` holds the error of each source that could not be parsed (only
    :func:`parse_many` collects them, :func:`parse` raises).
    """

    measurements: pa.Table
    runs: pa.Table
    accounting: dict[str, Counter[str]] = field(default_factory=dict)
    failures: tuple[NcclParseError, ...] = ()


def parse(source: Source, *, name: str | None = None) -> ParseResult:
    """Parse one benchmark log: a path, a text or binary stream, or log text.

    A ``str`` holding a newline is log text, any other ``str`` a path. ``name`` is the
    ``source`` value in the tables (default: the path, or ``<string>``/the stream name).
    Raises InputError for an unreadable path and UnknownLogFormatError for input no
    parser recognises.
    """
    collector = Collector()
    _parse_into(collector, source, name)
    return _result(collector, ())


def parse_many(
    sources: Iterable[Source | tuple[Source, str]],
    *,
    on_batch: Callable[[pa.RecordBatch], None] | None = None,
) -> ParseResult:
    """Parse many sources into one result; a source that fails does not stop the rest.

    Each item is a source as for :func:`parse`, or a ``(source, name)`` pair. The
    error of each failed source is in ``failures`` (in input order). With
    ``on_batch``, measurements go to it as record batches while parsing goes on
    (memory stays flat however large the input) and the result's ``measurements``
    table is empty.
    """
    collector = Collector(on_batch)
    failures: list[NcclParseError] = []
    for item in sources:
        source, name = item if isinstance(item, tuple) else (item, None)
        try:
            _parse_into(collector, source, name)
        except NcclParseError as exc:
            failures.append(exc)
    return _result(collector, tuple(failures))


def _parse_into(collector: Collector, source: Source, name: str | None) -> None:
    display, handle, owned = open_source(source, name)
    numbers = itertools.count()
    try:
        accounting = parse_lines(
            handle, display, lambda run: collector.add_run(display, next(numbers), run)
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


def _result(collector: Collector, failures: tuple[NcclParseError, ...]) -> ParseResult:
    return ParseResult(
        measurements=collector.measurements_table(),
        runs=collector.runs_table(),
        accounting=collector.accounting,
        failures=failures,
    )
