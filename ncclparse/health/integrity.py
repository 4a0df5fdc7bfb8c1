"""Data integrity cases, which fail closed: inputs, runs and expected data.

A missing, empty or unrecognised input, a failed or truncated run, tool errors,
out-of-bounds FAILED, ``#wrong`` > 0 (nccl-tests' count, not the old max-deviation
column), a run without rows, an expected collective or size absent: each is a failed
case naming the source, run, hosts and collective.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ncclparse.formatting import format_bytes
from ncclparse.health.cases import Case, Finding, Status, context, hosts
from ncclparse.health.rules import Rules
from ncclparse.schema import SERIES_KEYS

__all__ = ["expect_cases", "input_case", "integrity_case"]


def input_case(exc: Exception) -> Case:
    text = str(exc)
    source = getattr(exc, "source", None) or text.split(":", 1)[0]
    return Case("input", source, "fail", f"{text} (no data is never a pass)", source)


def integrity_case(run: dict[str, Any], rows: pd.DataFrame) -> Case:
    source, index, found = run["source"], run["run"], hosts(run)
    problems = []
    if run["status"] != "complete":
        problems.append(f"run {run['status']}")
    if run["errors"]:
        shown = "; ".join(run["errors"][:3])
        more = f" (+{len(run['errors']) - 3} more)" if len(run["errors"]) > 3 else ""
        problems.append(f"tool reported errors: {shown}{more}")
    if run["oob_ok"] is False or (run["oob_values"] or 0) > 0:
        problems.append(f"out of bounds values: {run['oob_values']} FAILED")
    if run["avg_busbw_ok"] is False:
        problems.append(
            f"average bus bandwidth {run['avg_busbw_gbps']} FAILED its minimum"
        )
    mine = rows[(rows["source"] == source) & (rows["run"] == index)]
    wrong = mine[(mine["wrong_kind"] == "count") & (mine["wrong"] > 0)]
    findings = tuple(
        Finding(int(r.size_bytes), "wrong", float(r.wrong), 0.0)
        for r in wrong.itertuples()
    )
    if findings:
        sizes = ", ".join(
            f"{format_bytes(f.size_bytes)} {r.placement} #wrong {f.value:g}"
            for f, r in zip(findings, wrong.itertuples(), strict=True)
        )
        problems.append(f"#wrong > 0 at {len(findings)} size(s): {sizes}")
    if run["rows"] == 0:
        problems.append("no measurements (no data is never a pass)")
    collective = ", ".join(run["collectives"]) or None
    name = f"{source} run {index}"
    where = f"{name} (hosts {', '.join(found) or 'unknown'}) {collective or ''}"
    status: Status = "fail" if problems else "pass"
    message = f"{where.strip()}: {'; '.join(problems) or 'data complete and valid'}"
    return Case(
        "integrity",
        name,
        status,
        message,
        source,
        index,
        found,
        collective,
        int(run["rows"]),
        findings,
    )


def expect_cases(rows: pd.DataFrame, rules: Rules, sources: list[str]) -> list[Case]:
    cases = []
    present = set(rows["collective"])
    for collective in rules.expect.collectives:
        ok = collective in present
        message = f"{collective}: " + (
            "present" if ok else f"absent from every input ({', '.join(sources)})"
        )
        cases.append(
            Case(
                "expect",
                collective,
                "pass" if ok else "fail",
                message,
                collective=collective,
            )
        )
    if rules.expect.sizes:
        for key, group in rows.groupby(list(SERIES_KEYS), dropna=False, sort=False):
            missing = sorted(set(rules.expect.sizes) - set(group["size_bytes"]))
            ctx = context(key, {})
            shown = ", ".join(format_bytes(s) for s in missing)
            message = f"{ctx['source']} run {ctx['run']} {ctx['label']}: " + (
                f"expected size(s) absent: {shown}" if missing else "all present"
            )
            cases.append(
                Case(
                    "expect",
                    f"{ctx['label']} [{ctx['source']}#{ctx['run']}]",
                    "fail" if missing else "pass",
                    message,
                    ctx["source"],
                    ctx["run"],
                    (),
                    ctx["collective"],
                    len(rules.expect.sizes),
                )
            )
    return cases
