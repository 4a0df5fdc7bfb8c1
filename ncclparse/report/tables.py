"""The per-size tables of a block: which columns to show and which rows to fold.

A table that fits a laptop screen: the main table holds what people read (size, time,
algbw, busbw, efficiency, #wrong and, where the log has it, the per-iteration spread);
gap attribution and the rarer columns go to a second table behind ``<details>``.
Columns with no value anywhere in the block (``#wrong`` on oneCCL, hardware latency on
a profile without one, staging that is always 0) are left out for that block. The
leading latency-bound sizes fold into one summary line, so the sizes that decide the
verdict come first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ncclparse.formatting import format_bytes, format_percent, format_time_us
from ncclparse.report.page import Column, SizeRow

__all__ = ["SizeTable", "size_table"]

_MAIN = (
    Column("size_bytes", "size", "bytes"),
    Column("placement", "placement", "text"),
    Column("time_us", "time", "time"),
    Column("algbw_gbps", "algbw GB/s", "bw"),
    Column("busbw_gbps", "busbw GB/s", "bw"),
    Column("efficiency", "efficiency", "percent"),
    Column("wrong", "#wrong", "count"),
    Column("time_min_us", "min", "time"),
    Column("time_max_us", "max", "time"),
    Column("time_p99_us", "p99", "time"),
    Column("stdev", "stdev", "percent"),
)
_DETAIL = (
    Column("size_bytes", "size", "bytes"),
    Column("placement", "placement", "text"),
    Column("busbw_calc_gbps", "busbw recomputed GB/s", "bw"),
    Column("ideal_busbw_gbps", "ideal GB/s", "bw"),
    Column("regime", "regime", "text"),
    Column("share_hw_latency", "hw latency", "percent"),
    Column("share_latency", "sw latency", "percent"),
    Column("share_staging", "staging", "percent"),
    Column("share_bandwidth", "bandwidth", "percent"),
    Column("share_residual", "unexplained", "percent"),
    Column("line", "line", "count"),
)
# Keys every table keeps, even when a block has no value for them.
_ALWAYS = {"size_bytes", "time_us", "busbw_gbps", "line", "regime"}
# A column of zeros says nothing either (staging is 0 without host staging).
_ZERO_IS_EMPTY = {
    "share_hw_latency",
    "share_latency",
    "share_staging",
    "share_bandwidth",
    "share_residual",
}
_FOLD_MIN = 3  # fold fewer latency-bound sizes than this and the table is short anyway


@dataclass(frozen=True, slots=True)
class SizeTable:
    """A block's per-size tables; see :class:`~ncclparse.report.page.Block`."""

    columns: tuple[Column, ...]
    detail_columns: tuple[Column, ...]
    shown: tuple[SizeRow, ...]
    collapsed: tuple[SizeRow, ...]
    collapsed_text: str | None


def size_table(rows: Sequence[SizeRow]) -> SizeTable:
    """Split ``rows`` (size order) into the shown and folded rows and pick the columns.

    The folded rows are the smallest sizes whose every row is latency-bound (0-byte
    rows go with them), never the largest size; fewer than three such sizes are not
    folded. The placement column appears only when the block has both placements.
    """
    both = len({r.placement for r in rows}) > 1
    printed_busbw = any(r.busbw_printed for r in rows)

    def wanted(column: Column) -> bool:
        if column.key == "placement":
            return both
        if column.key in _ALWAYS:
            return True
        if column.key == "busbw_calc_gbps":
            # Where the log prints no busbw, the main table's busbw is this one.
            return printed_busbw
        values = [getattr(r, column.key) for r in rows]
        if column.key in _ZERO_IS_EMPTY:
            return any(v for v in values)
        return any(v is not None for v in values)

    sizes = sorted({r.size_bytes for r in rows})
    bound = dict.fromkeys(sizes, True)
    for r in rows:
        if r.size_bytes > 0 and r.regime != "latency-bound":
            bound[r.size_bytes] = False
    folded: list[int] = []
    for size in sizes[:-1]:
        if not bound[size]:
            break
        folded.append(size)
    if len([s for s in folded if s > 0]) < _FOLD_MIN:
        folded = []
    collapsed = tuple(r for r in rows if r.size_bytes in set(folded))
    return SizeTable(
        columns=tuple(c for c in _MAIN if wanted(c)),
        detail_columns=tuple(c for c in _DETAIL if wanted(c)),
        shown=tuple(r for r in rows if r.size_bytes not in set(folded)),
        collapsed=collapsed,
        collapsed_text=_summary(collapsed) if collapsed else None,
    )


def _summary(rows: Sequence[SizeRow]) -> str:
    """ "18 sizes, 8 B to 1 MiB, latency-bound: 122 µs to 207 µs per operation,
    efficiency <0.1 % to 2.0 %" (efficiency only where known)."""
    sizes = sorted({r.size_bytes for r in rows if r.size_bytes > 0})
    times = [r.time_us for r in rows if r.time_us is not None]
    shares = [r.efficiency for r in rows if r.efficiency is not None]
    text = (
        f"{len(sizes)} sizes, {format_bytes(sizes[0])} to {format_bytes(sizes[-1])}, "
        "latency-bound"
    )
    if times:
        text += (
            f": {_span(format_time_us(min(times)), format_time_us(max(times)))} "
            "per operation"
        )
    if shares:
        text += (
            ", efficiency "
            f"{_span(format_percent(min(shares)), format_percent(max(shares)))}"
        )
    return text


def _span(low: str, high: str) -> str:
    return low if low == high else f"{low} to {high}"
