"""contrib/prometheus/ncclparse.rules.yml, checked and replayed by Prometheus' own tool.

``promtool check rules`` reads the file; ``promtool check metrics`` lints a real
``check --prometheus`` textfile; ``promtool test rules`` replays the textfiles of real
checks as node_exporter's textfile collector would export them, hour by hour:

* night 1 (hours 0-23): three pairs of hosts, all healthy;
* night 2 (hours 24-47): the pair node01-node03 takes three times as long from 1 MiB
  up (a third of the bus bandwidth: below the verdict's poor line whichever algorithm
  NCCL ran);
* night 3 (hours 48-71): the job did not run, so the collector still exports night 2's
  file (what a textfile does);
* from hour 72 the file is gone.

The logs are derived from the real 2-node H100 log (tests/_derive.py); two earlier
healthy nights are ingested first, so night 2 has a history to regress against. The only
value changed in a textfile is when the check ran (``ncclparse_check_timestamp_seconds``),
moved to the replay's clock. Each alert must fire exactly when it should, with the
labels and annotations given below; which runs fail is read from the textfiles, and the
test asserts the slow pair (and only it) is among them.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import _derive as derive
from tests._required import missing

ROOT = Path(__file__).parent.parent
RULES = ROOT / "contrib" / "prometheus" / "ncclparse.rules.yml"
PROMTOOL = shutil.which("promtool")
HOSTS = ("node01", "node02", "node03")
SLOW = ("node01", "node03")
INSTANCE = {"instance": "gpu-login:9100", "job": "node"}
REPORT = "REPORT_BASE/gpu-login:9100/report.html"
HOUR = 3600
RAN_AT = 600  # each night's check runs at 00:10 on the replay's clock


def _promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run promtool (each promtool test calls it first, so it skips before work)."""
    if PROMTOOL is None:
        missing(
            "promtool", "promtool is not installed (Debian: apt install prometheus)"
        )
    return subprocess.run(
        [PROMTOOL, *args], input=stdin, capture_output=True, text=True, timeout=120
    )


def test_the_shipped_rules_are_valid() -> None:
    done = _promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 9 rules found" in done.stdout


def _night(directory: Path, slow: bool, seed: int) -> Path:
    """Three pairs' logs; with ``slow``, node01-node03 at a third of the bus
    bandwidth from 1 MiB up (each pair with its own +-1.5 % jitter)."""
    directory.mkdir(parents=True)
    for i, (a, b) in enumerate([("node01", "node02"), SLOW, ("node02", "node03")]):
        jitter = derive.jitter(seed * 10 + i)
        slow_pair = slow and (a, b) == SLOW

        def factor(
            size: int,
            jitter: Callable[[int], float] = jitter,
            slow_pair: bool = slow_pair,
        ) -> float:
            return jitter(size) * (3.0 if slow_pair and size >= 1 << 20 else 1.0)

        names = dict(zip(derive.HOSTS, (a, b), strict=True))
        text = derive.scale(derive.rename_hosts(derive.healthy(), names), factor)
        (directory / f"pair_{a}_{b}.log").write_text(text)
    return directory


def _ncclparse(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ncclparse", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Each sample of a textfile by (name, labels)."""
    found = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        assert match, line
        labels = tuple(_LABEL.findall(match.group(2) or ""))
        found[(match.group(1), labels)] = float(match.group(3))
    return found


def _series(name: str, labels: tuple[tuple[str, str], ...]) -> str:
    pairs = ",".join(f'{k}="{v}"' for k, v in (*labels, *INSTANCE.items()))
    return f"{name}{{{pairs}}}"


def _replay(nights: list[dict[Any, float] | None]) -> list[dict[str, str]]:
    """promtool input series, one sample an hour: night k's samples for hours
    24k..24k+23, ``None`` a night without a new file (the last one is exported
    still), and nothing after the last night (the file removed)."""
    exported = []
    current: dict[Any, float] | None = None
    for night in nights:
        current = night if night is not None else current
        exported.append(current or {})
    keys = sorted({key for night in exported for key in night})
    series = []
    for key in keys:
        values = []
        for night in exported:
            value = night.get(key)
            values += ["_" if value is None else repr(value)] * 24
        series.append({"series": _series(*key), "values": " ".join(values)})
    return series


def _with_clock(samples: dict[Any, float], night: int) -> dict[Any, float]:
    key = ("ncclparse_check_timestamp_seconds", ())
    assert key in samples
    return {**samples, key: float(24 * HOUR * night + RAN_AT)}


def _alert(labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    return {"exp_labels": {**labels, **INSTANCE}, "exp_annotations": annotations}


def _failed_hosts(samples: dict[Any, float]) -> list[dict[str, str]]:
    return [
        dict(labels)
        for (name, labels), value in samples.items()
        if name == "ncclparse_check_failed_hosts" and value > 0
    ]


def _failing_alerts(samples: dict[Any, float]) -> dict[str, list[dict[str, Any]]]:
    """What must fire while a failing night's file is exported."""
    by_rule: dict[str, list[dict[str, Any]]] = {
        "NcclCheckFailed": [
            _alert(
                {"severity": "critical"},
                {
                    "summary": "nccl health check failed on gpu-login:9100",
                    "description": "`ncclparse check` found at least one failed case "
                    "(exit 1), or could not complete (exit 2 or 4). The JUnit/JSON "
                    "outputs and the report name each case.",
                    "report": REPORT,
                },
            )
        ],
        "NcclRunFailed": [],
        "NcclEfficiencyBelowPoorLine": [],
        "NcclRegression": [],
        "NcclHostSlow": [],
    }
    for labels in _failed_hosts(samples):
        rule, hosts, coll = labels["rule"], labels["hosts"], labels["collective"]
        count = samples[("ncclparse_check_failed_hosts", tuple(labels.items()))]
        by_rule["NcclRunFailed"].append(
            _alert(
                {**labels, "severity": "critical"},
                {
                    "summary": f"{rule} failed on hosts {hosts}",
                    "description": f"{count:g} failed {rule} case(s) of {coll} "
                    f"runs on {hosts}.",
                    "report": REPORT,
                },
            )
        )
        if rule == "verdict":
            by_rule["NcclEfficiencyBelowPoorLine"].append(
                _alert(
                    {**labels, "severity": "warning"},
                    {
                        "summary": f"bus bandwidth far below ideal on hosts {hosts}",
                        "description": f"The verdict of {count:g} {coll} run(s) on "
                        f"{hosts} is FAIL: bus bandwidth below the poor line, or a "
                        "sweep that stops before bandwidth can be judged.",
                        "report": REPORT,
                    },
                )
            )
        if rule == "history":
            by_rule["NcclRegression"].append(
                _alert(
                    {**labels, "severity": "warning"},
                    {
                        "summary": f"{coll} regressed against history on hosts {hosts}",
                        "description": f"{count:g} series of {coll} runs on {hosts} "
                        "are slower than the history's baseline beyond its noise.",
                        "report": REPORT,
                    },
                )
            )
    for (name, labels), value in samples.items():
        if name == "ncclparse_host_slow" and value == 1:
            host = dict(labels)["host"]
            by_rule["NcclHostSlow"].append(
                _alert(
                    {**dict(labels), "severity": "warning"},
                    {
                        "summary": f"host {host} is consistently slow",
                        "description": f"The runs with {host} are consistently slower "
                        "than the runs without it (ncclparse_host_score_ratio gives "
                        "by how much).",
                        "report": REPORT,
                    },
                )
            )
    return by_rule


_ALERTS = (
    "NcclCheckFailed",
    "NcclRunFailed",
    "NcclEfficiencyBelowPoorLine",
    "NcclRegression",
    "NcclHostSlow",
    "NcclCheckNotRun",
    "NcclCheckMetricsAbsent",
)


def _expect(at_hours: int, firing: dict[str, list[dict[str, Any]]]) -> list[Any]:
    return [
        {
            "eval_time": f"{at_hours}h",
            "alertname": name,
            "exp_alerts": firing.get(name, []),
        }
        for name in _ALERTS
    ]


@pytest.mark.slow
def test_each_alert_fires_exactly_when_it_should(tmp_path: Path) -> None:
    assert _promtool("--version").returncode == 0
    history = tmp_path / "history"
    today = dt.datetime.now(dt.UTC).date()
    for back in (4, 3):  # two healthy nights in the history (6 runs per size)
        day = (today - dt.timedelta(days=back)).isoformat()
        logs = _night(tmp_path / f"old{back}", slow=False, seed=back)
        done = _ncclparse("ingest", str(logs), "--history", str(history), "--date", day)
        assert done.returncode == 0, done.stderr
    hardware = ("--profile", "h100", "--inter-bw", "200GB/s")
    textfiles = []
    for night, slow in ((1, False), (2, True)):
        logs = _night(tmp_path / f"night{night}", slow=slow, seed=night)
        prom = tmp_path / f"night{night}.prom"
        done = _ncclparse(
            "check", str(logs), "--history", str(history), *hardware,
            "--prometheus", str(prom), "-q",
        )  # fmt: skip
        assert done.returncode == (1 if slow else 0), done.stdout + done.stderr
        lint = _promtool("check", "metrics", stdin=prom.read_text())
        assert lint.returncode == 0, lint.stdout + lint.stderr
        textfiles.append(_with_clock(_samples(prom.read_text()), night - 1))
    healthy, failing = textfiles

    # The slow pair, and only it, fails: its verdict and its history.
    assert _failed_hosts(healthy) == []
    failed = _failed_hosts(failing)
    assert {f["hosts"] for f in failed} == {",".join(SLOW)}
    assert {"verdict", "history"} <= {f["rule"] for f in failed}

    firing = _failing_alerts(failing)
    not_run = _alert(
        {"severity": "warning"},
        {
            "summary": "nccl health check has not run for more than 26 hours",
            # Hour 60 less 24 h 10 min: when night 2's check ran.
            "description": "The last check whose metrics gpu-login:9100 exports ran "
            "1d 11h 50m 0s ago: the nightly job is not running or cannot write its "
            "metrics.",
        },
    )
    absent = {
        "exp_labels": {"severity": "warning"},
        "exp_annotations": {
            "summary": "no nccl health check metrics for 26 hours",
            "description": "No ncclparse_check_timestamp_seconds sample in 26 hours: "
            "no nightly check has reported.",
        },
    }
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1h",
                "input_series": _replay([healthy, failing, None]),
                "alert_rule_test": [
                    *_expect(12, {}),  # night 1: all healthy
                    *_expect(36, firing),  # night 2: the slow pair
                    *_expect(49, firing),  # 24 h 50 min after night 2's check
                    # Night 3 did not run: night 2's file is still exported.
                    *_expect(60, {**firing, "NcclCheckNotRun": [not_run]}),
                    # The file is gone from hour 72: absent once 26 h have passed.
                    *_expect(96, {}),
                    *_expect(98, {"NcclCheckMetricsAbsent": [absent]}),
                ],
            }
        ],
    }
    spec = tmp_path / "ncclparse.test.yml"
    spec.write_text(json.dumps(tests, indent=1))  # JSON is YAML: no YAML library
    done = _promtool("test", "rules", str(spec))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


DASHBOARD = ROOT / "contrib" / "grafana" / "ncclparse.json"


def _dashboard_queries() -> list[str]:
    """Every PromQL query of the dashboard (panels and variables), its variables
    replaced by a regular expression that matches anything."""
    model = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for panel in model["panels"] for t in panel["targets"]]
    queries += [v["definition"] for v in model["templating"]["list"]]
    return [q.replace("$instance", ".*").replace("$size", ".*") for q in queries]


def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    """promtool parses each panel's query (as a recording rule's expression); the
    variables' label_values() are Grafana's, so their metric is checked instead."""
    assert _promtool("--version").returncode == 0
    exprs = [q for q in _dashboard_queries() if not q.startswith("label_values(")]
    assert len(exprs) == 8
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query{i}", "expr": expr}
                    for i, expr in enumerate(exprs)
                ],
            }
        ]
    }
    spec = tmp_path / "dashboard.rules.yml"
    spec.write_text(json.dumps(rules))
    done = _promtool("check", "rules", str(spec))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 8 rules found" in done.stdout


def test_the_dashboard_and_rules_use_only_metrics_that_exist(tmp_path: Path) -> None:
    """Each metric the dashboard and the rules read is one a real check writes (a
    pairwise sweep of four hosts, one slow, judged against a profile, and a failed
    log), or a recording rule of the shipped rules file."""
    import ncclparse
    from ncclparse.efficiency import HardwareOptions
    from ncclparse.report.check_outputs import to_prometheus

    for text, name in derive.pairwise(["n1", "n2", "n3", "n4"], slow="n1"):
        (tmp_path / name).write_text(text)
    run = ncclparse.check(
        [str(tmp_path), str(ROOT / "examples" / "all_reduce_failed_midrun.log")],
        hardware=HardwareOptions(profile="h100", inter_bw="200GB/s"),
    )
    text = to_prometheus(run.result, timestamp=0.0)
    written = {name for name, _ in _samples(text)}
    rules = RULES.read_text()
    recorded = set(re.findall(r"record: (\S+)", rules))
    assert recorded == {
        "ncclparse:busbw_efficiency_ratio:min_over_sizes",
        "ncclparse:check_age_hours",
    }
    used = set(re.findall(r"ncclparse[a-z_:]*", " ".join(_dashboard_queries())))
    used |= set(re.findall(r"expr: .*?(ncclparse_[a-z_]+)", rules))
    assert used - recorded <= written, sorted(used - recorded - written)
    assert "ncclparse_check_failed_hosts" in written
