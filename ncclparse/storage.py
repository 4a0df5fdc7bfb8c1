"""Read and write result tables on disk, keeping the schema metadata.

Formats by file extension: ``.parquet``, ``.arrow``/``.feather``/``.ipc`` (Arrow IPC
file), ``.csv``, ``.jsonl``/``.ndjson`` (JSON Lines). Every write is atomic: the table
goes to a temporary file beside the target, which is renamed over it only when
complete, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
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
from ncclparse.arrays import array, empty_table
from ncclparse.errors import InputError, NcclParseError

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


# atomic_output's temporary files: `.<target name>.<random>.tmp`, beside the target.
_TEMP_SUFFIX = ".tmp"


@contextmanager
def atomic_output(path: Path, *, binary: bool) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; rename it to ``path`` on success.

    On any error (or interruption) the temporary file is removed and ``path`` is left
    as it was; only a process killed outright (SIGKILL, power loss) leaves it behind
    (see :func:`remove_stale_temporaries`). Raises NcclParseError when the directory
    cannot be written.
    """
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, temp_name = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=_TEMP_SUFFIX, dir=directory
        )
        # mkstemp makes the file private (0600); the output should get the mode any
        # new file gets, so that a shared report stays readable.
        os.chmod(temp_name, 0o666 & ~_umask())
    except OSError as exc:
        raise NcclParseError(f"{path}: cannot write: {exc.strerror}") from exc
    try:
        mode, encoding = ("wb", None) if binary else ("w", "utf-8")
        with os.fdopen(fd, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException as exc:
        Path(temp_name).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise NcclParseError(f"{path}: cannot write: {exc.strerror}") from exc
        raise


def remove_stale_temporaries(
    directory: Path, *, older_than: float, now: float | None = None
) -> tuple[Path, ...]:
    """Remove the temporary files :func:`atomic_output` left in ``directory`` that
    were not modified for ``older_than`` seconds; return those removed, sorted.

    Only the caller knows that no live writer still uses them (it holds the lock
    every writer there holds): the age is a second guard, for file systems whose
    locks do not reach other hosts. A file that cannot be removed is left.
    """
    now = time.time() if now is None else now
    removed = []
    for path in sorted(directory.glob(f".*{_TEMP_SUFFIX}")):
        try:
            if path.is_file() and now - path.stat().st_mtime > older_than:
                path.unlink()
                removed.append(path)
        except OSError:  # gone meanwhile, or not ours to remove
            continue
    return tuple(removed)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
