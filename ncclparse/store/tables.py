"""Read and write result tables on disk, keeping the schema metadata.

Formats by file extension: ``.parquet``, ``.arrow``/``.feather``/``.ipc`` (Arrow IPC
file), ``.csv``, ``.jsonl``/``.ndjson`` (JSON Lines). Every write is atomic
(:func:`~ncclparse.store.atomic.atomic_output`): a reader never sees half a file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.feather as feather
import pyarrow.parquet as pq

from ncclparse import schema
from ncclparse._arrays import array, empty_table
from ncclparse.errors import InputError, NcclParseError
from ncclparse.store.atomic import atomic_output

FORMATS = ("parquet", "arrow", "csv", "jsonl")
_BY_SUFFIX = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
    ".feather": "arrow",
    ".ipc": "arrow",
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
}


def format_for(path: Path, explicit: str | None = None) -> str:
    """The output format: ``explicit`` if given, else from the file extension.

    Raises NcclParseError when the extension names no known format.
    """
    if explicit is not None:
        return explicit
    found = _BY_SUFFIX.get(path.suffix.lower())
    if found is None:
        known = ", ".join(sorted(_BY_SUFFIX))
        raise NcclParseError(
            f"{path}: cannot tell the format from the extension {path.suffix!r} "
            f"(use one of {known}, or --format)"
        )
    return found


def write_table(table: pa.Table, path: Path, fmt: str | None = None) -> None:
    """Write ``table`` to ``path`` atomically in ``fmt`` (default: by extension)."""
    with table_writer(path, table.schema, fmt) as write:
        for batch in table.to_batches():
            write(batch)


def write_to(table: pa.Table, handle: IO[bytes], fmt: str) -> None:
    """Write ``table`` to an open binary stream (e.g. standard output)."""
    with batch_writer(handle, table.schema, fmt) as write:
        for batch in table.to_batches():
            write(batch)


@contextmanager
def table_writer(
    path: Path, schema: pa.Schema, fmt: str | None = None
) -> Iterator[Callable[[pa.RecordBatch], None]]:
    """Yield a function that writes record batches to ``path`` as they come.

    The file appears, complete, only when the block ends without error (see
    :func:`atomic_output`); ``fmt`` defaults to the one the extension names.
    """
    fmt = format_for(path, fmt)
    with (
        atomic_output(path, binary=True) as handle,
        batch_writer(handle, schema, fmt) as write,
    ):
        yield write


ROW_GROUP_ROWS = 131_072


@contextmanager
def batch_writer(
    handle: IO[bytes], schema: pa.Schema, fmt: str
) -> Iterator[Callable[[pa.RecordBatch], None]]:
    """Yield a function that writes record batches of ``schema`` to ``handle``."""
    if fmt == "parquet":
        parquet = pq.ParquetWriter(handle, schema)
        pending: list[pa.RecordBatch] = []
        # Row groups are encoded and written by one thread while parsing goes on
        # (pyarrow releases the GIL): at most one in flight, so memory holds at most
        # two row groups; its error is raised here, at the next write or the end.
        writer = ThreadPoolExecutor(max_workers=1)
        flight: list[Future[None]] = []

        def flush() -> None:
            for done in flight:
                done.result()
            flight.clear()
            if pending:
                group = pa.Table.from_batches(pending, schema=schema)
                flight.append(writer.submit(parquet.write_table, group))
                pending.clear()

        def write(batch: pa.RecordBatch) -> None:
            # Batches gathered into row groups of ROW_GROUP_ROWS: a row group per
            # small batch would make the footer (held in memory) grow with the rows.
            pending.append(batch)
            if sum(b.num_rows for b in pending) >= ROW_GROUP_ROWS:
                flush()

        try:
            yield write
            flush()
            flush()  # waits for the last row group
        except BaseException:
            writer.shutdown(wait=True)
            # The output is abandoned (atomic_output drops it): no footer is written
            # to a stream that may have failed, now or when the writer is collected.
            parquet.is_open = False
            raise
        writer.shutdown(wait=True)
        parquet.close()
    elif fmt == "arrow":
        # pyarrow-stubs accept only IOBase, not typing.IO; any binary file object works.
        with pa.ipc.new_file(handle, schema) as ipc:  # type: ignore[arg-type]
            yield ipc.write_batch
    elif fmt == "csv":
        with pa_csv.CSVWriter(handle, _flat(empty_table(schema)).schema) as csv:
            yield lambda batch: csv.write_table(_flat(pa.Table.from_batches([batch])))
    elif fmt == "jsonl":
        yield lambda batch: _write_jsonl(batch, handle)
    else:
        raise NcclParseError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")


def _write_jsonl(batch: pa.RecordBatch, handle: IO[bytes]) -> None:
    maps = [f.name for f in batch.schema if pa.types.is_map(f.type)]
    for row in batch.to_pylist():
        for name in maps:  # Arrow maps come back as (key, value) pairs
            row[name] = dict(row[name] or ())
        handle.write(json.dumps(_jsonable(row)).encode() + b"\n")


def read_table(path: Path) -> pa.Table:
    """Read a ``measurements`` or ``runs`` table written by :func:`write_table`.

    Parquet or Arrow IPC only. Raises SchemaError when the table does not conform,
    InputError when the file cannot be read or is not a table of its format.
    """
    fmt = format_for(path)
    try:
        if fmt == "parquet":
            table = pq.read_table(path)
        elif fmt == "arrow":
            table = feather.read_table(path)
        else:
            raise NcclParseError(
                f"{path}: only Parquet and Arrow IPC tables can be read back"
            )
    except (OSError, pa.ArrowException) as exc:  # ArrowInvalid: not Parquet/Arrow
        raise InputError(f"{path}: cannot read table: {exc}") from exc
    known = (
        schema.RUNS_SCHEMA
        if "status" in table.column_names
        else (schema.MEASUREMENTS_SCHEMA)
    )
    return schema.conform(table, known)


def _flat(table: pa.Table) -> pa.Table:
    """CSV holds no lists or maps: render those columns as JSON text."""
    columns: list[pa.Array[Any] | pa.ChunkedArray[Any]] = []
    for field, column in zip(table.schema, table.columns, strict=True):
        if pa.types.is_map(field.type):
            values = [json.dumps(dict(v or ())) for v in column.to_pylist()]
            columns.append(array(values, pa.string()))
        elif pa.types.is_list(field.type):
            values = [json.dumps(_jsonable(v)) for v in column.to_pylist()]
            columns.append(array(values, pa.string()))
        else:
            columns.append(column)
    return pa.Table.from_arrays(columns, names=table.column_names)


def _jsonable(value: Any) -> Any:
    """Replace NaN (not valid JSON) by null, recursively."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and value != value:
        return None
    return value
