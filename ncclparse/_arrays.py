"""Arrow arrays from Python lists without importing pandas.

``pa.array`` looks for pandas on every call (``_is_array_like``), which imports it:
about 0.4 s of CPU per process, a quarter of parsing 2,000 small logs, for a library
the parse path never uses. :func:`array` builds the types of the result tables
(booleans, integers, doubles, strings, lists and maps of them) from buffers instead,
which pyarrow does not check against pandas. Anything else, and any value the buffers
cannot hold (an integer beyond the type, a string that is not valid UTF-8), goes to
``pa.array``, so the result and the errors are always ``pa.array``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["array", "empty_table", "from_codes", "from_values", "repeated", "spread"]

_NUMBERS = {
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.float64(): np.float64,
}


def array(values: Sequence[Any], type: pa.DataType) -> pa.Array[Any]:
    """``pa.array(values, type=type)``, built without importing pandas."""
    try:
        built = _build(values, type)
    except (TypeError, ValueError, OverflowError, UnicodeError, pa.ArrowException):
        built = None
    return pa.array(values, type=type) if built is None else built


def repeated(value: Any, type: pa.DataType, n: int) -> pa.Array[Any]:
    """``array([value] * n, type)``, without a list of n values (a run's source,
    tool or device on each of its rows)."""
    kind = _type_of(value)
    if value is None:
        return cast("pa.Array[Any]", pa.nulls(n, cast(Any, type)))
    if (type == pa.float64() and kind is float) or (
        kind is int and type in _INT_BITS and value.bit_length() <= _INT_BITS[type]
    ):
        numbers = np.full(n, value, _NUMBERS[type])
        return pa.Array.from_buffers(type, n, [None, _buffer(numbers)])
    if type == pa.bool_() and kind is bool:
        bits = _buffer(_packed(np.full(n, value, bool)))
        return pa.Array.from_buffers(type, n, [None, bits])
    text = _utf8(value) if type == pa.string() and kind is str else None
    if text is not None and len(text) * n <= np.iinfo(np.int32).max:
        ends = (np.arange(n + 1, dtype=np.int64) * len(text)).astype(np.int32)
        return pa.Array.from_buffers(
            type, n, [None, _buffer(ends), pa.py_buffer(text * n)]
        )
    # Any other value, by array()'s rules (or its error), then compute's take, which
    # costs a call into Arrow's kernels (some 20-50 us).
    zeros = pa.py_buffer(np.zeros(n, np.int32).tobytes())
    one = array([value], type)
    return one.take(pa.Array.from_buffers(pa.int32(), n, [None, zeros]))


# Integer types and the bits of their magnitude (an int.bit_length() up to it fits).
_INT_BITS = {pa.int32(): 31, pa.int64(): 63}


def _utf8(text: str) -> bytes | None:
    """``text`` in UTF-8, None when it cannot be (a lone surrogate)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


def from_values(
    values: bytes, present: bytes | None, type: pa.DataType, n: int
) -> pa.Array[Any]:
    """An array of ``n`` C values: int64 or double (8 bytes), int32 (4), bool (a
    byte, 0 or 1); ``present``: a byte per value, 0 where it is null (None: none
    is)."""
    bitmap = None if present is None else _bitmap(_flags(present))
    if type == pa.bool_():
        data = _buffer(_packed(_flags(values)))
    else:
        data = pa.py_buffer(values)
    return pa.Array.from_buffers(type, n, [bitmap, data])


def from_codes(distinct: Sequence[Any], codes: bytes, n: int) -> pa.Array[Any]:
    """A string array of ``n`` values, each ``distinct[code]`` for its int32 code
    in ``codes`` (None: null)."""
    if len(distinct) == 1:
        return repeated(distinct[0], pa.string(), n)
    texts = [
        b"" if v is None else _utf8(v) if type(v) is str else None for v in distinct
    ]
    encoded = [text for text in texts if text is not None]
    widest = max(map(len, encoded), default=0)
    if len(encoded) == len(distinct) and n * widest <= _GATHERED:
        built = _gathered(distinct, encoded, np.frombuffer(codes, np.int32, n), widest)
        if built is not None:
            return built
    indices = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(codes)])
    return array(distinct, pa.string()).take(indices)


def _gathered(
    distinct: Sequence[str | None],
    encoded: list[bytes],
    index: npt.NDArray[np.int32],
    widest: int,
) -> pa.Array[Any] | None:
    """:func:`from_codes` gathered by NumPy from a table of the encoded values
    (compute's take is a call into Arrow's kernels and costs the import of
    pyarrow.compute); None past int32 offsets."""
    table = np.zeros((len(encoded), widest), np.uint8)
    for row, text in zip(table, encoded, strict=True):
        row[: len(text)] = np.frombuffer(text, np.uint8)
    lengths = np.array([len(e) for e in encoded], np.int64)[index]
    try:
        ends = _offsets(lengths, np.int32)
    except OverflowError:
        return None
    within = np.arange(widest) < lengths[:, None]
    data = pa.py_buffer(table[index][within].tobytes())
    present = np.array([v is not None for v in distinct])[index]
    return pa.Array.from_buffers(
        pa.string(), len(index), [_bitmap(present), ends, data]
    )


def spread(
    values: Sequence[Any], type: pa.DataType, counts: Sequence[int]
) -> pa.Array[Any]:
    """``array`` of each of ``values`` ``counts[i]`` times (a run's source or rank
    count on each of its rows)."""
    repeats = np.array(counts, np.int64)
    n = int(repeats.sum())
    if values and type == pa.string() and {_type_of(v) for v in values} <= _KINDS[type]:
        # The runs of a batch share a few strings (its source, tool, device): each
        # distinct one is encoded once, not once a run.
        code_of: dict[str | None, int] = {}
        each = [code_of.setdefault(v, len(code_of)) for v in values]
        distinct = list(code_of)
        array(distinct, type)  # array()'s rules for the values, or its error
        run_codes = np.array(each, np.int32)
        return from_codes(distinct, np.repeat(run_codes, repeats).tobytes(), n)
    codes = np.repeat(np.arange(len(values), dtype=np.int32), repeats)
    one_each = array(values, type)  # array()'s rules for the values, or its error
    if type == pa.string():
        return from_codes(values, codes.tobytes(), n)
    if type in _NUMBERS and {_type_of(v) for v in values} <= _KINDS[type]:
        present = np.array([v is not None for v in values])[codes]
        numbers = np.array([0 if v is None else v for v in values], _NUMBERS[type])
        return pa.Array.from_buffers(
            type, n, [_bitmap(present), _buffer(numbers[codes])]
        )
    indices = pa.Array.from_buffers(
        pa.int32(), n, [None, pa.py_buffer(codes.tobytes())]
    )
    return one_each.take(indices)


# Bytes a string column gathered by NumPy may take before it is gathered by Arrow.
_GATHERED = 1 << 24


def _packed(truth: npt.NDArray[np.bool_]) -> npt.NDArray[np.uint8]:
    """Arrow's bit order: least significant bit first."""
    return np.packbits(truth, bitorder="little")


def _flags(flags: bytes) -> npt.NDArray[np.bool_]:
    """A byte per flag (0: false) as booleans."""
    return np.frombuffer(flags, np.uint8).astype(bool)


def _bitmap(present: npt.NDArray[np.bool_]) -> pa.Buffer | None:
    """The validity bitmap of ``present``, None when every value is there."""
    return None if present.all() else _buffer(_packed(present))


def empty_table(schema: pa.Schema) -> pa.Table:
    """``schema.empty_table()``, which calls ``pa.array``, without importing pandas."""
    columns = [array([], field.type) for field in schema]
    return pa.Table.from_arrays(columns, schema=schema)


_NONE = type(None)
# The Python types each column type is built from (exactly these: not bool for a
# number, not a subclass); any other value goes to pa.array, which has its own rules.
_KINDS = {
    pa.int32(): frozenset({int, _NONE}),
    pa.int64(): frozenset({int, _NONE}),
    pa.float64(): frozenset({float, int, _NONE}),
    pa.bool_(): frozenset({bool, _NONE}),
    pa.string(): frozenset({str, _NONE}),
}


def _build(values: Sequence[Any], type: pa.DataType) -> pa.Array[Any] | None:
    n = len(values)
    kinds = set(map(_type_of, values))
    allowed = _KINDS.get(type)
    if allowed is not None and not kinds <= allowed:
        return None
    missing = [v is None for v in values] if _NONE in kinds else None
    validity = None if missing is None else _validity(missing)
    if type in _NUMBERS:
        present = values if missing is None else [0 if v is None else v for v in values]
        numbers = np.array(present, _NUMBERS[type])
        return pa.Array.from_buffers(type, n, [validity, _buffer(numbers)])
    if type == pa.bool_():
        truth = np.array([v is True for v in values], dtype=bool)
        return pa.Array.from_buffers(type, n, [validity, _buffer(_packed(truth))])
    if type == pa.string():
        return _strings(values, validity)
    if pa.types.is_list(type) or pa.types.is_map(type):
        if not kinds <= {list, tuple, _NONE}:
            return None
        return _nested(values, type, missing or [False] * n)
    if pa.types.is_struct(type):  # from dicts: a child array per field
        if not kinds <= {dict, _NONE}:
            return None
        children = [
            array([None if v is None else v.get(f.name) for v in values], f.type)
            for f in type
        ]
        mask = None if missing is None else array(missing, pa.bool_())
        return pa.StructArray.from_arrays(children, fields=list(type), mask=mask)
    return None


_type_of = type  # `type` is the parameter's name in _build


def _strings(values: Sequence[Any], validity: pa.Buffer | None) -> pa.Array[Any]:
    """A string array; each distinct string is encoded once (columns such as source,
    dtype or placement repeat a few values over many rows)."""
    distinct = list(set(values))
    if len(distinct) <= _FEW:
        # A comparison per distinct value and row, in NumPy: no Python per row.
        objects = np.array(values, dtype=object)
        indices = np.zeros(len(values), np.int64)
        for code, value in enumerate(distinct[1:], start=1):
            # A str given to NumPy as it is would become its fixed-width string,
            # which drops trailing NULs: compare as objects.
            scalar = np.empty((), dtype=object)
            scalar[()] = value
            indices[np.equal(objects, scalar)] = code
    else:
        codes = {value: code for code, value in enumerate(distinct)}
        indices = np.fromiter(map(codes.__getitem__, values), np.int64, len(values))
    encoded = [b"" if v is None else v.encode("utf-8") for v in distinct]
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)[indices]
    ends = _offsets(lengths, np.int32)
    if len(encoded) == 1:
        text = pa.py_buffer(encoded[0] * len(values))
    else:
        text = pa.py_buffer(b"".join([encoded[i] for i in indices.tolist()]))
    return pa.Array.from_buffers(pa.string(), len(values), [validity, ends, text])


_FEW = 16  # distinct strings told apart by NumPy comparisons


def _nested(
    values: Sequence[Any], type: Any, missing: list[bool]
) -> pa.Array[Any] | None:
    """A list or map array from its validity, offsets and child (the flattened
    items, built alike; a map's child is its struct of keys and items)."""
    items = [() if v is None else v for v in values]
    flat = [x for item in items for x in item]
    child: pa.Array[Any]
    if pa.types.is_map(type):
        if not all(isinstance(x, tuple | list) and len(x) == 2 for x in flat):
            return None
        keys = array([k for k, _ in flat], type.key_type)
        vals = array([v for _, v in flat], type.item_type)
        fields = [type.key_field, type.item_field]
        child = pa.StructArray.from_arrays([keys, vals], fields=fields)
    else:
        child = array(flat, type.value_type)
    offsets = _offsets([len(i) for i in items], np.int32)
    buffers = [_validity(missing), offsets]
    return pa.Array.from_buffers(type, len(items), buffers, children=[child])


def _validity(missing: list[bool]) -> pa.Buffer | None:
    """The validity bitmap (1: a value) of ``missing``, None when nothing is."""
    if not any(missing):
        return None
    return _bitmap(np.logical_not(np.array(missing, dtype=bool)))


def _offsets(
    lengths: Sequence[int] | npt.NDArray[Any], dtype: type[np.signedinteger[Any]]
) -> pa.Buffer:
    ends: npt.NDArray[Any] = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=ends[1:])
    if ends[-1] > np.iinfo(dtype).max:
        raise OverflowError("offsets beyond the type")
    return _buffer(ends.astype(dtype))


def _buffer(data: npt.NDArray[Any]) -> pa.Buffer:
    return pa.py_buffer(data.tobytes())
