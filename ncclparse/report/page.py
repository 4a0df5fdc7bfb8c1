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
from ncclparse.health.verdict import Verdict
from ncclparse.report.checks import CheckSummary
from ncclparse.report.facts import Message, ProfileInfo

__all__ = [
    "Block",
    "Chart",
    "ComparisonRow",
    "ReportContext",
    "RunReport",
    "SizeRow",
]


@dataclass(frozen=True, slots=True)
class Chart:
    """One inline chart: ``title``, a one-sentence ``caption``, the ``svg`` element."""

    title: str
    caption: str
    svg: Markup


@dataclass(frozen=True, slots=True)
class SizeRow:
    """One measured point (size, placement) with its efficiency and gap columns.

    Times in µs, bandwidths in GB/s, ``efficiency`` a fraction; None where missing
    (the templates show a dash). ``line`` is the row's line in its source.
    """

    size_bytes: int
    placement: str
    line: int
    time_us: float | None
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


@dataclass(frozen=True, slots=True)
class Block:
    """One series group of a run: a collective, dtype, redop, root and rank count.

    ``largest`` is the row the verdict judges (largest size, out-of-place preferred);
    ``alpha_us``/``beta_busbw_gbps`` (β in busbw units)/``crossover_bytes``/
    ``fit_class`` come from the fit of
    the same placement. ``worst`` are the bandwidth-bound rows furthest from ideal.
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
    crossover_bytes: float | None
    fit_class: str | None
    median_error_pct: float | None
    charts: tuple[Chart, ...]
    worst: tuple[SizeRow, ...]
    notes: tuple[str, ...]


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
    ``policy`` holds the efficiency thresholds the verdicts used; ``checks``
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

    @property
    def messages(self) -> tuple[Message, ...]:
        """Every error and warning: unreadable inputs first, then each run's."""
        return self.failures + tuple(m for r in self.runs for m in r.messages)
