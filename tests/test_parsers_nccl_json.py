"""nccl-tests ``-J`` JSON output (parsers/nccl_tests_json.py).

The fixtures are hand-built by fixtures/nccl_json/make_fixtures.py, which emulates the
writer in nccl-tests src/util.cu (no real JSON output exists in public repositories;
see fixtures/nccl_json/SOURCES.md). Expected values are read off the fixture text.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import ncclparse
from ncclparse.parsers import PARSERS, SNIFF_LINES, numbered
from ncclparse.parsers._model import NO_ROWS
from tests.conftest import FIXTURES, NCCL_LOGS

JSON_DIR = FIXTURES / "nccl_json"
JSON_FILES = sorted(JSON_DIR.glob("*.json"))
H100 = "NVIDIA H100 80GB HBM3"
# The columns a JSON row fills (the rest are null or constant for this format).
ROW_KEYS = (
    "line", "collective", "placement", "size_bytes", "reported_bytes", "count",
    "dtype", "redop", "root", "time_us", "algbw_gbps", "busbw_gbps", "wrong",
    "wrong_kind", "cputime", "repetitions", "time_min_us", "time_max_us",
    "time_p99_us", "stddev_pct", "nranks", "nnodes", "device",
)  # fmt: skip


def _parse(name: str) -> ncclparse.ParseResult:
    return ncclparse.parse(JSON_DIR / name, name=name)


def _run(result: ncclparse.ParseResult, index: int = 0) -> dict[str, Any]:
    return result.runs.to_pylist()[index]


def _rows(result: ncclparse.ParseResult) -> list[tuple[Any, ...]]:
    return [tuple(r[k] for k in ROW_KEYS) for r in result.measurements.to_pylist()]


def _lines_named(warnings: list[str]) -> set[int]:
    named: set[int] = set()
    for warning in warnings:
        where = warning.split(":", 1)[0].removeprefix("lines ").removeprefix("line ")
        first, _, last = where.partition("-")
        named.update(range(int(first), int(last or first) + 1))
    return named


def _sniffed_by(path: Path) -> list[str]:
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        head = list(itertools.islice(numbered(handle), SNIFF_LINES))
    return [p.NAME for p in PARSERS if p.sniff(head)]


def test_complete_run_fields() -> None:
    run = _run(_parse("v2.19.6_all_reduce_2proc_4gpu_complete.json"))
    # 2 processes x (1 thread x 4 GPUs): two device entries stand for 8 ranks.
    assert run == {
        "source": "v2.19.6_all_reduce_2proc_4gpu_complete.json",
        "run": 0,
        "tool": "nccl-tests",
        "tool_version": None,
        "collectives": ["all_reduce"],
        "status": "complete",
        "first_line": 1,
        "last_line": 1,
        "rows": 6,
        "nranks": 8,
        "nnodes": 2,
        "hosts": ["dgx-a-01"] * 4 + ["dgx-a-02"] * 4,
        "devices": [H100, None, None, None, H100, None, None, None],
        "library_version": "2.29.5",
        "params": [
            ("json_version", "3"),
            ("nthreads", "1"),
            ("ngpus", "4"),
            ("minimum_bytes", "8388608"),
            ("maximum_bytes", "33554432"),
            ("step_factor", "2"),
            ("warmup_iters", "1"),
            ("iterations", "20"),
            ("aggregated_iterations", "1"),
            ("validation", "1"),
            ("graph", "0"),
            ("blocking_collectives", "false"),
            ("per_iter_timing", "false"),
            ("per_iter_skip", "0"),
            ("parallel_init", "false"),
            ("start_time", "2026-07-10 09:14:03"),
            ("end_time", "2026-07-10 09:14:09"),
        ],
        "avg_busbw_gbps": 180.076716,
        "oob_values": 0,
        "errors": [],  # the writer's [""]: NCCL had no last error
        "warnings": [],
        "command": "./build/all_reduce_perf -b 8M -e 32M -f 2 -g 4 -J /results/ar.json",
        "oob_ok": True,
        "avg_busbw_ok": None,  # "unchecked": NCCL_TESTS_MIN_BW not set
        # The JSON output states nothing of NCCL's topology.
        "net": None,
        "nics": [],
        "gdr": None,
        "nvls": None,
        "collnet": None,
        "local_ranks": None,
        "timeout_s": None,
        # Nor of NCCL's algorithms.
        "nvls_channels": None,
        "nccl_env": [],
        "tuner": None,
        "enabled": [],
        "tuned": [],
        "nccl_algo": None,
        "nccl_proto": None,
        "algo_source": None,
        "refused": [],
    }


def test_complete_rows() -> None:
    def pair(size: int, oop: tuple[float, ...], ip: tuple[float, ...]) -> list[Any]:
        common = ("all_reduce",)
        keys = (size, size, size // 4, "float32", "sum", None)
        tail = ("count", False, 20, None, None, None, None, 8, 2, H100)
        return [
            (1, *common, "out-of-place", *keys, *oop, 0.0, *tail),
            (1, *common, "in-place", *keys, *ip, 0.0, *tail),
        ]

    assert _rows(_parse("v2.19.6_all_reduce_2proc_4gpu_complete.json")) == [
        *pair(8388608, (91.25, 91.929951, 160.877414), (90.5, 92.691801, 162.210652)),
        *pair(
            16777216, (160.5, 104.530941, 182.929146), (159.75, 105.021696, 183.787969)
        ),
        *pair(
            33554432, (301.0, 111.476518, 195.083907), (300.25, 111.754978, 195.571211)
        ),
    ]


def test_pretty_printed_rows_keep_their_lines() -> None:
    result = _parse("v2.19.6_all_reduce_pretty_printed.json")
    single = _parse("v2.19.6_all_reduce_2proc_4gpu_complete.json")
    assert [r["line"] for r in result.measurements.to_pylist()] == [
        63, 63, 84, 84, 105, 105
    ]  # fmt: skip
    assert [r[1:] for r in _rows(result)] == [r[1:] for r in _rows(single)]
    run = _run(result)
    assert (run["first_line"], run["last_line"], run["status"]) == (1, 139, "complete")
    # The three result objects span lines 63-125; the rest is structure.
    assert result.accounting[run["source"]] == Counter(measurement=63, structure=76)


def test_misspelled_average_and_string_booleans() -> None:
    result = _parse("v2.17.3_all_gather_misspelled_min_bw.json")
    run = _run(result)
    assert run["avg_busbw_gbps"] == 24.83  # "average_bus_bandwidith"/"bandwidith"
    assert run["avg_busbw_ok"] is True  # "okay": "true" (NCCL_TESTS_MIN_BW set)
    assert (run["oob_values"], run["oob_ok"]) == (0, True)
    assert (run["status"], run["collectives"]) == ("complete", ["all_gather"])
    assert (run["nranks"], run["nnodes"], run["library_version"]) == (2, 1, "2.27.3")
    assert dict(run["params"])["json_version"] == "1"
    assert {r["redop"] for r in result.measurements.to_pylist()} == {None}  # "none"


def test_string_booleans_false_and_failed_checks() -> None:
    text = (
        '{"version":3,"args":["./build/all_reduce_perf"],"nccl_version":22905,'
        '"results":[],"out_of_bounds":{"count":3,"okay":"false"},'
        '"average_bus_bandwidth":{"bandwidth":1.500000,"okay":"false"},'
        '"errors":[""]}\n'
    )
    run = _run(ncclparse.parse(text))
    assert (run["oob_values"], run["oob_ok"]) == (3, False)
    assert (run["avg_busbw_gbps"], run["avg_busbw_ok"]) == (1.5, False)
    # No result object: a run that read nothing is never complete.
    assert run["status"] == "truncated"


def test_cpu_time_null_nwrong_nan_and_padded_root() -> None:
    result = _parse("v2.19.6_reduce_cputime_unchecked_nan.json")
    rows = result.measurements.to_pylist()
    assert [(r["time_us"], r["cputime"], r["root"], r["dtype"]) for r in rows] == [
        (4.5, True, 1, "float16"),  # cpu_time, root "     1", type half
        (4.25, True, 1, "float16"),
    ]
    assert [r["wrong"] for r in rows] == [None] * 2  # -c 0: nwrong null
    assert [r["wrong_kind"] for r in rows] == ["count"] * 2
    assert [r["algbw_gbps"] for r in rows] == [0.91, 0.96]
    run = _run(result)
    # A "nan" bandwidth is no measurement: the 8192-byte result object is not read
    # (its in-place half neither: a printed row is read whole or not at all).
    assert run["warnings"] == [
        "line 1: algbw nan is not a possible bandwidth: row not read"
    ]
    # The footer's "nan" average is kept as printed.
    assert math.isnan(run["avg_busbw_gbps"])
    # ncclGetLastError() text after a finished run: kept, the run stays complete
    # (as the text parser does with the same "# error:" line).
    assert run["errors"] == ["line 1: NET/IB : No device found."]
    assert run["status"] == "complete"


def test_per_iteration_blocks() -> None:
    result = _parse("v2.19.2_sendrecv_per_iter_2proc.json")
    assert _rows(result) == [
        (1, "sendrecv", "out-of-place", 65536, 65536, 16384, "float32", "sum", None,
         12.62, 5.19, 5.19, 0.0, "count", False, 4, 12.25, 13.0, 13.0, 2.213929,
         2, 1, H100),
        (1, "sendrecv", "in-place", 65536, 65536, 16384, "float32", "sum", None,
         12.69, 5.16, 5.16, None, "count", False, 4, 12.0, 14.0, 14.0, 6.132955,
         2, 1, H100),
    ]  # fmt: skip
    run = _run(result)
    assert run["hosts"] == ["node-a", "node-a"]  # 2 processes x 1 GPU
    assert run["devices"] == [H100, H100]


def test_unterminated_file_keeps_finished_results() -> None:
    result = _parse("v2.18.3_broadcast_killed_unterminated.json")
    run = _run(result)
    assert run["status"] == "truncated"
    assert run["warnings"] == [
        "line 1: file ends at line 1 inside the JSON object, after 2 result "
        "objects: run truncated"
    ]
    assert (run["avg_busbw_gbps"], run["oob_values"], run["rows"]) == (None, None, 4)
    rows = result.measurements.to_pylist()
    assert [(r["size_bytes"], r["placement"], r["root"]) for r in rows] == [
        (1048576, "out-of-place", 0),  # root "     0"
        (1048576, "in-place", 0),
        (2097152, "out-of-place", 0),
        (2097152, "in-place", 0),
    ]
    assert (run["nranks"], run["collectives"]) == (8, ["broadcast"])
    assert result.accounting[run["source"]] == Counter(measurement=1)


def test_unterminated_pretty_printed_file_names_the_cut() -> None:
    text = (JSON_DIR / "v2.19.6_all_reduce_pretty_printed.json").read_text()
    cut = text[: text.index('"size": 33554432') + 40]  # inside the third result
    result = ncclparse.parse(cut, name="cut.json")
    run = _run(result)
    assert run["status"] == "truncated"
    assert run["rows"] == 4
    assert run["warnings"] == [
        "lines 105-107: file ends at line 107 inside the JSON object, after 2 "
        "result objects: run truncated"
    ]
    assert result.accounting["cut.json"] == Counter(
        structure=62, measurement=42, warned=3
    )


def test_corrupt_byte_stops_reading_with_a_warning() -> None:
    text = (JSON_DIR / "v2.19.6_all_reduce_2proc_4gpu_complete.json").read_text()
    third = text.index('{"size":33554432')
    result = ncclparse.parse(text[:third] + "\x00" + text[third:] + "\n")
    run = _run(result)
    assert (run["status"], run["rows"]) == ("truncated", 4)
    assert run["warnings"] == [
        "line 1: Expecting value at line 1 inside the JSON object, after 2 result "
        "objects: run truncated"
    ]


def test_closed_early_by_the_error_path_is_failed() -> None:
    result = _parse("v2.19.6_alltoall_failed_closed_early.json")
    run = _run(result)
    assert run["status"] == "failed"
    assert run["warnings"] == [
        "line 1: result object never finished: not read",
        "line 1: JSON closed without the footer: the run failed",
    ]
    assert [(r["placement"], r["wrong"]) for r in result.measurements.to_pylist()] == [
        ("out-of-place", 0.0),
        ("in-place", None),  # alltoall in-place is not verified
    ]
    assert "end_time" not in dict(run["params"])


def test_errors_without_footer_make_the_run_failed() -> None:
    text = '{"version":3,"results":[],"errors":["unhandled cuda error"]}'
    run = _run(ncclparse.parse(text + "\n"))
    assert run["status"] == "failed"
    assert run["errors"] == ["line 1: unhandled cuda error"]


def test_devices_that_are_not_one_per_process() -> None:
    text = (
        '{"config":{"nthreads":1,"ngpus":2,"devices":['
        '{"rank":0,"hostname":"a","device_info":"X"},'
        '{"rank":1,"hostname":"b","device_info":"X"}]},"results":[]}\n'
    )
    run = _run(ncclparse.parse(text))
    assert (run["nranks"], run["nnodes"], run["hosts"]) == (None, 2, [])
    assert run["warnings"][0] == (
        "line 1: config.devices ranks [0, 1] are not one entry per process of "
        "nthreads*ngpus ranks: nranks and hosts unknown"
    )


def test_null_out_of_place_and_experiment_name() -> None:
    # Trace replay: no out-of-place body and the collective named per result.
    text = (
        '{"args":["./build\\/replay_perf"],"results":[{"size":1024,"count":256,'
        '"type":"float","redop":"sum","root":"    -1","out_of_place":null,'
        '"in_place":{"time":5.000000,"alg_bw":0.204800,"bus_bw":0.358400,'
        '"nwrong":0.000000},"actual_iterations":10,"experiment_name":"AllReduce"}],'
        '"average_bus_bandwidth":{"bandwidth":0.358400,"okay":"unchecked"}}'
    )
    rows = ncclparse.parse(text + "\n").measurements.to_pylist()
    assert [(r["placement"], r["collective"], r["repetitions"]) for r in rows] == [
        ("in-place", "all_reduce", 10)
    ]


def test_concatenated_objects_and_trailing_text() -> None:
    one = (JSON_DIR / "v2.17.3_all_gather_misspelled_min_bw.json").read_text()
    two = (JSON_DIR / "v2.19.2_sendrecv_per_iter_2proc.json").read_text()
    result = ncclparse.parse(f"{one}\n\n{two}\ndone.\n", name="both.json")
    runs = result.runs.to_pylist()
    assert [(r["first_line"], r["collectives"], r["rows"]) for r in runs] == [
        (1, ["all_gather"], 4),
        (3, ["sendrecv"], 2),
    ]
    assert runs[1]["warnings"] == [
        "line 4: not part of a nccl-tests JSON object (not read)"
    ]
    assert result.accounting["both.json"] == Counter(measurement=2, blank=1, warned=1)


def test_unreadable_result_is_warned_not_raised() -> None:
    text = (
        '{"args":["./all_reduce_perf"],"results":[{"size":8,"count":2,'
        '"type":"float128","redop":"sum","root":"    -1","in_place":{"time":1.0},'
        '"actual_iterations":1,"experiment_name":""}]}\n'
    )
    result = ncclparse.parse(text, name="bad.json")
    run = _run(result)
    assert run["rows"] == 0
    assert run["warnings"][0] == (
        "line 1: unreadable result object: ValueError(\"unknown data type 'float128'\")"
    )
    assert result.accounting["bad.json"] == Counter(warned=1)


@pytest.mark.parametrize("path", JSON_FILES, ids=lambda p: p.name)
def test_every_line_is_accounted_for(path: Path) -> None:
    result = ncclparse.parse(path, name=path.name)
    (accounting,) = result.accounting.values()
    assert sum(accounting.values()) == len(path.read_bytes().splitlines())
    if result.measurements.num_rows:
        assert accounting["measurement"] >= 1
    warnings = [w for run in result.runs.to_pylist() for w in run["warnings"]]
    assert len(_lines_named(warnings)) >= accounting["warned"]


@pytest.mark.parametrize("path", JSON_FILES, ids=lambda p: p.name)
def test_json_goes_through_the_json_parser(path: Path) -> None:
    assert _sniffed_by(path)[0] == "nccl-tests-json"


@pytest.mark.parametrize("path", NCCL_LOGS, ids=lambda p: p.name)
def test_text_logs_are_not_claimed(path: Path) -> None:
    assert "nccl-tests-json" not in _sniffed_by(path)


def test_other_json_is_not_claimed() -> None:
    # rccl-tests -Z json writes one flat object per line: not this format.
    rccl = '{"#wrong":"0","algBw":0.05,"busBw":0.08,"name":"AllReduce","size":1024}\n'
    with pytest.raises(ncclparse.UnknownLogFormatError):
        ncclparse.parse(rccl)
    expected = sorted((FIXTURES / "expected").rglob("*.json"))
    assert expected
    assert not any("nccl-tests-json" in _sniffed_by(p) for p in expected)


def _config(nthreads: object, ngpus: object = 1, processes: int = 1) -> str:
    """A -J file of ``processes`` device entries (one per process) and no results."""
    per = (
        nthreads * ngpus if isinstance(nthreads, int) and isinstance(ngpus, int) else 1
    )
    devices = ",".join(
        f'{{"rank":{p * per},"hostname":"h{p}","device_info":"X"}}'
        for p in range(processes)
    )
    return (
        '{"version":3,"args":["./build/all_reduce_perf"],"nccl_version":22905,'
        f'"config":{{"nthreads":{json.dumps(nthreads)},"ngpus":{json.dumps(ngpus)},'
        f'"devices":[{devices}]}},"results":[],"out_of_bounds":{{"count":0,'
        '"okay":"true"},"average_bus_bandwidth":{"bandwidth":1.5,"okay":"true"}}\n'
    )


@pytest.mark.parametrize(
    ("nthreads", "ngpus", "processes", "shown"),
    [
        # 2**64: `[hostname] * per` raised a bare OverflowError
        (2**64, 1, 1, "nthreads 18446744073709551616 x ngpus 1 x 1"),
        # 10**8: two lists of 10**8 entries (seconds and gigabytes) before the fix
        (10**8, 1, 1, "nthreads 100000000 x ngpus 1 x 1"),
        (1024, 1024, 2, "nthreads 1024 x ngpus 1024 x 2"),
    ],
)
def test_rank_counts_beyond_the_bound_are_warned_not_allocated(
    nthreads: int, ngpus: int, processes: int, shown: str
) -> None:
    start = time.monotonic()
    run = _run(ncclparse.parse(_config(nthreads, ngpus, processes), name="big.json"))
    assert time.monotonic() - start < 2
    assert run["warnings"] == [
        f"line 1: {shown} processes is more than 1048576 ranks: nranks and hosts "
        "unknown",
        f"line 1: {NO_ROWS}",  # no result object in the file
    ]
    assert (run["nranks"], run["hosts"], run["devices"]) == (None, [], [])
    assert run["status"] == "truncated"


def test_the_rank_bound_itself_is_allowed() -> None:
    run = _run(ncclparse.parse(_config(1024, 512, 2), name="max.json"))
    assert run["warnings"] == [f"line 1: {NO_ROWS}"]  # no result object
    assert run["nranks"] == 1 << 20
    assert run["hosts"][:: 1 << 19] == ["h0", "h1"]


def test_one_hostile_file_does_not_stop_a_batch(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(_config(2**64))
    good = JSON_DIR / "v2.19.6_all_reduce_2proc_4gpu_complete.json"
    result = ncclparse.parse_many([bad, good])
    assert result.failures == ()
    assert result.runs["rows"].to_pylist() == [0, 6]


# Members the writer never writes this way: (member JSON, the warning).
WRONG_TYPES = {
    "hostname-list": (
        '"config":{"nthreads":1,"ngpus":1,"devices":[{"rank":0,"hostname":["h"]}]}',
        "line 1: config.devices hostname or device_info is not a string: hosts unknown",
    ),
    "device-info-object": (
        '"config":{"nthreads":1,"ngpus":1,"devices":[{"rank":0,"hostname":"h",'
        '"device_info":{"a":1}}]}',
        "line 1: config.devices hostname or device_info is not a string: hosts unknown",
    ),
    "average-huge-integer": (
        '"average_bus_bandwidth":{"bandwidth":1' + "0" * 400 + ',"okay":"true"}',
        "line 1: unreadable average bus bandwidth 1000000000...00000000000",
    ),
    "average-list": (
        '"average_bus_bandwidth":{"bandwidth":[],"okay":"true"}',
        "line 1: unreadable average bus bandwidth []",
    ),
    "average-fullwidth": (
        '"average_bus_bandwidth":{"bandwidth":"\\uff11\\uff10","okay":"true"}',
        "line 1: unreadable average bus bandwidth '\uff11\uff10'",
    ),
    "oob-boolean": (
        '"out_of_bounds":{"count":true,"okay":"true"}',
        "line 1: out_of_bounds count true is not a count: not read",
    ),
    "oob-negative": (
        '"out_of_bounds":{"count":-3,"okay":"true"}',
        "line 1: out_of_bounds count -3 is not a count: not read",
    ),
    "nccl-version-huge": (
        '"nccl_version":1' + "0" * 300,
        "line 1: nccl_version 1000000000...00000000000 is not a NCCL version code: "
        "not read",
    ),
    "time-huge-integer": (
        '"results":[{"size":8,"count":2,"type":"float","redop":"sum","root":"-1",'
        '"in_place":{"time":1' + "0" * 400 + '},"actual_iterations":1}]',
        "line 1: unreadable result object: "
        "ValueError('not a number: 1000000000...00000000000')",
    ),
    "size-boolean": (
        '"results":[{"size":true,"count":2,"type":"float","redop":"sum","root":"-1",'
        '"in_place":{"time":1.0},"actual_iterations":1}]',
        "line 1: unreadable result object: "
        "TypeError('size, count and actual_iterations must be integers')",
    ),
}


@pytest.mark.parametrize(
    ("member", "warning"), WRONG_TYPES.values(), ids=list(WRONG_TYPES)
)
def test_members_of_another_type_are_warned_not_raised(
    member: str, warning: str
) -> None:
    results = "" if member.startswith('"results"') else '"results":[],'
    text = '{"version":3,"args":["./build/all_reduce_perf"],' + results + member + "}\n"
    run = _run(ncclparse.parse(text, name="odd.json"))
    assert warning in run["warnings"]
    assert run["rows"] == 0


@pytest.mark.parametrize(
    "nested",
    ['"results":[' + "[" * 100_000 + "]" * 100_000 + "]",
     '"config":' + '{"a":' * 50_000 + "1" + "}" * 50_000],
    ids=["array", "object"],
)  # fmt: skip
def test_values_nested_too_deeply_are_warned_not_raised(nested: str) -> None:
    # The decoder raised RecursionError (not a ValueError): the whole batch stopped.
    text = '{"args":["./build/all_reduce_perf"],' + nested + "}\n"
    result = ncclparse.parse(text, name="deep.json")
    assert _run(result)["warnings"] == [
        "line 1: values nested too deeply at line 1 inside the JSON object, after 0 "
        "result objects: run truncated"
    ]
    assert result.accounting["deep.json"] == Counter(warned=1)
