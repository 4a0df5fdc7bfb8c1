"""Rows of the Intel benchmarks' whitespace tables (oneCCL, IMB) by schema column."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ._lines import Line
from ._model import Run
from ._nccl_layout import POSSIBLE_COLUMNS, table_row_problem

INT_COLUMNS = frozenset({"reported_bytes", "count", "repetitions"})
NUMBER = re.compile(r"^-?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)$")
# A line of ASCII digits, blanks and the other characters of a plain number: only
# ever a table row (each pattern the Intel parsers try before a row's needs a letter
# other than e or E, or one of `#:|({=[`).
PLAIN_ROW = re.compile(r"[ ]*[0-9][0-9 .eE+\-]*\Z", re.ASCII)
_INFINITY = float("inf")


def table_row_values(
    run: Run,
    line: Line,
    tokens: list[str],
    headers: list[str],
    columns: Mapping[str, str],
) -> dict[str, Any] | None:
    """The row's values keyed by schema column, or None after warning why not (the
    reader of both Intel tools' tables): a row with nothing to warn about in one
    pass (plain_table_row), any other first checked for values no measurement has
    (table_row_problem), then read by read_table_row, which names the rest."""
    if line.complete:
        values = plain_table_row(tokens, headers, columns)
        if values is not None:
            return values
        problem = table_row_problem(tokens, headers, columns)
        if problem is not None and all(t.isascii() for t in tokens):
            run.refuse(line.number, problem, line.text)
            return None
        if problem is not None:  # other digits: no number, so no impossible value
            run.warn(line.number, f"{problem}: row not read")
            return None
    return read_table_row(run, line, tokens, headers, columns)


def plain_table_row(
    tokens: list[str], headers: list[str], columns: Mapping[str, str]
) -> dict[str, Any] | None:
    """The values of a row with nothing to warn about, as read_table_row reads them;
    None for any other row (table_row_problem and read_table_row say what is wrong).

    One pass and one conversion per token: the rows of healthy runs are most of the
    Intel tools' lines. The line must be complete (read_table_row's first test).
    """
    if len(tokens) != len(headers):
        return None
    values: dict[str, Any] = {}
    for label, token in zip(headers, tokens, strict=True):
        column = columns.get(label)
        if column in INT_COLUMNS:
            if not (token.isascii() and token.isdigit() and len(token) <= 18):
                return None
            values[column] = int(token)
            continue
        if not token.isascii() or NUMBER.match(token) is None:
            return None
        if column is not None:
            value = float(token)
            # As impossible() judges: NaN fails both comparisons.
            if column in POSSIBLE_COLUMNS and not (0 <= value < _INFINITY):
                return None
            values[column] = value
    return values


def read_table_row(
    run: Run,
    line: Line,
    tokens: list[str],
    headers: list[str],
    columns: Mapping[str, str],
) -> dict[str, Any] | None:
    """The row's values keyed by schema column, or None after warning why not.

    ``headers`` are the table's column labels in order; ``columns`` maps the labels
    that are read to schema columns. Counts must be plain integers within int64; a last
    line cut off by the end of input is never read.
    """
    number = line.number
    if not line.complete:
        run.warn(number, "partial last line (no newline): row not read")
        return None
    if len(tokens) != len(headers) or not all(map(NUMBER.match, tokens)):
        run.warn(
            number,
            f"expected {len(headers)} columns, found {len(tokens)}: row not read",
        )
        return None
    values: dict[str, Any] = {}
    for name, token in zip(headers, tokens, strict=True):
        column = columns.get(name)
        if column in INT_COLUMNS and not (token.isdigit() and len(token) <= 18):
            run.warn(number, f"{name} {token[:24]!r} is not a count: row not read")
            return None
        if column is not None:
            values[column] = int(token) if column in INT_COLUMNS else float(token)
    return values
