"""What a non-row nccl-tests line says, whatever the parser's state.

The parser (nccl_tests._Parser) first tells a line's kind by its text alone: which of
the tool's own lines it is (version, parameters, Rank line, header, footer ...), an
error, a command, known noise, or none of them. That is a pure function of the
stripped text (and whether the line is whole), so it is remembered for whole lines:
a log of many runs (a burn-in job looping the tests, logs concatenated) repeats the
same preamble, Rank, header and footer lines in every run. What the line then does to
the runs depends on the state, and stays in the parser.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from ._nccl_layout import is_names_line, placements_from_group_line
from ._nccl_lines import (
    AVG,
    BINARY_NAMES,
    COMPILED,
    FAILURE,
    NCCL_VERSION,
    OOB,
    PARAM_PAIR,
    PARAMS,
    RANK,
    RCCL_BLOCK,
    RCCL_VERSION,
    STARTING,
    STRUCTURE_PREFIXES,
    TOOL_ERROR,
    VERSION,
    benchmark_binary,
    maybe_noise,
)
from ._nccl_topology import command_settings, scan_line
from ._noise import is_command, is_noise
from ._ompi import fatal_error
from ._signals import classify as killed_by

# A shell's `export NCCL_ALGO=Ring` as echoed (`set -x` adds `+ `).
_EXPORT = re.compile(r"(?:\++ )?export ", re.ASCII)
# Between the `count` (E0: `N`) and `type` labels of the column-names line.
_TYPE_GAP = re.compile(r"(?:\bcount|\bN)(?P<gap> +)type\b", re.ASCII)


class Seen(NamedTuple):
    """A line's kind and what it states (``value``: per kind, see :func:`recognise`).

    ``settings``: the NCCL_ALGO / NCCL_PROTO an echoed command or export sets (or
    None); ``tool_error``: an option error nccl-tests prints (a failure when a run
    is open, else the line is read as ``kind`` says).
    """

    kind: str
    stripped: str
    body: str  # without the `#` marks and blanks around them
    match: re.Match[str] | None
    value: Any
    settings: dict[str, str] | None
    tool_error: bool


def recognise(stripped: str, complete: bool) -> Seen:
    """The kind of the stripped, non-empty text of a line that is no data row.

    Kinds, in the order they are tried (``value`` in brackets): ``failure``;
    ``killed`` (the Signal); ``fatal`` (the error text); ``command`` (a benchmark's
    command line); ``noise`` (the topology facts it states; ``match``: NCCL's
    version); a line cut by the end of input: ``cut`` (its parameter pairs but the
    last, or None); else the tool's own lines, ``match`` their pattern's: ``version``,
    ``starting`` (the collective of its binary), ``params`` (its pairs, and whether
    it is rccl-tests' own form), ``rccl_version``, ``rccl_block``, ``compiled``,
    ``rank`` ((rank, host, device name or None, device index)), ``using``, ``names``
    (its words, and whether the type label is 4 blanks after count: E0-E1),
    ``group`` (its placements), ``units``, ``oob``, ``avg``, ``misc``; then
    ``shell`` (a command: noise) or ``warned`` (not recognised).
    """
    settings = None
    if ("NCCL_ALGO=" in stripped or "NCCL_PROTO=" in stripped) and (
        stripped.endswith("\\") or _EXPORT.match(stripped)
    ):
        settings = command_settings(stripped)
    body = stripped.lstrip("#").strip()
    tool_error = TOOL_ERROR.match(body) is not None

    def seen(kind: str, match: re.Match[str] | None = None, value: Any = None) -> Seen:
        return Seen(kind, stripped, body, match, value, settings, tool_error)

    # The substring tests are cheap guards in front of the regular expressions.
    if ("ailure" in stripped or "imeout" in stripped) and FAILURE.search(stripped):
        return seen("failure")
    if (killed := killed_by(stripped)) is not None:
        return seen("killed", value=killed)
    if (fatal := fatal_error(stripped)) is not None:
        return seen("fatal", value=fatal)
    if "_perf" in stripped and _is_benchmark_command(stripped):
        return seen("command")
    if maybe_noise(stripped) and is_noise(stripped):
        # A line cut by the end of input may have lost NICs: no fact is read.
        facts = scan_line(stripped) if "CCL INFO " in stripped and complete else None
        return seen("noise", NCCL_VERSION.search(stripped), facts)
    if not complete:  # cut by the end of input: `: 84.8558` may read `: 8`
        # Its pairs but the last are whole (nThread/nGpus give nranks).
        pairs = PARAM_PAIR.findall(body)[:-1] if PARAMS.match(body) else None
        return seen("cut", value=pairs)
    words = body.split()
    if (match := VERSION.match(body)) is not None:
        return seen("version", match)
    if (match := STARTING.match(body)) is not None:
        stem = match.group("name").split("_perf")[0]
        return seen("starting", match, BINARY_NAMES.get(stem))
    if PARAMS.match(body):
        # `nThreads: 1 nGpus: 4 nRanks: 1`: rccl-tests' own.
        return seen("params", value=(dict(PARAM_PAIR.findall(body)), ":" in words[0]))
    for kind, pattern in (
        ("rccl_version", RCCL_VERSION),
        ("rccl_block", RCCL_BLOCK),
        ("compiled", COMPILED),
    ):
        if (match := pattern.match(body)) is not None:
            return seen(kind, match)
    if (match := RANK.match(body)) is not None:
        rank = (
            int(match.group("rank")),
            match.group("host"),
            match.group("name").strip() or None,
            int(match.group("dev")),
        )
        return seen("rank", match, rank)
    if body.startswith("Using devices"):
        return seen("using")
    if is_names_line(words):
        # `%6s` type label (4 blanks after `count`/`N`): E0-E1 (format doc section 2).
        gap = _TYPE_GAP.search(body)
        narrow = gap is not None and len(gap["gap"]) == 4
        return seen("names", value=(tuple(words), narrow))
    if "out-of-place" in words or words == ["in-place"]:
        return seen("group", value=placements_from_group_line(words))
    if words and words[0] == "(B)":
        return seen("units")
    if (match := OOB.match(body)) is not None:
        return seen("oob", match)
    if (match := AVG.match(body)) is not None:
        return seen("avg", match)
    if body.startswith((*STRUCTURE_PREFIXES, "......")) or body == "":
        return seen("misc")
    return seen("shell" if is_command(stripped) else "warned")


def _is_benchmark_command(stripped: str) -> bool:
    """Whether a line that names a ``*_perf`` binary is the command line that ran
    a benchmark (`./all_reduce_perf -b 8 ...`), not a `#` line about it."""
    return (
        not stripped.startswith("#")
        and benchmark_binary(stripped) is not None
        and is_command(stripped)
    )


# Whole lines already recognised. Bounded: a log of millions of different lines
# (each run's own hosts, a hostile input) empties it when it is full, and longer
# texts are not kept.
_SEEN: dict[str, Seen] = {}
_SEEN_MAX, _SEEN_LONGEST = 4096, 1024


def recognised(stripped: str) -> Seen:
    """:func:`recognise` of a whole line, remembered."""
    seen = _SEEN.get(stripped)
    if seen is None:
        seen = recognise(stripped, complete=True)
        if len(stripped) <= _SEEN_LONGEST:
            if len(_SEEN) >= _SEEN_MAX:
                _SEEN.clear()
            _SEEN[stripped] = seen
    return seen


# What the command lines already read run and set (see command_reads). Bounded as
# _SEEN is.
_COMMANDS: dict[str, tuple[str | None, dict[str, str]]] = {}


def command_reads(command: str) -> tuple[str | None, dict[str, str]]:
    """The collective of the benchmark binary ``command`` runs (or None) and the
    NCCL_ALGO / NCCL_PROTO it sets, remembered: a burn-in job repeats its command
    before every run. The settings are shared: copy, never change them."""
    read = _COMMANDS.get(command)
    if read is None:
        read = benchmark_binary(command), command_settings(command)
        if len(command) <= _SEEN_LONGEST:
            if len(_COMMANDS) >= _SEEN_MAX:
                _COMMANDS.clear()
            _COMMANDS[command] = read
    return read
