"""What parsers produce: runs with their measurement rows, and the line accounting.

Parsers fill :class:`Run` objects and hand them to a :class:`Collector`, which turns
them into the columns of the ``measurements`` and ``runs`` tables (schema.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ncclparse import schema

from ._lines import Line

# Kinds of input line for the accounting rule of schema.md: every line is one of these.
LINE_KINDS = (
    "measurement",  # read into a measurement row
    "structure",  # header, parameter, device, footer and other lines of the tool itself
    "error",  # an error the tool printed (kept in runs.errors)
    "noise",  # known foreign output: NCCL INFO/WARN, launcher, shell, Markdown
    "blank",
    "warned",  # not understood: named with its number in runs.warnings
)


@dataclass(slots=True)
class Run:
    """One benchmark run in a source, filled in while its lines are read."""

    tool: str
    first_line: int
    last_line: int = 0
    tool_version: str | None = None
    status: schema.RunStatus = "truncated"  # until a footer or an error says otherwise
    collectives: list[str] = field(default_factory=list)
    nranks: int | None = None
    nnodes: int | None = None
    hosts: list[str | None] = field(default_factory=list)
    devices: list[str | None] = field(default_factory=list)
    library_version: str | None = None
    params: dict[str, str] = field(default_factory=dict)
    avg_busbw_gbps: float | None = None
    oob_values: int | None = None
    oob_ok: bool | None = None
    avg_busbw_ok: bool | None = None
    command: str | None = None
    # What NCCL_DEBUG=INFO lines state about the topology (schema.md, "runs").
    net: str | None = None
    nics: list[str] = field(default_factory=list)
    gdr: bool | None = None
    nvls: bool | None = None
    collnet: bool | None = None
    local_ranks: int | None = None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)

    def warn(self, line: int, message: str) -> None:
        self.warnings.append(f"line {line}: {message}")

    def error(self, line: int, message: str) -> None:
        self.errors.append(f"line {line}: {message}")

    def add_collective(self, name: str | None) -> None:
        if name and name not in self.collectives:
            self.collectives.append(name)

    @property
    def device(self) -> str | None:
        """The accelerator name when every listed rank reports the same one."""
        names = {d for d in self.devices if d is not None}
        return names.pop() if len(names) == 1 else None


_ROW_DEFAULTS: dict[str, Any] = {"cputime": False, "grouped": False}
# Integer columns and their bounds: a value a parser read beyond them (a hostile or
# corrupt log) is never passed to Arrow, which would raise a bare OverflowError.
_INT_BITS = {
    f.name: f.type.bit_width
    for f in (*schema.MEASUREMENT_FIELDS, *schema.RUN_FIELDS)
    if pa.types.is_integer(f.type)
}


_ROW_INTS = tuple(name for name in schema.MEASUREMENT_COLUMNS if name in _INT_BITS)


def _column_out_of_range(name: str, rows: list[dict[str, Any]]) -> bool:
    """Cheap test of a whole run's column; rows are checked one by one only if True."""
    values = [v for row in rows if isinstance(v := row.get(name), int)]
    return bool(values) and (
        _out_of_range(name, min(values)) or _out_of_range(name, max(values))
    )


def _out_of_range(name: str, value: Any) -> bool:
    bits = _INT_BITS.get(name)
    return (
        bits is not None
        and isinstance(value, int)
        and not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
    )


# Rows are handed on as Arrow record batches of this many rows: Python objects per row
# cost several times more memory than Arrow columns.
BATCH_ROWS = 16_384
BATCH_RUNS = 1_024


class Collector:
    """Turns runs of many sources into table columns, plus line accounting.

    Measurement rows are converted to Arrow record batches every BATCH_ROWS rows and
    passed to ``on_batch`` (or kept, for :meth:`measurements_table`), so memory does
    not grow with the number of rows when the caller writes batches out as they come.
    """

    def __init__(
        self, on_batch: Callable[[pa.RecordBatch], None] | None = None
    ) -> None:
        self.on_batch = on_batch
        self.batches: list[pa.RecordBatch] = []
        self.measurements: dict[str, list[Any]] = {
            name: [] for name in schema.MEASUREMENT_COLUMNS
        }
        self.runs: dict[str, list[Any]] = {name: [] for name in schema.RUN_COLUMNS}
        self.run_batches: list[pa.RecordBatch] = []
        self.accounting: dict[str, Counter[str]] = {}
        self._buffered = 0

    def add_run(self, source: str, index: int, run: Run) -> None:
        """Append one run (the ``index``-th of its source) and its rows."""
        for name in ("nranks", "nnodes", "oob_values", "local_ranks"):
            if _out_of_range(name, getattr(run, name)):
                run.warn(run.first_line, f"{name} out of range: not kept")
                setattr(run, name, None)
        rows = self._add_rows(source, index, run)
        self._add_run(source, index, run, rows)
        self._buffered += rows
        if self._buffered >= BATCH_ROWS:
            self.flush()
        if len(self.runs["run"]) >= BATCH_RUNS:
            self._flush_runs()

    def flush(self) -> None:
        """Convert the buffered rows to record batches and hand them on."""
        if not self._buffered:
            return
        table = schema.measurements_table(self.measurements)
        for values in self.measurements.values():
            values.clear()
        self._buffered = 0
        for batch in table.to_batches():
            if self.on_batch is not None:
                self.on_batch(batch)
            else:
                self.batches.append(batch)

    def _flush_runs(self) -> None:
        self.run_batches.extend(schema.runs_table(self.runs).to_batches())
        for values in self.runs.values():
            values.clear()

    def runs_table(self) -> pa.Table:
        """Every run added, as one table."""
        self._flush_runs()
        return pa.Table.from_batches(self.run_batches, schema=schema.RUNS_SCHEMA)

    def measurements_table(self) -> pa.Table:
        """Every row not handed to ``on_batch``, as one table."""
        self.flush()
        return pa.Table.from_batches(self.batches, schema=schema.MEASUREMENTS_SCHEMA)

    def _add_rows(self, source: str, index: int, run: Run) -> int:
        shared = {
            "source": source,
            "run": index,
            "tool": run.tool,
            "tool_version": run.tool_version,
            "nranks": run.nranks,
            "nnodes": run.nnodes,
            "device": run.device,
        }
        rows = run.rows
        if any(_column_out_of_range(name, rows) for name in _ROW_INTS):
            rows = []
            for row in run.rows:
                bad = next((k for k in _ROW_INTS if _out_of_range(k, row.get(k))), None)
                if bad is not None:
                    run.warn(row["line"], f"{bad} out of range: row not read")
                else:
                    rows.append(row)
        # Column by column: one comprehension per column is much cheaper than a
        # Python loop over every (row, column) pair.
        for name, values in self.measurements.items():
            if name in shared:
                values.extend([shared[name]] * len(rows))
            else:
                default = _ROW_DEFAULTS.get(name)
                values.extend([row.get(name, default) for row in rows])
        return len(rows)

    def _add_run(self, source: str, index: int, run: Run, rows: int) -> None:
        values = {
            "source": source,
            "run": index,
            "tool": run.tool,
            "tool_version": run.tool_version,
            "collectives": run.collectives,
            "status": run.status,
            "first_line": run.first_line,
            "last_line": run.last_line or run.first_line,
            "rows": rows,
            "nranks": run.nranks,
            "nnodes": run.nnodes,
            "hosts": run.hosts,
            "devices": run.devices,
            "library_version": run.library_version,
            "params": list(run.params.items()),
            "avg_busbw_gbps": run.avg_busbw_gbps,
            "oob_values": run.oob_values,
            "errors": run.errors,
            "warnings": run.warnings,
            "command": run.command,
            "oob_ok": run.oob_ok,
            "avg_busbw_ok": run.avg_busbw_ok,
            "net": run.net,
            "nics": run.nics,
            "gdr": run.gdr,
            "nvls": run.nvls,
            "collnet": run.collnet,
            "local_ranks": run.local_ranks,
        }
        for name, column in self.runs.items():
            column.append(values[name])


def parse_at_end(
    read: Callable[[Iterable[Line], str], tuple[list[Run], Counter[str]]],
) -> Callable[[Iterable[Line], str, Callable[[Run], None]], Counter[str]]:
    """The parser contract (``ncclparse.parsers.Parser.parse``) for a parser that
    finishes its runs only at the end of the input: ``read`` returns them and the
    accounting; they go to ``emit`` in source order (by first line)."""

    def parse(
        lines: Iterable[Line], source: str, emit: Callable[[Run], None]
    ) -> Counter[str]:
        runs, accounting = read(lines, source)
        for run in sorted(runs, key=lambda r: r.first_line):
            emit(run)
        return accounting

    return parse
