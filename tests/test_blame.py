"""Blame: run scores from real-log-derived runs, and the host ranking."""

from __future__ import annotations

import io
from typing import cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import ncclparse
from ncclparse.health import blame as blaming
from ncclparse.health.blame import RunScore, RunTimes, blame, run_scores
from ncclparse.health.rules import BlamePolicy
from tests import _derive as derive


def _runs(slow: str | None, hosts: list[str]) -> ncclparse.ParseResult:
    """Derived: the real 2-node log renamed to every pair of ``hosts``; pairs that
    include ``slow`` take 2x as long at every size."""
    texts = derive.pairwise(hosts, slow)
    return ncclparse.parse_many((_stream(t), n) for t, n in texts)


def _stream(text: str) -> io.StringIO:
    return io.StringIO(text)


def test_run_scores_are_relative_to_the_typical_run() -> None:
    result = _runs("n1", ["n1", "n2", "n3", "n4"])
    scores = {
        (s.source, s.run): s for s in run_scores(result.measurements, result.runs)
    }
    assert len(scores) == 6
    # 3 of 6 runs include n1 and are 2x slower at large sizes; the median of the
    # six times at a size is the mean of one slow and one fast time (1.5x), so
    # fast runs score 1.5 and slow ones 0.75 on the larger half of the sizes.
    assert scores[("n1-n2.log", 0)].score == pytest.approx(0.75, rel=0.02)
    assert scores[("n2-n3.log", 0)].score == pytest.approx(1.5, rel=0.02)
    assert scores[("n2-n3.log", 0)].hosts == ("n2", "n3")


def test_a_host_name_is_scored_as_the_cases_show_it() -> None:
    """A host named with a control character reached the slow-host case, the
    report's slow hosts and the Prometheus labels raw."""
    result = _runs("n\x07", ["n\x07", "n2", "n3", "n4"])
    ranked = blame(run_scores(result.measurements, result.runs), BlamePolicy())
    assert [(h.host, h.slow) for h in ranked][:1] == [("n\\x07", True)]


def test_too_few_runs_in_a_shape_are_not_scored() -> None:
    result = _runs(None, ["n1", "n2", "n3"])  # three runs: scored
    assert len(run_scores(result.measurements, result.runs)) == 3
    two = ncclparse.parse_many([derive.HEALTHY])
    assert run_scores(two.measurements, two.runs) == ()


def test_blame_names_only_the_consistently_slow_host() -> None:
    scores = (
        RunScore("a", 0, 0.5, ("x", "y")),
        RunScore("b", 0, 0.55, ("x", "z")),
        RunScore("c", 0, 0.52, ("x", "w")),
        RunScore("d", 0, 1.0, ("y", "z")),
        RunScore("e", 0, 1.02, ("y", "w")),
        RunScore("f", 0, 0.98, ("z", "w")),
    )
    ranked = blame(scores, BlamePolicy())
    assert ranked[0].host == "x"
    assert ranked[0].slow
    assert ranked[0].deficit == pytest.approx(1 - (1.57 / 3) / 1.0, abs=1e-9)
    assert [h.host for h in ranked if h.slow] == ["x"]
    assert (
        ranked[0]
        .describe()
        .startswith(
            "x is slow with every partner: 3 of 3 runs slow, mean score 0.52x with it "
            "vs 1.00x without (48% deficit); runs: y 0.50x, w 0.52x, z 0.55x"
        )
    )


def test_one_slow_run_does_not_name_a_host() -> None:
    scores = (
        RunScore("a", 0, 0.5, ("x", "y")),
        RunScore("b", 0, 1.0, ("x", "z")),
        RunScore("c", 0, 1.0, ("x", "w")),
        RunScore("d", 0, 1.0, ("y", "z")),
        RunScore("e", 0, 1.0, ("y", "w")),
    )
    assert not any(h.slow for h in blame(scores, BlamePolicy()))


def test_run_times_gathered_batch_by_batch_score_as_one_frame() -> None:
    """Six runs added two at a time (as check judges them in batches): the same
    scores, in the same order, as all the rows at once."""
    result = _runs("n1", ["n1", "n2", "n3", "n4"])
    whole = run_scores(result.measurements, result.runs)
    times = RunTimes()
    for first in range(0, 6, 2):
        pair = result.runs.slice(first, 2)["source"]
        times.add(
            result.measurements.filter(pc.is_in(result.measurements["source"], pair))
        )
    assert times.scores(result.runs) == whole
    assert [(s.source, s.run) for s in whole] == [
        ("n1-n2.log", 0),
        ("n1-n3.log", 0),
        ("n1-n4.log", 0),
        ("n2-n3.log", 0),
        ("n2-n4.log", 0),
        ("n3-n4.log", 0),
    ]


def _scores_of_one_frame(
    times: RunTimes, runs: pa.Table
) -> dict[tuple[str, int], float]:
    """The scores as they were computed before, from one frame of every point (its
    group mean adds each run's ratios in row order): what a part at a time and a
    shape at a time must give, bit for bit."""
    frame = pd.concat(times._parts, ignore_index=True)
    runs_in_shape = frame.groupby("shape")["run"].nunique()
    frame = frame[frame["shape"].map(runs_in_shape) >= 3]
    typical = frame.groupby(["shape", "size_bytes"])["time_us"].transform("median")
    log_ratio = np.log(typical / frame["time_us"])
    cuts = frame.groupby("shape")["size_bytes"].agg(lambda s: np.median(np.unique(s)))
    large = frame["size_bytes"] >= frame["shape"].map(cuts)
    ratios = pd.DataFrame({"run": frame["run"][large], "log_ratio": log_ratio[large]})
    scores = ratios.groupby("run")["log_ratio"].mean().map(np.exp)
    return {times._runs[cast(int, at)]: float(score) for at, score in scores.items()}


def test_scores_a_part_and_a_shape_at_a_time_equal_those_of_one_frame(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three collectives over every pair of five hosts (one slow), each time
    jittered, added in batches of four runs, and a shape of two runs (not scored):
    the scores of one frame of every point, bit for bit, in both placements' rows
    interleaved as the runs print them."""
    logs = []
    for at, collective in enumerate(("all_reduce", "all_gather", "reduce_scatter")):
        for n, (text, name) in enumerate(
            derive.pairwise(["a", "b", "c", "d", "e"], "c")
        ):
            jittered = derive.scale(text, derive.jitter(at * 100 + n, 0.05))
            logs.append(
                (derive.as_collective(jittered, collective), f"{collective}-{name}")
            )
    alone = derive.as_collective(derive.healthy(), "alltoall")
    logs += [(alone, "alltoall-1.log"), (alone, "alltoall-2.log")]
    result = ncclparse.parse_many((_stream(t), n) for t, n in logs)
    times = RunTimes()
    sources = result.runs["source"]
    for first in range(0, len(sources), 4):
        batch = sources.slice(first, 4)
        times.add(
            result.measurements.filter(pc.is_in(result.measurements["source"], batch))
        )
    monkeypatch.setattr(blaming, "_HOST_ROWS", 4)  # hosts read four runs at a time
    scores = times.scores(result.runs)
    assert len(times._shapes) == 8  # four collectives, two placements
    assert len(scores) == 30  # the two alltoall runs are too few to score
    assert {(s.source, s.run): s.score for s in scores} == _scores_of_one_frame(
        times, result.runs
    )
    assert all(
        s.hosts == tuple(s.source.removesuffix(".log").split("-")[-2:]) for s in scores
    )
    slow = sorted(s.source for s in scores if s.score < 0.6)
    assert slow == sorted(
        f"{c}-{pair}.log"
        for c in ("all_gather", "all_reduce", "reduce_scatter")
        for pair in ("a-c", "b-c", "c-d", "c-e")
    )
