"""The nightly check as one call: read the inputs, read the history, judge.

:func:`check` is what ``ncclparse check`` does short of rendering and writing its
outputs: it parses the inputs (:func:`ncclparse.inputs.parsing.read_inputs`), scans
the history for the baseline window (:func:`ncclparse.store.history.scan_history`),
leaves the inputs' own logs out of the baseline, judges
(:func:`ncclparse.health.check.check`) and times it all. Its options that cannot work
together are a :class:`CheckConfigError`, raised before anything is read.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ncclparse.errors import NcclParseError, ProfileError
from ncclparse.health.baselines import window_start
from ncclparse.health.check import CheckResult
from ncclparse.health.check import check as judge
from ncclparse.health.rules import DEFAULT_RULES, Rules
from ncclparse.inputs.parsing import read_inputs
from ncclparse.inputs.points import (
    CHECK_LIMITS,
    PointTable,
    TooManyPoints,
    with_merge_notes,
)
from ncclparse.parsers import ParseResult
from ncclparse.store.history import history_exists, scan_history, source_keys

if TYPE_CHECKING:
    from ncclparse.efficiency import HardwareOptions
    from ncclparse.inputs.progress import Progress
    from ncclparse.inputs.walk import Filters, Note

__all__ = ["CheckConfigError", "CheckRun", "check"]


class CheckConfigError(NcclParseError):
    """The options of :func:`check` cannot work together: ``first_night`` without a
    history, a history that does not exist without ``first_night``, or a bad
    hardware option (``ncclparse check`` exits 2, a usage error)."""


@dataclass(frozen=True, slots=True)
class CheckRun:
    """What :func:`check` found: the parsed inputs (``parsed``), the inputs that
    could not be read or parsed (``input_failures``), what directory walks skipped
    (``notes``) and the judgement (``result``, its ``seconds`` the time from the
    first input read to the last case judged). ``merged``: the inputs held more
    rows than CHECK_LIMITS allow, so the repeats of each point in ``parsed`` were
    merged (its merged runs say so in their warnings)."""

    parsed: ParseResult
    input_failures: tuple[Exception, ...]
    notes: tuple[Note, ...]
    result: CheckResult
    merged: bool = False

    @property
    def passed(self) -> bool:
        """True when no case failed (:attr:`CheckResult.passed`)."""
        return self.result.passed


def check(
    inputs: Iterable[str | os.PathLike[str]],
    rules: Rules | None = None,
    *,
    history: str | os.PathLike[str] | None = None,
    tags: Mapping[str, str] | None = None,
    first_night: bool = False,
    expect_history: bool = True,
    hardware: HardwareOptions | None = None,
    filters: Filters | None = None,
    jobs: int = 1,
    today: dt.date | None = None,
    on_notes: Callable[[list[Note]], None] | None = None,
    progress: Callable[[int], Progress | None] | None = None,
    on_parsed: Callable[[ParseResult, list[Exception]], None] | None = None,
    report_rows: bool = True,
    keep_rows: bool = False,
) -> CheckRun:
    """Judge the logs of ``inputs`` against ``rules`` (default:
    :data:`~ncclparse.health.rules.DEFAULT_RULES`) and, with ``history``, against
    the baseline the history gives, as ``ncclparse check`` does (docs/nightly.md).

    ``inputs`` are log files, directories (walked, their files selected by
    ``filters``), URIs, or ``-`` for standard input; they are read (once) after the
    options have been checked, and parsed in ``jobs`` processes. A missing, empty or
    unrecognised input is no exception: it is in :attr:`CheckRun.input_failures`
    and fails a case. ``history`` is a history dataset (a directory or URI written
    by ``ncclparse ingest``); only its runs with every ``tags`` item make the
    baseline, and never the inputs' own logs. ``first_night``: no baseline is
    expected yet, so the history may be missing and one without runs for ``tags``
    is a skipped case rather than a failure. ``expect_history``: every series shape
    of the baseline must be in the inputs. ``hardware`` is what
    :func:`ncclparse.efficiency.analyze` takes; ``today`` (default: today, UTC)
    dates the baseline window.

    The hooks report while it works, for a command line: ``on_notes`` receives what
    the directory walks skipped, before parsing; ``progress`` receives the number of
    sources to parse and returns a :class:`~ncclparse.inputs.progress.Progress` (or
    None), closed when parsing ends; ``on_parsed`` receives the parse result and the
    failed inputs, before the history is read. ``report_rows``: keep every column
    of the analysed rows for a report (see :func:`ncclparse.health.check.check`);
    without it (nor ``keep_rows``: the measurements are kept for a page drawn
    after the check), inputs of more rows than CHECK_LIMITS allow are judged from a
    temporary file (``TMPDIR``), batch by batch, and the measurements of
    :attr:`CheckRun.parsed` are left empty.

    Raises CheckConfigError for ``first_night`` without ``history``, a ``history``
    that does not exist without ``first_night``, or a bad ``hardware`` option;
    HistoryError (:mod:`ncclparse.store.history`) when the history cannot be read;
    SpoolError (:mod:`ncclparse.store.spool`) when the temporary file cannot be
    written; ChildDied (:mod:`ncclparse.health.forked`) when a process judging a
    batch of the points read back from it is killed (e.g. out of memory).

    >>> run = ncclparse.check(["logs/"], history="/data/history")  # doctest: +SKIP
    >>> run.passed, [c.message for c in run.result.failures]  # doctest: +SKIP
    """
    rules = DEFAULT_RULES if rules is None else rules
    where = None if history is None else os.fspath(history)
    name = _history_name(where, first_night)
    started = time.monotonic()
    # Without a report, the points of many rows wait in a temporary file and are
    # judged batch by batch as they are read back: memory holds one batch of them.
    with PointTable(CHECK_LIMITS, spill=not (report_rows or keep_rows)) as points:
        parsed, failures, notes = read_inputs(
            (os.fspath(i) for i in inputs),
            filters=filters,
            jobs=jobs,
            on_batch=points.add,
            on_notes=on_notes,
            progress=progress,
        )
        parsed, merged = _merged(parsed, points)
        if on_parsed is not None:
            on_parsed(parsed, failures)
        view = None
        if where is not None:
            view = scan_history(
                where,
                since=window_start(rules.history, today),
                with_tags=bool(tags),
                missing_ok=first_night,
            )
        try:
            result = judge(
                parsed,
                rules,
                input_failures=failures,
                input_notes=notes,
                history=view,
                tags=tags,
                first_night=first_night,
                history_name=name,
                input_keys=source_keys(parsed, points.spool),
                today=today,
                hardware=hardware,
                expect_history=expect_history,
                merged_runs=frozenset(merged),
                report_rows=report_rows,
                spooled=None if points.spool is None else points.spool.batches(),
            )
        except ProfileError as exc:  # a bad hardware option
            raise CheckConfigError(str(exc)) from exc
    result = dataclasses.replace(result, seconds=time.monotonic() - started)
    return CheckRun(parsed, tuple(failures), tuple(notes), result, points.merged)


def _merged(
    parsed: ParseResult, points: PointTable
) -> tuple[ParseResult, dict[tuple[str, int], tuple[int, int]]]:
    """``parsed`` with the measurements ``points`` collected (a point's repeats
    merged once there are many rows: memory grows with points, not rows) and the
    merged runs saying so; and those runs.

    Raises TooManyPoints, naming the input that passed the limit, when the points
    themselves are too many to judge in bounded memory."""
    try:
        measurements = points.table()
    except TooManyPoints:
        raise TooManyPoints(
            f"{points.overflow_source}: the inputs hold more than "
            f"{points.max_points:,} distinct measurement points (sizes of each "
            "series of each run) by the time this input is read: more than a check "
            "judges in bounded memory; check fewer logs at a time (e.g. one check "
            "per directory)"
        ) from None
    merged = points.merged_runs()
    runs = with_merge_notes(parsed.runs, merged)
    return dataclasses.replace(parsed, measurements=measurements, runs=runs), merged


def _history_name(history: str | None, first_night: bool) -> str:
    """How the messages of a check name ``history`` (a directory or URI, or None).

    Raises CheckConfigError for ``first_night`` without a history, or a history
    that does not exist without ``first_night``; HistoryError when it cannot be
    reached.
    """
    if history is None:
        if first_night:
            raise CheckConfigError("--first-night needs --history")
        return "the history"
    if history_exists(history):
        return history
    if not first_night:
        raise CheckConfigError(
            f"{history}: history directory not found (on the first night, "
            "before `ingest` has created it, pass --first-night)"
        )
    return f"{history} (not created yet)"
