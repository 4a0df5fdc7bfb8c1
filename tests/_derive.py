"""Derive scenario logs from real corpus logs, by transformations a test can explain.

Every derived log starts as a real log (tests/fixtures/, see SOURCES.md) and changes
only what a scenario needs:

* :func:`scale` multiplies a data row's times by a factor and divides its algbw and
  busbw by it, as a slower fabric would print them, re-printed with nccl-tests'
  formats (time %.0f from 10 ms, %.1f from 100 us, else %.2f; bandwidths %.2f) and
  right-aligned in the original column width;
* :func:`rename_hosts` replaces host names in the ``Rank ... on HOST`` lines;
* :func:`set_wrong` writes a ``#wrong`` count into one row;
* :func:`cut` drops everything after a given row, as a killed job leaves it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
# 16 ranks on 2 nodes x 8 H100 (GCP A3 Mega), sizes 8 B to 8 GiB, complete, #wrong 0.
HEALTHY = (
    FIXTURES / "nccl" / "repo-ztan-a3mega_allreduce_16rank_2node_h100_complete.log"
)
HOSTS = ("ztan-mig-235z", "ztan-mig-gq73")
_ROW = re.compile(r"^\s+\d+\s+\d+\s+float\s")


def healthy() -> str:
    return HEALTHY.read_text()


def _tokens(line: str) -> list[str]:
    return re.split(r"(\s+)", line)


def _fit(old: str, new: str) -> str:
    return new.rjust(len(old))


def _time(value: float) -> str:
    if value >= 10000:
        return f"{value:.0f}"
    return f"{value:.1f}" if value >= 100 else f"{value:.2f}"


def _rewrite_times(
    text: str, new: Callable[[int, float, float, float], tuple[str, str, str]]
) -> str:
    """Each data row's out-of-place and in-place (time, algbw, busbw) printed as
    ``new(size_bytes, time, algbw, busbw)`` gives them, each in its column's width."""
    out = []
    for line in text.splitlines(keepends=True):
        if not _ROW.match(line):
            out.append(line)
            continue
        parts = _tokens(line.rstrip("\n"))
        # parts: '', ws, size, ws, count, ws, type, ws, redop, ws, root, ws,
        # time, ws, algbw, ws, busbw, ws, wrong, ws, time, ws, algbw, ws, busbw, ...
        values = parts[2::2]
        size = int(values[0])
        for start in (5, 9):  # out-of-place and in-place (time, algbw, busbw)
            t, alg, bus = (float(v) for v in values[start : start + 3])
            for offset, text_value in enumerate(new(size, t, alg, bus)):
                index = 2 + 2 * (start + offset)
                parts[index] = _fit(parts[index], text_value)
        out.append("".join(parts) + "\n")
    return "".join(out)


def scale(text: str, factor: Callable[[int], float]) -> str:
    """Scale each data row's times by ``factor(size_bytes)`` (bandwidths by 1/f)."""

    def scaled(size: int, t: float, alg: float, bus: float) -> tuple[str, str, str]:
        f = factor(size)
        return _time(t * f), f"{alg / f:.2f}", f"{bus / f:.2f}"

    return _rewrite_times(text, scaled)


def set_wrong(text: str, size: int, count: int, *, in_place: bool = False) -> str:
    """Write ``count`` into the #wrong column of the row of ``size`` bytes."""
    out = []
    for line in text.splitlines(keepends=True):
        parts = _tokens(line.rstrip("\n"))
        if _ROW.match(line) and int(parts[2]) == size:
            index = 2 + 2 * (12 if in_place else 8)
            parts[index] = _fit(parts[index], str(count))
            line = "".join(parts) + "\n"
        out.append(line)
    return "".join(out)


def misprint_busbw(text: str, size: int, factor: float) -> str:
    """Print the out-of-place busbw of the row of ``size`` bytes ``factor`` times
    what it was (size and time unchanged): a log whose figures disagree."""
    out = []
    for line in text.splitlines(keepends=True):
        parts = _tokens(line.rstrip("\n"))
        if _ROW.match(line) and int(parts[2]) == size:
            index = 2 + 2 * 7
            parts[index] = _fit(parts[index], f"{float(parts[index]) * factor:.2f}")
            line = "".join(parts) + "\n"
        out.append(line)
    return "".join(out)


def rename_hosts(text: str, names: Mapping[str, str]) -> str:
    """Replace host names where the Rank lines give them (``on HOST device``)."""
    for old, new in names.items():
        text = text.replace(f" on {old} ", f" on {new} ")
    return text


def cut(text: str, after_size: int) -> str:
    """Keep the log up to and including the row of ``after_size`` bytes."""
    out = []
    for line in text.splitlines(keepends=True):
        out.append(line)
        if _ROW.match(line) and int(line.split()[0]) == after_size:
            break
    return "".join(out)


def jitter(seed: int, spread: float = 0.015) -> Callable[[int], float]:
    """A deterministic factor in [1 - spread, 1 + spread] per size (no RNG state)."""

    def factor(size: int) -> float:
        step = (seed * 7919 + size.bit_length() * 104729) % 201
        return 1 + spread * (step - 100) / 100

    return factor


def pairwise(
    hosts: list[str], slow: str | None, factor: float = 2.0
) -> list[tuple[str, str]]:
    """A pairwise sweep: the real 2-node log renamed to every pair of ``hosts``, as
    (text, "a-b.log"); pairs that include ``slow`` take ``factor`` x as long at
    every size."""
    logs = []
    for i, a in enumerate(hosts):
        for b in hosts[i + 1 :]:
            text = rename_hosts(healthy(), dict(zip(HOSTS, (a, b), strict=False)))
            if slow in (a, b):
                text = scale(text, lambda _size: factor)
            logs.append((text, f"{a}-{b}.log"))
    return logs


def repeat_sweep(text: str, times: int) -> str:
    """The run's data rows printed ``times`` times in a row, as nccl-tests ``-N``
    repeats a sweep within one run (the header and footer once)."""
    lines = text.splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if _ROW.match(line)]
    first, last = at[0], at[-1] + 1
    return "".join([*lines[:first], *lines[first:last] * times, *lines[last:]])


def retime(text: str, factor: float, busbw_per_algbw: float = 1.875) -> str:
    """Each data row's times ``factor`` x, its algbw and busbw printed from the
    printed size and time as nccl-tests computes them (algbw = size / time; busbw
    = ``busbw_per_algbw`` x algbw: 2(n-1)/n for an all_reduce of 16 ranks), so
    the derived log's figures agree with each other as a real log's do."""

    def retimed(size: int, t: float, alg: float, bus: float) -> tuple[str, str, str]:
        time = _time(t * factor)
        algbw = size / float(time) / 1e3
        return time, f"{algbw:.2f}", f"{algbw * busbw_per_algbw:.2f}"

    return _rewrite_times(text, retimed)


def fleet_night(
    root: Path,
    count: int,
    slow: Mapping[tuple[int, int], float] | None = None,
    collectives: Sequence[str] = ("all_reduce",),
) -> list[tuple[int, int]]:
    """A night of a 64-node pairwise sweep, as a scheduler lays it out: the real
    2-node log renamed to the pair ``nodeAAA``, ``nodeBBB`` in
    ``root/nodeAAA-nodeBBB/all_reduce.log``, for the first ``count`` of the 2,016
    pairs, each pair up to 1 % faster or slower than the log (:func:`retime`, a
    factor per pair); the pairs in ``slow`` (by node numbers) take that factor x
    as long at every size. With more ``collectives``, each pair has a log of each
    (``all_gather.log`` ...: :func:`as_collective` of the pair's log). Returns the
    pairs written, in order."""
    base = healthy()
    pairs = [(a, b) for a in range(64) for b in range(a + 1, 64)][:count]
    for number, (a, b) in enumerate(pairs):
        names = (f"node{a:03d}", f"node{b:03d}")
        text = rename_hosts(base, dict(zip(HOSTS, names, strict=True)))
        wobble = 1 + 0.01 * ((number * 7919) % 201 - 100) / 100
        text = retime(text, wobble * (slow or {}).get((a, b), 1.0))
        directory = root / f"{names[0]}-{names[1]}"
        directory.mkdir(parents=True, exist_ok=True)
        for collective in collectives:
            (directory / f"{collective}.log").write_text(
                as_collective(text, collective)
            )
    return pairs


# The collectives nccl-tests prints no reduction operation for.
_NO_REDOP = ("all_gather", "alltoall")


def as_collective(text: str, collective: str) -> str:
    """The all_reduce log ``text`` of :data:`HEALTHY` (16 ranks) as
    ``collective``'s would print the same times: the binary ``COLLECTIVE_perf``,
    busbw the algbw times (n-1)/n (all_gather, reduce_scatter, alltoall:
    docs/nccl-algorithms.md), from size and time, redop ``none`` where nothing is
    reduced. For measuring many collectives' logs, not their ideals: the times are
    all_reduce's."""
    if collective == "all_reduce":
        return text
    out = []
    for line in text.replace("all_reduce_perf", f"{collective}_perf").splitlines(
        keepends=True
    ):
        if not _ROW.match(line):
            out.append(line)
            continue
        parts = _tokens(line.rstrip("\n"))
        if collective in _NO_REDOP:
            parts[8] = _fit(parts[8], "none")
        for time in (2 + 2 * 5, 2 + 2 * 9):  # out-of-place and in-place time
            algbw = int(parts[2]) / float(parts[time]) / 1e3
            parts[time + 4] = _fit(parts[time + 4], f"{algbw * 15 / 16:.2f}")
        out.append("".join(parts) + "\n")
    return "".join(out)
