"""nccl-tests / rccl-tests text logs against golden outputs read off the real logs.

The expectations in fixtures/expected/nccl and fixtures/expected/nccl_unseen were written
by reading each log (see their READMEs), independently of the parser; the `nccl_unseen`
logs were collected later to test the parser on logs its author had never seen. An empty
list of runs means the input is a look-alike the parser must reject. Where the parser
deliberately differs from the reading, the difference and its reason are in DEVIATIONS.
"""

from __future__ import annotations

import csv
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest

import ncclparse
from tests import _derive as derive
from tests.conftest import FIXTURES

ALL_LOGS = sorted((FIXTURES / "nccl").glob("*.log")) + sorted(
    (FIXTURES / "nccl_unseen").glob("*.log")
)


def _expected(path: Path, suffix: str) -> Path:
    case = path.name.removesuffix(".log")
    return FIXTURES / "expected" / path.parent.name / f"{case}{suffix}"


def _is_look_alike(path: Path) -> bool:
    runs: object = json.loads(_expected(path, ".runs.json").read_text())
    return runs == []


LOGS = [p for p in ALL_LOGS if not _is_look_alike(p)]
LOOK_ALIKES = [p for p in ALL_LOGS if _is_look_alike(p)]
RUN_KEYS = (
    "status",
    "collectives",
    "nranks",
    "nnodes",
    "rows",
    "first_line",
    "last_line",
    "avg_busbw_gbps",
    "oob_values",
    "tool",
    "tool_version",
    "library_version",
)
# (file stem, run index, key) -> (what the parser gives, why it differs from the reading)
DEVIATIONS: dict[tuple[str, int, str], tuple[Any, str]] = {
    ("nccltests-322_allreduce_midrun_nccl_failure_multihost_truncated", 0, "nranks"): (
        None,
        "busbw/algbw fits every n from about 1011 to 1035; the reading's 1024 is a "
        "plausible guess, and the parser does not guess",
    ),
    # Two interleaved copies of one non-MPI run: the reading gives each copy the span
    # of its own lines, the parser the span of the lines they were read from.
    (
        "nccltests-107_allreduce_v100_nonmpi_under_mpirun_duplicated_output_truncated",
        0,
        "last_line",
    ): (16, "interleaved copies share their span"),
    (
        "nccltests-107_allreduce_v100_nonmpi_under_mpirun_duplicated_output_truncated",
        1,
        "first_line",
    ): (1, "interleaved copies share their span"),
    (
        "nccltests-182_allreduce_2gpu_two_processes_two_footers_fragment",
        0,
        "last_line",
    ): (8, "the empty line after a footer belongs to no run"),
    (
        "repo-keitaw-p5_allreduce_16rank_2node_h100_efa_tag_output_midrow_complete",
        0,
        "last_line",
    ): (
        2950,
        "the empty line after a footer belongs to no run, nor do other ranks' "
        "NCCL lines ([1,5]<stdout>: ...) before it",
    ),
    (
        "repo-sparticlesteve-perlmutter_allreduce_8rank_2node_a100_libfabric_debug_"
        "complete",
        0,
        "last_line",
    ): (3340, "the empty line after a footer belongs to no run"),
}


def _case(path: Path) -> str:
    return path.name.removesuffix(".log")


@pytest.fixture(scope="module", params=LOGS, ids=_case)
def parsed(request: pytest.FixtureRequest) -> tuple[Path, ncclparse.ParseResult]:
    path: Path = request.param
    return path, ncclparse.parse(path, name=path.name)


@pytest.mark.parametrize("path", LOOK_ALIKES, ids=_case)
def test_look_alikes_are_rejected(path: Path) -> None:
    with pytest.raises(ncclparse.UnknownLogFormatError) as caught:
        ncclparse.parse(path)
    assert str(caught.value).startswith(f"{path}:1: not a recognised benchmark log")


def test_runs_match_the_reading(parsed: tuple[Path, ncclparse.ParseResult]) -> None:
    path, result = parsed
    case = _case(path)
    expected = json.loads(_expected(path, ".runs.json").read_text())
    runs = result.runs.to_pylist()
    assert len(runs) == len(expected)
    for index, (run, want) in enumerate(zip(runs, expected, strict=True)):
        for key in RUN_KEYS:
            value = want[key]
            if (case, index, key) in DEVIATIONS:
                value = DEVIATIONS[case, index, key][0]
            assert run[key] == value, f"run {index} {key}"
        assert len(run["errors"]) == want["errors"]


def test_rows_match_the_reading(parsed: tuple[Path, ncclparse.ParseResult]) -> None:
    path, result = parsed
    with _expected(path, ".rows.csv").open() as handle:
        expected = list(csv.DictReader(handle))
    rows = result.measurements.to_pylist()
    assert len(rows) == len(expected)
    for row, want in zip(rows, expected, strict=True):
        assert row["line"] == int(want["line"])
        assert row["placement"] == want["placement"]
        assert row["size_bytes"] == row["reported_bytes"] == int(want["size_bytes"])
        assert row["count"] == int(want["count"])
        assert row["dtype"] == want["dtype"]
        assert row["redop"] == (want["redop"] or None)
        assert row["root"] == (int(want["root"]) if want["root"] else None)
        for key in ("time_us", "algbw_gbps", "busbw_gbps", "wrong"):
            expected_value = float(want[key]) if want[key] else None
            if expected_value is None:
                assert row[key] is None, key
            else:
                assert math.isclose(row[key], expected_value, rel_tol=1e-12), key


def test_every_line_is_accounted_for(
    parsed: tuple[Path, ncclparse.ParseResult],
) -> None:
    path, result = parsed
    lines = len(path.read_bytes().splitlines())
    (accounting,) = result.accounting.values()
    assert sum(accounting.values()) == lines
    rows_lines = {r["line"] for r in result.measurements.to_pylist()}
    assert accounting["measurement"] >= len(rows_lines)
    warned = accounting["warned"]
    warnings = [w for run in result.runs.to_pylist() for w in run["warnings"]]
    named = _lines_named(warnings)
    assert len(named) >= warned


def _lines_named(warnings: list[str]) -> set[int]:
    named: set[int] = set()
    for warning in warnings:
        where = warning.split(":", 1)[0].removeprefix("lines ").removeprefix("line ")
        # A repeated warning names its first lines: `lines 3, 7-9 and 4 more`.
        for place in where.split(" and ", 1)[0].split(", "):
            first, _, last = place.partition("-")
            named.update(range(int(first), int(last or first) + 1))
    return named


def test_text_stream_outside_the_io_classes_is_read_as_text() -> None:
    """Regression: a text-mode SpooledTemporaryFile is no io.TextIOBase; it was wrapped
    as a binary stream and failed with AttributeError (no read1)."""
    expected = ncclparse.parse(derive.HEALTHY, name="h.log")
    with tempfile.SpooledTemporaryFile(mode="w+", newline="") as text:
        text.write(derive.healthy())
        text.seek(0)
        found = ncclparse.parse(text, name="h.log")
    assert found.measurements.equals(expected.measurements)
    assert found.runs.equals(expected.runs)
    with tempfile.SpooledTemporaryFile(mode="w+b") as binary:  # still read as bytes
        binary.write(derive.HEALTHY.read_bytes())
        binary.seek(0)
        found = ncclparse.parse(binary, name="h.log")
    assert found.measurements.equals(expected.measurements)


def test_a_row_cut_after_a_complete_run_does_not_extend_it() -> None:
    # Found by the cut-at-any-byte property: the second process's first row, cut at
    # byte 645, must not stretch the first process's complete run (lines 1-8).
    path = FIXTURES / "nccl_unseen"
    path /= "nccltests-182_allreduce_2gpu_two_processes_two_footers_fragment.log"
    result = ncclparse.parse(path.read_bytes()[:645].decode())
    runs = result.runs.to_pylist()
    assert [
        (r["status"], r["rows"], r["first_line"], r["last_line"]) for r in runs
    ] == [("complete", 6, 1, 8)]
    assert "line 10: last line cut off by the end of input" in runs[0]["warnings"]


def test_a_cut_line_never_stretches_a_complete_run() -> None:
    # Found by the long cut-at-any-byte run: cut to `========`, the user's separator
    # reads as a banner rule (noise); the run still ends at its `concluded` line.
    path = FIXTURES / "nccl_unseen"
    path /= (
        "rccl-2075b_broadcast_rccl_strixhalo_footer_asterisks_concluded_separator_"
        "fragment.log"
    )
    result = ncclparse.parse(path.read_bytes()[:1371].decode())
    runs = result.runs.to_pylist()
    assert [
        (r["status"], r["rows"], r["first_line"], r["last_line"]) for r in runs
    ] == [("complete", 20, 1, 15)]
