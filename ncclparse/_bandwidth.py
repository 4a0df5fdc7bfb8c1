"""Bus bandwidth recomputed from size and time, and seed 003's ideal to judge it by.

The first half of the efficiency engine (:mod:`ncclparse.efficiency` re-exports the
public names): nccl-tests' busbw factors, algbw/busbw recomputed per row with flags for
printed figures that disagree, and the ideal bus bandwidth of P GPUs per node on Q
nodes. Pure and vectorized, as the engine is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import _columns as arr
from . import _notes as why
from .errors import ProfileError
from .units import bandwidth_gbps

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
    cols = Columns(measurements)
    bw = bandwidths(cols)
    out = measurements
    for name in ("busbw_factor", "algbw_calc_gbps", "busbw_calc_gbps"):
        out = out.append_column(name, arr.floats(bw[name]))
    for name in ("busbw_mismatch", "algbw_prescaled"):
        out = out.append_column(name, arr.bools(bw[name]))
    return out


class Columns:
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


def bandwidths(c: Columns) -> dict[str, np.ndarray]:
    """Per row: busbw factor, algbw/busbw recomputed, the two flags, kind, reasons."""
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
