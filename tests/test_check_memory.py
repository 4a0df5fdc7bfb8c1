"""``check`` in bounded memory: a point's repeats merged as ``report`` merges them,
runs judged in batches, without a report the points of many logs read back from a
temporary file (docs/robustness.md, "Memory")."""

from __future__ import annotations

import dataclasses
import gzip
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

import pytest
from click.testing import CliRunner, Result

import ncclparse
from ncclparse.cli.app import cli
from ncclparse.health import check as judging
from ncclparse.health import forked, nightly
from ncclparse.health.rules import DEFAULT_RULES
from ncclparse.report import check_outputs
from ncclparse.report.check_outputs import render_outputs, to_text
from tests import _derive
from tests.test_memory import child_output, peak_rss_mb


def _check_code(path: Path) -> str:
    return (
        "from ncclparse.health.nightly import check\n"
        f"run = check([{str(path)!r}])\n"
        "assert run.passed, [c.message for c in run.result.failures]\n"
    )


def test_a_repeated_sweep_merged_is_no_misprint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A sweep repeated at a third of the speed: the merged point's printed
    bandwidth (the mean of the printed ones) is not size / mean time, and that is
    no corrupt log."""
    healthy = _derive.healthy()
    slow = _derive.scale(healthy, lambda _size: 3.0)
    text = _derive.repeat_sweep(healthy, 1).replace(
        "# Out of bounds", "".join(_rows(slow)) + "# Out of bounds", 1
    )
    log = tmp_path / "twice.log"
    log.write_text(text)
    monkeypatch.setattr(nightly, "CHECK_LIMITS", (4, 1_000))
    run = nightly.check([log])
    [integrity] = [c for c in run.result.cases if c.rule == "integrity"]
    assert integrity.status == "pass", integrity.message
    assert integrity.message.endswith(": data complete and valid")
    assert run.parsed.measurements.num_rows == 62  # 31 sizes, 2 placements


def _rows(text: str) -> list[str]:
    return [line for line in text.splitlines(keepends=True) if _derive._ROW.match(line)]


def test_runs_judged_in_batches_give_the_same_cases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Twelve logs judged three runs at a time: the same cases, in the same order."""
    logs = [(_derive.healthy(), f"n{i}.log") for i in range(12)]
    result = ncclparse.parse_many(logs)
    rules = DEFAULT_RULES
    whole = judging.check(result, rules)
    monkeypatch.setattr(judging, "JUDGE_ROWS", 3 * 62)
    assert len(list(judging._batches(result.measurements, result.runs))) == 4
    batched = judging.check(result, rules)
    assert [c.message for c in batched.cases] == [c.message for c in whole.cases]
    assert batched.analysis.rows.num_rows == whole.analysis.rows.num_rows == 744


def test_outputs_read_only_the_columns_kept_for_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Twelve logs, three of them three times slower, judged three runs at a time with only
    OUTPUT_COLUMNS of the analysed rows kept: the same JUnit, JSON, Prometheus and
    Markdown as with every column."""
    healthy = _derive.healthy()
    slow = _derive.scale(healthy, lambda _size: 3.0)
    logs = [(slow if i % 4 == 0 else healthy, f"n{i}.log") for i in range(12)]
    result = ncclparse.parse_many(logs)
    monkeypatch.setattr(judging, "JUDGE_ROWS", 3 * 62)
    every = judging.check(result, DEFAULT_RULES)
    kept = judging.check(result, DEFAULT_RULES, report_rows=False)
    assert kept.analysis.rows.column_names == list(judging.OUTPUT_COLUMNS)
    assert every.analysis.rows.num_columns == 64
    assert [c.message for c in kept.cases] == [c.message for c in every.cases]
    assert _outputs(kept, tmp_path) == _outputs(every, tmp_path)
    # The busbw and efficiency samples are made of the rows kept.
    prometheus = _outputs(every, tmp_path)[tmp_path / "check.prom"]
    assert "ncclparse_busbw_bytes_per_second{" in prometheus


def test_outputs_of_rows_coded_a_slice_at_a_time_are_the_same(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Twelve logs of three collectives, some three times slower: the Prometheus
    busbw samples and the case metrics made of slices of 50 rows (a run's 62 rows
    split, a shape met again in later slices) are those of one slice of every row,
    and so are the other outputs."""
    healthy = _derive.healthy()
    slow = _derive.scale(healthy, lambda _size: 3.0)
    logs = [
        (_derive.as_collective(slow if i % 4 == 0 else healthy, collective), name)
        for i in range(12)
        for collective, name in [
            (("all_reduce", "all_gather", "alltoall")[i % 3], f"n{i}.log")
        ]
    ]
    result = judging.check(ncclparse.parse_many(logs), DEFAULT_RULES)
    whole = _outputs(result, tmp_path)
    monkeypatch.setattr(check_outputs, "_CODED_ROWS", 50)
    sliced = _outputs(result, tmp_path)
    assert sliced == whole
    prometheus = whole[tmp_path / "check.prom"]
    busbw = [
        line
        for line in prometheus.splitlines()
        if line.startswith("ncclparse_busbw_bytes_per_second{")
    ]
    assert len(busbw) == 3 * 2 * 31  # collectives, min and median, sizes
    assert 'collective="alltoall"' in prometheus
    assert 'ncclparse_check_case_failed{rule="cohort",collective="all_reduce",' in (
        prometheus
    )


def _logs_of_many_rows(directory: Path) -> list[Path]:
    """Twelve real logs, three of them three times slower, and a sweep repeated
    (its repeats merged): 62 rows each but the repeated one's 124."""
    healthy = _derive.healthy()
    slow = _derive.scale(healthy, lambda _size: 3.0)
    texts = [slow if i % 4 == 0 else healthy for i in range(12)]
    texts.insert(5, _derive.repeat_sweep(healthy, 2))
    paths = []
    for i, text in enumerate(texts):
        paths.append(directory / f"n{i:02d}.log")
        paths[-1].write_text(text)
    return paths


def test_points_judged_from_the_temporary_file_give_the_same_outputs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Past CHECK_LIMITS' rows, a check without a report judges the points read
    back from a temporary file, batch by batch: the same cases and outputs as the
    points held in memory (with a report), and the repeated sweep's runs merged
    and said so alike."""
    paths = _logs_of_many_rows(tmp_path)
    monkeypatch.setattr(nightly, "CHECK_LIMITS", (200, 1_000))
    monkeypatch.setattr(judging, "JUDGE_ROWS", 3 * 62)
    held = nightly.check(paths, report_rows=True)
    spooled = nightly.check(paths, report_rows=False)
    assert held.parsed.measurements.num_rows == 12 * 62 + 62  # the repeats merged
    assert spooled.parsed.measurements.num_rows == 0  # they were in the file
    assert spooled.parsed.runs.equals(held.parsed.runs)
    warnings = cast("list[list[str]]", held.parsed.runs["warnings"].to_pylist())
    [merged] = [w for ws in warnings for w in ws]
    assert merged.startswith("124 measurements of 62 points (a sweep repeated)")
    assert [c.message for c in spooled.result.cases] == [
        c.message for c in held.result.cases
    ]
    slow = [str(tmp_path / f"n{i:02d}.log") for i in (0, 4, 9)]
    failed = [(c.rule, c.source) for c in spooled.result.failures]
    assert failed == [("cohort", source) for source in slow] * 2  # two placements
    untimed = [dataclasses.replace(r.result, seconds=0.0) for r in (spooled, held)]
    assert _outputs(untimed[0], tmp_path) == _outputs(untimed[1], tmp_path)


def test_a_temporary_file_that_cannot_be_written_is_no_traceback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No temporary directory for the points of many rows: an infrastructure
    error (exit 4) saying to set TMPDIR, and failing outputs."""
    paths = _logs_of_many_rows(tmp_path)
    monkeypatch.setattr(nightly, "CHECK_LIMITS", (200, 1_000))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))
    junit = tmp_path / "check.xml"
    done = CliRunner().invoke(
        cli, ["check", "-q", *map(str, paths), "--junit", str(junit)]
    )
    assert done.exit_code == 4, done.output
    assert done.exception is None or isinstance(done.exception, SystemExit)
    said = "cannot keep the parsed rows in a temporary file"
    assert said in done.output
    assert "set TMPDIR to a directory with free space" in done.output
    assert said in junit.read_text()


def test_batches_judged_in_children_give_the_same_outputs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The batches read back from the temporary file, judged in forked children
    (two at a time), and judged in this process: the same cases, standard output,
    JUnit, JSON, Prometheus and Markdown; the children judged every batch."""
    _forking(monkeypatch)
    paths = _logs_of_many_rows(tmp_path)
    monkeypatch.setattr(nightly, "CHECK_LIMITS", (200, 1_000))
    monkeypatch.setattr(judging, "JUDGE_ROWS", 3 * 62)
    judges = tmp_path / "judged-by"
    judge_batch = judging._judge_batch

    def judge_noting_the_process(*args: Any) -> Any:
        with judges.open("a") as noted:
            noted.write(f"{os.getpid()}\n")
        return judge_batch(*args)

    monkeypatch.setattr(judging, "_judge_batch", judge_noting_the_process)
    forked_run = nightly.check(paths, report_rows=False)
    in_children = judges.read_text().split()
    judges.unlink()
    monkeypatch.setattr(forked, "can_fork", lambda: False)
    here = nightly.check(paths, report_rows=False)
    assert judges.read_text().split() == [str(os.getpid())] * 5
    assert len(in_children) == len(set(in_children)) == 5
    assert str(os.getpid()) not in in_children
    assert [c.message for c in forked_run.result.cases] == [
        c.message for c in here.result.cases
    ]
    untimed = [dataclasses.replace(r.result, seconds=0.0) for r in (forked_run, here)]
    assert to_text(untimed[0], verbose=True) == to_text(untimed[1], verbose=True)
    assert _outputs(untimed[0], tmp_path) == _outputs(untimed[1], tmp_path)
    assert untimed[0].analysis.rows.equals(untimed[1].analysis.rows)


def _forking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Children forked whatever idle threads an earlier test left in this worker
    (dask's pool, a test server's)."""
    if sys.platform != "linux":
        pytest.skip("children are forked on Linux only")
    monkeypatch.setattr(forked, "can_fork", lambda: True)


def _check_cli(paths: list[Path], junit: Path) -> Result:
    return CliRunner().invoke(
        cli, ["check", "-q", *map(str, paths), "--junit", str(junit)]
    )


def test_a_child_killed_is_an_infrastructure_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A child judging a batch killed as the out-of-memory killer kills (SIGKILL):
    no hang and no pass but exit 4, the signal named in the error and the
    outputs."""
    _forking(monkeypatch)
    paths = _logs_of_many_rows(tmp_path)
    monkeypatch.setattr(nightly, "CHECK_LIMITS", (200, 1_000))
    monkeypatch.setattr(judging, "JUDGE_ROWS", 3 * 62)

    def killed(*_args: Any) -> Any:
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(judging, "_judge_batch", killed)
    junit = tmp_path / "check.xml"
    done = _check_cli(paths, junit)
    assert done.exit_code == 4, done.output
    said = (
        "the process judging a batch of runs was killed by SIGKILL (what the "
        "out-of-memory killer sends: give the check more memory, or check fewer "
        "logs at a time)"
    )
    assert done.output == f"Error: {said}\n"
    assert said in junit.read_text()


def test_an_exception_in_a_child_is_as_in_this_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A bug met judging a batch in a child: the same exit status, error and
    outputs as judged in this process (an internal error, exit 1)."""
    _forking(monkeypatch)
    paths = _logs_of_many_rows(tmp_path)
    monkeypatch.setattr(nightly, "CHECK_LIMITS", (200, 1_000))
    monkeypatch.setattr(judging, "JUDGE_ROWS", 3 * 62)

    def broken(*_args: Any) -> Any:
        raise ValueError("a bug")

    monkeypatch.setattr(judging, "_judge_batch", broken)
    junit = tmp_path / "check.xml"
    in_child = _check_cli(paths, junit)
    junit_of_child = junit.read_text()
    monkeypatch.setattr(forked, "can_fork", lambda: False)
    here = _check_cli(paths, junit)
    assert in_child.exit_code == here.exit_code == 1
    said = "internal error: ValueError: a bug (a bug in ncclparse; please report it)"
    assert in_child.output == here.output == f"Error: {said}\n"
    assert junit_of_child == junit.read_text()


def _outputs(result: judging.CheckResult, out: Path) -> dict[Path, str]:
    """Every output of ``result`` but the report, at a fixed time."""
    return render_outputs(
        result,
        junit=out / "check.xml",
        json_path=out / "check.json",
        prometheus=out / "check.prom",
        markdown=out / "check.md",
        timestamp=0.0,
    )


@pytest.mark.slow
def test_memory_of_check_does_not_grow_with_the_rows_of_one_run(
    tmp_path: Path,
) -> None:
    """One run of 0.5 M and of 2 M rows (a real sweep repeated, 29 and 116 MB):
    7 GB for the larger before its repeats were merged."""
    peaks = []
    for times in (7_984, 31_936):
        path = tmp_path / f"run{times}.log"
        path.write_text(_derive.repeat_sweep(_derive.healthy(), times))
        peaks.append(peak_rss_mb(_check_code(path)))
    assert peaks[1] < 1.3 * peaks[0] + 30, peaks


@pytest.mark.slow
def test_memory_of_check_of_a_compressed_repeated_sweep_is_bounded(
    tmp_path: Path,
) -> None:
    """A gzip of 2 M rows inflates to 116 MB (a gzip of 1 GB of them once took
    17 GB, then an ArrowInvalid): the same peak as a quarter of it."""
    peaks = []
    for times in (7_984, 31_936):
        path = tmp_path / f"run{times}.log.gz"
        with gzip.open(path, "wt", compresslevel=1) as handle:
            handle.write(_derive.repeat_sweep(_derive.healthy(), times))
        peaks.append(peak_rss_mb(_check_code(path)))
    assert peaks[1] < 1.3 * peaks[0] + 30, peaks


# KB of peak memory per more log of 62 rows, from 2,500 to 5,000 logs, measured on
# the 2-core machine with `ncclparse check -q DIR --junit --json`: 206 KB before the
# judging in batches, 77 to 129 KB run to run with the parsed rows held in memory
# (83 KB on 2026-11-28: 441 and 643 MB), 32 to 44 KB once the points wait in a
# temporary file and each run keeps only what the cases across runs read (its
# hosts, devices and points as arrays), 8.7 KB (325 and 346 MB, 2026-11-29) once
# the batches are judged in forked children, which take the batches' temporaries
# with them, and the outputs, the cohort rule and host blame make no copy of every
# row at the end. What is kept is ~12 KB a log (its cases, the blame summary, the
# rows its outputs read): from 5,000 to 10,000 logs, with --prometheus and
# --markdown too, the peak grows by 24 KB a log (benchmarks/README.md).
PER_LOG_KB = 20


def _check_command_peak_mb(directory: Path, out: Path) -> float:
    """Peak resident set of ``ncclparse check`` of ``directory`` (JUnit and JSON
    into ``out``) and of any process it starts, in MiB, as ``/usr/bin/time``
    reports it."""
    code = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run([sys.executable, '-m', 'ncclparse', 'check', '-q',"
        f" {str(directory)!r}, '--junit', {str(out / 'j.xml')!r},"
        f" '--json', {str(out / 'c.json')!r}])\n"
        "assert done.returncode == 0, done.returncode\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    return int(child_output(code).split()[-1]) / 1024


@pytest.mark.slow
def test_memory_of_check_grows_little_with_the_number_of_logs(tmp_path: Path) -> None:
    """2,500 and 5,000 logs of 62 rows (a real log copied): what each more log
    costs (its rows kept as Arrow, its cases, what its outputs read, and what the
    allocator keeps of the batches judged), under PER_LOG_KB."""
    text = _derive.healthy()
    peaks = {}
    for count in (2_500, 5_000):
        logs = tmp_path / f"logs{count}"
        logs.mkdir()
        for i in range(count):
            (logs / f"n{i:05d}.log").write_text(text + f"# copy {i}\n")
        out = tmp_path / f"out{count}"
        out.mkdir()
        peaks[count] = _check_command_peak_mb(logs, out)
        assert (out / "c.json").read_text().count('"status": "pass"') > count
    per_log_kb = (peaks[5_000] - peaks[2_500]) * 1024 / 2_500
    assert per_log_kb < PER_LOG_KB, (per_log_kb, peaks)
