"""A run's rows beyond the first few thousand, kept aside (in a temporary file once
they are many).

One run may hold millions of rows (a sweep repeated for hours). Its facts that every
row carries (collective, rank count, device) are known only when the run ends, so its
rows cannot be handed on as they are read; they are kept here instead, as Arrow
batches up to HELD_BYTES and beyond that written to the file as compressed Arrow IPC,
and read back batch by batch when the run is collected. Memory then stays bounded by
HELD_BYTES and one batch whatever the size of the run (docs/robustness.md).
"""

from __future__ import annotations

import io
import itertools
import tempfile
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ncclparse import schema
from ncclparse._arrays import array

# Columns every row of a run shares: filled in from the run when read back.
RUN_COLUMNS = frozenset(
    {"source", "run", "tool", "tool_version", "nranks", "nnodes", "device"}
)
COPY = "_copy"  # which interleaved copy of a run a row belongs to (nccl-tests)
_FIELDS = [f for f in schema.MEASUREMENT_FIELDS if f.name not in RUN_COLUMNS]
# What a spill file holds: the rows' own columns and the copy index.
SCHEMA = pa.schema([*_FIELDS, pa.field(COPY, pa.int32())])
_READ_SCHEMA = pa.schema(_FIELDS)  # as read back: without the copy index
_DEFAULTS: dict[str, Any] = {"cputime": False, "grouped": False}
_OPTIONS = pa.ipc.IpcWriteOptions(
    compression="lz4" if pa.Codec.is_available("lz4") else None
)


class SpillError(OSError):
    """The temporary file for a large run could not be written."""


# Bytes of rows a spill holds in memory before it writes them to its file: a run of
# a few hundred thousand rows never touches the disk (compressing, writing and
# reading back its rows cost a tenth of parsing it), and memory stays bounded.
HELD_BYTES = 32 << 20


class RowSpill:
    """Rows held in memory up to HELD_BYTES, then written to an anonymous temporary
    file (gone when closed or collected).

    Raises :class:`SpillError` when the file cannot be created or written.
    """

    def __init__(self) -> None:
        self.counts: Counter[int | None] = Counter()  # rows per copy
        self._held: list[pa.RecordBatch] = []  # the rows after the file's
        self._held_bytes = 0
        # Made on the first write, kept open for the run's life: it is the storage.
        self._file: io.BufferedRandom | None = None
        self._writer: pa.ipc.RecordBatchStreamWriter | None = None
        self._sealed = False
        self.readers = 1  # runs that will read it (copies share one spill)

    def write(self, rows: list[dict[str, Any]]) -> None:
        """Append ``rows`` (dicts as parsers build them; integers already in range)."""
        if not rows:
            return
        columns = {}
        for name in SCHEMA.names:  # one comprehension per column: the cheap way
            default = _DEFAULTS.get(name)
            columns[name] = [row.get(name, default) for row in rows]
        self.counts.update(columns[COPY])
        arrays = [array(columns[f.name], f.type) for f in SCHEMA]
        self._write(pa.RecordBatch.from_arrays(arrays, schema=SCHEMA))

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Append rows given as a batch of :data:`SCHEMA` with no copy index."""
        self.counts[None] += batch.num_rows
        self._write(batch)

    def _write(self, batch: pa.RecordBatch) -> None:
        self._held.append(batch)
        self._held_bytes += batch.nbytes
        if self._held_bytes <= HELD_BYTES:
            return
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile()  # noqa: SIM115 (see __init__)
            if self._writer is None:
                self._writer = pa.ipc.new_stream(self._file, SCHEMA, options=_OPTIONS)
            for held in self._held:
                self._writer.write_batch(held)
        except OSError as exc:
            raise self._error(exc) from exc
        self._held, self._held_bytes = [], 0

    def batches(self, copy: int | None) -> Iterator[pa.RecordBatch]:
        """The rows written, in order, as batches with the columns of the spill
        schema minus the copy index; only copy ``copy``'s when not None."""
        if self._writer is not None and not self._sealed:
            self._writer.close()
            self._sealed = True
        stored: Iterator[pa.RecordBatch] = iter(())
        if self._file is not None and self._writer is not None:
            self._file.seek(0)
            stored = iter(pa.ipc.open_stream(self._file))
        for batch in itertools.chain(stored, self._held):
            if copy is not None:
                # Imported here: copies are rare, and pyarrow.compute costs 30 ms.
                import pyarrow.compute as pc

                batch = batch.filter(pc.equal(batch.column(COPY), pa.scalar(copy)))
            # Not drop_columns: RecordBatch has it only from pyarrow 16.
            yield pa.RecordBatch.from_arrays(batch.columns[:-1], schema=_READ_SCHEMA)

    def rows(self, copy: int | None) -> int:
        return self.counts[copy] if copy is not None else self.counts.total()

    def release(self) -> None:
        """One reader is done; the last one closes (and so deletes) the file."""
        self.readers -= 1
        if self.readers <= 0:
            self._held, self._held_bytes = [], 0
            if self._file is not None:
                self._file.close()

    @staticmethod
    def _error(exc: OSError) -> SpillError:
        return SpillError(
            exc.errno,
            "a run too large to hold in memory could not be written to a temporary "
            f"file ({exc.strerror or exc}); set TMPDIR to a directory with free space",
        )
