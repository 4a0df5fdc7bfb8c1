"""The Intel parsers' fast path for table rows changes nothing they give.

oneCCL and IMB send a line of digits, blanks and number characters (``PLAIN_ROW``)
straight to their row reader (``table_row_values``), which reads a row with nothing to
warn about in one pass (``plain_table_row``) before the two-step reader
(``table_row_problem`` then ``read_table_row``) that names what is wrong. These tests
compare each shortcut with the way round it: on generated tokens, on every real oneCCL
and IMB log, and on those logs with hostile lines put in; and check that the shortcuts
are taken.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ncclparse.parsers import _lines, _table_row, imb, oneccl
from ncclparse.parsers._model import Run
from ncclparse.parsers._nccl_layout import table_row_problem
from ncclparse.parsers._table_row import PLAIN_ROW, plain_table_row, read_table_row
from tests.conftest import FIXTURES
from tests.test_scanner import outcome

INTEL_LOGS = sorted(
    [*(FIXTURES / "oneccl").glob("*.log"), *(FIXTURES / "imb").glob("*")]
)
INTEL_LOGS = [p for p in INTEL_LOGS if p.suffix in (".log", ".txt")]
COLUMN_MAPS = (oneccl._COLUMNS, imb._COLUMNS)


@contextmanager
def without_fast_paths() -> Iterator[None]:
    """Every line and row the long way round."""
    never = re.compile(r"(?!)")
    with (
        mock.patch.object(oneccl, "PLAIN_ROW", never),
        mock.patch.object(imb, "PLAIN_ROW", never),
        mock.patch.object(_table_row, "plain_table_row", return_value=None),
    ):
        yield


def _two_step(
    tokens: list[str], headers: list[str], columns: dict[str, str]
) -> tuple[str | None, dict[str, Any] | None, list[str]]:
    """What the two-step reader gives a complete line: (problem, values, warnings)."""
    run = Run(tool="t", first_line=1)
    problem = table_row_problem(tokens, headers, columns)
    if problem is not None:
        return problem, None, []
    line = _lines.Line(7, " ".join(tokens), True)
    values = read_table_row(run, line, tokens, headers, columns)
    return None, values, run.warnings.texts()


_ODD_TOKENS = [
    "0",
    "7",
    "1024",
    "-3",
    "-0",
    "-0.0",
    "0.5",
    "1e3",
    "1E-2",
    "2.",
    "nan",
    "inf",
    "-inf",
    "NaN",
    "Infinity",
    "+1",
    "1_0",
    ".5",
    "1e999",
    "١٢",
    "²",
    "0x10",
    "N/A",
    "1.2.3",
    "12e",
    "--1",
]
_TOKEN = st.one_of(
    st.sampled_from([*_ODD_TOKENS, "9" * 18, "9" * 19]),
    st.from_regex(r"\A-?[0-9]{1,20}(\.[0-9]{0,6})?([eE][-+]?[0-9]{1,3})?\Z"),
    st.text(max_size=6),
)


@st.composite
def rows(draw: st.DrawFn) -> tuple[list[str], list[str], dict[str, str]]:
    columns = draw(st.sampled_from(COLUMN_MAPS))
    labels = [*columns, "unknown[x]"]
    headers = draw(st.lists(st.sampled_from(labels), min_size=1, max_size=8))
    count = len(headers) + draw(st.sampled_from((0, 0, 0, -1, 1)))
    tokens = draw(st.lists(_TOKEN, min_size=max(count, 0), max_size=max(count, 0)))
    return tokens, headers, columns


@given(rows())
@example((["-0.0", "4"], ["t_avg[usec]", "#bytes"], oneccl._COLUMNS))
@example((["5", "4"], ["#bytes", "#bytes"], oneccl._COLUMNS))
@example((["-5", "4"], ["#bytes", "#bytes"], oneccl._COLUMNS))
@example((["1", "nan"], ["#bytes", "stddev[%]"], oneccl._COLUMNS))
@example((["1" + "0" * 18], ["#bytes"], oneccl._COLUMNS))
@example((["\u0661"], ["#bytes"], imb._COLUMNS))
def test_a_plain_row_is_read_as_the_two_steps_read_it(
    case: tuple[list[str], list[str], dict[str, str]],
) -> None:
    tokens, headers, columns = case
    fast = plain_table_row(tokens, headers, columns)
    if fast is not None:  # repr: NaN is not equal to itself; 1 and 1.0 differ
        assert repr(_two_step(tokens, headers, columns)) == repr((None, fast, []))


@given(
    st.lists(
        st.tuples(
            st.sampled_from(sorted(oneccl._COLUMNS)),
            st.from_regex(r"\A[0-9]{1,12}(\.[0-9]{1,4})?\Z"),
        ),
        min_size=1,
        max_size=9,
    )
)
def test_a_plain_row_of_possible_values_takes_the_fast_path(
    cells: list[tuple[str, str]],
) -> None:
    headers = [h for h, _ in cells]
    ints = _table_row.INT_COLUMNS
    tokens = [t.split(".")[0] if oneccl._COLUMNS[h] in ints else t for h, t in cells]
    line = "   ".join(["", *tokens])
    assert PLAIN_ROW.match(line)
    values = plain_table_row(tokens, headers, oneccl._COLUMNS)
    assert values is not None
    assert repr(values) == repr(_two_step(tokens, headers, oneccl._COLUMNS)[1])


@pytest.mark.parametrize(
    ("line", "plain"),
    [
        ("        1024   1.5e-3  -2  +4", True),
        ("1 2 3", True),
        ("   ", False),  # no digit
        ("\t1024  3", False),  # a tab: a usage line in oneCCL's usage text
        ("  1024: 3", False),  # an srun label
        ("  1024  nan", False),  # a letter other than e: the long way
        ("  1024  3\x0c", False),  # other white space
        ("  1\u0661", False),  # a digit that is not ASCII
        ("# 1 2", False),
    ],
)
def test_plain_row_lines(line: str, plain: bool) -> None:
    assert bool(PLAIN_ROW.match(line)) is plain


@pytest.mark.parametrize("path", INTEL_LOGS, ids=lambda p: p.name)
def test_every_intel_log_parses_identically_the_long_way(path: Path) -> None:
    data = path.read_bytes()
    fast = outcome(data)
    with without_fast_paths():
        slow = outcome(data)
    assert fast == slow


# Lines put into a real log's table: rows with odd values, and lines that look like
# rows but are other things for the parsers.
_ODD_LINES = (
    "        1024         256            10       1.5       2.5       2.0       0.1",
    "           8            2            10      -4.0       5.0       4.5       6.3",
    "          16            4            10       nan       5.0       4.5       6.3",
    "        1024  9999999999999999999     10       1.0       1.0       1.0       1.0",
    "           4            1",
    "  12: 4 1 10 1.0 2.0 3.0 0.5",
    "\t1 2 3",
    "            0         1000         1.50         1.50",
    "         1024         1000      \u0661.50         1.50",
    "     1 2 3 4 5 6 7 8 9 10 11 12",
)


@pytest.mark.slow
@given(
    st.sampled_from(INTEL_LOGS),
    st.data(),
)
def test_intel_logs_with_odd_rows_parse_identically_the_long_way(
    path: Path, data: st.DataObject
) -> None:
    lines = path.read_text(errors="replace").splitlines(keepends=True)
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(lines)))
        lines.insert(at, data.draw(st.sampled_from(_ODD_LINES)) + "\n")
    if data.draw(st.booleans()):  # the last line without its newline
        lines[-1] = lines[-1].rstrip("\n")
    text = "".join(lines)
    fast = outcome(text)
    with without_fast_paths():
        slow = outcome(text)
    assert fast == slow


def test_the_fast_paths_are_taken_on_real_logs() -> None:
    """Most rows of the real logs go the short way (a fast path that refused every
    line would pass the identity tests)."""
    calls: list[bool] = []

    def counted(*args: Any) -> dict[str, Any] | None:
        values = plain_table_row(*args)
        calls.append(values is not None)
        return values

    with (
        mock.patch.object(_table_row, "plain_table_row", counted),
    ):
        for path in INTEL_LOGS:
            outcome(path.read_bytes())
    assert len(calls) > 1000
    assert sum(calls) / len(calls) > 0.95


_RAW = st.text(
    alphabet=st.sampled_from(list(" [0123456789:-T.,<>stdoutr\r\n\x0bab\u0661")),
    max_size=40,
)


@given(st.lists(_RAW.filter(bool), max_size=5))
@example(["  12: x\n", "[0] y\n", " \r z\n", "2024-01-02T03:04:05 a\n", "a\r\n"])
def test_numbered_gives_the_lines_as_line_gives(raws: list[str]) -> None:
    assert list(_lines.numbered(raws, 3)) == [
        _lines.as_line(n, raw) for n, raw in enumerate(raws, start=3)
    ]
