"""Spread, spikes and stragglers from nccl-tests per-iteration times (``-I 1 -J``).

The ``measurements`` columns ``iter_times_us`` (each iteration's time, the max over
process rows) and ``iter_process_times_us`` (each process row's times, the max over its
GPUs) hold what nccl-tests wrote; this module reads them as nccl-tests' own
``tools/analyze_perf_json.py`` does (``--spikes``, ``--straggler``), one row per
measurement that has them:

* spikes: iterations whose time is above ``threshold`` (1.5) times the per-iteration
  mean ``time_avg_us`` (the mean of the summarised iterations, after ``-K``); the
  iteration is a straggler's when one process row spiked, system-wide when all did;
* stragglers: each process row's mean time; the slowest and fastest rows, the spread
  between them (us and % of the fastest), and the noisiest row (largest coefficient of
  variation, sample standard deviation as ``statistics.stdev``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

SPIKE_THRESHOLD = 1.5

_SUMMARY_FIELDS: list[pa.Field[Any]] = [
    pa.field("source", pa.string(), nullable=False),
    pa.field("run", pa.int32(), nullable=False),
    pa.field("line", pa.int64(), nullable=False),
    pa.field("placement", pa.string(), nullable=False),
    pa.field("size_bytes", pa.int64(), nullable=False),
    pa.field("iterations", pa.int64(), nullable=False),
    pa.field("spread_pct", pa.float64()),
    pa.field("spike_iterations", pa.list_(pa.int64()), nullable=False),
    pa.field("spike_processes", pa.list_(pa.list_(pa.int64())), nullable=False),
    pa.field("processes", pa.int64()),
    pa.field("fastest_process", pa.int64()),
    pa.field("slowest_process", pa.int64()),
    pa.field("process_spread_us", pa.float64()),
    pa.field("process_spread_pct", pa.float64()),
    pa.field("noisiest_process", pa.int64()),
    pa.field("noisiest_cv_pct", pa.float64()),
]
SUMMARY_SCHEMA = pa.schema(_SUMMARY_FIELDS)


def spikes(
    times_us: Sequence[float], avg_us: float, threshold: float = SPIKE_THRESHOLD
) -> list[int]:
    """0-based indices of the iterations slower than ``threshold`` x ``avg_us``."""
    return [i for i, t in enumerate(times_us) if t > avg_us * threshold]


def spiked_processes(
    process_times_us: Sequence[Sequence[float]],
    iteration: int,
    avg_us: float,
    threshold: float = SPIKE_THRESHOLD,
) -> list[int]:
    """The process rows whose time at ``iteration`` is above ``threshold`` x avg."""
    return [
        p
        for p, times in enumerate(process_times_us)
        if iteration < len(times) and times[iteration] > avg_us * threshold
    ]


def _cv_pct(times: Sequence[float]) -> float:
    avg = sum(times) / len(times)
    std = statistics.stdev(times) if len(times) > 1 else 0.0
    return std / avg * 100 if avg > 0 else 0.0


def stragglers(process_times_us: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Fastest, slowest and noisiest process rows (None values without rows)."""
    rows = [(p, t) for p, t in enumerate(process_times_us) if t]
    if not rows:
        return dict.fromkeys(
            (
                "fastest_process",
                "slowest_process",
                "process_spread_us",
                "process_spread_pct",
                "noisiest_process",
                "noisiest_cv_pct",
            )
        )
    means = sorted(((sum(t) / len(t), p) for p, t in rows))
    (fast_us, fastest), (slow_us, slowest) = means[0], means[-1]
    cvs = [(_cv_pct(t), p) for p, t in rows]
    noisy_cv, noisiest = max(cvs, key=lambda c: c[0])
    spread = slow_us - fast_us
    return {
        "fastest_process": fastest,
        "slowest_process": slowest,
        "process_spread_us": spread,
        "process_spread_pct": spread / fast_us * 100 if fast_us > 0 else None,
        "noisiest_process": noisiest,
        "noisiest_cv_pct": noisy_cv,
    }


def summarize(measurements: pa.Table, threshold: float = SPIKE_THRESHOLD) -> pa.Table:
    """One row per measurement with per-iteration times: spikes and stragglers.

    ``spread_pct`` is (time_max_us - time_min_us) / time_avg_us in %;
    ``spike_iterations`` the iterations above ``threshold`` x ``time_avg_us`` and
    ``spike_processes`` the process rows that spiked at each of them (empty lists
    when the log has no process rows).
    """
    out: dict[str, list[Any]] = {name: [] for name in SUMMARY_SCHEMA.names}
    names = (
        "source",
        "run",
        "line",
        "placement",
        "size_bytes",
        "time_min_us",
        "time_max_us",
        "time_avg_us",
        "iter_times_us",
        "iter_process_times_us",
    )
    for row in measurements.select(list(names)).to_pylist():
        times = row["iter_times_us"]
        if not times:
            continue
        procs = row["iter_process_times_us"] or []
        avg = row["time_avg_us"]
        if avg is None:  # not stated: the mean of every iteration
            avg = sum(times) / len(times)
        lo, hi = row["time_min_us"], row["time_max_us"]
        spread = (hi - lo) / avg * 100 if None not in (lo, hi) and avg > 0 else None
        spiked = spikes(times, avg, threshold)
        for key in ("source", "run", "line", "placement", "size_bytes"):
            out[key].append(row[key])
        out["iterations"].append(len(times))
        out["spread_pct"].append(spread)
        out["spike_iterations"].append(spiked)
        out["spike_processes"].append(
            [spiked_processes(procs, i, avg, threshold) for i in spiked]
        )
        out["processes"].append(len(procs) or None)
        for key, value in stragglers(procs).items():
            out[key].append(value)
    return pa.table(out, schema=SUMMARY_SCHEMA)


__all__ = [
    "SPIKE_THRESHOLD",
    "SUMMARY_SCHEMA",
    "spiked_processes",
    "spikes",
    "stragglers",
    "summarize",
]
