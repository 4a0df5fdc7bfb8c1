"""The library entry points: parse one source or many into the result tables."""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from ncclparse.errors import NcclParseError
from ncclparse.parsers import Collector, Source, parse_source
from ncclparse.progress import Progress, tracked


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

    def __repr__(self) -> str:
        """One line: ``<ParseResult: 3 sources, 4 runs (3 complete, 1 truncated),
        250 measurements, 1 failure>`` (the tables themselves are attributes)."""
        return f"<ParseResult: {self._summary()}>"

    def _repr_html_(self) -> str:
        """The summary and a table of the runs (at most :data:`HTML_RUNS` of them,
        then how many more), every log-derived text escaped: for notebooks."""
        runs = self.runs.select(_HTML_COLUMNS).slice(0, HTML_RUNS).to_pylist()
        head = "".join(f"<th>{name}</th>" for name in _HTML_HEADINGS)
        body = [
            "<tr>"
            + "".join(f"<td>{_cell(run[name])}</td>" for name in _HTML_COLUMNS)
            + "</tr>"
            for run in runs
        ]
        more = self.runs.num_rows - len(runs)
        if more:
            body.append(
                f'<tr><td colspan="{len(_HTML_COLUMNS)}">... {more} more</td></tr>'
            )
        failures = [f"<li>{_cell(str(e))}</li>" for e in self.failures[:HTML_RUNS]]
        if len(self.failures) > HTML_RUNS:
            failures.append(f"<li>... {len(self.failures) - HTML_RUNS} more</li>")
        return (
            f"<div><p>ParseResult: {html.escape(self._summary())}</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody>"
            "</table>"
            + (f"<p>Failures:</p><ul>{''.join(failures)}</ul>" if failures else "")
            + "</div>"
        )

    def _summary(self) -> str:
        statuses = Counter(str(s) for s in self.runs.column("status").to_pylist())
        ordered = [s for s in _STATUSES if s in statuses]
        ordered += sorted(set(statuses) - set(_STATUSES))
        status = ", ".join(f"{statuses[s]} {s}" for s in ordered)
        parts = [
            _count(len(self.accounting), "source"),
            _count(self.runs.num_rows, "run") + (f" ({status})" if status else ""),
            _count(self.measurements.num_rows, "measurement"),
        ]
        if self.failures:
            parts.append(_count(len(self.failures), "failure"))
        return ", ".join(parts)


HTML_RUNS = 20  # runs (and failures) listed by ParseResult._repr_html_
_HTML_COLUMNS = (
    "source",
    "run",
    "tool",
    "collectives",
    "nranks",
    "nnodes",
    "status",
    "rows",
)
_HTML_HEADINGS = (
    "source",
    "run",
    "tool",
    "collective",
    "ranks",
    "nodes",
    "status",
    "rows",
)
_STATUSES = ("complete", "truncated", "failed")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _cell(value: object) -> str:
    """A table cell's text, escaped: lists joined by spaces, null as empty."""
    if value is None:
        return ""
    if isinstance(value, list):
        value = " ".join(map(str, value))
    return html.escape(str(value))


def parse(source: Source, *, name: str | None = None) -> ParseResult:
    """Parse one benchmark log: a path, a text or binary stream, or log text.

    A ``str`` holding a newline is log text, any other ``str`` a path. ``name`` is the
    ``source`` value in the tables (default: the path, or ``<string>``/the stream name).
    Raises InputError for an unreadable path and UnknownLogFormatError for input no
    parser recognises.
    """
    collector = Collector()
    parse_source(collector, source, name)
    return _result(collector, ())


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
    (:mod:`ncclparse.workers`); the result is the same.
    """
    return _parse_many(sources, on_batch, jobs, None)


def _parse_many(
    sources: Iterable[Source | tuple[Source, str | None]],
    on_batch: Callable[[pa.RecordBatch], None] | None,
    jobs: int,
    progress: Progress | None,
) -> ParseResult:
    """:func:`parse_many`, each source reported to ``progress`` (if any) as it is
    read (:func:`ncclparse.progress.tracked`) or, parsed by a worker, once merged."""
    if jobs < 1:
        raise ValueError(f"jobs must be 1 or more, not {jobs}")
    collector = Collector(on_batch)
    failures: list[NcclParseError] = []

    def here(source: Source, name: str | None) -> None:
        try:
            parse_source(collector, source, name)
        except NcclParseError as exc:
            failures.append(exc)

    items = (item if isinstance(item, tuple) else (item, None) for item in sources)
    if jobs == 1:  # lazily: a tracked source is opened when its turn comes
        for source, name in items if progress is None else tracked(items, progress):
            here(source, name)
    else:
        from ncclparse import workers

        workers.parse_in_workers(
            items, jobs, here, workers.merged_into(collector, failures), progress
        )
    return _result(collector, tuple(failures))


def _result(collector: Collector, failures: tuple[NcclParseError, ...]) -> ParseResult:
    return ParseResult(
        measurements=collector.measurements_table(),
        runs=collector.runs_table(),
        accounting=collector.accounting,
        failures=failures,
    )
