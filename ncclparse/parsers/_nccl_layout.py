"""nccl-tests table layouts: which token of a data row means what, in every era.

A layout comes from the column-names header line, or, for pasted fragments with no
header, from the first data row itself. Rows are split on whitespace and anchored
from the right (docs/nccl-tests-format.md section 13): the metric columns have fixed
counts, while the key columns before them may hold an empty redop field.
"""

from __future__ import annotations

import re
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
_DEVIATION = re.compile(
    r"^\d+e[+-]\d+\*?$"
)  # E0-E2 `%5.0le` max deviation: 0e+00, 2e-07
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_INT = re.compile(r"^-?\d+$")


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


def layout_from_header(words: list[str], placements: tuple[str, ...] | None) -> Layout:
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
    try:
        float(token.rstrip("*"))
    except ValueError:
        return False
    return True


class RowError(ValueError):
    """A data line that does not fit the layout; the message says why."""


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
    try:
        keys: dict[str, Any] = {"size_bytes": int(size), "count": int(count)}
    except ValueError as exc:
        raise RowError(
            f"size and count must be integers, found {size!r} {count!r}"
        ) from exc
    if not (0 <= keys["size_bytes"] < 2**63 and 0 <= keys["count"] < 2**63):
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
    if all(named.get(k) == "N/A" for k in ("time", "algbw", "busbw")):
        return None
    block: dict[str, Any] = {}
    try:
        time = float(named["time"])
        block["time_us"] = time * 1000.0 if layout.time_in_ms else time
        block["algbw_gbps"] = _number(named.get("algbw"))
        block["busbw_gbps"] = _number(named.get("busbw"))
        wrong = named.get("wrong")
        block["wrong"] = _number(wrong.rstrip("*")) if wrong is not None else None
        block["time_min_us"] = _number(named.get("i_min"))
        block["time_max_us"] = _number(named.get("i_max"))
        block["time_p99_us"] = _number(named.get("i_p99"))
        block["stddev_pct"] = _number(named.get("i_cv"))
    except ValueError as exc:
        raise RowError(f"not a number: {exc.args[0].split(': ')[-1]}") from exc
    kind = layout.wrong_kind
    if kind is None and wrong is not None and wrong != "N/A":
        kind = "max_deviation" if _DEVIATION.match(wrong) else "count"
    block["wrong_kind"] = kind
    block["over_tolerance"] = wrong is not None and wrong.endswith("*")
    block["cputime"] = layout.cputime
    block["timestamp"] = stamp
    return block


def _number(token: str | None) -> float | None:
    if token is None or token == "N/A":
        return None
    return float(token)
