"""compare's renderings end to end: named sides, headed text and Markdown columns in
the units their headers say, ``--format md`` (and the old ``markdown``), the HTML
chart, 0-based run numbers. Baseline: a real log (16 H100 ranks on 2 nodes, sizes 8 B
to 8 GiB); candidate: the same log with the 1 GiB row 25 % slower (busbw -20 %)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

import ncclparse
from ncclparse.cli.app import cli
from ncclparse.health.compare import Comparison, Side, compare, describe
from ncclparse.report.comparison import (
    comparison_html,
    comparison_markdown,
    comparison_text,
)
from ncclparse.report.comparison_chart import comparison_chart
from tests import _derive as derive

GIB = 2**30
# The worst run column is as wide as its widest name: two single logs' runs are
# "base.log vs cand.log" (20 characters); the real log's hosts are 27.
PAIRED = "base.log vs cand.log"
HOSTS = "ztan-mig-235z_ztan-mig-gq73"


def _text_header(worst: str) -> str:
    return (
        "series                                                   size     "
        "baseline busbw (GB/s)  candidate busbw (GB/s)  busbw change (%)  "
        f"baseline time (us)  candidate time (us)  {'worst run'.ljust(len(worst))}  "
        "worst run change (%)  verdict"
    )


TEXT_HEADER = _text_header(PAIRED)
MD_HEADER = (
    "| series | size | baseline busbw (GB/s) | candidate busbw (GB/s) | "
    "busbw change (%) | baseline time (us) | candidate time (us) | worst run | "
    "worst run change (%) | verdict |"
)


def _slower() -> str:
    return derive.scale(derive.healthy(), lambda s: 1.25 if s == GIB else 1.0)


def _table(text: str, name: str) -> pa.Table:
    return ncclparse.parse(io.StringIO(text), name=name).measurements


@pytest.fixture
def logs(tmp_path: Path) -> tuple[str, str]:
    candidate = tmp_path / "candidate.log"
    candidate.write_text(_slower())
    return str(derive.HEALTHY), str(candidate)


def _found() -> Comparison:
    return compare(
        _table(derive.healthy(), "base.log"),
        _table(_slower(), "cand.log"),
        baseline_side=Side("last week", "1 run: run 0"),
        candidate_side=Side("tonight", "1 run: run 0"),
    )


def test_text_has_named_sides_and_headed_columns() -> None:
    lines = comparison_text(_found()).splitlines()
    assert lines[:5] == [
        "verdict: regression (threshold 5%, geometric mean busbw change -0.7%)",
        "baseline:  last week (1 run: run 0)",
        "candidate: tonight (1 run: run 0)",
        "",
        TEXT_HEADER,
    ]
    gib = [line for line in lines if "  1 GiB  " in line]
    # busbw under the busbw headers: size x 2(n-1)/n / median time, the log's 298.82
    # and 297.86 GB/s, then / 1.25; the change in %; times in us under their headers.
    # The one run of each side is the worst run, with the same change.
    assert [line.split()[-11:] for line in gib] == [
        ["GiB", "298.82", "239.05", "-20.0", "6737.40", "8421.80", *PAIRED.split(),
         "-20.0", "regression"],
        ["GiB", "297.86", "238.29", "-20.0", "6759.00", "8448.80", *PAIRED.split(),
         "-20.0", "regression"],
    ]  # fmt: skip
    # Each value ends under the end of its (right-aligned) header.
    end = TEXT_HEADER.index("candidate busbw (GB/s)") + len("candidate busbw (GB/s)")
    assert gib[0][:end].endswith("239.05")
    assert len(lines) == 5 + 62


def test_markdown_is_a_headed_table() -> None:
    lines = comparison_markdown(_found()).splitlines()
    assert lines[:7] == [
        "## ncclparse compare: regression (threshold 5%, geometric mean busbw "
        "change -0.7%)",
        "",
        "- **baseline**: `last week` (1 run: run 0)",
        "- **candidate**: `tonight` (1 run: run 0)",
        "",
        MD_HEADER,
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    assert (
        "| all\\_reduce float32 sum in-place 16 ranks on 2 nodes | 1 GiB | 298.82 | "
        "239.05 | -20.0 | 6737.40 | 8421.80 | base.log vs cand.log | -20.0 | "
        "regression |"
    ) in lines


def test_nothing_in_common_says_so() -> None:
    other = ncclparse.parse_many(
        [derive.FIXTURES / "nccl" /
         "superbench-testdata_alltoall_a100_8gpu_c0_blank_redop_complete.log"]
    ).measurements  # fmt: skip
    found = compare(_table(derive.healthy(), "x.log"), other)
    assert "no series and size in common" in comparison_text(found)
    assert "No series and size in common." in comparison_markdown(found)
    assert comparison_chart(found) == ""
    assert "<svg" not in comparison_html(found)


def test_runs_are_numbered_from_0_as_in_the_table() -> None:
    table = _table(derive.healthy(), "a.log")
    assert table["run"].to_pylist()[0] == 0
    assert describe(table) == "1 run: run 0 of a.log"
    assert describe(table, "logs/a.log") == "1 run: run 0"
    two = pa.concat_tables([table, _table(_slower(), "b.log")])
    assert describe(two) == "2 runs of 2 logs"


def test_html_names_the_sides_and_draws_a_deterministic_chart() -> None:
    found = _found()
    first, second = comparison_html(found), comparison_html(found)
    assert first == second
    assert (
        "<title>ncclparse compare: regression: tonight against last week</title>"
        in (first)
    )
    assert (
        "<dt>Baseline</dt><dd><code>last week</code> "
        '<span class="muted">(1 run: run 0)</span></dd>'
    ) in first
    assert "<dt>Candidate</dt><dd><code>tonight</code>" in first
    [svg] = re.findall(r"<svg .*?</svg>", first, flags=re.S)
    assert svg.startswith('<svg role="img" aria-label="Bus bandwidth of the baseline')
    assert svg == comparison_chart(found)
    assert "bus bandwidth (GB/s)" in svg
    assert "busbw change" in svg
    assert "1 GiB" in svg or "2 GiB" in svg  # sizes as byte labels
    assert "<script" not in first
    # busbw and time columns with their units, the 1 GiB regression's values.
    assert '<th class="num">candidate busbw (GB/s)</th>' in first
    assert '<th class="num">baseline time (µs)</th>' in first
    assert (
        '<td class="num">298.82</td><td class="num">239.05</td>\n'
        '<td class="num">-20.0</td>\n'
        '<td class="num">6737.40</td><td class="num">8421.80</td>'
    ) in first


def test_cli_md_and_the_old_markdown_spelling(
    runner: CliRunner, logs: tuple[str, str], tmp_path: Path
) -> None:
    base, cand = logs
    md = runner.invoke(cli, ["compare", base, cand, "--format", "md"])
    assert md.exit_code == 0, md.output
    lines = md.stdout.splitlines()
    [baseline] = [line for line in lines if line.startswith("- **baseline**: ")]
    assert baseline == f"- **baseline**: `{base}` (1 run: run 0)"
    [candidate] = [line for line in lines if line.startswith("- **candidate**: ")]
    assert candidate == f"- **candidate**: `{cand}` (1 run: run 0)"
    # The sides, then the table.
    assert lines.count(MD_HEADER) == 1
    assert lines.index(baseline) < lines.index(candidate) < lines.index(MD_HEADER)
    old = runner.invoke(cli, ["compare", base, cand, "--format", "markdown"])
    assert old.exit_code == 0
    assert old.stdout == md.stdout
    out = tmp_path / "c.md"
    assert runner.invoke(cli, ["compare", base, cand, "-o", str(out)]).exit_code == 0
    assert out.read_text() == md.stdout
    bad = runner.invoke(cli, ["compare", base, cand, "--format", "pdf"])
    assert bad.exit_code == 2


def test_cli_text_names_sides_by_option(
    runner: CliRunner, logs: tuple[str, str]
) -> None:
    base, cand = logs
    args = ["compare", base, cand, "--baseline-name", "last week"]
    result = runner.invoke(cli, [*args, "--candidate-name", "tonight"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    [baseline] = [line for line in lines if line.startswith("baseline: ")]
    assert baseline == (
        "baseline:  last week (1 run: run 0 of "
        "repo-ztan-a3mega_allreduce_16rank_2node_h100_complete.log)"
    )
    [candidate] = [line for line in lines if line.startswith("candidate: ")]
    assert candidate == "candidate: tonight (1 run: run 0 of candidate.log)"
    # The sides, then, after a blank line, the table.
    assert lines.count(_text_header(HOSTS)) == 1
    at = lines.index(_text_header(HOSTS))
    assert lines[at - 3 : at] == [baseline, candidate, ""]


def test_cli_history_baseline_says_which_nights(
    runner: CliRunner, logs: tuple[str, str], tmp_path: Path
) -> None:
    base, cand = logs
    history = tmp_path / "history"
    for day in ("2026-11-20", "2026-11-21"):
        done = runner.invoke(
            cli, ["ingest", base, "--history", str(history), "--date", day, "-q"]
        )
        assert done.exit_code == 0, done.output
    result = runner.invoke(cli, ["compare", str(history), cand, "--format", "html"])
    assert result.exit_code == 0, result.output
    # The second ingest skipped the same log: one run, ingested the first night.
    assert (
        f'<dt>Baseline</dt><dd><code>{history}</code> <span class="muted">(history, '
        "all of it: 1 night, 2026-11-20, every tag; 1 run: run 0 of "
        "repo-ztan-a3mega_allreduce_16rank_2node_h100_complete.log)</span></dd>"
    ) in result.stdout


def test_logs_without_busbw_get_it_recomputed_and_the_chart_picks_the_worst(
    runner: CliRunner, tmp_path: Path
) -> None:
    """oneCCL prints no busbw: it is size x factor / median time (a real oneCCL log
    against its own table with time_us doubled). The real directory of 77 oneCCL logs
    (49 series) against itself: the chart draws 7 of them and says so."""
    oneccl = derive.FIXTURES / "oneccl"
    table = ncclparse.parse_many(
        [oneccl / "v2021.14_allreduce_f32_np4.log"]
    ).measurements
    slower = table.set_column(
        table.schema.get_field_index("time_us"),
        "time_us",
        pc.multiply(table["time_us"], 2.0),
    )
    found = compare(table, slower)
    assert {r.verdict for r in found.rows} == {"regression"}
    row = next(r for r in found.rows if r.size_bytes == 2**20)
    # all_reduce on 4 ranks: factor 2 (4 - 1) / 4 = 1.5.
    assert row.baseline_busbw_gbps == pytest.approx(
        1.5 * 2**20 / row.baseline_time_us * 1e-3
    )
    assert row.baseline_busbw_gbps is not None
    assert row.candidate_busbw_gbps == pytest.approx(row.baseline_busbw_gbps / 2)
    page = tmp_path / "many.html"
    result = runner.invoke(cli, ["compare", str(oneccl), str(oneccl), "-o", str(page)])
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "(78 runs of 77 logs)" in html
    assert "The chart draws the\n7 of 49 series that lost the most" in html


def test_without_a_busbw_factor_the_chart_is_the_change_alone() -> None:
    from ncclparse.health.compare import CompareRow

    rows = tuple(
        CompareRow("hypothetical", 2**k, 10.0, 12.5, -0.2, "regression")
        for k in range(3, 8)
    )
    found = Comparison(rows, (), (), 0.05, "regression", -0.2)
    svg = comparison_chart(found)
    assert 'aria-label="Bus bandwidth change per size"' in svg
    assert "bus bandwidth (GB/s)" not in svg
    html = comparison_html(found)
    assert "<figcaption>The bus bandwidth\nchange per size" in html
