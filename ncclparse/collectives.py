"""The collectives: one table of what ncclparse knows about each.

For every collective in the schema's vocabulary: how nccl-tests turns algbw into busbw
(``doc/PERFORMANCE.md`` of NVIDIA nccl-tests), what its ``size_bytes`` counts
(``docs/size-conventions.md``), and the fewest latency (alpha) steps any textbook
algorithm needs on N ranks (the alpha-beta cost models of Thakur, Rabenseifner and
Gropp, "Optimization of Collective Communication Operations in MPICH", 2005; summed up
in ``docs/efficiency.md``). Everything else (busbw factors, hardware-latency floors,
rule validation) reads this table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "COLLECTIVES",
    "TABLE",
    "Bound",
    "BusbwKind",
    "Collective",
    "Steps",
    "latency_steps",
]


class BusbwKind(IntEnum):
    """nccl-tests' busbw/algbw factor on n ranks (0 is reserved for "unknown")."""

    REDUCE_ALL = 1  # 2(n-1)/n: all_reduce
    GATHER_ALL = 2  # (n-1)/n: all_gather, reduce_scatter, alltoall, gather, scatter
    ONE = 3  # 1: broadcast, reduce, sendrecv
    HYPERCUBE = 4  # 1, but algbw counts size (n-1)/n


class Steps(IntEnum):
    """Fewest alpha steps of any algorithm on n ranks."""

    ONE = 1  # a single message: sendrecv
    LOG = 2  # ceil(log2 n): binomial tree (broadcast, reduce, gather, scatter)
    TWO_LOG = 3  # 2 ceil(log2 n): recursive halving-doubling all_reduce
    LINEAR = 4  # n - 1: ring all_gather / reduce_scatter, pairwise alltoall


class Bound(IntEnum):
    """Which ideal-bandwidth bound applies (``docs/efficiency.md`` section 2)."""

    NONE = 0  # no bound derived (v-variants, hypercube)
    RING = 1  # AIBooster: every rank's data crosses every node boundary once
    ALLTOALL = 2  # each node sends P(N-P)S/N bytes through its NICs
    ONE_TO_ALL = 3  # broadcast, reduce: the whole buffer enters every node
    PAIR = 4  # sendrecv: one GPU per node boundary, on its own NIC
    ROOTED = 5  # gather, scatter: everything enters (leaves) the root


@dataclass(frozen=True, slots=True)
class Collective:
    """One collective: its schema name, busbw factor kind, latency steps (None where
    no model applies), its ideal-bandwidth bound and what ``size_bytes`` counts."""

    name: str
    busbw: BusbwKind
    steps: Steps | None
    bound: Bound
    size: str


TABLE: dict[str, Collective] = {
    c.name: c
    for c in (
        Collective(
            "all_reduce", BusbwKind.REDUCE_ALL, Steps.TWO_LOG, Bound.RING, "the buffer"
        ),
        Collective(
            "all_gather",
            BusbwKind.GATHER_ALL,
            Steps.LINEAR,
            Bound.RING,
            "the gathered buffer",
        ),
        Collective(
            "all_gather_v",
            BusbwKind.GATHER_ALL,
            None,
            Bound.NONE,
            "the gathered buffer",
        ),
        Collective(
            "reduce_scatter",
            BusbwKind.GATHER_ALL,
            Steps.LINEAR,
            Bound.RING,
            "the send buffer",
        ),
        Collective(
            "alltoall",
            BusbwKind.GATHER_ALL,
            Steps.LINEAR,
            Bound.ALLTOALL,
            "one rank's send buffer",
        ),
        Collective(
            "alltoallv",
            BusbwKind.GATHER_ALL,
            None,
            Bound.NONE,
            "one rank's send buffer",
        ),
        Collective(
            "broadcast", BusbwKind.ONE, Steps.LOG, Bound.ONE_TO_ALL, "the buffer"
        ),
        Collective("reduce", BusbwKind.ONE, Steps.LOG, Bound.ONE_TO_ALL, "the buffer"),
        Collective("sendrecv", BusbwKind.ONE, Steps.ONE, Bound.PAIR, "the message"),
        Collective(
            "gather", BusbwKind.GATHER_ALL, Steps.LOG, Bound.ROOTED, "the root's buffer"
        ),
        Collective(
            "scatter",
            BusbwKind.GATHER_ALL,
            Steps.LOG,
            Bound.ROOTED,
            "the root's buffer",
        ),
        Collective("hypercube", BusbwKind.HYPERCUBE, None, Bound.NONE, "the buffer"),
    )
}
COLLECTIVES: tuple[str, ...] = tuple(TABLE)


def latency_steps(collective: str, ranks: int) -> int | None:
    """Fewest alpha steps any algorithm needs for ``collective`` on ``ranks`` ranks.

    The hardware latency floor used by gap attribution; None where no model applies
    (hypercube, the v-variants, unknown names).
    """
    entry = TABLE.get(collective)
    if entry is None or entry.steps is None or ranks < 1:
        return None
    log = math.ceil(math.log2(ranks)) if ranks > 1 else 0
    return {
        Steps.ONE: 1,
        Steps.LOG: log,
        Steps.TWO_LOG: 2 * log,
        Steps.LINEAR: ranks - 1,
    }[entry.steps]
