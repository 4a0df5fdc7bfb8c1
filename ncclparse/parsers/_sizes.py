"""Message-size conventions: a tool's printed size converted to nccl-tests' ``size``.

schema.md defines ``size_bytes`` as nccl-tests' ``size`` column: for all_gather the
whole gathered buffer, for reduce_scatter the whole input, for alltoall the whole
send buffer of one rank, for gather/scatter the whole buffer at the root, and the
buffer itself for all_reduce, broadcast and reduce. ``docs/size-conventions.md``
gives the source of every factor below.
"""

from __future__ import annotations

# Collectives whose size in nccl-tests is nranks blocks of the per-rank (or per-peer)
# block that oneCCL's `#bytes` and IMB's `#bytes` describe.
_PER_RANK_BLOCK = frozenset(
    {
        "all_gather",
        "all_gather_v",
        "alltoall",
        "alltoallv",
        "gather",
        "gatherv",
        "scatter",
        "scatterv",
    }
)

# IMB 2019 and later pass `#bytes` as each rank's share of MPI_Reduce_scatter(_block);
# IMB 2018 and older split `#bytes` among the ranks (IMB_reduce_scatter.c, IMB2018).
_IMB_PER_RANK_REDUCE_SCATTER = frozenset({"reduce_scatter", "reduce_scatter_block"})
_IMB_SPLIT_UNTIL = 2018

# Collectives that reduce: only these have a meaningful redop.
REDUCING = frozenset(
    {"all_reduce", "reduce", "reduce_scatter", "reduce_scatter_block", "reduce_local"}
)


def oneccl_size_bytes(collective: str | None, reported: int, nranks: int) -> int:
    """Convert oneCCL benchmark ``#bytes`` (already times ``-n`` buffers) to size_bytes.

    ``collective`` None (a group of collectives) keeps the printed value: the group
    has no single convention.
    """
    if collective in _PER_RANK_BLOCK:
        return reported * nranks
    return reported


def imb_size_bytes(
    collective: str | None, reported: int, nranks: int, tool_version: str | None
) -> int:
    """Convert IMB-MPI1 ``#bytes`` (the guide's X) to size_bytes.

    ``tool_version`` decides the Reduce_scatter convention; unknown means current.
    """
    if collective in _PER_RANK_BLOCK:
        return reported * nranks
    if collective in _IMB_PER_RANK_REDUCE_SCATTER and not _imb_splits(tool_version):
        return reported * nranks
    return reported


def _imb_splits(tool_version: str | None) -> bool:
    """True for IMB versions whose Reduce_scatter splits ``#bytes`` among ranks."""
    if tool_version is None:
        return False
    head = tool_version.split(".", 1)[0]
    if not head.isdigit() or len(head) > 9:
        return False
    # V3.x / V4.x numbering predates the year-based one and splits too.
    major = int(head)
    return major < 1000 or major <= _IMB_SPLIT_UNTIL
