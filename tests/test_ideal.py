"""The ideal of every bound, tested on physics: a sweep whose plateau runs at the
ideal's line rate is judged ~100 % and healthy; at half of it, it is flagged.

Each sweep is T(n) = 20 µs + factor x n / rate: its busbw approaches ``rate`` at the
largest sizes, as a fabric at that rate would print it. The ideals, by hand, for the
h100 profile (B = 450 GB/s per GPU, I = 8 x 50 GB/s per node, one NIC per GPU):
"""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from ncclparse.collectives import TABLE, BusbwKind
from ncclparse.efficiency import HardwareOptions, analyze, ideal_bandwidth
from ncclparse.health.rules import VerdictPolicy
from ncclparse.health.verdict import AnalysedRows, judge_run
from ncclparse.schema import measurements_table

SIZES = [2**k for k in range(3, 35)]  # 8 B to 16 GiB
CASES = [
    # collective, ranks, nodes, profile, NCCL_ALGO, line rate (busbw GB/s) by hand
    ("all_reduce", 8, 1, "h100", "Ring", 450.0),  # one node: B
    ("all_reduce", 8, 1, "h100", "NVLS", 2 * 7 / 8 * 450),  # 787.5: send + receive
    ("all_reduce", 16, 2, "h100", "Ring", 400.0),  # min(B, I)
    ("all_reduce", 16, 2, "h100", "Tree", 450 * 15 / 14),  # min(2*15/16*400, 482.1)
    ("all_reduce", 16, 2, "h100", "NVLSTree", 750.0),  # min(2*15/16*400, 787.5)
    ("all_reduce", 16, 2, "h100", "CollNetDirect", 450 * 15 / 14),  # 750 vs 482.1
    ("all_reduce", 32, 4, "h100", "Tree", 31 / 32 * 400),  # interior: (N-1)/N I
    ("all_reduce", 32, 4, "h100", "NVLSTree", 31 / 32 * 400),
    ("all_reduce", 64, 8, "h100", "Ring", 400.0),  # a ring never beyond I
    ("all_reduce", 2, 2, "h100", "Ring", 50.0),  # one GPU per node reaches one NIC
    ("all_reduce", 8, 2, "h100", "Ring", 200.0),  # 4 GPUs reach 4 NICs: I = 200
    ("all_gather", 16, 2, "h100", "Ring", 400.0),  # ring class, as all_reduce
    ("reduce_scatter", 16, 2, "h100", "Ring", 400.0),
    ("all_gather", 2, 2, "h100", "PAT", 50.0),  # one GPU per node: I
    ("alltoall", 8, 1, "h100", None, 450.0),  # one node: B
    ("alltoall", 16, 2, "h100", None, 400 * 15 / (8 * 8)),  # I(N-1)/(P(N-P))
    ("sendrecv", 16, 2, "h100", None, 50.0),  # one GPU's NIC crosses the boundary
    ("sendrecv", 8, 1, "h100", None, 450.0),
    ("broadcast", 16, 2, "h100", None, 400.0),  # min(I, B)
    ("reduce", 16, 2, "h100", None, 400.0),
    ("gather", 16, 2, "h100", None, 500.0),  # min(I(N-1)/(N-P) = 750, B + g = 500)
    ("scatter", 16, 2, "h100", None, 500.0),
    ("all_reduce", 2, 1, "mi300x", "Ring", 64.0),  # mesh: 2 GPUs share one link
    ("all_reduce", 8, 1, "mi300x", "Ring", 7 * 64.0),  # 7 links each
    ("alltoall", 4, 1, "mi300x", None, 3 * 64.0),
]
LINE_RATE = re.compile(r"([\d.]+) % of (?:an? [\w() -]+'s|its) line rate")


def _sweep(collective: str, ranks: int, nodes: int, rate: float) -> pa.Table:
    kind = TABLE[collective].busbw
    factor = {
        BusbwKind.REDUCE_ALL: 2 * (ranks - 1) / ranks,
        BusbwKind.GATHER_ALL: (ranks - 1) / ranks,
        BusbwKind.ONE: 1.0,
    }[kind]
    n = len(SIZES)
    table = measurements_table(
        {
            "source": ["x.log"] * n,
            "run": [0] * n,
            "line": list(range(1, n + 1)),
            "tool": ["nccl-tests"] * n,
            "collective": [collective] * n,
            "placement": ["out-of-place"] * n,
            "size_bytes": SIZES,
            "reported_bytes": SIZES,
            "dtype": ["float32"] * n,
            "redop": ["sum"] * n,
            "time_us": [20.0 + factor * s / (rate * 1e3) for s in SIZES],
            "nranks": [ranks] * n,
            "nnodes": [nodes] * n,
            "cputime": [False] * n,
            "grouped": [False] * n,
        }
    )
    return table


def _judge(
    collective: str, ranks: int, nodes: int, profile: str, algo: str | None, rate: float
) -> tuple[float, str, str]:
    analysis = analyze(
        _sweep(collective, ranks, nodes, rate),
        HardwareOptions(profile=profile),
        _runs("IB", [], algo),
    )
    rows = analysis.rows.to_pandas()
    run = {"status": "complete", "rows": len(rows), "errors": [], "last_line": 40}
    verdict = judge_run(run, AnalysedRows(rows), VerdictPolicy())
    return float(rows["ideal_busbw_gbps"].iloc[-1]), verdict.label, verdict.headline


def _line_rate_pct(headline: str) -> float:
    found = LINE_RATE.search(headline)
    assert found, headline
    return float(found.group(1))


@pytest.mark.parametrize(
    ("collective", "ranks", "nodes", "profile", "algo", "ideal"), CASES
)
def test_line_rate_is_healthy(
    collective: str,
    ranks: int,
    nodes: int,
    profile: str,
    algo: str | None,
    ideal: float,
) -> None:
    got, label, headline = _judge(collective, ranks, nodes, profile, algo, ideal)
    assert got == pytest.approx(ideal, rel=1e-9)
    assert label == "OK", headline
    # The plateau includes sizes a little below the peak: ~99 %, never above.
    assert 99.0 <= _line_rate_pct(headline) <= 100.0


@pytest.mark.parametrize(
    ("collective", "ranks", "nodes", "profile", "algo", "ideal"), CASES
)
def test_half_rate_is_flagged(
    collective: str,
    ranks: int,
    nodes: int,
    profile: str,
    algo: str | None,
    ideal: float,
) -> None:
    _, label, headline = _judge(collective, ranks, nodes, profile, algo, ideal / 2)
    assert label in ("CHECK", "FAIL"), headline
    assert 49.0 <= _line_rate_pct(headline) <= 50.0
    assert _judge(collective, ranks, nodes, profile, algo, ideal / 3)[1] == "FAIL"


def test_aiboosters_worked_example() -> None:
    """The AIBooster documentation's example: B 450, I 100, 8 GPUs x 2 nodes."""
    found = ideal_bandwidth("450GB/s", "100GB/s", gpus_per_node=8, nodes=2)
    assert found.ideal_busbw_gbps == pytest.approx(187.5)
    assert found.intra_term_gbps == pytest.approx(450 * 15 / 14)
    assert found.bound == "inter"


def _runs(net: str | None, nics: list[str], algo: str | None = None) -> pa.Table:
    """A runs table with what NCCL's INFO lines said of the network and the
    algorithm (schema.md)."""
    return pa.table(
        {
            "source": ["x.log"],
            "run": pa.array([0], pa.int32()),
            "tool": ["nccl-tests"],
            "net": [net],
            "nics": [nics],
            "gdr": [True],
            "local_ranks": pa.array([None], pa.int32()),
            "nccl_algo": [algo],
        }
    )


@pytest.mark.parametrize(
    ("net", "nics", "ideal"),
    [
        # NCCL uses 4 of the node's NICs: 8 GPUs reach 4 x 50, ring 200*15*2/16 = 375.
        ("IB", ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"], 375.0),
        # Sockets are not the profile's RDMA NICs: the profile's 8 x 50 stands.
        ("Socket", ["eth0"], 450 * 15 / 14),
        (None, [], 450 * 15 / 14),
    ],
)
def test_the_logs_nic_count_replaces_the_profiles(
    net: str | None, nics: list[str], ideal: float
) -> None:
    rows = analyze(
        _sweep("all_reduce", 16, 2, 100.0),
        HardwareOptions(profile="h100"),
        _runs(net, nics),
    ).rows
    assert rows.column("ideal_busbw_gbps")[-1].as_py() == pytest.approx(ideal)


def test_a_socket_fallback_between_nodes_is_named() -> None:
    rows = analyze(
        _sweep("all_reduce", 16, 2, 400.0), HardwareOptions(profile="h100")
    ).rows
    run = {
        "status": "complete",
        "rows": rows.num_rows,
        "errors": [],
        "last_line": 40,
        "net": "Socket",
        "nics": ["eth0"],
        "nnodes": 2,
    }
    verdict = judge_run(run, AnalysedRows(rows.to_pandas()), VerdictPolicy())
    assert verdict.label == "CHECK"
    assert verdict.headline == (
        "NCCL moved data between nodes over TCP sockets (eth0), not RDMA: expected "
        "only where the nodes have no InfiniBand/RoCE/EFA"
    )


def _with_nics(rate: float, nics: int) -> tuple[str, str]:
    """A 2 x 8 all_reduce at ``rate`` busbw judged with no hardware option (the
    device matches the h100 preset), its log naming ``nics`` IB NICs."""
    sweep = _sweep("all_reduce", 16, 2, rate)
    at = sweep.column_names.index("device")
    devices = pa.array(["NVIDIA H100 80GB HBM3"] * sweep.num_rows)
    sweep = sweep.set_column(at, "device", devices)
    names = [f"mlx5_{i}" for i in range(nics)]
    runs = _runs("IB", names, "Ring")
    analysis = analyze(sweep, HardwareOptions(), runs)
    rows = analysis.rows.to_pandas()
    run = {"status": "complete", "rows": len(rows), "errors": [], "last_line": 40}
    verdict = judge_run(run, AnalysedRows(rows), VerdictPolicy())
    assert set(rows["ideal_basis"].dropna()) == {"nics read"}
    return verdict.label, verdict.headline


def test_nics_named_without_their_speed_are_judged_between_speeds() -> None:
    """The log names 8 NICs, the preset says 400 Gb/s each, nothing says their
    speed: a ring between 8 x 12.5 = 100 GB/s (healthy 96) and 8 x 50 = 400 (369)."""
    # 44 GB/s: poor even on 100 Gb/s NICs (44 / 96 = 45.8 %).
    label, headline = _with_nics(44.0, 8)
    assert label == "FAIL", headline
    assert headline.startswith("far below healthy whatever the NICs' speed: ")
    # 260 GB/s: above what 100 Gb/s NICs allow, so they are ruled out; 260 / 369.
    label, headline = _with_nics(260.0, 8)
    assert label == "CHECK", headline
    assert "100 Gb/s" not in headline
    # 90 GB/s: healthy on 100 Gb/s NICs, far below on 400 Gb/s ones: a NOTE.
    label, headline = _with_nics(90.0, 8)
    assert label == "NOTE", headline
    assert headline.startswith("depends on the NICs' speed: ")
    assert headline.endswith("pass --profile or --inter-bw with your NICs to tell")
