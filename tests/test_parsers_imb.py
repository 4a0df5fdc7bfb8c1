"""IMB-MPI1 parser on real logs (tests/fixtures/imb) and on a live run when possible.

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
    assert accounting["warned"] == 0


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
        (2, 1, 219),
        (4, 60, 219),
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
