"""One side of ``compare``: its measurements, each row named by its run's identity.

A run's identity is what the nightly runs it as: its host set (the hosts of its
ranks, sorted, joined by "_": ``node01_node03``; host names have no "_"), or, when
the log names no host, the log's path within the directory given (its file name for
a file; a table's ``source``). Logs are read in bounded memory: the repeats of a
point are merged, as ``report`` and ``analyze`` do
(:class:`~ncclparse.inputs.points.PointTable`), so a long ``-N`` log costs its
points, not its rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ncclparse import schema
from ncclparse._arrow import distinct_rows, key_codes
from ncclparse.errors import InputError, first_line
from ncclparse.inputs.parsing import parse_sources
from ncclparse.inputs.points import ANALYZE_LIMITS, PointTable
from ncclparse.inputs.walk import Filters, expand

__all__ = ["IDENTITY", "load_measurements", "load_side", "read_side", "run_identity"]

IDENTITY = "identity"  # the column load_side adds (health.compare reads it)


def run_identity(hosts: Iterable[str | None] | None) -> str:
    """The host set of a run's ranks ("node01_node03"); "" when none is known."""
    return "_".join(sorted({h for h in hosts or () if h}))


def load_side(path: str, filters: Filters | None = None, *, jobs: int = 1) -> pa.Table:
    """The ``measurements`` of ``path`` (as
    :func:`load_measurements` reads it: logs, a table or a
    history) with an :data:`IDENTITY` column (see the module doc).

    Raises NcclParseError naming the input when it cannot be read, and
    TooManyPoints past ANALYZE_LIMITS' distinct points.
    """
    points = PointTable(ANALYZE_LIMITS)
    table, runs = read_side(path, filters, jobs=jobs, on_batch=points.add)
    if runs is None:  # a table or a history: already in memory
        names = _identities(table) if "hosts" in table.column_names else None
        table = table.select(list(schema.MEASUREMENT_COLUMNS))
        return table.append_column(
            IDENTITY, table["source"] if names is None else names
        )
    table = points.table()
    root = path if os.path.isdir(path) else os.path.dirname(path)
    identity = {
        (source, run): run_identity(hosts) or _relative(str(source), root)
        for source, run, hosts in zip(
            runs["source"].to_pylist(),
            runs["run"].to_pylist(),
            runs["hosts"].to_pylist(),
            strict=True,
        )
    }
    named = [
        identity.get((source, run), source)
        for source, run in zip(
            table["source"].to_pylist(), table["run"].to_pylist(), strict=True
        )
    ]
    return table.append_column(IDENTITY, pa.array(named, pa.string()))


def _identities(table: pa.Table) -> pa.DictionaryArray[Any, Any]:
    """Each row's run identity, worked out once per run (``ingest_key`` and
    ``run``: a history's rows carry their run's hosts): its hosts, else its
    source."""
    first, run_of = distinct_rows([key_codes(table[k]) for k in ("ingest_key", "run")])
    names = [
        run_identity(hosts) or str(source)
        for hosts, source in zip(
            table["hosts"].take(first).to_pylist(),
            table["source"].take(first).to_pylist(),
            strict=True,
        )
    ]
    distinct, code = np.unique(np.asarray(names, dtype=object), return_inverse=True)
    return pa.DictionaryArray.from_arrays(
        pa.array(code.ravel()[run_of], pa.int32()),
        pa.array(distinct.tolist(), pa.string()),
    )


def _relative(source: str, root: str) -> str:
    """``source``'s path within ``root`` ("/" separated), else itself."""
    try:
        relative = os.path.relpath(source, root or ".")
    except ValueError:  # another drive on Windows
        return source
    if relative.startswith(".."):
        return source
    return Path(relative).as_posix()


def _is_dir(path: Path) -> bool:
    """Whether ``path`` is a directory (no: a name the OS refuses, too long)."""
    try:
        return path.is_dir()
    except OSError:
        return False


def load_measurements(
    path: str, filters: Filters | None = None, *, jobs: int = 1
) -> pa.Table:
    """Read one side: a Parquet/Arrow table, a history directory, or benchmark logs
    (``filters`` select the files of a directory of logs; ``jobs`` worker processes
    parse them, as :func:`ncclparse.parse_many`).

    Raises NcclParseError (InputError, SchemaError, UnknownLogFormatError) naming the
    input when it cannot be read.
    """
    table, _ = read_side(path, filters, jobs=jobs)
    return table.select(list(schema.MEASUREMENT_COLUMNS))


def read_side(
    path: str,
    filters: Filters | None = None,
    *,
    jobs: int = 1,
    on_batch: Callable[[pa.RecordBatch], None] | None = None,
) -> tuple[pa.Table, pa.Table | None]:
    """As :func:`load_measurements`, with what names each run: ``(table, runs)``.
    A table or a history: ``runs`` is None and a history's rows keep their
    ``hosts`` and ``ingest_key`` columns. Logs: ``runs`` is their ``runs`` table,
    and their rows go to ``on_batch`` when given (the table is then empty)."""
    # Imported here: they are not needed to read a table.
    from ncclparse.store.history import read_history
    from ncclparse.store.locations import is_uri, location
    from ncclparse.store.tables import read_table

    kept = [*schema.MEASUREMENT_COLUMNS, "hosts", "ingest_key"]
    candidate = Path(path)
    if is_uri(path):
        where = location(path)  # an object store: a history prefix, or logs
        try:
            listed = where.listing()
        except (OSError, pa.ArrowException) as exc:
            raise InputError(f"{path}: cannot list: {first_line(exc)}") from exc
        if any(i.base_name.startswith("date=") for i in listed):
            return read_history(where).select(kept), None
    elif candidate.suffix.lower() in (".parquet", ".pq", ".arrow", ".feather", ".ipc"):
        return read_table(candidate), None
    elif _is_dir(candidate) and any(candidate.glob("date=*")):
        return read_history(candidate).select(kept), None

    items = list(expand((path,), filters=filters))
    errors = [e for e in items if isinstance(e, Exception)]
    if errors:
        raise errors[0]
    parsed = (e for e in items if not isinstance(e, Exception))
    result = parse_sources(parsed, on_batch, jobs, None)
    if result.failures:
        raise result.failures[0]
    return result.measurements, result.runs
