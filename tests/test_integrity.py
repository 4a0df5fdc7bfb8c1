"""Integrity cases fail closed: unreadable inputs, failed or truncated runs, #wrong,
runs without rows, expected collectives or sizes absent."""

from __future__ import annotations

import io
from pathlib import Path

import ncclparse
from ncclparse.errors import UnknownLogFormatError
from ncclparse.health.check import check
from ncclparse.health.integrity import input_case
from ncclparse.health.rules import DEFAULT_RULES, rules_from_mapping
from tests import _derive as derive

EXAMPLES = Path(__file__).parent.parent / "examples"


def _cases(result: ncclparse.ParseResult, rule: str, **rules: object) -> list[str]:
    policy = rules_from_mapping(rules) if rules else DEFAULT_RULES
    return [
        f"{c.status} {c.message}" for c in check(result, policy).cases if c.rule == rule
    ]


def test_an_unreadable_input_fails_naming_it() -> None:
    case = input_case(UnknownLogFormatError("notes.txt", "hello", 1))
    assert (case.rule, case.name, case.status) == ("input", "notes.txt", "fail")
    assert case.message.endswith("(no data is never a pass)")


def test_a_failed_run_fails_with_its_error_and_hosts() -> None:
    result = ncclparse.parse_many([EXAMPLES / "all_reduce_failed_midrun.log"])
    [case] = _cases(result, "integrity")
    assert case.startswith("fail ")
    assert "run failed" in case
    assert "tool reported errors: " in case


def test_wrong_values_fail_naming_size_and_placement() -> None:
    text = derive.set_wrong(derive.healthy(), 1 << 20, 3)
    result = ncclparse.parse(io.StringIO(text), name="night.log")
    [case] = _cases(result, "integrity")
    assert case.endswith("#wrong > 0 at 1 size(s): 1 MiB out-of-place #wrong 3")


def test_expected_collective_and_size_absent() -> None:
    result = ncclparse.parse_many([derive.HEALTHY])
    cases = _cases(
        result,
        "expect",
        expect={"collectives": ["all_reduce", "alltoall"], "sizes": ["16GiB"]},
    )
    assert cases[0] == "pass all_reduce: present"
    assert cases[1] == f"fail alltoall: absent from every input ({derive.HEALTHY})"
    assert cases[2].endswith("expected size(s) absent: 16 GiB")
    assert cases[2].startswith("fail ")


def test_a_refused_row_fails_the_run_naming_line_and_text() -> None:
    # The 1 MiB row of the real log (line 49) with its out-of-place time -inf: the
    # row is not read, and the run, complete with its footer, is not valid data.
    text = derive.healthy().replace("    203.2 ", "     -inf ", 1)
    result = ncclparse.parse(io.StringIO(text), name="night.log")
    [case] = _cases(result, "integrity")
    assert case == (
        "fail night.log run 0 (hosts ztan-mig-235z, ztan-mig-gq73) all_reduce: data "
        "error: 1 measurement line(s) with an impossible value, not read: line 49: "
        "time -inf is not a possible time ('1048576 262144 float sum -1 -inf 5.16 "
        "9.68 0 207.2 5.06 9.49 0')"
    )
