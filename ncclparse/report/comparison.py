"""A baseline/candidate comparison in every format ``compare`` writes.

:func:`render_comparison` gives ``text`` (headed, aligned columns for a terminal),
``md`` (a Markdown table), ``json`` (the comparison as a document) and ``html`` (one
self-contained page with the chart of
:mod:`~ncclparse.report.comparison_chart`); busbw in GB/s and times in µs, units in
the headers. Every format gives, per size, the worst aligned run and its change, and
lists the regressed runs, the missing and the new ones. Text from logs is escaped
in Markdown and HTML. The judgement itself is :func:`ncclparse.health.compare.compare`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict

from markupsafe import Markup

from ncclparse.formatting import format_bytes, format_threshold, markdown_escape
from ncclparse.health.compare import CompareRow, Comparison, RunChange
from ncclparse.report.comparison_chart import (
    charted_series,
    charts_busbw,
    comparison_chart,
)
from ncclparse.report.render import environment

__all__ = [
    "COLUMNS",
    "COMPARE_FORMATS",
    "busbw_cell",
    "change_cell",
    "comparison_html",
    "comparison_markdown",
    "comparison_text",
    "render_comparison",
    "run_change_text",
    "run_lines",
    "time_cell",
    "verdict_line",
]

COMPARE_FORMATS = ("text", "json", "md", "html")

# The per-size columns of the text and Markdown renderings, units in the headers.
COLUMNS = (
    "series",
    "size",
    "baseline busbw (GB/s)",
    "candidate busbw (GB/s)",
    "busbw change (%)",
    "baseline time (us)",
    "candidate time (us)",
    "worst run",
    "worst run change (%)",
    "verdict",
)
_NUMERIC = frozenset((*range(2, 7), 8))  # right-aligned columns


def render_comparison(comparison: Comparison, fmt: str) -> str:
    """Render a comparison as ``text``, ``json``, ``md`` or ``html``."""
    if fmt == "json":
        document = {
            "format": "ncclparse-compare",
            "version": 1,
            **asdict(comparison),
        }
        return json.dumps(_finite(document), indent=2, allow_nan=False) + "\n"
    if fmt == "text":
        return comparison_text(comparison)
    if fmt == "md":
        return comparison_markdown(comparison)
    if fmt == "html":
        return comparison_html(comparison)
    raise ValueError(f"unknown format {fmt!r} (one of {', '.join(COMPARE_FORMATS)})")


def comparison_html(comparison: Comparison) -> str:
    """One self-contained HTML page: the two sides named, the verdict, the chart and
    the per-size table. The same comparison gives the same bytes."""
    return (
        environment()
        .get_template("compare.html")
        .render(
            c=comparison,
            chart=Markup(comparison_chart(comparison)),
            charted=charted_series(comparison),
            chart_busbw=charts_busbw(comparison),
            series_count=len({r.series for r in comparison.rows}),
            busbw=busbw_cell,
            change=change_cell,
            runs=run_lines(comparison),
            threshold=format_threshold(comparison.threshold),
            several_runs=_several_runs(comparison),
            time=time_cell,
        )
    )


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
    for title, named in run_lines(comparison):
        lines += ["", f"{title}:", *(f"  {item}" for item in named)]
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
    for title, named in run_lines(comparison):
        lines += ["", f"**{title.capitalize()}**:", ""]
        lines += [f"- {markdown_escape(item)}" for item in named]
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


def run_lines(comparison: Comparison) -> list[tuple[str, list[str]]]:
    """The runs, a line each, by title: every aligned run at its worst size with its
    verdict, worst first (when there are several: one run a side is the table's),
    those the candidate lacks and those only it has."""
    aligned = (
        [f"{run_change_text(r)}: {r.verdict}" for r in comparison.runs]
        if _several_runs(comparison)
        else []
    )
    return [
        (title, items)
        for title, items in (
            (
                "runs, each at its worst size (aligned by host set, else log file)",
                aligned,
            ),
            (
                "missing runs (in the baseline, not in the candidate: a lost "
                "measurement)",
                list(comparison.missing_runs),
            ),
            ("new runs (in the candidate only)", list(comparison.new_runs)),
        )
        if items
    ]


def run_change_text(r: RunChange) -> str:
    """One regressed run in words: its identity, series, worst size and change."""
    return (
        f"{r.run}: {r.series} {format_bytes(r.size_bytes)}: busbw change "
        f"{change_cell(r.change)} % (time {time_cell(r.baseline_time_us)} -> "
        f"{time_cell(r.candidate_time_us)} us)"
    )


def verdict_line(comparison: Comparison) -> str:
    """The verdict and its figures on one line, as the text output starts."""
    return _headline(comparison)


def _cells(r: CompareRow) -> tuple[str, ...]:
    return (
        r.series,
        format_bytes(r.size_bytes),
        busbw_cell(r.baseline_busbw_gbps),
        busbw_cell(r.candidate_busbw_gbps),
        change_cell(r.change),
        time_cell(r.baseline_time_us),
        time_cell(r.candidate_time_us),
        r.worst_run or "-",
        "-" if r.worst_change is None else change_cell(r.worst_change),
        r.verdict,
    )


def _headline(comparison: Comparison) -> str:
    head = f"{comparison.verdict} (threshold {format_threshold(comparison.threshold)}"
    if comparison.geomean_change is not None:
        head += f", geometric mean busbw change {comparison.geomean_change:+.1%}"
    if comparison.regressed_runs and _several_runs(comparison):
        worst = comparison.regressed_runs[0]
        head += f", worst run {worst.run} {worst.change:+.1%}"
    if comparison.missing_runs:
        head += f", {len(comparison.missing_runs)} run(s) missing"
    return head + ")"


def _several_runs(comparison: Comparison) -> bool:
    """More than one run identity was aligned: the worst run is worth naming."""
    return len({r.run for r in comparison.runs}) > 1


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


def _finite(value: object) -> object:
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
