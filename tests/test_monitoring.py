"""Monitoring identities: what ``check`` gives Prometheus, a Pushgateway, JUnit readers
and JSON consumers, checked with the consumers' own rules.

* Prometheus: the text is read by prometheus_client's parser (the reference one, which
  rejects malformed text); no two samples share a name and labels; labels come from
  tags, tool, collective, dtype, nodes, ranks, size and rule, never a log's path,
  date or run, so two nights make the same series.
* Pushgateway: a real HTTP server on 127.0.0.1 records what ``check --pushgateway``
  sends (method, path, body); a refused connection is exit 4 in one line.
* JUnit: the element and attribute sets of the Jenkins xUnit plugin's JUnit schema,
  and test names that are the same tonight and tomorrow.
* JSON: ``check --json`` documents validate against the shipped JSON Schema, and
  mutated ones do not.

Logs are derived from the real 2-node H100 log by tests/_derive.py (each test says
how). prometheus_client and jsonschema are in the test extra; the lowest-versions CI
run installs neither, and the tests that need them skip there.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import re
import socket
import sys
import threading
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import ncclparse
from ncclparse.cli.app import cli
from ncclparse.efficiency import analyze
from ncclparse.health.cases import Case
from ncclparse.health.check import CheckResult, error_result
from ncclparse.health.rules import METRICS
from ncclparse.report.check_outputs import (
    JSON_SCHEMA,
    JSON_VERSION,
    stable_source,
    tag_labels,
    to_json,
    to_junit,
    to_prometheus,
)
from ncclparse.schema import measurements_table
from tests import _derive as derive

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "all_reduce_16rank_2node_h100.log"
A3_MEGA = ["--profile", "h100", "--inter-bw", "200GB/s"]
GIB = 1073741824
VERSION = ncclparse.__version__

HAVE_PROMETHEUS = importlib.util.find_spec("prometheus_client") is not None
HAVE_JSONSCHEMA = importlib.util.find_spec("jsonschema") is not None
needs_prometheus = pytest.mark.skipif(
    not HAVE_PROMETHEUS, reason="prometheus_client (test extra) is not installed"
)
needs_jsonschema = pytest.mark.skipif(
    not HAVE_JSONSCHEMA, reason="jsonschema (test extra) is not installed"
)

Sample = tuple[str, tuple[tuple[str, str], ...], float]


# Validators, also used by tests/test_cli_check.py on every scenario it runs --------


def prometheus_samples(text: str) -> list[Sample]:
    """Every sample of an exposition, read by prometheus_client's parser (which
    raises ValueError on malformed text), as (name, sorted labels, value); asserts
    that no two share a name and labels, that every family has HELP and TYPE, and
    that no sample carries a timestamp (a Pushgateway rejects those)."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: list[Sample] = []
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge", family.name
        assert family.documentation, family.name
        for sample in family.samples:
            assert sample.timestamp is None, sample
            samples.append(
                (sample.name, tuple(sorted(sample.labels.items())), sample.value)
            )
    series = [(name, labels) for name, labels, _ in samples]
    duplicates = {s for s in series if series.count(s) > 1}
    assert not duplicates, f"duplicate series: {sorted(duplicates)}"
    return samples


def validate_check_json(document: Any) -> None:
    """Raise jsonschema's ValidationError unless ``document`` is valid."""
    import jsonschema

    schema = json.loads(JSON_SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(document)


# The Jenkins xUnit plugin's JUnit schema, junit-10.xsd
# (github.com/jenkinsci/xunit-plugin, src/main/resources/org/jenkinsci/plugins/xunit/
# types/model/xsd/junit-10.xsd, as of commit 8c515de2): the attributes each element may
# carry, those it must, and its children. Its <testsuites> allows name, time, tests,
# failures and errors only (no `skipped`, and no `disabled`, which other JUnit schemas
# have).
JUNIT_ATTRIBUTES = {
    "testsuites": {"name", "time", "tests", "failures", "errors"},
    "testsuite": {
        "name", "tests", "failures", "errors", "group", "time", "skipped",
        "timestamp", "hostname", "id", "package", "file", "log", "url", "version",
    },
    "testcase": {"name", "time", "classname", "group"},
    "failure": {"type", "message"},
    "error": {"type", "message"},
    "skipped": {"type", "message"},
    "system-out": set(),
    "system-err": set(),
}  # fmt: skip
JUNIT_REQUIRED = {
    "testsuite": {"name", "tests", "failures", "errors"},
    "testcase": {"name"},
}
JUNIT_CHILDREN = {
    "testsuites": {"testsuite"},
    "testsuite": {"testsuite", "properties", "testcase", "system-out", "system-err"},
    "testcase": {
        "skipped", "error", "failure", "rerunFailure", "rerunError", "flakyFailure",
        "flakyError", "system-out", "system-err",
    },
    "failure": set(),
    "error": set(),
    "skipped": set(),
    "system-out": set(),
    "system-err": set(),
}  # fmt: skip
# SUREFIRE_TIME, the type of `time` on <testsuites> and <testsuite>.
SUREFIRE_TIME = re.compile(r"(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]*)?")


def validate_junit(text: str) -> ET.Element:
    """Parse JUnit XML and check it against junit-10.xsd's shape (above)."""
    root = ET.fromstring(text.encode())
    assert root.tag == "testsuites"

    def visit(element: ET.Element) -> None:
        tag = element.tag
        assert set(element.attrib) <= JUNIT_ATTRIBUTES[tag], (tag, element.attrib)
        missing = JUNIT_REQUIRED.get(tag, set()) - set(element.attrib)
        assert not missing, (tag, missing)
        if "time" in element.attrib and tag in ("testsuites", "testsuite"):
            assert SUREFIRE_TIME.fullmatch(element.attrib["time"]), element.attrib
        for child in element:
            assert child.tag in JUNIT_CHILDREN[tag], (tag, child.tag)
            visit(child)

    visit(root)
    return root


# Helpers -----------------------------------------------------------------------------


def _run(runner: CliRunner, *args: str) -> Result:
    result = runner.invoke(cli, ["check", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        result.exception
    )
    return result


def _night(directory: Path, seed: int, *, wrong: bool = False) -> Path:
    """Derived: one log per pair of node01..node03 (the real log, its hosts renamed,
    +-1.5 % jitter per size from ``seed``); with ``wrong``, #wrong 12 at 1 GiB in the
    first pair's log."""
    directory.mkdir(parents=True)
    hosts = ("node01", "node02", "node03")
    pairs = [(a, b) for i, a in enumerate(hosts) for b in hosts[i + 1 :]]
    for i, (a, b) in enumerate(pairs):
        text = derive.rename_hosts(
            derive.healthy(), dict(zip(derive.HOSTS, (a, b), strict=True))
        )
        text = derive.scale(text, derive.jitter(seed * 10 + i))
        if wrong and i == 0:
            text = derive.set_wrong(text, GIB, 12)
        (directory / f"pair_{a}_{b}.log").write_text(text)
    return directory


def _series(samples: list[Sample]) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {(name, labels) for name, labels, _ in samples}


def _lines(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name + "{")]


# Prometheus ------------------------------------------------------------------------


@needs_prometheus
def test_series_are_the_same_every_night(runner: CliRunner, tmp_path: Path) -> None:
    """Two nights of the same job, in dated directories, the second with a failure:
    the same series (names and labels), only the values differ; no label holds a
    path, a date or a run number."""
    texts = []
    for day, wrong in (("2026-11-20", False), ("2026-11-21", True)):
        logs = _night(tmp_path / "logs" / day, seed=int(day[-2:]), wrong=wrong)
        prom = tmp_path / f"{day}.prom"
        result = _run(
            runner, str(logs), "--tag", "cluster=a3", *A3_MEGA, "--prometheus",
            str(prom), "-q",
        )  # fmt: skip
        assert result.exit_code == (1 if wrong else 0), result.output
        texts.append(prom.read_text())
    first, second = (prometheus_samples(t) for t in texts)
    # The one family written only while failing: the hosts of tonight's failed run,
    # whose wrong results fail its integrity and its verdict.
    failed_hosts = [s for s in second if s[0] == "ncclparse_check_failed_hosts"]
    assert failed_hosts == [
        (
            "ncclparse_check_failed_hosts",
            (
                ("cluster", "a3"),
                ("collective", "all_reduce"),
                ("hosts", "node01,node02"),
                ("rule", rule),
            ),
            1.0,
        )
        for rule in ("integrity", "verdict")
    ]
    second = [s for s in second if s not in failed_hosts]
    assert _series(first) == _series(second)
    values = {v for _, labels, _ in first for _, v in labels}
    assert not [v for v in values if "/" in v or "2026" in v or "#" in v or "log" in v]
    # What changed is the values: tonight one integrity case failed.
    integrity = (
        'ncclparse_check_case_failed{cluster="a3",rule="integrity",'
        'collective="all_reduce",nnodes="2",nranks="16"}'
    )
    assert f"{integrity} 0" in texts[0].splitlines()
    assert f"{integrity} 1" in texts[1].splitlines()


def _pairwise_result(tmp_path: Path, runner: CliRunner) -> tuple[str, CheckResult]:
    """Derived: the 3-pair night, checked by the CLI (for the text) and by the library
    (for the rows the gauges aggregate)."""
    logs = _night(tmp_path / "logs", seed=1)
    prom = tmp_path / "out.prom"
    result = _run(
        runner, str(logs), "--tag", "cluster=a3", *A3_MEGA, "--prometheus", str(prom),
        "-q",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    from ncclparse.api import parse_many
    from ncclparse.efficiency import HardwareOptions
    from ncclparse.health.check import check
    from ncclparse.health.rules import DEFAULT_RULES

    parsed = parse_many(sorted(str(p) for p in logs.iterdir()))
    hardware = HardwareOptions(profile="h100", inter_bw="200GB/s")
    checked = check(parsed, DEFAULT_RULES, hardware=hardware, tags={"cluster": "a3"})
    return prom.read_text(), checked


@needs_prometheus
def test_cases_are_aggregated_by_identity(runner: CliRunner, tmp_path: Path) -> None:
    text, _ = _pairwise_result(tmp_path, runner)
    prometheus_samples(text)
    shape = 'collective="all_reduce",nnodes="2",nranks="16"'
    assert _lines(text, "ncclparse_check_case_failed") == [
        f'ncclparse_check_case_failed{{cluster="a3",rule="integrity",{shape}}} 0',
        f'ncclparse_check_case_failed{{cluster="a3",rule="verdict",{shape}}} 0',
        f'ncclparse_check_case_failed{{cluster="a3",rule="latency",{shape}}} 0',
        f'ncclparse_check_case_failed{{cluster="a3",rule="cohort",{shape}}} 0',
        'ncclparse_check_case_failed{cluster="a3",rule="slow-host",name="hosts"} 0',
    ]
    # 3 runs: one integrity and one verdict case each, a latency and a cohort case
    # per placement.
    assert _lines(text, "ncclparse_check_case_judged") == [
        f'ncclparse_check_case_judged{{cluster="a3",rule="integrity",{shape}}} 3',
        f'ncclparse_check_case_judged{{cluster="a3",rule="verdict",{shape}}} 3',
        f'ncclparse_check_case_judged{{cluster="a3",rule="latency",{shape}}} 6',
        f'ncclparse_check_case_judged{{cluster="a3",rule="cohort",{shape}}} 6',
        'ncclparse_check_case_judged{cluster="a3",rule="slow-host",name="hosts"} 1',
    ]
    lines = text.splitlines()
    assert "ncclparse_check_runs 3" in lines
    assert f'ncclparse_check_info{{cluster="a3",version="{VERSION}"}} 1' in lines
    assert "ncclparse_check_passed 1" in lines


@needs_prometheus
def test_bandwidth_gauges_are_min_and_median_over_runs_and_placements(
    runner: CliRunner, tmp_path: Path
) -> None:
    text, checked = _pairwise_result(tmp_path, runner)
    rows = checked.analysis.rows.to_pandas()
    at = rows[rows["size_bytes"] == GIB]
    assert len(at) == 6  # 3 runs x 2 placements
    busbw = at["busbw_calc_gbps"] * 1e9
    efficiency = at["efficiency"]
    labels = (
        'cluster="a3",tool="nccl-tests",collective="all_reduce",dtype="float32",'
        f'nnodes="2",nranks="16",size_bytes="{GIB}"'
    )
    expected = {
        ("ncclparse_busbw_bytes_per_second", "min"): str(round(busbw.min())),
        ("ncclparse_busbw_bytes_per_second", "median"): str(round(busbw.median())),
        ("ncclparse_busbw_efficiency_ratio", "min"): repr(
            float(round(efficiency.min(), 6))
        ),
        ("ncclparse_busbw_efficiency_ratio", "median"): repr(
            float(round(efficiency.median(), 6))
        ),
    }
    found = {
        (name, stat): value
        for name, stat in expected
        for line in text.splitlines()
        if line.startswith(f'{name}{{{labels},stat="{stat}"}} ')
        for value in [line.rsplit(" ", 1)[1]]
    }
    assert found == expected
    # The figures themselves (jitter seeds 10 to 12 of the real log):
    assert found == {
        ("ncclparse_busbw_bytes_per_second", "min"): "296841177772",
        ("ncclparse_busbw_bytes_per_second", "median"): "300914889672",
        ("ncclparse_busbw_efficiency_ratio", "min"): "0.791576",
        ("ncclparse_busbw_efficiency_ratio", "median"): "0.80244",
    }
    # One pair of samples per size the sweep measured (8 B to 8 GiB: 31 sizes).
    assert len(_lines(text, "ncclparse_busbw_bytes_per_second")) == 2 * 31
    assert len(_lines(text, "ncclparse_busbw_efficiency_ratio")) == 2 * 31


@needs_prometheus
def test_no_efficiency_where_the_ideal_is_assumed(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Without hardware options, the 2-node ideal is a guess (the preset's NICs): the
    verdict does not judge it, and no efficiency gauge shows it."""
    prom = tmp_path / "out.prom"
    result = _run(runner, str(EXAMPLE), "--prometheus", str(prom), "-q")
    assert result.exit_code == 0, result.output
    text = prom.read_text()
    prometheus_samples(text)
    assert "ncclparse_busbw_efficiency_ratio" not in text
    assert len(_lines(text, "ncclparse_busbw_bytes_per_second")) == 2 * 31


@needs_prometheus
def test_tags_become_valid_labels_and_values_are_escaped() -> None:
    tags = {
        "cluster": 'a3 "east"\\west\nline',
        "rack-id": "r1",
        "job": "nightly",
        "2x": "y",
        "rule": "mine",
        "tag_job": "taken",
    }
    assert tag_labels(tags) == {
        "tag_2x": "y",
        "cluster": 'a3 "east"\\west\nline',
        "tag_job": "nightly",
        "rack_id": "r1",
        "tag_rule": "mine",
        "tag_job_2": "taken",
    }
    result = CheckResult(
        cases=(Case("slow-host", "hosts", "SKIP", "too few runs"),),
        hosts=(),
        analysis=analyze(measurements_table({})),
        tags=tags,
    )
    text = to_prometheus(result)
    escaped = 'a3 \\"east\\"\\\\west\\nline'
    [info_line] = [
        line for line in text.splitlines() if line.startswith("ncclparse_check_info{")
    ]
    assert info_line == (
        f'ncclparse_check_info{{tag_2x="y",cluster="{escaped}",tag_job="nightly",'
        f'rack_id="r1",tag_rule="mine",tag_job_2="taken",version="{VERSION}"}} 1'
    )
    [info] = [s for s in prometheus_samples(text) if s[0] == "ncclparse_check_info"]
    assert dict(info[1])["cluster"] == tags["cluster"]  # read back as written


@needs_prometheus
def test_a_check_that_could_not_complete(tmp_path: Path) -> None:
    text = to_prometheus(error_result('cannot read "h"\\x\n'), timestamp=1.5)
    samples = prometheus_samples(text)
    assert [(n, dict(labels), v) for n, labels, v in samples] == [
        ("ncclparse_check_info", {"version": VERSION}, 1.0),
        ("ncclparse_check_passed", {}, 0.0),
        ("ncclparse_check_cases", {"status": "pass"}, 0.0),
        ("ncclparse_check_cases", {"status": "fail"}, 1.0),
        ("ncclparse_check_cases", {"status": "skip"}, 0.0),
        ("ncclparse_check_outcomes", {"outcome": "FAIL"}, 1.0),
        ("ncclparse_check_outcomes", {"outcome": "CHECK"}, 0.0),
        ("ncclparse_check_outcomes", {"outcome": "NOTE"}, 0.0),
        ("ncclparse_check_outcomes", {"outcome": "OK"}, 0.0),
        ("ncclparse_check_outcomes", {"outcome": "SKIP"}, 0.0),
        ("ncclparse_check_runs", {}, 0.0),
        ("ncclparse_check_case_failed", {"rule": "error", "name": "ncclparse check"}, 1.0),
        ("ncclparse_check_case_judged", {"rule": "error", "name": "ncclparse check"}, 1.0),
        ("ncclparse_check_timestamp_seconds", {}, 1.5),
    ]  # fmt: skip


@needs_prometheus
def test_the_validator_rejects_duplicates_and_malformed_text() -> None:
    good = "# HELP x An x.\n# TYPE x gauge\n"
    with pytest.raises(AssertionError, match="duplicate series"):
        prometheus_samples(good + 'x{a="1",b="2"} 1\nx{b="2",a="1"} 2\n')
    with pytest.raises(ValueError, match="could not convert"):
        prometheus_samples(good + 'x{a="1} 1\n')
    assert prometheus_samples(good + 'x{a="1"} 1\n') == [("x", (("a", "1"),), 1.0)]


# Pushgateway ------------------------------------------------------------------------


class Gateway:
    """A Pushgateway stand-in: an HTTP server on 127.0.0.1 that records each request
    (method, path, Content-Type, body) and answers ``status`` with ``answer``."""

    def __init__(self, status: int = 200, answer: bytes = b"") -> None:
        self.requests: list[tuple[str, str, str, bytes]] = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                gateway.requests.append(
                    (self.command, self.path, self.headers["Content-Type"], body)
                )
                self.send_response(status)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_POST = do_DELETE = do_PUT

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    server = Gateway()
    yield server
    server.close()


@needs_prometheus
def test_check_pushes_the_metrics_to_the_gateway(
    runner: CliRunner, tmp_path: Path, gateway: Gateway
) -> None:
    prom = tmp_path / "out.prom"
    result = _run(
        runner, str(EXAMPLE), "--tag", "cluster=a3", *A3_MEGA, "--prometheus",
        str(prom), "--pushgateway", gateway.url, "-q",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [(method, path, kind, body)] = gateway.requests
    assert (method, path) == ("PUT", "/metrics/job/ncclparse/cluster/a3")
    assert kind.startswith("text/plain; version=0.0.4")
    pushed = prometheus_samples(body.decode())
    written = prometheus_samples(prom.read_text())
    # The same samples as the textfile, but for the time they were rendered at.
    stamp = "ncclparse_check_timestamp_seconds"
    assert [s for s in pushed if s[0] != stamp] == [s for s in written if s[0] != stamp]
    assert result.stderr == ""


@needs_prometheus
def test_the_group_path_encodes_job_and_tags(
    runner: CliRunner, gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NCCLPARSE_PUSHGATEWAY stands for --pushgateway; a job or tag value holding a
    slash, or an empty one, is base64 in the path (the Pushgateway's @base64)."""
    monkeypatch.setenv("NCCLPARSE_PUSHGATEWAY", gateway.url + "/")
    result = _run(
        runner, str(EXAMPLE), "--tag", "partition=gpu/h100", "--tag", "zone=",
        "--tag", "rack id=r 1", "--pushgateway-job", "nightly/a3", "-q",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [(_, path, _, _)] = gateway.requests
    assert path == (
        "/metrics/job@base64/bmlnaHRseS9hMw=="
        "/partition@base64/Z3B1L2gxMDA="
        "/rack_id@base64/ciAx"
        "/zone@base64/="
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@needs_prometheus
def test_a_refused_push_is_an_infrastructure_error(
    runner: CliRunner, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    out = {k: tmp_path / f"out.{k}" for k in ("prom", "json", "xml")}
    result = _run(
        runner, str(EXAMPLE), *A3_MEGA, "--prometheus", str(out["prom"]), "--json",
        str(out["json"]), "--junit", str(out["xml"]), "--pushgateway", url, "-q",
    )  # fmt: skip
    message = f"{url}: cannot push to the Pushgateway: [Errno 111] Connection refused"
    assert result.exit_code == 4
    assert result.stderr == f"Error: {message}\n"  # one line, no traceback
    assert result.stdout == ""
    # The files say the check could not complete, as for any output that failed.
    assert json.loads(out["json"].read_text())["error"] == message
    assert "ncclparse_check_passed 0\n" in out["prom"].read_text()
    assert f'<error message="{message}"' in out["xml"].read_text()


@needs_prometheus
def test_a_gateway_that_refuses_the_metrics(runner: CliRunner) -> None:
    server = Gateway(400, b"pushed metrics are invalid or inconsistent\n")
    try:
        result = _run(runner, str(EXAMPLE), "--pushgateway", server.url, "-q")
    finally:
        server.close()
    assert result.exit_code == 4
    assert result.stderr == (
        f"Error: {server.url}: cannot push to the Pushgateway: HTTP 400 Bad Request: "
        "pushed metrics are invalid or inconsistent\n"
    )
    # The check's metrics, then the failing ones are not pushed again.
    assert [(m, p) for m, p, _, _ in server.requests] == [
        ("PUT", "/metrics/job/ncclparse")
    ]


@needs_prometheus
def test_a_check_that_cannot_complete_pushes_its_failure(
    runner: CliRunner, tmp_path: Path, gateway: Gateway
) -> None:
    """The gateway keeps the last push: a check that could not complete (here its
    JSON cannot be written) replaces it, in the same group, with a failing one."""
    missing = tmp_path / "no-such-dir" / "check.json"
    result = _run(
        runner, str(EXAMPLE), "--tag", "cluster=a3", "--json", str(missing),
        "--pushgateway", gateway.url, "-q",
    )  # fmt: skip
    assert result.exit_code == 4
    [(method, path, _, body)] = gateway.requests
    assert (method, path) == ("PUT", "/metrics/job/ncclparse/cluster/a3")
    samples = {(n, labels): v for n, labels, v in prometheus_samples(body.decode())}
    assert samples[("ncclparse_check_passed", ())] == 0
    error = (("cluster", "a3"), ("name", "ncclparse check"), ("rule", "error"))
    assert samples[("ncclparse_check_case_failed", error)] == 1


def test_pushgateway_without_prometheus_client_exits_2(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    result = runner.invoke(
        cli, ["check", str(EXAMPLE), "--pushgateway", "http://127.0.0.1:9091"]
    )
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        "Error: --pushgateway needs prometheus_client: pip install "
        "'ncclparse[pushgateway]'"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pushgateway", "gw:9091"],
         "Error: Invalid value for '--pushgateway' (env var: 'NCCLPARSE_PUSHGATEWAY'): "
         "'gw:9091' is not an http:// or https:// URL"),
        # (click checks options in the order given: this one first, so that it
        # needs no prometheus_client)
        (["--pushgateway-job", "", "--pushgateway", "http://gw:9091"],
         "Error: Invalid value for '--pushgateway-job': the job name is empty"),
    ],
)  # fmt: skip
def test_pushgateway_options_are_checked(
    runner: CliRunner, args: list[str], message: str
) -> None:
    result = runner.invoke(cli, ["check", str(EXAMPLE), *args])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == message


# JUnit ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "roots", "stable"),
    [
        # The examples of docs/nightly.md ("Test names").
        ("/logs/2026-11-20/node01-node02/all_reduce.log", (),
         "/logs/node01-node02/all_reduce.log"),
        ("/logs/2026-11-21/node01-node02/all_reduce.log", (),
         "/logs/node01-node02/all_reduce.log"),
        ("/logs/2026-11-20/node01-node02/all_reduce.log", ("/logs/2026-11-20",),
         "node01-node02/all_reduce.log"),
        ("/data/logs/nccl-health-29401/pair_node01_node02.log",
         ("/data/logs/nccl-health-29401",), "pair_node01_node02.log"),
        ("/data/nccl/20261120/nccl_20261120T0215.log", (), "/data/nccl/nccl.log"),
        ("runs/2026-11-20T02:15:00Z/a.log", (), "runs/a.log"),
        ("runs/nightly-2026-11-20_021500/a.log", (), "runs/nightly/a.log"),
        ("history/date=2026-11-20/a.log", (), "history/date/a.log"),
        # Not dates: a 13th month, a longer number, a job id.
        ("node20261399/a.log", (), "node20261399/a.log"),
        ("job-120261120/a.log", (), "job-120261120/a.log"),
        # The root given with a trailing slash; the longest root wins.
        ("logs/2026-11-20/a/x.log", ("logs/", "logs/2026-11-20/"), "a/x.log"),
        # A file given itself is not relative to itself; nothing left keeps the path.
        ("logs/x.log", ("logs/x.log",), "logs/x.log"),
        ("2026-11-20", (), "2026-11-20"),
        ("-", ("-",), "-"),
    ],
)  # fmt: skip
def test_stable_source(source: str, roots: tuple[str, ...], stable: str) -> None:
    assert stable_source(source, roots) == stable


def _junit_names(root: ET.Element) -> list[tuple[str | None, str | None]]:
    return [(c.get("classname"), c.get("name")) for c in root.iter("testcase")]


@pytest.mark.parametrize("given", ["directory", "files"])
def test_junit_names_are_the_same_every_night(
    runner: CliRunner, tmp_path: Path, given: str
) -> None:
    """The layout of the issue: /logs/DATE/PAIR/all_reduce.log, given as the night's
    directory or as files; night 2 jittered differently and with a failure."""
    names = []
    for day, wrong in (("2026-11-20", False), ("2026-11-21", True)):
        night = tmp_path / "logs" / day
        for pair in ("node01-node02", "node02-node03"):
            (night / pair).mkdir(parents=True)
            text = derive.scale(derive.healthy(), derive.jitter(int(day[-2:])))
            if wrong:
                text = derive.set_wrong(text, GIB, 12)
            (night / pair / "all_reduce.log").write_text(text)
        inputs = (
            [str(night)]
            if given == "directory"
            else [str(p) for p in sorted(night.rglob("*.log"))]
        )
        xml = tmp_path / f"{day}.xml"
        result = _run(runner, *inputs, *A3_MEGA, "--junit", str(xml), "-q")
        assert result.exit_code == (1 if wrong else 0), result.output
        names.append(_junit_names(validate_junit(xml.read_text())))
    assert names[0] == names[1]
    prefix = "" if given == "directory" else f"{tmp_path}/logs/"
    log = f"{prefix}node01-node02/all_reduce.log"
    assert names[0][:4] == [
        ("ncclparse.check.integrity", f"{log} run 0"),
        ("ncclparse.check.integrity", f"{log.replace('01-node02', '02-node03')} run 0"),
        ("ncclparse.check.verdict", f"{log} run 0"),
        ("ncclparse.check.verdict", f"{log.replace('01-node02', '02-node03')} run 0"),
    ]
    assert (
        "ncclparse.check.latency",
        f"all_reduce float32 sum out-of-place 16 ranks on 2 nodes [{log}#0]",
    ) in names[0]


def test_two_logs_of_one_name_keep_their_paths() -> None:
    """Two nights' logs judged together would share a stable name: they keep their
    full paths, so that no two test cases are one."""
    sources = [
        "logs/2026-11-20/a.log",
        "logs/2026-11-21/a.log",
        "logs/2026-11-20/b.log",
    ]
    cases = tuple(Case("integrity", f"{s} run 0", "OK", "ok", s, 0) for s in sources)
    result = CheckResult(cases, (), analyze(measurements_table({})))
    assert [n for _, n in _junit_names(validate_junit(to_junit(result)))] == [
        "logs/2026-11-20/a.log run 0",
        "logs/2026-11-21/a.log run 0",
        "logs/b.log run 0",
    ]


def test_junit_times(runner: CliRunner, tmp_path: Path) -> None:
    """<testsuites> carries the seconds the check took, the same figure as the
    metrics' ncclparse_check_duration_seconds; suites and cases 0.000."""
    xml, prom = tmp_path / "out.xml", tmp_path / "out.prom"
    result = _run(
        runner, str(EXAMPLE), *A3_MEGA, "--junit", str(xml), "--prometheus",
        str(prom), "-q",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    root = validate_junit(xml.read_text())
    assert sorted(root.attrib) == ["errors", "failures", "name", "tests", "time"]
    [duration] = [
        line.split()[1]
        for line in prom.read_text().splitlines()
        if line.startswith("ncclparse_check_duration_seconds ")
    ]
    assert root.get("time") == f"{float(duration):.3f}"
    assert float(duration) > 0  # measured, not bounded: speed lives in benchmarks/
    assert {s.get("time") for s in root.iter("testsuite")} == {"0.000"}
    assert {c.get("time") for c in root.iter("testcase")} == {"0.000"}


def test_junit_of_a_check_that_could_not_complete() -> None:
    """No time is known: <testsuites> has none (the schema makes it optional)."""
    root = validate_junit(to_junit(error_result("interrupted")))
    assert sorted(root.attrib) == ["errors", "failures", "name", "tests"]
    [case] = root.iter("testcase")
    assert (case.get("name"), case.get("time")) == ("ncclparse check", "0.000")


# JSON Schema ------------------------------------------------------------------------


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(JSON_SCHEMA.read_text())
    return schema


def test_the_schema_is_shipped_and_versioned() -> None:
    schema = _schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"urn:ncclparse:check:{JSON_VERSION}"
    assert schema["properties"]["version"] == {"const": JSON_VERSION}
    assert schema["properties"]["format"] == {"const": "ncclparse-check"}
    finding = schema["$defs"]["finding"]["properties"]
    assert finding["metric"]["enum"] == [*METRICS, "wrong"]
    # In the wheel: package data of ncclparse.health, found beside the module.
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_data = pyproject["tool"]["setuptools"]["package-data"]
    assert package_data["ncclparse.report"] == ["check.schema.json"]
    assert JSON_SCHEMA.parent == Path(ncclparse.__file__).parent / "report"
    # docs/check-json.md names it.
    assert (
        "ncclparse/report/check.schema.json"
        in (ROOT / "docs" / "check-json.md").read_text()
    )


def _document() -> dict[str, Any]:
    """A real failing document: tests/test_outputs.py's kind of result, built."""
    from ncclparse.health.cases import SizeMiss

    case = Case(
        "latency", "x [a.log#0]", "FAIL", "slow", "a.log", 0, ("node1",),
        "all_reduce", 3, (SizeMiss(1024, "time_us", 2500.0, 1000.0),),
    )  # fmt: skip
    result = CheckResult((case,), (), analyze(measurements_table({})))
    document: dict[str, Any] = json.loads(to_json(result))
    return document


@needs_jsonschema
def test_real_documents_validate(runner: CliRunner, tmp_path: Path) -> None:
    """A built failing result, a check that could not complete, and the CLI's
    documents: passing, failing (#wrong), with an input missing, the first night,
    an unwritable output (error). tests/test_cli_check.py validates every document
    of its scenarios too (history regression, slow host, ...)."""
    validate_check_json(_document())
    validate_check_json(json.loads(to_json(error_result("interrupted"))))
    wrong = tmp_path / "wrong.log"
    wrong.write_text(derive.set_wrong(derive.healthy(), GIB, 12))
    scenarios = {
        "passing": ([str(EXAMPLE), *A3_MEGA], 0),
        "failing": ([str(wrong), *A3_MEGA], 1),
        "input": ([str(EXAMPLE), str(tmp_path / "missing.log")], 1),
        "first-night": (
            [str(EXAMPLE), "--history", str(tmp_path / "h"), "--first-night"],
            0,
        ),
        "error": ([str(EXAMPLE), "--markdown", str(tmp_path / "no" / "x.md")], 4),
    }
    for name, (args, status) in scenarios.items():
        out = tmp_path / f"{name}.json"
        result = _run(runner, *args, "--json", str(out), "-q")
        assert result.exit_code == status, (name, result.output)
        document = json.loads(out.read_text())
        validate_check_json(document)
        assert (document["error"] is None) == (status != 4), name


@needs_jsonschema
@pytest.mark.parametrize(
    ("mutate", "errors"),
    [
        (lambda d: d.pop("summary"),
         [([], "required", "'summary' is a required property")]),
        (lambda d: d.update(status="ok"),
         [(["status"], "enum", "'ok' is not one of ['pass', 'fail']")]),
        (lambda d: d.update(version=2), [(["version"], "const", "1 was expected")]),
        (lambda d: d.update(extra=1),
         [([], "additionalProperties",
           "Additional properties are not allowed ('extra' was unexpected)")]),
        (lambda d: d["cases"][0].update(status="broken"),
         [(["cases", 0, "status"], "const", "'fail' was expected"),
          (["cases", 0, "status"], "enum",
           "'broken' is not one of ['pass', 'fail', 'skip']"),
          (["cases"], "contains", None)]),
        # The status is the outcome's; the outcome one of the five words.
        (lambda d: d["cases"][0].update(outcome="CHECK"),
         [(["cases", 0, "status"], "const", "'pass' was expected")]),
        (lambda d: d["cases"][0].update(outcome="MAYBE"),
         [(["cases", 0, "outcome"], "enum",
           "'MAYBE' is not one of ['FAIL', 'CHECK', 'NOTE', 'OK', 'SKIP']")]),
        (lambda d: d["cases"][0].pop("findings"),
         [(["cases", 0], "required", "'findings' is a required property")]),
        (lambda d: d["cases"][0]["findings"][0].update(metric="speed"),
         [(["cases", 0, "findings", 0, "metric"], "enum",
           "'speed' is not one of ['efficiency', 'busbw_gbps', 'time_us', 'wrong']")]),
        (lambda d: d["cases"][0].update(run="0"),
         [(["cases", 0, "run"], "type", "'0' is not of type 'integer', 'null'")]),
        (lambda d: d["summary"].update(fail=-1),
         [(["summary", "fail"], "minimum", "-1 is less than the minimum of 0"),
          (["summary", "fail"], "minimum", "-1 is less than the minimum of 1")]),
        # A passing document with a failed case; a failed one without any.
        (lambda d: d.update(status="pass"),
         [(["summary", "fail"], "const", "0 was expected"),
          (["cases", 0, "status"], "enum", "'fail' is not one of ['pass', 'skip']")]),
        (lambda d: d["cases"][0].update(status="pass"),
         [(["cases", 0, "status"], "const", "'fail' was expected"),
          (["cases"], "contains", None)]),
        # An error document has one case, the error case.
        (lambda d: d.update(error="boom"),
         [(["cases", 0, "rule"], "const", "'error' was expected")]),
    ],
)  # fmt: skip
def test_mutated_documents_are_rejected(
    mutate: Any, errors: list[tuple[list[Any], str, str | None]]
) -> None:
    import jsonschema

    document = copy.deepcopy(_document())
    validate_check_json(document)
    mutate(document)
    with pytest.raises(jsonschema.ValidationError):
        validate_check_json(document)
    found = jsonschema.Draft202012Validator(_schema()).iter_errors(document)
    assert [
        (list(e.absolute_path), e.validator, e.message if message else None)
        for e, (_, _, message) in zip(found, errors, strict=True)
    ] == errors


@needs_jsonschema
def test_the_documented_example_validates() -> None:
    text = (ROOT / "docs" / "check-json.md").read_text()
    [block] = re.findall(r"^```json\n(.*?)^```", text, re.S | re.M)
    validate_check_json(json.loads(block))


# Docs ---------------------------------------------------------------------------------


SECTION = "Metrics, the Pushgateway and JUnit names"


def _doc_block(heading: str, language: str) -> str:
    text = (ROOT / "docs" / "nightly.md").read_text()
    start = text.index(f"\n### {heading}\n")
    end = text.find("\n### ", start + 1)
    section = text[start : end if end > 0 else None]
    found = re.search(rf"^```{language}\n(.*?)^```$", section, re.M | re.S)
    assert found is not None, (heading, language)
    return found.group(1)


@needs_prometheus
def test_the_documented_metrics_are_real(runner: CliRunner, tmp_path: Path) -> None:
    """docs/nightly.md's textfile excerpt is lines of the real output of the command
    it names (the duration and time are tonight's)."""
    prom = tmp_path / "nccl.prom"
    result = _run(
        runner, str(EXAMPLE), "--tag", "cluster=a3", *A3_MEGA, "--prometheus",
        str(prom), "-q",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    real = prom.read_text().splitlines()
    shown = _doc_block(SECTION, "text").splitlines()
    assert len(shown) > 20
    changing = (
        "ncclparse_check_duration_seconds ",
        "ncclparse_check_timestamp_seconds ",
    )
    for line in shown:
        if line == "...":
            continue
        if line.startswith(changing):
            name = line.split()[0]
            assert any(r.split()[0] == name for r in real), line
            continue
        # The version the docs show is the one of their release.
        line = re.sub(r'version="[^"]*"', f'version="{VERSION}"', line)
        assert line in real, line
    assert all(math.isfinite(v) for _, _, v in prometheus_samples(prom.read_text()))


def test_the_documented_junit_is_real(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The JUnit excerpt: `check logs/2026-11-20 --junit junit.xml`, the real log
    as logs/2026-11-20/pair_node01_node02.log (the time is tonight's)."""
    monkeypatch.chdir(tmp_path)
    logs = Path("logs", "2026-11-20")
    logs.mkdir(parents=True)
    (logs / "pair_node01_node02.log").write_text(EXAMPLE.read_text())
    result = _run(runner, str(logs), *A3_MEGA, "--junit", "junit.xml", "-q")
    assert result.exit_code == 0, result.output
    real = [line.strip() for line in Path("junit.xml").read_text().splitlines()]
    for line in _doc_block(SECTION, "xml").splitlines():
        if line.strip() == "...":
            continue
        if line.lstrip().startswith("<testsuites "):
            assert re.sub(r'time="[0-9.]+"', 'time="T"', line.strip()) in [
                re.sub(r'time="[0-9.]+"', 'time="T"', r) for r in real
            ], line
            continue
        assert line.strip() in real, line
