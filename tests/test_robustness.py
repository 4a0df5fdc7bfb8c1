"""Hostile and fuzzed input never crashes ncclparse, invents a number or loses a line.

Property tests (hypothesis) seeded with every real log under tests/fixtures. For any
input, parsing either gives schema-conforming tables whose numbers all appear on the
line each row cites and whose line accounting adds up, or raises an NcclParseError
that names the source. See docs/robustness.md for the profiles (``ci`` by default,
``HYPOTHESIS_PROFILE=long`` for a long local run) and the memory bound.
"""

from __future__ import annotations

import io
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import TypedDict

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import ncclparse
from ncclparse.errors import NcclParseError
from ncclparse.parsers import LINE_KINDS
from ncclparse.parsers._model import Notes
from ncclparse.schema import MEASUREMENTS_SCHEMA, RUNS_SCHEMA, conform
from tests.conftest import FIXTURES, string_lists


# --- profiles -----------------------------------------------------------------------
# deadline: a generous per-example bound that still turns a quadratic or exponential
# regex into a failure (they take minutes, not seconds, on the inputs drawn here).
class _Settings(TypedDict):
    """The settings every profile shares."""

    deadline: int
    suppress_health_check: list[HealthCheck]
    print_blob: bool


_COMMON: _Settings = {
    "deadline": 5000,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
    "print_blob": True,
}
# CI draws the same examples every run, so that a submission's result does not depend
# on luck; the long profile explores new ones (run it locally, see docs/robustness.md).
settings.register_profile("ci", max_examples=400, derandomize=True, **_COMMON)
settings.register_profile("long", max_examples=5000, **_COMMON)
settings.register_profile("quick", max_examples=20, **_COMMON)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)
LONG = PROFILE == "long"

# Every input log of every tool present when the tests run (not the expectations).
SEEDS = sorted(
    p
    for p in FIXTURES.glob("*/*")
    if p.parent.name != "expected" and p.suffix in (".log", ".csv", ".json", ".txt")
)
SEED_BYTES = {p.name: p.read_bytes() for p in SEEDS}
NAME = "fuzzed.log"
NCCL_TOOLS = ("nccl-tests", "rccl-tests")

# --- the invariants -----------------------------------------------------------------


def reader_lines(data: bytes) -> list[str]:
    """The input lines exactly as ncclparse reads them (universal newlines kept)."""
    return list(io.StringIO(data.decode("utf-8", errors="replace"), newline=""))


def parse_checked(data: bytes, name: str = NAME) -> ncclparse.ParseResult | None:
    """Parse ``data``; check every invariant; None when a typed error was raised."""
    try:
        result = ncclparse.parse(io.BytesIO(data), name=name)
    except NcclParseError as exc:
        check_error(exc, name)
        return None
    conform(result.measurements, MEASUREMENTS_SCHEMA)
    conform(result.runs, RUNS_SCHEMA)
    lines = reader_lines(data)
    check_accounting(result, name, len(lines))
    check_no_invented_data(result, lines)
    return result


def check_error(exc: NcclParseError, name: str) -> None:
    assert name in str(exc), f"error does not name the source: {exc}"
    line_no = getattr(exc, "line_no", None)
    if line_no:  # an error about a line names it
        assert f"{name}:{line_no}" in str(exc)


_PLACES = re.compile(
    r"lines? (?P<places>\d+(?:-\d+)?(?:, \d+(?:-\d+)?)*)"
    r"(?: and (?P<more>[\d,]+) more| to (?P<last>\d+))?: (?P<message>.*)"
)
_UNREAD = re.compile(r"(\d+) lines? not recognised")
_DROPPED = re.compile(r"([\d,]+) more notes not kept")


def named_lines(warnings: list[str]) -> tuple[set[int], int]:
    """The lines warnings name, and how many more they count without naming.

    A repeated warning names its first places and counts the rest (`and K more`,
    K places of the message's line count); past the per-run limit, one entry counts
    the dropped notes over a span (`lines A to B: N more notes not kept`).
    """
    named: set[int] = set()
    counted = 0
    for warning in warnings:
        match = _PLACES.match(warning)
        if match is None:
            continue
        for place in match.group("places").split(", "):
            first, _, last = place.partition("-")
            named.update(range(int(first), int(last or first) + 1))
        if match.group("more"):
            unread = _UNREAD.match(match.group("message"))
            per_place = int(unread.group(1)) if unread else 1
            counted += int(match.group("more").replace(",", "")) * per_place
        if match.group("last") and _DROPPED.match(match.group("message")):
            first = int(match.group("places"))
            named.update(range(first, int(match.group("last")) + 1))
    return named, counted


def check_accounting(result: ncclparse.ParseResult, name: str, lines: int) -> None:
    accounting = result.accounting[name]
    assert set(accounting) <= set(LINE_KINDS), accounting
    assert all(n >= 0 for n in accounting.values())
    assert sum(accounting.values()) == lines, (dict(accounting), lines)
    warnings = [w for ws in string_lists(result.runs, "warnings") for w in ws]
    # Bounded whatever repeats: at most Notes.LIMIT entries and one counting the rest.
    assert all(
        len(ws) <= Notes.LIMIT + 1 for ws in string_lists(result.runs, "warnings")
    )
    named, counted = named_lines(warnings)
    assert accounting["warned"] <= len(named) + counted, (
        accounting["warned"],
        warnings,
    )
    assert all(1 <= n <= max(lines, 1) for n in named), (named, lines)
    for run in result.runs.to_pylist():
        assert run["status"] in ("complete", "truncated", "failed")
        assert 1 <= run["first_line"] <= run["last_line"] <= max(lines, 1)


_SPLIT = re.compile(r"[\s|,;:\[\]{}\"=()]+")
# Unit conversions a parser may apply to a printed number: E0 nccl-tests printed ms,
# IMB prints MB/s (of 2^20 bytes before 2018), oneCCL prints us.
_FACTORS = (1.0, 1000.0, 1e-3, 1.048576e-3)


def _numbers(text: str) -> list[float]:
    found = []
    for token in _SPLIT.split(text):
        token = token.rstrip("*")
        try:
            found.append(float(token))
        except ValueError:
            continue
    return found


def _printed(value: float, numbers: list[float], exact: set[float]) -> bool:
    if math.isnan(value):
        return any(math.isnan(n) for n in numbers)
    if any(value / factor in exact for factor in _FACTORS):
        return True  # the common case, without a pass over every number
    for n in numbers:
        for factor in _FACTORS:
            scaled = n * factor
            if scaled == value or (
                math.isfinite(value) and math.isclose(scaled, value, rel_tol=1e-9)
            ):
                return True
    return False


def check_no_invented_data(result: ncclparse.ParseResult, lines: list[str]) -> None:
    """Every number of every row appears on the line it cites (or its rejoined part)."""
    warnings = [w for ws in string_lists(result.runs, "warnings") for w in ws]
    rejoined: dict[int, list[int]] = {}
    for warning in warnings:
        match = re.match(r"line (\d+): .*rejoined with line (\d+)", warning)
        if match:
            rejoined.setdefault(int(match.group(1)), []).append(int(match.group(2)))
    json_input = "".join(lines[:50]).lstrip()[:1] in ("{", "[")
    # The numbers of each cited text, once: a one-line JSON log of 600 kB is the
    # same text for every row (tokenised per row, the check took minutes).
    seen: dict[tuple[int, int], tuple[str, list[float], set[float]]] = {}
    for row in result.measurements.to_pylist():
        number = row["line"]
        assert 1 <= number <= len(lines), row
        cited = [number, *rejoined.get(number, [])]
        span = (number, max(cited))
        if span not in seen:
            text = " ".join(lines[n - 1] for n in cited)
            if json_input:  # one pretty-printed object spans several lines
                text = " ".join(lines[number - 1 : number + 80])
            found = _numbers(text)
            seen[span] = (text, found, set(found))
        text, numbers, exact = seen[span]
        for key in ("size_bytes", "count", "time_us", "algbw_gbps", "busbw_gbps"):
            value = row[key]
            if value is None or (
                key in ("size_bytes", "count") and row["tool"] not in NCCL_TOOLS
            ):
                continue  # IMB/oneCCL print one of them, the other is derived
            assert _printed(float(value), numbers, exact), (key, value, row, text[:500])
        if row["wrong"] is not None and row["tool"] in NCCL_TOOLS:
            assert _printed(row["wrong"], numbers, exact), (row, text[:500])


def rows_of(
    result: ncclparse.ParseResult | None,
) -> list[tuple[int, *tuple[object, ...]]]:
    """(line, placement, size_bytes, count, dtype, time_us) of each row, NaN as "nan"."""
    if result is None:
        return []
    keys = ("placement", "size_bytes", "count", "dtype", "time_us")
    return [
        (
            r["line"],
            *(
                "nan" if isinstance(r[k], float) and math.isnan(r[k]) else r[k]
                for k in keys
            ),
        )
        for r in result.measurements.to_pylist()
    ]


# --- strategies ---------------------------------------------------------------------

seed_names = st.sampled_from(sorted(SEED_BYTES))

NOISE_LINES = (
    "host-1:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    "node7:88:91 [3] NCCL INFO Channel 00/32 :    0   1   2   3",
    "host:1:2 [0] NCCL WARN Cuda failure 'out of memory'",
    "2024:09:12-10:00:00:123456 |CCL_WARN| did not find MPI-launcher specific variables",
    "|CCL_INFO| ccl_comm: rank 0",
    "[1,0]<stdout>:# nccl-tests version 2.13.8",
    " 0: #       size         count      type   redop    root",
    "[0] NCCL INFO comm 0x55 rank 0 nranks 2",
    "srun: error: node1: task 3: Exited with exit code 1",
    "Warning: Permanently added 'node2' (ED25519) to the list of known hosts.",
    "```",
    "$ mpirun -np 2 ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 1",
)
PREFIXES = (
    "",
    "[1,0]<stdout>:",
    "        [1,0]<stdout>:",
    "Sun Nov 15 22:45:41 2020[1,0]<stdout>:",
    "00:55:22  ",
    "[1,1]<stderr>:",
    " 0: ",
    "12: ",
    "[0] ",
    "[3] ",
)
HOSTILE_TOKENS = (
    "nan",
    "NaN",
    "inf",
    "-inf",
    "-1",
    "-0",
    "1e308",
    "1e999",
    "9" * 30,
    "9223372036854775808",
    "-9223372036854775809",
    "2147483648",
    "N/A",
    "0x1f",
    "1.2.3",
    "\x00",
    "",
)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A seed log with a handful of line-level and byte-level mutations."""
    data = SEED_BYTES[draw(seed_names)]
    lines = data.splitlines(keepends=True) or [b""]
    for _ in range(draw(st.integers(1, 6))):
        op = draw(
            st.sampled_from(
                (
                    "delete",
                    "duplicate",
                    "swap",
                    "inject",
                    "prefix",
                    "number",
                    "crlf",
                    "bytes",
                    "cut",
                    "repeat",
                    "stretch",
                )
            )
        )
        i = draw(st.integers(0, len(lines) - 1))
        line = lines[i]
        if op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, line)
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "inject":
            lines.insert(i, draw(st.sampled_from(NOISE_LINES)).encode() + b"\n")
        elif op == "prefix":
            lines[i] = draw(st.sampled_from(PREFIXES)).encode() + line
        elif op == "number":
            tokens = re.split(rb"(\s+)", line)
            spots = [k for k, t in enumerate(tokens) if re.fullmatch(rb"[-\d.e+]+", t)]
            if spots:
                k = draw(st.sampled_from(spots))
                tokens[k] = draw(st.sampled_from(HOSTILE_TOKENS)).encode()
                lines[i] = b"".join(tokens)
        elif op == "crlf":
            lines = [x.rstrip(b"\r\n") + b"\r\n" for x in lines]
        elif op == "bytes":
            junk = draw(
                st.sampled_from((b"\x00", b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\r"))
            )
            at = draw(st.integers(0, len(line)))
            lines[i] = line[:at] + junk + line[at:]
        elif op == "cut":
            lines = lines[: i + 1]
            lines[-1] = lines[-1][: draw(st.integers(0, len(lines[-1])))]
        elif op == "repeat":  # a header repeated with another line between (once 2 GB)
            other = lines[draw(st.integers(0, len(lines) - 1))]
            lines[i : i + 1] = [other, line] * draw(st.integers(2, 400))
        elif op == "stretch":  # a run made long: its lines from i repeated
            block = lines[i : i + draw(st.integers(1, 40))]
            lines[i:i] = block * draw(st.integers(2, 200))
    return b"".join(lines)


# Log-shaped text: lines of tokens the parsers care about, in random order.
_WORDS = st.sampled_from(
    (
        "#",
        "size",
        "count",
        "type",
        "redop",
        "root",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "error",
        "bytes",
        "float",
        "half",
        "bfloat16",
        "int8",
        "sum",
        "none",
        "out-of-place",
        "in-place",
        "(B)",
        "(elements)",
        "(us)",
        "(GB/s)",
        "N/A",
        "nThreads",
        "nGpus:",
        "Rank",
        "Group",
        "Pid",
        "on",
        "device",
        "[0x1b]",
        "NVIDIA",
        "Avg",
        "bus",
        "bandwidth",
        ":",
        "OK",
        "FAILED",
        "Out",
        "of",
        "bounds",
        "values",
        "nccl-tests",
        "version",
        "NCCL",
        "INFO",
        "WARN",
        "failure",
        "Test",
        "......",
        "#bytes",
        "#repetitions",
        "t_min[usec]",
        "Benchmarking",
        "Allreduce",
        "#processes",
        "|CCL_WARN|",
        "|CCL_INFO|",
        "[1,0]<stdout>:",
        "0:",
        "[0]",
        "|",
    )
)
_NUMBER = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda x: f"{x:.2f}"),
    st.sampled_from(HOSTILE_TOKENS),
)
_LINE = st.lists(st.one_of(_WORDS, _NUMBER), max_size=16).map(" ".join)
log_text = st.lists(_LINE, max_size=40).map("\n".join)


# --- properties ---------------------------------------------------------------------


def test_there_are_seeds() -> None:
    assert len(SEEDS) >= 20
    assert {p.parent.name for p in SEEDS} >= {"nccl"}


@pytest.mark.parametrize("name", sorted(SEED_BYTES))
def test_every_seed_holds_the_invariants(name: str) -> None:
    parse_checked(SEED_BYTES[name], name)


@given(st.binary(max_size=4096))
@example(b"")
@example(b"\x00" * 100)
@example(b"\xff\xfe\x00\x01" * 64)
@example(b"\n\n\r\n \t\n")
def test_any_bytes(data: bytes) -> None:
    parse_checked(data)


@pytest.mark.slow
@given(log_text)
@example("8 2 float sum -1 h:1:2 [0] NCCL INFO x\n" + "1" * 40 + "x")
def test_log_shaped_text(text: str) -> None:
    parse_checked(text.encode())


@pytest.mark.slow
@given(mutated())
def test_mutated_corpus(data: bytes) -> None:
    parse_checked(data)


@pytest.mark.slow
@settings(max_examples=10_000 if LONG else 1000)
@given(seed_names, st.floats(0, 1))
def test_cut_at_any_byte(name: str, where: float) -> None:
    data = SEED_BYTES[name]
    offset = int(where * len(data))
    check_cut(name, data, offset)


def check_cut(name: str, data: bytes, offset: int) -> None:
    whole = parse_checked(data, name)
    cut = data[:offset]
    part = parse_checked(cut, name)
    lines = reader_lines(cut)
    complete = sum(1 for ln in lines if ln.endswith(("\n", "\r")))
    if offset == len(data):  # not cut: a last line without a newline is whole
        complete = len(lines)
    if whole is None:
        return
    # Rows up to the cut, minus any row rejoined with a line beyond it.
    warnings = [w for ws in string_lists(whole.runs, "warnings") for w in ws]
    late = {
        int(m.group(1))
        for w in warnings
        if (m := re.match(r"line (\d+): .*rejoined with line (\d+)", w))
        and int(m.group(2)) > complete
    }
    expected = [r for r in rows_of(whole) if r[0] <= complete and r[0] not in late]
    if part is None:  # nothing that identifies the format survived the cut
        assert not expected, offset
        return
    got = rows_of(part)
    # A partial last line may give rows (JSON objects that ended before the cut),
    # but only rows the whole log has too.
    upto = [r for r in got if r[0] <= complete]
    if data.lstrip()[:1] in (b"{", b"["):  # a row cites the first line of its object:
        assert upto == expected[: len(upto)], offset  # the cut one may be missing
    else:
        assert upto == expected, offset
    assert set(got) <= set(rows_of(whole)), offset
    # A run is complete only once its footer survived the cut: then it has all its
    # rows and the footer's own values, not a cut-off copy of them.
    wruns = whole.runs.to_pylist()
    for run in part.runs.to_pylist():
        if run["status"] != "complete":
            continue
        if run["tool"] in NCCL_TOOLS:
            assert run["avg_busbw_gbps"] is not None, (offset, run)
        assert any(
            w["status"] == "complete"
            and w["first_line"] <= run["last_line"] <= w["last_line"]
            # oneCCL CSV and 2021.1-2021.2 text print no footer: complete at any
            # line boundary (their parsers' documented rule)
            and (w["rows"] == run["rows"] or run["tool"] not in NCCL_TOOLS)
            and same(w["avg_busbw_gbps"], run["avg_busbw_gbps"])
            for w in wruns
        ), (offset, run)


def same(a: float | None, b: float | None) -> bool:
    return a == b or (
        a is not None and b is not None and math.isnan(a) and math.isnan(b)
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [n for n in sorted(SEED_BYTES) if "complete" in n or "footer" in n][:3]
    or sorted(SEED_BYTES)[:1],
)
def test_cut_at_every_byte_of_a_small_log(name: str) -> None:
    data = SEED_BYTES[name][:6000]
    step = 1 if LONG else max(1, len(data) // 400)
    for offset in range(0, len(data) + 1, step):
        check_cut(name, data, offset)


# --- enormous lines -----------------------------------------------------------------

HUGE_MB = int(os.environ.get("NCCLPARSE_HUGE_MB", "256" if LONG else "24"))
_HUGE_SCRIPT = """
import resource, sys, time
import ncclparse
from ncclparse.errors import NcclParseError
path, = sys.argv[1:]

def kib(key):  # peak (VmHWM) or current (VmRSS) resident set, KiB
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith(key))

try:  # reset the peak to now, after the imports
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    base = kib("VmRSS:")
except OSError:
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.monotonic()
try:
    result = ncclparse.parse(path, name="huge")
    outcome = f"rows={result.measurements.num_rows}"
except NcclParseError as exc:
    outcome = "error=" + type(exc).__name__
try:
    peak = kib("VmHWM:")
except OSError:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(outcome, base, peak, time.monotonic() - start)
"""
HUGE_SHAPES = {
    "row": (
        b"#  size count type redop root time algbw busbw #wrong\n8 2 float ",
        b"1 ",
    ),
    "letters": (b"# nccl-tests version 2.13.8\n", b"a"),
    "params": (b"# nThreads 1 ", b"ab "),
    "digits": (b"       8             2     float     sum      -1     ", b"9"),
    "noise": (b"host:1:2 [0] NCCL INFO ", b"x:1:"),
    "binary": (b"", bytes(range(256))),
}


@pytest.mark.parametrize("shape", sorted(HUGE_SHAPES))
def test_one_huge_line_without_newline(shape: str, tmp_path: Path) -> None:
    """Linear time, and memory a small multiple of the longest line."""
    head, unit = HUGE_SHAPES[shape]
    size = HUGE_MB * 2**20
    path = tmp_path / "huge.log"
    with path.open("wb") as handle:
        handle.write(head)
        block = unit * (2**20 // len(unit))
        for _ in range(size // len(block)):
            handle.write(block)
    proc = subprocess.run(
        [sys.executable, "-c", _HUGE_SCRIPT, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcome, base, peak, seconds = proc.stdout.split()
    print(shape, outcome, f"{(int(peak) - int(base)) / 1024:.0f} MiB", seconds, "s")
    grown_mb = (int(peak) - int(base)) / 1024  # ru_maxrss is in KiB on Linux
    assert grown_mb < MEMORY_FACTOR * HUGE_MB + 64, (outcome, grown_mb)
    assert float(seconds) < 2 + HUGE_MB * 0.5, (outcome, seconds)


MEMORY_FACTOR = 6  # see docs/robustness.md


def test_many_lines_stream_in_bounded_time() -> None:
    """A long valid log (50k rows) parses in linear time."""
    row = b"     1048576        262144     float     sum       0    45.29   23.15   23.15      0    45.33   23.13   23.13      0\n"
    data = b"#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
    data += row * 50_000
    start = time.monotonic()
    result = parse_checked(data)
    assert result is not None
    assert result.measurements.num_rows == 100_000
    assert time.monotonic() - start < 60


# --- regressions: minimal examples of the bugs these properties found ---------------

HEADER = (
    "#       size         count      type   redop    root     time   algbw   busbw "
    "#wrong     time   algbw   busbw #wrong\n"
)
ROW = (
    "           8             2     float     sum      -1     9.31    0.00    0.00"
    "      0     9.10    0.00    0.00      0\n"
)


@pytest.mark.parametrize(
    "text",
    [
        # size beyond int64: OverflowError from pyarrow
        HEADER + ROW.replace("  8 ", " 99999999999999999999999 "),
        # root beyond int32: ArrowInvalid
        HEADER + ROW.replace("-1", "99999999999"),
        # root of 5000 digits: ValueError from int()
        HEADER + ROW.replace("-1", "9" * 5000),
        # Out of bounds count beyond int64: OverflowError
        HEADER + ROW + "# Out of bounds values : 99999999999999999999999 OK\n",
        # nccl-library code of 5000 digits: ValueError from int()
        "# nccl-tests version 2.13.8 nccl-headers=1 nccl-library="
        + "9" * 5000
        + "\n"
        + HEADER
        + ROW,
        # all_gather with size/count giving an nranks beyond int32: ArrowInvalid
        "# Collective test starting: all_gather_perf\n"
        "#  size count type redop root time algbw busbw #wrong\n"
        "9000000000000000000 1 int8 none -1 1.0 1.0 1.0 0\n",
    ],
    ids=["size", "root", "root-digits", "oob", "library", "nranks"],
)
def test_enormous_numbers(text: str) -> None:
    parse_checked(text.encode())


@pytest.mark.parametrize(
    "text",
    [
        # a Rank line with a huge rank filled two lists of 10^8 entries (17 s, 1.6 GB)
        "# Rank 100000000 Group 0 Pid 1 on h device 0 [0x1] A100\n" + HEADER + ROW,
        # `(?:[\d.]+\s*)+$` after a row cut by NCCL output: exponential backtracking
        HEADER + ROW + "8 2 float sum -1 h:1:2 [0] NCCL INFO x\n" + "1" * 60 + "x\n",
        # nThreads line with a long word: quadratic _PARAM_PAIR
        "# nThreads 1 " + "a" * 200_000 + "\n",
        # data row with a long word: quadratic _GLUED_NOISE
        HEADER + ROW + "8 2 float " + "a" * 200_000 + "\n",
    ],
    ids=["rank", "pending-digits", "params-word", "glued-word"],
)
def test_no_hang(text: str) -> None:
    start = time.monotonic()
    parse_checked(text.encode())
    assert time.monotonic() - start < 3


def test_cut_footer_is_not_read() -> None:
    """`# Avg bus bandwidth : 84.8558` cut to `: 8` gave status complete, avg 8.0."""
    text = HEADER + ROW + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 8"
    result = parse_checked(text.encode())
    assert result is not None
    (run,) = result.runs.to_pylist()
    assert run["status"] == "truncated"
    assert run["avg_busbw_gbps"] is None


def test_cut_line_in_a_stream_without_run_is_named() -> None:
    """A group line, then a cut-off header: the warned line was named nowhere."""
    text = "#  out-of-place  in-place\n#       size         count      type   redop"
    parse_checked(text.encode())


def test_a_lone_cr_ends_a_line() -> None:
    """A row ended by CR was taken for a line cut off by the end of input."""
    result = parse_checked((HEADER + ROW.replace("\n", "\r") + ROW).encode())
    assert result is not None
    assert result.measurements.num_rows == 4


def test_nan_bandwidths() -> None:
    """nan algbw emptied the median of busbw/algbw: StatisticsError."""
    text = HEADER + ROW.replace("0.00", "nan", 1) + ROW.replace("8 ", "16 ", 1)
    parse_checked(text.encode())


# Other tools: (seed, line, a hostile value for the first number on that line).
OTHER_TOOLS = [
    ("derived_v2021.14_allreduce_f32_np4_cut_midrow.log", 38, "nan"),
    ("derived_v2021.14_allreduce_f32_np4_cut_midrow.log", 38, "9" * 30),
    ("derived_v2021.14_allreduce_f32_np4_cut_midrow.log", 34, "9" * 5000),
    ("derived_v2021.14_allreduce_f32_np4_cut_midrow.log", 11, "9" * 5000),
    ("derived_v2021.14_allreduce_f32_np4_interrupted.log", 53, "9" * 5000),
    ("v2021.14_impi_debug5_np2.log", 8, "9" * 30),
    ("derived_imb_bcast_reduce_rs_np4_cut.log", 35, "2147483648"),
    ("derived_imb_bcast_reduce_rs_np4_cut.log", 35, "9" * 5000),
    ("derived_imb_bcast_reduce_rs_np4_cut.log", 39, "9" * 30),
    ("derived_imb_bcast_reduce_rs_np4_cut.log", 39, "9" * 5000),
    ("imb_bcast_reduce_rs_np4.log", 2, "9" * 5000),
    # json's raw_decode raises a plain ValueError past Python's int digit limit.
    ("v2.19.2_sendrecv_per_iter_2proc.json", 1, "9" * 5000),
]


@pytest.mark.parametrize(("name", "line", "value"), OTHER_TOOLS)
def test_hostile_numbers_in_other_tools(name: str, line: int, value: str) -> None:
    if name not in SEED_BYTES:
        pytest.skip(f"fixture {name} not present")
    lines = SEED_BYTES[name].splitlines(keepends=True)
    lines[line - 1] = re.sub(
        rb"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])",
        value.encode(),
        lines[line - 1],
        count=1,
    )
    parse_checked(b"".join(lines), name)


# --- nccl-tests JSON: any JSON value in any member (2026-11 reliability audit) ------

# Values a corrupt or hostile -J file may hold where the writer puts something else.
_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([2**64, 10**8, -1, 10**400, "nan", "    -1", "\uff11\uff10"])
    | st.floats()
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
JSON_SEEDS = sorted(n for n in SEED_BYTES if n.endswith(".json"))


def _json_paths(
    value: object, path: tuple[object, ...] = ()
) -> list[tuple[object, ...]]:
    """Every place in a decoded JSON document, as keys and indexes from the top."""
    places = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            places += _json_paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            places += _json_paths(item, (*path, index))
    return places


@st.composite
def hostile_json(draw: st.DrawFn) -> bytes:
    """A whole -J seed with 1-3 of its values replaced by any JSON value."""
    import json

    decoder = json.JSONDecoder()
    name = draw(st.sampled_from(JSON_SEEDS))
    try:
        document, _ = decoder.raw_decode(SEED_BYTES[name].decode().strip())
    except ValueError:  # a cut seed: start from the smallest complete one
        document = {"config": {"nthreads": 1, "ngpus": 1, "devices": []}}
    for _ in range(draw(st.integers(1, 3))):
        *parents, last = draw(st.sampled_from(_json_paths(document)))
        holder = document
        for key in parents:
            holder = holder[key]
        holder[last] = draw(_JSON_VALUES)
    return json.dumps(document).encode() + b"\n"


_HUGE_THREADS = (
    b'{"version":3,"nccl_version":22905,"config":{"nthreads":18446744073709551616,'
    b'"ngpus":1,"devices":[{"rank":0,"hostname":"h","device_info":"X"}]},'
    b'"results":[]}\n'
)


@pytest.mark.slow
@given(hostile_json())
@example(_HUGE_THREADS)
def test_hostile_json_members(data: bytes) -> None:
    """`nthreads` 2**64 raised OverflowError; a list hostname, an avg bandwidth of
    400 digits, a boolean count and a null time raised TypeError, OverflowError,
    ArrowTypeError or SchemaError (one bad file stopped a batch)."""
    result = parse_checked(data, "hostile.json")
    assert result is not None
    for row in result.measurements.to_pylist():
        assert row["time_us"] >= 0
        assert math.isfinite(row["time_us"])


def test_a_file_name_that_is_not_utf8_is_shown_with_its_bytes_escaped(
    tmp_path: Path,
) -> None:
    """Regression: the bytes of such a name (lone surrogates in Python) crashed the
    table build with a traceback; a caller's name with a lone surrogate too. Shown
    as U+FFFD, two such files could not be told apart: each byte is shown."""
    log = Path(__file__).parent.parent / "examples" / "all_reduce_16rank_2node_h100.log"
    odd = tmp_path / os.fsdecode(b"night\xff.log")
    odd.write_bytes(log.read_bytes())
    result = ncclparse.parse_many([odd, (io.StringIO(log.read_text()), "x\ud800y")])
    assert result.runs.column("source").to_pylist() == [
        str(tmp_path / "night\\xff.log"),
        "x\\ud800y",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "ncclparse", "parse", str(tmp_path), "-o",
         str(tmp_path / "out.parquet")],
        capture_output=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0
    assert "night\\xff.log: nccl-tests, 1 run (1 complete), 62 rows" in (
        done.stderr.decode()
    )
