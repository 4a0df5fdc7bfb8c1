"""The result schema: keys, version metadata, building and conforming tables."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ncclparse import schema
from ncclparse.errors import SchemaError


def test_one_vocabulary_of_grouping_keys() -> None:
    assert (*schema.RUN_KEYS, *schema.SHAPE_KEYS) == schema.SERIES_KEYS
    assert schema.SHAPE_KEYS[0] == "tool"
    assert "placement" not in schema.BLOCK_KEYS
    assert set(schema.SERIES_KEYS) - set(schema.BLOCK_KEYS) == {"placement"}
    assert set(schema.SERIES_KEYS) <= set(schema.MEASUREMENT_COLUMNS)


def test_tables_carry_the_schema_version() -> None:
    table = schema.measurements_table({})
    assert table.num_rows == 0
    assert (
        table.schema.metadata[schema.VERSION_KEY] == str(schema.SCHEMA_VERSION).encode()
    )
    assert schema.runs_table({}).schema.metadata[schema.VERSION_KEY] == b"1"


def test_missing_columns_are_null() -> None:
    table = schema.measurements_table(
        {
            "source": ["a"],
            "run": [0],
            "line": [3],
            "tool": ["nccl-tests"],
            "placement": ["in-place"],
            "size_bytes": [8],
            "reported_bytes": [8],
            "dtype": ["float32"],
            "time_us": [1.5],
            "cputime": [False],
            "grouped": [False],
        }
    )
    row = table.to_pylist()[0]
    assert row["collective"] is None
    assert row["nranks"] is None
    assert row["time_us"] == 1.5


def test_conform_rejects_a_wrong_type_naming_the_column() -> None:
    bad = schema.measurements_table({}).set_column(
        0, "source", pa.array([], pa.int64())
    )
    with pytest.raises(SchemaError, match="source"):
        schema.conform(bad, schema.MEASUREMENTS_SCHEMA)
