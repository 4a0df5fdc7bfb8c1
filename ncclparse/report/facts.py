"""Run facts for the report: metadata pairs, messages, unreadable inputs, profiles.

Plain text out of the ``runs`` table and the parse failures, for
:mod:`ncclparse.report.context`; no formatting beyond joining words.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "Message",
    "ProfileInfo",
    "failure_message",
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
    """Run facts as (label, text) pairs, skipping what the log does not state."""
    pairs = [
        ("tool", " ".join(v for v in (run["tool"], run["tool_version"]) if v)),
        ("library version", run["library_version"]),
        ("status", run["status"]),
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
        ("CollNet", _yes_no(run.get("collnet"))),
    ]
    return tuple((k, str(v)) for k, v in pairs if v not in (None, ""))


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
