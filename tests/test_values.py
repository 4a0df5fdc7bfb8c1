"""Values no measurement can have, and digits no tool prints, in every parser.

A row whose time is negative, infinite or NaN, whose printed algbw/busbw is negative,
infinite or NaN, or whose size is negative is not read: its line and value are named
in the run's warnings with one wording (``time -5.3 is not a possible time``). A token
written with non-ASCII digits (fullwidth, Arabic-Indic), which Python's int() and
float() would read, is not a number either. Each case is one token changed in a real
log (or, for the hand-built JSON layout, in the smallest JSON the writer produces).
"""

from __future__ import annotations

import json
import re
from types import ModuleType
from typing import Any

import pytest

import ncclparse
from ncclparse.parsers import (
    _nccl_layout,
    _nccl_lines,
    _nccl_topology,
    _noise,
    _table_row,
    imb,
    nccl_tests_json,
    oneccl,
)
from tests.conftest import FIXTURES, string_lists

HEADER = (
    "#       size         count      type   redop    root     time   algbw   busbw "
    "#wrong     time   algbw   busbw #wrong\n"
)
ROW = (
    "     1048576        262144     float     sum      -1    45.29   23.15   23.15"
    "      0    45.33   23.13   23.13      0\n"
)


def _nccl(old: str, new: str) -> str:
    """The header and a real all_reduce row with ``old`` replaced by ``new``."""
    assert old in ROW
    return HEADER + ROW.replace(old, new, 1) + ROW.replace("1048576", "2097152", 1)


def _json(**changes: Any) -> str:
    """A one-line -J file whose out-of-place block (or result) takes ``changes``."""
    block: dict[str, Any] = {"time": 45.29, "alg_bw": 23.15, "bus_bw": 23.15}
    result: dict[str, Any] = {"size": 1048576, "count": 262144, "type": "float"}
    result.update(redop="sum", root="    -1", out_of_place=block)
    for key, value in changes.items():
        (result if key in result else block)[key] = value
    result["actual_iterations"] = 20
    document = {"version": 3, "args": ["./build/all_reduce_perf"], "results": [result]}
    document["average_bus_bandwidth"] = {"bandwidth": 23.15, "okay": "unchecked"}
    return json.dumps(document, separators=(",", ":")) + "\n"


def fullwidth(text: str) -> str:
    """``text`` with its ASCII digits written as fullwidth digits (U+FF10-U+FF19)."""
    return text.translate({ord("0") + d: 0xFF10 + d for d in range(10)})


def arabic(text: str) -> str:
    """``text`` with its ASCII digits written as Arabic-Indic digits (U+0660-U+0669)."""
    return text.translate({ord("0") + d: 0x0660 + d for d in range(10)})


def _fixture(path: str, line: int, old: str, new: str) -> str:
    """A real log with ``old`` replaced by ``new`` on ``line``."""
    lines = (FIXTURES / path).read_text().splitlines(keepends=True)
    assert old in lines[line - 1], lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    return "".join(lines)


IMB = "imb/imb_allreduce_np2.log"  # line 36: `4  200  0.34  0.34  0.34`
IMB_P2P = "imb/imb_pingpong_sendrecv_np2.log"  # line 38: `1  100  2.97  0.34`
ONECCL = "oneccl/v2021.14_allreduce_f32_np2.log"  # line 34: `4 1 20 7.09 7.34 7.21 ..`
CSV = "oneccl/v2021.12_csv_reduce_scatter_np4.csv"  # line 2: `4,...,4001.79,...`
CSV_2021_2 = "oneccl/v2021.2_csv_multi_np4.csv"  # line 2: `4,allreduce,...,4009.8`
IMB_ROW = "0.34         0.34         0.34"
ONECCL_ROW = "7.09          7.34          7.21"

# (input, the warning it must give); the row is not read.
IMPOSSIBLE = {
    # nccl-tests text: worded as the other parsers word it
    "nccl-time-negative": (
        _nccl("45.29", "-5.3"),
        "line 2: time -5.3 is not a possible time: row not read",
    ),
    "nccl-time-inf": (
        _nccl("45.29", "-inf"),
        "line 2: time -inf is not a possible time: row not read",
    ),
    "nccl-time-overflow": (
        _nccl("45.29", "-1e309"),
        "line 2: time -1e309 is not a possible time: row not read",
    ),
    "nccl-time-nan": (
        _nccl("45.29", "nan"),
        "line 2: time nan is not a possible time: row not read",
    ),
    "nccl-in-place-busbw": (
        _nccl("23.13      0\n", "-23.13      0\n"),
        "line 2: busbw -23.13 is not a possible bandwidth: row not read",
    ),
    "nccl-algbw-inf": (
        _nccl("23.15", "inf"),
        "line 2: algbw inf is not a possible bandwidth: row not read",
    ),
    "nccl-size-negative": (
        _nccl("     1048576", "    -1048576"),
        "line 2: size -1048576 is not a possible size: row not read",
    ),
    "json-time-negative": (
        _json(time=-5.3),
        "line 1: time -5.3 is not a possible time: row not read",
    ),
    "json-time-overflow": (  # JSON's -1e309 is read as -inf
        _json(time=-1e309),
        "line 1: time -inf is not a possible time: row not read",
    ),
    "json-time-nan": (
        _json(time="nan"),
        "line 1: time nan is not a possible time: row not read",
    ),
    "json-time-null": (
        _json(time=None),
        "line 1: time null is not a possible time: row not read",
    ),
    "json-busbw-negative": (
        _json(bus_bw=-1.5),
        "line 1: busbw -1.5 is not a possible bandwidth: row not read",
    ),
    "json-size-negative": (
        _json(size=-8),
        "line 1: size -8 is not a possible size: row not read",
    ),
    "imb-time-negative": (
        _fixture(IMB, 36, IMB_ROW, "0.34         0.34         -5.3"),
        "line 36: time -5.3 is not a possible time: row not read",
    ),
    "imb-time-nan": (
        _fixture(IMB, 36, IMB_ROW, "0.34         0.34          nan"),
        "line 36: time nan is not a possible time: row not read",
    ),
    "imb-size-negative": (
        _fixture(IMB, 36, "            4", "           -4"),
        "line 36: size -4 is not a possible size: row not read",
    ),
    "imb-mbytes-negative": (
        _fixture(IMB_P2P, 38, "0.34", "-0.34"),
        "line 38: algbw -0.34 is not a possible bandwidth: row not read",
    ),
    "oneccl-time-inf": (
        _fixture(ONECCL, 34, ONECCL_ROW, "7.09          7.34          -inf"),
        "line 34: time -inf is not a possible time: row not read",
    ),
    "oneccl-time-overflow": (
        _fixture(ONECCL, 34, ONECCL_ROW, "7.09          7.34        -1e309"),
        "line 34: time -1e309 is not a possible time: row not read",
    ),
    "oneccl-csv-time-negative": (
        _fixture(CSV, 2, "4001.79", "-5.3"),
        "line 2: time -5.3 is not a possible time: row not read",
    ),
    "oneccl-csv-2021.2-time-nan": (
        _fixture(CSV_2021_2, 2, "4009.8", "nan"),
        "line 2: time nan is not a possible time: row not read",
    ),
}

# (input, the warning it must give): a token with non-ASCII digits is not a number.
NON_ASCII = {
    "nccl-time": (
        _nccl("45.29", fullwidth("45.29")),
        f"line 2: unreadable data row: not a number: {fullwidth('45.29')!r}",
    ),
    # The size does not start a data row: the line is named as not understood.
    "nccl-size": (
        _nccl("1048576", fullwidth("1048576")),
        "line 2: 1 line not recognised as benchmark output (kept out of the tables)",
    ),
    "json-time": (
        _json(time=fullwidth("10")),
        "line 1: unreadable result object: "
        f'ValueError("not a number: {fullwidth("10")!r}")',
    ),
    "json-root": (
        _json(root=arabic("1")),
        "line 1: unreadable result object: "
        f'ValueError("root {arabic("1")!r} is not an integer")',
    ),
    "imb-repetitions": (
        _fixture(IMB, 36, "          200", arabic("          200")),
        f"line 36: #repetitions {arabic('200')!r} is not a number: row not read",
    ),
    "oneccl-time": (
        _fixture(ONECCL, 34, "7.21", arabic("7.21")),
        f"line 34: t_avg[usec] {arabic('7.21')!r} is not a number: row not read",
    ),
    "oneccl-bytes": (
        _fixture(ONECCL, 34, "             4", fullwidth("             4")),
        f"line 34: #bytes {fullwidth('4')!r} is not a number: row not read",
    ),
    "oneccl-csv-time": (
        _fixture(CSV, 2, "4001.79", arabic("4001.79")),
        f"line 2: t_avg[usec] {arabic('4001.79')!r} is not a number: row not read",
    ),
    "oneccl-csv-elements": (
        _fixture(CSV, 2, "float16,2,4,", f"float16,2,{arabic('4')},"),
        f"line 2: #elements/buffer {arabic('4')!r} is not a count: row not read",
    ),
}


def _warnings(result: ncclparse.ParseResult) -> list[str]:
    return [w for ws in string_lists(result.runs, "warnings") for w in ws]


def _rows_but(text: str, line: int) -> list[tuple[int, str, float]]:
    """(line, placement, time) of the rows of the input without the changed line."""
    lines = text.splitlines(keepends=True)
    rest = "".join(lines[: line - 1] + lines[line:])
    if not rest.strip():  # a one-line JSON file: its one object is the row
        return []
    result = ncclparse.parse(rest, name="case")
    # Lines after the dropped one moved up by one.
    return [
        (r["line"] + (r["line"] >= line), r["placement"], r["time_us"])
        for r in result.measurements.to_pylist()
    ]


def _check(text: str, warning: str) -> None:
    result = ncclparse.parse(text, name="case")
    assert warning in _warnings(result)
    cited = int(warning.split(":")[0].removeprefix("line "))
    rows = [
        (r["line"], r["placement"], r["time_us"])
        for r in result.measurements.to_pylist()
    ]
    # The row is not read; every other row is (JSON: the whole object is one line).
    assert rows == _rows_but(text, cited)


@pytest.mark.parametrize(("text", "warning"), IMPOSSIBLE.values(), ids=list(IMPOSSIBLE))
def test_impossible_values_are_named_and_not_read(text: str, warning: str) -> None:
    _check(text, warning)


@pytest.mark.parametrize(("text", "warning"), IMPOSSIBLE.values(), ids=list(IMPOSSIBLE))
def test_impossible_values_are_refused_lines_of_the_run(
    text: str, warning: str
) -> None:
    # The warning's line and reason, with the printed line (blanks squeezed) after.
    result = ncclparse.parse(text, name="case")
    refused = [r for rs in string_lists(result.runs, "refused") for r in rs]
    cited = int(warning.split(":")[0].removeprefix("line "))
    reason = warning.removesuffix(": row not read")
    if text.startswith("{"):  # JSON: the result object by its size and times
        assert len(refused) == 1
        assert refused[0].startswith(f"{reason} ('size ")
        return
    printed = " ".join(text.splitlines()[cited - 1].split())
    shown = printed if len(printed) <= 100 else printed[:100] + "..."
    assert refused == [f"{reason} ({shown!r})"]


def test_refused_json_result_is_named_by_its_size_and_times() -> None:
    text, _ = IMPOSSIBLE["json-time-negative"]
    (run,) = ncclparse.parse(text, name="case").runs.to_pylist()
    assert run["refused"] == [
        "line 1: time -5.3 is not a possible time ('size 1048576, count 262144, "
        "type float, redop sum, root -1, out_of_place time -5.3')"
    ]


def test_refused_line_of_a_real_nccl_log() -> None:
    text = _fixture(REAL, 40, "   125.8 ", "    -inf ")
    (run,) = ncclparse.parse(text, name="case").runs.to_pylist()
    assert run["refused"] == [
        "line 40: time -inf is not a possible time ('2048 512 float sum -1 -inf 0.02 "
        "0.03 0 124.6 0.02 0.03 0')"
    ]
    assert run["status"] == "complete"


@pytest.mark.parametrize(("text", "warning"), NON_ASCII.values(), ids=list(NON_ASCII))
def test_non_ascii_digits_are_not_numbers(text: str, warning: str) -> None:
    _check(text, warning)
    # No number, so no impossible value: not refused.
    refused = string_lists(ncclparse.parse(text, name="case").runs, "refused")
    assert [r for rs in refused for r in rs] == []


REAL = "nccl/repo-ztan-a3mega_allreduce_16rank_2node_h100_complete.log"


def test_non_ascii_rank_line_is_not_read() -> None:
    rank = "#  Rank  0 Group  0 Pid   6899 on ztan-mig-235z device  0 [0000:04:00]"
    text = _fixture(REAL, 12, "#  Rank  0 Group", arabic("#  Rank  0 Group"))
    assert (FIXTURES / REAL).read_text().splitlines()[11].startswith(rank)
    (run,) = ncclparse.parse(text, name="case").runs.to_pylist()
    assert run["hosts"][0] is None  # rank 0's line is not read; rank 1's is
    assert run["hosts"][1] == "ztan-mig-235z"
    assert (
        "line 12: 1 line not recognised as benchmark output (kept out of the tables)"
        in run["warnings"]
    )


def test_non_ascii_average_is_not_the_footer() -> None:
    text = _fixture(REAL, 64, "70.742", fullwidth("70.742"))
    (run,) = ncclparse.parse(text, name="case").runs.to_pylist()
    assert (run["avg_busbw_gbps"], run["status"]) == (None, "truncated")
    assert (
        "line 64: 1 line not recognised as benchmark output (kept out of the tables)"
        in run["warnings"]
    )


def test_non_ascii_topology_counts_are_not_read() -> None:
    comm = (
        "lccn19:2471268:2471514 [1] NCCL INFO comm 0x636c17517270 rank 9 nRanks 16 "
        "nNodes {} localRanks {} localRank 1 MNNVL 0\n"
    )
    text = comm.format(2, 8) + HEADER + ROW
    (run,) = ncclparse.parse(text, name="ascii").runs.to_pylist()
    assert (run["nnodes"], run["local_ranks"]) == (2, 8)
    text = comm.format(arabic("2"), arabic("8")) + HEADER + ROW
    (run,) = ncclparse.parse(text, name="arabic").runs.to_pylist()
    assert (run["nnodes"], run["local_ranks"]) == (None, None)


def test_non_ascii_imb_process_count_is_not_read() -> None:
    text = _fixture(IMB, 32, "# #processes = 2", arabic("# #processes = 2"))
    runs = ncclparse.parse(text, name="case").runs.to_pylist()
    assert [r["nranks"] for r in runs] == [None]


# The parser modules with patterns that read or recognise numbers (oneccl_csv has
# none: it reads its fields with _nccl_layout.to_float and is_count).
ASCII_MODULES = (
    _nccl_layout,
    _nccl_lines,
    _nccl_topology,
    _noise,
    imb,
    nccl_tests_json,
    oneccl,
)


@pytest.mark.parametrize("module", ASCII_MODULES, ids=lambda m: m.__name__)
def test_every_pattern_is_ascii(module: ModuleType) -> None:
    patterns = {
        name: value
        for name, value in vars(module).items()
        # oneccl imports _table_row's NUMBER: its row reader checks tokens before it.
        if isinstance(value, re.Pattern) and value is not _table_row.NUMBER
    }
    assert patterns
    assert [n for n, p in patterns.items() if not p.flags & re.ASCII] == []


def test_zero_is_possible() -> None:
    # nccl-tests prints 0.00 bandwidths for small sizes, and -0.00 can be printed too.
    values = {"time_us": 0.0, "algbw_gbps": 0.0, "busbw_gbps": -0.0, "size_bytes": 0}
    assert _nccl_layout.impossible(values) is None
    assert _nccl_layout.impossible({**values, "algbw_gbps": None}) is None
    assert _nccl_layout.impossible({**values, "time_us": None}) == (
        "time null is not a possible time"
    )


# Hand-built to exercise the writer's "nan" bandwidth: the one input that loses a row.
SYNTHETIC_NAN = "v2.19.6_reduce_cputime_unchecked_nan.json"
INPUTS = sorted(
    p
    for p in FIXTURES.glob("*/*")
    if p.parent.name != "expected" and p.suffix in (".log", ".csv", ".json")
)


def test_no_real_log_has_an_impossible_value() -> None:
    """Zero times and bandwidths in real logs (small sizes) stay measurements."""
    result = ncclparse.parse_many(INPUTS)
    named = [w for w in _warnings(result) if "is not a possible" in w]
    assert named == ["line 1: algbw nan is not a possible bandwidth: row not read"]
    zeros = [r for r in result.measurements.to_pylist() if r["busbw_gbps"] == 0.0]
    assert len(zeros) > 100
    assert len(INPUTS) > 100
    assert SYNTHETIC_NAN in {p.name for p in INPUTS}


def test_non_ascii_oneccl_process_counts_are_not_read() -> None:
    text = _fixture(ONECCL, 7, "processes:       2", arabic("processes:       2"))
    text = text.replace("# #processes: 2", arabic("# #processes: 2"))
    (run,) = ncclparse.parse(text, name="case").runs.to_pylist()
    assert run["nranks"] is None
    assert dict(run["params"])["processes"] == arabic("2")  # kept as printed
    # The rows are read, as for a log that states no process count.
    assert run["rows"] == ncclparse.parse(FIXTURES / ONECCL).runs["rows"][0].as_py()


@pytest.mark.parametrize(
    ("old", "new", "warning"),
    [
        # -4 elements gave a row of size_bytes -16
        (",4,8,2,", ",-4,8,2,", "#elements/buffer '-4' is not a count"),
        ("4,reduce_scatter", "-4,reduce_scatter", "#ranks '-4' is not a count"),
        # int() took 30 digits: nranks beyond int32, sizes beyond int64
        (
            "4,reduce_scatter",
            "9" * 30 + ",reduce_scatter",
            "#ranks '999999999999999999999999' is not a count",
        ),
        ("5,3216.8", "5_0,3216.8", "#repetitions '5_0' is not a count"),
        ("3216.8", "1_0.5", "t_min[usec] '1_0.5' is not a number"),
    ],
)
def test_csv_counts_and_numbers_as_the_benchmark_writes_them(
    old: str, new: str, warning: str
) -> None:
    _check(_fixture(CSV, 2, old, new), f"line 2: {warning}: row not read")


def test_csv_without_a_time_column_is_warned() -> None:
    # Found by test_mutated_corpus (long): a NUL in the header's `t_avg[usec]` left
    # every row without a time, and the table failed the schema (SchemaError).
    text = _fixture(CSV, 1, "t_avg[usec]", "\x00t_avg[usec]")
    (run,) = ncclparse.parse(text, name="case").runs.to_pylist()
    assert run["rows"] == 0
    assert run["warnings"][0] == (
        "lines 2, 3, 4, 5, 6 and 21 more: table without a time column: row not read"
    )
