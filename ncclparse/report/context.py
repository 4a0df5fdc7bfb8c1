"""Build the report context from parsed and analysed tables.

:func:`build_context` turns a :class:`~ncclparse.api.ParseResult` (and its
:class:`~ncclparse.efficiency.Analysis`) into a :class:`ReportContext` (the dataclasses
of :mod:`ncclparse.report.page`): a verdict per run, key numbers, charts as SVG
strings, tables and every warning and error. Everything a template shows is computed
here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa
from markupsafe import Markup

from ncclparse import per_iteration
from ncclparse.api import ParseResult
from ncclparse.columns import frame, rows_by_run, run_rows
from ncclparse.efficiency import Analysis, analyze
from ncclparse.efficiency.hardware import HardwareOptions
from ncclparse.formatting import series_label
from ncclparse.health.rules import DEFAULT_RULES, VerdictPolicy
from ncclparse.health.verdict import Finding, Level, Verdict, judge_run
from ncclparse.report import plots
from ncclparse.report.checks import CheckSummary, RunLink, check_summary
from ncclparse.report.facts import (
    Message,
    ProfileInfo,
    failure_message,
    per_iteration_facts,
    run_messages,
    run_metadata,
)
from ncclparse.report.page import (
    Block,
    Chart,
    ComparisonRow,
    ReportContext,
    RunReport,
    SizeRow,
)
from ncclparse.schema import BLOCK_KEYS, MEASUREMENTS_SCHEMA, SCHEMA_VERSION

if TYPE_CHECKING:
    from ncclparse.health.check import CheckResult

__all__ = [
    "Block",
    "Chart",
    "CheckSummary",
    "ComparisonRow",
    "Finding",
    "Level",
    "Message",
    "ProfileInfo",
    "ReportContext",
    "RunReport",
    "SizeRow",
    "Verdict",
    "build_context",
]

_OVERLAY_LIMIT = 10  # more lines than this are a tangle; the table lists all


def build_context(
    result: ParseResult,
    analysis: Analysis | None = None,
    *,
    hardware: HardwareOptions | None = None,
    command_line: str | None = None,
    failures: Sequence[Exception] | None = None,
    policy: VerdictPolicy | None = None,
    check: CheckResult | None = None,
) -> ReportContext:
    """Build the report context; runs :func:`~ncclparse.efficiency.analyze` with
    ``hardware`` unless given its ``analysis``. ``failures`` are the inputs that could
    not be read (default: ``result.failures``; the CLI adds missing paths). Runs are
    judged by :func:`ncclparse.health.verdict.judge_run` with ``policy`` (default: the
    default rules' thresholds). ``check`` (from
    :func:`ncclparse.health.check.check` on the same result) adds the Checks section;
    without it the page is unchanged.
    Raises ProfileError as ``analyze`` does.
    """
    from ncclparse import __version__

    if analysis is None:
        analysis = analyze(result.measurements, hardware, result.runs)
    policy = policy or DEFAULT_RULES.verdict
    rows = frame(analysis.rows)
    fits = frame(analysis.fits)
    row_groups, fit_groups = rows_by_run(rows), rows_by_run(fits)
    runs = [
        _run_report(
            index,
            run,
            run_rows(row_groups, rows, run["source"], run["run"]),
            run_rows(fit_groups, fits, run["source"], run["run"]),
            policy,
        )
        for index, run in enumerate(result.runs.to_pylist())
    ]
    comparison = tuple(ComparisonRow(r, b) for r in runs for b in r.blocks)
    failures = result.failures if failures is None else failures
    errors = tuple(failure_message(exc) for exc in failures)
    sources = [*result.accounting, *(m.source for m in errors)]
    title = sources[0] if len(sources) == 1 else f"{len(sources)} inputs"
    links = {(r.source, r.run): RunLink(r.anchor, r.short_label, r.label) for r in runs}
    return ReportContext(
        title=f"ncclparse report: {title}",
        runs=tuple(runs),
        failures=errors,
        assumptions=analysis.assumptions,
        overlay=_overlay(comparison) if len(comparison) > 1 else None,
        comparison=comparison if len(comparison) > 1 else (),
        profiles=tuple(ProfileInfo(p.summary(), p.sources) for p in analysis.profiles),
        ncclparse_version=__version__,
        schema_version=SCHEMA_VERSION,
        command_line=command_line,
        policy=policy,
        checks=None if check is None else check_summary(check, links),
    )


def _run_report(
    index: int,
    run: dict[str, Any],
    mine: pd.DataFrame,
    my_fits: pd.DataFrame,
    policy: VerdictPolicy,
) -> RunReport:
    """The report of one run (a ``runs`` row) from its analysed rows and fits."""
    anchor = f"run{index + 1}"
    blocks = []
    groups = mine.groupby(list(BLOCK_KEYS), dropna=False, sort=True)
    for number, (key, group) in enumerate(groups, start=1):
        block_fits = my_fits
        for column, value in zip(BLOCK_KEYS, key, strict=True):
            block_fits = block_fits[_same(block_fits[column], value)]
        blocks.append(_block(f"{anchor}-{number}", key, group, block_fits))
    devices = Counter(d for d in run["devices"] if d)
    device = next(iter(devices)) if len(devices) == 1 else None
    verdict = judge_run(run, mine, policy, my_fits)
    return RunReport(
        anchor=anchor,
        label=f"{run['source']} (run {run['run'] + 1})",
        short_label=f"{PurePath(run['source']).name} (run {run['run'] + 1})",
        source=run["source"],
        run=run["run"],
        tool=run["tool"],
        status=run["status"],
        collectives=", ".join(run["collectives"]) or "unknown",
        nranks=run["nranks"],
        nnodes=run["nnodes"],
        device=device or (", ".join(devices) if devices else None),
        verdict=verdict,
        blocks=tuple(blocks),
        metadata=run_metadata(run) + per_iteration_facts(_iterations(mine)),
        messages=run_messages(run),
    )


def _iterations(mine: pd.DataFrame) -> list[dict[str, Any]]:
    """A run's rows with per-iteration statistics, spikes and stragglers added."""
    if "time_p99_us" not in mine or not mine["time_p99_us"].notna().any():
        return []
    names = [
        "source", "run", "line", "placement", "size_bytes", "time_min_us",
        "time_max_us", "time_p99_us", "stddev_pct", "time_avg_us", "iter_times_us",
        "iter_process_times_us",
    ]  # fmt: skip
    rows: list[dict[str, Any]] = [
        {str(k): v for k, v in r.items()} for r in mine[names].to_dict("records")
    ]
    for row in rows:
        for key, value in row.items():
            if key in ("iter_times_us", "iter_process_times_us"):
                row[key] = None if value is None else _as_lists(value)
            elif not isinstance(value, str) and pd.isna(value):
                row[key] = None  # NaN or NA where the table holds null
    table = pa.Table.from_pylist(rows, schema=_ITER_SCHEMA)
    found = {
        (r["line"], r["placement"]): r
        for r in per_iteration.summarize(table).to_pylist()
    }
    return [{**r, **found.get((r["line"], r["placement"]), {})} for r in rows]


def _as_lists(value: Any) -> Any:
    """numpy arrays (as pandas gives list cells) back to Python lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, list | tuple):
        return [_as_lists(v) for v in value]
    return value


_ITER_SCHEMA = pa.schema(
    [
        MEASUREMENTS_SCHEMA.field(name)
        for name in (
            "source", "run", "line", "placement", "size_bytes", "time_min_us",
            "time_max_us", "time_p99_us", "stddev_pct", "time_avg_us",
            "iter_times_us", "iter_process_times_us",
        )
    ]
)  # fmt: skip


def _block(
    anchor: str, key: tuple[Any, ...], rows: pd.DataFrame, fits: pd.DataFrame
) -> Block:
    values = {k: _value(v) for k, v in zip(BLOCK_KEYS, key, strict=True)}
    collective = values["collective"]
    # groupby hands integer keys back as floats when the column has nulls.
    nranks = None if values["nranks"] is None else int(values["nranks"])
    rows = rows.sort_values(["size_bytes", "placement"], ascending=[True, False])
    # Every other size is shaded in the table, so both placements of a size pair up.
    stripes = {s: i % 2 == 1 for i, s in enumerate(sorted(set(rows["size_bytes"])))}
    size_rows = tuple(
        _size_row(r, stripes[r["size_bytes"]]) for r in rows.to_dict("records")
    )
    largest = _largest(size_rows)
    chosen = fits[fits["placement"] == (largest.placement if largest else "")]
    fit = chosen.to_dict("records")[0] if not chosen.empty else {}
    crossover = _number(fit.get("crossover_bytes"))
    charts = _charts(anchor, rows, fits, _regime_boundary(rows))
    with_busbw = [r for r in size_rows if r.busbw_calc_gbps is not None]
    peak = max(with_busbw, key=lambda r: r.busbw_calc_gbps or 0.0, default=None)
    bound = [r for r in size_rows if r.regime == "bandwidth-bound" and r.efficiency]
    notes = Counter(
        note
        for text in rows["efficiency_note"].dropna()
        for note in str(text).split("; ")
    )
    return Block(
        anchor=anchor,
        title=series_label(values),
        collective=collective or "unknown",
        nranks=nranks,
        rows=size_rows,
        largest=largest,
        peak=peak,
        alpha_us=_number(fit.get("alpha_us")),
        beta_busbw_gbps=_number(fit.get("beta_busbw_gbps")),
        crossover_bytes=crossover,
        fit_class=_value(fit.get("fit_class")),
        median_error_pct=_number(fit.get("median_error_pct")),
        charts=charts,
        worst=tuple(sorted(bound, key=lambda r: r.efficiency or 0.0)[:3]),
        notes=tuple(sorted(notes)),
    )


def _regime_boundary(rows: pd.DataFrame) -> float | None:
    """Where the charts' latency-bound shading ends: between the largest latency-bound
    size and the next bandwidth-bound one (geometric mean), as the rows' regime says."""
    sizes = rows[rows["size_bytes"] > 0]
    latency = sizes[sizes["regime"] == "latency-bound"]["size_bytes"]
    if latency.empty:
        return None
    last = float(latency.max())
    above = sizes[(sizes["regime"] == "bandwidth-bound") & (sizes["size_bytes"] > last)]
    if above.empty:
        return last * 2
    return math.sqrt(last * float(above["size_bytes"].min()))


def _charts(
    anchor: str, rows: pd.DataFrame, fits: pd.DataFrame, crossover: float | None
) -> tuple[Chart, ...]:
    """The four charts of a block; those without data to draw are left out."""
    if not (rows["size_bytes"] > 0).any():
        return ()
    charts = []
    if rows["busbw_calc_gbps"].notna().any():
        charts.append(
            Chart(
                "Bus bandwidth",
                "Recomputed bus bandwidth per size against the ideal and the fitted "
                "alpha-beta model; shaded sizes are latency-bound.",
                Markup(
                    plots.bandwidth_plot(
                        rows, fits, plot_id=f"{anchor}-bw", crossover=crossover
                    )
                ),
            )
        )
    charts.append(
        Chart(
            "Time",
            "Time per operation against size (log-log) with the fitted model and the "
            "ideal transfer time.",
            Markup(
                plots.time_plot(rows, fits, plot_id=f"{anchor}-t", crossover=crossover)
            ),
        )
    )
    if rows["efficiency"].notna().any():
        charts.append(
            Chart(
                "Efficiency",
                "Recomputed bus bandwidth as a share of the ideal.",
                Markup(
                    plots.efficiency_plot(
                        rows, plot_id=f"{anchor}-eff", crossover=crossover
                    )
                ),
            )
        )
    placement = (
        "out-of-place" if (rows["placement"] == "out-of-place").any() else "in-place"
    )
    gaps = rows[rows["placement"] == placement]
    if gaps["gap_us"].notna().any():
        charts.append(
            Chart(
                "Gap attribution",
                f"Where the measured time goes ({placement}): the ideal transfer, then "
                "each gap component as a share of the measured time.",
                Markup(plots.gap_plot(gaps, plot_id=f"{anchor}-gap")),
            )
        )
    return tuple(charts)


def _overlay(comparison: tuple[ComparisonRow, ...]) -> Chart:
    series = []
    for item in comparison[:_OVERLAY_LIMIT]:
        rows = [
            r
            for r in item.block.rows
            if r.placement
            == (item.block.largest.placement if item.block.largest else "")
        ]
        series.append(
            plots.OverlaySeries(
                label=f"{item.run.short_label}: {item.block.title}",
                size_bytes=[r.size_bytes for r in rows],
                busbw_gbps=[
                    r.busbw_calc_gbps if r.busbw_calc_gbps is not None else math.nan
                    for r in rows
                ],
            )
        )
    shown = (
        ""
        if len(comparison) <= _OVERLAY_LIMIT
        else f" (the first {_OVERLAY_LIMIT} of {len(comparison)})"
    )
    return Chart(
        "All runs",
        f"Recomputed bus bandwidth of every run{shown}, in the placement each "
        "verdict judges.",
        Markup(plots.overlay_plot(series, plot_id="overlay")),
    )


def _size_row(row: Mapping[Hashable, Any], stripe: bool) -> SizeRow:
    gaps = {
        "hardware latency": _number(row["gap_hw_latency_us"]),
        "software latency": _number(row["gap_latency_us"]),
        "host staging": _number(row["gap_staging_us"]),
        "bandwidth shortfall": _number(row["gap_bandwidth_us"]),
        "unexplained": _number(row["gap_residual_us"]),
    }
    known = {k: v for k, v in gaps.items() if v is not None}
    return SizeRow(
        size_bytes=int(row["size_bytes"]),
        placement=str(row["placement"]),
        line=int(row["line"]),
        time_us=_number(row["time_us"]),
        busbw_gbps=_number(row["busbw_gbps"]),
        busbw_calc_gbps=_number(row["busbw_calc_gbps"]),
        ideal_busbw_gbps=_number(row["ideal_busbw_gbps"]),
        efficiency=_number(row["efficiency"]),
        regime=_value(row["regime"]),
        gap_hw_latency_us=gaps["hardware latency"],
        gap_latency_us=gaps["software latency"],
        gap_staging_us=gaps["host staging"],
        gap_bandwidth_us=gaps["bandwidth shortfall"],
        gap_residual_us=gaps["unexplained"],
        wrong=_number(row["wrong"]),
        wrong_count=_value(row["wrong_kind"]) == "count",
        mismatch=bool(_value(row["busbw_mismatch"])),
        main_gap=max(known, key=lambda k: known[k]) if known else None,
        note=_value(row["efficiency_note"]),
        stripe=stripe,
    )


def _largest(rows: tuple[SizeRow, ...]) -> SizeRow | None:
    """The row the verdict judges: the largest size, out-of-place when measured."""
    for placement in ("out-of-place", "in-place"):
        mine = [r for r in rows if r.placement == placement and r.size_bytes > 0]
        if mine:
            return max(mine, key=lambda r: r.size_bytes)
    return None


def _same(column: pd.Series, value: Any) -> pd.Series:
    return column.isna() if _value(value) is None else column == value


def _value(value: Any) -> Any:
    """None for every flavour of missing (None, NaN, pd.NA); numpy scalars to Python."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def _number(value: Any) -> float | None:
    found = _value(value)
    return None if found is None else float(found)
