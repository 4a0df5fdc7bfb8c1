"""The efficiency engine: recomputed bandwidths, ideal bandwidth, alpha-beta fits, gaps.

Pure and vectorized: a ``measurements`` table goes in, the same table with added columns
and a per-series fits table come out (:func:`analyze`). No I/O, no per-row Python. The
arithmetic is written up in ``docs/efficiency.md``; every null it leaves has its reason
in the ``efficiency_note`` column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import _columns as arr
from . import _notes as why
from .errors import ProfileError
from .fits import FIT_CLASSES, FIT_COLUMNS, SERIES_KEYS, fit_series
from .hardware import HardwareProfile, resolve_profile
from .units import bandwidth_gbps

__all__ = [
    "FIT_CLASSES",
    "FIT_COLUMNS",
    "ROW_COLUMNS",
    "SERIES_KEYS",
    "Analysis",
    "IdealBandwidth",
    "analyze",
    "bandwidth_columns",
    "busbw_factor",
    "ideal_bandwidth",
    "ideal_busbw",
]

# Busbw factor kinds (nccl-tests-format.md sec. 7; seed 000 "Bus Bandwidth").
_KIND = {
    "all_reduce": 1,  # 2(n-1)/n
    "all_gather": 2,  # (n-1)/n
    "all_gather_v": 2,
    "reduce_scatter": 2,
    "alltoall": 2,
    "alltoallv": 2,
    "gather": 2,
    "scatter": 2,
    "broadcast": 3,  # 1
    "reduce": 3,
    "sendrecv": 3,
    "hypercube": 4,  # factor 1, but algbw = size (n-1)/n / t
}

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


@dataclass(frozen=True, slots=True)
class IdealBandwidth:
    """Seed 003's ideal bus bandwidth (GB/s) and its two multi-node terms.

    ``inter_term_gbps`` is None on one node; ``intra_term_gbps`` is None when unbounded
    (one GPU per node). ``bound`` names the term that sets the ideal.
    """

    ideal_busbw_gbps: float
    intra_term_gbps: float | None
    inter_term_gbps: float | None
    bound: str
    ranks: int
    nodes: int

    def as_dict(self) -> dict[str, float | int | str | None]:
        return {
            "ideal_busbw_gbps": self.ideal_busbw_gbps,
            "intra_term_gbps": self.intra_term_gbps,
            "inter_term_gbps": self.inter_term_gbps,
            "bound": self.bound,
            "ranks": self.ranks,
            "nodes": self.nodes,
        }


@dataclass(frozen=True, slots=True)
class Analysis:
    """What :func:`analyze` returns: rows (input + ROW_COLUMNS), fits, assumptions."""

    rows: pa.Table
    fits: pa.Table
    assumptions: tuple[str, ...]


def busbw_factor(collective: str, nranks: int) -> float:
    """Return nccl-tests' busbw/algbw factor for one collective on n ranks.

    all_reduce 2(n-1)/n; all_gather(_v), reduce_scatter, alltoall(v), gather, scatter
    (n-1)/n; broadcast, reduce, sendrecv, hypercube 1 (nccl-tests-format.md sec. 7).
    Raises ProfileError for an unknown collective or n < 1.
    """
    kind = _KIND.get(collective)
    if kind is None or nranks < 1:
        raise ProfileError(f"no busbw factor for {collective!r} on {nranks} ranks")
    return float(_factor(np.array([kind]), np.array([float(nranks)]))[0])


def ideal_busbw(
    intra_gbps: np.ndarray | float,
    inter_gbps: np.ndarray | float,
    ranks: np.ndarray | float,
    nodes: np.ndarray | float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorized seed 003 ideal: ``(ideal, intra_term, inter_term)`` in GB/s.

    Parameters
    ----------
    intra_gbps : B, per-GPU unidirectional intra-node bandwidth.
    inter_gbps : I, per-node unidirectional inter-node bandwidth (NaN if unknown).
    ranks, nodes : N and Q (N divisible by Q is the caller's check).

    One node: ideal = B, inter term NaN. Several: ``min(I(N-1)Q/(N(Q-1)),
    B(N-1)/(N-Q))``;
    with P = N/Q = 1 the intra term is unbounded (inf). NaN inputs give NaN.
    """
    b, i, n, q = (
        np.asarray(v, dtype=np.float64) for v in (intra_gbps, inter_gbps, ranks, nodes)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        inter = np.where(q > 1, i * (n - 1) * q / (n * (q - 1)), np.nan)
        intra = np.where(q > 1, np.where(n > q, b * (n - 1) / (n - q), np.inf), b)
        ideal = np.where(q > 1, np.fmin(inter, intra), b)
    ideal = np.where(((q > 1) & np.isnan(i)) | np.isnan(q) | np.isnan(n), np.nan, ideal)
    return ideal, intra, inter


def ideal_bandwidth(
    intra_bw: float | str,
    inter_bw: float | str | None = None,
    *,
    gpus_per_node: int,
    nodes: int = 1,
) -> IdealBandwidth:
    """Seed 003's ideal bus bandwidth for P GPUs per node on Q nodes (N = P Q).

    Bandwidths in GB/s or with units (``"450GB/s"``). Example (seed 003): B = 450,
    I = 100, P = 8, Q = 2 gives min(187.5, 482.1) = 187.5 GB/s. Raises ProfileError
    when Q > 1 and I is missing, or P, Q < 1.
    """
    if gpus_per_node < 1 or nodes < 1:
        raise ProfileError("gpus per node and nodes must be >= 1")
    if nodes > 1 and inter_bw is None:
        raise ProfileError(
            f"{nodes} nodes need the inter-node bandwidth: pass --inter-bw"
        )
    b = bandwidth_gbps(intra_bw)
    i = bandwidth_gbps(inter_bw) if inter_bw is not None else math.nan
    n = gpus_per_node * nodes
    ideal, intra, inter = (float(a) for a in ideal_busbw(b, i, n, nodes))
    bound = "intra" if nodes == 1 or intra <= inter else "inter"
    return IdealBandwidth(
        ideal,
        None if math.isinf(intra) else intra,
        None if math.isnan(inter) else inter,
        bound,
        n,
        nodes,
    )


def bandwidth_columns(measurements: pa.Table) -> pa.Table:
    """Return ``measurements`` plus busbw_factor, algbw/busbw_calc_gbps and two flags.

    ``busbw_mismatch``: the printed busbw differs from the recomputed one by more than
    the rounding of the printed busbw and time can explain. ``algbw_prescaled``: an
    all_gather/reduce_scatter whose printed algbw is size (n-1)/n / t, as nccl-tests
    printed it before v2.9.0. Both null where the printed value is missing.
    """
    cols = _Columns(measurements)
    bw = _bandwidths(cols)
    out = measurements
    for name in ("busbw_factor", "algbw_calc_gbps", "busbw_calc_gbps"):
        out = out.append_column(name, arr.floats(bw[name]))
    for name in ("busbw_mismatch", "algbw_prescaled"):
        out = out.append_column(name, arr.bools(bw[name]))
    return out


def analyze(
    measurements: pa.Table,
    profile: HardwareProfile | str | Path | None = None,
    *,
    intra_bw: float | str | None = None,
    inter_bw: float | str | None = None,
    gpus_per_node: int | None = None,
    nodes: int | None = None,
) -> Analysis:
    """Compute every efficiency column for a ``measurements`` table, plus series fits.

    ``profile`` is a profile, a preset name or a TOML path; without one, each row's
    ``device`` picks a matching preset (reported in ``assumptions``). ``intra_bw``,
    ``inter_bw``, ``gpus_per_node`` override B, I, P; ``nodes`` sets Q for every row
    (default: the table's ``nnodes``). Raises ProfileError for a bad profile or when
    ``nodes``/``gpus_per_node`` do not divide a row's rank count.
    """
    cols = _Columns(measurements)
    notes: list[str] = []
    bw = _bandwidths(cols)
    reasons = bw["reasons"]
    hw = _row_hardware(cols, profile, intra_bw, inter_bw, gpus_per_node, notes)
    n, f = cols.nranks, bw["busbw_factor"]
    q, q_reasons = _nodes(cols, hw, nodes, gpus_per_node, notes)
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

    steps = _latency_steps(bw["kind"], n)
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
    return Analysis(out, fit.table, tuple(dict.fromkeys(notes)))


class _Columns:
    """The input columns the engine needs, as numpy arrays (NaN for null)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.size = arr.num(table, "size_bytes")
        self.time = arr.num(table, "time_us")
        self.nranks = arr.num(table, "nranks")
        self.nnodes = arr.num(table, "nnodes")
        self.algbw = arr.num(table, "algbw_gbps")
        self.busbw = arr.num(table, "busbw_gbps")
        self.grouped = arr.flag(table, "grouped")
        self.cputime = arr.flag(table, "cputime")
        self.legacy = arr.strings(table, "wrong_kind") == "max_deviation"
        self.kind = np.array([0, *_KIND.values()])[
            arr.codes(table, "collective", tuple(_KIND))
        ]
        self.device = table.column("device")
        self.named = pc.is_valid(table.column("collective")).to_numpy(
            zero_copy_only=False
        )


def _bandwidths(c: _Columns) -> dict[str, np.ndarray]:
    n, t, kind = c.nranks, c.time, c.kind
    reasons = np.where(c.grouped, why.GROUPED, 0) | np.where(c.cputime, why.CPUTIME, 0)
    reasons |= np.where(kind == 0, why.NO_COLL, 0) | np.where(np.isnan(n), why.NO_N, 0)
    reasons |= np.where(~(t > 0), why.BAD_T, 0)
    ok = (kind > 0) & ~np.isnan(n) & (n >= 1) & (t > 0) & ~c.grouped
    with np.errstate(divide="ignore", invalid="ignore"):
        # bytes/us = 1e6 B/s = 1e-3 GB/s; hypercube moves size (n-1)/n (sec. 7).
        alg = np.where(kind == 4, (n - 1) / n, 1.0) * c.size / t * 1e-3
        factor = _factor(kind, n)
        bus = alg * factor
        time_tol = _time_tolerance(t, c.legacy)
        slack = np.abs(bus) * time_tol / (t - time_tol)
        limit = _print_tolerance(c.busbw) + slack + 1e-9 * np.abs(bus)
        mismatch = np.abs(c.busbw - bus) > limit
        a_limit = _print_tolerance(c.algbw) + np.abs(alg) * time_tol / (t - time_tol)
        modern = np.abs(c.algbw - alg) <= a_limit
        old = np.abs(c.algbw - alg * (n - 1) / n) <= a_limit
    judged = ok & (t > time_tol)
    alg, bus, factor = (np.where(ok, v, np.nan) for v in (alg, bus, factor))
    prescaled = (kind == 2) & (n > 1) & old & ~modern
    return {
        "kind": np.where(ok, kind, 0),
        "busbw_factor": factor,
        "algbw_calc_gbps": alg,
        "busbw_calc_gbps": bus,
        "busbw_mismatch": arr.masked(mismatch, judged & ~np.isnan(c.busbw)),
        "algbw_prescaled": arr.masked(prescaled, judged & ~np.isnan(c.algbw)),
        "reasons": reasons,
    }


def _factor(kind: np.ndarray, n: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        part = (n - 1) / n
    return np.select([kind == 1, kind == 2, kind >= 3], [2 * part, part, 1.0], np.nan)


def _print_tolerance(value: np.ndarray) -> np.ndarray:
    """Half a unit in the last printed place of a bandwidth (sec. 6.1: %6.2f, then E7's
    width fitting to 1 or 0 decimals and %6.0e), taking the loosest era."""
    a = np.abs(np.nan_to_num(value))
    with np.errstate(divide="ignore"):
        exp = 0.5 * 10.0 ** np.floor(np.log10(np.maximum(a, 1.0)))
    return np.select([a < 1e3, a < 1e4, a < 1e6], [0.005, 0.05, 0.5], exp)


def _time_tolerance(t: np.ndarray, legacy: np.ndarray) -> np.ndarray:
    """Half a unit of the printed time: %.2f to 100 us, %.1f to 1e4, %.0f, then %7.1e;
    E0-E2 logs (max-deviation column) may have printed ms with 3 decimals."""
    a = np.abs(np.nan_to_num(t))
    with np.errstate(divide="ignore"):
        exp = 0.05 * 10.0 ** np.floor(np.log10(np.maximum(a, 1.0)))
    tol = np.select([a <= 100, a <= 1e4, a < 1e7], [0.005, 0.05, 0.5], exp)
    return np.where(legacy, np.maximum(tol, 0.5), tol)


def _row_hardware(
    c: _Columns,
    profile: HardwareProfile | str | Path | None,
    intra_bw: float | str | None,
    inter_bw: float | str | None,
    gpus_per_node: int | None,
    notes: list[str],
) -> dict[str, np.ndarray]:
    """Per-row B, I, P, alpha and staging figures from one profile or per device."""
    index, _ = arr.dictionary_codes(c.device)
    names = [None, *pc.unique(c.device.drop_null()).to_pylist()]
    profiles: list[HardwareProfile | None] = []
    if profile is not None:
        chosen, found = resolve_profile(
            profile, intra_bw=intra_bw, inter_bw=inter_bw, gpus_per_node=gpus_per_node
        )
        profiles, notes[:0] = [chosen] * len(names), found
    else:
        for name in names:
            chosen, found = resolve_profile(
                None,
                intra_bw=intra_bw,
                inter_bw=inter_bw,
                gpus_per_node=gpus_per_node,
                device_name=name,
            )
            profiles.append(chosen)
            notes.extend(found)

    def pick(attr: str, default: float = np.nan) -> np.ndarray:
        values = [
            default
            if p is None or getattr(p, attr) is None
            else float(getattr(p, attr))
            for p in profiles
        ]
        return np.array(values, dtype=np.float64)[index]

    hosts = pick("hosts_per_node")
    return {
        "intra": pick("intra_gbps"),
        "inter": pick("inter_gbps"),
        "gpus": pick("gpus_per_node"),
        "hosts": hosts,
        "alpha": pick("alpha_us"),
        "pcie": pick("pcie_gbps"),
        "staged": pick("host_staging", 0.0) > 0,
    }


def _nodes(
    c: _Columns,
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
                f"every node must hold the same number of ranks (seed 003)"
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


def _latency_steps(kind: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Fewest alpha steps of any seed 000 algorithm (costmodels.latency_steps)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log = np.ceil(np.log2(np.maximum(n, 1)))
    ring = n - 1
    return np.select([kind == 1, kind == 2, kind == 3], [2 * log, ring, log], np.nan)


def _staging(
    kind: np.ndarray,
    size: np.ndarray,
    n: np.ndarray,
    q: np.ndarray,
    hw: dict[str, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Seed 004 Eq. 6 host staging, 2*2*Z/(P*B_PCIe), on multi-node all-reduce."""
    staged = hw["staged"] & (q > 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        term = 4 * size / ((n / q) * hw["pcie"] * 1e3)
    value = np.where(staged, np.where(kind == 1, term, np.nan), 0.0)
    return value, np.where(staged & (kind != 1), why.STAGING, 0)
