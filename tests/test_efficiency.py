"""The efficiency engine on hand-built measurements tables and on real corpus logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import ncclparse
from ncclparse import efficiency as eff
from ncclparse.efficiency.hardware import HardwareOptions, HardwareProfile
from ncclparse.errors import ProfileError
from ncclparse.schema import MEASUREMENTS_SCHEMA, measurements_table

CORPUS = Path(__file__).resolve().parent / "fixtures"  # copies of the real corpus
A3MEGA = CORPUS / "nccl" / "repo-ztan-a3mega_allreduce_16rank_2node_h100_complete.log"


def table(**columns: list[Any]) -> pa.Table:
    """A measurements table; the one-row defaults fill what the test does not set."""
    n = len(next(iter(columns.values())))
    defaults: dict[str, Any] = {
        "source": "t.log",
        "run": 0,
        "line": 1,
        "tool": "nccl-tests",
        "collective": "all_reduce",
        "placement": "out-of-place",
        "dtype": "float32",
        "redop": "sum",
        "nranks": 8,
        "cputime": False,
        "grouped": False,
    }
    data = {k: [v] * n for k, v in defaults.items()} | columns
    data.setdefault("reported_bytes", data["size_bytes"])
    return measurements_table(data)


def column(result: pa.Table, name: str) -> list[Any]:
    return result.column(name).to_pylist()


# --- busbw factor and recomputed bandwidths -------------------------------------------


@pytest.mark.parametrize(
    ("collective", "factor"),
    [
        ("all_reduce", 2 * 7 / 8),
        ("all_gather", 7 / 8),
        ("all_gather_v", 7 / 8),
        ("reduce_scatter", 7 / 8),
        ("alltoall", 7 / 8),
        ("alltoallv", 7 / 8),
        ("gather", 7 / 8),
        ("scatter", 7 / 8),
        ("broadcast", 1.0),
        ("reduce", 1.0),
        ("sendrecv", 1.0),
        ("hypercube", 1.0),
    ],
)
def test_busbw_factor(collective: str, factor: float) -> None:
    assert eff.busbw_factor(collective, 8) == pytest.approx(factor)


def test_busbw_factor_unknown() -> None:
    with pytest.raises(ProfileError, match="no busbw factor for 'barrier'"):
        eff.busbw_factor("barrier", 8)


def test_35_gbps_example_through_the_table() -> None:
    """1 GB all-reduce on 8 GPUs in 50 ms: algbw 20, busbw 35 GB/s (factor 2(n-1)/n, NVIDIA
    nccl-tests doc/PERFORMANCE.md)."""
    got = eff.bandwidth_columns(table(size_bytes=[10**9], time_us=[50_000.0]))
    assert column(got, "algbw_calc_gbps") == [pytest.approx(20.0)]
    assert column(got, "busbw_calc_gbps") == [pytest.approx(35.0)]
    assert column(got, "busbw_factor") == [1.75]


def test_aiboosters_busbw_example() -> None:
    """AllReduce of 1 GB on 2 x 8 GPUs in 0.1 s: S 2(N-1) / (T N) = 18.75 GB/s.

    The AIBooster documentation prints 19.375 GB/s, which is 1 GB x 31 / 1.6: its
    2 x (16 - 1) was taken as 31 instead of 30. The formula it states gives 18.75.
    """
    got = eff.bandwidth_columns(table(size_bytes=[10**9], time_us=[1e5], nranks=[16]))
    assert column(got, "busbw_calc_gbps") == [pytest.approx(18.75)]
    assert 1 * 31 / (0.1 * 16) == 19.375


def test_hypercube_and_alltoallv_algbw() -> None:
    """Hypercube algbw = size (n-1)/n / t with factor 1; alltoallv size/t, (n-1)/n."""
    got = eff.bandwidth_columns(
        table(
            collective=["hypercube", "alltoallv"],
            size_bytes=[8_000_000, 8_000_000],
            time_us=[1000.0, 1000.0],
            nranks=[4, 4],
        )
    )
    assert column(got, "algbw_calc_gbps") == pytest.approx([6.0, 8.0])
    assert column(got, "busbw_calc_gbps") == pytest.approx([6.0, 6.0])


def test_busbw_mismatch_beyond_print_rounding() -> None:
    # size 1 MB, 100.00 µs, 8 ranks: busbw = 10 x 1.75 = 17.5 GB/s.
    got = eff.bandwidth_columns(
        table(
            size_bytes=[10**6] * 4,
            time_us=[100.0] * 4,
            busbw_gbps=[17.50, 17.51, 17.60, None],
        )
    )
    # Allowed: 0.005 (busbw printed %.2f) + 17.5 x 0.005/99.995 (time printed %.2f).
    assert column(got, "busbw_mismatch") == [False, True, True, None]


def test_busbw_mismatch_tolerates_time_rounding_and_exponent_forms() -> None:
    # 4.56 µs printed for 4.555..4.565: busbw may differ by ~0.1 % from the printed time.
    size = 8_000_000_000
    t = 4.56
    true_t = 4.5649
    printed = round(size / true_t / 1e3 * 1.75, 2)
    got = eff.bandwidth_columns(
        table(
            size_bytes=[size, 17179869184],
            time_us=[t, 1.2e7],  # E7 prints "1.2e+07" for ~12 s
            busbw_gbps=[printed, 2.61],
        )
    )
    assert column(got, "busbw_mismatch") == [False, False]


def test_old_all_gather_algbw_printed_prescaled() -> None:
    """Before v2.9.0 all_gather/reduce_scatter printed algbw = size (n-1)/n / t = busbw."""
    got = eff.bandwidth_columns(
        table(
            collective=["all_gather", "all_gather", "all_reduce"],
            redop=[None, None, "sum"],
            size_bytes=[8_000_000] * 3,
            time_us=[1000.0] * 3,
            algbw_gbps=[7.00, 8.00, 8.00],
            busbw_gbps=[7.00, 7.00, 14.00],
        )
    )
    assert column(got, "algbw_prescaled") == [True, False, False]
    assert column(got, "busbw_mismatch") == [False, False, False]


def test_unknown_inputs_give_null_bandwidths() -> None:
    got = eff.bandwidth_columns(
        table(
            collective=["all_reduce", None, "all_reduce"],
            size_bytes=[1000, 1000, 1000],
            time_us=[10.0, 10.0, 10.0],
            nranks=[None, 8, 8],
            grouped=[False, False, True],
        )
    )
    assert column(got, "busbw_calc_gbps") == [None, None, None]


# --- ideal bandwidth (AIBooster) ------------------------------------------------------


def test_aiboosters_ideal_187_5() -> None:
    got = eff.ideal_bandwidth("450GB/s", "100GB/s", gpus_per_node=8, nodes=2)
    assert got.ideal_busbw_gbps == 187.5
    assert round(got.intra_term_gbps or 0, 1) == 482.1
    assert got.inter_term_gbps == 187.5
    assert got.bound == "inter"
    assert got.as_dict()["ideal_busbw_gbps"] == 187.5


def test_ideal_single_node_is_b_whatever_the_gpu_count() -> None:
    for p in (2, 4, 8):
        got = eff.ideal_bandwidth(450.0, gpus_per_node=p)
        assert (got.ideal_busbw_gbps, got.inter_term_gbps, got.bound) == (
            450.0,
            None,
            "intra",
        )


def test_ideal_one_gpu_per_node_is_i() -> None:
    """P = 1: the intra term B(N-1)/(N-Q) is unbounded; the ideal is I."""
    got = eff.ideal_bandwidth(450.0, 50.0, gpus_per_node=1, nodes=4)
    assert (got.ideal_busbw_gbps, got.intra_term_gbps) == (50.0, None)


def test_ideal_needs_i_for_several_nodes() -> None:
    with pytest.raises(ProfileError, match="2 nodes need the inter-node bandwidth"):
        eff.ideal_bandwidth(450.0, gpus_per_node=8, nodes=2)


def test_ideal_vectorized() -> None:
    ideal, _, _ = eff.ideal_busbw(
        np.array([450.0, 450.0, 450.0]),
        np.array([100.0, np.nan, 100.0]),
        np.array([16, 16, 8]),
        np.array([2, 2, 1]),
    )
    assert ideal[0] == 187.5
    assert np.isnan(ideal[1])
    assert ideal[2] == 450.0


# --- analyze: efficiency, fits, gaps -----------------------------------------------------


def sweep(
    alpha: float = 30.0,
    beta: float = 150.0,
    noise: list[float] | None = None,
    **kw: Any,
) -> pa.Table:
    sizes = [0] + [2**k for k in range(10, 31)]
    factors = noise or [1.0] * len(sizes)
    times = [
        (alpha + s / (beta * 1e3)) * factors[i % len(factors)]
        for i, s in enumerate(sizes)
    ]
    return table(
        size_bytes=sizes, time_us=times, **{k: [v] * len(sizes) for k, v in kw.items()}
    )


def test_fit_recovers_alpha_beta_and_crossover() -> None:
    """T = 30 µs + n / 150 GB/s: n* = alpha x beta = 4.5 MB (the crossover)."""
    got = eff.analyze(sweep(nranks=16, nnodes=2), "h100")
    fits = got.fits.to_pylist()
    assert len(fits) == 1
    fit = fits[0]
    assert fit["alpha_us"] == pytest.approx(30.0, rel=1e-6)
    assert fit["beta_gbps"] == pytest.approx(150.0, rel=1e-6)
    assert fit["crossover_bytes"] == pytest.approx(4.5e6, rel=1e-6)
    assert fit["points"] == 21  # the 0-byte row is not fitted
    assert fit["fit_class"] == "excellent"
    regimes = column(got.rows, "regime")
    sizes = column(got.rows, "size_bytes")
    # Latency-bound where alpha is at least half the time: n <= alpha x beta.
    assert regimes[0] is None  # 0 bytes: no data moves
    assert all(
        r == ("latency-bound" if s < 4.5e6 else "bandwidth-bound")
        for r, s in zip(regimes[1:], sizes[1:], strict=True)
    )
    note = column(got.rows, "efficiency_note")[0]
    assert "0-byte row: no data moves, not fitted or judged" in note


def test_fit_is_robust_to_an_outlier() -> None:
    noise = [1.0] * 22
    noise[12] = 5.0  # one size 5x slower (a protocol switch, a hiccup)
    got = eff.analyze(sweep(noise=noise), "h100")
    fit = got.fits.to_pylist()[0]
    assert fit["alpha_us"] == pytest.approx(30.0, rel=1e-3)
    assert fit["beta_gbps"] == pytest.approx(150.0, rel=1e-3)
    assert fit["max_error_pct"] == pytest.approx(80.0, rel=1e-3)  # the outlier, 1 - 1/5


@pytest.mark.parametrize(
    ("spread", "fit_class"),
    [(0.05, "excellent"), (0.1, "useful"), (0.6, "assumptions violated")],
)
def test_fit_class_thresholds(spread: float, fit_class: str) -> None:
    """Model error < 10 % excellent, 10-30 % useful, > 30 % assumptions violated."""
    got = eff.analyze(
        sweep(noise=[1 + spread, 1 - spread, 1 + 3 * spread, 1.0]), "h100"
    )
    assert got.fits.to_pylist()[0]["fit_class"] == fit_class


def test_series_are_fitted_separately() -> None:
    a = sweep(alpha=10.0, beta=100.0, placement="in-place")
    b = sweep(alpha=50.0, beta=300.0, placement="out-of-place")
    got = eff.analyze(pa.concat_tables([a, b]), "h100")
    fits = {f["placement"]: f for f in got.fits.to_pylist()}
    assert fits["in-place"]["alpha_us"] == pytest.approx(10.0, rel=1e-6)
    assert fits["out-of-place"]["beta_gbps"] == pytest.approx(300.0, rel=1e-6)


def test_gap_components_add_up_exactly() -> None:
    profile = HardwareProfile(
        name="lab",
        description="",
        gpus_per_node=8,
        intra_gbps=450.0,
        inter_gbps=400.0,
        alpha_us=1.0,
    )
    noise = [1.0, 1.1, 0.95, 1.02]
    got = eff.analyze(sweep(noise=noise, nranks=16, nnodes=2), profile).rows
    gap = np.array(column(got, "gap_us"), dtype=float)
    names = (
        "gap_hw_latency_us",
        "gap_latency_us",
        "gap_bandwidth_us",
        "gap_staging_us",
        "gap_residual_us",
    )
    parts = np.sum([np.array(column(got, n), dtype=float) for n in names], axis=0)
    assert np.isnan(gap[0])  # 0 bytes: no ideal, no gap
    assert np.allclose(parts[1:], gap[1:], rtol=1e-12, atol=1e-9)
    # 2 ceil(log2 16) x 1 µs of hardware latency in every row's gap.
    assert np.allclose(column(got, "gap_hw_latency_us")[1:], 8.0)
    assert np.allclose(column(got, "gap_staging_us")[1:], 0.0)
    ideal_time = np.array(column(got, "ideal_time_us"), dtype=float)
    measured = np.array(column(got, "time_us"))
    assert np.allclose(gap[1:], measured[1:] - ideal_time[1:])


def test_gap_with_aurora_host_staging() -> None:
    """Aurora, 2 nodes x 12 ranks: staging = 2 x 2 x Z / (12 x 42 GB/s), wherever the
    gap leaves room for it (a 5 GB/s sweep, far below the 28.9 GB/s algbw ideal)."""
    got = eff.analyze(sweep(beta=5.0, nranks=24, nnodes=2), "aurora").rows
    sizes = np.array(column(got, "size_bytes"), dtype=float)
    staging = np.array(column(got, "gap_staging_us"), dtype=float)
    large = sizes >= 2**20
    assert np.allclose(staging[large], 4 * sizes[large] / (12 * 42e3))
    note = column(got, "efficiency_note")[5]
    assert "hardware latency unknown: gap_latency_us includes it" in note


def test_staging_for_other_collectives_is_not_invented() -> None:
    got = eff.analyze(
        sweep(nranks=24, nnodes=2, collective="all_gather"), "aurora"
    ).rows
    assert column(got, "gap_staging_us")[5] is None
    assert (
        "the Aurora data-path model gives host staging for all-reduce only: it stays in "
        "gap_bandwidth_us"
    ) in column(got, "efficiency_note")[5]
    assert column(got, "gap_bandwidth_us")[5] is not None


def test_efficiency_and_ideal_time() -> None:
    """1 GB all-reduce on 8 GPUs in 80 ms as a row: 21.875 GB/s busbw against 50 GB/s is
    43.75 %."""
    got = eff.analyze(
        table(size_bytes=[10**9], time_us=[80_000.0], nnodes=[1]),
        HardwareOptions(intra_bw="400Gbps"),
    )
    assert column(got.rows, "efficiency") == [pytest.approx(0.4375)]
    assert column(got.rows, "ideal_time_us") == [pytest.approx(80_000 * 0.4375)]
    assert column(got.rows, "ideal_bound") == ["intra"]


def test_device_picks_preset_as_assumption() -> None:
    got = eff.analyze(sweep(nranks=16, nnodes=2, device="NVIDIA H100 80GB HBM3"))
    assert any("matched preset h100" in a for a in got.assumptions)
    # H100s may run NVLSTree on 2 nodes (the strict reading): min(2*15/16*400 = 750,
    # 2*7/8*450 = 787.5); the lenient one is a ring's min(B, I) = 400.
    assert column(got.rows, "ideal_busbw_gbps")[3] == pytest.approx(750.0)
    assert column(got.rows, "algorithm")[3] == "nvls_tree"
    assert column(got.rows, "ideal_low_busbw_gbps")[3] == pytest.approx(400.0)
    assert column(got.rows, "algorithm_low")[3] == "ring"
    assert column(got.rows, "algorithm_basis")[3] == "assumed"


def test_no_profile_leaves_nulls_with_reason() -> None:
    got = eff.analyze(sweep(device="NVIDIA GeForce RTX 4090"))
    assert got.assumptions == ()
    assert set(column(got.rows, "efficiency")) == {None}
    assert "no hardware profile" in column(got.rows, "efficiency_note")[3]
    assert column(got.rows, "model_time_us")[3] is not None  # the fit needs no profile


def test_grouped_and_cputime_rows_get_no_per_collective_figures() -> None:
    got = eff.analyze(
        table(
            size_bytes=[1000, 1000],
            time_us=[10.0, 10.0],
            grouped=[True, False],
            cputime=[False, True],
            nnodes=[1, 1],
        ),
        "h100",
    ).rows
    for name in ("efficiency", "model_time_us", "gap_us", "regime"):
        assert column(got, name) == [None, None]
    notes = column(got, "efficiency_note")
    assert notes[0].startswith("grouped:")
    assert notes[1].startswith("cputime:")


def test_nodes_override_must_divide_ranks() -> None:
    with pytest.raises(ProfileError) as info:
        eff.analyze(sweep(nranks=16), HardwareOptions(profile="h100", nodes=3))
    assert str(info.value) == (
        "--nodes 3 does not divide the rank count (16): every node must hold the same "
        "number of ranks (as the AIBooster ideal assumes)"
    )


def test_uneven_nodes_from_the_log_are_a_note() -> None:
    got = eff.analyze(sweep(nranks=16, nnodes=3), "h100").rows
    assert column(got, "efficiency")[3] is None
    assert (
        "ranks not divisible by nodes: the AIBooster ideal assumes equal ranks per node"
        in column(got, "efficiency_note")[3]
    )


def test_node_count_inferred_from_profile_is_an_assumption() -> None:
    got = eff.analyze(sweep(nranks=16), "h100")
    assert any("node count not in the log" in a for a in got.assumptions)
    assert column(got.rows, "ideal_busbw_gbps")[3] == pytest.approx(450 * 15 / 14)


def test_many_series_are_fitted_in_one_pass() -> None:
    """20,000 series over 200,000 rows: one fit each, every row kept (its speed is
    measured in benchmarks/, target 5: 1 million rows)."""
    rng = np.random.default_rng(0)
    n = 200_000
    sizes = (2 ** rng.integers(0, 34, n)).astype(np.int64)
    series = rng.integers(0, 20_000, n)
    times = np.round(30 + sizes / 150e3 * (1 + 0.05 * rng.standard_normal(n)), 2)
    columns = {
        "source": pa.array(np.char.add("f", (series // 10).astype(str))),
        "run": pa.array((series % 10).astype(np.int32)),
        "line": pa.array(np.arange(n)),
        "tool": pa.array(np.full(n, "nccl-tests")),
        "collective": pa.array(np.array(["all_reduce", "alltoall"])[series % 2]),
        "placement": pa.array(np.full(n, "out-of-place")),
        "size_bytes": pa.array(sizes),
        "reported_bytes": pa.array(sizes),
        "dtype": pa.array(np.full(n, "float32")),
        "time_us": pa.array(np.maximum(times, 1.0)),
        "nranks": pa.array(np.full(n, 16, dtype=np.int32)),
        "nnodes": pa.array(np.full(n, 2, dtype=np.int32)),
        "cputime": pa.array(np.zeros(n, dtype=bool)),
        "grouped": pa.array(np.zeros(n, dtype=bool)),
    }
    big = pa.Table.from_arrays(
        [columns.get(f.name, pa.nulls(n, f.type)) for f in MEASUREMENTS_SCHEMA],
        schema=MEASUREMENTS_SCHEMA,
    )
    got = eff.analyze(big, "h100")
    assert got.rows.num_rows == n
    assert got.fits.num_rows == len(np.unique(series))
    # A fit needs three distinct non-zero sizes (every size here is >= 1 byte).
    pairs = np.unique(np.stack([series, sizes]), axis=1)
    fittable = np.count_nonzero(np.bincount(pairs[0]) >= 3)
    assert pc.count(got.fits["alpha_us"]).as_py() == fittable


# --- real logs ----------------------------------------------------------------------------


@pytest.mark.skipif(not A3MEGA.exists(), reason="corpus not available")
def test_corpus_h100_two_nodes_end_to_end() -> None:
    """16 H100 ranks on 2 nodes: the strict reading NVLSTree's min(750, 787.5) = 750
    GB/s, the lenient a ring's 400; every row filled."""
    parsed = ncclparse.parse(str(A3MEGA))
    got = eff.analyze(parsed.measurements)
    assert any("matched preset h100" in a for a in got.assumptions)
    rows = got.rows.to_pylist()
    assert rows
    for row in rows:
        assert row["busbw_mismatch"] is False
        assert row["ideal_busbw_gbps"] == pytest.approx(750.0)
        assert row["ideal_low_busbw_gbps"] == pytest.approx(400.0)
        for name in (
            "busbw_calc_gbps",
            "efficiency",
            "model_time_us",
            "regime",
            "gap_us",
            "gap_latency_us",
            "gap_bandwidth_us",
            "gap_residual_us",
        ):
            assert row[name] is not None, name
        if row["size_bytes"] >= 2**30:  # large messages: printed busbw is ~340 GB/s
            assert 0.35 < row["efficiency"] < 0.5
    assert {f["fit_class"] for f in got.fits.to_pylist()} <= set(eff.FIT_CLASSES)


def test_corpus_every_null_has_a_reason() -> None:
    logs = sorted(str(p) for p in CORPUS.glob("*/*.log"))
    parsed = ncclparse.parse_many(logs)
    got = eff.analyze(parsed.measurements, "h100").rows.to_pylist()
    assert got
    for row in got:
        if row["efficiency"] is None or row["gap_residual_us"] is None:
            assert row["efficiency_note"], row
        if row["busbw_gbps"] is not None and row["busbw_calc_gbps"] is not None:
            assert row["busbw_mismatch"] is False, (row["source"], row["line"])


def test_empty_table() -> None:
    from ncclparse.schema import empty_measurements

    got = eff.analyze(empty_measurements(), "h100")
    assert got.rows.num_rows == 0
    assert got.fits.num_rows == 0
    assert got.rows.column_names[-len(eff.ANALYSED_COLUMNS) :] == list(
        eff.ANALYSED_COLUMNS
    )
    assert got.fits.column_names == list(eff.FIT_COLUMNS)
