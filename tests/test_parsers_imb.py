"""IMB parser on real logs (tests/fixtures/imb) and on live runs when possible.

Expectations in tests/fixtures/expected/imb come from the logs: runs.csv from reading
them and an awk row count, <case>.csv rows from an independent awk extraction.
"""

from __future__ import annotations

import csv
import itertools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import ncclparse
from ncclparse.parsers import PARSERS, SNIFF_LINES, _lines, imb

FIXTURES = Path(__file__).parent / "fixtures"
LOGS = sorted((FIXTURES / "imb").glob("*.log"))
EXPECTED = FIXTURES / "expected" / "imb"


def _parse(path: Path) -> ncclparse.ParseResult:
    return ncclparse.parse(path, name=path.name)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_detected_and_every_line_accounted(path: Path) -> None:
    with path.open(newline="") as handle:
        head = list(itertools.islice(_lines.numbered(handle), SNIFF_LINES))
    assert next(p.NAME for p in PARSERS if p.sniff(head)) == imb.NAME
    result = _parse(path)
    accounting = result.accounting[path.name]
    assert sum(accounting.values()) == len(path.read_text().splitlines())
    # Uniband/Biband rows print no time: not read, each warned (10 rows); the
    # excerpts: a cut last line, and 7 rows of a table whose header was cut off;
    # the mailing-list post: its shell prompt line.
    warned = {"uniband": 10, "ucx-5906": 1, "libfabric-9772": 7, "users-2187": 1}
    assert accounting["warned"] == next(
        (n for key, n in warned.items() if key in path.name), 0
    )


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_runs_match_expectations(path: Path) -> None:
    with (EXPECTED / "runs.csv").open() as handle:
        expected = [r for r in csv.DictReader(handle) if r["file"] == path.name]
    runs = _parse(path).runs.to_pylist()
    assert [
        (r["run"], r["status"], r["nranks"], r["rows"], r["tool"]) for r in runs
    ] == [
        (
            int(e["run"]),
            e["status"],
            int(e["nranks"]) if e["nranks"] else None,
            int(e["rows"]),
            "imb",
        )
        for e in expected
    ]


@pytest.mark.parametrize("case", sorted(p.stem for p in EXPECTED.glob("imb_*.csv")))
def test_rows_match_golden(case: str) -> None:
    rows = _parse(FIXTURES / "imb" / f"{case}.log").measurements.to_pylist()
    rows.sort(key=lambda r: r["line"])  # runs of several process counts interleave
    with (EXPECTED / f"{case}.csv").open() as handle:
        golden = list(csv.DictReader(handle))
    assert len(rows) == len(golden)
    for row, want in zip(rows, golden, strict=True):
        for key, text in want.items():
            assert row[key] == pytest.approx(_typed(key, text)), (want["line"], key)


def _typed(key: str, text: str) -> Any:
    if text == "":
        return None
    if key in ("collective", "dtype", "redop"):
        return text
    if key.endswith(("_us", "_gbps")):
        return float(text)
    return int(text)


def test_preamble() -> None:
    run = _parse(FIXTURES / "imb" / "imb_allreduce_np2.log").runs.to_pylist()[0]
    assert run["tool_version"] == "2021.8"
    assert run["command"] == "IMB-MPI1 Allreduce -msglog 0:20 -iter 200 -time 2"
    params = dict(run["params"])
    assert params["Date"] == "Sun Nov 22 10:01:28 2026"
    assert params["MPI Version"] == "3.1"
    assert params["MPI_Datatype for reductions"] == "MPI_FLOAT"
    assert params["Maximum message length in bytes"] == "1048576"
    assert run["collectives"] == ["all_reduce"]


def test_npmin_sweep_gives_one_run_per_process_count() -> None:
    result = _parse(FIXTURES / "imb" / "imb_bcast_reduce_rs_np4.log")
    runs = result.runs.to_pylist()
    assert [(r["nranks"], r["first_line"], r["last_line"]) for r in runs] == [
        # Each run spans its own sections (from the rule line above `# Benchmarking`);
        # the first also the preamble, the last section's the footer. IMB prints the
        # process counts of each benchmark in turn, so the spans interleave.
        (2, 1, 194),
        (4, 58, 219),
    ]
    rows = result.measurements.to_pylist()
    # Line 170: Reduce_scatter, 4 processes, `65536  50  324.36  564.09  449.28`.
    row = next(r for r in rows if r["line"] == 170)
    assert (row["collective"], row["nranks"], row["run"]) == ("reduce_scatter", 4, 1)
    assert (row["reported_bytes"], row["size_bytes"]) == (65536, 262144)
    assert (row["time_us"], row["time_min_us"], row["time_max_us"]) == (
        449.28,
        324.36,
        564.09,
    )
    assert (row["dtype"], row["redop"], row["algbw_gbps"]) == ("float32", "sum", None)


def test_point_to_point_bandwidth_in_gbps() -> None:
    rows = _parse(FIXTURES / "imb" / "imb_pingpong_sendrecv_np2.log").measurements
    # Line 56: PingPong `262144  100  8.88  29531.17`.
    row = next(r for r in rows.to_pylist() if r["line"] == 56)
    assert row["collective"] == "pingpong"
    assert row["time_us"] == 8.88
    assert row["time_min_us"] is None
    assert row["algbw_gbps"] == pytest.approx(29.53117)
    assert row["busbw_gbps"] is None


def test_barrier_has_no_size() -> None:
    rows = _parse(FIXTURES / "imb" / "imb_unknown_benchmark_np2.log").measurements
    barrier = [r for r in rows.to_pylist() if r["collective"] == "barrier"]
    assert [(b["line"], b["size_bytes"], b["time_us"]) for b in barrier] == [
        (584, 0, 0.58)
    ]


def test_errors() -> None:
    bad = _parse(FIXTURES / "imb" / "imb_allreduce_bad_option_np2.log").runs
    errors = bad.column("errors").to_pylist()[0]
    assert errors is not None
    assert errors[:2] == [
        "line 1: ERROR: Parse error on option: -msglog",
        'line 2: Try "IMB-MPI1 -help" for usage information',
    ]
    unknown = _parse(FIXTURES / "imb" / "imb_unknown_benchmark_np2.log").runs
    assert unknown.column("errors").to_pylist() == [
        ["line 47: Invalid benchmark name allreducee"]
    ]


LIVE = "imb_live_impi-rt-2021.18"


def _live_fixture(layout: str) -> ncclparse.ParseResult:
    return _parse(FIXTURES / "imb" / f"{LIVE}_{layout}.log")


def _row_at(result: ncclparse.ParseResult, line: int) -> dict[str, Any]:
    return next(r for r in result.measurements.to_pylist() if r["line"] == line)


def test_multi0_reads_group_size_and_collective() -> None:
    """`-multi 0`: Multi-Allreduce of 2 groups of 2 is all_reduce on 2 ranks, float."""
    result = _live_fixture("multi0_allreduce_bcast_np4")
    runs = result.runs.to_pylist()
    assert [(r["nranks"], dict(r["params"]).get("groups")) for r in runs] == [
        (2, "2"),
        (4, None),
    ]
    # Line 42: Multi-Allreduce `8  10  1.09  11.63  6.32`.
    row = _row_at(result, 42)
    assert (row["collective"], row["nranks"], row["run"]) == ("all_reduce", 2, 0)
    assert (row["dtype"], row["redop"], row["size_bytes"]) == ("float32", "sum", 8)
    assert (row["time_us"], row["time_min_us"], row["time_max_us"]) == (
        6.32,
        1.09,
        11.63,
    )
    assert runs[0]["warnings"] is None or runs[0]["warnings"] == []


def test_multi1_gives_one_run_per_group() -> None:
    result = _live_fixture("multi1_allreduce_pingpong_np4")
    runs = result.runs.to_pylist()
    assert [
        (r["nranks"], dict(r["params"]).get("groups"), dict(r["params"]).get("group"))
        for r in runs
    ] == [(2, "2", "0"), (2, "2", "1"), (4, None, None)]
    # Lines 44-45: `0  4  10  6.86  6.93  6.89` and `1  4  10  6.38  6.44  6.41`.
    first, second = _row_at(result, 44), _row_at(result, 45)
    assert (first["run"], first["collective"], first["time_us"]) == (
        0,
        "all_reduce",
        6.89,
    )
    assert (second["run"], second["size_bytes"], second["time_us"]) == (1, 4, 6.41)
    assert (first["dtype"], second["nranks"]) == ("float32", 2)


def test_rma_modes_are_separate_runs() -> None:
    result = _live_fixture("rma_np2")
    runs = result.runs.to_pylist()
    assert [dict(r["params"]).get("MODE") for r in runs] == [
        "NON-AGGREGATE",
        "AGGREGATE",
        None,
    ]
    # Unidir_put, 1 byte: line 59 NON-AGGREGATE `1.41`, line 72 AGGREGATE `0.48`.
    assert (_row_at(result, 59)["run"], _row_at(result, 59)["time_us"]) == (0, 1.41)
    assert (_row_at(result, 72)["run"], _row_at(result, 72)["time_us"]) == (1, 0.48)
    assert _row_at(result, 72)["algbw_gbps"] == pytest.approx(0.00207)
    # Accumulate reduces IMB's reduction type; Compare_and_swap uses MPI_INT.
    accumulate, swap = _row_at(result, 259), _row_at(result, 322)
    assert (accumulate["dtype"], accumulate["redop"]) == ("float32", "sum")
    assert (swap["collective"], swap["dtype"], swap["redop"]) == (
        "compare_and_swap",
        "int32",
        None,
    )
    # Truly_passive_put: time_us is t_pure; t_ovrl is named as not kept.
    passive = _row_at(result, 340)
    assert (passive["collective"], passive["time_us"], passive["run"]) == (
        "truly_passive_put",
        1.08,
        2,
    )
    assert any("t_ovrl[usec]" in w for w in runs[2]["warnings"])


def test_nbc_keeps_t_pure_and_names_the_rest() -> None:
    result = _live_fixture("nbc_np2")
    run = result.runs.to_pylist()[0]
    assert run["collectives"][:2] == ["ibcast", "iallgather"]
    assert run["warnings"] == [
        "lines 46, 56, 66, 76, 86 and 8 more: IMB columns not kept (no schema "
        "column): t_ovrl[usec], t_CPU[usec], overlap[%] (time_us is t_pure[usec])"
    ]


def test_uniband_without_time_is_refused_and_named() -> None:
    """Uniband/Biband print Mbytes/sec and Msg/sec only: no time_us to give."""
    result = _live_fixture("uniband_biband_np2")
    assert result.measurements.num_rows == 0
    run = result.runs.to_pylist()[0]
    assert run["collectives"] == ["uniband", "biband"]
    assert run["warnings"] == [
        *(
            f"lines {lines}: {name} table has no time column (IMB prints Mbytes/sec "
            "and Msg/sec only; time_us cannot be null): row not read"
            for lines, name in (
                ("36, 37, 38, 39, 40", "Uniband"),
                ("47, 48, 49, 50, 51", "Biband"),
            )
        ),
        # Its footer is there, but a run that read nothing is never complete.
        "line 55: the run ended with its footer but no measurement row was read: "
        "truncated, not complete",
    ]
    assert run["status"] == "truncated"


def test_p2p_invalid_benchmarks_are_warned() -> None:
    run = _live_fixture("p2p_np2").runs.to_pylist()[0]
    assert (
        "line 76: IMB: !! Benchmark Stencil2D is invalid for 2 processes !!"
        in (run["warnings"])
    )


def test_mt_threads_dtype_and_status() -> None:
    result = _live_fixture("mt_np2")
    run = result.runs.to_pylist()[0]
    assert (run["status"], run["nranks"], dict(run["params"])) == (
        "complete",
        2,
        {"threads": "1"},
    )
    assert any("no end-of-run line" in w for w in run["warnings"])
    assert any("int32 assumed" in w for w in run["warnings"])
    row = _row_at(result, 85)  # AllReduceMT `16  10  0.46  0.55  0.50`
    assert (row["collective"], row["dtype"], row["redop"]) == (
        "all_reduce",
        "int32",
        "sum",
    )
    assert (row["size_bytes"], row["time_us"]) == (16, 0.50)
    # Cut inside a table: no longer complete.
    cut = "\n".join(
        (FIXTURES / "imb" / f"{LIVE}_mt_np2.log").read_text().split("\n")[:12]
    )
    assert ncclparse.parse(cut).runs.column("status").to_pylist() == ["truncated"]


DCHECK = FIXTURES / "imb" / "imb_live_src-IMB-v2021.11_dcheck_np2.log"


def test_check_build_defects_fail_the_run_beyond_imbs_tolerance() -> None:
    """A real -DCHECK build (SOURCES.md): a `defects` column after the times."""
    clean = ncclparse.parse(DCHECK)
    assert clean.measurements.column("time_us").to_pylist() == [
        1.68, 2.72, 3.88, 2.57, 1.81, 0.04, 0.7, 4.1,
    ]  # fmt: skip
    assert clean.runs.column("warnings").to_pylist() == [[]]
    assert clean.runs.column("errors").to_pylist() == [[]]
    # Derived: one defect above IMB's TOL (1e-2, which fails the benchmark in IMB)
    # and one within it, on the Allreduce rows of lines 48 and 49.
    lines = DCHECK.read_text().splitlines(keepends=True)
    lines[47] = lines[47].replace("0.70         0.00", "0.70         0.50")
    lines[48] = lines[48].replace("4.10         0.00", "4.10         0.01")
    derived = ncclparse.parse("".join(lines), name="derived.log")
    assert derived.measurements.num_rows == 8  # the rows are still read
    assert derived.runs.column("errors").to_pylist() == [
        ["line 48: IMB data check failed: defects 0.5 above IMB's tolerance 0.01"]
    ]
    assert derived.runs.column("warnings").to_pylist() == [
        ["line 49: IMB data check: defects 0.01 (within IMB's tolerance 0.01)"]
    ]


def _imb_environment(binary: str) -> dict[str, str]:
    """The environment the impi-rt wheel needs, found from where IMB-MPI1 lives."""
    prefix = Path(binary).resolve().parent.parent
    env = dict(os.environ)
    libs = [prefix / "lib", prefix / "lib" / "libfabric"]
    env["PATH"] = f"{prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["I_MPI_ROOT"] = str(prefix)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        [str(p) for p in libs if p.is_dir()] + [env.get("LD_LIBRARY_PATH", "")]
    )
    for provider in (prefix / "lib" / "libfabric" / "prov", prefix / "lib" / "prov"):
        if provider.is_dir():
            env["FI_PROVIDER_PATH"] = str(provider)
            break
    env["I_MPI_FABRICS"] = "shm"  # one host: no network provider needed
    return env


def test_live_imb_run_parses_end_to_end(tmp_path: Path) -> None:
    binary = shutil.which("IMB-MPI1")
    if binary is None:
        pytest.skip("IMB-MPI1 is not on PATH (pip install impi-rt provides it)")
    env = _imb_environment(binary)
    mpirun = shutil.which("mpirun", path=env["PATH"])
    if mpirun is None:
        pytest.skip("IMB-MPI1 found but no mpirun beside it")
    args = ["Allreduce", "Bcast", "-msglog", "0:10", "-iter", "20"]
    done = subprocess.run(
        [mpirun, "-n", "2", binary, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    log = tmp_path / "live.log"
    log.write_text(done.stdout + done.stderr)
    assert done.returncode == 0, log.read_text()[-2000:]
    result = ncclparse.parse(log)
    run = result.runs.to_pylist()[0]
    assert (run["tool"], run["status"], run["nranks"]) == ("imb", "complete", 2)
    assert run["collectives"] == ["all_reduce", "broadcast"]
    rows = result.measurements.to_pylist()
    # Allreduce on MPI_FLOAT skips 1 and 2 bytes: 0, 4 ... 1024; Bcast 0, 1 ... 1024.
    sizes = {
        name: [r["size_bytes"] for r in rows if r["collective"] == name]
        for name in ("all_reduce", "broadcast")
    }
    assert sizes == {
        "all_reduce": [0] + [2**k for k in range(2, 11)],
        "broadcast": [0] + [2**k for k in range(11)],
    }
    assert all(r["time_us"] >= 0 and r["repetitions"] > 0 for r in rows)
    accounting = result.accounting[str(log)]
    assert sum(accounting.values()) == len(log.read_text().splitlines())
    assert accounting["warned"] == 0


# Every layout the parser reads, from the impi-rt binaries (small and fast: 4-rank
# cases are oversubscribed on one host). (binary, ranks, arguments, expected runs as
# (nranks, params that set the run apart), collectives of the first run).
LIVE_LAYOUTS: dict[
    str, tuple[str, int, list[str], list[tuple[int, dict[str, str]]], list[str]]
] = {
    "multi0": (
        "IMB-MPI1",
        4,
        ["Allreduce", "-multi", "0", "-npmin", "2", "-msglog", "2:3", "-iter", "10"],
        [(2, {"groups": "2"}), (4, {})],
        ["all_reduce"],
    ),
    "multi1": (
        "IMB-MPI1",
        4,
        ["Allreduce", "-multi", "1", "-npmin", "2", "-msglog", "2:3", "-iter", "10"],
        [
            (2, {"groups": "2", "group": "0"}),
            (2, {"groups": "2", "group": "1"}),
            (4, {}),
        ],
        ["all_reduce"],
    ),
    "npmin": (
        "IMB-MPI1",
        4,
        ["Bcast", "-npmin", "2", "-msglog", "0:2", "-iter", "10"],
        [(2, {}), (4, {})],
        ["broadcast"],
    ),
    "uniband": (
        "IMB-MPI1",
        2,
        ["PingPong", "Uniband", "Biband", "-msglog", "0:2", "-iter", "10"],
        [(2, {})],
        ["pingpong", "uniband", "biband"],
    ),
    "nbc": (
        "IMB-NBC",
        2,
        ["Iallreduce", "Ibarrier", "Iallreduce_pure", "-msglog", "2:3", "-iter", "10"],
        [(2, {})],
        ["iallreduce", "ibarrier", "iallreduce_pure"],
    ),
    "rma": (
        "IMB-RMA",
        2,
        ["Unidir_put", "Truly_passive_put", "-msglog", "0:2", "-iter", "10"],
        [(2, {"MODE": "NON-AGGREGATE"}), (2, {"MODE": "AGGREGATE"}), (2, {})],
        ["unidir_put"],
    ),
    "p2p": (
        "IMB-P2P",
        2,
        ["PingPong", "Unirandom", "-msglog", "0:2", "-iter", "10"],
        [(2, {})],
        ["pingpong", "unirandom"],
    ),
    "mt": (
        "IMB-MT",
        2,
        ["PingPongMT", "AllReduceMT", "-count", "1,4", "-repeat", "10"],
        [(2, {"threads": "1"})],
        ["pingpong", "all_reduce"],
    ),
}
_RUN_PARAMS = ("groups", "group", "threads", "MODE")


@pytest.mark.parametrize("layout", sorted(LIVE_LAYOUTS))
def test_live_imb_layouts(layout: str, tmp_path: Path) -> None:
    name, ranks, args, want_runs, want_collectives = LIVE_LAYOUTS[layout]
    binary = shutil.which(name)
    if binary is None:
        pytest.skip(f"{name} is not on PATH (pip install impi-rt provides it)")
    env = _imb_environment(binary)
    mpirun = shutil.which("mpirun", path=env["PATH"])
    if mpirun is None:
        pytest.skip(f"{name} found but no mpirun beside it")
    done = subprocess.run(
        [mpirun, "-n", str(ranks), binary, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = done.stdout + done.stderr
    if "error while loading shared libraries" in output:  # IMB-MT wants libiomp5
        pytest.skip(f"{name} cannot load its libraries: {output.strip()[:200]}")
    log = tmp_path / f"{layout}.log"
    log.write_text(output)
    assert done.returncode == 0, output[-2000:]
    result = ncclparse.parse(log)
    runs = result.runs.to_pylist()
    assert [
        (r["nranks"], {k: v for k, v in r["params"] if k in _RUN_PARAMS}) for r in runs
    ] == want_runs
    assert {r["status"] for r in runs} == {"complete"}
    assert runs[0]["collectives"] == want_collectives
    assert all(r["rows"] > 0 for r in runs)
    rows = result.measurements.to_pylist()
    assert all(r["time_us"] >= 0 and r["nranks"] for r in rows)
    accounting = result.accounting[str(log)]
    assert sum(accounting.values()) == len(output.splitlines())
    # Uniband and Biband rows (sizes 0, 1, 2, 4) print no time: warned, not read.
    assert accounting["warned"] == (8 if layout == "uniband" else 0)


SRC = "imb_live_src-IMB-v2021.11"  # IMB-EXT and IMB-IO built from source


def _src_fixture(layout: str) -> ncclparse.ParseResult:
    return _parse(FIXTURES / "imb" / f"{SRC}_{layout}.log")


def _at(result: ncclparse.ParseResult, line: int, *keys: str) -> tuple[Any, ...]:
    row = _row_at(result, line)
    return tuple(row[k] for k in keys)


def test_ext_window_and_modes_are_separate_runs() -> None:
    result = _src_fixture("ext_np2")
    runs = result.runs.to_pylist()
    assert [
        (r["nranks"], r["rows"], dict(r["params"]).get("MODE"), r["status"])
        for r in runs
    ] == [
        (2, 3, None, "complete"),
        (2, 15, "AGGREGATE", "complete"),
        (2, 15, "NON-AGGREGATE", "complete"),
    ]
    assert runs[0]["collectives"] == ["window"]
    one_sided = ["unidir_get", "unidir_put", "bidir_get", "bidir_put", "accumulate"]
    assert runs[1]["collectives"] == runs[2]["collectives"] == one_sided
    assert runs[0]["tool_version"] == "2021.11"
    assert runs[0]["command"] == "./IMB-EXT -msglog 0:3 -iter 10"
    assert not runs[0]["warnings"]
    keys = ("run", "collective", "size_bytes", "time_us", "time_min_us", "time_max_us")
    # Line 40: Window `0  10  328.99  329.10  329.05` (t_min, t_max, t_avg).
    assert _at(result, 40, *keys) == (0, "window", 0, 329.05, 328.99, 329.10)
    # Unidir_Get, 8 bytes: line 54 AGGREGATE `0.50  15.91`, line 66 NON-AGGREGATE
    # `1.05  7.64`.
    assert _at(result, 54, *keys) == (1, "unidir_get", 8, 0.50, None, None)
    assert _at(result, 66, *keys) == (2, "unidir_get", 8, 1.05, None, None)
    assert _row_at(result, 54)["algbw_gbps"] == pytest.approx(0.01591)
    assert _row_at(result, 66)["algbw_gbps"] == pytest.approx(0.00764)
    # Accumulate reduces MPI_FLOAT with MPI_SUM: lines 150 and 162, 8 bytes.
    assert _at(result, 150, *keys, "dtype", "redop") == (
        *(1, "accumulate", 8, 0.46, 0.46, 0.46),
        *("float32", "sum"),
    )
    assert _at(result, 162, *keys) == (2, "accumulate", 8, 2.12, 2.11, 2.12)
    assert _row_at(result, 54)["dtype"] == "uint8"


def test_io_modes_process_counts_and_columns() -> None:
    result = _src_fixture("io_np2")
    runs = result.runs.to_pylist()
    # 1-process sections (`( 1 additional process waiting in MPI_Barrier)`) are runs
    # of 1 rank; Open_Close prints no MODE.
    assert [
        (r["nranks"], r["rows"], dict(r["params"]).get("MODE"), r["status"])
        for r in runs
    ] == [
        (1, 180, "AGGREGATE", "complete"),
        (1, 45, "NON-AGGREGATE", "complete"),
        (2, 140, "AGGREGATE", "complete"),
        (2, 35, "NON-AGGREGATE", "complete"),
        (1, 1, None, "complete"),
        (2, 1, None, "complete"),
    ]
    assert runs[0]["tool_version"] == "2021.11"  # title line `MPI-IO partn#-----`
    assert runs[1]["collectives"][:2] == ["s_write_indv", "s_write_expl"]
    assert runs[4]["collectives"] == runs[5]["collectives"] == ["open_close"]
    assert runs[0]["warnings"] == [
        "lines 106, 151, 224, 238, 311 and 27 more: IMB columns not kept (no schema "
        "column): t_ovrl[usec], t_CPU[usec], overlap[%] (time_us is t_pure[usec])"
    ]
    keys = ("run", "collective", "nranks", "size_bytes", "time_us")
    # S_Write_Indv, 8 bytes: line 81 AGGREGATE `13.62  0.59`, 96 NON-AGGREGATE.
    assert _at(result, 81, *keys, "algbw_gbps") == (
        *(0, "s_write_indv", 1, 8, 13.62),
        pytest.approx(0.00059),
    )
    assert _at(result, 96, *keys) == (1, "s_write_indv", 1, 8, 152.68)
    # S_IWrite_Indv line 108: `1  10  11171.99  27.13  18330.83  100.00`: t_pure.
    assert _at(result, 108, *keys, "time_min_us") == (
        *(0, "s_iwrite_indv", 1, 1, 27.13),
        None,
    )
    # P_Write_Indv on 2 processes, 1 byte: line 197 AGGREGATE, 211 NON-AGGREGATE.
    assert _at(result, 197, *keys, "time_min_us", "time_max_us") == (
        *(2, "p_write_indv", 2, 1, 1356.43),
        *(1129.82, 1583.04),
    )
    assert _at(result, 211, *keys) == (3, "p_write_indv", 2, 1, 8409.18)
    # C_Read_Expl on 2 processes, 8 bytes: `2.59  2.64  2.61  3.03`.
    assert _at(result, 1202, *keys, "algbw_gbps", "dtype") == (
        *(2, "c_read_expl", 2, 8, 2.61),
        *(pytest.approx(0.00303), "uint8"),
    )
    # Open_Close prints no #bytes: `10  14.53  14.53  14.53` and `... 573.99`.
    assert _at(result, 1239, *keys) == (4, "open_close", 1, 0, 14.53)
    assert _at(result, 1246, *keys) == (5, "open_close", 2, 0, 573.99)


@pytest.mark.parametrize(
    ("name", "sizes", "last"),
    [
        # Open MPI --timestamp-output: `Sun Nov 15 22:45:41 2020[1,0]<stdout>:`
        ("imb_gh-ucx-5906_alltoallv_np224_ompi_timestamp_tag_fragment",
         [0, 1, 2, 4, 8, 16, 32, 64], 850.94),
        # Jenkins Timestamper: `00:55:22  `
        ("imb_gh-libfabric-9772_allreduce_np4_jenkins_timestamp_fragment",
         [0, 4, 8, 16, 32, 64], 4.43),
    ],
)  # fmt: skip
def test_timestamp_prefixes_are_stripped(
    name: str, sizes: list[int], last: float
) -> None:
    # Both files were refused as unrecognised: no row read (found by a review).
    rows = _parse(FIXTURES / "imb" / f"{name}.log").measurements.to_pylist()
    assert [r["reported_bytes"] for r in rows] == sizes
    assert rows[-1]["time_us"] == last


def test_imb_before_2018_rates_are_mebibytes() -> None:
    # IMB 4.0: 4194304 B / 1082.94 us = 3873.1 MB/s, printed 3693.63 (2^20 B/s).
    # IMB 2018 on divides by 10^6: their rates are kept as they are (below).
    name = "imb_azure-docs_pingpong_v4.0_mebibyte_rates_np2.log"
    result = _parse(FIXTURES / "imb" / name)
    last = result.measurements.to_pylist()[-1]
    assert last["time_us"] == 1082.94
    assert last["algbw_gbps"] == pytest.approx(3693.63 * 1.048576 / 1000, rel=1e-12)
    assert last["algbw_gbps"] == pytest.approx(4194304 / 1082.94 / 1000, rel=2e-4)
    assert result.runs.to_pylist()[0]["warnings"][0] == (
        "line 35: Mbytes/sec printed in 2^20 bytes/s (IMB before 2018: X/1.048576/t, "
        "as the rates and times show): algbw_gbps converted to 10^9 bytes/s"
    )
    decimal = _parse(FIXTURES / "imb" / "imb_pingpong_sendrecv_np2.log")
    assert not any("2^20" in w for r in decimal.runs.to_pylist() for w in r["warnings"])


def test_a_data_check_error_fails_the_run() -> None:
    # `1: Error Ireduce_scatter_pure,size = 4`: a -DCHECK build found wrong data
    # (IMB_chk_diff.c). It was an unrecognised line of a truncated run.
    name = "imb_gh-imb-51_nbc_ireduce_scatter_check_error_np2_fragment.log"
    [run] = _parse(FIXTURES / "imb" / name).runs.to_pylist()
    assert (run["status"], run["errors"]) == (
        "failed",
        ["line 35: Error Ireduce_scatter_pure,size = 4"],
    )


def test_a_real_dcheck_failure_reads_its_table_and_names_every_line() -> None:
    """A -DCHECK build's `#- #processes = 16` left the table unread (no process
    count); the buffers its data check compared, IMB's abort line and MPICH's
    MPI_Abort line were "unrecognised" warnings instead of the run's errors."""
    name = "imb_gh-imb-22_reduce_scatter_check_error_np16_fragment.log"
    result = _parse(FIXTURES / "imb" / name)
    [run] = result.runs.to_pylist()
    assert (run["status"], run["nranks"], run["collectives"]) == (
        "failed",
        16,
        ["reduce_scatter"],
    )
    assert run["errors"] == [
        "line 7: Error Reduce_scatter,size = 4,sample #0",
        "line 8: Process 15: Got invalid buffer:",
        "line 9: Buffer entry: 13.600000",
        "line 10: pos: 0",
        "line 11: Process 15: Expected    buffer:",
        "line 12: Buffer entry: 253.600006",
        "line 14: Application error code 1 occurred",
        "line 15: application called MPI_Abort(MPI_COMM_WORLD, 16) - process 15",
    ]
    assert run["warnings"] == []
    assert [
        (r["line"], r["size_bytes"], r["time_us"], r["nranks"])
        for r in result.measurements.to_pylist()
    ] == [(6, 0, 0.19, 16), (13, 64, 2.41, 16)]


HUAWEI = FIXTURES / "imb" / "imb_huawei-docs_pingpong_v4.1_indented4_np2.log"


def test_a_paste_indented_as_a_whole_is_read() -> None:
    """Every line four blanks in (a Markdown list item's code block): as printed."""
    result = _parse(HUAWEI)
    (run,) = result.runs.to_pylist()
    assert (run["status"], run["nranks"], run["rows"]) == ("complete", 2, 24)
    assert run["collectives"] == ["pingpong"]
    assert run["tool_version"] == "4.1"
    assert run["command"] == "/usr/mpi/gcc/openmpi-3.0.0rc6/tests/imb/IMB-MPI1 PingPong"
    assert run["params"][-3:] == [
        ("MPI_Datatype", "MPI_BYTE"),
        ("MPI_Datatype for reductions", "MPI_FLOAT"),
        ("MPI_Op", "MPI_SUM"),
    ]
    assert not [w for w in run["warnings"] if "unrecognised" in w]


def _indented(text: str, prefix: str, *, every: int = 1) -> str:
    """``text`` with ``prefix`` before every ``every``-th line IMB starts with #."""
    lines = text.splitlines(keepends=True)
    hashed = [i for i, line in enumerate(lines) if line.startswith("#")]
    for i in hashed[::every]:
        lines[i] = prefix + lines[i]
    return "".join(lines)


def _table(result: ncclparse.ParseResult) -> list[tuple[Any, ...]]:
    return [
        (r["line"], r["collective"], r["size_bytes"], r["time_us"], r["nranks"])
        for r in result.measurements.to_pylist()
    ]


@pytest.mark.parametrize(
    ("prefix", "every"), [("    ", 1), ("\t", 1), ("  ", 2), ("   ", 3)]
)
def test_indented_section_lines_keep_their_rows(prefix: str, every: int) -> None:
    """Only IMB's own `#` lines indented (rows as IMB printed them), all of them or
    some (a mixed paste): the same runs and rows as the log itself."""
    path = FIXTURES / "imb" / "imb_bcast_reduce_rs_np4.log"
    text = path.read_text()
    want = _parse(path)
    got = ncclparse.parse(_indented(text, prefix, every=every), name=path.name)
    assert _table(got) == _table(want)
    assert len(_table(got)) == 132
    status = [(r["status"], r["nranks"]) for r in got.runs.to_pylist()]
    assert status == [(r["status"], r["nranks"]) for r in want.runs.to_pylist()]
    assert got.accounting[path.name] == want.accounting[path.name]


def test_open_mpi_fatal_error_fails_the_run() -> None:
    path = FIXTURES / "imb" / "imb_ompi-users-2187_ext_v3.0_win_free_fatal_np2.log"
    (run,) = _parse(path).runs.to_pylist()
    assert (run["status"], run["rows"]) == ("failed", 0)
    block = [
        "*** An error occurred in MPI_Win_free",
        "*** on win",
        "*** MPI_ERR_RMA_SYNC: error while executing rma sync",
        "*** MPI_ERRORS_ARE_FATAL (goodbye)",
    ]
    assert run["errors"] == [
        *(f"line {28 + i}: [traszkan.ds7:10583] {t}" for i, t in enumerate(block)),
        *(f"line {32 + i}: [traszkan.ds7:10584] {t}" for i, t in enumerate(block)),
        "line 36: 1 additional process aborted (not shown)",
    ]


def _dcheck_excerpt(*, processes: bool) -> str:
    """The PingPong section of the real -DCHECK log, opened the way some -DCHECK
    builds print it (`#- Benchmarking`), with no title or preamble before it."""
    lines = (FIXTURES / "imb" / "imb_live_src-IMB-v2021.11_dcheck_np2.log").read_text()
    section = lines.splitlines(keepends=True)[30:42]
    assert section[1] == "# Benchmarking PingPong \n"
    section[1] = "#- Benchmarking PingPong \n"
    return "".join(s for s in section if processes or "#processes" not in s)


def test_a_dcheck_excerpt_without_title_is_imb_output() -> None:
    result = ncclparse.parse(_dcheck_excerpt(processes=True), name="x")
    (run,) = result.runs.to_pylist()
    assert (run["tool"], run["nranks"], run["rows"]) == ("imb", 2, 5)
    assert run["collectives"] == ["pingpong"]
    assert [r["time_us"] for r in result.measurements.to_pylist()] == [
        1.68,
        2.72,
        3.88,
        2.57,
        1.81,
    ]


def test_a_dcheck_excerpt_without_process_count_reads_no_row() -> None:
    # Some collectives' sizes depend on the process count: no row without it.
    result = ncclparse.parse(_dcheck_excerpt(processes=False), name="x")
    (run,) = result.runs.to_pylist()
    assert (run["tool"], run["nranks"], run["rows"], run["status"]) == (
        "imb",
        None,
        0,
        "truncated",
    )
    assert run["warnings"][0] == (
        "lines 5, 6, 7, 8, 9: PingPong table has no process count: not read"
    )
