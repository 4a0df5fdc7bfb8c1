"""The result of parsing: the tables read from one or more sources.

Every parse (``ncclparse.parse``, ``parse_many``, the workers, the data-lake
functions) ends in a :class:`ParseResult` made by :func:`result_of` from the
:class:`~ncclparse.parsers.Collector` that gathered the runs.
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from ncclparse.errors import NcclParseError

from ._model import Collector


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


def result_of(
    collector: Collector, failures: tuple[NcclParseError, ...]
) -> ParseResult:
    """The collector's tables, with the errors of the sources that failed."""
    return ParseResult(
        measurements=collector.measurements_table(),
        runs=collector.runs_table(),
        accounting=collector.accounting,
        failures=failures,
    )
