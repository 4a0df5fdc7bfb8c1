"""nccl-tests ``-J file.json`` output, v2.17.3+ (docs/nccl-tests-format.md section 11).

nccl-tests writes the JSON with ``fprintf`` and no newline at all, so a file from the
tool is one line (without a line ending) and every row has ``line`` 1; a file a user
pretty-printed keeps the line where each result object starts. Rows are the same as
the text parser's. Quirks of the writer (src/util.cu): booleans are the strings
``"true"``/``"false"``, NaN is ``"nan"``, ``root`` is the ``%6i`` string
``"    -1"``, ``nwrong`` is ``null`` when unchecked, v2.17.3-2.17.8 spelled
``average_bus_bandwidith``/``bandwidith``, ``errors`` holds ``ncclGetLastError()``
(normally ``""``), and ``config.devices`` has one entry per *process* (the first
rank of each). Before v2.18.5 a run that died left the file unterminated: every
finished result object before the cut is kept. Since v2.18.5 a failing run closes
the file early, without the footer.
"""

from __future__ import annotations

import json
import re
import shlex
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._lines import Line
from ._model import Run
from ._nccl_infer import infer_collective, infer_ranks, names_in
from ._nccl_layout import DTYPES, NOT_A_REDOP
from .nccl_tests import _BINARY_NAMES, _nccl_code

NAME = "nccl-tests-json"

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"\s*")
_KEYS = re.compile(r'"(?:nccl_version|results|config|average_bus_bandwidi?th)"\s*:')
_BINARY = re.compile(r"^(?P<name>[a-z_]+?)_perf")
_PLACEMENTS = (("out_of_place", "out-of-place"), ("in_place", "in-place"))


def sniff(head: Sequence[Line]) -> bool:
    """True when the head is a JSON object holding nccl-tests' top-level keys."""
    texts = [ln.text for ln in head if ln.text.strip()]
    return (
        bool(texts)
        and texts[0].lstrip().startswith("{")
        and any(_KEYS.search(t) for t in texts)
    )


@dataclass
class _Object:
    """One top-level object as far as it could be read."""

    start: int
    members: dict[str, Any] = field(default_factory=dict)
    where: dict[str, int] = field(default_factory=dict)  # member -> value offset
    results: list[tuple[int, int, Any]] = field(default_factory=list)
    end: int | None = None  # offset after the closing brace; None: not closed
    cut: int | None = None  # offset where reading stopped early
    pending: int = 0  # offset of the value being read when it stopped
    problem: str = ""


def _skip(text: str, pos: int) -> int:
    """The offset of the first non-whitespace character at or after ``pos``."""
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _read_object(text: str, pos: int) -> _Object:
    """Read the object at ``pos`` member by member, keeping what precedes a cut."""
    obj = _Object(start=pos, pending=pos)
    pos += 1
    try:
        while True:
            pos = obj.pending = _skip(text, pos)
            if pos >= len(text):
                obj.cut = pos
                return obj
            if text[pos] == "}":
                obj.end = pos + 1
                return obj
            if text[pos] == ",":
                pos += 1
                continue
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _skip(text, pos)
            if not isinstance(key, str) or not text.startswith(":", pos):
                raise json.JSONDecodeError("expected a key and ':'", text, pos)
            pos = obj.pending = _skip(text, pos + 1)
            obj.where[key] = pos
            if key == "results" and text.startswith("[", pos):
                pos = _read_results(text, pos + 1, obj)
                obj.members[key] = None
            else:
                obj.members[key], pos = _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        obj.cut, obj.problem = exc.pos, exc.msg
        return obj


def _read_results(text: str, pos: int, obj: _Object) -> int:
    """Decode result objects one by one (each kept with its offsets) up to ``]``."""
    while True:
        pos = _skip(text, pos)
        if text.startswith("]", pos):
            return pos + 1
        if text.startswith(",", pos):
            pos += 1
            continue
        if pos >= len(text):
            raise json.JSONDecodeError("unterminated results", text, pos)
        obj.pending = pos
        value, end = _DECODER.raw_decode(text, pos)
        obj.results.append((pos, end, value))
        pos = end


class _Reader:
    """Turns the text into runs and the line accounting."""

    def __init__(self, lines: list[Line], source: str) -> None:
        self.source = source
        self.numbers = [ln.number for ln in lines]
        self.text = "\n".join(ln.text for ln in lines)
        self.starts = [0]
        for ln in lines[:-1]:
            self.starts.append(self.starts[-1] + len(ln.text) + 1)
        self.kinds = {
            ln.number: "structure" if ln.text.strip() else "blank" for ln in lines
        }

    def line(self, offset: int) -> int:
        return self.numbers[bisect_right(self.starts, offset) - 1]

    def mark(self, first: int, last: int, kind: str) -> None:
        """Account lines first..last as ``kind``; a measurement is never downgraded."""
        for number in range(first, last + 1):
            if self.kinds.get(number) not in (None, "blank", "measurement"):
                self.kinds[number] = kind

    def warn_span(self, run: Run, first: int, last: int, message: str) -> None:
        where = f"line {first}" if first == last else f"lines {first}-{last}"
        run.warnings.append(f"{where}: {message}")
        self.mark(first, last, "warned")

    def parse(self) -> list[Run]:
        runs: list[Run] = []
        pos = _skip(self.text, 0)
        while pos < len(self.text):
            if self.text[pos] != "{":
                last = self.line(len(self.text.rstrip()) - 1)
                if not runs:
                    runs.append(Run(tool="nccl-tests", first_line=self.line(pos)))
                message = "not part of a nccl-tests JSON object (not read)"
                self.warn_span(runs[-1], self.line(pos), last, message)
                break
            obj = _read_object(self.text, pos)
            runs.append(self._run(obj))
            if obj.end is None:
                break
            pos = _skip(self.text, obj.end)
        return runs

    def _run(self, obj: _Object) -> Run:
        first = self.line(obj.start)
        run = Run(tool="nccl-tests", first_line=first)
        end = obj.end - 1 if obj.end is not None else len(self.text.rstrip()) - 1
        run.last_line = self.line(max(end, obj.start))
        _header(run, obj.members, self.line(obj.where.get("config", obj.start)))
        for start, stop, result in obj.results:
            self._result(run, result, self.line(start), self.line(stop - 1))
        members = obj.members
        if "errors" in members:
            at = self.line(obj.where["errors"])
            for text in members["errors"] or []:
                if isinstance(text, str) and text.strip():
                    run.error(at, text.strip())
        _footer(run, members)
        if obj.cut is not None:
            # Name the unfinished value (a partial result object, say) to the end.
            last = len(self.text.rstrip()) - 1
            where = "file ends at" if obj.cut > last else f"{obj.problem} at"
            self.warn_span(
                run,
                self.line(obj.pending),
                self.line(last),
                f"{where} line {self.line(min(obj.cut, last))} inside the JSON "
                f"object, after {len(obj.results)} result objects: run truncated",
            )
        elif run.status != "complete" and not run.errors:
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
            row["collective"] = row.pop("_named", None) or (
                run.collectives[0] if run.collectives else None
            )
        return run

    def _result(self, run: Run, result: Any, first: int, last: int) -> None:
        if not isinstance(result, dict) or "actual_iterations" not in result:
            # The writer adds actual_iterations last: without it the run stopped
            # while this size was measured (a cut line, in the text output).
            self.warn_span(run, first, last, "result never finished: not read")
            return
        try:
            rows = _rows(result, first)
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            self.warn_span(run, first, last, f"unreadable result object: {exc}")
            return
        run.rows.extend(rows)
        self.mark(first, last, "measurement")


def _header(run: Run, members: dict[str, Any], config_line: int) -> None:
    """Fill the run fields the JSON states before its results."""
    if "version" in members:
        run.params["json_version"] = str(members["version"])
    args = members.get("args")
    if isinstance(args, list) and args and all(isinstance(a, str) for a in args):
        run.command = shlex.join(args)
        match = _BINARY.match(args[0].rsplit("/", 1)[-1])
        if match and match.group("name") in _BINARY_NAMES:
            run.add_collective(_BINARY_NAMES[match.group("name")])
    code = members.get("nccl_version")
    if isinstance(code, int) and code > 0:
        run.library_version = _nccl_code(code)
    config = members.get("config")
    if isinstance(config, dict):
        for key, value in config.items():
            if isinstance(value, str | int | float):
                run.params[key] = str(value)
        _devices(run, config, config_line)
    for key in ("start_time", "end_time"):
        if isinstance(members.get(key), str):
            run.params[key] = members[key]


def _devices(run: Run, config: dict[str, Any], line: int) -> None:
    """Hosts and devices per rank from the one-entry-per-process device list.

    Process p owns ranks p*T*G .. p*T*G+T*G-1, all on its host (T threads x G GPUs),
    and its entry is the first of them; so hosts are known for every rank, device
    names only for each process's first rank (null for the others).
    """
    entries = config.get("devices")
    threads, gpus = config.get("nthreads"), config.get("ngpus")
    if not isinstance(entries, list) or not entries:
        return
    if not all(isinstance(e, dict) for e in entries):
        run.warn(line, "config.devices is not a list of objects: hosts unknown")
        return
    run.nnodes = len({e.get("hostname") for e in entries})
    per = threads * gpus if isinstance(threads, int) and isinstance(gpus, int) else 0
    if per <= 0 or [e.get("rank") for e in entries] != [
        p * per for p in range(len(entries))
    ]:
        run.warn(
            line,
            "config.devices ranks do not follow one entry per process of "
            "nthreads*ngpus ranks: nranks and hosts unknown",
        )
        return
    run.nranks = per * len(entries)
    for entry in entries:
        run.hosts.extend([entry.get("hostname")] * per)
        run.devices.extend([entry.get("device_info"), *([None] * (per - 1))])


def _footer(run: Run, members: dict[str, Any]) -> None:
    oob = members.get("out_of_bounds")
    if isinstance(oob, dict):
        count = oob.get("count")
        run.oob_values = count if isinstance(count, int) else None
        run.oob_ok = _flag(oob.get("okay"))
    # v2.17.3-2.17.8 misspelled the key and the field.
    avg = members.get("average_bus_bandwidth", members.get("average_bus_bandwidith"))
    if isinstance(avg, dict):
        run.avg_busbw_gbps = _number(avg.get("bandwidth", avg.get("bandwidith")))
        run.avg_busbw_ok = _flag(avg.get("okay"))
        run.status = "complete"


def _rows(result: dict[str, Any], line: int) -> list[dict[str, Any]]:
    """The measurement rows of one result object (one per placement present)."""
    dtype = DTYPES.get(result["type"])
    if dtype is None:
        raise ValueError(f"unknown data type {result['type']!r}")
    size, count = result["size"], result["count"]
    repetitions = result["actual_iterations"]
    if not all(isinstance(v, int) for v in (size, count, repetitions)):
        raise TypeError(f"size, count, actual_iterations must be integers: {result}")
    redop = str(result.get("redop") or "").strip()
    root = int(str(result.get("root", -1)).strip())  # the writer pads it: "    -1"
    keys = {
        "line": line,
        "size_bytes": size,
        "reported_bytes": size,
        "count": count,
        "dtype": dtype,
        "redop": None if redop in NOT_A_REDOP else redop,
        "root": root if root >= 0 else None,
        "repetitions": repetitions,
        "wrong_kind": "count",
    }
    name = result.get("experiment_name")  # set in trace-replay mode only
    named = names_in(name) if isinstance(name, str) else []
    rows = []
    for key, placement in _PLACEMENTS:
        block = result.get(key)
        if block is None:  # null: this placement was not measured
            continue
        cputime = "time" not in block
        iters = result.get(f"{key}_per_iter") or {}
        rows.append(
            {
                **keys,
                "placement": placement,
                "time_us": _number(block["cpu_time" if cputime else "time"]),
                "cputime": cputime,
                "algbw_gbps": _number(block.get("alg_bw")),
                "busbw_gbps": _number(block.get("bus_bw")),
                "wrong": _number(block.get("nwrong")),
                "time_min_us": _number(iters.get("min_us")),
                "time_max_us": _number(iters.get("max_us")),
                "time_p99_us": _number(iters.get("p99_us")),
                "stddev_pct": _number(iters.get("cv_pct")),
                "_named": named[0] if named else None,
            }
        )
    return rows


def _number(value: Any) -> float | None:
    """A JSON number, or the writer's ``"nan"`` string, as float; null as None."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"not a number: {value!r}")
    return float(value)


def _flag(value: Any) -> bool | None:
    """The writer's string booleans; ``"unchecked"`` (no NCCL_TESTS_MIN_BW) is None."""
    if isinstance(value, bool):
        return value
    return {"true": True, "false": False}.get(str(value).lower())


def parse(lines: Iterable[Line], source: str) -> tuple[list[Run], Counter[str]]:
    """Parse nccl-tests JSON output into runs and the line accounting.

    Lines overlapping a result object read into rows count as measurement, lines
    named in a warning (unfinished or unreadable results, text after the object)
    as warned, blank lines as blank and the rest as structure.
    """
    numbered = list(lines)
    reader = _Reader(numbered, source)
    runs = reader.parse() if numbered else []
    return runs, Counter(reader.kinds.values())


__all__ = ["NAME", "parse", "sniff"]
