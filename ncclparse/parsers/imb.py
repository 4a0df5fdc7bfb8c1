"""Intel MPI Benchmarks output: IMB-MPI1, IMB-NBC, IMB-RMA, IMB-EXT, IMB-IO, IMB-P2P
and IMB-MT.

One launch prints a preamble (version, date, calling sequence, datatypes), then one
section per benchmark and process count. ``nranks`` is per run in the tables, so a
launch whose sections use several process counts (``-npmin``) becomes one run per
process count; launch-wide facts (command, status, errors) are repeated in each, and
``params`` holds the launch's preamble plus what sets the run apart (schema.md, "Intel
MPI Benchmarks"). A run spans the lines of its own sections (the first run also the
preamble, the last section's run also the footer); IMB prints the process counts of
each benchmark in turn, so the spans of one launch's runs interleave. Sections that
measure something else than the same operation on the same ranks are their own runs
too: ``-multi`` groups (``Multi-<name>``, ``nranks`` the group size, ``params``
``groups``; with ``-multi 1`` one run per group, ``params`` ``group``), the
``MODE: AGGREGATE`` / ``NON-AGGREGATE`` sections of IMB-RMA, IMB-EXT and IMB-IO
(``params`` ``MODE``) and IMB-MT's thread count (``params`` ``threads``).

Lines are read whatever blanks a paste puts before them (a Markdown list item
indents a whole log, or only some of its lines). Status: ``failed`` when IMB or MPI
reported an error, ``complete`` after ``# All processes entering MPI_Finalize``
(unless no row was read: then ``truncated``, as for every tool), otherwise
``truncated``; IMB-MT prints no
such line, so its launches that end with a whole line and no error are ``complete``,
with a warning saying so. IMB prints no algbw/busbw for collectives (left null); the
point-to-point ``Mbytes/sec`` (10^6 bytes/s, IMB's own throughput: X/t for PingPong
and PingPing, 2X/t for Sendrecv, 4X/t for Exchange) is kept in ``algbw_gbps``
divided by 1000; IMB before 2018 printed it in 2^20 bytes/s, converted (a warning
says so) when the rates and times show it. Columns without a schema column
(``t_ovrl``, ``t_CPU``, ``overlap[%]``, ``Msg/sec``, ...) are named in the run's
warnings; ``defects`` above IMB's tolerance, and a -DCHECK build's ``Error`` lines,
are errors of the run.
Uniband and Biband print no time, and ``time_us`` is never derived: their rows are
not read, each named in warnings.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ncclparse.schema import RunStatus

from . import _impi
from ._lines import Line, mentions
from ._model import Run, parse_at_end
from ._sizes import REDUCING, imb_size_bytes
from ._table_row import PLAIN_ROW, table_row_values

NAME = "imb"
READS_SKIPPED = False  # takes only Line items (see ncclparse.parsers.Parser)
TOOL = "imb"

# Benchmarks with a canonical collective name; the others keep their IMB name in
# lower case (pingpong, pingping, exchange, barrier, gatherv, scatterv,
# reduce_local, reduce_scatter_block, uniband, biband, ...).
_CANONICAL = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "allgatherv": "all_gather_v",
    "alltoall": "alltoall",
    "alltoallv": "alltoallv",
    "bcast": "broadcast",
    "reduce": "reduce",
    "reduce_scatter": "reduce_scatter",
    "gather": "gather",
    "scatter": "scatter",
    # Each rank sends to its right and receives from its left neighbour: the
    # pattern of nccl-tests sendrecv.
    "sendrecv": "sendrecv",
}
# IMB-RMA benchmarks on IMB's reduction datatype and MPI_Op (IMB_rma_atomic.c:
# `bmark->reduction = 1`); Compare_and_swap "Uses MPI_INT data type".
_RMA_REDUCING = frozenset({"accumulate", "get_accumulate", "fetch_and_op"})
_RMA_INT = frozenset({"compare_and_swap"})
_MPI_DTYPES = {
    "MPI_BYTE": "uint8",
    "MPI_CHAR": "int8",
    "MPI_INT": "int32",
    "MPI_FLOAT": "float32",
    "MPI_DOUBLE": "float64",
}
_MPI_OPS = {"MPI_SUM": "sum", "MPI_PROD": "prod", "MPI_MIN": "min", "MPI_MAX": "max"}
# IMB's defaults, for output whose preamble is missing.
_DEFAULT_PARAMS = {
    "MPI_Datatype": "MPI_BYTE",
    "MPI_Datatype for reductions": "MPI_FLOAT",
    "MPI_Op": "MPI_SUM",
}
# IMB-MT prints no preamble: its `-datatype` defaults to int, for every benchmark.
_MT_PARAMS = {
    "MPI_Datatype": "MPI_INT",
    "MPI_Datatype for reductions": "MPI_INT",
    "MPI_Op": "MPI_SUM",
}
_MT_ASSUMED = (
    "IMB-MT prints no datatype: int32 assumed (its -datatype default; "
    "-datatype char would be int8), MPI_SUM for reductions"
)
_MT_NO_FOOTER = (
    "IMB-MT prints no end-of-run line: complete because the input ends with a "
    "whole line and no error"
)
_COLUMNS = {
    "#bytes": "reported_bytes",
    "#repetitions": "repetitions",
    "t[usec]": "time_us",
    "t_avg[usec]": "time_us",
    "t_min[usec]": "time_min_us",
    "t_max[usec]": "time_max_us",
    # IMB-NBC and IMB-RMA Truly_passive_put: the operation alone (no overlapping
    # computation), the time of one operation in the schema's sense.
    "t_pure[usec]": "time_us",
    "Mbytes/sec": "algbw_gbps",
    # Read, but not schema columns (popped before the row is made).
    "Group": "_group",
    "Msg/sec": "_msg_rate",
    "defects": "_defects",
}
# Printed columns that have no schema column: named once per run in warnings.
_NOT_KEPT = ("t_ovrl[usec]", "t_CPU[usec]", "overlap[%]")
_MBYTES_PER_GB = 1000.0
# IMB before 2018 printed Mbytes/sec in 2^20 bytes/s (X/1.048576/t); IMB 2018 on in
# 10^6 (IMB_output.c: MEGA = 1/1e6). The version is not always printed: the rates
# themselves tell (_megabytes_unit).
_MIB_PER_MB = 1.048576
_UNIT_TOLERANCE = 0.012
# Rows with a rate held back while the unit is unknown, at most (then 10^6 is taken).
_UNDECIDED_ROWS = 64
_MIB_NOTE = (
    "Mbytes/sec printed in 2^20 bytes/s (IMB before 2018: X/1.048576/t, as the rates "
    "and times show): algbw_gbps converted to 10^9 bytes/s"
)

_TITLE = re.compile(r"Intel\s?\(R\) MPI Benchmarks?(?: Suite)? V?([\d.]+)", re.ASCII)
_PART = re.compile(r",\s*([\w-]{1,40} part)\b", re.ASCII)
# Lines IMB prints, at the start of a line: prose that names the program (a README,
# a SOURCES.md saying what a log is) is not its output.
_SNIFF = re.compile(
    r"^\s*#*\s*Intel\s?\(R\) MPI Benchmarks?(?: Suite)? V?\d|"
    r"^\s*#-? Benchmarking \S+\s*$|^\s*#-? #processes = \d|^\s*Try \"IMB-\S+ -help\"",
    re.ASCII,
)
_RULE = re.compile(r"^#-{10,}\s*$", re.ASCII)
# What a paste may put before IMB's lines (read after Intel MPI's, which keep theirs).
_INDENT = " \t"
# Some -DCHECK builds open a section with `#- Benchmarking` and `#- #processes = 16`
# (intel/mpi-benchmarks issue #22, IMB 2019 update 2).
_BENCHMARKING = re.compile(r"^#-? Benchmarking (\S+)\s*$", re.ASCII)
_PROCESSES = re.compile(
    r"^#-? #processes = (\d{1,6})\b(?:\s*\(threads: (\d{1,6})\))?", re.ASCII
)
_GROUPS = re.compile(
    r"^# \( (\d{1,6}) groups? of (\d{1,6}) processes each running simultaneous",
    re.ASCII,
)
_MODE = re.compile(r"^#\s+MODE:\s*([A-Z-]+)\s*$", re.ASCII)
_INVALID = re.compile(r"^(?:#\s*)?(!! Benchmark .*)$", re.ASCII)
_PARAM = re.compile(r"^# ([A-Za-z_][\w ]*?)\s*:\s*(.*?)\s*$", re.ASCII)
_FOOTER = "# All processes entering MPI_Finalize"
_LIST = "List of Benchmarks to run"
_NUMBER = re.compile(r"^-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?$", re.ASCII)
# Then a -DCHECK build's data check, `<rank>: Error <name>,size = <n>,sample #<k>`
# (IMB_chk_diff.c; the rank and its colon read as a launcher label before here), the
# buffers it compared (`Process 15: Got invalid buffer:`, `Buffer entry: 13.600000`,
# `pos: 0`, `Process 15: Expected    buffer:`), and IMB's own abort line.
_ERROR = re.compile(
    r"^ERROR|^Invalid benchmark name|^Try \"IMB-\S+ -help\"|^Error \S+,size = \d|"
    r"^Process \d+: (?:Got invalid|Expected) +buffer:$|^Buffer entry: \S+$|"
    r"^pos: \d+$|^Application error code \d+ occurred$",
    re.ASCII,
)

# A -DCHECK build's `defects` above this fail the benchmark in IMB (TOL in
# src_c/IMB_declare.h, IMB 2021.11).
_DEFECT_TOLERANCE = 1e-2


# Text that each match of _SNIFF holds (see oneccl._SNIFF_TEXT).
_SNIFF_TEXT = (
    "(R) MPI Benchmark",
    "# Benchmarking ",
    "#- Benchmarking ",
    "# #processes = ",
    "#- #processes = ",
    'Try "IMB-',
)


def sniff(head: Sequence[Line]) -> bool:
    """Whether ``head`` is IMB output (its title, a section banner or its errors)."""
    if not mentions(head, _SNIFF_TEXT):
        return False
    return any(_SNIFF.search(ln.text) for ln in head)


def _read(lines: Iterable[Line], source: str) -> tuple[list[Run], Counter[str]]:
    """Parse IMB output; returns its runs and the line accounting."""
    parser = _Parser()
    for line in lines:
        parser.kinds[parser.feed(line)] += 1
    parser.finish()
    return parser.runs, parser.kinds


@dataclass(frozen=True, slots=True)
class _Key:
    """What sets a run apart inside one launch."""

    nranks: int
    groups: int | None = None  # -multi: groups running at once (nranks each)
    group: int | None = None  # -multi 1: this group's own rows
    threads: int | None = None  # IMB-MT
    mode: str | None = None  # IMB-RMA / IMB-IO: AGGREGATE, NON-AGGREGATE

    def params(self) -> dict[str, str]:
        named = {
            "groups": self.groups,
            "group": self.group,
            "threads": self.threads,
            "MODE": self.mode,
        }
        return {k: str(v) for k, v in named.items() if v is not None}


class _Launch:
    """One IMB launch: its runs by key and what they share."""

    def __init__(self, first_line: int) -> None:
        self.first = Run(tool=TOOL, first_line=first_line)
        self.by_key: dict[_Key, Run] = {}
        self.params: dict[str, str] = {}  # the preamble's, shared by every run
        self.part = ""  # "MPI-1 part", "MPI-NBC part", "MT part", ...
        self.failure = False
        self.footer = False
        self.in_command = False
        self.last_complete = True
        # The unit of Mbytes/sec (True: 2^20 bytes/s), once a row tells; until then
        # the rows with a rate wait here, with their run (_megabytes_unit).
        self.mib: bool | None = None
        self.waiting: list[tuple[Run, dict[str, Any]]] = []
        self.converted = False

    def add_row(self, run: Run, row: dict[str, Any]) -> None:
        """Add ``row`` to ``run``, in source order, its rate in 10^6 bytes/s: rows
        with a rate wait until one tells the unit (at most _UNDECIDED_ROWS)."""
        if self.mib is None and row.get("algbw_gbps") is not None:
            self.mib = _megabytes_unit(row)
            self.waiting.append((run, row))
            if self.mib is not None or len(self.waiting) >= _UNDECIDED_ROWS:
                self.flush()
            return
        self.flush()
        self._add(run, row)

    def flush(self) -> None:
        """Add the waiting rows, in 10^6 bytes/s if no row told the unit."""
        if self.waiting and self.mib is None:
            self.mib = False
        waiting, self.waiting = self.waiting, []
        for run, row in waiting:
            self._add(run, row)

    def _add(self, run: Run, row: dict[str, Any]) -> None:
        if self.mib and row.get("algbw_gbps") is not None:
            row["algbw_gbps"] *= _MIB_PER_MB
            if not self.converted:  # the launch's runs share their warnings
                run.warn(row["line"], _MIB_NOTE)
                self.converted = True
        run.add_row(row)

    @property
    def runs(self) -> list[Run]:
        return [
            self.first,
            *(r for r in self.by_key.values() if r is not self.first),
        ]

    @property
    def mt(self) -> bool:
        return self.part == "MT part"

    def run_for(self, key: _Key, line: int) -> Run:
        """The run of ``key``, created with its span starting at ``line`` if new."""
        if key not in self.by_key:
            if not self.by_key:
                self.first.nranks = key.nranks
                run = self.first
            else:
                run = Run(tool=TOOL, first_line=line, nranks=key.nranks)
                run.tool_version = self.first.tool_version
                run.library_version = self.first.library_version
                run.command = self.first.command
                run.errors = self.first.errors  # shared: launch-wide
                run.warnings = self.first.warnings
                run.hosts = self.first.hosts
            self.by_key[key] = run
        return self.by_key[key]


@dataclass(slots=True)
class _Section:
    """The benchmark section being read (`# Benchmarking ...` up to the next)."""

    benchmark: str
    start: int
    nranks: int | None = None
    threads: int | None = None
    groups: int | None = None
    mode: str | None = None
    columns: tuple[str, ...] = ()
    header: int = 0
    bound: bool = False

    def key(self, group: int | None = None) -> _Key:
        assert self.nranks is not None
        return _Key(self.nranks, self.groups, group, self.threads, self.mode)


class _Parser:
    def __init__(self) -> None:
        self.launches: list[_Launch] = []
        self.launch: _Launch | None = None
        self.run: Run | None = None  # the run the current lines belong to
        self.kinds: Counter[str] = Counter()
        self.section: _Section | None = None
        self.rule = 0  # number of the last line if it was a `#-----` rule

    @property
    def runs(self) -> list[Run]:
        return [run for launch in self.launches for run in launch.runs]

    def feed(self, line: Line) -> str:
        text = line.text
        section = self.section
        # A table row goes straight to _row: no pattern of the lines below can match
        # its line (PLAIN_ROW); what the other lines do on the way is done here.
        if section is not None and section.columns and PLAIN_ROW.match(text):
            tokens = text.split()
            if _NUMBER.match(tokens[0]):
                launch, run = self.launch, self.run
                assert launch is not None
                assert run is not None
                launch.last_complete = line.complete
                if section.bound:
                    run.last_line = line.number
                self.rule = 0
                return self._row(launch, section, line, tokens)
        title = _TITLE.search(text)
        if self.launch is None or (title and self.launch.first.tool_version):
            self._start(line.number)
        launch, run = self.launch, self.run
        assert launch is not None
        assert run is not None
        launch.last_complete = line.complete
        if self.section is None or self.section.bound:
            run.last_line = line.number
        if title:
            launch.first.tool_version = title.group(1)
            part = _PART.search(text, title.end())
            launch.part = part.group(1) if part else ""
            return "structure"
        if not text.strip():
            return "blank"
        mpi = _impi.classify(text)
        if mpi is not None:
            if mpi.message is not None:
                run.error(line.number, mpi.message)
            launch.failure = launch.failure or mpi.failure
            if mpi.library_version:
                launch.first.library_version = mpi.library_version
            hosts = launch.first.hosts  # shared by the launch's runs
            for rank, host in mpi.rank_hosts:
                hosts.extend([None] * (rank + 1 - len(hosts)))
                hosts[rank] = host
            return mpi.kind
        if text[:1] in _INDENT:
            # IMB starts its own lines at the margin: this one is pasted indented (a
            # Markdown list item or code block), as a whole or alone.
            text = text.lstrip(_INDENT)
            line = line._replace(text=text)
        kind = self._content(launch, run, line)
        self.rule = line.number if _RULE.match(text) else 0
        return kind

    def _start(self, number: int) -> None:
        self._close()
        self.launch = _Launch(number)
        self.launches.append(self.launch)
        self.run = self.launch.first
        self.section = None
        self.rule = 0

    def _content(self, launch: _Launch, run: Run, line: Line) -> str:
        text = line.text
        stripped = text.strip()
        if _ERROR.match(stripped):
            run.error(line.number, stripped)
            launch.failure = True
            return "error"
        if stripped == _FOOTER:
            self._close()
            launch.footer = True
            return "structure"
        bench = _BENCHMARKING.match(text)
        if bench:
            self._close()
            start = self.rule or line.number
            self.section = _Section(bench.group(1), start)
            return "structure"
        section = self.section
        if section is not None and not section.bound and self._banner(section, text):
            return "structure"
        first = stripped.split()[0] if stripped else ""
        if section is not None and first in ("#bytes", "#repetitions", "Group"):
            section.columns = tuple(stripped.split())
            section.header = line.number
            self._bind(line.number)
            if section.bound:
                self._not_kept(run if self.run is None else self.run, section)
            return "structure"
        if section is not None and section.columns and _NUMBER.match(first):
            return self._row(launch, section, line, stripped.split())
        invalid = _INVALID.match(stripped)
        if invalid:  # e.g. PingPong invalid for 1 process, Stencil2D for 2
            run.warn(line.number, f"IMB: {invalid.group(1)}")
            return "structure"
        if text.startswith("#"):
            return self._preamble(launch, text)
        run.warn(line.number, f"unrecognised line: {stripped[:80]!r}")
        return "warned"

    def _banner(self, section: _Section, text: str) -> bool:
        """Read a section banner line (process count, groups, mode) if it is one."""
        procs = _PROCESSES.match(text)
        if procs:
            section.nranks = int(procs.group(1))
            section.threads = int(procs.group(2)) if procs.group(2) else None
            return True
        groups = _GROUPS.match(text)
        if groups:
            section.groups, section.nranks = int(groups.group(1)), int(groups.group(2))
            return True
        mode = _MODE.match(text)
        if mode:
            section.mode = mode.group(1)
            return True
        return False

    def _bind(self, number: int) -> None:
        """Give the section its run (the first group's with -multi 1)."""
        section, launch = self.section, self.launch
        assert launch is not None
        if section is None or section.bound or section.nranks is None:
            return
        section.bound = True
        group = 0 if section.groups is not None and "Group" in section.columns else None
        previous = self.run
        run = launch.run_for(section.key(group), section.start)
        if previous is not None and previous is not run:
            # The rule line that opens this section was counted in the previous one.
            previous.last_line = min(previous.last_line, section.start - 1)
        run.first_line = min(run.first_line, section.start)
        run.last_line = max(run.last_line, number)
        run.add_collective(self._names(section.benchmark)[0])
        self.run = run

    def _close(self) -> None:
        """End the current section: one that named its process count but printed no
        table (cut off, or skipped) still names its collective in its run."""
        if self.section is not None and not self.section.bound:
            self._bind(self.section.start)
        self.section = None

    def _preamble(self, launch: _Launch, text: str) -> str:
        """Preamble and banner lines; all are the tool's own structure."""
        run = launch.first
        body = text[1:].strip()
        if launch.in_command and body:
            run.command = body
            launch.in_command = False
        elif body.startswith("Calling sequence was"):
            launch.in_command = True
        elif not _RULE.match(text):
            param = _PARAM.match(text)
            if param and self.section is None and param.group(1) != _LIST:
                launch.params[param.group(1)] = param.group(2)
        return "structure"

    def _row(
        self, launch: _Launch, section: _Section, line: Line, tokens: list[str]
    ) -> str:
        number = line.number
        run = self.run
        assert run is not None
        if not section.bound:
            run.warn(
                number, f"{section.benchmark} table has no process count: not read"
            )
            return "warned"
        values = table_row_values(run, line, tokens, list(section.columns), _COLUMNS)
        if values is None:
            return "warned"
        group = values.pop("_group", None)
        if group is not None and section.groups is not None:
            if not (group.is_integer() and 0 <= group < section.groups):
                run.warn(
                    number, f"Group {group:g} is not one of the groups: row not read"
                )
                return "warned"
            run = launch.run_for(section.key(int(group)), section.start)
            run.add_collective(self._names(section.benchmark)[0])
            run.last_line = max(run.last_line, number)
        rate = values.pop("_msg_rate", None)
        defects = values.pop("_defects", None)
        if defects is not None and defects > _DEFECT_TOLERANCE:
            # IMB itself marks the benchmark failed beyond TOL: so is the run's data.
            run.error(
                number,
                f"IMB data check failed: defects {defects:g} above IMB's tolerance "
                f"{_DEFECT_TOLERANCE:g}",
            )
        elif defects:
            run.warn(number, f"IMB data check: defects {defects:g} (within IMB's "
                             f"tolerance {_DEFECT_TOLERANCE:g})")  # fmt: skip
        if "algbw_gbps" in values:
            values["algbw_gbps"] /= _MBYTES_PER_GB
        if "time_us" not in values:
            # Uniband/Biband print Mbytes/sec and Msg/sec only; time_us cannot be null
            # and is never derived (every number of a row is one its line prints).
            printed = " and Msg/sec" if rate is not None else ""
            run.warn(
                number,
                f"{section.benchmark} table has no time column (IMB prints Mbytes/sec"
                f"{printed} only; time_us cannot be null): row not read",
            )
            return "warned"
        launch.add_row(run, self._measurement(launch, run, section, number, values))
        return "measurement"

    @staticmethod
    def _not_kept(run: Run, section: _Section) -> None:
        dropped = [c for c in section.columns if c in _NOT_KEPT]
        if "Msg/sec" in section.columns and any(
            _COLUMNS.get(c) == "time_us" for c in section.columns
        ):
            dropped.append("Msg/sec")
        unknown = [
            c for c in section.columns if c not in _COLUMNS and c not in _NOT_KEPT
        ]
        note = ", ".join(dropped + unknown)
        if note:
            pure = (
                " (time_us is t_pure[usec])"
                if "t_pure[usec]" in section.columns
                else ""
            )
            run.warn(
                section.header, f"IMB columns not kept (no schema column): {note}{pure}"
            )

    def _names(self, benchmark: str) -> tuple[str, str]:
        """The row's collective and the collective whose conventions it follows."""
        launch = self.launch
        assert launch is not None
        name = benchmark.removeprefix("Multi-")
        if launch.mt:
            name = name.removesuffix("MT")
        lower = name.lower()
        if launch.part == "MPI-NBC part" and lower.startswith("i"):
            # Iallreduce, Iallreduce_pure: non-blocking, not MPI_Allreduce's time.
            base = lower[1:].removesuffix("_pure")
            return lower, _CANONICAL.get(base, base)
        canonical = _CANONICAL.get(lower, lower)
        return canonical, canonical

    def _measurement(
        self,
        launch: _Launch,
        run: Run,
        section: _Section,
        number: int,
        values: dict[str, Any],
    ) -> dict[str, Any]:
        collective, base = self._names(section.benchmark)
        reduces = base in REDUCING or base in _RMA_REDUCING
        defaults = _MT_PARAMS if launch.mt else _DEFAULT_PARAMS
        params = {**defaults, **launch.params}
        if base in _RMA_INT:
            mpi_type = "MPI_INT"
        else:
            mpi_type = params[
                "MPI_Datatype for reductions" if reduces else "MPI_Datatype"
            ]
        # Barrier moves no data and prints no #bytes.
        reported = values.pop("reported_bytes", 0)
        return {
            **values,
            "line": number,
            "collective": collective,
            "placement": "out-of-place",
            "reported_bytes": reported,
            "size_bytes": imb_size_bytes(
                base, reported, run.nranks or 1, run.tool_version
            ),
            "dtype": _MPI_DTYPES.get(mpi_type, mpi_type),
            "redop": _MPI_OPS.get(params["MPI_Op"]) if reduces else None,
        }

    def finish(self) -> None:
        self._close()
        for launch in self.launches:
            launch.flush()
            status: RunStatus
            if launch.failure:
                status = "failed"
            elif launch.footer:
                status = "complete"
            elif launch.mt and launch.by_key and launch.last_complete:
                status = "complete"
                launch.first.warn(launch.first.last_line, _MT_NO_FOOTER)
            else:
                status = "truncated"
            if launch.mt and launch.by_key:
                launch.first.warn(launch.first.first_line, _MT_ASSUMED)
            for key, run in [(None, launch.first), *launch.by_key.items()]:
                if key is None and launch.by_key:
                    continue
                run.status = status
                run.params = {**launch.params, **(key.params() if key else {})}
                run.nnodes = len({h for h in run.hosts if h is not None}) or None


def _megabytes_unit(row: dict[str, Any]) -> bool | None:
    """Whether the row's Mbytes/sec is in 2^20 bytes/s (True) or 10^6 (False), or
    None when its figures are too coarse to tell. Its rate over bytes/time (of the
    slowest rank, as IMB divides) is 1, 2 or 4 (PingPong, Sendrecv, Exchange) times
    1 in 10^6 units, times 1/1.048576 in 2^20 ones: 4.9 % apart, and rates from
    1 MB/s and times from 1 us, printed with 2 decimals, are within 1.2 %."""
    rate, size = row.get("algbw_gbps"), row.get("reported_bytes")
    time = row.get("time_max_us") or row.get("time_us")
    if not (rate and size and time) or rate < 0.001 or time < 1:
        return None
    ratio = rate * _MBYTES_PER_GB / (size / time)
    ratio /= 2 ** round(math.log2(ratio))
    if abs(ratio * _MIB_PER_MB - 1) < _UNIT_TOLERANCE:
        return True
    return False if abs(ratio - 1) < _UNIT_TOLERANCE else None


# The parser contract (ncclparse.parsers.Parser): runs reach emit at the end.
parse = parse_at_end(_read)
