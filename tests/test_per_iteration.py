"""nccl-tests per-iteration statistics (-I 1, -K, -J), timestamps (-S 1), timeouts (-T).

Fixtures: fixtures/nccl_per_iter (text, made by its make_logs.py with nccl-tests'
printf formats) and fixtures/nccl_json/v2.19.6_all_reduce_per_iter_skip_3proc.json
(the same run as -J wrote it). Expected values were worked out by hand from the
per-process times in fixtures/nccl_json/make_fixtures.py (OOP_PROCS, IP_PROCS) and
the text as printed, before the parser was run on them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import ncclparse
from ncclparse import schema
from ncclparse.efficiency import per_iteration
from ncclparse.store import tables as storage
from tests.conftest import FIXTURES

TEXT_DIR = FIXTURES / "nccl_per_iter"
PER_ITER_LOG = TEXT_DIR / "v2.19.6_all_reduce_I1_K1_S1_3proc_complete.log"
TIMEOUT_LOG = TEXT_DIR / "v2.19.6_all_reduce_T30_S1_timeout_in_row_failed.log"
PER_ITER_JSON = FIXTURES / "nccl_json" / "v2.19.6_all_reduce_per_iter_skip_3proc.json"

OOP_PROCS = [
    [95.0, 50.0, 51.0, 50.5, 52.0, 50.0],
    [96.0, 50.5, 50.0, 51.0, 51.5, 50.5],
    [94.0, 51.0, 52.0, 90.0, 52.5, 51.5],
]
IP_PROCS = [
    [60.0, 50.0, 50.5, 50.0, 50.5, 50.0],
    [61.0, 50.5, 50.0, 50.5, 50.0, 50.5],
    [59.0, 50.0, 50.5, 51.0, 50.5, 50.0],
]
NEW = (
    "time_avg_us",
    "time_p50_us",
    "time_p95_us",
    "time_stddev_us",
    "iter_skipped",
    "iter_times_us",
    "iter_process_times_us",
)
SHOWN = (
    "line", "placement", "time_us", "algbw_gbps", "busbw_gbps", "wrong",
    "time_min_us", "time_max_us", "time_p99_us", "stddev_pct", "timestamp", *NEW,
)  # fmt: skip


def _rows(result: ncclparse.ParseResult) -> list[tuple[Any, ...]]:
    return [tuple(r[k] for k in SHOWN) for r in result.measurements.to_pylist()]


def test_text_per_iteration_columns_skip_and_timestamp() -> None:
    result = ncclparse.parse(PER_ITER_LOG)
    stamp = "2026-08-04 22:10:06"
    # The text prints i_min, i_max, i_p99 and i_cv% only: the rest is null; the
    # skip comes from the "# Per-Iteration Report: ... skips first 1 iterations" line.
    text_only = (None, None, None, None, 1, None, None)
    assert _rows(result) == [
        (17, "out-of-place", 65.8, 15.94, 26.56, 0.0, 51.0, 90.0, 90.0, 25.77, stamp,
         *text_only),
        (17, "in-place", 52.4, 20.01, 33.35, 0.0, 50.5, 51.0, 51.0, 0.4, stamp,
         *text_only),
    ]  # fmt: skip
    (run,) = result.runs.to_pylist()
    assert (run["status"], run["nranks"], run["nnodes"]) == ("complete", 6, 2)
    assert dict(run["params"])["per_iter_skip"] == "1"
    assert run["timeout_s"] is None
    assert run["avg_busbw_gbps"] == 29.9557
    assert (run["warnings"], run["errors"]) == ([], [])


def test_text_timeout_fails_the_run_and_states_the_limit() -> None:
    result = ncclparse.parse(TIMEOUT_LOG)
    (run,) = result.runs.to_pylist()
    assert run["status"] == "failed"
    assert run["timeout_s"] == 30
    # The process printed the timeout after its unfinished row, on the same line:
    # the line is the error as printed (where the host name starts is not known).
    assert run["errors"][0] == (
        "line 13: 2097152        524288     float     sum      -1    36.00   58.25"
        "   58.25       0node-a: Test timeout (30s) common.cu:526"
    )
    assert len(run["errors"]) == 6  # the timeout and the five TESTCHECK trace lines
    # Only the finished line is a measurement; the one the timeout cut is not.
    rows = result.measurements.to_pylist()
    assert [
        (r["line"], r["placement"], r["time_us"], r["timestamp"]) for r in rows
    ] == [
        (12, "out-of-place", 20.5, "2026-08-05 03:00:01"),
        (12, "in-place", 20.25, "2026-08-05 03:00:01"),
    ]
    assert run["warnings"] == [
        "line 13: data row cut by an error message: not a measurement"
    ]


def test_a_run_without_timeout_has_null_timeout() -> None:
    log = FIXTURES / "nccl" / "nccltests-5_allreduce_v1_nccl1_failure.log"
    (run, *_) = ncclparse.parse(log).runs.to_pylist()
    assert run["timeout_s"] is None


def test_json_per_iteration_blocks_in_full() -> None:
    result = ncclparse.parse(PER_ITER_JSON)
    oop_times = [96.0, 51.0, 52.0, 90.0, 52.5, 51.5]
    ip_times = [61.0, 50.5, 50.5, 51.0, 50.5, 50.5]
    assert _rows(result) == [
        (1, "out-of-place", 65.8, 15.935805, 26.559676, 0.0, 51.0, 90.0, 90.0,
         25.771326, None, 59.4, 52.0, 90.0, 15.308168, 1, oop_times, OOP_PROCS),
        (1, "in-place", 52.4, 20.010992, 33.351654, 0.0, 50.5, 51.0, 51.0,
         0.395257, None, 50.6, 50.5, 51.0, 0.2, 1, ip_times, IP_PROCS),
    ]  # fmt: skip
    (run,) = result.runs.to_pylist()
    assert run["hosts"] == ["node-a"] * 4 + ["node-b"] * 2
    assert (dict(run["params"])["per_iter_skip"], run["timeout_s"]) == ("1", None)


def test_json_version_2_block_has_no_skip_count() -> None:
    # v2.19.2-2.19.5 wrote no skipped_iterations (-K came later): null, not 0.
    name = "v2.19.2_sendrecv_per_iter_2proc.json"
    rows = ncclparse.parse(FIXTURES / "nccl_json" / name).measurements.to_pylist()
    assert [r["iter_skipped"] for r in rows] == [None, None]
    assert [r["time_avg_us"] for r in rows] == [12.625, 12.6875]
    assert rows[0]["iter_process_times_us"] == [
        [12.5, 12.25, 13.0, 12.75],
        [12.0, 12.25, 12.5, 12.5],
    ]


def test_json_without_per_iteration_blocks_leaves_the_columns_null() -> None:
    name = "v2.19.6_all_reduce_2proc_4gpu_complete.json"
    rows = ncclparse.parse(FIXTURES / "nccl_json" / name).measurements.to_pylist()
    assert rows
    assert all(r[k] is None for r in rows for k in NEW)


@pytest.mark.parametrize(
    ("member", "value", "warning"),
    [
        ("times_us", '[1.0,"x"]', "unreadable result object"),
        ("times_us", "[1.0,-2.0]", "times_us time -2.0 is not a possible time"),
        ("times_us", "3", "unreadable result object"),
        ("skipped_iterations", "-1", "unreadable result object"),
        ("per_process_max_times_us", "[[1.0],4]", "unreadable result object"),
    ],
)
def test_json_impossible_per_iteration_member_warns(
    member: str, value: str, warning: str
) -> None:
    text = PER_ITER_JSON.read_text()
    start = text.index(f'"{member}":') + len(member) + 3
    depth, end = 0, start
    for end, char in enumerate(text[start:], start):  # noqa: B007
        depth += char == "["
        depth -= char == "]"
        if depth == 0 and char in ",]}":
            break
    edited = text[:start] + value + text[end + (text[start] == "[") :]
    result = ncclparse.parse(edited + "\n", name="edited.json")
    (run,) = result.runs.to_pylist()
    assert result.measurements.num_rows == 0
    assert any(warning in w for w in run["warnings"]), run["warnings"]


def test_summary_finds_spikes_and_stragglers_as_analyze_perf_json() -> None:
    table = ncclparse.parse(PER_ITER_JSON).measurements
    oop, ip = per_iteration.summarize(table).to_pylist()
    # Out-of-place: avg 59.4, threshold 89.1: iteration 0 (96) slow on every
    # process (warm-up), iteration 3 (90) only on process 2 (a straggler).
    assert oop["spike_iterations"] == [0, 3]
    assert oop["spike_processes"] == [[0, 1, 2], [2]]
    assert (oop["iterations"], oop["processes"]) == (6, 3)
    assert math.isclose(oop["spread_pct"], (90.0 - 51.0) / 59.4 * 100)
    means = [sum(t) / 6 for t in OOP_PROCS]  # 58.083, 58.25, 65.167
    assert (oop["fastest_process"], oop["slowest_process"]) == (0, 2)
    assert math.isclose(oop["process_spread_us"], means[2] - means[0])
    assert math.isclose(oop["process_spread_pct"], (391 - 348.5) / 348.5 * 100)
    cvs = [statistics.stdev(t) / (sum(t) / 6) * 100 for t in OOP_PROCS]
    assert oop["noisiest_process"] == 2
    assert math.isclose(oop["noisiest_cv_pct"], cvs[2])
    # In-place: avg 50.6, threshold 75.9: no spike; processes 0 and 2 tie (311/6).
    assert (ip["spike_iterations"], ip["spike_processes"]) == ([], [])
    assert (ip["fastest_process"], ip["slowest_process"]) == (0, 1)
    assert math.isclose(ip["process_spread_us"], 0.25)


def test_summary_of_text_rows_is_empty() -> None:
    table = ncclparse.parse(PER_ITER_LOG).measurements
    assert per_iteration.summarize(table).num_rows == 0


def test_summary_without_process_rows() -> None:
    assert per_iteration.spikes([10.0, 16.0, 15.0], 10.0) == [1]
    assert per_iteration.stragglers([])["slowest_process"] is None


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_list_columns_survive_binary_round_trips(tmp_path: Path, suffix: str) -> None:
    table = ncclparse.parse(PER_ITER_JSON).measurements
    path = tmp_path / f"m{suffix}"
    storage.write_table(table, path)
    back = storage.read_table(path)
    assert back.equals(table)
    assert back.column("iter_process_times_us").to_pylist()[0] == OOP_PROCS


def test_csv_and_jsonl_write_the_lists_as_json(tmp_path: Path) -> None:
    table = ncclparse.parse(PER_ITER_JSON).measurements
    storage.write_table(table, tmp_path / "m.csv")
    storage.write_table(table, tmp_path / "m.jsonl")
    with (tmp_path / "m.csv").open() as handle:
        [first] = [
            r for r in csv.DictReader(handle) if r["placement"] == "out-of-place"
        ]
    assert json.loads(first["iter_times_us"]) == [96.0, 51.0, 52.0, 90.0, 52.5, 51.5]
    assert json.loads(first["iter_process_times_us"]) == OOP_PROCS
    assert first["iter_skipped"] == "1"
    records = [
        json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()
    ]
    [in_place] = [r for r in records if r["placement"] == "in-place"]
    assert in_place["iter_process_times_us"] == IP_PROCS
    assert in_place["time_p95_us"] == 51.0


def test_tables_written_before_these_columns_still_conform(tmp_path: Path) -> None:
    table = ncclparse.parse(PER_ITER_JSON)
    old = table.measurements.drop_columns(list(NEW))
    back = schema.conform(old, schema.MEASUREMENTS_SCHEMA)
    assert back.schema.names == list(schema.MEASUREMENT_COLUMNS)
    assert back.column("iter_times_us").null_count == 2
    runs = schema.conform(table.runs.drop_columns(["timeout_s"]), schema.RUNS_SCHEMA)
    assert runs.column("timeout_s").to_pylist() == [None]
    path = tmp_path / "old.parquet"
    storage.write_table(pa.Table.from_batches(old.to_batches(), old.schema), path)
    assert storage.read_table(path).column("time_avg_us").null_count == 2


def test_schema_lists_the_new_columns_with_their_types() -> None:
    fields = {f.name: f.type for f in schema.MEASUREMENTS_SCHEMA}
    assert fields["time_avg_us"] == pa.float64()
    assert fields["iter_skipped"] == pa.int64()
    assert fields["iter_times_us"] == pa.list_(pa.float64())
    assert fields["iter_process_times_us"] == pa.list_(pa.list_(pa.float64()))
    assert schema.RUNS_SCHEMA.field("timeout_s").type == pa.int32()
    assert schema.SCHEMA_VERSION == 1  # additions do not bump it (schema.md)
    doc = (Path(__file__).parent.parent / "docs" / "schema.md").read_text()
    for name in (*NEW, "timeout_s"):
        assert f"`{name}`" in doc, name


def test_csv_round_trip_header_has_the_new_columns(tmp_path: Path) -> None:
    table = ncclparse.parse(PER_ITER_LOG).measurements
    storage.write_table(table, tmp_path / "m.csv")
    header = next(csv.reader(io.StringIO((tmp_path / "m.csv").read_text())))
    assert header[-len(NEW) :] == list(NEW)


def test_merged_points_have_no_per_iteration_series() -> None:
    from ncclparse.inputs import points

    # The result object twice in one run: each point measured twice, merged when
    # the rows are more than exact_rows.
    text = PER_ITER_JSON.read_text()
    start = text.index('"results":[') + len('"results":[')
    end = text.index('],"out_of_bounds"')
    twice = text[:end] + "," + text[start:end] + text[end:]
    table = points.PointTable((1, 100))
    ncclparse.parse_many([(twice + "\n", "two.json")], on_batch=table.add)
    assert table.merged
    rows = table.table().to_pylist()
    assert [(r["placement"], r["time_us"]) for r in rows] == [
        ("out-of-place", 65.8),
        ("in-place", 52.4),
    ]
    assert all(r[k] is None for r in rows for k in NEW)
    # Rows kept as they are keep them.
    kept = points.PointTable((100, 100))
    ncclparse.parse_many([PER_ITER_JSON], on_batch=kept.add)
    assert kept.table().column("iter_process_times_us").to_pylist()[0] == OOP_PROCS


def test_report_states_spread_spikes_stragglers_and_timeout() -> None:
    from ncclparse.report.context import build_context

    context = build_context(ncclparse.parse(PER_ITER_JSON))
    facts = dict(context.runs[0].metadata)
    assert facts["per-iteration spread (-I)"] == (
        "2 points; largest i_cv% 25.7713% at 1048576 B out-of-place (i_min 51 us, "
        "i_max 90 us, i_p99 90 us)"
    )
    assert facts["iteration spikes (> 1.5x mean, 2)"] == (
        "1048576 B out-of-place iteration 0 (all processes: system-wide); "
        "1048576 B out-of-place iteration 3 (process 2 only: a straggler)"
    )
    assert facts["slowest process row (-J)"] == "process 2 at 1 of 2 points"
    text = dict(build_context(ncclparse.parse(PER_ITER_LOG)).runs[0].metadata)
    assert "iteration spikes" not in " ".join(text)  # the text has no times
    assert text["per-iteration spread (-I)"].startswith(
        "2 points; largest i_cv% 25.77%"
    )
    timed_out = dict(build_context(ncclparse.parse(TIMEOUT_LOG)).runs[0].metadata)
    assert timed_out["timeout (-T)"] == "a collective did not finish within 30 s"
    assert "per-iteration spread (-I)" not in timed_out
