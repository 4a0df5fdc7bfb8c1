"""Renderings of a check result (text, JSON, JUnit, Prometheus, Markdown) and of a
comparison, on a built result: every format names the same cases."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import ncclparse
from ncclparse.efficiency import Analysis, analyze
from ncclparse.errors import NcclParseError
from ncclparse.health.blame import HostScore, RunScore
from ncclparse.health.cases import Case, SizeMiss
from ncclparse.health.check import CheckResult, error_result
from ncclparse.health.compare import CompareRow, Comparison
from ncclparse.report.check_outputs import (
    error_html,
    output_pieces,
    render_outputs,
    to_json,
    to_junit,
    to_markdown,
    to_prometheus,
    to_text,
    write_all,
)
from ncclparse.report.comparison import render_comparison
from ncclparse.schema import measurements_table

# Hostile on purpose: markup, a pipe, a quote, a newline, a control character.
NAME = 'all_reduce | <b>"x"</b>\nnext\x07'
RESULT = CheckResult(
    cases=(
        Case("integrity", "a.log run 0", "OK", "data complete and valid", "a.log", 0),
        Case(
            "latency",
            NAME,
            "FAIL",
            "time_us above 1 ms at 1 of 3 sizes",
            "a.log",
            0,
            ("node1",),
            "all_reduce",
            3,
            (SizeMiss(1024, "time_us", 2500.0, 1000.0),),
        ),
        Case("slow-host", "hosts", "SKIP", "too few runs"),
    ),
    hosts=(),
    analysis=analyze(measurements_table({})),
)


def test_text_lists_failures_then_the_summary() -> None:
    assert to_text(RESULT) == (
        "FAIL latency: time_us above 1 ms at 1 of 3 sizes\n"
        "FAIL: 1 failed, 1 passed, 1 skipped\n"
    )
    assert to_text(RESULT, verbose=True).count("\n") == 4


# A run whose verdict is CHECK: it passes, and every output says CHECK.
LOOK = (
    "a.log run 0 (hosts node1): CHECK printed busbw disagrees with the recomputed one"
)
TO_CHECK = dataclasses.replace(
    RESULT,
    cases=(
        RESULT.cases[0],
        Case("verdict", "a.log run 0", "CHECK", LOOK, "a.log", 0),
        RESULT.cases[2],
    ),
)


def test_a_case_to_check_passes_and_is_said_everywhere() -> None:
    assert TO_CHECK.passed
    assert TO_CHECK.headline == "PASS with 1 CHECK"
    assert to_text(TO_CHECK) == (
        f"CHECK verdict: {LOOK}\nPASS with 1 CHECK: 0 failed, 1 passed, 1 to check, "
        "1 skipped\n"
    )
    document = json.loads(to_json(TO_CHECK))
    assert (document["status"], document["cases"][1]["status"]) == ("pass", "pass")
    assert document["cases"][1]["outcome"] == "CHECK"
    assert document["summary"]["outcomes"]["CHECK"] == 1
    root = ET.fromstring(to_junit(TO_CHECK))
    assert (root.get("failures"), root.get("errors")) == ("0", "0")
    [case] = [c for c in root.iter("testcase") if c.get("name") == "a.log run 0"][1:]
    assert [child.tag for child in case] == ["system-out"]
    assert case.findtext("system-out") == f"CHECK: {LOOK}"
    lines = to_prometheus(TO_CHECK).splitlines()
    assert 'ncclparse_check_outcomes{outcome="CHECK"} 1' in lines
    assert "ncclparse_check_passed 1" in lines
    markdown = to_markdown(TO_CHECK).splitlines()
    assert markdown[0] == "## ncclparse check: PASS with 1 CHECK"
    assert f"| CHECK | verdict | a.log run 0 | {LOOK} |" in markdown


def test_json_document() -> None:
    document = json.loads(to_json(RESULT))
    assert document["format"] == "ncclparse-check"
    assert document["status"] == "fail"
    assert document["summary"] == {
        "cases": 3,
        "pass": 1,
        "fail": 1,
        "skip": 1,
        "outcomes": {"FAIL": 1, "CHECK": 0, "NOTE": 0, "OK": 1, "SKIP": 1},
    }
    assert [c["outcome"] for c in document["cases"]] == ["OK", "FAIL", "SKIP"]
    failed = document["cases"][1]
    assert failed["name"] == NAME
    assert failed["findings"] == [
        {
            "size_bytes": 1024,
            "metric": "time_us",
            "value": 2500.0,
            "limit": 1000.0,
            "baseline": None,
        }
    ]


# As check() and the CLI give it: with the --tag values (hostile too) and the time.
TAGGED = dataclasses.replace(
    RESULT, tags={"cluster": 'a3 "x"\\\n', "job": "7"}, seconds=2.5
)


def test_junit_is_valid_xml_with_one_suite_per_rule() -> None:
    root = ET.fromstring(to_junit(RESULT))
    assert root.get("tests") == "3"
    assert root.get("failures") == "1"
    assert root.get("time") is None  # not measured
    assert ET.fromstring(to_junit(TAGGED)).get("time") == "2.500"
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {
        "ncclparse.check.integrity",
        "ncclparse.check.latency",
        "ncclparse.check.slow-host",
    }
    [case] = suites["ncclparse.check.latency"].iter("testcase")
    assert case.get("name") == NAME.replace("\n", "\\n").replace("\x07", "\\x07")
    assert case.find("failure") is not None


def test_prometheus_textfile() -> None:
    """Cases counted by identity, never by log (the hostile name is a log's series:
    it is no label); tags escaped; the check's own metrics without labels."""
    tags = 'cluster="a3 \\"x\\"\\\\\\n",tag_job="7"'
    assert to_prometheus(TAGGED, timestamp=1_700_000_000.0) == (
        "# HELP ncclparse_check_info The check's --tag values and ncclparse's "
        "version (always 1).\n"
        "# TYPE ncclparse_check_info gauge\n"
        f'ncclparse_check_info{{{tags},version="{ncclparse.__version__}"}} 1\n'
        "# HELP ncclparse_check_passed 1 when every check case passed.\n"
        "# TYPE ncclparse_check_passed gauge\n"
        "ncclparse_check_passed 0\n"
        "# HELP ncclparse_check_cases Check cases by status.\n"
        "# TYPE ncclparse_check_cases gauge\n"
        'ncclparse_check_cases{status="pass"} 1\n'
        'ncclparse_check_cases{status="fail"} 1\n'
        'ncclparse_check_cases{status="skip"} 1\n'
        "# HELP ncclparse_check_outcomes Check cases by outcome: FAIL fails the "
        "check, CHECK passes but is worth a look, NOTE and OK pass, SKIP judged "
        "nothing.\n"
        "# TYPE ncclparse_check_outcomes gauge\n"
        'ncclparse_check_outcomes{outcome="FAIL"} 1\n'
        'ncclparse_check_outcomes{outcome="CHECK"} 0\n'
        'ncclparse_check_outcomes{outcome="NOTE"} 0\n'
        'ncclparse_check_outcomes{outcome="OK"} 1\n'
        'ncclparse_check_outcomes{outcome="SKIP"} 1\n'
        "# HELP ncclparse_check_runs Benchmark runs read (one integrity case each).\n"
        "# TYPE ncclparse_check_runs gauge\n"
        "ncclparse_check_runs 1\n"
        "# HELP ncclparse_check_case_failed Failed check cases of this rule and "
        "identity (collective, nodes, ranks).\n"
        "# TYPE ncclparse_check_case_failed gauge\n"
        f'ncclparse_check_case_failed{{{tags},rule="integrity"}} 0\n'
        f'ncclparse_check_case_failed{{{tags},rule="latency",collective="all_reduce"}} 1\n'
        f'ncclparse_check_case_failed{{{tags},rule="slow-host",name="hosts"}} 0\n'
        "# HELP ncclparse_check_case_judged Check cases of this rule and identity "
        "(collective, nodes, ranks).\n"
        "# TYPE ncclparse_check_case_judged gauge\n"
        f'ncclparse_check_case_judged{{{tags},rule="integrity"}} 1\n'
        f'ncclparse_check_case_judged{{{tags},rule="latency",collective="all_reduce"}} 1\n'
        f'ncclparse_check_case_judged{{{tags},rule="slow-host",name="hosts"}} 1\n'
        "# HELP ncclparse_check_failed_hosts Failed check cases of runs on these "
        "hosts (present only while failing).\n"
        "# TYPE ncclparse_check_failed_hosts gauge\n"
        f'ncclparse_check_failed_hosts{{{tags},rule="latency",hosts="node1",'
        'collective="all_reduce"} 1\n'
        "# HELP ncclparse_check_duration_seconds How long the check took: reading "
        "the logs and the history, judging.\n"
        "# TYPE ncclparse_check_duration_seconds gauge\n"
        "ncclparse_check_duration_seconds 2.5\n"
        "# HELP ncclparse_check_timestamp_seconds When the check ran.\n"
        "# TYPE ncclparse_check_timestamp_seconds gauge\n"
        "ncclparse_check_timestamp_seconds 1700000000.0\n"
    )


def test_markdown_leads_with_the_worst() -> None:
    """A case to CHECK that came first in check order was listed before a FAIL; the
    report (and the summary line) lead with the failures."""
    mixed = dataclasses.replace(RESULT, cases=(TO_CHECK.cases[1], *RESULT.cases[1:]))
    rows = [ln for ln in to_markdown(mixed).splitlines() if ln.startswith("| ")]
    assert [row.split(" | ")[:2] for row in rows[2:]] == [
        ["| FAIL", "latency"],
        ["| CHECK", "verdict"],
    ]


def test_text_leads_with_the_worst() -> None:
    """Standard output listed a case to CHECK that came first in check order before
    a FAIL; it leads with the failures, as Markdown and the report do, and with
    ``verbose`` the other cases come after both, in check order."""
    mixed = dataclasses.replace(RESULT, cases=(TO_CHECK.cases[1], *RESULT.cases[1:]))
    assert to_text(mixed) == (
        "FAIL latency: time_us above 1 ms at 1 of 3 sizes\n"
        "CHECK verdict: a.log run 0 (hosts node1): CHECK printed busbw disagrees "
        "with the recomputed one\n"
        "FAIL: 1 failed, 0 passed, 1 to check, 1 skipped\n"
    )
    lines = to_text(mixed, verbose=True).splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "FAIL latency",
        "CHECK verdict",
        "SKIP slow-host",
        "FAIL",
    ]


def test_markdown_table_escapes_cells() -> None:
    text = to_markdown(RESULT)
    assert text.startswith("## ncclparse check: FAIL\n")
    [row] = [ln for ln in text.splitlines() if ln.startswith("| FAIL | latency")]
    # One line, the pipe and the markup backslashed: literal text in any renderer;
    # the bell shown as an escape (its own backslash backslashed).
    assert row == (
        '| FAIL | latency | all\\_reduce \\| \\<b\\>"x"\\</b\\> next\\\\x07 | '
        "time\\_us above 1 ms at 1 of 3 sizes |"
    )


def test_comparison_renderings() -> None:
    row = CompareRow("all_reduce float32 sum", 2**30, 100.0, 125.0, -0.2, "regression")
    found = Comparison((row,), ("x 8 B",), (), 0.05, "regression", -0.2)
    text = render_comparison(found, "text").splitlines()
    [verdict] = [line for line in text if line.startswith("verdict: ")]
    assert verdict == (
        "verdict: regression (threshold 5%, geometric mean busbw change -20.0%)"
    )
    assert text.index(verdict) == 0  # the verdict comes first
    [series] = [line for line in text if line.startswith("all_reduce float32 sum ")]
    assert series.split() == [
        "all_reduce", "float32", "sum", "1", "GiB", "-", "-", "-20.0", "100.00",
        "125.00", "-", "-", "regression",
    ]  # fmt: skip
    [only] = [line for line in text if line.startswith("only in the baseline: ")]
    assert only == "only in the baseline: x 8 B"
    assert text.index(series) < text.index(only) == len(text) - 1  # the last line
    md = render_comparison(found, "md").splitlines()
    [md_series] = [
        line for line in md if line.startswith("| all\\_reduce float32 sum |")
    ]
    assert md_series == (
        "| all\\_reduce float32 sum | 1 GiB | - | - | -20.0 | 100.00 | 125.00 "
        "| - | - | regression |"
    )
    assert json.loads(render_comparison(found, "json"))["verdict"] == "regression"
    with pytest.raises(ValueError, match="unknown format 'markdown'"):
        render_comparison(found, "markdown")


ERROR = error_result("history: cannot read history: <bad> & worse")


def test_a_check_that_could_not_complete_renders_as_failed() -> None:
    assert not ERROR.passed
    document = json.loads(to_json(ERROR))
    assert (document["status"], document["error"]) == (
        "fail",
        "history: cannot read history: <bad> & worse",
    )
    assert document["summary"] == {
        "cases": 1,
        "pass": 0,
        "fail": 1,
        "skip": 0,
        "outcomes": {"FAIL": 1, "CHECK": 0, "NOTE": 0, "OK": 0, "SKIP": 0},
    }
    assert [(c["rule"], c["name"]) for c in document["cases"]] == [
        ("error", "ncclparse check")
    ]
    root = ET.fromstring(to_junit(ERROR))
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == (
        "1",
        "0",
        "1",
    )
    [error] = root.iter("error")
    assert error.get("message") == error.text == ERROR.error
    assert root.find(".//failure") is None
    lines = to_prometheus(ERROR).splitlines()
    assert "ncclparse_check_passed 0" in lines
    assert 'ncclparse_check_case_failed{rule="error",name="ncclparse check"} 1' in lines
    assert to_markdown(ERROR) == (
        "## ncclparse check: FAIL\n\n"
        "The check could not complete: history: cannot read history: \\<bad\\> \\& "
        "worse\n\n"
        "FAIL: 1 failed, 0 passed, 0 skipped\n\n"
        "| outcome | rule | case | details |\n| --- | --- | --- | --- |\n"
        "| FAIL | error | ncclparse check | history: cannot read history: \\<bad\\> \\& worse |\n"
    )
    assert (
        "<p>The check could not complete: history: cannot read history: "
        "&lt;bad&gt; &amp; worse</p>"
    ) in error_html(ERROR.error or "")


def test_a_completed_check_says_no_error() -> None:
    assert json.loads(to_json(RESULT))["error"] is None
    assert ET.fromstring(to_junit(RESULT)).get("errors") == "0"


def test_outputs_are_written_all_or_nothing(tmp_path: Path) -> None:
    kept = tmp_path / "check.prom"
    kept.write_text("ncclparse_check_passed 1\n")
    missing = tmp_path / "no-such-dir" / "check.json"
    with pytest.raises(NcclParseError, match="cannot write: No such file"):
        write_all({kept: "ncclparse_check_passed 0\n", missing: "{}\n"})
    assert kept.read_text() == "ncclparse_check_passed 1\n"  # not replaced alone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["check.prom"]  # no .tmp
    write_all({kept: "a\n", tmp_path / "b.md": "b\n"})
    assert (kept.read_text(), (tmp_path / "b.md").read_text()) == ("a\n", "b\n")


def test_outputs_written_in_pieces_are_the_whole_texts(tmp_path: Path) -> None:
    """JUnit and JSON written a suite and a case at a time: the same bytes as
    their whole texts, hosts and a check without cases too."""
    evidence = (RunScore("a.log", 0, 0.5, ("node1", "node2")),)
    slow = HostScore("node1", 3, 3, 0.5, 1.0, 0.5, True, ("node2",), evidence)
    for result in (
        dataclasses.replace(RESULT, hosts=(slow,), seconds=2.0),
        dataclasses.replace(RESULT, cases=()),
        error_result('cannot <read> & "parse"'),
    ):
        paths = {
            "junit": tmp_path / "check.xml",
            "json_path": tmp_path / "check.json",
            "prometheus": tmp_path / "check.prom",
            "markdown": tmp_path / "check.md",
        }
        whole = render_outputs(result, **paths, timestamp=1.0, roots=("a",))
        write_all(output_pieces(result, **paths, timestamp=1.0, roots=("a",)))
        assert {path: path.read_text() for path in whole} == whole
        assert whole[paths["junit"]] == to_junit(result, roots=("a",))
        assert whole[paths["json_path"]] == to_json(result)


def test_an_error_making_a_piece_leaves_every_file_as_it_was(tmp_path: Path) -> None:
    """A piece that cannot be made (a bug) once another file is written: no file
    replaced, no temporary file left, and the error raised as it is, not as a file
    that cannot be written."""
    kept = tmp_path / "check.prom"
    kept.write_text("ncclparse_check_passed 1\n")

    def broken() -> Iterator[str]:
        yield "{"
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        write_all({kept: "ncclparse_check_passed 0\n", tmp_path / "c.json": broken()})
    assert kept.read_text() == "ncclparse_check_passed 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["check.prom"]


def test_size_lists_lead_with_the_largest_sizes() -> None:
    """A regression at 31 sizes names the 8 GiB busbw drop first, not "26 more"."""
    from ncclparse.health.cases import by_importance, sizes

    small = [SizeMiss(8 << i, "time_us", 226.0, 25.0, 21.0) for i in range(29)]
    large = [
        SizeMiss(4 << 30, "busbw_gbps", 250.0, 320.0, 338.0),
        SizeMiss(8 << 30, "busbw_gbps", 204.0, 321.0, 339.0),
    ]
    ordered = by_importance([*small, *large])
    assert [f.size_bytes for f in ordered[:3]] == [8 << 30, 4 << 30, 2 << 30]
    assert sizes(ordered, lambda f: f"{f.value:g} vs {f.baseline:g}") == (
        "8 GiB (8589934592 B) 204 vs 339, 4 GiB (4294967296 B) 250 vs 338, "
        "2 GiB (2147483648 B) 226 vs 21, 1 GiB (1073741824 B) 226 vs 21, "
        "512 MiB (536870912 B) 226 vs 21 and 26 more (down to 8 B 226 vs 21)"
    )


def test_verdicts_and_cases_share_one_vocabulary() -> None:
    """A verdict's level and a case's outcome are the same words; a CHECK and a NOTE
    pass, as JUnit and the JSON's status say."""
    from ncclparse.health.outcomes import OUTCOMES
    from ncclparse.health.verdict import LABELS

    assert {level: label for level, (label, _) in LABELS.items()} == {
        "ok": "OK",
        "info": "NOTE",
        "warn": "CHECK",
        "bad": "FAIL",
    }
    assert [Case("r", "n", o, "m").status for o in OUTCOMES] == [
        "fail",
        "pass",
        "pass",
        "pass",
        "skip",
    ]


def test_series_of_runs_read_from_codes_as_from_text() -> None:
    """Each run's series in order of appearance, a null key the same as an empty
    one (as their text reads), two chunks with dictionaries of their own (the rows
    kept for the outputs, batch by batch) read as one."""
    from ncclparse.report import check_outputs

    def rows(run: int, redops: list[str | None], roots: list[int | None]) -> pa.Table:
        n = len(redops)
        table = pa.table(
            {
                "source": ["a.log"] * n,
                "run": [run] * n,
                "tool": ["nccl-tests"] * n,
                "collective": ["all_reduce", *["broadcast"] * (n - 1)],
                "dtype": ["float"] * n,
                "redop": pa.array(redops, pa.string()),
                "root": pa.array(roots, pa.int32()),
                "placement": ["out-of-place"] * n,
                "nranks": pa.array([16] * n, pa.int32()),
                "nnodes": pa.array([2] * n, pa.int32()),
            }
        )
        at = table.schema.get_field_index("redop")
        return table.set_column(at, "redop", pc.dictionary_encode(table["redop"]))

    both = pa.concat_tables(
        [rows(0, ["sum", None], [None, 0]), rows(1, ["sum", "", None], [None, 0, 0])]
    )
    result = CheckResult((), (), Analysis(both, pa.table({}), ()))
    shapes = [
        ("all_reduce float sum out-of-place 16 ranks on 2 nodes", "all_reduce", "2", "16"),
        ("broadcast float out-of-place 16 ranks on 2 nodes root 0", "broadcast", "2", "16"),
    ]  # fmt: skip
    assert check_outputs._series(result) == {("a.log", 0): shapes, ("a.log", 1): shapes}
