"""``ncclparse check``, ``ingest`` and ``compare`` end to end on real and derived logs.

Scenarios (issue 6, "Done means"): a healthy history then one degraded size; a
pairwise matrix with one slow host; a truncated log; a missing log; ``#wrong`` > 0;
a history that gives no baseline (other tags, too old, tonight's own logs, empty or
not there yet) and the first night. Each asserts the exit status, the size, host or
message, and that the JUnit, JSON and Prometheus files are valid: the JUnit against the
Jenkins xUnit schema's shape, the JSON against the shipped JSON Schema and the
Prometheus text with prometheus_client's parser, no two samples alike (the validators of
tests/test_monitoring.py; the last two where the test extra is installed). Derived logs
are made by tests/_derive.py from the real 2-node H100 log; each test says which
transformation it applies.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ncclparse.cli.app import cli
from tests import _derive as derive
from tests.conftest import FIXTURES
from tests.test_monitoring import (
    HAVE_JSONSCHEMA,
    HAVE_PROMETHEUS,
    prometheus_samples,
    validate_check_json,
    validate_junit,
)

GIB = 1073741824
EXAMPLE_LOG = (
    Path(__file__).parent.parent / "examples" / "all_reduce_16rank_2node_h100.log"
)
# GCP A3 Mega: 8 x 200 Gb/s per node, not the h100 preset's 8 x 400 Gb/s.
A3_MEGA = ["--profile", "h100", "--inter-bw", "200GB/s"]
# Text exposition format 0.0.4: comments, then `name{labels} value [timestamp]`.
_PROM_LINE = re.compile(
    r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*",?)*\})?'
    r" (-?[0-9.e+-]+|NaN|[+-]Inf)( -?[0-9]+)?$"
)
_PROM_META = re.compile(r"^# (HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*|TYPE [a-zA-Z_:]"
                        r"[a-zA-Z0-9_:]* (counter|gauge|histogram|summary|untyped))$")  # fmt: skip


def _check(
    runner: CliRunner, tmp_path: Path, *args: str
) -> tuple[Result, dict[str, Any]]:
    """Run check with every machine output; validate them; return the JSON."""
    out = {k: tmp_path / f"out.{k}" for k in ("xml", "json", "prom", "md")}
    result = runner.invoke(
        cli,
        ["check", *args, "--junit", str(out["xml"]), "--json", str(out["json"]),
         "--prometheus", str(out["prom"]), "--markdown", str(out["md"])],
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    document = json.loads(out["json"].read_text())
    assert set(document) == {
        "format", "version", "status", "error", "summary", "assumptions", "cases",
        "hosts"
    }  # fmt: skip
    assert document["status"] == ("pass" if result.exit_code == 0 else "fail")
    if HAVE_JSONSCHEMA:
        validate_check_json(document)
    _valid_junit(out["xml"].read_text(), document)
    _valid_prometheus(out["prom"].read_text())
    assert out["md"].read_text().startswith("## ncclparse check: ")
    return result, document


def _valid_junit(text: str, document: dict[str, Any]) -> None:
    root = validate_junit(text)
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == len(document["cases"]) == int(root.get("tests", "-1"))
    failures = root.findall("./testsuite/testcase/failure")
    errors = root.findall("./testsuite/testcase/error")
    assert len(failures) == int(root.get("failures", "-1"))
    assert len(errors) == int(root.get("errors", "-1"))
    assert len(failures) + len(errors) == document["summary"]["fail"]
    for failure in failures + errors:
        assert failure.text
        assert failure.get("message")


def _valid_prometheus(text: str) -> None:
    typed: set[str] = set()
    for line in text.splitlines():
        if line.startswith("#"):
            assert _PROM_META.match(line), line
            if line.startswith("# TYPE"):
                typed.add(line.split()[2])
        else:
            assert _PROM_LINE.match(line), line
            assert re.split(r"[{ ]", line)[0] in typed, line
    if HAVE_PROMETHEUS:
        prometheus_samples(text)


def _failed(document: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    return [c for c in document["cases"] if c["rule"] == rule and c["status"] == "fail"]


def test_a_data_error_fails_two_cases_and_every_count_agrees(
    runner: CliRunner, tmp_path: Path
) -> None:
    """One refused line fails the run's integrity case and its verdict case, each
    naming it; the summary line counts cases as JUnit and Prometheus do (2 failed),
    so a monitor of either rule, and the three counts, agree (docs/check-json.md)."""
    rows = derive.healthy().splitlines(keepends=True)
    at = next(i for i, line in enumerate(rows) if line.lstrip().startswith("256 "))
    rows[at] = rows[at].replace(rows[at].split()[5], "-inf", 1)
    log = tmp_path / "refused.log"
    log.write_text("".join(rows))
    result, document = _check(runner, tmp_path, str(log), *A3_MEGA)
    assert result.exit_code == 1
    refused = (
        f"line {at + 1}: time -inf is not a possible time ('256 64 float sum -1 -inf "
        "0.00 0.00 0 122.7 0.00 0.00 0')"
    )
    failed = [(c["rule"], refused in c["message"]) for c in document["cases"]
              if c["status"] == "fail"]  # fmt: skip
    assert failed == [("integrity", True), ("verdict", True)]
    assert result.stdout.splitlines()[-1] == "FAIL: 2 failed, 2 passed, 1 skipped"
    assert 'failures="2"' in (tmp_path / "out.xml").read_text().splitlines()[1]
    assert 'ncclparse_check_cases{status="fail"} 2' in (
        (tmp_path / "out.prom").read_text()
    )


def test_healthy_real_log_passes(runner: CliRunner, tmp_path: Path) -> None:
    result, document = _check(runner, tmp_path, str(derive.HEALTHY), *A3_MEGA)
    assert result.exit_code == 0
    assert result.stdout.endswith("PASS: 0 failed, 4 passed, 1 skipped\n")
    assert document["summary"] == {
        "cases": 5,
        "pass": 4,
        "fail": 0,
        "skip": 1,
        "outcomes": {"FAIL": 0, "CHECK": 0, "NOTE": 0, "OK": 4, "SKIP": 1},
    }


def test_missing_log_fails_closed(runner: CliRunner, tmp_path: Path) -> None:
    missing = tmp_path / "nightly-0042.log"
    result, document = _check(runner, tmp_path, str(derive.HEALTHY), str(missing))
    assert result.exit_code == 1
    [case] = _failed(document, "input")
    assert case["name"] == str(missing)
    assert f"{missing}: no such file or directory" in result.stdout


@pytest.mark.parametrize("content", ["", "## NCCL TEST RESULT\nnothing ran\n"])
def test_empty_or_unrecognised_input_fails(
    runner: CliRunner, tmp_path: Path, content: str
) -> None:
    log = tmp_path / "empty.log"
    log.write_text(content)
    result, document = _check(runner, tmp_path, str(log))
    assert result.exit_code == 1
    assert [c["name"] for c in _failed(document, "input")] == [str(log)]


def test_real_truncated_log_fails(runner: CliRunner, tmp_path: Path) -> None:
    log = (
        FIXTURES
        / "nccl"
        / "nccl-2441_allreduce_v2.18.3_stepbytes_h100nvl_2node_truncated.log"
    )
    result, document = _check(runner, tmp_path, str(log))
    assert result.exit_code == 1
    [case] = _failed(document, "integrity")
    assert "run truncated" in case["message"]
    assert case["source"] == str(log)


def test_log_cut_mid_table_fails(runner: CliRunner, tmp_path: Path) -> None:
    # Derived: the healthy log cut after the 1 MiB row, as a killed job leaves it.
    log = tmp_path / "killed.log"
    log.write_text(derive.cut(derive.healthy(), 1048576))
    result, document = _check(runner, tmp_path, str(log), *A3_MEGA)
    assert result.exit_code == 1
    [case] = _failed(document, "integrity")
    assert case["hosts"] == list(derive.HOSTS)
    assert "run truncated" in case["message"]


def test_wrong_values_fail_naming_the_size(runner: CliRunner, tmp_path: Path) -> None:
    # Derived: #wrong of the 1 GiB out-of-place row set to 12 (data corruption).
    log = tmp_path / "wrong.log"
    log.write_text(derive.set_wrong(derive.healthy(), GIB, 12))
    result, document = _check(runner, tmp_path, str(log), *A3_MEGA)
    assert result.exit_code == 1
    [case] = _failed(document, "integrity")
    assert "#wrong > 0 at 1 size(s): 1 GiB out-of-place #wrong 12" in case["message"]
    assert case["findings"] == [
        {"size_bytes": GIB, "metric": "wrong", "value": 12.0, "limit": 0.0,
         "baseline": None}
    ]  # fmt: skip


def test_out_of_bounds_failed_fails(runner: CliRunner, tmp_path: Path) -> None:
    # Derived: the footer's "Out of bounds values : 0 OK" replaced by "3 FAILED".
    log = tmp_path / "oob.log"
    text = derive.healthy().replace(": 0 OK", ": 3 FAILED")
    log.write_text(text)
    result, document = _check(runner, tmp_path, str(log), *A3_MEGA)
    assert result.exit_code == 1
    [case] = _failed(document, "integrity")
    assert "out of bounds values: 3 FAILED" in case["message"]


def test_oneccl_check_failure_fails(runner: CliRunner, tmp_path: Path) -> None:
    log = FIXTURES / "oneccl" / "v2021.14_fail_check_max_np4.log"
    result, document = _check(runner, tmp_path, str(log))
    assert result.exit_code == 1
    [case] = _failed(document, "integrity")
    assert "expected 6, got 3" in case["message"]
    assert "run failed" in case["message"]


def test_expected_collective_and_size_absent(runner: CliRunner, tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[expect]\ncollectives = ["all_gather"]\nsizes = ["16GiB"]\n')
    result, document = _check(
        runner, tmp_path, str(derive.HEALTHY), "--rules", str(rules), *A3_MEGA
    )
    assert result.exit_code == 1
    names = [c["message"] for c in _failed(document, "expect")]
    assert names[0].startswith("all_gather: absent from every input")
    assert all("expected size(s) absent: 16 GiB" in n for n in names[1:])
    assert len(names) == 3  # all_gather, then the two placements' series


def _pairwise(tmp_path: Path, slow: str) -> list[str]:
    """Derived: the 2-node log renamed to every pair of 5 hosts (10 runs). Runs that
    include ``slow`` take 1.6x as long from 1 MiB up; the others get +-1.5 % jitter."""
    hosts = [f"node0{i}" for i in range(1, 6)]
    paths: list[str] = []
    for i, a in enumerate(hosts):
        for b in hosts[i + 1 :]:
            text = derive.rename_hosts(
                derive.healthy(), dict(zip(derive.HOSTS, (a, b), strict=False))
            )
            jitter = derive.jitter(len(paths))
            if slow in (a, b):
                text = derive.scale(text, lambda s: 1.6 if s >= 2**20 else 1.0)
            else:
                text = derive.scale(text, jitter)
            path = tmp_path / f"pair_{a}_{b}.log"
            path.write_text(text)
            paths.append(str(path))
    return paths


def test_pairwise_matrix_names_the_slow_host(runner: CliRunner, tmp_path: Path) -> None:
    logs = _pairwise(tmp_path, "node03")
    result, document = _check(runner, tmp_path, *logs, *A3_MEGA)
    assert result.exit_code == 1
    [case] = _failed(document, "slow-host")
    assert case["name"] == "node03"
    assert case["message"].startswith(
        "node03 is slow with every partner: 4 of 4 runs slow"
    )
    ranked = document["hosts"]
    assert ranked[0]["host"] == "node03"
    assert ranked[0]["slow"] is True
    assert [h["host"] for h in ranked if h["slow"]] == ["node03"]
    assert ranked[0]["partners"] == ["node01", "node02", "node04", "node05"]
    prom = (tmp_path / "out.prom").read_text()
    assert 'ncclparse_host_slow{host="node03"} 1' in prom


def _history(runner: CliRunner, tmp_path: Path, nights: int = 8, last: int = 1) -> Path:
    """Derived: ``nights`` healthy runs, each the real log with its own +-1.5 %
    jitter per size, ingested with cluster=a on consecutive dates, the last one
    ``last`` days ago."""
    history = tmp_path / "history"
    for night in range(nights):
        log = tmp_path / f"night{night}.log"
        log.write_text(derive.scale(derive.healthy(), derive.jitter(night)))
        date = _ago(nights - night - 1 + last)
        done = runner.invoke(
            cli,
            ["ingest", str(log), "--history", str(history), "--tag", "cluster=a",
             "--tag", f"job={night}", "--date", date, "-q"],
        )  # fmt: skip
        assert done.exit_code == 0, done.output
    return history


def _ago(days: int) -> str:
    return (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=days)).isoformat()


def test_history_then_one_degraded_size(runner: CliRunner, tmp_path: Path) -> None:
    history = _history(runner, tmp_path)
    # Derived: tonight's log is night 9's jitter with the 1 GiB row 25 % slower
    # (busbw -20 %): beyond the absolute rules' reach, well beyond history's noise.
    tonight = tmp_path / "tonight.log"
    factor = derive.jitter(9)
    tonight.write_text(
        derive.scale(derive.healthy(), lambda s: factor(s) * (1.25 if s == GIB else 1))
    )
    args = [str(tonight), "--history", str(history), "--tag", "cluster=a", *A3_MEGA]
    result, document = _check(runner, tmp_path, *args)
    assert result.exit_code == 1
    failed = _failed(document, "history")
    assert len(failed) == 2  # out-of-place and in-place
    for case in failed:
        assert [f["size_bytes"] for f in case["findings"]] == [GIB]
        assert "at 1 of 31 sizes: 1 GiB (1073741824 B)" in case["message"]
        assert case["hosts"] == list(derive.HOSTS)
    assert not _failed(document, "bandwidth")


def test_history_jitter_does_not_page(runner: CliRunner, tmp_path: Path) -> None:
    history = _history(runner, tmp_path)
    # Derived: tonight is another healthy night with 2 % jitter (wider than history).
    tonight = tmp_path / "tonight.log"
    tonight.write_text(derive.scale(derive.healthy(), derive.jitter(11, 0.02)))
    args = [str(tonight), "--history", str(history), "--tag", "cluster=a", *A3_MEGA]
    result, document = _check(runner, tmp_path, *args)
    assert result.exit_code == 0, result.stdout
    passed = [c for c in document["cases"] if c["rule"] == "history"]
    assert [(c["name"], c["status"]) for c in passed] == [
        ("baseline", "pass"),
        *[(c["name"], "pass") for c in passed[1:]],
    ]
    assert len(passed) == 3  # the baseline, out-of-place and in-place
    assert passed[0]["message"] == (
        f"8 run(s) with cluster=a, on 8 dates from {_ago(8)} to {_ago(1)}, make the "
        "baseline (up to the 20 most recent per size, within 30 days)"
    )


def _baseline(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The history cases of the baseline itself: (name, status, message)."""
    return [
        (c["name"], c["status"], c["message"])
        for c in document["cases"]
        if c["rule"] == "history" and c["name"].startswith("baseline")
    ]


def test_history_of_other_tags_fails(runner: CliRunner, tmp_path: Path) -> None:
    history = _history(runner, tmp_path, nights=5)
    # Derived: tonight 1.3x as slow from 1 MiB up: a regression no baseline can see
    # (a CHECK on its own, 70.6 % of what healthy hardware reaches).
    tonight = tmp_path / "tonight.log"
    tonight.write_text(
        derive.scale(derive.healthy(), lambda s: 1.3 if s >= 2**20 else 1.0)
    )
    args = [str(tonight), "--history", str(history), "--tag", "cluster=b", *A3_MEGA]
    result, document = _check(runner, tmp_path, *args)
    assert result.exit_code == 1
    held = (
        f"{history} holds 5 run(s) (on 5 dates from {_ago(5)} to {_ago(1)}) but none "
        "with cluster=b (it holds cluster=a in 5 run(s))"
    )
    message = (
        f"no baseline: {held}; give the --tag values the history was ingested with, "
        "or pass --first-night if tonight is the first night of cluster=b"
    )
    assert _baseline(document) == [("baseline", "fail", message)]
    assert f"FAIL history: {message}\n" in result.stdout
    # No series is judged on history: one case says why, not one skip per series.
    assert [c["name"] for c in document["cases"] if c["rule"] == "history"] == [
        "baseline"
    ]

    # The first night of cluster=b in a shared history: said, skipped, not failed.
    result, document = _check(runner, tmp_path, *args, "--first-night")
    first = (
        f"first night (--first-night): no baseline: {held}; tonight is judged without "
        "history"
    )
    assert _baseline(document) == [("baseline", "skip", first)]
    assert result.exit_code == 0, result.stdout
    assert result.stderr.splitlines()[1:] == [f"Note: {first}"]  # after the summary


def _rules(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(text)
    return path


def test_history_older_than_the_window_is_named(
    runner: CliRunner, tmp_path: Path
) -> None:
    history = _history(runner, tmp_path, nights=10)
    rules = _rules(tmp_path, "[history]\nmax_age_days = 6\n")
    args = [str(derive.HEALTHY), "--history", str(history), "--tag", "cluster=a"]
    result, document = _check(runner, tmp_path, *args, "--rules", str(rules), *A3_MEGA)
    assert result.exit_code == 0, result.stdout
    assert _baseline(document) == [
        ("baseline", "pass",
         f"6 run(s) with cluster=a, on 6 dates from {_ago(6)} to {_ago(1)}, make the "
         "baseline (up to the 20 most recent per size, within 6 days)"),
        ("baseline window", "skip",
         f"4 run(s) with cluster=a, on 4 dates from {_ago(10)} to {_ago(7)}, are older "
         f"than the 6-day window (which starts on {_ago(6)}) and not part of the "
         "baseline; [history] max_age_days sets the window"),
    ]  # fmt: skip


def test_a_window_too_short_for_min_runs_fails(
    runner: CliRunner, tmp_path: Path
) -> None:
    """``max_age_days = 4`` with ``min_runs = 5`` left a nightly series 4 runs at
    every size: no size was judged, and a log 15 % slower passed (exit 0) with 8
    nights in the history (found by the re-run of issue 30). A young history (no
    run older than the window) is still judged from its fifth night on, not failed."""
    history = _history(runner, tmp_path, nights=8)
    rules = _rules(tmp_path, "[history]\nmax_age_days = 4\n")
    args = [str(derive.HEALTHY), "--history", str(history), "--tag", "cluster=a"]
    result, document = _check(runner, tmp_path, *args, "--rules", str(rules), *A3_MEGA)
    assert result.exit_code == 1, result.stdout
    assert _baseline(document)[0] == (
        "baseline", "fail",
        f"no size can be judged: 4 run(s) with cluster=a, on 4 dates from {_ago(4)} "
        f"to {_ago(1)}, are in the 4-day window (which starts on {_ago(4)}), fewer "
        "than [history] min_runs (5) at every size, and 4 run(s), on 4 dates from "
        f"{_ago(8)} to {_ago(5)}, are older; raise [history] max_age_days or lower "
        "min_runs",
    )  # fmt: skip
    (tmp_path / "young").mkdir()
    young = _history(runner, tmp_path / "young", nights=4)
    args = [str(derive.HEALTHY), "--history", str(young), "--tag", "cluster=a"]
    result, document = _check(runner, tmp_path, *args, "--rules", str(rules), *A3_MEGA)
    assert result.exit_code == 0, result.stdout
    assert [c[:2] for c in _baseline(document)] == [("baseline", "pass")]


def test_history_all_older_than_the_window_fails(
    runner: CliRunner, tmp_path: Path
) -> None:
    history = _history(runner, tmp_path, nights=3, last=40)
    args = [str(derive.HEALTHY), "--history", str(history), "--tag", "cluster=a"]
    result, document = _check(runner, tmp_path, *args, *A3_MEGA)
    assert result.exit_code == 1
    assert _baseline(document) == [
        ("baseline", "fail",
         f"no baseline: none of the 3 run(s) with cluster=a in {history} can be a "
         f"baseline: 3 (on {_ago(42)}, {_ago(41)} and {_ago(40)}) are older than the "
         f"30-day window (which starts on {_ago(30)}); raise [history] max_age_days, "
         "or pass --first-night if tonight is the first night of cluster=a"),
    ]  # fmt: skip


def test_history_of_tonight_only_fails(runner: CliRunner, tmp_path: Path) -> None:
    # ingest before check, on the first night: the only run is tonight's own.
    history = tmp_path / "history"
    ingest = ["ingest", str(derive.HEALTHY), "--history", str(history), "-q"]
    assert runner.invoke(cli, ingest).exit_code == 0
    args = [str(derive.HEALTHY), "--history", str(history), *A3_MEGA]
    result, document = _check(runner, tmp_path, *args)
    assert result.exit_code == 1
    why = (
        f"none of the 1 run(s) in {history} can be a baseline: 1 is among tonight's "
        "inputs (ingested before this check)"
    )
    assert _baseline(document) == [
        ("baseline", "fail",
         f"no baseline: {why}; pass --first-night if tonight is the first night"),
    ]  # fmt: skip
    result, document = _check(runner, tmp_path, *args, "--first-night")
    assert result.exit_code == 0, result.stdout
    assert _baseline(document) == [
        ("baseline", "skip",
         f"first night (--first-night): no baseline: {why}; tonight is judged "
         "without history"),
    ]  # fmt: skip


def test_an_empty_history_fails(runner: CliRunner, tmp_path: Path) -> None:
    history = tmp_path / "history"
    history.mkdir()  # a history emptied, or never ingested into: not a pass
    args = [str(derive.HEALTHY), "--history", str(history), *A3_MEGA]
    result, document = _check(runner, tmp_path, *args)
    assert result.exit_code == 1
    assert _baseline(document) == [
        ("baseline", "fail",
         f"no baseline: {history} holds no run; pass --first-night if tonight is the "
         "first night"),
    ]  # fmt: skip


def test_the_first_night_needs_no_history_directory(
    runner: CliRunner, tmp_path: Path
) -> None:
    history = tmp_path / "history"
    args = [str(derive.HEALTHY), "--history", str(history), "--tag", "cluster=a"]
    result, document = _check(runner, tmp_path, *args, "--first-night", *A3_MEGA)
    assert result.exit_code == 0, result.stdout
    message = (
        f"first night (--first-night): no baseline: {history} (not created yet) holds "
        "no run; tonight is judged without history"
    )
    assert _baseline(document) == [("baseline", "skip", message)]
    assert result.stderr.splitlines()[1:] == [f"Note: {message}"]
    assert not history.exists()  # check never writes the history; ingest creates it


def test_ingest_twice_changes_nothing(runner: CliRunner, tmp_path: Path) -> None:
    history = tmp_path / "h"
    args = ["ingest", str(derive.HEALTHY), "--history", str(history), "-q"]
    first = runner.invoke(cli, args)
    files = sorted(history.rglob("*.parquet"))
    second = runner.invoke(cli, args)
    assert first.exit_code == second.exit_code == 0
    assert (
        first.stderr
        == f"{history}: 1 added (62 rows), 0 already present, 0 without measurements\n"
    )
    assert (
        second.stderr
        == f"{history}: 0 added (0 rows), 1 already present, 0 without measurements\n"
    )
    assert sorted(history.rglob("*.parquet")) == files
    assert len(files) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rules", "nope.toml"], "cannot read rules"),
        (["--tag", "cluster"], "'cluster' is not KEY=VALUE"),
        (["--profile", "no-such-gpu"], "no-such-gpu"),
        (["--history", "no-such-dir"],
         "Error: no-such-dir: history directory not found (on the first night, before "
         "`ingest` has created it, pass --first-night)\n"),
        (["--first-night"], "Error: --first-night needs --history\n"),
    ],
)  # fmt: skip
def test_usage_and_configuration_errors_exit_2(
    runner: CliRunner, args: list[str], message: str
) -> None:
    result = runner.invoke(cli, ["check", str(derive.HEALTHY), *args])
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_invalid_rules_file_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nmetric = "speed"\nthreshold = 1\n')
    result = runner.invoke(cli, ["check", str(derive.HEALTHY), "--rules", str(rules)])
    assert result.exit_code == 2
    assert "'metric' must be one of efficiency, busbw_gbps, time_us" in result.stderr


def test_ingest_refuses_a_date_beyond_tomorrow(
    runner: CliRunner, tmp_path: Path
) -> None:
    """A night ingested as 2099-01-01 never aged out of the baseline window."""
    history = tmp_path / "h"
    tomorrow = _ago(-1)
    far = runner.invoke(cli, ["ingest", str(derive.HEALTHY), "--history",
                              str(history), "--date", _ago(-2)])  # fmt: skip
    assert far.exit_code == 2
    assert (
        f"Error: Invalid value for '--date': {_ago(-2)} is in the future: at most "
        f"{tomorrow} (today, UTC, and one day ahead for time zones)"
    ) in " ".join(far.stderr.split())
    assert not history.exists()
    near = runner.invoke(cli, ["ingest", str(derive.HEALTHY), "--history",
                               str(history), "--date", tomorrow, "-q"])  # fmt: skip
    assert near.exit_code == 0, near.output
    assert [p.name for p in history.glob("date=*")] == [f"date={tomorrow}"]


def _slower_tonight(tmp_path: Path) -> Path:
    """Derived: night 9's jitter with every size from 1 MiB up 15 % slower."""
    tonight = tmp_path / "tonight.log"
    factor = derive.jitter(9)
    tonight.write_text(
        derive.scale(
            derive.healthy(), lambda s: factor(s) * (1.15 if s >= 2**20 else 1)
        )
    )
    return tonight


@pytest.mark.parametrize(
    ("history", "reason"),
    [
        ("window = 3", "window: 3 is below min_runs 5"),
        ("window = 0", "window: expected a whole number from 1 to 1000, got 0"),
        ("min_runs = 100000",
         "min_runs: expected a whole number from 1 to 1000, got 100000"),
    ],
)  # fmt: skip
def test_rules_that_would_switch_history_off_exit_2(
    runner: CliRunner, tmp_path: Path, history: str, reason: str
) -> None:
    """Each made a 15 %-slower log pass (exit 0) before: history judged nothing."""
    base = _history(runner, tmp_path, nights=6)
    rules = _rules(tmp_path, f"[history]\n{history}\n")
    json_path = tmp_path / "out.json"
    args = [str(_slower_tonight(tmp_path)), "--history", str(base), "--tag",
            "cluster=a", "--rules", str(rules), "--json", str(json_path), *A3_MEGA]  # fmt: skip
    result = runner.invoke(cli, ["check", *args])
    assert result.exit_code == 2, result.output
    assert f"Error: Invalid value for '--rules': {rules}: [history] {reason}" in (
        " ".join(result.stderr.split())
    )


def test_history_switched_off_is_said_in_the_outputs(
    runner: CliRunner, tmp_path: Path
) -> None:
    base = _history(runner, tmp_path, nights=6)
    tonight = [str(_slower_tonight(tmp_path)), "--history", str(base), "--tag",
               "cluster=a", *A3_MEGA]  # fmt: skip
    result, document = _check(runner, tmp_path, *tonight)
    assert result.exit_code == 1  # judged: the 15 % drop is a regression
    assert len(_failed(document, "history")) == 2
    rules = _rules(tmp_path, "[history]\nenabled = false\n")
    result, document = _check(runner, tmp_path, *tonight, "--rules", str(rules))
    assert result.exit_code == 0, result.stdout
    assert _baseline(document) == [
        ("baseline", "skip",
         f"history judging switched off by [history] enabled = false in {rules}"),
    ]  # fmt: skip
    assert [c for c in document["cases"] if c["rule"] == "history"] == [
        c for c in document["cases"] if c["name"] == "baseline"
    ]
    note = f"Note: history judging switched off by [history] enabled = false in {rules}"
    assert note in result.stderr.splitlines()
    assert f'<skipped message="{note.removeprefix("Note: ")}" />' in (
        (tmp_path / "out.xml").read_text()
    )


def test_every_rule_switched_off_is_said_in_the_outputs(
    runner: CliRunner, tmp_path: Path
) -> None:
    """[cohort] enabled = false left no case at all (the rule was silently gone);
    [blame] and a [[rule]] could not be switched off but by values that never
    fire."""
    rules = _rules(
        tmp_path,
        "[cohort]\nenabled = false\n[blame]\nenabled = false\n"
        '[[rule]]\nname = "latency"\nmetric = "time_us"\nthreshold = 1000\n'
        "enabled = false\n",
    )
    result, document = _check(
        runner, tmp_path, str(derive.HEALTHY), "--rules", str(rules), *A3_MEGA
    )
    assert result.exit_code == 0, result.output
    said = [
        f"{rule} judging switched off by {section} enabled = false in {rules}"
        for rule, section in (("latency", "[[rule]] 'latency'"),
                              ("cohort", "[cohort]"), ("slow-host", "[blame]"))
    ]  # fmt: skip
    assert [
        (c["rule"], c["name"], c["status"], c["message"])
        for c in document["cases"]
        if c["name"] == "switched off" or c["rule"] in ("latency", "slow-host")
    ] == [
        ("latency", "switched off", "skip", said[0]),
        ("cohort", "switched off", "skip", said[1]),
        ("slow-host", "switched off", "skip", said[2]),
    ]
    notes = [line for line in result.stderr.splitlines() if line.startswith("Note:")]
    assert notes == [f"Note: {message}" for message in said]
    junit = (tmp_path / "out.xml").read_text()
    assert all(f'<skipped message="{message}" />' in junit for message in said)


def test_compare_cli_regression_exit_and_formats(
    runner: CliRunner, tmp_path: Path
) -> None:
    # Derived candidate: every size from 256 MiB up takes 1.2x as long.
    candidate = tmp_path / "candidate.log"
    candidate.write_text(
        derive.scale(derive.healthy(), lambda s: 1.2 if s >= 2**28 else 1.0)
    )
    baseline = tmp_path / "baseline.parquet"
    assert (
        runner.invoke(
            cli, ["parse", str(derive.HEALTHY), "-o", str(baseline), "-q"]
        ).exit_code
        == 0
    )
    args = ["compare", str(baseline), str(candidate)]
    text = runner.invoke(cli, args)
    assert text.exit_code == 0
    assert text.stdout.startswith("verdict: regression (threshold 5%")
    assert runner.invoke(cli, [*args, "--fail-on-regression"]).exit_code == 3
    html = tmp_path / "c.html"
    assert runner.invoke(cli, [*args, "-o", str(html)]).exit_code == 0
    assert 'Verdict: <span class="regression">regression</span>' in html.read_text()
    document = json.loads(runner.invoke(cli, [*args, "--format", "json"]).stdout)
    regressed = {
        r["size_bytes"] for r in document["rows"] if r["verdict"] == "regression"
    }
    assert regressed == {2**k for k in range(28, 34)}


def test_check_writes_the_html_report(runner: CliRunner, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    args = ["check", str(derive.HEALTHY), *A3_MEGA, "--report", str(report), "-q"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    html = report.read_text()
    assert html.lstrip().lower().startswith("<!doctype html>")
    # The check's own result is in the report: 4 passed, 1 skipped, nothing failed.
    checks = _checks_section(html)
    for count in ("PASS", "0 failed", "4 passed", "1 skipped"):
        assert f"{count}</span>" in checks
    assert "Failed cases" not in checks
    assert "Slow hosts" not in checks
    assert "<p>Command line: <code>" in html  # check passes its command line


def _checks_section(html: str) -> str:
    start = html.index('<section id="checks">')
    return html[start : html.index("</section>", start)]


def test_check_report_shows_slow_host_and_failures(
    runner: CliRunner, tmp_path: Path
) -> None:
    logs = _pairwise(tmp_path, "node03")
    # Derived: the first pair's log also gets #wrong 12 in its 1 GiB row.
    Path(logs[0]).write_text(derive.set_wrong(Path(logs[0]).read_text(), GIB, 12))
    report = tmp_path / "report.html"
    args = ["check", *logs, *A3_MEGA, "--report", str(report), "-q"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 1
    checks = _checks_section(report.read_text())
    # Slow hosts table: host, runs slow / with it, scores with and without, deficit.
    hosts = checks[checks.index("<h3>Slow hosts</h3>") :]
    assert re.search(r"SLOW</span> <span class=\"mono\">node03</span></td>"
                     r"<td class=\"num\">4 / 4</td>", hosts)  # fmt: skip
    assert hosts.count("SLOW</span>") == 1
    # Failed cases: the #wrong run, the slow host and its four runs (1.6x as slow:
    # 57.4 % of what healthy hardware reaches, below 60 %), with the check's messages;
    # the cohort rule fails the same four runs, in each placement (37 % below the
    # median of the 9 other pairs, of which 3 are slow too).
    failed = checks[checks.index("<h3>Failed cases</h3>") : checks.index(
        "<h3>Slow hosts</h3>"
    )]  # fmt: skip
    assert "#wrong &gt; 0 at 1 size(s): 1 GiB out-of-place #wrong 12" in failed
    assert "node03 is slow with every partner: 4 of 4 runs slow" in failed
    assert failed.count("57.4 % of what healthy hardware reaches") == 4
    cohort = re.findall(r"run 0 \(hosts (node0\d), (node0\d)\): all_reduce [^<]* "
                        r"is 37.0% below the median of the 9 other runs", failed)  # fmt: skip
    assert sorted(cohort) == sorted(
        [("node01", "node03"), ("node02", "node03"), ("node03", "node04"),
         ("node03", "node05")] * 2
    )  # fmt: skip
    # Two tables: 15 failed cases (the #wrong run's verdict is FAIL too) and
    # five runs to CHECK, each with its header.
    assert failed.count("<tr>") == 22


def test_junit_testsuites_carries_no_skipped_attribute(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The Jenkins xUnit schema allows `skipped` on <testsuite>, not <testsuites>;
    `time` on both (the check's seconds on <testsuites>, 0.000 on each suite)."""
    _check(runner, tmp_path, str(EXAMPLE_LOG))
    root = ET.fromstring((tmp_path / "out.xml").read_bytes())
    assert root.tag == "testsuites"
    assert sorted(root.attrib) == ["errors", "failures", "name", "tests", "time"]
    assert re.fullmatch(r"[0-9]+\.[0-9]{3}", root.attrib["time"])
    assert all("skipped" in suite.attrib for suite in root.findall("./testsuite"))
    assert {suite.get("time") for suite in root.findall("./testsuite")} == {"0.000"}


def test_markdown_summary_is_appended(runner: CliRunner, tmp_path: Path) -> None:
    """--markdown "$GITHUB_STEP_SUMMARY": the steps before keep their text."""
    summary = tmp_path / "summary.md"
    summary.write_text("## Build\nok")  # no final newline, as a step may leave it
    result = runner.invoke(
        cli, ["check", str(EXAMPLE_LOG), "--markdown", str(summary), "-q"]
    )
    assert result.exit_code == 0, result.output
    before, separator, after = summary.read_text().partition("## ncclparse check: ")
    assert (before, separator) == ("## Build\nok\n\n", "## ncclparse check: ")
    assert after.startswith("PASS\n")


@pytest.mark.slow
def test_concurrent_markdown_appends_lose_no_summary(tmp_path: Path) -> None:
    """12 checks appending to one step summary at once kept 10, 6 and 7 of them
    (each read the file, added its block and replaced the file)."""
    import subprocess
    import sys

    summary = tmp_path / "summary.md"
    checks = [
        subprocess.Popen(
            [sys.executable, "-m", "ncclparse", "check", str(EXAMPLE_LOG), "-q",
             "--markdown", str(summary), "--json", str(tmp_path / f"{i}.json")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i in range(12)
    ]  # fmt: skip
    assert [check.wait(timeout=300) for check in checks] == [0] * 12
    blocks = summary.read_text().split("\n\n## ncclparse check: ")
    assert len(blocks) == 12
    assert all(b.startswith(("## ncclparse check: PASS", "PASS")) for b in blocks)


def test_history_from_the_environment(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NCCLPARSE_HISTORY stands for --history in check and ingest."""
    history = tmp_path / "history"
    monkeypatch.setenv("NCCLPARSE_HISTORY", str(history))
    done = runner.invoke(cli, ["ingest", str(EXAMPLE_LOG), "-q", "--date", _ago(2)])
    assert done.exit_code == 0, done.output
    assert sorted(p.name for p in history.glob("date=*")) == [f"date={_ago(2)}"]
    missing = tmp_path / "not-yet"
    monkeypatch.setenv("NCCLPARSE_HISTORY", str(missing))
    result = runner.invoke(cli, ["check", str(EXAMPLE_LOG), "-q"])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        f"Error: {missing}: history directory not found (on the first night, before "
        "`ingest` has created it, pass --first-night)"
    )
    assert "NCCLPARSE_HISTORY" in runner.invoke(cli, ["check", "--help"]).output


def test_check_and_ingest_take_the_input_filters(
    runner: CliRunner, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    (logs / "old").mkdir(parents=True)
    (logs / "tonight.log").write_text(EXAMPLE_LOG.read_text())
    (logs / "old" / "broken.log").write_text("not a log at all\n")
    failing = runner.invoke(cli, ["check", str(logs), "-q"])
    assert failing.exit_code == 1  # the broken file is a failed input case
    result = runner.invoke(cli, ["check", str(logs), "-q", "--exclude", "old"])
    assert result.exit_code == 0, result.output
    assert "1 directory matching --exclude" in result.stderr
    history = tmp_path / "history"
    done = runner.invoke(
        cli, ["ingest", str(logs), "--history", str(history), "--include", "*.log",
              "--exclude", "old", "-q"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert done.stderr.splitlines()[-1].startswith(f"{history}: 1 added (62 rows)")


def test_a_run_to_check_says_check_everywhere(
    runner: CliRunner, tmp_path: Path
) -> None:
    """One verdict per run: a run whose printed busbw disagrees (by 3 %, beyond the
    rounding of its digits, within the 5 % that fails integrity) is CHECK in check's
    stdout, JUnit, JSON, the report's run section and its Checks section, and passes
    (exit 0) counted "to check". Before, check said OK while its report said CHECK."""
    log = tmp_path / "tonight.log"
    log.write_text(derive.misprint_busbw(derive.healthy(), GIB, 1.03))
    report = tmp_path / "report.html"
    result, document = _check(
        runner, tmp_path, str(log), *A3_MEGA, "--report", str(report)
    )
    assert result.exit_code == 0, result.output
    said = (
        f"{log} run 0 (hosts ztan-mig-235z, ztan-mig-gq73): CHECK printed busbw disagrees with the "
        "recomputed one in 1 rows (first at line 59); OK healthy: median busbw"
    )
    lines = result.output.splitlines()
    [verdict] = [line for line in lines if line.startswith("CHECK verdict: ")]
    assert verdict.startswith(f"CHECK verdict: {said}")
    assert lines[-1] == "PASS with 1 CHECK: 0 failed, 3 passed, 1 to check, 1 skipped"
    [case] = [c for c in document["cases"] if c["rule"] == "verdict"]
    assert (case["status"], case["outcome"]) == ("pass", "CHECK")
    assert case["message"].startswith(said)
    junit = ET.fromstring((tmp_path / "out.xml").read_text())
    [testcase] = [
        t
        for t in junit.iter("testcase")
        if t.get("classname") == "ncclparse.check.verdict"
    ]
    assert (testcase.findtext("system-out") or "").startswith(f"CHECK: {said}")
    html = report.read_text()
    checks = _checks_section(html)
    assert "<h3>Cases to check</h3>" in checks
    assert "Failed cases" not in checks
    assert "PASS with 1 CHECK" in checks
    run = html[html.index('class="run">\n<h2>') :]
    badge = (
        '<span class="badge warn"><span class="sym" aria-hidden="true">!</span> CHECK'
    )
    assert run.index(badge) < run.index("</h2>")
    assert "printed busbw disagrees with the recomputed one in 1 rows" in run


def test_a_contradicted_busbw_fails_the_run_in_check_and_its_report(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Printed busbw 3x the recomputed one (a corrupt or edited log) fails the
    integrity case, and the run's verdict is FAIL in check and in its report (it was
    a CHECK in the report while check failed the run)."""
    log = tmp_path / "tonight.log"
    log.write_text(derive.misprint_busbw(derive.healthy(), GIB, 3.0))
    report = tmp_path / "report.html"
    result, document = _check(
        runner, tmp_path, str(log), *A3_MEGA, "--report", str(report)
    )
    assert result.exit_code == 1, result.output
    finding = (
        "FAIL printed busbw contradicts size and time by more than 5% in 1 rows "
        "(first at line 59): a corrupt or edited log"
    )
    outcomes = {c["rule"]: (c["outcome"], c["message"]) for c in document["cases"]}
    assert outcomes["integrity"][0] == outcomes["verdict"][0] == "FAIL"
    assert outcomes["verdict"][1].startswith(
        f"{log} run 0 (hosts ztan-mig-235z, ztan-mig-gq73): {finding}; OK healthy"
    )
    run = report.read_text()
    run = run[run.index('class="run">\n<h2>') :]
    badge = '<span class="badge bad"><span class="sym" aria-hidden="true">✗</span> FAIL'
    assert run.index(badge) < run.index("</h2>")
    assert finding.removeprefix("FAIL ") in run


def _short_sweep() -> str:
    """Derived: the healthy log stopped at 1 MiB (bandwidth cannot be judged)."""
    return "".join(
        line
        for line in derive.healthy().splitlines(keepends=True)
        if not re.match(r"^\s+(\d+)\s+\d+\s+float\s", line)
        or int(line.split()[0]) <= 1 << 20
    )


def test_check_words_on_the_report_whatever_the_log_is_named(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The report found check's words after the first "): " of the case's message:
    in a log named "night (a): b.log" that was inside the name."""
    log = tmp_path / "night (a): b.log"
    log.write_text(_short_sweep())
    report = tmp_path / "report.html"
    result, _ = _check(runner, tmp_path, str(log), "--report", str(report))
    assert result.exit_code == 1, result.output
    page = report.read_text()
    assert "check: bandwidth not verified: all_reduce float32 sum" in page
    assert "check: b.log run 0" not in page


def test_a_short_sweep_that_check_fails_is_fail_on_its_report_too(
    runner: CliRunner, tmp_path: Path
) -> None:
    """A sweep stopped at 1 MiB is a NOTE on a plain report (bandwidth not judged)
    and fails check ([verdict] unjudged = "fail", the default): check's report says
    FAIL for that run, with check's words first, not a NOTE beside a failed case."""
    log = tmp_path / "short.log"
    log.write_text(_short_sweep())
    report = tmp_path / "report.html"
    result, document = _check(runner, tmp_path, str(log), "--report", str(report))
    assert result.exit_code == 1, result.output
    [case] = [c for c in document["cases"] if c["rule"] == "verdict"]
    assert case["outcome"] == "FAIL"
    assert "bandwidth not verified" in case["message"]
    run = report.read_text()[report.read_text().index('class="run">\n<h2>') :]
    badge = '<span class="badge bad"><span class="sym" aria-hidden="true">✗</span> FAIL'
    assert run.index(badge) < run.index("</h2>")
    assert "check: bandwidth not verified: all_reduce float32 sum" in run
    # The plain report judges bandwidth only where it can: a NOTE.
    plain = tmp_path / "plain.html"
    done = runner.invoke(cli, ["report", str(log), "-o", str(plain)])
    assert done.exit_code == 0, done.output
    page = plain.read_text()
    run = page[page.index('class="run">\n<h2>') :]
    note = '<span class="badge info"><span class="sym" aria-hidden="true">i</span> NOTE'
    assert run.index(note) < run.index("</h2>")
