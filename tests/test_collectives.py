"""The collectives table: vocabulary, busbw factors and latency steps agree everywhere."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

import ncclparse
from ncclparse import collectives
from ncclparse.efficiency import HardwareOptions, analyze, busbw_factor
from ncclparse.schema import measurements_table
from tests.conftest import NCCL_LOGS


def test_every_collective_the_nccl_parser_reads_is_in_the_table() -> None:
    names = ncclparse.parse_many(NCCL_LOGS).measurements.column("collective")
    found = set(pc.unique(names.drop_null()).to_pylist())
    assert found >= {"all_reduce", "all_gather", "alltoall", "sendrecv", "broadcast"}
    assert found <= set(collectives.COLLECTIVES)


@pytest.mark.parametrize(
    ("collective", "factor"),
    [
        # nccl-tests doc/PERFORMANCE.md on 16 ranks: 2(n-1)/n, (n-1)/n, 1.
        ("all_reduce", 30 / 16),
        ("all_gather", 15 / 16),
        ("reduce_scatter", 15 / 16),
        ("alltoall", 15 / 16),
        ("gather", 15 / 16),
        ("broadcast", 1.0),
        ("reduce", 1.0),
        ("sendrecv", 1.0),
        ("hypercube", 1.0),
    ],
)
def test_busbw_factor(collective: str, factor: float) -> None:
    assert busbw_factor(collective, 16) == pytest.approx(factor)


@pytest.mark.parametrize(
    ("collective", "ranks", "steps"),
    [
        ("all_reduce", 16, 8),  # recursive halving-doubling: 2 log2 16
        ("all_reduce", 12, 8),  # 2 ceil(log2 12)
        ("all_gather", 16, 15),  # ring: n - 1
        ("reduce_scatter", 16, 15),
        ("alltoall", 16, 15),  # pairwise exchange
        ("broadcast", 16, 4),  # binomial tree: log2 16
        ("reduce", 16, 4),
        ("gather", 16, 4),
        ("scatter", 16, 4),
        ("sendrecv", 16, 1),  # one message
        ("sendrecv", 1, 1),
        ("all_reduce", 1, 0),
        ("hypercube", 16, None),
        ("alltoallv", 16, None),
        ("no_such_thing", 16, None),
    ],
)
def test_latency_steps(collective: str, ranks: int, steps: int | None) -> None:
    assert collectives.latency_steps(collective, ranks) == steps


@pytest.mark.parametrize(("collective", "steps"), [("sendrecv", 1), ("gather", 3)])
def test_engine_uses_the_same_steps(collective: str, steps: int) -> None:
    """The hardware-latency gap is steps x alpha: 2 us per step on 8 ranks."""
    rows = measurements_table(
        {
            "source": ["x"] * 3,
            "run": [0] * 3,
            "line": [1, 2, 3],
            "tool": ["nccl-tests"] * 3,
            "collective": [collective] * 3,
            "placement": ["out-of-place"] * 3,
            "size_bytes": [1024, 1 << 20, 1 << 30],
            "reported_bytes": [1024, 1 << 20, 1 << 30],
            "dtype": ["float32"] * 3,
            "time_us": [20.0, 60.0, 30_000.0],
            "nranks": [8] * 3,
            "nnodes": [1] * 3,
            "cputime": [False] * 3,
            "grouped": [False] * 3,
        }
    )
    hardware = HardwareOptions(profile="h100", hw_latency="2us")
    got = analyze(rows, hardware).rows.column("gap_hw_latency_us").to_pylist()
    assert got == [pytest.approx(2.0 * steps)] * 3
