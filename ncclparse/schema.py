"""The result tables: Arrow schemas, column names and ``SCHEMA_VERSION``.

``../shared/docs/schema.md`` is the contract; this module is its only implementation.
Every table ncclparse produces is built by :func:`measurements_table` /
:func:`runs_table` and carries ``ncclparse.schema_version`` in its schema metadata.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pyarrow as pa

from ncclparse._arrays import array, empty_table
from ncclparse.errors import SchemaError

# The tools that drive NCCL (or RCCL): GPU collectives, NCCL's algorithms and protocols.
NCCL_TOOLS = frozenset({"nccl-tests", "rccl-tests"})

# Schema history:
#   1 - first release: measurements + runs as documented in schema.md.
#       Columns added after the documented set (additions do not bump the version):
#       measurements: wrong_kind, cputime, time_p99_us, timestamp, grouped;
#       runs: command, oob_ok, avg_busbw_ok, net, nics, gdr, nvls, collnet,
#       local_ranks.
#       Then (nccl-tests -I/-J per-iteration statistics, -T timeouts):
#       measurements: time_avg_us, time_p50_us, time_p95_us, time_stddev_us,
#       iter_skipped, iter_times_us, iter_process_times_us; runs: timeout_s.
#       Then (what the log says of NCCL's algorithms and protocols): runs:
#       nvls_channels, nccl_env, tuner, enabled, tuned, nccl_algo, nccl_proto,
#       algo_source.
SCHEMA_VERSION = 1
VERSION_KEY = b"ncclparse.schema_version"
PER_ITERATION_COLUMNS = (
    "time_avg_us",
    "time_p50_us",
    "time_p95_us",
    "time_stddev_us",
    "iter_skipped",
    "iter_times_us",
    "iter_process_times_us",
)
ALGORITHM_COLUMNS = (
    "nvls_channels",
    "nccl_env",
    "tuner",
    "enabled",
    "tuned",
    "nccl_algo",
    "nccl_proto",
    "algo_source",
)
# Additions newer than tables already written: a table without them (from an earlier
# ncclparse) still conforms, and gets them as nulls (empty lists for `nics`).
ADDED_LATER = frozenset(
    {
        "net",
        "nics",
        "gdr",
        "nvls",
        "collnet",
        "local_ranks",
        *PER_ITERATION_COLUMNS,
        "timeout_s",
        *ALGORITHM_COLUMNS,
    }
)

MEASUREMENT_FIELDS: tuple[pa.Field[pa.DataType], ...] = (
    pa.field("source", pa.string(), nullable=False),
    pa.field("run", pa.int32(), nullable=False),
    pa.field("line", pa.int64(), nullable=False),
    pa.field("tool", pa.string(), nullable=False),
    pa.field("tool_version", pa.string()),
    pa.field("collective", pa.string()),
    pa.field("placement", pa.string(), nullable=False),
    pa.field("size_bytes", pa.int64(), nullable=False),
    pa.field("reported_bytes", pa.int64(), nullable=False),
    pa.field("count", pa.int64()),
    pa.field("dtype", pa.string(), nullable=False),
    pa.field("redop", pa.string()),
    pa.field("root", pa.int32()),
    pa.field("time_us", pa.float64(), nullable=False),
    pa.field("time_min_us", pa.float64()),
    pa.field("time_max_us", pa.float64()),
    pa.field("stddev_pct", pa.float64()),
    pa.field("repetitions", pa.int64()),
    pa.field("algbw_gbps", pa.float64()),
    pa.field("busbw_gbps", pa.float64()),
    pa.field("wrong", pa.float64()),
    pa.field("nranks", pa.int32()),
    pa.field("nnodes", pa.int32()),
    pa.field("device", pa.string()),
    # Additions to the documented set.
    # `count` for nccl-tests `#wrong`, `max_deviation` for the E0-E2 `error`/`res`
    # column (a float where small non-zero values are normal rounding).
    pa.field("wrong_kind", pa.string()),
    # nccl-tests -C 1: the time is CPU launch time, not the collective's duration.
    pa.field("cputime", pa.bool_(), nullable=False),
    # nccl-tests -I 1 per-iteration p99 (i_p99); i_min/i_max go to time_min/max_us
    # and i_cv% to stddev_pct.
    pa.field("time_p99_us", pa.float64()),
    # nccl-tests -S 1 local timestamp as printed ("YYYY-MM-DD HH:MM:SS").
    pa.field("timestamp", pa.string()),
    # The time covers a group of collectives (oneCCL -l a,b,c): never treat it as
    # one collective's time.
    pa.field("grouped", pa.bool_(), nullable=False),
    # nccl-tests -I 1 per-iteration statistics only its -J JSON states (schema.md):
    # mean, median, p95 and standard deviation of the per-iteration times (us), the
    # leading iterations left out of them (-K), every iteration's time (us, max over
    # process rows) and each process row's times (max over its GPUs).
    pa.field("time_avg_us", pa.float64()),
    pa.field("time_p50_us", pa.float64()),
    pa.field("time_p95_us", pa.float64()),
    pa.field("time_stddev_us", pa.float64()),
    pa.field("iter_skipped", pa.int64()),
    pa.field("iter_times_us", pa.list_(pa.float64())),
    pa.field("iter_process_times_us", pa.list_(pa.list_(pa.float64()))),
)

# One row of NCCL's `Enabled NCCL Func/Proto/Algo Matrix`.
ENABLED = pa.struct(
    [
        pa.field("collective", pa.string(), nullable=False),
        pa.field("protocols", pa.list_(pa.string()), nullable=False),
        pa.field("algorithms", pa.list_(pa.string()), nullable=False),
    ]
)
# One distinct choice of NCCL's TUNING lines (`AllReduce: 4096 Bytes -> Algo ...`).
TUNED = pa.struct(
    [
        pa.field("collective", pa.string()),
        pa.field("nccl_bytes", pa.int64(), nullable=False),
        pa.field("algorithm", pa.string(), nullable=False),
        pa.field("protocol", pa.string(), nullable=False),
        pa.field("channels", pa.int32()),
    ]
)
RUN_FIELDS: tuple[pa.Field[pa.DataType], ...] = (
    pa.field("source", pa.string(), nullable=False),
    pa.field("run", pa.int32(), nullable=False),
    pa.field("tool", pa.string(), nullable=False),
    pa.field("tool_version", pa.string()),
    pa.field("collectives", pa.list_(pa.string()), nullable=False),
    pa.field("status", pa.string(), nullable=False),
    pa.field("first_line", pa.int64(), nullable=False),
    pa.field("last_line", pa.int64(), nullable=False),
    pa.field("rows", pa.int64(), nullable=False),
    pa.field("nranks", pa.int32()),
    pa.field("nnodes", pa.int32()),
    # One entry per rank, index = rank; null where the log elided that rank's line.
    pa.field("hosts", pa.list_(pa.string()), nullable=False),
    pa.field("devices", pa.list_(pa.string()), nullable=False),
    pa.field("library_version", pa.string()),
    pa.field("params", pa.map_(pa.string(), pa.string()), nullable=False),
    pa.field("avg_busbw_gbps", pa.float64()),
    pa.field("oob_values", pa.int64()),
    pa.field("errors", pa.list_(pa.string()), nullable=False),
    pa.field("warnings", pa.list_(pa.string()), nullable=False),
    # Additions to the documented set.
    pa.field(
        "command", pa.string()
    ),  # the benchmark's command line, when the log shows it
    pa.field("oob_ok", pa.bool_()),  # OK / FAILED after "Out of bounds values"
    pa.field(
        "avg_busbw_ok", pa.bool_()
    ),  # OK / FAILED after the average (NCCL_TESTS_MIN_BW)
    # What NCCL_DEBUG=INFO lines state about the topology (schema.md): the network
    # transport, its NICs on one host, GPUDirect RDMA, NVLS, CollNet, GPUs per node.
    pa.field("net", pa.string()),
    pa.field("nics", pa.list_(pa.string()), nullable=False),
    pa.field("gdr", pa.bool_()),
    pa.field("nvls", pa.bool_()),
    pa.field("collnet", pa.bool_()),
    pa.field("local_ranks", pa.int32()),
    # nccl-tests -T: the limit (seconds) of the `Test timeout (Ns)` line that ended
    # the run; null when no timeout was reported.
    pa.field("timeout_s", pa.int32()),
    # What the log says of NCCL's algorithms and protocols (schema.md): NVLS
    # channels, the NCCL_* settings NCCL read, the tuner plugin, the enabled
    # Func/Proto/Algo matrix, the per-call choices of TUNING lines, and the
    # NCCL_ALGO / NCCL_PROTO the user set (from NCCL's ENV lines or the command).
    pa.field("nvls_channels", pa.int32()),
    pa.field("nccl_env", pa.map_(pa.string(), pa.string()), nullable=False),
    pa.field("tuner", pa.string()),
    pa.field("enabled", pa.list_(ENABLED), nullable=False),
    pa.field("tuned", pa.list_(TUNED), nullable=False),
    pa.field("nccl_algo", pa.string()),
    pa.field("nccl_proto", pa.string()),
    pa.field("algo_source", pa.string()),
    # Measurement lines with an impossible value (negative, infinite or NaN time,
    # ...), each with its line number, reason and text: data errors of the run.
    pa.field("refused", pa.list_(pa.string()), nullable=False),
)


def arrow_metadata(*parts: Mapping[bytes, bytes]) -> dict[bytes | str, bytes | str]:
    """``parts`` merged (later wins), typed as pa.schema() wants its metadata."""
    return {key: value for part in parts for key, value in part.items()}


_METADATA = arrow_metadata({VERSION_KEY: str(SCHEMA_VERSION).encode()})
MEASUREMENTS_SCHEMA = pa.schema(MEASUREMENT_FIELDS, metadata=_METADATA)
RUNS_SCHEMA = pa.schema(RUN_FIELDS, metadata=_METADATA)
MEASUREMENT_COLUMNS = tuple(f.name for f in MEASUREMENT_FIELDS)
RUN_COLUMNS = tuple(f.name for f in RUN_FIELDS)

# The grouping keys, one vocabulary for every module:
# - SHAPE_KEYS: what makes measurements of different runs comparable, apart from
#   their size (history baselines, comparisons, slow-host scores);
# - SERIES_KEYS: one run's sweep of one shape (fits, checks);
# - BLOCK_KEYS: a series with both placements together (report sections, verdicts).
RUN_KEYS = ("source", "run")
SHAPE_KEYS = (
    "tool",
    "collective",
    "dtype",
    "redop",
    "root",
    "placement",
    "nranks",
    "nnodes",
)
SERIES_KEYS = (*RUN_KEYS, *SHAPE_KEYS)
BLOCK_KEYS = tuple(k for k in SERIES_KEYS if k != "placement")

# A run is complete (its footer was read), truncated (the log ends first) or failed
# (the tool reported an error).
RunStatus = Literal["complete", "truncated", "failed"]
DTYPES = (
    "int8",
    "uint8",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "float8_e4m3",
    "float8_e5m2",
)
DTYPE_BYTES = {
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "float8_e4m3": 1,
    "float8_e5m2": 1,
}


def measurements_table(
    columns: Mapping[str, Sequence[Any] | pa.Array[Any]],
) -> pa.Table:
    """Build a ``measurements`` table from column lists (or arrays of the column's
    type); missing columns are null.

    Raises SchemaError when a non-nullable column holds a null.
    """
    return _build(MEASUREMENTS_SCHEMA, columns)


def runs_table(columns: Mapping[str, Sequence[Any]]) -> pa.Table:
    """Build a ``runs`` table from column lists; missing columns are null/empty."""
    return _build(RUNS_SCHEMA, columns)


def _build(
    schema: pa.Schema, columns: Mapping[str, Sequence[Any] | pa.Array[Any]]
) -> pa.Table:
    unknown = set(columns) - set(schema.names)
    if unknown:
        raise SchemaError(f"unknown column(s): {', '.join(sorted(unknown))}")
    length = len(next(iter(columns.values()))) if columns else 0
    arrays: list[pa.Array[Any]] = []
    for field in schema:
        values = columns.get(field.name)
        if values is None:
            values = [None] * length
        if isinstance(values, pa.Array):  # built already (the parsers' native columns)
            same = values.type == field.type
            arrays.append(values if same else array(values.to_pylist(), field.type))
        else:
            arrays.append(array(values, field.type))
    table = pa.Table.from_arrays(arrays, schema=schema)
    conform(table, schema)
    return table


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Check that ``table`` matches ``schema`` (types, non-null columns, version).

    Returns the table cast to the schema (extra columns are kept after the known ones).
    Raises SchemaError naming the first column that does not fit.
    """
    meta = table.schema.metadata or {}
    found = meta.get(VERSION_KEY)
    if found is not None and found != str(SCHEMA_VERSION).encode():
        raise SchemaError(
            f"table was written with ncclparse schema {found.decode()}; "
            f"this version reads schema {SCHEMA_VERSION}: upgrade ncclparse"
        )
    for field in schema:
        if field.name not in table.column_names and field.name in ADDED_LATER:
            table = table.append_column(field, _empty_column(field, table.num_rows))
        if field.name not in table.column_names:
            raise SchemaError(f"column {field.name!r} is missing")
        column = table.column(field.name)
        if not _same_type(column.type, field.type):
            raise SchemaError(
                f"column {field.name!r}: expected {field.type}, found {column.type}"
            )
        if not field.nullable and column.null_count:
            raise SchemaError(f"column {field.name!r} holds nulls but may not")
    extra = [name for name in table.column_names if name not in schema.names]
    ordered = table.select([*schema.names, *extra])
    target = pa.schema(
        [*schema, *(ordered.schema.field(name) for name in extra)],
        metadata=arrow_metadata(meta, schema.metadata),
    )
    if ordered.schema.equals(target, check_metadata=True):
        return ordered  # as it is (the cast imports pyarrow.compute: 30 ms)
    return ordered.cast(target)


def _empty_column(field: pa.Field[pa.DataType], rows: int) -> pa.Array[Any]:
    """Nulls for ``field``, or empty lists where it may not be null."""
    empty: list[Any] | None = (
        []
        if (pa.types.is_list(field.type) or pa.types.is_map(field.type))
        and not field.nullable
        else None
    )
    return array([empty] * rows, field.type)


def _same_type(found: pa.DataType, expected: pa.DataType) -> bool:
    # Parquet renames list items ("item" -> "element"); the types are the same.
    if pa.types.is_list(found) and pa.types.is_list(expected):
        return _same_type(found.value_type, expected.value_type)
    if pa.types.is_struct(found) and pa.types.is_struct(expected):
        return found.num_fields == expected.num_fields and all(
            f.name == e.name and _same_type(f.type, e.type)
            for f, e in zip(found, expected, strict=True)
        )
    return found.equals(expected)


def empty_measurements() -> pa.Table:
    """An empty ``measurements`` table with the full schema."""
    return empty_table(MEASUREMENTS_SCHEMA)
