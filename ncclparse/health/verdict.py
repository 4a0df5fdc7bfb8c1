"""Judge one run: is the fabric healthy, is the data sound, is the run whole?

A verdict is the most severe of its findings: the run's status (failed, truncated), data
errors (``#wrong`` > 0, out-of-bounds values, printed busbw disagreeing with the
recomputed one) and, per series group, the efficiency at the largest message size
against seed 003's ideal. Levels, from best to worst: ``ok``, ``info`` (nothing wrong,
but nothing judged either, e.g. no hardware profile), ``warn``, ``bad``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ncclparse.formatting import format_bytes, format_gbps, format_percent

if TYPE_CHECKING:
    from ncclparse.report.page import Block

__all__ = ["LABELS", "Finding", "Level", "Verdict", "judge_run"]

Level = Literal["ok", "info", "warn", "bad"]
_RANK: dict[Level, int] = {"ok": 0, "info": 1, "warn": 2, "bad": 3}
# Words and symbols, not colour alone: a verdict must survive grey-scale printing.
LABELS: dict[Level, tuple[str, str]] = {
    "ok": ("OK", "✓"),
    "info": ("NOTE", "i"),
    "warn": ("CHECK", "!"),
    "bad": ("FAIL", "✗"),
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One reason behind a verdict, at its own level."""

    level: Level
    text: str

    @property
    def label(self) -> str:
        """The level as a word: OK, NOTE, CHECK, FAIL."""
        return LABELS[self.level][0]

    @property
    def symbol(self) -> str:
        """The level as a symbol: ✓, i, !, ✗."""
        return LABELS[self.level][1]


@dataclass(frozen=True, slots=True)
class Verdict:
    """A run's verdict: worst ``level``, its ``label``/``symbol``, a one-line
    ``headline`` (the worst finding) and every finding, worst first."""

    level: Level
    label: str
    symbol: str
    headline: str
    findings: tuple[Finding, ...]


def judge_run(
    run: dict[str, Any], blocks: Sequence[Block], *, good: float, poor: float
) -> Verdict:
    """Return the verdict of one run (a ``runs`` table row as a dict) and its blocks.

    Efficiency at least ``good`` is ``ok``, below ``poor`` is ``bad``, between is
    ``warn`` (fractions of the ideal).
    """
    findings = [*_status(run), *_data(run, blocks)]
    for block in blocks:
        findings.extend(_efficiency(block, good, poor, several=len(blocks) > 1))
    if not findings:
        findings.append(Finding("info", "no measurement to judge"))
    findings.sort(key=lambda f: -_RANK[f.level])
    level = findings[0].level
    label, symbol = LABELS[level]
    return Verdict(level, label, symbol, findings[0].text, tuple(findings))


def _status(run: dict[str, Any]) -> list[Finding]:
    found = []
    if run["status"] == "failed":
        errors = run["errors"]
        first = errors[0] if errors else "no error text"
        more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
        found.append(Finding("bad", f"the run failed: {first}{more}"))
    elif run["status"] == "truncated":
        found.append(
            Finding(
                "warn",
                f"truncated: the log ends at line {run['last_line']} before the "
                "run's footer; larger sizes were not measured",
            )
        )
    if not run["rows"]:
        found.append(Finding("bad", "the run produced no measurement"))
    return found


def _data(run: dict[str, Any], blocks: Sequence[Block]) -> list[Finding]:
    found = []
    rows = [r for b in blocks for r in b.rows]
    wrong = [r for r in rows if r.wrong_count and (r.wrong or 0) > 0]
    if wrong:
        first = wrong[0]
        found.append(
            Finding(
                "bad",
                f"data errors: {len(wrong)} measurements with #wrong > 0 (first: "
                f"{format_bytes(first.size_bytes)} {first.placement}, line "
                f"{first.line})",
            )
        )
    oob = run.get("oob_values")
    if (oob or 0) > 0 or run.get("oob_ok") is False:
        found.append(Finding("bad", f"Out of bounds values: {oob} FAILED"))
    mismatch = [r for r in rows if r.mismatch]
    if mismatch:
        found.append(
            Finding(
                "warn",
                f"printed busbw disagrees with the recomputed one in "
                f"{len(mismatch)} rows (first at line {mismatch[0].line})",
            )
        )
    return found


def _efficiency(block: Block, good: float, poor: float, several: bool) -> list[Finding]:
    row = block.largest
    if row is None:
        return []
    where = f"{block.title}: " if several else ""
    size = format_bytes(row.size_bytes)
    if row.efficiency is None:
        reason = row.note or "no ideal bandwidth for this row"
        return [Finding("info", f"{where}efficiency unknown at {size}: {reason}")]
    eff = format_percent(row.efficiency)
    figures = (
        f"{eff} of the ideal at {size} "
        f"({format_gbps(row.busbw_calc_gbps)} of {format_gbps(row.ideal_busbw_gbps)})"
    )
    if row.regime == "latency-bound":
        crossover = format_bytes(block.crossover_bytes)
        return [
            Finding(
                "info",
                f"{where}even the largest size is latency-bound (crossover "
                f"n* = {crossover}): {figures}; large-message efficiency not measured",
            )
        ]
    if row.efficiency > 1:
        # Not judged healthy: beyond seed 003's model, so the profile may be wrong.
        return [
            Finding(
                "info",
                f"{where}above the ideal: {figures}; in-network reduction "
                "(NVLS/SHARP) or a hardware profile that is too low",
            )
        ]
    found = []
    if row.efficiency >= good:
        found.append(Finding("ok", f"{where}healthy: {figures}"))
    elif row.efficiency >= poor:
        found.append(Finding("warn", f"{where}below ideal: {figures}"))
    else:
        found.append(Finding("bad", f"{where}far below ideal: {figures}"))
    return found
