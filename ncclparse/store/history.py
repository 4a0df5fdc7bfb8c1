"""A history of results: a Parquet dataset partitioned by date (baselines from it are
:mod:`ncclparse.health.baselines`).

Layout: ``DIR/date=YYYY-MM-DD/<UTC time>-<ingest id>.parquet``, Hive-style, so pandas,
DuckDB, Spark and ``pyarrow.dataset`` read it as one table with a ``date`` column. Each
row is a ``measurements`` row plus the run's ``hosts`` and ``status``, the ingest's
``tags`` (map<string, string>), ``ingest_key``, ``ingest_id`` and ``ingested_at``.
``DIR`` is a local directory or an object-store URI (``s3://bucket/history``;
:mod:`ncclparse.store.locations`).

Guarantees, and how they are kept:

* Idempotent: ``ingest_key`` is the SHA-256 of the source's bytes (of its parsed rows
  for standard input and remote sources, which are not read twice). A source whose
  key is in a partition within :data:`LOOKBACK_DAYS` of the ingest's date is
  skipped, whatever its name or tags this time; looking only there keeps an
  ingest's cost independent of the history's size. A log ingested again later is
  stored again and read once (below).
* Concurrent ingests lose nothing: each ingest writes one new, uniquely named file and
  never rewrites one; on a local file system the look-up of existing keys and the
  write happen under an exclusive ``fcntl`` lock on ``DIR/.ncclparse.lock``, waited
  for up to a timeout. Object stores have no locks, and neither has a file system
  mounted without them when the user says so (``lock=False``): two ingests of the
  same log may then both write it, and every reader keeps the rows of the earliest
  ingest of each key.
* Interrupted ingests leave no broken file: local files are written to a hidden
  temporary name and renamed when complete
  (:func:`ncclparse.store.atomic.atomic_output`), objects are uploaded whole;
  dataset readers skip names starting with ``.``. An ingest killed outright
  (``kill -9``) leaves its temporary file: the next locked ingest removes those
  untouched for :data:`STALE_AFTER` seconds and says how many
  (:attr:`IngestReport.removed`).
* Compaction never counts a row twice: :func:`compact` publishes the merged file
  before it removes the files it replaces, so a compaction cut short (or two at once
  on an object store) leaves an ingest's rows whole in two files; every reader takes
  each ingest's rows from the first file by path that holds them (:func:`_copies`;
  docs/nightly.md's SQL does the same), and the next compaction merges what is
  there into one file.
* A corrupt file is not built on: ingest reads every column of the files it looks
  keys up in, and ``check`` the columns it uses of every file; either refuses with a
  HistoryError naming the file.
* A history it cannot read, write or lock (a corrupt file, read-only, no permission,
  a file system without ``flock``, a lock held past the timeout) is a
  :class:`HistoryError` naming the directory and what to do, not a traceback: a fault
  of the machine or its setup, not of the logs (``check`` and ``ingest`` exit 4).
* Reading scales with what is asked: :func:`scan_history` reads a few columns of
  every file for the account of runs and the baseline's rows only from the
  partitions of the window (a year of nightly history of 1,000 logs: see
  ``benchmarks/README.md``); :func:`compact` merges a partition's files into one.
"""

from __future__ import annotations

import base64
import datetime as dt
import errno
import fcntl
import hashlib
import itertools
import os
import re
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.ipc
import pyarrow.parquet as pq

from ncclparse import schema
from ncclparse._arrow import fill_null, key_codes
from ncclparse.errors import InputError, NcclParseError, first_line
from ncclparse.parsers import ParseResult
from ncclparse.store.atomic import remove_stale_temporaries
from ncclparse.store.locations import Location, location
from ncclparse.store.spool import Spool

__all__ = [
    "DATE_AHEAD",
    "HISTORY_FIELDS",
    "LOCK_TIMEOUT",
    "LOOKBACK_DAYS",
    "STALE_AFTER",
    "CompactReport",
    "HistoryError",
    "HistoryView",
    "IngestReport",
    "check_night_date",
    "compact",
    "has_tags",
    "history_exists",
    "ingest",
    "read_history",
    "scan_history",
    "select_tags",
    "source_keys",
    "usable",
    "view_of",
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
# Scans read repeated text as dictionaries: a year of ingest keys as plain strings
# is GBs. Files are read into the scan schema whatever types they were written with.
_DICTIONARY_COLUMNS = (
    "tool",
    "collective",
    "dtype",
    "redop",
    "placement",
    "device",
    "status",
    "wrong_kind",
    "ingest_key",
    "ingest_id",
)
_FORMAT = ds.ParquetFileFormat(
    read_options=ds.ParquetReadOptions(dictionary_columns=list(_DICTIONARY_COLUMNS))
)
_SCAN_SCHEMA = pa.schema(
    [
        pa.field(f.name, pa.dictionary(pa.int32(), f.type), f.nullable)
        if f.name in _DICTIONARY_COLUMNS
        else f
        for f in _READ_SCHEMA
    ]
)
_LOCK = ".ncclparse.lock"
_SOURCE_PREFIX = re.compile(r"^Could not open Parquet input source '[^']*': ")
_PARTITION = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")
_DATE_IN_PATH = re.compile(r"(?:^|/)date=(\d{4}-\d{2}-\d{2})/")
# The name of the file an ingest writes: its UTC time and ingest id.
_INGEST_FILE = re.compile(r"^\d{8}T\d{6}-([0-9a-f]{16})\.parquet$")
# An ingest writes one file in seconds; a temporary file untouched this long (seconds)
# whose ingest no longer holds the lock was left by a killed one.
STALE_AFTER = 3600.0
# How long (seconds) an ingest waits for another one's lock before giving up.
LOCK_TIMEOUT = 600.0
# An ingest looks its keys up in the partitions this many days either side of its
# date: a log is re-ingested within days (a re-run job), and the look-up must not
# grow with the history.
LOOKBACK_DAYS = 7
# How far ahead of today (UTC) a night's date may be: tomorrow is still tonight in a
# time zone ahead of UTC. An ingest refuses dates beyond it (check_night_date); a
# history run dated beyond it is not tonight's.
DATE_AHEAD = dt.timedelta(days=1)
# Batches of the scans: large enough for Arrow's kernels, small for memory.
_BATCH = 1 << 17
# What the account of runs reads of every file, and the baseline of the window.
_RUN_COLUMNS = (
    "ingest_key",
    "ingest_id",
    "ingested_at",
    "run",
    "date",
    "status",
    "size_bytes",
    "wrong_kind",
    "wrong",
    "cputime",
    "grouped",
)
HISTORY_COLUMNS = (
    *schema.SHAPE_KEYS,
    "size_bytes",
    "time_us",
    "algbw_gbps",
    "busbw_gbps",
    "grouped",
    "cputime",
    "wrong_kind",
    "wrong",
    "device",
    "status",
    "run",
    "ingest_key",
    "ingest_id",
    "ingested_at",
    "date",
)


class HistoryError(InputError):
    """The history cannot be found, read, written or locked: a fault of the machine
    or its setup, not of the logs (``check`` and ``ingest`` exit 4)."""


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What :func:`ingest` did: sources added, skipped (already present) and empty
    (no measurement to store), the file written (``written``: its path or URI, None
    when nothing was new; ``path``: the same as a Path when local), the number of
    rows in it and the stale temporary files of killed ingests removed."""

    added: tuple[str, ...]
    skipped: tuple[str, ...]
    empty: tuple[str, ...]
    path: Path | None
    rows: int
    removed: tuple[Path, ...] = ()
    written: str | None = None


@dataclass(frozen=True, slots=True)
class HistoryView:
    """What a check needs of a history, read without holding all of it.

    ``runs``: one row per run of the whole history (columns ``ingest_key``,
    ``ingest_id``, ``run``, ``date``, ``ingested_at``, ``usable``: has a row a
    baseline may use, see :func:`usable`), the later ingests of a log left out;
    ``tags``: each ingest's tags by ``ingest_id``; ``dates``: the history's
    dates (ISO) that were scanned, newest first, whose rows :meth:`rows_of` reads.
    """

    runs: pa.Table
    tags: dict[str, dict[str, str]]
    dates: tuple[str, ...]
    read: Callable[[str, tuple[str, ...]], pa.Table] = field(repr=False)
    later: pa.Array[Any] = field(repr=False)

    def rows_of(
        self,
        date: str,
        ingests: Collection[str] | None = None,
        extra: tuple[str, ...] = (),
    ) -> pa.Table:
        """The rows (:data:`HISTORY_COLUMNS` and the ``extra`` columns of
        HISTORY_SCHEMA, e.g. ``hosts``) of ``date``, of the ``ingests`` given (all
        when None), each log's earliest ingest only. Raises HistoryError when a
        file of that date cannot be read."""
        rows = self.read(date, extra)
        if ingests is not None:
            wanted = pa.array(sorted(ingests), pa.string())
            rows = rows.filter(pc.is_in(_text(rows["ingest_id"]), value_set=wanted))
        return _without(rows, self.later)


def source_keys(result: ParseResult, spool: Spool | None = None) -> dict[str, str]:
    """Return each parsed source's idempotence key: SHA-256 hex of its bytes.

    Standard input (``-``) and sources that are not local files (any more) are keyed
    by a hash of their parsed rows instead (without the ``source`` column), which is
    as stable as the parser; the measurements are read from ``spool`` when given
    (``result`` parsed with ``on_batch``).
    """
    keys = {}
    for name in result.accounting:
        path = Path(name)
        if name != "-" and "://" not in name and path.is_file():
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
            keys[name] = digest.hexdigest()
        else:
            keys[name] = _rows_digest(result, name, spool)
    return keys


def check_night_date(date: dt.date, now: dt.datetime) -> None:
    """Raise ValueError unless ``date`` is at most :data:`DATE_AHEAD` past the UTC
    date of ``now``: a night dated years ahead would never age out of the baseline
    window and never be seen as a stale log. ``ingest`` and ``ingest --date`` both
    refuse with this message."""
    today = now.astimezone(dt.UTC).date() if now.tzinfo else now.date()
    latest = today + DATE_AHEAD
    if date > latest:
        raise ValueError(
            f"{date.isoformat()} is in the future: at most {latest.isoformat()} "
            "(today, UTC, and one day ahead for time zones)"
        )


def ingest(
    result: ParseResult,
    directory: Path | str | Location,
    *,
    tags: Mapping[str, str] | None = None,
    date: dt.date | None = None,
    now: dt.datetime | None = None,
    lock: bool = True,
    lock_timeout: float = LOCK_TIMEOUT,
    spool: Spool | None = None,
) -> IngestReport:
    """Append the sources of ``result`` not yet in the dataset at ``directory`` (a
    path, URI or Location).

    ``spool`` holds the measurements when ``result`` was parsed with ``on_batch``
    (its table is then empty): rows are read from it and written batch by batch, so
    memory does not grow with the rows of a log.

    ``date`` names the partition (default: today in UTC); ``now`` the ingest time.
    Raises ValueError (:func:`check_night_date`) for a ``date`` beyond tomorrow.
    Creates a local ``directory`` if needed, and nothing when no source has a row.
    On a local file system the ingest holds the history's lock (waiting up to
    ``lock_timeout`` seconds) unless ``lock`` is False; object stores are never
    locked. Raises HistoryError when the history
    cannot be written or locked, or a file it reads cannot be (nothing is added).
    """
    where = _where(directory)
    now = now or dt.datetime.now(dt.UTC)
    date = date or now.date()
    check_night_date(date, now)
    keys = source_keys(result, spool)
    if spool is None:
        with_rows = set(pc.unique(result.measurements["source"]).to_pylist())
    else:
        with_rows = set(spool.sources)
    empty = tuple(s for s in keys if s not in with_rows)
    if not with_rows:
        # Nothing to add: no directory is made, so "no history directory" still means
        # "nothing ingested yet" (the nightly recipe's --first-night test).
        return IngestReport((), (), empty, None, 0, ())
    try:
        where.make_directory()
    except OSError as exc:
        raise HistoryError(f"{where.name}: cannot create: {_strerror(exc)}") from exc
    with _locked(where, lock, lock_timeout):
        removed = _remove_stale(where) if lock else ()
        present = _present_keys(where, date)
        added: dict[str, str] = {}  # key -> source: one log given twice is added once
        for source, key in keys.items():
            if source in with_rows and key not in present:
                added.setdefault(key, source)
        skipped = tuple(s for s in keys if s in with_rows and s not in added.values())
        if not added:
            return IngestReport((), skipped, empty, None, 0, removed)
        ingest_id = uuid.uuid4().hex[:16]
        additions = _Additions(
            result.runs, {s: keys[s] for s in added.values()}, tags, ingest_id, now
        )
        measurements = (
            spool.batches if spool is not None else result.measurements.to_batches
        )
        partition = f"date={date.isoformat()}"
        relative = f"{partition}/{now:%Y%m%dT%H%M%S}-{ingest_id}.parquet"
        try:
            where.make_directory(partition)
            with where.output(relative) as handle:
                rows = _write(handle, measurements, additions)
        # A local file that cannot be written is a NcclParseError (atomic_output):
        # disk full or read-only, the machine's fault like the others (exit 4).
        except (OSError, pa.ArrowException, NcclParseError) as exc:
            raise HistoryError(
                f"{where.name}: cannot ingest: cannot write {relative}: "
                f"{_first_line(exc)}"
            ) from exc
    written = where.uri(where.path(relative))
    path = Path(where.path(relative)) if where.local is not None else None
    return IngestReport(
        tuple(added.values()), skipped, empty, path, rows, removed, written
    )


def read_history(
    directory: Path | str | Location,
    *,
    tags: Mapping[str, str] | None = None,
    missing_ok: bool = False,
) -> pa.Table:
    """Read the whole dataset at ``directory`` as one table (HISTORY_SCHEMA +
    ``date``): for notebooks and small histories (``check`` reads what it needs with
    :func:`scan_history`).

    Keeps of each ``ingest_key`` only the rows of its earliest ingest, then only rows
    whose tags include every ``tags`` item (:func:`select_tags`). An empty history
    is an empty table with every column. Raises HistoryError when the directory does
    not exist (unless ``missing_ok``: then it reads as empty) or holds a file that is
    not readable Parquet (naming it).
    """
    where = _where(directory)
    if not _exists(where, missing_ok):
        return _READ_SCHEMA.empty_table()
    files = _data_files(where)
    try:
        table = _read(where, files, _copies(where, files))
    except (OSError, pa.ArrowException) as exc:
        raise _unreadable(where, exc, files) from exc
    if table.num_rows == 0:
        return _READ_SCHEMA.empty_table()
    table = _plain(table)
    _, later = _merge_runs([_run_rows(table)])
    return select_tags(_without(table, later), tags)


def scan_history(
    directory: Path | str | Location,
    *,
    since: str | None = None,
    with_tags: bool = True,
    missing_ok: bool = False,
) -> HistoryView:
    """What a check needs of the dataset at ``directory`` (:class:`HistoryView`),
    in bounded memory: a few columns of every file, in batches, for the account of
    runs; the baseline's columns only from the partitions dated ``since`` (ISO) or
    later. ``with_tags=False`` leaves the tags unread (all runs count as having
    none). Raises HistoryError as :func:`read_history` does."""
    where = _where(directory)
    if not _exists(where, missing_ok):
        return view_of(_READ_SCHEMA.empty_table())
    files = _data_files(where)
    parts: list[pa.Table] = []
    tags: dict[str, dict[str, str]] = {}
    unsummarised = []
    try:
        footers = {path: _runs_of(where, path) for path in files}
        copies = _copies(where, files, footers)
        for path in files:
            runs = footers[path]
            if runs is None:
                unsummarised.append(path)
                continue
            if path in copies:
                copied = pc.is_in(runs["ingest_id"], value_set=copies[path])
                runs = runs.filter(pc.invert(copied))
            parts.append(runs)
            if with_tags:
                _collect_tags(runs, tags)
        if unsummarised:
            dataset = _dataset(where, unsummarised, scan=True)
            columns = [*_RUN_COLUMNS, *(("tags",) if with_tags else ())]
            for batch in _batches(dataset, columns, copies):
                parts.append(_run_rows(batch))
                if with_tags:
                    _collect_tags(batch, tags)
    except (OSError, pa.ArrowException) as exc:
        raise _unreadable(where, exc, files) from exc
    by_date: dict[str, list[str]] = {}
    for path in files:
        found = _DATE_IN_PATH.search(path[len(where.root) :])
        if found and (since is None or found.group(1) >= since):
            by_date.setdefault(found.group(1), []).append(path)

    def read(date: str, extra: tuple[str, ...]) -> pa.Table:
        try:
            table = _read(
                where, by_date[date], copies, [*HISTORY_COLUMNS, *extra], scan=True
            )
        except (OSError, pa.ArrowException) as exc:
            raise _unreadable(where, exc, by_date[date]) from exc
        return table.unify_dictionaries()

    dates = tuple(sorted(by_date, reverse=True))
    runs, later = _merge_runs(parts)
    return HistoryView(runs, tags, dates, read, later)


def view_of(table: pa.Table) -> HistoryView:
    """The :class:`HistoryView` of a history table already in memory (as
    :func:`read_history` gives; any rows it holds of later ingests of a log are
    left out)."""
    table = _plain(table)
    tags: dict[str, dict[str, str]] = {}
    for batch in table.to_batches():
        _collect_tags(batch, tags)
    runs, later = _merge_runs([_run_rows(table)] if table.num_rows else [])
    dates = sorted(set(cast("list[str]", table["date"].to_pylist())), reverse=True)

    def read(date: str, extra: tuple[str, ...]) -> pa.Table:
        rows = table.filter(pc.equal(table["date"], pa.scalar(date)))
        return rows.select([*HISTORY_COLUMNS, *extra])

    return HistoryView(runs, tags, tuple(dates), read, later)


def usable(table: pa.Table | pa.RecordBatch) -> pa.ChunkedArray[Any] | pa.Array[Any]:
    """Per row of history: may a baseline use it? A complete run's row of a size
    above 0, without a ``#wrong`` count above 0, not a CPU time nor a grouped row."""
    text = _text(table["wrong_kind"])
    wrong = pc.and_(
        pc.equal(text, pa.scalar("count")), pc.greater(table["wrong"], pa.scalar(0))
    )
    bad = pc.or_(
        fill_null(wrong, False),
        pc.or_(fill_null(table["cputime"], False), fill_null(table["grouped"], False)),
    )
    complete = pc.equal(_text(table["status"]), pa.scalar("complete"))
    sized = pc.greater(table["size_bytes"], pa.scalar(0))
    kept = fill_null(pc.and_(pc.and_(complete, sized), pc.invert(bad)), False)
    return cast("pa.ChunkedArray[Any] | pa.Array[Any]", kept)


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


@dataclass(frozen=True, slots=True)
class CompactReport:
    """What :func:`compact` did: per partition merged, the files it replaced and the
    one written (partitions already in one file are left as they are), the rows
    written, and the stale temporary files of killed writers removed."""

    merged: tuple[tuple[str, tuple[str, ...], str], ...]
    rows: int
    removed: tuple[Path, ...] = ()


# How often a compaction lists a partition again when files it listed are gone.
_ATTEMPTS = 5


def compact(
    directory: Path | str | Location,
    *,
    before: dt.date | None = None,
    lock: bool = True,
    lock_timeout: float = LOCK_TIMEOUT,
) -> CompactReport:
    """Merge the files of each partition (dated before ``before``, default: all)
    into one, sorted by series, keeping every row as it was (a log ingested twice
    included: readers still keep each key's earliest ingest) and each ingest's rows
    once.

    The merged file is written whole before the files it replaces are removed. A
    compaction stopped in between (killed, a lost connection) leaves an ingest's
    rows in two files, which every reader takes from one (:func:`_copies`); the next
    compaction merges them into one file again. On an object store, where nothing
    is locked, two compactions at once each write a merged file and remove what the
    other did: the rows are the same either way, a file gone meanwhile makes a
    compaction list the partition again, and the next compaction leaves one file.
    Locked as an ingest is. Raises HistoryError when a file cannot be read or the
    history written.
    """
    where = _where(directory)
    _exists(where, missing_ok=False)
    merged = []
    total = 0
    with _locked(where, lock, lock_timeout, doing="compact"):
        removed = _remove_stale(where) if lock else ()
        try:
            names = _partition_names(where)
        except (OSError, pa.ArrowException) as exc:
            raise HistoryError(
                f"{where.name}: cannot list the history: {_first_line(exc)}"
            ) from exc
        for name in names:
            if before is not None and name[5:] >= before.isoformat():
                continue
            done = _compact_partition(where, name)
            if done is not None:
                merged.append(done[0])
                total += done[1]
    return CompactReport(tuple(merged), total, removed)


def _compact_partition(
    where: Location, name: str
) -> tuple[tuple[str, tuple[str, ...], str], int] | None:
    """Merge the files of partition ``name`` into one: what was replaced by what,
    and the rows written; None when it is one file already."""
    files = _listed(where, name)
    for _ in range(_ATTEMPTS):
        try:
            # One file is left as it is, unless it predates footer summaries.
            if not files or (len(files) == 1 and _runs_of(where, files[0]) is not None):
                return None
            table = _read(where, files, _copies(where, files))
            break
        except (OSError, pa.ArrowException) as exc:
            now = _listed(where, name)
            if set(files) <= set(now):  # nothing gone: a file that cannot be read
                raise _unreadable(where, exc, files) from exc
            files = now  # another compaction replaced some: merge what is there now
    else:
        raise HistoryError(
            f"{where.name}: cannot compact {name}: its files changed {_ATTEMPTS} "
            "times while it was read; run it again when no other compaction runs"
        )
    table = _plain(table).drop_columns(["date"])
    table = table.sort_by([("ingested_at", "ascending"), ("ingest_id", "ascending")])
    relative = f"{name}/compacted-{uuid.uuid4().hex[:16]}.parquet"
    try:
        with where.output(relative) as handle:
            pq.write_table(_with_runs(table), handle, row_group_size=_BATCH * 4)
        for path in files:
            with suppress(FileNotFoundError):  # another compaction removed it
                where.delete(path)
    except (OSError, pa.ArrowException, NcclParseError) as exc:
        raise HistoryError(
            f"{where.name}: cannot compact {name}: {_first_line(exc)}"
        ) from exc
    shown = tuple(where.uri(p) for p in files)
    return (name, shown, where.uri(where.path(relative))), table.num_rows


def _listed(where: Location, name: str) -> list[str]:
    """The data files of partition ``name``."""
    try:
        return where.files(name)
    except (OSError, pa.ArrowException) as exc:
        raise HistoryError(
            f"{where.name}: cannot list the history: {_first_line(exc)}"
        ) from exc


# --- reading -------------------------------------------------------------------------


def _where(directory: Path | str | Location) -> Location:
    if isinstance(directory, Location):
        return directory
    try:
        return location(directory)
    except InputError as exc:
        raise HistoryError(str(exc)) from exc


def history_exists(directory: Path | str | Location) -> bool:
    """True when the history at ``directory`` exists, False when nothing is there
    (an object-store prefix without objects). Raises HistoryError when it is a file
    or cannot be reached."""
    return _exists(_where(directory), missing_ok=True)


def _exists(where: Location, missing_ok: bool) -> bool:
    """True when the history is there; False when it is missing and ``missing_ok``.
    Raises HistoryError otherwise. An object-store prefix with no object is missing."""
    try:
        kind = where.kind()
    except (OSError, pa.ArrowException) as exc:
        raise HistoryError(
            f"{where.name}: cannot reach the history: {_first_line(exc)}"
        ) from exc
    if kind == pafs.FileType.Directory:
        return True
    if kind == pafs.FileType.File:
        raise HistoryError(f"{where.name}: not a history directory: it is a file")
    if missing_ok:
        return False
    raise HistoryError(f"{where.name}: history directory not found")


def _data_files(where: Location) -> list[str]:
    try:
        return where.files()
    except (OSError, pa.ArrowException) as exc:
        raise HistoryError(
            f"{where.name}: cannot list the history: {_first_line(exc)}"
        ) from exc


def _partitions(where: Location) -> dict[str, list[str]]:
    """The data files of each ``date=`` partition, by partition name, sorted."""
    return {name: where.files(name) for name in _partition_names(where)}


def _partition_names(where: Location) -> list[str]:
    """The names of the ``date=`` partitions, sorted."""
    return [
        info.base_name
        for info in where.listing()
        if info.type == pafs.FileType.Directory and _PARTITION.match(info.base_name)
    ]


def _dataset(
    where: Location, files: list[str] | None = None, *, scan: bool = False
) -> ds.Dataset:
    """The dataset of ``files`` (default: every data file under the root), with
    repeated text as dictionaries when ``scan``."""
    return ds.dataset(
        _data_files(where) if files is None else files,
        schema=_SCAN_SCHEMA if scan else _READ_SCHEMA,
        format=_FORMAT,
        filesystem=where.fs,
        partitioning=_PARTITIONING,
        partition_base_dir=where.root,
    )


def _batches(
    dataset: ds.Dataset,
    columns: list[str],
    copies: Mapping[str, pa.Array[Any]] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The ``columns`` of ``dataset`` in batches, one file after another (without
    the rows of ``copies``: :func:`_copies`): the dataset's own scanner reads ahead
    of a slower consumer without bound (750 MB for a year of history where this
    holds 200)."""
    for fragment in dataset.get_fragments():
        yield from fragment.to_batches(
            schema=dataset.schema,
            columns=columns,
            filter=_own(copies or {}, fragment.path),
            batch_size=_BATCH,
        )


def _read(
    where: Location,
    files: list[str],
    copies: Mapping[str, pa.Array[Any]],
    columns: list[str] | None = None,
    *,
    scan: bool = False,
) -> pa.Table:
    """The ``columns`` (default: all) of ``files``, without the rows of ``copies``
    (:func:`_copies`)."""
    dataset = _dataset(where, files, scan=scan)
    if not copies:
        return dataset.to_table(columns=columns)
    return pa.concat_tables(
        fragment.to_table(
            schema=dataset.schema, columns=columns, filter=_own(copies, fragment.path)
        )
        for fragment in dataset.get_fragments()
    )


def _copies(
    where: Location,
    files: list[str],
    footers: Mapping[str, pa.Table | None] | None = None,
) -> dict[str, pa.Array[Any]]:
    """The ingests (``ingest_id``) whose rows each of ``files`` must not give, by
    path, as an earlier file by path holds them too; files that give all theirs are
    left out.

    A compaction cut short (killed between writing the merged file and removing
    the files it replaces), or two at once on an object store, leaves an ingest's
    rows in two files, whole in each. Every reader takes each ingest's rows from the
    first file holding it, as the SQL of docs/nightly.md does (``min(filename)``).
    A file an ingest wrote holds the one ingest its name ends with; the ingests of
    the others (merged ones) are read from ``footers`` (:func:`_runs_of`, read
    when not given) or their ``ingest_id`` column.
    """
    by_directory: dict[str, list[str]] = {}
    for path in files:
        by_directory.setdefault(path.rsplit("/", 1)[0], []).append(path)
    copies: dict[str, pa.Array[Any]] = {}
    for paths in by_directory.values():
        names = [path.rsplit("/", 1)[-1] for path in paths]
        # An ingest's rows are in one partition; files an ingest wrote hold one each.
        if len(paths) < 2 or all(_INGEST_FILE.match(name) for name in names):
            continue
        holders: set[str] = set()
        for path in sorted(paths):
            held = _ingests_of(where, path, (footers or {}).get(path))
            if held & holders:
                copies[path] = pa.array(sorted(held & holders), pa.string())
            holders |= held
    return copies


def _ingests_of(where: Location, path: str, runs: pa.Table | None) -> set[str]:
    """The ingests whose rows the file at ``path`` holds (see :func:`_copies`)."""
    named = _INGEST_FILE.match(path.rsplit("/", 1)[-1])
    if named:
        return {named.group(1)}
    if runs is None:
        runs = _runs_of(where, path)
    if runs is None:
        runs = pq.read_table(path, columns=["ingest_id"], filesystem=where.fs)
    return set(cast("list[str]", pc.unique(_text(runs["ingest_id"])).to_pylist()))


def _own(copies: Mapping[str, pa.Array[Any]], path: str) -> pc.Expression | None:
    """The filter of the rows the file at ``path`` gives (None: all of them)."""
    if path not in copies:
        return None
    return pc.invert(pc.field("ingest_id").isin(copies[path]))


def _text(column: Any) -> Any:
    """A text column as plain strings (dictionary-read columns decoded)."""
    if pa.types.is_dictionary(column.type):
        return pc.cast(column, pa.string())
    return column


def _plain(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary-read text columns as plain strings (HISTORY
    schema types)."""
    for i, f in enumerate(table.schema):
        if pa.types.is_dictionary(f.type):
            table = table.set_column(i, f.name, pc.cast(table[f.name], pa.string()))
    return table


def _run_rows(batch: pa.RecordBatch | pa.Table) -> pa.Table:
    """One row per run of ``batch``: key, ingest, run, date, time, usable (any).

    An ingest writes each run's rows together, so runs are found where the key,
    ingest or run number changes (NumPy, no hash grouping: a year of history is
    tens of millions of rows); a run split otherwise is merged in _merge_runs.
    """
    if isinstance(batch, pa.Table):
        batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else batch
    if batch.num_rows == 0:
        return _RUNS_SCHEMA.empty_table()
    starts = _starts(batch)
    fit = np.asarray(usable(batch).to_numpy(zero_copy_only=False), dtype=bool)
    at = pa.array(starts, pa.int64())
    columns: dict[str, Any] = {
        name: _text(batch[name].take(at))
        for name in ("ingest_key", "ingest_id", "run", "date", "ingested_at")
        if name in batch.schema.names
    }
    columns["usable"] = pa.array(np.logical_or.reduceat(fit, starts), pa.bool_())
    return pa.table(columns)


# A file's runs (:func:`_run_rows` of its rows, with their tags) are kept in its
# footer, so that a check reads 365 footers, not the columns of 24 million rows.
# The key names the version of what a run's ``usable`` means: change it with usable().
_RUNS_KEY = b"ncclparse.runs.1"


def _with_runs(table: pa.Table) -> pa.Table:
    """``table`` (a file's rows, without ``date``) with its runs in its metadata:
    an Arrow IPC stream (zstd), base64 as Parquet key-value metadata is text."""
    runs = _tagged_runs(table) if table.num_rows else _run_rows(table)
    return table.replace_schema_metadata(
        {**(table.schema.metadata or {}), _RUNS_KEY: _encoded(runs)}
    )


def _encoded(runs: pa.Table) -> bytes:
    """A file's runs as its footer keeps them."""
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, runs.schema, options=options) as writer:
        writer.write_table(runs)
    return base64.b64encode(sink.getvalue().to_pybytes())


def _runs_of(where: Location, path: str) -> pa.Table | None:
    """The runs kept in the footer of the file at ``path``, with its partition's
    ``date``; None when it has none (written by an older version) or they cannot be
    decoded (the file's columns are read instead)."""
    found = _DATE_IN_PATH.search(path[len(where.root) :])
    metadata = pq.read_schema(path, filesystem=where.fs).metadata or {}
    if found is None or _RUNS_KEY not in metadata:
        return None
    try:
        data = base64.b64decode(metadata[_RUNS_KEY], validate=True)
        runs = pa.ipc.open_stream(data).read_all()
        runs = runs.append_column(
            "date", pa.array([found.group(1)] * runs.num_rows, pa.string())
        )
        return runs.select([*_RUNS_SCHEMA.names, "tags"]).cast(
            pa.schema([*_RUNS_SCHEMA, HISTORY_SCHEMA.field("tags")])
        )
    except (ValueError, KeyError, pa.ArrowException):
        return None


def _starts(rows: pa.RecordBatch | pa.Table) -> npt.NDArray[np.int64]:
    """The first row of each run of ``rows``: where key, ingest or run changes."""
    codes = [key_codes(rows[name]) for name in ("ingest_key", "ingest_id", "run")]
    changed = np.zeros(rows.num_rows - 1, dtype=bool)
    for values in codes:
        changed |= values[1:] != values[:-1]
    return np.concatenate([[0], np.flatnonzero(changed) + 1]).astype(np.int64)


def _per_run(table: pa.Table) -> pa.Table:
    """Group rows (or runs) by run: ``usable`` any, ``ingested_at`` latest."""
    grouped = table.group_by(["ingest_key", "ingest_id", "run", "date"]).aggregate(
        [("usable", "any"), ("ingested_at", "max")]
    )
    # Arrow names an aggregate <column>_<function> and orders columns by version.
    columns: dict[str, Any] = {
        name: grouped[name] for name in ("ingest_key", "ingest_id", "run", "date")
    }
    columns["usable"] = grouped["usable_any"]
    columns["ingested_at"] = grouped["ingested_at_max"]
    return pa.table(columns)


_RUNS_SCHEMA = pa.schema(
    [  # type: ignore[arg-type]  # the stubs type a list of mixed fields as object
        pa.field("ingest_key", pa.string()),
        pa.field("ingest_id", pa.string()),
        pa.field("run", pa.int32()),
        pa.field("date", pa.string()),
        pa.field("usable", pa.bool_()),
        pa.field("ingested_at", pa.timestamp("us", tz="UTC")),
    ]
)


def _merge_runs(parts: list[pa.Table]) -> tuple[pa.Table, pa.Array[Any]]:
    """The runs of the history from per-batch runs (a run may span batches): each
    run once, and of each ``ingest_key`` only the runs of its earliest ingest; and
    the ``key/id`` pairs of the later ingests left out (almost always none)."""
    none = pa.array([], pa.string())
    if not parts:
        return _RUNS_SCHEMA.empty_table(), none
    table = pa.concat_tables([_decoded(p) for p in parts]).combine_chunks()
    # Hash grouping 64-character keys costs hundreds of MB at a year of history;
    # their dictionary codes, once, a third of that.
    key = key_codes(table["ingest_key"]).astype(np.int64)
    ingest = key_codes(table["ingest_id"]).astype(np.int64)
    run = np.asarray(table["run"].to_numpy(zero_copy_only=False), dtype=np.int64)
    ids = (key * (int(ingest.max()) + 1) + ingest) * (int(run.max()) + 1) + run
    if len(np.unique(ids)) < len(ids):  # a run split between batches: merge it
        table = _per_run(table).cast(_RUNS_SCHEMA)
    pairs = np.unique(key * (int(ingest.max()) + 1) + ingest)
    if len(pairs) == len(np.unique(key)):
        return table, none  # no log ingested twice
    ingests = table.group_by(["ingest_key", "ingest_id"]).aggregate(
        [("ingested_at", "min")]
    )
    frame = pd.DataFrame(
        {
            "key": ingests["ingest_key"].to_pandas(),
            "id": ingests["ingest_id"].to_pandas(),
            "at": ingests["ingested_at_min"].to_pandas(),
        }
    ).sort_values(["at", "id"])
    pair = frame["key"].astype(str) + "/" + frame["id"].astype(str)
    later = pa.array(pair[frame.duplicated("key")].tolist(), pa.string())
    return table.filter(pc.invert(pc.is_in(_pairs(table), value_set=later))), later


def _decoded(part: pa.Table) -> pa.Table:
    """Per-batch runs in _RUNS_SCHEMA (dictionaries decoded: a few rows)."""
    columns: dict[str, Any] = {f.name: _text(part[f.name]) for f in _RUNS_SCHEMA}
    return pa.table(columns).cast(_RUNS_SCHEMA)


def _pairs(table: pa.Table) -> Any:
    # pyarrow-stubs want all arrays or all scalars; Arrow broadcasts the separator.
    return pc.binary_join_element_wise(
        _text(table["ingest_key"]), _text(table["ingest_id"]), "/"
    )


def _without(rows: pa.Table, later: pa.Array[Any]) -> pa.Table:
    """``rows`` without those of the ``later`` ingests (``key/id`` pairs)."""
    if rows.num_rows == 0 or len(later) == 0:
        return rows
    return rows.filter(pc.invert(pc.is_in(_pairs(rows), value_set=later)))


def _collect_tags(batch: pa.RecordBatch | pa.Table, tags: dict[str, Any]) -> None:
    """Add the tags of each ingest of ``batch`` not yet in ``tags`` (an ingest's tags
    are the same on all its rows: read from its first)."""
    ids = batch["ingest_id"]
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    encoded = cast(
        "pa.DictionaryArray[Any, Any]",
        ids if pa.types.is_dictionary(ids.type) else pc.dictionary_encode(ids),
    )
    values = encoded.dictionary.to_pylist()
    codes = fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
    found, first = np.unique(codes, return_index=True)
    for code, index in zip(found.tolist(), first.tolist(), strict=True):
        if code >= 0 and values[code] not in tags:
            tags[values[code]] = dict(batch["tags"][index].as_py() or [])


# --- writing ---------------------------------------------------------------------


class _Additions:
    """What an ingest adds to each measurement row of the sources it adds: its run's
    ``hosts`` and ``status``, the source's key, the ingest's tags, id and time."""

    def __init__(
        self,
        runs: pa.Table,
        keys: Mapping[str, str],
        tags: Mapping[str, str] | None,
        ingest_id: str,
        now: dt.datetime,
    ) -> None:
        self.sources = pa.array(list(keys), pa.string())
        self.keys = pa.array(list(keys.values()), pa.string())
        self.tags = list((tags or {}).items())
        self.ingest_id = ingest_id
        self.now = now
        # Arrow joins do not carry list columns (hosts): each row's run is found by
        # position, from a number per (source, run) sorted once.
        self.runs = runs.select(["hosts", "status"])
        self._most = int(pc.max(runs["run"]).as_py() or 0) + 1 if runs.num_rows else 1
        ids = self._ids(runs["source"], runs["run"])
        self._order = np.argsort(ids, kind="stable")
        self._sorted = ids[self._order]

    def _ids(self, sources: Any, runs: Any) -> npt.NDArray[np.int64]:
        """A number per (source, run), below 0 for a source not added."""
        found = fill_null(pc.index_in(sources, value_set=self.sources), -1)
        code = np.asarray(found.to_numpy(zero_copy_only=False), dtype=np.int64)
        number = np.asarray(runs.to_numpy(zero_copy_only=False), dtype=np.int64)
        return code * self._most + number

    def rows_of(self, measurements: pa.Table) -> pa.Table:
        """The history rows of ``measurements`` of the sources added, in order."""
        kept = measurements.filter(
            pc.is_in(measurements["source"], value_set=self.sources)
        )
        n = kept.num_rows
        ids = self._ids(kept["source"], kept["run"])
        found = np.searchsorted(self._sorted, ids)
        last = len(self._sorted) - 1
        if n and not np.array_equal(self._sorted[np.minimum(found, last)], ids):
            raise ValueError("a measurement row whose run is not in the runs table")
        at = pa.array(self._order[found], pa.int64())
        picked = self.runs.take(at)
        columns: dict[str, Any] = {
            name: kept[name] for name in schema.MEASUREMENT_COLUMNS
        }
        columns["hosts"] = picked["hosts"]
        columns["status"] = picked["status"]
        columns["tags"] = _repeated_map(self.tags, n)
        columns["ingest_key"] = self.keys.take(
            pc.index_in(kept["source"], value_set=self.sources)
        )
        columns["ingest_id"] = pa.repeat(pa.scalar(self.ingest_id, pa.string()), n)
        columns["ingested_at"] = pa.repeat(
            pa.scalar(self.now, pa.timestamp("us", tz="UTC")), n
        )
        return pa.table(columns, schema=HISTORY_SCHEMA)


def _repeated_map(items: list[tuple[str, str]], n: int) -> pa.Array[Any]:
    """The map of ``items`` ``n`` times (the tags of every row of an ingest)."""
    each = len(items)
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * each, pa.int32())
    repeat = pa.array(np.tile(np.arange(each, dtype=np.int64), n), pa.int64())
    keys = pa.array([key for key, _ in items], pa.string()).take(repeat)
    values = pa.array([value for _, value in items], pa.string()).take(repeat)
    maps = pa.MapArray.from_arrays(  # type: ignore[call-overload]  # stubs: int64 offsets only
        offsets, keys, values, type=HISTORY_SCHEMA.field("tags").type
    )
    return cast("pa.Array[Any]", maps)


def _chunks(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.Table]:
    """``batches`` as tables of _BATCH rows (the last may have fewer): a Parquet
    row group each."""
    held: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        held.append(batch)
        rows += batch.num_rows
        while rows >= _BATCH:
            table = pa.Table.from_batches(held)
            yield table.slice(0, _BATCH)
            rest = table.slice(_BATCH)
            held, rows = rest.to_batches(), rest.num_rows
    if rows:
        yield pa.Table.from_batches(held)


def _write(
    handle: Any,
    measurements: Callable[[], Iterable[pa.RecordBatch]],
    additions: _Additions,
) -> int:
    """Write the history rows of ``measurements`` (each call reads them again) to
    ``handle`` as Parquet, a row group at a time, with their runs in its schema's
    metadata (:func:`_with_runs`); return the number of rows written.

    The rows are made twice: the runs go in the schema, written first."""
    made = (additions.rows_of(chunk) for chunk in _chunks(measurements()))
    runs = [_tagged_runs(rows) for rows in made if rows.num_rows]
    metadata = {**(HISTORY_SCHEMA.metadata or {}), _RUNS_KEY: _encoded(_joined(runs))}
    written = 0
    with pq.ParquetWriter(handle, HISTORY_SCHEMA.with_metadata(metadata)) as writer:
        for chunk in _chunks(measurements()):
            rows = additions.rows_of(chunk)
            if rows.num_rows:
                writer.write_table(rows)  # a row group: _chunks sized it
                written += rows.num_rows
    return written


def _tagged_runs(rows: pa.Table) -> pa.Table:
    """:func:`_run_rows` of ``rows`` with the tags of each run's first row."""
    return _run_rows(rows).append_column("tags", rows["tags"].take(_starts(rows)))


def _joined(parts: list[pa.Table]) -> pa.Table:
    """The runs of consecutive row groups as one table: a run split between two
    groups is one run, ``usable`` if either part is."""
    table = pa.concat_tables(parts).combine_chunks()
    if table.num_rows == 0:
        return table
    starts = _starts(table)
    if len(starts) == table.num_rows:
        return table
    fit = np.asarray(table["usable"].to_numpy(zero_copy_only=False), dtype=bool)
    joined = table.take(pa.array(starts, pa.int64()))
    return joined.set_column(
        joined.schema.get_field_index("usable"),
        "usable",
        pa.array(np.logical_or.reduceat(fit, starts), pa.bool_()),
    )


def _present_keys(where: Location, date: dt.date) -> set[str]:
    """The keys in the partitions within LOOKBACK_DAYS of ``date``, reading every
    column of their files (in batches): a file that ``check`` could not read is
    found here, before an ingest adds to the history (reading only ``ingest_key``
    would pass corrupt pages)."""
    low = (date - dt.timedelta(days=LOOKBACK_DAYS)).isoformat()
    high = (date + dt.timedelta(days=LOOKBACK_DAYS)).isoformat()
    try:
        files = [
            path
            for name, paths in _partitions(where).items()
            if low <= name[5:] <= high
            for path in paths
        ]
    except (OSError, pa.ArrowException) as exc:
        raise HistoryError(
            f"{where.name}: cannot list the history: {_first_line(exc)}"
        ) from exc
    keys: set[str] = set()
    if not files:
        return keys
    try:
        dataset = _dataset(where, files, scan=True)
        for batch in _batches(dataset, dataset.schema.names):
            found = pc.unique(_text(batch["ingest_key"])).to_pylist()
            keys.update(cast("list[str]", found))  # never null
    except (OSError, pa.ArrowException) as exc:
        raise _unreadable(where, exc, files) from exc
    return keys


def _remove_stale(where: Location) -> tuple[Path, ...]:
    """Remove the temporary files killed ingests left (local histories only: the
    partitions are listed, not read)."""
    if where.local is None:
        return ()
    return tuple(
        path
        for partition in sorted(where.local.glob("date=*"))
        for path in remove_stale_temporaries(partition, older_than=STALE_AFTER)
    )


def _unreadable(
    where: Location, exc: Exception, files: list[str] | None = None
) -> HistoryError:
    """The error for a dataset that cannot be read, naming the first file that
    cannot be (read one by one: the dataset's own error seldom names it)."""
    if files is None:
        try:
            files = where.files()
        except (OSError, pa.ArrowException):
            files = []
    for path in files:
        try:
            with where.fs.open_input_file(path) as handle:
                pq.read_table(handle)
        except (OSError, pa.ArrowException) as error:
            if _gone(where, path):
                return HistoryError(
                    f"{where.name}: cannot read history: {where.uri(path)} was "
                    "removed while it was read (a history compact at the same "
                    "time?); run again"
                )
            return HistoryError(
                f"{where.name}: cannot read history: {where.uri(path)} is not a "
                f"readable Parquet file ({_first_line(error)}); move it out of the "
                "history directory (or restore it from a backup) and run again"
            )
    return HistoryError(f"{where.name}: cannot read history: {_first_line(exc)}")


def _gone(where: Location, path: str) -> bool:
    """True when nothing is at ``path`` (any more)."""
    try:
        return bool(where.fs.get_file_info(path).type == pafs.FileType.NotFound)
    except (OSError, pa.ArrowException):
        return False


def _first_line(exc: Exception) -> str:
    """The error's first line, without the path pyarrow repeats (the message has it)."""
    return _SOURCE_PREFIX.sub("", first_line(exc))


def _rows_digest(result: ParseResult, name: str, spool: Spool | None) -> str:
    digest = hashlib.sha256()
    measurements: Iterable[pa.Table] = [result.measurements]
    if spool is not None:
        measurements = (pa.Table.from_batches([b]) for b in spool.batches())
    for table in itertools.chain([result.runs], measurements):
        same = pc.equal(table["source"], pa.scalar(name))
        part = table.filter(same).drop_columns(["source"])
        for row in part.to_pylist():
            digest.update(repr(sorted(row.items())).encode())
    return "rows-" + digest.hexdigest()


@contextmanager
def _locked(
    where: Location, lock: bool, timeout: float, doing: str = "ingest"
) -> Iterator[None]:
    """Hold an exclusive lock on a local history for the look-up-then-write step,
    waiting up to ``timeout`` seconds for another holder. Nothing to hold on an
    object store, or when ``lock`` is False (lock-free: see the module docstring).

    Raises HistoryError when the lock file cannot be opened for writing (a read-only
    directory or file system), locked (no ``flock`` there) or had in time.
    """
    if where.local is None or not lock:
        yield
        return
    directory = where.local
    try:
        handle = (directory / _LOCK).open("a")
    except OSError as exc:
        raise HistoryError(
            f"{directory}: cannot {doing}: the history directory is not writable "
            f"({_strerror(exc)}); make it writable for this user, or give a "
            "directory on a writable file system"
        ) from exc
    with handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                    raise HistoryError(
                        f"{directory}: cannot {doing}: cannot lock {_LOCK} "
                        f"({_strerror(exc)}); its file system does not provide file "
                        "locks (e.g. NFS without a lock service, Lustre mounted "
                        "without -o flock): keep the history on a file system with "
                        "locks, such as a local disk, or run without the lock "
                        "(--no-lock), one ingest at a time"
                    ) from exc
                if time.monotonic() >= deadline:
                    raise HistoryError(
                        f"{directory}: cannot {doing}: another ingest has held "
                        f"{_LOCK} for {timeout:g} s; wait for it (or find the one "
                        "that hangs), or raise --lock-timeout"
                    ) from exc
                time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
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
