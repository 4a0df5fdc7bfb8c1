"""compare: per size deltas and verdicts on real and derived logs; renderings."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import ncclparse
from ncclparse.health.compare import CompareRow, Comparison, Side, compare
from ncclparse.inputs.sides import load_measurements
from ncclparse.report.comparison import comparison_html, render_comparison
from tests import _derive as derive

GIB = 2**30


def _table(text: str) -> pa.Table:
    return ncclparse.parse(io.StringIO(text), name="x.log").measurements


def test_same_log_is_same() -> None:
    table = _table(derive.healthy())
    found = compare(table, table)
    assert found.verdict == "same"
    assert found.geomean_change == 0.0
    assert len(found.rows) == 62
    assert not found.only_baseline


def test_one_slower_size_is_a_regression() -> None:
    # Derived: the 1 GiB row 25 % slower, i.e. busbw -20 %.
    slower = derive.scale(derive.healthy(), lambda s: 1.25 if s == GIB else 1.0)
    found = compare(_table(derive.healthy()), _table(slower))
    assert found.verdict == "regression"
    bad = [r for r in found.rows if r.verdict == "regression"]
    assert [(r.size_bytes, round(r.change, 3)) for r in bad] == [
        (GIB, -0.2), (GIB, -0.2)
    ]  # fmt: skip


def test_faster_is_improvement_and_threshold_applies() -> None:
    faster = derive.scale(derive.healthy(), lambda s: 0.97)
    base, cand = _table(derive.healthy()), _table(faster)
    assert compare(base, cand).verdict == "same"  # +3 % is within 5 %
    assert compare(base, cand, threshold=0.01).verdict == "improvement"


def test_sizes_only_on_one_side_are_listed() -> None:
    cut = derive.cut(derive.healthy(), 2**30)
    found = compare(_table(derive.healthy()), _table(cut))
    assert "all_reduce float32 sum in-place 16 ranks on 2 nodes 8 GiB" in (
        found.only_baseline
    )
    assert found.only_candidate == ()


def test_nothing_in_common_is_incomparable() -> None:
    other = ncclparse.parse_many(
        [
            derive.FIXTURES
            / "nccl"
            / "superbench-testdata_alltoall_a100_8gpu_c0_blank_redop_complete.log"
        ]
    ).measurements
    found = compare(_table(derive.healthy()), other)
    assert found.verdict == "incomparable"
    assert found.geomean_change is None


def test_json_names_the_sides_and_busbw() -> None:
    found = compare(_table(derive.healthy()), _table(derive.healthy()))
    document = json.loads(render_comparison(found, "json"))
    assert set(document) == {"format", "version", "rows", "only_baseline",
                             "only_candidate", "threshold", "verdict",
                             "geomean_change", "baseline", "candidate", "runs",
                             "missing_runs", "new_runs"}  # fmt: skip
    assert document["baseline"] == {
        "name": "baseline",
        "about": "1 run: run 0 of x.log",
    }
    gib = [r for r in document["rows"] if r["size_bytes"] == GIB]
    assert [round(r["baseline_busbw_gbps"], 2) for r in gib] == [298.82, 297.86]
    with pytest.raises(ValueError, match="unknown format"):
        render_comparison(found, "pdf")


def test_html_escapes_names_from_logs() -> None:
    row = CompareRow("<script>alert(1)</script>", 8, 1.0, 2.0, -0.5, "regression")
    html = comparison_html(
        Comparison(
            (row,), ("a&b",), (), 0.05, "regression", -0.5,
            Side("<b>base</b>"), Side("c&d", "<i>x</i>"),
        )
    )  # fmt: skip
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "a&amp;b" in html
    assert "<code>&lt;b&gt;base&lt;/b&gt;</code>" in html
    assert '<code>c&amp;d</code> <span class="muted">(&lt;i&gt;x&lt;/i&gt;)' in html


def test_load_measurements_from_logs_tables_and_history(tmp_path: Path) -> None:
    from ncclparse.store import history
    from ncclparse.store.tables import write_table

    assert load_measurements(str(derive.HEALTHY)).num_rows == 62
    write_table(load_measurements(str(derive.HEALTHY)), tmp_path / "m.parquet")
    assert load_measurements(str(tmp_path / "m.parquet")).num_rows == 62
    history.ingest(ncclparse.parse_many([derive.HEALTHY]), tmp_path / "h")
    assert load_measurements(str(tmp_path / "h")).num_rows == 62
    with pytest.raises(ncclparse.InputError, match="no such file"):
        load_measurements(str(tmp_path / "missing.log"))


_CSP = re.compile(
    r'<meta http-equiv="Content-Security-Policy" content="(?P<policy>[^"]*)">'
)


def test_html_carries_the_report_content_security_policy(tmp_path: Path) -> None:
    """The comparison page forbids what the report page forbids: no script, no
    request; the one policy of both (templates/_csp.html)."""
    from ncclparse.cli.app import cli
    from ncclparse.report.context import build_context
    from ncclparse.report.render import render_report

    report = render_report(build_context(ncclparse.parse_many([derive.HEALTHY])))
    ours = CliRunner().invoke(
        cli, ["compare", str(derive.HEALTHY), str(derive.HEALTHY), "--format", "html"]
    )
    assert ours.exit_code == 0
    policies = [_CSP.findall(page) for page in (report, ours.stdout)]
    assert (
        policies
        == [["default-src 'none'; style-src 'unsafe-inline'; img-src data:"]] * 2
    )
    head = ours.stdout.split("<title>")[0]  # in <head>, before anything from a log
    assert _CSP.search(head) is not None
