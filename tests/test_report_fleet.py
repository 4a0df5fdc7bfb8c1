"""A fleet's night on one page: a pairwise sweep of many logs through ``report DIR``
and ``check DIR --report`` (docs/report.md, "Many runs: the overview").

The night is the real 2-node H100 log renamed to the first pairs of a 64-node
pairwise sweep, one ``nodeAAA-nodeBBB/all_reduce.log`` each, every pair up to 1 %
faster or slower, two pairs 40 % slower (tests/_derive.py, :func:`fleet_night`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import ncclparse
from ncclparse.cli.app import cli
from ncclparse.health import check as judging
from ncclparse.health import nightly
from ncclparse.health.check import check
from ncclparse.health.rules import DEFAULT_RULES
from ncclparse.inputs import points
from ncclparse.report import build_context, context, render_report
from tests import _derive
from tests.test_memory import peak_rss_mb

LOGS = 200
SLOW = {(0, 5): 1.4, (3, 17): 1.4}
# Sections drawn: fewer than the 100 of a real page, which take most of its time.
DETAILED = 12


def _name(pair: tuple[int, int]) -> str:
    return f"node{pair[0]:03d}-node{pair[1]:03d}/all_reduce.log"


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The page of ``report DIR`` and of ``check DIR --report``, by command."""
    root = tmp_path_factory.mktemp("fleet")
    night = root / "night"
    _derive.fleet_night(night, LOGS, SLOW)
    runner = CliRunner()
    found = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(context, "DETAILED_RUNS", DETAILED)
        for command, args, status in (
            ("report", ["report", "-q", str(night), "-o"], 0),
            ("check", ["check", "-q", str(night), "--report"], 1),
        ):
            page = root / f"{command}.html"
            result = runner.invoke(cli, [*args, str(page)])
            assert result.exit_code == status, result.output
            found[command] = page.read_text()
    return found


def _section(page: str, name: str) -> str:
    start = page.index(f'<section id="{name}">')
    return page[start : page.index("</section>", start)]


def _overview_runs(page: str) -> list[tuple[str, str]]:
    """(verdict, run) of each overview row, in order."""
    rows = re.findall(
        r'<td data-label="verdict">.*?</span> (\w+)</span></td>'
        r'<td data-label="run" class="mono run">.*?>([^<]+)</(?:a|span)>',
        _section(page, "overview"),
    )
    return [(verdict, run) for verdict, run in rows]


@pytest.mark.slow  # the night's two pages, drawn once: ~10 s
def test_every_run_is_in_the_overview_the_slow_pairs_first(
    pages: dict[str, str],
) -> None:
    pairs = [(a, b) for a in range(64) for b in range(a + 1, 64)][:LOGS]
    for page in pages.values():
        listed = _overview_runs(page)
        assert len(listed) == LOGS
        assert sorted(run for _, run in listed) == sorted(
            f"{_name(p)} (run 0)" for p in pairs
        )
        assert listed[:2] == [
            ("FAIL", "node000-node005/all_reduce.log (run 0)"),
            ("FAIL", "node003-node017/all_reduce.log (run 0)"),
        ]
        assert {verdict for verdict, _ in listed[2:]} == {"NOTE"}
        assert f"{LOGS} runs: " in page
        assert '<a href="#overview-fail" class="badge bad">2 FAIL</a>' in page


@pytest.mark.slow  # the night's two pages, drawn once: ~10 s
def test_a_slow_pair_says_how_far_below_the_night_it_is(
    pages: dict[str, str],
) -> None:
    """The cohort judgement of check, on both pages: the run's busbw against the
    median of the others of its shape."""
    for page in pages.values():
        why = re.findall(r'<td data-label="why" class="why">([^<]*)</td>', page)
        assert why[0] == (
            "all_reduce float32 sum out-of-place 16 ranks on 2 nodes (NVIDIA H100 "
            "80GB HBM3): bus bandwidth 241.6 GB/s at 8 GiB is 28.7% below the "
            "median of the 199 other runs of its shape tonight (338.8 GB/s; limit "
            "15%); 11 more sizes down to 4 MiB"
        )


@pytest.mark.slow  # the night's two pages, drawn once: ~10 s
def test_the_heatmap_has_every_host(pages: dict[str, str]) -> None:
    """The first 200 pairs reach every one of the 64 hosts (node000's pairs)."""
    for page in pages.values():
        heatmap = page[page.index("Pairs of hosts") :]
        heatmap = heatmap[: heatmap.index("</figure>")]
        hosts = set(re.findall(r">(node\d{3})<", heatmap))
        assert hosts == {f"node{n:03d}" for n in range(64)}
        assert f"{LOGS} of 2016 pairs measured" in heatmap


@pytest.mark.slow  # the night's two pages, drawn once: ~10 s
def test_sections_only_for_the_most_telling_runs(pages: dict[str, str]) -> None:
    """Of 200 runs, DETAILED get a section: the slow pairs (FAIL) among them."""
    for page in pages.values():
        titles = re.findall(
            r'<section id="run\d+" class="run">\n<h2>.*?<span class="mono">'
            r"[^<]*/night/([^<]+) \(run 0\)</span></h2>",
            page,
        )
        assert len(titles) == DETAILED
        assert {_name(pair) for pair in SLOW} <= set(titles)
        assert f"{DETAILED} of the {LOGS} runs have a section below" in page


@pytest.mark.slow  # the night's two pages, drawn once: ~10 s
def test_report_and_check_report_draw_the_same_page(pages: dict[str, str]) -> None:
    """The same overview, heatmap and run sections; check --report adds its own
    section of cases."""
    report, checked = pages["report"], pages["check"]
    # The same but for the page's contents line, which links to the checks too.
    contents = re.compile(r"<nav.*?</nav>", re.S)
    overview = [contents.sub("", _section(p, "overview")) for p in (report, checked)]
    assert overview[0] == overview[1]
    assert "Pairs of hosts" in overview[0]
    for page in (report, checked):
        assert page.count('<section id="run') == DETAILED
    runs = re.compile(r'<section id="run\d+".*?</section>', re.S)
    assert runs.findall(report) == runs.findall(checked)
    assert '<section id="checks">' not in report
    cases = _section(checked, "checks")
    assert cases.count("cohort</span>") == 4  # two pairs, both placements


@pytest.mark.parametrize("checked", [False, True], ids=["report", "check"])
def test_a_night_judged_in_batches_is_the_page_judged_at_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, checked: bool
) -> None:
    """Runs analysed and judged in batches of whole runs (as check judges them),
    the sections' runs analysed again on their own, give the page of every run
    analysed at once, byte for byte: the overview, the cohort's verdicts, the
    sections of the most telling runs (the slow pair among them) and the cases."""
    night = tmp_path / "night"
    _derive.fleet_night(night, 30, {(0, 5): 1.4, (0, 20): 1.4})
    result = ncclparse.parse_many([str(p) for p in sorted(night.rglob("*.log"))])
    found = None if not checked else check(result, DEFAULT_RULES)
    monkeypatch.setattr(context, "DETAILED_RUNS", 4)

    def page() -> str:
        return render_report(build_context(result, check=found))

    at_once = page()
    # 30 runs of 62 rows in batches of at most 400 rows: 6 runs each, 5 batches.
    batches = list(judging.run_batches(result.measurements, result.runs))
    assert len(batches) == 1
    monkeypatch.setattr(judging, "JUDGE_ROWS", 400)
    monkeypatch.setattr(context, "JUDGE_ROWS", 400)
    batches = list(judging.run_batches(result.measurements, result.runs))
    assert [b.num_rows for _, b in batches] == [6] * 5
    assert page() == at_once
    assert at_once.count('<section id="run') == 4
    assert "node000-node005/all_reduce.log (run 0)</span></h2>" in at_once
    assert '<a href="#overview-fail" class="badge bad">2 FAIL</a>' in at_once


def test_check_report_of_merged_points_draws_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Past the rows a check keeps as they are, its points wait in a temporary file
    unless a page is drawn: check --report keeps them, so its page has the runs'
    points, the heatmap and the sections that report draws (it had none)."""
    night = tmp_path / "night"
    _derive.fleet_night(night, 12, {(0, 5): 1.4})
    monkeypatch.setattr(nightly, "CHECK_LIMITS", (4, 4_000_000))
    monkeypatch.setattr(context, "DETAILED_RUNS", 3)
    pages = {}
    for command, args in (("report", ["-o"]), ("check", ["--report"])):
        page = tmp_path / f"{command}.html"
        result = CliRunner().invoke(cli, [command, "-q", str(night), *args, str(page)])
        assert result.exit_code in (0, 1), result.output
        pages[command] = page.read_text()
    overview = [_section(p, "overview") for p in pages.values()]
    contents = re.compile(r"<nav.*?</nav>", re.S)
    assert contents.sub("", overview[0]) == contents.sub("", overview[1])
    assert "Pairs of hosts" in overview[1]
    runs = re.compile(r'<section id="run\d+".*?</section>', re.S)
    assert runs.findall(pages["check"]) == runs.findall(pages["report"])
    assert "node000-node005/all_reduce.log (run 0)</span></h2>" in pages["check"]


def test_check_report_of_a_repeated_sweep_draws_reports_points(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A sweep repeated (nccl-tests -N) past the rows a report draws as they are,
    short of those a check judges as they are: check --report draws the merged
    points report draws, not every repeat (800 repeats once drew 99,000 table
    rows, a 48 MB page in 158 s)."""
    log = tmp_path / "repeated.log"
    log.write_text(_derive.repeat_sweep(_derive.healthy(), 3))  # 3 x 62 rows
    monkeypatch.setattr(points, "REPORT_LIMITS", (100, 4_000_000))
    pages = {}
    for command, args in (("report", ["-o"]), ("check", ["--report"])):
        page = tmp_path / f"{command}.html"
        result = CliRunner().invoke(cli, [command, "-q", str(log), *args, str(page)])
        assert result.exit_code == 0, result.output
        pages[command] = page.read_text()
    runs = re.compile(r'<section id="run\d+".*?</section>', re.S)
    [section] = runs.findall(pages["report"])
    assert runs.findall(pages["check"]) == [section]
    merged = "186 measurements of 62 points (a sweep repeated): merged for judging"
    assert merged in _section(pages["check"], "messages")


def test_check_report_past_the_limit_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """More points than a report draws: exit 2 naming the limit, every output a
    failed check saying why (no passing page left from the night before)."""
    _derive.fleet_night(tmp_path / "night", 3)
    monkeypatch.setattr(points, "REPORT_LIMITS", (5_000, 150))
    page, junit = tmp_path / "r.html", tmp_path / "j.xml"
    page.write_text("yesterday: passed")
    night = str(tmp_path / "night")
    result = CliRunner().invoke(
        cli, ["check", "-q", night, "--report", str(page), "--junit", str(junit)]
    )
    assert result.exit_code == 2
    said = (
        "--report: the inputs hold 186 distinct measurement points, more than a "
        "report draws (150); leave out --report, or report fewer logs at a time"
    )
    assert result.output.splitlines()[-1] == f"Error: {said}"
    assert said in page.read_text()
    assert "passed" not in page.read_text()
    assert said in junit.read_text()


def test_the_help_names_the_limit_report_applies() -> None:
    """The limit in the help is the constant the command reads: 4,000,000 points,
    what check takes too, so check --report refuses nothing check judges."""
    assert points.REPORT_LIMITS[1] == points.CHECK_LIMITS[1] == 4_000_000
    said = CliRunner().invoke(cli, ["report", "--help"], terminal_width=200).output
    assert (
        "when no input could be read, no page is written (an existing one is left "
        "as it was), nor past 4,000,000 distinct measurement points (exit 2: far "
        "more than a night's sweep)."
    ) in " ".join(said.split())


def _page_code(command: str, night: Path, page: Path | None) -> str:
    """A child's code running ``ncclparse COMMAND -q NIGHT`` with the page written
    to ``page`` (None: ``check`` alone)."""
    option = [] if page is None else ["--report" if command == "check" else "-o"]
    args = ["ncclparse", command, "-q", str(night), *option]
    args += [] if page is None else [str(page)]
    return (
        "import sys\n"
        "from ncclparse.cli.app import cli\n"
        f"sys.argv = {args!r}\n"
        "try:\n"
        "    cli()\n"
        "except SystemExit as stop:\n"
        "    assert stop.code in (0, 1), stop.code\n"
    )


FOUR = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")


@pytest.fixture(scope="module")
def fleet_nights(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """2,000 logs of all_reduce, and a whole sweep of four collectives (8,064 logs:
    124,000 and 499,968 points), written once for both commands."""
    root = tmp_path_factory.mktemp("nights")
    nights = (root / "all_reduce", root / "four")
    _derive.fleet_night(nights[0], 2000, SLOW, FOUR[:1])
    _derive.fleet_night(nights[1], 2016, SLOW, FOUR)
    return nights


@pytest.mark.slow
@pytest.mark.parametrize("command", ["report", "check"])
def test_a_night_of_four_collectives_is_drawn_in_bounded_memory(
    command: str, fleet_nights: tuple[Path, Path], tmp_path: Path
) -> None:
    """``report`` draws both nights in less than 1 GB, the 4x points adding less
    than 0.5 GB (their parsed rows, about 0.8 KB a point as the parser holds them,
    and each run's overview row); ``check --report`` less than 1 GB, adding less
    than 0.5 GB to the check alone at 8,064 logs (the check keeps its points in a
    temporary file and judges them in forked children; with a page it keeps the
    parsed rows and judges in this process, the page analysed in the check's
    batches: what it keeps of a run is its overview row). Measured: report 391
    and 776 MB; check --report 424 and 833 MB, 337 MB over the check at 8,064
    logs, then 452 and 876 MB, 453 MB over a check that forks (73 MB less)."""
    peaks = []
    for night in fleet_nights:
        page = tmp_path / f"{command}-{night.name}.html"
        peaks.append(peak_rss_mb(_page_code(command, night, page)))
        assert "node003-node017/all_reduce.log" in page.read_text()
    assert max(peaks) < 1024, peaks
    if command == "report":
        assert peaks[1] - peaks[0] < 500, peaks
    else:
        added = peaks[1] - peak_rss_mb(_page_code(command, fleet_nights[1], None))
        assert added < 500, (peaks, added)
