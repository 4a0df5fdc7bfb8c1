"""The bus bandwidth each NCCL algorithm can reach, and which ones a run could have run.

nccl-tests' busbw is a ring's per-link traffic (nccl-tests ``doc/PERFORMANCE.md``):
a ring's busbw cannot exceed what each node's NICs move, but a tree, NVLink SHARP
(NVLS) or in-network reduction (CollNet, IB SHARP) put less traffic on the network
and can go beyond it (NCCL maintainers: NVIDIA/nccl #837, #946; NVIDIA/nccl-tests
#196, #274). So a ring-class collective (all_reduce, all_gather, reduce_scatter) is
judged against the bound of the algorithm NCCL ran, from NCCL's own algorithm set
(``src/graph/tuning.cc`` in NVIDIA/nccl). With N ranks on Q nodes, B the per-GPU
intra-node bandwidth and I the NIC bandwidth of a node, in busbw units
(``docs/efficiency.md`` section 2 derives each):

==============  ==============================  ================================
algorithm       Q = 1                           Q > 1
==============  ==============================  ================================
ring            B                               min(B, I)
tree            B                               min(k(N-1)/N I, B(N-1)/(N-Q)),
                                                k = 2 at Q = 2, else 1
nvls            2(P-1)/P B (all_reduce), else B  --
nvls_tree       --                              min(k(N-1)/N I, 2(P-1)/P B)
collnet         --                              min(2(N-1)/N I, B(N-1)/(N-Q))
pat             --                              I (one rank per node)
hierarchical    B                               AIBooster, min(I(N-1)Q/(N(Q-1)),
                                                B(N-1)/(N-Q))
==============  ==============================  ================================

Each bound is a line rate; what healthy hardware reaches of it is
:mod:`~ncclparse.efficiency.achievable`'s. Which algorithms a run could have run
(:func:`candidates`) comes from the log where it says (``NCCL_ALGO``, per-size
TUNING choices, NVLS and CollNet lines) and otherwise from the collective, the
topology and the GPU.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ncclparse.schema import NCCL_TOOLS

__all__ = [
    "ALGORITHMS",
    "NVLS_FROM_BYTES",
    "RULED_OUT",
    "SHOWN",
    "Evidence",
    "algorithm_bounds",
    "allowed_by_setting",
    "candidates",
    "lowest_and_highest",
]

ALGORITHMS = ("ring", "tree", "nvls", "nvls_tree", "collnet", "pat", "hierarchical")
# How pages and messages name them (and "p2p", the analysis' name for the
# point-to-point collectives' one pattern).
SHOWN = {
    "ring": "ring",
    "tree": "tree",
    "nvls": "NVLS",
    "nvls_tree": "NVLSTree",
    "collnet": "CollNet (SHARP)",
    "pat": "PAT",
    "hierarchical": "hierarchical schedule",
    "p2p": "point-to-point exchange",
}
RING, TREE, NVLS, NVLS_TREE, COLLNET, PAT, HIERARCHICAL = range(len(ALGORITHMS))
# A busbw this much above an algorithm's line rate rules the algorithm out (printing
# and timer noise stay well within it); above every line rate, the verdict does not
# judge (the profile, or the topology read, is wrong, not the fabric).
RULED_OUT = 0.02
# NCCL_ALGO's names (case-insensitive, tuning.cc's ncclAlgoStr) to ours.
_NCCL_NAMES = {
    "ring": (RING,),
    "tree": (TREE,),
    "nvls": (NVLS,),
    "nvlstree": (NVLS_TREE,),
    "collnetdirect": (COLLNET,),
    "collnetchain": (COLLNET,),
    "collnet": (COLLNET,),
    "pat": (PAT,),
}
# NVLink SHARP needs NVSwitch multicast: Hopper and Blackwell NVSwitch systems
# (NVIDIA/nccl #1031: an intra-node AllReduce offload on NVLink 4 and later).
NVLS_DEVICES = re.compile(r"\b(?:G?H[12]\d{2}|H20|H800|G?B[123]\d{2})\b", re.I)
_COLLECTIVE_NAMES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
}


def algorithm_bounds(
    all_reduce: npt.NDArray[np.bool_],
    b: npt.NDArray[np.float64],
    i: npt.NDArray[np.float64],
    n: npt.NDArray[np.float64],
    q: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Per algorithm (rows of the result, in :data:`ALGORITHMS` order) and row: the
    line-rate busbw bound of a ring-class collective, its intra-node and its network
    term (``inf`` where a term does not bound, NaN where the algorithm does not
    apply). ``all_reduce`` marks all_reduce rows (the others are all_gather or
    reduce_scatter); ``b`` is inf with one GPU per node."""
    shape = (len(ALGORITHMS), *n.shape)
    intra = np.full(shape, np.nan)
    inter = np.full(shape, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        one = q <= 1
        solo = n <= q  # one GPU per node: no intra-node traffic
        share = (n - 1) / n
        k = np.where(q == 2, 2.0, 1.0)
        node_intra = np.where(solo, np.inf, b * (n - 1) / (n - q))
        p = n / q
        # NVLink SHARP reduces inside the node's switch: each of the P local GPUs
        # sends and receives its buffer once over its own NVLink.
        sharp_intra = np.where(
            solo, np.inf, np.where(all_reduce, 2 * (p - 1) / p * b, b)
        )
        hierarchical = i * (n - 1) * q / (n * (q - 1))
    intra[RING] = np.where(solo & ~one, np.inf, b)
    inter[RING] = np.where(one, np.inf, i)
    intra[TREE] = np.where(one, b, node_intra)
    inter[TREE] = np.where(one, np.inf, np.where(all_reduce, k * share * i, np.nan))
    intra[NVLS] = np.where(one, sharp_intra, np.nan)
    inter[NVLS] = np.where(one, np.inf, np.nan)
    intra[NVLS_TREE] = np.where(one | ~all_reduce, np.nan, sharp_intra)
    inter[NVLS_TREE] = np.where(one, np.nan, k * share * i)
    intra[COLLNET] = np.where(one, np.nan, node_intra)
    inter[COLLNET] = np.where(one, np.nan, np.where(all_reduce, 2 * share * i, i))
    intra[PAT] = np.where(solo & ~one, np.inf, np.nan)
    inter[PAT] = np.where(solo & ~one, i, np.nan)
    intra[HIERARCHICAL] = np.where(one, b, node_intra)
    inter[HIERARCHICAL] = np.where(one, np.inf, hierarchical)
    bound = np.fmin(intra, inter)
    bound = np.where(np.isnan(intra) | np.isnan(inter), np.nan, bound)
    return bound, intra, inter


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a run's log says of NCCL's algorithms (the ``runs`` columns of
    docs/schema.md, "Algorithms and protocols stated by NCCL")."""

    nccl: bool  # an NCCL/RCCL tool (nccl-tests, rccl-tests)
    vendor_nvidia: bool
    device: str | None
    nccl_algo: str | None
    nvls: bool | None
    nvls_channels: int | None
    nvls_env: str | None  # NCCL_NVLS_ENABLE as set, if it was
    collnet: bool | None
    tuned: Mapping[tuple[str | None, int], frozenset[int]]

    @classmethod
    def of_run(cls, run: Mapping[str, Any]) -> Evidence:
        """The evidence in one ``runs`` row (a mapping; absent columns: unknown)."""
        tool = run.get("tool")
        devices = [d for d in run.get("devices") or () if d]
        device = devices[0] if devices else None
        env = dict(run.get("nccl_env") or ())
        tuned: dict[tuple[str | None, int], set[int]] = {}
        for choice in run.get("tuned") or ():
            algorithm = _NCCL_NAMES.get(str(choice.get("algorithm") or "").lower())
            size = choice.get("nccl_bytes")
            if algorithm is None or size is None:
                continue
            name = choice.get("collective")
            collective = None if name is None else _canonical(str(name))
            tuned.setdefault((collective, int(size)), set()).update(algorithm)
        return cls(
            nccl=tool in NCCL_TOOLS,
            vendor_nvidia=tool == "nccl-tests",
            device=device,
            nccl_algo=run.get("nccl_algo"),
            nvls=run.get("nvls"),
            nvls_channels=run.get("nvls_channels"),
            nvls_env=env.get("NCCL_NVLS_ENABLE"),
            collnet=run.get("collnet"),
            tuned={k: frozenset(v) for k, v in tuned.items()},
        )


# From this size up, an all_reduce on one or two nodes where the log shows NVLS
# channels runs NVLS (one node) or NVLSTree (two): NCCL's tuning model gives them the
# shortest time there (the worked 2 x 8 H100 example of its constants: NVLSTree from
# 64 MiB; sjeaugey, NVIDIA/nccl-tests #212: one node's AllReduce uses NVLS).
NVLS_FROM_BYTES = 64 << 20


def candidates(
    evidence: Evidence, collective: str, size: int, nodes: float, ranks: float
) -> tuple[frozenset[int], str]:
    """The algorithms a ring-class row could have run, and how that is known:
    ``"log"`` (NCCL said which, per size or by NCCL_ALGO), ``"inferred"`` (what
    NCCL's tuning model chooses given what the log says: NVLS channels on one or two
    nodes) or ``"assumed"`` (those NCCL could choose for this collective, topology
    and GPU)."""
    if not evidence.nccl:
        # MPI and oneCCL libraries: a ring, or a node-aware (hierarchical) schedule.
        return frozenset({RING, HIERARCHICAL}), "assumed"
    chosen = evidence.tuned.get((collective, size)) or evidence.tuned.get((None, size))
    possible = _possible(evidence, collective, nodes, ranks)
    if chosen:
        named = chosen & _applicable(collective, nodes, ranks)
        if named:
            return frozenset(named), "log"
    allowed = allowed_by_setting(evidence.nccl_algo, collective)
    if allowed is not None:
        kept = possible & allowed if possible & allowed else allowed
        kept &= _applicable(collective, nodes, ranks)
        if kept:
            return frozenset(kept), "log"
    shown = evidence.nvls is True or (evidence.nvls_channels or 0) > 0
    if (
        shown
        and collective == "all_reduce"
        and nodes <= 2
        and size >= NVLS_FROM_BYTES
        and _nvls_possible(evidence)
    ):
        return frozenset({NVLS_TREE if nodes > 1 else NVLS}), "inferred"
    return frozenset(possible), "assumed"


def allowed_by_setting(setting: str | None, collective: str) -> frozenset[int] | None:
    """The algorithms ``NCCL_ALGO`` allows for ``collective`` (None: not set, or it
    says nothing of this collective). NCCL's syntax (tuning.cc, parseList): a comma
    list, ``^`` to exclude, since 2.24 ``func:list;func:list``."""
    if not setting:
        return None
    for part in setting.split(";"):
        names = part
        if ":" in part:
            function, names = part.split(":", 1)
            if _canonical(function) != collective:
                continue
        exclude = names.startswith("^")
        chosen: set[int] = set()
        for name in names.lstrip("^").split(","):
            chosen.update(_NCCL_NAMES.get(name.strip().lower(), ()))
        if exclude:
            return frozenset(set(range(len(ALGORITHMS))) - {HIERARCHICAL} - chosen)
        return frozenset(chosen) if chosen else None
    return None


def _possible(
    evidence: Evidence, collective: str, nodes: float, ranks: float
) -> set[int]:
    """What NCCL may choose (tuning.cc's algorithm loop, NVIDIA/nccl v2.30)."""
    found = {RING}
    multi = nodes > 1
    if collective == "all_reduce":
        found.add(TREE)
    if _nvls_possible(evidence):
        found.add(NVLS_TREE if multi and collective == "all_reduce" else NVLS)
    if evidence.collnet and multi:
        found.add(COLLNET)
    if collective != "all_reduce" and multi and ranks <= nodes:
        found.add(PAT)
    return found & _applicable(collective, nodes, ranks)


def _nvls_possible(evidence: Evidence) -> bool:
    """NVLS unless the log says it is off; without a word, on NVIDIA NVSwitch GPUs
    that have it (Hopper and later)."""
    if evidence.nvls is False or evidence.nvls_channels == 0:
        return False
    if evidence.nvls_env is not None and evidence.nvls_env.strip() == "0":
        return False
    if evidence.nvls or (evidence.nvls_channels or 0) > 0:
        return True
    return (
        evidence.vendor_nvidia
        and evidence.device is not None
        and NVLS_DEVICES.search(evidence.device) is not None
    )


def _applicable(collective: str, nodes: float, ranks: float) -> set[int]:
    """Algorithms with a bound for this collective and topology."""
    multi = nodes > 1
    found = {RING, HIERARCHICAL}
    if collective == "all_reduce":
        found |= {TREE, NVLS_TREE if multi else NVLS}
        if multi:
            found.add(COLLNET)
    else:
        found |= {COLLNET} if multi else {NVLS}
        if multi and ranks <= nodes:
            found.add(PAT)
    return found


def _canonical(name: str) -> str:
    return _COLLECTIVE_NAMES.get(name.strip().lower().replace("_", ""), name.lower())


def lowest_and_highest(
    bound: npt.NDArray[np.float64],
    expected: npt.NDArray[np.float64],
    allowed: npt.NDArray[np.bool_],
    busbw: npt.NDArray[np.float64],
    tolerance: float,
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Per row, the allowed algorithm whose expected busbw is lowest (the lenient
    reading) and highest (the strict one), among those whose line-rate ``bound`` the
    measured ``busbw`` does not exceed by more than ``tolerance`` (a busbw above a
    ring's bound proves a non-ring algorithm); -1 where none is allowed. When the
    busbw exceeds every allowed bound, both are the one with the highest bound."""
    usable = allowed & ~np.isnan(expected) & ~np.isnan(bound)
    consistent = usable & ~(busbw > bound * (1 + tolerance))
    fallback = usable & ~consistent.any(axis=0)
    pool = np.where(consistent.any(axis=0), consistent, usable)
    low = np.where(pool, expected, np.inf).argmin(axis=0)
    high = np.where(pool, expected, -np.inf).argmax(axis=0)
    top = np.where(usable, bound, -np.inf).argmax(axis=0)
    low = np.where(fallback.any(axis=0), top, low)
    high = np.where(fallback.any(axis=0), top, high)
    none = ~usable.any(axis=0)
    return np.where(none, -1, low), np.where(none, -1, high)
