"""Measurements for judging, in bounded memory: repeated points of a run merged.

``report`` and ``analyze`` judge points (one size of one series of one run). Their
input may hold far more rows than points: nccl-tests ``-N`` repeats a sweep for hours,
and a 1 GiB log holds ~18 M rows. :class:`PointTable` takes record batches as the
parser hands them on; while they stay under ``exact_rows`` rows they are kept as they
are, so an ordinary input is judged row for row. Beyond that, rows measuring the
same point are merged (Arrow aggregation, batch by batch, each row merged once: the
points of a run that has ended are final, as a run's rows come together): time is the
mean of the
repeats, ``time_min_us``/``time_max_us`` their extremes, ``stddev_pct`` their spread,
printed bandwidths their means, ``#wrong`` the largest; the merged runs say so in
their warnings. Past ``max_points`` distinct points the input is refused with a
message naming the limit (docs/robustness.md; the limits per command:
:mod:`ncclparse.inputs.limits`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from ncclparse import schema
from ncclparse.errors import NcclParseError
from ncclparse.inputs.limits import ANALYZE_LIMITS, CHECK_LIMITS, REPORT_LIMITS

if TYPE_CHECKING:
    from types import TracebackType

    from ncclparse.parsers import ParseResult
    from ncclparse.store.spool import Spool

__all__ = [
    "ANALYZE_LIMITS",
    "CHECK_LIMITS",
    "REPORT_LIMITS",
    "PointTable",
    "TooManyPoints",
    "as_points",
    "with_merge_notes",
]

# What makes two rows measurements of the same point.
KEYS = (
    "source",
    "run",
    "collective",
    "dtype",
    "redop",
    "root",
    "placement",
    "size_bytes",
    "cputime",
    "grouped",
)
_SUMS = ("n", "t_sum", "t_sq", "algbw_sum", "algbw_n", "busbw_sum", "busbw_n")
_EXTREMES = (("t_min", "min"), ("t_max", "max"), ("wrong", "max"))
# Per-iteration series (nccl-tests -J) are not merged: a merged point has them null.
_LISTS = tuple(f.name for f in schema.MEASUREMENT_FIELDS if pa.types.is_list(f.type))
_FIRSTS = tuple(
    name
    for name in (*schema.MEASUREMENT_COLUMNS, "seq")
    if name not in KEYS and name != "wrong" and name not in _LISTS
)
# One measurement's per-iteration statistics: null for a merged point.
_SINGLE_ONLY = tuple(
    name for name in schema.PER_ITERATION_COLUMNS if name not in _LISTS
)


class TooManyPoints(NcclParseError):
    """The inputs hold more distinct points than a report can judge."""


class PointTable:
    """Collects measurement batches (``add``, an ``on_batch`` for the parser);
    :meth:`table` gives the rows, repeated points merged if there were too many.

    Past ``max_points`` distinct points it keeps nothing more, and :meth:`table`
    raises TooManyPoints (not ``add``: the parser would take it for one input's
    error).

    With ``spill``, once merging starts the points of each run that has ended are
    written to a temporary file, :attr:`spool` (as measurements), rather than kept:
    memory holds the open run's points, not every run's. :meth:`table` then writes
    the last run's points there too and gives no rows: the points are the spool's,
    in order. :meth:`close` (or ``with``) removes the file. Raises SpoolError
    (:mod:`ncclparse.store.spool`) when it cannot be written.
    """

    def __init__(
        self, limits: tuple[int, int] = ANALYZE_LIMITS, spill: bool = False
    ) -> None:
        self.exact_rows, self.max_points = limits
        self._spill = spill
        self.spool: Spool | None = None  # created once merging starts
        # (rows, points) of the merged runs whose points went to the spool.
        self._spooled_runs: dict[tuple[str, int], tuple[int, int]] = {}
        self._chunks: list[pa.Table] = []
        self._rows = 0  # rows in _chunks (tables with a seq column)
        self._seen = 0  # rows added, for the order of first appearance
        # Merged points, once merging started: those of runs that have ended (final)
        # and those of the last run seen, which the next rows may continue.
        self._done: list[pa.Table] = []
        self._open: pa.Table | None = None
        self._points = 0  # rows in _done
        self._overflow = False
        self.overflow_source: str | None = None  # the input whose rows passed it

    def add(self, batch: pa.RecordBatch) -> None:
        if self._overflow:
            return
        # A table, not the batch: RecordBatch.append_column needs pyarrow 16.
        self._chunks.append(
            pa.Table.from_batches([batch]).append_column(
                "seq",
                pa.array(range(self._seen, self._seen + batch.num_rows), pa.int64()),
            )
        )
        self._seen += batch.num_rows
        self._rows += batch.num_rows
        if self._rows + self._points + self._open_rows > self.exact_rows:
            self._merge()

    @property
    def merged(self) -> bool:
        return self._open is not None

    def close(self) -> None:
        if self.spool is not None:
            self.spool.close()

    def __enter__(self) -> PointTable:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def _open_rows(self) -> int:
        return 0 if self._open is None else self._open.num_rows

    def table(self) -> pa.Table:
        """The measurements (schema.md): every row, or one row per point if merged."""
        if self._overflow:
            raise TooManyPoints(
                f"the inputs hold more than {self.max_points:,} distinct measurement "
                "points (sizes of each series of each run): more than a report can "
                "judge (docs/robustness.md, Memory); give fewer inputs, or write the "
                "tables with `ncclparse parse -o` and query them"
            )
        if self._open is None:
            rows = pa.concat_tables(
                self._chunks or [_with_seq(schema.MEASUREMENTS_SCHEMA).empty_table()]
            )
            return rows.drop_columns(["seq"])
        if self._spill:
            self._merge()
            assert self._open is not None
            self._settle(self._open)
            self._open = self._open.schema.empty_table()
            return schema.MEASUREMENTS_SCHEMA.empty_table()
        return _points(self._state())

    def merged_runs(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(source, run) -> (rows, points) for every run whose repeats were merged."""
        if self._open is None or self._overflow:
            return {}
        return {**self._spooled_runs, **_merged_runs(self._state())}

    def _state(self) -> pa.Table:
        """Every merged point, in the order points first appeared."""
        self._merge()
        assert self._open is not None
        return pa.concat_tables([*self._done, self._open])

    def _merge(self) -> None:
        """Merge the new rows with the open run's points. A run's rows come
        together, so the points of every run but the last one seen are final: each
        row is merged once, whatever the number of runs."""
        if not self._rows:
            return  # nothing new since the last merge
        last = self._chunks[-1]
        key = (last["source"][-1], last["run"][-1])
        parts = [_as_state(pa.concat_tables(self._chunks))]
        self._chunks, self._rows = [], 0
        if self._open is not None:
            # Merged points have the columns in another order (keys first).
            names = self._open.column_names
            parts = [
                self._open,
                *(p.select(names).cast(self._open.schema) for p in parts),
            ]
        state = _combine(pa.concat_tables(parts))
        is_open = pc.and_(
            pc.equal(state["source"], key[0]), pc.equal(state["run"], key[1])
        )
        ended = state.filter(pc.invert(is_open))
        self._open = state.filter(is_open)
        if ended.num_rows:
            self._settle(ended)
            self._points += ended.num_rows
        if self._points + self._open.num_rows > self.max_points:
            self._overflow, self._done, self._open = True, [], None
            self._points, self.overflow_source = 0, key[0].as_py()

    def _settle(self, ended: pa.Table) -> None:
        """Keep the final points of ``ended`` runs, or write them to the spool."""
        if not self._spill:
            self._done.append(ended)
            return
        if self.spool is None:
            from ncclparse.store.spool import Spool

            self.spool = Spool()
        self._spooled_runs.update(_merged_runs(ended))
        for batch in _points(ended).to_batches():
            self.spool.write(batch)


def _merged_runs(state: pa.Table) -> dict[tuple[str, int], tuple[int, int]]:
    """(source, run) -> (rows, points) for each run of ``state`` (merged points)
    with more rows than points."""
    by_run = state.group_by(["source", "run"]).aggregate([("n", "sum"), ("n", "count")])
    return {
        (source, run): (rows, points)
        for source, run, rows, points in zip(
            *(by_run.column(c).to_pylist() for c in ("source", "run")),
            by_run.column("n_sum").to_pylist(),
            by_run.column("n_count").to_pylist(),
            strict=True,
        )
        if rows != points
    }


def _with_seq(base: pa.Schema) -> pa.Schema:
    return base.append(pa.field("seq", pa.int64()))


def _as_state(rows: pa.Table) -> pa.Table:
    """Rows in the form merging adds up: sums, extremes and first values."""
    time = rows.column("time_us")
    algbw, busbw = rows.column("algbw_gbps"), rows.column("busbw_gbps")
    extra: dict[str, Any] = {
        "n": pa.array([1] * rows.num_rows, pa.int64()),
        "t_sum": time,
        "t_sq": pc.multiply(time, time),
        "t_min": pc.coalesce(rows.column("time_min_us"), time),
        "t_max": pc.coalesce(rows.column("time_max_us"), time),
        "algbw_sum": algbw,
        "algbw_n": pc.cast(pc.is_valid(algbw), pa.int64()),
        "busbw_sum": busbw,
        "busbw_n": pc.cast(pc.is_valid(busbw), pa.int64()),
    }
    for name, values in extra.items():
        rows = rows.append_column(name, values)
    return rows.drop_columns(list(_LISTS))


# What a null key is grouped as (beside whether it was null), by type; 0 for numbers.
_ZERO: dict[str, Any] = {"string": "", "bool": False}


def _combine(state: pa.Table) -> pa.Table:
    """One row per point of ``state``, in the order points first appeared."""
    aggregations: list[Any] = [(name, "sum") for name in _SUMS]
    aggregations += [(name, how) for name, how in _EXTREMES]
    aggregations += [(name, "first") for name in _FIRSTS]
    # A key with nulls is grouped as its values with nulls filled plus whether each
    # was null: pyarrow 15 keeps rows apart whose only null key is the same (an
    # all_reduce's root), so the same point would stay twice.
    keys, nullable = list(KEYS), []
    for name in KEYS:
        column = state.column(name)
        if column.null_count:
            nullable.append(name)
            at = state.schema.get_field_index(name)
            filler = pa.scalar(_ZERO.get(str(column.type), 0), column.type)
            state = state.set_column(at, name, pc.fill_null(column, filler))
            state = state.append_column(f"{name}_set", pc.is_valid(column))
            keys.append(f"{name}_set")
    grouped = state.group_by(keys, use_threads=False).aggregate(aggregations)
    for name in nullable:
        valid = grouped.column(f"{name}_set")
        at = grouped.schema.get_field_index(name)
        restored = pc.if_else(valid, grouped.column(name), None)
        grouped = grouped.set_column(at, name, restored).drop_columns([f"{name}_set"])
    names = {f"{name}_{how}": name for name, how in aggregations}
    grouped = grouped.rename_columns([names.get(c, c) for c in grouped.column_names])
    return grouped.sort_by("seq")


def _points(state: pa.Table) -> pa.Table:
    """The merged state as a measurements table."""
    n = state.column("n")
    single = pc.equal(n, pa.scalar(1, pa.int64()))
    mean = pc.divide(state.column("t_sum"), pc.cast(n, pa.float64()))
    variance = pc.subtract(
        pc.divide(state.column("t_sq"), pc.cast(n, pa.float64())),
        pc.multiply(mean, mean),
    )
    spread = pc.multiply(
        pc.divide(pc.sqrt(pc.max_element_wise(variance, pa.scalar(0.0))), mean),
        pa.scalar(100.0),
    )
    columns = {
        "time_us": mean,
        "time_min_us": pc.if_else(
            single, state.column("time_min_us"), state.column("t_min")
        ),
        "time_max_us": pc.if_else(
            single, state.column("time_max_us"), state.column("t_max")
        ),
        "stddev_pct": pc.if_else(single, state.column("stddev_pct"), spread),
        "algbw_gbps": _mean(state, "algbw"),
        "busbw_gbps": _mean(state, "busbw"),
        **{
            name: pc.if_else(
                single,
                state.column(name),
                pa.scalar(None, state.column(name).type),
            )
            for name in _SINGLE_ONLY
        },
        **{name: pa.nulls(state.num_rows) for name in _LISTS},
    }
    arrays = [
        columns[f.name] if f.name in columns else state.column(f.name)
        for f in schema.MEASUREMENTS_SCHEMA
    ]
    return pa.Table.from_arrays(
        [
            pc.cast(a, f.type)
            for a, f in zip(arrays, schema.MEASUREMENTS_SCHEMA, strict=True)
        ],
        schema=schema.MEASUREMENTS_SCHEMA,
    )


def _mean(state: pa.Table, name: str) -> Any:
    """Mean of the printed values of ``name`` (null where none was printed)."""
    count = pc.cast(state.column(f"{name}_n"), pa.float64())
    return pc.if_else(
        pc.greater(count, pa.scalar(0.0)),
        pc.divide(state.column(f"{name}_sum"), count),
        pa.scalar(None, pa.float64()),
    )


def merge_note(rows: int, points: int) -> str:
    """The warning a merged run carries."""
    return (
        f"{rows:,} measurements of {points:,} points (a sweep repeated): merged for "
        "judging, time the mean of the repeats, min/max their extremes"
    )


def with_merge_notes(
    runs: pa.Table, merged: dict[tuple[str, int], tuple[int, int]]
) -> pa.Table:
    """``runs`` with :func:`merge_note` added to the warnings of the merged runs."""
    if not merged:
        return runs
    # A non-null list<string> column (schema.md): the cast only tells mypy.
    warnings = cast("list[list[str]]", runs.column("warnings").to_pylist())
    keys = zip(
        runs.column("source").to_pylist(), runs.column("run").to_pylist(), strict=True
    )
    updated = [
        [*ws, merge_note(*merged[key])] if key in merged else ws
        for key, ws in zip(keys, warnings, strict=True)
    ]
    index = runs.schema.get_field_index("warnings")
    return runs.set_column(
        index,
        runs.schema.field(index),
        pa.array(updated, runs.schema.field(index).type),
    )


def as_points(result: ParseResult, limits: tuple[int, int]) -> ParseResult:
    """``result`` as a :class:`PointTable` of ``limits`` collects it: a point's
    repeats merged once its rows pass ``limits``' exact rows, the merged runs
    saying so. What was merged already stays as it is (a point is one row). So a
    command that parsed with other limits (``check``) draws the points ``report``
    draws. Raises TooManyPoints past ``limits``' points."""
    points = PointTable(limits)
    for batch in result.measurements.to_batches():
        points.add(batch)
    measurements = points.table()
    runs = with_merge_notes(result.runs, points.merged_runs())
    return dataclasses.replace(result, measurements=measurements, runs=runs)
