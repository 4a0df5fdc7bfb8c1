"""Alpha-beta cost models of collectives, with their terms kept apart.

Units everywhere: sizes in bytes, latencies and times in microseconds, bandwidths in
GB/s (1e9 B/s), so the bandwidth term ``n / beta`` is ``n / (beta_gbps * 1e3)`` µs. Step
counts often written ``log2 P`` are ``ceil(log2 P)`` here (an algorithm takes whole
steps); both agree when P is a power of two.

Sources: the alpha-beta (Hockney) model; the collective cost models of Thakur,
Rabenseifner and Gropp, "Optimization of Collective Communication Operations in MPICH"
(IJHPCA 2005) and Chan et al., "Collective communication: theory, practice, and
experience" (2007); and the Aurora oneCCL data-path projection (scale-up/scale-out
model of Intel's Aurora system).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass

from ncclparse.errors import ProfileError
from ncclparse.units import bandwidth_gbps, size_bytes, time_us

__all__ = [
    "ALGORITHMS",
    "BucketingComparison",
    "DataPathPrediction",
    "HierarchicalPrediction",
    "Prediction",
    "bucketing",
    "copy_time_us",
    "crossover_bytes",
    "data_path_all_reduce",
    "hierarchical_all_reduce",
    "overlapped_time",
    "predict",
    "regime",
    "scale_out_all_reduce",
    "scale_up_all_reduce",
]


@dataclass(frozen=True, slots=True)
class Prediction:
    """A predicted time (µs) and its latency and bandwidth terms (µs)."""

    time_us: float
    latency_us: float
    bandwidth_us: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class HierarchicalPrediction:
    """The two-level all-reduce: intra RS, inter AR, intra AG (µs)."""

    reduce_scatter: Prediction
    all_reduce: Prediction
    all_gather: Prediction

    @property
    def phases(self) -> tuple[Prediction, Prediction, Prediction]:
        return (self.reduce_scatter, self.all_reduce, self.all_gather)

    @property
    def time_us(self) -> float:
        return sum(p.time_us for p in self.phases)

    @property
    def latency_us(self) -> float:
        return sum(p.latency_us for p in self.phases)

    @property
    def bandwidth_us(self) -> float:
        return sum(p.bandwidth_us for p in self.phases)

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "time_us": self.time_us,
            "latency_us": self.latency_us,
            "bandwidth_us": self.bandwidth_us,
        }
        for name in ("reduce_scatter", "all_reduce", "all_gather"):
            out[name] = getattr(self, name).as_dict()
        return out


@dataclass(frozen=True, slots=True)
class DataPathPrediction:
    """Aurora data-path model all-reduce terms (µs); ``time_us`` is their sum."""

    scale_up_us: float
    scale_out_us: float
    staging_us: float

    @property
    def time_us(self) -> float:
        return self.scale_up_us + self.scale_out_us + self.staging_us

    def as_dict(self) -> dict[str, float]:
        return {"time_us": self.time_us, **asdict(self)}


@dataclass(frozen=True, slots=True)
class BucketingComparison:
    """k separate all-reduces versus one of the concatenation (bucketing)."""

    individual_us: float
    bucketed_us: float
    latency_saved_us: float

    @property
    def speedup(self) -> float:
        return self.individual_us / self.bucketed_us


def _clog2(p: int) -> int:
    return math.ceil(math.log2(p)) if p > 1 else 0


# (latency steps, bandwidth multiplier of n/beta) as functions of P, per the standard
# alpha-beta collective cost models (Thakur, Rabenseifner and Gropp 2005; Chan et al.
# 2007); "direct" is send/recv, the plain alpha + n/beta.
_TERMS: dict[tuple[str, str], Callable[[int], tuple[int, float]]] = {
    ("sendrecv", "direct"): lambda p: (1, 1.0),
    ("broadcast", "tree"): lambda p: (_clog2(p), float(_clog2(p))),
    ("reduce", "tree"): lambda p: (_clog2(p), float(_clog2(p))),
    ("scatter", "binomial"): lambda p: (_clog2(p), (p - 1) / p),
    ("gather", "binomial"): lambda p: (_clog2(p), (p - 1) / p),
    ("all_reduce", "ring"): lambda p: (2 * (p - 1), 2 * (p - 1) / p),
    ("all_reduce", "tree"): lambda p: (2 * _clog2(p), 2.0 * _clog2(p)),
    ("all_reduce", "rhd"): lambda p: (2 * _clog2(p), 2 * (p - 1) / p),
    ("all_gather", "ring"): lambda p: (p - 1, (p - 1) / p),
    ("reduce_scatter", "ring"): lambda p: (p - 1, (p - 1) / p),
    ("alltoall", "pairwise"): lambda p: (p - 1, (p - 1) / p),
}
_DEFAULT = {
    "sendrecv": "direct",
    "broadcast": "tree",
    "reduce": "tree",
    "scatter": "binomial",
    "gather": "binomial",
    "all_reduce": "ring",
    "all_gather": "ring",
    "reduce_scatter": "ring",
    "alltoall": "pairwise",
}
# "AllReduce", "all-reduce", "allreduce" ... -> canonical schema names.
_CANONICAL = {name.replace("_", ""): name for name in _DEFAULT}
ALGORITHMS: dict[str, tuple[str, ...]] = {
    coll: tuple(a for c, a in _TERMS if c == coll) for coll in _DEFAULT
}


def predict(
    collective: str,
    size: float | str,
    ranks: int,
    alpha: float | str,
    bandwidth: float | str,
    algorithm: str | None = None,
) -> Prediction:
    """Predict one collective's time with its alpha-beta cost formula.

    Parameters
    ----------
    collective : canonical name (``all_reduce``, ``alltoall`` ...; see
    :data:`ALGORITHMS`).
    size : n in bytes, the nccl-tests size (``"10GB"`` accepted).
    ranks : P.
    alpha : per-step latency, µs (``"2us"`` accepted).
    bandwidth : beta, GB/s (``"50GB/s"``, ``"400Gbps"`` accepted).
    algorithm : ``ring``, ``tree``, ``rhd``, ``binomial``, ``pairwise`` or ``direct``;
        default: ring for all_reduce, all_gather and reduce_scatter, tree for
        broadcast and reduce, binomial for scatter and gather, pairwise for alltoall,
        direct for sendrecv.

    Raises ProfileError for an unknown collective/algorithm pair or P < 1.
    Worked example: 10 GB all_reduce on 256 ranks, 2 us, 50 GB/s,
    ``predict("all_reduce", "10GB", 256, "2us", "50GB/s")``, gives 399.46 ms (1.02 ms
    latency + 398.44 ms bandwidth).
    """
    coll = _CANONICAL.get(re.sub(r"[\s_-]", "", collective.lower()), collective)
    algo = algorithm or _DEFAULT.get(coll, "")
    terms = _TERMS.get((coll, algo))
    if terms is None:
        known = "; ".join(f"{c}: {'/'.join(a)}" for c, a in ALGORITHMS.items())
        raise ProfileError(f"no cost model for {collective} with {algorithm}: {known}")
    if ranks < 1:
        raise ProfileError(f"ranks must be >= 1, got {ranks}")
    steps, multiplier = terms(ranks)
    # A float size is allowed: phase 2 of the hierarchical model moves n/G bytes.
    n = size_bytes(size) if isinstance(size, str) else float(size)
    latency = steps * time_us(alpha)
    bandwidth_term = multiplier * n / (bandwidth_gbps(bandwidth) * 1e3)
    return Prediction(latency + bandwidth_term, latency, bandwidth_term)


def hierarchical_all_reduce(
    size: int | str,
    gpus_per_node: int,
    nodes: int,
    intra_alpha: float | str,
    intra_bandwidth: float | str,
    inter_alpha: float | str,
    inter_bandwidth: float | str,
) -> HierarchicalPrediction:
    """Two-level (hierarchical) all-reduce, G GPUs per node on N nodes.

    Phase 1 intra RS ``(G-1)a_NV + (G-1)/G n/b_NV``; phase 2 inter ring AR of n/G,
    ``2(N-1)a_net + 2(N-1)/N (n/G)/b_net``; phase 3 intra AG as phase 1.
    Worked example: 8 x 8 GPUs, 2 GB, 1 µs/300 GB/s, 5 µs/50 GB/s gives 20.50 ms
    (20.44 ms if phases 1 and 3 are rounded to 5.81 ms; see docs/efficiency.md).
    """
    n = size_bytes(size)
    rs = predict("reduce_scatter", n, gpus_per_node, intra_alpha, intra_bandwidth)
    ar = predict("all_reduce", n / gpus_per_node, nodes, inter_alpha, inter_bandwidth)
    return HierarchicalPrediction(rs, ar, rs)


def crossover_bytes(alpha: float | str, bandwidth: float | str) -> float:
    """Message size n* = alpha * beta (bytes) where both terms are equal.

    Worked examples: 2 µs x 50 GB/s = 100 KB; NVLink 1 µs x 900 GB/s = 900 KB. With
    beta written as inverse bandwidth the same boundary is n = alpha/beta.
    """
    return time_us(alpha) * bandwidth_gbps(bandwidth) * 1e3


def regime(latency_us: float, bandwidth_us: float) -> str:
    """``latency-bound`` when the latency term exceeds the bandwidth term."""
    return "latency-bound" if latency_us > bandwidth_us else "bandwidth-bound"


def bucketing(
    tensors: int,
    tensor_size: int | str,
    ranks: int,
    alpha: float | str,
    bandwidth: float | str,
) -> BucketingComparison:
    """Ring all-reduce of k tensors one by one versus once concatenated.

    Batching small messages saves (k-1) latency terms (worked example: 1000 x 1 MB on
    64 ranks, 2 us, 50 GB/s).
    """
    one = predict("all_reduce", tensor_size, ranks, alpha, bandwidth)
    total = tensors * size_bytes(tensor_size)
    fused = predict("all_reduce", total, ranks, alpha, bandwidth)
    individual = tensors * one.time_us
    return BucketingComparison(
        individual, fused.time_us, (tensors - 1) * one.latency_us
    )


def overlapped_time(compute_us: float, comm_us: float, overlap: float = 1.0) -> float:
    """Step time when a fraction ``overlap`` of communication hides behind compute.

    Overlap of communication and compute (overlap=1 gives max(compute, comm) when
    comm <= compute): ``compute + (1 - overlap) * comm``.
    """
    if not 0.0 <= overlap <= 1.0:
        raise ProfileError(f"overlap must be between 0 and 1, got {overlap}")
    hidden = min(overlap * comm_us, compute_us)
    return compute_us + comm_us - hidden


def copy_time_us(size: int | str, bandwidth: float | str) -> float:
    """Staging copy time n / beta_PCIe (memory copy: 1 GB at 64 GB/s ~ 16 ms)."""
    return size_bytes(size) / (bandwidth_gbps(bandwidth) * 1e3)


def scale_out_all_reduce(
    size: int | str,
    nodes: int,
    *,
    nic_bandwidth: float | str,
    nics_per_node: int = 1,
    derating: float = 0.8,
    ranks_per_node: int = 1,
    xe_bandwidth: float | str | None = None,
    xe_links: int = 0,
    pcie_bandwidth: float | str | None = None,
) -> DataPathPrediction:
    """Scale-up + scale-out all-reduce (Aurora data-path model, Eq. 4), plus Eq. 6's
    PCIe term.

    ``scale_up = 2 * (Z/2) / (n_Xe * B_Xe)`` (the reduce-scatter and all-gather halves
    over Xe-link; zero with one rank per node), ``scale_out = 2Z / (derating * n_NIC *
    B_NIC) * (Q-1)/Q``, and with ``pcie_bandwidth`` the host staging term
    ``2 * 2 * Z / (ranks_per_node * B_PCIe)`` (both phases, there and back).
    Example (Aurora data-path model table): Z = 2 GB, 1 rank and 1 NIC of 23 GB/s per
    node gives 108.7, 163.0, 190.2, 203.8 ms on 2, 4, 8, 16 nodes; adding PCIe at 42
    GB/s adds 190.5 ms.
    """
    z = size_bytes(size)
    if nodes < 1 or nics_per_node < 1 or ranks_per_node < 1:
        raise ProfileError("nodes, nics_per_node and ranks_per_node must be >= 1")
    if not 0.0 < derating <= 1.0:
        raise ProfileError(f"NIC derating must be in (0, 1], got {derating}")
    scale_up = 0.0
    if ranks_per_node > 1:
        if xe_bandwidth is None or xe_links < 1:
            raise ProfileError(
                "more than one rank per node needs the scale-up figures: "
                "xe_bandwidth and xe_links (Aurora data-path model, Eq. 4)"
            )
        scale_up = 2 * (z / 2) / (xe_links * bandwidth_gbps(xe_bandwidth) * 1e3)
    nic = derating * nics_per_node * bandwidth_gbps(nic_bandwidth) * 1e3
    scale_out = 2 * z / nic * (nodes - 1) / nodes
    staging = 0.0
    if pcie_bandwidth is not None:
        staging = 2 * 2 * z / (ranks_per_node * bandwidth_gbps(pcie_bandwidth) * 1e3)
    return DataPathPrediction(scale_up, scale_out, staging)


def scale_up_all_reduce(
    size: int | str,
    ranks_per_node: int,
    *,
    xe_bandwidth: float | str,
    mdfi_bandwidth: float | str | None = None,
) -> DataPathPrediction:
    """Intra-node all-reduce over Xe-link and MDFI (Aurora data-path model, Eq. 10).

    ``2 * (Z/R) / B_Xe + 2 * (Z/R) / B_MDFI``; without ``mdfi_bandwidth`` the MDFI
    terms are dropped, as the model allows for large messages. Example: Z = 0.875 GB,
    R = 12, 15 and 196 GB/s gives 10.5 ms (the projection prints 10.5 ms).
    """
    z = size_bytes(size)
    if ranks_per_node < 1:
        raise ProfileError("ranks_per_node must be >= 1")
    share = z / ranks_per_node
    scale_up = 2 * share / (bandwidth_gbps(xe_bandwidth) * 1e3)
    if mdfi_bandwidth is not None:
        scale_up += 2 * share / (bandwidth_gbps(mdfi_bandwidth) * 1e3)
    return DataPathPrediction(scale_up, 0.0, 0.0)


def data_path_all_reduce(
    size: int | str,
    *,
    d2h: float | str,
    h2s: float | str,
    nic: float | str,
    compute: float | str,
    transfers: int = 2,
    links: int = 1,
) -> DataPathPrediction:
    """The host-staged path GPU -> DDR -> fabric -> DDR -> GPU (Aurora data-path
    model, Eq. 1).

    ``(Z/B_D2H + Z/B_H2S + Z/B_NIC + Z/B_D2H + Z/B_comp) * 2(n_t - 1)/n_l``; the NIC hop
    is reported as ``scale_out_us``, the PCIe and summation hops as ``staging_us``.
    Eq. 2-3: one rank per node on two nodes has n_t = 2, n_l = 1.
    """
    z = size_bytes(size)
    factor = 2 * (transfers - 1) / links
    pcie = (2 / bandwidth_gbps(d2h) + 1 / bandwidth_gbps(h2s)) * z / 1e3
    reduce = z / (bandwidth_gbps(compute) * 1e3)
    wire = z / (bandwidth_gbps(nic) * 1e3)
    return DataPathPrediction(0.0, wire * factor, (pcie + reduce) * factor)
