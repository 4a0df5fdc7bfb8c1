"""The check engine on real logs: integrity, thresholds, expectations, history."""

from __future__ import annotations

import io

import pyarrow as pa

import ncclparse
from ncclparse.efficiency import HardwareOptions
from ncclparse.health.cases import Case, SizeMiss, sizes
from ncclparse.health.check import CheckResult, check
from ncclparse.health.rules import DEFAULT_RULES, Rule, Rules, rules_from_mapping
from ncclparse.store import history
from tests import _derive as derive
from tests.conftest import FIXTURES

# GCP A3 Mega: 8 x 200 Gb/s NICs per node.
A3_MEGA = HardwareOptions(profile="h100", inter_bw="200GB/s")


def _parse(text: str, name: str = "derived.log") -> ncclparse.ParseResult:
    return ncclparse.parse(io.StringIO(text), name=name)


def _by_rule(result: CheckResult, rule: str) -> list[Case]:
    return [c for c in result.cases if c.rule == rule]


def test_healthy_real_log_every_case() -> None:
    result = check(
        ncclparse.parse_many([derive.HEALTHY]), DEFAULT_RULES, hardware=A3_MEGA
    )
    assert result.passed
    assert [(c.rule, c.status) for c in result.cases] == [
        ("integrity", "pass"),
        ("verdict", "pass"),
        ("latency", "pass"),
        ("latency", "pass"),
        ("slow-host", "skip"),
    ]
    [verdict] = _by_rule(result, "verdict")
    assert verdict.name == f"{derive.HEALTHY} run 0"
    assert verdict.hosts == derive.HOSTS
    # 8 x 200 Gb/s per node: I = 200 GB/s. The plateau is 2, 4 and 8 GiB (318.4,
    # 330.6, 338.8 GB/s), median 330.6: above a ring's I, so a tree (or NVLSTree) ran,
    # min(2*15/16*200 = 375, 450*15/14) = 375 line rate; healthy IB reaches 0.96 of
    # it, 360 (docs/efficiency.md section 2).
    assert verdict.message == (
        f"{derive.HEALTHY} run 0 (hosts ztan-mig-235z, ztan-mig-gq73): OK healthy: "
        "median busbw 330.6 GB/s on the plateau, 2 GiB to 8 GiB: 88.2 % of a tree's "
        "line rate (375.0 GB/s), 91.8 % of what healthy hardware reaches (360.0 GB/s)"
    )


def test_far_below_ideal_fails_the_verdict_case() -> None:
    # Derived: every size 4x slower: the plateau's median 330.6 / 4 = 82.6 GB/s is
    # 43.0 % of a healthy ring's 192 GB/s (0.96 x I) and less of a tree's: poor even
    # against the lowest reading. (2.5x slower, 132.2 GB/s, is 68.9 % of a healthy
    # ring's: a CHECK, which passes.)
    slow = derive.scale(derive.healthy(), lambda s: 4.0)
    result = check(_parse(slow), DEFAULT_RULES, hardware=A3_MEGA)
    [verdict] = _by_rule(result, "verdict")
    assert verdict.status == "fail"
    assert (
        "FAIL far below healthy whatever the algorithm: median busbw 82.6 GB/s on the "
        "plateau, 2 GiB to 8 GiB: as a ring, 41.3 % of its line rate (200.0 GB/s), "
        "43.0 % of what healthy hardware reaches (192.0 GB/s)"
    ) in verdict.message
    middle = derive.scale(derive.healthy(), lambda s: 2.5)
    [checked] = _by_rule(
        check(_parse(middle), DEFAULT_RULES, hardware=A3_MEGA), "verdict"
    )
    assert checked.status == "pass"
    assert "CHECK below healthy for any algorithm" in checked.message
    assert not result.passed


def test_threshold_failure_names_sizes_numbers_and_hosts() -> None:
    rules = Rules(rules=(Rule("bw", "efficiency", 0.6, "all_reduce",
                              "bandwidth-bound", 2**28),))  # fmt: skip
    result = check(ncclparse.parse_many([derive.HEALTHY]), rules, hardware=A3_MEGA)
    case = _by_rule(result, "bw")[0]
    assert case.status == "fail"
    assert case.message == (
        f"{derive.HEALTHY} run 0 (hosts ztan-mig-235z, ztan-mig-gq73) all_reduce "
        "float32 sum out-of-place 16 ranks on 2 nodes: efficiency below 60.0 % at 1 of 6 sizes: "
        "256 MiB (268435456 B) 56.9 % < 60.0 %"
    )
    assert [f.size_bytes for f in case.findings] == [268435456]


def test_tolerance_widens_the_limit() -> None:
    rule = Rule("bw", "efficiency", 0.6, regime="bandwidth-bound", size_min=2**28,
                tolerance=0.1)  # fmt: skip
    result = check(
        ncclparse.parse_many([derive.HEALTHY]), Rules((rule,)), hardware=A3_MEGA
    )
    assert {c.status for c in _by_rule(result, "bw")} == {"pass"}


def test_rule_for_another_collective_makes_no_case() -> None:
    rules = rules_from_mapping(
        {"rule": [{"collective": "all_gather", "metric": "time_us", "threshold": 1}]}
    )
    result = check(ncclparse.parse_many([derive.HEALTHY]), rules, hardware=A3_MEGA)
    assert _by_rule(result, "rule-1") == []


def test_rule_matching_no_size_is_skipped() -> None:
    rule = Rule("huge", "busbw_gbps", 1.0, size_min=2**40)
    result = check(
        ncclparse.parse_many([derive.HEALTHY]), Rules((rule,)), hardware=A3_MEGA
    )
    assert {c.status for c in _by_rule(result, "huge")} == {"skip"}


def test_old_error_column_is_not_wrong_values() -> None:
    # E2 logs print a max deviation (1e-07) where newer ones print #wrong: not a fault.
    log = (
        FIXTURES
        / "nccl"
        / "npkit-19_allreduce_2080ti_4rank_old_error_column_truncated.log"
    )
    [case] = _by_rule(check(ncclparse.parse_many([log]), DEFAULT_RULES), "integrity")
    assert case.status == "fail"  # it is cut off, but not for its error column
    assert "#wrong" not in case.message
    assert "run truncated" in case.message


def test_failed_run_without_rows_names_errors_and_hosts() -> None:
    log = (
        FIXTURES
        / "nccl"
        / "nccltests-322_allreduce_midrun_nccl_failure_multihost_truncated.log"
    )
    [case] = _by_rule(check(ncclparse.parse_many([log]), DEFAULT_RULES), "integrity")
    assert case.status == "fail"
    assert "run failed; tool reported errors: line 7: HCA-128: Test NCCL failure" in (
        case.message
    )


def test_input_failures_become_failed_cases() -> None:
    error = ncclparse.InputError("gone.log: no such file or directory")
    result = check(
        ncclparse.parse_many([derive.HEALTHY]), DEFAULT_RULES,
        input_failures=[error], hardware=A3_MEGA,
    )  # fmt: skip
    [case] = _by_rule(result, "input")
    assert (case.status, case.name) == ("fail", "gone.log")
    assert not result.passed


def test_history_missing_size_fails() -> None:
    # Derived: history holds full runs; tonight's run stops at 4 GiB (maxBytes cut).
    frames = []
    for seed in range(5):
        part = _parse(derive.scale(derive.healthy(), derive.jitter(seed)), f"n{seed}")
        frames.append(part)
    table = _history_table(frames)
    tonight = derive.healthy().replace(
        derive.healthy().splitlines()[-3] + "\n", ""
    )  # drop the 8 GiB row
    result = check(_parse(tonight), DEFAULT_RULES, history=table, hardware=A3_MEGA)
    failed = [c for c in _by_rule(result, "history") if c.status == "fail"]
    assert len(failed) == 2
    assert failed[0].message.endswith("size(s) in the baseline but absent: 8 GiB")


def _history_table(results: list[ncclparse.ParseResult]) -> pa.Table:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as directory:
        for result in results:
            history.ingest(result, Path(directory))
        return history.read_history(Path(directory))


def test_a_size_is_given_exactly_only_when_rounded() -> None:
    # `8 B (8 B)` said the same size twice (found by a review).
    found = (SizeMiss(8, "time_us", 2.0, 1.0), SizeMiss(2**20, "time_us", 2.0, 1.0))
    assert sizes(found, lambda f: "x") == "8 B x, 1 MiB (1048576 B) x"
