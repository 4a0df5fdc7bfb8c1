"""The nccl-tests parser's state per launcher stream, and the edits it makes to runs."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass, field

from ._model import Notes, Run
from ._nccl_layout import Layout
from ._nccl_topology import Topology


@dataclass
class StreamState:
    """One stream's parse state: the current run and what has been read of it."""

    run: Run | None = None
    phase: str = "preamble"  # preamble -> table -> footer
    openers: set[str] = field(default_factory=set)
    layout: Layout | None = None
    placements: tuple[str, ...] | None = None
    old_keys: tuple[str, ...] | None = None
    # The header's `type` column is 6 wide with an `error` column: nccl-tests before
    # v2.10 (E0-E1), which had no sendrecv, hypercube, scatter or gather test.
    before_2_10: bool = False
    device_index: dict[int, int] = field(default_factory=dict)
    elided: bool = False
    pending: tuple[int, list[str]] | None = None  # a row cut by other output
    wrapped: bool = False  # pending is a row too short for the layout (wrapped?)
    row_fields: int | None = None  # tokens of the last row read whole
    unread: list[int] = field(default_factory=list)  # consecutive unrecognised lines
    # A non-MPI build under `mpirun -np K` without --tag-output prints K interleaved
    # copies of one run; they are told apart by the order in which rows repeat.
    copies: int = 1
    repeats: Counter[tuple[object, ...]] = field(default_factory=Counter)
    rank_lines: Counter[int] = field(default_factory=Counter)  # Rank lines per rank
    footers: int = 0
    topology: Topology | None = None  # what NCCL's debug lines said, for the run


def split_copies(run: Run, state: StreamState) -> list[Run]:
    """Split a run printed by K concurrent copies (StreamState.copies) into K runs.

    Only copies that show in rows or Rank lines become runs (as many as the most
    repeated row or rank): a preamble repeated without them (hostile or mangled
    input) stays one run.
    The lines the copies share (warnings, errors) stay with the first: which copy
    printed them is unknowable, and K copies of each would grow as K x lines.
    """
    run.seal_rows()
    rows = run.rows
    shown = max(
        max(state.repeats.values(), default=0),
        max(state.rank_lines.values(), default=0),
    )
    split = min(state.copies, shown)
    if split <= 1:
        for row in rows:
            row.pop("_copy", None)
        run.warn(
            run.first_line,
            f"the run's preamble is printed {state.copies} times but its rows and "
            "Rank lines are not: read as one run",
        )
        return [run]
    if run.spill is not None:
        run.spill.readers = split
    runs = [run] + [
        dataclasses.replace(
            run,
            collectives=list(run.collectives),
            params=dict(run.params),
            nics=list(run.nics),
            errors=Notes(grouped=False),
            warnings=Notes(),
        )
        for _ in range(split - 1)
    ]
    message = (
        f"{split} interleaved copies of one run (a non-MPI build under "
        "mpirun?); rows assigned to copies in the order they repeat"
    )
    for index, each in enumerate(runs):
        each.rows = [r for r in rows if r["_copy"] == index]
        each.copy = index
        each.warn(run.first_line, message)
    for row in rows:
        del row["_copy"]
    return runs


def set_library(run: Run, version: re.Match[str]) -> None:
    """Take the NCCL/RCCL version from NCCL's banner (RCCL's means rccl-tests)."""
    run.library_version = version.group("v")
    if version.group("lib") == "RCCL":
        run.tool = "rccl-tests"


def grow_ranks(run: Run, rank: int) -> None:
    """Make room for ``rank`` in the per-rank host and device lists."""
    while len(run.hosts) <= rank:
        run.hosts.append(None)
        run.devices.append(None)


def worth_keeping(run: Run) -> bool:
    return bool(
        run.rows
        or run.hosts
        or run.params
        or run.errors
        or run.collectives
        or run.warnings
        or run.tool_version
        or run.avg_busbw_gbps is not None
        or run.oob_values is not None
        or run.command
    )
