"""Find the bad node: rank hosts by how much the runs that include them underperform.

Given many runs over different host sets (pairwise tests, rails, subsets), each run
gets a score against the runs of the same shape (tool, collective, dtype, redop,
root, placement, ranks, nodes): for each message size, the shape's median time divided
by the run's time, combined by geometric mean over the larger half of the shape's
non-zero sizes. Bandwidth faults (a slow link, a NIC at a lower speed) show at large
sizes; small sizes are latency and jitter, which would dilute the score. 1.0 is
typical, 0.5 means twice as slow. A host's deficit is 1 - (mean score of runs with it
/ mean score of runs without it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from ncclparse._arrow import key_text
from ncclparse.formatting import shown_name
from ncclparse.health.rules import BlamePolicy
from ncclparse.schema import SHAPE_KEYS

__all__ = ["HostScore", "RunScore", "RunTimes", "blame", "run_scores"]

# A median of two runs cannot tell which one is slow.
_MINSHAPE_KEYS_RUNS = 3


@dataclass(frozen=True, slots=True)
class RunScore:
    """One run's score (1.0 typical) and its distinct hosts, in rank order."""

    source: str
    run: int
    score: float
    hosts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HostScore:
    """How runs with one host compare with runs without it.

    ``slow`` is True when the policy names the host consistently slow; ``evidence``
    holds the scores of the runs that include it, worst first.
    """

    host: str
    runs: int
    slow_runs: int
    score_with: float
    score_without: float
    deficit: float
    slow: bool
    partners: tuple[str, ...]
    evidence: tuple[RunScore, ...]

    def describe(self) -> str:
        """One line of evidence, e.g. ``node7 is slow with every partner: ...``."""
        every = "every partner" if self.slow_runs == self.runs else "most partners"
        head = f"{self.host} is slow with {every}" if self.slow else self.host
        worst = ", ".join(
            f"{'+'.join(h for h in r.hosts if h != self.host) or 'alone'} "
            f"{r.score:.2f}x"
            for r in self.evidence[:6]
        )
        return (
            f"{head}: {self.slow_runs} of {self.runs} runs slow, mean score "
            f"{self.score_with:.2f}x with it vs {self.score_without:.2f}x without "
            f"({self.deficit:.0%} deficit); runs: {worst}"
        )


def run_scores(measurements: pa.Table, runs: pa.Table) -> tuple[RunScore, ...]:
    """Score every run whose shape has at least three runs; see the module doc.

    Rows with size 0, a non-positive time, grouped or CPU times are not used.
    """
    times = RunTimes()
    times.add(measurements)
    return times.scores(runs)


@dataclass(slots=True)
class RunTimes:
    """What :func:`run_scores` reads, gathered batch by batch of whole runs: each
    run's median time per size, shapes and runs as numbers (four numbers a point,
    24 bytes, so that a check of many logs can keep it for every run);
    :meth:`scores` then compares the runs."""

    _shapes: dict[tuple[Any, ...], int] = field(default_factory=dict)
    _runs: list[tuple[str, int]] = field(default_factory=list)
    _parts: list[pd.DataFrame] = field(default_factory=list)

    def add(self, measurements: pa.Table) -> None:
        """Add the runs of ``measurements`` (whole runs, none added before)."""
        columns = [*SHAPE_KEYS, "source", "run", "size_bytes", "time_us"]
        frame = measurements.select(columns).to_pandas()
        for name in SHAPE_KEYS:  # nulls as "" so that groupby keeps them as one value
            frame[name] = key_text(measurements[name])
        usable = (
            (frame["size_bytes"] > 0)
            & (frame["time_us"] > 0)
            & ~measurements["grouped"].to_pandas()
            & ~measurements["cputime"].to_pandas()
        )
        frame = frame[usable]
        # as_index=False gives a DataFrame; pandas-stubs type every SeriesGroupBy
        # result as a Series.
        frame = cast(
            pd.DataFrame,
            frame.groupby(
                [*SHAPE_KEYS, "source", "run", "size_bytes"], as_index=False, sort=False
            )["time_us"].median(),
        )
        if frame.empty:
            return
        shape_codes, shapes = pd.MultiIndex.from_frame(
            frame[list(SHAPE_KEYS)]
        ).factorize()
        run_codes, runs = pd.MultiIndex.from_frame(frame[["source", "run"]]).factorize()
        shape_ids = [self._shapes.setdefault(s, len(self._shapes)) for s in shapes]
        first = len(self._runs)
        self._runs += [(str(source), int(run)) for source, run in runs]
        self._parts.append(
            pd.DataFrame(
                {
                    "shape": np.asarray(shape_ids, dtype=np.int32)[shape_codes],
                    "run": (run_codes + first).astype(np.int32),
                    "size_bytes": frame["size_bytes"].to_numpy(),
                    "time_us": frame["time_us"].to_numpy(),
                }
            )
        )

    def extend(self, other: RunTimes) -> None:
        """Add the runs ``other`` gathered (none added here before), as if added
        here: their shapes and runs numbered after these."""
        shape_ids = np.asarray(
            [self._shapes.setdefault(s, len(self._shapes)) for s in other._shapes],
            dtype=np.int32,
        )
        first = len(self._runs)
        self._runs += other._runs
        for part in other._parts:
            self._parts.append(
                part.assign(
                    shape=shape_ids[part["shape"].to_numpy()],
                    run=(part["run"].to_numpy() + first).astype(np.int32),
                )
            )

    def scores(self, runs: pa.Table) -> tuple[RunScore, ...]:
        """Score every run added whose shape has at least three runs, by source and
        run; ``runs`` (the runs table) gives their hosts."""
        shapes = self._scored_shapes()
        if not shapes:
            return ()
        # A part at a time and a shape at a time, never a frame of every point: a
        # check of many logs has millions here. The values are those of one frame
        # of every point: a (shape, size)'s median does not depend on the order of
        # its times, and each run's mean adds its ratios in the order of its rows,
        # all in one part.
        typical = {
            shape: self._typical_times(shape, cut) for shape, cut in shapes.items()
        }
        scores: dict[tuple[str, int], float] = {}
        for part in self._parts:
            shape = part["shape"].to_numpy()
            size = part["size_bytes"].to_numpy()
            log_ratio = np.zeros(len(part))
            scored = np.zeros(len(part), dtype=bool)
            for number, cut in shapes.items():
                (large,) = np.nonzero((shape == number) & (size >= cut))
                medians = typical[number].reindex(size[large]).to_numpy()
                log_ratio[large] = np.log(medians / part["time_us"].to_numpy()[large])
                scored[large] = True
            ratios = pd.DataFrame(
                {"run": part["run"].to_numpy()[scored], "log_ratio": log_ratio[scored]}
            )
            means = ratios.groupby("run")["log_ratio"].mean().map(np.exp)
            for at, score in means.items():
                scores[self._runs[cast(int, at)]] = float(score)
        found = _with_hosts(scores, runs)
        return tuple(sorted(found.values(), key=lambda r: (r.source, r.run)))

    def _scored_shapes(self) -> dict[int, float]:
        """The shapes of at least three runs, each with its cut: the median of its
        distinct sizes (the larger half is scored)."""
        runs: dict[int, int] = {}
        sizes: dict[int, list[npt.NDArray[np.int64]]] = {}
        for part in self._parts:
            shape = part["shape"].to_numpy()
            pairs = np.unique(np.stack([shape, part["run"].to_numpy()]), axis=1)
            numbers, counts = np.unique(pairs[0], return_counts=True)
            size = part["size_bytes"].to_numpy()
            for number, count in zip(numbers.tolist(), counts.tolist(), strict=True):
                runs[number] = runs.get(number, 0) + count  # a run is in one part
                sizes.setdefault(number, []).append(np.unique(size[shape == number]))
        return {
            number: float(np.median(np.unique(np.concatenate(sizes[number]))))
            for number, count in sorted(runs.items())
            if count >= _MINSHAPE_KEYS_RUNS
        }

    def _typical_times(self, shape: int, cut: float) -> pd.Series[float]:
        """The median time of each size of ``shape`` at least ``cut``, by size."""
        sizes, times = [], []
        for part in self._parts:
            size = part["size_bytes"].to_numpy()
            (large,) = np.nonzero((part["shape"].to_numpy() == shape) & (size >= cut))
            sizes.append(size[large])
            times.append(part["time_us"].to_numpy()[large])
        return pd.Series(np.concatenate(times)).groupby(np.concatenate(sizes)).median()


def blame(scores: tuple[RunScore, ...], policy: BlamePolicy) -> tuple[HostScore, ...]:
    """Rank hosts, most suspicious first (largest deficit); mark the slow ones.

    Hosts seen in fewer than ``policy.min_runs`` scored runs, or in every scored run
    (nothing to compare with), are not ranked.
    """
    every_host = sorted({h for r in scores for h in r.hosts})
    found = []
    for host in every_host:
        with_it = [r for r in scores if host in r.hosts]
        without = [r for r in scores if host not in r.hosts]
        if len(with_it) < policy.min_runs or not without:
            continue
        score_with = float(np.mean([r.score for r in with_it]))
        score_without = float(np.mean([r.score for r in without]))
        deficit = 1 - score_with / score_without
        slow_runs = sum(r.score < policy.slow_score for r in with_it)
        slow = (
            slow_runs >= policy.min_slow_fraction * len(with_it)
            and deficit >= policy.min_deficit
        )
        partners = sorted({h for r in with_it for h in r.hosts if h != host})
        found.append(
            HostScore(
                host=host,
                runs=len(with_it),
                slow_runs=slow_runs,
                score_with=score_with,
                score_without=score_without,
                deficit=deficit,
                slow=slow,
                partners=tuple(partners),
                evidence=tuple(sorted(with_it, key=lambda r: r.score)),
            )
        )
    return tuple(sorted(found, key=lambda h: (-h.deficit, h.host)))


# Runs whose hosts are read at a time: the Python objects of every run's hosts at
# once took 1.4 KB a run at the end of a check of many logs.
_HOST_ROWS = 8_192


def _with_hosts(
    scores: dict[tuple[str, int], float], runs: pa.Table
) -> dict[tuple[str, int], RunScore]:
    """Each run's score with its distinct hosts (none when ``runs`` lacks it), read
    from ``runs`` a slice at a time, each host's name made once."""
    found = {key: RunScore(*key, score, ()) for key, score in scores.items()}
    names: dict[str, str] = {}
    # The runs schema makes source, run and hosts non-nullable (host items may be null).
    for batch in runs.select(["source", "run", "hosts"]).to_batches(_HOST_ROWS):
        for source, run, hosts in zip(
            cast("list[str]", batch["source"].to_pylist()),
            cast("list[int]", batch["run"].to_pylist()),
            cast("list[list[str | None]]", batch["hosts"].to_pylist()),
            strict=True,
        ):
            if (source, run) not in scores:
                continue
            # As the other cases name them: a Rank line's host name is log text.
            shown = (
                names.get(h) or names.setdefault(h, shown_name(h)) for h in hosts if h
            )
            found[(source, run)] = RunScore(
                source, run, scores[(source, run)], tuple(dict.fromkeys(shown))
            )
    return found
