"""Judge parsed results against rules and history: the engine of ``ncclparse check``.

Pure: tables and rules in, a :class:`CheckResult` out (cases, ranked hosts, the
analysed rows). Every case is one rule applied to one series (or one run, or one
input) and is ``pass``, ``fail`` or ``skip``. Data integrity fails closed: a missing,
empty or unrecognised input, no run at all, a failed or truncated run, ``#wrong`` > 0,
out-of-bounds FAILED, a printed bandwidth that size and time contradict, a run without
measurements, an expected collective or size absent, a series of the history baseline
absent, a history that gives no baseline at all (unless it is the first night), a
sweep too short to judge bandwidth, a run far below the other runs of its shape
(:mod:`ncclparse.health.cohort`). Each failing case's message names the
source and run, the hosts, the collective, the sizes and the numbers against their
limits. A check that could not complete is :func:`error_result`: failed, with the
reason.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ncclparse._arrow import fill_null, frame, key_text, rows_by_run, run_rows
from ncclparse.efficiency import Analysis, HardwareOptions, analyze
from ncclparse.formatting import format_bytes, series_label, shown_name
from ncclparse.health.baselines import BASELINE_KEYS, select_baseline
from ncclparse.health.blame import HostScore, RunTimes, blame
from ncclparse.health.cases import (
    ERROR_RULE,
    FORMAT,
    Case,
    Outcome,
    SizeMiss,
    by_importance,
    context,
    hosts,
    run_named,
    sizes,
)
from ncclparse.health.cohort import PointArrays, cohort_cases, points_of
from ncclparse.health.forked import in_children
from ncclparse.health.integrity import (
    baseline_cases,
    expect_cases,
    history_expect_cases,
    input_case,
    integrity_case,
    misprinted_by_run,
    no_run_case,
    stale_inputs_case,
    switched_off_case,
)
from ncclparse.health.outcomes import OUTCOMES, outcome_of
from ncclparse.health.rules import CohortPolicy, Rule, Rules, VerdictPolicy
from ncclparse.health.verdict import (
    JUDGED_COLUMNS,
    JUDGED_FIT_COLUMNS,
    AnalysedRows,
    Remedy,
    RowBlock,
    Verdict,
    blocks_of,
    judge_run,
    no_plateau,
)
from ncclparse.health.verdict import judged as judged_of
from ncclparse.inputs.walk import Note
from ncclparse.parsers import ParseResult
from ncclparse.schema import BLOCK_KEYS, MEASUREMENTS_SCHEMA, SERIES_KEYS

__all__ = ["Case", "CheckResult", "SizeMiss", "check", "error_result"]

# How to accept a sweep that stops before the bandwidth plateau, said where it fails,
# by what would let it be judged (verdict.Remedy): larger sizes, more sizes, neither;
# {larger} and {more}: the options of the run's tool that measure them.
ACCEPT_UNJUDGED = (
    'measure larger sizes (e.g. {larger}), or set [verdict] unjudged = "skip" '
    "in the rules file to accept a sweep that stops short (latency only)"
)
ACCEPT_FEW_SIZES = (
    "measure more sizes (e.g. {more}), or set [verdict] "
    'unjudged = "skip" in the rules file to accept a sweep that stops short'
)
ACCEPT_NO_PLATEAU = (
    'rerun it, or set [verdict] unjudged = "skip" in the rules file to accept a '
    "sweep without a plateau"
)
# What a case says of a short sweep that [verdict] unjudged = "skip" accepts.
ACCEPTED = '[verdict] unjudged = "skip"'
# (larger sizes, more sizes) by tool: nccl-tests' -b/-e/-f, IMB's -msglog
# [min:]max (powers of two), the oneCCL benchmark's -f/-t element counts.
_SWEEP_OPTIONS = {
    "imb": ("IMB-MPI1 -msglog 28", "IMB-MPI1 -msglog 10:28"),
    "oneccl-benchmark": ("benchmark -t 67108864", "benchmark -f 1 -t 67108864"),
}
_NCCL_SWEEP = ("nccl-tests -e 8G", "nccl-tests -b 1M -e 8G -f 2")


@dataclass(frozen=True, slots=True)
class CheckResult:
    """Cases in a stable order, hosts ranked by :func:`ncclparse.health.blame.blame`
    and the efficiency analysis the cases were judged on (for reports). ``error``
    is why the check could not complete (:func:`error_result`), else None. ``tags``
    are the ``tags`` given to :func:`check` (what identifies the cluster: the
    outputs label their metrics with them); ``seconds`` is how long the check
    took, when the caller measured it (the CLI does), else None."""

    cases: tuple[Case, ...]
    hosts: tuple[HostScore, ...]
    analysis: Analysis
    error: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    seconds: float | None = None

    @property
    def assumptions(self) -> tuple[str, ...]:
        """What the efficiency engine assumed (e.g. a preset matched by GPU name)."""
        return self.analysis.assumptions

    @property
    def passed(self) -> bool:
        """True when the check completed and no case failed (skips do not fail)."""
        return self.error is None and not self.failures

    @property
    def failures(self) -> tuple[Case, ...]:
        return tuple(c for c in self.cases if c.status == "fail")

    @property
    def to_check(self) -> tuple[Case, ...]:
        """The cases whose outcome is CHECK: they pass, but are worth a look."""
        return tuple(c for c in self.cases if c.outcome == "CHECK")

    @property
    def outcomes(self) -> dict[Outcome, int]:
        """How many cases had each outcome, most severe first (OUTCOMES)."""
        counts = dict.fromkeys(OUTCOMES, 0)
        for case in self.cases:
            counts[case.outcome] += 1
        return counts

    @property
    def headline(self) -> str:
        """The check in words: ``FAIL``, ``PASS``, or ``PASS with 2 CHECK`` when
        cases to check passed."""
        if not self.passed:
            return "FAIL"
        looks = len(self.to_check)
        return f"PASS with {looks} CHECK" if looks else "PASS"


def check(
    result: ParseResult,
    rules: Rules,
    *,
    input_failures: Sequence[Exception] = (),
    input_notes: Sequence[Note] = (),
    history: Any = None,
    tags: Mapping[str, str] | None = None,
    first_night: bool = False,
    history_name: str = "the history",
    input_keys: Mapping[str, str] | None = None,
    today: dt.date | None = None,
    hardware: HardwareOptions | None = None,
    expect_history: bool = True,
    merged_runs: frozenset[tuple[str, int]] = frozenset(),
    report_rows: bool = True,
    spooled: Iterable[pa.RecordBatch] | None = None,
) -> CheckResult:
    """Judge ``result`` (and inputs that failed to parse) against ``rules``.

    ``hardware`` is what :func:`ncclparse.efficiency.analyze` takes. Each run's
    verdict (:func:`ncclparse.health.verdict.judge_run` with ``rules.verdict``) is one
    ``verdict`` case: it fails when the efficiency verdict is FAIL, or when the sweep
    stops before bandwidth can be judged (unless ``rules.verdict.unjudged`` is
    ``"skip"``). ``input_notes`` (what a directory walk skipped) are skipped
    ``input`` cases; no run in any input is a failed ``runs`` case.
    ``history`` is a table from :func:`ncclparse.store.history.read_history`, or
    None; its runs with every ``tags`` item, other than the candidate's own
    (``input_keys``: each source's ingest key) and within the window, make the
    baseline (:func:`ncclparse.health.baselines.select_baseline`); an input the
    history got on another night fails its own ``fresh input`` case. With history, the
    ``history`` case ``baseline`` says which runs those are, and fails when there
    are none (skipped with ``first_night``: no baseline is expected yet), naming
    what the history, called ``history_name``, holds. With a baseline and
    ``expect_history``, each shape of it must be present. The result's analysis
    keeps every column of the analysed rows (what a report draws) unless
    ``report_rows`` is False and the runs are judged in more than one batch: then
    only :data:`OUTPUT_COLUMNS`, what the check's outputs read, and no fits.
    ``spooled``: the measurements, when ``result.measurements`` does not hold
    them, as record batches in the order of ``result.runs`` (a run's rows
    together), read as the runs are judged (a check of many logs keeps them in a
    temporary file: :class:`ncclparse.store.spool.Spool`), each batch in a forked
    child where that is safe (:func:`ncclparse.health.forked.in_children`: the
    same results, the batch's temporaries gone with the child).
    Raises ProfileError for bad hardware options; ChildDied when a child judging a
    batch is killed.
    """
    runs = _facts(result.runs)
    cases = [input_case(exc) for exc in input_failures]
    # Threshold rules switched off are not judged; each is said in a skipped case.
    off = [r for r in rules.rules if not r.enabled]
    rules = dataclasses.replace(rules, rules=tuple(r for r in rules.rules if r.enabled))
    for note in input_notes:
        source = shown_name(note.source)
        cases.append(Case("input", source, "SKIP", shown_name(note.text), source))
    if not runs:
        failed = [input_case(exc).source or "" for exc in input_failures]
        cases.append(no_run_case(list(dict.fromkeys([*failed, *result.accounting]))))
    chosen = base = lookup = None
    keys = dict(input_keys or {})
    if history is not None:
        chosen = select_baseline(
            history,
            rules.history,
            tags=tags,
            exclude_keys=frozenset(keys.values()),
            today=today,
        )
        if chosen.selected and rules.history.enabled:
            base = chosen.table
            lookup = _Lookup.of(base, rules.history.min_runs)
    times = RunTimes()  # what blame reads: a summary per run, batch by batch
    measured: set[str] = set()  # the sources with rows
    if spooled is None:
        batches = _batches(result.measurements, result.runs)
        measured.update(_sources(result.measurements))
        several = result.measurements.num_rows > JUDGE_ROWS
    else:
        batches = _spooled_batches(spooled, result.runs, measured)
        several = True
    judge = _Judge(rules, lookup, hardware, merged_runs, not report_rows and several)
    judged = []
    # The points read back from the temporary file are judged in children, whose
    # heaps take the batches' temporaries: the parent keeps only the results.
    for found, run_times in (
        map(judge, batches)
        if spooled is None
        else in_children(judge, batches, doing="judging a batch of runs")
    ):
        times.extend(run_times)
        judged.append(dataclasses.replace(found, points=_interned_keys(found.points)))
    present = pd.concat([j.present for j in judged], ignore_index=True)
    cases += [c for j in judged for c in j.integrity]
    cases += expect_cases(present, rules, [source for source, _ in runs])
    if base is not None and expect_history:
        cases += history_expect_cases(present, base, rules.history)
    cases += [c for j in judged for c in j.verdicts]
    for at in range(len(rules.rules)):
        cases += [c for j in judged for c in j.rules[at]]
    cases += [
        switched_off_case(r.name, f"[[rule]] {r.name!r}", rules.origin) for r in off
    ]
    if chosen is not None:
        if rules.history.enabled:
            cases += baseline_cases(
                chosen, rules.history, first_night=first_night, name=history_name
            )
        else:
            cases.append(
                switched_off_case("history", "[history]", rules.origin, "baseline")
            )
        logs = {source: key for source, key in keys.items() if source in measured}
        cases += stale_inputs_case(chosen, logs)
    cases += [c for j in judged for c in j.history]
    # In the order one grouping of every row gives (by source and run; within a run,
    # as each batch grouped it), so cases do not depend on how runs were batched.
    merged = [item for j in judged for item in j.points.items()]
    points = dict(sorted(merged, key=lambda item: (item[0][0], item[0][1])))
    if rules.cohort.enabled:
        cases += cohort_cases(points, runs, rules.cohort)
    else:
        cases.append(switched_off_case("cohort", "[cohort]", rules.origin))
    analysis = _joined([j.analysis for j in judged])
    ranked: tuple[HostScore, ...] = ()
    if rules.blame.enabled:
        ranked = blame(times.scores(result.runs), rules.blame)
        cases += _blame_cases(ranked, len(runs))
    else:
        cases.append(switched_off_case("slow-host", "[blame]", rules.origin))
    return CheckResult(tuple(cases), ranked, analysis, tags=dict(tags or {}))


# Rows analysed at a time: the analysis and its frames take ~4 KB a row, so a check
# of many logs is judged in batches of whole runs, in bounded memory.
JUDGE_ROWS = 25_000


@dataclass(frozen=True, slots=True)
class _Batch:
    """What one batch of runs (:func:`_batches`) gives: its cases by kind, in order
    (``rules``: one list per rule), its analysis and what it holds (:data:`_PRESENT`
    of its analysed rows, once each, and each series' points: per-run, per-size
    summaries for the cases that look across runs)."""

    integrity: list[Case]
    verdicts: list[Case]
    rules: list[list[Case]]
    history: list[Case]
    analysis: Analysis
    present: pd.DataFrame  # a summary per run (:func:`_present`)
    points: dict[tuple[Any, ...], PointArrays]  # per series (cohort.points_of)


_PRESENT = (*SERIES_KEYS, "size_bytes")


def _present(rows: pd.DataFrame, rules: Rules) -> pd.DataFrame:
    """What the cases across runs read of analysed ``rows`` (:func:`expect_cases`,
    :func:`history_expect_cases`): each series once, in order of appearance (its
    size -1, no size), then the rows of the sizes ``rules`` expect, once each. A
    row per series, not per row: a check of many logs keeps it for every run."""
    series = rows[list(_PRESENT)].drop_duplicates(list(SERIES_KEYS))
    series = series.assign(size_bytes=-1)
    expected = rows.loc[rows["size_bytes"].isin(rules.expect.sizes), list(_PRESENT)]
    return pd.concat([series, expected.drop_duplicates()], ignore_index=True)


# What the check's outputs (ncclparse.report.check_outputs) read of the analysed
# rows: a check of many logs keeps only these of every row when no report is drawn.
OUTPUT_COLUMNS = tuple(
    dict.fromkeys(
        (
            *SERIES_KEYS,
            "tool",
            "dtype",
            "nnodes",
            "nranks",
            "size_bytes",
            "busbw_calc_gbps",
            "efficiency",
            "ideal_basis",
            "cputime",
            "grouped",
        )
    )
)


def _for_outputs(analysis: Analysis) -> Analysis:
    """``analysis`` with only the columns of its rows the outputs read, their
    repeated text (read through key_text) as dictionaries, and no fits (the
    outputs read none)."""
    rows = analysis.rows.select(
        [c for c in OUTPUT_COLUMNS if c in analysis.rows.column_names]
    )
    for name in _CODED_COLUMNS:
        if name in rows.column_names and pa.types.is_string(rows[name].type):
            at = rows.schema.get_field_index(name)
            rows = rows.set_column(at, name, pc.dictionary_encode(rows[name]))
    return dataclasses.replace(
        analysis, rows=rows, fits=analysis.fits.schema.empty_table()
    )


_CODED_COLUMNS = ("source", "tool", "collective", "dtype", "redop", "placement")


@dataclass(frozen=True, slots=True)
class _Judge:
    """Judges one batch of runs (:func:`_judge_batch`): its cases, its analysis
    (only what the outputs read when ``for_outputs``: :func:`_for_outputs`) and
    what blame reads of its runs. What a child judging it gives back."""

    rules: Rules
    lookup: _Lookup | None
    hardware: HardwareOptions | None
    merged_runs: frozenset[tuple[str, int]]
    for_outputs: bool

    def __call__(self, batch: tuple[pa.Table, pa.Table]) -> tuple[_Batch, RunTimes]:
        judged = _judge_batch(
            batch, self.rules, self.lookup, self.hardware, self.merged_runs
        )
        if self.for_outputs:
            judged = dataclasses.replace(judged, analysis=_for_outputs(judged.analysis))
        times = RunTimes()
        times.add(batch[0])
        return judged, times


def _interned_keys(
    points: dict[tuple[Any, ...], PointArrays],
) -> dict[tuple[Any, ...], PointArrays]:
    """``points`` by keys whose text is interned (:func:`_interned`): unpickled
    from a child, the text of each batch would be a copy of its own."""
    return {_interned(key): found for key, found in points.items()}


def _batches(
    measurements: pa.Table, runs: pa.Table
) -> Iterator[tuple[pa.Table, pa.Table]]:
    """``measurements`` and ``runs`` in batches of whole runs, in the order of
    ``runs``, each of at most JUDGE_ROWS rows unless one run has more, each taken
    when asked for. One batch (the tables themselves) when they are that small."""
    if measurements.num_rows <= JUDGE_ROWS:
        yield measurements, runs
        return
    run_batch = _run_batches(runs)
    count = int(run_batch[-1]) + 1
    number = _batch_of_rows(runs, run_batch)(measurements)
    order = np.argsort(number, kind="stable")  # by batch, in row order within each
    starts = np.searchsorted(number[order], np.arange(count + 1))
    del number  # held while the batches are judged: 8 bytes a row, not more
    for at in range(count):
        rows = order[starts[at] : starts[at + 1]]
        yield measurements.take(rows), runs.take(np.flatnonzero(run_batch == at))


def _spooled_batches(
    spooled: Iterable[pa.RecordBatch], runs: pa.Table, measured: set[str]
) -> Iterator[tuple[pa.Table, pa.Table]]:
    """The batches of :func:`_batches`, their rows read from ``spooled`` (in the
    order of ``runs``) as they come: memory holds the rows of one batch of runs,
    not every row. ``measured`` is given the sources that have rows."""
    run_batch = _run_batches(runs)
    if not len(run_batch):  # no run to judge: only which sources have rows
        for record in spooled:
            measured.update(_sources(pa.Table.from_batches([record])))
        return
    count = int(run_batch[-1]) + 1
    number_of = _batch_of_rows(runs, run_batch)
    pending: dict[int, list[pa.Table]] = {}
    at = 0  # the next batch to judge: every row of an earlier one was read

    def take(at: int) -> tuple[pa.Table, pa.Table]:
        parts = pending.pop(at, [])
        rows = pa.concat_tables(parts).combine_chunks() if parts else None
        mine = runs.take(np.flatnonzero(run_batch == at))
        return rows if rows is not None else _EMPTY_ROWS, mine

    for record in spooled:
        rows = pa.Table.from_batches([record])
        measured.update(_sources(rows))
        number = number_of(rows)
        found = np.unique(number[number >= 0])
        if len(found) and found[0] < at:
            raise ValueError("measurements out of the order of their runs")
        for batch in found.tolist():
            pending.setdefault(batch, []).append(
                rows.take(np.flatnonzero(number == batch))
            )
        while len(found) and at < found[-1]:  # a later batch began: this one is whole
            yield take(at)
            at += 1
    for last in range(at, count):
        yield take(last)


_EMPTY_ROWS = MEASUREMENTS_SCHEMA.empty_table()


def _sources(measurements: pa.Table) -> list[str]:
    """The sources of ``measurements``' rows, once each (never null: schema.md)."""
    return cast("list[str]", pc.unique(measurements["source"]).to_pylist())


def _run_batches(runs: pa.Table) -> npt.NDArray[np.int64]:
    """Each run's batch: whole runs in the order of ``runs``, at most JUDGE_ROWS
    rows a batch unless one run has more."""
    counts = runs["rows"].to_numpy(zero_copy_only=False).astype(np.int64)
    batch_of: list[int] = []
    batch, filled = 0, 0
    for count in counts.tolist():
        if filled and filled + count > JUDGE_ROWS:
            batch, filled = batch + 1, 0
        batch_of.append(batch)
        filled += count
    return np.asarray(batch_of, dtype=np.int64)


def _batch_of_rows(
    runs: pa.Table, run_batch: npt.NDArray[np.int64]
) -> Callable[[pa.Table], npt.NDArray[np.int64]]:
    """What gives each row of a measurements table its batch (``run_batch``: each
    run's), -1 for a row of no run in ``runs``: runs found by number (source code
    and run), not by a join on text, which for many logs costs more than the rows
    themselves."""
    sources = pc.unique(runs["source"])
    most = int(pc.max(runs["run"]).as_py() or 0) + 1

    def numbers(table: pa.Table) -> npt.NDArray[np.int64]:
        found = fill_null(pc.index_in(table["source"], value_set=sources), -1)
        code = np.asarray(found.to_numpy(zero_copy_only=False), dtype=np.int64)
        run = np.asarray(table["run"].to_numpy(zero_copy_only=False), dtype=np.int64)
        return code * most + run  # below 0 for a source not in runs

    keys = numbers(runs)
    by_key = np.argsort(keys)
    ordered = keys[by_key]

    def batch_of(measurements: pa.Table) -> npt.NDArray[np.int64]:
        rows = numbers(measurements)
        at = np.minimum(np.searchsorted(ordered, rows), len(ordered) - 1)
        return np.where(ordered[at] == rows, run_batch[by_key[at]], -1)

    return batch_of


def _facts(runs: pa.Table) -> dict[tuple[str, int], dict[str, Any]]:
    """What the cases across runs read of each run (by source and run): its hosts
    and devices, not its whole ``runs`` row, which a check of many logs would keep
    for every run."""
    columns = [runs[name].to_pylist() for name in ("source", "run", "hosts", "devices")]
    return {
        (sys.intern(source), run): {
            "hosts": _shared(hosts),
            "devices": _shared(devices),
        }
        for source, run, hosts, devices in zip(*columns, strict=True)
    }


def _shared(names: list[str | None]) -> tuple[str | None, ...]:
    """``names`` interned: the runs of a fleet share the names of its hosts."""
    return tuple(name if name is None else sys.intern(name) for name in names)


def _judge_batch(
    batch: tuple[pa.Table, pa.Table],
    rules: Rules,
    lookup: _Lookup | None,
    hardware: HardwareOptions | None,
    merged_runs: frozenset[tuple[str, int]],
) -> _Batch:
    """The per-run cases of one batch of runs (``batch``: its measurements and
    runs tables)."""
    measurements, table = batch
    analysis = analyze(measurements, hardware, table)
    rows = _frame(analysis.rows)
    runs = {(r["source"], r["run"]): r for r in table.to_pylist()}
    wrong = rows[list(_WRONG_COLUMNS)]  # what integrity reads per run, beyond misprints
    row_groups = rows_by_run(wrong)
    misprints = {
        run: found
        for run, found in misprinted_by_run(rows).items()
        if run not in merged_runs
    }
    integrity = [
        integrity_case(
            run,
            run_rows(row_groups, wrong, run["source"], run["run"]),
            misprints.get((run["source"], run["run"]), []),
        )
        for run in runs.values()
    ]
    verdicts = verdict_cases(runs, analysis, rules.verdict)
    series = _series(rows)
    by_rule = [
        [
            _rule_case(rule, context(key, runs), group)
            for key, group in series
            if rule.collective in (None, key[3])
        ]
        for rule in rules.rules
    ]
    history = []
    points = _per_size(rows)  # per series and size: what history and cohort judge
    if lookup is not None:
        for key, _ in series:
            found = points.get(_nan_free(key), [])
            history.append(_history_case(rules, context(key, runs), found, lookup))
    present = _present(rows, rules)
    kept = {key: points_of(found) for key, found in points.items()}
    return _Batch(integrity, verdicts, by_rule, history, analysis, present, kept)


def _joined(analyses: list[Analysis]) -> Analysis:
    """One analysis of the batches' analyses (the one itself when there is one)."""
    if len(analyses) == 1:
        return analyses[0]
    said = dict.fromkeys(a for analysis in analyses for a in analysis.assumptions)
    profiles = dict.fromkeys(p for analysis in analyses for p in analysis.profiles)
    return Analysis(
        pa.concat_tables([a.rows for a in analyses]),
        pa.concat_tables([a.fits for a in analyses]),
        tuple(said),
        tuple(profiles),
    )


def error_result(message: str) -> CheckResult:
    """A check that could not complete: one failed ``error`` case saying why. Built
    without the efficiency engine, which may be what failed."""
    empty = pa.table({})
    case = Case(ERROR_RULE, "ncclparse check", "FAIL", message)
    return CheckResult((case,), (), Analysis(empty, empty, ()), error=message)


def verdict_cases(
    runs: dict[tuple[str, int], dict[str, Any]],
    analysis: Analysis,
    policy: VerdictPolicy,
) -> list[Case]:
    """One ``verdict`` case per run: the run's verdict
    (:func:`ncclparse.health.verdict.judge_run`, every aspect: status, data,
    efficiency, as the report shows it), its findings worst first. Its outcome is
    the verdict's (FAIL, CHECK, NOTE, OK; SKIP when no bandwidth was judged and
    nothing worse than a NOTE found), except that a run whose sweep stops before
    bandwidth can be judged (:func:`unjudged`) fails (is skipped instead with
    ``policy.unjudged = "skip"``, unless its verdict is a FAIL or a CHECK)."""
    rows = frame(analysis.rows.select(list(JUDGED_COLUMNS)))
    # Each column once, as NumPy; each run is positions into them.
    columns = AnalysedRows(rows)
    arrays = {name: columns[name] for name in JUDGED_COLUMNS}
    at = rows.groupby(["source", "run"], sort=False).indices if len(rows) else {}
    none = np.zeros(0, np.intp)
    fits = frame(analysis.fits.select(list(JUDGED_FIT_COLUMNS)))
    fit_groups = rows_by_run(fits)
    cases = []
    for (source, run), facts in runs.items():
        mine = AnalysedRows(arrays, np.asarray(at.get((source, run), none), np.intp))
        my_fits = run_rows(fit_groups, fits, source, run)
        blocks = blocks_of(mine)
        verdict = judge_run(facts, mine, policy, my_fits, blocks)
        outcome, text = _verdict_said(
            verdict, unjudged(mine, blocks), policy, facts.get("tool")
        )
        found = hosts(facts)
        where = run_named(source, run, found)
        cases.append(
            Case(
                "verdict",
                f"{source} run {run}",
                outcome,
                f"{where}: {text}",
                source,
                run,
                found,
                ", ".join(facts["collectives"]) or None,
                sum(f.aspect == "efficiency" for f in verdict.findings),
            )
        )
    return cases


def _verdict_said(
    verdict: Verdict,
    short: list[tuple[str, Remedy]],
    policy: VerdictPolicy,
    tool: str | None,
) -> tuple[Outcome, str]:
    """The outcome and message of a run's ``verdict`` case (:func:`verdict_cases`)
    from its verdict, and why its sweep stops short (:func:`unjudged`), if it does;
    ``tool`` the run's, for the options that would measure more."""
    said = [f"{f.label} {f.text}" for f in verdict.findings]
    outcome = outcome_of(verdict.level)
    if verdict.worst("efficiency") is None and outcome in ("OK", "NOTE"):
        outcome, said = "SKIP", ["nothing to judge"]
    if not short:
        return outcome, "; ".join(said)
    why = "; ".join(reason for reason, _ in short)
    stopped: Outcome
    if policy.unjudged == "skip":
        stopped = outcome if outcome in ("FAIL", "CHECK") else "SKIP"
        text = f"bandwidth not verified, accepted by {ACCEPTED}: {why}"
    else:
        stopped = "FAIL"
        text = f"bandwidth not verified: {why}; {_accept(short, tool)}"
    # What was judged (the notes only repeat why), first when it gives the outcome
    # by itself.
    judged = [f"{f.label} {f.text}" for f in verdict.findings if f.level != "info"]
    return stopped, "; ".join(
        [*judged, text] if stopped == outcome else [text, *judged]
    )


def _accept(short: list[tuple[str, Remedy]], tool: str | None) -> str:
    """How to get, or accept, the judgement :func:`unjudged` says is missing, with
    the options of ``tool`` (the run's)."""
    remedies = {remedy for _, remedy in short}
    larger, more = _SWEEP_OPTIONS.get(tool or "", _NCCL_SWEEP)
    if "larger" in remedies:
        return ACCEPT_UNJUDGED.format(larger=larger)
    if "more" in remedies:
        return ACCEPT_FEW_SIZES.format(more=more)
    return ACCEPT_NO_PLATEAU


def unjudged(
    rows: AnalysedRows, blocks: Sequence[RowBlock] | None = None
) -> list[tuple[str, Remedy]]:
    """Why bandwidth cannot be judged in each block of one run's analysed ``rows``
    whose sweep stops short, and what would help: its largest size still
    latency-bound, or no plateau reached (:func:`no_plateau`: still rising, too few
    sizes, not levelling off); empty when every block reaches its plateau
    (``blocks``: the rows' blocks_of, if at hand). The verdict's notes say the same
    in other words."""
    reasons: list[tuple[str, Remedy]] = []
    for key, block in blocks_of(rows) if blocks is None else blocks:
        judged = judged_of(block)
        if not len(judged) or (judged["nranks"] == 1).all():
            continue  # a single rank moves no data: nothing to verify
        label = series_label(dict(zip(BLOCK_KEYS, key, strict=True)))
        largest = judged.row(-1)
        size = format_bytes(largest["size_bytes"])
        if largest["regime"] == "latency-bound":
            reasons.append(
                (
                    f"{label}: the largest size measured, {size}, is still "
                    "latency-bound, so no plateau was reached",
                    "larger",
                )
            )
        elif not judged.true("plateau").any():
            why, remedy = no_plateau(judged)
            reasons.append(
                (
                    f"{label}: no plateau reached by the largest size measured, "
                    f"{size} ({why})",
                    remedy,
                )
            )
    return reasons


_WRONG_COLUMNS = ("source", "run", "wrong", "wrong_kind", "size_bytes", "placement")


def _frame(rows: pa.Table) -> pd.DataFrame:
    wanted = [
        *SERIES_KEYS,
        "line",
        "size_bytes",
        "time_us",
        "algbw_gbps",
        "busbw_gbps",
        "algbw_calc_gbps",
        "busbw_calc_gbps",
        "busbw_mismatch",
        "algbw_prescaled",
        "efficiency",
        "regime",
        "wrong",
        "wrong_kind",
        "cputime",
        "grouped",
    ]
    table = frame(rows.select(wanted))
    # busbw_gbps is the recomputed busbw from here on; the printed figures keep their
    # own names (integrity compares them).
    table = table.rename(
        columns={
            "algbw_gbps": "algbw_printed_gbps",
            "busbw_gbps": "busbw_printed_gbps",
            "busbw_calc_gbps": "busbw_gbps",
        }
    )
    for name in ("collective", "redop", "root", "nranks", "nnodes"):
        table[name] = key_text(rows[name])
    return table


def _series(rows: pd.DataFrame) -> list[tuple[tuple[Any, ...], AnalysedRows]]:
    """The series (SERIES_KEYS) of analysed ``rows`` in order of appearance, each
    its key (a missing value as None) and its rows as AnalysedRows of shared arrays:
    a pandas group per series cost ~1 ms, at 2,000 series."""
    if rows.empty:
        return []
    grouped = rows.groupby(list(SERIES_KEYS), dropna=False, sort=False)
    codes = grouped.ngroup().to_numpy()
    order = np.argsort(codes, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(codes[order]) != 0])
    columns = AnalysedRows(rows)
    arrays = {name: columns[name] for name in rows.columns}
    keys = [columns[name] for name in SERIES_KEYS]
    found = []
    for at in np.split(order, starts[1:]):
        first = int(at[0])
        key = _nan_free(tuple(values[first] for values in keys))
        found.append((key, AnalysedRows(arrays, at)))
    return found


def _rule_case(rule: Rule, ctx: dict[str, Any], group: AnalysedRows) -> Case:
    size = group["size_bytes"]
    keep = (
        ~np.asarray(group["cputime"], dtype=bool)
        & ~np.asarray(group["grouped"], dtype=bool)
        & (size > 0)
    )
    if rule.regime is not None:
        keep &= group["regime"] == rule.regime
    if rule.size_min is not None:
        keep &= size >= rule.size_min
    if rule.size_max is not None:
        keep &= size <= rule.size_max
    metric = group[rule.metric].astype(float)
    keep &= ~np.isnan(metric)
    size, values = size[keep], metric[keep]
    name = f"{ctx['label']} [{ctx['source']}#{ctx['run']}]"
    common = {
        "source": ctx["source"],
        "run": ctx["run"],
        "hosts": ctx["hosts"],
        "collective": ctx["collective"],
    }
    if not len(values):
        message = f"{ctx['where']} {ctx['label']}: no size matches ({rule.describe()})"
        return Case(rule.name, name, "SKIP", message, **common)
    bad = values > rule.limit if rule.is_ceiling else values < rule.limit
    findings = by_importance(
        SizeMiss(int(s), rule.metric, float(v), rule.limit)
        for s, v in zip(size[bad], values[bad], strict=True)
    )
    fmt = FORMAT[rule.metric]
    sign = ">" if rule.is_ceiling else "<"
    if findings:
        detail = sizes(findings, lambda f: f"{fmt(f.value)} {sign} {fmt(f.limit)}")
        verdict = (
            f"{rule.metric} {'above' if rule.is_ceiling else 'below'} "
            f"{fmt(rule.limit)} at {len(findings)} of {len(values)} sizes: {detail}"
        )
    else:
        worst = values.max() if rule.is_ceiling else values.min()
        verdict = f"{len(values)} sizes within {fmt(rule.limit)} (worst {fmt(worst)})"
    outcome: Outcome = "FAIL" if findings else "OK"
    message = f"{ctx['where']} {ctx['label']}: {verdict}"
    return Case(
        rule.name,
        name,
        outcome,
        message,
        checked=len(values),
        findings=findings,
        **common,
    )


@dataclass(frozen=True, slots=True)
class _Lookup:
    """A baseline table (:func:`baselines`) as dictionaries: its rows by
    BASELINE_KEYS, and per series (the keys but size) the sizes with enough runs.
    A MultiIndex look-up per size took 10 s at 1,000 logs."""

    rows: dict[tuple[Any, ...], dict[str, Any]]
    sizes: dict[tuple[Any, ...], list[int]]

    @classmethod
    def of(cls, base: pd.DataFrame, min_runs: int) -> _Lookup:
        rows: dict[tuple[Any, ...], dict[str, Any]] = {}
        sizes: dict[tuple[Any, ...], list[int]] = {}
        for index, record in zip(base.index, base.to_dict("records"), strict=True):
            key = cast("tuple[Any, ...]", index)
            row = cast("dict[str, Any]", record)
            rows[key] = row
            if row["runs"] >= min_runs:
                sizes.setdefault(key[:-1], []).append(int(key[-1]))
        return cls(rows, sizes)


def _per_size(rows: pd.DataFrame) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """Per series (SERIES_KEYS), its sizes with the median time and busbw of their
    rows and the regime of the first: the points judged against the baseline. One
    grouping for all series: one per series took seconds at 1,000 logs."""
    usable = rows[~rows["cputime"] & ~rows["grouped"] & (rows["size_bytes"] > 0)]
    sizes = usable.groupby([*SERIES_KEYS, "size_bytes"], dropna=False).agg(
        time_us=("time_us", "median"),
        busbw_gbps=("busbw_gbps", "median"),
        regime=("regime", "first"),
    )
    found: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for index, record in zip(sizes.index, sizes.to_dict("records"), strict=True):
        key = cast("tuple[Any, ...]", index)
        point = cast("dict[str, Any]", record)
        point["size_bytes"] = int(key[-1])
        found.setdefault(_nan_free(key[:-1]), []).append(point)
    return found


def _interned(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """``key`` with its text interned: the series keys a check of many logs keeps
    share one copy of each name."""
    return tuple(sys.intern(v) if type(v) is str else v for v in key)


def _nan_free(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """A group key with missing values (NaN, None) as None, so keys of two
    groupings of the same rows compare equal (NaN != NaN)."""
    return tuple(
        None if v is None or (isinstance(v, float) and v != v) else v for v in key
    )


def _history_case(
    rules: Rules, ctx: dict[str, Any], points: list[dict[str, Any]], base: _Lookup
) -> Case:
    """The ``history`` case of one series from its ``points`` (:func:`_per_size`)."""
    policy = rules.history
    name = f"{ctx['label']} [{ctx['source']}#{ctx['run']}]"
    common = {k: ctx[k] for k in ("source", "run", "hosts", "collective")}
    series = dict(zip(SERIES_KEYS, ctx["key"], strict=True))
    findings, checked, thin, missing = [], 0, 0, []
    for row in points:
        size_bytes = cast(int, row["size_bytes"])
        time_us = float(row["time_us"])
        busbw_gbps = float(row["busbw_gbps"])
        index = (*(series[k] for k in BASELINE_KEYS[:-1]), size_bytes)
        b = base.rows.get(index)
        if b is None:
            continue
        if b["runs"] < policy.min_runs:
            thin += 1
            continue
        checked += 1
        if row["regime"] == "bandwidth-bound" and np.isfinite(busbw_gbps):
            limit = policy.busbw_floor(b["busbw_median"], b["busbw_mad"])
            if busbw_gbps < limit:
                findings.append(
                    SizeMiss(
                        size_bytes,
                        "busbw_gbps",
                        busbw_gbps,
                        limit,
                        float(b["busbw_median"]),
                    )
                )
        else:
            limit = policy.time_ceiling(b["time_median"], b["time_mad"])
            if time_us > limit:
                findings.append(
                    SizeMiss(
                        size_bytes,
                        "time_us",
                        time_us,
                        limit,
                        float(b["time_median"]),
                    )
                )
    # A size the baseline always had but tonight's run lacks is a failure: a run cut
    # short ("Reducing maxBytes") must not pass on the sizes it still has.
    if base.rows:
        prefix = tuple(series[k] for k in BASELINE_KEYS[:-1])
        have = {row["size_bytes"] for row in points}
        missing = sorted(s for s in base.sizes.get(prefix, []) if s not in have)
    if not checked and not missing:
        why = (
            f"{thin} size(s) with fewer than {policy.min_runs} runs" if thin else "none"
        )
        message = f"{ctx['where']} {ctx['label']}: no baseline in history ({why})"
        return Case("history", name, "SKIP", message, **common)
    parts = []
    if findings:
        parts.append(
            f"regression beyond history noise at {len(findings)} of {checked} sizes: "
            + sizes(by_importance(findings), _history_detail)
        )
    if missing:
        parts.append(
            "size(s) in the baseline but absent: "
            + ", ".join(format_bytes(s) for s in missing)
        )
    text = "; ".join(parts) or f"{checked} sizes within history noise"
    outcome: Outcome = "FAIL" if parts else "OK"
    message = f"{ctx['where']} {ctx['label']}: {text}"
    return Case(
        "history",
        name,
        outcome,
        message,
        checked=checked,
        findings=by_importance(findings),
        **common,
    )


def _history_detail(f: SizeMiss) -> str:
    assert f.baseline is not None
    fmt = FORMAT[f.metric]
    change = f.value / f.baseline - 1 if f.baseline else float("nan")
    return (
        f"{fmt(f.value)} vs baseline median {fmt(f.baseline)} ({change:+.1%}; "
        f"limit {fmt(f.limit)})"
    )


def _blame_cases(ranked: tuple[HostScore, ...], nruns: int) -> list[Case]:
    slow = [h for h in ranked if h.slow]
    if not ranked:
        message = f"{nruns} run(s): too few runs per shape over different hosts"
        return [Case("slow-host", "hosts", "SKIP", message)]
    if not slow:
        best = ranked[0]
        message = (
            f"no host consistently slow over {len(ranked)} hosts "
            f"(worst: {best.host}, {best.deficit:.0%} deficit)"
        )
        return [Case("slow-host", "hosts", "OK", message, checked=len(ranked))]
    return [
        Case("slow-host", h.host, "FAIL", h.describe(), hosts=(h.host,), checked=h.runs)
        for h in slow
    ]


def cohort_points(rows: pa.Table) -> dict[tuple[Any, ...], PointArrays]:
    """What the cohort cases read of analysed ``rows`` of whole runs: per series,
    its per-size points (:func:`ncclparse.health.cohort.points_of`)."""
    return {key: points_of(found) for key, found in _per_size(_frame(rows)).items()}


def cohort_from(
    runs: pa.Table,
    points: Mapping[tuple[Any, ...], PointArrays],
    policy: CohortPolicy,
) -> list[Case]:
    """The ``cohort`` cases of ``runs`` (a ``runs`` table) from the
    :func:`cohort_points` of all their analysed rows, gathered batch by batch."""
    ordered = dict(sorted(points.items(), key=lambda item: (item[0][0], item[0][1])))
    return cohort_cases(ordered, _facts(runs), policy)


def run_batches(
    measurements: pa.Table, runs: pa.Table
) -> Iterator[tuple[pa.Table, pa.Table]]:
    """The batches of whole runs :func:`check` judges ``measurements`` in (at most
    :data:`JUDGE_ROWS` rows each unless one run has more; one batch when they are
    that small), in the order of ``runs``: for whoever analyses many runs in the
    same bounded memory."""
    return _batches(measurements, runs)
