"""oneCCL benchmark stdout and CSV parsers on real logs (tests/fixtures/oneccl).

Expectations in tests/fixtures/expected/oneccl come from the logs themselves: runs.csv
from the exit codes and rank counts in SOURCES.md and an awk count of table rows;
<case>.csv rows from an independent awk extraction, spot-checked by reading.
"""

from __future__ import annotations

import csv
import itertools
import math
import re
from pathlib import Path
from typing import Any, cast

import pytest

import ncclparse
from ncclparse.parsers import (
    PARSERS,
    SNIFF_LINES,
    _impi,
    _lines,
    imb,
    oneccl,
    oneccl_csv,
)
from ncclparse.parsers._model import NO_ROWS
from tests.conftest import string_lists

FIXTURES = Path(__file__).parent / "fixtures"
LOGS = sorted((FIXTURES / "oneccl").glob("*.log"))
CSVS = sorted((FIXTURES / "oneccl").glob("*.csv"))
EXPECTED = FIXTURES / "expected" / "oneccl"
TIMES = ("time_us", "time_min_us", "time_max_us", "stddev_pct")


def _parse(path: Path) -> ncclparse.ParseResult:
    return ncclparse.parse(path, name=path.name)


def _expected_runs() -> dict[tuple[str, int], dict[str, str]]:
    with (EXPECTED / "runs.csv").open() as handle:
        return {(r["file"], int(r["run"])): r for r in csv.DictReader(handle)}


def _head(path: Path) -> list[_lines.Line]:
    with path.open(newline="", errors="replace") as handle:
        return list(itertools.islice(_lines.numbered(handle), SNIFF_LINES))


@pytest.mark.parametrize("path", LOGS + CSVS, ids=lambda p: p.name)
def test_detected_and_every_line_accounted(path: Path) -> None:
    head = _head(path)
    chosen = next(p.NAME for p in PARSERS if p.sniff(head))
    assert chosen == (oneccl_csv.NAME if path.suffix == ".csv" else oneccl.NAME)
    result = _parse(path)
    accounting = result.accounting[path.name]
    assert sum(accounting.values()) == len(path.read_text().splitlines())
    warned = sum(len(w) for w in string_lists(result.runs, "warnings"))
    assert accounting["warned"] <= warned
    assert set(result.measurements.column("tool").to_pylist()) <= {TOOL}


TOOL = "oneccl-benchmark"


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_runs_match_expectations(path: Path) -> None:
    expected = {k: v for k, v in _expected_runs().items() if k[0] == path.name}
    runs = _parse(path).runs.to_pylist()
    assert len(runs) == len(expected)
    for run in runs:
        want = expected[(path.name, run["run"])]
        assert run["status"] == want["status"]
        assert run["nranks"] == (int(want["nranks"]) if want["nranks"] else None)
        assert run["rows"] == int(want["rows"])
        if run["status"] == "failed":
            assert run["errors"] or run["warnings"]
        if run["status"] == "complete":
            assert not run["errors"]


@pytest.mark.parametrize("case", sorted(p.stem for p in EXPECTED.glob("v*.csv")))
def test_rows_match_golden(case: str) -> None:
    rows = _parse(FIXTURES / "oneccl" / f"{case}.log").measurements.to_pylist()
    with (EXPECTED / f"{case}.csv").open() as handle:
        golden = list(csv.DictReader(handle))
    assert len(rows) == len(golden)
    for row, want in zip(rows, golden, strict=True):
        for key, text in want.items():
            assert row[key] == _typed(key, text), (case, want["line"], key)


def _typed(key: str, text: str) -> Any:
    if text == "":
        return None
    if key == "grouped":
        return text == "True"
    if key in ("collective", "placement", "dtype", "redop"):
        return text
    if key in TIMES:
        return float(text)
    return int(text)


def test_allgather_size_is_the_gathered_buffer() -> None:
    rows = _parse(FIXTURES / "oneccl" / "v2021.14_allgather_np4.log").measurements
    first = rows.slice(0, 1).to_pylist()[0]
    # Line 38: `4  1  5  3193.80  4732.70  3963.89  19.39`, 4 ranks.
    assert first["line"] == 38
    assert (first["reported_bytes"], first["size_bytes"], first["count"]) == (4, 16, 1)
    assert (first["time_us"], first["time_min_us"], first["time_max_us"]) == (
        3963.89,
        3193.8,
        4732.7,
    )
    assert (first["stddev_pct"], first["repetitions"], first["nranks"]) == (19.39, 5, 4)


def test_group_rows_are_grouped_without_a_collective() -> None:
    result = _parse(FIXTURES / "oneccl" / "v2021.14_multi_coll_np2.log")
    rows = result.measurements.to_pylist()
    assert {(r["grouped"], r["collective"]) for r in rows} == {(True, None)}
    assert result.runs.column("collectives").to_pylist() == [
        ["all_reduce", "all_gather_v", "broadcast", "reduce"]
    ]
    assert [r["dtype"] for r in rows[:1] + rows[-1:]] == ["int32", "float32"]


def test_in_place_run_gives_in_place_rows() -> None:
    rows = _parse(FIXTURES / "oneccl" / "v2021.14_allreduce_inplace_np2.log")
    assert set(rows.measurements.column("placement").to_pylist()) == {"in-place"}


def test_options_block_goes_to_params() -> None:
    run = _parse(FIXTURES / "oneccl" / "v2021.14_allreduce_f32_np2.log").runs
    params = dict(run.to_pylist()[0]["params"])
    assert params["processes"] == "2"
    assert params["elem_counts"].startswith("[1 2 4 ")
    assert params["collectives"] == "allreduce"
    assert params["extended info"] == "auto"
    assert params["csv_filepath"] == ""
    assert len(params) == 17


def test_library_version_from_ccl_info() -> None:
    runs = _parse(FIXTURES / "oneccl" / "v2021.14_loglevel_info_np2.log").runs
    assert runs.column("library_version").to_pylist() == ["2021.14.0"]


def test_impi_pinning_table_gives_hosts() -> None:
    runs = _parse(FIXTURES / "oneccl" / "v2021.14_impi_debug5_np2.log").runs
    assert runs.column("hosts").to_pylist() == [["vm", "vm"]]
    assert runs.column("nnodes").to_pylist() == [1]


def test_impi_rank_map_and_prot_table_give_hosts() -> None:
    # `(192.168.0.1:0)` (-print-rank-map), then -prot's node table, whose names win.
    runs = _parse(
        FIXTURES / "oneccl" / "xft-erdma_allreduce_impi_rank_map_prot_np2.log"
    )
    [run] = runs.runs.to_pylist()
    assert (run["hosts"], run["nnodes"]) == (
        ["iZ2ze2krbyeyuro5gcr1uiZ", "iZ2zeb3qtvacqss8re3pcrZ"],
        2,
    )
    # The shell line before the output is its command (it was an unrecognised line).
    assert run["warnings"] == []
    assert run["command"] == (
        "$ mpirun -print-rank-map -prot -n 4 -ppn 1 -hosts 192.168.0.1,192.168.0.2 "
        "./_install/examples/benchmark/benchmark"
    )


@pytest.mark.parametrize(
    ("line", "hosts"),
    [
        ("(node7:0,1,4-5)", [(0, "node7"), (1, "node7"), (4, "node7"), (5, "node7")]),
        ("     3 | n3 | 10.0.0.3 | 6-7", [(6, "n3"), (7, "n3")]),
        ("(node7:0-999999)", []),  # a hostile range: not expanded
        ("    ID |  0  1", []),
        ("     0 | verbs;ofi_rxm verbs;ofi_rxm ", []),
    ],
)
def test_impi_rank_map_lines(line: str, hosts: list[tuple[int, str]]) -> None:
    mpi = _impi.classify(line)
    assert mpi is not None
    assert (mpi.kind, list(mpi.rank_hosts)) == ("noise", hosts)


def test_check_failure_is_failed_with_messages() -> None:
    run = _parse(FIXTURES / "oneccl" / "v2021.14_fail_check_max_np4.log").runs
    errors = string_lists(run, "errors")[0]
    assert errors[0] == (
        "line 50: allreduce recv_bufs: buf_idx 0, rank_idx 0, elem_idx 0, "
        "expected 6, got 3"
    )
    # Two ranks' messages glued on one line are still an error.
    assert (
        "line 64: allreduceallreduce recv_bufs: buf_idx 0, rank_idx 0, elem_idx 0, "
        "expected 6, got 3"
    ) in errors
    assert "line 75: KILLED BY SIGNAL: 6 (Aborted)" in errors
    assert any("ASSERT '0' FAILED: unexpected value" in e for e in errors)
    # The start-up warnings of a non-sum check are warnings, not errors; the four
    # ranks' copies of each are one warning naming the four lines.
    warnings = string_lists(run, "warnings")[0]
    assert warnings[:3] == [
        "lines 1, 4, 7, 10: benchmark: unsupported reduction: max",
        "lines 2, 5, 8, 11: benchmark: supported values: sum",
        "lines 3, 6, 9, 12: benchmark: WARN: correctness checking is not "
        "implemented for 'max'",
    ]


@pytest.mark.parametrize(
    ("name", "first_error"),
    [
        ("v2021.14_fail_bad_dtype_np2.log", "line 1: unsupported dtype: float128"),
        (
            "v2021.14_fail_unknown_longopt_np2.log",
            "line 1: ./benchmark: unrecognized option '--foo'",
        ),
        (
            "v2021.14_fail_inplace_reduce_np2.log",
            "line 1: inplace is not supported for reduce yet",
        ),
        (
            "v2021.14_fail_csv_unwritable_np2.log",
            "line 24: cannot open CSV file for writing: /nonexistent_dir/out.csv",
        ),
        (
            "v2021.14_fail_bad_transport_np2.log",
            "line 1: terminate called after throwing an instance of "
            "'ccl::v1::exception'",
        ),
        ("v2021.14_fail_unknown_coll_np2.log", "line 24: FAILED"),
    ],
)
def test_failure_messages(name: str, first_error: str) -> None:
    run = _parse(FIXTURES / "oneccl" / name).runs.to_pylist()[0]
    assert run["status"] == "failed"
    assert run["errors"][0] == first_error


def test_option_error_keeps_the_command_line() -> None:
    run = _parse(FIXTURES / "oneccl" / "v2021.14_fail_bad_dtype_np2.log").runs
    assert run.column("command").to_pylist() == ["./benchmark -l allreduce -d float128"]


def test_help_only_is_failed_with_a_warning() -> None:
    run = _parse(FIXTURES / "oneccl" / "v2021.14_help_np1.log").runs.to_pylist()[0]
    assert run["status"] == "failed"
    assert run["warnings"] == ["line 2: usage text only: the benchmark ran nothing"]


def test_interrupted_run_is_truncated_and_keeps_its_rows() -> None:
    result = _parse(
        FIXTURES / "oneccl" / "derived_v2021.14_allreduce_f32_np4_interrupted.log"
    )
    run = result.runs.to_pylist()[0]
    assert run["status"] == "truncated"
    assert "line 53: KILLED BY SIGNAL: 2 (Interrupt)" in run["errors"]
    assert result.measurements.column("line").to_pylist() == list(range(38, 47))


def test_partial_last_row_is_not_a_measurement() -> None:
    path = FIXTURES / "oneccl" / "derived_v2021.14_allreduce_f32_np4_cut_midrow.log"
    result = _parse(path)
    run = result.runs.to_pylist()[0]
    assert run["status"] == "truncated"
    assert run["warnings"] == ["line 45: partial last line (no newline): row not read"]
    assert max(r["line"] for r in result.measurements.to_pylist()) == 44


def test_footerless_2021_2_run_complete_only_with_every_row() -> None:
    full = _parse(FIXTURES / "oneccl" / "v2021.2_allreduce_bufcount1_np2.log").runs
    cut = _parse(
        FIXTURES / "oneccl" / "derived_v2021.2_allreduce_bufcount1_np2_cut.log"
    )
    assert full.column("status").to_pylist() == ["complete"]
    assert cut.runs.column("status").to_pylist() == ["truncated"]


def test_reduce_scatter_noop_row_is_kept_with_a_warning() -> None:
    result = _parse(FIXTURES / "oneccl" / "v2021.14_reduce_scatter_np2.log")
    assert result.runs.column("warnings").to_pylist() == [
        ["line 34: reduce_scatter count below the rank count: no-op row"]
    ]
    assert result.measurements.column("line").to_pylist()[0] == 34


@pytest.mark.parametrize(
    "case",
    [
        "v2021.12_csv_ext_on_multi_np2",
        "v2021.12_csv_reduce_scatter_np4",
        "v2021.14_csv_allreduce_np2",
        "v2021.14_csv_bufcount_np2",
        "v2021.14_csv_ext_on_np2",
    ],
)
def test_log_and_csv_give_the_same_measurements(case: str) -> None:
    log = _parse(FIXTURES / "oneccl" / f"{case}.log").measurements.to_pylist()
    table = _parse(FIXTURES / "oneccl" / f"{case}.csv").measurements.to_pylist()
    assert len(log) == len(table)
    for a, b in zip(log, table, strict=True):
        for key in a:
            if key in ("source", "line"):
                continue
            if key in TIMES:
                # The CSV keeps 6 significant digits, stdout 2 decimals.
                assert math.isclose(a[key], b[key], rel_tol=1e-5, abs_tol=0.0051), key
            else:
                assert a[key] == b[key], key


def test_2021_2_csv_has_per_collective_times_summing_to_the_group() -> None:
    log = _parse(FIXTURES / "oneccl" / "v2021.2_csv_bufcount4_np2.log").measurements
    table = _parse(FIXTURES / "oneccl" / "v2021.2_csv_bufcount4_np2.csv").measurements
    assert set(log.column("grouped").to_pylist()) == {True}
    assert set(table.column("grouped").to_pylist()) == {False}
    # time_us is a non-null float64 column.
    per_coll = cast("list[float]", table.column("time_us").to_pylist())
    sums = [a + b for a, b in zip(per_coll[::2], per_coll[1::2], strict=True)]
    printed_times = cast("list[float]", log.column("time_us").to_pylist())
    for total, printed in zip(sums, printed_times, strict=True):
        assert abs(total - printed) <= 0.051 + 1e-5 * printed
    # alltoall: 16 bytes = 1 float32 x 4 buffers per peer, 2 ranks.
    second = table.slice(1, 1).to_pylist()[0]
    assert (second["collective"], second["reported_bytes"], second["size_bytes"]) == (
        "alltoall",
        16,
        32,
    )
    assert second["redop"] is None


GLUED = (
    "options:\n  processes:       2\n  collectives:     allreduce \n"
    "  datatypes:       float32 \n  reductions:      sum \n  inplace:         0\n\n"
    "datatype: float32\nreduction: sum\n\n"
    "#" + "-" * 60 + "\n# Benchmarking: allreduce \n# #processes: 2\n"
    "#" + "-" * 60 + "\n\n"
    "        #bytes   #elem_count  #repetitions   t_min[usec]   t_max[usec]"
    "   t_avg[usec]  stddev[%]\n"
    "             4             1            20          7.09          7.34"
    "          7.21       1.73"
    "2026:11:22-09:51:16:(14979) |CCL_WARN| workers are disabled\n"
    "[0] MPI startup(): I_MPI_DEBUG=5\n"
    "2026:11:22-09:51:16:(14978) |CCL_WARN| a2026:11:22-09:51:16:(14979) |CCL_WARN| b\n"
    "\n# All done\n"
)


def test_ccl_warn_and_mpi_lines_are_noise_even_glued() -> None:
    result = ncclparse.parse(GLUED, name="glued")
    run = result.runs.to_pylist()[0]
    assert run["status"] == "complete"
    assert run["warnings"] == [
        "line 17: benchmark output and a oneCCL message on one line"
    ]
    rows = result.measurements.to_pylist()
    assert [(r["line"], r["time_us"]) for r in rows] == [(17, 7.21)]
    assert result.accounting["glued"]["noise"] == 2
    assert result.accounting["glued"]["measurement"] == 1


def test_nccl_corpus_is_not_claimed() -> None:
    logs = sorted((Path(__file__).parent / "fixtures" / "nccl").glob("*.log"))
    assert logs
    for path in logs:
        head = _head(path)
        for module in (oneccl, oneccl_csv, imb):
            assert not module.sniff(head), (module.NAME, path.name)


def test_unrecognised_text_is_an_unknown_format() -> None:
    with pytest.raises(ncclparse.UnknownLogFormatError, match=re.escape("'hello'")):
        ncclparse.parse("hello\nworld\n", name="x")


# 2021.1 (real runs, SOURCES.md): no footer, keys `colls:`/`dtypes:`, no
# `elem_counts:`, counts doubled from min_elem_count up to max_elem_count.
V2021_1 = [
    ("v2021.1_allreduce_default_args_np2.log", 8),  # default -p 16, counts 1..128
    ("v2021.1_allreduce_bufcount1_np2.log", 17),  # -f 1 -t 65536
    ("v2021.1_csv_multi_np2.log", 22),  # 2 dtypes x counts 1..1024
    ("v2021.1_reductions_nocheck_np2.log", 16),  # 2 reductions x 4..512 (not 1000)
]


@pytest.mark.parametrize(("name", "rows"), V2021_1)
def test_2021_1_complete_run_is_complete_without_footer(name: str, rows: int) -> None:
    run = _parse(FIXTURES / "oneccl" / name).runs.to_pylist()[0]
    assert (run["status"], run["rows"], run["errors"]) == ("complete", rows, [])
    # The MPI transport's `(tid): vm: @ atl_mpi.c:...` / `WARNING !!!` block and
    # the key-value store's `fd is closed` lines are library noise.
    assert run["warnings"] == []


@pytest.mark.parametrize(("name", "rows"), V2021_1)
def test_2021_1_run_missing_its_last_row_is_truncated(name: str, rows: int) -> None:
    lines = (FIXTURES / "oneccl" / name).read_text().splitlines(keepends=True)
    last = max(i for i, t in enumerate(lines) if re.match(r"^ +\d+ +\d", t))
    result = ncclparse.parse("".join(lines[:last]), name="cut")
    run = result.runs.to_pylist()[0]
    assert (run["status"], run["rows"]) == ("truncated", rows - 1)


def test_2021_1_missing_section_is_truncated() -> None:
    # The second reduction's section (max) is dropped whole: every row of the
    # first one is there, but the run is not complete.
    text = (FIXTURES / "oneccl" / "v2021.1_reductions_nocheck_np2.log").read_text()
    cut = text[: text.index("\ndtype: float32\nreduction: max")] + "\n"
    assert ncclparse.parse(cut, name="x").runs.to_pylist()[0]["status"] == "truncated"


def test_2021_1_unordered_loop_is_complete_with_every_passed() -> None:
    # -e unordered (read from the 2021.1 source: one `do unordered test` and one
    # `PASSED` per section, no table); the real run needs the OFI transport,
    # which fails on the fixture host (SOURCES.md), so the text is derived.
    head = (FIXTURES / "oneccl" / "v2021.1_allreduce_default_args_np2.log").read_text()
    head = head[: head.index("\ndtype: ")].replace("regular", "unordered")
    section = "\ndtype: float32\nreduction: sum\n\ndo unordered test\n"
    done = ncclparse.parse(head + section + "PASSED\n\n", name="x").runs
    cut = ncclparse.parse(head + section, name="x").runs
    # No table, so no row: never complete; its warnings say the run ended.
    assert done.column("status").to_pylist() == ["truncated"]
    assert cut.column("status").to_pylist() == ["truncated"]
    ((*_, last),) = string_lists(done, "warnings")
    assert last.endswith(NO_ROWS)
    (warnings,) = string_lists(cut, "warnings")
    assert not any(w.endswith(NO_ROWS) for w in warnings)


def test_2021_1_csv_times_are_per_collective_and_sum_to_the_group() -> None:
    log = _parse(FIXTURES / "oneccl" / "v2021.1_csv_multi_np2.log").measurements
    table = _parse(FIXTURES / "oneccl" / "v2021.1_csv_multi_np2.csv").measurements
    per_coll = cast("list[float]", table.column("time_us").to_pylist())
    assert table.column("collective").to_pylist()[:3] == [
        "all_reduce",
        "broadcast",
        "reduce",
    ]
    sums = [sum(per_coll[i : i + 3]) for i in range(0, len(per_coll), 3)]
    printed = cast("list[float]", log.column("time_us").to_pylist())
    assert len(sums) == len(printed) == 22
    for total, shown in zip(sums, printed, strict=True):
        assert abs(total - shown) <= 0.011 + 1e-5 * shown


@pytest.mark.parametrize(
    ("name", "collectives"),
    [
        ("v2021.1_fail_unknown_longopt_np2.log", ["all_reduce"]),  # -l allreduce
        # --coll=allgatherv,reduce -z 3
        (
            "v2021.1_fail_longopt_coll_invalid_shortopt_np2.log",
            ["all_gather_v", "reduce"],
        ),
        ("v2021.14_fail_bad_dtype_np2.log", ["all_reduce"]),
        ("v2021.14_fail_unknown_shortopt_np2.log", ["all_reduce"]),
        ("v2021.2_fail_unknown_longopt_np2.log", ["all_reduce"]),
        ("v2021.14_help_np1.log", []),  # -h: no arg lines
    ],
)
def test_option_error_run_gets_the_collectives_of_its_command(
    name: str, collectives: list[str]
) -> None:
    run = _parse(FIXTURES / "oneccl" / name).runs.to_pylist()[0]
    assert run["status"] == "failed"
    assert run["collectives"] == collectives


def _argv_run(*argv: str) -> dict[str, Any]:
    text = "found 1 errors while parsing user options\n" + "".join(
        f"arg {i}: {a}\n" for i, a in enumerate(("./benchmark", *argv))
    )
    return ncclparse.parse(text, name="x").runs.to_pylist()[0]


@pytest.mark.parametrize(
    ("argv", "collectives"),
    [
        (("-lallreduce,bcast", "--foo"), ["all_reduce", "broadcast"]),
        (("--col", "reduce", "--foo"), ["reduce"]),  # getopt abbreviation
        (("-l", "bcast", "-i", "5", "--coll=alltoall"), ["alltoall"]),  # last wins
        (("-x", "-l", "allgather"), ["all_gather"]),  # -x without value (<2021.10)
        (("-x", "on", "-l", "allgather"), ["all_gather"]),
        (("-i", "-l", "reduce"), []),  # -l is the value of -i
        (("extra", "-l", "reduce"), ["reduce"]),  # non-options are moved
        (("--", "-l", "reduce"), []),  # after --: no options
        (("-hl", "reduce"), ["reduce"]),
        (("-o", "-l", "-d", "x"), []),
    ],
)
def test_collectives_from_echoed_arguments(
    argv: tuple[str, ...], collectives: list[str]
) -> None:
    run = _argv_run(*argv)
    assert run["command"] == " ".join(("./benchmark", *argv))
    assert run["collectives"] == collectives


def test_collectives_all_from_arguments_is_not_expanded() -> None:
    run = _argv_run("-l", "all", "--foo")
    assert run["collectives"] == []
    assert any("`-l all`" in w for w in run["warnings"])


# Signals (rule in ncclparse/parsers/_signals.py and docs/schema.md): real runs of
# the 2021.1 build interrupted or killed from outside (SOURCES.md).
@pytest.mark.parametrize(
    ("name", "status", "signal_error", "rows"),
    [
        ("v2021.1_interrupted_sigint_np2.log", "truncated", "2 (Interrupt)", 8),
        ("v2021.1_terminated_sigterm_np2.log", "truncated", "15 (Terminated)", 3),
        ("v2021.1_killed_sigkill_rank_np2.log", "truncated", "9 (Killed)", 5),
        ("v2021.1_killed_sigsegv_rank_np2.log", "failed", "11 (Segmentation fault)", 5),
    ],
)
def test_killed_run_status_follows_the_signal(
    name: str, status: str, signal_error: str, rows: int
) -> None:
    result = _parse(FIXTURES / "oneccl" / name)
    run = result.runs.to_pylist()[0]
    assert (run["status"], run["rows"]) == (status, rows)
    assert f"KILLED BY SIGNAL: {signal_error}" in " ".join(run["errors"])
    # The rows printed before the signal are kept.
    lines = cast("list[int]", result.measurements.column("line").to_pylist())
    assert lines == list(range(lines[0], lines[0] + rows))
