"""The native row reader's column output (``_scan.read_rows_columns``) as Arrow.

For a run past its first KEEP_ROWS rows, whose rows go to its spill anyway, the
native reader gives the rows of many lines as column buffers instead of one dict per
row: :class:`NativeColumns` turns them into record batches of the spill's schema,
with the values the parser's row dicts would have given (absent keys null, cputime
and grouped false), without a Python object per value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ncclparse._arrays import from_codes, from_values, repeated

from ._nccl_layout import NATIVE_METRICS
from ._spill import SCHEMA

# The order of _scan.c's column buffers and string columns (C_* and S_* there); each
# string column is two items: its distinct values, and a code (int32) per row.
_FIELDS, _ENDS, _LINE, _SIZE, _COUNT, _ROOT, _ROOT_VALID, _METRICS = range(8)
_METRIC_COLUMNS = tuple(column for _, column in NATIVE_METRICS)
_BUFFERS = _METRICS + 2 * len(_METRIC_COLUMNS)
_STRINGS = ("placement", "dtype", "redop", "wrong_kind")


class NativeColumns:
    """The output of one ``read_rows_columns`` call over lines ``numbers``.

    ``fields[i]``: the token count of line i, 0 when the parser must read it itself;
    ``ends[i]``: how many rows the lines up to i gave.
    """

    def __init__(self, output: tuple[Any, ...], cputime: bool, skipped: int | None):
        self.fields: npt.NDArray[np.uint8] = np.frombuffer(output[_FIELDS], np.uint8)
        self.ends: npt.NDArray[np.int64] = np.frombuffer(output[_ENDS], np.int64)
        rows = int(self.ends[-1]) if len(self.ends) else 0
        columns: dict[str, pa.Array[Any]] = {
            "line": from_values(output[_LINE], None, pa.int64(), rows),
            "size_bytes": from_values(output[_SIZE], None, pa.int64(), rows),
            "count": from_values(output[_COUNT], None, pa.int64(), rows),
            "root": from_values(output[_ROOT], output[_ROOT_VALID], pa.int32(), rows),
            "cputime": repeated(cputime, pa.bool_(), rows),
            "grouped": repeated(False, pa.bool_(), rows),
            "iter_skipped": repeated(skipped, pa.int64(), rows),
        }
        columns["reported_bytes"] = columns["size_bytes"]
        for index, name in enumerate(_METRIC_COLUMNS):
            values, valid = output[_METRICS + 2 * index : _METRICS + 2 * index + 2]
            columns[name] = from_values(values, valid, pa.float64(), rows)
        for index, name in enumerate(_STRINGS):
            values, codes = output[_BUFFERS + 2 * index : _BUFFERS + 2 * index + 2]
            columns[name] = from_codes(values, codes, rows)
        self._batch = pa.RecordBatch.from_arrays(
            [
                columns[f.name] if f.name in columns else pa.nulls(rows, f.type)
                for f in SCHEMA
            ],
            schema=SCHEMA,
        )

    def rows(self, start: int, stop: int) -> pa.RecordBatch:
        """Rows ``start`` to ``stop`` (not included), as a spill batch."""
        return self._batch.slice(start, stop - start)
