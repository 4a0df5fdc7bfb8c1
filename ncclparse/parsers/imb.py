"""Intel MPI Benchmarks ``IMB-MPI1`` output.

One launch prints a preamble (version, date, calling sequence, datatypes), then one
section per benchmark and process count. ``nranks`` is per run in the tables, so a
launch whose sections use several process counts (``-npmin``) becomes one run per
process count; launch-wide facts (params, command, status, errors) are repeated in
each. Status: ``failed`` when IMB or MPI reported an error, ``complete`` after
``# All processes entering MPI_Finalize``, otherwise ``truncated``. IMB prints no
algbw/busbw for collectives (left null); the point-to-point ``Mbytes/sec``
(10^6 bytes/s, IMB's own throughput: X/t for PingPong and PingPing, 2X/t for
Sendrecv, 4X/t for Exchange) is kept in ``algbw_gbps`` divided by 1000.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from ncclparse.schema import RunStatus

from . import _impi
from ._lines import Line
from ._model import Run, parse_at_end
from ._nccl_layout import table_row_problem
from ._sizes import REDUCING, imb_size_bytes
from ._table_row import read_table_row

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
_COLUMNS = {
    "#bytes": "reported_bytes",
    "#repetitions": "repetitions",
    "t[usec]": "time_us",
    "t_avg[usec]": "time_us",
    "t_min[usec]": "time_min_us",
    "t_max[usec]": "time_max_us",
    "Mbytes/sec": "algbw_gbps",
}
_MBYTES_PER_GB = 1000.0

_TITLE = re.compile(r"Intel\s?\(R\) MPI Benchmarks?(?: Suite)? V?([\d.]+)", re.ASCII)
# Lines IMB prints, at the start of a line: prose that names the program (a README,
# a SOURCES.md saying what a log is) is not its output.
_SNIFF = re.compile(
    r"^\s*#*\s*Intel\s?\(R\) MPI Benchmarks?(?: Suite)? V?\d|^# Benchmarking \S+\s*$|"
    r"^# #processes = \d|^\s*Try \"IMB-\S+ -help\"",
    re.ASCII,
)
_RULE = re.compile(r"^#-{10,}\s*$", re.ASCII)
_BENCHMARKING = re.compile(r"^# Benchmarking (\S+)\s*$", re.ASCII)
_PROCESSES = re.compile(r"^# #processes = (\d{1,6})\b", re.ASCII)
_PARAM = re.compile(r"^# ([A-Za-z_][\w ]*?)\s*:\s*(.*?)\s*$", re.ASCII)
_FOOTER = "# All processes entering MPI_Finalize"
_LIST = "List of Benchmarks to run"
_NUMBER = re.compile(r"^-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?$", re.ASCII)
_ERROR = re.compile(r"^ERROR|^Invalid benchmark name|^Try \"IMB-\S+ -help\"", re.ASCII)


def sniff(head: Sequence[Line]) -> bool:
    """Whether ``head`` is IMB output (its title, a section banner or its errors)."""
    return any(_SNIFF.search(ln.text) for ln in head)


def _read(lines: Iterable[Line], source: str) -> tuple[list[Run], Counter[str]]:
    """Parse IMB-MPI1 output; returns its runs and the line accounting."""
    parser = _Parser()
    for line in lines:
        parser.kinds[parser.feed(line)] += 1
    parser.finish()
    return parser.runs, parser.kinds


class _Launch:
    """One IMB launch: its runs by process count and what they share."""

    def __init__(self, first_line: int) -> None:
        self.first = Run(tool=TOOL, first_line=first_line)
        self.by_nranks: dict[int, Run] = {}
        self.failure = False
        self.footer = False
        self.in_command = False

    @property
    def runs(self) -> list[Run]:
        return [
            self.first,
            *(r for r in self.by_nranks.values() if r is not self.first),
        ]

    def run_for(self, nranks: int, line: int) -> Run:
        """The run of ``nranks`` processes, created at ``line`` if new."""
        if nranks not in self.by_nranks:
            if self.first.nranks is None:
                self.first.nranks = nranks
                run = self.first
            else:
                run = Run(tool=TOOL, first_line=line, nranks=nranks)
                run.tool_version = self.first.tool_version
                run.library_version = self.first.library_version
                run.command = self.first.command
                run.params = self.first.params  # shared: launch-wide
                run.errors = self.first.errors
                run.warnings = self.first.warnings
                run.hosts = self.first.hosts
            self.by_nranks[nranks] = run
        return self.by_nranks[nranks]


class _Parser:
    def __init__(self) -> None:
        self.launches: list[_Launch] = []
        self.launch: _Launch | None = None
        self.run: Run | None = None
        self.kinds: Counter[str] = Counter()
        self.benchmark = ""
        self.columns: list[str] = []

    @property
    def runs(self) -> list[Run]:
        return [run for launch in self.launches for run in launch.runs]

    def feed(self, line: Line) -> str:
        text = line.text
        title = _TITLE.search(text)
        if self.launch is None or (title and self.launch.first.tool_version):
            self._start(line.number)
        launch, run = self.launch, self.run
        assert launch is not None
        assert run is not None
        for each in launch.runs:
            each.last_line = line.number
        if title:
            launch.first.tool_version = title.group(1)
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
            if mpi.rank_host is not None:
                rank, host = mpi.rank_host
                hosts = launch.first.hosts  # shared by the launch's runs
                hosts.extend([None] * (rank + 1 - len(hosts)))
                hosts[rank] = host
            return mpi.kind
        return self._content(launch, run, line)

    def _start(self, number: int) -> None:
        self.launch = _Launch(number)
        self.launches.append(self.launch)
        self.run = self.launch.first
        self.benchmark = ""
        self.columns = []

    def _content(self, launch: _Launch, run: Run, line: Line) -> str:
        text = line.text
        stripped = text.strip()
        if _ERROR.match(stripped):
            run.error(line.number, stripped)
            launch.failure = True
            return "error"
        if stripped == _FOOTER:
            launch.footer = True
            return "structure"
        bench = _BENCHMARKING.match(text)
        if bench:
            self.benchmark = bench.group(1)
            self.columns = []
            return "structure"
        procs = _PROCESSES.match(text)
        if procs:
            self.run = launch.run_for(int(procs.group(1)), line.number)
            name = _collective(self.benchmark)
            self.run.add_collective(name)
            return "structure"
        if stripped.startswith(("#bytes", "#repetitions")):
            self.columns = stripped.split()
            return "structure"
        if self.columns and _NUMBER.match(stripped.split()[0]):
            return self._row(run, line, stripped.split())
        if text.startswith("#"):
            return self._preamble(launch, text)
        if stripped.startswith("!! Benchmark"):  # e.g. PingPong invalid for 1 process
            run.warn(line.number, f"IMB: {stripped}")
            return "structure"
        run.warn(line.number, f"unrecognised line: {stripped[:80]!r}")
        return "warned"

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
            if param and not self.benchmark and param.group(1) != _LIST:
                run.params[param.group(1)] = param.group(2)
        return "structure"

    def _row(self, run: Run, line: Line, tokens: list[str]) -> str:
        number = line.number
        problem = table_row_problem(tokens, self.columns, _COLUMNS)
        if problem is not None and line.complete:
            run.warn(number, f"{problem}: row not read")
            return "warned"
        values = read_table_row(run, line, tokens, self.columns, _COLUMNS)
        if values is None:
            return "warned"
        if "algbw_gbps" in values:
            values["algbw_gbps"] /= _MBYTES_PER_GB
        if "time_us" not in values:
            run.warn(number, f"{self.benchmark} table has no time column: not read")
            return "warned"
        run.add_row(self._measurement(run, number, values))
        return "measurement"

    def _measurement(
        self, run: Run, number: int, values: dict[str, Any]
    ) -> dict[str, Any]:
        collective = _collective(self.benchmark)
        reduces = collective in REDUCING
        params = {**_DEFAULT_PARAMS, **run.params}
        mpi_type = params["MPI_Datatype for reductions" if reduces else "MPI_Datatype"]
        # Barrier moves no data and prints no #bytes.
        reported = values.pop("reported_bytes", 0)
        return {
            **values,
            "line": number,
            "collective": collective,
            "placement": "out-of-place",
            "reported_bytes": reported,
            "size_bytes": imb_size_bytes(
                collective, reported, run.nranks or 1, run.tool_version
            ),
            "dtype": _MPI_DTYPES.get(mpi_type, mpi_type),
            "redop": _MPI_OPS.get(params["MPI_Op"]) if reduces else None,
        }

    def finish(self) -> None:
        for launch in self.launches:
            status: RunStatus
            if launch.failure:
                status = "failed"
            elif launch.footer:
                status = "complete"
            else:
                status = "truncated"
            for run in launch.runs:
                run.status = status
                run.nnodes = len({h for h in run.hosts if h is not None}) or None


def _collective(benchmark: str) -> str:
    name = benchmark.lower()
    return _CANONICAL.get(name, name)


# The parser contract (ncclparse.parsers.Parser): runs reach emit at the end.
parse = parse_at_end(_read)
