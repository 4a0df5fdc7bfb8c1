"""Arrow columns to numpy arrays and back, nulls as NaN (for the vectorized engine)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

_ArrowT = TypeVar("_ArrowT", bound="pa.Array[Any] | pa.ChunkedArray[Any]")


def fill_null(values: _ArrowT, fill: float | str) -> _ArrowT:
    """``pc.fill_null(values, fill)`` with a Python fill value (cast to the type)."""
    # pyarrow-stubs declare fill_null as an alias of coalesce, which only takes Arrow
    # arrays and scalars; pc.fill_null itself wraps a Python value with pa.scalar()
    # and returns the same kind of array as ``values``.
    filled = pc.fill_null(values, fill)  # type: ignore[type-var]
    return cast(_ArrowT, filled)


def num(table: pa.Table, name: str) -> np.ndarray:
    column = table.column(name).cast(pa.float64())
    return fill_null(column, np.nan).to_numpy()


def flag(table: pa.Table, name: str) -> np.ndarray:
    return fill_null(table.column(name), False).to_numpy().astype(bool)


def strings(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(fill_null(table.column(name), "").to_numpy(zero_copy_only=False))


def codes(table: pa.Table, name: str, vocabulary: tuple[str, ...]) -> np.ndarray:
    """1-based index of each value in ``vocabulary``, 0 for null or unknown."""
    found = pc.index_in(table.column(name), value_set=pa.array(vocabulary))
    return fill_null(found, -1).to_numpy().astype(np.int64) + 1


def masked(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    return np.where(valid, values.astype(np.float64), np.nan)


def floats(values: np.ndarray) -> pa.Array[Any]:
    values = np.asarray(values, dtype=np.float64)
    return pa.array(values, mask=~np.isfinite(values), type=pa.float64())


def bools(values: np.ndarray) -> pa.Array[Any]:
    return pa.array(values > 0, mask=np.isnan(values), type=pa.bool_())


def labels(codes: np.ndarray, names: tuple[str, ...]) -> pa.Array[Any]:
    indices = pa.array(
        np.asarray(codes, dtype=np.int64), mask=np.asarray(codes) < 0, type=pa.int64()
    )
    return pa.array(names, type=pa.string()).take(indices)


def dictionary_codes(
    column: pa.ChunkedArray[Any],
) -> tuple[npt.NDArray[np.int64], int]:
    """Codes 1.. of each distinct value in first-seen order (0 for null), and their
    count."""
    array = column.combine_chunks() if column.num_chunks else pa.array([], column.type)
    # The stubs return the input's type; dictionary_encode returns a DictionaryArray.
    encoded = cast("pa.DictionaryArray[Any, Any]", pc.dictionary_encode(array))
    codes = fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False) + 1
    return codes.astype(np.int64), len(encoded.dictionary) + 1


def key_text(column: pa.ChunkedArray[Any] | pa.Array[Any]) -> pd.Series[str]:
    """A key column as text with "" for null, the same for every table.

    Through pandas, an int column with a null becomes float ("16.0"); cast in Arrow,
    16 is "16" whether or not the column has nulls, so keys from different tables
    (candidate, history) compare equal.
    """
    if not pa.types.is_string(column.type):
        column = pc.cast(column, pa.string())
    # object, not pandas 3's Arrow-backed str: see frame().
    return fill_null(column, "").to_pandas().astype(object)


def key_codes(column: pa.Array[Any] | pa.ChunkedArray[Any]) -> npt.NDArray[np.int64]:
    """Integers equal where the values of ``column`` are (null: -1): an integer
    column's values, a dictionary's indices, any other column dictionary-encoded.
    Grouping on these is far cheaper than hashing text again."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_integer(column.type):
        values = fill_null(column, -1)
    else:
        if not pa.types.is_dictionary(column.type):
            column = pc.dictionary_encode(column)
        values = fill_null(cast("pa.DictionaryArray[Any, Any]", column).indices, -1)
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)


def distinct_rows(
    codes: list[npt.NDArray[np.int64]],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The distinct rows of integer columns ``codes`` (:func:`key_codes`; null: -1),
    in the order of their values: the index of each one's first row, and each
    row's index among them. The columns are combined in mixed radix into one
    integer, whose sort is far cheaper than ``np.unique(axis=0)``'s of rows."""
    combined = np.zeros(len(codes[0]), np.int64)
    span = 1
    for column in codes:
        radix = int(column.max(initial=-1)) + 2
        if (
            span * radix >= 1 << 62
        ):  # too many values to combine: rank the combined so far
            combined = np.unique(combined, return_inverse=True)[1].astype(np.int64)
            span = int(combined.max(initial=0)) + 1
        combined = combined * radix + (column + 1)
        span *= radix
    _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
    return first.astype(np.int64), inverse.astype(np.int64).reshape(-1)


def frame(table: pa.Table) -> pd.DataFrame:
    """``table`` as a DataFrame whose text columns hold Python ``str`` objects.

    pandas 3 makes text columns Arrow-backed, and every row selection of those
    costs an Arrow call (about 20x a NumPy take): judging 1,000 runs one by one took
    minutes. Object columns are also what pandas 2 gives, so both behave the same.
    """
    result = table.to_pandas()
    for name in result.columns:
        if isinstance(result[name].dtype, pd.StringDtype):
            result[name] = result[name].astype(object)
    return result


RunRows = dict[tuple[str, int], pd.DataFrame]


def rows_by_run(frame: pd.DataFrame) -> RunRows:
    """The rows of ``frame`` of each run, keyed by ``(source, run)``, in one pass:
    filtering the whole frame once per run costs runs x rows (minutes at 1,000 logs).
    Look up with :func:`run_rows`, which gives a run without rows an empty frame."""
    if frame.empty:
        return {}
    return {
        (str(source), int(run)): group
        for (source, run), group in cast(
            "Iterator[tuple[tuple[Any, Any], pd.DataFrame]]",
            iter(frame.groupby(["source", "run"], sort=False)),
        )
    }


def run_rows(
    groups: RunRows, frame: pd.DataFrame, source: str, run: int
) -> pd.DataFrame:
    """The rows of one run from :func:`rows_by_run` (of ``frame``), empty if none."""
    found = groups.get((source, run))
    return frame.iloc[0:0] if found is None else found
