"""What a perfect link would reach, in words: the bound of an algorithm with its
figures and arithmetic, as the report's "ideal" card states it.

The numbers come from :func:`ncclparse.efficiency.algorithms.algorithm_bounds`, the
function the analysis judges by; the text only names its terms (docs/efficiency.md
section 2). A derivation whose result is not the analysed row's ideal (a figure the
analysis took from the log, a mesh's per-link bandwidth) is not shown: the card then
states the figure alone rather than arithmetic that does not add up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ncclparse.efficiency.algorithms import ALGORITHMS, SHOWN, algorithm_bounds

__all__ = ["Figures", "derivation"]

# An analysed ideal and the derivation's own result agree to this many GB/s (the
# analysis and this module do the same float arithmetic; printing rounds to 0.1).
_AGREE_GBPS = 0.05
# Each algorithm's (intra-node term, network term) for one node and for several, as
# docs/efficiency.md writes them; None: the term does not bound.
_ONE_NODE = {
    "ring": ("B", None),
    "tree": ("B", None),
    "nvls": ("2(P-1)/P·B", None),
    "hierarchical": ("B", None),
}
_NODES = {
    "ring": ("B", "I"),
    "tree": ("B·(N-1)/(N-Q)", "k·(N-1)/N·I"),
    "nvls_tree": ("2(P-1)/P·B", "k·(N-1)/N·I"),
    "collnet": ("B·(N-1)/(N-Q)", "2(N-1)/N·I"),
    "pat": (None, "I"),
    "hierarchical": ("B·(N-1)/(N-Q)", "I·(N-1)·Q/(N·(Q-1))"),
}


@dataclass(frozen=True, slots=True)
class Figures:
    """The hardware and topology an ideal rests on: ``b`` the per-GPU intra-node
    bandwidth, ``i`` a node's network bandwidth (GB/s, busbw units), ``n`` ranks on
    ``q`` nodes."""

    b: float
    i: float
    n: int
    q: int

    def text(self) -> str:
        """ "B = 450 GB/s per GPU inside a node, I = 400 GB/s per node over the
        network, N = 16 ranks, Q = 2 nodes, P = 8 GPUs per node"."""
        parts = [f"B = {_number(self.b)} GB/s per GPU inside a node"]
        if self.q > 1:
            parts.append(f"I = {_number(self.i)} GB/s per node over the network")
        parts.append(f"N = {self.n} ranks")
        parts.append(f"Q = {self.q} node{'s' * (self.q != 1)}")
        parts.append(f"P = {_number(self.n / self.q)} GPUs per node")
        return ", ".join(parts)


def derivation(
    algorithm: str, all_reduce: bool, figures: Figures, ideal: float
) -> str | None:
    """The bound of ``algorithm`` (an :data:`ALGORITHMS` name) for a ring-class
    collective on ``figures``, with its arithmetic: "NVLSTree: min(2(P-1)/P·B,
    k·(N-1)/N·I) = min(787.5, 750) = 750 GB/s (k = 2 at Q = 2)". None when the
    algorithm has no such bound here or its result is not ``ideal`` (the analysed
    figure, GB/s)."""
    terms = (_ONE_NODE if figures.q <= 1 else _NODES).get(algorithm)
    if terms is None or algorithm not in ALGORITHMS:
        return None
    bound, intra, inter = algorithm_bounds(
        np.array([all_reduce]),
        np.array([figures.b if figures.n > figures.q else math.inf]),
        np.array([figures.i]),
        np.array([float(figures.n)]),
        np.array([float(figures.q)]),
    )
    at = ALGORITHMS.index(algorithm)
    result = float(bound[at][0])
    if not math.isfinite(result) or abs(result - ideal) > _AGREE_GBPS:
        return None
    values = (float(intra[at][0]), float(inter[at][0]))
    shown = [(t, v) for t, v in zip(terms, values, strict=True) if t is not None]
    shown = [(t, v) for t, v in shown if math.isfinite(v)]
    names = ", ".join(t for t, _ in shown)
    numbers = ", ".join(_number(v) for _, v in shown)
    k = ""
    if any("k·" in t for t, _ in shown):
        k = " (k = 2 at Q = 2)" if figures.q == 2 else " (k = 1 beyond 2 nodes)"
    if len(shown) == 1:
        return f"{SHOWN[algorithm]}: {names} = {_number(result)} GB/s{k}"
    return (
        f"{SHOWN[algorithm]}: min({names}) = min({numbers}) = {_number(result)} GB/s{k}"
    )


def _number(value: float) -> str:
    """450, 787.5, 2.5: a figure as the arithmetic reads (one decimal at most)."""
    return f"{value:.1f}".removesuffix(".0")
