"""Measurements kept aside in a temporary file while inputs are parsed.

``ingest`` stores each row with its run's hosts and status, which are known only
once the run ends; a run may hold millions of rows. Its measurements are written
here as they are parsed (Arrow IPC, LZ4) and read back batch by batch, so memory
holds one batch, not the log (docs/robustness.md, "Memory").
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterator
from types import TracebackType
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc

from ncclparse import schema

__all__ = ["Spool", "SpoolError"]

_OPTIONS = pa.ipc.IpcWriteOptions(
    compression="lz4" if pa.Codec.is_available("lz4") else None
)


class SpoolError(OSError):
    """The temporary file cannot be created or written (its message says what to
    do)."""


class Spool:
    """Measurement batches written to an anonymous temporary file (in ``TMPDIR``,
    gone when closed): :meth:`write` them as parsed (``parse_many``'s
    ``on_batch``), then read them back, in order, with :meth:`batches`.

    ``sources`` names the sources that have a row. Raises SpoolError when the file
    cannot be created or written.
    """

    def __init__(self) -> None:
        self.sources: set[str] = set()
        self.rows = 0
        try:
            # Closed by close(): the file is the storage while the spool lives.
            self._file: io.BufferedRandom = tempfile.TemporaryFile()  # noqa: SIM115
        except OSError as exc:
            raise _error(exc) from exc
        self._writer: pa.ipc.RecordBatchStreamWriter | None = pa.ipc.new_stream(
            self._file, schema.MEASUREMENTS_SCHEMA, options=_OPTIONS
        )

    def write(self, batch: pa.RecordBatch) -> None:
        """Append ``batch`` (measurement rows)."""
        if self._writer is None:
            raise ValueError("the spool was read: it takes no more rows")
        if batch.num_rows == 0:
            return
        found = pc.unique(batch.column("source")).to_pylist()
        self.sources.update(cast("list[str]", found))  # never null
        self.rows += batch.num_rows
        try:
            self._writer.write_batch(batch)
        except OSError as exc:
            raise _error(exc) from exc

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The rows written, in order (the spool takes no more rows after this)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._file.seek(0)
        yield from pa.ipc.open_stream(self._file)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Spool:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _error(exc: OSError) -> SpoolError:
    return SpoolError(
        "cannot keep the parsed rows in a temporary file "
        f"({exc.strerror or exc}); set TMPDIR to a directory with free space",
    )
