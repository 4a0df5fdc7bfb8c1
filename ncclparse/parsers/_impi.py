"""Intel MPI and Hydra launcher lines, shared by the oneCCL and IMB parsers.

Both tools usually run under Intel MPI's ``mpirun``; its debug output
(``I_MPI_DEBUG``), launcher messages and ``BAD TERMINATION`` boxes can appear
anywhere in their logs. Lines of other launchers, Slurm or a shell reporting a
process killed by a signal are recognised here too (the rule is in ``_signals``), and
Open MPI's fatal-error output (``_ompi``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import _ompi, _signals

# `[0] MPI startup(): ...`: the `[0] ` rank prefix is already stripped by _lines.
_STARTUP = "MPI startup():"
# The I_MPI_DEBUG pinning table: `MPI startup(): <rank> <pid> <host> {<cpus>}`.
_PIN_ROW = re.compile(r"^MPI startup\(\):\s+(\d{1,6})\s+\d+\s+(\S+)\s+\{")
_LIBRARY = re.compile(r"^MPI startup\(\): Intel\(R\) MPI Library, Version (\S+)")
_LAUNCHER = re.compile(r"^\[(?:mpiexec|mpirun|proxy)[^\]]*\]")
_BOX_EDGE = re.compile(r"^={20,}\s*$")
_BOX_TEXT = re.compile(r"^=\s+(\S.*?)\s*$")
_SIGNAL = re.compile(r"KILLED BY SIGNAL: (\d{1,9})|EXIT CODE: (\d{1,9})")
# MPI_Abort and fatal MPI errors: `Abort(1) on node 0 (rank 0 in comm 0): ...`, and
# MPICH's `application called MPI_Abort(MPI_COMM_WORLD, 16) - process 15`.
_ABORT = re.compile(r"^Abort\(\d+\)|^Fatal error in |^application called MPI_Abort\(")
# mpirun -print-rank-map: `(<host>:<ranks>)`, ranks `0,1` or `0-3`; -prot: the node
# table `<id> | <node name> | <ip> | <ranks>` (its `ID | ...` header), then the
# provider matrix `<id> | <provider> <provider> ...`.
_RANKS = r"\d{1,6}(?:[-,]\d{1,6})*"
_RANK_MAP = re.compile(rf"^\((?P<host>[^\s():,]+):(?P<ranks>{_RANKS})\)\s*$")
_NODE_ROW = re.compile(
    rf"^\s*\d{{1,6}} \| +(?P<host>\S+) \| +\S+ \| +(?P<ranks>{_RANKS})\s*$"
)
_PROT_ROW = re.compile(r"^\s*(?:ID|\d{1,6}) \|")
# Ranks one line may name (a hostile `0-999999` range is not expanded).
_MAX_RANKS = 1 << 16


@dataclass(frozen=True, slots=True)
class MpiLine:
    """What an Intel MPI / Hydra line means for the run it appears in."""

    kind: str  # "noise" or "error" (LINE_KINDS)
    message: str | None = None  # for errors: the text to keep in runs.errors
    failure: bool = False  # the run failed (not merely interrupted)
    # (rank, host) pairs: the I_MPI_DEBUG pinning table, -print-rank-map, -prot.
    rank_hosts: tuple[tuple[int, str], ...] = ()
    library_version: str | None = None


def classify(text: str) -> MpiLine | None:
    """Recognise an Intel MPI / Hydra line; None when ``text`` is not one."""
    if text.startswith(_STARTUP):
        pin = _PIN_ROW.match(text)
        library = _LIBRARY.match(text)
        return MpiLine(
            "noise",
            rank_hosts=((int(pin.group(1)), pin.group(2)),) if pin else (),
            library_version=library.group(1) if library else None,
        )
    # The first character settles most lines (every one, for the patterns below).
    first = text[:1]
    if first == "(" or (first == " " and " | " in text) or text.startswith("ID |"):
        placed = _RANK_MAP.match(text) or _NODE_ROW.match(text)
        if placed:
            ranks = _ranks(placed.group("ranks"))
            return MpiLine(
                "noise", rank_hosts=tuple((r, placed["host"]) for r in ranks)
            )
        if _PROT_ROW.match(text):
            return MpiLine("noise")
    if (first == "[" and _LAUNCHER.match(text)) or (
        first == "=" and _BOX_EDGE.match(text)
    ):
        return MpiLine("noise")
    box = _BOX_TEXT.match(text) if first == "=" else None
    if box:
        signal = _SIGNAL.search(text)
        failure = False
        if signal:
            number = int(signal.group(1) or signal.group(2))
            failure = (
                number not in _signals.EXTERNAL  # the one signal rule, _signals
                if signal.group(1)
                else number != 0  # EXIT CODE
            )
        return MpiLine("error", box.group(1), failure)
    if first in ("A", "F", "a") and _ABORT.match(text):
        return MpiLine("error", text.strip(), True)
    # Other launchers, Slurm and shells reporting a killed process (Open MPI's
    # `exited on signal 9 (Killed)`, `srun: error: n1: task 0: Killed`, `Killed`).
    killed = _signals.classify(text)
    if killed is not None:
        return MpiLine("error", killed.message, killed.failure)
    # Open MPI aborting the job after an MPI error (`*** An error occurred in ...`).
    fatal = _ompi.fatal_error(text.strip())
    if fatal is not None:
        return MpiLine("error", fatal, True)
    return None


def _ranks(text: str) -> list[int]:
    """``0,1,4-7`` as ranks; none past _MAX_RANKS of them."""
    ranks: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        if last < first or len(ranks) + last - first >= _MAX_RANKS:
            return []
        ranks.extend(range(first, last + 1))
    return ranks
