"""Columns of row dicts built in C (``_scan.dict_columns``, issue 17) are what
``arrays.array`` builds of the same values, column by column, or left to it.

``_model.Collector.flush`` turns the rows parsers read (dicts) into the measurement
columns; with the extension, the columns of plain kinds (integers, doubles, booleans,
strings) come from C buffers. A column holding a value ``array()`` would not build
from buffers (a bool among integers, an integer beyond the type, a float in an
integer column, a str subclass) is left to the Python path (None), so the table and
any error are ``array()``'s. The whole-parse comparison is in test_scanner.py.
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ncclparse._arrays import array
from ncclparse.parsers import _lines, _model

NATIVE = _lines.dict_columns

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.integers(-(2**31) - 2, 2**31 + 2),
    st.integers(0, 100),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),  # lone surrogates too: UTF-8 cannot encode them
    st.sampled_from(["in-place", "out-of-place", "sum", "float", "\ud800", "é"]),
)
_NAMES = [f.name for f in _model._ROW_FIELDS]
_ROWS = st.lists(
    st.dictionaries(st.sampled_from(_NAMES), _VALUES, max_size=len(_NAMES)),
    min_size=1,
    max_size=25,
)


def _plain(values: list[Any]) -> list[Any]:
    """``values`` with NaN made comparable."""
    return ["<NaN>" if isinstance(v, float) and math.isnan(v) else v for v in values]


def _exactly(kind: type[Any], value: Any) -> bool:
    return value is None or type(value) is kind


def _encodes(text: str | None) -> bool:
    try:
        (text or "").encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _fits(type_: pa.DataType, value: Any) -> bool:
    """Whether array() builds ``value`` into ``type_`` from buffers."""
    if type_ not in _model._NATIVE_KINDS:  # lists: only a column of None
        return value is None
    if type_ == pa.string():
        return _exactly(str, value) and _encodes(value)
    if type_ == pa.bool_():
        return _exactly(bool, value)
    if type_ == pa.float64():
        return _exactly(float, value) or (_exactly(int, value) and abs(value) < 2**1000)
    bits = type_.bit_width - 1
    return _exactly(int, value) and (value is None or -(2**bits) <= value < 2**bits)


@pytest.mark.skipif(NATIVE is None, reason="no native extension")
@given(_ROWS)
@example([{"size_bytes": True}, {"size_bytes": 8}])
@example([{"root": 2**31}, {"root": -1}])
@example([{"time_us": 2**1030}, {"time_us": 1.5}])
@example([{"dtype": "float"}, {"dtype": "\ud800"}])
@example([{"cputime": None}, {}])
@example([{"iter_times_us": None}, {}])
@example([{"iter_times_us": [1.0]}, {}])
def test_each_column_is_what_array_builds(rows: list[dict[str, Any]]) -> None:
    built = _model._native_columns(rows)
    assert set(built) == set(_NAMES)
    for field in _model._ROW_FIELDS:
        default = _model._ROW_DEFAULTS.get(field.name)
        values = [row.get(field.name, default) for row in rows]
        column = built[field.name]
        if all(_fits(field.type, v) for v in values):
            assert column is not None, field.name
        if column is None:
            continue  # the Python path builds it, as without the extension
        assert column.type == field.type
        assert _plain(column.to_pylist()) == _plain(
            array(values, field.type).to_pylist()
        )
        assert column.null_count == sum(v is None for v in values)


def test_without_the_extension_no_column_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_lines, "dict_columns", None)
    assert _model._native_columns([{"line": 1}]) == {}


@pytest.mark.skipif(NATIVE is None, reason="no native extension")
def test_the_columns_a_parse_gives() -> None:
    rows = [
        {"line": 7, "placement": "in-place", "time_us": 1.5, "cputime": True},
        {"line": 8, "placement": "out-of-place", "root": -1, "count": None},
    ]
    built = _model._native_columns(rows)
    assert built["line"] is not None
    assert built["line"].to_pylist() == [7, 8]
    assert built["placement"] is not None
    assert built["placement"].to_pylist() == ["in-place", "out-of-place"]
    assert built["time_us"] is not None
    assert built["time_us"].to_pylist() == [1.5, None]
    assert built["root"] is not None
    assert built["root"].to_pylist() == [None, -1]
    assert built["count"] is not None
    assert built["count"].to_pylist() == [None, None]
    # cputime and grouped default to False where a row has none.
    assert built["cputime"] is not None
    assert built["cputime"].to_pylist() == [True, False]
    assert built["grouped"] is not None
    assert built["grouped"].to_pylist() == [False, False]


class _Name(str):
    """A column name that is not a plain str: dict_columns then looks every
    column up by its name, row by row (the reference for the path below)."""

    __slots__ = ()


_KEYS = st.one_of(
    st.sampled_from(_NAMES),
    st.sampled_from(["other", "line_", 7, _Name("line"), _Name("time_us")]),
)
_LIKE = st.lists(
    st.dictionaries(_KEYS, _VALUES, max_size=len(_NAMES) + 3), min_size=1, max_size=6
)


@pytest.mark.skipif(NATIVE is None, reason="no native extension")
@given(_LIKE, st.lists(st.integers(0, 5), min_size=1, max_size=40))
@example([{"line": 1, "time_us": 2.0}, {"time_us": 3.0, "line": 4}], [0, 1, 0, 1])
@example([{"line": 1, "other": 2}, {_Name("line"): 5, 7: None}], [0, 1, 1, 0])
def test_rows_read_entry_by_entry_are_rows_read_by_name(
    shapes: list[dict[Any, Any]], picks: list[int]
) -> None:
    # Rows made alike (the same keys in the same order) are read in one pass over
    # their entries, each key's column remembered by its position: rows alike,
    # then in another order, with keys that are no column or no plain str, give
    # the buffers of every column looked up by name.
    assert NATIVE is not None
    rows = [dict(shapes[i % len(shapes)]) for i in picks]
    names, kinds, defaults = _model._ROW_SPEC
    by_name = tuple(_Name(name) for name in names)
    assert NATIVE(rows, names, kinds, defaults) == NATIVE(
        rows, by_name, kinds, defaults
    )
