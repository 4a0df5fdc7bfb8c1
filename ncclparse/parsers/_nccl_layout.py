"""nccl-tests table layouts: which token of a data row means what, in every era.

A layout comes from the column-names header line, or, for pasted fragments with no
header, from the first data row itself. Rows are split on whitespace and anchored
from the right (docs/nccl-tests-format.md section 13): the metric columns have fixed
counts, while the key columns before them may hold an empty redop field.

Also what a printed value may be, for every parser: numbers are ASCII (Python's
``int()``/``float()`` and ``\\d`` also take other scripts' digits, fullwidth or
Arabic-Indic ones, which no tool prints), and :func:`impossible` names the values no
measurement can have (a negative time, a NaN bandwidth ...).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Printed type names (all eras, NCCL 1 included) to schema dtypes.
DTYPES = {
    "int8": "int8",
    "char": "int8",
    "uint8": "uint8",
    "int32": "int32",
    "int": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "half": "float16",
    "float16": "float16",
    "float": "float32",
    "float32": "float32",
    "double": "float64",
    "float64": "float64",
    "bfloat16": "bfloat16",
    "f8e4m3": "float8_e4m3",
    "f8e5m2": "float8_e5m2",
}
NOT_A_REDOP = frozenset({"none", ""})

# Header words that start one placement's metric block, and the other names of keys.
_TIME_WORDS = frozenset({"time", "cputime"})
_KEY_NAMES = {
    "size": "size",
    "bytes": "size",
    "count": "count",
    "n": "count",
    "type": "type",
    "redop": "redop",
    "op": "redop",
    "root": "root",
}
_METRIC_NAMES = {
    "time": "time",
    "cputime": "time",
    "algbw": "algbw",
    "busbw": "busbw",
    "#wrong": "wrong",
    "error": "wrong",
    "res": "wrong",
    "i_min": "i_min",
    "i_max": "i_max",
    "i_p99": "i_p99",
    "i_cv%": "i_cv",
}
# E0-E2 `%5.0le` max deviation: 0e+00, 2e-07
_DEVIATION = re.compile(r"^\d+e[+-]\d+\*?$", re.ASCII)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$", re.ASCII)
_INT = re.compile(r"^-?\d+$", re.ASCII)
# A number as C's printf writes one (`%g`, `%f`, `%e`; glibc's `nan`, `-nan`, `inf`).
_FLOAT = re.compile(
    r"^[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|nan|inf(?:inity)?)$",
    re.ASCII | re.IGNORECASE,
)
# How much of a value a message shows.
SHOWN = 24


@dataclass(frozen=True, slots=True)
class Layout:
    """Where the columns of a data row are."""

    keys: tuple[str, ...]  # canonical key names: size, count, type[, redop][, root]
    half: tuple[str, ...]  # canonical metric names of one placement block
    placements: tuple[str, ...]  # the blocks in printed order
    timestamp: bool = False  # -S: date and time tokens after the last block
    time_in_ms: bool = False  # E0 (v1.x) printed milliseconds
    cputime: bool = False  # -C 1
    wrong_kind: str | None = None  # 'count' or 'max_deviation'; None: decide per row

    @property
    def metric_tokens(self) -> int:
        return len(self.half) * len(self.placements) + (2 if self.timestamp else 0)


# The metrics of the native row reader (_scan.c, read_rows: its M_* codes), in its
# order: the name in a layout's half, and the row column it fills.
NATIVE_METRICS = (
    ("time", "time_us"),
    ("algbw", "algbw_gbps"),
    ("busbw", "busbw_gbps"),
    ("wrong", "wrong"),
    ("i_min", "time_min_us"),
    ("i_max", "time_max_us"),
    ("i_p99", "time_p99_us"),
    ("i_cv", "stddev_pct"),
)
_METRIC_CODES = {name: code for code, (name, _) in enumerate(NATIVE_METRICS)}
_MAX_LABELS = 8  # redop/root columns the native reader takes


# A log of many runs reads each of its few layouts thousands of times (once a native
# read): the spec is a pure function of the layout's and the count's values.
@functools.lru_cache(maxsize=256)
def row_spec(layout: Layout, iter_skipped: int | None) -> tuple[Any, ...] | None:
    """``layout`` as the native row reader takes it (``_scan.read_rows``), or None
    for a layout it reads no row of (a timestamp, more than two placement blocks, a
    metric it does not know or twice). ``iter_skipped``: what every block gets as
    its ``iter_skipped`` when the layout has ``i_p99`` (the run's -K). Remembered
    for the last 256 (layout, count) pairs."""
    half = layout.half
    labels = sum(1 for k in layout.keys[3:] if k in ("redop", "root"))
    if (
        layout.timestamp
        or not 1 <= len(layout.placements) <= 2
        or "time" not in half
        or len(set(half)) != len(half)
        or not all(name in _METRIC_CODES for name in half)
        or labels > _MAX_LABELS
    ):
        return None
    return (
        labels,
        tuple(_METRIC_CODES[name] for name in half),
        layout.placements,
        layout.time_in_ms,
        layout.cputime,
        layout.wrong_kind,
        iter_skipped if "i_p99" in half else None,
        DTYPES,
    )


def is_names_line(words: list[str]) -> bool:
    """True for the column-names header line (``size count type ... time algbw``)."""
    lowered = [w.lower() for w in words]
    return (
        len(lowered) >= 5
        and lowered[0] in ("size", "bytes")
        and lowered[1] in ("count", "n")
        and "type" in lowered  # look-alikes such as mscclpp-test have no type column
        and "algbw" in lowered
        and any(w in _TIME_WORDS for w in lowered)
    )


def layout_from_header(
    words: Sequence[str], placements: tuple[str, ...] | None
) -> Layout:
    """Build the layout from the names line's words (``#`` already removed)."""
    lowered = [w.lower() for w in words]
    first_time = next(i for i, w in enumerate(lowered) if w in _TIME_WORDS)
    keys = tuple(_KEY_NAMES.get(w, w) for w in lowered[:first_time])
    rest = lowered[first_time:]
    timestamp = bool(rest) and rest[-1] == "timestamp"
    if timestamp:
        rest = rest[:-1]
    blocks = sum(1 for w in rest if w in _TIME_WORDS)
    half = tuple(_METRIC_NAMES.get(w, w) for w in rest[: len(rest) // max(blocks, 1)])
    if placements is None or len(placements) != blocks:
        placements = ("out-of-place", "in-place")[:blocks] if blocks <= 2 else ()
    wrong_word = next((w for w in rest if _METRIC_NAMES.get(w) == "wrong"), None)
    return Layout(
        keys=keys,
        half=half,
        placements=placements,
        timestamp=timestamp,
        time_in_ms=keys[0:1] == ("size",) and lowered[0] == "bytes",
        cputime="cputime" in rest,
        wrong_kind=None
        if wrong_word is None
        else ("count" if wrong_word == "#wrong" else "max_deviation"),
    )


# Layouts of the header lines already read, by their words and placements. Bounded:
# emptied when full, and a header longer than a real one is not kept.
_LAYOUTS: dict[tuple[tuple[str, ...], tuple[str, ...] | None], Layout] = {}
_LAYOUTS_MAX, _LAYOUT_LONGEST = 256, 1024


def header_layout(words: tuple[str, ...], placements: tuple[str, ...] | None) -> Layout:
    """:func:`layout_from_header`, remembered: a log of many runs repeats its
    header lines (a Layout is immutable, so runs may share one)."""
    key = (words, placements)
    layout = _LAYOUTS.get(key)
    if layout is None:
        layout = layout_from_header(words, placements)
        if sum(map(len, words)) <= _LAYOUT_LONGEST:
            if len(_LAYOUTS) >= _LAYOUTS_MAX:
                _LAYOUTS.clear()
            _LAYOUTS[key] = layout
    return layout


def placements_from_group_line(words: list[str]) -> tuple[str, ...]:
    """The placement blocks named by the group line (``out-of-place ... in-place``)."""
    return tuple(w for w in words if w in ("out-of-place", "in-place"))


def layout_from_row(tokens: list[str]) -> Layout | None:
    """Guess the layout of a headerless fragment from one data row, or None."""
    timestamp = len(tokens) >= 2 and bool(_DATE.match(tokens[-2]))
    body = tokens[:-2] if timestamp else tokens
    metrics = 0
    for token in reversed(body[3:]):
        if not (_is_number(token) or token == "N/A"):
            break
        metrics += 1
    # Metrics come in blocks of 4 (or 8 with -I); one numeric token more is the root.
    if metrics % 4 == 1:
        metrics -= 1
    middle = body[3 : len(body) - metrics]
    half: tuple[str, ...]
    if metrics == 16:
        half = ("time", "algbw", "busbw", "wrong", "i_min", "i_max", "i_p99", "i_cv")
        blocks = 2
    elif metrics in (4, 8):
        half = ("time", "algbw", "busbw", "wrong")
        blocks = metrics // 4
    else:
        return None
    keys = ["size", "count", "type"]
    for token in middle:
        keys.append("root" if _INT.match(token) else "redop")
    return Layout(
        keys=tuple(keys),
        half=half,
        placements=("out-of-place", "in-place")[:blocks],
        timestamp=timestamp,
    )


def _is_number(token: str) -> bool:
    return _FLOAT.match(token.rstrip("*")) is not None


def to_float(token: str) -> float:
    """``float(token)`` for a number as a tool prints it (ASCII, ``nan``, ``inf``).

    Raises ValueError for anything else: non-ASCII digits, ``1_000``, `` 5``,
    ``0x1f``.
    """
    if _FLOAT.match(token) is None:
        raise ValueError(f"not a number: {token[:SHOWN]!r}")
    return float(token)


def is_count(token: str, digits: int = 18) -> bool:
    """True for a plain non-negative integer of ASCII digits (at most ``digits``)."""
    return token.isascii() and token.isdigit() and len(token) <= digits


class RowError(ValueError):
    """A data line that does not fit the layout; the message says why."""


class ImpossibleValue(RowError):
    """A data line holding a value no measurement can have (see :func:`impossible`)."""


# Row columns no measurement can have outside [0, inf) (None: no such value printed,
# except for the time, which every row has), as (name in messages, what it is).
_POSSIBLE = {
    "reported_bytes": ("size", "size"),
    "size_bytes": ("size", "size"),
    "count": ("count", "count"),
    "repetitions": ("repetitions", "count"),
    "time_us": ("time", "time"),
    "algbw_gbps": ("algbw", "bandwidth"),
    "busbw_gbps": ("busbw", "bandwidth"),
}
# The columns impossible() judges.
POSSIBLE_COLUMNS = frozenset(_POSSIBLE)


def impossible(
    values: Mapping[str, Any], shown: Mapping[str, str] | None = None
) -> str | None:
    """Why a row's values cannot be a measurement, or None when they can be.

    ``values`` are keyed by schema column. A time that is missing, negative, infinite
    or NaN, a printed algbw/busbw that is negative, infinite or NaN, and a negative
    size, count or repetition count are impossible; zero is possible (nccl-tests
    prints `0.00` bandwidths for small sizes). The reason names the first such value,
    as ``shown`` has it (the printed token) or else as Python writes it::

        time -5.3 is not a possible time
    """
    for column, (name, kind) in _POSSIBLE.items():
        if column not in values:
            continue
        value = values[column]
        if value is None:
            bad = kind == "time"
        elif isinstance(value, float):
            bad = not (math.isfinite(value) and value >= 0)
        else:
            bad = value < 0
        if bad:
            text = (shown or {}).get(column) or _written(value)
            return f"{name} {text[:SHOWN]} is not a possible {kind}"
    return None


def _written(value: Any) -> str:
    return "null" if value is None else str(value)


def table_row_problem(
    tokens: list[str], headers: list[str], columns: Mapping[str, str]
) -> str | None:
    """Why a row of an Intel tool's whitespace table (IMB, oneCCL) is not a
    measurement, found before it is read: a token that is not ASCII (int() and
    float() would take other digits), or a value :func:`impossible` names.

    ``headers`` are the table's labels, ``columns`` maps labels to schema columns.
    None also when the row has another problem (the table reader names it).
    """
    if len(tokens) != len(headers):
        return None
    values: dict[str, float] = {}
    shown: dict[str, str] = {}
    for label, token in zip(headers, tokens, strict=True):
        if not token.isascii():
            return f"{label} {token[:SHOWN]!r} is not a number"
        column = columns.get(label)
        if column in _POSSIBLE and _FLOAT.match(token):
            values[column], shown[column] = float(token), token
    return impossible(values, shown)


def read_row(
    tokens: list[str], layout: Layout
) -> tuple[dict[str, Any], list[dict[str, Any] | None]]:
    """Split one data row into its key values and one metric dict per printed block.

    Returns (keys, blocks); a block is None-valued where the row printed ``N/A``.
    Raises RowError when the tokens do not fit the layout.
    """
    metric_count = layout.metric_tokens
    if len(tokens) < 3 + metric_count:
        raise RowError(
            f"expected at least {3 + metric_count} fields, found {len(tokens)}"
        )
    key_tokens = tokens[: len(tokens) - metric_count]
    metric_tokens = tokens[len(tokens) - metric_count :]
    keys = _read_keys(key_tokens, layout)
    stamp = None
    if layout.timestamp:
        stamp = " ".join(metric_tokens[-2:])
        metric_tokens = metric_tokens[:-2]
    width = len(layout.half)
    blocks = []
    for index in range(len(layout.placements)):
        values = metric_tokens[index * width : (index + 1) * width]
        blocks.append(_read_block(values, layout, stamp))
    return keys, blocks


def _read_keys(tokens: list[str], layout: Layout) -> dict[str, Any]:
    size, count, type_name, *middle = tokens
    if not (_INT.match(size) and _INT.match(count)):
        raise RowError(
            f"size and count must be integers, found {size[:SHOWN]!r} {count[:SHOWN]!r}"
        )
    # Longer than int64 can be: not converted (int() of 5000 digits raises).
    if (
        len(size.lstrip("-").lstrip("0")) > 19
        or len(count.lstrip("-").lstrip("0")) > 19
    ):
        raise RowError(f"size or count out of range: {size[:24]} {count[:24]}")
    keys: dict[str, Any] = {"size_bytes": int(size), "count": int(count)}
    if keys["size_bytes"] < 0 or keys["count"] < 0:  # else impossible() finds none
        reason = impossible(keys, {"size_bytes": size, "count": count})
        if reason is not None:
            raise ImpossibleValue(reason)
    if not (keys["size_bytes"] < 2**63 and keys["count"] < 2**63):
        raise RowError(f"size or count out of range: {size[:24]} {count[:24]}")
    dtype = DTYPES.get(type_name)
    if dtype is None:
        raise RowError(f"unknown data type {type_name!r}")
    keys["dtype"] = dtype
    labels = [k for k in layout.keys[3:] if k in ("redop", "root")]
    if len(middle) > len(labels):
        raise RowError(
            f"expected {len(layout.keys) + layout.metric_tokens} fields, "
            f"found {len(tokens) + layout.metric_tokens}"
        )
    keys["redop"] = None
    keys["root"] = None
    # Fewer tokens than labels: an empty field (E3 non-reducing redop, E1 alltoall,
    # hypercube). Numbers can only be roots, words only redops.
    for token in middle:
        if _INT.match(token):
            if len(token) > 11 or not -(2**31) <= int(token) < 2**31:
                raise RowError(f"root out of range: {token[:20]}")
            root = int(token)
            keys["root"] = root if root >= 0 else None
        else:
            keys["redop"] = None if token in NOT_A_REDOP else token
    return keys


def _read_block(
    values: list[str], layout: Layout, stamp: str | None
) -> dict[str, Any] | None:
    named = dict(zip(layout.half, values, strict=True))
    algbw, busbw = named.get("algbw"), named.get("busbw")
    if named.get("time") == "N/A" and algbw == "N/A" and busbw == "N/A":
        return None
    block: dict[str, Any] = {}
    try:
        time = to_float(named["time"])
        block["time_us"] = time * 1000.0 if layout.time_in_ms else time
        block["algbw_gbps"] = _number(algbw)
        block["busbw_gbps"] = _number(busbw)
        wrong = named.get("wrong")
        block["wrong"] = _number(wrong.rstrip("*")) if wrong is not None else None
        block["time_min_us"] = _number(named.get("i_min"))
        block["time_max_us"] = _number(named.get("i_max"))
        block["time_p99_us"] = _number(named.get("i_p99"))
        block["stddev_pct"] = _number(named.get("i_cv"))
    except ValueError as exc:
        raise RowError(str(exc)) from exc
    if not _possible(block["time_us"], block["algbw_gbps"], block["busbw_gbps"]):
        shown = {"time_us": named["time"]}
        shown.update({f"{k}_gbps": named[k] for k in ("algbw", "busbw") if k in named})
        reason = impossible(block, shown)
        if reason is not None:
            raise ImpossibleValue(reason)
    kind = layout.wrong_kind
    if kind is None and wrong is not None and wrong != "N/A":
        kind = "max_deviation" if _DEVIATION.match(wrong) else "count"
    block["wrong_kind"] = kind
    block["over_tolerance"] = wrong is not None and wrong.endswith("*")
    block["cputime"] = layout.cputime
    block["timestamp"] = stamp
    return block


def _possible(time: float, algbw: float | None, busbw: float | None) -> bool:
    """Whether :func:`impossible` finds nothing in a block's values: the time and
    any bandwidth finite and not negative (most rows; it is asked only otherwise)."""
    return (
        math.isfinite(time)
        and time >= 0
        and (algbw is None or (math.isfinite(algbw) and algbw >= 0))
        and (busbw is None or (math.isfinite(busbw) and busbw >= 0))
    )


def _number(token: str | None) -> float | None:
    if token is None or token == "N/A":
        return None
    return to_float(token)
