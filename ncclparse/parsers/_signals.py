"""Lines saying that a benchmark process was killed by a signal, for every tool.

The benchmarks themselves print nothing when they are killed: the launcher, the
scheduler or the shell does. One rule decides what such a line does to the run
(``docs/schema.md``, runs ``status``): a signal sent from outside the program
(SIGHUP, SIGINT, SIGKILL, SIGTERM: Ctrl-C, ``timeout``, ``kill``, a scheduler's
cancel or time limit, the OOM killer, the launcher stopping the other ranks after
one died) only ends the run early, so the run is ``truncated`` unless something
else failed; any other signal (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, ...) is
raised by the program itself, so the run is ``failed``. Either way the line is kept
in the run's ``errors``, with the signal's number and name appended when the line
names the signal only by its description (``Killed``).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

NAMES = {
    1: "SIGHUP",
    2: "SIGINT",
    3: "SIGQUIT",
    4: "SIGILL",
    5: "SIGTRAP",
    6: "SIGABRT",
    7: "SIGBUS",
    8: "SIGFPE",
    9: "SIGKILL",
    10: "SIGUSR1",
    11: "SIGSEGV",
    12: "SIGUSR2",
    13: "SIGPIPE",
    14: "SIGALRM",
    15: "SIGTERM",
    24: "SIGXCPU",
}
# strsignal() texts, as shells, srun and Open MPI print them.
_DESCRIPTIONS = {
    "Hangup": 1,
    "Interrupt": 2,
    "Quit": 3,
    "Illegal instruction": 4,
    "Trace/breakpoint trap": 5,
    "Aborted": 6,
    "Bus error": 7,
    "Floating point exception": 8,
    "Killed": 9,
    "User defined signal 1": 10,
    "Segmentation fault": 11,
    "User defined signal 2": 12,
    "Broken pipe": 13,
    "Alarm clock": 14,
    "Terminated": 15,
    "CPU time limit exceeded": 24,
}
EXTERNAL = frozenset({1, 2, 9, 15})

_DESC = "|".join(re.escape(d) for d in sorted(_DESCRIPTIONS, key=len, reverse=True))
_CORE = r"(?:\s+\(core dumped\))?"
_PATTERNS = (
    # Intel MPI / MPICH Hydra box: `=   KILLED BY SIGNAL: 9 (Killed)`.
    re.compile(r"KILLED BY SIGNAL: (?P<n>\d{1,3})\b", re.ASCII),
    # MPICH: `YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)`.
    re.compile(r"THE EXIT STRING: .*\(signal (?P<n>\d{1,3})\)", re.ASCII),
    # Open MPI / PRRTE: `mpirun noticed that process rank 1 with PID 7 on node a
    # exited on signal 9 (Killed).`
    re.compile(r"\bnoticed that process rank .* exited on signal (?P<n>\d{1,3})\b"),
    # Open MPI's handler: `[host:1234] Signal: Segmentation fault (11)`.
    re.compile(r"^\[[\w.\-]+:\d+\] Signal: .*\((?P<n>\d{1,3})\)\s*$", re.ASCII),
    # Slurm: `srun: error: node1: task 0: Killed`, `tasks 0-3: Segmentation fault`.
    re.compile(rf"^srun: error: \S+: tasks? [\d,\-]+: (?P<d>{_DESC}){_CORE}\s*$"),
    # A shell reporting its child: `Killed`, `Segmentation fault (core dumped)`,
    # `./run.sh: line 3: 4711 Terminated              mpirun ...`.
    re.compile(rf"^(?:.*: line \d+: +\d+ )?(?P<d>{_DESC}){_CORE}(?: {{2,}}\S.*)?\s*$"),
)
# Slurm cancelling a step or job (scancel, time limit): SIGTERM, then SIGKILL.
_CANCELLED = re.compile(
    r"^slurmstepd: error: \*\*\* (?:STEP|JOB) \S+ ON \S+ CANCELLED AT ", re.ASCII
)
_UPPER = frozenset(string.ascii_uppercase)
_LOWER = frozenset(string.ascii_lowercase)


def _hinted(text: str) -> bool:
    """Cheap test in front of the patterns, true for every line they match (it holds
    "SIGNAL", "[Ss]ignal" or ": line ", or starts with "srun: error", "slurmstepd",
    "CPU time limit" or [A-Z][a-z]): substring tests, as a regular expression of
    those alternatives tried at every position cost a tenth of reading oneCCL and
    IMB logs. (That expression let no "CPU time limit exceeded" through.)"""
    return (
        "ignal" in text
        or "SIGNAL" in text
        or ": line " in text
        or text.startswith(("srun: error", "slurmstepd", "CPU time limit"))
        or (text[:1] in _UPPER and text[1:2] in _LOWER)
    )


@dataclass(frozen=True, slots=True)
class Signal:
    """A process of the run was killed by signal ``number``."""

    number: int
    message: str  # the text kept in the run's errors

    @property
    def failure(self) -> bool:
        """Whether the program raised the signal itself (the run failed)."""
        return self.number not in EXTERNAL


def name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 42`` for a number without a usual name."""
    return NAMES.get(number, f"signal {number}")


def classify(text: str) -> Signal | None:
    """The signal a launcher, scheduler or shell line reports; None if none."""
    stripped = text.strip()
    if not stripped or len(stripped) > 1000 or not _hinted(stripped):
        return None
    for pattern in _PATTERNS:
        match = pattern.search(stripped)
        if match is None:
            continue
        groups = match.groupdict()
        if groups.get("n") is not None:
            return Signal(int(groups["n"]), stripped)
        number = _DESCRIPTIONS[groups["d"]]
        return Signal(number, f"{stripped} (signal {number}: {name(number)})")
    if _CANCELLED.match(stripped):
        return Signal(15, f"{stripped} (signal 15: SIGTERM)")
    return None
