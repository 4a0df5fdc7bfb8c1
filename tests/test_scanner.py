"""The native line scanner (issue 17) gives exactly what the Python path gives.

``ncclparse.parsers._scan`` (C, optional) replaces the block filter of
``_lines.without_nccl_debug``; ``_lines._scan_block`` is its Python reference and the
fallback. With it, plain data rows are read natively too (``read_rows``, see
test_native_rows.py); the native case here runs with both, the Python case with
neither. Identical output is the contract: the same lines kept for the same block
(property tests, every kind of str, lone ``\\r``), and the same tables, accounting
and warnings for every fixture and example and for generated logs, whichever path
reads them. The tables are also compared with a reading of every line one by one
(no block filter at all), the reference of the fast path itself.

Both paths run in every test run: ``scanner`` is parametrized over ``native`` and
``python``. The native case fails (not skips) when the extension is not built but a
C compiler is on the machine, so that CI notices a scanner that stopped building.
"""

from __future__ import annotations

import io
import itertools
import math
import random
import shutil
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, cast
from unittest import mock

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import ncclparse
from ncclparse import parsers
from ncclparse.errors import NcclParseError
from ncclparse.parsers import _lines, _nccl_recognise, imb, nccl_tests, oneccl
from ncclparse.parsers._nccl_layout import layout_from_header
from ncclparse.parsers._nccl_lines import benchmark_binary
from ncclparse.parsers._nccl_recognise import recognise
from ncclparse.parsers._nccl_topology import Facts, command_settings, scan
from tests.conftest import FIXTURES
from tests.test_robustness import HOSTILE_TOKENS, NOISE_LINES, PREFIXES, mutated

try:
    from ncclparse.parsers import _scan  # type: ignore[attr-defined,unused-ignore]

    NATIVE: _lines.ScanBlock | None = _scan.scan_block
    NATIVE_ROWS: _lines.ReadRows | None = _scan.read_rows
    NATIVE_COLUMNS: Callable[..., list[Any]] | None = _scan.dict_columns
except ImportError:
    NATIVE = NATIVE_ROWS = NATIVE_COLUMNS = None

EXAMPLES = Path(__file__).parent.parent / "examples"
LOGS = sorted(
    p
    for p in [*FIXTURES.glob("*/*"), *EXAMPLES.glob("*")]
    if p.parent.name != "expected" and p.suffix in (".log", ".csv", ".json", ".txt")
)


def _native() -> _lines.ScanBlock:
    if NATIVE is None:
        if shutil.which("cc") or shutil.which("gcc"):
            pytest.fail(
                "the native scanner is not built although a C compiler is here: "
                "pip install -e . (see setup.py)"
            )
        pytest.skip("no native scanner (no C compiler at install)")
    return NATIVE


@pytest.fixture(params=["native", "python"])
def scanner(request: pytest.FixtureRequest) -> _lines.ScanBlock | None:
    """The block filter a test runs with: the extension, or None (Python)."""
    return _native() if request.param == "native" else None


# --- the block filter itself ----------------------------------------------------------

_PIECES = st.sampled_from(
    (
        " NCCL INFO ",
        " NCCL WARN ",
        " NCCL INFO",
        "NCCL WARN ",
        " RCCL INFO ",
        "host:1:2 [0]",
        "version",
        "ailure",
        "imeout",
        "_perf",
        "_per",
        "versio",
        " ",
        "\t",
        "#",
        "[",
        "|",
        ">",
        "0",
        "7",
        "\n",
        "\r",
        "\r\n",
        "\n\r",
        "\x00",
        "\x85",  # NEL: not a line end for newline="" reading
        "\u2028",  # LINE SEPARATOR: neither
        "\u00a0",  # NO-BREAK SPACE
        "\u0663",  # ARABIC-INDIC DIGIT THREE
        "\U0001f600",  # outside the BMP: a UCS-4 str
        "\ufffd",
        "é",
        "Using network IB",
        " via NET/IB/0/GDRDMA",
        "/GDRDMA",
        " via NET/Socket/1",
        "L INFO ",
        "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0",
        "NVLS multicast support is not available on dev 0",
        "comm 0x5 rank 1 nRanks 16 nNodes 2 localRanks 8 localRank 1",
        "16 coll channels, 0 nvls channels",
        "Connected NVLS",
        "CollNet disabled",
        "nvlsSupport 1",
        "P2P plugin v8 IBext_v8",
        "rank 3 Connected CollNet",
        "NCCL_COLLNET_ENABLE set by environment to 0",
        "GPU Direct RDMA Enabled",
    )
)
_BLOCK = st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=60).map("".join)


@given(_BLOCK, st.floats(0, 1))
@example("a\r\nb NCCL INFO x\rc\n", 1.0)
@example("h:1:2 [0] NCCL INFO x\r", 1.0)
@example("h:1:2 [0] NCCL INFO x\r\n" * 3 + "\u2028 NCCL INFO y\n", 1.0)
@example("\r\r\n\n\r", 0.5)
@example("x NCCL INFO \U0001f600\n 1 NCCL INFO \n", 1.0)
def test_native_block_filter_is_the_python_one(block: str, where: float) -> None:
    end = round(len(block) * where)
    native = _native()(block, end)
    python = _lines._scan_block(block, end)
    assert native[:4] == python[:4]
    # The facts texts differ (native: only the lines that may state one), the facts
    # read in them do not.
    assert len(native[4]) == len(python[4]) == len(python[1]) + 1
    for mine, reference in zip(native[4], python[4], strict=True):
        assert _facts(mine) == _facts(reference)


@given(st.lists(st.one_of(_PIECES.map(str.encode), st.binary(max_size=8)), max_size=60))
@example([b"h:1:2 [0] NCCL INFO \xff\xfe via NET/IB/0\n", b"\xc3", b"\n"])
@example([b"\xe2\x82 NCCL INFO x\n", b"\xf0\x9f\x98\x80 NCCL INFO version\r\n"])
def test_bytes_are_scanned_as_their_text(pieces: list[bytes]) -> None:
    """scan_bytes gives what scan_block gives for the text the reader decodes (invalid
    UTF-8 replaced), but for the starts, which are byte offsets."""
    native = _native()
    block = b"".join(pieces)
    end = 1 + max(block.rfind(b"\n"), block.rfind(b"\r", 0, len(block) - 1))
    text = block[:end].decode("utf-8", errors="replace")
    found = _scan.scan_bytes(bytearray(block), end)
    expected = native(text, len(text))
    assert (found[0], found[1], found[3]) == (expected[0], expected[1], expected[3])
    assert [_facts(t) for t in found[4]] == [_facts(t) for t in expected[4]]
    assert [len(block[:at].decode("utf-8", "replace")) for at in found[2]] == expected[
        2
    ]


def _facts(text: str | None) -> Facts | None:
    return None if text is None else scan(text)


def test_python_block_filter_splits_as_line_iteration() -> None:
    block = "a\rb\r\nc NCCL INFO d\n\ne NCCL WARN f\r"
    total, kept, starts, raws, facts = _lines._scan_block(block, len(block))
    lines = io.StringIO(block, newline="").readlines()
    assert total == len(lines) == 5
    assert kept == [0, 1, 3]
    assert raws == [lines[i] for i in kept]
    assert [block[s : s + len(r)] for s, r in zip(starts, raws, strict=True)] == raws
    assert facts == [None] * 4  # no topology fact in the block


def test_scanner_is_switched_off_by_the_environment() -> None:
    code = "from ncclparse.parsers import _lines; print(_lines.scan_block is None)"
    for value, off in (("1", "True"), ("0", str(NATIVE is None))):
        env = {"NCCLPARSE_NO_EXTENSION": value, "PATH": "/usr/bin:/bin"}
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.strip() == off


# --- whole parses ---------------------------------------------------------------------

# Small enough that fixtures reach the block filter after their first lines, in
# several blocks; large enough for format detection to see what it needs.
_SNIFF = 40
_CHUNK = 1024


@contextmanager
def reading(scan: _lines.ScanBlock | None, *, per_line: bool = False) -> Iterator[None]:
    """Parse with ``scan`` as the block filter (None: Python), detection on the first
    _SNIFF lines and blocks of _CHUNK characters; ``per_line``: no block filter at
    all, every line read one by one (the reference of the fast path)."""

    def every_line(
        handle: IO[str], first: int, source: str, before: str = ""
    ) -> Iterator[_lines.Line]:
        raws = itertools.chain(
            _lines.read_lines(io.StringIO(before, newline=""), source),
            _lines.read_lines(handle, source),
        )
        yield from _lines.numbered(raws, first)

    with (
        mock.patch.object(_lines, "scan_block", scan),
        # The native row reader comes with the native scanner (Rows batches).
        mock.patch.object(_lines, "read_rows", None if scan is None else NATIVE_ROWS),
        # And the columns of row dicts built in C (_model.Collector.flush).
        mock.patch.object(
            _lines, "dict_columns", None if scan is None else NATIVE_COLUMNS
        ),
        mock.patch.object(_lines, "_CHUNK", _CHUNK),
        mock.patch.object(parsers, "SNIFF_LINES", _SNIFF),
        mock.patch.object(
            parsers,
            "without_nccl_debug",
            every_line if per_line else _lines.without_nccl_debug,
        ),
    ):
        yield


Outcome = tuple[object, ...]


def outcome(data: bytes | str) -> Outcome:
    """Everything a parse gives: tables (warnings are a runs column), accounting,
    or the error. Bytes are read as a file is (natively, its bytes are scanned
    before they are decoded), a str as text."""
    stream: IO[str] | IO[bytes] = (
        io.StringIO(data, newline="") if isinstance(data, str) else io.BytesIO(data)
    )
    try:
        result = ncclparse.parse(stream, name="log")
    except NcclParseError as exc:
        return ("error", type(exc).__name__, str(exc))
    return (
        _nan_free(result.measurements.to_pylist()),
        _nan_free(result.runs.to_pylist()),
        result.accounting,
        result.measurements.schema,
        result.runs.schema,
    )


def _nan_free(value: object) -> object:
    """``value`` with each NaN replaced by a marker (NaN equals nothing, not even the
    NaN the other path read)."""
    if isinstance(value, float) and math.isnan(value):
        return "<NaN>"
    if isinstance(value, dict):
        return {k: _nan_free(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_nan_free(v) for v in value]
    return value


def both(data: bytes | str, scan: _lines.ScanBlock | None) -> tuple[Outcome, Outcome]:
    """The parse with ``scan`` as the filter and the parse reading every line."""
    with reading(scan):
        fast = outcome(data)
    with reading(None, per_line=True):
        slow = outcome(data)
    return fast, slow


# NCCL_DEBUG=INFO chatter put inside each log, so that a good share of every log is
# read by the block filter: plain lines (skipped), topology facts (scanned in the
# skipped text), and lines the filter must keep (version, failure, prefixes, CR).
CHATTER = (
    "node1:100:100 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>\n"
    "node1:100:100 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0\n"
    "node1:100:100 [0] NCCL INFO Using network IB\n"
    "node1:100:101 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n"
    "node1:100:101 [1] NCCL INFO comm 0x5 rank 1 nRanks 16 nNodes 2 localRanks 8 localRank 1\n"
    "node1:100:100 [0] NCCL INFO cudaDriverVersion 12020\n"
    "node1:100:100 [0] NCCL WARN NET/IB : Got async event : port error\n"
    "node1:100:100 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x7f recvbuff 0x7f count 2\n"
    "node1:100:100 [0] NCCL INFO AllReduce: opCount 2 sendbuff 0x7f recvbuff 0x7f count 2\r\n"
    "node1:100:100 [0] NCCL INFO redraw\rnode1:100:100 [0] NCCL INFO shown\n"
    "[1,0]<stdout>:node1:100:100 [0] NCCL INFO prefixed\n"
    "node1:100:100 [0] NCCL INFO NVLS multicast support is not available on dev 0\n"
)


def with_chatter(data: bytes) -> str:
    """``data`` with CHATTER after every 7th line and at the end."""
    lines = data.decode("utf-8", errors="replace").splitlines(keepends=True)
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if i % 7 == 6:
            out.append(CHATTER)
    out.append(CHATTER)
    return "".join(out)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_log_parses_identically(
    path: Path, scanner: _lines.ScanBlock | None
) -> None:
    data = path.read_bytes()
    fast, slow = both(data, scanner)
    assert fast == slow
    fast, slow = both(with_chatter(data), scanner)
    assert fast == slow


@contextmanager
def remembering_nothing() -> Iterator[None]:
    """The nccl-tests parser with its memos off: each line's kind, each header's
    layout and each command's reads worked out anew (the reference of what the
    memos give)."""
    with (
        mock.patch.object(
            nccl_tests, "recognised", lambda text: recognise(text, complete=True)
        ),
        mock.patch.object(nccl_tests, "header_layout", layout_from_header),
        mock.patch.object(
            nccl_tests,
            "command_reads",
            lambda command: (benchmark_binary(command), command_settings(command)),
        ),
    ):
        yield


def many_runs(rounds: int) -> bytes:
    """Every nccl-tests log of the fixtures (the -I logs too), ``rounds`` times in a
    shuffled order, as one stream: a burn-in job's log, or logs concatenated."""
    logs = sorted([*FIXTURES.glob("nccl/*.log"), *FIXTURES.glob("nccl_per_iter/*.log")])
    order = random.Random(31)
    stream = []
    for _ in range(rounds):
        order.shuffle(logs)
        for log in logs:
            text = log.read_bytes()
            stream.append(text if text.endswith(b"\n") else text + b"\n")
    return b"".join(stream)


@pytest.mark.parametrize("chatter", [False, True], ids=["plain", "chatter"])
def test_many_runs_parse_as_every_line_read_alone(
    chatter: bool, scanner: _lines.ScanBlock | None
) -> None:
    """The remembered line kinds and layouts, and the rows of a table handed back
    in stretches, give what reading every line one by one gives, memos off."""
    data = many_runs(3)
    log: bytes | str = with_chatter(data) if chatter else data
    with reading(scanner):
        fast = outcome(log)
    with reading(None, per_line=True), remembering_nothing():
        slow = outcome(log)
    assert fast == slow
    # The 35 logs three times: 90 runs, each read after its own preamble and header.
    rows, runs = cast("tuple[list[object], list[object]]", fast[:2])
    assert (len(runs), len(rows)) == (90, 1484)
    accounting = cast("dict[str, Counter[str]]", fast[2])["log"]
    assert (accounting["structure"], accounting["measurement"]) == (861, 742)


def test_line_kinds_remembered_are_bounded() -> None:
    """A log of ever different lines (each run's own hosts, a hostile input) never
    grows the memo of line kinds past its bound, nor keeps a very long line."""
    _nccl_recognise._SEEN.clear()
    lines = [
        f"#  Rank {i % 8} Pid {i} on host-{i} device 0 [0x01] GPU"
        for i in range(2 * _nccl_recognise._SEEN_MAX)
    ]
    long_line = "# " + "x" * _nccl_recognise._SEEN_LONGEST
    text = "# nThread 1 nGpus 8\n" + "\n".join([*lines, long_line]) + "\n"
    result = ncclparse.parse(io.StringIO(text), name="log")
    (hosts,) = cast("list[list[str]]", result.runs.column("hosts").to_pylist())
    assert hosts[:2] == ["host-8184", "host-8185"]  # each line read, the last kept
    assert 0 < len(_nccl_recognise._SEEN) <= _nccl_recognise._SEEN_MAX
    assert long_line not in _nccl_recognise._SEEN


def test_there_are_logs() -> None:
    assert len(LOGS) >= 100
    assert any(p.parent == EXAMPLES for p in LOGS)


# Lines with what a native reader could get wrong: numbers Python reads and C may
# not (or the reverse), Unicode spaces and digits, CR redraws, very long lines.
_ODD = st.sampled_from(
    (
        *HOSTILE_TOKENS,
        "1_000",
        "0x10",
        "0x1p3",
        "infinity",
        "9223372036854775807",
        "18446744073709551616",
        "\u0663\u0662",
        "1\u00a02",
        "\u2003",
        "\r",
        "\x0b",
        "\x0c",
        "\x1c",
        "\x85",
        "\u2028",
    )
)
_ROW = st.lists(
    st.one_of(
        _ODD,
        st.sampled_from(("8", "2", "float", "sum", "-1", "0", "1.23", "N/A")),
    ),
    min_size=1,
    max_size=14,
).map(lambda words: "     " + "  ".join(words))
_GENERATED_LINE = st.one_of(
    _ROW,
    st.sampled_from(NOISE_LINES),
    st.sampled_from(CHATTER.splitlines()),
    st.tuples(st.sampled_from(PREFIXES), st.sampled_from(CHATTER.splitlines())).map(
        "".join
    ),
    st.sampled_from(("#", "# nThread 1 nGpus 1 minBytes 8 maxBytes 128", "")),
)


@st.composite
def generated_logs(draw: st.DrawFn) -> str:
    """A real log cut in two and generated lines put between: odd values, chatter,
    line ends of every kind, perhaps a long line."""
    seed = (FIXTURES / "nccl" / draw(st.sampled_from(NCCL_SEEDS))).read_text(
        errors="replace"
    )
    lines = seed.splitlines(keepends=True)
    cut = draw(st.integers(0, len(lines)))
    body = draw(st.lists(_GENERATED_LINE, max_size=60))
    ends = draw(st.lists(st.sampled_from(("\n", "\r\n", "\r")), min_size=len(body) + 1))
    if draw(st.booleans()):  # a long line (longer than MAX_LINE: below)
        body.insert(draw(st.integers(0, len(body))), "x NCCL INFO " + "9" * 5000)
    text = "".join(lines[:cut]) + "".join(
        itertools.chain.from_iterable(zip(body, ends, strict=False))
    )
    return text + "".join(lines[cut:])


NCCL_SEEDS = sorted(p.name for p in (FIXTURES / "nccl").glob("*.log"))


@pytest.mark.slow
@given(generated_logs())
def test_generated_logs_parse_identically(text: str) -> None:
    native = _native()
    with reading(native):
        fast = outcome(text)
    with reading(None):
        python = outcome(text)
    assert fast == python
    with reading(None, per_line=True):
        assert fast == outcome(text)


@pytest.mark.slow
@given(mutated())
def test_mutated_logs_parse_identically(data: bytes) -> None:
    native = _native()
    with reading(native):
        fast = outcome(data)
    with reading(None):
        assert fast == outcome(data)


def _long_lines(extra: int, end: str) -> str:
    seed = (FIXTURES / "nccl" / NCCL_SEEDS[0]).read_text(errors="replace")
    long = "h:1:2 [0] NCCL INFO " + "7" * (_lines.MAX_LINE + extra)
    return seed + CHATTER * 3 + long + "\n" + CHATTER + " 8 " + long + end + seed


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("extra", [-1, 0, 5, 3 * _CHUNK])
@pytest.mark.parametrize("wide", [False, True], ids=["ascii", "two-byte"])
def test_very_long_lines_parse_identically(
    extra: int, end: str, wide: bool, scanner: _lines.ScanBlock | None
) -> None:
    """Lines around MAX_LINE (cut and marked incomplete by the reader), in the
    middle of a log and of NCCL chatter, one spanning several blocks; read as text
    and as bytes, where a line of two-byte characters is longer than MAX_LINE in
    bytes before it is in characters."""
    text: str | bytes = _long_lines(extra, end)
    if wide:
        text = _long_lines(extra, end).replace("7" * 1000, "é" * 1000).encode()
    with reading(scanner):
        fast = outcome(text)
    with reading(None):
        assert fast == outcome(text)
    with reading(None, per_line=True):
        assert fast == outcome(text)


@pytest.mark.parametrize("ending", ["\r", "\r\n"])
def test_lines_of_other_endings_are_numbered_as_the_reader_numbers_them(
    ending: str, scanner: _lines.ScanBlock | None
) -> None:
    """Every line ended by a lone "\r" (or "\r\n"), more than MAX_LINE in all: the
    block path cuts its blocks at those endings as the per-line reader splits lines
    (cut at "\n" only, a file of lone "\r" was one overlong line: 1 line of 14,812)."""
    seed = (FIXTURES / "nccl" / NCCL_SEEDS[0]).read_text(errors="replace")
    unit = (seed + CHATTER).replace("\n", ending)
    text = unit * (_lines.MAX_LINE // len(unit) + 2)
    expected = list(_lines.numbered(_lines.read_lines(_stream(text), "log")))
    with (
        mock.patch.object(_lines, "scan_block", scanner),
        mock.patch.object(_lines, "read_rows", None),  # every kept line a Line
    ):
        found = list(_lines.without_nccl_debug(_stream(text), 1, "log"))
    lines = [x for x in found if isinstance(x, _lines.Line)]
    skipped = sum(x.lines for x in found if isinstance(x, _lines.Skipped))
    assert len(lines) + skipped == len(expected) > 14_000
    assert lines == [expected[line.number - 1] for line in lines]


def _stream(text: str) -> io.StringIO:
    return io.StringIO(text, newline="")


# --- detection's quick refusal ---------------------------------------------------------

_SNIFFERS = ((oneccl, (oneccl._SNIFF, oneccl._CCL_LOG)), (imb, (imb._SNIFF,)))
_SNIFF_PIECES = st.sampled_from(
    (
        *oneccl._SNIFF_TEXT,
        *imb._SNIFF_TEXT,
        "# Benchmarking: allreduce",
        "# #processes: 4",
        "found 1 errors while parsing user options",
        "what():  oneCCL: x",
        "ccl::v1::exception",
        "do unordered test",
        "(12): host: @ atl_mpi.c:450:atl_",
        "2021:01:01-10:00:00:(123) |CCL_WARN|",
        "#  Intel(R) MPI Benchmarks 2021.7",
        "# #processes = 2",
        ' Try "IMB-MPI1 -help"',
        "# Benchmarking PingPong",
        "#",
        " ",
        "\t",
        "x",
    )
)


@given(st.lists(st.lists(_SNIFF_PIECES, max_size=4).map("".join), max_size=6))
@example(["# Benchmarking", " PingPong"])  # the quick test's text across two lines
def test_quick_refusal_never_changes_detection(texts: list[str]) -> None:
    """oneCCL and IMB detection first look for text every match holds, in the head
    joined: it must decide exactly as searching every line."""
    head = [_lines.Line(n, text, True) for n, text in enumerate(texts, start=1)]
    for module, patterns in _SNIFFERS:
        searched = any(p.search(line.text) for line in head for p in patterns)
        assert module.sniff(head) == searched, module.NAME


@given(st.text(max_size=40))
@example("[1,0]<stdout>: x")
@example("2024-06-01T10:00:00Z x")
@example(" 3: x")
@example("[3] x")
def test_no_launcher_prefix_starts_elsewhere(text: str) -> None:
    """strip_prefix tries its pattern only on lines starting with a character of
    _PREFIX_FIRST: no prefix starts with any other."""
    if _lines._PREFIXES.match(text) is not None:
        assert text[:1] in _lines._PREFIX_FIRST


def _reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ncclparse-scan"]


@pytest.mark.parametrize("as_bytes", [False, True], ids=["text", "file"])
def test_a_failed_parse_leaves_no_reader_thread(
    as_bytes: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The block reader's thread stops when the parse fails, not when the error and
    its traceback (which hold the reader) are collected."""
    _native()
    seed = (EXAMPLES / "all_reduce_16rank_2node_h100.log").read_text()
    text = (seed + CHATTER * 40) * 20  # many blocks of _CHUNK characters
    calls = 0
    feed_rows = parsers.nccl_tests._Parser.feed_rows

    def failing(self: parsers.nccl_tests._Parser, rows: _lines.Rows) -> None:
        nonlocal calls
        calls += 1
        if calls == 5:  # the reader thread has started, and is ahead
            raise OSError(5, "Input/output error")
        feed_rows(self, rows)

    monkeypatch.setattr(parsers.nccl_tests._Parser, "feed_rows", failing)
    source: IO[str] | IO[bytes] = (
        io.BytesIO(text.encode()) if as_bytes else io.StringIO(text, newline="")
    )
    with reading(NATIVE):
        result = ncclparse.parse_many([(source, "log")])
    assert calls == 5
    assert [str(f) for f in result.failures] == [
        "log: read failed: Input/output error (only runs this input completed "
        "before the failure, if any, are kept)"
    ]
    assert _reader_threads() == []


@pytest.mark.parametrize(
    "last",
    [
        "h:1:2 [0] NCCL INFO x\r",  # plain NCCL debug: a Skipped line in a block
        "     8     2   float   sum   -1   1.0   0.00   0.00   0\r",
        "h:1:2 [0] NCCL INFO Using network IB\r",
    ],
)
@pytest.mark.parametrize("more", [False, True], ids=["last", "then-more"])
def test_a_head_ending_with_a_lone_cr_is_read_as_text_is(
    last: str, more: bool, scanner: _lines.ScanBlock | None
) -> None:
    """Regression: read as bytes, the head's last line ended by a lone "\\r" was
    scanned as a block where the text reader, at the end of the input, gives it as
    a line of its own."""
    seed = (EXAMPLES / "all_reduce_16rank_2node_h100.log").read_text()
    head = "".join(seed.splitlines(keepends=True)[: _SNIFF - 1])
    text = head + last + (CHATTER * 3 if more else "")
    fast, slow = both(text.encode(), scanner)
    assert fast == slow
    with reading(scanner):
        assert outcome(text.encode()) == outcome(text)


def test_the_reader_thread_only_for_files_with_blocks_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file read whole for detection (most logs) is scanned without a thread;
    one with more than a block left is read ahead by one, with the same result."""
    _native()
    threads: list[int] = []
    ahead = _lines._ahead

    def counted(items: Any) -> Any:
        threads.append(1)
        return ahead(items)

    monkeypatch.setattr(_lines, "_ahead", counted)
    seed = (EXAMPLES / "all_reduce_16rank_2node_h100.log").read_text()
    small, large = tmp_path / "small.log", tmp_path / "large.log"
    small.write_text(seed + CHATTER)
    large.write_text(seed + CHATTER * (2 * _lines._CHUNK // len(CHATTER)))
    ncclparse.parse(small)
    assert threads == []
    with reading(NATIVE):
        fast = ncclparse.parse(large)
    assert threads == [1]
    with reading(None, per_line=True):
        slow = ncclparse.parse(large)
    assert _nan_free(fast.runs.to_pylist()) == _nan_free(slow.runs.to_pylist())
    assert fast.measurements.equals(slow.measurements)
