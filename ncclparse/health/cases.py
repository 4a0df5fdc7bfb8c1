"""The vocabulary of a check: cases, findings, series keys and message helpers.

Shared by :mod:`ncclparse.health.check` (thresholds, history, hosts) and
:mod:`ncclparse.health.integrity` (inputs, runs, expectations).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ncclparse.formatting import (
    format_bytes,
    format_gbps,
    format_percent,
    format_time_us,
    series_label,
    shown_name,
)
from ncclparse.health.outcomes import Outcome, Status, status_of
from ncclparse.schema import SERIES_KEYS

__all__ = [
    "ERROR_RULE",
    "FORMAT",
    "Case",
    "Outcome",
    "SizeMiss",
    "Status",
    "by_importance",
    "context",
    "hosts",
    "run_named",
    "sizes",
]

# The rule of the one case of a check that could not complete (an internal error, an
# unreadable history, an output that cannot be written): JUnit calls it an error.
ERROR_RULE = "error"
SHOWN = 5  # sizes spelled out in one message; the rest are counted
FORMAT: dict[str, Callable[[float | None], str]] = {
    "efficiency": format_percent,
    "busbw_gbps": format_gbps,
    "time_us": format_time_us,
}


@dataclass(frozen=True, slots=True)
class SizeMiss:
    """One size that missed its limit. ``baseline`` is the history median (history
    cases), ``value`` and ``limit`` are in the unit of ``metric``."""

    size_bytes: int
    metric: str
    value: float
    limit: float
    baseline: float | None = None


@dataclass(frozen=True, slots=True)
class Case:
    """One rule applied to one series, run or input, and its ``outcome``
    (:mod:`ncclparse.health.outcomes`): a CHECK or a NOTE passes, a FAIL fails the
    check, a SKIP judged nothing."""

    rule: str
    name: str
    outcome: Outcome
    message: str
    source: str | None = None
    run: int | None = None
    hosts: tuple[str, ...] = ()
    collective: str | None = None
    checked: int = 0
    findings: tuple[SizeMiss, ...] = ()

    @property
    def status(self) -> Status:
        """pass, fail or skip: the outcome as JUnit and the JSON's ``status`` say it."""
        return status_of(self.outcome)


def context(key: tuple[Any, ...], runs: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    source, run = key[0], int(key[1])
    found = hosts(runs.get((source, run), {}))
    values = dict(zip(SERIES_KEYS, key, strict=True))
    coll = values["collective"]
    return {
        "source": source,
        "run": run,
        "hosts": found,
        "collective": coll or None,
        "label": series_label(values),
        "where": run_named(source, run, found),
        "key": key,
    }


def run_named(source: str, run: int, found: Sequence[str]) -> str:
    """A run as a case's message names it before what was found:
    ``<source> run <n> (hosts a, b)``; ``found``: its :func:`hosts`."""
    return f"{source} run {run} (hosts {', '.join(found) or 'unknown'})"


def hosts(run: dict[str, Any]) -> tuple[str, ...]:
    """The run's hosts as its cases name them: once each, in order, control
    characters as escapes (a Rank line's host name is log text)."""
    return tuple(dict.fromkeys(shown_name(h) for h in run.get("hosts") or () if h))


def _size(size_bytes: int) -> str:
    """``1 MiB (1048576 B)``: the exact count beside a rounded size; ``8 B`` alone."""
    shown = format_bytes(size_bytes)
    return shown if shown == f"{size_bytes} B" else f"{shown} ({size_bytes} B)"


def by_importance(findings: Iterable[SizeMiss]) -> tuple[SizeMiss, ...]:
    """``findings`` most important first: the largest sizes, which are the
    bandwidth-bound ones where a fabric problem shows (a drop in bus bandwidth at 8
    GiB), before the latency-bound small ones."""
    return tuple(sorted(findings, key=lambda f: -f.size_bytes))


def sizes(findings: tuple[SizeMiss, ...], detail: Any) -> str:
    """The first SHOWN of ``findings`` (:func:`by_importance` order) spelled out with
    ``detail``, the rest counted, and the last of them said too: "8 GiB ..., 4 GiB
    ... and 26 more (down to 8 B ...)"."""
    shown = [f"{_size(f.size_bytes)} {detail(f)}" for f in findings[:SHOWN]]
    more = len(findings) - SHOWN
    if more <= 0:
        return ", ".join(shown)
    last = findings[-1]
    return ", ".join(shown) + (
        f" and {more} more (down to {_size(last.size_bytes)} {detail(last)})"
    )
