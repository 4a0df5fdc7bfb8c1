"""The expected curve (ncclparse.efficiency.curve): segments where NCCL switches
protocol, recovered from sweeps made with NCCL's own tuning model, and what it leaves
unexplained on healthy real logs (benchmarks/unexplained.py)."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import ncclparse
from ncclparse import efficiency as eff
from ncclparse.efficiency.curve import LL_END, protocol_names
from tests.conftest import FIXTURES
from tests.test_efficiency import sweep, table

ROOT = Path(__file__).resolve().parent.parent
SIZES = [2**k for k in range(3, 34)]  # 8 B to 8 GiB, as nccl-tests -b 8 -e 8G -f 2

# NCCL's tuning model (src/graph/tuning.cc) for Ring AllReduce on 2 nodes x 8 H100
# (8 channels of 48 GB/s, Intel hosts, NCCL_ALGO=Ring): latency in µs and the
# algorithm bandwidth of the time formula in GB/s, per protocol.
#   LL:     6.6 + 28 x 1.0 + 2 x 2.7               = 40.0 µs; min(39, 384/2) x 16/30 = 20.8
#   LL128: 14 + 28 x 1.9 + 2 x 4.0                  = 75.2 µs; min(353.3, 293.6) x 16/30 = 156.6
#   Simple: (8.4 + 28 x 3.4 + 2 x 14) x 1.4 plateau = 184.2 µs; 384 x 16/30 = 204.8
RING = {"LL": (40.0, 20.8), "LL128": (75.2, 156.6), "Simple": (184.2, 204.8)}


def model_sweep(
    protocols: dict[str, tuple[float, float]], noise: float = 0.0, **kw: Any
) -> pa.Table:
    """NCCL's choice at every size: the least latency + n / bandwidth, times a
    deterministic +-``noise`` alternating with size."""
    times = [
        min(lat + s / (bw * 1e3) for lat, bw in protocols.values())
        * (1 + noise * (-1) ** i)
        for i, s in enumerate(SIZES)
    ]
    keys = {"nranks": 16, "nnodes": 2} | kw
    return table(
        size_bytes=SIZES,
        time_us=times,
        **{k: [v] * len(SIZES) for k, v in keys.items()},
    )


def segments(fits: pa.Table) -> list[dict[str, Any]]:
    found = fits.column("segments").to_pylist()[0]
    assert found is not None
    return list(found)


@pytest.mark.parametrize("noise", [0.0, 0.02])
def test_three_protocols_recovered_from_nccls_model(noise: float) -> None:
    """LL wins up to 512 KiB (the LL/LL128 crossover is 35.2 µs / (1/20.8 - 1/156.6)
    GB/s = 0.84 MB), LL128 from 1 to 64 MiB (LL128/Simple at 72.5 MB), Simple from
    128 MiB: three segments, named, with their latency and bandwidth."""
    got = eff.analyze(model_sweep(RING, noise), "h100")
    found = segments(got.fits)
    assert [s["protocol"] for s in found] == ["LL", "LL128", "Simple"]
    assert [(s["from_bytes"], s["to_bytes"]) for s in found] == [
        (8, 512 << 10),
        (1 << 20, 64 << 20),
        (128 << 20, 8 << 30),
    ]
    tolerance = 1e-6 if noise == 0 else 0.05
    for s in found:
        alpha, beta = RING[s["protocol"]]
        assert s["beta_gbps"] == pytest.approx(beta, rel=tolerance)
        # A latency is read next to times of its own size: LL's 40 µs under a
        # 2 % noise, Simple's 184 µs under ~40-2000 µs times of +-2 %.
        assert s["alpha_us"] == pytest.approx(
            alpha, rel=tolerance, abs=8 * noise * alpha
        )
    rows = got.rows.to_pandas()
    error = rows["model_error_pct"].to_numpy()
    assert np.nanmax(error) < 1e-4 if noise == 0 else np.nanmedian(error) < 2.5
    # The single line stays what it was: alpha of the floor, beta of the plateau.
    fit = got.fits.to_pylist()[0]
    assert fit["beta_gbps"] == pytest.approx(204.8, rel=0.02)


def test_no_protocol_switch_stays_one_segment() -> None:
    """A clean alpha-beta sweep, even with +-5 % noise, is one segment: the line."""
    for noise in (None, [1.05, 0.95, 1.03, 0.97]):
        got = eff.analyze(sweep(noise=noise), "h100")
        (only,) = segments(got.fits)
        assert only["protocol"] == "Simple"
        assert (only["from_bytes"], only["to_bytes"]) == (1024, 1 << 30)
        if noise is None:
            assert only["alpha_us"] == pytest.approx(30.0, rel=1e-6)
            assert only["beta_gbps"] == pytest.approx(150.0, rel=1e-6)


def test_two_segments_are_named_by_where_the_break_falls() -> None:
    """LL then Simple when the break is below 16 MiB, else LL128 then Simple: with
    LL128 off, NCCL's model hands LL over to Simple at 144.2 µs / (1/20.8 - 1/204.8)
    GB/s = 3.3 MB (4 MiB is the first Simple size)."""
    early = {"LL": (40.0, 20.8), "Simple": (184.2, 204.8)}  # LL128 disabled
    got = eff.analyze(model_sweep(early), "h100")
    found = segments(got.fits)
    assert [s["protocol"] for s in found] == ["LL", "Simple"]
    assert found[1]["from_bytes"] == 4 << 20
    late = {"LL128": (75.2, 156.6), "Simple": (184.2, 204.8)}
    found = segments(eff.analyze(model_sweep(late), "h100").fits)
    assert [s["protocol"] for s in found] == ["LL128", "Simple"]
    assert found[1]["from_bytes"] == 128 << 20
    assert protocol_names(2, 8 << 20, True) == ("LL", "Simple")
    assert protocol_names(2, LL_END, True) == ("LL128", "Simple")
    assert protocol_names(3, 0, False) == ("segment 1", "segment 2", "segment 3")


def test_other_tools_get_numbered_segments() -> None:
    got = eff.analyze(model_sweep(RING, tool="oneccl-benchmark"), "h100")
    names = [s["protocol"] for s in segments(got.fits)]
    assert names == ["segment 1", "segment 2", "segment 3"]


def test_gaps_use_the_rows_segment() -> None:
    """At 4 MiB (LL128): latency is LL128's 75.2 µs, the bandwidth shortfall its n/beta
    beyond the ideal transfer, nothing unexplained."""
    got = eff.analyze(model_sweep(RING), "h100").rows.to_pandas()
    row = got[got["size_bytes"] == 4 << 20].iloc[0]
    assert row["gap_latency_us"] == pytest.approx(75.2, rel=1e-6)
    transfer = (4 << 20) / 156.6e3
    assert row["gap_bandwidth_us"] == pytest.approx(
        transfer - row["ideal_time_us"], rel=1e-6
    )
    assert row["gap_residual_us"] == pytest.approx(0.0, abs=1e-6)
    assert row["model_time_us"] == pytest.approx(75.2 + transfer, rel=1e-9)


def test_segments_keep_their_constraints_on_every_fixture() -> None:
    """alpha >= 0, beta <= 1.25 x the plateau beta, contiguous size ranges."""
    logs = sorted(p for p in FIXTURES.rglob("*.log") if "expected" not in p.parts)
    result = ncclparse.parse_many(logs)
    fits = eff.analyze(result.measurements, runs=result.runs).fits.to_pylist()
    curved = [f for f in fits if f["segments"]]
    assert len(curved) > 100
    for fit in curved:
        found = fit["segments"]
        assert 1 <= len(found) <= 3
        for s in found:
            assert s["alpha_us"] >= 0
            assert s["beta_gbps"] <= 1.25 * fit["beta_gbps"] * (1 + 1e-9)
            assert s["from_bytes"] <= s["to_bytes"]
        for before, after in itertools.pairwise(found):
            assert before["to_bytes"] < after["from_bytes"]
    assert all(f["segments"] is None for f in fits if f["beta_gbps"] is None)


def _unexplained() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "unexplained", ROOT / "benchmarks" / "unexplained.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The median share of each 1-256 MiB time left unexplained (gap_residual_us / time),
# and the model's median error, per healthy log: a single alpha-beta line left 21-58 %.
EXPECTED = {
    "example 2x8 H100": (0.0030, 0.0088),
    "keitaw p5 (NCCL 2.22)": (0.0130, 0.0379),
    "superbench broadcast": (0.0153, 0.0205),
    "superbench reduce": (0.0113, 0.0201),
    "ztan a3mega": (0.0030, 0.0088),
}


def test_healthy_logs_mid_sizes_are_explained() -> None:
    found = _unexplained().measure()
    for name, (unexplained, error) in EXPECTED.items():
        assert found[name]["rows"] == 18, name
        assert found[name]["unexplained"] <= 0.20, name
        assert found[name]["unexplained"] == pytest.approx(unexplained, abs=0.002), name
        assert found[name]["model_error"] == pytest.approx(error, abs=0.002), name
    # A fragment at 122-127 MiB (no device: no ideal, no gap) and one of 512 MiB and
    # up (no size in range): the model error only.
    assert found["nccltests-119"]["model_error"] < 0.01
    assert found["nccltests-252"]["rows"] == 0
