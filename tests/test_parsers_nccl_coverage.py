"""Parser coverage of nccl-tests / rccl-tests patterns (issue "Parser coverage").

Each test reads a real log of tests/fixtures/nccl_unseen (SOURCES.md), or a log derived
from one by the transformation the pattern describes (named ``*_DERIVED_*`` there);
their goldens are checked by test_parsers_nccl_tests.py, this file checks the
warnings and the cases next to them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ncclparse
from ncclparse.parsers._model import NO_ROWS
from tests.conftest import FIXTURES

UNSEEN = FIXTURES / "nccl_unseen"
CORE = "coreweave-43_allreduce_gb200_nvl72_72rank_one_rank_line_complete.log"
ALIBABA = "alibaba-readme_allreduce_rccltests_v2.17.9_radeon_8gpu_docker_complete.log"
NEUTRAL = "run.log"  # a file name that names no collective


def _text(name: str) -> str:
    return (UNSEEN / name).read_text()


def _run(text: str) -> dict[str, Any]:
    (run,) = ncclparse.parse(text, name=NEUTRAL).runs.to_pylist()
    return run


def _values(result: ncclparse.ParseResult, *keys: str) -> list[tuple[object, ...]]:
    return [tuple(r[k] for k in keys) for r in result.measurements.to_pylist()]


# --- 1. the format era bounds the collectives an inference may give -------------


def test_pre_2_10_table_is_never_called_hypercube() -> None:
    # nccltests-37 without its command line: E1 (type 6 wide, `error`), keys size
    # count type, busbw == algbw. Hypercube fits the numbers but came in v2.10.
    text = _text(
        "nccltests-37d_DERIVED_allgather_e1_no_command_algbw_eq_busbw_complete.log"
    )
    run = _run(text)
    assert run["collectives"] == ["all_gather"]
    assert (
        "line 2: collective not stated; inferred all_gather from the column set size "
        "count type and the format era (6-wide type column and error column: "
        "nccl-tests before v2.10, which had no sendrecv, hypercube, scatter or "
        "gather)"
    ) in run["warnings"]
    # The same numbers under the E2 header (type 8 wide) may be hypercube.
    wide = text.replace("count    type", "count      type").replace(
        "134217728   float", "134217728     float"
    )
    assert _run(wide)["collectives"] == ["hypercube"]


# --- 2. decoration after a complete row -------------------------------------------


def test_text_after_the_last_value_is_ignored_with_a_warning() -> None:
    name = "coreweave-43p_DERIVED_allreduce_gb200_rows_trailing_pipes_complete.log"
    result = ncclparse.parse(UNSEEN / name)
    (run,) = result.runs.to_pylist()
    assert run["rows"] == 10
    assert run["warnings"][0] == (
        "lines 6, 7, 8, 9, 10: text after the row's last value ignored: '| |'"
    )
    assert _values(result, "line", "placement", "time_us", "busbw_gbps")[:2] == [
        (6, "out-of-place", 1806.7, 586.06),
        (6, "in-place", 1835.9, 576.74),
    ]


def test_a_short_row_keeps_its_last_word() -> None:
    # Only decoration after a whole row goes: `... float sum` is a row cut short.
    header = _text(CORE).splitlines()[:5]
    text = "\n".join([*header, "   536870912     134217728     float     sum", ""])
    run = _run(text)
    assert run["rows"] == 0
    assert (
        "line 6: unreadable data row: expected at least 11 fields, found 4"
        in (run["warnings"])
    )


# --- 3. line decoration and wrapped rows ------------------------------------------


def test_list_items_and_line_blocks_are_read() -> None:
    for name, mark in (
        ("coreweave-43l_DERIVED_allreduce_gb200_markdown_list_items_complete.log", "-"),
        ("coreweave-43b_DERIVED_allreduce_gb200_rst_line_block_complete.log", "|"),
    ):
        run = _run(_text(name))
        assert (run["status"], run["rows"], run["avg_busbw_gbps"]) == (
            "complete",
            10,
            745.53,
        )
        assert run["warnings"][0] == (
            f"lines 1, 2, 3, 4, 5 and 7 more: line decoration {mark!r} removed "
            "before reading"
        )


def test_rst_literal_block_names_only_its_directive() -> None:
    name = "coreweave-43r_DERIVED_allreduce_gb200_rst_literal_block_complete.log"
    run = _run(_text(name))
    assert (run["rows"], run["last_line"]) == (10, 14)
    assert run["warnings"][0] == (
        "line 1: 1 line not recognised as benchmark output (kept out of the tables)"
    )


def test_rows_wrapped_over_two_lines_are_rejoined() -> None:
    name = "coreweave-43w_DERIVED_allreduce_gb200_rows_wrapped_at_80_complete.log"
    result = ncclparse.parse(UNSEEN / name)
    (run,) = result.runs.to_pylist()
    assert run["warnings"][:5] == [
        f"line {n}: data row wrapped over two lines; rejoined with line {n + 1}"
        for n in (6, 8, 10, 12, 14)
    ]
    assert _values(result, "line", "placement", "time_us", "wrong")[-2:] == [
        (14, "out-of-place", 20299.0, 0.0),
        (14, "in-place", 20006.0, 0.0),
    ]


def test_a_wrapped_row_whose_rest_never_comes_is_named() -> None:
    lines = _text(CORE).splitlines()
    text = "\n".join([*lines[:5], lines[5][:73], *lines[10:], ""])
    run = _run(text)
    # Its footer is there, but a run that read nothing is never complete.
    assert (run["rows"], run["status"]) == (0, "truncated")
    assert run["warnings"][-1].endswith(f": {NO_ROWS}")
    assert (
        "line 6: unreadable data row: expected at least 11 fields, found 8"
        in (run["warnings"])
    )


# --- 4. node count ---------------------------------------------------------------


def test_one_visible_rank_line_gives_no_node_count() -> None:
    run = _run(_text(CORE))
    assert (run["nranks"], run["nnodes"]) == (72, None)
    assert run["warnings"][-1] == (
        "line 1: Rank lines for 1 of 72 ranks: nnodes not counted from them (taken "
        "from NCCL's nNodes if printed)"
    )


def test_node_count_from_ncclinfo_nnodes() -> None:
    info = (
        "slurm-gb200-207-171:14840:14901 [3] NCCL INFO comm 0x55d0c1a2b3c0 rank 71 "
        "nRanks 72 nNodes 18 localRanks 4 localRank 3 MNNVL 1\n"
    )
    run = _run(info + _text(CORE))
    assert (run["nranks"], run["nnodes"], run["local_ranks"]) == (72, 18, 4)


# --- 5. rank count from the launch ------------------------------------------------

BROADCAST = (
    "mpirun -np 2 ./build/broadcast_perf -b 8 -e 16 -f 2 -g 4\n"
    "# nThread 1 nGpus 4 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 "
    "iters: 20 agg iters: 1 validation: 1 graph: 0\n"
    "#\n"
    "#       size         count      type   redop    root     time   algbw   busbw "
    "#wrong     time   algbw   busbw #wrong\n"
    "           8             2     float    none       0    10.00    0.00    0.00"
    "      0    10.00    0.00    0.00      0\n"
)


def test_rank_count_from_launcher_times_gpus_per_process() -> None:
    run = _run(BROADCAST)
    assert (run["nranks"], run["collectives"]) == (8, ["broadcast"])
    assert run["warnings"][-1] == (
        "line 1: no Rank lines; nranks 8 from -np 2 processes x nThread 1 x nGpus 4"
    )
    # The binary started directly: one process.
    run = _run(BROADCAST.replace("mpirun -np 2 ", ""))
    assert run["nranks"] == 4
    # No command: nGpus is one process's count, the number of processes unknown.
    assert _run(BROADCAST.split("\n", 1)[1])["nranks"] is None


def test_rank_count_from_a_command_and_a_cut_parameter_line() -> None:
    name = "aksrdma-150_allreduce_rccltests_mpirun_np16_params_line_cut_truncated.log"
    run = _run(_text(name))
    assert (run["nranks"], run["tool"], run["rows"]) == (16, "rccl-tests", 0)
    assert run["warnings"] == [
        "lines 2-3: 2 lines not recognised as benchmark output (kept out of the "
        "tables)",
        "line 5: last line cut off by the end of input",
        "line 1: no Rank lines; nranks 16 from -np 16 processes x nThread 1 x nGpus 1",
    ]


# --- 6. rccl-tests version line and RCCL's version block --------------------------


def test_rccl_tests_version_line_and_rccl_version_block() -> None:
    run = _run(_text(ALIBABA))
    assert (run["tool"], run["tool_version"], run["library_version"]) == (
        "rccl-tests",
        "2.17.9-develop:2596ca5f71",
        "2.27.7",  # rccl-library=22707, not the headers' 22803
    )
    name = "rocmsystems-3415_allreduce_rccltests_v2.17.9_rccl_version_block_gfx1151_fragment.log"
    text = _text(name)
    run = _run(text)
    assert (run["tool"], run["library_version"]) == ("rccl-tests", "2.28.3")
    # The RCCL/HIP/ROCm/Hostname/Librccl lines are read, not named as unknown.
    assert run["warnings"] == ["line 14: last line cut off by the end of input"]
    # Without the version line, RCCL's block gives the library version.
    lines = text.splitlines()
    run = _run("\n".join(lines[2:13]) + "\n")
    assert (run["tool"], run["library_version"]) == (
        "rccl-tests",
        "2.28.3-gfx1151-rccl:a188cf2",
    )


# --- 7. a last line without a newline ----------------------------------------------


def test_a_whole_consistent_last_row_is_kept() -> None:
    path = UNSEEN / "hpcaienvs-30_allreduce_rccltests_mi300x_version_line_truncated.log"
    result = ncclparse.parse(path)
    (run,) = result.runs.to_pylist()
    assert (run["rows"], run["status"]) == (2, "truncated")
    assert run["warnings"][0] == (
        "line 17: last line has no newline; read as a whole row (every field "
        "present and consistent)"
    )
    assert _values(result, "placement", "time_us", "algbw_gbps", "wrong") == [
        ("out-of-place", 91.1, 92.08, 0.0),
        ("in-place", 94.94, 88.36, 0.0),
    ]


def _cut_alibaba(last: str) -> ncclparse.ParseResult:
    lines = _text(ALIBABA).split("\n")
    return ncclparse.parse("\n".join([*lines[:46], last]), name=NEUTRAL)


def test_a_provably_cut_last_row_is_no_measurement() -> None:
    row = _text(ALIBABA).split("\n")[46]
    # One field short (cut at a blank): fewer fields than the rows before.
    (run,) = _cut_alibaba(row[: row.rindex(" 0")]).runs.to_pylist()
    assert (run["rows"], run["last_line"]) == (56, 47)
    assert run["warnings"][0] == (
        "line 47: last line cut off by the end of input: not a measurement "
        "(12 fields, the rows before 13)"
    )
    # With no row before, a missing field shows in the numbers: an E3 broadcast
    # (empty redop) cut before its last field reads root 3 as the time, so
    # the time 20.10 as algbw and the algbw 52.17 as busbw.
    names = _text(ALIBABA).split("\n")[16]
    cut = (
        "     1048576        262144     float               3    20.10   52.17   "
        "52.17       0    20.00   52.40   52.40"
    )
    (run,) = ncclparse.parse(f"{names}\n{cut}", name=NEUTRAL).runs.to_pylist()
    assert run["rows"] == 0
    assert run["warnings"][0] == (
        "line 2: last line cut off by the end of input: not a measurement (busbw "
        "52.17 is more than twice algbw 20.1)"
    )
    # The same line with its newline is a whole row.
    assert ncclparse.parse(f"{names}\n{cut}      0\n").runs.to_pylist()[0]["rows"] == 2


def test_a_last_value_that_may_be_cut_is_null() -> None:
    row = _text(ALIBABA).split("\n")[46]
    result = _cut_alibaba(row[: row.rindex("0")] + "17")
    (run,) = result.runs.to_pylist()
    assert run["warnings"][0] == (
        "line 47: last line has no newline; read as a whole row (every field "
        "present and consistent); its last value '17' may be cut: set to null"
    )
    assert _values(result, "line", "placement", "wrong")[-2:] == [
        (47, "out-of-place", 0.0),
        (47, "in-place", None),
    ]


def test_fixture_files_are_where_the_tests_expect() -> None:
    assert Path(UNSEEN / CORE).is_file()
    assert Path(UNSEEN / ALIBABA).is_file()
