"""Render check results and comparisons for CI, dashboards and people.

Pure: each function returns a ``str``. Formats: JUnit XML (one test case per rule and
series), JSON (documented in ``docs/check-json.md``), the Prometheus text exposition
format (for node-exporter's textfile collector), Markdown and plain text.
"""

from __future__ import annotations

import contextlib
import html
import json
import math
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ncclparse.formatting import format_bytes, format_time_us, markdown_escape
from ncclparse.health.cases import ERROR_RULE, Case
from ncclparse.health.check import CheckResult
from ncclparse.health.compare import Comparison
from ncclparse.storage import atomic_output

__all__ = [
    "COMPARE_FORMATS",
    "JSON_VERSION",
    "comparison_format",
    "error_html",
    "render_comparison",
    "render_outputs",
    "to_json",
    "to_junit",
    "to_markdown",
    "to_prometheus",
    "to_text",
    "write_all",
    "write_outputs",
]

# JSON format history:
#   1 - first version (docs/check-json.md).
JSON_VERSION = 1
COMPARE_FORMATS = ("text", "json", "markdown", "html")
# XML 1.0 forbids most control characters, which logs do contain; ElementTree would
# write them and the file would not parse.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def to_text(result: CheckResult, *, verbose: bool = False) -> str:
    """Failures (and with ``verbose`` every case), then one summary line."""
    lines = [
        f"{c.status.upper()} {c.rule}: {c.message}"
        for c in result.cases
        if verbose or c.status == "fail"
    ]
    lines.append(_summary(result))
    return "\n".join(lines) + "\n"


def to_json(result: CheckResult) -> str:
    """The documented JSON document (docs/check-json.md), keys in a stable order."""
    document = {
        "format": "ncclparse-check",
        "version": JSON_VERSION,
        "status": "pass" if result.passed else "fail",
        "error": result.error,
        "summary": _counts(result),
        "assumptions": list(result.assumptions),
        "cases": [
            {
                "rule": c.rule,
                "name": c.name,
                "status": c.status,
                "message": c.message,
                "source": c.source,
                "run": c.run,
                "hosts": list(c.hosts),
                "collective": c.collective,
                "checked": c.checked,
                "findings": [
                    {
                        "size_bytes": f.size_bytes,
                        "metric": f.metric,
                        "value": _num(f.value),
                        "limit": _num(f.limit),
                        "baseline": _num(f.baseline),
                    }
                    for f in c.findings
                ],
            }
            for c in result.cases
        ],
        "hosts": [
            {
                "host": h.host,
                "slow": h.slow,
                "runs": h.runs,
                "slow_runs": h.slow_runs,
                "score_with": _num(h.score_with),
                "score_without": _num(h.score_without),
                "deficit": _num(h.deficit),
                "partners": list(h.partners),
                "evidence": [
                    {
                        "source": r.source,
                        "run": r.run,
                        "score": _num(r.score),
                        "hosts": list(r.hosts),
                    }
                    for r in h.evidence
                ],
            }
            for h in result.hosts
        ],
    }
    return json.dumps(document, indent=2, allow_nan=False) + "\n"


def to_junit(result: CheckResult) -> str:
    """JUnit XML: one ``testsuite`` per rule, one ``testcase`` per rule and series.

    A failed case carries ``<failure message=...>`` with the full message as text; a
    skipped one ``<skipped message=...>``; the case of a check that could not complete
    (rule ``error``) ``<error message=...>``. Text is escaped by ElementTree;
    characters XML cannot hold are replaced by U+FFFD.
    """
    counts = _counts(result)

    def errors(cases: Iterable[Case]) -> int:
        return sum(c.status == "fail" and c.rule == ERROR_RULE for c in cases)

    root = ET.Element(
        "testsuites",
        name="ncclparse check",
        tests=str(counts["cases"]),
        failures=str(counts["fail"] - errors(result.cases)),
        # No `skipped` here: the Jenkins xUnit schema allows it on testsuite only.
        errors=str(errors(result.cases)),
    )
    for rule in dict.fromkeys(c.rule for c in result.cases):
        cases = [c for c in result.cases if c.rule == rule]
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"ncclparse.check.{rule}",
            tests=str(len(cases)),
            failures=str(sum(c.status == "fail" for c in cases) - errors(cases)),
            skipped=str(sum(c.status == "skip" for c in cases)),
            errors=str(errors(cases)),
        )
        for case in cases:
            element = ET.SubElement(
                suite,
                "testcase",
                classname=_xml(f"ncclparse.check.{rule}"),
                name=_xml(case.name),
            )
            if case.status == "fail":
                kind = "error" if rule == ERROR_RULE else "failure"
                failure = ET.SubElement(
                    element, kind, message=_xml(case.message[:500]), type=rule
                )
                failure.text = _xml(case.message)
            elif case.status == "skip":
                ET.SubElement(element, "skipped", message=_xml(case.message))
            else:
                ET.SubElement(element, "system-out").text = _xml(case.message)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def to_prometheus(result: CheckResult, *, timestamp: float | None = None) -> str:
    """Metrics for node-exporter's textfile collector (text exposition format 0.0.4).

    ``ncclparse_check_passed`` (1/0), ``ncclparse_check_cases{status}``,
    ``ncclparse_check_case_failed{rule,name}`` (one per case),
    ``ncclparse_host_slow{host}``, ``ncclparse_host_score_ratio{host}`` and, when
    given, ``ncclparse_check_timestamp_seconds``.
    """
    counts = _counts(result)
    out: list[str] = []

    def family(name: str, kind: str, help_text: str) -> None:
        out.append(f"# HELP {name} {_help(help_text)}")
        out.append(f"# TYPE {name} {kind}")

    family("ncclparse_check_passed", "gauge", "1 when every check case passed.")
    out.append(f"ncclparse_check_passed {int(result.passed)}")
    family("ncclparse_check_cases", "gauge", "Check cases by status.")
    for status in ("pass", "fail", "skip"):
        out.append(f'ncclparse_check_cases{{status="{status}"}} {counts[status]}')
    family("ncclparse_check_case_failed", "gauge", "1 when this case failed.")
    for case in result.cases:
        labels = _labels(rule=case.rule, name=case.name)
        out.append(
            f"ncclparse_check_case_failed{{{labels}}} {int(case.status == 'fail')}"
        )
    if result.hosts:
        family("ncclparse_host_slow", "gauge", "1 when the host is consistently slow.")
        for h in result.hosts:
            out.append(f"ncclparse_host_slow{{{_labels(host=h.host)}}} {int(h.slow)}")
        family(
            "ncclparse_host_score_ratio",
            "gauge",
            "Mean run score with the host over without it (1 = typical).",
        )
        for h in result.hosts:
            ratio = h.score_with / h.score_without
            out.append(
                f"ncclparse_host_score_ratio{{{_labels(host=h.host)}}} {_value(ratio)}"
            )
    if timestamp is not None:
        family("ncclparse_check_timestamp_seconds", "gauge", "When the check ran.")
        out.append(f"ncclparse_check_timestamp_seconds {_value(timestamp)}")
    return "\n".join(out) + "\n"


def to_markdown(result: CheckResult) -> str:
    """A Markdown summary: verdict, failures table, slow hosts."""
    lines = [f"## ncclparse check: {'PASS' if result.passed else 'FAIL'}", ""]
    if result.error is not None:
        lines += [f"The check could not complete: {_cell(result.error)}", ""]
    lines += [_summary(result), ""]
    if result.failures:
        lines += ["| rule | case | details |", "| --- | --- | --- |"]
        lines += [
            f"| {_cell(c.rule)} | {_cell(c.name)} | {_cell(c.message)} |"
            for c in result.failures
        ]
        lines.append("")
    if result.hosts:
        lines += [
            "| host | slow | runs (slow) | score with / without | deficit |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {_cell(h.host)} | {'**yes**' if h.slow else 'no'} | {h.runs} "
            f"({h.slow_runs}) | {h.score_with:.2f} / {h.score_without:.2f} | "
            f"{h.deficit:.0%} |"
            for h in result.hosts
        ]
        lines.append("")
    for assumption in result.assumptions:
        lines.append(f"* Assumed: {assumption}")
    return "\n".join(lines).rstrip("\n") + "\n"


def error_html(message: str) -> str:
    """A page that replaces the HTML report of a check that could not complete, so
    that no earlier report is left to read as tonight's. Needs no template."""
    text = html.escape(message)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8">'
        "<title>ncclparse check: FAIL</title></head>\n<body>\n"
        "<h1>ncclparse check: FAIL</h1>\n"
        f"<p>The check could not complete: {text}</p>\n</body>\n</html>\n"
    )


def render_outputs(
    result: CheckResult,
    *,
    junit: Path | None = None,
    json_path: Path | None = None,
    prometheus: Path | None = None,
    markdown: Path | None = None,
    timestamp: float | None = None,
) -> dict[Path, str]:
    """Each requested rendering by its path, the Prometheus textfile first (so that
    :func:`write_all` puts it in place last). ``timestamp`` defaults to now."""
    when = time.time() if timestamp is None else timestamp
    renderings = (
        (prometheus, lambda r: to_prometheus(r, timestamp=when)),
        (junit, to_junit),
        (json_path, to_json),
        (markdown, to_markdown),
    )
    return {path: render(result) for path, render in renderings if path is not None}


def write_all(files: Mapping[Path, str]) -> None:
    """Write every file atomically, all or nothing: each is written in full to a
    temporary file first, and only when all are written are they renamed into place
    (in reverse order: the first one last). On an error before that, every path is
    left as it was. Raises NcclParseError when a file cannot be written."""
    with contextlib.ExitStack() as stack:
        for path, text in files.items():
            stack.enter_context(atomic_output(path, binary=False)).write(text)


def write_outputs(
    result: CheckResult,
    *,
    junit: Path | None = None,
    json_path: Path | None = None,
    prometheus: Path | None = None,
    markdown: Path | None = None,
) -> None:
    """Render the requested outputs, then write them all or nothing
    (:func:`write_all`; a half-written Prometheus textfile would be scraped as is).
    Raises NcclParseError when a file cannot be written."""
    write_all(
        render_outputs(
            result,
            junit=junit,
            json_path=json_path,
            prometheus=prometheus,
            markdown=markdown,
        )
    )


def _counts(result: CheckResult) -> dict[str, int]:
    counts = {"cases": len(result.cases), "pass": 0, "fail": 0, "skip": 0}
    for case in result.cases:
        counts[case.status] += 1
    return counts


def _summary(result: CheckResult) -> str:
    c = _counts(result)
    verdict = "PASS" if result.passed else "FAIL"
    return f"{verdict}: {c['fail']} failed, {c['pass']} passed, {c['skip']} skipped"


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


def _xml(text: str) -> str:
    return _XML_INVALID.sub("\ufffd", text)


def _labels(**labels: str) -> str:
    # Exposition format: label values escape backslash, double quote and newline.
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _cell(text: Any) -> str:
    return markdown_escape(text)


def comparison_format(path: Path | None, explicit: str | None = None) -> str:
    """The rendering: ``explicit``, else by extension (.json, .md, .html), else text."""
    if explicit is not None:
        return explicit
    suffix = path.suffix.lower() if path is not None else ""
    return {".json": "json", ".md": "markdown", ".html": "html", ".htm": "html"}.get(
        suffix, "text"
    )


def render_comparison(comparison: Comparison, fmt: str) -> str:
    """Render a comparison as ``text``, ``json`` or ``markdown`` (``html`` is
    :func:`ncclparse.report.render.render_comparison_html`)."""
    if fmt == "json":
        document = {
            "format": "ncclparse-compare",
            "version": 1,
            **asdict(comparison),
        }
        return json.dumps(_finite(document), indent=2, allow_nan=False) + "\n"
    if fmt not in ("text", "markdown"):
        raise ValueError(
            f"unknown format {fmt!r} (one of {', '.join(COMPARE_FORMATS)})"
        )
    md = fmt == "markdown"
    head = f"verdict: {comparison.verdict} (threshold {comparison.threshold:.0%}"
    if comparison.geomean_change is not None:
        head += f", geometric mean change {comparison.geomean_change:+.1%}"
    lines = [f"## {head})" if md else head + ")"]
    if md:
        lines += [
            "",
            "| series | size | baseline | candidate | busbw change | verdict |",
        ]
        lines.append("| --- | --- | --- | --- | --- | --- |")
    for r in comparison.rows:
        cells = (
            r.series,
            format_bytes(r.size_bytes),
            format_time_us(r.baseline_time_us),
            format_time_us(r.candidate_time_us),
            f"{r.change:+.1%}",
            r.verdict,
        )
        if md:
            lines.append(f"| {' | '.join(_cell(c) for c in cells)} |")
        else:
            lines.append("  ".join(cells))
    for title, items in (
        ("only in baseline", comparison.only_baseline),
        ("only in candidate", comparison.only_candidate),
    ):
        if items:
            lines += ["", f"{title}: {', '.join(items)}"]
    return "\n".join(lines) + "\n"


def _finite(value: object) -> object:
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
