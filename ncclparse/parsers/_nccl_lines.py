"""What nccl-tests lines look like: the patterns and small tests the parser uses.

Each pattern is anchored or guarded so that its cost stays linear in the line length
(the robustness tests feed hostile lines); docs/nccl-tests-format.md describes the
lines themselves.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ._lines import Line
from ._nccl_layout import is_names_line, layout_from_row
from ._nccl_recover import undecorate_line

# A negative size or count starts a row too: it is read, and named as impossible.
ROW_START = re.compile(r"^\s*-?\d+\s+-?\d+\s+[A-Za-z]", re.ASCII)
# Tokens must be separated by whitespace: `(?:[\d.]+\s*)+` backtracks exponentially.
NUMBERS_ONLY = re.compile(
    r"^\s*(?:(?:-?[\d.]+(?:e[+-]?\d+)?\*?|N/A)(?:\s+|$))+$", re.ASCII
)
PARAMS = re.compile(r"^nThreads?:?\s+\d", re.ASCII)
# The lookbehind keeps a long run of letters linear (a match starts a word anyway).
PARAM_PAIR = re.compile(
    r"(?<![A-Za-z_])([A-Za-z_]+(?: iters)?|warmupIters):?\s+(-?\d\S*)", re.ASCII
)
RANK = re.compile(
    r"^Rank\s+(?P<rank>\d{1,6})\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(?P<host>\S+)\s+"
    r"device\s+(?P<dev>\d{1,6})\s+\[[^\]]*\]\s?(?P<name>.*)$",
    re.ASCII,
)
# A Rank line cut by the end of input; the host only when it is complete (bounded:
# ranks fill lists).
CUT_RANK = re.compile(
    r"^Rank\s+(?P<rank>\d{1,6})\s+\S(?:.*?\bon\s+(?P<host>\S+)\s+device\b)?", re.ASCII
)
CUT_OWN = re.compile(
    r"^[\s\d#]", re.ASCII
)  # how cut rows and (`#`-stripped) tool lines start
# mscclpp-test prints nccl-tests' preamble and Rank lines, then its own table.
LOOKALIKE = re.compile(r"MSCCL\+\+|^#?\s*minBytes \d", re.ASCII)
# rccl-tests >= 2.17.9 prints its own `# rccl-tests version 2.17.9-BRANCH:HASH
# rccl-headers=N rccl-library=N` (real: alibaba-readme, rocmsystems-3415).
VERSION = re.compile(
    r"^(?P<tool>[nr])ccl-tests version (?P<v>\S+)"
    r"(?:.*[nr]ccl-library=(?P<lib>\d{1,9})\b)?",
    re.ASCII,
)
RCCL_VERSION = re.compile(r"^rccl-tests: Version (?P<v>\S+)", re.ASCII)
# The block RCCL prints with NCCL_DEBUG=VERSION: `RCCL version : 2.28.3-gfx1151-rccl:…`,
# `HIP version  : …`, `ROCm version : …`, `Hostname     : …`, `Librccl path : …`.
RCCL_BLOCK = re.compile(
    r"^(?:(?P<what>RCCL|HIP|ROCm) version|Hostname|Librccl path)\s*:\s*(?P<v>\S*)",
    re.ASCII,
)
STARTING = re.compile(
    r"^Collective test (?P<what>starting|concluded): (?P<name>\S+)", re.ASCII
)
COMPILED = re.compile(r"^NCCL Tests compiled with NCCL (?P<v>\S+)", re.ASCII)
NCCL_VERSION = re.compile(r"\b(?P<lib>NCCL|RCCL) version (?P<v>\d\S*)", re.ASCII)
OOB = re.compile(
    r"^Out of bounds values\s*:\s*(?P<n>\d{1,18})\s*(?P<ok>OK|FAILED)?", re.ASCII
)
# The value as C prints a number (or a word): non-ASCII digits or `1_0` are no
# average (float() would take them), and the line is not the footer.
AVG = re.compile(
    r"^Avg bus bandwidth\s*:\s*(?P<v>[-+./0-9A-Za-z]+)(?!\S)\s*(?P<ok>OK|FAILED)?",
    re.ASCII,
)
FAILURE = re.compile(
    r"(?:Test (?:NCCL|CUDA|HIP) failure|Test failure|Test timeout|"
    r"^(?:NCCL|Cuda|CUDA|HIP) failure \S+:\d+)",
    re.ASCII,
)
# Option errors nccl-tests prints on stderr before giving up.
TOOL_ERROR = re.compile(r"^(?:Invalid number of GPUs|invalid size specified)", re.ASCII)
BINARY = re.compile(r"\b(?P<name>[a-z_]+?)_perf\w*", re.ASCII)
# Where another process's NCCL line was glued onto a data row.
GLUED_NOISE = re.compile(
    r"(?:\[\d+\]\s*)?(?<![\w.\-])[\w.\-]+:\d+:\d+ \[\d+\] (?:NCCL|RCCL) "
    r"|NCCL (?:INFO|WARN) ",
    re.ASCII,
)
STRUCTURE_PREFIXES = (
    "Using devices",
    "Blocking Enabled",
    "Per-Iteration Report",
    "Parallel Init Enabled",
    "Reducing maxBytes",
    "Errors with asterisks",
    "Testing ",
    "Writing JSON output",
    "skipping json output",
    "GPU memory usage",
    "error:",
    "NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY",  # alltoallv's optional per-rank summary
    "rank=",
)
OPENERS = {"json": 0, "version": 1, "starting": 2, "params": 3}


def maybe_noise(stripped: str) -> bool:
    # A `#` line is the tool's own unless it is a Markdown heading or quotes NCCL/UCX.
    return (
        not stripped.startswith("#")
        or stripped.startswith("##")
        or "CCL " in stripped
        or "UCX" in stripped
    )


def is_rank_zero(tag: str) -> bool:
    # Open MPI tags are "jobid,rank"; srun and MPICH tags are the rank.
    return tag.rsplit(",", 1)[-1] == "0"


BINARY_NAMES = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "alltoall": "alltoall",
    "alltoallv": "alltoallv",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "sendrecv": "sendrecv",
    "gather": "gather",
    "scatter": "scatter",
    "hypercube": "hypercube",
}


def benchmark_binary(text: str) -> str | None:
    """The collective of the first nccl-tests binary ``text`` names
    (``./build/all_reduce_perf_mpi``: all_reduce), or None. Other ``_perf`` words name
    no benchmark: libfabric's debug log registers an ``ofi_hook_perf`` provider."""
    for match in BINARY.finditer(text):
        name = BINARY_NAMES.get(match.group("name"))
        if name is not None:
            return name
    return None


def nccl_code(code: int) -> str:
    """Decode NCCL_VERSION_CODE: major*10000+minor*100+patch since 2.9, else *1000."""
    if code >= 10000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def sniff(head: Sequence[Line]) -> bool:
    """True when the head holds nccl-tests structure or rows of its table layout.

    Rank lines alone do not decide: look-alikes (mscclpp-test) print them too.
    """
    rows = 0
    ranks = False
    for line in head:
        text, _ = undecorate_line(line.text)
        body = text.strip().lstrip("#").strip()
        if LOOKALIKE.search(text):
            return False
        if PARAMS.match(body) or VERSION.match(body) or STARTING.match(body):
            return True
        if is_names_line(body.split()):
            return True
        ranks = ranks or RANK.match(body) is not None
        if ROW_START.match(text):
            if GLUED_NOISE.search(text):  # a row cut by NCCL's own output
                return True
            if layout_from_row(text.split()) is not None:
                rows += 1
                if rows >= 2 or not line.complete:
                    return True
    return rows > 0 or ranks
