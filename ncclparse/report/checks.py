"""The report's "Checks" section: a check result made showable.

:func:`check_summary` turns the result of ``ncclparse check`` into a
:class:`CheckSummary`: case counts by outcome, the cases that FAIL and those to CHECK
(with the messages the check produced) and the hosts blame named consistently slow, with
their evidence. Text from logs (host names, sources, messages) stays plain ``str`` for
the templates to escape; numbers stay numbers for the formatting filters. The order is
the check's own (cases in check order, hosts most suspicious first), so the same input
gives the same page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ncclparse.efficiency.fits import BANDWIDTH_BOUND_BYTES
from ncclparse.health.outcomes import Level, Outcome, outcome_of, symbol_of

if TYPE_CHECKING:
    from ncclparse.health.blame import HostScore
    from ncclparse.health.cases import Case, SizeMiss
    from ncclparse.health.check import CheckResult

__all__ = [
    "CheckSummary",
    "EvidenceRun",
    "ListedCase",
    "RunLink",
    "SlowHost",
    "biggest_drop_first",
]

EVIDENCE_SHOWN = 6  # evidence runs spelled out per host; the rest are counted
SIZES_SHOWN = 5  # sizes spelled out per listed case; the rest are counted


@dataclass(frozen=True, slots=True)
class RunLink:
    """Where a run is in the report: its section ``anchor`` ("" when the report has
    no section for it), a short ``label`` and the full ``title`` (source and run)."""

    anchor: str
    label: str
    title: str
    bandwidth_bound_bytes: float | None = None  # where the run turns bandwidth-bound


@dataclass(frozen=True, slots=True)
class ListedCase:
    """One check case the section lists, by its ``outcome`` (FAIL or CHECK). ``run``
    links to the run's section when the report has it; ``sizes`` are the sizes of
    the case's findings (the first few, in bytes, most telling first: see
    :func:`biggest_drop_first`) and ``more_sizes`` how many are left out; ``message`` is
    the check's own text, naming the numbers against their threshold."""

    outcome: Outcome
    rule: str
    name: str
    source: str | None
    run: RunLink | None
    hosts: tuple[str, ...]
    collective: str | None
    sizes: tuple[int, ...]
    more_sizes: int
    message: str


@dataclass(frozen=True, slots=True)
class EvidenceRun:
    """One run that includes a slow host: the ``partners`` in it, its ``score``
    (1.0 typical, 0.5 twice as slow) and ``where`` it is."""

    partners: str
    score: float
    where: RunLink


@dataclass(frozen=True, slots=True)
class SlowHost:
    """A host blame names consistently slow: ``slow_runs`` of ``runs`` scored runs
    were slow, mean scores with and without it, ``deficit`` a fraction; ``evidence``
    its worst runs first (``more_evidence`` not shown)."""

    host: str
    runs: int
    slow_runs: int
    score_with: float
    score_without: float
    deficit: float
    evidence: tuple[EvidenceRun, ...]
    more_evidence: int


@dataclass(frozen=True, slots=True)
class CheckSummary:
    """What the Checks section shows: the check as a badge (``level``, ``label``,
    ``symbol``: PASS, PASS with N CHECK or FAIL, in words and symbols for grey-scale
    print), counts by outcome (``passed``: OK and NOTE), the cases that FAIL and
    those to CHECK in check order, slow hosts most suspicious first, and how many
    hosts blame ranked (0: too few runs over different hosts to rank any)."""

    level: Level
    label: str
    symbol: str
    passed: int
    failed: int
    to_check: int
    skipped: int
    failures: tuple[ListedCase, ...]
    checks: tuple[ListedCase, ...]
    slow_hosts: tuple[SlowHost, ...]
    ranked_hosts: int

    @property
    def total(self) -> int:
        """Every case, whatever its outcome."""
        return self.passed + self.failed + self.to_check + self.skipped


def check_summary(
    result: CheckResult, runs: Mapping[tuple[str, int], RunLink]
) -> CheckSummary:
    """Summarise ``result`` for the report; ``runs`` maps (source, 0-based run) to
    the report's section of that run, for links (a case whose run is absent gets
    none). Pure: reads ``result``, returns new values."""
    counts = result.outcomes
    level: Level = "bad" if not result.passed else "warn" if counts["CHECK"] else "ok"
    return CheckSummary(
        level=level,
        label=result.headline,
        symbol=symbol_of(outcome_of(level)),
        passed=counts["OK"] + counts["NOTE"],
        failed=counts["FAIL"],
        to_check=counts["CHECK"],
        skipped=counts["SKIP"],
        failures=tuple(_listed(c, runs) for c in result.failures),
        checks=tuple(_listed(c, runs) for c in result.to_check),
        slow_hosts=tuple(_slow_host(h, runs) for h in result.hosts if h.slow),
        ranked_hosts=len(result.hosts),
    )


def _listed(case: Case, runs: Mapping[tuple[str, int], RunLink]) -> ListedCase:
    ordered = biggest_drop_first(case.findings, _bound_from(runs, case))
    sizes = tuple(dict.fromkeys(f.size_bytes for f in ordered))
    run = case.run
    return ListedCase(
        outcome=case.outcome,
        rule=case.rule,
        name=case.name,
        source=case.source,
        run=runs.get((case.source, run)) if case.source and run is not None else None,
        hosts=case.hosts,
        collective=case.collective,
        sizes=sizes[:SIZES_SHOWN],
        more_sizes=max(0, len(sizes) - SIZES_SHOWN),
        message=case.message,
    )


def _slow_host(host: HostScore, runs: Mapping[tuple[str, int], RunLink]) -> SlowHost:
    evidence = tuple(
        EvidenceRun(
            partners="+".join(h for h in r.hosts if h != host.host) or "alone",
            score=r.score,
            where=runs.get((r.source, r.run)) or _unlisted(r.source, r.run),
        )
        for r in host.evidence[:EVIDENCE_SHOWN]
    )
    return SlowHost(
        host=host.host,
        runs=host.runs,
        slow_runs=host.slow_runs,
        score_with=host.score_with,
        score_without=host.score_without,
        deficit=host.deficit,
        evidence=evidence,
        more_evidence=max(0, len(host.evidence) - EVIDENCE_SHOWN),
    )


def _unlisted(source: str, run: int) -> RunLink:
    label = f"{source} (run {run})"
    return RunLink("", label, label)


def biggest_drop_first(
    findings: Sequence[SizeMiss], bandwidth_bound_bytes: float | None
) -> list[SizeMiss]:
    """``findings`` most telling first (the check's messages list them largest
    first, :func:`ncclparse.health.cases.by_importance`; the page orders them by the
    run's bandwidth-bound figure and the drop): the bandwidth-bound sizes (from
    ``bandwidth_bound_bytes``, the run's, else from 1 GiB where every size is),
    biggest drop first (relative to the limit, or to the history baseline), then
    the latency-bound ones the same way; ties by size, largest first. An 8 GiB
    busbw drop reads before 8 B and 128 B a few microseconds slow."""
    start = (
        BANDWIDTH_BOUND_BYTES
        if bandwidth_bound_bytes is None
        else bandwidth_bound_bytes
    )

    def drop(miss: SizeMiss) -> float:
        reference = miss.limit if miss.baseline is None else miss.baseline
        return abs(miss.value - reference) / abs(reference) if reference else 0.0

    return sorted(
        findings,
        key=lambda m: (m.size_bytes < start, -drop(m), -m.size_bytes),
    )


def _bound_from(runs: Mapping[tuple[str, int], RunLink], case: Case) -> float | None:
    """Where the case's run turns bandwidth-bound, if the report knows."""
    if case.source is None or case.run is None:
        return None
    link = runs.get((case.source, case.run))
    return None if link is None else link.bandwidth_bound_bytes
