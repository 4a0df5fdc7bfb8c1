"""What parsers produce: runs with their measurement rows, and the line accounting.

Parsers fill :class:`Run` objects and hand them to a :class:`Collector`, which turns
them into the columns of the ``measurements`` and ``runs`` tables (schema.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pyarrow as pa

from ncclparse import schema
from ncclparse._arrays import from_codes, from_values, repeated, spread
from ncclparse.formatting import shown_name

from . import _lines
from ._lines import Line
from ._spill import RUN_COLUMNS, RowSpill

# Kinds of input line for the accounting rule of schema.md: every line is one of these.
LINE_KINDS = (
    "measurement",  # read into a measurement row
    "structure",  # header, parameter, device, footer and other lines of the tool itself
    "error",  # an error the tool printed (kept in runs.errors)
    "noise",  # known foreign output: NCCL INFO/WARN, launcher, shell, Markdown
    "blank",
    "warned",  # not understood: named with its number in runs.warnings
)


class _Group:
    """One message of a Notes: how often it came, and its first places."""

    __slots__ = ("count", "message", "places")

    def __init__(self, message: str, where: str) -> None:
        self.message = message
        self.count = 1
        self.places = [where]


class Notes:
    """A run's warnings or errors, as ``line N: message`` texts, in bounded memory.

    Repeats of one message are one entry naming its first :data:`SHOWN` places and
    how many more (``lines 4, 9, 12 and 3,995 more: message``); after :data:`LIMIT`
    different messages the rest are counted in one last entry. So a run's notes cost
    the same whether its log repeats a problem ten times or ten million. Errors are
    kept one per line (``grouped=False``): each is what the tool printed.
    """

    SHOWN = 5
    LIMIT = 200
    __slots__ = ("_grouped", "_groups", "_more", "_more_first", "_more_last")

    def __init__(self, *, grouped: bool = True) -> None:
        # Keyed by the message, or by arrival when not grouped; None until the first
        # (most runs have none, and a log may hold many thousands of runs).
        self._groups: dict[str | int, _Group] | None = None
        self._grouped = grouped
        self._more = 0
        self._more_first = self._more_last = ""

    def add(self, where: str, message: str) -> None:
        """Add ``message`` about ``where`` (``line N`` or ``lines N-M``), its control
        characters as escapes (:func:`~ncclparse.formatting.shown_name`): a message
        may quote a log's line, and a line holding ESC or BEL would otherwise reach
        a terminal, a Markdown summary or a JUnit file raw."""
        message = shown_name(message)
        if self._groups is None:
            self._groups = {}
        key: str | int = message if self._grouped else len(self._groups)
        group = self._groups.get(key)
        if group is not None:
            group.count += 1
            if len(group.places) < self.SHOWN:
                group.places.append(where)
        elif len(self._groups) < self.LIMIT:
            self._groups[key] = _Group(message, where)
        else:
            self._more += 1
            self._more_first = self._more_first or where
            self._more_last = where

    def texts(self) -> list[str]:
        """The entries, in the order their messages first appeared."""
        texts = []
        for group in (self._groups or {}).values():
            places, count = group.places, group.count
            if count == 1:
                texts.append(f"{places[0]}: {group.message}")
                continue
            shown = ", ".join(p.split(" ", 1)[1] for p in places)
            more = f" and {count - len(places):,} more" if count > len(places) else ""
            texts.append(f"lines {shown}{more}: {group.message}")
        if self._more:
            span = self._more_first.split(" ", 1)[1]
            if self._more_last != self._more_first:
                span += " to " + self._more_last.split(" ", 1)[1]
            texts.append(
                f"lines {span}: {self._more:,} more notes not kept (at most "
                f"{self.LIMIT} different ones are kept per run)"
            )
        return texts

    def __len__(self) -> int:
        return len(self._groups or ()) + bool(self._more)

    def __bool__(self) -> bool:
        return bool(self._groups)


NO_ROWS = (
    "the run ended with its footer but no measurement row was read: truncated, "
    "not complete"
)
# A refused line is shown up to this many characters (its blanks squeezed).
_REFUSED_TEXT = 100

# A run keeps its first KEEP_ROWS rows in memory (what inference reads); beyond them
# rows go to a RowSpill in chunks of SPILL_ROWS.
KEEP_ROWS = 4_096
SPILL_ROWS = 4_096


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
    # What NCCL_DEBUG=INFO lines and the command line state about the algorithms
    # (schema.md, "Algorithms and protocols").
    nvls_channels: int | None = None
    nccl_env: dict[str, str] = field(default_factory=dict)
    tuner: str | None = None
    enabled: list[dict[str, Any]] = field(default_factory=list)
    tuned: list[dict[str, Any]] = field(default_factory=list)
    nccl_algo: str | None = None
    nccl_proto: str | None = None
    algo_source: str | None = None
    # NCCL_ALGO / NCCL_PROTO as the echoed command line sets them (not a column).
    command_env: dict[str, str] = field(default_factory=dict)
    timeout_s: int | None = None  # nccl-tests -T: `Test timeout (Ns)` ended the run
    errors: Notes = field(default_factory=lambda: Notes(grouped=False))
    warnings: Notes = field(default_factory=Notes)
    # Measurement lines holding a value no measurement can have (schema.md, runs
    # ``refused``): a data error of the run, not only a warning.
    refused: Notes = field(default_factory=lambda: Notes(grouped=False))
    # The first KEEP_ROWS rows (what inference reads), then those not yet spilled.
    rows: list[dict[str, Any]] = field(default_factory=list)
    spill: RowSpill | None = None  # the rows after the first KEEP_ROWS
    copy: int | None = None  # this run's copy index in a shared spill
    # Rows added holding an integer beyond its column's type, which in_range drops:
    # the native row reader's are checked before they are made, the others as they
    # are added (a count, so that a run without any is not read again row by row).
    unchecked: int = 0
    # Every row's collective, set when the run ends, for rows that do not name one.
    rows_collective: str | None = None

    def warn(self, line: int | str, message: str) -> None:
        """Name ``line`` (a number, or ``lines N-M``) in the run's warnings."""
        self.warnings.add(f"line {line}" if isinstance(line, int) else line, message)

    def error(self, line: int, message: str) -> None:
        self.errors.add(f"line {line}", message)

    def refuse(self, line: int | str, reason: str, text: str) -> None:
        """A measurement line (or JSON result, ``lines N-M``) that holds an
        impossible value: ``reason`` (``time -inf is not a possible time``) in the
        warnings, with the ``text`` it was printed as in ``refused`` too."""
        self.warn(line, f"{reason}: row not read")
        where = f"line {line}" if isinstance(line, int) else line
        shown = " ".join(text.split())
        shown = shown if len(shown) <= _REFUSED_TEXT else shown[:_REFUSED_TEXT] + "..."
        self.refused.add(where, f"{reason} ({shown!r})")

    def add_row(self, row: dict[str, Any], *, in_range: bool = False) -> None:
        """Append a measurement row; beyond KEEP_ROWS rows they go to a spill file.
        ``in_range``: its integers are known to fit their columns (see in_range)."""
        self.rows.append(row)
        if not in_range and _beyond_columns(row):
            self.unchecked += 1
        if len(self.rows) >= KEEP_ROWS + SPILL_ROWS:
            self.seal_rows()

    def add_rows_in_range(self, rows: Sequence[dict[str, Any]]) -> None:
        """:meth:`add_row` of each of ``rows``, whose integers are known to fit their
        columns (the native row reader's), in one step."""
        self.rows.extend(rows)
        if len(self.rows) >= KEEP_ROWS + SPILL_ROWS:
            self.seal_rows()

    def add_batch(self, batch: pa.RecordBatch) -> None:
        """Append rows given as a batch of the spill's schema (the native row
        reader's), after every row added so far. Only for a run that holds its
        first KEEP_ROWS rows already: those stay dicts, for inference."""
        if self.spill is None:
            self.spill = RowSpill()
        self.seal_rows()
        # In SPILL_ROWS slices, as dicts are spilled: read back, a batch is no larger.
        for start in range(0, batch.num_rows, SPILL_ROWS):
            self.spill.write_batch(batch.slice(start, SPILL_ROWS))

    def seal_rows(self, *, all_after: bool = False) -> None:
        """Move the rows after the first KEEP_ROWS to the spill, if there is one or
        they are many (so that the spill holds every row after those); with
        ``all_after``, in any case (then the rows in memory are the first KEEP_ROWS,
        what inference reads, however many rows the run has)."""
        tail = self.rows[KEEP_ROWS:]
        if not tail or (
            self.spill is None and len(tail) < SPILL_ROWS and not all_after
        ):
            return
        if self.spill is None:
            self.spill = RowSpill()
        self.spill.write(in_range(self, tail))
        del self.rows[KEEP_ROWS:]

    def set_row_collective(self, name: str | None) -> None:
        """Set the collective of every row (read back from the spill ones too)."""
        self.rows_collective = name
        for row in self.rows:
            row["collective"] = name

    @property
    def row_count(self) -> int:
        """Rows read, in memory and spilled."""
        spilled = self.spill.rows(self.copy) if self.spill is not None else 0
        return len(self.rows) + spilled

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
_ROW_INT_BOUNDS = tuple(
    (name, -(2 ** (_INT_BITS[name] - 1)), 2 ** (_INT_BITS[name] - 1))
    for name in _ROW_INTS
)


def in_range(run: Run, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (of ``run``) without those holding an integer beyond its column's
    type (warned)."""
    if not run.unchecked or not any(
        _column_out_of_range(name, rows) for name in _ROW_INTS
    ):
        return rows
    kept = []
    for row in rows:
        bad = next((k for k in _ROW_INTS if _out_of_range(k, row.get(k))), None)
        if bad is not None:
            run.warn(row["line"], f"{bad} out of range: row not read")
        else:
            kept.append(row)
    return kept


def _beyond_columns(row: dict[str, Any]) -> bool:
    """Whether ``row`` holds an integer its column's type cannot hold."""
    for name, low, high in _ROW_INT_BOUNDS:
        value = row.get(name)
        if isinstance(value, int) and not low <= value < high:
            return True
    return False


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
        # Rows not yet converted, and per run (how many of them, its shared values):
        # columns are built once per batch, not once per run (a log may hold tens of
        # thousands of small runs).
        self._rows: list[dict[str, Any]] = []
        self._shared: list[tuple[int, dict[str, Any]]] = []
        self.runs: dict[str, list[Any]] = {name: [] for name in schema.RUN_COLUMNS}
        self.run_batches: list[pa.RecordBatch] = []
        self.accounting: dict[str, Counter[str]] = {}

    def add_run(self, source: str, index: int, run: Run) -> None:
        """Append one run (the ``index``-th of its source) and its rows."""
        for name in ("nranks", "nnodes", "oob_values", "local_ranks", "nvls_channels"):
            value = getattr(run, name)
            if value is not None and _out_of_range(name, value):
                run.warn(run.first_line, f"{name} out of range: not kept")
                setattr(run, name, None)
        rows = self._add_rows(source, index, run)
        if run.status == "complete" and not rows:
            # The footer says the tool finished, yet nothing was read: the data is
            # not complete (schema.md, runs ``status``).
            run.status = "truncated"
            run.warn(run.last_line or run.first_line, NO_ROWS)
        self._add_run(source, index, run, rows)
        if len(self._rows) >= BATCH_ROWS:
            self.flush()
        if len(self.runs["run"]) >= BATCH_RUNS:
            self._flush_runs()

    def flush(self) -> None:
        """Convert the buffered rows to record batches and hand them on."""
        rows, shared = self._rows, self._shared
        if not rows:
            return
        self._rows, self._shared = [], []
        columns: dict[str, Any] = {}
        native = _native_columns(rows)
        for column in schema.MEASUREMENT_FIELDS:
            name = column.name
            if name in RUN_COLUMNS:
                columns[name] = _shared_column(shared, name, column.type)
            elif native.get(name) is not None:
                columns[name] = native[name]
            else:
                # One comprehension per column is much cheaper than a Python loop
                # over every (row, column) pair.
                default = _ROW_DEFAULTS.get(name)
                columns[name] = [row.get(name, default) for row in rows]
        table = schema.measurements_table(columns)
        for batch in table.to_batches():
            self._hand_on(batch)

    def add_parsed(
        self,
        measurements: pa.Table,
        runs: pa.Table,
        accounting: dict[str, Counter[str]],
    ) -> None:
        """Append what another Collector gathered (a worker's:
        ncclparse.inputs.workers), after everything added so far; rows are handed
        on in BATCH_ROWS batches."""
        self.flush()
        for batch in measurements.to_batches(max_chunksize=BATCH_ROWS):
            self._hand_on(batch)
        self._flush_runs()
        self.run_batches.extend(runs.to_batches())
        self.accounting.update(accounting)

    def _hand_on(self, batch: pa.RecordBatch) -> None:
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
        run.seal_rows()
        rows = in_range(run, run.rows)
        if rows:
            self._rows.extend(rows)
            self._shared.append((len(rows), shared))
        count = len(rows)
        if run.spill is not None:
            self.flush()  # the rows in memory come before the spilled ones
            columns = _RunColumns(shared, run.rows_collective)
            for batch in run.spill.batches(run.copy):
                self._hand_on(columns.completed(batch))
                count += batch.num_rows
            run.spill.release()
        return count

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
            "errors": run.errors.texts(),
            "warnings": run.warnings.texts(),
            "refused": run.refused.texts(),
            "command": run.command,
            "oob_ok": run.oob_ok,
            "avg_busbw_ok": run.avg_busbw_ok,
            "net": run.net,
            "nics": run.nics,
            "gdr": run.gdr,
            "nvls": run.nvls,
            "collnet": run.collnet,
            "local_ranks": run.local_ranks,
            "timeout_s": run.timeout_s,
            "nvls_channels": run.nvls_channels,
            "nccl_env": list(run.nccl_env.items()),
            "tuner": run.tuner,
            "enabled": run.enabled,
            "tuned": run.tuned,
            "nccl_algo": run.nccl_algo,
            "nccl_proto": run.nccl_proto,
            "algo_source": run.algo_source,
        }
        for name, column in self.runs.items():
            column.append(values[name])


# How the native reader of row dicts builds each row column (_scan.c's D_* kinds):
# from buffers, or (other types: lists) only when every value is None.
_NATIVE_KINDS = {
    pa.int64(): 1,
    pa.int32(): 2,
    pa.float64(): 3,
    pa.bool_(): 4,
    pa.string(): 5,
}
_NULLS_ONLY = 6
_ROW_FIELDS = tuple(f for f in schema.MEASUREMENT_FIELDS if f.name not in RUN_COLUMNS)
_ROW_SPEC = (
    tuple(f.name for f in _ROW_FIELDS),
    bytes(_NATIVE_KINDS.get(f.type, _NULLS_ONLY) for f in _ROW_FIELDS),
    tuple(_ROW_DEFAULTS.get(f.name) for f in _ROW_FIELDS),
)


def _native_columns(rows: list[dict[str, Any]]) -> dict[str, pa.Array[Any] | None]:
    """The columns of ``rows`` built from C buffers (``_lines.dict_columns``), each
    what ``array()`` builds of its values; a column holding a value ``array()``
    does not build from buffers (and every column without the extension) is None."""
    if _lines.dict_columns is None or not rows:
        return {}
    names, _, _ = _ROW_SPEC
    built = _lines.dict_columns(rows, *_ROW_SPEC)
    n = len(rows)
    columns: dict[str, pa.Array[Any] | None] = {}
    for column, name, buffers in zip(_ROW_FIELDS, names, built, strict=True):
        if buffers is None:
            columns[name] = None
        elif not buffers:  # every value None
            columns[name] = cast("pa.Array[Any]", pa.nulls(n, cast(Any, column.type)))
        elif column.type == pa.string():
            columns[name] = from_codes(buffers[0], buffers[1], n)
        else:
            columns[name] = from_values(buffers[0], buffers[1], column.type, n)
    return columns


def _shared_column(
    shared: list[tuple[int, dict[str, Any]]], name: str, type: pa.DataType
) -> pa.Array[Any]:
    """Run column ``name``: each run's value, on each of its rows."""
    return spread([run[name] for _, run in shared], type, [n for n, _ in shared])


class _RunColumns:
    """A run's own columns (source, tool, ...; its collective once inferred) for
    its spilled batches: built once for the longest batch, sliced for each."""

    def __init__(self, shared: dict[str, Any], collective: str | None) -> None:
        self._values = dict(shared)
        if collective is not None:
            self._values["collective"] = collective
        self._built: dict[str, pa.Array[Any]] = {}
        self._length = -1

    def completed(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` completed to a measurements batch with the run's columns."""
        n = batch.num_rows
        if n > self._length:
            self._length = n
            self._built = {
                f.name: repeated(self._values[f.name], f.type, n)
                for f in schema.MEASUREMENT_FIELDS
                if f.name in self._values
            }
        arrays = [
            self._built[f.name].slice(0, n)
            if f.name in self._built
            else batch.column(f.name)
            for f in schema.MEASUREMENT_FIELDS
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=schema.MEASUREMENTS_SCHEMA)


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
