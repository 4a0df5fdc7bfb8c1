"""The report's per-size tables, multi-run overview, title and run numbering (issue 16).

Values are the logs' own: the H100 example (examples/), a nccl-tests ``-I 1`` log with
per-iteration columns, and the oneCCL fixtures (87 logs, 88 runs, 103 series).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import ncclparse
from ncclparse.cli.app import cli
from ncclparse.report import build_context, render_markdown, render_report
from ncclparse.report.context import CHARTED_BLOCKS
from ncclparse.report.page import ReportContext

from .conftest import FIXTURES
from .test_report import H100, Page

PER_ITER = FIXTURES / "nccl_per_iter/v2.19.6_all_reduce_I1_K1_S1_3proc_complete.log"
ONECCL = sorted((FIXTURES / "oneccl").glob("*.log"))
DASH = "\u2013"  # an empty cell


def _section(html: str, anchor: str) -> str:
    start = html.index(f'<section id="{anchor}"')
    return html[start : html.index("</section>", start)]


def _table(html: str, cls: str, nth: int = 0) -> Page:
    """The ``nth`` table of class ``cls`` (exactly) in ``html``."""
    found = re.findall(rf'<table class="{cls}">.*?</table>', html, re.S)
    return Page(found[nth])


@pytest.fixture(scope="module")
def h100() -> tuple[ReportContext, str]:
    context = build_context(ncclparse.parse_many([H100]))
    return context, render_report(context)


@pytest.fixture(scope="module")
def oneccl() -> tuple[ReportContext, str]:
    context = build_context(ncclparse.parse_many(ONECCL))
    return context, render_report(context)


# --- per-size tables ------------------------------------------------------------


def test_main_table_has_algbw_and_reads_like_the_log(
    h100: tuple[ReportContext, str],
) -> None:
    _, html = h100
    # Folded latency-bound sizes first (table 0), then the sizes that matter.
    shown = _table(html, "sizes", 1)
    assert shown.all_text.startswith(
        "size placement time algbw GB/s busbw GB/s efficiency #wrong "
        # Line 50: 2097152 ... 254.0 8.26 15.48 0 | 252.9 8.29 15.55 0
        # Efficiency against the strict reading's line rate: NVLSTree's 750 GB/s.
        "2 MiB out-of-place 254 µs 8.26 15.48 2.1 % 0 "
        "2 MiB in-place 253 µs 8.29 15.55 2.1 % 0 "
    )
    # Line 62: 8589934592 ... 47535 180.71 338.82 0 | 47743 179.92 337.35 0
    assert shown.all_text.endswith(
        "8 GiB out-of-place 47.5 ms 180.71 338.82 45.2 % 0 "
        "8 GiB in-place 47.7 ms 179.92 337.35 45.0 % 0"
    )
    assert shown.rows == {"sizes": 26}


def test_latency_bound_sizes_fold_into_one_line(
    h100: tuple[ReportContext, str],
) -> None:
    context, html = h100
    (block,) = context.runs[0].blocks
    # 8 B to 1 MiB: every row latency-bound; 2 MiB in-place is bandwidth-bound.
    text = (
        "18 sizes, 8 B to 1 MiB, latency-bound: 122 µs to 207 µs per operation, "
        "efficiency <0.1 % to 1.3 %"
    )
    assert block.collapsed_text == text
    summary = text.replace("<", "&lt;")
    assert f'<details class="fold"><summary>{summary}</summary>' in html
    folded = _table(html, "sizes", 0)
    assert folded.rows == {"sizes": 36}
    assert "8 B out-of-place 136 µs 0.00 0.00 <0.1 % 0" in folded.all_text
    assert folded.all_text.endswith("1 MiB in-place 207 µs 5.06 9.49 1.3 % 0")


def test_detail_table_shows_gaps_as_shares_and_hides_empty_columns(
    h100: tuple[ReportContext, str],
) -> None:
    _, html = h100
    details = _table(html, "sizes details")
    assert details.rows == {"sizes details": 62}
    # No "hw latency" (the h100 preset states none) and no "staging" (always 0).
    header = (
        "size placement busbw recomputed GB/s ideal GB/s regime sw latency bandwidth "
        "unexplained line"
    )
    assert details.all_text.startswith(header)
    # 8 GiB out-of-place (recomputed busbw 338.83 where the log rounds to 338.82):
    # the Simple segment's 889 µs alpha, 25194 µs bandwidth shortfall of the
    # 47535 µs measured, nothing unexplained (the curve is 0.7 % above it).
    assert (
        "8 GiB out-of-place 338.83 750.00 bandwidth-bound 1.9 % 53.0 % 0.0 % 62"
        in details.all_text
    )
    assert " ns" not in details.all_text  # gaps are shares, not times


def test_per_iteration_spread_columns_where_the_log_has_them() -> None:
    html = render_report(build_context(ncclparse.parse_many([PER_ITER])))
    table = _table(html, "sizes")
    # i_min i_max i_p99 i_cv% of the log's only row, each placement.
    assert table.all_text == (
        "size placement time algbw GB/s busbw GB/s efficiency #wrong min max p99 "
        "stdev 1 MiB out-of-place 65.8 µs 15.94 26.56 10.6 % 0 51 µs 90 µs 90 µs "
        "25.8 % 1 MiB in-place 52.4 µs 20.01 33.35 13.3 % 0 50.5 µs 51 µs 51 µs "
        "0.4 %"
    )


def test_oneccl_table_drops_wrong_and_keeps_its_spread(
    oneccl: tuple[ReportContext, str],
) -> None:
    context, _ = oneccl
    run = next(
        r for r in context.runs if r.short_label == "v2021.14_allgather_np4.log (run 0)"
    )
    (block,) = run.blocks
    # oneCCL prints t_min, t_max and stddev[%], no #wrong and no busbw.
    assert [c.label for c in block.columns] == [
        "size",
        "time",
        "algbw GB/s",
        "busbw GB/s",
        "min",
        "max",
        "stdev",
    ]
    assert "busbw recomputed GB/s" not in [c.label for c in block.detail_columns]


# --- the overview of many runs ----------------------------------------------------


def test_overview_lists_every_series_with_links(
    oneccl: tuple[ReportContext, str],
) -> None:
    context, html = oneccl
    # 103 series, and a row for each of the 18 runs that measured nothing.
    assert (len(context.runs), len(context.overview)) == (88, 103 + 18)
    page = Page(html)
    assert page.sections[:2] == ["overview", "run1"]
    overview = _section(html, "overview")
    assert Page(overview).rows["overview verdicts"] == 121
    ids = set(re.findall(r' id="([^"]+)"', html))
    links = re.findall(r'href="#([^"]+)"', overview)
    assert set(links) <= ids
    # Each series twice: the table's run cell and its small multiple's title; each
    # run without rows once, to its section.
    assert len([link for link in links if link.startswith("run")]) == 2 * 103 + 18
    text = Page(overview).all_text
    assert (
        f"i NOTE v2021.14_allgather_np4.log (run 0) all_gather float32 4 ranks 4 {DASH} "
        f"0.0188 GB/s {DASH} 0.0188 GB/s efficiency unknown at 1 MiB: no hardware "
        "profile"
    ) in text


def test_overview_judges_each_series_of_a_run(
    oneccl: tuple[ReportContext, str],
) -> None:
    context, _ = oneccl
    rows = [
        o
        for o in context.overview
        if o.run.short_label == "v2021.14_allreduce_dtype_all_np4.log (run 0)"
    ]
    assert rows[0].run.verdict.label == "CHECK"  # the float64 series' busbw falls
    mine = {o.series: (o.finding.label, o.why[:30]) for o in rows}
    assert mine["all_reduce float64 sum 4 ranks"] == (
        "CHECK",
        "busbw falls with size: 0.0021 ",
    )
    assert mine["all_reduce int8 sum 4 ranks"] == (
        "NOTE",
        "efficiency unknown at 4 KiB: n",
    )


def test_many_series_get_small_multiples_not_charts_each(
    oneccl: tuple[ReportContext, str],
) -> None:
    context, html = oneccl
    assert sum(len(r.blocks) for r in context.runs) > CHARTED_BLOCKS
    assert not context.charts_per_block
    assert all(not b.charts for r in context.runs for b in r.blocks)
    assert [c.title for c in context.small_multiples] == [
        "all_gather: 2 series",
        "all_gather_v: 5 series",
        "all_reduce: 67 series",
        "alltoall: 3 series",
        "alltoallv: 1 series",
        "broadcast: 5 series",
        "reduce: 3 series",
        "reduce_scatter: 3 series",
        "unknown: 14 series",
    ]
    assert Page(html).svgs_per_figure == [1] * 9
    assert context.overlay is None
    assert len(html.encode()) < 1_000_000


def test_a_few_runs_keep_their_charts_and_the_overview() -> None:
    logs = [H100, ROOT_EXAMPLES / "alltoall_8gpu_a100.log"]
    context = build_context(ncclparse.parse_many(logs))
    assert context.charts_per_block
    assert [len(b.charts) for r in context.runs for b in r.blocks] == [4, 4]
    assert len(context.overview) == 2
    assert context.small_multiples == ()


# --- title, standard input and run numbers ----------------------------------------


def test_standard_input_is_named_and_runs_count_from_zero(runner: CliRunner) -> None:
    log = H100.read_text()
    done = runner.invoke(cli, ["report", "-q", "--format", "md"], input=log)
    assert done.exit_code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "# ncclparse report: standard input"
    # The verdict table's row of the one run, found by the run's name.
    [row] = [line for line in lines if "| standard input (run 0) |" in line]
    assert row == (
        "| i NOTE | standard input (run 0) | all\\_reduce | 16 | 2 | NVIDIA H100 80GB "
        "HBM3 | unverified: median busbw 330.6 GB/s on the plateau, 2 GiB to 8 GiB "
        "against an ideal whose NIC count and speed are assumed from a preset; pass "
        "--profile or --inter-bw to judge it |"
    )
    done = runner.invoke(cli, ["report", "-q", "--title", "nightly <h100>"], input=log)
    assert done.exit_code == 0, done.stderr
    assert "<title>nightly &lt;h100&gt;</title>" in done.stdout
    assert "<h1>nightly &lt;h100&gt;</h1>" in done.stdout
    assert "nightly &lt;h100&gt; (run 0)" in done.stdout
    assert " - (run" not in done.stdout


def test_title_parameter_and_run_numbers_match_the_schema() -> None:
    result = ncclparse.parse_many(
        [FIXTURES / "oneccl/derived_v2021.14_two_runs_appended.log"]
    )
    context = build_context(result, title="two runs")
    assert context.title == "two runs"
    assert result.runs.column("run").to_pylist() == [0, 1]
    assert [r.short_label for r in context.runs] == [
        "derived_v2021.14_two_runs_appended.log (run 0)",
        "derived_v2021.14_two_runs_appended.log (run 1)",
    ]
    md = render_markdown(context)
    assert "(run 1)" in md
    assert "(run 2)" not in md


ROOT_EXAMPLES = Path(__file__).parent.parent / "examples"


def test_docs_report_page_states_what_the_page_does(
    h100: tuple[ReportContext, str],
) -> None:
    doc = (Path(__file__).parent.parent / "docs/report.md").read_text()
    context, _ = h100
    (block,) = context.runs[0].blocks
    assert block.collapsed_text is not None
    # The doc's example line, re-wrapped as Markdown wraps it.
    assert block.collapsed_text in " ".join(doc.split())
    assert f"Beyond {CHARTED_BLOCKS} series" in doc


def test_one_run_of_many_series_gets_the_overview_and_its_panels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Eight dtypes in one run, with the chart limit at four: without the overview
    the page would have no chart at all."""
    monkeypatch.setattr("ncclparse.report.context.CHARTED_BLOCKS", 4)
    log = FIXTURES / "oneccl/v2021.14_allreduce_dtype_all_np4.log"
    context = build_context(ncclparse.parse_many([log]))
    (run,) = context.runs
    assert len(run.blocks) == 8
    assert len(context.overview) == 8
    assert [c.title for c in context.small_multiples] == ["all_reduce: 8 series"]
    page = Page(render_report(context))
    assert page.sections == ["overview", "run1"]
    assert page.svgs_per_figure == [1]


EXAMPLES = Path(__file__).parent.parent / "examples"
THREE = [
    str(EXAMPLES / name)
    for name in (
        "all_reduce_16rank_2node_h100.log",  # NOTE: the ideal's NICs are assumed
        "alltoall_8gpu_a100.log",  # OK, one warning
        "all_reduce_failed_midrun.log",  # FAIL, 11 warnings and errors
    )
]


def test_beyond_the_detail_limit_the_worst_runs_get_sections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ncclparse.report.context as context

    monkeypatch.setattr(context, "DETAILED_RUNS", 2)
    report = build_context(ncclparse.parse_many(THREE))
    assert [(r.short_label, r.detailed) for r in report.runs] == [
        ("all_reduce_16rank_2node_h100.log (run 0)", True),
        ("alltoall_8gpu_a100.log (run 0)", False),
        ("all_reduce_failed_midrun.log (run 0)", True),
    ]
    assert report.details_left_out == 1
    assert (len(report.messages), report.messages_left_out) == (11, 1)
    html = render_report(report)
    assert [s for s in Page(html).sections if s.startswith("run")] == ["run1", "run3"]
    assert (
        '<p class="note">2 of the 3 runs have a section below: those a failed check '
        "names, then the worst verdicts. The other 1 are listed here only; "
        "<code>ncclparse report</code> on one log shows it in full.</p>"
    ) in html
    # The overview still lists the run, without a link to a section it has not.
    assert (
        '<td data-label="run" class="mono run"><span title="'
        f'{THREE[1]} (run 0)">alltoall_8gpu_a100.log (run 0)</span></td>'
    ) in html
    assert (
        '<p class="note">And 1 more warning or error of the 1 runs without a section: '
        "<code>ncclparse parse</code> on a log lists its own.</p>"
    ) in html
    markdown = render_markdown(report)
    assert "## ✓ OK: " not in markdown
    assert "Details follow for 2 of the 3 runs" in markdown


def test_a_run_a_failed_check_names_gets_its_section_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ncclparse.report.context as context
    from ncclparse.health.check import check
    from ncclparse.health.rules import rules_from_mapping

    monkeypatch.setattr(context, "DETAILED_RUNS", 2)
    result = ncclparse.parse_many(THREE)
    # A ceiling only the alltoall breaks: its failed case names it.
    rules = rules_from_mapping(
        {"rule": [{"name": "slow", "collective": "alltoall", "metric": "time_us",
                   "threshold": 1.0}]}
    )  # fmt: skip
    found = check(result, rules)
    assert {c.source for c in found.failures if c.rule == "slow"} == {THREE[1]}
    report = build_context(result, check=found)
    # Named by failed cases: the failed run (FAIL) and the alltoall (OK), before
    # the NOTE that no case names.
    assert [r.detailed for r in report.runs] == [False, True, True]


def test_a_run_without_a_section_shows_the_same_overview_figures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ncclparse.report.context as context

    logs = sorted((FIXTURES / "oneccl").glob("*.log"))
    result = ncclparse.parse_many([*THREE, *logs])

    def figures(report: ReportContext) -> list[tuple[object, ...]]:
        return [
            (
                o.run.label,
                o.block.title,
                o.block.nranks,
                o.block.plateau_busbw_gbps,
                o.block.plateau_efficiency,
                o.block.peak.size_bytes if o.block.peak else None,
                o.block.peak.busbw_calc_gbps if o.block.peak else None,
                o.finding,
            )
            for o in report.overview
            if o.block is not None
        ]

    full = build_context(result)
    monkeypatch.setattr(context, "DETAILED_RUNS", 0)
    bare = build_context(result)
    assert not any(r.detailed for r in bare.runs)
    assert bare.details_left_out == len(bare.runs) == len(full.runs) > 80
    assert figures(bare) == figures(full)
    assert (
        sum(
            o.block is not None and o.block.plateau_busbw_gbps is not None
            for o in bare.overview
        )
        > 5
    )


# --- the overview tells the worst first (issue 29) ------------------------------

NCCL_FIXTURES = sorted((FIXTURES / "nccl").glob("*.log"))
# (verdict, file name up to its first "_", run, series): every one of the 34 runs,
# worst first, then by file and run; a run that measured nothing says how it ended.
NCCL_OVERVIEW = [
    ("FAIL", "containertoolkit-77", 0, "all_reduce: truncated, no measurement"),
    ("FAIL", "nccl-1531", 0, "alltoall: truncated, no measurement"),
    ("FAIL", "nccl-1812", 0, "all_reduce: truncated, no measurement"),
    ("FAIL", "nccl-2169", 0, "alltoall: truncated, no measurement"),
    ("FAIL", "nccltests-104b", 0, "sendrecv: truncated, no measurement"),
    ("FAIL", "nccltests-249", 0, "all_reduce: truncated, no measurement"),
    ("FAIL", "nccltests-280", 0, "all_reduce: failed, no measurement"),
    ("FAIL", "nccltests-322", 0, "all_reduce float32 sum"),
    ("FAIL", "nccltests-5", 0, "all_reduce: failed, no measurement"),
    ("FAIL", "rccltests-50", 0, "all_reduce: failed, no measurement"),
    ("CHECK", "mscclpp-646", 0, "all_reduce bfloat16 sum 8 ranks"),
    ("CHECK", "nccl-1435", 0, "all_gather bfloat16 2 ranks"),
    ("CHECK", "nccl-2441", 0, "all_reduce float32 sum 4 ranks on 2 nodes"),
    ("CHECK", "nccl-644", 0, "all_gather float32 8 ranks"),
    ("CHECK", "nccltests-128", 0, "reduce_scatter float32 sum 8 ranks"),
    ("CHECK", "nccltests-167", 0, "all_reduce float32 max 16 ranks"),
    ("CHECK", "nccltests-167", 0, "all_reduce float32 min 16 ranks"),
    ("CHECK", "nccltests-214", 0, "sendrecv float32 sum 2 ranks on 2 nodes"),
    ("CHECK", "nccltests-280", 1, "all_reduce float32 sum 3 ranks on 1 node"),
    ("CHECK", "nccltests-287", 0, "all_reduce float32 sum 1 ranks on 1 node"),
    ("CHECK", "nccltests-44", 0, "reduce float32 sum root 0"),
    ("CHECK", "nccltests-82", 0, "broadcast float32 2 ranks on 2 nodes root 0"),
    ("CHECK", "npkit-19", 0, "all_reduce float32 sum 4 ranks on 1 node"),
    ("CHECK", "pytorch-84803", 0, "all_reduce float32 sum 1 ranks on 1 node"),
    ("CHECK", "rccl-1490", 0, "all_gather float32 32 ranks"),
    ("CHECK", "rccl-2075", 0, "hypercube float32 2 ranks"),
    ("CHECK", "rccl-929", 0, "all_reduce float32 sum"),
    ("NOTE", "nccl-1706", 0, "all_reduce float32 sum 2 ranks"),
    ("NOTE", "nccltests-119", 0, "all_reduce float32 sum 24 ranks"),
    ("NOTE", "nccltests-252", 0, "all_reduce float32 sum 8 ranks"),
    ("NOTE", "rccl-2078", 0, "all_reduce float32 sum 16 ranks"),
    ("NOTE", "repo-ztan-a3mega", 0, "all_reduce float32 sum 16 ranks on 2 nodes"),
    ("OK", "superbench-testdata", 0, "alltoall float32 8 ranks on 1 node"),
    ("OK", "superbench-testdata", 0, "broadcast float32 8 ranks on 1 node root 0"),
    ("OK", "superbench-testdata", 0, "reduce float32 sum 8 ranks on 1 node root 0"),
]


@pytest.fixture(scope="module")
def nccl_fixtures() -> tuple[ReportContext, str]:
    context = build_context(ncclparse.parse_many(NCCL_FIXTURES))
    return context, render_report(context)


def test_overview_lists_every_run_worst_first(
    nccl_fixtures: tuple[ReportContext, str],
) -> None:
    context, _ = nccl_fixtures
    assert len(context.runs) == 34
    shown = [
        (o.finding.label, o.run.short_label.split("_")[0], o.run.run, o.series)
        for o in context.overview
    ]
    assert shown == NCCL_OVERVIEW
    assert {(o.run.source, o.run.run) for o in context.overview} == {
        (r.source, r.run) for r in context.runs
    }
    # A run without rows: every finding, worst first.
    assert context.overview[0].why == (
        "the run produced no measurement; truncated: the log ends at line 15 before "
        "the run's footer; larger sizes were not measured"
    )


def test_first_screen_counts_each_verdict_and_links_to_it(
    nccl_fixtures: tuple[ReportContext, str],
) -> None:
    _, html = nccl_fixtures
    header = html[html.index("<header>") : html.index("</header>")]
    counts = re.search(r'<p class="counts" id="counts">(.*?)</p>', header, re.S)
    assert counts is not None
    assert re.sub(r"<[^>]+>", "", counts.group(1)) == (
        "34 runs: 10 FAIL, 16 CHECK, 5 NOTE, 3 OK. Worst first in the overview "
        "below; each count links to its runs."
    )
    assert re.findall(r'href="#(overview-\w+)"', counts.group(1)) == [
        "overview-fail",
        "overview-check",
        "overview-note",
        "overview-ok",
    ]
    # Each count's anchor is the first row of its verdict.
    overview = _section(html, "overview")
    rows = re.findall(
        r"<tr( id=\"[^\"]+\")?><td data-label=\"verdict\">(.*?)</td>", overview
    )
    opened = [(i, anchor) for i, (anchor, _) in enumerate(rows) if anchor]
    assert opened == [
        (0, ' id="overview-fail"'),
        (10, ' id="overview-check"'),
        (27, ' id="overview-note"'),
        (32, ' id="overview-ok"'),
    ]
    # Every row links to its run's section: a run without rows to the run itself.
    links = re.findall(
        r'<td data-label="run" class="mono run"><a href="#([^"]+)"', overview
    )
    assert len(links) == 35
    assert links[0] == "run1"
    ids = set(re.findall(r' id="([^"]+)"', html))
    assert set(links) <= ids
