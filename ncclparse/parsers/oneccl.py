"""Intel oneCCL ``benchmark`` stdout/stderr (every layout 2021.1 to the newest).

Reads the options block into ``params``, one table per (dtype, reduction) section,
and the rows by header names (``#elem_count``, ``wait_t_avg``, ``avg[usec]`` ...).
A row timing several collectives (``-l a,b``) has ``grouped`` True and collective
null. Status: ``failed`` when the benchmark, the library or MPI reported a failure
(a rank killed by a signal the program raised itself, SIGSEGV or SIGABRT, is one;
Ctrl-C, SIGTERM or SIGKILL from outside is not: see ``_signals``), ``complete``
after ``# All done`` (or, for 2021.1-2021.2 which print no footer, when every row
and section their options block asks for is there), otherwise ``truncated``.
Format reference: ``docs/oneccl-benchmark-format.md``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from ncclparse.schema import DTYPE_BYTES

from . import _impi
from ._lines import Line, mentions
from ._model import Run, parse_at_end
from ._nccl_layout import is_count
from ._noise import is_command
from ._sizes import REDUCING, oneccl_size_bytes
from ._table_row import NUMBER, PLAIN_ROW, table_row_values

NAME = "oneccl-benchmark"
READS_SKIPPED = False  # takes only Line items (see ncclparse.parsers.Parser)
TOOL = "oneccl-benchmark"

COLLECTIVE_NAMES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "allgatherv": "all_gather_v",
    "alltoall": "alltoall",
    "alltoallv": "alltoallv",
    "bcast": "broadcast",
    "bcastExt": "broadcast",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "reduce_scatter": "reduce_scatter",
}
# Beta versions used C type names.
DTYPE_NAMES = {
    "char": "int8",
    "int": "int32",
    "int64_t": "int64",
    "uint64_t": "uint64",
    "float": "float32",
    "double": "float64",
}
ROOTED = frozenset({"broadcast", "reduce"})
_REDUCTIONS = frozenset({"sum", "prod", "min", "max"})  # the benchmark's COLL_ROOT is 0
# Header name -> measurement column. `avg_per_buf[usec]` (2021.1-2.2) is t_avg / -n
# and `wait_t_avg[usec]` (-x on) has no column: both are left out on purpose.
_COLUMNS = {
    "#bytes": "reported_bytes",
    "#elem_count": "count",
    "#repetitions": "repetitions",
    "t_min[usec]": "time_min_us",
    "t_max[usec]": "time_max_us",
    "t_avg[usec]": "time_us",
    "avg[usec]": "time_us",
    "stddev[%]": "stddev_pct",
    "algbw[GB/s]": "algbw_gbps",
    "busbw[GB/s]": "busbw_gbps",
}

# `YYYY:MM:DD-HH:MM:SS:(pid) |CCL_WARN| ...`; `|WARN|` up to library 2021.5.
_CCL_LOG = re.compile(
    r"\d{4}:\d{2}:\d{2}-\d{2}:\d{2}:\d{2}:\(\d+\) \|(?:CCL_)?(?P<tag>[A-Z]+)\|",
    re.ASCII,
)
_CCL_VERSION = re.compile(
    r"\|CCL_INFO\| library version: (?:[A-Za-z]+-)?([\d.]+)", re.ASCII
)
_SNIFF = re.compile(
    r"^# Benchmarking: |^# #?processes: \d|found \d+ errors while parsing user "
    r"options|\[-l,--coll <|what\(\):\s+oneCCL:|ccl::v\d+::exception|"
    r"^do unordered test$|^\(\d+\): [\w.\-]+: @ atl_\w+\.c:\d+:atl_",
    re.ASCII,
)
# 2021.1's MPI transport prints `(tid): host: @ atl_mpi.c:450:fn() ` and then, on
# lines of their own, `WARNING !!!` and the message; its key-value store may print
# `"client: connect": write: fd is closed, size 396`. Library noise, like |WARN|.
_ATL_PRINT = re.compile(r"^\(\d+\): [\w.\-]+: @ [\w./\-]+:\d+:\w+\(\) ?(.*)$", re.ASCII)
_ATL_ERROR = re.compile(r"^(?:ASSERT failed|MPI error|unexpected )", re.ASCII)
_LIBRARY_NOISE = re.compile(
    r"^WARNING !!!$|^Loaded MPI (?:version \(\d+\) is higher|doesn't match with)|"
    r"^\"[\w: ]+\": \w+: fd is closed, size \d+$",
    re.ASCII,
)
_OPTION = re.compile(r"^  ([A-Za-z_][\w ]*?):(?:\s+(.*?))?\s*$", re.ASCII)
_ARG = re.compile(r"^arg (\d{1,6}): (.*)$", re.ASCII)
# The benchmark's binary in a shell command line (`$ mpirun ... ./benchmark`).
_BINARY = re.compile(r"(?:^|[\s/])benchmark(?:\s|$)", re.ASCII)
_SECTION = re.compile(r"^(datatype|dtype|reduction): (\S+)\s*$", re.ASCII)
_BANNER = re.compile(r"^#-{20,}$", re.ASCII)
_BENCHMARKING = re.compile(r"^# Benchmarking: (.*)$", re.ASCII)
_PROCESSES = re.compile(r"^# #?processes: (\d{1,6})\s*$", re.ASCII)
# Check failures, assertions and exceptions; text of several ranks may be glued.
_FAILURE = re.compile(
    r"(?:recv|send)_bufs: buf_idx|^(?:FAILED)+$|ASSERT '.*' FAILED|"
    r"^terminate called after throwing|^\s*what\(\):|cannot open CSV file|"
    r"^Cannot launch benchmark|^empty coll list",
    re.IGNORECASE | re.ASCII,
)
# Option errors, printed by every rank before initialisation.
_OPTION_ERROR = re.compile(
    r"^failed to parse|^found \d+ errors while parsing user options|"
    r"^non-option ARGV-elements given|is not supported for \S+ yet|"
    r": unrecognized option|: invalid option --|: option .*requires an argument",
    re.ASCII,
)
# Printed before an option error or, with checking on, before a run that goes on.
_PENDING = re.compile(
    r"^unsupported \w+: |^supported values: |^correctness checking is not implemented",
    re.ASCII,
)
_USAGE_LINE = re.compile(r"^(?:\t|OPTIONS:|example:)", re.ASCII)
_STRUCTURE = re.compile(r"^(?:PASSED|do unordered test)$", re.ASCII)


# Text that each match of _SNIFF or _CCL_LOG holds: a head with none of it is not
# searched line by line (20,000 lines of NCCL debug output, in an nccl-tests log).
_SNIFF_TEXT = (
    "# Benchmarking: ",
    "processes: ",
    "errors while parsing user options",
    "[-l,--coll <",
    "oneCCL:",
    "ccl::v",
    "do unordered test",
    ": @ atl_",
    ") |",
)


def sniff(head: Sequence[Line]) -> bool:
    """Whether ``head`` is oneCCL benchmark output (stdout/stderr, not its CSV)."""
    if not mentions(head, _SNIFF_TEXT):
        return False
    return any(_SNIFF.search(ln.text) or _CCL_LOG.search(ln.text) for ln in head)


def _read(lines: Iterable[Line], source: str) -> tuple[list[Run], Counter[str]]:
    """Parse oneCCL benchmark output; returns its runs and the line accounting."""
    parser = _Parser()
    for line in lines:
        parser.feed(line)
    parser.finish()
    return parser.runs, parser.kinds


class _Parser:
    def __init__(self) -> None:
        self.runs: list[Run] = []
        self.kinds: Counter[str] = Counter()
        self.run: Run | None = None
        self._reset()

    def _start(self, line: Line) -> Run:
        if self.run is not None:
            self._finish_run()
        self.run = Run(tool=TOOL, first_line=line.number)
        self.runs.append(self.run)
        self._reset()
        return self.run

    def _reset(self) -> None:
        self.failure = False
        self.footer = False
        self.cut = False  # a partial last line
        self.mode = ""  # "options", "usage", "dump" (a CCL_INFO {...} block)
        self.pending: list[tuple[int, str]] = []
        self.dtype = ""
        self.redop = ""
        self.names: list[str] = []
        self.columns: list[str] = []
        self.last_arg = -1
        self.argv: list[str] = []  # from the `arg N:` lines of an option error
        self.passed = 0  # `PASSED` lines (2021.1-2021.2 `-e unordered` sections)

    def feed(self, line: Line) -> None:
        run = self.run
        text = line.text
        if run is None or (self.footer and text.strip() and not _is_noise(text)):
            run = self._start(line)
        run.last_line = line.number
        if not line.complete and text.strip():
            self.cut = True
        kind = self._classify(run, line, text)
        self.kinds[kind] += 1

    def _classify(self, run: Run, line: Line, text: str) -> str:
        number = line.number
        if self.mode == "dump":
            if text == "}":
                self.mode = ""
            return "noise"
        # A table row goes straight to _row: no pattern below can match its line
        # (PLAIN_ROW) but the tab of _USAGE_LINE, which PLAIN_ROW has none of.
        if self.columns and PLAIN_ROW.match(text):
            tokens = text.split()
            if NUMBER.match(tokens[0]):
                return self._row(run, line, tokens)
        log = _CCL_LOG.search(text)
        if log:
            version = _CCL_VERSION.search(text)
            if version:
                run.library_version = version.group(1)
            head = text[: log.start()]
            if head.strip():
                run.warn(number, "benchmark output and a oneCCL message on one line")
                return self._classify(run, line, head)
            if log.group("tag") == "ERROR":
                run.error(number, text[log.start() :])
                self.failure = True
                return "error"
            return "noise"
        if not text.strip():
            return "blank"
        atl = _ATL_PRINT.match(text)
        if atl and _ATL_ERROR.match(atl.group(1)):
            run.error(number, atl.group(1).strip())
            self.failure = True
            return "error"
        if atl or _LIBRARY_NOISE.match(text):
            return "noise"
        if text == "{":
            self.mode = "dump"
            return "noise"
        mpi = _impi.classify(text)
        if mpi is not None:
            return self._mpi(run, number, mpi)
        if self.mode == "usage" and _USAGE_LINE.match(text):
            return "structure"
        if text == "USAGE:":
            self.mode = "usage"
            if not run.errors and not self.pending:
                run.warn(number, "usage text only: the benchmark ran nothing")
            self.failure = True
            return "structure"
        if self.mode == "options":
            option = _OPTION.match(text)
            if option:
                self._option(run, option.group(1), option.group(2) or "")
                return "structure"
        return self._content(run, line, text)

    def _content(self, run: Run, line: Line, text: str) -> str:
        number = line.number
        stripped = text.strip()
        if stripped == "options:":
            if run.params:  # a second launch without a footer between
                run = self._start(line)
                run.last_line = number
            self._flush_pending(run, as_errors=False)
            self.mode = "options"
            return "structure"
        section = _SECTION.match(text)
        if section:
            self.mode = ""
            if section.group(1) == "reduction":
                self.redop = section.group(2)
            else:
                self.dtype = DTYPE_NAMES.get(section.group(2), section.group(2))
            return "structure"
        if _BANNER.match(text) or _STRUCTURE.match(stripped):
            self.passed += stripped == "PASSED"
            return "structure"
        bench = _BENCHMARKING.match(text)
        if bench:
            self.names = [COLLECTIVE_NAMES.get(n, n) for n in bench.group(1).split()]
            for name in self.names:
                run.add_collective(name)
            return "structure"
        procs = _PROCESSES.match(text)
        if procs:
            run.nranks = int(procs.group(1))
            return "structure"
        if stripped.startswith("#bytes"):
            self.columns = stripped.split()
            return "structure"
        if stripped == "# All done":
            self.footer = True
            return "structure"
        if self.columns and NUMBER.match(stripped.split()[0]):
            return self._row(run, line, stripped.split())
        return self._message(run, number, text)

    def _message(self, run: Run, number: int, text: str) -> str:
        stripped = text.strip()
        arg = _ARG.match(text)
        if arg:
            # Every rank prints the list: keep one copy.
            index = int(arg.group(1))
            if index == 0:
                run.command = arg.group(2)
                self.argv = [arg.group(2)]
            elif run.command is not None and index == self.last_arg + 1:
                run.command += " " + arg.group(2)
                self.argv.append(arg.group(2))
            self.last_arg = index
            return "structure"
        if _PENDING.match(stripped):
            self.pending.append((number, stripped))
            return "structure"  # recounted as "error" if an option error follows
        if stripped.startswith("WARN: "):
            self._flush_pending(run, as_errors=False)
            run.warn(number, f"benchmark: {stripped}")
            return "structure"
        if _OPTION_ERROR.search(stripped) or _FAILURE.search(stripped):
            self._flush_pending(run, as_errors=True)
            run.error(number, stripped)
            self.failure = True
            return "error"
        if _BINARY.search(stripped) and is_command(stripped):
            # The shell line that ran the benchmark, pasted with its output: the
            # command, unless the benchmark's own `arg N:` list gives it.
            if run.command is None:
                run.command = stripped
            return "noise"
        run.warn(number, f"unrecognised line: {stripped[:80]!r}")
        return "warned"

    def _mpi(self, run: Run, number: int, mpi: _impi.MpiLine) -> str:
        if mpi.message is not None:
            run.error(number, mpi.message)
        self.failure = self.failure or mpi.failure
        for rank, host in mpi.rank_hosts:
            run.hosts.extend([None] * (rank + 1 - len(run.hosts)))
            run.hosts[rank] = host
        if mpi.rank_hosts:
            run.nnodes = len({h for h in run.hosts if h is not None})
        return mpi.kind

    def _option(self, run: Run, key: str, value: str) -> None:
        run.params[key] = value
        if key in ("processes", "ranks"):
            run.nranks = int(value) if is_count(value, 6) else run.nranks
        elif key in ("collectives", "colls"):
            for name in value.split():
                run.add_collective(COLLECTIVE_NAMES.get(name, name))

    def _flush_pending(self, run: Run, *, as_errors: bool) -> None:
        for number, text in self.pending:
            if as_errors:
                run.error(number, text)
                self.kinds["structure"] -= 1
                self.kinds["error"] += 1
            else:
                run.warn(number, f"benchmark: {text}")
        self.pending.clear()

    def _row(self, run: Run, line: Line, tokens: list[str]) -> str:
        number = line.number
        values = table_row_values(run, line, tokens, self.columns, _COLUMNS)
        if values is None:
            return "warned"
        if "reported_bytes" not in values or "time_us" not in values:
            run.warn(number, "table without #bytes or time column: row not read")
            return "warned"
        run.add_row(self._measurement(run, number, values))
        return "measurement"

    def _measurement(
        self, run: Run, number: int, values: dict[str, Any]
    ) -> dict[str, Any]:
        grouped = len(self.names) > 1
        collective = None if grouped or not self.names else self.names[0]
        nranks = run.nranks or 1
        reported = values["reported_bytes"]
        if "count" not in values and self.dtype in DTYPE_BYTES:
            values["count"] = reported // DTYPE_BYTES[self.dtype]
        reduces = any(name in REDUCING for name in self.names)
        if collective == "reduce_scatter" and values.get("count", nranks) < nranks:
            run.warn(number, "reduce_scatter count below the rank count: no-op row")
        return {
            **values,
            "line": number,
            "collective": collective,
            "placement": "in-place"
            if run.params.get("inplace") == "1"
            else "out-of-place",
            "size_bytes": oneccl_size_bytes(collective, reported, nranks),
            "dtype": self.dtype,
            "redop": (self.redop or None) if reduces else None,
            "root": 0 if collective in ROOTED else None,
            "grouped": grouped,
        }

    def finish(self) -> None:
        if self.run is not None:
            self._finish_run()

    def _finish_run(self) -> None:
        run = self.run
        assert run is not None
        self._flush_pending(run, as_errors=False)
        if self.argv and not run.params:
            _argv_collectives(run, self.argv)
        if self.failure:
            run.status = "failed"
        elif self.footer or (
            # 2021.1-2021.2 (avg[usec] tables, or none with `-e unordered`) print
            # no footer.
            ("avg[usec]" in self.columns or run.params.get("loop") == "unordered")
            and not self.cut
            and _all_printed(run, self.passed)
        ):
            run.status = "complete"
        else:
            run.status = "truncated"
        self.run = None


def _is_noise(text: str) -> bool:
    return bool(_CCL_LOG.search(text)) or _impi.classify(text) is not None


def _all_printed(run: Run, passed: int) -> bool:
    """Whether a footer-less (2021.1-2021.2) run printed all its options ask.

    One section per dtype (each once, in a fixed order) and reduction (as listed);
    per section one row per element count or, with ``-e unordered``, one
    ``PASSED``. 2021.2 lists the counts (``elem_counts: [1 2 4]``); 2021.1 doubles
    from ``min_elem_count`` up to ``max_elem_count`` (both printed after its
    adjustments), without adding the maximum.
    """
    params = run.params
    dtypes = set((params.get("datatypes") or params.get("dtypes") or "").split())
    reductions = [r for r in params.get("reductions", "").split() if r in _REDUCTIONS]
    sections = len(dtypes) * len(reductions)
    if params.get("loop") == "unordered":
        return bool(sections) and passed == sections and not run.row_count
    if "elem_counts" in params:
        counts = len(params["elem_counts"].strip("[] ").split())
    else:
        low, high = params.get("min_elem_count", ""), params.get("max_elem_count", "")
        if not (is_count(low, 18) and is_count(high, 18)) or int(low) < 1:
            return False
        counts, count = 0, int(low)
        while count <= int(high):
            counts, count = counts + 1, count * 2
    return bool(sections and counts) and run.row_count == sections * counts


# getopt_long of every version: the long option for -l and its accepted
# abbreviations (no other long option starts with "co").
_COLL_LONG = ("--co", "--col", "--coll")
# Short options that take no value: -h, and -x up to 2021.9 (a value from 2021.10:
# read as one when the next argument does not look like an option).
_NO_VALUE = frozenset("h")


def _argv_collectives(run: Run, argv: list[str]) -> None:
    """The collectives a command asked for with ``-l``/``--coll`` (the last wins).

    For runs that stopped at an option error: the benchmark echoes its argv
    (``arg N:`` lines) but prints no options block. ``all`` is not expanded, as its
    list depends on the version; a warning says so.
    """
    value: str | None = None
    index = 1
    while index < len(argv):
        arg = argv[index]
        index += 1
        if arg == "--":
            break
        if arg.startswith("--"):
            option, eq, inline = arg.partition("=")
            if option in _COLL_LONG:
                if eq:
                    value = inline
                elif index < len(argv):
                    value, index = argv[index], index + 1
            elif not eq and index < len(argv) and option != "--help":
                index += not argv[index].startswith("-")  # its value
            continue
        if not arg.startswith("-") or arg == "-":
            continue  # getopt moves non-options to the end
        for position, letter in enumerate(arg[1:], start=2):
            if letter in _NO_VALUE:
                continue
            rest = arg[position:]
            if letter == "x" and not rest:
                if index < len(argv) and not argv[index].startswith("-"):
                    index += 1
                break
            if not rest and index < len(argv):
                rest, index = argv[index], index + 1
            if letter == "l":
                value = rest
            break
    if value is None:
        return
    if value == "all":
        run.warn(
            run.first_line,
            "command asks for `-l all`: collectives left empty (the list depends on "
            "the benchmark version)",
        )
        return
    for name in value.split(","):
        if name:
            run.add_collective(COLLECTIVE_NAMES.get(name, name))


# The parser contract (ncclparse.parsers.Parser): runs reach emit at the end.
parse = parse_at_end(_read)
