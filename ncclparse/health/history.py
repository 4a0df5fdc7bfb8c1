"""A history of results: a Parquet dataset partitioned by date (baselines from it are
:mod:`ncclparse.health.baselines`).

Layout: ``DIR/date=YYYY-MM-DD/<UTC time>-<ingest id>.parquet``, Hive-style, so pandas,
DuckDB, Spark and ``pyarrow.dataset`` read it as one table with a ``date`` column. Each
row is a ``measurements`` row plus the run's ``hosts`` and ``status``, the ingest's
``tags`` (map<string, string>), ``ingest_key``, ``ingest_id`` and ``ingested_at``.

Guarantees, and how they are kept:

* Idempotent: ``ingest_key`` is the SHA-256 of the source's bytes (of its parsed rows
  for standard input, which cannot be read twice). A source whose key is already in
  the dataset is skipped, whatever its name or tags this time.
* Concurrent ingests lose nothing: each ingest writes one new, uniquely named file and
  never rewrites one; the look-up of existing keys and the write happen under an
  exclusive ``fcntl`` lock on ``DIR/.ncclparse.lock``. Where locks do not work (some
  network file systems), two ingests of the same log may both write it;
  :func:`read_history` then keeps the rows of the earliest ingest of each key.
* Interrupted ingests leave no broken file: files are written to a hidden temporary
  name and renamed when complete (:func:`ncclparse.storage.atomic_output`); dataset
  readers skip names starting with ``.``. An ingest killed outright (``kill -9``)
  leaves its temporary file: the next ingest removes those untouched for
  :data:`STALE_AFTER` seconds (under the lock, so no live ingest owns them) and says
  how many (:attr:`IngestReport.removed`).
* A corrupt file is never built on: ingest reads every file of the dataset before
  adding to it, as :func:`read_history` (``check --history``) does, and refuses with
  a HistoryError naming the file.
* A history it cannot read, write or lock (a corrupt file, read-only, no permission,
  a file system without ``flock``) is a :class:`HistoryError` naming the directory and
  what to do, not a traceback: a fault of the machine or its setup, not of the logs
  (``check`` and ``ingest`` exit 4).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import os
import re
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from ncclparse import schema
from ncclparse.api import ParseResult
from ncclparse.columns import fill_null
from ncclparse.errors import InputError
from ncclparse.storage import atomic_output, remove_stale_temporaries

__all__ = [
    "HISTORY_FIELDS",
    "STALE_AFTER",
    "HistoryError",
    "IngestReport",
    "has_tags",
    "ingest",
    "read_history",
    "select_tags",
    "source_keys",
]

HISTORY_FIELDS: tuple[pa.Field[pa.DataType], ...] = (
    pa.field("hosts", pa.list_(pa.string())),
    pa.field("status", pa.string()),
    pa.field("tags", pa.map_(pa.string(), pa.string())),
    pa.field("ingest_key", pa.string(), nullable=False),
    pa.field("ingest_id", pa.string(), nullable=False),
    pa.field("ingested_at", pa.timestamp("us", tz="UTC"), nullable=False),
)
HISTORY_SCHEMA = pa.schema(
    [*schema.MEASUREMENTS_SCHEMA, *HISTORY_FIELDS],
    metadata=schema.arrow_metadata(schema.MEASUREMENTS_SCHEMA.metadata),
)
_PARTITIONING = ds.partitioning(pa.schema([("date", pa.string())]), flavor="hive")
# Reading with the full schema makes an empty dataset readable and lets files written
# by a later version (with added columns) be read alongside older ones.
_READ_SCHEMA = pa.schema([*HISTORY_SCHEMA, pa.field("date", pa.string())])
_LOCK = ".ncclparse.lock"
_SOURCE_PREFIX = re.compile(r"^Could not open Parquet input source '[^']*': ")
# An ingest writes one file in seconds; a temporary file untouched this long (seconds)
# whose ingest no longer holds the lock was left by a killed one.
STALE_AFTER = 3600.0


class HistoryError(InputError):
    """The history directory cannot be found, read, written or locked: a fault of the
    machine or its setup, not of the logs (``check`` and ``ingest`` exit 4)."""


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What :func:`ingest` did: sources added, skipped (already present) and empty
    (no measurement to store), the file written (None when nothing was new), the
    number of rows in it and the stale temporary files of killed ingests removed."""

    added: tuple[str, ...]
    skipped: tuple[str, ...]
    empty: tuple[str, ...]
    path: Path | None
    rows: int
    removed: tuple[Path, ...] = ()


def source_keys(result: ParseResult) -> dict[str, str]:
    """Return each parsed source's idempotence key: SHA-256 hex of its bytes.

    Standard input (``-``) and sources that are no longer readable are keyed by a hash
    of their parsed rows instead (without the ``source`` column), which is as stable
    as the parser.
    """
    keys = {}
    for name in result.accounting:
        path = Path(name)
        if name != "-" and path.is_file():
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
            keys[name] = digest.hexdigest()
        else:
            keys[name] = _rows_digest(result, name)
    return keys


def ingest(
    result: ParseResult,
    directory: Path,
    *,
    tags: Mapping[str, str] | None = None,
    date: dt.date | None = None,
    now: dt.datetime | None = None,
) -> IngestReport:
    """Append the sources of ``result`` not yet in the dataset at ``directory``.

    ``date`` names the partition (default: today in UTC); ``now`` the ingest time.
    Creates ``directory`` if needed. Raises HistoryError when it cannot be written or
    locked, or when a file of it cannot be read (nothing is added then).
    """
    now = now or dt.datetime.now(dt.UTC)
    date = date or now.date()
    keys = source_keys(result)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HistoryError(f"{directory}: cannot create: {exc.strerror}") from exc
    with_rows = set(pc.unique(result.measurements["source"]).to_pylist())
    empty = tuple(s for s in keys if s not in with_rows)
    with _locked(directory):
        removed = tuple(
            path
            for partition in sorted(directory.glob("date=*"))
            for path in remove_stale_temporaries(partition, older_than=STALE_AFTER)
        )
        present = _present_keys(directory)
        added: dict[str, str] = {}  # key -> source: one log given twice is added once
        for source, key in keys.items():
            if source in with_rows and key not in present:
                added.setdefault(key, source)
        skipped = tuple(s for s in keys if s in with_rows and s not in added.values())
        if not added:
            return IngestReport((), skipped, empty, None, 0, removed)
        ingest_id = uuid.uuid4().hex[:16]
        table = _rows(result, tuple(added.values()), keys, dict(tags or {}), now)
        table = table.set_column(
            table.schema.get_field_index("ingest_id"),
            "ingest_id",
            pa.array([ingest_id] * table.num_rows, pa.string()),
        )
        partition = directory / f"date={date.isoformat()}"
        partition.mkdir(exist_ok=True)
        path = partition / f"{now:%Y%m%dT%H%M%S}-{ingest_id}.parquet"
        with atomic_output(path, binary=True) as handle:
            pq.write_table(table, handle)
    return IngestReport(
        tuple(added.values()), skipped, empty, path, table.num_rows, removed
    )


def read_history(
    directory: Path,
    *,
    tags: Mapping[str, str] | None = None,
    missing_ok: bool = False,
) -> pa.Table:
    """Read the dataset at ``directory`` as one table (HISTORY_SCHEMA + ``date``).

    Keeps of each ``ingest_key`` only the rows of its earliest ingest, then only rows
    whose tags include every ``tags`` item (:func:`select_tags`). An empty history
    is an empty table with every column. Raises HistoryError when the directory does
    not exist (unless ``missing_ok``: then it reads as empty) or holds a file that is
    not readable Parquet (naming it).
    """
    if not directory.is_dir():
        if missing_ok and not directory.exists():
            return _READ_SCHEMA.empty_table()
        raise HistoryError(f"{directory}: history directory not found")
    try:
        dataset = ds.dataset(directory, format="parquet", partitioning=_PARTITIONING)
        table = dataset.to_table()
    except (OSError, pa.ArrowException) as exc:
        raise _unreadable(directory, exc) from exc
    if table.num_rows == 0:
        return _READ_SCHEMA.empty_table()
    return select_tags(_dedupe(table), tags)


def has_tags(table: pa.Table, tags: Mapping[str, str] | None) -> pa.ChunkedArray[Any]:
    """Per row of a history table: True when its tags include every ``tags`` item."""
    matched = pa.chunked_array([np.ones(table.num_rows, dtype=bool)], pa.bool_())
    for key, value in (tags or {}).items():
        found = pc.list_element(pc.map_lookup(table["tags"], key, "all"), 0)
        matched = pc.and_(matched, fill_null(pc.equal(found, pa.scalar(value)), False))
    return matched


def select_tags(table: pa.Table, tags: Mapping[str, str] | None) -> pa.Table:
    """The rows of a history table whose tags include every ``tags`` item."""
    if not tags or table.num_rows == 0:
        return table
    return table.filter(has_tags(table, tags))


def _rows(
    result: ParseResult,
    sources: tuple[str, ...],
    keys: Mapping[str, str],
    tags: dict[str, str],
    now: dt.datetime,
) -> pa.Table:
    measurements = result.measurements.filter(
        pc.is_in(result.measurements["source"], pa.array(sources, pa.string()))
    )
    # Arrow joins do not carry list columns: look each row's run up by position.
    runs = result.runs
    position = {
        (source, run): i
        for i, (source, run) in enumerate(
            zip(runs["source"].to_pylist(), runs["run"].to_pylist(), strict=True)
        )
    }
    index = [
        position[pair]
        for pair in zip(
            measurements["source"].to_pylist(),
            measurements["run"].to_pylist(),
            strict=True,
        )
    ]
    picked = runs.select(["hosts", "status"]).take(pa.array(index, pa.int64()))
    joined = measurements.append_column("hosts", picked["hosts"]).append_column(
        "status", picked["status"]
    )
    n = joined.num_rows
    sources_of = cast("list[str]", joined["source"].to_pylist())  # never null
    key_of = pa.array([keys[s] for s in sources_of], pa.string())
    extra = {
        "tags": pa.array([list(tags.items())] * n, HISTORY_SCHEMA.field("tags").type),
        "ingest_key": key_of,
        "ingest_id": pa.array([""] * n, pa.string()),
        "ingested_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
    }
    columns = {name: joined[name] for name in (*schema.MEASUREMENT_COLUMNS, "hosts")}
    columns["status"] = joined["status"]
    columns.update(extra)
    table = pa.Table.from_pydict(columns, schema=HISTORY_SCHEMA)
    return table


def _present_keys(directory: Path) -> set[str]:
    """The keys in the dataset, reading every column of every file (in batches): a
    file that ``check --history`` could not read is found here, before an ingest
    adds to the history (reading only ``ingest_key`` would pass corrupt pages)."""
    keys: set[str] = set()
    try:
        for batch in _dataset(directory).to_batches():
            found = pc.unique(batch["ingest_key"]).to_pylist()
            keys.update(cast("list[str]", found))  # never null
    except (OSError, pa.ArrowException) as exc:
        raise _unreadable(directory, exc) from exc
    return keys


def _unreadable(directory: Path, exc: Exception) -> HistoryError:
    """The error for a dataset that cannot be read, naming the first file that
    cannot be (read one by one: the dataset's own error seldom names it)."""
    files = sorted(
        path
        for path in directory.rglob("*")
        if path.is_file()
        and not any(p.startswith((".", "_")) for p in path.relative_to(directory).parts)
    )
    for path in files:
        try:
            pq.read_table(path)
        except (OSError, pa.ArrowException) as error:
            return HistoryError(
                f"{directory}: cannot read history: {path} is not a readable Parquet "
                f"file ({_first_line(error)}); move it out of the history directory "
                "(or restore it from a backup) and run again"
            )
    return HistoryError(f"{directory}: cannot read history: {_first_line(exc)}")


def _first_line(exc: Exception) -> str:
    """The error's first line, without the path pyarrow repeats (the message has it)."""
    text = str(exc).strip()
    if not text:
        return repr(exc)
    return _SOURCE_PREFIX.sub("", text.splitlines()[0])


def _dataset(directory: Path) -> ds.Dataset:
    return ds.dataset(
        directory, schema=_READ_SCHEMA, format="parquet", partitioning=_PARTITIONING
    )


def _dedupe(table: pa.Table) -> pa.Table:
    ingests = pd.DataFrame(
        {
            "key": table["ingest_key"].to_pandas(),
            "id": table["ingest_id"].to_pandas(),
            "at": table["ingested_at"].to_pandas(),
        }
    ).drop_duplicates()
    first = ingests.sort_values(["at", "id"]).drop_duplicates("key")
    if len(first) == len(ingests):
        return table
    wanted = pa.array((first["key"] + "/" + first["id"]).tolist(), pa.string())
    # pyarrow-stubs want all arrays or all scalars; Arrow broadcasts the separator.
    pair = pc.binary_join_element_wise(  # type: ignore[call-overload]
        table["ingest_key"], table["ingest_id"], "/"
    )
    return table.filter(pc.is_in(pair, wanted))


def _rows_digest(result: ParseResult, name: str) -> str:
    digest = hashlib.sha256()
    for table in (result.runs, result.measurements):
        same = pc.equal(table["source"], pa.scalar(name))
        part = table.filter(same).drop_columns(["source"])
        for row in part.to_pylist():
            digest.update(repr(sorted(row.items())).encode())
    return "rows-" + digest.hexdigest()


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on the dataset for the look-up-then-write step.

    Raises HistoryError when the lock file cannot be opened for writing (a read-only
    directory or file system) or locked (no ``flock`` there).
    """
    try:
        handle = (directory / _LOCK).open("a")
    except OSError as exc:
        raise HistoryError(
            f"{directory}: cannot ingest: the history directory is not writable "
            f"({_strerror(exc)}); make it writable for this user, or give a "
            "directory on a writable file system"
        ) from exc
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        except OSError as exc:
            raise HistoryError(
                f"{directory}: cannot ingest: cannot lock {_LOCK} ({_strerror(exc)}); "
                "its file system does not provide file locks (e.g. NFS without a "
                "lock service, Lustre mounted without -o flock): keep the history on "
                "a file system with locks, such as a local disk"
            ) from exc
        try:
            yield
        finally:
            with suppress(OSError):  # closing the file releases the lock anyway
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _strerror(exc: OSError) -> str:
    """``exc.strerror``, or the system's text for its errno when it has none."""
    if exc.strerror:
        return exc.strerror
    return os.strerror(exc.errno) if exc.errno else str(exc)
