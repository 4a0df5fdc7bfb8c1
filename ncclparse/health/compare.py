"""Baseline vs candidate: per size deltas and a verdict, as text, JSON, Markdown, HTML.

Two ``measurements`` tables are aligned on (collective, dtype, redop, root,
placement, nranks, nnodes, size_bytes); several runs on one side count as their
median time. For one series and size, bus bandwidth is size x factor / time, so the
bandwidth change is ``baseline time / candidate time - 1`` for every collective (and
defined at sizes where busbw rounds to 0). A size changes when that exceeds
``threshold`` either way; the verdict is ``regression`` if any size regressed.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import jinja2
import numpy as np
import pandas as pd
import pyarrow as pa

from ncclparse import schema
from ncclparse.api import parse_many
from ncclparse.formatting import format_bytes, format_percent, format_time_us
from ncclparse.health.history import key_text, read_history
from ncclparse.inputs import expand
from ncclparse.schema import SHAPE_KEYS
from ncclparse.storage import read_table

__all__ = [
    "COMPARE_KEYS",
    "CompareRow",
    "Comparison",
    "compare",
    "format_for",
    "load_measurements",
    "render",
]

COMPARE_KEYS = (*SHAPE_KEYS, "size_bytes")
FORMATS = ("text", "json", "markdown", "html")


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


def load_measurements(path: str) -> pa.Table:
    """Read one side: a Parquet/Arrow table, a history directory, or benchmark logs.

    Raises NcclParseError (InputError, SchemaError, UnknownLogFormatError) naming the
    input when it cannot be read.
    """
    candidate = Path(path)
    if candidate.suffix.lower() in (".parquet", ".pq", ".arrow", ".feather", ".ipc"):
        return read_table(candidate)
    if candidate.is_dir() and any(candidate.glob("date=*")):
        return read_history(candidate).select(list(schema.MEASUREMENT_COLUMNS))
    items = list(expand((path,)))
    errors = [e for e in items if isinstance(e, Exception)]
    if errors:
        raise errors[0]
    result = parse_many(e for e in items if not isinstance(e, Exception))
    if result.failures:
        raise result.failures[0]
    return result.measurements


def format_for(path: Path | None, explicit: str | None = None) -> str:
    """The rendering: ``explicit``, else by extension (.json, .md, .html), else text."""
    if explicit is not None:
        return explicit
    suffix = path.suffix.lower() if path is not None else ""
    return {".json": "json", ".md": "markdown", ".html": "html", ".htm": "html"}.get(
        suffix, "text"
    )


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


def render(comparison: Comparison, fmt: str) -> str:
    """Render as ``text``, ``json``, ``markdown`` or ``html`` (Jinja, autoescaped)."""
    if fmt == "json":
        document = {
            "format": "ncclparse-compare",
            "version": 1,
            **asdict(comparison),
        }
        return json.dumps(_finite(document), indent=2, allow_nan=False) + "\n"
    if fmt == "html":
        return _environment().get_template("compare.html").render(c=comparison)
    if fmt not in ("text", "markdown"):
        raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    md = fmt == "markdown"
    head = f"verdict: {comparison.verdict} (threshold {comparison.threshold:.0%}"
    if comparison.geomean_change is not None:
        head += f", geometric mean change {comparison.geomean_change:+.1%}"
    lines = [f"## {head})" if md else head + ")"]
    if md:
        lines += [
            "",
            "| series | size | baseline | candidate | busbw change | verdict |",
        ]
        lines.append("| --- | --- | --- | --- | --- | --- |")
    for r in comparison.rows:
        cells = (
            r.series,
            format_bytes(r.size_bytes),
            format_time_us(r.baseline_time_us),
            format_time_us(r.candidate_time_us),
            f"{r.change:+.1%}",
            r.verdict,
        )
        lines.append(f"| {' | '.join(cells)} |" if md else "  ".join(cells))
    for title, items in (
        ("only in baseline", comparison.only_baseline),
        ("only in candidate", comparison.only_candidate),
    ):
        if items:
            lines += ["", f"{title}: {', '.join(items)}"]
    return "\n".join(lines) + "\n"


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
    coll, dtype, redop, root, placement, nranks, nnodes, _ = key
    parts = [coll or "unknown", dtype, redop, placement]
    text = " ".join(p for p in parts if p)
    text += f" {nranks} ranks" if nranks else ""
    text += f" on {nnodes} nodes" if nnodes else ""
    return text + (f" root {root}" if root else "")


def _finite(value: object) -> object:
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("ncclparse.templates", ""),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(bytes=format_bytes, time_us=format_time_us, pct=format_percent)
    return env
