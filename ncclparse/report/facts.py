"""Run facts for the report: metadata pairs, messages, unreadable inputs, profiles.

Plain text out of the ``runs`` table and the parse failures, for
:mod:`ncclparse.report.context`; no formatting beyond joining words.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from ncclparse.efficiency.algorithms import SHOWN
from ncclparse.formatting import shown_name

__all__ = [
    "ALGORITHM_BASIS",
    "Message",
    "ProfileInfo",
    "failure_message",
    "per_iteration_facts",
    "run_messages",
    "run_metadata",
]

_LINE_PREFIX = re.compile(r"^line (\d+): ")


@dataclass(frozen=True, slots=True)
class Message:
    """A warning or error: ``level`` "error"/"warning", where, and the text."""

    level: Literal["error", "warning"]
    source: str
    line: int | None
    text: str


@dataclass(frozen=True, slots=True)
class ProfileInfo:
    """A hardware profile used for the ideal: summary line and figure -> source."""

    summary: str
    sources: tuple[tuple[str, str], ...]


def run_metadata(run: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """Run facts as (label, text) pairs, skipping what the log does not state; text
    from the log (hosts, devices, command) with its control characters as escapes."""
    pairs = [
        ("tool", " ".join(v for v in (run["tool"], run["tool_version"]) if v)),
        ("library version", run["library_version"]),
        ("status", run["status"]),
        (
            "timeout (-T)",
            None
            if run.get("timeout_s") is None
            else f"a collective did not finish within {run['timeout_s']} s",
        ),
        ("lines", f"{run['first_line']} to {run['last_line']}"),
        ("ranks", run["nranks"]),
        ("nodes", run["nnodes"]),
        ("hosts", _tally(run["hosts"])),
        ("devices", _tally(run["devices"])),
        ("command", run.get("command")),
        ("parameters", ", ".join(f"{k}={v}" for k, v in run["params"])),
        (
            "avg bus bandwidth (footer)",
            run["avg_busbw_gbps"] and f"{run['avg_busbw_gbps']} GB/s",
        ),
        ("out of bounds values", run["oob_values"]),
        ("GPUs per node (NCCL)", run.get("local_ranks")),
        ("network (NCCL)", _network(run)),
        ("GPUDirect RDMA", _yes_no(run.get("gdr"))),
        ("NVLS", _yes_no(run.get("nvls"))),
        ("NVLS channels", run.get("nvls_channels")),
        ("CollNet", _yes_no(run.get("collnet"))),
        ("NCCL_ALGO", run.get("nccl_algo")),
        ("NCCL_PROTO", run.get("nccl_proto")),
        ("tuner plugin", run.get("tuner")),
    ]
    return tuple((k, shown_name(str(v))) for k, v in pairs if v not in (None, ""))


# How the judged algorithm is known (analysis column algorithm_basis), in words.
ALGORITHM_BASIS = {
    "log": "read from the log (NCCL_ALGO or NCCL's per-size choices)",
    "only": "the collective's only pattern",
    "inferred": "what NCCL chooses where the log shows NVLS channels",
    "assumed": "not in the log: judged against each algorithm NCCL could have run",
}


def algorithm_facts(rows: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """The algorithm the largest size of a run is judged by, and how that is known
    (``rows``: analysed rows with ``algorithm``, ``algorithm_low`` and
    ``algorithm_basis``; empty when none has one)."""
    judged = [r for r in rows if isinstance(r.get("algorithm"), str)]
    if not judged:
        return ()
    last = max(judged, key=lambda r: r["size_bytes"])
    names = [
        n for n in (last["algorithm_low"], last["algorithm"]) if isinstance(n, str)
    ]
    shown = " or ".join(dict.fromkeys(SHOWN.get(n, n) for n in names))
    basis = ALGORITHM_BASIS.get(str(last.get("algorithm_basis")), "")
    return (("algorithm judged", f"{shown} ({basis})" if basis else shown),)


def per_iteration_facts(rows: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """What nccl-tests -I 1 (and -J) said about a run's iterations, as (label, text).

    ``rows``: the run's measurements with ``per_iteration.summarize`` columns where
    it had per-iteration times. Empty when the run has no per-iteration data.
    """
    timed = [
        r for r in rows if r.get("stddev_pct") is not None and r.get("time_p99_us")
    ]
    if not timed:
        return ()
    noisy = max(timed, key=lambda r: r["stddev_pct"])
    pairs = [
        (
            "per-iteration spread (-I)",
            f"{len(timed)} points; largest i_cv% {noisy['stddev_pct']:g}% at "
            f"{noisy['size_bytes']} B {noisy['placement']} (i_min "
            f"{noisy['time_min_us']:g} us, i_max {noisy['time_max_us']:g} us, "
            f"i_p99 {noisy['time_p99_us']:g} us)",
        )
    ]
    spikes = [
        f"{r['size_bytes']} B {r['placement']} iteration {i}"
        + _who(procs, r.get("processes"))
        for r in rows
        for i, procs in zip(
            r.get("spike_iterations") or [],
            r.get("spike_processes") or [],
            strict=False,
        )
    ]
    if spikes:
        shown = "; ".join(spikes[:6]) + ("; ..." if len(spikes) > 6 else "")
        pairs.append((f"iteration spikes (> 1.5x mean, {len(spikes)})", shown))
    slow = Counter(
        r["slowest_process"] for r in rows if r.get("slowest_process") is not None
    )
    if slow:
        process, count = slow.most_common(1)[0]
        pairs.append(
            (
                "slowest process row (-J)",
                f"process {process} at {count} of {sum(slow.values())} points",
            )
        )
    return tuple(pairs)


def _who(processes: list[int], total: int | None) -> str:
    if not processes or not total:
        return ""
    if len(processes) == total:
        return " (all processes: system-wide)"
    if len(processes) == 1:
        return f" (process {processes[0]} only: a straggler)"
    return f" (processes {', '.join(map(str, processes))})"


def _network(run: dict[str, Any]) -> str | None:
    """ "IB, 8 NICs: mlx5_0, mlx5_1, ..." from what NCCL's INFO lines said."""
    net, nics = run.get("net"), run.get("nics") or []
    if not net and not nics:
        return None
    shown = ", ".join(nics[:4]) + (", ..." if len(nics) > 4 else "")
    count = f"{len(nics)} NIC{'s' * (len(nics) != 1)}: {shown}" if nics else ""
    return ", ".join(p for p in (net, count) if p)


def _yes_no(value: object) -> str | None:
    return None if value is None else ("yes" if value else "no")


def _tally(values: list[str], limit: int = 8) -> str:
    """ "a (8 ranks), b (8 ranks)" in first-seen order; beyond ``limit``, a count."""
    counts = Counter(v for v in values if v)
    shown = [
        f"{k} ({n} ranks)" if n > 1 else k for k, n in list(counts.items())[:limit]
    ]
    if len(counts) > limit:
        shown.append(f"and {len(counts) - limit} more")
    return ", ".join(shown)


def run_messages(run: dict[str, Any]) -> tuple[Message, ...]:
    found = []
    levels: tuple[tuple[Literal["error", "warning"], str], ...] = (
        ("error", "errors"),
        ("warning", "warnings"),
    )
    for level, key in levels:
        for text in run[key]:
            match = _LINE_PREFIX.match(text)
            line = int(match.group(1)) if match else None
            body = text[match.end() :] if match else text
            found.append(Message(level, run["source"], line, body))
    return tuple(found)


def failure_message(exc: Exception) -> Message:
    source = str(getattr(exc, "source", "") or "input")
    line = getattr(exc, "line_no", None) or None
    return Message("error", source, line, str(exc))
