"""Units as people write them: decimal bandwidths, sizes and times; ambiguity rejected."""

from __future__ import annotations

import pytest

from ncclparse.errors import ProfileError
from ncclparse.units import bandwidth_gbps, size_bytes, time_us


@pytest.mark.parametrize(
    ("text", "gbps"),
    [
        ("400Gbps", 50.0),  # 400 Gbps = 50 GB/s
        ("400 Gb/s", 50.0),
        ("200 Gbit/s", 25.0),
        ("50GB/s", 50.0),
        ("450 GB/s", 450.0),  # B in the AIBooster ideal's example
        ("50GBps", 50.0),
        ("1.6Tb/s", 200.0),
        ("1.8TB/s", 1800.0),
        ("12500MB/s", 12.5),
        ("100000Mbps", 12.5),  # 100GbE = 12.5 GB/s
        ("1GiB/s", 1.073741824),
        ("3e2 GB/s", 300.0),
        (450, 450.0),
        (12.5, 12.5),
    ],
)
def test_bandwidth(text: str | float, gbps: float) -> None:
    assert bandwidth_gbps(text) == pytest.approx(gbps)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "50G",
            "bandwidth '50G' is ambiguous (bits or bytes? decimal or binary?): "
            "write 50GB/s for bytes or 50Gbps for bits",
        ),
        (
            "450",
            "bandwidth '450' has no unit: write e.g. 450GB/s (bytes) or 400Gbps (bits)",
        ),
        (
            "400gbps",
            "bandwidth '400gbps' is ambiguous: write 400GB/s (bytes) or 400Gbps "
            "(bits); the case of B/b tells bytes from bits",
        ),
        (
            "50 GBPS",
            "bandwidth '50 GBPS' is ambiguous: write 50GB/s (bytes) or 50Gbps "
            "(bits); the case of B/b tells bytes from bits",
        ),
        ("10GB", "'10GB' is a size, not a bandwidth: write 10GB/s"),
        (
            "fast",
            "cannot read 'fast' as a bandwidth: write e.g. 450GB/s (bytes) or "
            "400Gbps (bits)",
        ),
        (
            "5 furlongs/s",
            "unknown bandwidth unit in '5 furlongs/s': write e.g. 450GB/s or 400Gbps",
        ),
    ],
)
def test_bandwidth_rejected(text: str, message: str) -> None:
    with pytest.raises(ProfileError) as info:
        bandwidth_gbps(text)
    assert str(info.value) == message


@pytest.mark.parametrize("value", ["0GB/s", "-5GB/s", 0.0, float("nan"), float("inf")])
def test_bandwidth_must_be_positive(value: str | float) -> None:
    with pytest.raises(ProfileError, match="must be a positive number"):
        bandwidth_gbps(value)


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [
        ("10GB", 10**10),  # 10 GB all_reduce on 256 ranks, 2 us, 50 GB/s
        ("1.5 MB", 1_500_000),
        ("100MB", 10**8),  # 100 MB on 16 ranks, 10 us, 100 GB/s
        ("0.875GB", 875_000_000),  # Aurora data-path projection, intra-node
        ("100MiB", 100 * 2**20),  # ring all-reduce sweep over K ranks
        ("1GiB", 2**30),
        ("1048576", 1048576),
        ("64 B", 64),
        (4096, 4096),
        (2.5e8, 250_000_000),
    ],
)
def test_size(text: str | float, nbytes: int) -> None:
    assert size_bytes(text) == nbytes


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "8G",
            "size '8G' is ambiguous (nccl-tests reads G as binary): write 8GB for "
            "1e9-style units or 8GiB for binary",
        ),
        ("10GB/s", "'10GB/s' is a bandwidth, not a size: write e.g. 10GB"),
        ("10Gb", "size '10Gb' is in bits: write bytes, e.g. 10GB"),
        ("4Gi", "size '4Gi' is missing its B: write 4GiB"),
        ("1.5", "size '1.5' is not a whole number of bytes"),
        (
            "2 parsecs",
            "unknown size unit in '2 parsecs': write e.g. 10GB, 64MiB or 1048576",
        ),
    ],
)
def test_size_rejected(text: str, message: str) -> None:
    with pytest.raises(ProfileError) as info:
        size_bytes(text)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("text", "us"),
    [
        ("2us", 2.0),
        ("1.5 ms", 1500.0),
        ("500ns", 0.5),
        ("0.1s", 1e5),
        ("2 µs", 2.0),
        ("2μs", 2.0),
        (7.5, 7.5),
        ("0us", 0.0),
    ],
)
def test_time(text: str | float, us: float) -> None:
    assert time_us(text) == pytest.approx(us)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2", "time '2' has no unit: write e.g. 2us, 1.5ms or 0.1s"),
        ("2 hours", "unknown time unit in '2 hours': write ns, us, ms or s"),
        ("-1us", "time '-1us' must be a non-negative number"),
    ],
)
def test_time_rejected(text: str, message: str) -> None:
    with pytest.raises(ProfileError) as info:
        time_us(text)
    assert str(info.value) == message
