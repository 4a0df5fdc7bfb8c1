"""Arrow columns to numpy arrays and back, nulls as NaN (for the vectorized engine)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def num(table: pa.Table, name: str) -> np.ndarray:
    column = table.column(name).cast(pa.float64())
    return pc.fill_null(column, np.nan).to_numpy()


def flag(table: pa.Table, name: str) -> np.ndarray:
    return pc.fill_null(table.column(name), False).to_numpy().astype(bool)


def strings(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(
        pc.fill_null(table.column(name), "").to_numpy(zero_copy_only=False)
    )


def codes(table: pa.Table, name: str, vocabulary: tuple[str, ...]) -> np.ndarray:
    """1-based index of each value in ``vocabulary``, 0 for null or unknown."""
    found = pc.index_in(table.column(name), value_set=pa.array(vocabulary))
    return pc.fill_null(found, -1).to_numpy().astype(np.int64) + 1


def masked(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    return np.where(valid, values.astype(np.float64), np.nan)


def floats(values: np.ndarray) -> pa.Array:
    values = np.asarray(values, dtype=np.float64)
    return pa.array(values, mask=~np.isfinite(values), type=pa.float64())


def bools(values: np.ndarray) -> pa.Array:
    return pa.array(values > 0, mask=np.isnan(values), type=pa.bool_())


def labels(codes: np.ndarray, names: tuple[str, ...]) -> pa.Array:
    indices = pa.array(np.asarray(codes, dtype=np.int64), mask=np.asarray(codes) < 0)
    return pa.array(names, type=pa.string()).take(indices)


def dictionary_codes(column: pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """Codes 1.. of each distinct value in first-seen order (0 for null), and their
    count."""
    array = column.combine_chunks() if column.num_chunks else pa.array([], column.type)
    encoded = pc.dictionary_encode(array)
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False) + 1
    return codes.astype(np.int64), len(encoded.dictionary) + 1
