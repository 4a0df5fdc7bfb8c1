"""The native row reader (``_scan.read_rows``) reads a line as the parser would.

For a run in its table, the nccl-tests parser reads a data line through
``_Parser._data`` and ``_row`` (``_nccl_layout.read_row``). ``read_rows`` either
gives exactly the rows that path adds (same keys in the same order, same values and
types) or None, and the parser then reads the line itself. :func:`reference` below
is that path, step by step; the properties compare the two on generated lines
(every layout the reader takes, and hostile tokens), and check that the reader does
take the lines it is there for (a fast path that refuses everything would pass the
first property). Whole logs read both ways are compared in test_scanner.py.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import ncclparse
from ncclparse.parsers import _lines, _model, nccl_tests
from ncclparse.parsers._model import KEEP_ROWS
from ncclparse.parsers._nccl_layout import (
    DTYPES,
    Layout,
    RowError,
    read_row,
    row_spec,
)
from ncclparse.parsers._nccl_lines import ROW_START
from ncclparse.parsers._nccl_recover import split_trailing, undecorate_line
from tests.conftest import FIXTURES
from tests.test_scanner import CHATTER, LOGS, both, generated_logs, with_chatter

try:
    from ncclparse.parsers import _scan  # type: ignore[attr-defined,unused-ignore]

    read_rows: _lines.ReadRows = _scan.read_rows
except ImportError:  # test_scanner.py fails when a compiler is here but no build
    pytest.skip("no native scanner built", allow_module_level=True)


def reference(
    number: int, raw: str, layout: Layout, iter_skipped: int | None
) -> tuple[int, tuple[dict[str, Any], ...]] | None:
    """What the parser adds for ``raw`` in a run in its table with ``layout``, or
    None when that line does not go straight to rows without a warning."""
    line = _lines.as_line(number, raw)
    text = line.text
    if not line.complete or line.stream is not None:
        return None
    if undecorate_line(text) != (text, None) or not ROW_START.match(text):
        return None
    if "CCL " in text or "ailure" in text or "imeout" in text:
        return None  # glued NCCL output, an error message
    tokens = text.split()
    if split_trailing(tokens, layout)[1] or len(tokens) < 3 + layout.metric_tokens:
        return None
    try:
        keys, blocks = read_row(tokens, layout)
    except RowError:
        return None
    rows = []
    for placement, block in zip(layout.placements, blocks, strict=True):
        if block is None:
            continue
        if block.pop("over_tolerance"):
            return None
        if "i_p99" in layout.half and iter_skipped is not None:
            block["iter_skipped"] = iter_skipped
        row = {
            "line": number,
            "placement": placement,
            "reported_bytes": keys["size_bytes"],
            **keys,
            **block,
        }
        rows.append(row)
    return len(tokens), tuple(rows)


def _typed(value: object) -> object:
    """``value`` comparable exactly: types kept, NaN equal to NaN, -0.0 apart."""
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value.hex())
    if isinstance(value, dict):
        return [(k, _typed(v)) for k, v in value.items()]
    if isinstance(value, tuple | list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


_HALVES = (
    ("time", "algbw", "busbw", "wrong"),
    ("time", "algbw", "busbw", "wrong", "i_min", "i_max", "i_p99", "i_cv"),
    ("time", "algbw", "busbw"),
    ("time", "busbw", "algbw", "wrong"),
)
LAYOUTS = st.builds(
    Layout,
    keys=st.sampled_from(
        (
            ("size", "count", "type", "redop", "root"),
            ("size", "count", "type", "redop"),
            ("size", "count", "type", "root"),
            ("size", "count", "type"),
        )
    ),
    half=st.sampled_from(_HALVES),
    placements=st.sampled_from((("out-of-place", "in-place"), ("in-place",))),
    time_in_ms=st.booleans(),
    cputime=st.booleans(),
    wrong_kind=st.sampled_from((None, "count", "max_deviation")),
)
NUMBERS = (
    "0.00", "123.4", "15.48", "0", "3", "1e+05", "2e-07", "0e+00", "1E5", "1.",
    ".5", "+3", "-0.0", "1e500", "nan", "NaN", "-nan", "inf", "INF", "Infinity",
    "-1.5", "12345678901234567890.5", "9" * 130,
)  # fmt: skip
HOSTILE = (
    "N/A", "5*", "0*", "1_0", "0x1f", "\u0661", "\uff11", "1e", "e5", "--1", "", "1.2.3",
    "abc", "infinit", "nanx", "1e+5*", "2e-07*", "\x7f",
)  # fmt: skip
COUNTS = ("8", "2", "1024", "0", "00012", "999999999999999999", "1000000000000000000")
BAD_COUNTS = ("-8", "1e3", "9" * 25, "0x10", "\u0661\u0662", "+5")
MIDDLE = (
    "sum",
    "none",
    "-1",
    "0",
    "7",
    "avg",
    "2147483647",
    "2147483648",
    "-2147483649",
)
SEPARATORS = st.sampled_from((" ", "  ", "   ", "\t", " \t "))
ODD_SEPARATORS = st.sampled_from(("\x0b", "\x0c", "\x1c", "\u00a0", "\u3000"))
ENDINGS = st.sampled_from(("\n", "\r\n", "\r"))
ODD_ENDINGS = st.sampled_from(("", "\rX\n", "\n\n"))


@st.composite
def lines(draw: st.DrawFn, layout: Layout, *, hostile: bool) -> str:
    """A data line for ``layout``; with ``hostile``, any token may be odd."""

    def pick(good: tuple[str, ...], bad: tuple[str, ...] = HOSTILE) -> str:
        if hostile and draw(st.integers(0, 9)) == 0:
            return draw(st.sampled_from(bad + good))
        return draw(st.sampled_from(good))

    labels = sum(1 for k in layout.keys[3:] if k in ("redop", "root"))
    middle = draw(st.integers(0, labels + (1 if hostile else 0)))
    tokens = [pick(COUNTS, BAD_COUNTS), pick(COUNTS, BAD_COUNTS)]
    tokens.append(pick(tuple(DTYPES), ("float8", "Float", "bfloat", "i8")))
    tokens += [pick(MIDDLE) for _ in range(middle)]
    for _ in layout.placements:
        if not hostile and draw(st.integers(0, 7)) == 0:
            tokens += ["N/A"] * len(layout.half)  # a block not run
            continue
        tokens += [pick(NUMBERS) for _ in layout.half]
    if hostile and draw(st.booleans()):
        tokens.insert(draw(st.integers(0, len(tokens))), draw(st.sampled_from(HOSTILE)))
    separator = (
        draw(st.one_of(SEPARATORS, ODD_SEPARATORS)) if hostile else draw(SEPARATORS)
    )
    lead = draw(st.sampled_from(("  ", " ", "\t", "", "- ", "[1,0]<stdout>: ", " 3: ")))
    if not hostile and lead not in ("  ", " ", "\t"):
        lead = "  "
    tail = ""
    if hostile and draw(st.integers(0, 4)) == 0:
        tail = draw(st.sampled_from((" NCCL INFO x", " | |", " Test failure", " #")))
    ending = draw(st.one_of(ENDINGS, ODD_ENDINGS)) if hostile else draw(ENDINGS)
    return lead + separator.join(tokens) + tail + ending


@st.composite
def cases(draw: st.DrawFn, *, hostile: bool) -> tuple[Layout, int | None, list[str]]:
    layout = draw(LAYOUTS)
    iter_skipped = draw(st.one_of(st.none(), st.integers(0, 50)))
    return (
        layout,
        iter_skipped,
        draw(st.lists(lines(layout, hostile=hostile), min_size=1, max_size=8)),
    )


def _read(layout: Layout, iter_skipped: int | None, raws: list[str]) -> _lines.RowsRead:
    """Every line of ``raws`` read (a call stops after a line it leaves alone)."""
    spec = row_spec(layout, iter_skipped)
    assert spec is not None
    numbers = list(range(7, 7 + len(raws)))
    read: _lines.RowsRead = []
    while len(read) < len(raws):
        part = read_rows(numbers, raws, spec, len(read), len(raws))
        assert part
        assert all(part[:-1])  # a None is the last line of a read
        read += part
    return read


def _both(case: tuple[Layout, int | None, list[str]]) -> list[tuple[str, Any, Any]]:
    """Per line of ``case``: (line, what the native reader gives, the reference)."""
    layout, iter_skipped, raws = case
    read = _read(layout, iter_skipped, raws)
    return [
        (raw, native, reference(7 + index, raw, layout, iter_skipped))
        for index, (raw, native) in enumerate(zip(raws, read, strict=True))
    ]


@pytest.mark.slow
@given(cases(hostile=True))
@example(
    (
        Layout(("size", "count", "type", "redop", "root"), _HALVES[0], ("in-place",)),
        None,
        ["  8  2  float  sum  -1  1e500  0.00  0.00  0\n"],  # an infinite time
    )
)
def test_native_rows_are_the_parsers_or_none(
    case: tuple[Layout, int | None, list[str]],
) -> None:
    for raw, native, expected in _both(case):
        if native is not None:
            assert _typed(native) == _typed(expected), raw


@pytest.mark.slow
@given(cases(hostile=False))
def test_native_reader_takes_plain_rows(
    case: tuple[Layout, int | None, list[str]],
) -> None:
    """Plain rows the parser reads without a word are read natively, identically."""
    for raw, native, expected in _both(case):
        if expected is not None and not _has_impossible(raw):
            assert native is not None, raw
            assert _typed(native) == _typed(expected), raw


def _has_impossible(raw: str) -> bool:
    """Tokens the reader leaves to the parser although it reads them silently: a
    NaN or infinite value among those the parser checks only when present (the
    reader refuses any non-finite time, algbw or busbw), or 19 digits."""
    return any(
        t.lower().lstrip("+-") in ("nan", "inf", "infinity", "1e500")
        or t == "1000000000000000000"
        or len(t) > 100
        for t in raw.split()
    )


def test_row_dicts_in_order_and_types() -> None:
    """One modern row, both placements, by value: the dicts _row builds."""
    layout = Layout(
        ("size", "count", "type", "redop", "root"),
        _HALVES[0],
        ("out-of-place", "in-place"),
    )
    raw = (
        "     1048576        262144     float     sum      -1    203.2    5.16    "
        "9.68      0    207.2    5.06    9.49      0\n"
    )
    [read] = _read(layout, None, [raw])
    assert read is not None
    fields, rows = read
    assert fields == 13
    common = {
        "line": 7,
        "reported_bytes": 1048576,
        "size_bytes": 1048576,
        "count": 262144,
        "dtype": "float32",
        "redop": "sum",
        "root": None,
    }
    tail = {
        "wrong": 0.0,
        "time_min_us": None,
        "time_max_us": None,
        "time_p99_us": None,
        "stddev_pct": None,
        "wrong_kind": "count",  # the layout leaves it to each row: `0` is a count
        "cputime": False,
        "timestamp": None,
    }
    assert [list(r.items()) for r in rows] == [
        list(
            {
                "line": 7,
                "placement": "out-of-place",
                **{k: v for k, v in common.items() if k != "line"},
                "time_us": 203.2,
                "algbw_gbps": 5.16,
                "busbw_gbps": 9.68,
                **tail,
            }.items()
        ),
        list(
            {
                "line": 7,
                "placement": "in-place",
                **{k: v for k, v in common.items() if k != "line"},
                "time_us": 207.2,
                "algbw_gbps": 5.06,
                "busbw_gbps": 9.49,
                **tail,
            }.items()
        ),
    ]


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("  8  2  float  sum  -1  5.0  0.00  0.00  3*  5.0  0.00  0.00  0\n", "over"),
        ("  8  2  float  sum  -1  -5.0  0.00  0.00  0  5.0  0.00  0.00  0\n", "time"),
        ("  8  2  float  sum  -1  nan  0.00  0.00  0  5.0  0.00  0.00  0\n", "NaN"),
        ("  -8  2  float  sum  -1  5.0  0.00  0.00  0  5.0  0.00  0.00  0\n", "size"),
        ("  8  2  float  sum  -1  5.0  0.00  0.00  0  5.0  0.00  0.00\n", "short"),
        ("  8  2  float  sum  -1  5.0  0.00  0.00  0  5.0  0.00  0.00  0", "cut"),
        ("  8  2  float  sum  -1  5.0  0.00  0.00  0  5.0  0.00  0.00  0 |\n", "tail"),
        ("  8  2  float  sum  -1  5.0  0.00  0.00  0  5.0  0.00  0.00  0\r0\n", "CR"),
        ("  8  2  fp32  sum  -1  5.0  0.00  0.00  0  5.0  0.00  0.00  0\n", "type"),
        ("  8  2  float  sum  -1  5.0  0.00  0.00  0  N/A  0.00  0.00  0\n", "N/A"),
        ("  8  2  float  sum  -1  5.0  0.00  0.00  0  5.0  1_0  0.00  0\n", "_"),
        ("  8  2  float  sum  -1  5.0  0.00  0.00  0  5.0  0x1  0.00  0\n", "hex"),
        ("  8  2  float  sum  -1  5.0  0.00  0.00  0  5.0  0.00  0.00  \u0661\n", "Arabic-Indic digit"),
        ("  8  2  float  sum  -1  3e+00  0.00  0.00  0  5.0  0.00  0.00  0NCCL INFO x\n", "glued"),
        ("  8  2  float  sum  2147483648  5.0  0.00  0.00  0  5.0  0.00  0.00  0\n", "root"),
        ("  8  2  float  sum  -1  x  5.0  0.00  0.00  0  5.0  0.00  0.00  0\n", "wide"),
        ("  1000000000000000000  2  float  sum  -1  5.0  0.00  0.00  0  5.0  0.00  0.00  0\n", "19"),
    ],
)  # fmt: skip
def test_lines_left_to_the_parser(raw: str, why: str) -> None:
    """Each of these the parser reads with a warning, refuses or must look at
    itself: the native reader gives None."""
    layout = Layout(
        ("size", "count", "type", "redop", "root"),
        _HALVES[0],
        ("out-of-place", "in-place"),
    )
    assert _read(layout, None, [raw]) == [None], why


def test_layouts_the_reader_does_not_take() -> None:
    modern = Layout(
        ("size", "count", "type", "redop", "root"), _HALVES[0], ("in-place",)
    )
    assert row_spec(modern, None) is not None
    for layout in (
        Layout(modern.keys, modern.half, modern.placements, timestamp=True),
        Layout(modern.keys, (*modern.half, "i_xyz"), modern.placements),
        Layout(modern.keys, ("time", "time", "algbw"), modern.placements),
        Layout(modern.keys, ("algbw", "busbw"), modern.placements),
        Layout(modern.keys, modern.half, ()),
    ):
        assert row_spec(layout, None) is None, layout


# Real rows in NCCL INFO chatter (tests/fixtures/nccl/SOURCES.md).
_REAL = "superbench-testdata_reduce_a100_8gpu_c0_redop_root_cols_complete.log"


def test_real_log_rows_are_read_natively(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a real log, every data row is read natively (none falls back), and the
    tables are those of the line-by-line reading (test_scanner.py compares every
    fixture that way)."""
    path = FIXTURES / "nccl" / _REAL
    calls: list[tuple[int, int]] = []

    def counted(
        numbers: list[int], raws: list[str], spec: Any, start: int, limit: int
    ) -> _lines.RowsRead:
        read = read_rows(numbers, raws, spec, start, limit)
        calls.append((len(read), sum(r is not None for r in read)))
        return read

    monkeypatch.setattr(_lines, "read_rows", counted)
    monkeypatch.setattr(ncclparse.parsers, "SNIFF_LINES", 5)
    native = ncclparse.parse(path)
    monkeypatch.setattr(_lines, "read_rows", None)
    plain = ncclparse.parse(path)
    offered = sum(n for n, _ in calls)
    taken = sum(k for _, k in calls)
    assert native.measurements.equals(plain.measurements)
    assert native.runs.equals(plain.runs)
    assert native.accounting == plain.accounting
    [accounting] = native.accounting.values()
    assert offered == taken == accounting["measurement"] == 34


# --- rows read as columns (past a run's first KEEP_ROWS rows) ------------------------


@contextmanager
def few_rows_kept(keep: int = 3) -> Iterator[None]:
    """Runs keep ``keep`` rows as dicts, so that the rest of every fixture's rows are
    read as columns (the native reader's spill path) and spilled in small batches."""
    with (
        mock.patch.object(nccl_tests, "KEEP_ROWS", keep),
        mock.patch.object(_model, "KEEP_ROWS", keep),
        mock.patch.object(_model, "SPILL_ROWS", 2),
    ):
        yield


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_log_parses_identically_with_rows_as_columns(path: Path) -> None:
    data = path.read_bytes()
    with few_rows_kept():
        for text in (data, with_chatter(data)):
            fast, slow = both(text, _scan.scan_block)
            assert fast == slow


@pytest.mark.slow
@given(generated_logs(), st.integers(0, 6))
def test_generated_logs_parse_identically_with_rows_as_columns(
    text: str, keep: int
) -> None:
    with few_rows_kept(keep):
        fast, slow = both(text, _scan.scan_block)
    assert fast == slow


def test_columns_are_read_where_the_parser_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long run (9,000 rows past KEEP_ROWS) with what the parser must read itself
    among its rows: the same tables as line by line, most rows read as columns."""
    rng = random.Random(17)
    row = (
        "  {size:>10}  {count:>10}  float  sum  -1  {t:>7.1f}  1.00  1.88  0"
        "  {t:>7.1f}  1.00  1.88  0\n"
    )
    odd = (
        "  8  2  float  sum  -1  5.0  0.00  0.00  3*  5.0  0.00  0.00  0\n",
        "  8  2  float  sum  -1  N/A  0.00  0.00  0  5.0  0.00  0.00  0\n",
        "  8  2  float  sum  -1  5.0  0.00  0.00  0  5.0  0.00\n",
        "[1,0]<stdout>:  8  2  float  sum  -1  5.0  0.00  0.00  0  5.0  0.00  0.00  0\n",
        "node1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0\n",
        "not a row\n",
    )
    lines = [HEADER]
    for i in range(KEEP_ROWS + 4_500):
        lines.append(row.format(size=8 << (i % 20), count=2 << (i % 20), t=10 + i % 97))
        if rng.random() < 0.01:
            lines.append(rng.choice(odd))
        lines.append(rng.choice(CHATTER.splitlines(keepends=True)))
    text = "".join(lines) + "# Out of bounds values : 0 OK\n# Avg bus bandwidth : 1.5\n"
    batches = _counting(
        monkeypatch, "read_rows_columns", lambda out: len(out[0]) - out[0].count(0)
    )
    fast, slow = both(text, _scan.scan_block)
    assert fast == slow
    assert sum(batches) > 4_000


def _counting(
    monkeypatch: pytest.MonkeyPatch, name: str, count: Callable[[Any], int]
) -> list[int]:
    """Make the parser call the native reader ``name`` through a wrapper that
    appends ``count(its output)`` to the list returned."""
    counts: list[int] = []
    reader = getattr(_scan, name)

    def counted(*args: Any) -> Any:
        output = reader(*args)
        counts.append(count(output))
        return output

    monkeypatch.setattr(_lines, name, counted)
    return counts


HEADER = (
    "# nThread 1 nGpus 8 minBytes 8 maxBytes 8G step: 2(factor) warmup iters: 5 "
    "iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"
    "#  Rank  0 Group  0 Pid  11 on node-a device  0 [0x1b] NVIDIA H100\n#\n"
    "#       size         count      type   redop    root     time   algbw   busbw "
    "#wrong     time   algbw   busbw #wrong\n"
)


def test_each_line_is_read_once_however_often_runs_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Runs of two rows, each ended by a footer line that starts with a blank (so
    every line is in one Rows batch): a read stops at the footer, which the parser
    reads, and the next read starts after it. Reading on to the end of the batch
    each time was quadratic (2,000 runs took 11 s instead of 0.5 s)."""
    run = (
        "  8  2  float  sum  -1  5.0  0.00  0.00  0  5.0  0.00  0.00  0\n"
        "  16  4  float  sum  -1  5.0  0.00  0.00  0  5.0  0.00  0.00  0\n"
        " Avg bus bandwidth : 1.5\n"
    )
    text = HEADER + run * 2_000
    read = _counting(monkeypatch, "read_rows", len)
    fast, slow = both(text, _scan.scan_block)
    assert fast == slow
    assert sum(read) <= 2 * 3 * 2_000


@pytest.mark.parametrize("skip", ["1x", "9" * 25, "3"])
def test_a_params_line_with_an_odd_per_iter_skip(skip: str) -> None:
    """``per_iter_skip`` from a params line may be no count: the rows are read
    (iter_skipped null) the same way natively and line by line, with or without
    -I columns, past KEEP_ROWS too."""
    params = f"# nThread 1 nGpus 1 minBytes 8 maxBytes 8 per_iter_skip {skip}\n"
    iteration = (
        "#  size  count  type  redop  root  time  algbw  busbw  #wrong  i_min  i_max "
        "i_p99  i_cv%  time  algbw  busbw  #wrong  i_min  i_max  i_p99  i_cv%\n"
    )
    row = "  8  2  float  sum  -1" + "  5.0  0.00  0.00  0  4.0  6.0  5.9  1.2" * 2
    for header in (HEADER.split("\n#       size")[0] + "\n", iteration):
        text = params + header + (row + "\n") * 12
        with few_rows_kept():
            fast, slow = both(text, _scan.scan_block)
        assert fast == slow
        assert isinstance(fast[0], list)
        assert len(fast[0]) == 24, header


def test_rows_are_range_checked_unless_the_reader_checked_them() -> None:
    """_model.in_range drops (and names) a row whose integer does not fit its column;
    rows the native reader made (add_row(in_range=True)) are not checked again."""
    row = {"line": 3, "placement": "in-place", "size_bytes": 8, "root": 2**40}
    unchecked = _model.Run(tool="nccl-tests", first_line=1)
    unchecked.add_row(dict(row))
    assert _model.in_range(unchecked, unchecked.rows) == []
    assert unchecked.warnings.texts() == ["line 3: root out of range: row not read"]
    native = _model.Run(tool="nccl-tests", first_line=1)
    native.add_row(dict(row), in_range=True)
    assert _model.in_range(native, native.rows) == [row]
    assert native.warnings.texts() == []


def test_rows_added_are_counted_for_the_range_check_only_when_beyond_a_column() -> None:
    """A run counts the rows added that in_range must drop (each integer checked
    as the row is added), so a run whose rows all fit is not read again row by row;
    the bounds are the column's type's, both ends included."""
    run = _model.Run(tool="nccl-tests", first_line=1)
    fits = {"line": 3, "size_bytes": 2**63 - 1, "root": -(2**31), "count": None}
    run.add_row(fits)
    assert run.unchecked == 0
    for name, value in (("root", 2**31), ("size_bytes", -(2**63) - 1)):
        run.add_row({"line": 4, "placement": "in-place", name: value})
    assert run.unchecked == 2
    assert _model.in_range(run, run.rows) == [fits]
    assert run.warnings.texts() == [
        "line 4: root out of range: row not read",
        "line 4: size_bytes out of range: row not read",
    ]


_A3MEGA = "repo-ztan-a3mega_allreduce_16rank_2node_h100_complete.log"


def test_keys_that_change_from_row_to_row_are_read_as_columns() -> None:
    """Regression: a redop that changed from row to row came out as an earlier row's
    once rows were read as columns (past KEEP_ROWS): the string column's cache kept
    the address of a value already freed, which the next value's str reused."""
    fixture = FIXTURES / "nccl" / _A3MEGA
    head = fixture.read_text().splitlines(keepends=True)[:31]
    ops = ["sum", "prod", "max", "premulsum", "avg"]
    rows = [
        f"{8 * (i // 5 + 1):12d} {2 * (i // 5 + 1):13d}     float {ops[i % 5]:>9s}"
        "      -1    135.8    0.00    0.00      0    123.5    0.00    0.00      0\n"
        for i in range(2 * _model.KEEP_ROWS)
    ]
    text = "".join(head + rows) + "# Avg bus bandwidth    : 0.00 \n#\n"
    result = ncclparse.parse(text)
    redops = result.measurements.column("redop").to_pylist()
    # Two rows a line (out-of-place, in-place), each with its line's redop.
    assert redops == [ops[i % 5] for i in range(len(rows)) for _ in (0, 1)]


def test_row_specs_are_remembered_for_a_bounded_number_of_layouts() -> None:
    # A many-run log asks for the spec of the same few layouts once a native read.
    assert row_spec.cache_info().maxsize == 256
    keys, placements = ("size", "count", "type", "redop", "root"), ("in-place",)

    def spec(layout: Layout, skipped: int | None = None) -> tuple[Any, ...]:
        found = row_spec(layout, skipped)
        assert found is not None
        return found

    # Layouts equal but for one field, and counts that differ: specs of their own.
    microseconds = Layout(keys, _HALVES[0], placements)
    assert spec(Layout(keys, _HALVES[0], placements, time_in_ms=True))[3] is True
    assert spec(microseconds)[3] is False
    per_iteration = Layout(keys, _HALVES[1], placements)
    assert (spec(per_iteration, 2)[6], spec(per_iteration, 3)[6]) == (2, 3)
    assert spec(Layout(keys, _HALVES[0], placements)) is spec(microseconds)
