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

Every rendering (text, Markdown, JSON, HTML with a chart) is in
:mod:`ncclparse.report.comparison`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from ncclparse._arrow import key_text
from ncclparse.efficiency.bandwidth import busbw_factor
from ncclparse.errors import ProfileError
from ncclparse.formatting import format_bytes, series_label
from ncclparse.schema import SHAPE_KEYS

__all__ = [
    "COMPARE_KEYS",
    "CompareRow",
    "Comparison",
    "Side",
    "compare",
    "describe",
]

COMPARE_KEYS = (*SHAPE_KEYS, "size_bytes")


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
