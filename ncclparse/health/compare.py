"""Baseline vs candidate: per size deltas and a verdict.

Two ``measurements`` tables are aligned on their shape (``schema.SHAPE_KEYS``) and
size; several runs on one side count as their
median time. For one series and size, bus bandwidth is size x factor / time, so the
bandwidth change is ``baseline time / candidate time - 1`` for every collective (and
defined at sizes where busbw rounds to 0). A size changes when that exceeds
``threshold`` either way; the verdict is ``regression`` if any size regressed.
Renderings: :func:`ncclparse.health.outputs.render_comparison` (text, JSON, Markdown)
and :func:`ncclparse.report.render.render_comparison_html`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ncclparse.columns import key_text
from ncclparse.formatting import format_bytes, series_label
from ncclparse.schema import SHAPE_KEYS

__all__ = ["COMPARE_KEYS", "CompareRow", "Comparison", "compare"]

COMPARE_KEYS = (*SHAPE_KEYS, "size_bytes")


@dataclass(frozen=True, slots=True)
class CompareRow:
    """One series and size: median times (µs), the bandwidth change and its verdict."""

    series: str
    size_bytes: int
    baseline_time_us: float
    candidate_time_us: float
    change: float  # relative busbw change: +0.10 is 10 % faster
    verdict: str  # regression | improvement | same


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


def compare(
    baseline: pa.Table, candidate: pa.Table, *, threshold: float = 0.05
) -> Comparison:
    """Compare two ``measurements`` tables size by size (see the module doc).

    Rows with size 0, a non-positive time, CPU or grouped times are left out.
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
    )


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
