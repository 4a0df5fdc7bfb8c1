"""Gap attribution on every real log of every tool: no part is negative, none is more
than the measured time, and the parts with the ideal transfer add up to the time."""

from __future__ import annotations

import numpy as np
import pytest

import ncclparse
from ncclparse.efficiency import HardwareOptions, analyze
from tests.conftest import FIXTURES

LOGS = sorted(
    p
    for p in FIXTURES.rglob("*")
    if p.is_file()
    and p.suffix in (".log", ".csv", ".json", ".txt")
    and "expected" not in p.parts
)
PARTS = (
    "gap_hw_latency_us",
    "gap_latency_us",
    "gap_staging_us",
    "gap_bandwidth_us",
    "gap_residual_us",
)


@pytest.mark.parametrize(
    "hardware", [None, HardwareOptions(profile="h100", hw_latency="2us")]
)
def test_gap_parts_are_shares_of_the_time(hardware: HardwareOptions | None) -> None:
    result = ncclparse.parse_many(LOGS)
    assert len(result.accounting) > 100
    rows = analyze(result.measurements, hardware, result.runs).rows.to_pandas()
    known = rows[rows["gap_us"].notna()]
    # Without hardware only logs naming a known GPU have an ideal.
    assert len(known) > (200 if hardware is None else 1500)
    time = known["time_us"].to_numpy()
    total = known["ideal_time_us"].to_numpy().copy()
    for name in PARTS:
        part = known[name].to_numpy(dtype=float, na_value=0.0)
        assert (part >= 0).all(), name
        assert (part <= time * (1 + 1e-9)).all(), name
        total += part
    assert np.allclose(total, time, rtol=1e-9)
    # 0-byte rows move no data: no ideal, no gap, nothing on a share chart.
    zero = rows[rows["size_bytes"] == 0]
    assert zero["gap_us"].isna().all()
    assert zero["efficiency"].isna().all()
