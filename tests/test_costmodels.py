"""Worked examples reproduced through ncclparse.efficiency.costmodels, to the printed precision.

The examples apply the alpha-beta (Hockney) model, the collective cost models of Thakur,
Rabenseifner and Gropp (IJHPCA 2005) and Chan et al. (2007), and the Aurora oneCCL
data-path projection. Expected numbers are the printed ones; where a printed number is
not what its own formula and figures give, the test asserts the formula's value and says
why.
"""

from __future__ import annotations

from typing import TypedDict

import pytest

from ncclparse.efficiency import costmodels as cm
from ncclparse.errors import ProfileError

MS = 1e3  # µs per ms


def ms(value_us: float, digits: int) -> float:
    return round(value_us / MS, digits)


# --- collective cost models (Thakur, Rabenseifner and Gropp 2005; Chan et al. 2007) ---


def test_cost_table_terms() -> None:
    """Each row of the cost table: latency steps and bandwidth multiplier at P = 8."""
    p, n = 8, 8e9  # 8e9 bytes at 1 GB/s -> n/beta = 8e6 µs, alpha = 1 µs
    expected = {  # (collective, algorithm): (latency steps, multiplier of n/beta)
        ("broadcast", "tree"): (3, 3),
        ("reduce", "tree"): (3, 3),
        ("scatter", "binomial"): (3, 7 / 8),
        ("gather", "binomial"): (3, 7 / 8),
        ("all_reduce", "ring"): (14, 14 / 8),
        ("all_reduce", "tree"): (6, 6),
        ("all_reduce", "rhd"): (6, 14 / 8),
        ("all_gather", "ring"): (7, 7 / 8),
        ("reduce_scatter", "ring"): (7, 7 / 8),
        ("alltoall", "pairwise"): (7, 7 / 8),
        ("sendrecv", "direct"): (1, 1),
    }
    for (coll, algo), (steps, mult) in expected.items():
        got = cm.predict(coll, int(n), p, 1.0, 1.0, algo)
        assert got.latency_us == pytest.approx(steps), coll
        assert got.bandwidth_us == pytest.approx(mult * 8e6), coll
        assert got.time_us == pytest.approx(got.latency_us + got.bandwidth_us)


def test_default_all_reduce_algorithm_is_ring() -> None:
    ring = cm.predict("all_reduce", 10**9, 8, 1.0, 1.0, "ring")
    assert cm.predict("all_reduce", 10**9, 8, 1.0, 1.0) == ring


def test_hierarchical_8x8_2gb_example() -> None:
    """8 x 8 GPUs, 2 GB: phase 2 = 8.82 ms, flat ring 79.38 ms, 3.9x faster.

    The worked example prints phase 1 = phase 3 = 5.81 ms and a total of 20.44 ms: it rounded
    7/8 x 2e9 / 3e11 s = 5.833 ms down to "5.8 ms" before adding 7 µs. The formula gives
    5.84 ms per intra phase and 20.50 ms in total.
    """
    hier = cm.hierarchical_all_reduce("2GB", 8, 8, "1us", "300GB/s", "5us", "50GB/s")
    assert ms(hier.all_reduce.time_us, 2) == 8.82
    assert ms(hier.all_reduce.latency_us, 2) == 0.07
    assert ms(hier.reduce_scatter.time_us, 2) == 5.84  # printed: 5.81 (see docstring)
    assert ms(hier.time_us, 2) == 20.50  # printed: 20.44
    flat = cm.predict("all_reduce", "2GB", 64, "5us", "50GB/s")
    assert ms(flat.latency_us, 2) == 0.63
    assert ms(flat.bandwidth_us, 2) == 78.75
    assert ms(flat.time_us, 2) == 79.38
    assert round(flat.time_us / hier.time_us, 1) == 3.9


def test_busbw_example_35_gbps() -> None:
    """AllReduce 1 GB on 8 GPUs in 50 ms: algbw 20, busbw 35 GB/s, 70 % of 400 Gbps.

    Bus bandwidth factor from NVIDIA nccl-tests doc/PERFORMANCE.md.
    """
    from ncclparse.efficiency import busbw_factor
    from ncclparse.units import bandwidth_gbps

    algbw = 1e9 / 0.05 / 1e9
    busbw = algbw * busbw_factor("all_reduce", 8)
    assert algbw == 20.0
    assert busbw == pytest.approx(35.0)
    assert busbw / bandwidth_gbps("400Gbps") == pytest.approx(0.70)


def test_16_ranks_100mb_ring_all_gather_and_hierarchical() -> None:
    """P=16, 100 MB, 10 µs, 100 GB/s: ring AR 2.175 ms, AG 1.09 ms, 4x4 hier 1.995 ms."""
    ar = cm.predict("all_reduce", "100MB", 16, "10us", "100GB/s")
    assert (ms(ar.latency_us, 3), ms(ar.bandwidth_us, 3), ms(ar.time_us, 3)) == (
        0.3,
        1.875,
        2.175,
    )
    ag = cm.predict("all_gather", "100MB", 16, "10us", "100GB/s")
    assert (ms(ag.latency_us, 2), ms(ag.bandwidth_us, 4)) == (0.15, 0.9375)
    assert ms(ag.time_us, 2) == 1.09
    hier = cm.hierarchical_all_reduce(
        "100MB", 4, 4, "10us", "100GB/s", "10us", "100GB/s"
    )
    assert ms(hier.reduce_scatter.time_us, 2) == 0.78
    assert ms(hier.all_reduce.time_us, 3) == 0.435
    assert ms(hier.time_us, 3) == 1.995
    assert round(ar.time_us / hier.time_us, 2) == 1.09


def test_1gb_in_80ms_on_8_gpus_efficiency() -> None:
    """8-GPU AllReduce of 1 GB in 80 ms on 400 Gbps: 12.5, 21.875 GB/s, 43.75 %."""
    from ncclparse.efficiency import busbw_factor, ideal_bandwidth

    algbw = 1e9 / 0.08 / 1e9
    busbw = algbw * busbw_factor("all_reduce", 8)
    peak = ideal_bandwidth("400Gbps", gpus_per_node=8).ideal_busbw_gbps
    assert (algbw, busbw, peak) == (12.5, 21.875, 50.0)
    assert round(busbw / peak * 100, 2) == 43.75


def test_tp_and_dp_training_prediction() -> None:
    """TP AllReduce of 61 x 4096 x 5120 x 2 bytes (2.56 GB) = 14.9 ms; DP 114 ms.

    The printed 2,384 ms is 160 x the rounded 14.9 ms; unrounded it is 2,390 ms.
    """
    n_act = 61 * 4096 * 5120 * 2
    assert round(n_act / 1e9, 2) == 2.56
    tp = cm.predict("all_reduce", n_act, 8, "1us", "300GB/s")
    assert ms(tp.latency_us, 3) == 0.014
    assert ms(tp.time_us, 1) == 14.9
    assert round(160 * ms(tp.time_us, 1)) == 2384
    assert round(160 * tp.time_us / MS) == 2390  # unrounded
    dp = cm.predict("all_reduce", "3.25GB", 8, "5us", "50GB/s")
    assert ms(dp.bandwidth_us, 2) == 113.75
    assert round(dp.time_us / MS) == 114
    assert round(2384 / (2384 + 114) * 100, 1) == 95.4


def test_hierarchical_8x8_versus_16x4() -> None:
    """8x8: 11.67 + 17.57 + 11.67 ms; 16x4: 10 + 37.65 + 10 ms; 8x8 is 1.41x faster.

    The printed totals 40.91 and 57.65 ms add rounded phases; unrounded they are 40.92
    and 57.66 ms.
    """
    a = cm.hierarchical_all_reduce("4GB", 8, 8, "1us", "300GB/s", "5us", "50GB/s")
    b = cm.hierarchical_all_reduce("4GB", 4, 16, "1us", "300GB/s", "5us", "50GB/s")
    assert [ms(p.time_us, 2) for p in a.phases] == [11.67, 17.57, 11.67]
    assert [ms(p.time_us, 2) for p in b.phases] == [10.0, 37.65, 10.0]
    assert round(sum(ms(p.time_us, 2) for p in a.phases), 2) == 40.91
    assert round(sum(ms(p.time_us, 2) for p in b.phases), 2) == 57.65
    assert (ms(a.time_us, 2), ms(b.time_us, 2)) == (40.92, 57.66)
    assert round(b.time_us / a.time_us, 2) == 1.41


def test_overlap_80_percent() -> None:
    """2000 ms compute, 600 ms comm, 80 % overlap: 2120 ms, 1.23x; 1.30x at most."""
    assert cm.overlapped_time(2000, 600, 0.0) == 2600
    assert cm.overlapped_time(2000, 600, 0.8) == pytest.approx(2120)
    assert round(2600 / cm.overlapped_time(2000, 600, 0.8), 2) == 1.23
    assert round(2600 / cm.overlapped_time(2000, 600, 1.0), 2) == 1.30
    assert round((2600 - 2120) / 2600 * 100, 1) == 18.5
    with pytest.raises(ProfileError, match="between 0 and 1"):
        cm.overlapped_time(1, 1, 1.5)


def test_70b_worked_example() -> None:
    """TP 123 ms, DP 612.6 ms, PP 20.5 ms, total 757 ms.

    TP: the printed example rounds 0.3733 ms to 0.37 ms (320 x 0.384 = 122.9 -> "123");
    unrounded it is 123.9 ms. PP: it drops the 5 µs (16 x 1.28 = 20.48); with it 20.56 ms.
    The total, 757 ms, holds either way.
    """
    tp = cm.predict("all_reduce", "64MB", 8, "1us", "300GB/s")
    assert ms(tp.bandwidth_us, 2) == 0.37
    assert round(320 * (0.014 + 0.37)) == 123
    assert ms(320 * tp.time_us, 1) == 123.9
    dp = cm.predict("all_reduce", "17.5GB", 8, "5us", "50GB/s")
    assert (ms(dp.bandwidth_us, 1), ms(dp.time_us, 1)) == (612.5, 612.6)
    pp = cm.predict("sendrecv", "64MB", 2, "5us", "50GB/s")
    assert ms(pp.bandwidth_us, 2) == 1.28
    assert round(16 * 1.28, 1) == 20.5
    assert ms(16 * pp.time_us, 2) == 20.56
    assert round((320 * tp.time_us + dp.time_us + 16 * pp.time_us) / MS) == 757


def test_memory_copy() -> None:
    """1 GB over PCIe Gen5 at 64 GB/s ~ 16 ms (15.625 ms)."""
    assert cm.copy_time_us("1GB", "64GB/s") == pytest.approx(15625)


# --- ring all-reduce sweeps: 100 MiB on K ranks, sizes on 16 ranks (5 us, 100 GB/s) ---

RING_K_SWEEP = [  # K, latency(ms), bandwidth(ms), total(ms), BW factor
    (2, 0.0100, 1.049, 1.059, 1.0000),
    (4, 0.0300, 1.573, 1.603, 1.5000),
    (8, 0.0700, 1.835, 1.905, 1.7500),
    (16, 0.1500, 1.966, 2.116, 1.8750),
    (64, 0.6300, 2.064, 2.694, 1.9688),
    (256, 2.5500, 2.089, 4.639, 1.9922),
    (1024, 10.2300, 2.095, 12.325, 1.9980),
]
RING_SIZE_SWEEP = [  # bytes, latency(ms), bandwidth(ms), regime
    (64, 0.1500, 0.0000, "latency-bound"),
    (1024, 0.1500, 0.0000, "latency-bound"),
    (16384, 0.1500, 0.0003, "latency-bound"),
    (262144, 0.1500, 0.0049, "latency-bound"),
    (4194304, 0.1500, 0.0786, "latency-bound"),
    (67108864, 0.1500, 1.2583, "bandwidth-bound"),
    (1073741824, 0.1500, 20.1327, "bandwidth-bound"),
]


@pytest.mark.parametrize(("k", "lat", "bw", "total", "factor"), RING_K_SWEEP)
def test_ring_worker_sweep(
    k: int, lat: float, bw: float, total: float, factor: float
) -> None:
    got = cm.predict("all_reduce", "100MiB", k, "5us", "100GB/s", "ring")
    assert (ms(got.latency_us, 4), ms(got.bandwidth_us, 3)) == (lat, bw)
    assert ms(got.time_us, 3) == total
    assert round(2 * (k - 1) / k, 4) == factor


@pytest.mark.parametrize(("n", "lat", "bw", "regime"), RING_SIZE_SWEEP)
def test_ring_size_sweep(n: int, lat: float, bw: float, regime: str) -> None:
    got = cm.predict("all_reduce", n, 16, "5us", "100GB/s", "ring")
    assert (ms(got.latency_us, 4), ms(got.bandwidth_us, 4)) == (lat, bw)
    assert cm.regime(got.latency_us, got.bandwidth_us) == regime


def test_ring_crossover_65536_kib() -> None:
    """Crossover near n = 65536 KiB for K=16: the first swept size with bw >= latency."""
    sweep = [n for n, *_ in RING_SIZE_SWEEP]
    first = next(
        n
        for n in sweep
        if (p := cm.predict("all_reduce", n, 16, 5.0, 100.0)).bandwidth_us
        >= p.latency_us
    )
    assert first // 1024 == 65536
    # Single-message n* = alpha x bandwidth = 500 kB; the K=16 collective
    # crossover K x n* = 8 MB is larger because the latency term is multiplied by 2(K-1)
    # and the bandwidth term only by 2(K-1)/K.
    assert cm.crossover_bytes("5us", "100GB/s") == pytest.approx(5e5)
    assert cm.regime(5.0, 1024 / 1e5) == "latency-bound"  # 1 KiB control message
    assert cm.regime(5.0, 50 * 2**20 / 1e5) == "bandwidth-bound"  # 50 MiB buffer
    ring = cm.predict("all_reduce", 8_000_000, 16, 5.0, 100.0)
    assert ring.latency_us == pytest.approx(ring.bandwidth_us)


def test_rhd_never_loses_to_ring() -> None:
    """With the same bandwidth term, 2 ceil(log2 K) alpha <= 2(K-1) alpha: tree wins or ties."""
    for k in (8, 64, 1024):
        for n in (1024, 2**20, 2**30):
            tree = cm.predict("all_reduce", n, k, 5.0, 100.0, "rhd")
            ring = cm.predict("all_reduce", n, k, 5.0, 100.0, "ring")
            assert tree.time_us < ring.time_us
            assert tree.bandwidth_us == ring.bandwidth_us


# --- the alpha-beta (Hockney) model ---------------------------------------------------


def test_crossovers() -> None:
    """IB 2 µs x 50 GB/s = 100 KB; NVLink 1 µs x 900 GB/s = 900 KB, 9x IB."""
    assert cm.crossover_bytes("2us", "50GB/s") == pytest.approx(100e3)
    assert cm.crossover_bytes("1us", "900GB/s") == pytest.approx(900e3)


def test_10gb_on_256_ranks_399_ms() -> None:
    got = cm.predict("all_reduce", "10GB", 256, "2us", "50GB/s")
    assert ms(got.latency_us, 2) == 1.02
    assert round(got.bandwidth_us / MS) == 398
    assert round(got.time_us / MS) == 399
    assert round(got.bandwidth_us / got.time_us * 100, 1) == 99.7


def test_bucketing_1000_x_1mb() -> None:
    """1000 x 1 MB: 291.4 µs each, 291.4 ms in all; one 1 GB bucket 39.7 ms; 7.3x.

    The printed example rounds 126/64 = 1.96875 to 1.97 (39.4 ms + 0.252 ms = 39.65 -> 39.7 ms);
    the formula gives 39.627 ms, i.e. 39.6 ms, and a speedup of 7.35 (printed: 7.3).
    """
    got = cm.bucketing(1000, "1MB", 64, "2us", "50GB/s")
    one = cm.predict("all_reduce", "1MB", 64, "2us", "50GB/s")
    assert (one.latency_us, round(one.bandwidth_us, 1)) == (252, 39.4)
    assert round(one.time_us, 1) == 291.4
    assert ms(got.individual_us, 1) == 291.4
    assert ms(got.bucketed_us, 3) == 39.627  # printed: 39.7 (rounded factor)
    assert round(0.252 + 1.97 * 20, 1) == 39.7
    assert round(got.speedup, 2) == 7.35  # printed: 7.3
    assert round(got.latency_saved_us / MS) == 252


def test_point_to_point_and_breakdown() -> None:
    """T = alpha + n/beta; AllReduce = ReduceScatter + AllGather (breakdown table)."""
    p2p = cm.predict("sendrecv", "1MB", 2, "2us", "50GB/s")
    assert p2p.time_us == pytest.approx(2 + 20)
    ar = cm.predict("all_reduce", "1GB", 64, "2us", "50GB/s")
    rs = cm.predict("reduce_scatter", "1GB", 64, "2us", "50GB/s")
    ag = cm.predict("all_gather", "1GB", 64, "2us", "50GB/s")
    assert ar.time_us == pytest.approx(rs.time_us + ag.time_us)


# --- Aurora oneCCL data-path projection -----------------------------------------------


class _Aurora(TypedDict):
    """The keyword arguments of scale_out_all_reduce that every Aurora case shares."""

    nic_bandwidth: float
    derating: float


class _ScaleUp(TypedDict):
    """The per-node keyword arguments of scale_out_all_reduce (R ranks per node)."""

    nics_per_node: int
    ranks_per_node: int
    xe_bandwidth: float
    xe_links: int


def _scale_up(ranks: int) -> _ScaleUp:
    """One NIC per rank (8 at most), one Xe-link per GPU (R/2) at 15 GB/s."""
    return {
        "nics_per_node": min(ranks, 8),
        "ranks_per_node": ranks,
        "xe_bandwidth": 15.0,
        "xe_links": ranks // 2,
    }


AURORA: _Aurora = {
    "nic_bandwidth": 23.0,
    "derating": 0.8,
}  # the projection's 23 GB/s NIC, 80 % usable
SCALE_OUT = [  # nodes, model (ms), with PCIe (ms), experiment (ms)
    (2, 108.7, 299.2, 402.7),
    (4, 163.0, 353.5, 555.4),
    (8, 190.2, 380.7, 636.6),
    (16, 203.8, 394.3, 680.6),  # printed 394.2 with PCIe; see test below
]


@pytest.mark.parametrize(("nodes", "model", "pcie", "experiment"), SCALE_OUT)
def test_aurora_scale_out_one_rank_per_node(
    nodes: int, model: float, pcie: float, experiment: float
) -> None:
    plain = cm.scale_out_all_reduce("2GB", nodes, **AURORA)
    staged = cm.scale_out_all_reduce("2GB", nodes, **AURORA, pcie_bandwidth="42GB/s")
    assert ms(plain.time_us, 1) == model
    assert ms(staged.time_us, 1) == pcie
    assert ms(staged.staging_us, 1) == 190.5  # 2 x 2 x 2 GB / 42 GB/s


def test_aurora_scale_out_entries_not_reproduced() -> None:
    """16 nodes with PCIe: 203.80 + 190.48 = 394.28 ms, printed 394.2 (not 394.3)."""
    staged = cm.scale_out_all_reduce("2GB", 16, **AURORA, pcie_bandwidth=42.0)
    assert ms(staged.time_us, 2) == 394.28


# Efficiency = model / experiment, computed by the projection from its rounded model column and
# printed sometimes rounded, sometimes truncated (26.99 -> "26.9 %", 18.28 -> "18.2 %"),
# so each entry is checked to within one unit of its last printed digit.
EFFICIENCY = [  # nodes, ranks, printed efficiency %, its unit, with PCIe?
    (2, 1, 27, 1, False),
    (4, 1, 29.3, 0.1, False),
    (8, 1, 30, 1, False),
    (16, 1, 30, 1, False),
    (2, 1, 26.9, 0.1, False),  # second table, same case
    (2, 4, 19, 1, False),
    (2, 6, 17.7, 0.1, False),
    (2, 8, 23, 1, False),
    (2, 12, 16, 1, False),
    (4, 12, 18.2, 0.1, False),
    (8, 12, 18.5, 0.1, False),
    (16, 12, 19.2, 0.1, False),
    (4, 1, 63.6, 0.1, True),
    (8, 1, 59.8, 0.1, True),
    (16, 1, 57.9, 0.1, True),
    (2, 4, 28.6, 0.1, True),
    (2, 8, 34.7, 0.1, True),
    (2, 12, 23.3, 0.1, True),
    (4, 12, 25.1, 0.1, True),
    (8, 12, 24.9, 0.1, True),
    (16, 12, 25.7, 0.1, True),
]
EXPERIMENT = {
    (2, 1): 402.7,
    (4, 1): 555.4,
    (8, 1): 636.6,
    (16, 1): 680.6,
    (2, 4): 494.25,
    (2, 6): 353.21,
    (2, 8): 203.2,
    (2, 12): 221.8,
    (4, 12): 233.0,
    (8, 12): 248.5,
    (16, 12): 247.9,
}


def _aurora(nodes: int, ranks: int, pcie: bool) -> float:
    """Aurora data-path model in ms for (nodes, ranks per node), as the tables use it."""
    pcie_bandwidth = 42.0 if pcie else None  # None: the default, no staging
    if ranks > 1:
        found = cm.scale_out_all_reduce(
            "2GB", nodes, **AURORA, **_scale_up(ranks), pcie_bandwidth=pcie_bandwidth
        )
    else:
        found = cm.scale_out_all_reduce(
            "2GB", nodes, **AURORA, pcie_bandwidth=pcie_bandwidth
        )
    return found.time_us / MS


@pytest.mark.parametrize(("nodes", "ranks", "printed", "unit", "pcie"), EFFICIENCY)
def test_aurora_efficiency_columns(
    nodes: int, ranks: int, printed: float, unit: float, pcie: bool
) -> None:
    model = round(_aurora(nodes, ranks, pcie), 1)
    assert abs(model / EXPERIMENT[nodes, ranks] * 100 - printed) < unit


def test_aurora_efficiency_entries_not_reproduced() -> None:
    """(2, 1) with PCIe: 299.2 / 402.7 = 74.30 %, printed 74.4 %; (2, 6) with PCIe:
    94.3 / 353.21 = 26.70 %, printed 26.6 %; (2, 2) rests on the undetermined 65.5 ms."""
    assert round(_aurora(2, 1, True), 1) / 402.7 * 100 == pytest.approx(
        74.30, abs=0.005
    )
    assert round(_aurora(2, 6, True), 1) / 353.21 * 100 == pytest.approx(
        26.70, abs=0.005
    )


SCALE_UP_OUT = [  # nodes, ranks per node, model (ms), with PCIe (ms), experiment (ms)
    (2, 4, 93.8, 141.5, 494.25),
    (2, 6, 62.6, 94.3, 353.21),
    (2, 8, 46.9, 70.7, 203.2),
    (2, 12, 35.8, 51.7, 221.8),
    (4, 12, 42.6, 58.5, 233.0),
    (8, 12, 46.0, 61.9, 248.5),
    (16, 12, 47.7, 63.6, 247.9),  # printed 63.7 with PCIe
]


@pytest.mark.parametrize(
    ("nodes", "ranks", "model", "pcie", "experiment"), SCALE_UP_OUT
)
def test_aurora_scale_up_and_out(
    nodes: int, ranks: int, model: float, pcie: float, experiment: float
) -> None:
    """Eq. 4/6 with one NIC per rank (8 at most) and one Xe-link per GPU (R/2) at 15 GB/s.

    The NIC and Xe-link counts per case are not printed; these are the ones the node has
    (8 NICs, 6 GPUs of 2 tiles) and they reproduce every entry but (2, 2) and the PCIe
    entry of (16, 12). Efficiency = model / experiment, printed truncated to 0.1 %.
    """
    scale_up = _scale_up(ranks)
    plain = cm.scale_out_all_reduce("2GB", nodes, **AURORA, **scale_up)
    assert ms(plain.time_us, 1) == model
    staged = cm.scale_out_all_reduce(
        "2GB", nodes, **AURORA, **scale_up, pcie_bandwidth=42.0
    )
    assert ms(staged.time_us, 1) == pcie


def test_aurora_two_ranks_per_node_needs_180_gbps_mdfi() -> None:
    """t^{2,2} = 65.5 ms is not determined by the projection's figures: the NIC term is 54.35 ms
    and the rest, 11.1 ms for 2 GB, implies a 180 GB/s scale-up path (two tiles of one
    GPU over MDFI?), while the projection lists MDFI at 196 or ~220 GB/s."""
    nic = cm.scale_out_all_reduce("2GB", 2, **AURORA, nics_per_node=2)
    assert ms(nic.scale_out_us, 2) == 54.35
    assert round(nic.scale_out_us / MS + 2e9 / 180e9 * MS, 1) == 65.5
    staged = cm.scale_out_all_reduce(
        "2GB",
        2,
        **AURORA,
        nics_per_node=2,
        ranks_per_node=2,
        xe_bandwidth=180.0,
        xe_links=1,
        pcie_bandwidth=42.0,
    )
    assert ms(staged.time_us, 1) == 160.7


def test_aurora_scale_up_intra_node() -> None:
    """Eq. 10 on 0.875 GB: R=2 58.3 ms (Xe-link only), R=12 10.5 ms (Xe 15, MDFI 196).

    R=4 prints 31.6 ms but gives 31.4 ms with MDFI at 196 GB/s (31.6 needs ~180 GB/s);
    the efficiency column (74, 66, 46 %) is not model / experiment (78.6, 76.1, 53.3 %)
    and its definition is not stated, so it is not reproduced.
    """
    r2 = cm.scale_up_all_reduce("0.875GB", 2, xe_bandwidth=15.0)
    assert ms(r2.time_us, 1) == 58.3
    r12 = cm.scale_up_all_reduce("0.875GB", 12, xe_bandwidth=15.0, mdfi_bandwidth=196.0)
    assert ms(r12.time_us, 1) == 10.5
    r4 = cm.scale_up_all_reduce("0.875GB", 4, xe_bandwidth=15.0, mdfi_bandwidth=196.0)
    assert ms(r4.time_us, 1) == 31.4  # printed: 31.6


def test_aurora_eq1_host_staged_path() -> None:
    """Eq. 1 for (N2, R1): n_t = 2, n_l = 1; 2 GB over 55/55/23/55 GB/s + 1024 GB/s."""
    got = cm.data_path_all_reduce("2GB", d2h=55.0, h2s=55.0, nic=23.0, compute=1024.0)
    by_hand = (2 / 55 + 2 / 55 + 2 / 23 + 2 / 55 + 2 / 1024) * 2 * (2 - 1) / 1
    assert got.time_us / 1e6 == pytest.approx(by_hand)


def test_predict_errors_and_dicts() -> None:
    with pytest.raises(
        ProfileError, match="no cost model for all_reduce with pairwise"
    ):
        cm.predict("all_reduce", 1, 8, 1.0, 1.0, "pairwise")
    with pytest.raises(ProfileError, match="ranks must be >= 1"):
        cm.predict("all_reduce", 1, 0, 1.0, 1.0)
    with pytest.raises(ProfileError, match="scale-up figures"):
        cm.scale_out_all_reduce("2GB", 2, nic_bandwidth=23.0, ranks_per_node=2)
    pred = cm.predict("all_reduce", "10GB", 256, "2us", "50GB/s")
    assert set(pred.as_dict()) == {"time_us", "latency_us", "bandwidth_us"}
    hier = cm.hierarchical_all_reduce("2GB", 8, 8, 1.0, 300.0, 5.0, 50.0).as_dict()
    assert set(hier) >= {"time_us", "reduce_scatter", "all_reduce", "all_gather"}
    odd = cm.hierarchical_all_reduce(10**9, 3, 2, 1.0, 100.0, 1.0, 10.0)
    assert odd.all_reduce.bandwidth_us == pytest.approx(10**9 / 3 / 1e4)
    assert cm.predict("AllReduce", 10, 8, 1, 1) == cm.predict("all-reduce", 10, 8, 1, 1)
