"""Same-night cohort judgement: each run against the other runs of its shape.

A shape is what makes two runs' bus bandwidths comparable: the series keys but the
run (tool, collective, dtype, redop, root, placement, ranks, nodes) and the GPU
name. Within one check, each run's busbw at the sizes where its shape is
bandwidth-bound is compared with the median of the OTHER runs of its shape
(leave-one-out: a slow run does not drag the median it is judged by); more than
``threshold`` below it fails. Latency-bound sizes are not judged (history and the
threshold rules judge time). A shape needs ``min_runs`` runs: of two runs apart,
neither tells which one is slow. A whole shape slow together is not a cohort's to
see: the verdict and history rules judge that.

Pure: a small per-run, per-size summary in, cases out.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ncclparse.formatting import format_bytes, format_gbps
from ncclparse.health.cases import Case, SizeMiss, context
from ncclparse.health.outcomes import Outcome
from ncclparse.health.rules import CohortPolicy

__all__ = ["RULE", "Point", "PointArrays", "Points", "cohort_cases", "points_of"]

RULE = "cohort"
# One size of a series: size_bytes, busbw_gbps (the median of its rows) and regime
# (of its first row).
Point = tuple[int, float, str]
# A series key (SERIES_KEYS) -> its points (:func:`points_of`), each read twice.
Points = Mapping[tuple[Any, ...], Iterable[Point]]


class PointArrays:
    """The points of one series in one block of bytes (17 bytes a point, and ~100
    of the object, where a tuple of Python numbers took ~120 a point and three
    arrays ~350 bytes of their own): a check of many logs keeps them for every
    run. Iterating gives each :data:`Point`, in order."""

    __slots__ = ("_data", "_regimes")

    def __init__(self, summary: Sequence[Mapping[str, Any]]) -> None:
        regimes = list(dict.fromkeys(str(p["regime"]) for p in summary))
        sizes = np.array([p["size_bytes"] for p in summary], np.int64)
        busbw = np.array([p["busbw_gbps"] for p in summary], np.float64)
        codes = np.array([regimes.index(str(p["regime"])) for p in summary], np.uint8)
        self._data = sizes.tobytes() + busbw.tobytes() + codes.tobytes()
        self._regimes = _shared(tuple(regimes))

    def __iter__(self) -> Iterator[Point]:
        n = len(self)
        sizes = np.frombuffer(self._data, np.int64, n).tolist()
        busbw = np.frombuffer(self._data, np.float64, n, 8 * n).tolist()
        codes = np.frombuffer(self._data, np.uint8, n, 16 * n).tolist()
        for size, value, code in zip(sizes, busbw, codes, strict=True):
            yield size, value, self._regimes[code]

    def __len__(self) -> int:
        return len(self._data) // 17

    def __reduce__(self) -> tuple[Any, ...]:
        # Unpickled (from the child that judged its batch), its regimes are shared.
        return _restored, (self._data, self._regimes)


def _restored(data: bytes, regimes: tuple[str, ...]) -> PointArrays:
    points = PointArrays.__new__(PointArrays)
    points._data, points._regimes = data, _shared(regimes)
    return points


_REGIMES: dict[tuple[str, ...], tuple[str, ...]] = {}


def _shared(regimes: tuple[str, ...]) -> tuple[str, ...]:
    """One tuple of interned names for every series with these ``regimes``."""
    return _REGIMES.setdefault(regimes, tuple(sys.intern(r) for r in regimes))


def points_of(summary: Sequence[Mapping[str, Any]]) -> PointArrays:
    """The points of one series from check's per-size summary (dicts with
    ``size_bytes``, ``busbw_gbps`` and ``regime``)."""
    return PointArrays(summary)


def cohort_cases(
    points: Points,
    runs: dict[tuple[str, int], dict[str, Any]],
    policy: CohortPolicy,
) -> list[Case]:
    """One ``cohort`` case per series whose shape has another run tonight: pass,
    fail (far below the others at a bandwidth-bound size) or skip (too few runs of
    the shape, no bandwidth-bound size). A series alone in its shape gets none:
    there is nothing to compare it with. ``policy.enabled`` is the caller's to
    read (a rule switched off is said in its own case)."""
    shapes: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for key in points:
        shapes.setdefault((*key[2:], _device(runs, key)), []).append(key)
    cases = []
    for members in shapes.values():
        if len(members) < 2:
            continue
        judged = _judged_sizes(points, members)
        compared = _compare(points, members, judged, policy.min_runs)
        for at, key in enumerate(members):
            cases.append(_case(key, len(members), compared.of(at), runs, policy))
    return cases


def _device(runs: dict[tuple[str, int], dict[str, Any]], key: Any) -> str:
    facts = runs.get((key[0], int(key[1])), {})
    return ", ".join(dict.fromkeys(d for d in facts.get("devices") or () if d))


def _judged_sizes(points: Points, members: list[tuple[Any, ...]]) -> set[int]:
    """The sizes most runs of the shape measured bandwidth-bound: the cohort
    decides, so a slow run whose own rows look latency-bound is still judged."""
    votes: dict[int, int] = {}
    for key in members:
        for size, _, regime in points[key]:
            if regime == "bandwidth-bound":
                votes[size] = votes.get(size, 0) + 1
    return {size for size, n in votes.items() if 2 * n > len(members)}


# One judged size of one run: size, its busbw, the median of the others' and how
# many others measured it.
Compared = tuple[int, float, float, int]


@dataclass(frozen=True, slots=True)
class _Compared:
    """The judged sizes of one shape's runs, largest first, and per run (a row)
    and size (a column) its busbw (NaN: not measured) and the median of the
    other runs' there (NaN: too few runs measured it), and how many runs measured
    each size: arrays, where a dictionary a run took ~90 MB at 10,000 logs."""

    sizes: list[int]
    busbw: npt.NDArray[np.float64]
    medians: npt.NDArray[np.float64]
    measured: list[int]

    def of(self, run: int) -> list[Compared]:
        """The judged sizes the ``run``-th run measured with enough others, each
        against the median of the others there."""
        return [
            (size, value, median, self.measured[at] - 1)
            for at, (size, value, median) in enumerate(
                zip(
                    self.sizes,
                    self.busbw[run].tolist(),
                    self.medians[run].tolist(),
                    strict=True,
                )
            )
            if not math.isnan(median) and not math.isnan(value)
        ]


def _compare(
    points: Points, members: list[tuple[Any, ...]], judged: set[int], min_runs: int
) -> _Compared:
    """Each run of one shape (``members``) at its ``judged`` sizes measured by at
    least ``min_runs`` runs, against the median of the other runs' busbw there."""
    sizes = sorted(judged, reverse=True)
    column = {size: at for at, size in enumerate(sizes)}
    busbw = np.full((len(members), len(sizes)), np.nan)
    for row, key in enumerate(members):
        for size, value, _ in points[key]:
            if size in column and math.isfinite(value):
                busbw[row, column[size]] = value
    medians = np.full_like(busbw, np.nan)
    measured = []
    for at in range(len(sizes)):
        have = ~np.isnan(busbw[:, at])
        measured.append(int(have.sum()))
        if measured[-1] >= min_runs:
            medians[have, at] = _others_median(busbw[have, at])
    return _Compared(sizes, busbw, medians, measured)


def _others_median(values: np.ndarray) -> np.ndarray:
    """For each value, the median of all the others: from one sort (a median per
    value took seconds for the 2,016 pairs of a 64-node pairwise sweep)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    rank = np.empty(len(values), np.intp)
    rank[order] = np.arange(len(values))
    rest = len(values) - 1  # each value's others, in order: ordered without its rank

    def at(index: int) -> np.ndarray:
        # The others' index-th smallest: the sorted values shift past the rank.
        return ordered[np.where(index < rank, index, index + 1)]

    middle = rest // 2
    if rest % 2:
        return at(middle)
    mean: np.ndarray = (at(middle - 1) + at(middle)) / 2
    return mean


def _case(
    key: tuple[Any, ...],
    runs_of_shape: int,
    compared: list[Compared],
    runs: dict[tuple[str, int], dict[str, Any]],
    policy: CohortPolicy,
) -> Case:
    ctx = context(key, runs)
    device = _device(runs, key)
    head = f"{ctx['where']}: {ctx['label']}" + (f" ({device})" if device else "")
    name = f"{ctx['label']} [{ctx['source']}#{ctx['run']}]"
    common = {k: ctx[k] for k in ("source", "run", "hosts", "collective")}
    if runs_of_shape < policy.min_runs:
        message = (
            f"{head}: not compared: {runs_of_shape} runs of its shape tonight, a "
            f"cohort needs {policy.min_runs} (of two runs apart, neither tells "
            "which is slow)"
        )
        return Case(RULE, name, "SKIP", message, **common)
    findings, counts, worst = [], {}, (0.0, 0)
    for size, value, median, others in compared:
        counts[size] = others
        drop = 1 - value / median if median > 0 else 0.0
        worst = max(worst, (drop, size))
        if drop > policy.threshold:
            limit = median * (1 - policy.threshold)
            findings.append(SizeMiss(size, "busbw_gbps", value, limit, median))
    checked = len(compared)
    stated = f"limit {policy.threshold:.0%}"
    if not checked:
        message = (
            f"{head}: no bandwidth-bound size measured by it and "
            f"{_others(runs_of_shape - 1)} (the cohort rule judges bus bandwidth only)"
        )
        return Case(RULE, name, "SKIP", message, **common)
    outcome: Outcome = "FAIL" if findings else "OK"
    if findings:
        first = findings[0]  # the largest size: bandwidth-bound for sure
        assert first.baseline is not None
        text = (
            f"bus bandwidth {format_gbps(first.value)} at "
            f"{format_bytes(first.size_bytes)} is "
            f"{1 - first.value / first.baseline:.1%} below the median of "
            f"{_others(counts[first.size_bytes])} "
            f"({format_gbps(first.baseline)}; {stated})"
        )
        if len(findings) > 1:
            text += f"; {len(findings) - 1} more size{'s' if len(findings) > 2 else ''}"
            text += f" down to {format_bytes(findings[-1].size_bytes)}"
    else:
        drop, size = worst
        largest = (
            f"largest drop {drop:.1%} at {format_bytes(size)}"
            if drop > 0
            else "at or above it at every size"
        )
        text = (
            f"bus bandwidth within {policy.threshold:.0%} of the median of "
            f"{_others(runs_of_shape - 1)} "
            f"at {checked} bandwidth-bound size{'s' if checked > 1 else ''} "
            f"({largest})"
        )
    return Case(
        RULE,
        name,
        outcome,
        f"{head}: {text}",
        checked=checked,
        findings=tuple(findings),
        **common,
    )


def _others(count: int) -> str:
    return f"the {count} other run{'s' if count > 1 else ''} of its shape tonight"
