"""Blame: run scores from real-log-derived runs, and the host ranking."""

from __future__ import annotations

import io

import pyarrow.compute as pc
import pytest

import ncclparse
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
