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


def ideal_by_collective(
    bound: np.ndarray,
    intra_gbps: np.ndarray,
    inter_gbps: np.ndarray,
    gpu_net_gbps: np.ndarray,
    ranks: np.ndarray,
    nodes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ideal bus bandwidth of each row for its collective's bound (GB/s).

    ``bound`` holds :class:`ncclparse.collectives.Bound` values; ``intra_gbps`` is B
    for the row's P = N/Q local GPUs (already mesh-adjusted), ``inter_gbps`` the I
    those P GPUs reach (already NIC-adjusted), ``gpu_net_gbps`` the network bandwidth
    of one GPU (its own NICs). Returns ``(ideal, intra_term, inter_term)``; a term is
    inf where it does not bound (one GPU per node has no intra-node traffic) and NaN
    where it does not apply (one node). On one node every bound is B. Derivations in
    ``docs/efficiency.md`` section 2:

    * RING (all_reduce, all_gather, reduce_scatter): AIBooster,
      ``min(I(N-1)Q/(N(Q-1)), B(N-1)/(N-Q))``;
    * ALLTOALL: a node sends P(N-P)S/N bytes over I and each GPU S(P-1)/N over B:
      ``min(I(N-1)/(P(N-P)), B(N-1)/(P-1))``;
    * ONE_TO_ALL (broadcast, reduce): the whole buffer enters every node and GPU:
      ``min(I, B)``;
    * PAIR (sendrecv): one GPU per node boundary sends on its own NICs: ``min(g, B)``;
    * ROOTED (gather, scatter): the node of the root moves (N-P)S/N over I, the root
      GPU (N-1)S/N over its links and NICs: ``min(I(N-1)/(N-P), B + g)``.
    """
    b, i, g, n, q = (
        np.asarray(v, dtype=np.float64)
        for v in (intra_gbps, inter_gbps, gpu_net_gbps, ranks, nodes)
    )
    kind = np.asarray(bound)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = n / q
        solo = p <= 1  # one GPU per node: no intra-node traffic
        ring_inter = i * (n - 1) * q / (n * (q - 1))
        ring_intra = np.where(solo, np.inf, b * (n - 1) / (n - q))
        a2a_inter = i * (n - 1) / (p * (n - p))
        a2a_intra = np.where(solo, np.inf, b * (n - 1) / (p - 1))
        rooted_inter = i * (n - 1) / (n - p)
        rooted_gpu = np.where(solo, g, b + g)
    b_or_inf = np.where(solo, np.inf, b)
    inter = np.select(
        [kind == 1, kind == 2, kind == 3, kind == 4, kind == 5],
        [ring_inter, a2a_inter, i, g, rooted_inter],
        np.nan,
    )
    intra = np.select(
        [kind == 1, kind == 2, kind == 3, kind == 4, kind == 5],
        [ring_intra, a2a_intra, b_or_inf, b_or_inf, rooted_gpu],
        np.nan,
    )
    multi = q > 1
    inter = np.where(multi, inter, np.nan)
    intra = np.where(multi, intra, b)
    ideal = np.where(multi, np.fmin(inter, intra), b)
    missing = (multi & np.isnan(inter)) | np.isnan(q) | np.isnan(n) | (kind == 0)
    return np.where(missing, np.nan, ideal), intra, inter
