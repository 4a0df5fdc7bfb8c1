"""Open MPI's fatal-error output, for every tool run under its ``mpirun``.

When an MPI call fails under the default error handler (``MPI_ERRORS_ARE_FATAL``),
Open MPI prints a block of ``***`` lines on each failing rank and aborts the job;
``mpirun`` then says how many processes it aborted and which rank exited improperly:

    [node01:2228] *** An error occurred in MPI_Win_free
    [node01:2228] *** on win
    [node01:2228] *** MPI_ERR_RMA_SYNC: error while executing rma sync
    [node01:2228] *** MPI_ERRORS_ARE_FATAL (processes in this win will now abort,
    [node01:2228] ***    and potentially your MPI job)
    1 additional process aborted (not shown)
    mpirun has exited due to process rank 1 with PID 0 on

Each such line is an error of the run, and the run failed: the benchmark did not
end by itself (``docs/schema.md``, runs ``status``). ``MPI_ABORT was invoked`` is
the same for a program that called ``MPI_Abort``.
"""

from __future__ import annotations

import re

_HOST = r"(?:\[[\w.\-]+:\d+\] )?"  # Open MPI's `[host:pid] ` before its own lines
_FATAL = re.compile(
    rf"^{_HOST}\*\*\* (?:An error occurred in |reported by process |"
    r"on (?:communicator|win|file|session)\b|MPI_ERR|MPI_ERRORS_ARE_FATAL\b|"
    r"\s*and potentially your MPI job)"
    rf"|^{_HOST}\d+ (?:additional|more) process(?:es)? aborted \(not shown\)"
    r"|^(?:mpirun|mpiexec|orterun|prterun) has exited due to process rank \d+ "
    r"with PID \d+ on\b"
    r"|^MPI_ABORT was invoked on rank \d+ ",
    re.ASCII,
)


def fatal_error(text: str) -> str | None:
    """The text to keep in the run's errors when ``text`` (stripped) is a line of
    Open MPI's fatal-error output, else None."""
    # Substring guards: each alternative of _FATAL holds one of them.
    if not (
        "***" in text
        or "aborted (not shown)" in text
        or "has exited due to" in text
        or text.startswith("MPI_ABORT")
    ):
        return None
    return text if _FATAL.match(text) else None
