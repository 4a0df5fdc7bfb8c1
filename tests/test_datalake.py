"""ncclparse.inputs.lake and the recipes of docs/datalake.md, run as written on real logs.

The Python and shell blocks are parsed out of the doc's sections, so an edit of the doc
that breaks them fails here; only their ``/lake/`` paths move under a temporary
directory. The lake holds two nights of logs in the nightly layout: night 1 the real
2-node H100 all_reduce log and two copies of it with their own jitter (tests/_derive.py),
a real oneCCL allgather log, a real nccl-tests reduce log, a gzipped real allgather log
and a file that is not a log; night 2 the three pairs twice as slow from 1 MiB up, a real
oneCCL alltoall log and an xz-compressed real log cut off by a killed job. The history
is written by the doc's ``ncclparse ingest`` loop (cluster a3), plus one log of another
cluster that the queries must leave out.

Dask and DuckDB come with the ``test`` extra (the lowest-versions job has neither: they
skip there). Spark runs where pyspark is installed and ``java`` is on PATH (CI installs
both, and requires them: tests/_required.py), in the slow set; it is kept on the
loopback interface.
"""

from __future__ import annotations

import datetime as dt
import gzip
import importlib
import io
import lzma
import math
import os
import re
import shutil
import subprocess
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import ncclparse
from ncclparse.inputs.lake import (
    FAILURES_SCHEMA,
    empty_frame,
    parse_contents,
    parse_path,
    spark_ddl,
)
from ncclparse.schema import MEASUREMENTS_SCHEMA, RUNS_SCHEMA, conform
from ncclparse.store.history import HISTORY_SCHEMA, ingest, read_history
from tests import _derive as derive
from tests._docs import code_block
from tests._required import missing

ROOT = Path(__file__).parent.parent
DOC = ROOT / "docs" / "datalake.md"
FIXTURES = ROOT / "tests" / "fixtures"
NIGHTS = ("2024-05-01", "2024-05-02")
PAIRS = ("node01_node02", "node01_node03", "node02_node03")
HISTORY_READ_SCHEMA = pa.schema([*HISTORY_SCHEMA, pa.field("date", pa.string())])
GIB = 1 << 30
NOT_A_LOG = "hello from the log collector\n"


def _block(section: str, language: str) -> str:
    """The ``language`` code block of the doc's section headed ``section``."""
    return code_block("datalake.md", section, language)


def _rooted(code: str, root: Path) -> str:
    """``code`` with every /lake/ path moved under ``root``."""
    return re.sub(r"(?<=[\s\"'(])/lake/", f"{root}/lake/", code)


def _run_block(section: str, root: Path, namespace: dict[str, Any]) -> None:
    code = _rooted(_block(section, "python"), root)
    exec(compile(code, str(DOC), "exec"), namespace)


@dataclass(frozen=True)
class Lake:
    root: Path
    logs: tuple[Path, ...]  # every log, in path order (not the file that is not one)
    not_a_log: Path
    history: Path

    @property
    def known(self) -> Path:
        """The real 2-node H100 log, as night 1's first pair."""
        return self.root / "lake" / "nccl-logs" / NIGHTS[0] / f"pair_{PAIRS[0]}.log"


def _pair_log(night: int, pair: int) -> str:
    if night == 0 and pair == 0:
        return derive.healthy()  # the real log, byte for byte
    jitter = derive.jitter(10 * night + pair)
    slower = 2.0 if night == 1 else 1.0

    def factor(size: int) -> float:
        return (slower if size >= 2**20 else 1.0) * jitter(size)

    return derive.scale(derive.healthy(), factor)


def _make_lake(root: Path) -> Lake:
    logs_root = root / "lake" / "nccl-logs"
    first, second = (logs_root / night for night in NIGHTS)
    for night, directory in enumerate((first, second)):
        directory.mkdir(parents=True)
        for pair, name in enumerate(PAIRS):
            (directory / f"pair_{name}.log").write_text(_pair_log(night, pair))
    nccl, oneccl = FIXTURES / "nccl", FIXTURES / "oneccl"
    shutil.copy(oneccl / "v2021.14_allgather_np2.log", first / "oneccl_allgather.log")
    shutil.copy(
        nccl / "superbench-testdata_reduce_a100_8gpu_c0_redop_root_cols_complete.log",
        first / "reduce_a100.log",
    )
    allgather = nccl / "nccl-644_allgather_old_format_no_redop_low_busbw_fragment.log"
    (first / "allgather_old.log.gz").write_bytes(gzip.compress(allgather.read_bytes()))
    (first / "collector.txt").write_text(NOT_A_LOG)
    shutil.copy(oneccl / "v2021.14_alltoall_np4.log", second / "oneccl_alltoall.log")
    cut = nccl / "nccltests-128_reducescatter_2node_8rank_zero_size_rows_truncated.log"
    (second / "reducescatter_cut.log.xz").write_bytes(lzma.compress(cut.read_bytes()))
    logs = tuple(sorted(p for p in logs_root.glob("*/*") if p.suffix != ".txt"))
    return Lake(root, logs, first / "collector.txt", root / "lake" / "nccl-history")


def _ingest(lake: Lake) -> subprocess.CompletedProcess[str]:
    """The doc's ingest loop, with ``ncclparse`` this checkout."""
    bin_dir = lake.root / "bin"
    bin_dir.mkdir()
    (bin_dir / "ncclparse").write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -m ncclparse "$@"\n'
    )
    (bin_dir / "ncclparse").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        ["sh", "-c", _rooted(_block("The history, nightly", "sh"), lake.root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    lake = _make_lake(tmp_path_factory.mktemp("datalake"))
    done = _ingest(lake)
    # The loop goes on past night 1's file that is not a log; ingest names it.
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    added = "added ({} rows), 0 already present, 0 without measurements"
    assert done.stderr == (
        f"Error: {lake.not_a_log}:1: not a recognised benchmark log (nccl-tests, "
        "rccl-tests, oneCCL benchmark or IMB); first line: "
        f"{NOT_A_LOG.strip()!r}\n"
        f"{lake.history}: 6 {added.format(298)}\n"  # 3 x 62 + 18 + 68 + 26
        f"{lake.history}: 5 {added.format(234)}\n"  # 3 x 62 + 34 + 14
    )
    # Another cluster's night: the queries' tags['cluster'] = 'a3' leaves it out.
    other = ncclparse.parse(derive.scale(derive.healthy(), derive.jitter(99)))
    ingest(other, lake.history, tags={"cluster": "b1"}, date=dt.date(2024, 5, 1))
    return lake


def _expected(lake: Lake, table: str = "measurements") -> pa.Table:
    """What ncclparse.parse gives for each log of the lake, in path order."""
    results = [ncclparse.parse(path) for path in lake.logs]
    return pa.concat_tables(getattr(result, table) for result in results)


def _comparable(rows: list[dict[str, Any]], schema: pa.Schema) -> list[dict[str, Any]]:
    """The ``schema`` columns of ``rows`` as values that compare alike whichever engine
    gave them, sorted: NaN equal to NaN, maps as dicts, timestamps as the naive local
    times PySpark collects."""
    maps = {f.name for f in schema if pa.types.is_map(f.type)}
    plain = []
    for row in rows:
        values = {name: row[name] for name in schema.names}
        for name, value in values.items():
            if isinstance(value, float) and math.isnan(value):
                values[name] = "NaN"
            elif name in maps and value is not None:
                values[name] = dict(value)
            elif isinstance(value, dt.datetime) and value.tzinfo is not None:
                values[name] = value.astimezone().replace(tzinfo=None)
        plain.append(values)
    return sorted(plain, key=lambda values: repr(list(values.values())))


def _sorted_rows(table: pa.Table, schema: pa.Schema) -> list[dict[str, Any]]:
    return _comparable(table.to_pylist(), schema)


def _spark_rows(frame: Any, schema: pa.Schema) -> list[dict[str, Any]]:
    """The rows Spark collects of ``frame``, with ``file:`` gone from local paths."""
    rows = [row.asDict(recursive=True) for row in frame.collect()]
    for row in rows:
        row["source"] = row["source"].removeprefix("file:")
    return _comparable(rows, schema)


def _night_rows(lake: Lake) -> list[tuple[str, int, float, int]]:
    """The doc's query, computed with pandas from the deduplicated history."""
    frame = read_history(lake.history).to_pandas()
    cluster = frame["tags"].map(lambda tags: dict(tags).get("cluster"))
    assert set(cluster) == {"a3", "b1"}  # the tag filter has something to leave out
    chosen = frame[
        (frame["collective"] == "all_reduce")
        & (frame["placement"] == "out-of-place")
        & (frame["status"] == "complete")
        & (cluster == "a3")
    ]
    groups = chosen.groupby(["date", "size_bytes"], observed=True)["busbw_gbps"]
    result = groups.agg(["median", "size"]).reset_index()
    return [
        (str(date), int(size), float(median), int(n))
        for date, size, median, n in result.itertuples(index=False)
    ]


def _check_night_rows(rows: list[tuple[str, int, float, int]], lake: Lake) -> None:
    assert rows == _night_rows(lake)
    assert len(rows) == 2 * 31  # 31 sizes, 8 B to 8 GiB, each night
    by_key = {(date, size): (busbw, n) for date, size, busbw, n in rows}
    # Three pairs a night (medians of three are exact everywhere); night 2 is slower.
    assert {n for _, n in by_key.values()} == {3}
    assert by_key[(NIGHTS[0], GIB)] == (297.86, 3)
    assert by_key[(NIGHTS[1], GIB)] == (150.21, 3)  # about half


# --- spark_ddl -------------------------------------------------------------------------


def test_spark_ddl_of_the_measurements() -> None:
    ddl = spark_ddl(MEASUREMENTS_SCHEMA)
    assert ddl.startswith(
        "source STRING NOT NULL, run INT NOT NULL, line BIGINT NOT NULL, "
        "tool STRING NOT NULL, tool_version STRING, collective STRING, "
    )
    assert ", size_bytes BIGINT NOT NULL, " in ddl
    assert ", root INT, time_us DOUBLE NOT NULL, " in ddl
    assert ", busbw_gbps DOUBLE, " in ddl
    assert ", timestamp STRING, grouped BOOLEAN NOT NULL, " in ddl
    assert ddl.endswith(
        ", iter_skipped BIGINT, iter_times_us ARRAY<DOUBLE>, "
        "iter_process_times_us ARRAY<ARRAY<DOUBLE>>"
    )
    assert ddl.count(", ") == len(MEASUREMENTS_SCHEMA) - 1


def test_spark_ddl_of_the_runs() -> None:
    ddl = spark_ddl(RUNS_SCHEMA)
    assert ", collectives ARRAY<STRING> NOT NULL, status STRING NOT NULL, " in ddl
    assert ", hosts ARRAY<STRING> NOT NULL, " in ddl
    assert ", params MAP<STRING, STRING> NOT NULL, avg_busbw_gbps DOUBLE, " in ddl
    assert ddl.endswith(
        ", nvls BOOLEAN, collnet BOOLEAN, local_ranks INT, timeout_s INT, "
        "nvls_channels INT, nccl_env MAP<STRING, STRING> NOT NULL, tuner STRING, "
        "enabled ARRAY<STRUCT<collective: STRING NOT NULL, protocols: ARRAY<STRING> "
        "NOT NULL, algorithms: ARRAY<STRING> NOT NULL>> NOT NULL, "
        "tuned ARRAY<STRUCT<collective: STRING, nccl_bytes: BIGINT NOT NULL, "
        "algorithm: STRING NOT NULL, protocol: STRING NOT NULL, channels: INT>> "
        "NOT NULL, nccl_algo STRING, nccl_proto STRING, algo_source STRING, "
        "refused ARRAY<STRING> NOT NULL"
    )


def test_spark_ddl_of_the_history() -> None:
    ddl = spark_ddl(HISTORY_READ_SCHEMA)
    assert ddl.startswith(spark_ddl(MEASUREMENTS_SCHEMA) + ", ")
    assert ddl.endswith(
        ", hosts ARRAY<STRING>, status STRING, tags MAP<STRING, STRING>, "
        "ingest_key STRING NOT NULL, ingest_id STRING NOT NULL, "
        "ingested_at TIMESTAMP NOT NULL, date STRING"
    )


def test_spark_ddl_of_the_failures() -> None:
    assert spark_ddl(FAILURES_SCHEMA) == (
        "source STRING NOT NULL, error STRING NOT NULL, message STRING NOT NULL"
    )


@pytest.mark.parametrize(
    ("kind", "spark_type"),
    [
        (pa.bool_(), "BOOLEAN"),
        (pa.int8(), "TINYINT"),
        (pa.int16(), "SMALLINT"),
        (pa.int32(), "INT"),
        (pa.int64(), "BIGINT"),
        (pa.float32(), "FLOAT"),
        (pa.float64(), "DOUBLE"),
        (pa.string(), "STRING"),
        (pa.large_string(), "STRING"),
        (pa.binary(), "BINARY"),
        (pa.large_binary(), "BINARY"),
        (pa.date32(), "DATE"),
        (pa.timestamp("us", tz="UTC"), "TIMESTAMP"),
        (pa.timestamp("ns", tz="Europe/Paris"), "TIMESTAMP"),
        (pa.timestamp("us"), "TIMESTAMP_NTZ"),
        (pa.dictionary(pa.int32(), pa.string()), "STRING"),
        (pa.dictionary(pa.int8(), pa.large_string()), "STRING"),
        (pa.list_(pa.int32()), "ARRAY<INT>"),
        (pa.large_list(pa.float64()), "ARRAY<DOUBLE>"),
        (pa.list_(pa.list_(pa.string())), "ARRAY<ARRAY<STRING>>"),
        (pa.map_(pa.string(), pa.int64()), "MAP<STRING, BIGINT>"),
        (pa.map_(pa.string(), pa.list_(pa.string())), "MAP<STRING, ARRAY<STRING>>"),
        (
            pa.struct([pa.field("a", pa.int8(), nullable=False), ("b", pa.string())]),
            "STRUCT<a: TINYINT NOT NULL, b: STRING>",
        ),
    ],
    ids=str,
)
def test_spark_ddl_types(kind: pa.DataType, spark_type: str) -> None:
    assert spark_ddl(pa.schema([pa.field("x", kind)])) == f"x {spark_type}"
    assert spark_ddl(pa.schema([pa.field("x", kind, nullable=False)])) == (
        f"x {spark_type} NOT NULL"
    )


def test_spark_ddl_quotes_names_that_need_it() -> None:
    inner = pa.struct([pa.field("from", pa.int32()), pa.field("x y", pa.int32())])
    fields: list[pa.Field[Any]] = [
        pa.field("date", pa.string()),  # a keyword Spark does not reserve
        pa.field("select", pa.int32()),  # one it does
        pa.field("Order", pa.int32()),
        pa.field("busbw (GB/s)", pa.float64()),
        pa.field("a`b", pa.int32()),
        pa.field("2x", pa.int32()),
        pa.field("_ok9", pa.int32()),
        pa.field("s", inner),
    ]
    schema = pa.schema(fields)
    assert spark_ddl(schema) == (
        "date STRING, `select` INT, `Order` INT, `busbw (GB/s)` DOUBLE, `a``b` INT, "
        "`2x` INT, _ok9 INT, s STRUCT<`from`: INT, `x y`: INT>"
    )


@pytest.mark.parametrize(
    ("kind", "where", "shown"),
    [
        (pa.uint8(), "x", "uint8"),
        (pa.uint64(), "x", "uint64"),
        (pa.float16(), "x", "halffloat"),
        (pa.duration("us"), "x", "duration[us]"),
        (pa.decimal128(10, 2), "x", "decimal128(10, 2)"),
        (pa.list_(pa.uint32()), "x[]", "uint32"),
        (pa.map_(pa.string(), pa.time64("us")), "x value", "time64[us]"),
        (pa.struct([("y", pa.null())]), "x.y", "null"),
    ],
    ids=str,
)
def test_spark_ddl_refuses_other_types(
    kind: pa.DataType, where: str, shown: str
) -> None:
    with pytest.raises(TypeError) as raised:
        spark_ddl(pa.schema([("ok", pa.int32()), ("x", kind)]))
    assert str(raised.value) == (
        f"column {where!r}: Arrow type {shown} has no Spark SQL type here (booleans, "
        "signed integers, floats, strings, binaries, date32, timestamps, lists, maps, "
        "structs and dictionaries of them have)"
    )


# --- parse_contents and parse_path ----------------------------------------------------


def _contents(paths: dict[str, bytes]) -> pa.RecordBatch:
    """A batch as spark.read.format("binaryFile") gives it."""
    columns: dict[str, pa.Array[Any]] = {
        "path": pa.array(list(paths), pa.string()),
        "modificationTime": pa.array([0] * len(paths), pa.timestamp("us")),
        "length": pa.array([len(v) for v in paths.values()], pa.int64()),
        "content": pa.array(list(paths.values()), pa.binary()),
    }
    return pa.RecordBatch.from_pydict(columns)


def _table(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_batches(list(batches), schema=schema)


def test_parse_contents_keeps_a_cut_log_and_reports_what_is_not_a_log() -> None:
    cut = (
        FIXTURES / "nccl" / "nccl-1435_allgather_bfloat16_stepbytes_2gpu_truncated.log"
    )
    complete = FIXTURES / "oneccl" / "v2021.14_allreduce_f32_np2.log"
    contents = {
        "s3a://lake/nccl-logs/cut.log": cut.read_bytes(),
        "s3a://lake/nccl-logs/notes.txt": NOT_A_LOG.encode(),
        "s3a://lake/nccl-logs/empty.log": b"",
    }
    second = {
        "s3a://lake/nccl-logs/complete.log.gz": gzip.compress(complete.read_bytes())
    }
    batches = [_contents(contents), _contents(second)]
    measurements = _table(parse_contents(batches), MEASUREMENTS_SCHEMA)
    runs = _table(parse_contents(batches, "runs"), RUNS_SCHEMA)
    failures = _table(parse_contents(batches, "failures"), FAILURES_SCHEMA)

    # The cut log's rows up to the cut, as ncclparse.parse gives them; its run truncated.
    expected = ncclparse.parse_many(
        [(cut, "s3a://lake/nccl-logs/cut.log"), (complete, next(iter(second)))]
    )
    assert measurements.equals(expected.measurements)
    assert measurements.num_rows == 14 + 21
    assert runs.equals(expected.runs)
    assert runs.column("status").to_pylist() == ["truncated", "complete"]
    assert failures.to_pylist() == [
        {
            "source": "s3a://lake/nccl-logs/notes.txt",
            "error": "UnknownLogFormatError",
            "message": "s3a://lake/nccl-logs/notes.txt:1: not a recognised benchmark "
            "log (nccl-tests, rccl-tests, oneCCL benchmark or IMB); first line: "
            f"{NOT_A_LOG.strip()!r}",
        },
        {
            "source": "s3a://lake/nccl-logs/empty.log",
            "error": "UnknownLogFormatError",
            "message": "s3a://lake/nccl-logs/empty.log: empty input: no benchmark "
            "output to parse",
        },
    ]
    # The batches conform to the schema Spark is given, metadata included.
    assert measurements.schema.equals(MEASUREMENTS_SCHEMA, check_metadata=True)
    assert runs.schema.equals(RUNS_SCHEMA, check_metadata=True)
    assert failures.schema.equals(FAILURES_SCHEMA, check_metadata=True)


def test_parse_contents_keeps_the_runs_read_before_compressed_data_ends() -> None:
    """A gzip stream cut after 400 copies of a log (at a flush point, so exactly
    those copies decompress): the runs parsed before the cut was met are kept, the
    cut is a failure, as in parse_many."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    data = derive.HEALTHY.read_bytes() * 400
    cut = compressor.compress(data) + compressor.flush(zlib.Z_FULL_FLUSH)
    name = "s3a://lake/nccl-logs/big.log.gz"
    batches = [_contents({name: cut})]
    runs = _table(parse_contents(batches, "runs"), RUNS_SCHEMA)
    expected = ncclparse.parse_many([(io.BytesIO(cut), name)])
    assert runs.equals(expected.runs)
    assert runs.num_rows > 0
    assert set(runs.column("status").to_pylist()) == {"complete"}
    assert _table(parse_contents(batches, "failures"), FAILURES_SCHEMA).to_pylist() == [
        {
            "source": name,
            "error": "InputError",
            "message": f"{name}: truncated gzip file: the compressed data ends before "
            "its end marker (`gzip -dc` recovers the text before the cut)",
        }
    ]


def test_parse_contents_needs_path_and_content() -> None:
    batch = pa.RecordBatch.from_pydict({"path": pa.array(["a.log"])})
    with pytest.raises(ValueError, match=r"^parse_contents: no content column in \["):
        list(parse_contents([batch]))
    with pytest.raises(ValueError, match=r"^unknown table 'rows': expected one of "):
        list(parse_contents([], "rows"))  # type: ignore[arg-type]


@pytest.mark.parametrize("table", ["measurements", "runs", "failures"])
def test_parse_path_frames_have_the_schema(table: str) -> None:
    schema = {
        "measurements": MEASUREMENTS_SCHEMA,
        "runs": RUNS_SCHEMA,
        "failures": FAILURES_SCHEMA,
    }[table]
    log = FIXTURES / "oneccl" / "v2021.14_allreduce_f32_np2.log"
    frame = parse_path(log, table)  # type: ignore[arg-type]
    meta = empty_frame(table)  # type: ignore[arg-type]
    assert list(meta.columns) == schema.names
    assert list(meta.dtypes) == [pd.ArrowDtype(field.type) for field in schema]
    assert meta.empty
    assert list(frame.dtypes) == list(meta.dtypes)
    result = ncclparse.parse_many([log])
    expected = {"measurements": result.measurements, "runs": result.runs}.get(table)
    back = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    if expected is None:  # a log, not a failure
        assert back.num_rows == 0
    else:
        assert back.num_rows == expected.num_rows > 0
        assert back.equals(expected)


def test_parse_path_reports_what_is_not_a_log(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text(NOT_A_LOG)
    assert parse_path(path).empty
    failed = parse_path(path, "failures")
    assert failed.to_dict("records") == [
        {
            "source": str(path),
            "error": "UnknownLogFormatError",
            "message": f"{path}:1: not a recognised benchmark log (nccl-tests, "
            f"rccl-tests, oneCCL benchmark or IMB); first line: {NOT_A_LOG.strip()!r}",
        }
    ]


def test_parse_path_opens_urls_with_fsspec() -> None:
    pytest.importorskip("fsspec")
    log = (
        FIXTURES
        / "nccl"
        / "nccltests-119_allreduce_stepbytes_odd_sizes_footer_fragment.log"
    )
    url = log.as_uri()
    frame = parse_path(url)
    expected = ncclparse.parse(log, name=url).measurements
    back = pa.Table.from_pandas(frame, schema=MEASUREMENTS_SCHEMA, preserve_index=False)
    assert back.equals(expected)
    assert set(frame["source"]) == {url}
    assert len(frame) == 12


def test_the_lake_is_exported_lazily_and_imports_no_engine() -> None:
    assert ncclparse.spark_ddl is spark_ddl
    assert ncclparse.parse_contents is parse_contents
    assert ncclparse.parse_path is parse_path
    assert ncclparse.empty_frame is empty_frame
    assert ncclparse.FAILURES_SCHEMA is FAILURES_SCHEMA
    engines = "{'dask', 'duckdb', 'fsspec', 'pyspark'}"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, ncclparse.inputs.lake; "
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {engines}))",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.stdout == "[]\n"


# --- the recipes -----------------------------------------------------------------------


def test_dask_recipe(lake: Lake) -> None:
    pytest.importorskip("dask.dataframe")
    namespace: dict[str, Any] = {}
    _run_block("Dask", lake.root, namespace)
    written = ds.dataset(lake.root / "lake" / "nccl-measurements-dask").to_table()
    # Parquet written from the frames has the measurements schema, types included.
    assert written.schema.remove_metadata().equals(
        pa.schema([f.with_nullable(True) for f in MEASUREMENTS_SCHEMA])
    )
    conform(written, MEASUREMENTS_SCHEMA)
    expected = _expected(lake)
    assert written.num_rows == expected.num_rows == 62 * 6 + 18 + 68 + 26 + 34 + 14
    assert _sorted_rows(written, MEASUREMENTS_SCHEMA) == _sorted_rows(
        expected, MEASUREMENTS_SCHEMA
    )
    known = (
        written.filter(ds.field("source") == str(lake.known))
        # pandas cannot rebuild the list<double> ArrowDtypes named in the pandas
        # metadata of frames written from parse_path (docs/datalake.md).
        .to_pandas(ignore_metadata=True)
        .set_index(["placement", "size_bytes"])
    )
    assert known.loc[("out-of-place", GIB), "busbw_gbps"] == 297.86
    assert known.loc[("in-place", GIB), "busbw_gbps"] == 298.82
    failed = namespace["failed"]
    assert failed[["source", "error"]].to_dict("records") == [
        {"source": str(lake.not_a_log), "error": "UnknownLogFormatError"}
    ]


def test_duckdb_recipe(lake: Lake) -> None:
    pytest.importorskip("duckdb")
    namespace: dict[str, Any] = {}
    _run_block("DuckDB", lake.root, namespace)
    nightly = namespace["nightly"]
    rows = [
        (pd.Timestamp(date).date().isoformat(), int(size), float(busbw), int(n))
        for date, size, busbw, n in nightly.itertuples(index=False)
    ]
    _check_night_rows(rows, lake)


# --- Spark -----------------------------------------------------------------------------


@pytest.fixture
def spark() -> Iterator[Any]:
    try:
        sql = importlib.import_module("pyspark.sql")
    except ImportError:
        missing("spark", "pyspark is not installed")
    if shutil.which("java") is None:
        missing(
            "spark", "pyspark is installed but java is not on PATH: Spark needs a JVM"
        )
    with pytest.MonkeyPatch.context() as patch:
        # Workers import ncclparse from this checkout, with this interpreter; Spark
        # stays on the loopback interface (not the address the host name resolves to).
        patch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), *sys.path]))
        patch.setenv("PYSPARK_PYTHON", sys.executable)
        patch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        session = (
            sql.SparkSession.builder.master("local[2]")
            .appName("ncclparse-datalake-test")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        try:
            yield session
        finally:
            session.stop()


# PySpark warns of pandas releases newer than it was tested with. A JVM and a Spark
# session: the slow set.
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::FutureWarning:pyspark")
def test_spark(lake: Lake, spark: Any) -> None:
    """One test, so that one JVM starts (xdist would start one per worker)."""
    _check_spark_recipe(lake, spark)
    _check_spark_takes_the_ddl_of_every_table(lake, spark)
    _check_spark_ddl_quotes_every_word_spark_reserves(spark)


def _check_spark_recipe(lake: Lake, spark: Any) -> None:
    namespace: dict[str, Any] = {}
    _run_block("PySpark: parse the logs", lake.root, namespace)
    assert namespace["spark"] is spark  # getOrCreate: the session of this test

    # The measurements, written partitioned by night: the rows ncclparse.parse gives.
    out = lake.root / "lake" / "nccl-measurements"
    assert sorted(p.name for p in out.glob("date=*")) == [f"date={n}" for n in NIGHTS]
    written = ds.dataset(out, partitioning="hive").to_table()
    conform(written, MEASUREMENTS_SCHEMA)
    sources = [
        str(s).removeprefix("file:") for s in written.column("source").to_pylist()
    ]
    written = written.set_column(0, "source", pa.array(sources, pa.string()))
    expected = _expected(lake)
    assert written.num_rows == expected.num_rows
    assert _sorted_rows(written, MEASUREMENTS_SCHEMA) == _sorted_rows(
        expected, MEASUREMENTS_SCHEMA
    )
    nights = {
        (source, str(date))
        for source, date in zip(
            sources, written.column("date").to_pylist(), strict=True
        )
    }
    assert nights == {(str(p), p.parent.name) for p in lake.logs}
    known = (
        written.filter(ds.field("source") == str(lake.known))
        # pandas cannot rebuild the list<double> ArrowDtypes named in the pandas
        # metadata of frames written from parse_path (docs/datalake.md).
        .to_pandas(ignore_metadata=True)
        .set_index(["placement", "size_bytes"])
    )
    assert known.loc[("out-of-place", GIB), "busbw_gbps"] == 297.86

    # The runs (lists, a map) and the failures, as Spark collects them.
    assert _spark_rows(namespace["runs"], RUNS_SCHEMA) == _sorted_rows(
        _expected(lake, "runs"), RUNS_SCHEMA
    )
    failures = _spark_rows(namespace["failures"], FAILURES_SCHEMA)
    assert [(f["source"], f["error"]) for f in failures] == [
        (str(lake.not_a_log), "UnknownLogFormatError")
    ]

    # The query over the history.
    _run_block("Spark SQL over the history", lake.root, namespace)
    rows = [
        (date.isoformat(), size, busbw, n)
        for date, size, busbw, n in namespace["nightly"].collect()
    ]
    _check_night_rows(rows, lake)


def _check_spark_takes_the_ddl_of_every_table(lake: Lake, spark: Any) -> None:
    """Spark builds each table from its batches and spark_ddl: the schema it makes of
    the DDL is its own conversion of the Arrow schema, and every value comes back as
    it went in (lists, maps and timestamps included)."""
    arrow_types = pytest.importorskip("pyspark.sql.pandas.types")
    history = read_history(lake.history)
    history = history.select(HISTORY_READ_SCHEMA.names).cast(HISTORY_READ_SCHEMA)
    assert history.num_rows == 298 + 234 + 62  # cluster a3's two nights, and b1's
    tables = {
        "measurements": (MEASUREMENTS_SCHEMA, _expected(lake)),
        "runs": (RUNS_SCHEMA, _expected(lake, "runs")),
        "history": (HISTORY_READ_SCHEMA, history),
        "failures": (FAILURES_SCHEMA, _table(iter(()), FAILURES_SCHEMA)),
    }
    for name, (schema, table) in tables.items():
        batches = table.to_batches()
        frame = spark.range(1, numPartitions=1).mapInArrow(
            lambda _, batches=batches: iter(batches), spark_ddl(schema)
        )
        assert frame.schema == arrow_types.from_arrow_schema(schema), name
        assert _spark_rows(frame, schema) == _comparable(table.to_pylist(), schema)


def _check_spark_ddl_quotes_every_word_spark_reserves(spark: Any) -> None:
    if tuple(int(part) for part in spark.version.split(".")[:2]) < (3, 5):
        return  # sql_keywords() is new in Spark 3.5
    spark.conf.set("spark.sql.ansi.enforceReservedKeywords", "true")
    try:
        query = "SELECT keyword FROM sql_keywords() WHERE reserved"
        reserved = sorted(row.keyword for row in spark.sql(query).collect())
        schema = pa.schema([(word.lower(), pa.int32()) for word in reserved])
        ddl = spark_ddl(schema)
        assert ddl == ", ".join(f"`{word.lower()}` INT" for word in reserved)
        assert spark.createDataFrame([], ddl).columns == schema.names
        with pytest.raises(Exception, match="PARSE_SYNTAX_ERROR"):
            spark.createDataFrame([], ddl.replace("`", ""))
    finally:
        spark.conf.unset("spark.sql.ansi.enforceReservedKeywords")
    assert len(reserved) > 50
