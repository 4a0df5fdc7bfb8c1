"""Baseline vs candidate: per size deltas and a verdict.

Two ``measurements`` tables are aligned on their shape (``schema.SHAPE_KEYS``) and
size; several runs on one side count as their
median time. For one series and size, bus bandwidth is size x factor / time, so the
bandwidth change is ``baseline time / candidate time - 1`` for every collective (and
defined at sizes where busbw rounds to 0). A size changes when that exceeds
``threshold`` either way; the verdict is ``regression`` if any size regressed.
Each row also carries each side's bus bandwidth at its median time, recomputed with
nccl-tests' factor of the collective on its ranks (GB/s, as ``report`` draws it; so the
change is exactly the ratio of the two, and logs that print no busbw, oneCCL and IMB,
have one; None for a collective without a factor or a run without a rank count).

Renderings: :func:`comparison_text` and :func:`comparison_markdown` here (headed
columns, units in the headers), JSON in
:func:`ncclparse.health.outputs.render_comparison`, HTML (with a chart) in
:func:`ncclparse.report.render.render_comparison_html`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from ncclparse.columns import key_text
from ncclparse.efficiency.bandwidth import busbw_factor
from ncclparse.errors import ProfileError
from ncclparse.formatting import format_bytes, markdown_escape, series_label
from ncclparse.schema import SHAPE_KEYS

__all__ = [
    "COLUMNS",
    "COMPARE_KEYS",
    "CompareRow",
    "Comparison",
    "Side",
    "busbw_cell",
    "change_cell",
    "compare",
    "comparison_markdown",
    "comparison_text",
    "describe",
    "time_cell",
]

COMPARE_KEYS = (*SHAPE_KEYS, "size_bytes")

# The per-size columns of the text and Markdown renderings, units in the headers.
COLUMNS = (
    "series",
    "size",
    "baseline busbw (GB/s)",
    "candidate busbw (GB/s)",
    "busbw change (%)",
    "baseline time (us)",
    "candidate time (us)",
    "verdict",
)
_NUMERIC = frozenset(range(2, 7))  # right-aligned columns


@dataclass(frozen=True, slots=True)
class CompareRow:
    """One series and size: median times (µs), the bandwidth change and its verdict,
    and each side's bus bandwidth at that time (GB/s; None without a busbw factor)."""

    series: str
    size_bytes: int
    baseline_time_us: float
    candidate_time_us: float
    change: float  # relative busbw change: +0.10 is 10 % faster
    verdict: str  # regression | improvement | same
    baseline_busbw_gbps: float | None = None
    candidate_busbw_gbps: float | None = None


@dataclass(frozen=True, slots=True)
class Side:
    """What one side is: ``name`` (a path, a label) and ``about`` (what was read:
    its runs, and for a history its selection)."""

    name: str
    about: str = ""


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every aligned size, the sizes only one side has, and the overall verdict.

    ``geomean_change`` is the geometric mean bandwidth change over aligned sizes.
    """

    rows: tuple[CompareRow, ...]
    only_baseline: tuple[str, ...]
    only_candidate: tuple[str, ...]
    threshold: float
    verdict: str  # regression | improvement | same | incomparable
    geomean_change: float | None
    baseline: Side = field(default_factory=lambda: Side("baseline"))
    candidate: Side = field(default_factory=lambda: Side("candidate"))


def compare(
    baseline: pa.Table,
    candidate: pa.Table,
    *,
    threshold: float = 0.05,
    baseline_side: Side | None = None,
    candidate_side: Side | None = None,
) -> Comparison:
    """Compare two ``measurements`` tables size by size (see the module doc).

    Rows with size 0, a non-positive time, CPU or grouped times are left out.
    ``baseline_side`` and ``candidate_side`` name the sides (default: "baseline"
    and "candidate", described by :func:`describe`).
    """
    base = _medians(baseline).rename(columns={"time_us": "time_us_b"})
    cand = _medians(candidate).rename(columns={"time_us": "time_us_c"})
    merged = base.join(cand, how="outer")
    both = merged.dropna(subset=["time_us_b", "time_us_c"])
    change = both["time_us_b"] / both["time_us_c"] - 1
    rows = tuple(
        CompareRow(
            series=_label(key),
            size_bytes=int(key[-1]),
            baseline_time_us=float(b),
            candidate_time_us=float(c),
            change=float(x),
            verdict=(
                "regression"
                if x < -threshold
                else "improvement"
                if x > threshold
                else "same"
            ),
            baseline_busbw_gbps=_busbw(key, float(b)),
            candidate_busbw_gbps=_busbw(key, float(c)),
        )
        for key, b, c, x in zip(
            both.index, both["time_us_b"], both["time_us_c"], change, strict=True
        )
    )
    only_b = merged[merged["time_us_c"].isna()].index
    only_c = merged[merged["time_us_b"].isna()].index
    verdicts = {r.verdict for r in rows}
    verdict = (
        "incomparable"
        if not rows
        else next(v for v in ("regression", "improvement", "same") if v in verdicts)
    )
    geomean = float(np.exp(np.log1p(change).mean()) - 1) if rows else None
    return Comparison(
        rows=rows,
        only_baseline=tuple(f"{_label(k)} {format_bytes(k[-1])}" for k in only_b),
        only_candidate=tuple(f"{_label(k)} {format_bytes(k[-1])}" for k in only_c),
        threshold=threshold,
        verdict=verdict,
        geomean_change=geomean,
        baseline=baseline_side or Side("baseline", describe(baseline)),
        candidate=candidate_side or Side("candidate", describe(candidate)),
    )


def describe(table: pa.Table, name: str | None = None) -> str:
    """The runs of a ``measurements`` table in words, numbered as in its ``run``
    column (0-based): ``"1 run: run 0 of a.log"``, ``"12 runs of 12 logs"``; the
    log is not named again when it is ``name`` (the side's name)."""
    if table.num_rows == 0:
        return "no runs"
    pairs = table.select(["source", "run"]).group_by(["source", "run"]).aggregate([])
    runs: list[tuple[str, int]] = sorted(
        zip(
            (str(s) for s in pairs["source"].to_pylist()),
            (int(r or 0) for r in pairs["run"].to_pylist()),
            strict=True,
        )
    )
    sources = {source for source, _ in runs}
    if len(sources) == 1:
        source = _base_name(runs[0][0])
        of = "" if name is not None and _base_name(name) == source else f" of {source}"
        if len(runs) == 1:
            return f"1 run: run {runs[0][1]}{of}"
        numbers = ", ".join(str(run) for _, run in runs)
        return f"{len(runs)} runs: runs {numbers}{of}"
    return f"{len(runs)} runs of {len(sources)} logs"


def comparison_text(comparison: Comparison) -> str:
    """The comparison for a terminal: verdict, the two sides, then one headed,
    aligned line per series and size (busbw in GB/s, times in µs)."""
    lines = [f"verdict: {_headline(comparison)}"]
    lines += [f"{title} {text}" for title, text in _sides(comparison)]
    table = [COLUMNS, *(_cells(r) for r in comparison.rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
    lines.append("")
    if comparison.rows:
        for row in table:
            lines.append(
                "  ".join(
                    cell.rjust(width) if i in _NUMERIC else cell.ljust(width)
                    for i, (cell, width) in enumerate(zip(row, widths, strict=True))
                ).rstrip()
            )
    else:
        lines.append("no series and size in common")
    for title, items in _only(comparison):
        lines += ["", f"{title}: {', '.join(items)}"]
    return "\n".join(lines) + "\n"


def comparison_markdown(comparison: Comparison) -> str:
    """The comparison as Markdown: verdict, the two sides, a table with a header row
    (busbw in GB/s, times in µs). Text from logs is escaped."""
    lines = [f"## ncclparse compare: {_headline(comparison)}", ""]
    for title, side in (
        ("baseline", comparison.baseline),
        ("candidate", comparison.candidate),
    ):
        about = f" ({markdown_escape(side.about)})" if side.about else ""
        lines.append(f"- **{title}**: `{_code(side.name)}`{about}")
    lines.append("")
    if comparison.rows:
        lines.append(f"| {' | '.join(COLUMNS)} |")
        lines.append(
            "| "
            + " | ".join(
                "---:" if i in _NUMERIC else "---" for i in range(len(COLUMNS))
            )
            + " |"
        )
        for r in comparison.rows:
            cells = _cells(r)
            lines.append(f"| {' | '.join(markdown_escape(c) for c in cells)} |")
    else:
        lines.append("No series and size in common.")
    for title, items in _only(comparison):
        lines += ["", f"**{title.capitalize()}**: {markdown_escape(', '.join(items))}"]
    return "\n".join(lines) + "\n"


def busbw_cell(value: float | None) -> str:
    """A bus bandwidth in GB/s as nccl-tests prints it (2 decimals), or "-"."""
    return "-" if value is None else f"{value:.2f}"


def time_cell(value: float) -> str:
    """A time in µs, to 0.01 µs (IMB times its small sizes in tenths of a µs)."""
    return f"{value:.2f}"


def change_cell(change: float) -> str:
    """A relative change in %, signed: "+3.2", "-20.0"."""
    return f"{change * 100:+.1f}"


def _cells(r: CompareRow) -> tuple[str, ...]:
    return (
        r.series,
        format_bytes(r.size_bytes),
        busbw_cell(r.baseline_busbw_gbps),
        busbw_cell(r.candidate_busbw_gbps),
        change_cell(r.change),
        time_cell(r.baseline_time_us),
        time_cell(r.candidate_time_us),
        r.verdict,
    )


def _headline(comparison: Comparison) -> str:
    head = f"{comparison.verdict} (threshold {comparison.threshold:.0%}"
    if comparison.geomean_change is not None:
        head += f", geometric mean busbw change {comparison.geomean_change:+.1%}"
    return head + ")"


def _sides(comparison: Comparison) -> list[tuple[str, str]]:
    return [
        (title, side.name + (f" ({side.about})" if side.about else ""))
        for title, side in (
            ("baseline: ", comparison.baseline),
            ("candidate:", comparison.candidate),
        )
    ]


def _only(comparison: Comparison) -> Sequence[tuple[str, tuple[str, ...]]]:
    return [
        (title, items)
        for title, items in (
            ("only in the baseline", comparison.only_baseline),
            ("only in the candidate", comparison.only_candidate),
        )
        if items
    ]


def _code(text: str) -> str:
    """Text for a Markdown code span: one line, no backtick to end it early."""
    return " ".join(text.split()).replace("`", "'")


def _base_name(source: str) -> str:
    return source.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or source


def _busbw(key: tuple[str, ...], time_us: float) -> float | None:
    """Bus bandwidth (GB/s) of one series and size at ``time_us``: size x nccl-tests'
    factor / time; None for a collective without a factor or no rank count."""
    named = dict(zip(COMPARE_KEYS, key, strict=True))
    try:
        factor = busbw_factor(str(named["collective"]), int(named["nranks"]))
    except (ValueError, ProfileError):
        return None
    return factor * float(named["size_bytes"]) / time_us * 1e-3


def _medians(table: pa.Table) -> pd.DataFrame:
    frame = pd.DataFrame({k: key_text(table[k]) for k in COMPARE_KEYS[:-1]})
    frame["size_bytes"] = table["size_bytes"].to_pandas()
    frame["time_us"] = table["time_us"].to_pandas()
    usable = (
        (frame["size_bytes"] > 0)
        & (frame["time_us"] > 0)
        & ~table["cputime"].to_pandas()
        & ~table["grouped"].to_pandas()
    )
    return frame[usable].groupby(list(COMPARE_KEYS))[["time_us"]].median()


def _label(key: tuple[str, ...]) -> str:
    return series_label(dict(zip(SHAPE_KEYS, key, strict=False)))
