"""Build the report context from parsed and analysed tables.

:func:`build_context` turns a :class:`~ncclparse.parsers.ParseResult` (and its
:class:`~ncclparse.efficiency.Analysis`) into a :class:`ReportContext` (the dataclasses
of :mod:`ncclparse.report.page`): a verdict per run, key numbers, charts as SVG
strings, tables and every warning and error. Everything a template shows is computed
here.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from markupsafe import Markup

from ncclparse._arrow import frame
from ncclparse.efficiency import Analysis, analyze, per_iteration
from ncclparse.efficiency.algorithms import SHOWN
from ncclparse.efficiency.hardware import HardwareOptions
from ncclparse.efficiency.profile import HardwareProfile
from ncclparse.formatting import format_bytes, series_label
from ncclparse.health.blame import RunTimes, blame
from ncclparse.health.cases import Case, run_named
from ncclparse.health.check import (
    JUDGE_ROWS,
    cohort_from,
    cohort_points,
    run_batches,
)
from ncclparse.health.cohort import RULE as COHORT
from ncclparse.health.cohort import PointArrays
from ncclparse.health.rules import DEFAULT_RULES, BlamePolicy, VerdictPolicy
from ncclparse.health.verdict import (
    JUDGED_COLUMNS,
    JUDGED_FIT_COLUMNS,
    LABELS,
    AnalysedRows,
    Finding,
    Level,
    RowBlock,
    Verdict,
    blocks_of,
    judge_run,
    judged,
)
from ncclparse.parsers import ParseResult
from ncclparse.report import plots
from ncclparse.report.checks import CheckSummary, RunLink, check_summary
from ncclparse.report.derivation import Figures, derivation
from ncclparse.report.facts import (
    ALGORITHM_BASIS,
    Message,
    ProfileInfo,
    algorithm_facts,
    failure_message,
    per_iteration_facts,
    run_messages,
    run_metadata,
)
from ncclparse.report.heatmap import is_pairwise, pairwise_heatmap
from ncclparse.report.page import (
    Block,
    Chart,
    ComparisonRow,
    IdealReading,
    OverviewRow,
    ReportContext,
    RunReport,
    SizeRow,
    VerdictCount,
)
from ncclparse.report.tables import size_table
from ncclparse.schema import BLOCK_KEYS, MEASUREMENTS_SCHEMA, SCHEMA_VERSION

if TYPE_CHECKING:
    from ncclparse.health.check import CheckResult

__all__ = [
    "Block",
    "Chart",
    "CheckSummary",
    "ComparisonRow",
    "Finding",
    "Level",
    "Message",
    "ProfileInfo",
    "ReportContext",
    "RunReport",
    "SizeRow",
    "Verdict",
    "build_context",
]

_OVERLAY_LIMIT = 10  # more lines than this are a tangle; the table lists all
# Beyond this many blocks, each block's own four charts make a page of megabytes that
# takes a minute to draw: the overview's small multiples replace them.
CHARTED_BLOCKS = 12
# Beyond this many runs, only the most telling ones get a section (see _detailed):
# a directory of 82 oneCCL logs (94 runs) keeps every one within 1 MB.
DETAILED_RUNS = 100
STDIN_NAME = "standard input"


def build_context(
    result: ParseResult,
    analysis: Analysis | None = None,
    *,
    hardware: HardwareOptions | None = None,
    command_line: str | None = None,
    failures: Sequence[Exception] | None = None,
    policy: VerdictPolicy | None = None,
    check: CheckResult | None = None,
    title: str | None = None,
) -> ReportContext:
    """Build the report context; runs :func:`~ncclparse.efficiency.analyze` with
    ``hardware`` unless given its ``analysis``. ``failures`` are the inputs that could
    not be read (default: ``result.failures``; the CLI adds missing paths). Runs are
    judged by :func:`ncclparse.health.verdict.judge_run` with ``policy`` (default: the
    default rules' thresholds). ``check`` (from
    :func:`ncclparse.health.check.check` on the same result) adds the Checks section;
    without it the page is unchanged. ``title`` names the page (default: the input, or
    how many) and standard input (default: "standard input"). Runs are named by the
    schema's 0-based ``run``: "a.log (run 0)". With more than one run an overview
    comes first; with more than :data:`CHARTED_BLOCKS` blocks (even in one run) it
    has small multiples, which replace each block's charts.
    Raises ProfileError as ``analyze`` does.
    """
    from ncclparse._version import __version__

    policy = policy or DEFAULT_RULES.verdict
    stdin = title or STDIN_NAME
    # Without a check, a pairwise sweep's runs are judged against each other too.
    cohort = check is None and is_pairwise(result.runs)
    judged = _judged_runs(result, analysis, hardware, policy, cohort=cohort)
    if check is not None:
        judged = dataclasses.replace(judged, verdicts=_as_checked(judged, check))
    judged = dataclasses.replace(
        judged, verdicts=_below_cohort(judged, _cohort(result, judged, check))
    )
    listed, charted = judged.listed, judged.charted
    shown = _detailed(
        [
            (r["source"], r["run"], v.level)
            for r, v in zip(listed, judged.verdicts, strict=True)
        ],
        check,
    )
    profiles = judged.profiles
    profile = profiles[0] if len(profiles) == 1 else None
    names = _short_names([_named(r["source"], stdin) for r in listed])
    chosen = [i for i, r in enumerate(listed) if (r["source"], r["run"]) in shown]
    sections = _sections(
        judged.whole or _analysis_of(result, listed, chosen, hardware),
        listed,
        chosen,
    )
    runs = [
        _run_report(
            index,
            run,
            sections.get(index, judged.blocks[index]),
            judged.verdicts[index],
            charted=charted,
            stdin=stdin,
            short_name=names[index],
            profile=profile,
        )
        for index, run in enumerate(listed)
    ]
    comparison = tuple(ComparisonRow(r, b) for r in runs for b in r.blocks)
    errors, inputs = _inputs(result, failures, stdin)
    # One run of many series gets the overview too: its small multiples are the
    # only charts such a page has.
    overview = _overview(runs) if len(runs) > 1 or not charted else ()
    return ReportContext(
        title=title or f"ncclparse report: {inputs}",
        runs=tuple(runs),
        failures=errors,
        assumptions=judged.assumptions,
        overlay=_overlay(comparison) if len(comparison) > 1 and charted else None,
        comparison=comparison if len(comparison) > 1 and charted else (),
        profiles=tuple(ProfileInfo(p.summary(), p.sources) for p in profiles),
        ncclparse_version=__version__,
        schema_version=SCHEMA_VERSION,
        command_line=command_line,
        policy=policy,
        checks=None if check is None else check_summary(check, _links(runs)),
        overview=overview,
        verdict_counts=_verdict_counts(runs) if overview else (),
        small_multiples=() if charted else _small_multiples(overview),
        charts_per_block=charted,
        pairs=_pairs(result, judged, check),
        details_left_out=len(runs) - len(shown),
    )


@dataclass(frozen=True, slots=True)
class _JudgedRuns:
    """Each run of a result (``listed``, the ``runs`` rows) with the blocks its
    overview row shows (:func:`_overview_block`) and its verdict; ``charted``: few
    enough blocks for each its charts. ``assumptions`` and ``profiles``: the
    analysis' (of every batch, each once); ``whole``: the analysis itself when the
    runs were analysed at once (else a section's runs are analysed again);
    ``points`` and ``times``: the per-size points the cohort cases read and the
    median times host blame reads, gathered batch by batch (when asked for)."""

    listed: list[dict[str, Any]]
    blocks: list[list[Block]]
    verdicts: list[Verdict]
    charted: bool
    assumptions: tuple[str, ...]
    profiles: tuple[HardwareProfile, ...]
    whole: Analysis | None
    points: dict[tuple[Any, ...], PointArrays]
    times: RunTimes


def _judged_runs(
    result: ParseResult,
    analysis: Analysis | None,
    hardware: HardwareOptions | None,
    policy: VerdictPolicy,
    *,
    cohort: bool,
) -> _JudgedRuns:
    """Every run of ``result`` analysed (with ``hardware``; or ``analysis``, given),
    split into blocks and judged (with its fits), in the batches of whole runs
    ``check`` judges in (:func:`ncclparse.health.check.run_batches`): of a batch,
    only each run's overview blocks and verdict (and, when ``cohort``, its cohort
    points and median times) are kept, so memory does not grow with the analysed
    rows of every run.
    """
    listed: list[dict[str, Any]] = []
    blocks: list[list[Block]] = []
    verdicts: list[Verdict] = []
    said: dict[str, None] = {}
    profiles: dict[HardwareProfile, None] = {}
    points: dict[tuple[Any, ...], PointArrays] = {}
    times = RunTimes()
    batches = (
        ((result.measurements, analysis, result.runs),)
        if analysis is not None
        else (
            (measurements, analyze(measurements, hardware, runs), runs)
            for measurements, runs in run_batches(result.measurements, result.runs)
        )
    )
    whole: Analysis | None = None
    for measurements, analysed, runs in batches:
        mine = runs.to_pylist()
        found, judged = _judged_batch(mine, analysed, policy, len(listed))
        listed += mine
        blocks += found
        verdicts += judged
        said |= dict.fromkeys(analysed.assumptions)
        profiles |= dict.fromkeys(analysed.profiles)
        if cohort:
            points |= cohort_points(analysed.rows)
            times.add(measurements)
        if analysis is not None or result.measurements.num_rows <= JUDGE_ROWS:
            whole = analysed  # the one batch
        del measurements, analysed  # not held while the next batch is analysed
    charted = sum(len(b) for b in blocks) <= CHARTED_BLOCKS
    return _JudgedRuns(
        listed,
        blocks,
        verdicts,
        charted,
        tuple(said),
        tuple(profiles),
        whole,
        points,
        times,
    )


def _judged_batch(
    listed: Sequence[dict[str, Any]],
    analysis: Analysis,
    policy: VerdictPolicy,
    first: int,
) -> tuple[list[list[Block]], list[Verdict]]:
    """The overview blocks and verdict of each of ``listed`` (``runs`` rows, the
    report's runs from number ``first``, 0-based) from their ``analysis``: judged
    on NumPy arrays of the columns the verdict and the overview read, each run its
    positions in them (a pandas selection per run took most of a minute)."""
    names = [c for c in _OVERVIEW_COLUMNS if c in analysis.rows.column_names]
    columns = AnalysedRows(frame(analysis.rows.select(names)))
    arrays = {name: columns[name] for name in names}
    fits = frame(analysis.fits.select(list(JUDGED_FIT_COLUMNS)))
    rows_at = _positions(analysis.rows, listed)
    fits_at = _positions(analysis.fits, listed)
    blocks, verdicts = [], []
    for index, (run, at, fits_of_run) in enumerate(
        zip(listed, rows_at, fits_at, strict=True), start=first
    ):
        mine = AnalysedRows(arrays, at)
        found = blocks_of(mine) if len(mine) else []
        verdicts.append(judge_run(run, mine, policy, fits.iloc[fits_of_run], found))
        blocks.append(
            [
                _overview_block(f"run{index + 1}-{number}", key, group)
                for number, (key, group) in enumerate(found, start=1)
            ]
        )
    return blocks, verdicts


def _analysis_of(
    result: ParseResult,
    listed: Sequence[Mapping[str, Any]],
    chosen: Sequence[int],
    hardware: HardwareOptions | None,
) -> Analysis:
    """The analysis of the ``chosen`` runs of ``listed`` alone: what their sections
    draw, when the runs were analysed in batches (a run's analysis does not depend
    on the other runs analysed with it, as ``check``'s batches rely on)."""
    wanted = {(listed[i]["source"], listed[i]["run"]) for i in chosen}
    rows = result.measurements
    rows = rows.filter(
        pc.is_in(rows["source"], pa.array(sorted({s for s, _ in wanted})))
    )
    keys = zip(rows["source"].to_pylist(), rows["run"].to_pylist(), strict=True)
    rows = rows.filter(pa.array([key in wanted for key in keys], pa.bool_()))
    runs = result.runs.take(pa.array(sorted(chosen), pa.int64()))
    return analyze(rows, hardware, runs)


def _sections(
    analysis: Analysis, listed: Sequence[Mapping[str, Any]], chosen: Sequence[int]
) -> dict[int, tuple[pd.DataFrame, pd.DataFrame, list[RowBlock]]]:
    """The ``chosen`` runs' analysed rows and fits with every column, as
    DataFrames, and their blocks of them, by run index: what a run's own section
    draws. One selection of the tables for them all (one per run cost a tenth of a
    second each)."""
    runs = [listed[i] for i in chosen]
    rows = _split(analysis.rows, _positions(analysis.rows, runs))
    fits = _split(analysis.fits, _positions(analysis.fits, runs))
    return {
        index: (mine, my_fits, blocks_of(AnalysedRows(mine)) if len(mine) else [])
        for index, mine, my_fits in zip(chosen, rows, fits, strict=True)
    }


def _split(
    table: pa.Table, parts: Sequence[npt.NDArray[np.intp]]
) -> list[pd.DataFrame]:
    """The rows of ``table`` at each of ``parts`` (positions), as DataFrames."""
    taken = frame(table.take(np.concatenate([np.zeros(0, np.intp), *parts])))
    ends = np.cumsum([len(part) for part in parts])
    return [
        taken.iloc[end - len(part) : end] for part, end in zip(parts, ends, strict=True)
    ]


def _positions(
    table: pa.Table, listed: Sequence[Mapping[str, Any]]
) -> list[npt.NDArray[np.intp]]:
    """The positions of each listed run's rows in ``table`` (by source and run), in
    table order; none for a run without rows."""
    keys = pd.DataFrame(
        {n: table[n].to_numpy(zero_copy_only=False) for n in ("source", "run")}
    )
    found = keys.groupby(["source", "run"], sort=False).indices if len(keys) else {}
    none = np.zeros(0, np.intp)
    return [
        np.asarray(found.get((r["source"], r["run"]), none), np.intp) for r in listed
    ]


def _as_checked(judged: _JudgedRuns, check: CheckResult) -> list[Verdict]:
    """Each run's verdict as ``check`` said it in the run's ``verdict`` case, where
    the check's rules judged it more severely than the page's verdict: a sweep that
    stops before bandwidth can be judged is a NOTE on a plain report and a FAIL of
    a check whose rules say ``[verdict] unjudged = "fail"`` (the default), so the
    page of ``check --report`` says FAIL, with the check's words, first."""
    cases = {
        (c.source, c.run): c for c in check.cases if c.rule == "verdict" and c.source
    }
    verdicts = []
    for run, verdict in zip(judged.listed, judged.verdicts, strict=True):
        case = cases.get((run["source"], run["run"]))
        if case is None or case.outcome != "FAIL" or verdict.level == "bad":
            verdicts.append(verdict)
            continue
        finding = Finding("bad", f"check: {_found(case)}", "efficiency")
        label, symbol = LABELS["bad"]
        verdicts.append(
            Verdict("bad", label, symbol, finding.text, (finding, *verdict.findings))
        )
    return verdicts


def _found(case: Case) -> str:
    """What a run's case found: its message without the run's name in front
    (:func:`ncclparse.health.cases.run_named`), whatever the log is named."""
    if case.source is None or case.run is None:
        return case.message
    return case.message.removeprefix(
        f"{run_named(case.source, case.run, case.hosts)}: "
    )


def _cohort(
    result: ParseResult, judged: _JudgedRuns, check: CheckResult | None
) -> list[Case]:
    """The ``cohort`` cases the page shows as verdicts: the check's, or without a
    check those of a pairwise sweep under the default rules (from the points
    ``judged`` gathered). Only a sweep's runs are one night of one cluster by
    construction: a directory of logs from several clusters would be judged as one
    night (a false alarm)."""
    if check is not None:
        return [c for c in check.cases if c.rule == COHORT]
    if is_pairwise(result.runs):
        return cohort_from(result.runs, judged.points, DEFAULT_RULES.cohort)
    return []


def _below_cohort(judged: _JudgedRuns, cohort: Sequence[Case]) -> list[Verdict]:
    """Each run's verdict, FAIL where a ``cohort`` case failed it: far below the
    other runs of its shape tonight (:func:`ncclparse.health.check.cohort_of`; the
    check's own cases on the page of ``check --report``). A pairwise sweep's slow
    pair is found so, when no ideal is known to judge it by."""
    said: dict[tuple[str | None, int | None], list[str]] = {}
    for case in cohort:
        if case.outcome == "FAIL":
            said.setdefault((case.source, case.run), []).append(_found(case))
    verdicts = []
    for run, verdict in zip(judged.listed, judged.verdicts, strict=True):
        found = said.get((run["source"], run["run"]))
        if not found:
            verdicts.append(verdict)
            continue
        # The placement the verdict judges (out-of-place, when measured) first.
        found.sort(key=lambda text: " out-of-place " not in text)
        findings = [
            *verdict.findings,
            *(Finding("bad", t, "efficiency") for t in found),
        ]
        # Worst first; a run failed for its own reasons says those first (stable).
        findings.sort(key=lambda f: _SEVERITY.index(f.level))
        label, symbol = LABELS["bad"]
        verdicts.append(
            Verdict("bad", label, symbol, findings[0].text, tuple(findings))
        )
    return verdicts


def _short_names(sources: Sequence[str]) -> list[str]:
    """Each source by its file name, or by as many of its last path parts as tell
    it from the others: a pairwise sweep's logs all named all_reduce.log read as
    "node003-node017/all_reduce.log"."""
    parts = [PurePath(s).parts or (s,) for s in sources]
    tails = dict.fromkeys(sources, 1)
    while True:
        named: dict[str, set[str]] = {}
        for source, split in zip(sources, parts, strict=True):
            named.setdefault(_tail(split, tails[source]), set()).add(source)
        clashes = [
            s
            for same in named.values()
            if len(same) > 1
            for s in same
            if tails[s] < len(PurePath(s).parts)
        ]
        if not clashes:
            return [
                _tail(split, tails[s]) for s, split in zip(sources, parts, strict=True)
            ]
        for source in clashes:
            tails[source] += 1


def _tail(parts: Sequence[str], count: int) -> str:
    return str(PurePath(*parts[-count:])) if parts else ""


def _inputs(
    result: ParseResult, failures: Sequence[Exception] | None, stdin: str
) -> tuple[tuple[Message, ...], str]:
    """The messages of the inputs that could not be read (default: the result's
    failures) and how the title names the inputs: the one, or how many."""
    failures = result.failures if failures is None else failures
    errors = tuple(
        dataclasses.replace(m, source=_named(m.source, stdin))
        for m in (failure_message(exc) for exc in failures)
    )
    sources = [
        *(_named(s, stdin) for s in result.accounting),
        *(m.source for m in errors),
    ]
    return errors, sources[0] if len(sources) == 1 else f"{len(sources)} inputs"


def _links(runs: Sequence[RunReport]) -> dict[tuple[str, int], RunLink]:
    """Where the Checks section links each run: its section, if it has one."""
    return {
        (r.source, r.run): RunLink(
            r.anchor if r.detailed else "",
            r.short_label,
            r.label,
            min(starts) if (starts := _bandwidth_starts(r)) else None,
        )
        for r in runs
    }


def _bandwidth_starts(run: RunReport) -> list[float]:
    """The sizes where each block of ``run`` turns bandwidth-bound, where known."""
    return [
        b.bandwidth_bound_bytes
        for b in run.blocks
        if b.bandwidth_bound_bytes is not None
    ]


def _detailed(
    runs: Sequence[tuple[str, int, Level]], check: CheckResult | None
) -> set[tuple[str, int]]:
    """Of ``runs`` (source, run, verdict level), those that get a section of their
    own: all of them up to :data:`DETAILED_RUNS`; beyond, that many of the most
    telling ones: those a failed check case or a slow host's evidence names, then by
    verdict (FAIL, CHECK, NOTE, OK), each in input order. A page of every run of a
    nightly directory (1,000 logs) was 27 MB, of which the runs' sections 23.5 MB."""
    if len(runs) <= DETAILED_RUNS:
        return {(source, run) for source, run, _ in runs}
    named: dict[tuple[str, int], None] = {}
    if check is not None:
        named |= dict.fromkeys(
            (c.source, c.run)
            for c in check.failures
            if c.source is not None and c.run is not None
        )
        named |= dict.fromkeys(
            (e.source, e.run) for h in check.hosts if h.slow for e in h.evidence
        )
    rank = {"bad": 0, "warn": 1, "info": 2, "ok": 3}
    ordered = sorted(
        range(len(runs)),
        key=lambda i: (runs[i][:2] not in named, rank[runs[i][2]], i),
    )
    return {runs[i][:2] for i in ordered[:DETAILED_RUNS]}


def _pairs(
    result: ParseResult, judged: _JudgedRuns, check: CheckResult | None
) -> Chart | None:
    """The host x host heatmap of a pairwise sweep, the check's slow hosts (or the
    default blame policy's, from the median times ``judged`` gathered) outlined;
    None for any other set of runs."""
    if not is_pairwise(result.runs):
        return None
    ranked = (
        check.hosts
        if check is not None
        else blame(judged.times.scores(result.runs), BlamePolicy())
    )
    found = pairwise_heatmap(result, ranked=ranked)
    if found is None:
        return None
    matrix, svg = found
    sizes = ", ".join(format_bytes(s) for s in matrix.sizes)
    measured = int((matrix.runs > 0).sum()) // 2
    possible = len(matrix.hosts) * (len(matrix.hosts) - 1) // 2
    caption = (
        f"{matrix.label}: each cell is the median busbw of the two hosts' runs at the "
        f"largest sizes ({sizes}), both placements; {measured} of {possible} pairs "
        "measured (blank: not measured). A host named slow has its row and column "
        "outlined."
    )
    return Chart("Pairs of hosts", caption, Markup(svg))


# Worst first: the order of the overview and of its counts line.
_SEVERITY: tuple[Level, ...] = ("bad", "warn", "info", "ok")


def _overview(runs: Sequence[RunReport]) -> tuple[OverviewRow, ...]:
    """Every run in the overview, a row per block (a run without rows gets one of its
    own), worst run verdict first, then by file and run: a failure is never below
    the fold of a long list of healthy runs."""
    ordered = sorted(
        runs,
        key=lambda r: (_SEVERITY.index(r.verdict.level), r.source, r.run),
    )
    found: list[OverviewRow] = []
    for run in ordered:
        rows = [_overview_row(run, b) for b in run.blocks] or [_no_rows(run)]
        if not found or found[-1].run.verdict.level != run.verdict.level:
            rows[0] = dataclasses.replace(
                rows[0], opens=overview_anchor(run.verdict.level)
            )
        found.extend(rows)
    return tuple(found)


def _no_rows(run: RunReport) -> OverviewRow:
    """The overview row of a run that measured nothing: every finding says why."""
    findings = run.verdict.findings
    return OverviewRow(run, None, findings[0], "; ".join(f.text for f in findings))


def _verdict_counts(runs: Sequence[RunReport]) -> tuple[VerdictCount, ...]:
    """How many runs have each verdict that occurs, worst first; each links to the
    first overview row of its verdict (see :func:`overview_anchor`)."""
    counts = Counter(r.verdict.level for r in runs)
    return tuple(
        VerdictCount(level, LABELS[level][0], counts[level], overview_anchor(level))
        for level in _SEVERITY
        if counts[level]
    )


def overview_anchor(level: Level) -> str:
    """The id of the first overview row of runs with verdict ``level``."""
    return f"overview-{LABELS[level][0].lower()}"


def _overview_row(run: RunReport, block: Block) -> OverviewRow:
    """The block's own verdict: judge_run prefixes a block's findings with its series
    name when the run has several blocks; findings without a prefix (status, data)
    are the whole run's."""
    prefix = f"{block.title}: "
    others = tuple(f"{b.title}: " for b in run.blocks if b is not block)
    for finding in run.verdict.findings:  # worst first
        if finding.text.startswith(prefix):
            return OverviewRow(run, block, finding, finding.text[len(prefix) :])
        if len(run.blocks) == 1 or not finding.text.startswith(others):
            return OverviewRow(run, block, finding, finding.text)
    return OverviewRow(run, block, Finding("info", "no finding"), "no finding")


def _named(source: str, stdin: str) -> str:
    """A source as people read it: "-" is standard input (or the given title)."""
    return stdin if source == "-" else source


def _run_report(
    index: int,
    run: dict[str, Any],
    analysed: tuple[pd.DataFrame, pd.DataFrame, list[RowBlock]] | list[Block],
    verdict: Verdict,
    *,
    charted: bool,
    stdin: str,
    short_name: str,
    profile: HardwareProfile | None = None,
) -> RunReport:
    """The report of one run (a ``runs`` row) and its verdict. With its analysed
    rows, fits and blocks (:func:`blocks_of`) as DataFrames, the run has a section:
    its blocks get their tables and, when ``charted``, their charts; with its
    overview blocks alone (:func:`_overview_block`), only what the overview shows.
    Source "-" is named ``stdin``;
    ``short_name`` names the source where space is short (:func:`_short_names`);
    ``profile``: the one hardware profile the analysis used, if one, for the
    ideal's arithmetic."""
    # The anchor counts the report's runs (unique across sources); the text names the
    # run by the schema's own 0-based number.
    anchor = f"run{index + 1}"
    detailed = isinstance(analysed, tuple)
    metadata = run_metadata(run)
    if isinstance(analysed, tuple):
        mine, my_fits, groups = analysed
        hardware = (
            None
            if profile is None or run["nnodes"] is None
            else (profile, run["nnodes"])
        )
        blocks = [
            _block(
                f"{anchor}-{number}",
                key,
                group.frame(),
                _block_fits(my_fits, key),
                charted=charted,
                hardware=hardware,
            )
            for number, (key, group) in enumerate(groups, start=1)
        ]
        metadata += _algorithm(mine) + per_iteration_facts(_iterations(mine))
    else:
        blocks = analysed
    devices = Counter(d for d in run["devices"] if d)
    device = next(iter(devices)) if len(devices) == 1 else None
    source = _named(run["source"], stdin)
    return RunReport(
        anchor=anchor,
        label=f"{source} (run {run['run']})",
        short_label=f"{short_name} (run {run['run']})",
        source=run["source"],
        run=run["run"],
        tool=run["tool"],
        status=run["status"],
        collectives=", ".join(run["collectives"]) or "unknown",
        nranks=run["nranks"],
        nnodes=run["nnodes"],
        device=device or (", ".join(devices) if devices else None),
        verdict=verdict,
        blocks=tuple(blocks),
        metadata=metadata,
        messages=run_messages({**run, "source": source}),
        detailed=detailed,
    )


def _block_fits(fits: pd.DataFrame, key: tuple[Any, ...]) -> pd.DataFrame:
    """The fits of the block with ``key`` (BLOCK_KEYS) of its run's ``fits``."""
    for column, value in zip(BLOCK_KEYS, key, strict=True):
        fits = fits[_same(fits[column], value)]
    return fits


def _iterations(mine: pd.DataFrame) -> list[dict[str, Any]]:
    """A run's rows with per-iteration statistics, spikes and stragglers added."""
    if "time_p99_us" not in mine or not mine["time_p99_us"].notna().any():
        return []
    names = [
        "source", "run", "line", "placement", "size_bytes", "time_min_us",
        "time_max_us", "time_p99_us", "stddev_pct", "time_avg_us", "iter_times_us",
        "iter_process_times_us",
    ]  # fmt: skip
    rows: list[dict[str, Any]] = [
        {str(k): v for k, v in r.items()} for r in mine[names].to_dict("records")
    ]
    for row in rows:
        for key, value in row.items():
            if key in ("iter_times_us", "iter_process_times_us"):
                row[key] = None if value is None else _as_lists(value)
            elif not isinstance(value, str) and pd.isna(value):
                row[key] = None  # NaN or NA where the table holds null
    table = pa.Table.from_pylist(rows, schema=_ITER_SCHEMA)
    found = {
        (r["line"], r["placement"]): r
        for r in per_iteration.summarize(table).to_pylist()
    }
    return [{**r, **found.get((r["line"], r["placement"]), {})} for r in rows]


def _as_lists(value: Any) -> Any:
    """numpy arrays (as pandas gives list cells) back to Python lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, list | tuple):
        return [_as_lists(v) for v in value]
    return value


_ITER_SCHEMA = pa.schema(
    [
        MEASUREMENTS_SCHEMA.field(name)
        for name in (
            "source", "run", "line", "placement", "size_bytes", "time_min_us",
            "time_max_us", "time_p99_us", "stddev_pct", "time_avg_us",
            "iter_times_us", "iter_process_times_us",
        )
    ]
)  # fmt: skip


def _block(
    anchor: str,
    key: tuple[Any, ...],
    rows: pd.DataFrame,
    fits: pd.DataFrame,
    *,
    charted: bool = True,
    hardware: tuple[HardwareProfile, int] | None = None,
) -> Block:
    """A block with its tables, key figures and (when ``charted``) charts;
    ``hardware`` (the one profile the analysis used and the run's node count)
    lets the ideal card show its arithmetic."""
    values, nranks = _key_values(key)
    collective = values["collective"]
    figures = _figures(hardware, nranks)
    rows = rows.sort_values(["size_bytes", "placement"], ascending=[True, False])
    # Every other size is shaded in the table, so both placements of a size pair up.
    stripes = {s: i % 2 == 1 for i, s in enumerate(sorted(set(rows["size_bytes"])))}
    # Only the columns a SizeRow reads: the per-iteration lists make to_dict slow.
    size_rows = tuple(
        _size_row(r, stripes[r["size_bytes"]])
        for r in rows[[c for c in _SIZE_COLUMNS if c in rows]].to_dict("records")
    )
    largest = _largest(size_rows)
    chosen = fits[fits["placement"] == (largest.placement if largest else "")]
    fit = chosen.to_dict("records")[0] if not chosen.empty else {}
    # The placement the verdict judges: the card and the charts' shading say where
    # it turns bandwidth-bound, from the one figure.
    judged_rows = rows[rows["placement"] == largest.placement] if largest else rows
    bound_from = bandwidth_bound_from(judged_rows)
    shade = _shading_end(judged_rows, bound_from)
    charts = _charts(anchor, rows, fits, shade) if charted else ()
    with_busbw = [r for r in size_rows if r.busbw_calc_gbps is not None]
    peak = max(with_busbw, key=lambda r: r.busbw_calc_gbps or 0.0, default=None)
    bound = [r for r in size_rows if r.regime == "bandwidth-bound" and r.efficiency]
    notes = Counter(
        note
        for text in rows["efficiency_note"].dropna()
        for note in str(text).split("; ")
    )
    table = size_table(size_rows)
    plateau_busbw, plateau_efficiency = _plateau(AnalysedRows(rows))
    return Block(
        anchor=anchor,
        title=series_label(values),
        collective=collective or "unknown",
        nranks=nranks,
        rows=size_rows,
        largest=largest,
        peak=peak,
        alpha_us=_number(fit.get("alpha_us")),
        beta_busbw_gbps=_number(fit.get("beta_busbw_gbps")),
        bandwidth_bound_bytes=bound_from,
        fit_class=_value(fit.get("fit_class")),
        median_error_pct=_number(fit.get("median_error_pct")),
        charts=charts,
        worst=tuple(sorted(bound, key=lambda r: r.efficiency or 0.0)[:3]),
        notes=tuple(sorted(notes)),
        columns=table.columns,
        detail_columns=table.detail_columns,
        shown=table.shown,
        collapsed=table.collapsed,
        collapsed_text=table.collapsed_text,
        plateau_busbw_gbps=plateau_busbw,
        plateau_efficiency=plateau_efficiency,
        segments_text=_segments_text(fit.get("segments")),
        readings=_readings(rows, largest, figures),
        figures=None if figures is None else figures.text(),
        algorithm_basis=_basis(rows, largest),
    )


def _judged_record(rows: pd.DataFrame, largest: SizeRow | None) -> dict[str, Any]:
    """The analysed row of the size the verdict judges (empty without one)."""
    if largest is None:
        return {}
    at = rows[
        (rows["size_bytes"] == largest.size_bytes)
        & (rows["placement"] == largest.placement)
    ]
    names = [
        "collective", "algorithm", "algorithm_low", "algorithm_basis",
        "ideal_low_busbw_gbps",
    ]  # fmt: skip
    found = at[[n for n in names if n in at]].to_dict("records")
    return {str(k): _value(v) for k, v in found[0].items()} if found else {}


def _readings(
    rows: pd.DataFrame, largest: SizeRow | None, figures: Figures | None
) -> tuple[IdealReading, ...]:
    """What a perfect link would reach at the judged size: the strict reading (the
    ideal the efficiency column uses), then the lenient one where it differs."""
    if largest is None or largest.ideal_busbw_gbps is None:
        return ()
    record = _judged_record(rows, largest)
    all_reduce = record.get("collective") == "all_reduce"

    def reading(algorithm: str | None, ideal: float) -> IdealReading:
        busbw = largest.busbw_calc_gbps
        return IdealReading(
            None if algorithm is None else SHOWN.get(algorithm, algorithm),
            ideal,
            None if busbw is None or not ideal else busbw / ideal,
            None
            if figures is None or algorithm is None
            else derivation(algorithm, all_reduce, figures, ideal),
        )

    strict = reading(record.get("algorithm"), largest.ideal_busbw_gbps)
    low = record.get("ideal_low_busbw_gbps")
    if low is None or (
        record.get("algorithm_low") == record.get("algorithm")
        and abs(low - largest.ideal_busbw_gbps) < 0.05
    ):
        return (strict,)
    return (strict, reading(record.get("algorithm_low"), float(low)))


def _basis(rows: pd.DataFrame, largest: SizeRow | None) -> str | None:
    """How the judged algorithm is known, in words (None: no algorithm judged)."""
    basis = _judged_record(rows, largest).get("algorithm_basis")
    return None if basis is None else ALGORITHM_BASIS.get(str(basis))


def _segments_text(segments: Any) -> str | None:
    """E.g. "LL 8 B to 16 KiB, LL128 32 KiB to 8 MiB, Simple 16 MiB to 8 GiB"."""
    if segments is None or len(segments) == 0:
        return None
    return ", ".join(
        f"{s['protocol']} {format_bytes(s['from_bytes'])} to "
        f"{format_bytes(s['to_bytes'])}"
        for s in segments
    )


def _overview_block(anchor: str, key: tuple[Any, ...], rows: AnalysedRows) -> Block:
    """A block of a run without a section: what the overview shows (title, ranks,
    peak and plateau), without tables, charts or fits; building every row of a
    thousand runs cost seconds for rows nobody sees."""
    values, nranks = _key_values(key)
    busbw = _floats(rows["busbw_calc_gbps"])
    peak = None
    if (~np.isnan(busbw)).any():
        at = int(np.nanargmax(busbw))
        names = set(rows.names)
        peak = _size_row({c: rows[c][at] for c in _SIZE_COLUMNS if c in names}, False)
    plateau_busbw, plateau_efficiency = _plateau(rows)
    return Block(
        anchor=anchor,
        title=series_label(values),
        collective=values["collective"] or "unknown",
        nranks=nranks,
        rows=(),
        largest=None,
        peak=peak,
        alpha_us=None,
        beta_busbw_gbps=None,
        bandwidth_bound_bytes=None,
        fit_class=None,
        median_error_pct=None,
        charts=(),
        worst=(),
        notes=(),
        plateau_busbw_gbps=plateau_busbw,
        plateau_efficiency=plateau_efficiency,
    )


def _figures(
    hardware: tuple[HardwareProfile, int] | None, nranks: int | None
) -> Figures | None:
    """The profile's B and I with the block's ranks and the run's nodes; None where
    one is unknown (or I is, across nodes)."""
    if hardware is None or nranks is None:
        return None
    profile, nodes = hardware
    if nodes < 1 or (nodes > 1 and profile.inter_gbps is None):
        return None
    return Figures(profile.intra_gbps, profile.inter_gbps or math.inf, nranks, nodes)


def _algorithm(rows: pd.DataFrame) -> tuple[tuple[str, str], ...]:
    """The run's "algorithm judged" fact, from its analysed rows."""
    names = ["size_bytes", "algorithm", "algorithm_low", "algorithm_basis"]
    if rows.empty or not set(names) <= set(rows.columns):
        return ()
    records = [
        {str(k): v for k, v in r.items()} for r in rows[names].to_dict("records")
    ]
    return algorithm_facts(records)


def _key_values(key: tuple[Any, ...]) -> tuple[dict[str, Any], int | None]:
    """A block's key by name, and its rank count as an integer (groupby hands
    integer keys back as floats when the column has nulls)."""
    values = {k: _value(v) for k, v in zip(BLOCK_KEYS, key, strict=True)}
    return values, None if values["nranks"] is None else int(values["nranks"])


def _plateau(rows: AnalysedRows) -> tuple[float | None, float | None]:
    """The median busbw and efficiency over the plateau sizes the verdict judges."""
    plateau = judged(rows)
    on = plateau.true("plateau")
    return (
        _median(_floats(plateau["busbw_calc_gbps"])[on]),
        _median(_floats(plateau["efficiency"])[on]),
    )


def _floats(values: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """A column of AnalysedRows as floats, NaN where missing."""
    return np.array([math.nan if v is None else v for v in values.tolist()], float)


def _median(values: npt.NDArray[np.float64]) -> float | None:
    """The median of the values that are not NaN (None: there are none)."""
    present = values[~np.isnan(values)]
    return float(np.median(present)) if len(present) else None


def bandwidth_bound_from(rows: pd.DataFrame) -> float | None:
    """The size from which a block is bandwidth-bound: the smallest bandwidth-bound
    size above every latency-bound one, as the rows' regime says (latency is less
    than half the measured time from there on). The key-number card, the charts'
    shading and the per-size table's fold all read this one figure. None: no size is
    bandwidth-bound."""
    sizes = rows[rows["size_bytes"] > 0]
    latency = sizes[sizes["regime"] == "latency-bound"]["size_bytes"]
    last = float(latency.max()) if not latency.empty else 0.0
    above = sizes[(sizes["regime"] == "bandwidth-bound") & (sizes["size_bytes"] > last)]
    return None if above.empty else float(above["size_bytes"].min())


def _shading_end(rows: pd.DataFrame, start: float | None) -> float | None:
    """Where the charts' latency-bound shading ends: between the largest latency-bound
    size of ``rows`` and ``start`` (their :func:`bandwidth_bound_from`; geometric
    mean), or past the largest size when every size is latency-bound; None when
    none is."""
    sizes = rows[rows["size_bytes"] > 0]
    latency = sizes[sizes["regime"] == "latency-bound"]["size_bytes"]
    if latency.empty:
        return None
    last = float(latency.max())
    return last * 2 if start is None else math.sqrt(last * start)


def _charts(
    anchor: str, rows: pd.DataFrame, fits: pd.DataFrame, crossover: float | None
) -> tuple[Chart, ...]:
    """The four charts of a block; those without data to draw are left out."""
    if not (rows["size_bytes"] > 0).any():
        return ()
    charts = []
    if rows["busbw_calc_gbps"].notna().any():
        charts.append(
            Chart(
                "Bus bandwidth",
                "Recomputed bus bandwidth per size against what a perfect link would "
                "reach (the ideal) and the expected curve (one fitted segment per "
                "protocol range, named); shaded sizes are latency-bound.",
                Markup(
                    plots.bandwidth_plot(
                        rows, fits, plot_id=f"{anchor}-bw", crossover=crossover
                    )
                ),
            )
        )
    charts.append(
        Chart(
            "Time",
            "Time per operation against size (log-log) with the expected curve and "
            "the ideal transfer time.",
            Markup(
                plots.time_plot(rows, fits, plot_id=f"{anchor}-t", crossover=crossover)
            ),
        )
    )
    if rows["efficiency"].notna().any():
        charts.append(
            Chart(
                "Efficiency",
                "Recomputed bus bandwidth as a share of the ideal.",
                Markup(
                    plots.efficiency_plot(
                        rows, plot_id=f"{anchor}-eff", crossover=crossover
                    )
                ),
            )
        )
    placement = (
        "out-of-place" if (rows["placement"] == "out-of-place").any() else "in-place"
    )
    gaps = rows[rows["placement"] == placement]
    if gaps["gap_us"].notna().any():
        charts.append(
            Chart(
                "Gap attribution",
                f"Where the measured time goes ({placement}): the ideal transfer, then "
                "each gap component as a share of the measured time.",
                Markup(plots.gap_plot(gaps, plot_id=f"{anchor}-gap")),
            )
        )
    return tuple(charts)


def _small_multiples(overview: Sequence[OverviewRow]) -> tuple[Chart, ...]:
    """One grid per collective: each block's busbw in the placement its verdict
    judges, titled by verdict and run, linking to the block's section."""
    by_collective: dict[str, list[plots.Panel]] = {}
    for item in overview:
        block = item.block
        if not item.run.detailed or block is None:
            continue  # a panel links to its section and draws a series
        placement = block.largest.placement if block.largest else ""
        rows = [r for r in block.rows if r.placement == placement]
        by_collective.setdefault(block.collective, []).append(
            plots.Panel(
                title=f"{item.finding.symbol} {item.run.short_label}",
                subtitle=block.title,
                link=f"#{block.anchor}",
                size_bytes=[r.size_bytes for r in rows],
                busbw_gbps=[
                    math.nan if r.busbw_calc_gbps is None else r.busbw_calc_gbps
                    for r in rows
                ],
            )
        )
    charts = []
    for number, (collective, panels) in enumerate(sorted(by_collective.items())):
        charts.append(
            Chart(
                f"{collective}: {len(panels)} series",
                "Recomputed bus bandwidth against message size, one panel per run "
                "and series on shared axes, in the order of the overview; each "
                "title links to its details.",
                Markup(
                    plots.small_multiples(
                        panels,
                        plot_id=f"sm{number + 1}",
                        title=f"Bus bandwidth of every {collective} series",
                    )
                ),
            )
        )
    return tuple(charts)


def _overlay(comparison: tuple[ComparisonRow, ...]) -> Chart:
    series = []
    for item in comparison[:_OVERLAY_LIMIT]:
        rows = [
            r
            for r in item.block.rows
            if r.placement
            == (item.block.largest.placement if item.block.largest else "")
        ]
        series.append(
            plots.OverlaySeries(
                label=f"{item.run.short_label}: {item.block.title}",
                size_bytes=[r.size_bytes for r in rows],
                busbw_gbps=[
                    r.busbw_calc_gbps if r.busbw_calc_gbps is not None else math.nan
                    for r in rows
                ],
            )
        )
    shown = (
        ""
        if len(comparison) <= _OVERLAY_LIMIT
        else f" (the first {_OVERLAY_LIMIT} of {len(comparison)})"
    )
    return Chart(
        "All runs",
        f"Recomputed bus bandwidth of every run{shown}, in the placement each "
        "verdict judges.",
        Markup(plots.overlay_plot(series, plot_id="overlay")),
    )


_SIZE_COLUMNS = (
    "size_bytes", "placement", "line", "time_us", "algbw_gbps", "algbw_calc_gbps",
    "busbw_gbps", "busbw_calc_gbps", "ideal_busbw_gbps", "efficiency", "regime",
    "gap_hw_latency_us", "gap_latency_us", "gap_staging_us", "gap_bandwidth_us",
    "gap_residual_us", "wrong", "wrong_kind", "busbw_mismatch", "efficiency_note",
    "time_min_us", "time_max_us", "time_p99_us", "stddev_pct",
)  # fmt: skip

# What judging a run and its overview row read of the analysed rows: a run without
# a section of its own is never a DataFrame (a frame of every row of 2,000 logs, and
# a pandas selection per run, took most of a minute and gigabytes).
_OVERVIEW_COLUMNS = tuple(dict.fromkeys((*JUDGED_COLUMNS, *_SIZE_COLUMNS)))


def _size_row(row: Mapping[Hashable, Any], stripe: bool) -> SizeRow:
    gaps = {
        "hardware latency": _number(row["gap_hw_latency_us"]),
        "software latency": _number(row["gap_latency_us"]),
        "host staging": _number(row["gap_staging_us"]),
        "bandwidth shortfall": _number(row["gap_bandwidth_us"]),
        "unexplained": _number(row["gap_residual_us"]),
    }
    known = {k: v for k, v in gaps.items() if v is not None}
    time = _number(row["time_us"])
    stdev = _number(row.get("stddev_pct"))
    printed_busbw = _number(row["busbw_gbps"])
    printed_algbw = _number(row.get("algbw_gbps"))

    def share(gap: float | None) -> float | None:
        # A gap reads as a share of the measured time: "12 %" says more than "0.02 ns".
        return None if gap is None or not time else gap / time

    return SizeRow(
        size_bytes=int(row["size_bytes"]),
        placement=str(row["placement"]),
        line=int(row["line"]),
        time_us=time,
        algbw_gbps=(
            printed_algbw
            if printed_algbw is not None
            else _number(row.get("algbw_calc_gbps"))
        ),
        busbw_gbps=(
            printed_busbw
            if printed_busbw is not None
            else _number(row["busbw_calc_gbps"])
        ),
        busbw_calc_gbps=_number(row["busbw_calc_gbps"]),
        ideal_busbw_gbps=_number(row["ideal_busbw_gbps"]),
        efficiency=_number(row["efficiency"]),
        regime=_value(row["regime"]),
        gap_hw_latency_us=gaps["hardware latency"],
        gap_latency_us=gaps["software latency"],
        gap_staging_us=gaps["host staging"],
        gap_bandwidth_us=gaps["bandwidth shortfall"],
        gap_residual_us=gaps["unexplained"],
        wrong=_number(row["wrong"]),
        wrong_count=_value(row["wrong_kind"]) == "count",
        mismatch=bool(_value(row["busbw_mismatch"])),
        main_gap=max(known, key=lambda k: known[k]) if known else None,
        note=_value(row["efficiency_note"]),
        stripe=stripe,
        busbw_printed=printed_busbw is not None,
        time_min_us=_number(row.get("time_min_us")),
        time_max_us=_number(row.get("time_max_us")),
        time_p99_us=_number(row.get("time_p99_us")),
        stdev=None if stdev is None else stdev / 100,
        share_hw_latency=share(gaps["hardware latency"]),
        share_latency=share(gaps["software latency"]),
        share_staging=share(gaps["host staging"]),
        share_bandwidth=share(gaps["bandwidth shortfall"]),
        share_residual=share(gaps["unexplained"]),
    )


def _largest(rows: tuple[SizeRow, ...]) -> SizeRow | None:
    """The row the verdict judges: the largest size, out-of-place when measured."""
    for placement in ("out-of-place", "in-place"):
        mine = [r for r in rows if r.placement == placement and r.size_bytes > 0]
        if mine:
            return max(mine, key=lambda r: r.size_bytes)
    return None


def _same(column: pd.Series, value: Any) -> pd.Series:
    return column.isna() if _value(value) is None else column == value


def _value(value: Any) -> Any:
    """None for every flavour of missing (None, NaN, pd.NA); numpy scalars to Python."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def _number(value: Any) -> float | None:
    found = _value(value)
    return None if found is None else float(found)
