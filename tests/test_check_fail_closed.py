"""``ncclparse check`` fails closed: no data, skipped inputs, FIFOs, a series gone
from tonight's logs, a sweep too short to judge, a printed bandwidth that size and
time contradict, and a check that cannot complete (its outputs are replaced by
failing ones, never left saying yesterday's "passed"; the exit status says whether
the fabric, the configuration or the machine failed).

Derived logs start from the real 2-node H100 log (tests/_derive.py); each test says
what it changes.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import ncclparse
from ncclparse.cli.app import cli
from ncclparse.efficiency import HardwareOptions, analyze
from ncclparse.formatting import markdown_escape
from ncclparse.health.check import check
from ncclparse.health.rules import DEFAULT_RULES, rules_from_mapping
from ncclparse.store.history import ingest, scan_history, source_keys
from tests import _derive as derive
from tests.conftest import FIXTURES

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "all_reduce_16rank_2node_h100.log"
A3_MEGA = ["--profile", "h100", "--inter-bw", "200GB/s"]
HOSTS = "hosts ztan-mig-235z, ztan-mig-gq73"
GIB = 1073741824
PASSED = "ncclparse_check_passed 1\n"
# A subprocess that outlives this has hung: the test fails instead of the suite.
HANG = 120


def _outputs(tmp_path: Path) -> dict[str, Path]:
    return {k: tmp_path / f"out.{k}" for k in ("prom", "json", "xml", "md", "html")}


def _args(out: dict[str, Path]) -> list[str]:
    return [
        "--prometheus", str(out["prom"]), "--json", str(out["json"]),
        "--junit", str(out["xml"]), "--markdown", str(out["md"]),
        "--report", str(out["html"]),
    ]  # fmt: skip


def _cases(path: Path) -> list[tuple[str, str, str]]:
    document = json.loads(path.read_text())
    return [(c["rule"], c["status"], c["message"]) for c in document["cases"]]


# 1. No data is never a pass ---------------------------------------------------------


def test_an_empty_directory_fails(runner: CliRunner, tmp_path: Path) -> None:
    empty = tmp_path / "logs"
    empty.mkdir()
    out = _outputs(tmp_path)
    result = runner.invoke(cli, ["check", str(empty), *_args(out)])
    assert result.exit_code == 1, result.output
    assert _cases(out["json"]) == [
        ("input", "fail",
         f"{empty}: directory holds no log file (no data is never a pass)"),
        ("runs", "fail", f"no benchmark run in 1 input(s) ({empty}): no data is never "
         "a pass"),
        ("slow-host", "skip", "0 run(s): too few runs per shape over different hosts"),
    ]  # fmt: skip
    assert "ncclparse_check_passed 0\n" in out["prom"].read_text()
    assert result.stderr == f"Error: {empty}: directory holds no log file\n"


def test_a_directory_of_hidden_entries_fails_counting_them(
    runner: CliRunner, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    (logs / ".git").mkdir(parents=True)
    shutil.copy(EXAMPLE, logs / ".git" / "a.log")
    shutil.copy(EXAMPLE, logs / ".b.log")
    out = _outputs(tmp_path)
    result = runner.invoke(cli, ["check", str(logs), *_args(out)])
    assert result.exit_code == 1
    assert _cases(out["json"])[0] == (
        "input",
        "fail",
        f"{logs}: directory holds no log file (2 hidden entries skipped) (no data is "
        "never a pass)",
    )


def test_no_run_in_any_input_fails_the_check() -> None:
    result = check(ncclparse.parse_many([]), DEFAULT_RULES)
    assert [(c.rule, c.name, c.status, c.message) for c in result.cases] == [
        ("runs", "all inputs", "fail", "no benchmark run (no input): no data is never "
         "a pass"),
        ("slow-host", "hosts", "skip",
         "0 run(s): too few runs per shape over different hosts"),
    ]  # fmt: skip
    assert not result.passed


# 2. Special files ---------------------------------------------------------------


def test_special_files_in_a_directory_are_skipped_and_named(
    runner: CliRunner, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(EXAMPLE, logs / "a.log")
    os.mkfifo(logs / "b.fifo")
    out = _outputs(tmp_path)
    # In-process: the walk must not open the FIFO (that would hang this test).
    result = runner.invoke(cli, ["check", str(logs), *A3_MEGA, *_args(out), "-q"])
    note = f"{logs}: skipped 1 entry that is not a regular file: {logs}/b.fifo (FIFO)"
    assert result.stderr == f"Note: {note}\n"
    assert _cases(out["json"])[0] == ("input", "skip", note)
    assert result.exit_code == 0, result.output


def _ncclparse(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ncclparse", *args],
        capture_output=True,
        text=True,
        timeout=HANG,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
        check=False,
    )


def test_a_named_fifo_without_a_writer_is_an_error_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "nightly.log"
    os.mkfifo(fifo)
    out = tmp_path / "m.csv"
    done = _ncclparse(
        "parse", str(fifo), "-o", str(out), env={"NCCLPARSE_FIFO_WAIT": "0.2"}
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"Error: {fifo}: FIFO (named pipe) without a writer after 0.2 s; start the "
        "writer first, or set NCCLPARSE_FIFO_WAIT to wait longer\n"
    )


def test_a_named_fifo_is_read_once_its_writer_comes(tmp_path: Path) -> None:
    fifo = tmp_path / "nightly.log"
    os.mkfifo(fifo)
    out = tmp_path / "m.csv"
    reader = subprocess.Popen(
        [sys.executable, "-m", "ncclparse", "parse", str(fifo), "-o", str(out)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NCCLPARSE_FIFO_WAIT": str(HANG)},
    )

    def write() -> None:
        # Opening for writing blocks until the reader has opened its end: no sleep.
        with fifo.open("wb") as handle:
            handle.write(EXAMPLE.read_bytes())

    writer = threading.Thread(target=write, daemon=True)
    try:
        writer.start()
        writer.join(HANG)
        assert not writer.is_alive(), "the reader never opened the FIFO"
        _, stderr = reader.communicate(timeout=HANG)
    finally:
        reader.kill()
    assert reader.returncode == 0, stderr
    assert stderr == f"{fifo}: nccl-tests, 1 run (1 complete), 62 rows, 0 warnings\n"
    assert len(out.read_text().splitlines()) == 63  # header and 62 rows


def test_process_substitution_still_works(tmp_path: Path) -> None:
    out = tmp_path / "m.csv"
    done = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m ncclparse parse <(cat "{EXAMPLE}") '
         f'-o "{out}"'],
        capture_output=True, text=True, timeout=HANG, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(
        r"/dev/fd/\d+: nccl-tests, 1 run \(1 complete\), 62 rows, 0 warnings\n",
        done.stderr,
    )
    assert len(out.read_text().splitlines()) == 63


def test_a_socket_in_a_directory_is_named_too(tmp_path: Path) -> None:
    logs = tmp_path / "l"
    logs.mkdir()
    shutil.copy(EXAMPLE, logs / "a.log")
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(logs / "s"))
        done = _ncclparse("parse", str(logs), "-o", str(tmp_path / "m.csv"), "-q")
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        f"Note: {logs}: skipped 1 entry that is not a regular file: {logs}/s (socket)\n"
    )


# 3. A series of the history absent tonight ----------------------------------------

ALLTOALL = FIXTURES / "nccl" / "superbench-testdata_alltoall_a100_8gpu_c0_blank_redop_complete.log"  # fmt: skip


def _history(runner: CliRunner, tmp_path: Path, nights: int = 5) -> tuple[Path, str]:
    """Derived: ``nights`` nights of the real all_reduce log (each with its own
    jitter) and the real alltoall log (a comment line added, so each night is a new
    log), ingested on consecutive past dates. Returns the directory and last date."""
    history = tmp_path / "history"
    today = dt.datetime.now(dt.UTC).date()
    for night in range(nights):
        reduce = tmp_path / f"ar{night}.log"
        reduce.write_text(derive.scale(derive.healthy(), derive.jitter(night)))
        alltoall = tmp_path / f"a2a{night}.log"
        alltoall.write_text(ALLTOALL.read_text() + f"# night {night}\n")
        date = (today - dt.timedelta(days=nights - night)).isoformat()
        done = runner.invoke(
            cli,
            ["ingest", str(reduce), str(alltoall), "--history", str(history),
             "--date", date, "-q"],
        )  # fmt: skip
        assert done.exit_code == 0, done.output
    return history, (today - dt.timedelta(days=1)).isoformat()


def test_a_collective_gone_from_tonight_fails(
    runner: CliRunner, tmp_path: Path
) -> None:
    history, last = _history(runner, tmp_path)
    tonight = tmp_path / "tonight.log"
    tonight.write_text(derive.scale(derive.healthy(), derive.jitter(9)))
    out = _outputs(tmp_path)
    args = ["check", str(tonight), "--history", str(history), *A3_MEGA, *_args(out)]
    result = runner.invoke(cli, args)
    assert result.exit_code == 1, result.output
    expected = [
        (c["name"], c["status"], c["message"])
        for c in json.loads(out["json"].read_text())["cases"]
        if c["rule"] == "expect"
    ]
    gone = (
        f"in the history baseline (5 runs, last on {last}) but absent from every "
        "input; --no-expect-history if it was dropped on purpose"
    )
    present = f"present, as in the history baseline (5 runs, last on {last})"
    shape = "float32 sum {} 16 ranks on 2 nodes"
    assert expected == [
        ("nccl-tests all_reduce " + shape.format("in-place") + " [history]", "pass",
         "nccl-tests all_reduce " + shape.format("in-place") + f": {present}"),
        ("nccl-tests all_reduce " + shape.format("out-of-place") + " [history]",
         "pass",
         "nccl-tests all_reduce " + shape.format("out-of-place") + f": {present}"),
        ("nccl-tests alltoall float32 in-place 8 ranks on 1 node [history]", "fail",
         f"nccl-tests alltoall float32 in-place 8 ranks on 1 node: {gone}"),
        ("nccl-tests alltoall float32 out-of-place 8 ranks on 1 node [history]",
         "fail",
         f"nccl-tests alltoall float32 out-of-place 8 ranks on 1 node: {gone}"),
    ]  # fmt: skip
    failed = [c[0] for c in _cases(out["json"]) if c[1] == "fail"]
    assert failed == ["expect", "expect"]  # nothing else is wrong tonight

    # Dropped on purpose: the opt-out passes the same night.
    again = runner.invoke(cli, [*args, "--no-expect-history"])
    assert again.exit_code == 0, again.output
    assert [c for c in _cases(out["json"]) if c[0] == "expect"] == []


def _fresh(history: Path, logs: list[Path]) -> list[tuple[str, str, str]]:
    """The ``fresh input`` cases of a check of ``logs``: (name, status, message)."""
    parsed = ncclparse.parse_many(logs)
    result = check(parsed, DEFAULT_RULES, history=scan_history(history),
                   input_keys=source_keys(parsed))  # fmt: skip
    return [
        (c.name, c.status, c.message)
        for c in result.cases
        if c.name.startswith("fresh input")
    ]


def _stale(log: Path, date: str) -> tuple[str, str, str]:
    return (
        f"fresh input {log}", "fail",
        f"{log} is already in the history, ingested on {date}: this log was not "
        "refreshed tonight (did its benchmark run?)",
    )  # fmt: skip


def test_logs_that_were_not_refreshed_fail(runner: CliRunner, tmp_path: Path) -> None:
    # Last night's logs judged again (the benchmark did not run; the directory kept
    # them): every case passed, every night (found by a review).
    history, last = _history(runner, tmp_path)
    stale = [tmp_path / "a2a4.log", tmp_path / "ar4.log"]  # ingested on `last`
    assert _fresh(history, stale) == [_stale(log, last) for log in stale]
    # Ingested tonight, then checked (a re-run of the same night): tonight's own.
    new = tmp_path / "ar5.log"
    new.write_text(derive.scale(derive.healthy(), derive.jitter(5)))
    done = runner.invoke(cli, ["ingest", str(new), "--history", str(history), "-q"])
    assert done.exit_code == 0, done.output
    assert _fresh(history, [new]) == []


def test_a_stale_log_among_fresh_ones_fails_by_name(
    runner: CliRunner, tmp_path: Path
) -> None:
    """One log whose benchmark did not run tonight among fresh ones passed, not
    mentioned (the check looked at the directory, not at each log)."""
    history, last = _history(runner, tmp_path)
    new = tmp_path / "ar5.log"
    new.write_text(derive.scale(derive.healthy(), derive.jitter(5)))
    stale = tmp_path / "a2a4.log"  # ingested on `last`
    assert _fresh(history, [new, stale]) == [_stale(stale, last)]


def test_a_log_dated_in_the_future_is_stale(runner: CliRunner, tmp_path: Path) -> None:
    """A night ingested with a date far ahead never aged out and escaped the
    staleness check; tomorrow is still tonight (a time zone ahead of UTC)."""
    history, _ = _history(runner, tmp_path, nights=1)
    today = dt.datetime.now(dt.UTC).date()
    far, near = tmp_path / "far.log", tmp_path / "near.log"
    far.write_text(derive.scale(derive.healthy(), derive.jitter(7)))
    near.write_text(derive.scale(derive.healthy(), derive.jitter(8)))
    # A history written before ingest refused such dates (here: an ingest whose
    # clock was a day ahead).
    clock = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    for log, ahead in ((far, 2), (near, 1)):
        date = today + dt.timedelta(days=ahead)
        ingest(ncclparse.parse(log), history, date=date, now=clock)
    assert _fresh(history, [far, near]) == [
        _stale(far, (today + dt.timedelta(days=2)).isoformat())
    ]


def test_last_nights_log_filed_under_tonights_date_is_stale(
    runner: CliRunner, tmp_path: Path
) -> None:
    """A site ahead of UTC files each night under its local date, one day ahead
    (which ingest allows): last night's log was then filed under tonight's UTC
    date, and judged again tonight it passed as tonight's own (found by the
    re-run of issue 30). It was ingested on an earlier day: stale, named with the
    day it was ingested on. A log ingested tonight under tomorrow's date is not."""
    history, _ = _history(runner, tmp_path, nights=1)
    now = dt.datetime.now(dt.UTC)
    today = now.date()
    last, tonight = tmp_path / "last.log", tmp_path / "tonight.log"
    last.write_text(derive.scale(derive.healthy(), derive.jitter(7)))
    tonight.write_text(derive.scale(derive.healthy(), derive.jitter(8)))
    yesterday = dt.datetime.combine(today, dt.time(22), dt.UTC) - dt.timedelta(days=1)
    ingest(ncclparse.parse(last), history, date=today, now=yesterday)
    ingest(ncclparse.parse(tonight), history, date=today + dt.timedelta(days=1))
    assert _fresh(history, [last, tonight]) == [
        _stale(last, yesterday.date().isoformat())
    ]


# 4. A sweep that stops before bandwidth can be judged -----------------------------


def _up_to(size: int) -> str:
    """Derived: the healthy log without its rows above ``size`` bytes (footer kept),
    as nccl-tests -e <size> prints it."""
    return "".join(
        line
        for line in derive.healthy().splitlines(keepends=True)
        if not (derive._ROW.match(line) and int(line.split()[0]) > size)
    )


ACCEPT = (
    'measure larger sizes (e.g. nccl-tests -e 8G), or set [verdict] unjudged = "skip" '
    "in the rules file to accept a sweep that stops short (latency only)"
)


@pytest.mark.parametrize(
    ("size", "why"),
    [
        (2**20, "the largest size measured, 1 MiB, is still latency-bound, so no "
         "plateau was reached"),
        (2**26, "no plateau reached by the largest size measured, 64 MiB (busbw is "
         "still rising there)"),
    ],
)  # fmt: skip
def test_a_short_sweep_is_not_a_bandwidth_pass(size: int, why: str) -> None:
    parsed = ncclparse.parse(io.StringIO(_up_to(size)), name="short.log")
    hardware = HardwareOptions(profile="h100", inter_bw="200GB/s")
    [case] = [c for c in check(parsed, DEFAULT_RULES, hardware=hardware).cases
              if c.rule == "verdict"]  # fmt: skip
    assert case.status == "fail"
    assert case.message == (
        f"short.log run 0 ({HOSTS}): bandwidth not verified: all_reduce float32 sum "
        f"16 ranks on 2 nodes: {why}; {ACCEPT}"
    )

    # Accepted deliberately: skipped, saying what is not verified.
    rules = rules_from_mapping({"verdict": {"unjudged": "skip"}})
    result = check(parsed, rules, hardware=hardware)
    [case] = [c for c in result.cases if c.rule == "verdict"]
    assert case.status == "skip"
    assert case.message == (
        f"short.log run 0 ({HOSTS}): bandwidth not verified, accepted by [verdict] "
        f'unjudged = "skip": all_reduce float32 sum 16 ranks on 2 nodes: {why}'
    )
    assert result.passed


def test_a_latency_only_sweep_is_judged_by_the_latency_rule() -> None:
    # 8 B to 512 B: no size is bandwidth-bound, so the fit has no beta and no model
    # time. Its sizes had no regime and the latency rule (latency-bound sizes up to
    # 1 MiB) skipped the only thing the run measured.
    parsed = ncclparse.parse(io.StringIO(_up_to(512)), name="short.log")
    rows = analyze(parsed.measurements, None, parsed.runs).rows
    assert set(rows.column("regime").to_pylist()) == {"latency-bound"}
    latency = [(c.status, c.message) for c in check(parsed, DEFAULT_RULES).cases
               if c.rule == "latency"]  # fmt: skip
    shape = "all_reduce float32 sum {} 16 ranks on 2 nodes"
    assert latency == [
        ("pass", f"short.log run 0 ({HOSTS}) {shape.format('out-of-place')}: 7 "
         "sizes within 1 ms (worst 136 µs)"),
        ("pass", f"short.log run 0 ({HOSTS}) {shape.format('in-place')}: 7 sizes "
         "within 1 ms (worst 124 µs)"),
    ]  # fmt: skip


def test_a_short_sweep_fails_the_command(runner: CliRunner, tmp_path: Path) -> None:
    log = tmp_path / "short.log"
    log.write_text(_up_to(2**20))
    out = _outputs(tmp_path)
    result = runner.invoke(cli, ["check", str(log), *A3_MEGA, *_args(out)])
    assert result.exit_code == 1
    assert [c[:2] for c in _cases(out["json"]) if c[1] == "fail"] == [
        ("verdict", "fail")
    ]
    rules = tmp_path / "rules.toml"
    rules.write_text('[verdict]\nunjudged = "skip"\n')
    accepted = runner.invoke(
        cli, ["check", str(log), *A3_MEGA, "--rules", str(rules), *_args(out)]
    )
    assert accepted.exit_code == 0, accepted.output


def _sizes(keep: set[int]) -> str:
    """Derived: the healthy log with only the rows of the ``keep`` sizes."""
    return "".join(
        line
        for line in derive.healthy().splitlines(keepends=True)
        if not (derive._ROW.match(line) and int(line.split()[0]) not in keep)
    )


def _verdict_case(text: str) -> Any:
    parsed = ncclparse.parse(io.StringIO(text), name="short.log")
    hardware = HardwareOptions(profile="h100", inter_bw="200GB/s")
    [case] = [c for c in check(parsed, DEFAULT_RULES, hardware=hardware).cases
              if c.rule == "verdict"]  # fmt: skip
    return case


def test_too_few_sizes_say_so_and_ask_for_more() -> None:
    # Two sizes below 1 GiB cannot hold a plateau (the fit takes 3): before, "busbw
    # does not level off" and "measure larger sizes (e.g. nccl-tests -e 8G)".
    case = _verdict_case(_sizes({2**26, 2**27}))
    assert case.status == "fail"
    assert case.message == (
        f"short.log run 0 ({HOSTS}): bandwidth not verified: all_reduce float32 sum "
        "16 ranks on 2 nodes: no plateau reached by the largest size measured, 128 MiB "
        "(only 2 sizes measured, too few to find a plateau: it takes 3); measure "
        "more sizes (e.g. nccl-tests -b 1M -e 8G -f 2), or set [verdict] unjudged = "
        '"skip" in the rules file to accept a sweep that stops short'
    )


def test_two_large_sizes_are_judged() -> None:
    # -b 4G -e 8G, as acceptance scripts run: no fit (it takes 3 sizes), but from
    # 1 GiB up a size is bandwidth-bound, so the two are the plateau and judged.
    case = _verdict_case(_sizes({4 * GIB, 8 * GIB}))
    assert (case.status, case.message) == (
        "pass",
        f"short.log run 0 ({HOSTS}): OK healthy: median busbw 334.7 GB/s on the "
        "plateau, 4 GiB to 8 GiB: 89.3 % of a tree's line rate (375.0 GB/s), 93.0 % "
        "of what healthy hardware reaches (360.0 GB/s)",
    )


def test_a_transient_peak_is_not_the_plateau() -> None:
    # 1 GiB x1.2 and 4, 8 GiB x1.3 in time: busbw 297.9/1.2 = 248.2, then 2 GiB
    # 318.4, then 330.6/1.3 = 254.3 and 338.8/1.3 = 260.6: the sustained level is
    # 4 to 8 GiB (the peak at 2 GiB is more than 10 % above them), median 257.5.
    factors = {GIB: 1.2, 4 * GIB: 1.3, 8 * GIB: 1.3}
    text = derive.scale(derive.healthy(), lambda size: factors.get(size, 1.0))
    case = _verdict_case(text)
    assert (case.status, case.message) == (
        "pass",
        f"short.log run 0 ({HOSTS}): CHECK below healthy: median busbw 257.5 GB/s on "
        "the plateau, 4 GiB to 8 GiB: 68.7 % of a tree's line rate (375.0 GB/s), "
        "71.5 % of what healthy hardware reaches (360.0 GB/s)",
    )


def test_a_largest_size_alone_is_not_called_still_rising() -> None:
    # 8 GiB x1.3 in time: busbw 338.8/1.3 = 260.6, more than 10 % below 4 GiB's
    # 330.6 and not rising: no sustained level, not judged.
    text = derive.scale(derive.healthy(), lambda size: 1.3 if size == 8 * GIB else 1)
    case = _verdict_case(text)
    assert case.status == "fail"
    assert case.message == (
        f"short.log run 0 ({HOSTS}): bandwidth not verified: all_reduce float32 sum "
        "16 ranks on 2 nodes: no plateau reached by the largest size measured, 8 GiB "
        '(busbw does not level off); rerun it, or set [verdict] unjudged = "skip" in '
        "the rules file to accept a sweep without a plateau; CHECK busbw falls with "
        "size: 260.6 GB/s at 8 GiB, 21.2 % below its peak 330.6 GB/s at 4 GiB"
    )
    parsed = ncclparse.parse(io.StringIO(text), name="short.log")
    rows = analyze(parsed.measurements, None, parsed.runs).rows
    notes = set(rows.column("efficiency_note").to_pylist())
    assert not any("still rising" in (note or "") for note in notes)
    assert any("no sustained level" in (note or "") for note in notes)


def _verdict_of(log: Path) -> tuple[str, str]:
    [case] = [c for c in check(ncclparse.parse_many([log]), DEFAULT_RULES).cases
              if c.rule == "verdict"]  # fmt: skip
    return case.status, case.message.split(": ", 1)[1]


def test_a_single_rank_run_is_no_unverified_bandwidth() -> None:
    # One rank moves no data: there is no plateau to reach, so "bandwidth not
    # verified" (and "measure larger sizes") was a false alarm.
    log = (
        FIXTURES
        / "nccl_unseen"
        / ("nccltests-287b_alltoall_rtx5090_1gpu_wide_algbw_inplace_NA_complete.log")
    )
    assert _verdict_of(log) == (
        "pass",
        "NOTE efficiency unknown at 32 MiB: no hardware profile: pass --profile or "
        "--intra-bw/--inter-bw; single rank: no data moves; no alpha-beta fit: fewer "
        "than 3 distinct non-zero sizes, or a single rank",
    )


@pytest.mark.parametrize(
    ("log", "why"),
    [
        # PingPong has no busbw factor: its plateau is read on algbw, as the fit's.
        ("imb/imb_pingpong_sendrecv_np2.log",
         "bandwidth not verified: exchange uint8 2 ranks: no plateau reached by the "
         "largest size measured, 256 KiB (algbw is still rising there); pingpong "
         "uint8 2 ranks: no plateau reached by the largest size measured, 256 KiB "
         "(algbw is still rising there); measure larger sizes (e.g. IMB-MPI1 -msglog "
         "28), or set [verdict] unjudged = \"skip\" in the rules file to accept a "
         "sweep that stops short (latency only)"),
        ("oneccl/v2021.14_bcast_np2.log",
         "bandwidth not verified: broadcast float32 2 ranks root 0: no plateau "
         "reached by the largest size measured, 2 MiB (busbw is still rising there); "
         "measure larger sizes (e.g. benchmark -t 67108864), or set [verdict] "
         'unjudged = "skip" in the rules file to accept a sweep that stops short '
         "(latency only)"),
    ],
)  # fmt: skip
def test_a_short_intel_sweep_names_its_tools_options(log: str, why: str) -> None:
    # Before: "(busbw could not be computed)" for PingPong, and nccl-tests' -e 8G
    # as the remedy for IMB and oneCCL sweeps.
    assert _verdict_of(FIXTURES / log) == ("fail", why)


# 4b. A GPU collective whose busbw collapses at some size ---------------------------

# 64 MiB's time x f: 1261.6 us -> 4705.8 us (f 3.73) is busbw 67108864 B / 4705.8 us
# x 30/16 = 26.7 GB/s, 45.0 % of 32 MiB's 59.4 GB/s; f 3.06: 32.6 GB/s, 54.9 %.
COLLAPSED = 3.73
DIPPED = 3.06


@pytest.mark.parametrize("factor", [COLLAPSED, DIPPED])
def test_busbw_below_half_of_a_smaller_size_fails_the_run(factor: float) -> None:
    text = derive.scale(derive.healthy(), lambda s: factor if s == 2**26 else 1.0)
    case = _verdict_case(text)
    healthy = (
        "OK healthy: median busbw 330.6 GB/s on the plateau, 2 GiB to 8 GiB: 88.2 % "
        "of a tree's line rate (375.0 GB/s), 91.8 % of what healthy hardware reaches "
        "(360.0 GB/s)"
    )
    if factor == DIPPED:  # 45 % below: a dip, not a collapse
        assert (case.status, case.message) == ("pass", f"short.log run 0 ({HOSTS}): "
                                               f"{healthy}")  # fmt: skip
        return
    assert case.status == "fail"
    assert case.message == (
        f"short.log run 0 ({HOSTS}): FAIL busbw collapses at 64 MiB: 26.7 GB/s, "
        "55.0 % below 59.4 GB/s at the smaller 32 MiB (338.8 GB/s at the largest size, "
        f"8 GiB); {healthy}"
    )


def test_a_collapse_fails_the_command(runner: CliRunner, tmp_path: Path) -> None:
    log = tmp_path / "collapsed.log"
    log.write_text(
        derive.scale(derive.healthy(), lambda s: COLLAPSED if s == 2**26 else 1.0)
    )
    out = _outputs(tmp_path)
    result = runner.invoke(cli, ["check", str(log), *A3_MEGA, *_args(out)])
    assert result.exit_code == 1, result.output
    assert [c[:2] for c in _cases(out["json"]) if c[1] == "fail"] == [
        ("verdict", "fail")
    ]


def test_only_a_real_collapse_among_the_corpus_runs() -> None:
    # Every real log: one run collapses (NVIDIA/nccl issue #1453, a report of
    # all_reduce slowing from 64 MiB on); CPU benchmarks (oneCCL, IMB) whose busbw
    # falls 80-99 % where messages outgrow a cache are not judged on it.
    logs = sorted(p for p in FIXTURES.rglob("*.log") if "expected" not in p.parts)
    result = check(ncclparse.parse_many(logs), DEFAULT_RULES)
    collapsed = [
        c.message.split(": ", 1)[1].split("; ")[0]
        for c in result.cases
        if c.rule == "verdict" and "collapses" in c.message
    ]
    assert collapsed == [
        "FAIL busbw collapses at 64 MiB: 5.27 GB/s, 82.1 % below 29.5 GB/s at the "
        "smaller 32 MiB (4 sizes collapsed, up to the largest, 512 MiB)"
    ]
    cpu = [c for c in result.cases if c.rule == "verdict" and
           ("/oneccl/" in c.name or "/imb/" in c.name)]  # fmt: skip
    assert len(cpu) > 100


# 5. A printed bandwidth that size and time contradict -----------------------------


def _edit(text: str, size: int, column: int, factor: float) -> str:
    """Derived: multiply one printed figure of the row of ``size`` bytes (column 6
    is out-of-place algbw, 7 its busbw), re-printed with 2 decimals."""
    out = []
    for line in text.splitlines(keepends=True):
        parts = re.split(r"(\s+)", line.rstrip("\n"))
        if derive._ROW.match(line) and int(parts[2]) == size:
            old = parts[2 + 2 * column]
            parts[2 + 2 * column] = f"{float(old) * factor:.2f}".rjust(len(old))
            line = "".join(parts) + "\n"
        out.append(line)
    return "".join(out)


@pytest.mark.parametrize(
    ("column", "said"),
    [
        (7, "busbw 893.58 GB/s printed, 297.9 GB/s from size and time"),
        (6, "algbw 476.58 GB/s printed, 158.9 GB/s from size and time"),
    ],
)
def test_a_printed_bandwidth_edited_x3_is_an_integrity_failure(
    column: int, said: str
) -> None:
    # The 1 GiB row: 6759.0 us out-of-place, so algbw 1073741824 B / 6759.0 us =
    # 158.86 GB/s and busbw x 2 x 15/16 = 297.87 GB/s, as printed; one is now x3.
    text = _edit(derive.healthy(), GIB, column, 3)
    parsed = ncclparse.parse(io.StringIO(text), name="edited.log")
    result = check(parsed, DEFAULT_RULES)
    [case] = [c for c in result.cases if c.rule == "integrity"]
    assert (case.status, case.message) == (
        "fail",
        f"edited.log run 0 ({HOSTS}) all_reduce: printed bandwidth disagrees with "
        "size and time beyond the rounding of its digits (a corrupt or edited log) at "
        f"1 row(s): 1 GiB out-of-place (line 59) {said}",
    )


REAL_LOGS = sorted(
    path
    for path in [*FIXTURES.glob("*/*"), *(ROOT / "examples").glob("*.log")]
    if path.suffix in (".log", ".csv", ".json", ".txt")
    and path.name not in ("expected.json",)
    and path.parent.name != "expected"
)


@pytest.mark.parametrize(
    "log", REAL_LOGS, ids=[f"{p.parent.name}/{p.name}" for p in REAL_LOGS]
)
def test_no_real_log_has_a_misprinted_bandwidth(log: Path) -> None:
    # A false alarm on a real log is the worst outcome: every corpus log is clean.
    parsed = ncclparse.parse_many([log])
    result = check(parsed, DEFAULT_RULES)
    said = [c.message for c in result.cases if "printed bandwidth" in c.message]
    assert said == []


def test_the_corpus_is_all_there() -> None:
    # The test above must not pass on an empty glob.
    assert len(REAL_LOGS) >= 150
    assert sum(ncclparse.parse_many([p]).runs.num_rows > 0 for p in REAL_LOGS) >= 140


# 6. Outputs all or nothing; failing outputs when the check cannot complete ---------


def _yesterday(out: dict[str, Path]) -> None:
    """What a passing run wrote last night."""
    out["prom"].write_text(PASSED)
    out["json"].write_text('{"status": "pass"}\n')
    out["xml"].write_text("<testsuites/>\n")
    out["md"].write_text("## ncclparse check: PASS\n")
    out["html"].write_text("<p>PASS</p>\n")


def _assert_failed_outputs(out: dict[str, Path], message: str) -> None:
    prom = out["prom"].read_text()
    assert "ncclparse_check_passed 0\n" in prom
    assert 'ncclparse_check_case_failed{rule="error",name="ncclparse check"} 1' in prom
    document = json.loads(out["json"].read_text())
    assert (document["status"], document["error"]) == ("fail", message)
    assert document["summary"] == {
        "cases": 1,
        "pass": 0,
        "fail": 1,
        "skip": 0,
        "outcomes": {"FAIL": 1, "CHECK": 0, "NOTE": 0, "OK": 0, "SKIP": 0},
    }
    root = ET.fromstring(out["xml"].read_text().encode())
    assert (root.get("errors"), root.get("failures")) == ("1", "0")
    [error] = root.findall("./testsuite/testcase/error")
    assert error.text == message
    # The Markdown summary is appended (a step summary collects every step's):
    # last night's text stays above, tonight's failure follows it.
    before, _, tonight = out["md"].read_text().partition("\n## ncclparse check: FAIL")
    assert before == "## ncclparse check: PASS\n"  # then one blank line
    assert tonight.startswith(
        f"\n\nThe check could not complete: {markdown_escape(message)}\n"
    )
    assert "<h1>ncclparse check: FAIL</h1>" in out["html"].read_text()
    assert [p.name for p in out["prom"].parent.glob(".*.tmp")] == []


@pytest.mark.parametrize(
    "target",
    ["ncclparse.health.check.verdict_cases", "ncclparse.report.render_report"],
)
def test_an_internal_error_replaces_every_output_with_a_failing_one(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(target, boom)
    out = _outputs(tmp_path)
    _yesterday(out)
    args = ["check", str(derive.HEALTHY), *A3_MEGA, *_args(out), "-q"]
    result = runner.invoke(cli, args)
    message = (
        "internal error: RuntimeError: boom second line (a bug in ncclparse; please "
        "report it)"
    )
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)  # no traceback
    assert result.stderr == f"Error: {message}\n"
    assert result.stdout == ""
    _assert_failed_outputs(out, message)


def test_an_output_that_cannot_be_written_fails_the_others(
    runner: CliRunner, tmp_path: Path
) -> None:
    out = _outputs(tmp_path)
    _yesterday(out)
    missing = tmp_path / "no-such-dir" / "check.json"
    args = ["check", str(derive.HEALTHY), *A3_MEGA, "--prometheus", str(out["prom"]),
            "--junit", str(out["xml"]), "--json", str(missing), "-q"]  # fmt: skip
    result = runner.invoke(cli, args)
    message = f"{missing}: cannot write: No such file or directory"
    assert result.exit_code == 4  # infrastructure, not the fabric
    assert result.stderr == f"Error: {message}\n"
    assert "ncclparse_check_passed 0\n" in out["prom"].read_text()
    assert f'<error message="{message}"' in out["xml"].read_text()


def test_outputs_are_replaced_together(runner: CliRunner, tmp_path: Path) -> None:
    out = _outputs(tmp_path)
    _yesterday(out)
    result = runner.invoke(cli, ["check", str(derive.HEALTHY), *A3_MEGA, *_args(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out["json"].read_text())["error"] is None
    assert "ncclparse_check_passed 1\n" in out["prom"].read_text()
    assert out["html"].read_text().lstrip().lower().startswith("<!doctype html>")
    assert out["md"].read_text().startswith("## ncclparse check: PASS\n")


def test_a_bad_hardware_option_still_exits_2_but_fails_the_outputs(
    runner: CliRunner, tmp_path: Path
) -> None:
    out = _outputs(tmp_path)
    _yesterday(out)
    result = runner.invoke(
        cli, ["check", str(derive.HEALTHY), "--profile", "no-such-gpu", *_args(out)]
    )
    assert result.exit_code == 2
    document = json.loads(out["json"].read_text())
    assert document["status"] == "fail"
    assert "no-such-gpu" in document["error"]
    assert "ncclparse_check_passed 0\n" in out["prom"].read_text()


def test_an_interruption_fails_the_outputs(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupt(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr("ncclparse.health.check.verdict_cases", interrupt)
    out = _outputs(tmp_path)
    _yesterday(out)
    result = runner.invoke(cli, ["check", str(derive.HEALTHY), *_args(out)])
    assert result.exit_code == 1  # click: "Aborted!"
    assert json.loads(out["json"].read_text())["error"] == "interrupted"
    assert "ncclparse_check_passed 0\n" in out["prom"].read_text()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_termination_fails_the_outputs_then_ends_by_its_signal(
    tmp_path: Path, signum: int
) -> None:
    # timeout, Slurm and Kubernetes end a job with SIGTERM: it left yesterday's
    # "passed" in place (only Ctrl-C replaced the outputs).
    out = _outputs(tmp_path)
    _yesterday(out)
    script = (
        "import os, signal, sys\n"
        "import ncclparse.health.check as check\n"
        f"check.verdict_cases = lambda *a, **k: os.kill(os.getpid(), {int(signum)})\n"
        "from ncclparse.cli.app import cli\n"
        "cli(sys.argv[1:])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, "check", str(derive.HEALTHY), *_args(out)],
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    name = signal.Signals(signum).name
    assert done.returncode == -signum, done.stderr
    assert json.loads(out["json"].read_text())["error"] == f"terminated by {name}"
    assert "ncclparse_check_passed 0\n" in out["prom"].read_text()
    assert f"terminated by {name}" in out["xml"].read_text()


def test_an_output_that_is_a_directory_fails_the_others(
    runner: CliRunner, tmp_path: Path
) -> None:
    # Refused as an option (exit 2) before anything was written, it left the other
    # outputs saying yesterday's "passed".
    out = _outputs(tmp_path)
    _yesterday(out)
    out["html"].unlink()
    out["html"].mkdir()
    result = runner.invoke(cli, ["check", str(derive.HEALTHY), *A3_MEGA, *_args(out)])
    assert result.exit_code == 4, result.output
    assert "ncclparse_check_passed 0\n" in out["prom"].read_text()
    assert json.loads(out["json"].read_text())["status"] == "fail"
    assert out["html"].is_dir()


def test_pushgateway_without_its_client_fails_the_outputs(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import fails
    out = _outputs(tmp_path)
    _yesterday(out)
    result = runner.invoke(
        cli,
        ["check", str(derive.HEALTHY), *_args(out), "--pushgateway", "http://gw:9091"],
    )
    assert result.exit_code == 2
    assert "--pushgateway needs prometheus_client" in result.stderr
    assert "ncclparse_check_passed 0\n" in out["prom"].read_text()


def test_an_output_that_is_an_input_log_is_refused(
    runner: CliRunner, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "a.log"
    shutil.copy(EXAMPLE, log)
    before = log.read_bytes()
    for args, said in [
        ([str(logs), "--json", str(log)], f"--json {log} is a log among the INPUTS"),
        ([str(log), "--junit", str(log)], f"--junit {log} is a log among the INPUTS"),
        ([str(log), "--json", str(tmp_path / "x"), "--prometheus",
          str(tmp_path / "x")],
         f"--prometheus {tmp_path / 'x'} is also the file of --json"),
    ]:  # fmt: skip
        result = runner.invoke(cli, ["check", *args])
        assert result.exit_code == 2, result.output
        assert said in result.stderr
    assert log.read_bytes() == before
    # Yesterday's own outputs in the logs directory are no logs: replaced as usual.
    (logs / "check.json").write_text('{"format": "ncclparse-check", "status": "pass"}')
    result = runner.invoke(
        cli, ["check", str(logs), *A3_MEGA, "--json", str(logs / "check.json")]
    )
    assert result.exit_code == 0, result.output
    assert json.loads((logs / "check.json").read_text())["status"] == "pass"


def test_the_fifo_wait_returns_an_error_to_a_library_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ncclparse.errors import InputError
    from ncclparse.inputs.walk import expand

    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    monkeypatch.setenv("NCCLPARSE_FIFO_WAIT", "0.1")
    found: list[Any] = []
    worker = threading.Thread(
        target=lambda: found.extend(expand((str(fifo),))), daemon=True
    )
    worker.start()
    worker.join(HANG)
    assert not worker.is_alive()
    [error] = found
    assert isinstance(error, InputError)
    assert str(error) == (
        f"{fifo}: FIFO (named pipe) without a writer after 0.1 s; start the writer "
        "first, or set NCCLPARSE_FIFO_WAIT to wait longer"
    )
    # The wake-up left no thread behind blocked in open().
    assert [t.name for t in threading.enumerate() if t.name == f"open {fifo}"] == []


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf", "nan"])
def test_a_bad_fifo_wait_is_an_error_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    from ncclparse.inputs.walk import expand

    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    monkeypatch.setenv("NCCLPARSE_FIFO_WAIT", value)
    [error] = list(expand((str(fifo),)))
    assert str(error) == (
        f"{fifo}: NCCLPARSE_FIFO_WAIT={value!r} is not a positive number of seconds"
    )


def test_an_unreadable_history_fails_the_outputs(
    runner: CliRunner, tmp_path: Path
) -> None:
    history = tmp_path / "history"
    (history / "date=2030-01-01").mkdir(parents=True)
    (history / "date=2030-01-01" / "x.parquet").write_text("not parquet\n")
    out = _outputs(tmp_path)
    _yesterday(out)
    args = ["check", str(derive.HEALTHY), "--history", str(history), *_args(out)]
    result = runner.invoke(cli, [*args, "-q"])
    assert result.exit_code == 4  # infrastructure, not the fabric
    assert result.stderr.startswith(f"Error: {history}: cannot read history: ")
    assert result.stderr.count("\n") == 1
    error = json.loads(out["json"].read_text())["error"]
    assert result.stderr == f"Error: {error}\n"
    _assert_failed_outputs(out, error)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--rules", "no-such-rules.toml"],
         "Invalid value for '--rules': no-such-rules.toml: cannot read rules: No such "
         "file or directory"),
        (["--history", "no-such-history"],
         "no-such-history: history directory not found (on the first night, before "
         "`ingest` has created it, pass --first-night)"),
    ],
)  # fmt: skip
def test_a_configuration_error_exits_2_and_fails_the_outputs(
    runner: CliRunner, tmp_path: Path, option: list[str], message: str
) -> None:
    out = _outputs(tmp_path)
    _yesterday(out)
    result = runner.invoke(cli, ["check", str(derive.HEALTHY), *option, *_args(out)])
    assert result.exit_code == 2
    assert result.stderr.endswith(f"\nError: {message}\n")
    _assert_failed_outputs(out, message)


def _corrupt_history(tmp_path: Path) -> list[str]:
    history = tmp_path / "history"
    (history / "date=2030-01-01").mkdir(parents=True)
    (history / "date=2030-01-01" / "x.parquet").write_text("not parquet\n")
    return [str(derive.HEALTHY), "--history", str(history)]


def _wrong(tmp_path: Path) -> list[str]:
    # Derived: #wrong of the 1 GiB out-of-place row set to 12.
    log = tmp_path / "wrong.log"
    log.write_text(derive.set_wrong(derive.healthy(), GIB, 12))
    return [str(log)]


HEALTHY = str(derive.HEALTHY)


@pytest.mark.parametrize(
    ("scenario", "status"),
    [
        (lambda tmp: [HEALTHY], 0),  # healthy
        (_wrong, 1),  # unhealthy: a case failed
        (lambda tmp: [HEALTHY, "--rules", str(tmp / "none.toml")], 2),  # configuration
        (lambda tmp: [HEALTHY, "--markdown", str(tmp / "gone" / "c.md")], 4),  # output
        (_corrupt_history, 4),  # the history cannot be read
    ],
    ids=["healthy", "unhealthy", "configuration", "output", "history"],
)
def test_the_exit_status_says_who_failed(
    tmp_path: Path, scenario: Any, status: int
) -> None:
    """docs/nightly.md's table: 0 healthy, 1 unhealthy, 2 usage or configuration,
    4 infrastructure; every status but 0 leaves a failing textfile."""
    out = _outputs(tmp_path)
    _yesterday(out)
    args = [*scenario(tmp_path), *A3_MEGA, "--prometheus", str(out["prom"]), "-q"]
    done = _ncclparse("check", *args)
    assert done.returncode == status, done.stderr
    passed = out["prom"].read_text()
    assert ("ncclparse_check_passed 1\n" in passed) == (status == 0)
    assert ("ncclparse_check_passed 0\n" in passed) == (status != 0)
    assert "Traceback" not in done.stderr
