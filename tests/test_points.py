"""Points for judging: repeated measurements merged only when rows are too many."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import ncclparse
from ncclparse.cli.app import cli
from ncclparse.inputs import points
from tests.conftest import string_lists
from tests.test_memory import FOOTER, HEADER


def _row(size: int, time: float, busbw: float) -> str:
    algbw = size / time / 1e3
    return (
        f"{size:>12} {size // 4:>12}     float     sum      -1 {time:>8.2f} "
        f"{algbw:>7.2f} {busbw:>7.2f}      0 {time:>8.2f} {algbw:>7.2f} "
        f"{busbw:>7.2f}      0\n"
    )


# One sweep of two sizes, repeated three times with different times.
REPEATED = (
    HEADER
    + _row(1 << 20, 10.0, 100.0)
    + _row(1 << 21, 15.0, 140.0)
    + _row(1 << 20, 20.0, 50.0)
    + _row(1 << 21, 15.0, 140.0)
    + _row(1 << 20, 30.0, 33.0)
    + _row(1 << 21, 15.0, 140.0)
    + FOOTER
)


def _collect(text: str) -> tuple[points.PointTable, ncclparse.ParseResult]:
    table = points.PointTable(points.REPORT_LIMITS)
    result = ncclparse.parse_many([(text, "sweep.log")], on_batch=table.add)
    return table, result


def test_few_rows_are_kept_as_they_are() -> None:
    table, _ = _collect(REPEATED)
    assert not table.merged
    assert table.table().equals(
        ncclparse.parse(REPEATED, name="sweep.log").measurements
    )
    assert table.merged_runs() == {}


def test_repeats_are_merged_when_rows_are_too_many(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(points, "REPORT_LIMITS", (4, 100))
    table, result = _collect(REPEATED)
    assert table.merged
    merged = table.table()
    assert merged.num_rows == 4  # 2 sizes x 2 placements
    first = merged.slice(0, 1).to_pylist()[0]
    assert first["placement"] == "out-of-place"
    assert first["size_bytes"] == 1 << 20
    assert first["line"] == 10  # the first repeat
    assert first["time_us"] == 20.0
    assert first["time_min_us"] == 10.0
    assert first["time_max_us"] == 30.0
    # population spread of 10, 20, 30 around 20: sqrt(200/3) = 8.165 = 40.82 %
    assert first["stddev_pct"] == pytest.approx(100 * math.sqrt(200 / 3) / 20)
    assert first["busbw_gbps"] == pytest.approx(61.0)
    # A point measured the same three times: no spread.
    second = merged.slice(2, 1).to_pylist()[0]
    assert (second["size_bytes"], second["time_us"], second["stddev_pct"]) == (
        1 << 21,
        15.0,
        0.0,
    )
    assert table.merged_runs() == {("sweep.log", 0): (12, 4)}
    runs = points.with_merge_notes(result.runs, table.merged_runs())
    assert string_lists(runs, "warnings")[0][-1] == (
        "12 measurements of 4 points (a sweep repeated): merged for judging, time "
        "the mean of the repeats, min/max their extremes"
    )


def test_merging_in_several_steps_gives_the_same_points(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(points, "REPORT_LIMITS", (4, 100))
    table = points.PointTable((4, 100))
    ncclparse.parse_many([(REPEATED, "sweep.log")], on_batch=table.add)
    once = table.table()
    stepwise = points.PointTable((4, 100))
    for batch in ncclparse.parse(REPEATED, name="sweep.log").measurements.to_batches(
        max_chunksize=2
    ):
        stepwise.add(batch)
    assert stepwise.table().equals(once)


def test_too_many_points_are_refused_by_report(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Past the limit, a usage error (exit 2) naming it, and no page."""
    monkeypatch.setattr(points, "REPORT_LIMITS", (2, 3))
    page = tmp_path / "x.html"
    result = CliRunner().invoke(
        cli, ["report", "-q", "-", "-o", str(page)], input=REPEATED
    )
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == (
        "Error: the inputs hold more than 3 distinct measurement points (sizes of "
        "each series of each run): more than a report can judge (docs/robustness.md, "
        "Memory); give fewer inputs, or write the tables with `ncclparse parse -o` "
        "and query them"
    )
    assert not page.exists()


def test_report_says_a_run_was_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(points, "REPORT_LIMITS", (4, 100))
    result = CliRunner().invoke(cli, ["report", "-q", "-"], input=REPEATED)
    assert result.exit_code == 0, result.output
    assert "12 measurements of 4 points (a sweep repeated)" in result.output


def test_points_keep_the_measurements_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(points, "REPORT_LIMITS", (4, 100))
    table, _ = _collect(REPEATED)
    assert table.table().schema == pa.schema(
        ncclparse.parse(REPEATED).measurements.schema
    )
