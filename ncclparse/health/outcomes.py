"""The one vocabulary of judgements: FAIL, CHECK, NOTE, OK and SKIP.

A run's verdict, a check case, the check's summary line, the report and every
output of ``ncclparse check`` say what they found in these words
(docs/nightly.md, "Outcomes"). A verdict's :data:`Level` is the same scale as
severities; :func:`outcome_of` is the one mapping from level to word. SKIP is the
one word no level gives: a rule that judged nothing (no size in its range, no
baseline yet). It is not a NOTE: a NOTE is a judgement made that found nothing
wrong but has something to say (a ceiling passed, an ideal assumed), so it passes;
a SKIP is a judgement not made, which JUnit and the JSON report as skipped.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "OUTCOMES",
    "Level",
    "Outcome",
    "Status",
    "outcome_of",
    "status_of",
    "symbol_of",
]

Level = Literal["ok", "info", "warn", "bad"]
Outcome = Literal["FAIL", "CHECK", "NOTE", "OK", "SKIP"]
# What an outcome is to JUnit, the JSON's ``status`` and the exit code: a CHECK and
# a NOTE pass (the check exits 0), a FAIL fails, a SKIP is skipped.
Status = Literal["pass", "fail", "skip"]
# Most severe first: the order counts and lists are given in.
OUTCOMES: tuple[Outcome, ...] = ("FAIL", "CHECK", "NOTE", "OK", "SKIP")
_BY_LEVEL: dict[Level, Outcome] = {
    "ok": "OK",
    "info": "NOTE",
    "warn": "CHECK",
    "bad": "FAIL",
}
_STATUS: dict[Outcome, Status] = {
    "FAIL": "fail",
    "CHECK": "pass",
    "NOTE": "pass",
    "OK": "pass",
    "SKIP": "skip",
}
# Words and symbols, not colour alone: an outcome must survive grey-scale printing.
_SYMBOL: dict[Outcome, str] = {
    "FAIL": "✗",
    "CHECK": "!",
    "NOTE": "i",
    "OK": "✓",
    "SKIP": "\N{EN DASH}",
}


def outcome_of(level: Level) -> Outcome:
    """The word of a verdict's level: ok OK, info NOTE, warn CHECK, bad FAIL."""
    return _BY_LEVEL[level]


def status_of(outcome: Outcome) -> Status:
    """Whether ``outcome`` passes, fails or is skipped (JUnit, JSON ``status``)."""
    return _STATUS[outcome]


def symbol_of(outcome: Outcome) -> str:
    """The symbol printed beside the word: ✗ ! i ✓, and a dash for SKIP."""
    return _SYMBOL[outcome]
