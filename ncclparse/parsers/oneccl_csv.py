"""The CSV file oneCCL ``benchmark -o <path>`` writes (8, 13, 14 or 16 columns).

Columns are read by header name. Sizes follow the stdout table so that a log and
its CSV give the same measurements: ``reported_bytes`` = ``#elements/buffer`` x
dtype size x ``#buffers`` (stdout ``#bytes``) and ``count`` = elements x buffers.
From 2021.3 on, one stdout row of a group (``-l a,b``) is written as one CSV row per
collective, all with the group's summed times: those rows are read back as the one
``grouped`` row they are. The 8-column files of 2021.1-2021.2 hold each collective's
own time and give one row per collective. The CSV has no footer: a run is
``complete`` unless its last line is cut off.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from ncclparse.schema import DTYPE_BYTES

from ._lines import Line
from ._model import Run, parse_at_end
from ._nccl_layout import SHOWN, impossible, is_count, to_float
from ._sizes import REDUCING, oneccl_size_bytes
from .oneccl import COLLECTIVE_NAMES, DTYPE_NAMES, ROOTED, TOOL

NAME = "oneccl-benchmark-csv"
READS_SKIPPED = False  # takes only Line items (see ncclparse.parsers.Parser)

_HEADER_START = "#ranks,collective,"
_FIELDS = {
    "#ranks": "nranks",
    "collective": "collective",
    "reduction": "redop",
    "dtype": "dtype",
    "type": "dtype",
    "dtype_size": "dtype_size",
    "typesize": "dtype_size",
    "#elements/buffer": "elements",
    "#buffers": "buffers",
    "#repetitions": "repetitions",
    "t_min[usec]": "time_min_us",
    "t_max[usec]": "time_max_us",
    "t_avg[usec]": "time_us",
    "time": "time_us",
    "stddev[%]": "stddev_pct",
    "algbw[GB/s]": "algbw_gbps",
    "busbw[GB/s]": "busbw_gbps",
}
_INTS = frozenset({"nranks", "dtype_size", "elements", "buffers", "repetitions"})
# Fields that are the same on every CSV row of one stdout row of a group.
_GROUP_KEY = (
    "nranks",
    "dtype",
    "elements",
    "buffers",
    "repetitions",
    "time_min_us",
    "time_max_us",
    "time_us",
    "stddev_pct",
)


def sniff(head: Sequence[Line]) -> bool:
    """Whether the first non-blank line of ``head`` is the benchmark's CSV header."""
    first = next((ln.text for ln in head if ln.text.strip()), "")
    return first.startswith(_HEADER_START)


def _read(lines: Iterable[Line], source: str) -> tuple[list[Run], Counter[str]]:
    """Parse a oneCCL benchmark CSV file into one run per header line."""
    runs: list[Run] = []
    kinds: Counter[str] = Counter()
    run: Run | None = None
    header: list[str] = []
    group: list[dict[str, Any]] = []  # CSV rows of one stdout row (bounded by -l)
    for line in lines:
        text = line.text.strip()
        if text.startswith(_HEADER_START):
            if run is not None:
                _flush(run, group)
            run = Run(tool=TOOL, first_line=line.number, status="complete")
            runs.append(run)
            header = text.split(",")
        if run is None:  # sniff saw the header first: only blank lines come before it
            kinds["blank"] += 1
            continue
        run.last_line = line.number
        if text.startswith(_HEADER_START):
            kinds["structure"] += 1
            continue
        if not text:
            kinds["blank"] += 1
            continue
        if not line.complete:
            run.warn(line.number, "partial last line (no newline): row not read")
            run.status = "truncated"
            kinds["warned"] += 1
            continue
        values = _values(run, line.number, header, text.split(","))
        if values is None:
            kinds["warned"] += 1
            continue
        kinds["measurement"] += 1
        # From 2021.3 a group's rows repeat the same numbers once per collective in
        # -l order; a repeated name or other numbers start the next stdout row.
        per_collective = "repetitions" not in values
        if group and (
            per_collective
            or values["collective"] in {g["collective"] for g in group}
            or any(values.get(k) != group[0].get(k) for k in _GROUP_KEY)
        ):
            _flush(run, group)
        group.append(values)
    if run is not None:
        _flush(run, group)
    return runs, kinds


def _values(
    run: Run, number: int, header: list[str], fields: list[str]
) -> dict[str, Any] | None:
    if len(fields) != len(header):
        run.warn(number, f"expected {len(header)} fields, found {len(fields)}")
        return None
    values: dict[str, Any] = {"line": number}
    shown: dict[str, str] = {}
    for name, field in zip(header, fields, strict=True):
        key = _FIELDS.get(name)
        if key is None:
            continue
        shown[key] = field
        if key in ("collective", "redop", "dtype"):
            values[key] = field
        elif key in _INTS and is_count(field):  # ASCII, within int64
            values[key] = int(field)
        elif key in _INTS:
            run.warn(number, f"{name} {field[:SHOWN]!r} is not a count: row not read")
            return None
        else:
            try:
                values[key] = to_float(field)
            except ValueError:
                why = f"{name} {field[:SHOWN]!r} is not a number"
                run.warn(number, f"{why}: row not read")
                return None
    if "time_us" not in values:  # a header without `t_avg[usec]`/`time`
        run.warn(number, "table without a time column: row not read")
        return None
    reason = impossible(values, shown)
    if reason is not None:
        run.refuse(number, reason, ",".join(fields))
        return None
    return values


def _flush(run: Run, group: list[dict[str, Any]]) -> None:
    """Turn the CSV rows of one stdout row into one measurement row."""
    if not group:
        return
    first = group[0]
    names = [COLLECTIVE_NAMES.get(g["collective"], g["collective"]) for g in group]
    for name in names:
        run.add_collective(name)
    grouped = len(group) > 1
    collective = None if grouped else names[0]
    run.nranks = first.get("nranks", run.nranks)
    nranks = run.nranks or 1
    dtype = DTYPE_NAMES.get(first.get("dtype", ""), first.get("dtype", ""))
    size = first.get("dtype_size") or DTYPE_BYTES.get(dtype, 1)
    count = first.get("elements", 0) * first.get("buffers", 1)
    reduces = any(name in REDUCING for name in names)
    redop = next((g["redop"] for g in group if g.get("redop")), None)
    row: dict[str, Any] = {
        key: first[key]
        for key in (
            "line",
            "repetitions",
            "time_min_us",
            "time_max_us",
            "time_us",
            "stddev_pct",
            "algbw_gbps",
            "busbw_gbps",
        )
        if key in first
    }
    row.update(
        collective=collective,
        placement="out-of-place",  # the CSV does not record -q
        reported_bytes=count * size,
        size_bytes=oneccl_size_bytes(collective, count * size, nranks),
        count=count,
        dtype=dtype,
        redop=redop if reduces else None,
        root=0 if collective in ROOTED else None,
        grouped=grouped,
    )
    run.add_row(row)
    group.clear()


# The parser contract (ncclparse.parsers.Parser): runs reach emit at the end.
parse = parse_at_end(_read)
