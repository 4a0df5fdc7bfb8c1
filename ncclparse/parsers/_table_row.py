"""Rows of the Intel benchmarks' whitespace tables (oneCCL, IMB) by schema column."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ._lines import Line
from ._model import Run

INT_COLUMNS = frozenset({"reported_bytes", "count", "repetitions"})
NUMBER = re.compile(r"^-?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)$")


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
