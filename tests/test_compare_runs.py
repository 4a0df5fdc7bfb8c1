"""compare and trend per run identity: one slow host pair of three is caught.

Logs are derived from the real 2-node H100 log (tests/_derive.py), as the nightly
recipe's (tests/test_nightly_recipe.py): one per pair of three hosts, renamed to the
pair. For compare, each pair keeps its own jitter (+-1.5 % per size) every night, so a
healthy pair changes by exactly 0 and node01_node03, at 0.6x the bus bandwidth from
1 MiB up on night 2 (times / 0.6), by -40.0 % at every size from 1 MiB (the printed
times round to 0.1 us, far below 0.05 %). For trend, the jitter changes with the
night too. Below 1 MiB the 2-digit bandwidths _derive.scale re-prints would no longer
match size and time, so sizes below stay as they are.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclparse.cli.app import cli
from ncclparse.health.compare import compare
from ncclparse.inputs.sides import load_side, run_identity
from ncclparse.report.comparison import render_comparison
from ncclparse.report.trend import trend_of
from tests import _derive as derive
from tests.test_memory import long_run, peak_rss_mb

HOSTS = ("node01", "node02", "node03")
PAIRS = [(a, b) for i, a in enumerate(HOSTS) for b in HOSTS[i + 1 :]]
BAD = ("node01", "node03")
MIB = 2**20
SERIES = "all_reduce float32 sum {} 16 ranks on 2 nodes"


def _night(
    directory: Path,
    slow: tuple[str, str] | None,
    seed: Callable[[int], int] = lambda pair: pair,
) -> Path:
    """The night's log of each pair in ``directory``: the real log renamed to the
    pair, with the jitter of ``seed(pair index)``; ``slow`` at 0.6x from 1 MiB."""
    directory.mkdir(parents=True)
    for i, (a, b) in enumerate(PAIRS):
        jitter = derive.jitter(seed(i))
        slower = 1 / 0.6 if (a, b) == slow else 1.0

        def factor(
            size: int, jitter: Callable[[int], float] = jitter, slower: float = slower
        ) -> float:
            return (slower if size >= MIB else 1.0) * jitter(size)

        names = dict(zip(derive.HOSTS, (a, b), strict=True))
        text = derive.scale(derive.rename_hosts(derive.healthy(), names), factor)
        (directory / f"{a}_{b}.log").write_text(text)
    return directory


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("nights")
    return _night(root / "night1", None), _night(root / "night2", BAD)


def test_run_identity_is_the_sorted_host_set() -> None:
    assert run_identity(["node03"] * 8 + ["node01"] * 7 + [None]) == "node01_node03"
    assert run_identity([None, None]) == ""
    assert run_identity(None) == ""


def test_one_slow_pair_is_a_regression_the_median_hides(
    nights: tuple[Path, Path],
) -> None:
    base, cand = (load_side(str(n), jobs=1) for n in nights)
    found = compare(base, cand)
    assert found.verdict == "regression"
    assert found.geomean_change is not None
    assert abs(found.geomean_change) < 0.01  # the median of three: no change
    # Each size from 1 MiB regressed through its worst run; below, all the same.
    for row in found.rows:
        if row.size_bytes >= MIB:
            assert (row.verdict, row.worst_run) == ("regression", "node01_node03")
            assert row.worst_change is not None
            assert round(row.worst_change, 3) == -0.4
            assert abs(row.change) < 0.05  # the median alone would say "same"
        else:
            assert row.verdict == "same"
    # Per run: the bad pair regressed in both series, the healthy pairs are same.
    verdicts = sorted((r.run, r.series, r.verdict) for r in found.runs)
    assert verdicts == [
        ("node01_node02", SERIES.format("in-place"), "same"),
        ("node01_node02", SERIES.format("out-of-place"), "same"),
        ("node01_node03", SERIES.format("in-place"), "regression"),
        ("node01_node03", SERIES.format("out-of-place"), "regression"),
        ("node02_node03", SERIES.format("in-place"), "same"),
        ("node02_node03", SERIES.format("out-of-place"), "same"),
    ]
    assert {r.change for r in found.runs if r.run != "node01_node03"} == {0.0}
    assert found.missing_runs == found.new_runs == ()


def test_cli_names_the_pair_and_fails(nights: tuple[Path, Path]) -> None:
    args = ["compare", *map(str, nights), "-j", "1", "--fail-on-regression"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 3, done.output
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "verdict: regression (threshold 5%, geometric mean busbw change -0.3%, "
        "worst run node01_node03 -40.0%)"
    )
    regressed = [line for line in lines if line.startswith("  node01_node03: ")]
    assert len(regressed) == 2
    assert all(": busbw change -40.0 % (time " in line for line in regressed)
    assert all(line.endswith(": regression") for line in regressed)
    healthy = [
        line
        for line in lines
        if line.startswith("  node0") and not line.startswith("  node01_node03")
    ]
    assert [line.rsplit(": ", 1)[1] for line in healthy] == ["same"] * 4
    # stderr names the run that failed the comparison.
    failed = done.stderr.splitlines()
    assert len(failed) == 2
    assert all(
        line.startswith("Regressed: node01_node03: all_reduce float32 sum ")
        and ": busbw change -40.0 % (time " in line
        for line in failed
    )


def test_every_format_shows_the_worst_run(nights: tuple[Path, Path]) -> None:
    base, cand = (load_side(str(n), jobs=1) for n in nights)
    found = compare(base, cand)
    document = json.loads(render_comparison(found, "json"))
    [gib] = [
        r
        for r in document["rows"]
        if r["size_bytes"] == 2**30 and "out-of-place" in r["series"]
    ]
    assert (gib["worst_run"], round(gib["worst_change"], 3)) == ("node01_node03", -0.4)
    assert document["runs"][0]["run"] == "node01_node03"
    markdown = render_comparison(found, "md")
    assert markdown.splitlines()[0].endswith(", worst run node01_node03 -40.0%)")
    assert "| node01\\_node03 | -40.0 | regression |" in markdown
    page = render_comparison(found, "html")
    assert ", worst run node01_node03 -40.0 %" in page
    assert '<td>node01_node03</td><td class="num">-40.0</td>' in page


def test_a_missing_pair_is_listed_and_fails(
    nights: tuple[Path, Path], tmp_path: Path
) -> None:
    fewer = tmp_path / "fewer"
    fewer.mkdir()
    for log in nights[0].iterdir():
        if log.name != "node02_node03.log":
            (fewer / log.name).write_text(log.read_text())
    args = ["compare", str(nights[0]), str(fewer), "-j", "1"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[0] == (
        # The median of two runs, not three: a hair's change.
        "verdict: same (threshold 5%, geometric mean busbw change -0.0%, "
        "2 run(s) missing)"
    )
    at = lines.index(
        "missing runs (in the baseline, not in the candidate: a lost measurement):"
    )
    assert lines[at + 1 : at + 3] == [
        f"  node02_node03: {SERIES.format('in-place')}",
        f"  node02_node03: {SERIES.format('out-of-place')}",
    ]
    done = CliRunner().invoke(cli, [*args, "--fail-on-regression"])
    assert done.exit_code == 3
    assert done.stderr.splitlines() == [
        f"Missing from the candidate: node02_node03: {SERIES.format(p)}"
        for p in ("in-place", "out-of-place")
    ]


def test_two_single_logs_are_compared_as_before(nights: tuple[Path, Path]) -> None:
    # Different pairs, one run each: aligned all the same, as two logs always were.
    found = compare(
        load_side(str(nights[0] / "node01_node02.log")),
        load_side(str(nights[1] / "node01_node03.log")),
    )
    assert found.missing_runs == found.new_runs == ()
    assert {r.run for r in found.runs} == {"node01_node02 vs node01_node03"}
    assert found.verdict == "regression"
    text = render_comparison(found, "text").splitlines()
    assert text[0].startswith("verdict: regression (threshold 5%, geometric mean ")
    assert "worst run" not in text[0]  # one run a side: the table says it all
    assert not any(line.startswith("runs, each at") for line in text)


def _seed(night: int, pair: int) -> int:
    return 10 * night + pair


def _history(root: Path) -> Path:
    """Four nights of the three pairs ingested by date, the bad pair slow on the
    fourth; jitter per pair and night."""
    history = root / "history"
    for night in range(1, 5):
        logs = _night(
            root / f"night{night}",
            BAD if night == 4 else None,
            seed=functools.partial(_seed, night),
        )
        done = CliRunner().invoke(
            cli,
            [
                "ingest",
                str(logs),
                "--history",
                str(history),
                "--date",
                f"2026-03-0{night}",
                "-j",
                "1",
                "-q",
            ],
        )
        assert done.exit_code == 0, done.output
    return history


def test_trend_flags_the_slow_pair_on_its_night(tmp_path: Path) -> None:
    history = _history(tmp_path)
    points = trend_of(history).points
    flagged = points[points["flagged"]]
    # The three largest sizes of both series on night 4, each naming the pair.
    assert sorted(flagged["date"].unique()) == ["2026-03-04"]
    assert len(flagged) == 6
    assert set(flagged["worst_run"]) == {"node01_node03"}
    # The median of the night's three runs alone is within the band.
    assert (flagged["busbw"] >= flagged["lower"]).all()
    change = flagged["worst_busbw"] / flagged["worst_median"] - 1
    assert ((change > -0.43) & (change < -0.37)).all()
    output = tmp_path / "trend.html"
    args = ["trend", "--history", str(history), "-o", str(output)]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    assert done.stderr == f"{output}: 2 series over 4 night(s), 6 flagged point(s)\n"
    page = output.read_text()
    assert page.count("<td>node01_node03</td>") == 6
    done = CliRunner().invoke(cli, [*args, "-q"])
    assert (done.exit_code, done.stderr) == (0, "")
    # compare reads the history's runs by their hosts too: every night against
    # the fourth, the slow pair alone regressed.
    found = compare(load_side(str(history)), load_side(str(tmp_path / "night4")))
    assert {(r.run, r.verdict) for r in found.runs} == {
        ("node01_node02", "same"),
        ("node01_node03", "regression"),
        ("node02_node03", "same"),
    }
    assert found.missing_runs == found.new_runs == ()


def test_threshold_takes_a_fraction_or_a_percent_and_prints_percent(
    nights: tuple[Path, Path],
) -> None:
    for given in ("0.025", "2.5%"):
        args = ["compare", *map(str, nights), "-j", "1", "--threshold", given]
        done = CliRunner().invoke(cli, args)
        assert done.exit_code == 0, done.output
        assert done.stdout.startswith("verdict: regression (threshold 2.5%, ")
    done = CliRunner().invoke(cli, ["compare", *map(str, nights), "--threshold", "5"])
    assert done.exit_code == 2
    assert (
        "Invalid value for '--threshold': '5' is not a fraction between 0 and 1 "
        "(0.05) nor a percent between 0% and 100% (5%) (for percent: 5%)"
    ) in done.stderr


def test_quiet_compare_writes_no_summary(
    nights: tuple[Path, Path], tmp_path: Path
) -> None:
    output = tmp_path / "compare.md"
    args = ["compare", *map(str, nights), "-j", "1", "-o", str(output)]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    assert done.stderr == (
        f"{output}: regression (threshold 5%, geometric mean busbw change -0.3%, "
        "worst run node01_node03 -40.0%)\n"
    )
    done = CliRunner().invoke(cli, [*args, "-q"])
    assert (done.exit_code, done.stderr) == (0, "")


@pytest.mark.parametrize(
    "command",
    [
        ["check", "x.log"],
        ["ingest", "--history", "history", "x.log"],
        ["trend", "--history", "history", "-o", "trend.html"],
    ],
)
def test_a_malformed_tag_is_one_usage_error(command: list[str]) -> None:
    done = CliRunner().invoke(cli, [*command, "--tag", "cluster"])
    assert done.exit_code == 2
    assert "Invalid value for '--tag': 'cluster' is not KEY=VALUE" in done.stderr
    help_text = CliRunner().invoke(cli, [command[0], "--help"]).stdout
    assert "--tag KEY=VALUE" in help_text


@pytest.mark.slow
def test_compare_memory_does_not_grow_with_rows(tmp_path: Path) -> None:
    """One run of 300,000 and of 1.2 M rows (a repeated sweep, nccl-tests -N): the
    repeats of a point are merged as they are read, so the peak is the points'."""
    peaks = []
    for lines in (150_000, 600_000):
        path = tmp_path / f"run{lines}.log"
        path.write_text(long_run(lines))
        code = (
            "from ncclparse.cli.app import cli\n"
            f"cli(['compare', {str(path)!r}, {str(path)!r}, '-j', '1'], "
            "standalone_mode=False)\n"
        )
        peaks.append(peak_rss_mb(code))
    # Held as rows, the 900,000 more took 950 MB more (444 and 1,391 MB; 2.2 GB for
    # 1.98 M rows). Merged: 274 and 319 MB alone, up to 353 MB beside other tests.
    assert peaks[1] < 400, peaks
    assert peaks[1] - peaks[0] < 150, peaks
