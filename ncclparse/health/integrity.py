"""Data integrity cases, which fail closed: inputs, runs and expected data.

A missing, empty or unrecognised input, no run in any input, a failed or truncated
run, tool errors, out-of-bounds FAILED, ``#wrong`` > 0 (nccl-tests' count, not the old
max-deviation column), a printed bandwidth that size and time contradict, a run
without rows, a measurement line with an impossible value (runs ``refused``), an
expected collective or size absent, a series of the history baseline
absent, a history that gives no baseline at all: each is a failed case naming the
source, run, hosts and collective, or what was looked for and what was found.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

# The tolerance of the printed digits, as the busbw_mismatch flag computes it.
from ncclparse.efficiency.bandwidth import _print_tolerance, _time_tolerance
from ncclparse.formatting import format_bytes, format_gbps, series_label, shown_name
from ncclparse.health.baselines import RunDates, Selection
from ncclparse.health.cases import SHOWN, Case, Outcome, SizeMiss, context, hosts
from ncclparse.health.rules import HistoryPolicy, Rules
from ncclparse.health.verdict import MISPRINT, RECOMPUTABLE
from ncclparse.schema import SERIES_KEYS, SHAPE_KEYS

__all__ = [
    "SWITCHED_OFF",
    "baseline_cases",
    "expect_cases",
    "history_expect_cases",
    "input_case",
    "integrity_case",
    "misprinted_by_run",
    "no_run_case",
    "switched_off_case",
]


def input_case(exc: Exception) -> Case:
    """The failed case of an input that could not be read; its text names a file
    (:func:`~ncclparse.formatting.shown_name`: one line, control characters shown)."""
    text = shown_name(str(exc))
    source = shown_name(getattr(exc, "source", None) or text.split(":", 1)[0])
    return Case("input", source, "FAIL", f"{text} (no data is never a pass)", source)


def no_run_case(sources: Sequence[str]) -> Case:
    """The failed case of a check that found no run in any input."""
    shown = ", ".join(sources[:SHOWN])
    more = f" and {len(sources) - SHOWN} more" if len(sources) > SHOWN else ""
    given = f"in {len(sources)} input(s) ({shown}{more})" if sources else "(no input)"
    message = f"no benchmark run {given}: no data is never a pass"
    return Case("runs", "all inputs", "FAIL", message)


def integrity_case(
    run: dict[str, Any], mine: pd.DataFrame, misprinted: list[str] | None = None
) -> Case:
    """The ``integrity`` case of one run (a ``runs`` row) from its analysed rows
    (``misprinted``: the run's :func:`misprinted_by_run`, when judging many runs)."""
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
    refused = list(run.get("refused") or ())
    if refused:
        more = f" (+{len(refused) - 3} more)" if len(refused) > 3 else ""
        problems.append(
            f"data error: {len(refused)} measurement line(s) with an impossible "
            f"value, not read: {'; '.join(refused[:3])}{more}"
        )
    count = mine["wrong"].to_numpy(dtype=float, na_value=np.nan)
    at = np.flatnonzero((mine["wrong_kind"].to_numpy() == "count") & (count > 0))
    size, placement = mine["size_bytes"].to_numpy(), mine["placement"].to_numpy()
    findings = tuple(SizeMiss(int(size[i]), "wrong", float(count[i]), 0.0) for i in at)
    if findings:
        sizes = ", ".join(
            f"{format_bytes(f.size_bytes)} {placement[i]} #wrong {f.value:g}"
            for f, i in zip(findings, at, strict=True)
        )
        problems.append(f"#wrong > 0 at {len(findings)} size(s): {sizes}")
    misprinted = _misprinted(mine) if misprinted is None else misprinted
    if misprinted:
        extra = len(misprinted) - SHOWN
        problems.append(
            "printed bandwidth disagrees with size and time beyond the rounding of "
            f"its digits (a corrupt or edited log) at {len(misprinted)} row(s): "
            + ", ".join(misprinted[:SHOWN])
            + (f" and {extra} more" if extra > 0 else "")
        )
    if run["rows"] == 0:
        problems.append("no measurements (no data is never a pass)")
    collective = ", ".join(run["collectives"]) or None
    name = f"{source} run {index}"
    where = f"{name} (hosts {', '.join(found) or 'unknown'}) {collective or ''}"
    outcome: Outcome = "FAIL" if problems else "OK"
    message = f"{where.strip()}: {'; '.join(problems) or 'data complete and valid'}"
    return Case(
        "integrity",
        name,
        outcome,
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
                "OK" if ok else "FAIL",
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
                    "FAIL" if missing else "OK",
                    message,
                    ctx["source"],
                    ctx["run"],
                    (),
                    ctx["collective"],
                    len(rules.expect.sizes),
                )
            )
    return cases


def history_expect_cases(
    rows: pd.DataFrame, base: pd.DataFrame, policy: HistoryPolicy
) -> list[Case]:
    """One ``expect`` case per shape (``schema.SHAPE_KEYS``: tool, collective, dtype,
    redop, root, placement, ranks, nodes) the history baseline holds with at least
    ``policy.min_runs`` runs at some size: it fails when no input has a row of it (a
    collective dropped from the nightly job must not pass on those that remain).
    ``base`` is :func:`ncclparse.health.baselines.baselines`' table."""
    if base.empty:  # no history (then the table has no "runs" column either)
        return []
    established = base[(base["runs"] >= policy.min_runs).to_numpy()]
    if established.empty:
        return []
    shapes = established.groupby(level=list(SHAPE_KEYS), sort=True).agg(
        runs=("runs", "max"), last=("last_date", "max")
    )
    present = set(rows[list(SHAPE_KEYS)].itertuples(index=False, name=None))
    cases = []
    for record in shapes.reset_index().to_dict("records"):
        values = {str(k): v for k, v in record.items()}
        label = f"{values['tool']} {series_label(values)}"
        seen = f"{int(values['runs'])} runs, last on {values['last']}"
        ok = tuple(values[k] for k in SHAPE_KEYS) in present
        message = f"{label}: " + (
            f"present, as in the history baseline ({seen})"
            if ok
            else f"in the history baseline ({seen}) but absent from every input; "
            "--no-expect-history if it was dropped on purpose"
        )
        cases.append(
            Case(
                "expect",
                f"{label} [history]",
                "OK" if ok else "FAIL",
                message,
                collective=values["collective"] or None,
                checked=int(values["runs"]),
            )
        )
    return cases


def baseline_cases(
    chosen: Selection,
    policy: HistoryPolicy,
    *,
    first_night: bool = False,
    name: str = "the history",
) -> list[Case]:
    """The ``history`` cases of the baseline itself (``chosen`` is
    :func:`ncclparse.health.baselines.select_baseline`'s; ``name`` names the history).

    ``baseline`` passes naming the runs it is made of, and fails when no run can be
    one (the history holds none, none with the tags, or none usable: tonight's own
    logs, failed runs, runs older than the window), saying what was looked for and
    what the history holds; with ``first_night`` that case is skipped instead. It
    fails too when runs older than the window exist and those in it are fewer than
    ``min_runs`` at every size (the rules, not a young history, keep every size from
    being judged). ``baseline window``, skipped, names the runs older than the
    window when others make the baseline (when none do, the ``baseline`` case names
    them).
    """
    tags = ", ".join(f"{k}={v}" for k, v in chosen.tags.items())
    with_tags = f" with {tags}" if tags else ""
    cases = []
    if chosen.selected and chosen.old and not _judges_a_size(chosen, policy):
        # Not a young history: the window leaves too few runs for any size.
        message = (
            f"no size can be judged: {_runs(chosen.selected)}{with_tags}, "
            f"{_dated(chosen.selected)}, are in the {policy.max_age_days}-day window "
            f"(which starts on {chosen.oldest}), fewer than [history] min_runs "
            f"({policy.min_runs}) at every size, and {_runs(chosen.old)}, "
            f"{_dated(chosen.old)}, are older; raise [history] max_age_days or lower "
            "min_runs"
        )
        outcome: Outcome = "SKIP" if first_night else "FAIL"
        cases.append(Case("history", "baseline", outcome, message))
    elif chosen.selected:
        limit = (
            f"within {policy.max_age_days} days" if chosen.oldest else "no age limit"
        )
        message = (
            f"{_runs(chosen.selected)}{with_tags}, {_dated(chosen.selected)}, make "
            f"the baseline (up to the {policy.window} most recent per size, {limit})"
        )
        cases.append(
            Case("history", "baseline", "OK", message, checked=len(chosen.selected))
        )
    else:
        why = _no_baseline(chosen, policy, name, with_tags)
        if first_night:
            message = (
                f"first night (--first-night): no baseline: {why}; tonight is judged "
                "without history"
            )
            cases.append(Case("history", "baseline", "SKIP", message))
        else:
            advice = "pass --first-night if tonight is the first night" + (
                f" of {tags}" if tags else ""
            )
            if tags and chosen.held and not chosen.tagged:
                advice = (
                    f"give the --tag values the history was ingested with, or {advice}"
                )
            elif chosen.old:
                advice = f"raise [history] max_age_days, or {advice}"
            message = f"no baseline: {why}; {advice}"
            cases.append(Case("history", "baseline", "FAIL", message))
    if chosen.old and chosen.selected:
        message = (
            f"{_runs(chosen.old)}{with_tags}, {_dated(chosen.old)}, "
            f"{_older(policy, chosen)} and not part of the baseline; [history] "
            "max_age_days sets the window"
        )
        cases.append(
            Case("history", "baseline window", "SKIP", message, checked=len(chosen.old))
        )
    return cases


# The name of the case of a rule switched off (the history's keeps its own name,
# ``baseline``, the one it has when judging).
SWITCHED_OFF = "switched off"


def switched_off_case(
    rule: str, section: str, origin: str | None, name: str = SWITCHED_OFF
) -> Case:
    """The skipped case of ``rule`` switched off by ``enabled = false`` in
    ``section`` (``[cohort]``) of the rules file ``origin``: said in every output,
    so that an alert that cannot fire is seen."""
    where = f" in {origin}" if origin else ""
    message = f"{rule} judging switched off by {section} enabled = false{where}"
    return Case(rule, name, "SKIP", message)


def stale_inputs_case(chosen: Selection, input_keys: Mapping[str, str]) -> list[Case]:
    """One failing ``history`` case per input log (``input_keys``: each log with
    measurements and its ingest key) the history got on another night
    (:attr:`Selection.stale`): its benchmark did not run tonight, and judging it
    again would pass every night. Logs ingested tonight (a check run after the
    ingest) are tonight's."""
    return [
        Case(
            "history",
            f"fresh input {shown_name(source)}",
            "FAIL",
            f"{shown_name(source)} is already in the history, ingested on "
            f"{chosen.stale[key]}: this log was not refreshed tonight (did its "
            "benchmark run?)",
            source,
        )
        for source, key in sorted(input_keys.items())
        if key in chosen.stale
    ]


def _no_baseline(
    chosen: Selection, policy: HistoryPolicy, name: str, with_tags: str
) -> str:
    """Why ``chosen`` selected no run: what the history holds, against what."""
    if not chosen.held:
        return f"{name} holds no run"
    if not chosen.tagged:
        held = ", ".join(
            _tag_counts(key, counts) for key, counts in chosen.tag_values.items()
        )
        return (
            f"{name} holds {_runs(chosen.held)} ({_dated(chosen.held)}) but none"
            f"{with_tags} (it holds {held})"
        )
    parts = []
    if chosen.tonight:
        n = len(chosen.tonight)
        parts.append(
            f"{n} {_be(n)} among tonight's inputs (ingested before this check)"
        )
    if chosen.unusable:
        n = len(chosen.unusable)
        parts.append(
            f"{n} {'has' if n == 1 else 'have'} no usable measurement (failed or "
            "truncated, or #wrong > 0 at every size)"
        )
    if chosen.old:
        parts.append(
            f"{len(chosen.old)} ({_dated(chosen.old)}) {_older(policy, chosen)}"
        )
    return (
        f"none of the {_runs(chosen.tagged)}{with_tags} in {name} can be a "
        f"baseline: {', '.join(parts)}"
    )


def _tag_counts(key: str, counts: Mapping[str | None, int]) -> str:
    """``cluster=a in 5 run(s), no cluster tag in 2 run(s)``, most runs first."""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0] or ""))
    return ", ".join(
        f"{key}={value} in {_runs(n)}"
        if value is not None
        else f"no {key} tag in {_runs(n)}"
        for value, n in ordered
    )


def _judges_a_size(chosen: Selection, policy: HistoryPolicy) -> bool:
    """Whether some size of the baseline has ``min_runs`` runs to be judged by."""
    table = chosen.table
    return "runs" in table and bool((table["runs"] >= policy.min_runs).any())


def _runs(count: int | Sequence[str]) -> str:
    n = count if isinstance(count, int) else len(count)
    return f"{n} run(s)"


def _dated(dates: Sequence[str]) -> str:
    """``on 2026-03-01``, ``on 2026-03-01, 2026-03-02 and 2026-03-03`` or ``on 9
    dates from 2026-03-01 to 2026-03-09``."""
    unique = dates.distinct() if isinstance(dates, RunDates) else sorted(set(dates))
    if len(unique) == 1:
        return f"on {unique[0]}"
    if len(unique) <= 3:
        return f"on {', '.join(unique[:-1])} and {unique[-1]}"
    return f"on {len(unique)} dates from {unique[0]} to {unique[-1]}"


def _older(policy: HistoryPolicy, chosen: Selection) -> str:
    return (
        f"{_be(len(chosen.old))} older than the {policy.max_age_days}-day window "
        f"(which starts on {chosen.oldest})"
    )


def _be(n: int) -> str:
    return "is" if n == 1 else "are"


def misprinted_by_run(rows: pd.DataFrame) -> dict[tuple[str, int], list[str]]:
    """:func:`_misprinted` of each run of analysed ``rows`` (keyed by source and
    run; runs without any left out), computed over all rows at once: it is a test
    of each row alone."""
    found: dict[tuple[str, int], list[str]] = {}
    source, run = rows["source"].to_numpy(), rows["run"].to_numpy()
    # In line order overall, so in line order within each run.
    for at, text in _misprints(rows):
        found.setdefault((str(source[at]), int(run[at])), []).append(text)
    return found


def _misprinted(mine: pd.DataFrame) -> list[str]:
    """The texts of :func:`_misprints`."""
    return [text for _, text in _misprints(mine)]


def _misprints(mine: pd.DataFrame) -> list[tuple[int, str]]:
    """The rows (position in ``mine``, text) whose printed busbw or algbw differ
    from size / time (x the bus factor) by more than the rounding of the printed
    bandwidth and time explains, and by more than :data:`MISPRINT`, in line order:
    "1 GiB out-of-place (line 57) busbw 708.06 GB/s printed, 236.0 GB/s from size
    and time". Only tools whose bandwidths are size / time (RECOMPUTABLE);
    not a bandwidth printed as 0, a CPU time (nccl-tests computes the bandwidth from
    the GPU time), a grouped row, nor an all_gather algbw printed the pre-2.9 way."""
    usable = (
        mine["tool"].isin(RECOMPUTABLE).to_numpy()
        & ~mine["cputime"].to_numpy(dtype=bool)
        & ~mine["grouped"].to_numpy(dtype=bool)
    )
    # busbw: beyond rounding is the efficiency engine's flag (efficiency.bandwidth).
    busbw = mine["busbw_printed_gbps"].to_numpy(dtype=float, na_value=np.nan)
    bus = mine["busbw_gbps"].to_numpy(dtype=float, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        far = np.abs(busbw - bus) > MISPRINT * np.abs(bus)
    mismatch = mine["busbw_mismatch"].eq(True).to_numpy()
    flags = {"busbw": usable & (busbw != 0) & mismatch & far}
    # algbw: the same tolerance, which the engine computes but does not keep.
    algbw = mine["algbw_printed_gbps"].to_numpy(dtype=float, na_value=np.nan)
    alg = mine["algbw_calc_gbps"].to_numpy(dtype=float, na_value=np.nan)
    time = mine["time_us"].to_numpy(dtype=float, na_value=np.nan)
    time_tol = _time_tolerance(time, (mine["wrong_kind"] == "max_deviation").to_numpy())
    with np.errstate(divide="ignore", invalid="ignore"):
        slack = np.abs(alg) * time_tol / (time - time_tol)
        diff = np.abs(algbw - alg)
        off = diff > _print_tolerance(algbw) + slack + 1e-9 * np.abs(alg)
        off &= diff > MISPRINT * np.abs(alg)
    flags["algbw"] = (
        usable
        & off
        & (algbw != 0)
        & (time > time_tol)
        & ~mine["algbw_prescaled"].eq(True).to_numpy()
    )
    either = np.flatnonzero(flags["algbw"] | flags["busbw"])
    lines = mine["line"].to_numpy()
    out = []
    for i in either[np.argsort(lines[either], kind="stable")].tolist():
        row = mine.iloc[i]
        parts = [
            f"{metric} {row[f'{metric}_printed_gbps']:g} GB/s printed, "
            f"{format_gbps(row[calc])} from size and time"
            for metric, calc in (("algbw", "algbw_calc_gbps"), ("busbw", "busbw_gbps"))
            if flags[metric][i]
        ]
        out.append(
            (
                i,
                f"{format_bytes(row['size_bytes'])} {row['placement']} (line "
                f"{row['line']}) {' and '.join(parts)}",
            )
        )
    return out
