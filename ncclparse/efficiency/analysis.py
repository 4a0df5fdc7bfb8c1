"""The efficiency engine: recomputed bandwidths, ideal bandwidth, alpha-beta fits, gaps.

Pure and vectorized: a ``measurements`` table goes in, the same table with added columns
and a per-series fits table come out (:func:`analyze`). No I/O, no per-row Python. The
arithmetic is written up in ``docs/efficiency.md``; every null it leaves has its reason
in the ``efficiency_note`` column.

This module assembles the rows: the hardware figures and node count of each row, the
efficiency, and the attribution of the gap to the ideal. The bandwidth recomputation
is in :mod:`~ncclparse.efficiency.bandwidth`, the ideal in
:mod:`~ncclparse.efficiency.ideal`, the fits in :mod:`~ncclparse.efficiency.fits`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ncclparse import columns as arr
from ncclparse.collectives import COLLECTIVES, TABLE, BusbwKind, Steps
from ncclparse.efficiency import notes as why
from ncclparse.efficiency.bandwidth import Columns, bandwidths
from ncclparse.efficiency.fits import FIT_CLASSES, fit_series
from ncclparse.efficiency.hardware import (
    HardwareOptions,
    HardwareProfile,
)
from ncclparse.efficiency.ideal import ideal_busbw
from ncclparse.errors import ProfileError

__all__ = ["ROW_COLUMNS", "Analysis", "analyze"]

ROW_COLUMNS = (
    "busbw_factor",
    "algbw_calc_gbps",
    "busbw_calc_gbps",
    "busbw_mismatch",
    "algbw_prescaled",
    "ideal_busbw_gbps",
    "ideal_bound",
    "efficiency",
    "ideal_time_us",
    "model_time_us",
    "model_error_pct",
    "regime",
    "fit_class",
    "gap_us",
    "gap_hw_latency_us",
    "gap_latency_us",
    "gap_bandwidth_us",
    "gap_staging_us",
    "gap_residual_us",
    "efficiency_note",
)

# Steps per 1-based collective code (0: unknown or no model).
_STEPS = np.array([0, *(TABLE[c].steps or 0 for c in COLLECTIVES)])


@dataclass(frozen=True, slots=True)
class Analysis:
    """What :func:`analyze` returns: rows (input + ROW_COLUMNS), fits, assumptions
    and the distinct hardware profiles the rows were judged against."""

    rows: pa.Table
    fits: pa.Table
    assumptions: tuple[str, ...]
    profiles: tuple[HardwareProfile, ...] = ()


def analyze(
    measurements: pa.Table,
    hardware: HardwareOptions | HardwareProfile | str | Path | None = None,
) -> Analysis:
    """Compute every efficiency column for a ``measurements`` table, plus series fits.

    ``hardware`` is :class:`HardwareOptions`, or just a profile, preset name or TOML
    path; without a profile, each row's ``device`` picks a matching preset (reported
    in ``assumptions``). Raises ProfileError for a bad profile or when
    ``nodes``/``gpus_per_node`` do not divide a row's rank count.
    """
    options = HardwareOptions.of(hardware)
    cols = Columns(measurements)
    notes: list[str] = []
    bw = bandwidths(cols)
    reasons = bw["reasons"]
    hw, profiles = _row_hardware(cols, options, notes)
    n, f = cols.nranks, bw["busbw_factor"]
    q, q_reasons = _nodes(cols, hw, options.nodes, options.gpus_per_node, notes)
    reasons |= np.where(np.isnan(hw["intra"]), why.NO_PROFILE, 0) | q_reasons
    ideal, intra, inter = ideal_busbw(hw["intra"], hw["inter"], n, q)
    reasons |= np.where(
        (q > 1) & np.isnan(hw["inter"]) & ~np.isnan(hw["intra"]), why.NO_I, 0
    )
    reasons |= np.where(n == 1, why.ONE_RANK, 0)
    unusable = why.GROUPED | why.CPUTIME | why.NO_COLL | why.NO_N | why.BAD_T
    usable = (reasons & (unusable | why.ONE_RANK)) == 0
    ideal = np.where(usable, ideal, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = bw["busbw_calc_gbps"] / ideal
        ideal_time = bw["busbw_calc_gbps"] * cols.time / ideal
    reasons |= np.where(eff > 1, why.ABOVE, 0)
    bound = np.where(np.isnan(ideal), -1, np.where((q > 1) & (inter <= intra), 1, 0))

    # The fit needs no busbw factor: IMB pingpong and the like get one too.
    fit_ok = ((reasons & (why.GROUPED | why.CPUTIME | why.BAD_T)) == 0) & cols.named
    fit = fit_series(cols.table, fit_ok, cols.size, cols.time)
    reasons |= fit.reasons

    steps = _latency_steps(cols.code, n)
    hw_lat = steps * hw["alpha"]
    reasons |= np.where(
        np.isnan(hw_lat) & ~np.isnan(fit.alpha) & ~np.isnan(ideal), why.NO_ALPHA, 0
    )
    staging, st_reasons = _staging(bw["kind"], cols.size, n, q, hw)
    reasons |= np.where(~np.isnan(ideal) & ~np.isnan(fit.alpha), st_reasons, 0)
    gap = np.where(np.isnan(ideal), np.nan, cols.time - ideal_time)
    known = ~np.isnan(gap) & ~np.isnan(fit.alpha)
    gap_lat = np.where(known, fit.alpha - np.nan_to_num(hw_lat), np.nan)
    gap_bw = np.where(
        known, fit.bandwidth_us - ideal_time - np.nan_to_num(staging), np.nan
    )
    gap_res = np.where(known, gap - np.nan_to_num(hw_lat) - gap_lat - gap_bw, np.nan)
    gap_res -= np.where(known, np.nan_to_num(staging), 0.0)

    out = measurements
    values = {
        "busbw_factor": arr.floats(f),
        "algbw_calc_gbps": arr.floats(bw["algbw_calc_gbps"]),
        "busbw_calc_gbps": arr.floats(bw["busbw_calc_gbps"]),
        "busbw_mismatch": arr.bools(bw["busbw_mismatch"]),
        "algbw_prescaled": arr.bools(bw["algbw_prescaled"]),
        "ideal_busbw_gbps": arr.floats(ideal),
        "ideal_bound": arr.labels(bound, ("intra", "inter")),
        "efficiency": arr.floats(eff),
        "ideal_time_us": arr.floats(ideal_time),
        "model_time_us": arr.floats(fit.model_time),
        "model_error_pct": arr.floats(fit.error_pct),
        "regime": arr.labels(fit.regime, ("latency-bound", "bandwidth-bound")),
        "fit_class": arr.labels(fit.fit_class, FIT_CLASSES),
        "gap_us": arr.floats(gap),
        "gap_hw_latency_us": arr.floats(np.where(known, hw_lat, np.nan)),
        "gap_latency_us": arr.floats(gap_lat),
        "gap_bandwidth_us": arr.floats(gap_bw),
        "gap_staging_us": arr.floats(np.where(known, staging, np.nan)),
        "gap_residual_us": arr.floats(gap_res),
        "efficiency_note": why.note_strings(reasons),
    }
    for name in ROW_COLUMNS:
        out = out.append_column(name, values[name])
    return Analysis(out, fit.table, tuple(dict.fromkeys(notes)), profiles)


def _row_hardware(
    c: Columns, options: HardwareOptions, notes: list[str]
) -> tuple[dict[str, np.ndarray], tuple[HardwareProfile, ...]]:
    """Per-row B, I, P, alpha and staging figures, each device's profile resolved
    once; and the distinct profiles used."""
    index, _ = arr.dictionary_codes(c.device)
    names = [None, *pc.unique(c.device.drop_null()).to_pylist()]
    profiles: list[HardwareProfile | None] = []
    if options.profile is not None:
        chosen, found = options.resolve()
        profiles, notes[:0] = [chosen] * len(names), found
    else:
        for name in names:
            chosen, found = options.resolve(name)
            profiles.append(chosen)
            notes.extend(found)
    present = [profiles[i] for i in np.unique(index)]
    used = tuple({p.summary(): p for p in present if p is not None}.values())

    def pick(attr: str, default: float = np.nan) -> np.ndarray:
        values = [
            default
            if p is None or getattr(p, attr) is None
            else float(getattr(p, attr))
            for p in profiles
        ]
        return np.array(values, dtype=np.float64)[index]

    hosts = pick("hosts_per_node")
    figures = {
        "intra": pick("intra_gbps"),
        "inter": pick("inter_gbps"),
        "gpus": pick("gpus_per_node"),
        "hosts": hosts,
        "alpha": pick("alpha_us"),
        "pcie": pick("pcie_gbps"),
        "staged": pick("host_staging", 0.0) > 0,
    }
    return figures, used


def _nodes(
    c: Columns,
    hw: dict[str, np.ndarray],
    nodes: int | None,
    gpus_per_node: int | None,
    notes: list[str],
) -> tuple[np.ndarray, np.ndarray]:
    """Q per row: --nodes, else N/--gpus-per-node, else the log's hosts, else
    inferred."""
    n = c.nranks
    if nodes is not None or gpus_per_node is not None:
        q = np.full(n.shape, float(nodes)) if nodes is not None else n / gpus_per_node
        bad = ~np.isnan(n) & ((n % q != 0) | (q < 1) | (q > n))
        if bad.any():
            given = (
                f"--nodes {nodes}"
                if nodes is not None
                else f"--gpus-per-node {gpus_per_node}"
            )
            counts = ", ".join(str(int(v)) for v in np.unique(n[bad]))
            raise ProfileError(
                f"{given} does not divide the rank count ({counts}): "
                "every node must hold the same number of ranks (as the AIBooster ideal "
                "assumes)"
            )
        return q, np.zeros(n.shape, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        from_hosts = np.ceil(c.nnodes / hw["hosts"])
    inferred = np.where(n <= hw["gpus"], 1.0, n / hw["gpus"])
    inferred = np.where(inferred % 1 == 0, inferred, np.nan)
    q = np.where(np.isnan(from_hosts), inferred, from_hosts)
    if (np.isnan(c.nnodes) & ~np.isnan(inferred) & ~np.isnan(n)).any():
        notes.append(
            "node count not in the log: assumed full nodes of the profile's GPUs per "
            "node (one node when N <= P); pass --nodes to set it"
        )
    if (hw["hosts"] > 1).any() and not np.isnan(c.nnodes).all():
        notes.append(
            "hosts grouped into NVLink domains of the profile to count nodes (Q)"
        )
    reasons = np.where(np.isnan(q) & ~np.isnan(hw["intra"]), why.NO_Q, 0)
    with np.errstate(invalid="ignore"):
        uneven = ~np.isnan(q) & ((n % q != 0) | (q > n))
    reasons |= np.where(uneven, why.UNEVEN, 0)
    return np.where(uneven, np.nan, q), reasons


def _latency_steps(code: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Fewest alpha steps per row (:func:`ncclparse.collectives.latency_steps`)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log = np.ceil(np.log2(np.maximum(n, 1)))
    steps = _STEPS[code]
    return np.select(
        [
            steps == Steps.ONE,
            steps == Steps.LOG,
            steps == Steps.TWO_LOG,
            steps == Steps.LINEAR,
        ],
        [np.ones_like(n), log, 2 * log, n - 1],
        np.nan,
    )


def _staging(
    kind: np.ndarray,
    size: np.ndarray,
    n: np.ndarray,
    q: np.ndarray,
    hw: dict[str, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Aurora data-path model Eq. 6 host staging, 2*2*Z/(P*B_PCIe), on multi-node
    all-reduce."""
    staged = hw["staged"] & (q > 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        term = 4 * size / ((n / q) * hw["pcie"] * 1e3)
    reduce_all = kind == BusbwKind.REDUCE_ALL  # all_reduce: the only one modelled
    value = np.where(staged, np.where(reduce_all, term, np.nan), 0.0)
    return value, np.where(staged & ~reduce_all, why.STAGING, 0)
