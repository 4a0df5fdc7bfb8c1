"""The verdict of a run: is the data sound, is the run whole, is the fabric healthy?

One function, :func:`judge_run`, used by the report, the Markdown summary and
``ncclparse check``. A verdict is the most severe of its findings: the run's status
(failed, truncated), data errors (``#wrong`` > 0, out-of-bounds values, printed busbw
disagreeing with the recomputed one) and, per block (a series with both placements):

* the median efficiency of the plateau sizes against the ideal, judged with the
  thresholds of :class:`~ncclparse.health.rules.VerdictPolicy` only when the plateau
  was reached and the ideal's figures were given (or, on one node, are the GPU's own);
  otherwise a note says what was measured and why it is not judged;
* anomalies that need no hardware figures: busbw falling with size, in-place and
  out-of-place far apart, a wide spread of times at one size.

Levels, from best to worst: ``ok``, ``info`` (nothing wrong, but nothing judged
either), ``warn``, ``bad``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import numpy as np
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
# A row of analysed measurements: a pandas row or a plain mapping.
Row: TypeAlias = "Mapping[str, Any] | pd.Series[Any]"
_RANK: dict[Level, int] = {"ok": 0, "info": 1, "warn": 2, "bad": 3}
FALL = 0.8  # busbw at the largest size below 80 % of its peak: falling with size
APART = 0.75  # in-place below 75 % of out-of-place (or the reverse): apart
SPREAD = 2.0  # slowest time over twice the fastest at one size: a wide spread
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


Block = tuple[tuple[Any, ...], pd.DataFrame]


def blocks_of(rows: pd.DataFrame) -> list[Block]:
    """The blocks (BLOCK_KEYS) of one run's analysed rows, in key order."""
    if len(rows) and all(_constant(rows[key]) for key in BLOCK_KEYS):
        # Most runs are one block: a dozen-key groupby per run took seconds at
        # 1,000 logs. The key is the first row's (a missing value as NaN/None:
        # series_label reads both as missing).
        first = rows.iloc[0]
        return [(tuple(first[key] for key in BLOCK_KEYS), rows)]
    return list(rows.groupby(list(BLOCK_KEYS), dropna=False, sort=True))


def _constant(column: pd.Series) -> bool:
    """True when every value of ``column`` is the same (all missing counts)."""
    values = column.to_numpy()
    missing = pd.isna(values)
    if missing.all():
        return True
    return not missing.any() and bool((values == values[0]).all())


def judge_run(
    run: Mapping[str, Any],
    rows: pd.DataFrame,
    policy: VerdictPolicy,
    fits: pd.DataFrame | None = None,
    blocks: list[Block] | None = None,
) -> Verdict:
    """Return the verdict of one run.

    ``run`` is a ``runs`` table row as a mapping; ``rows`` are the run's analysed rows
    (:func:`ncclparse.efficiency.analyze`'s columns, any order); ``fits`` the run's
    fits, for the crossover size named when even the largest size is latency-bound;
    ``blocks`` the rows' :func:`blocks_of`, when the caller has them already.
    """
    findings = [*_status(run), *_data(run, rows)]
    blocks = blocks_of(rows) if blocks is None else blocks
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


def judged_rows(block: pd.DataFrame) -> pd.DataFrame:
    """The rows of a block that are judged: one placement (out-of-place when
    measured), non-zero sizes, by size."""
    placement = block["placement"].to_numpy()
    size = block["size_bytes"].to_numpy()
    for wanted in ("out-of-place", "in-place"):
        mine = np.flatnonzero((placement == wanted) & (size > 0))
        if len(mine):
            # One row selection (NumPy order, stable as sort_values' was).
            return block.iloc[mine[np.argsort(size[mine], kind="stable")]]
    return block.iloc[0:0]


def _status(run: Mapping[str, Any]) -> list[Finding]:
    found = []
    if run.get("net") == "Socket" and (run.get("nnodes") or 0) > 1:
        nics = ", ".join(run.get("nics") or []) or "unnamed interfaces"
        found.append(
            Finding(
                "warn",
                f"NCCL moved data between nodes over TCP sockets ({nics}), not RDMA: "
                "expected only where the nodes have no InfiniBand/RoCE/EFA",
                "status",
            )
        )
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
    line = rows["line"].to_numpy()
    wrong = (rows["wrong_kind"].to_numpy() == "count") & (
        rows["wrong"].to_numpy(dtype=float, na_value=np.nan) > 0
    )
    if wrong.any():
        first = rows.iloc[int(np.flatnonzero(wrong)[np.argmin(line[wrong])])]
        found.append(
            Finding(
                "bad",
                f"data errors: {int(wrong.sum())} measurements with #wrong > 0 "
                f"(first: {format_bytes(first['size_bytes'])} {first['placement']}, "
                f"line {first['line']})",
                "data",
            )
        )
    oob = run.get("oob_values")
    if (oob or 0) > 0 or run.get("oob_ok") is False:
        found.append(Finding("bad", f"Out of bounds values: {oob} FAILED", "data"))
    mismatch = rows["busbw_mismatch"].eq(True).to_numpy()  # null: not judged
    if mismatch.any():
        found.append(
            Finding(
                "warn",
                f"printed busbw disagrees with the recomputed one in "
                f"{int(mismatch.sum())} rows (first at line {line[mismatch].min()})",
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
    """The efficiency finding of one block: the median efficiency of its plateau
    sizes, judged only on a reached plateau and an ideal that is not assumed; and
    the anomalies that need no hardware figures."""
    rows = judged_rows(block)
    if rows.empty:
        return []
    found = _anomalies(block, rows, where)
    largest = rows.iloc[-1]
    size = format_bytes(largest["size_bytes"])
    if _number(largest["efficiency"]) is None:
        reason = _text(largest["efficiency_note"]) or "no ideal bandwidth for this row"
        return [
            *found,
            Finding("info", f"{where}efficiency unknown at {size}: {reason}"),
        ]
    if largest["regime"] == "latency-bound":
        crossover = format_bytes(_crossover(fits, largest))
        return [
            *found,
            Finding(
                "info",
                f"{where}even the largest size ({size}) is latency-bound (crossover "
                f"n* = {crossover}): large-message efficiency not measured",
            ),
        ]
    plateau = rows[rows["plateau"].eq(True) & rows["efficiency"].notna()]
    if plateau.empty:
        figures = _figures(largest["efficiency"], largest, largest)
        return [
            *found,
            Finding(
                "info",
                f"{where}no plateau reached: busbw still rising at the largest size, "
                f"so {figures} is a lower bound; measure larger sizes to judge",
            ),
        ]
    efficiency = float(plateau["efficiency"].median())
    figures = _figures(efficiency, plateau.iloc[0], plateau.iloc[-1], plateau)
    if (plateau["ideal_basis"] == "assumed").any():
        found.append(
            Finding(
                "info",
                f"{where}unverified: {figures} against an ideal whose NIC count and "
                "speed are assumed from a preset; pass --profile or --inter-bw to "
                "judge it",
            )
        )
    elif efficiency > 1:
        # Not judged healthy: beyond the ideal's model, so the profile may be wrong.
        found.append(
            Finding(
                "info",
                f"{where}above the ideal: {figures}; in-network reduction "
                "(NVLS/SHARP) or a hardware profile that is too low",
            )
        )
    elif efficiency >= policy.good:
        found.append(Finding("ok", f"{where}healthy: {figures}"))
    elif efficiency >= policy.poor:
        found.append(Finding("warn", f"{where}below ideal: {figures}"))
    else:
        found.append(Finding("bad", f"{where}far below ideal: {figures}"))
    return found


def _figures(
    efficiency: float,
    first: Row,
    last: Row,
    plateau: pd.DataFrame | None = None,
) -> str:
    """ "88.2 % of the ideal on the plateau, 2 GiB to 8 GiB (330.6 GB/s of 375.0
    GB/s)" or, for one row, "... at 8 GiB (...)"."""
    eff = format_percent(efficiency)
    if plateau is None or len(plateau) == 1:
        return (
            f"{eff} of the ideal at {format_bytes(last['size_bytes'])} "
            f"({format_gbps(last['busbw_calc_gbps'])} of "
            f"{format_gbps(last['ideal_busbw_gbps'])})"
        )
    busbw = float(plateau["busbw_calc_gbps"].median())
    ideal = float(plateau["ideal_busbw_gbps"].median())
    return (
        f"{eff} of the ideal on the plateau, {format_bytes(first['size_bytes'])} to "
        f"{format_bytes(last['size_bytes'])} (median busbw {format_gbps(busbw)} of "
        f"{format_gbps(ideal)})"
    )


def _anomalies(block: pd.DataFrame, rows: pd.DataFrame, where: str) -> list[Finding]:
    """What is wrong whatever the hardware: bus bandwidth falling at the largest
    sizes, in-place and out-of-place far apart, a wide spread of times at one size."""
    found = []
    records = _records(rows)
    bound = [
        r for r in records if r["regime"] == "bandwidth-bound" and _pos(r["busbw"])
    ]
    if len(bound) >= 2:
        peak = max(bound, key=lambda r: float(r["busbw"]))
        last = bound[-1]
        if last["busbw"] < FALL * peak["busbw"]:
            drop = 1 - last["busbw"] / peak["busbw"]
            found.append(
                Finding(
                    "warn",
                    f"{where}busbw falls with size: {format_gbps(last['busbw'])} at "
                    f"{format_bytes(last['size_bytes'])}, {format_percent(drop)} "
                    f"below its peak {format_gbps(peak['busbw'])} at "
                    f"{format_bytes(peak['size_bytes'])}",
                )
            )
    by_place: dict[str, dict[int, float]] = {}
    for r in _records(block):
        if r["size_bytes"] > 0 and _pos(r["busbw"]):
            by_place.setdefault(r["placement"], {})[r["size_bytes"]] = r["busbw"]
    common = set(by_place.get("in-place", {})) & set(by_place.get("out-of-place", {}))
    if common:
        top = max(common)
        inp, out = by_place["in-place"][top], by_place["out-of-place"][top]
        if min(out, inp) < APART * max(out, inp):
            found.append(
                Finding(
                    "warn",
                    f"{where}in-place and out-of-place differ at {format_bytes(top)}: "
                    f"{format_gbps(inp)} vs {format_gbps(out)} busbw",
                )
            )
    wide = [
        r
        for r in records
        if r["regime"] == "bandwidth-bound"
        and _pos(r["tmin"])
        and _pos(r["tmax"])
        and r["tmax"] > SPREAD * r["tmin"]
    ]
    if wide:
        row = wide[-1]
        more = f" and {len(wide) - 1} more sizes" if len(wide) > 1 else ""
        found.append(
            Finding(
                "warn",
                f"{where}times spread {row['tmax'] / row['tmin']:.1f}x at "
                f"{format_bytes(row['size_bytes'])} (min {row['tmin']:g} us, max "
                f"{row['tmax']:g} us){more}",
            )
        )
    return found


def _records(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """The columns the anomaly checks read, one plain dict per row."""
    columns = {
        "size_bytes": "size_bytes",
        "placement": "placement",
        "regime": "regime",
        "busbw": "busbw_calc_gbps",
        "tmin": "time_min_us",
        "tmax": "time_max_us",
    }
    # Series.tolist gives Python scalars as to_dict("records") does, 50x faster.
    values = [rows[column].tolist() for column in columns.values()]
    return [dict(zip(columns, row, strict=True)) for row in zip(*values, strict=True)]


def _pos(value: Any) -> bool:
    """A number above zero (not null, not NaN)."""
    number = _number(value)
    return number is not None and number > 0


def _crossover(fits: pd.DataFrame | None, row: Row) -> float | None:
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
