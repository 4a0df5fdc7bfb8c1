"""Lines that are not the benchmark's own output but are known to appear in its logs.

NCCL/RCCL debug output, MPI and Slurm launchers, containers, SSH, shell prompts and
traces, and the Markdown people wrap pasted logs in. Recognising them keeps the line
accounting honest: they are counted as noise, not silently dropped.
"""

from __future__ import annotations

import re

_NOISE = re.compile(
    r"""
      \b(?:NCCL|RCCL)\ (?:INFO|WARN|TRACE|ABORT)\b   # NCCL_DEBUG output, any rank
    | \b(?:NCCL|RCCL)\ version\ \d                   # NCCL's own version banner
    | ^\S+:\d+:\d+\ \[\d+\]\                         # host:pid:tid [dev] NCCL
    | ^Warning:\ Permanently\ added                  # ssh
    | ^Node\ \S+:\ Pulling\ container                # enroot / pyxis
    | ^(?:srun|slurmstepd|sbatch|salloc|pyxis|enroot|mpirun|prterun|prte|orterun):\
    | ^\[[\w.\-]+:\d+\]\                             # Open MPI "[host:pid] ..."
    | \bUCX\ +(?:WARN|ERROR|INFO)\b
    | ^libfabric:\d+:\d+:                            # libfabric's FI_LOG_LEVEL
    | ^PMIX\ ERROR | ^hwloc | ^Authorization\ required
    | ^-{5,}\s*$ | ^={5,}\s*$ | ^\*{5,}             # launcher banner boxes, rules
    | ^```                                           # Markdown code fences
    | ^\#{2,}\                                       # Markdown headings
    | ^>                                             # Markdown quotes
    | ^\+{1,3}\ \S                                   # set -x traces
    | ^(?:real|user|sys)\s+\d+m[\d.]+s$              # `time` output
    """,
    re.VERBOSE | re.ASCII,
)

_PROMPT = r"(?:\(\S+\)\s+)?(?:[\w.\-]+@[\w.\-]+:\S*\s?[$#]\s*|[$#]\s+|\S*>\s+|>\s*)"
_LAUNCH = (
    r"(?:mpirun|mpiexec|srun|sbatch|salloc|torchrun|docker|podman|enroot|singularity|"
    r"apptainer|sudo|numactl|env|bash|sh|python3?|\./\S+|/\S+|\S+_perf\b)"
)
_COMMAND = re.compile(rf"^(?:{_PROMPT})?{_LAUNCH}|_perf\b", re.ASCII)


def is_noise(text: str) -> bool:
    """True for a known foreign line (``text`` stripped, launcher prefix removed)."""
    return _NOISE.search(text) is not None


def is_command(text: str) -> bool:
    """True for a shell command line (with or without a prompt) or a benchmark call."""
    return _COMMAND.search(text) is not None
