"""Human formatting of numbers: sizes, times, bandwidths, percentages.

Used as Jinja filters by the report and by plot tick labels. Every function accepts
``None`` and NaN (a missing value) and returns :data:`MISSING` for them, so templates
never branch on nulls. Sizes are binary (KiB = 1024 B), as nccl-tests steps sizes by
powers of two; bandwidths are decimal (GB = 1e9 B), as nccl-tests prints them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MISSING",
    "format_bytes",
    "format_count",
    "format_gbps",
    "format_percent",
    "format_threshold",
    "format_time_us",
    "markdown_escape",
    "series_label",
    "shown_name",
]

MISSING = "\u2013"  # en dash: reads as "no value", unlike 0 or a blank cell

_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
# Characters with a meaning in CommonMark or in a GitHub table cell.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|&~])")


def _missing(value: object) -> bool:
    # ``object``, not ``float | None``: ints reach here too (mypy treats int as float).
    return value is None or (isinstance(value, float) and math.isnan(value))


def _trim(value: float, digits: int) -> str:
    """``value`` with at most ``digits`` significant digits, no trailing zeros."""
    text = f"{value:.{digits}g}"
    if "e" not in text:
        return text
    return f"{value:.0f}" if abs(value) >= 1 else f"{value:.2g}"


def format_bytes(size: float | None) -> str:
    """Return a byte count in binary units: 8 -> "8 B", 2**33 -> "8 GiB".

    Three significant digits (1536 -> "1.5 KiB"), four from 1000 up (1000 KiB stays
    "1000 KiB" rather than "0.977 MiB").
    """
    if _missing(size):
        return MISSING
    assert size is not None
    value, unit = float(size), 0
    while abs(value) >= 1024 and unit < len(_BINARY_UNITS) - 1:
        value /= 1024
        unit += 1
    digits = 4 if abs(value) >= 1000 else 3
    return f"{_trim(value, digits)} {_BINARY_UNITS[unit]}"


def format_time_us(time_us: float | None) -> str:
    """Return a time given in microseconds: "420 ns", "136 µs", "47.5 ms", "2.31 s"."""
    if _missing(time_us):
        return MISSING
    assert time_us is not None
    magnitude = abs(time_us)
    if magnitude >= 1e6:
        return f"{_trim(time_us / 1e6, 3)} s"
    if magnitude >= 1e3:
        return f"{_trim(time_us / 1e3, 3)} ms"
    if magnitude >= 100:
        return f"{time_us:.0f} µs"
    if 0 < magnitude < 1:
        return f"{_trim(time_us * 1e3, 3)} ns"
    return f"{_trim(time_us, 3)} µs"


def format_gbps(gbps: float | None) -> str:
    """Return a bandwidth in GB/s (1e9 B/s): "338.8 GB/s", "2.94 GB/s", "0.0001 GB/s".

    Missing values give :data:`MISSING`.
    """
    if _missing(gbps):
        return MISSING
    assert gbps is not None
    if gbps == 0:
        return "0 GB/s"
    if abs(gbps) >= 100:
        return f"{gbps:.1f} GB/s"
    if abs(gbps) >= 0.01:
        return f"{_trim(gbps, 3)} GB/s"
    return f"{gbps:.2g} GB/s"


def format_percent(fraction: float | None, digits: int = 1) -> str:
    """Return a fraction as a percentage: 0.7028 -> "70.3 %", 0.0004 -> "<0.1 %"."""
    if _missing(fraction):
        return MISSING
    assert fraction is not None
    pct = fraction * 100
    floor = 10.0**-digits
    if 0 < pct < floor:
        return f"<{floor:.{digits}f} %"
    return f"{pct:.{digits}f} %"


def format_threshold(fraction: float) -> str:
    """A threshold as every command prints it: percent, no space before "%" and no
    more decimals than it has ("5%", "2.5%"), as ``--threshold 5%`` takes it."""
    return f"{fraction * 100:.6g}%"


def format_count(value: float | None) -> str:
    """Return a count with thousands separators: 1234567 -> "1,234,567"."""
    if _missing(value):
        return MISSING
    assert value is not None
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:g}"


def markdown_escape(value: object) -> str:
    """Text from a log made safe for Markdown (and a table cell): one line, control
    characters as escapes (:func:`shown_name`), CommonMark punctuation and ``|``
    backslashed, so ``<script>`` stays literal text."""
    text = shown_name(" ".join(str(value).split()))
    return _MD_SPECIAL.sub(r"\\\1", text)


# Control characters a name may hold, as a reader types them.
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def shown_name(name: object) -> str:
    """A name from the file system (a log's path) made safe to print on one line of
    any output: control and other unprintable characters as escapes (``\\n``,
    ``\\x07``, ``\\u202e``), and the bytes of a name that is not UTF-8 (decoded
    with ``surrogateescape``, as Python gives them) as ``\\xff``, so the file can
    still be identified. A printable name is returned as it is."""
    text = str(name)
    if text.isprintable():
        return text
    return "".join(_escaped(c) for c in text)


def _escaped(char: str) -> str:
    if char.isprintable():
        return char
    code = ord(char)
    if char in _ESCAPES:
        return _ESCAPES[char]
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def series_label(key: Mapping[str, Any]) -> str:
    """A series or block in words, the same everywhere: ``"all_reduce float sum
    out-of-place 16 ranks on 2 nodes root 0"``.

    ``key`` maps key names (``schema.SERIES_KEYS``) to values; missing ones (None,
    "", NaN) and keys it lacks are left out. A null collective reads "unknown".
    """

    def given(name: str) -> str | None:
        value = key.get(name)
        if value is None or value == "" or _missing(value):
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return str(value)

    words = [given("collective") or "unknown"]
    words += [w for w in (given(k) for k in ("dtype", "redop", "placement")) if w]
    ranks, nodes, root = given("nranks"), given("nnodes"), given("root")
    if ranks:
        words.append(f"{ranks} ranks")
    if nodes:
        words.append(f"on {nodes} node{'s' * (nodes != '1')}")
    if root:
        words.append(f"root {root}")
    return " ".join(words)
