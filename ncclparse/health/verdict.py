"""The verdict of a run: is the data sound, is the run whole, is the fabric healthy?

One function, :func:`judge_run`, used by the report, the Markdown summary and
``ncclparse check``. A verdict is the most severe of its findings: the run's status
(failed, truncated), data errors (``#wrong`` > 0, out-of-bounds values, printed busbw
disagreeing with the recomputed one) and, per block (a series with both placements),
the efficiency at the largest message size against the ideal, judged with the
thresholds of :class:`~ncclparse.health.rules.VerdictPolicy`. Levels, from best to
worst: ``ok``, ``info`` (nothing wrong, but nothing judged either, e.g. no hardware
profile), ``warn``, ``bad``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from ncclparse.formatting import (
    format_bytes,
    format_gbps,
    format_percent,
    series_label,
)
from ncclparse.health.rules import VerdictPolicy
from ncclparse.schema import BLOCK_KEYS

__all__ = ["LABELS", "Aspect", "Finding", "Level", "Verdict", "judge_run"]

Level = Literal["ok", "info", "warn", "bad"]
# What a finding is about: the run as a whole, its data, or the fabric's efficiency.
Aspect = Literal["status", "data", "efficiency"]
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
    """One reason behind a verdict, at its own level, about one ``aspect``."""

    level: Level
    text: str
    aspect: Aspect = "efficiency"

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

    def worst(self, aspect: Aspect) -> Level | None:
        """The worst level among the findings about ``aspect`` (None: none)."""
        found: Level | None = None
        for finding in self.findings:
            if finding.aspect == aspect and (
                found is None or _RANK[finding.level] > _RANK[found]
            ):
                found = finding.level
        return found


def judge_run(
    run: Mapping[str, Any],
    rows: pd.DataFrame,
    policy: VerdictPolicy,
    fits: pd.DataFrame | None = None,
) -> Verdict:
    """Return the verdict of one run.

    ``run`` is a ``runs`` table row as a mapping; ``rows`` are the run's analysed rows
    (:func:`ncclparse.efficiency.analyze`'s columns, any order); ``fits`` the run's
    fits, for the crossover size named when even the largest size is latency-bound.
    """
    findings = [*_status(run), *_data(run, rows)]
    blocks = list(rows.groupby(list(BLOCK_KEYS), dropna=False, sort=True))
    for key, block in blocks:
        where = series_label(dict(zip(BLOCK_KEYS, key, strict=True)))
        prefix = f"{where}: " if len(blocks) > 1 else ""
        findings.extend(_efficiency(block, fits, policy, prefix))
    if not findings:
        findings.append(Finding("info", "no measurement to judge"))
    findings.sort(key=lambda f: -_RANK[f.level])
    level = findings[0].level
    label, symbol = LABELS[level]
    return Verdict(level, label, symbol, findings[0].text, tuple(findings))


def judged_row(block: pd.DataFrame) -> Mapping[str, Any] | None:
    """The row a block is judged by: the largest non-zero size, out-of-place when
    measured."""
    for placement in ("out-of-place", "in-place"):
        mine = block[(block["placement"] == placement) & (block["size_bytes"] > 0)]
        if not mine.empty:
            largest = mine.sort_values("size_bytes", kind="stable").iloc[-1]
            return {str(k): v for k, v in largest.items()}
    return None


def _status(run: Mapping[str, Any]) -> list[Finding]:
    found = []
    if run["status"] == "failed":
        errors = run["errors"]
        first = errors[0] if errors else "no error text"
        more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
        found.append(Finding("bad", f"the run failed: {first}{more}", "status"))
    elif run["status"] == "truncated":
        found.append(
            Finding(
                "warn",
                f"truncated: the log ends at line {run['last_line']} before the "
                "run's footer; larger sizes were not measured",
                "status",
            )
        )
    if not run["rows"]:
        found.append(Finding("bad", "the run produced no measurement", "status"))
    return found


def _data(run: Mapping[str, Any], rows: pd.DataFrame) -> list[Finding]:
    found = []
    ordered = rows.sort_values("line")
    wrong = ordered[(ordered["wrong_kind"] == "count") & (ordered["wrong"] > 0)]
    if not wrong.empty:
        first = wrong.iloc[0]
        found.append(
            Finding(
                "bad",
                f"data errors: {len(wrong)} measurements with #wrong > 0 (first: "
                f"{format_bytes(first['size_bytes'])} {first['placement']}, line "
                f"{first['line']})",
                "data",
            )
        )
    oob = run.get("oob_values")
    if (oob or 0) > 0 or run.get("oob_ok") is False:
        found.append(Finding("bad", f"Out of bounds values: {oob} FAILED", "data"))
    mismatch = ordered[ordered["busbw_mismatch"].eq(True)]  # null: not judged
    if not mismatch.empty:
        found.append(
            Finding(
                "warn",
                f"printed busbw disagrees with the recomputed one in "
                f"{len(mismatch)} rows (first at line {mismatch.iloc[0]['line']})",
                "data",
            )
        )
    return found


def _efficiency(
    block: pd.DataFrame,
    fits: pd.DataFrame | None,
    policy: VerdictPolicy,
    where: str,
) -> list[Finding]:
    row = judged_row(block)
    if row is None:
        return []
    size = format_bytes(row["size_bytes"])
    efficiency = _number(row["efficiency"])
    if efficiency is None:
        reason = _text(row["efficiency_note"]) or "no ideal bandwidth for this row"
        return [Finding("info", f"{where}efficiency unknown at {size}: {reason}")]
    eff = format_percent(efficiency)
    figures = (
        f"{eff} of the ideal at {size} ({format_gbps(row['busbw_calc_gbps'])} of "
        f"{format_gbps(row['ideal_busbw_gbps'])})"
    )
    if row["regime"] == "latency-bound":
        crossover = format_bytes(_crossover(fits, row))
        return [
            Finding(
                "info",
                f"{where}even the largest size is latency-bound (crossover "
                f"n* = {crossover}): {figures}; large-message efficiency not measured",
            )
        ]
    if efficiency > 1:
        # Not judged healthy: beyond the ideal's model, so the profile may be wrong.
        return [
            Finding(
                "info",
                f"{where}above the ideal: {figures}; in-network reduction "
                "(NVLS/SHARP) or a hardware profile that is too low",
            )
        ]
    if efficiency >= policy.good:
        return [Finding("ok", f"{where}healthy: {figures}")]
    if efficiency >= policy.poor:
        return [Finding("warn", f"{where}below ideal: {figures}")]
    return [Finding("bad", f"{where}far below ideal: {figures}")]


def _crossover(fits: pd.DataFrame | None, row: Mapping[str, Any]) -> float | None:
    if fits is None or fits.empty:
        return None
    same = fits[
        (fits["placement"] == row["placement"])
        & (fits["collective"].fillna("") == (_text(row["collective"]) or ""))
    ]
    return _number(same["crossover_bytes"].iloc[0]) if not same.empty else None


def _number(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _text(value: Any) -> str | None:
    return (
        None
        if value is None or (not isinstance(value, str) and pd.isna(value))
        else str(value)
    )
