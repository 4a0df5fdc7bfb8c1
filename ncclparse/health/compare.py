"""Baseline vs candidate: per size deltas and a verdict, per series and per run.

Two ``measurements`` tables are aligned on their shape (``schema.SHAPE_KEYS``) and
size; several runs on one side count as their median time. For one series and size,
bus bandwidth is size x factor / time, so the bandwidth change is ``baseline time /
candidate time - 1`` for every collective (and defined at sizes where busbw rounds
to 0).

The runs are also aligned one by one, on their *identity* (a table's ``identity``
column: the nightly's host pair, or the log's path within its directory; without
the column, the ``source``) and shape: one bad pair of three is invisible in the
median. Each series and size names its worst aligned run and that run's change. A
size changes when the median's change, or any aligned run's, exceeds ``threshold``
(a regression wins over an improvement); the verdict is ``regression`` if any size
regressed. A shape that each side measured under one identity only, two different
ones (two single logs), is aligned all the same ("a.log vs b.log"); otherwise runs
of one side only are listed as missing (baseline only) or new (candidate only).
Each row also carries each side's bus bandwidth at its median time, recomputed with
nccl-tests' factor of the collective on its ranks (GB/s, as ``report`` draws it; so the
change is exactly the ratio of the two, and logs that print no busbw, oneCCL and IMB,
have one; None for a collective without a factor or a run without a rank count).

Every rendering (text, Markdown, JSON, HTML with a chart) is in
:mod:`ncclparse.report.comparison`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from ncclparse._arrow import key_text
from ncclparse.efficiency.bandwidth import busbw_factor
from ncclparse.errors import ProfileError
from ncclparse.formatting import format_bytes, series_label
from ncclparse.inputs.sides import IDENTITY
from ncclparse.schema import SHAPE_KEYS

__all__ = [
    "COMPARE_KEYS",
    "IDENTITY",
    "CompareRow",
    "Comparison",
    "RunChange",
    "Side",
    "compare",
    "describe",
]

COMPARE_KEYS = (*SHAPE_KEYS, "size_bytes")


@dataclass(frozen=True, slots=True)
class CompareRow:
    """One series and size: median times (µs), the bandwidth change and its verdict,
    each side's bus bandwidth at that time (GB/s; None without a busbw factor), and
    the aligned run that changed the most for the worse (None: no run aligned)."""

    series: str
    size_bytes: int
    baseline_time_us: float
    candidate_time_us: float
    change: float  # relative busbw change: +0.10 is 10 % faster
    verdict: str  # regression | improvement | same
    baseline_busbw_gbps: float | None = None
    candidate_busbw_gbps: float | None = None
    worst_run: str | None = None
    worst_change: float | None = None


@dataclass(frozen=True, slots=True)
class RunChange:
    """One aligned run's worst size in one series: its identity, the size, the
    run's median times (µs) on each side, its bus bandwidth change and verdict."""

    run: str
    series: str
    size_bytes: int
    baseline_time_us: float
    candidate_time_us: float
    change: float
    verdict: str  # regression | improvement | same


@dataclass(frozen=True, slots=True)
class Side:
    """What one side is: ``name`` (a path, a label) and ``about`` (what was read:
    its runs, and for a history its selection)."""

    name: str
    about: str = ""


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every aligned size, the sizes only one side has, and the overall verdict.

    ``geomean_change`` is the geometric mean bandwidth change over aligned sizes
    (of the medians). ``runs``: each aligned run and series at its worst size,
    worst first (:attr:`regressed_runs`: those that regressed); ``missing_runs`` and
    ``new_runs``: "identity: series" of the runs only the baseline, or only the
    candidate, has (a missing run is a lost measurement).
    """

    rows: tuple[CompareRow, ...]
    only_baseline: tuple[str, ...]
    only_candidate: tuple[str, ...]
    threshold: float
    verdict: str  # regression | improvement | same | incomparable
    geomean_change: float | None
    baseline: Side = field(default_factory=lambda: Side("baseline"))
    candidate: Side = field(default_factory=lambda: Side("candidate"))
    runs: tuple[RunChange, ...] = ()
    missing_runs: tuple[str, ...] = ()
    new_runs: tuple[str, ...] = ()

    @property
    def regressed_runs(self) -> tuple[RunChange, ...]:
        """The aligned runs whose worst size regressed, worst first."""
        return tuple(r for r in self.runs if r.verdict == "regression")


def compare(
    baseline: pa.Table,
    candidate: pa.Table,
    *,
    threshold: float = 0.05,
    baseline_side: Side | None = None,
    candidate_side: Side | None = None,
) -> Comparison:
    """Compare two ``measurements`` tables size by size and run by run (see the
    module doc).

    Rows with size 0, a non-positive time, CPU or grouped times are left out.
    ``baseline_side`` and ``candidate_side`` name the sides (default: "baseline"
    and "candidate", described by :func:`describe`).
    """
    base_runs, cand_runs = _run_medians(baseline), _run_medians(candidate)
    base_runs, cand_runs = _single_runs_aligned(base_runs, cand_runs)
    base = _series_medians(base_runs).rename(columns={"time_us": "time_us_b"})
    cand = _series_medians(cand_runs).rename(columns={"time_us": "time_us_c"})
    merged = base.join(cand, how="outer")
    both = merged.dropna(subset=["time_us_b", "time_us_c"])
    change = both["time_us_b"] / both["time_us_c"] - 1
    runs = _aligned_runs(base_runs, cand_runs)
    worst = runs.loc[runs.groupby(list(COMPARE_KEYS))["change"].idxmin()]
    worst_of = {
        key: (str(name), float(x))
        for key, name, x in zip(
            worst[list(COMPARE_KEYS)].itertuples(index=False, name=None),
            worst[IDENTITY],
            worst["change"],
            strict=True,
        )
    }
    rows = []
    for key, b, c, x in zip(
        both.index, both["time_us_b"], both["time_us_c"], change, strict=True
    ):
        run, run_change = worst_of.get(key, (None, None))
        low = min(x, run_change) if run_change is not None else x
        rows.append(
            CompareRow(
                series=_label(key),
                size_bytes=int(key[-1]),
                baseline_time_us=float(b),
                candidate_time_us=float(c),
                change=float(x),
                verdict="regression"
                if low < -threshold
                else _verdict(float(x), threshold),
                baseline_busbw_gbps=_busbw(key, float(b)),
                candidate_busbw_gbps=_busbw(key, float(c)),
                worst_run=run,
                worst_change=run_change,
            )
        )
    only_b = merged[merged["time_us_c"].isna()].index
    only_c = merged[merged["time_us_b"].isna()].index
    verdicts = {r.verdict for r in rows}
    verdict = (
        "incomparable"
        if not rows
        else next(v for v in ("regression", "improvement", "same") if v in verdicts)
    )
    geomean = float(np.exp(np.log1p(change).mean()) - 1) if rows else None
    return Comparison(
        rows=tuple(rows),
        only_baseline=tuple(f"{_label(k)} {format_bytes(k[-1])}" for k in only_b),
        only_candidate=tuple(f"{_label(k)} {format_bytes(k[-1])}" for k in only_c),
        threshold=threshold,
        verdict=verdict,
        geomean_change=geomean,
        baseline=baseline_side or Side("baseline", describe(baseline)),
        candidate=candidate_side or Side("candidate", describe(candidate)),
        runs=_worst_sizes(runs, threshold),
        missing_runs=_one_side_only(base_runs, cand_runs),
        new_runs=_one_side_only(cand_runs, base_runs),
    )


def describe(table: pa.Table, name: str | None = None) -> str:
    """The runs of a ``measurements`` table in words, numbered as in its ``run``
    column (0-based): ``"1 run: run 0 of a.log"``, ``"12 runs of 12 logs"``; the
    log is not named again when it is ``name`` (the side's name)."""
    if table.num_rows == 0:
        return "no runs"
    pairs = table.select(["source", "run"]).group_by(["source", "run"]).aggregate([])
    runs: list[tuple[str, int]] = sorted(
        zip(
            (str(s) for s in pairs["source"].to_pylist()),
            (int(r or 0) for r in pairs["run"].to_pylist()),
            strict=True,
        )
    )
    sources = {source for source, _ in runs}
    if len(sources) == 1:
        source = _base_name(runs[0][0])
        of = "" if name is not None and _base_name(name) == source else f" of {source}"
        if len(runs) == 1:
            return f"1 run: run {runs[0][1]}{of}"
        numbers = ", ".join(str(run) for _, run in runs)
        return f"{len(runs)} runs: runs {numbers}{of}"
    return f"{len(runs)} runs of {len(sources)} logs"


def _base_name(source: str) -> str:
    return source.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or source


def _busbw(key: tuple[str, ...], time_us: float) -> float | None:
    """Bus bandwidth (GB/s) of one series and size at ``time_us``: size x nccl-tests'
    factor / time; None for a collective without a factor or no rank count."""
    named = dict(zip(COMPARE_KEYS, key, strict=True))
    try:
        factor = busbw_factor(str(named["collective"]), int(named["nranks"]))
    except (ValueError, ProfileError):
        return None
    return factor * float(named["size_bytes"]) / time_us * 1e-3


def _run_medians(table: pa.Table) -> pd.DataFrame:
    """Per run identity, series and size: the median time of its usable rows
    (columns COMPARE_KEYS, IDENTITY, ``time_us``)."""
    frame = pd.DataFrame({k: key_text(table[k]) for k in COMPARE_KEYS[:-1]})
    frame["size_bytes"] = table["size_bytes"].to_pandas()
    frame["time_us"] = table["time_us"].to_pandas()
    named = IDENTITY if IDENTITY in table.column_names else "source"
    frame[IDENTITY] = key_text(table[named])
    usable = (
        (frame["size_bytes"] > 0)
        & (frame["time_us"] > 0)
        & ~table["cputime"].to_pandas()
        & ~table["grouped"].to_pandas()
    )
    keys = [*COMPARE_KEYS, IDENTITY]
    return frame[usable].groupby(keys, observed=True)["time_us"].median().reset_index()


def _single_runs_aligned(
    base: pd.DataFrame, cand: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The two sides with a shape that each measured under one identity, two
    different ones, named "b vs c" on both (two single logs are compared)."""
    shape = list(SHAPE_KEYS)
    one_b = base.groupby(shape)[IDENTITY].unique()
    one_c = cand.groupby(shape)[IDENTITY].unique()
    renamed: dict[tuple[str, ...], tuple[str, str, str]] = {}
    for key in one_b.index.intersection(one_c.index):
        b, c = one_b[key], one_c[key]
        if len(b) == 1 and len(c) == 1 and b[0] != c[0]:
            renamed[key] = (b[0], c[0], f"{b[0]} vs {c[0]}")
    if not renamed:
        return base, cand
    sides = []
    for frame, index in ((base, 0), (cand, 1)):
        frame = frame.copy()
        for key, names in renamed.items():
            at = (frame[shape] == list(key)).all(axis=1) & (
                frame[IDENTITY] == names[index]
            )
            frame.loc[at, IDENTITY] = names[2]
        sides.append(frame)
    return sides[0], sides[1]


def _series_medians(runs: pd.DataFrame) -> pd.DataFrame:
    """Per series and size, the median over its runs' times (each run its median)."""
    return runs.groupby(list(COMPARE_KEYS))[["time_us"]].median()


def _aligned_runs(base: pd.DataFrame, cand: pd.DataFrame) -> pd.DataFrame:
    """The runs both sides have (series, size and identity), with their times
    (``time_us_b``, ``time_us_c``) and bus bandwidth ``change``."""
    keys = [*COMPARE_KEYS, IDENTITY]
    runs = base.merge(cand, on=keys, suffixes=("_b", "_c"))
    runs["change"] = runs["time_us_b"] / runs["time_us_c"] - 1
    return runs.reset_index(drop=True)


def _worst_sizes(runs: pd.DataFrame, threshold: float) -> tuple[RunChange, ...]:
    """Each aligned run and series at its worst size, worst first; its verdict is
    that size's (an improvement only when no size regressed)."""
    if runs.empty:
        return ()
    worst = runs.loc[runs.groupby([*SHAPE_KEYS, IDENTITY])["change"].idxmin()]
    worst = worst.sort_values(["change", IDENTITY], kind="stable")
    return tuple(
        RunChange(
            run=str(r[IDENTITY]),
            series=_label(tuple(r[k] for k in SHAPE_KEYS)),
            size_bytes=int(r["size_bytes"]),
            baseline_time_us=float(r["time_us_b"]),
            candidate_time_us=float(r["time_us_c"]),
            change=float(r["change"]),
            verdict=_verdict(float(r["change"]), threshold),
        )
        for r in worst.to_dict("records")
    )


def _verdict(change: float, threshold: float) -> str:
    if change < -threshold:
        return "regression"
    return "improvement" if change > threshold else "same"


def _one_side_only(side: pd.DataFrame, other: pd.DataFrame) -> tuple[str, ...]:
    """ "identity: series" of the runs of ``side`` that ``other`` lacks."""
    keys = [IDENTITY, *SHAPE_KEYS]
    present = side[keys].drop_duplicates()
    there = other[keys].drop_duplicates()
    lacking = present.merge(there, on=keys, how="left", indicator=True)
    lacking = lacking[lacking["_merge"] == "left_only"].sort_values(keys)
    return tuple(
        f"{r[IDENTITY]}: {_label(tuple(r[k] for k in SHAPE_KEYS))}"
        for r in lacking.to_dict("records")
    )


def _label(key: tuple[str, ...]) -> str:
    return series_label(dict(zip(SHAPE_KEYS, key, strict=False)))
