"""The ideal bus bandwidth of a topology: what busbw the hardware allows at best.

AIBooster's estimate ("NCCL Ideal Communication Bandwidth Estimation Method", Fixstars
AIBooster documentation) for P GPUs per node on Q nodes: one node, the per-GPU
intra-node bandwidth B; several, ``min(I(N-1)Q/(N(Q-1)), B(N-1)/(N-Q))`` with I the
per-node inter-node bandwidth and N = PQ. Derivation and worked examples in
``docs/efficiency.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ncclparse.errors import ProfileError
from ncclparse.units import bandwidth_gbps


@dataclass(frozen=True, slots=True)
class IdealBandwidth:
    """AIBooster's ideal bus bandwidth (GB/s) and its two multi-node terms.

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


def ideal_busbw(
    intra_gbps: np.ndarray | float,
    inter_gbps: np.ndarray | float,
    ranks: np.ndarray | float,
    nodes: np.ndarray | float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorized AIBooster ideal: ``(ideal, intra_term, inter_term)`` in GB/s.

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
    """AIBooster's ideal bus bandwidth for P GPUs per node on Q nodes (N = P Q).

    Bandwidths in GB/s or with units (``"450GB/s"``). Example (AIBooster docs): B = 450,
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
