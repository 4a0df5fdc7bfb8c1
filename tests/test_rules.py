"""Rules: defaults, the TOML file, and the errors a bad file gives."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from ncclparse.health.rules import (
    DEFAULT_RULES,
    HistoryPolicy,
    Rule,
    RulesError,
    VerdictPolicy,
    load_rules,
    rules_from_mapping,
)

EXAMPLE = """
[[rule]]
name = "allreduce-bw"
collective = "all_reduce"
regime = "bandwidth-bound"
size_min = "256MiB"
size_max = "8GiB"
metric = "efficiency"
threshold = 0.6
tolerance = 0.05

[[rule]]
name = "small-latency"
metric = "time_us"
threshold = 50
size_max = 65536

[expect]
collectives = ["all_reduce"]
sizes = ["8B", "8GiB"]

[history]
window = 10
min_drop = 0.08

[blame]
min_deficit = 0.2
"""


def test_defaults_judge_latency_and_leave_efficiency_to_the_verdict() -> None:
    (latency,) = DEFAULT_RULES.rules
    assert DEFAULT_RULES.verdict == VerdictPolicy(good=0.85, poor=0.6)
    assert latency.describe() == (
        "any collective, latency-bound, sizes 0..1048576 B: time_us <= 1000"
    )
    assert DEFAULT_RULES.history == HistoryPolicy()


def test_load_example_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(EXAMPLE)
    rules = load_rules(path)
    assert rules.rules[0] == Rule(
        "allreduce-bw", "efficiency", 0.6, "all_reduce", "bandwidth-bound",
        256 * 2**20, 8 * 2**30, 0.05,
    )  # fmt: skip
    assert rules.rules[0].limit == pytest.approx(0.57)
    assert rules.rules[1].is_ceiling
    assert rules.rules[1].limit == 50
    assert rules.expect.sizes == (8, 8 * 2**30)
    assert (rules.history.window, rules.history.min_drop) == (10, 0.08)
    assert rules.history.min_runs == 5  # unspecified keys keep their defaults
    assert rules.blame.min_deficit == 0.2


def test_sections_not_given_keep_defaults() -> None:
    rules = rules_from_mapping({"history": {"min_runs": 3}})
    assert rules.rules == DEFAULT_RULES.rules
    assert rules.history.min_runs == 3


def test_empty_rule_array_replaces_defaults() -> None:
    assert rules_from_mapping({"rule": []}).rules == ()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"rules": []}, "top level: unknown key(s) rules"),
        ({"rule": [{"metric": "speed", "threshold": 1}]}, "'metric' must be one of"),
        ({"rule": [{"metric": "time_us"}]}, "threshold: expected a number, got None"),
        ({"rule": [{"metric": "time_us", "threshold": True}]}, "expected a number"),
        ({"rule": [{"metric": "time_us", "threshold": -1}]},
         "rule 'rule-1' threshold: expected a number > 0, got -1"),
        ({"rule": [{"metric": "time_us", "threshold": 1, "tolerance": 1.5}]},
         "tolerance is a fraction below 1"),
        ({"rule": [{"metric": "efficiency", "threshold": 1, "regime": "fast"}]},
         "'regime' must be one of"),
        ({"rule": [{"metric": "efficiency", "threshold": 1, "collective": "allreduce"}]},
         "unknown collective 'allreduce'"),
        ({"rule": [{"metric": "efficiency", "threshold": 1, "size_min": "8GiB",
                    "size_max": "1MiB"}]}, "size_min is above size_max"),
        ({"rule": [{"metric": "efficiency", "threshold": 1, "size_min": "8Gbps"}]},
         "is a bandwidth, not a size"),
        ({"rule": [{"name": "a", "metric": "time_us", "threshold": 1}] * 2},
         "rule names must be unique"),
        ({"history": {"window": 2.5}},
         "[history] window: expected a whole number, got 2.5 (a float)"),
        ({"history": {"windows": 2}}, "[history]: unknown key(s) windows"),
        ({"expect": {"collectives": "all_reduce"}}, "'collectives' must be an array"),
    ],
)  # fmt: skip
def test_invalid_rules_name_the_problem(data: dict[str, Any], message: str) -> None:
    with pytest.raises(RulesError) as info:
        rules_from_mapping(data)
    assert message in str(info.value)


def test_unreadable_and_invalid_toml_files(tmp_path: Path) -> None:
    with pytest.raises(RulesError, match=r"missing\.toml: cannot read rules"):
        load_rules(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[[rule]\n")
    with pytest.raises(RulesError, match=r"bad\.toml: not valid TOML"):
        load_rules(bad)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text("[blame]\nslow_score = 'low'\n")
    with pytest.raises(RulesError, match=r"wrong\.toml: \[blame\] slow_score"):
        load_rules(wrong)


def test_verdict_thresholds_from_toml() -> None:
    rules = rules_from_mapping({"verdict": {"good": 0.8, "poor": 0.6}})
    assert rules.verdict == VerdictPolicy(good=0.8, poor=0.6)
    with pytest.raises(RulesError) as info:
        rules_from_mapping({"verdict": {"good": 0.4, "poor": 0.6}})
    assert str(info.value) == (
        "[verdict]: need 0 <= poor <= good, got poor 0.6 and good 0.4"
    )
    with pytest.raises(RulesError, match=r"\[verdict\]: unknown key\(s\) best"):
        rules_from_mapping({"verdict": {"best": 0.9}})


def test_verdict_unjudged_is_fail_unless_skip_is_chosen() -> None:
    assert DEFAULT_RULES.verdict.unjudged == "fail"
    chosen = rules_from_mapping({"verdict": {"unjudged": "skip", "good": 0.8}})
    assert chosen.verdict == VerdictPolicy(good=0.8, poor=0.6, unjudged="skip")
    kept = rules_from_mapping({"verdict": {"poor": 0.4}})
    assert kept.verdict == VerdictPolicy(good=0.85, poor=0.4, unjudged="fail")


@pytest.mark.parametrize(
    ("value", "shown"),
    [("pass", "'pass' (a string)"), (1, "1 (an integer)"), (True, "true (a boolean)")],
)
def test_verdict_unjudged_rejects_anything_else(value: Any, shown: str) -> None:
    with pytest.raises(RulesError) as raised:
        rules_from_mapping({"verdict": {"unjudged": value}})
    assert str(raised.value) == (
        f"[verdict] unjudged: expected one of 'fail', 'skip', got {shown}"
    )


WINDOW_BELOW = (
    "[history] window: 3 is below min_runs 5: no size would ever have a baseline, so "
    "history would judge nothing (to switch history judging off, say so: [history] "
    "enabled = false)"
)


@pytest.mark.parametrize(
    ("history", "message"),
    [
        ({"window": 3}, WINDOW_BELOW),
        ({"window": 0},
         "[history] window: expected a whole number from 1 to 1000, got 0"),
        ({"min_runs": 10**6},
         "[history] min_runs: expected a whole number from 1 to 1000, got 1000000"),
        ({"min_runs": 0},
         "[history] min_runs: expected a whole number from 1 to 1000, got 0"),
        ({"max_age_days": 2**63 - 1},
         "[history] max_age_days: expected a whole number from 0 to 3650, got "
         "9223372036854775807"),
        ({"min_drop": 1.0},
         "[history] min_drop: expected a number >= 0 and <= 0.9, got 1.0 (a float)"),
        ({"mad_k": 10**400},
         "[history] mad_k: expected a number >= 0 and <= 100, got 1000000000000000000"
         "000000000000000000... (an integer)"),
        ({"enabled": 0}, "[history] enabled: expected true or false, got 0 (an integer)"),
        ({"window": True},
         "[history] window: expected a whole number, got true (a boolean)"),
    ],
)  # fmt: skip
def test_a_value_that_would_switch_history_off_is_refused(
    history: dict[str, Any], message: str
) -> None:
    with pytest.raises(RulesError) as raised:
        rules_from_mapping({"history": history})
    assert str(raised.value) == message


def test_history_is_switched_off_only_explicitly(tmp_path: Path) -> None:
    path = tmp_path / "off.toml"
    path.write_text("[history]\nenabled = false\nwindow = 3\n")
    rules = load_rules(path)
    assert rules.history == HistoryPolicy(window=3, enabled=False)
    assert rules.origin == str(path)
    assert DEFAULT_RULES.history.enabled
    assert DEFAULT_RULES.origin is None


def test_a_rules_file_that_is_not_utf8_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b"[history]\n# caf\xe9\nwindow = 20\n")
    with pytest.raises(RulesError) as raised:
        load_rules(path)
    assert str(raised.value) == f"{path}:2: not UTF-8 text (byte 0xe9)"


def test_a_rules_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """UTF-8 as Windows editors save it, a BOM first: it was "not valid TOML:
    Invalid statement (at line 1, column 1)"."""
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf[history]\nwindow = 20\n")
    assert load_rules(path).history.window == 20


def test_invalid_toml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[history]\nwindow = = 3\n")
    with pytest.raises(RulesError) as raised:
        load_rules(path)
    assert str(raised.value) == (
        f"{path}: not valid TOML: Invalid value (at line 2, column 10)"
    )


def test_the_documented_rules_file_is_the_default() -> None:
    """docs/check-json.md shows every key with its default value, enabled included."""
    text = (Path(__file__).parent.parent / "docs" / "check-json.md").read_text()
    section = text[text.index("## Rules file") :]
    [block] = re.findall(r"^```toml\n(.*?)^```", section, re.S | re.M)[:1]
    assert rules_from_mapping(tomllib.loads(block)) == DEFAULT_RULES


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"threshold": 0},
         "rule 'floor' threshold: expected a number > 0, got 0 (an integer)"),
        ({"threshold": -5.0},
         "rule 'floor' threshold: expected a number > 0, got -5.0 (a float)"),
        ({"enabled": "no"},
         "rule 'floor' enabled: expected true or false, got 'no' (a string)"),
    ],
)  # fmt: skip
def test_a_threshold_rule_is_switched_off_only_explicitly(
    rule: dict[str, Any], message: str
) -> None:
    """A floor of 0 (efficiency >= 0) never fails: it was a rule switched off
    without saying so."""
    item = {"name": "floor", "metric": "efficiency", "threshold": 0.5, **rule}
    with pytest.raises(RulesError) as raised:
        rules_from_mapping({"rule": [item]})
    assert str(raised.value) == message


def test_every_rule_section_that_can_be_switched_off_says_so() -> None:
    data = {
        "rule": [{"name": "floor", "metric": "efficiency", "threshold": 0.5,
                  "enabled": False}],
        "blame": {"enabled": False},
        "cohort": {"enabled": False},
        "history": {"enabled": False},
    }  # fmt: skip
    rules = rules_from_mapping(data)
    assert [r.enabled for r in rules.rules] == [False]
    enabled = (rules.blame.enabled, rules.cohort.enabled, rules.history.enabled)
    assert enabled == (False, False, False)
    assert DEFAULT_RULES.blame.enabled
