"""The typed context the report templates render: charts, rows, blocks, runs, the page.

Frozen dataclasses only; :mod:`ncclparse.report.context` builds them from the parsed and
analysed tables. Numbers stay numbers (templates format them with the
:mod:`ncclparse.formatting` filters) and text from logs stays plain ``str`` (the
templates escape it). Only the SVG charts are :class:`markupsafe.Markup`: matplotlib
escapes the text inside them.
"""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from ncclparse.health.rules import VerdictPolicy
from ncclparse.health.verdict import Finding, Verdict
from ncclparse.report.checks import CheckSummary
from ncclparse.report.facts import Message, ProfileInfo

__all__ = [
    "Block",
    "Chart",
    "Column",
    "ComparisonRow",
    "IdealReading",
    "OverviewRow",
    "ReportContext",
    "RunReport",
    "SizeRow",
    "VerdictCount",
]


@dataclass(frozen=True, slots=True)
class Chart:
    """One inline chart: ``title``, a one-sentence ``caption``, the ``svg`` element."""

    title: str
    caption: str
    svg: Markup


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a per-size table: the :class:`SizeRow` attribute ``key``, its
    header ``label``, how its values read (``kind``: ``bytes``, ``text``, ``time``
    (µs), ``bw`` (GB/s, the unit in the header), ``percent`` (a fraction),
    ``count``). The footer says what each label means, once per page."""

    key: str
    label: str
    kind: str


@dataclass(frozen=True, slots=True)
class SizeRow:
    """One measured point (size, placement) with its efficiency and gap columns.

    Times in µs, bandwidths in GB/s, ``efficiency`` and the ``share_*`` gaps
    fractions (of the measured time); None where missing (the templates show a dash).
    ``line`` is the row's line in its source; ``algbw_gbps`` and ``busbw_gbps`` are
    as printed, else recomputed (``busbw_printed`` says which); ``stdev`` is the
    printed spread (stddev_pct / 100).
    """

    size_bytes: int
    placement: str
    line: int
    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    busbw_calc_gbps: float | None
    ideal_busbw_gbps: float | None
    efficiency: float | None
    regime: str | None
    gap_hw_latency_us: float | None
    gap_latency_us: float | None
    gap_staging_us: float | None
    gap_bandwidth_us: float | None
    gap_residual_us: float | None
    wrong: float | None
    wrong_count: bool
    mismatch: bool
    main_gap: str | None
    note: str | None
    stripe: bool
    busbw_printed: bool = False
    time_min_us: float | None = None
    time_max_us: float | None = None
    time_p99_us: float | None = None
    stdev: float | None = None
    share_hw_latency: float | None = None
    share_latency: float | None = None
    share_staging: float | None = None
    share_bandwidth: float | None = None
    share_residual: float | None = None


@dataclass(frozen=True, slots=True)
class IdealReading:
    """One reading of what a perfect link would reach at a block's judged size:
    the ``algorithm`` (as pages name it), its bound ``ideal_gbps``, the measured
    ``efficiency`` against it and its ``derivation`` (None where it cannot be
    shown)."""

    algorithm: str | None
    ideal_gbps: float
    efficiency: float | None
    derivation: str | None


@dataclass(frozen=True, slots=True)
class Block:
    """One series group of a run: a collective, dtype, redop, root and rank count.

    ``largest`` is the row the verdict judges (largest size, out-of-place preferred);
    ``alpha_us`` (the latency)/``beta_busbw_gbps`` (the fit's large-message limit, in
    busbw units)/``fit_class`` come from the fit of the same placement;
    ``bandwidth_bound_bytes`` is the smallest size from which every size is
    bandwidth-bound (the charts shade below it; None: none is);
    ``readings`` what a perfect link would reach at ``largest``, strict first,
    then the lenient reading where it differs, with ``figures`` the hardware and
    topology their derivations use; ``segments_text`` names its expected curve's
    segments and their size ranges. ``worst`` are the bandwidth-bound rows furthest
    from ideal.

    The per-size table: ``shown`` rows under ``columns`` (only the columns with a
    value in this block); ``collapsed`` the leading latency-bound sizes, summed up in
    ``collapsed_text``; ``detail_columns`` the gap attribution and rarer columns of
    every row. ``plateau_busbw_gbps``/``plateau_efficiency``: medians over the
    plateau sizes the verdict judges (None without a plateau).
    """

    anchor: str
    title: str
    collective: str
    nranks: int | None
    rows: tuple[SizeRow, ...]
    largest: SizeRow | None
    peak: SizeRow | None
    alpha_us: float | None
    beta_busbw_gbps: float | None
    bandwidth_bound_bytes: float | None
    fit_class: str | None
    median_error_pct: float | None
    charts: tuple[Chart, ...]
    worst: tuple[SizeRow, ...]
    notes: tuple[str, ...]
    columns: tuple[Column, ...] = ()
    detail_columns: tuple[Column, ...] = ()
    shown: tuple[SizeRow, ...] = ()
    collapsed: tuple[SizeRow, ...] = ()
    collapsed_text: str | None = None
    plateau_busbw_gbps: float | None = None
    plateau_efficiency: float | None = None
    segments_text: str | None = None
    readings: tuple[IdealReading, ...] = ()
    figures: str | None = None
    algorithm_basis: str | None = None


@dataclass(frozen=True, slots=True)
class RunReport:
    """One run of one source: its verdict first, then blocks, metadata, messages."""

    anchor: str
    label: str
    short_label: str
    source: str
    run: int
    tool: str
    status: str
    collectives: str
    nranks: int | None
    nnodes: int | None
    device: str | None
    verdict: Verdict
    blocks: tuple[Block, ...]
    metadata: tuple[tuple[str, str], ...]
    messages: tuple[Message, ...]
    detailed: bool = True  # False: too many runs, listed in the overview only


@dataclass(frozen=True, slots=True)
class OverviewRow:
    """One row of a multi-run report's overview: a block of a run (most runs are one
    block), or the whole run when it measured nothing (``block`` None: it failed or
    was cut off before its first row). ``finding`` is the worst of the run's findings
    about this block or the whole run; ``why`` its text without the series name the
    row already shows."""

    run: RunReport
    block: Block | None
    finding: Finding
    why: str
    opens: str = ""  # the first row of its run verdict: the id the counts link to

    @property
    def series(self) -> str:
        """The block's series, or what a run without rows ran and how it ended."""
        if self.block is not None:
            return self.block.title
        return f"{self.run.collectives}: {self.run.status}, no measurement"

    @property
    def anchor(self) -> str:
        """Where the row links: its block's section, else its run's."""
        return self.run.anchor if self.block is None else self.block.anchor


@dataclass(frozen=True, slots=True)
class VerdictCount:
    """How many runs have one verdict (``level``, ``label``), and the anchor of the
    first overview row of that verdict."""

    level: str
    label: str
    runs: int
    anchor: str


@dataclass(frozen=True, slots=True)
class ComparisonRow:
    """One block in the comparison table of a multi-run report."""

    run: RunReport
    block: Block


@dataclass(frozen=True, slots=True)
class ReportContext:
    """Everything ``report.html`` and ``summary.md`` show; see each type's docstring.

    ``failures`` are inputs that could not be read at all (no run); ``overlay`` is the
    all-runs chart, present with two or more blocks; ``comparison`` its table.
    ``overview``: one row per block (and per run without rows) when the report
    holds more than one run (or too many blocks to chart one by one), else empty,
    worst verdict first; ``verdict_counts`` how many runs have each verdict, worst
    first; ``small_multiples``:
    per-collective grids of every block's busbw, drawn instead of each block's
    charts when there are too many blocks to chart one by one
    (``charts_per_block`` False).
    ``details_left_out`` counts the runs without a section of their own (beyond
    ``DETAILED_RUNS``, the overview lists them). ``pairs`` is the host x host
    heatmap of a pairwise sweep (two hosts a run), else None. ``policy`` holds the
    efficiency thresholds the verdicts used; ``checks``
    the outcome of ``ncclparse check`` when the report shows one, else None.
    """

    title: str
    runs: tuple[RunReport, ...]
    failures: tuple[Message, ...]
    assumptions: tuple[str, ...]
    overlay: Chart | None
    comparison: tuple[ComparisonRow, ...]
    profiles: tuple[ProfileInfo, ...]
    ncclparse_version: str
    schema_version: int
    command_line: str | None
    policy: VerdictPolicy
    checks: CheckSummary | None = None
    overview: tuple[OverviewRow, ...] = ()
    verdict_counts: tuple[VerdictCount, ...] = ()
    small_multiples: tuple[Chart, ...] = ()
    charts_per_block: bool = True
    pairs: Chart | None = None
    details_left_out: int = 0

    @property
    def messages(self) -> tuple[Message, ...]:
        """Every error and warning: unreadable inputs first, then each run's that
        has a section (:attr:`messages_left_out` counts the others')."""
        shown = (m for r in self.runs if r.detailed for m in r.messages)
        return self.failures + tuple(shown)

    @property
    def messages_left_out(self) -> int:
        """The warnings and errors of the runs without a section."""
        return sum(len(r.messages) for r in self.runs if not r.detailed)
