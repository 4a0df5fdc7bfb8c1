"""The parser inside distributed engines: PySpark ``mapInArrow`` and Dask ``from_map``.

A log's rows depend on its bytes and its name alone, so each worker parses the logs it
is given and the engine gathers the rows (``docs/datalake.md`` is the recipe):

* :func:`parse_contents` takes the record batches ``spark.read.format("binaryFile")``
  gives (``path``, ``content``) and yields the rows of one table;
* :func:`parse_path` parses one path or URL into a pandas frame for
  ``dask.dataframe.from_map``, with :func:`empty_frame` as its ``meta``;
* :func:`spark_ddl` gives the Spark SQL schema of an Arrow schema.

The tables are ``measurements`` and ``runs`` (``schema.md``) and ``failures``
(:data:`FAILURES_SCHEMA`): one row per log that could not be parsed, the same errors
:func:`ncclparse.parse_many` collects. Every log's rows are those ``parse_many`` gives
for it, with ``source`` its path: a log that fails midway (a corrupt compressed file)
keeps the runs it completed and has its failure row. No engine is imported here.
"""

from __future__ import annotations

import importlib
import io
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any, Literal

import pandas as pd
import pyarrow as pa

from ncclparse.inputs.parsing import parse_sources
from ncclparse.parsers import ParseResult
from ncclparse.schema import MEASUREMENTS_SCHEMA, RUNS_SCHEMA, arrow_metadata

__all__ = [
    "FAILURES_SCHEMA",
    "TableName",
    "empty_frame",
    "parse_contents",
    "parse_path",
    "spark_ddl",
]

TableName = Literal["measurements", "runs", "failures"]

FAILURES_SCHEMA = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        # The exception's class: UnknownLogFormatError (not a benchmark log, or
        # empty) or InputError (unreadable, corrupt compressed data, ...).
        pa.field("error", pa.string(), nullable=False),
        pa.field("message", pa.string(), nullable=False),
    ],
    metadata=arrow_metadata(MEASUREMENTS_SCHEMA.metadata),
)
_SCHEMAS = {
    "measurements": MEASUREMENTS_SCHEMA,
    "runs": RUNS_SCHEMA,
    "failures": FAILURES_SCHEMA,
}


def parse_contents(
    batches: Iterable[pa.RecordBatch], table: TableName = "measurements"
) -> Iterator[pa.RecordBatch]:
    """Parse each log of ``batches`` and yield the rows of ``table``.

    For ``DataFrame.mapInArrow``: each batch has a ``path`` (string) and a ``content``
    (binary) column, other columns are ignored. gzip, xz and zstd content is
    decompressed (told by its first bytes). The batches yielded conform to the
    table's schema (pass ``spark_ddl`` of it to Spark); a log without rows of the
    table yields none, and its failure, if any, is a row of ``table="failures"``.
    Raises ValueError when a batch lacks ``path`` or ``content``.
    """
    schema = _schema(table)
    for batch in batches:
        missing = {"path", "content"} - set(batch.schema.names)
        if missing:
            raise ValueError(
                f"parse_contents: no {' or '.join(sorted(missing))} column in "
                f"{batch.schema.names}: the batches need the path (string) and content "
                '(binary) of each log, as spark.read.format("binaryFile") gives them'
            )
        paths, contents = batch.column("path"), batch.column("content")
        for path, content in zip(paths, contents, strict=True):
            name = str(path.as_py())
            result = parse_sources(
                [(io.BytesIO(content.as_py() or b""), name)], None, 1, None
            )
            yield from _batches(_pick(result, table, schema, name))


def parse_path(
    path: str | os.PathLike[str], table: TableName = "measurements"
) -> pd.DataFrame:
    """The rows of ``table`` parsed from one log, as a pandas frame.

    For ``dask.dataframe.from_map(parse_path, paths, meta=empty_frame())``. A URL
    (``s3://...``, anything with ``://``) is opened with fsspec, which Dask brings,
    any other path as a file. Columns have pandas' ArrowDtype of the table's schema,
    so ``to_parquet`` writes that schema (nullable integers stay integers, maps
    maps). A log that cannot be parsed gives no rows (its failure is the row of
    ``table="failures"``).
    """
    schema = _schema(table)
    name = os.fspath(path)
    if "://" in name:
        fsspec: Any = importlib.import_module("fsspec")
        with fsspec.open(name, "rb") as handle:
            result = parse_sources([(handle, name)], None, 1, None)
    else:
        result = parse_sources([name], None, 1, None)
    return _frame(_pick(result, table, schema, name))


def empty_frame(table: TableName = "measurements") -> pd.DataFrame:
    """An empty frame with the columns and dtypes :func:`parse_path` gives."""
    return _frame(_schema(table).empty_table())


def spark_ddl(schema: pa.Schema) -> str:
    """The Spark SQL DDL of ``schema``: ``"source STRING NOT NULL, run INT, ..."``.

    Spark's type for each Arrow type: booleans, signed integers (TINYINT to BIGINT),
    floats, strings, binaries, date32 (DATE), timestamps (TIMESTAMP with a time
    zone, else TIMESTAMP_NTZ), lists (ARRAY), maps, structs and dictionaries (their
    value type). A name that is not a plain identifier, or that Spark reserves, is
    quoted with backticks. Raises TypeError naming the column of any other type.
    """
    return ", ".join(_column(field, field.name) for field in schema)


def _schema(table: str) -> pa.Schema:
    if table not in _SCHEMAS:
        raise ValueError(
            f"unknown table {table!r}: expected one of {', '.join(_SCHEMAS)}"
        )
    return _SCHEMAS[table]


def _pick(result: ParseResult, table: str, schema: pa.Schema, name: str) -> pa.Table:
    if table == "measurements":
        return result.measurements
    if table == "runs":
        return result.runs
    return pa.Table.from_pylist(
        [
            {"source": name, "error": type(exc).__name__, "message": str(exc)}
            for exc in result.failures
        ],
        schema=schema,
    )


def _batches(table: pa.Table) -> Iterator[pa.RecordBatch]:
    return (batch for batch in table.to_batches() if batch.num_rows)


def _frame(table: pa.Table) -> pd.DataFrame:
    return table.to_pandas(types_mapper=pd.ArrowDtype)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Spark SQL's reserved words (SELECT keyword FROM sql_keywords() WHERE reserved, Spark
# 4.3): not names unless quoted, once spark.sql.ansi.enforceReservedKeywords is on.
_RESERVED_WORDS = """
    ALL AND ANY AS AUTHORIZATION BOTH CALL CASE CAST CHECK COLLATE COLLATION
    COLLATIONS COLUMN CONSTRAINT CREATE CROSS CURRENT_DATE CURRENT_PATH
    CURRENT_SCHEMA CURRENT_TIME CURRENT_TIMESTAMP CURRENT_USER DISTINCT ELSE END
    ESCAPE EXCEPT EXECUTE FALSE FETCH FILTER FOR FOREIGN FROM FULL GRANT GROUP
    HAVING IN INNER INTERSECT INTO IS JOIN LATERAL LEADING LEFT LOCALTIME NATURAL
    NOT NULL OFFSET ON ONLY OR ORDER OUTER OVERLAPS PRIMARY RECURSIVE REFERENCES
    RIGHT SELECT SESSION_USER SOME SQL TABLE THEN TIME TO TRAILING UNION UNIQUE
    UNKNOWN USER USING WHEN WHERE WITH WITHIN
"""
_RESERVED = frozenset(_RESERVED_WORDS.split())
_SIMPLE = (
    (pa.types.is_boolean, "BOOLEAN"),
    (pa.types.is_int8, "TINYINT"),
    (pa.types.is_int16, "SMALLINT"),
    (pa.types.is_int32, "INT"),
    (pa.types.is_int64, "BIGINT"),
    (pa.types.is_float32, "FLOAT"),
    (pa.types.is_float64, "DOUBLE"),
    (pa.types.is_string, "STRING"),
    (pa.types.is_large_string, "STRING"),
    (pa.types.is_binary, "BINARY"),
    (pa.types.is_large_binary, "BINARY"),
    (pa.types.is_date32, "DATE"),
)


def _column(field: pa.Field[Any], where: str, separator: str = " ") -> str:
    name = field.name
    if not _IDENTIFIER.fullmatch(name) or name.upper() in _RESERVED:
        name = "`" + name.replace("`", "``") + "`"
    nullable = "" if field.nullable else " NOT NULL"
    return f"{name}{separator}{_type(field.type, where)}{nullable}"


def _type(kind: pa.DataType, where: str) -> str:
    for test, spark in _SIMPLE:
        if test(kind):
            return spark
    if isinstance(kind, pa.DictionaryType):
        return _type(kind.value_type, where)
    if isinstance(kind, pa.TimestampType):
        return "TIMESTAMP" if kind.tz is not None else "TIMESTAMP_NTZ"
    if isinstance(kind, pa.ListType | pa.LargeListType):
        return f"ARRAY<{_type(kind.value_type, f'{where}[]')}>"
    if isinstance(kind, pa.MapType):
        key = _type(kind.key_type, f"{where} key")
        return f"MAP<{key}, {_type(kind.item_type, f'{where} value')}>"
    if isinstance(kind, pa.StructType):
        fields = (kind.field(i) for i in range(kind.num_fields))
        inner = ", ".join(_column(f, f"{where}.{f.name}", ": ") for f in fields)
        return f"STRUCT<{inner}>"
    raise TypeError(
        f"column {where!r}: Arrow type {kind} has no Spark SQL type here (booleans, "
        "signed integers, floats, strings, binaries, date32, timestamps, lists, maps, "
        "structs and dictionaries of them have)"
    )
