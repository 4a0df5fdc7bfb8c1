"""nccl-tests ``-J file.json`` output, v2.17.3+ (docs/nccl-tests-format.md section 11).

The writer (src/util.cu) prints the JSON with ``fprintf`` and no newline, so a file
from the tool is one line and all its rows have ``line`` 1; in a pretty-printed file
a row's line is where its result object starts. Writer quirks handled here: string
booleans, ``"nan"``, the padded root ``"    -1"``, ``nwrong`` null when unchecked,
``average_bus_bandwidith``/``bandwidith`` (v2.17.3-2.17.8), ``errors`` holding
``ncclGetLastError()`` (normally ``""``) and ``config.devices`` listing one entry per
*process*. A run that dies leaves the file unterminated (before v2.18.5: the finished
result objects are kept) or, since v2.18.5, closed early without the footer.

Any member may hold any JSON value in a corrupt or hostile file: each is checked for
the type the writer gives it, counts are bounded (:data:`MAX_RANKS`) before anything
is allocated by them, and what does not fit is named in the run's warnings.
"""

from __future__ import annotations

import json
import math
import re
import reprlib
import shlex
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._lines import Line
from ._model import Run, parse_at_end
from ._nccl_infer import infer_collective, infer_ranks, names_in
from ._nccl_layout import (
    DTYPES,
    NOT_A_REDOP,
    SHOWN,
    ImpossibleValue,
    impossible,
    to_float,
)
from ._nccl_lines import BINARY_NAMES, nccl_code

NAME = "nccl-tests-json"
READS_SKIPPED = False  # takes only Line items (see ncclparse.parsers.Parser)

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*", re.ASCII)  # JSON's whitespace (RFC 8259) only
_KEYS = re.compile(
    r'"(?:nccl_version|results|config|average_bus_bandwidi?th)"\s*:', re.ASCII
)
_BINARY = re.compile(r"^(?P<name>[a-z_]+?)_perf", re.ASCII)
# The writer's root: `"%6i"`, so `"    -1"`; as a JSON number in hand-made files.
_ROOT = re.compile(r"^ *-?[0-9]{1,11}$", re.ASCII)
# At most this many ranks (nthreads x ngpus x processes): a bigger count is warned,
# not used to fill per-rank lists (docs/robustness.md).
MAX_RANKS = 1 << 20
# NCCL_VERSION_CODE below 10^9, as the text parser reads `nccl-library=`.
_MAX_CODE = 10**9
_PLACEMENTS = (("out_of_place", "out-of-place"), ("in_place", "in-place"))
_BODY = {"algbw_gbps": "alg_bw", "busbw_gbps": "bus_bw", "wrong": "nwrong"}
# -I 1: i_min, i_max, i_p99 and i_cv% of the text table.
_PER_ITER = {
    "time_min_us": "min_us",
    "time_max_us": "max_us",
    "time_p99_us": "p99_us",
    "stddev_pct": "cv_pct",
}
# -I 1 statistics only the JSON states (the text table prints the four above).
_PER_ITER_ONLY = {
    "time_avg_us": "avg_us",
    "time_p50_us": "p50_us",
    "time_p95_us": "p95_us",
    "time_stddev_us": "stdev_us",
}


def sniff(head: Sequence[Line]) -> bool:
    """True when the head is a JSON object holding nccl-tests' top-level keys."""
    texts = [ln.text for ln in head if ln.text.strip()]
    starts = bool(texts) and texts[0].lstrip().startswith("{")
    return starts and any(_KEYS.search(t) for t in texts)


@dataclass
class _Object:
    """One top-level object as far as it could be read (offsets into the text)."""

    start: int
    members: dict[str, Any] = field(default_factory=dict)
    where: dict[str, int] = field(default_factory=dict)  # member -> value offset
    results: list[tuple[int, int, Any]] = field(default_factory=list)
    end: int | None = None  # after the closing brace; None: not closed
    cut: int | None = None  # where reading stopped early
    pending: int = 0  # start of the value being read when it stopped
    problem: str = ""


def _skip(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _read_object(text: str, pos: int) -> _Object:
    """Read the object at ``pos`` member by member, keeping what precedes a cut.

    ``results`` is read one element at a time, so every result object finished
    before an unterminated end (or a corrupt byte) is kept with its offsets.
    """
    obj = _Object(start=pos, pending=pos)
    pos += 1
    try:
        while True:
            pos = obj.pending = _skip(text, pos)
            if pos >= len(text):
                obj.cut = pos
                return obj
            if text[pos] in "},":
                if text[pos] == "}":
                    obj.end = pos + 1
                    return obj
                pos += 1
                continue
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _skip(text, pos)
            if not isinstance(key, str) or not text.startswith(":", pos):
                raise json.JSONDecodeError("expected a key and ':'", text, pos)
            pos = obj.pending = obj.where[key] = _skip(text, pos + 1)
            if key != "results" or not text.startswith("[", pos):
                obj.members[key], pos = _DECODER.raw_decode(text, pos)
                continue
            pos = _skip(text, pos + 1)
            while not text.startswith("]", pos):
                if pos >= len(text):
                    obj.pending = pos
                    raise json.JSONDecodeError("unterminated results", text, pos)
                if text[pos] != ",":
                    obj.pending = pos
                    value, end = _DECODER.raw_decode(text, pos)
                    obj.results.append((pos, end, value))
                    pos = end - 1
                pos = _skip(text, pos + 1)
            pos += 1
    except json.JSONDecodeError as exc:
        obj.cut, obj.problem = exc.pos, exc.msg
        return obj
    except ValueError as exc:  # an integer beyond Python's digit limit, not JSON's
        obj.cut, obj.problem = obj.pending, str(exc)
        return obj
    except RecursionError:  # arrays or objects nested deeper than the decoder goes
        obj.cut, obj.problem = obj.pending, "values nested too deeply"
        return obj


class _Reader:
    """Turns the joined text into runs and the line accounting."""

    def __init__(self, lines: Iterable[Line], source: str) -> None:
        self.source = source
        texts: list[str] = []
        self.numbers: list[int] = []
        self.kinds: dict[int, str] = {}
        for ln in lines:
            texts.append(ln.text)
            self.numbers.append(ln.number)
            self.kinds[ln.number] = "structure" if ln.text.strip() else "blank"
        self.starts = [0]
        for text in texts[:-1]:
            self.starts.append(self.starts[-1] + len(text) + 1)
        self.text = "\n".join(texts)
        self.last = len(self.text.rstrip()) - 1  # the last non-blank character

    def line(self, offset: int) -> int:
        return self.numbers[bisect_right(self.starts, offset) - 1]

    def mark(self, first: int, last: int, kind: str) -> None:
        """Account lines first..last as ``kind``; a measurement stays one."""
        for number in range(first, last + 1):
            if self.kinds.get(number) not in (None, "blank", "measurement"):
                self.kinds[number] = kind

    def warn_span(self, run: Run, first: int, last: int, message: str) -> None:
        where = f"line {first}" if first == last else f"lines {first}-{last}"
        run.warn(where, message)
        self.mark(first, last, "warned")

    def parse(self) -> list[Run]:
        """One run per top-level object (``cat a.json b.json`` gives two)."""
        runs: list[Run] = []
        pos = _skip(self.text, 0)
        while pos < len(self.text):
            if self.text[pos] != "{":
                if not runs:
                    runs.append(Run(tool="nccl-tests", first_line=self.line(pos)))
                message = "not part of a nccl-tests JSON object (not read)"
                self.warn_span(runs[-1], self.line(pos), self.line(self.last), message)
                break
            obj = _read_object(self.text, pos)
            runs.append(self._run(obj))
            if obj.end is None:
                break
            pos = _skip(self.text, obj.end)
        return runs

    def _run(self, obj: _Object) -> Run:
        run = Run(tool="nccl-tests", first_line=self.line(obj.start))
        end = obj.end - 1 if obj.end is not None else self.last
        run.last_line = self.line(max(end, obj.start))
        members = obj.members

        def line_of(member: str) -> int:
            return self.line(obj.where.get(member, obj.start))

        _header(run, members, line_of)
        for start, stop, result in obj.results:
            self._result(run, result, self.line(start), self.line(stop - 1))
        errors = members.get("errors")
        for text in errors if isinstance(errors, list) else []:
            if isinstance(text, str) and text.strip():  # "" when NCCL had none
                run.error(self.line(obj.where["errors"]), text.strip())
        _footer(run, members, line_of)
        if obj.cut is not None:
            # Name the unfinished value (a partial result object, say) to the end.
            cut = self.line(min(obj.cut, self.last))
            why = "file ends" if obj.cut > self.last else obj.problem
            self.warn_span(
                run,
                self.line(obj.pending),
                self.line(self.last),
                f"{why} at line {cut} inside the JSON object, after "
                f"{len(obj.results)} result objects: run truncated",
            )
        elif run.status != "complete":
            # v2.18.5+ closes the file on its error path, before the footer.
            run.status = "failed"
            run.warn(run.last_line, "JSON closed without the footer: the run failed")
        if run.status != "complete" and run.errors:
            run.status = "failed"
        if not run.collectives:
            infer_collective(run, None, self.source)
        if run.nranks is None and not run.hosts:
            infer_ranks(run)
        for row in run.rows:
            row["collective"] = row.pop("_named") or (
                run.collectives[0] if run.collectives else None
            )
        return run

    def _result(self, run: Run, result: Any, first: int, last: int) -> None:
        if not isinstance(result, dict) or "actual_iterations" not in result:
            # The writer adds actual_iterations last: without it the run stopped
            # while this size was measured (a cut line, in the text output).
            self.warn_span(run, first, last, "result object never finished: not read")
            return
        try:
            rows = _rows(result, first)
        except ImpossibleValue as exc:
            where = f"line {first}" if first == last else f"lines {first}-{last}"
            run.refuse(where, str(exc), _result_text(result))
            self.mark(first, last, "warned")
            return
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            self.warn_span(run, first, last, f"unreadable result object: {exc!r}")
            return
        for row in rows:
            run.add_row(row)
        self.mark(first, last, "measurement")


def _header(run: Run, members: dict[str, Any], line_of: Callable[[str], int]) -> None:
    """Fill the run fields stated before the results (and the two timestamps)."""
    if isinstance(members.get("version"), str | int | float):
        run.params["json_version"] = str(members["version"])  # the JSON layout's
    args = members.get("args")
    if isinstance(args, list) and args and all(isinstance(a, str) for a in args):
        run.command = shlex.join(args)
        match = _BINARY.match(args[0].rsplit("/", 1)[-1])
        if match and match.group("name") in BINARY_NAMES:
            run.add_collective(BINARY_NAMES[match.group("name")])
    code = members.get("nccl_version")
    if (number := _integer(code)) is not None and 0 < number < _MAX_CODE:
        run.library_version = nccl_code(number)
    elif code is not None:
        run.warn(
            line_of("nccl_version"),
            f"nccl_version {_shown(code)} is not a NCCL version code: not read",
        )
    config = members.get("config")
    if isinstance(config, dict):
        for key, value in config.items():
            if isinstance(value, str | int | float):
                run.params[key] = str(value)
        _devices(run, config, line_of("config"))
    for key in ("start_time", "end_time"):
        if isinstance(members.get(key), str):
            run.params[key] = members[key]


def _devices(run: Run, config: dict[str, Any], line: int) -> None:
    """Hosts and devices per rank from the one-entry-per-process device list.

    Process p owns ranks p*T*G .. p*T*G+T*G-1 (T threads x G GPUs), all on its host,
    and its entry describes the first of them. So when the entries' ranks are
    exactly 0, T*G, 2*T*G, ..., nranks = T*G*entries and every rank's host is
    known, but device names only for each process's first rank (null for the rest).
    More than MAX_RANKS ranks is warned (nranks and hosts unknown), not allocated.
    """
    entries = config.get("devices")
    if not isinstance(entries, list) or not entries:
        return
    if not all(isinstance(e, dict) for e in entries):
        run.warn(line, "config.devices is not a list of objects: hosts unknown")
        return
    hosts = [e.get("hostname") for e in entries]
    names = [e.get("device_info") for e in entries]
    if not all(v is None or isinstance(v, str) for v in (*hosts, *names)):
        run.warn(
            line,
            "config.devices hostname or device_info is not a string: hosts unknown",
        )
        return
    run.nnodes = len(set(hosts))
    threads, gpus = _integer(config.get("nthreads")), _integer(config.get("ngpus"))
    per = threads * gpus if threads is not None and gpus is not None else 0
    if per > 0 and per * len(entries) > MAX_RANKS:
        run.warn(
            line,
            f"nthreads {_shown(threads)} x ngpus {_shown(gpus)} x {len(entries)} "
            f"processes is more than {MAX_RANKS} ranks: nranks and hosts unknown",
        )
        return
    ranks = [e.get("rank") for e in entries]
    if per <= 0 or ranks != [p * per for p in range(len(entries))]:
        run.warn(
            line,
            f"config.devices ranks {_SHORT.repr(ranks)} are not one entry per "
            "process of nthreads*ngpus ranks: nranks and hosts unknown",
        )
        return
    run.nranks = per * len(entries)
    for host, name in zip(hosts, names, strict=True):
        run.hosts.extend([host] * per)
        run.devices.extend([name, *([None] * (per - 1))])


def _footer(run: Run, members: dict[str, Any], line_of: Callable[[str], int]) -> None:
    oob = members.get("out_of_bounds")
    if isinstance(oob, dict):
        count = oob.get("count")
        if (number := _integer(count)) is not None and number >= 0:
            run.oob_values = number
        elif count is not None:
            run.warn(
                line_of("out_of_bounds"),
                f"out_of_bounds count {_shown(count)} is not a count: not read",
            )
        run.oob_ok = _flag(oob.get("okay"))
    # v2.17.3-2.17.8 misspelled the key and the field.
    key = next(
        (
            k
            for k in ("average_bus_bandwidth", "average_bus_bandwidith")
            if k in members
        ),
        "average_bus_bandwidth",
    )
    avg = members.get(key)
    if isinstance(avg, dict):
        value = avg.get("bandwidth", avg.get("bandwidith"))
        try:
            run.avg_busbw_gbps = _number(value)
        except (TypeError, ValueError):
            run.warn(line_of(key), f"unreadable average bus bandwidth {_shown(value)}")
        run.avg_busbw_ok = _flag(avg.get("okay"))
        run.status = "complete"


def _rows(result: dict[str, Any], line: int) -> list[dict[str, Any]]:
    """The rows of one result object: one per placement that is not null.

    Raises ImpossibleValue for a value no measurement has (a negative time ...),
    KeyError, TypeError or ValueError for a result the writer cannot produce.
    """
    size, count, reps = result["size"], result["count"], result["actual_iterations"]
    if any(_integer(v) is None for v in (size, count, reps)):
        raise TypeError("size, count and actual_iterations must be integers")
    type_name = result["type"]
    dtype = DTYPES.get(type_name) if isinstance(type_name, str) else None
    if dtype is None:
        raise ValueError(f"unknown data type {_shown(type_name)}")
    redop = result.get("redop")
    if redop is not None and not isinstance(redop, str):
        raise TypeError(f"redop {_shown(redop)} is not a string")
    redop = (redop or "").strip()
    root = _root(result.get("root", -1))
    name = result.get("experiment_name")  # set in trace-replay mode only
    named = names_in(name) if isinstance(name, str) else []
    keys = {
        "line": line,
        "size_bytes": size,
        "reported_bytes": size,
        "count": count,
        "dtype": dtype,
        "redop": None if redop in NOT_A_REDOP else redop,
        "root": root if root >= 0 else None,
        "repetitions": reps,
        "wrong_kind": "count",
        "_named": named[0] if named else None,
    }
    rows = []
    for key, placement in _PLACEMENTS:
        block = result.get(key)
        if block is None:  # null: not measured (trace replay has no out-of-place)
            continue
        iters = result.get(f"{key}_per_iter") or {}
        if not isinstance(block, dict) or not isinstance(iters, dict):
            raise TypeError(f"{key} is not an object")
        cputime = "time" not in block  # -C 1 writes cpu_time instead
        row = {**keys, "placement": placement, "cputime": cputime}
        row["time_us"] = _number(block["cpu_time" if cputime else "time"])
        row.update({col: _number(block.get(k)) for col, k in _BODY.items()})
        row.update({col: _number(iters.get(k)) for col, k in _PER_ITER.items()})
        row.update(_per_iteration(iters))
        # One impossible value makes the whole result object suspect, as a text row.
        reason = impossible(row)
        if reason is not None:
            raise ImpossibleValue(reason)
        rows.append(row)
    return rows


def _result_text(result: dict[str, Any]) -> str:
    """What identifies a result object: its size and placements' times."""
    named = {k: result.get(k) for k in ("size", "count", "type", "redop", "root")}
    for key, _ in _PLACEMENTS:
        block = result.get(key)
        if isinstance(block, dict):
            named[f"{key} time"] = block.get("time", block.get("cpu_time"))
    return ", ".join(f"{k} {v}" for k, v in named.items() if v is not None)


def _per_iteration(iters: dict[str, Any]) -> dict[str, Any]:
    """The -J-only members of a ``*_per_iter`` block, keyed by column (none: {}).

    Raises ImpossibleValue for a negative, infinite or NaN iteration time, TypeError
    or ValueError for members the writer cannot produce.
    """
    if not iters:
        return {}
    row: dict[str, Any] = {c: _number(iters.get(k)) for c, k in _PER_ITER_ONLY.items()}
    skipped = iters.get("skipped_iterations")  # JSON version 3 (-K) on
    if skipped is not None and not (_integer(skipped) is not None and skipped >= 0):
        raise ValueError(f"skipped_iterations {_shown(skipped)} is not a count")
    row["iter_skipped"] = skipped
    row["iter_times_us"] = _times(iters.get("times_us"), "times_us")
    procs = iters.get("per_process_max_times_us")  # written for 2+ processes only
    if procs is not None and not isinstance(procs, list):
        raise TypeError(f"per_process_max_times_us {_shown(procs)} is not a list")
    row["iter_process_times_us"] = (
        None
        if procs is None
        else [_times(one, "per_process_max_times_us") for one in procs]
    )
    return row


def _times(values: Any, key: str) -> list[float] | None:
    """A list of iteration times (us) as floats; null as None."""
    if values is None:
        return None
    if not isinstance(values, list):
        raise TypeError(f"{key} {_shown(values)} is not a list")
    times = []
    for value in values:
        number = _number(value)
        if number is None or not (math.isfinite(number) and number >= 0):
            raise ImpossibleValue(f"{key} time {_shown(value)} is not a possible time")
        times.append(number)
    return times


def _integer(value: Any) -> int | None:
    """A JSON integer (not a boolean, which Python counts as one), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _root(value: Any) -> int:
    """The writer's padded ``"    -1"`` (or a JSON integer) as int; else ValueError."""
    if isinstance(value, str) and _ROOT.match(value):
        return int(value)
    if _integer(value) is None:
        raise ValueError(f"root {_shown(value)} is not an integer")
    return int(value)


def _number(value: Any) -> float | None:
    """A JSON number, or a number in a string (the writer's ``"nan"``), as float;
    null as None.

    Raises ValueError for other strings (non-ASCII digits too: float() takes them)
    and integers beyond float; TypeError for booleans and other values.
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return to_float(value.strip())
        except ValueError:
            raise ValueError(f"not a number: {_shown(value)}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"not a number: {_shown(value)}")
    try:
        return float(value)
    except OverflowError:  # an integer of hundreds of digits
        raise ValueError(f"not a number: {_shown(value)}") from None


# Values as warnings show them: bounded (a list of 10^6 ranks, an int of 4000 digits).
_SHORT = reprlib.Repr()
_SHORT.maxlist = _SHORT.maxdict = 8
_SHORT.maxlong = _SHORT.maxstring = _SHORT.maxother = SHOWN


def _shown(value: Any) -> str:
    """``value`` for a message: JSON's null and booleans, else Python's repr, about
    SHOWN long."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return _SHORT.repr(value)


def _flag(value: Any) -> bool | None:
    """The writer's string booleans; ``"unchecked"`` (no NCCL_TESTS_MIN_BW) is None."""
    return {"true": True, "false": False}.get(str(value).lower())


def _read(lines: Iterable[Line], source: str) -> tuple[list[Run], Counter[str]]:
    """Parse nccl-tests JSON output into runs and the line accounting.

    Lines overlapping a result object read into rows count as measurement, lines
    named in a warning (unfinished or unreadable results, text after the object)
    as warned, blank lines as blank and the rest as structure.
    """
    reader = _Reader(lines, source)
    return reader.parse(), Counter(reader.kinds.values())


# The parser contract (ncclparse.parsers.Parser): runs reach emit at the end.
parse = parse_at_end(_read)


__all__ = ["NAME", "READS_SKIPPED", "parse", "sniff"]
