"""The cohort rule: each run against the other runs of its shape in one check.

Every run is the real 2-node H100 log (tests/_derive.py) renamed to a pair of hosts;
a slow pair takes longer from 1 MiB up (busbw divided by the same factor).
"""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import pytest

from ncclparse.api import parse_many
from ncclparse.formatting import format_gbps
from ncclparse.health.cases import Case
from ncclparse.health.check import check
from ncclparse.health.cohort import cohort_cases, points_of
from ncclparse.health.rules import (
    DEFAULT_RULES,
    CohortPolicy,
    RulesError,
    load_rules,
    rules_from_mapping,
)
from tests import _derive as derive

PAIRS = (("node01", "node02"), ("node01", "node03"), ("node02", "node03"))
OUT = "all_reduce float32 sum out-of-place 16 ranks on 2 nodes (NVIDIA H100 80GB HBM3)"


def _logs(
    tmp_path: Path,
    pairs: tuple[tuple[str, str], ...],
    slow: float = 1.0,
    edit: dict[str, object] | None = None,
) -> list[str]:
    """The pairs' logs; node01_node03 has ``slow`` x the bus bandwidth from 1 MiB."""
    paths = []
    for a, b in pairs:
        text = derive.rename_hosts(
            derive.healthy(), dict(zip(derive.HOSTS, (a, b), strict=True))
        )
        if (a, b) == ("node01", "node03") and slow != 1.0:
            text = derive.scale(text, lambda s: 1 / slow if s >= 2**20 else 1.0)
        path = tmp_path / f"pair_{a}_{b}.log"
        path.write_text(text)
        paths.append(str(path))
    return paths


def _cohort(paths: list[str], rules: object = DEFAULT_RULES) -> list[Case]:
    result = check(parse_many(paths), rules)  # type: ignore[arg-type]
    return [c for c in result.cases if c.rule == "cohort"]


def _out_of_place(cases: list[Case]) -> dict[str, Case]:
    return {Path(c.source or "").stem: c for c in cases if "out-of-place" in c.message}


def test_a_pair_at_six_tenths_fails_naming_the_pair_size_and_median(
    tmp_path: Path,
) -> None:
    paths = _logs(tmp_path, PAIRS, slow=0.6)
    cases = _cohort(paths)
    assert [c.status for c in cases] == ["pass", "fail", "pass"] * 2
    slow = _out_of_place(cases)["pair_node01_node03"]
    # 8 GiB out-of-place takes 47535 us: 8 GiB x 2 x 15/16 / 47535 us = 338.8 GB/s;
    # 47535 / 0.6 = 79225 us slow: 203.3 GB/s, 40.0 % below. 1 MiB and 2 MiB are
    # latency-bound in most runs: not judged.
    assert slow.message == (
        f"{paths[1]} run 0 (hosts node01, node03): {OUT}: bus bandwidth 203.3 GB/s "
        "at 8 GiB is 40.0% below the median of the 2 other runs of its shape tonight "
        "(338.8 GB/s; limit 15%); 11 more sizes down to 4 MiB"
    )
    assert slow.hosts == ("node01", "node03")
    assert [f.size_bytes for f in slow.findings][:2] == [2**33, 2**32]
    assert slow.checked == 12


def test_a_pair_within_the_threshold_passes(tmp_path: Path) -> None:
    cases = _cohort(_logs(tmp_path, PAIRS, slow=0.9))
    assert [c.status for c in cases] == ["pass"] * 6
    near = _out_of_place(cases)["pair_node01_node03"]
    assert near.message.endswith(
        "bus bandwidth within 15% of the median of the 2 other runs of its shape "
        "tonight at 12 bandwidth-bound sizes (largest drop 10.0% at 32 MiB)"
    )


def test_identical_runs_pass(tmp_path: Path) -> None:
    cases = _cohort(_logs(tmp_path, PAIRS))
    assert [c.status for c in cases] == ["pass"] * 6
    assert all(c.message.endswith("(at or above it at every size)") for c in cases), [
        c.message for c in cases
    ]


def test_two_runs_are_skipped_saying_why(tmp_path: Path) -> None:
    paths = _logs(tmp_path, PAIRS[:2], slow=0.6)
    cases = _cohort(paths)
    assert [c.status for c in cases] == ["skip"] * 4
    assert _out_of_place(cases)["pair_node01_node03"].message == (
        f"{paths[1]} run 0 (hosts node01, node03): {OUT}: not compared: 2 runs of its "
        "shape tonight, a cohort needs 3 (of two runs apart, neither tells which is "
        "slow)"
    )


def test_a_run_alone_in_its_shape_has_no_cohort_case(tmp_path: Path) -> None:
    assert _cohort(_logs(tmp_path, PAIRS[:1])) == []


def test_shapes_of_other_ranks_or_gpus_are_separate_cohorts(tmp_path: Path) -> None:
    key = ("nccl-tests", "all_reduce", "float32", "sum", None, "in-place")
    point = (2**30, 100.0, "bandwidth-bound")
    points = {("a", 0, *key, 16, 2): [point], ("b", 0, *key, 8, 1): [point]}
    runs = {("a", 0): {"devices": ["H100"]}, ("b", 0): {"devices": ["H100"]}}
    assert cohort_cases(points, runs, CohortPolicy()) == []  # 16 and 8 ranks
    same = {("a", 0, *key, 16, 2): [point], ("b", 0, *key, 16, 2): [point]}
    assert [c.status for c in cohort_cases(same, runs, CohortPolicy())] == [
        "skip",
        "skip",
    ]
    runs[("b", 0)] = {"devices": ["A100"]}
    assert cohort_cases(same, runs, CohortPolicy()) == []  # H100 and A100
    # Through check: a pair on A100s leaves two H100 runs, too few to compare.
    paths = _logs(tmp_path, PAIRS, slow=0.6)
    a100 = Path(paths[0])
    a100.write_text(a100.read_text().replace("NVIDIA H100 80GB HBM3", "A100-SXM4"))
    cases = _cohort(paths)
    assert [(Path(c.source or "").stem, c.status) for c in cases] == [
        ("pair_node01_node03", "skip"),
        ("pair_node02_node03", "skip"),
    ] * 2


def test_a_latency_bound_only_sweep_is_skipped_saying_why(tmp_path: Path) -> None:
    paths = []
    for a, b in PAIRS:
        text = derive.cut(
            derive.rename_hosts(
                derive.healthy(), dict(zip(derive.HOSTS, (a, b), strict=True))
            ),
            4096,
        )
        path = tmp_path / f"pair_{a}_{b}.log"
        path.write_text(text)
        paths.append(str(path))
    cases = _cohort(paths)
    assert [c.status for c in cases] == ["skip"] * 6
    assert _out_of_place(cases)["pair_node01_node02"].message == (
        f"{paths[0]} run 0 (hosts node01, node02): {OUT}: no bandwidth-bound size "
        "measured by it and the 2 other runs of its shape tonight (the cohort rule "
        "judges bus bandwidth only)"
    )


def test_the_rules_file_sets_the_threshold_and_turns_the_rule_off(
    tmp_path: Path,
) -> None:
    paths = _logs(tmp_path, PAIRS, slow=0.9)
    strict = rules_from_mapping({"cohort": {"threshold": 0.05}})
    assert strict.cohort == CohortPolicy(threshold=0.05, min_runs=3, enabled=True)
    assert [c.status for c in _cohort(paths, strict)] == ["pass", "fail", "pass"] * 2
    off = rules_from_mapping({"cohort": {"enabled": False}})
    assert _cohort(paths, off) == [
        Case(
            "cohort",
            "switched off",
            "SKIP",
            "cohort judging switched off by [cohort] enabled = false",
        )
    ]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            {"min_runs": 2},
            "[cohort] min_runs: must be at least 3 (of two runs apart, neither tells "
            "which is slow), got 2",
        ),
        ({"threshold": 1.5}, "[cohort] threshold: a fraction below 1, got 1.5"),
        (
            {"threshold": "15%"},
            "[cohort] threshold: expected a number, got '15%' (a string)",
        ),
        ({"enabled": "no"}, "[cohort] enabled: expected true or false, got 'no'"),
        (
            {"min_runs": 10**6},
            "[cohort] min_runs: expected a whole number from 1 to 1000, got 1000000",
        ),
        (
            {"treshold": 0.1},
            "[cohort]: unknown key(s) treshold (known: enabled, min_runs, threshold)",
        ),
    ],
)
def test_a_bad_cohort_section_is_an_error_naming_the_key(
    table: dict[str, object], message: str
) -> None:
    with pytest.raises(RulesError) as raised:
        rules_from_mapping({"cohort": table})
    assert str(raised.value) == message


def test_the_shipped_nightly_rules_file_loads_and_judges_a_slow_pair(
    tmp_path: Path,
) -> None:
    rules = load_rules(Path(__file__).parent.parent / "examples" / "nightly-rules.toml")
    assert rules.cohort == CohortPolicy(threshold=0.15, min_runs=3, enabled=True)
    assert rules.expect.sizes == (8, 2**33)
    assert [r.name for r in rules.rules] == ["latency"]
    result = check(parse_many(_logs(tmp_path, PAIRS, slow=0.6)), rules)
    failed = {(c.rule, Path(c.source or "").stem) for c in result.failures}
    assert failed == {("cohort", "pair_node01_node03")}


@pytest.mark.parametrize(
    ("busbw", "medians"),
    [
        # Each run against the median of the others: the slow run (60) does not drag
        # it; an odd number of others takes the middle one, an even one the mean.
        ([100.0, 60.0, 96.0, 104.0], [96.0, 100.0, 100.0, 96.0]),
        ([100.0, 60.0, 96.0, 104.0, 98.0], [97.0, 99.0, 99.0, 97.0, 98.0]),
    ],
)
def test_each_run_is_judged_by_the_median_of_the_others(
    busbw: list[float], medians: list[float]
) -> None:
    key = ("nccl-tests", "all_reduce", "float32", "sum", None, "in-place", "16", "2")
    points = {
        (f"pair{i}.log", 0, *key): [(2**30, value, "bandwidth-bound")]
        for i, value in enumerate(busbw)
    }
    runs = {(f"pair{i}.log", 0): {"devices": ["H100"]} for i in range(len(busbw))}
    cases = cohort_cases(points, runs, CohortPolicy())
    assert [c.status for c in cases] == ["pass", "fail"] + ["pass"] * (len(busbw) - 2)
    [miss] = cases[1].findings
    assert (miss.value, miss.baseline, miss.limit) == (
        60.0,
        medians[1],
        medians[1] * 0.85,
    )
    assert cases[1].message == (
        f"pair1.log run 0 (hosts unknown): all_reduce float32 sum in-place 16 ranks on "
        f"2 nodes (H100): bus bandwidth 60 GB/s at 1 GiB is "
        f"{1 - 60 / medians[1]:.1%} below the median of the {len(busbw) - 1} other "
        f"runs of its shape tonight ({format_gbps(medians[1])}; limit 15%)"
    )
    drops = [c.message.rsplit("(", 1)[1] for c in cases if c.status == "pass"]
    expected = [
        f"largest drop {1 - v / m:.1%} at 1 GiB)" if v < m else
        "at or above it at every size)"
        for v, m in zip(busbw, medians, strict=True) if v != 60.0
    ]  # fmt: skip
    assert drops == expected


def test_points_kept_as_bytes_read_back_and_unpickled_alike() -> None:
    """A series' points in one block of bytes give back each size, busbw (NaN
    kept) and regime, in order, also unpickled (from the child that judged
    them), whose regime names are shared with every other series'."""
    summary = [
        {"size_bytes": 8, "busbw_gbps": float("nan"), "regime": "latency-bound"},
        {"size_bytes": 1 << 33, "busbw_gbps": 330.6, "regime": "bandwidth-bound"},
        {"size_bytes": 1 << 34, "busbw_gbps": 331.25, "regime": "bandwidth-bound"},
    ]
    for points in (points_of(summary), pickle.loads(pickle.dumps(points_of(summary)))):
        assert len(points) == 3
        (small, nan, latency), *rest = list(points)
        assert (small, latency) == (8, "latency-bound")
        assert math.isnan(nan)
        assert rest == [
            (1 << 33, 330.6, "bandwidth-bound"),
            (1 << 34, 331.25, "bandwidth-bound"),
        ]
    again = pickle.loads(pickle.dumps(points_of(summary)))
    assert [r for *_, r in again][1] is [r for *_, r in points_of(summary)][1]
    assert list(points_of([])) == []
