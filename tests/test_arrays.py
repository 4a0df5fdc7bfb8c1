"""Arrow arrays built from buffers (ncclparse._arrays) are pa.array's, and parsing
imports no pandas (issue 17: ~0.4 s of CPU per process)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ncclparse import schema
from ncclparse._arrays import array, empty_table, from_codes, repeated, spread

ROOT = Path(__file__).parent.parent

_INT64 = st.integers(-(2**63), 2**63 - 1)
_INT32 = st.integers(-(2**31), 2**31 - 1)
_FLOAT = st.floats(allow_nan=True, allow_infinity=True)
_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
_MAYBE = st.none
STRATEGIES: dict[pa.DataType, st.SearchStrategy[Any]] = {
    pa.int64(): st.one_of(_MAYBE(), _INT64),
    pa.int32(): st.one_of(_MAYBE(), _INT32),
    pa.float64(): st.one_of(_MAYBE(), _FLOAT, _INT32),
    pa.bool_(): st.one_of(_MAYBE(), st.booleans()),
    pa.string(): st.one_of(_MAYBE(), _TEXT),
    pa.list_(pa.float64()): st.one_of(_MAYBE(), st.lists(st.one_of(_MAYBE(), _FLOAT))),
    pa.list_(pa.list_(pa.float64())): st.one_of(
        _MAYBE(), st.lists(st.one_of(_MAYBE(), st.lists(_FLOAT, max_size=3)))
    ),
    pa.list_(pa.string()): st.one_of(_MAYBE(), st.lists(st.one_of(_MAYBE(), _TEXT))),
    pa.map_(pa.string(), pa.string()): st.lists(st.tuples(_TEXT, _TEXT), max_size=3),
}


def _same(built: pa.Array[Any], expected: pa.Array[Any]) -> None:
    built.validate(full=True)
    assert built.type == expected.type
    assert built.null_count == expected.null_count
    assert _plain(built.to_pylist()) == _plain(expected.to_pylist())


def _plain(value: Any) -> Any:
    """NaN as a marker (NaN != NaN), containers as lists."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def test_every_column_type_of_the_result_tables_is_covered() -> None:
    types = {
        f.type
        for s in (schema.MEASUREMENTS_SCHEMA, schema.RUNS_SCHEMA)
        for f in s
        # Lists of structs (runs.enabled, runs.tuned): a struct is built from an
        # array per field, of the types above (tests/test_algorithms.py).
        if not (pa.types.is_list(f.type) and pa.types.is_struct(f.type.value_type))
    }
    assert types <= set(STRATEGIES)


@pytest.mark.parametrize("type_", list(STRATEGIES), ids=str)
@settings(max_examples=60)
@given(data=st.data())
def test_built_arrays_are_pa_arrays(type_: pa.DataType, data: st.DataObject) -> None:
    values = data.draw(st.lists(STRATEGIES[type_], max_size=12))
    _same(array(values, type_), pa.array(values, type=type_))


@pytest.mark.parametrize(
    ("values", "type_"),
    [
        ([2**63], pa.int64()),  # beyond the type: pa.array's error
        ([True, 2], pa.int64()),  # a bool among numbers: pa.array's rules
        ([1.5], pa.int64()),
        (["a", 1], pa.string()),
        ([None], pa.map_(pa.string(), pa.string())),  # a null map
        (["\ud800"], pa.string()),  # a lone surrogate is no UTF-8
    ],
)
def test_what_buffers_cannot_hold_is_pa_arrays_to_decide(
    values: list[Any], type_: pa.DataType
) -> None:
    try:
        expected = pa.array(values, type=type_)
    except Exception as exc:
        with pytest.raises(type(exc)):
            array(values, type_)
    else:
        _same(array(values, type_), expected)


def test_empty_tables_match() -> None:
    for table in (schema.MEASUREMENTS_SCHEMA, schema.RUNS_SCHEMA):
        assert empty_table(table).equals(table.empty_table())


def test_parsing_and_writing_every_format_imports_no_pandas(tmp_path: Path) -> None:
    """In a child process where importing pandas fails: the CLI parses every
    fixture kind and writes each format."""
    script = f"""
import sys
sys.modules["pandas"] = None  # any import of it fails
from ncclparse.cli.app import cli
for fmt in ("parquet", "csv", "jsonl", "arrow"):
    sys.argv = ["ncclparse", "parse", "examples", "tests/fixtures/oneccl",
                "tests/fixtures/imb", "tests/fixtures/nccl_json", "-q",
                "--exclude", "*.py",
                "-o", r"{tmp_path}/m." + fmt, "--runs", r"{tmp_path}/r." + fmt]
    try:
        cli()
    except SystemExit as exc:
        assert exc.code == 0, (fmt, exc.code)
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=300,
    )
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "m.arrow", "m.csv", "m.jsonl", "m.parquet",
        "r.arrow", "r.csv", "r.jsonl", "r.parquet",
    ]  # fmt: skip


@given(
    st.sampled_from(
        [
            ("x", pa.string()),
            ("", pa.string()),
            ("h\x00\u00e9", pa.string()),
            (None, pa.string()),
            (5, pa.int64()),
            (-(2**63), pa.int64()),
            (None, pa.int32()),
            (7, pa.int32()),
            (2**31 - 1, pa.int32()),
            (-(2**31), pa.int32()),  # 32 bits of magnitude: array()'s way
            (2**63 - 1, pa.int64()),
            (1.5, pa.float64()),
            (3, pa.float64()),
            (True, pa.bool_()),
            (False, pa.bool_()),
            (["a", None], pa.list_(pa.string())),  # no buffers of its own: take
        ]
    ),
    st.integers(0, 70),
)
def test_repeated_is_array_of_the_repeated_value(
    case: tuple[object, pa.DataType], n: int
) -> None:
    value, type_ = case
    built = repeated(value, type_, n)
    assert built.type == type_
    assert built.equals(pa.array([value] * n, type=type_))


_CODED = st.lists(
    st.one_of(st.none(), st.text(max_size=5), st.sampled_from(["in-place", "\ud800"])),
    min_size=1,
    max_size=5,
    unique=True,
)


@given(_CODED, st.lists(st.integers(0, 4), max_size=40))
def test_from_codes_is_array_of_the_coded_values(
    distinct: list[str | None], picks: list[int]
) -> None:
    # Every distinct value is used, as in the codes of the values seen.
    codes = [*range(len(distinct)), *(p % len(distinct) for p in picks)]
    values = [distinct[c] for c in codes]
    raw = np.array(codes, np.int32).tobytes()
    try:
        expected = pa.array(values, type=pa.string())
    except (pa.ArrowException, UnicodeError) as exc:  # a lone surrogate
        with pytest.raises(type(exc)):
            from_codes(distinct, raw, len(codes))
        return
    built = from_codes(distinct, raw, len(codes))
    assert built.equals(expected)
    assert built.null_count == values.count(None)


@given(
    st.sampled_from(
        [
            (["a", "bb", None], pa.string()),
            ([3, None, 2**31 - 1], pa.int32()),
            ([1.5, 2, None], pa.float64()),
            ([True, None, False], pa.bool_()),
            ([["x"], None, []], pa.list_(pa.string())),
        ]
    ),
    st.lists(st.integers(0, 6), min_size=3, max_size=3),
)
def test_spread_repeats_each_value(
    case: tuple[list[object], pa.DataType], counts: list[int]
) -> None:
    values, type_ = case
    built = spread(values, type_, counts)
    expected = [v for v, n in zip(values, counts, strict=True) for _ in range(n)]
    assert built.type == type_
    assert built.equals(pa.array(expected, type=type_))


@given(
    st.lists(
        st.one_of(st.none(), st.sampled_from(["a", "bb", "\u00e9", "", "a\x00"])),
        min_size=1,
        max_size=12,
    ),
    st.data(),
)
def test_spread_of_strings_several_runs_share(
    values: list[str | None], data: st.DataObject
) -> None:
    """The runs of a batch share their source, tool and device: equal strings
    among the values (each encoded once) give the same column as distinct ones."""
    size = len(values)
    counts = data.draw(st.lists(st.integers(0, 4), min_size=size, max_size=size))
    built = spread(values, pa.string(), counts)
    expected = [v for v, n in zip(values, counts, strict=True) for _ in range(n)]
    assert built.equals(pa.array(expected, type=pa.string()))


def test_spread_of_strings_refuses_what_array_refuses() -> None:
    with pytest.raises(UnicodeEncodeError, match="surrogates not allowed"):
        spread(["a", "\ud800", "a"], pa.string(), [1, 2, 1])
