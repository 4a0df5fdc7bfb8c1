"""Human formatting: exact strings for the values reports really show."""

from __future__ import annotations

import math
import os

import pytest

from ncclparse.formatting import (
    MISSING,
    format_bytes,
    format_count,
    format_gbps,
    format_percent,
    format_time_us,
    shown_name,
)


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (8, "8 B"),
        (1000, "1000 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (500_000, "488 KiB"),
        (1000 * 1024, "1000 KiB"),
        (21430719.657551, "20.4 MiB"),  # the fitted crossover of the H100 example
        (2**33, "8 GiB"),
        (16 * 2**30, "16 GiB"),
        (2**50, "1 PiB"),
    ],
)
def test_format_bytes(size: float, text: str) -> None:
    assert format_bytes(size) == text


@pytest.mark.parametrize(
    ("time_us", "text"),
    [
        (0.0, "0 µs"),
        (0.000031, "0.031 ns"),  # ideal time of 8 bytes at 482 GB/s
        (0.42, "420 ns"),
        (1.0, "1 µs"),
        (25.085241, "25.1 µs"),
        (135.8, "136 µs"),
        (47535.0, "47.5 ms"),
        (2_310_000.0, "2.31 s"),
        (-8840.27, "-8.84 ms"),  # a negative residual stays readable
    ],
)
def test_format_time_us(time_us: float, text: str) -> None:
    assert format_time_us(time_us) == text


@pytest.mark.parametrize(
    ("gbps", "text"),
    [
        (0.0, "0 GB/s"),
        (0.00011, "0.00011 GB/s"),
        (2.941472, "2.94 GB/s"),
        (59.4, "59.4 GB/s"),
        (338.826704, "338.8 GB/s"),
        (482.142857, "482.1 GB/s"),
    ],
)
def test_format_gbps(gbps: float, text: str) -> None:
    assert format_gbps(gbps) == text


@pytest.mark.parametrize(
    ("fraction", "text"),
    [(0.702752, "70.3 %"), (0.0, "0.0 %"), (0.0004, "<0.1 %"), (1.2, "120.0 %")],
)
def test_format_percent(fraction: float, text: str) -> None:
    assert format_percent(fraction) == text


def test_format_percent_digits() -> None:
    assert format_percent(0.75, 0) == "75 %"


@pytest.mark.parametrize(
    "function",
    [format_bytes, format_time_us, format_gbps, format_percent, format_count],
)
@pytest.mark.parametrize("missing", [None, math.nan])
def test_missing_values_show_a_dash(function: object, missing: float | None) -> None:
    assert callable(function)
    assert function(missing) == MISSING == "\u2013"


def test_format_count() -> None:
    assert format_count(1234567.0) == "1,234,567"
    assert format_count(3e-08) == "3e-08"


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("logs/night 1.log", "logs/night 1.log"),
        (
            "a\nFAIL: 0 failed, 99 passed\nb.log",
            "a\\nFAIL: 0 failed, 99 passed\\nb.log",
        ),
        ("bell\x07\x08\t\r.log", "bell\\x07\\x08\\t\\r.log"),
        ("esc\x1b[31m\x7f\x85.log", "esc\\x1b[31m\\x7f\\x85.log"),
        (os.fsdecode(b"latin\xe9.log"), "latin\\xe9.log"),
        ("rtl\u202egol.log", "rtl\\u202egol.log"),
        ("x\ud800y", "x\\ud800y"),
        ("µs é 東京.log", "µs é 東京.log"),
    ],
)
def test_shown_name_is_one_printable_line_that_tells_the_file(
    name: str, shown: str
) -> None:
    assert shown_name(name) == shown
    assert shown_name(name).isprintable()
    shown_name(name).encode("utf-8")  # any output can hold it
