"""Render check results and comparisons for CI, dashboards and people.

Pure, but for :func:`push_metrics`: each function returns a ``str``. Formats: JUnit
XML (one test case per rule and series, named stably from night to night), JSON
(documented in ``docs/check-json.md``, schema ``check.schema.json`` beside this
module), the Prometheus text exposition format (for node-exporter's textfile
collector, or a Pushgateway with :func:`push_metrics`), Markdown and plain text.
"""

from __future__ import annotations

import contextlib
import html
import json
import math
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ncclparse._arrow import distinct_rows, fill_null, flag, key_codes, key_text, num
from ncclparse._version import __version__
from ncclparse.formatting import markdown_escape, series_label, shown_name
from ncclparse.health.cases import ERROR_RULE, Case
from ncclparse.health.check import CheckResult
from ncclparse.schema import SERIES_KEYS
from ncclparse.store.atomic import atomic_output

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

__all__ = [
    "JSON_SCHEMA",
    "JSON_VERSION",
    "error_html",
    "json_pieces",
    "junit_pieces",
    "output_pieces",
    "push_metrics",
    "render_outputs",
    "stable_source",
    "tag_labels",
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
# The JSON Schema of that document, shipped in the package (docs/check-json.md).
JSON_SCHEMA = Path(__file__).with_name("check.schema.json")


def to_text(result: CheckResult, *, verbose: bool = False) -> str:
    """The cases that FAIL, then those to CHECK (with ``verbose`` then every other
    case), each in check order and led by its outcome, then one summary line: the
    worst first, as the Markdown summary and the report list them."""
    shown = [*result.failures, *result.to_check]
    if verbose:
        shown += [c for c in result.cases if c.outcome not in ("FAIL", "CHECK")]
    lines = [
        f"{c.outcome} {shown_name(c.rule)}: {shown_name(c.message)}" for c in shown
    ]
    lines.append(_summary(result))
    return "\n".join(lines) + "\n"


def to_json(result: CheckResult) -> str:
    """The documented JSON document (docs/check-json.md), keys in a stable order."""
    return "".join(json_pieces(result))


def json_pieces(result: CheckResult) -> Iterator[str]:
    """:func:`to_json`'s text in pieces, a case a piece, each made when asked for:
    a check of many logs writes them one by one rather than holding the whole
    document (and the many more bytes of what makes it at once)."""
    head = {
        "format": "ncclparse-check",
        "version": JSON_VERSION,
        "status": "pass" if result.passed else "fail",
        "error": result.error,
        "summary": _counts(result),
        "assumptions": list(result.assumptions),
    }
    # The document's last keys, cases then hosts, each written in its place.
    yield _json(head).removesuffix("\n}") + ',\n  "cases": ['
    for at, c in enumerate(result.cases):
        case = {
            "rule": c.rule,
            "name": c.name,
            "status": c.status,
            "outcome": c.outcome,
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
        yield ("\n" if at == 0 else ",\n") + _json(case, depth=2)
    hosts = [
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
    ]
    yield ("\n  ]" if result.cases else "]") + ',\n  "hosts": '
    yield _json(hosts, depth=1).lstrip() + "\n}\n"


def _json(value: Any, *, depth: int = 0) -> str:
    """``value`` as JSON indented by 2, its lines as deep as ``depth`` levels of
    the document (a document's newlines are all indentation: text escapes its
    own)."""
    text = json.dumps(value, indent=2, allow_nan=False)
    margin = "  " * depth
    return margin + text.replace("\n", "\n" + margin)


def to_junit(result: CheckResult, *, roots: Sequence[str] = ()) -> str:
    """:func:`junit_pieces` joined."""
    return "".join(junit_pieces(result, roots=roots))


def junit_pieces(result: CheckResult, *, roots: Sequence[str] = ()) -> Iterator[str]:
    """JUnit XML: one ``testsuite`` per rule, one ``testcase`` per rule and series.

    A failed case (FAIL) carries ``<failure message=...>`` with the full message as
    text; a skipped one (SKIP) ``<skipped message=...>``; the case of a check that could
    not complete (rule ``error``) ``<error message=...>``; a passing one (OK, NOTE,
    CHECK) ``<system-out>`` with its outcome and message: ``CHECK: ...``. Test names are
    stable from night to night: each log's path in a case name is :func:`stable_source`
    of it (relative to the longest of ``roots``, the inputs given to the check, that
    holds it; date-like parts removed), unless two logs would then share a name.
    ``time`` is the seconds the check took on ``<testsuites>`` (when ``result.seconds``
    is known) and 0.000 on each suite and case (they are judged together). Text is
    escaped by ElementTree; characters XML cannot hold are replaced by U+FFFD.
    In pieces, a suite a piece, each made when asked for: a check of many logs
    writes them one by one rather than holding the tree of every case.
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
    if result.seconds is not None:
        root.set("time", _seconds(result.seconds))
    names = _junit_names(result.cases, roots)
    rules = list(dict.fromkeys(c.rule for c in result.cases))
    if not rules:
        yield _xml_text(root, declaration=True)
        return
    # The root with one stand-in for its suites ("<" in a name or value is
    # escaped: the stand-in is found only where it stands).
    ET.SubElement(root, _SUITES)
    ET.indent(root)
    head, tail = _xml_text(root, declaration=True).split(f"<{_SUITES} />")
    yield head
    for at, rule in enumerate(rules):
        cases = [
            (c, n) for c, n in zip(result.cases, names, strict=True) if c.rule == rule
        ]
        suite = ET.Element(
            "testsuite",
            name=f"ncclparse.check.{rule}",
            tests=str(len(cases)),
            failures=str(
                sum(c.status == "fail" for c, _ in cases) - errors(c for c, _ in cases)
            ),
            skipped=str(sum(c.status == "skip" for c, _ in cases)),
            errors=str(errors(c for c, _ in cases)),
            time=_seconds(0.0),
        )
        for case, name in cases:
            element = ET.SubElement(
                suite,
                "testcase",
                classname=_xml(f"ncclparse.check.{rule}"),
                name=_xml(name),
                time=_seconds(0.0),
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
                said = f"{case.outcome}: {case.message}"
                ET.SubElement(element, "system-out").text = _xml(said)
        ET.indent(suite, level=1)
        suite.tail = "\n  " if at < len(rules) - 1 else None
        yield _xml_text(suite)
    yield tail


# What stands for the suites in the root's text while they are made one by one.
_SUITES = "ncclparse-suites"


def _xml_text(element: ET.Element, *, declaration: bool = False) -> str:
    """``element`` as XML text (with its tail), and a newline at the end of the
    document."""
    text = ET.tostring(element, encoding="unicode", xml_declaration=declaration)
    return text + "\n" if declaration else text


# A date, with its time if any, in a path: 2026-11-20, 20261120, 2026-11-20T02:15:00Z,
# 20261120T0215, 2026-11-20_021500; not within a longer run of digits.
_DATE = re.compile(
    r"(?<![0-9])(?:19|20)[0-9]{2}(-?)(?:0[1-9]|1[0-2])\1(?:0[1-9]|[12][0-9]|3[01])"
    r"(?:[T_.-]?[0-2][0-9](?::?[0-5][0-9]){1,2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?"
    r"(?![0-9])"
)
_SEPARATORS = "-_.= "


def stable_source(source: str, roots: Sequence[str] = ()) -> str:
    """A log's path as the same test tonight and tomorrow: relative to the longest of
    ``roots`` (the inputs given to the check) that is a directory above it, then
    with every date (and time) removed from each part of the path, a part that
    was only a date dropped: ``/logs/2026-11-20/node01-node02/all_reduce.log`` is
    ``/logs/node01-node02/all_reduce.log``, or ``node01-node02/all_reduce.log``
    under the root ``/logs/2026-11-20``; ``nccl_20261120.log`` is ``nccl.log``. A
    path that would be left empty is kept as it is."""
    path = PurePath(source)
    for root in sorted(roots, key=len, reverse=True):
        base = PurePath(root)
        if root not in ("", "-") and path != base and path.is_relative_to(base):
            path = path.relative_to(base)
            break
    parts = []
    for part in path.parts:
        kept = part if part == path.anchor else _undated(part)
        if kept:
            parts.append(kept)
    return str(PurePath(*parts)) if parts and parts != [path.anchor] else source


def _undated(part: str) -> str:
    """``part`` without its dates, and the separator that joined each to the rest."""
    while (found := _DATE.search(part)) is not None:
        start, end = found.span()
        if start > 0 and part[start - 1] in _SEPARATORS:
            start -= 1
        elif end < len(part) and part[end] in _SEPARATORS:
            end += 1
        part = part[:start] + part[end:]
    return part.strip(_SEPARATORS)


def _junit_names(cases: Sequence[Case], roots: Sequence[str]) -> list[str]:
    """Each case's test name, its log's path made stable (:func:`stable_source`);
    where two different names would become one, both keep their full names."""
    stable = [
        c.name.replace(c.source, stable_source(c.source, roots)) if c.source else c.name
        for c in cases
    ]
    # The first full name of each stable one, and the stable names of two: not a
    # set a case (65 MB at 50,000 logs).
    first: dict[tuple[str, str], str] = {}
    shared: set[tuple[str, str]] = set()
    for case, name in zip(cases, stable, strict=True):
        if first.setdefault((case.rule, name), case.name) != case.name:
            shared.add((case.rule, name))
    return [
        case.name if (case.rule, name) in shared else name
        for case, name in zip(cases, stable, strict=True)
    ]


def _seconds(value: float) -> str:
    return f"{max(value, 0.0):.3f}"


def to_prometheus(result: CheckResult, *, timestamp: float | None = None) -> str:
    """Metrics for node-exporter's textfile collector or a Pushgateway (text
    exposition format 0.0.4), every label stable from night to night: no log path,
    date or run number, so the same check makes the same series every night.

    Of the check: ``ncclparse_check_info{<tags>,version}`` (1),
    ``ncclparse_check_passed`` (1/0), ``ncclparse_check_cases{status}``,
    ``ncclparse_check_outcomes{outcome}`` (cases by FAIL, CHECK, NOTE, OK, SKIP),
    ``ncclparse_check_runs``, ``ncclparse_check_duration_seconds`` (when
    ``result.seconds`` is known) and, when given,
    ``ncclparse_check_timestamp_seconds``. By identity, ``<tags>`` first (the
    result's tags, named by :func:`tag_labels`):
    ``ncclparse_check_case_failed`` and ``ncclparse_check_case_judged`` (failed and
    all cases by rule, the case's name when it names no log, collective, nodes and
    ranks); ``ncclparse_check_failed_hosts`` (failed cases of runs by rule, hosts
    and collective, only while failing); ``ncclparse_busbw_bytes_per_second`` and
    ``ncclparse_busbw_efficiency_ratio`` (min and median over the runs and
    placements of each tool, collective, dtype, nodes, ranks and size;
    efficiency only where the ideal is known, not assumed); ``ncclparse_host_slow``
    and ``ncclparse_host_score_ratio`` by host. Empty labels are left out; no two
    samples share a name and labels.
    """
    tags = tag_labels(result.tags)
    out: list[str] = []
    for name, help_text, samples in (
        *_check_families(result, tags),
        *_case_families(result, tags),
        *_busbw_families(result, tags),
        *_host_families(result, tags),
        *_timing_families(result, timestamp),
    ):
        lines = [f"{name}{labels} {value}" for labels, value in samples]
        if lines:
            out.append(f"# HELP {name} {_help(help_text)}")
            out.append(f"# TYPE {name} gauge")
            out.extend(lines)
    return "\n".join(out) + "\n"


# A gauge family of to_prometheus: its name, its help and its samples (the label
# set, as _labelset gives it, and the value, as text).
_Family = tuple[str, str, list[tuple[str, str]]]


def _check_families(result: CheckResult, tags: dict[str, str]) -> list[_Family]:
    """The check as a whole: its tags and version, pass, cases by status and by
    outcome, runs."""
    counts = _counts(result)
    version = {**tags, "version": __version__}
    return [
        (
            "ncclparse_check_info",
            "The check's --tag values and ncclparse's version (always 1).",
            [(_labelset(version), "1")],
        ),
        (
            "ncclparse_check_passed",
            "1 when every check case passed.",
            [("", str(int(result.passed)))],
        ),
        (
            "ncclparse_check_cases",
            "Check cases by status.",
            [
                (_labelset({"status": s}), str(counts[s]))
                for s in ("pass", "fail", "skip")
            ],
        ),
        (
            "ncclparse_check_outcomes",
            "Check cases by outcome: FAIL fails the check, CHECK passes but is worth "
            "a look, NOTE and OK pass, SKIP judged nothing.",
            [(_labelset({"outcome": o}), str(n)) for o, n in result.outcomes.items()],
        ),
        (
            "ncclparse_check_runs",
            "Benchmark runs read (one integrity case each).",
            [("", str(sum(c.rule == "integrity" for c in result.cases)))],
        ),
    ]


def _case_families(result: CheckResult, tags: dict[str, str]) -> list[_Family]:
    """Failed and all cases by rule and identity (_case_groups); the hosts of each
    failed case of a run (_failed_runs)."""
    groups = _case_groups(result, tags)
    return [
        (
            "ncclparse_check_case_failed",
            "Failed check cases of this rule and identity (collective, nodes, ranks).",
            [(_labelset(dict(key)), str(n)) for key, (n, _) in groups.items()],
        ),
        (
            "ncclparse_check_case_judged",
            "Check cases of this rule and identity (collective, nodes, ranks).",
            [(_labelset(dict(key)), str(n)) for key, (_, n) in groups.items()],
        ),
        (
            "ncclparse_check_failed_hosts",
            "Failed check cases of runs on these hosts (present only while failing).",
            [(_labelset(dict(key)), str(n)) for key, n in _failed_runs(result, tags)],
        ),
    ]


def _failed_runs(
    result: CheckResult, tags: Mapping[str, str]
) -> list[tuple[tuple[tuple[str, str], ...], int]]:
    """Failed cases of runs by tags, rule, hosts (sorted, comma-joined) and
    collective: what an alert names (the pair of a pairwise job). Runs whose hosts
    are unknown are counted under no ``hosts`` label. Only failures make series, so
    a healthy night adds none and a fixed pair's series goes stale."""
    counts: dict[tuple[tuple[str, str], ...], int] = {}
    for case in result.cases:
        if case.status != "fail" or case.run is None:
            continue
        labels = {
            **tags,
            "rule": case.rule,
            "hosts": ",".join(sorted(case.hosts)),
            "collective": case.collective or "",
        }
        key = tuple((k, v) for k, v in labels.items() if v)
        counts[key] = counts.get(key, 0) + 1
    return sorted(counts.items())


def _busbw_families(result: CheckResult, tags: dict[str, str]) -> list[_Family]:
    """Bus bandwidth and its efficiency by shape and size (_measured)."""
    measured = _measured(result, tags)
    return [
        (
            "ncclparse_busbw_bytes_per_second",
            "Bus bandwidth measured (recomputed from size and time), in bytes per "
            "second: min and median over the runs and placements of this shape and "
            "size.",
            [
                (_labelset({**labels, "stat": stat}), str(round(value)))
                for labels, values in measured
                for stat, value in values["busbw"].items()
            ],
        ),
        (
            "ncclparse_busbw_efficiency_ratio",
            "Bus bandwidth over the ideal of the hardware given (1 = ideal): min and "
            "median over the runs and placements of this shape and size.",
            [
                (_labelset({**labels, "stat": stat}), _value(round(value, 6)))
                for labels, values in measured
                for stat, value in values["efficiency"].items()
            ],
        ),
    ]


def _host_families(result: CheckResult, tags: dict[str, str]) -> list[_Family]:
    """Each host judged by blame: slow or not, and its score ratio."""
    return [
        (
            "ncclparse_host_slow",
            "1 when the host is consistently slow.",
            [
                (_labelset({**tags, "host": h.host}), str(int(h.slow)))
                for h in result.hosts
            ],
        ),
        (
            "ncclparse_host_score_ratio",
            "Mean run score with the host over without it (1 = typical).",
            [
                (
                    _labelset({**tags, "host": h.host}),
                    _value(h.score_with / h.score_without),
                )
                for h in result.hosts
            ],
        ),
    ]


def _timing_families(result: CheckResult, timestamp: float | None) -> list[_Family]:
    """How long the check took and when it ran, when known."""
    families: list[_Family] = []
    if result.seconds is not None:
        families.append(
            (
                "ncclparse_check_duration_seconds",
                "How long the check took: reading the logs and the history, judging.",
                [("", _value(round(result.seconds, 3)))],
            )
        )
    if timestamp is not None:
        families.append(
            (
                "ncclparse_check_timestamp_seconds",
                "When the check ran.",
                [("", _value(timestamp))],
            )
        )
    return families


# Label names the metrics use themselves, and those Prometheus gives a scrape target.
_OWN_LABELS = frozenset(
    {"collective", "dtype", "host", "hosts", "name", "nnodes", "nranks", "outcome",
     "rule", "size_bytes", "stat", "status", "tool", "version"}
)  # fmt: skip
_TARGET_LABELS = frozenset({"job", "instance"})


def tag_labels(tags: Mapping[str, str]) -> dict[str, str]:
    """The label of each tag (``--tag key=value``), sorted by key: ``key`` with
    every character but ASCII letters, digits and ``_`` replaced by ``_``, and
    ``tag_`` before it when it starts with a digit or ``__``, or is a label the
    metrics use themselves (``rule``, ``collective``, ...), ``job`` or
    ``instance``; a name already taken gets ``_2``, ``_3``, ..."""
    labels: dict[str, str] = {}
    for key, value in sorted(tags.items()):
        name = re.sub(r"[^A-Za-z0-9_]", "_", key)
        if (
            not name
            or name[0].isdigit()
            or name.startswith("__")
            or name in _OWN_LABELS | _TARGET_LABELS
        ):
            name = f"tag_{name}"
        unique, n = name, 2
        while unique in labels:
            unique, n = f"{name}_{n}", n + 1
        labels[unique] = value
    return labels


# A series as the case metrics see it: (label, collective, nodes, ranks).
_Shape = tuple[str, str, str, str]


def _case_groups(
    result: CheckResult, tags: Mapping[str, str]
) -> dict[tuple[tuple[str, str], ...], tuple[int, int]]:
    """(failed, all) cases by stable identity: the tags, the rule, the name of a case
    that names no log (``baseline``, a host, ...), and the collective, nodes and
    ranks of the runs or series the case judged."""
    series = _series(result)
    groups: dict[tuple[tuple[str, str], ...], tuple[int, int]] = {}
    for case in result.cases:
        labels = {**tags, "rule": case.rule}
        if case.source is None:
            labels["name"] = case.name
        shapes: list[_Shape] = []
        if case.source is not None and case.run is not None:
            shapes = series.get((case.source, case.run), [])
            suffix = f" [{case.source}#{case.run}]"
            if case.name.endswith(suffix):
                label = case.name.removesuffix(suffix)
                shapes = [s for s in shapes if s[0] == label]
        if case.source is None or case.run is not None:
            labels["collective"] = case.collective or ""
        labels["nnodes"] = _joined(s[2] for s in shapes)
        labels["nranks"] = _joined(s[3] for s in shapes)
        key = tuple((k, v) for k, v in labels.items() if v)
        failed, total = groups.get(key, (0, 0))
        groups[key] = (failed + (case.status == "fail"), total + 1)
    return groups


def _series(result: CheckResult) -> dict[tuple[str, int], list[_Shape]]:
    """Each run's series as (label, collective, nodes, ranks), in order of
    appearance, the label as the check names the series (``all_reduce float32 sum
    out-of-place 16 ranks on 2 nodes``). Grouped on integer codes, a key's text made
    once per series: a frame of every row's keys as text took 370 MB at 10,000
    logs, and their codes (:func:`_first_rows`) are made a slice of rows at a
    time."""
    rows = result.analysis.rows
    if not set(SERIES_KEYS) <= set(rows.column_names) or rows.num_rows == 0:
        return {}
    keys = rows.select(list(SERIES_KEYS)).take(_first_rows(rows, SERIES_KEYS))
    texts = [key_text(keys[k]).tolist() for k in SERIES_KEYS if k != "run"]
    found: dict[tuple[str, int], list[_Shape]] = {}
    for run, *text in zip(keys["run"].to_pylist(), *texts, strict=True):
        values = dict(zip((k for k in SERIES_KEYS if k != "run"), text, strict=True))
        found.setdefault((str(values["source"]), int(run)), []).append(
            (
                series_label(values),
                str(values["collective"]),
                str(values["nnodes"]),
                str(values["nranks"]),
            )
        )
    return found


# Rows whose keys are coded at a time: codes of every kept row at once took ~100
# bytes a row at the end of a check of many logs (300 MB at 50,000 logs).
_CODED_ROWS = 1 << 18


def _first_rows(rows: pa.Table, keys: Sequence[str]) -> npt.NDArray[np.int64]:
    """The index of the first row of each distinct ``keys`` (equal where their
    :func:`_text_codes` are), ascending: the first rows of each slice of
    ``_CODED_ROWS`` rows, then the first of those."""
    found = []
    for start in range(0, rows.num_rows, _CODED_ROWS):
        part = rows.slice(start, _CODED_ROWS)
        first, _ = distinct_rows([_text_codes(part[k]) for k in keys])
        found.append(np.sort(first) + start)
    candidates = np.concatenate(found)
    if len(found) > 1:
        picked = rows.select(list(keys)).take(candidates)
        first, _ = distinct_rows([_text_codes(picked[k]) for k in keys])
        candidates = candidates[np.sort(first)]
    return candidates


def _text_codes(column: pa.ChunkedArray[Any]) -> npt.NDArray[np.int64]:
    """:func:`key_codes` of ``column``, equal where its :func:`key_text` is: a null
    text the same as "" (an integer never reads "")."""
    if pa.types.is_integer(column.type):
        return key_codes(column)
    whole = column.combine_chunks()
    if not pa.types.is_dictionary(whole.type):
        whole = pc.dictionary_encode(whole)
    text = cast("pa.DictionaryArray[Any, Any]", whole)
    codes = key_codes(text)
    if pa.types.is_string(text.dictionary.type):
        empty = pc.index(text.dictionary, "").as_py()
        if empty >= 0:
            codes[codes == -1] = empty
    return codes


_MEASURED_KEYS = ("tool", "collective", "dtype", "nnodes", "nranks", "size_bytes")


def _measured(
    result: CheckResult, tags: Mapping[str, str]
) -> list[tuple[dict[str, str], dict[str, dict[str, float]]]]:
    """Per shape and size (labels), the min and median busbw in bytes/s and, where
    the ideal is known (not assumed), efficiency: over every run and placement,
    without CPU-time, grouped and 0-byte rows. Grouped on integer codes, a key's
    text made once per group: a check of many logs has millions of rows here."""
    rows = result.analysis.rows
    wanted = {*_MEASURED_KEYS, "busbw_calc_gbps", "efficiency", "ideal_basis"}
    if not wanted <= set(rows.column_names) or rows.num_rows == 0:
        return []
    # Each group's values gathered a slice of rows at a time, the slice's keys
    # coded and grouped alone: never the codes of every row at once.
    groups: dict[tuple[Any, ...], int] = {}  # keys' values (null: None): group
    labels: list[tuple[str, ...]] = []
    values: list[tuple[list[npt.NDArray[np.float64]], ...]] = []
    for start in range(0, rows.num_rows, _CODED_ROWS):
        part = rows.slice(start, _CODED_ROWS)
        sized = num(part, "size_bytes") > 0
        usable = np.flatnonzero(~flag(part, "cputime") & ~flag(part, "grouped") & sized)
        if not len(usable):
            continue
        first, group = distinct_rows(
            [key_codes(part[k])[usable] for k in _MEASURED_KEYS]
        )
        busbw = num(part, "busbw_calc_gbps")[usable] * 1e9
        basis = fill_null(part["ideal_basis"], "")
        assumed = pc.equal(basis, pa.scalar("assumed")).to_numpy(zero_copy_only=False)
        judged = np.where(assumed[usable], np.nan, num(part, "efficiency")[usable])
        keys = part.select(list(_MEASURED_KEYS)).take(usable[first])
        seen = zip(*(keys[k].to_pylist() for k in _MEASURED_KEYS), strict=True)
        texts = zip(*(key_text(keys[k]).tolist() for k in _MEASURED_KEYS), strict=True)
        order = np.argsort(group, kind="stable")
        bounds = np.searchsorted(group[order], np.arange(len(first) + 1))
        for at, (key, text) in enumerate(zip(seen, texts, strict=True)):
            if key not in groups:
                groups[key] = len(labels)
                labels.append(text)
                values.append(([], []))
            members = order[bounds[at] : bounds[at + 1]]
            for kept, column in zip(values[groups[key]], (busbw, judged), strict=True):
                kept.append(column[members])
    found = []
    for at, label in sorted(enumerate(labels), key=lambda item: _order(item[1])):
        stats = {
            metric: _min_median(np.concatenate(kept))
            for metric, kept in zip(("busbw", "efficiency"), values[at], strict=True)
        }
        if stats["busbw"] or stats["efficiency"]:
            named = dict(zip(_MEASURED_KEYS, map(str, label), strict=True))
            found.append(({**tags, **named}, stats))
    return found


def _min_median(values: npt.NDArray[np.float64]) -> dict[str, float]:
    """Min and median of the finite values; empty when there are none."""
    known = values[np.isfinite(values)]
    if not len(known):
        return {}
    return {"min": float(known.min()), "median": float(np.median(known))}


def _order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """Sort text keys with numbers (nodes, ranks, size) in numeric order."""
    return tuple(
        (len(str(v)), str(v)) if str(v).isdigit() else (0, str(v)) for v in key
    )


def _joined(values: Iterable[str]) -> str:
    """Distinct non-empty values in numeric order, joined by commas."""
    return ",".join(sorted({v for v in values if v}, key=lambda v: (len(v), v)))


def to_markdown(result: CheckResult) -> str:
    """A Markdown summary: verdict, the cases that FAIL then those to CHECK (each in
    check order, as the report lists them), slow hosts."""
    lines = [f"## ncclparse check: {result.headline}", ""]
    if result.error is not None:
        lines += [f"The check could not complete: {_cell(result.error)}", ""]
    lines += [_summary(result), ""]
    shown = [*result.failures, *result.to_check]
    if shown:
        lines += ["| outcome | rule | case | details |", "| --- | --- | --- | --- |"]
        lines += [
            f"| {c.outcome} | {_cell(c.rule)} | {_cell(c.name)} | {_cell(c.message)} |"
            for c in shown
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
    roots: Sequence[str] = (),
) -> dict[Path, str]:
    """Each requested rendering by its path, the Prometheus textfile first (so that
    :func:`write_all` puts it in place last). ``timestamp`` defaults to now;
    ``roots`` are the inputs given to the check (JUnit names are relative to
    them: :func:`stable_source`)."""
    return {
        path: "".join(pieces)
        for path, pieces in output_pieces(
            result,
            junit=junit,
            json_path=json_path,
            prometheus=prometheus,
            markdown=markdown,
            timestamp=timestamp,
            roots=roots,
        ).items()
    }


def output_pieces(
    result: CheckResult,
    *,
    junit: Path | None = None,
    json_path: Path | None = None,
    prometheus: Path | None = None,
    markdown: Path | None = None,
    timestamp: float | None = None,
    roots: Sequence[str] = (),
) -> dict[Path, Iterable[str]]:
    """:func:`render_outputs`, JUnit and JSON in pieces made as :func:`write_all`
    writes them (:func:`junit_pieces`, :func:`json_pieces`): a check of many logs
    never holds their whole text."""
    when = time.time() if timestamp is None else timestamp
    renderings: tuple[tuple[Path | None, Callable[[], Iterable[str]]], ...] = (
        (prometheus, lambda: [to_prometheus(result, timestamp=when)]),
        (junit, lambda: junit_pieces(result, roots=roots)),
        (json_path, lambda: json_pieces(result)),
        (markdown, lambda: [to_markdown(result)]),
    )
    return {path: render() for path, render in renderings if path is not None}


def write_all(files: Mapping[Path, str | Iterable[str]]) -> None:
    """Write every file atomically, all or nothing: each is written in full (its
    text, or its pieces in order) to a temporary file first, and only when all are
    written are they renamed into place (in reverse order: the first one last). On
    an error before that, every path is left as it was. Raises NcclParseError when
    a file cannot be written; an error making a piece is raised as it is."""
    with contextlib.ExitStack() as stack:
        for path, text in files.items():
            handle = stack.enter_context(atomic_output(path, binary=False))
            for piece in [text] if isinstance(text, str) else text:
                handle.write(piece)


def write_outputs(
    result: CheckResult,
    *,
    junit: Path | None = None,
    json_path: Path | None = None,
    prometheus: Path | None = None,
    markdown: Path | None = None,
    roots: Sequence[str] = (),
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
            roots=roots,
        )
    )


def push_metrics(
    result: CheckResult,
    url: str,
    *,
    job: str = "ncclparse",
    timestamp: float | None = None,
    timeout: float = 30.0,
) -> None:
    """PUT :func:`to_prometheus`'s metrics to the Pushgateway at ``url`` (``http://``
    or ``https://``), replacing the group of ``job`` and the result's tags (named
    by :func:`tag_labels`): ``URL/metrics/job/<job>/<tag>/<value>...``, so that
    clusters pushing under one job keep a group each. The text is read back by
    prometheus_client's parser first: a malformed exposition fails here, not at
    the gateway. Needs prometheus_client (``pip install 'ncclparse[pushgateway]'``;
    ImportError without it); raises OSError when the push fails (the connection
    refused, an HTTP error status, a timeout after ``timeout`` seconds)."""
    from prometheus_client.exposition import push_to_gateway
    from prometheus_client.parser import text_string_to_metric_families

    families = list(
        text_string_to_metric_families(to_prometheus(result, timestamp=timestamp))
    )
    push_to_gateway(
        url,
        job=job,
        registry=_Families(families),
        grouping_key=tag_labels(result.tags),
        timeout=timeout,
    )


class _Families:
    """A prometheus_client collector of metric families already made."""

    def __init__(self, families: Sequence[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def _counts(result: CheckResult) -> dict[str, Any]:
    """Cases in all, by status (a CHECK and a NOTE pass) and by outcome."""
    statuses = [case.status for case in result.cases]
    return {
        "cases": len(statuses),
        **{status: statuses.count(status) for status in ("pass", "fail", "skip")},
        "outcomes": result.outcomes,
    }


def _summary(result: CheckResult) -> str:
    """``PASS with 1 CHECK: 0 failed, 12 passed, 1 to check, 7 skipped``: every case
    counted once; "to check" only when some are."""
    n = result.outcomes
    looks = f"{n['CHECK']} to check, " if n["CHECK"] else ""
    return (
        f"{result.headline}: {n['FAIL']} failed, {n['OK'] + n['NOTE']} passed, "
        f"{looks}{n['SKIP']} skipped"
    )


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


def _xml(text: str) -> str:
    """``text`` with its control characters as escapes: XML 1.0 forbids most of
    them (the file would not parse), and a CI page shows the rest raw."""
    return shown_name(text)


def _labelset(labels: Mapping[str, str]) -> str:
    """``{k="v",...}`` of the non-empty labels, in order; "" when there is none."""

    # Exposition format: label values escape backslash, double quote and newline.
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    pairs = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items() if v)
    return f"{{{pairs}}}" if pairs else ""


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
