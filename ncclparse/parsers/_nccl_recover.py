"""What the nccl-tests parser recovers from damaged text, and how it decides.

* Decoration in front of every line that no tool prints: Markdown/reST list bullets
  (``- ``, ``* ``) and reST line blocks (``| ``) -- see
  :func:`undecorate`.
* Text after the last value of a complete row (``... 0 | |`` of a scraped table) --
  see :func:`split_trailing`.
* A last line without a newline: kept as a row unless it is provably incomplete --
  see :func:`cut_row_doubt` (docs/nccl-tests-format.md section 14).
"""

from __future__ import annotations

import re
from typing import Any

from ._nccl_layout import Layout, layout_from_row, to_float

# A list bullet or a line-block bar followed by a blank, before the tool's text (`#`,
# a digit, a word of the preamble). Left alone: `+ ` (the shell's `set -x`) and `> `
# (its continuation prompt: known noise, see _noise.py).
_DECORATION = re.compile(r"^[ \t]*(?P<mark>[-*|])[ \t]+(?=\S)", re.ASCII)
_CLOCK = re.compile(r"^\d{2}:\d{2}:\d{2}$", re.ASCII)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$", re.ASCII)
# `%5.0le` max deviation (E0-E2): one digit, `e`, sign, two digits.
_DEVIATION = re.compile(r"^\d+e[+-]\d{2}\*?$", re.ASCII)
SHOWN = 24


def undecorate(text: str) -> tuple[str, str | None]:
    """Remove one leading list/quote/line-block mark; return the text and the mark.

    ``- 8 2 float`` and ``| # nThread`` lose their mark; ``-1`` (a number) and
    ``--`` do not match (the mark must be followed by a blank).
    """
    match = _DECORATION.match(text)
    if match is None:
        return text, None
    return text[match.end() :], match.group("mark")


def from_markdown_table(text: str) -> str:
    """``| 8 | 2 | float |`` pasted as a Markdown table back to whitespace columns."""
    cells = [c.strip().replace("\\#", "#") for c in text.strip().strip("|").split("|")]
    if all(set(c) <= set("-: ") for c in cells):
        return ""
    return "  ".join(c if c else "" for c in cells)


def undecorate_line(text: str) -> tuple[str, str | None]:
    """A line as the tool printed it: a Markdown table row (several ``|``) back to
    columns, else one leading decoration mark removed (:func:`undecorate`)."""
    if text[:1] == "#":  # the tool's own lines: no table row, no mark before `#`
        return text, None
    if text.lstrip().startswith("|"):
        if text.count("|") > 1:
            return from_markdown_table(text), None
        if not text.strip("| \t"):  # an empty line of a line block
            return "", None
    return undecorate(text)


def _is_value(token: str) -> bool:
    if token == "N/A" or _CLOCK.match(token) or _DATE.match(token):
        return True
    try:
        to_float(token.rstrip("*"))
    except ValueError:
        return False
    return True


def split_trailing(
    tokens: list[str], layout: Layout | None
) -> tuple[list[str], list[str]]:
    """Split a data row into its values and trailing decoration that is no number.

    Only when what is left is still a whole row of the layout (or, without a layout,
    a row whose layout can be recognised): a row cut short keeps its last word.
    """
    end = len(tokens)
    while end > 3 and not _is_value(tokens[end - 1]):
        end -= 1
    if end == len(tokens):
        return tokens, []
    kept = tokens[:end]
    if layout is not None:
        whole = len(kept) >= 3 + layout.metric_tokens
    else:
        whole = layout_from_row(kept) is not None
    return (kept, tokens[end:]) if whole else (tokens, [])


def shown(tokens: list[str]) -> str:
    text = " ".join(tokens)
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "...")


# Which block value the last printed token of a row is, by metric name.
_LAST_VALUE = {"wrong": "wrong", "i_cv": "stddev_pct"}


def cut_row_doubt(
    tokens: list[str],
    layout: Layout,
    keys: dict[str, Any],
    blocks: list[dict[str, Any] | None],
) -> tuple[str | None, str | None]:
    """Is a last line without a newline, read as ``keys`` and ``blocks``, provably
    incomplete? (The caller first compares its field count with the rows before.)

    Returns (why it is cut, None) when it is: a time that does not give the
    printed algbw (fields shifted by a missing one),
    or a busbw above twice the algbw (no collective's factor is). Otherwise
    (None, uncertain): ``uncertain`` names the block value read from the last token
    when that token may itself be cut (a non-zero `#wrong` count, an `i_cv%`); the
    caller sets it to null. Only the last token can be cut: the others are whole.
    """
    metrics = tokens[len(tokens) - layout.metric_tokens :]
    width = len(layout.half)
    size = keys["size_bytes"]
    for index, block in enumerate(blocks):
        if block is None:
            continue
        values = metrics[index * width : (index + 1) * width]
        named = dict(zip(layout.half, values, strict=True))
        algbw, busbw = block.get("algbw_gbps"), block.get("busbw_gbps")
        if algbw is not None and busbw is not None and busbw > 2 * algbw + 0.01:
            return f"busbw {busbw} is more than twice algbw {algbw}", None
        time_token = named["time"]
        if algbw is None or "e" in time_token.lower():
            continue
        decimals = len(time_token.partition(".")[2])
        half_unit = 0.5 * 10.0**-decimals * (1000.0 if layout.time_in_ms else 1.0)
        time = block["time_us"]
        low_time, high_time = time - half_unit, time + half_unit
        high = size / (low_time * 1e3) if low_time > 0 else float("inf")
        low = size / (high_time * 1e3)
        if not low - 0.0051 <= algbw <= high + 0.0051:
            return (
                f"algbw {algbw} does not follow from size {size} and time {time_token}",
                None,
            )
    if layout.timestamp:
        last = tokens[-1]
        return (None, None) if _CLOCK.match(last) else ("timestamp cut", None)
    name = layout.half[-1]
    last = tokens[-1]
    if last == "N/A" or last.endswith("*"):
        return None, None
    if name == "wrong" and (last == "0" or _DEVIATION.match(last)):
        return None, None
    column = _LAST_VALUE.get(name)
    if column is None:
        return f"its last value {last!r} may be cut", None
    return None, column
