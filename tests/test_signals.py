"""One rule for runs killed by a signal, in every tool (ncclparse/parsers/_signals.py).

A signal from outside (SIGHUP, SIGINT, SIGKILL, SIGTERM) leaves the run `truncated`;
one the program raised itself (SIGSEGV, SIGABRT, ...) makes it `failed`; the line
stays in `errors` with the signal's number. The lines are the launchers', Slurm's
and the shells' own wording (strsignal texts); the oneCCL cases are real runs, see
tests/test_parsers_oneccl.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ncclparse
from ncclparse.parsers import _ompi, _signals

ROOT = Path(__file__).parent.parent
FIXTURES_IMB = ROOT / "tests" / "fixtures" / "imb"


@pytest.mark.parametrize(
    ("line", "number", "failure", "message"),
    [
        ("=   KILLED BY SIGNAL: 9 (Killed)", 9, False, None),
        ("=   KILLED BY SIGNAL: 6 (Aborted)", 6, True, None),
        (
            "mpirun noticed that process rank 1 with PID 4711 on node n1 exited on "
            "signal 11 (Segmentation fault).",
            11,
            True,
            None,
        ),
        (
            "prterun noticed that process rank 0 with PID 9 on node n1 exited on "
            "signal 15 (Terminated).",
            15,
            False,
            None,
        ),
        ("[n1:04711] Signal: Bus error (7)", 7, True, None),
        (
            "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Interrupt (signal 2)",
            2,
            False,
            None,
        ),
        (
            "srun: error: n1: tasks 0-7: Killed",
            9,
            False,
            "srun: error: n1: tasks 0-7: Killed (signal 9: SIGKILL)",
        ),
        (
            "srun: error: n1: task 3: Aborted (core dumped)",
            6,
            True,
            "srun: error: n1: task 3: Aborted (core dumped) (signal 6: SIGABRT)",
        ),
        ("Terminated", 15, False, "Terminated (signal 15: SIGTERM)"),
        # Missed before the cheap test in front of the patterns was itself tested.
        (
            "CPU time limit exceeded",
            24,
            True,
            "CPU time limit exceeded (signal 24: SIGXCPU)",
        ),
        (
            "Segmentation fault (core dumped)",
            11,
            True,
            "Segmentation fault (core dumped) (signal 11: SIGSEGV)",
        ),
        (
            "./job.sh: line 3:  4711 Killed                  mpirun -np 2 ./x",
            9,
            False,
            "./job.sh: line 3:  4711 Killed                  mpirun -np 2 ./x "
            "(signal 9: SIGKILL)",
        ),
        (
            "slurmstepd: error: *** STEP 12.0 ON n1 CANCELLED AT 2024-05-01T10:00:00 "
            "DUE TO TIME LIMIT ***",
            15,
            False,
            "slurmstepd: error: *** STEP 12.0 ON n1 CANCELLED AT 2024-05-01T10:00:00 "
            "DUE TO TIME LIMIT *** (signal 15: SIGTERM)",
        ),
    ],
)
def test_signal_lines(
    line: str, number: int, failure: bool, message: str | None
) -> None:
    killed = _signals.classify(line)
    assert killed is not None
    assert (killed.number, killed.failure) == (number, failure)
    assert killed.message == (message or line)


@pytest.mark.parametrize(
    "line",
    [
        "Killed 3 processes",  # prose, not a shell's report
        "# Avg bus bandwidth    : 70.742",
        "srun: error: Unable to create step for job 12: Invalid generic resource",
        "Test NCCL failure common.cu:1 'unhandled system error'",
        "WARNING: signal handler installed",
        "",
    ],
)
def test_other_lines_are_not_signals(line: str) -> None:
    assert _signals.classify(line) is None


def _nccl_without_footer() -> str:
    lines = (ROOT / "examples" / "all_reduce_16rank_2node_h100.log").read_text()
    return lines[: lines.index("# Out of bounds values")]


@pytest.mark.parametrize(
    ("tail", "status"),
    [
        ("srun: error: gpu-node-2: tasks 8-15: Killed\n", "truncated"),
        ("Terminated\n", "truncated"),
        ("Segmentation fault (core dumped)\n", "failed"),
        (
            "mpirun noticed that process rank 3 with PID 4711 on node a exited on "
            "signal 6 (Aborted).\n",
            "failed",
        ),
    ],
)
def test_nccl_tests_killed_run(tail: str, status: str) -> None:
    head = _nccl_without_footer()
    rows = ncclparse.parse(head, name="x").runs.to_pylist()[0]["rows"]
    result = ncclparse.parse(head + tail, name="x")
    run = result.runs.to_pylist()[0]
    assert (run["status"], run["rows"]) == (status, rows)
    number = head.count("\n") + 1
    assert run["errors"][-1].startswith(f"line {number}: {tail.strip()}")
    assert "signal" in run["errors"][-1]
    assert result.accounting["x"]["error"] == 1


@pytest.mark.parametrize(
    ("tail", "status"),
    [
        (
            "mpirun noticed that process rank 1 with PID 7 on node vm exited on "
            "signal 9 (Killed).\n",
            "truncated",
        ),
        ("srun: error: vm: task 1: Segmentation fault (core dumped)\n", "failed"),
    ],
)
def test_imb_killed_run(tail: str, status: str) -> None:
    text = (ROOT / "tests" / "fixtures" / "imb" / "imb_allreduce_np2.log").read_text()
    head = text[: text.index("# All processes entering MPI_Finalize")]
    run = ncclparse.parse(head + tail, name="x").runs.to_pylist()[0]
    assert run["status"] == status
    assert "signal" in run["errors"][-1]


def test_signal_after_the_footer_keeps_a_complete_run_complete() -> None:
    text = (ROOT / "tests" / "fixtures" / "imb" / "imb_allreduce_np2.log").read_text()
    run = ncclparse.parse(text + "Terminated\n", name="x").runs.to_pylist()[0]
    assert run["status"] == "complete"
    assert run["errors"][-1].endswith("Terminated (signal 15: SIGTERM)")


_SIGNAL_PIECES = st.sampled_from(
    (
        "KILLED BY SIGNAL: 9",
        "THE EXIT STRING: Killed (signal 9)",
        "mpirun noticed that process rank 1 with PID 7 on node a exited on signal 9",
        "[host:1234] Signal: Segmentation fault (11)",
        "srun: error: n1: task 0: ",
        "slurmstepd: error: *** STEP 1.0 ON n1 CANCELLED AT 2024",
        "./run.sh: line 3: 4711 ",
        *_signals._DESCRIPTIONS,
        " (core dumped)",
        "  mpirun -n 2",
        " ",
        "x",
        "é",
        "\t",
        "[",
    )
)


@given(st.lists(st.one_of(_SIGNAL_PIECES, st.text(max_size=4)), max_size=6))
def test_the_cheap_test_lets_every_signal_line_through(pieces: list[str]) -> None:
    """_hinted, in front of the patterns, is true for every line one matches."""
    text = "".join(pieces).strip()
    if any(p.search(text) for p in _signals._PATTERNS) or _signals._CANCELLED.match(
        text
    ):
        assert _signals._hinted(text)


# Open MPI's fatal-error block as nccl-tests issue #180 shows it (all_reduce_perf
# under `mpirun -np 4`, an MPI_Allgather that failed), then mpirun's own lines.
OMPI_FATAL = (
    "[10-192-80-132:07356] *** An error occurred in MPI_Allgather\n"
    "[10-192-80-132:07356] *** reported by process [1740308481,1]\n"
    "[10-192-80-132:07356] *** on communicator MPI_COMM_WORLD\n"
    "[10-192-80-132:07356] *** MPI_ERR_OTHER: known error not in list\n"
    "[10-192-80-132:07356] *** MPI_ERRORS_ARE_FATAL (processes in this "
    "communicator will now abort,\n"
    "[10-192-80-132:07356] ***    and potentially your MPI job)\n"
    "3 more processes aborted (not shown)\n"
    "mpirun has exited due to process rank 1 with PID 0 on\n"
)


@pytest.mark.parametrize("tool", ["nccl-tests", "imb"])
def test_open_mpi_fatal_error_fails_the_run(tool: str) -> None:
    if tool == "imb":
        text = (FIXTURES_IMB / "imb_allreduce_np2.log").read_text()
        head = text[: text.index("# All processes entering MPI_Finalize")]
    else:
        head = _nccl_without_footer()
    result = ncclparse.parse(head + OMPI_FATAL, name="x")
    (run,) = result.runs.to_pylist()
    assert run["status"] == "failed"
    first = head.count("\n") + 1
    assert run["errors"] == [
        f"line {first + i}: {text}" for i, text in enumerate(OMPI_FATAL.splitlines())
    ]
    assert result.accounting["x"]["error"] == 8


@pytest.mark.parametrize(
    "line",
    [
        "[gpu01:193313] *** Process received signal ***",
        "[gpu01:193313] *** End of error message ***",
        "slurmstepd: error: *** STEP 1.0 ON n1 CANCELLED AT 2024-01-01T00:00:00 ***",
        "# *** only a comment",
        "mpirun has exited",
    ],
)
def test_other_lines_are_not_open_mpi_fatal_errors(line: str) -> None:
    assert _ompi.fatal_error(line) is None
