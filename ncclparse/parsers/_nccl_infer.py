"""What a nccl-tests run does not state but its numbers do: collective, ranks, nodes.

Every inference is reported in the run's warnings with the evidence, so a reader can
tell read facts from deductions (docs/nccl-tests-format.md sections 5 and 7).
"""

from __future__ import annotations

import math
import re
from math import isfinite
from statistics import median
from typing import Any, TypeGuard

from ncclparse.schema import DTYPE_BYTES

from ._model import Run

# Key columns of the E0-E2 layouts, which differ per collective (format doc 5.2, 5.3).
_BY_OLD_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("size", "count", "type", "redop"): ("all_reduce", "reduce_scatter", "alltoall"),
    ("size", "count", "type"): ("all_gather", "sendrecv", "hypercube"),
    ("size", "count", "type", "root"): ("broadcast", "gather", "scatter"),
    ("size", "count", "type", "redop", "root"): ("reduce",),
}
_SPLIT = frozenset(
    {"all_gather", "reduce_scatter", "alltoall", "gather", "scatter", "hypercube"}
)
# Tests added in nccl-tests v2.10 (sendrecv, hypercube, scatter) and v2.11 (gather);
# alltoallv in v2.19.
_SINCE_2_10 = frozenset({"sendrecv", "hypercube", "scatter", "gather", "alltoallv"})
_NAME_PATTERNS = [
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("all_reduce", r"all[_-]?reduce"),
        ("all_gather", r"all[_-]?gather"),
        ("reduce_scatter", r"reduce[_-]?scatter"),
        ("alltoallv", r"all[_-]?to[_-]?all[_-]?v"),
        ("alltoall", r"all[_-]?to[_-]?all"),
        ("broadcast", r"broadcast|bcast"),
        ("sendrecv", r"send[_-]?recv"),
        ("hypercube", r"hypercube"),
        ("gather", r"(?<!all)(?<!all_)gather"),
        ("scatter", r"(?<!reduce)(?<!reduce_)scatter"),
        ("reduce", r"(?<!all)(?<!all_)reduce(?![_-]?scatter)"),
    )
]


def names_in(text: str) -> list[str]:
    """Collective names mentioned in ``text`` (a file name), most specific first."""
    return [name for name, pattern in _NAME_PATTERNS if pattern.search(text)]


def infer_collective(
    run: Run,
    old_keys: tuple[str, ...] | None,
    source: str,
    before_2_10: bool = False,
) -> None:
    """Set ``run.collectives`` from the header keys, the numbers or the file name.

    ``before_2_10``: the header is of an era (E0-E1) whose nccl-tests had no
    sendrecv, hypercube, scatter or gather test; they are never inferred then.
    """
    if run.collectives:
        return
    candidates = list(_BY_OLD_KEYS.get(old_keys, ())) if old_keys else []
    # Candidates come only from old_keys: the check on old_keys is for mypy.
    evidence = (
        [f"the column set {' '.join(old_keys)}"] if candidates and old_keys else []
    )
    if before_2_10:
        candidates = [c for c in candidates if c not in _SINCE_2_10]
        evidence.append(
            "the format era (6-wide type column and error column: nccl-tests "
            "before v2.10, which had no sendrecv, hypercube, scatter or gather)"
        )
    numbers = _candidates_from_numbers(run)
    if numbers is not None:
        found, why = numbers
        if before_2_10:
            found = [c for c in found if c not in _SINCE_2_10]
        kept = [c for c in found if not candidates or c in candidates]
        if kept or not candidates:
            candidates = kept or found
            evidence.append(why)
    if len(candidates) != 1:
        named = [
            n
            for n in names_in(source.rsplit("/", 1)[-1])
            if n in candidates or not candidates
        ]
        if named:
            candidates = named[:1]
            evidence.append("the file name")
    if len(candidates) == 1:
        run.collectives.append(candidates[0])
        run.warn(
            run.first_line,
            f"collective not stated; inferred {candidates[0]} "
            f"from {' and '.join(evidence)}",
        )
    elif candidates:
        # Several fit equally: prefer the commonest, and say which others would too.
        run.collectives.append(candidates[0])
        run.warn(
            run.first_line,
            f"collective not stated; inferred {candidates[0]} "
            f"from {' and '.join(evidence)} (could also be "
            f"{' or '.join(candidates[1:])})",
        )
    else:
        run.warn(run.first_line, "collective not stated and not inferable")


def _candidates_from_numbers(run: Run) -> tuple[list[str], str] | None:
    ratios: list[float] = []  # size/count bytes of the sized rows
    pairs: list[tuple[float, float]] = []  # (algbw, busbw) where both are readable
    has_redop = has_root = False
    for r in run.rows:  # one pass, not one per question: it reads every row of a run
        size, count = r["size_bytes"], r["count"]
        if size and count:
            ratios.append(size / (count * DTYPE_BYTES[r["dtype"]]))
        algbw, busbw = r.get("algbw_gbps"), r.get("busbw_gbps")
        if (
            algbw is not None
            and busbw is not None
            and isfinite(algbw)
            and isfinite(busbw)
            and algbw > 0
        ):
            pairs.append((algbw, busbw))
        has_redop = has_redop or r["redop"] is not None
        has_root = has_root or r["root"] is not None
    if not ratios:
        return None
    ranks = round(median(ratios))
    bus = bus_ratio(pairs)
    why = f"size/count ratio {ranks}"
    if bus is not None:
        why += f" and busbw/algbw {bus:.3f}"
    if ranks <= 1:
        if has_root:
            return (["reduce"] if has_redop else ["broadcast"]), why
        if not has_redop:
            return ["sendrecv"], why
        # nccl-tests never verifies in-place sendrecv or alltoall (N/A), but does
        # verify in-place all_reduce and all_gather.
        checked = _in_place_checked(run)
        if checked is False:
            return ["sendrecv"], why + " and unchecked in-place results"
        # all_reduce's busbw factor 2(n-1)/n is 1 only for n = 2, like sendrecv's.
        if checked or (bus is not None and bus > 1.05):
            return ["all_reduce"], why + " and checked in-place results" * bool(checked)
        return ["all_reduce", "sendrecv"], why
    if has_redop:
        return ["reduce_scatter"], why
    if has_root:
        return ["gather", "scatter"], why
    # hypercube's busbw equals its algbw; the others' is (n-1)/n of it.
    if bus is not None and abs(bus - 1.0) < abs(bus - (ranks - 1) / ranks):
        return ["hypercube"], why
    checked = _in_place_checked(run)
    if checked is not None:
        found = "all_gather" if checked else "alltoall"
        return [found], why + f" and {'un' * (not checked)}checked in-place results"
    return ["all_gather", "alltoall"], why


def bus_ratio(pairs: list[tuple[float, float]]) -> float | None:
    """Median busbw/algbw over the (algbw, busbw) pairs with the largest algbw
    (least rounded); every algbw is finite and above 0."""
    if not pairs:
        return None
    top = max(a for a, _ in pairs)
    # Printed with 2 decimals: below ~0.1 GB/s the ratio is mostly rounding.
    if top < 0.1:
        return None
    return median(b / a for a, b in pairs if a >= top / 2)


def _finite(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value)


def _in_place_checked(run: Run) -> bool | None:
    """Were in-place results verified (#wrong printed) while out-of-place ones were?

    None when that does not tell anything: no validation at all (-c 0), the old
    `error` column (E0-E2 verified in-place alltoall too), or no rows.
    """
    placements: dict[str, set[bool]] = {}
    for row in run.rows:
        if row.get("wrong_kind") == "max_deviation":
            return None
        placements.setdefault(row["placement"], set()).add(row.get("wrong") is not None)
    if placements.get("out-of-place") != {True} or "in-place" not in placements:
        return None
    in_place = placements["in-place"]
    return None if len(in_place) != 1 else in_place == {True}


def infer_ranks(run: Run, elided: bool = False, launch: bool = False) -> None:
    """Set nranks/nnodes from the Rank lines, or nranks from the numbers.

    ``elided``: the user replaced Rank lines with ``......`` (infer_nodes_from_elided
    then decides nnodes). ``launch``: the run's command and parameter line are the
    text log's (echoed command, ``nThread``/``nGpus``), which may give the rank count
    (ranks_launched); without it only all_reduce consults the command, as a
    tie-breaker.
    """
    if run.hosts:
        _ranks_from_rank_lines(run, elided)
        return
    collective = run.collectives[0] if run.collectives else None
    sized = [r for r in run.rows if r["size_bytes"] and r["count"]]
    if collective in _SPLIT and sized:
        _ranks_from_size_ratio(run, sized[0], launch)
    elif collective == "all_reduce":
        _all_reduce_ranks(run, launch)
    elif launch and (found := ranks_launched(run.command, run.params)) is not None:
        # Nothing in the numbers tells the rank count of these collectives.
        _take_launched(run, found)


def _ranks_from_rank_lines(run: Run, elided: bool) -> None:
    """nranks (and nnodes, when every host is known) from the Rank lines."""
    run.nranks = len(run.hosts)
    known = [h for h in run.hosts if h is not None]
    # The last rank's host is missing only when its line was cut by the end of
    # input (its process's other ranks are listed): the count stays a lower
    # bound, as with every cut Rank list.
    if None not in run.hosts[:-1]:
        run.nnodes = len(set(known))
    elif not elided:
        # Hosts of the ranks whose lines are missing are unknown: counting the
        # visible ones (1 of a 72-rank run) would be a guess. NCCL's `nNodes`
        # fills it when printed (the parser's _close).
        run.warn(
            run.first_line,
            f"Rank lines for {len(known)} of {run.nranks} ranks: nnodes not "
            "counted from them (taken from NCCL's nNodes if printed)",
        )


def _ranks_from_size_ratio(run: Run, row: dict[str, Any], launch: bool) -> None:
    """A collective that splits its buffer by rank (_SPLIT): nranks is the ratio of
    the first sized row's size to its count's bytes; the launch is only compared."""
    ratio = round(row["size_bytes"] / (row["count"] * DTYPE_BYTES[row["dtype"]]))
    if not 1 <= ratio <= _MAX_RANKS:  # nranks is int32: no absurd guesses
        run.warn(run.first_line, f"no Rank lines; size/count ratio {ratio}")
        return
    run.nranks = ratio
    run.warn(
        run.first_line,
        f"no Rank lines; nranks {run.nranks} inferred from the size/count ratio",
    )
    stated = ranks_launched(run.command, run.params) if launch else None
    if stated is not None and stated[0] != ratio:
        run.warn(
            run.first_line,
            f"{stated[1]} gives {stated[0]} ranks, the size/count ratio "
            f"{ratio}: the ratio is taken",
        )


def _all_reduce_ranks(run: Run, launch: bool) -> None:
    """all_reduce: the rank counts busbw/algbw = 2(n-1)/n allows, decided by the
    launch (or, without ``launch``, the command alone as a tie-breaker)."""
    feasible = _ranks_from_bus_ratio(run.rows)
    if launch:
        found = ranks_launched(run.command, run.params)
    else:  # the command alone, as a tie-breaker
        count = ranks_from_command(run.command)
        found = None if count is None else (count, "the command line")
    if found is not None and found[0] in feasible:
        run.nranks = found[0]
        run.warn(
            run.first_line,
            f"no Rank lines; nranks {found[0]} from the command line, consistent "
            "with busbw/algbw",
        )
    elif launch and found is not None:
        _launch_against_bus_ratio(run, found, feasible)
    elif len(feasible) == 1:
        _only_bus_ratio(run, feasible[0])
    elif feasible:
        run.warn(
            run.first_line,
            f"no Rank lines; busbw/algbw fits any nranks from "
            f"{feasible[0]} to {feasible[-1]}: nranks unknown",
        )


def _launch_against_bus_ratio(
    run: Run, found: tuple[int, str], feasible: list[int]
) -> None:
    """A launch whose rank count busbw/algbw does not give: taken when the numbers
    tell nothing, none when they fit other counts (or the only count they fit)."""
    if not feasible:
        _take_launched(run, found)
    elif len(feasible) > 1:
        run.warn(
            run.first_line,
            f"no Rank lines; {found[1]} gives {found[0]} ranks, which busbw/algbw "
            "does not fit: nranks unknown",
        )
    else:
        _only_bus_ratio(run, feasible[0])


def _only_bus_ratio(run: Run, ranks: int) -> None:
    run.nranks = ranks
    run.warn(
        run.first_line,
        f"no Rank lines; nranks {run.nranks} inferred from "
        "busbw/algbw = 2(n-1)/n (the only n that fits every row)",
    )


def _take_launched(run: Run, found: tuple[int, str]) -> None:
    run.nranks = found[0]
    run.warn(run.first_line, f"no Rank lines; nranks {found[0]} from {found[1]}")


_MAX_RANKS = 65536


def _ranks_from_bus_ratio(rows: list[dict[str, Any]]) -> list[int]:
    """Every n for which 2(n-1)/n lies within print rounding of each row's ratio."""
    low, high, seen = 0.0, 2.0, False
    for row in rows:
        algbw, busbw = row.get("algbw_gbps"), row.get("busbw_gbps")
        if not (_finite(algbw) and _finite(busbw)) or algbw < 0.1:
            continue
        seen = True
        # Both printed with 2 decimals: each may be off by 0.005.
        low = max(low, (busbw - 0.005) / (algbw + 0.005))
        high = min(high, (busbw + 0.005) / (algbw - 0.005))
    if not seen or low > high:
        return []
    # One rank: the factor is 0 (busbw 0.00 whatever the algbw).
    single = [1] if low <= 0.0 else []
    # 2(n-1)/n in [low, high]  <=>  2/(2-low) <= n <= 2/(2-high)
    first = max(2, math.ceil(2 / (2 - low) - 1e-9))
    last = (
        _MAX_RANKS
        if high >= 2.0
        else min(_MAX_RANKS, math.floor(2 / (2 - high) + 1e-9))
    )
    return single + list(range(first, last + 1))


_LAUNCH_COUNT = re.compile(r"(?:^|\s)(?:-np|-n|--np|--ntasks)[=\s]+(\d{1,6})\b")
_PER_PROCESS = re.compile(r"(?:^|\s)-(?P<opt>[gt])\s+(?P<n>\d{1,4})\b")


# What may precede the benchmark binary on a command line that starts it directly.
_DIRECT = re.compile(
    r"^(?:\+\s+)?(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*\S*_perf\w*(?:\s|$)", re.ASCII
)


def ranks_launched(
    command: str | None, params: dict[str, str]
) -> tuple[int, str] | None:
    """Ranks a run has by its launch: (count, the evidence), or None when unknown.

    Processes from the launcher (``mpirun -np N``, ``srun -n N``), or 1 when the
    command starts the binary itself; ranks per process from the parameter line
    (``nThread T nGpus G``, printed by the tool), else the command's ``-t``/``-g``.
    Without an echoed command the process count is unknown: nGpus alone is no
    rank count (an MPI run prints the nGpus of one process).
    """
    if not command or "_perf" not in command:
        return None
    launcher, _, _ = command.partition("_perf")
    count = _LAUNCH_COUNT.search(launcher)
    if count is not None:
        processes, what = int(count.group(1)), f"{count.group(0).strip()} processes"
    elif _DIRECT.match(command.strip()):
        processes, what = 1, "one process (no launcher)"
    else:
        return None
    threads, gpus = params.get("nThread"), params.get("nGpus")
    if threads and gpus and threads.isdigit() and gpus.isdigit():
        per = int(threads) * int(gpus)
        return processes * per, f"{what} x nThread {threads} x nGpus {gpus}"
    per = 1
    for option in _PER_PROCESS.finditer(command.partition("_perf")[2]):
        per *= int(option.group("n"))
    return processes * per, f"the command line ({what} x -t x -g)"


def ranks_from_command(command: str | None) -> int | None:
    """Ranks a launch command starts: processes x threads (-t) x GPUs (-g), or None.

    Only when the launcher states its process count (``mpirun -np``, ``srun -n``);
    the benchmark's own options follow its ``*_perf`` binary (where -n means iters).
    """
    if not command or "_perf" not in command:
        return None
    launcher, _, benchmark = command.partition("_perf")
    count = _LAUNCH_COUNT.search(launcher)
    if count is None:
        return None
    ranks = int(count.group(1))
    for option in _PER_PROCESS.finditer(benchmark):
        ranks *= int(option.group("n"))
    return ranks


def infer_nodes_from_elided(run: Run, device_index: dict[int, int]) -> None:
    """Rank lines elided by the user: estimate nnodes if ranks per host are regular."""
    listed = [(rank, host) for rank, host in enumerate(run.hosts) if host is not None]
    per_host: dict[str, list[int]] = {}
    for rank, host in listed:
        per_host.setdefault(host, []).append(rank)
    index = device_index
    offsets = {rank - index[rank] for rank, _ in listed if rank in index}
    width = max(index.values(), default=-1) + 1
    if run.nranks and width and len(offsets) >= 1:
        candidates = [
            p
            for p in range(width, run.nranks + 1)
            if run.nranks % p == 0 and all(o % p == 0 for o in offsets)
        ]
        if candidates:
            per_node = candidates[0]
            run.nnodes = run.nranks // per_node
            run.warn(
                run.first_line,
                f"Rank lines elided; nnodes {run.nnodes} inferred "
                f"assuming {per_node} ranks per host (device index = rank mod "
                f"{per_node} on every listed line)",
            )
            return
    run.warn(run.first_line, "Rank lines elided; nnodes unknown")
