"""``ncclparse.check``: the nightly check as a library call (health/nightly.py).

The command's behaviour is tested through the command (test_cli_check.py,
test_check_fail_closed.py); here the call itself: what it returns, the order of its
hooks, and the configuration errors it raises before reading anything.
"""

from __future__ import annotations

import datetime as dt
import io
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ncclparse
from ncclparse.efficiency import HardwareOptions
from ncclparse.errors import NcclParseError, ProfileError
from ncclparse.health.nightly import CheckConfigError, CheckRun
from ncclparse.health.rules import rules_from_mapping
from ncclparse.inputs.progress import Progress
from ncclparse.store.history import ingest
from tests._docs import code_block

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "all_reduce_16rank_2node_h100.log"
A3_MEGA = HardwareOptions(profile="h100", inter_bw="200GB/s")
HOSTS = "hosts ztan-mig-235z, ztan-mig-gq73"
SERIES = "all_reduce float32 sum {} 16 ranks on 2 nodes"
SLOW_HOST = ("slow-host", "hosts", "skip", "1 run(s): too few runs per shape over "
             "different hosts")  # fmt: skip


def _cases(run: CheckRun) -> list[tuple[str, str, str, str]]:
    return [(c.rule, c.name, c.status, c.message) for c in run.result.cases]


def _judged(source: str) -> list[tuple[str, str, str, str]]:
    """The cases of one healthy run of the example log, read as ``source``."""
    where = f"{source} run 0 ({HOSTS})"
    return [
        ("integrity", f"{source} run 0", "pass",
         f"{where} all_reduce: data complete and valid"),
        ("verdict", f"{source} run 0", "pass",
         f"{where}: OK healthy: median busbw 330.6 GB/s on the plateau, 2 GiB to 8 "
         "GiB: 88.2 % of a tree's line rate (375.0 GB/s), 91.8 % of what healthy "
         "hardware reaches (360.0 GB/s)"),
        ("latency", f"{SERIES.format('out-of-place')} [{source}#0]", "pass",
         f"{where} {SERIES.format('out-of-place')}: 18 sizes within 1 ms "
         "(worst 203 µs)"),
        ("latency", f"{SERIES.format('in-place')} [{source}#0]", "pass",
         f"{where} {SERIES.format('in-place')}: 18 sizes within 1 ms (worst 207 µs)"),
    ]  # fmt: skip


def test_the_top_level_name_is_the_library_check() -> None:
    assert ncclparse.check is ncclparse.health.nightly.check
    assert ncclparse.CheckRun is CheckRun
    assert ncclparse.CheckConfigError is CheckConfigError
    assert issubclass(CheckConfigError, NcclParseError)


def test_a_healthy_log_passes_and_the_run_holds_every_part() -> None:
    run = ncclparse.check([EXAMPLE], hardware=A3_MEGA)
    assert run.passed
    assert _cases(run) == [*_judged(str(EXAMPLE)), SLOW_HOST]
    assert repr(run.parsed) == (
        "<ParseResult: 1 source, 1 run (1 complete), 62 measurements>"
    )
    assert run.input_failures == ()
    assert run.notes == ()
    assert run.result.tags == {}
    assert run.result.seconds is not None
    assert run.result.seconds > 0


def test_failed_inputs_and_notes_are_returned_and_judged(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(EXAMPLE, logs / "a.log")
    (logs / "README.md").write_text("# what these are\n")
    gone = tmp_path / "gone.log"
    run = ncclparse.check([str(logs), gone], hardware=A3_MEGA)
    skipped = (
        f"{logs}: skipped 1 file that is not a log (Markdown without benchmark "
        f"output: 1): {logs}/README.md"
    )
    assert [str(e) for e in run.input_failures] == [
        f"{gone}: no such file or directory"
    ]
    assert [(n.source, n.text) for n in run.notes] == [(str(logs), skipped)]
    assert not run.passed
    assert _cases(run) == [
        ("input", str(gone), "fail",
         f"{gone}: no such file or directory (no data is never a pass)"),
        ("input", str(logs), "skip", skipped),
        *_judged(f"{logs}/a.log"),
        SLOW_HOST,
    ]  # fmt: skip


def test_the_hooks_come_in_the_order_a_command_line_shows_them(
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(EXAMPLE, logs / "a.log")
    shutil.copy(EXAMPLE, logs / "b.log")
    (logs / "notes.md").write_text("nothing\n")
    seen: list[Any] = []
    stream = io.StringIO()

    class Line(Progress):
        def close(self) -> None:
            seen.append("closed")
            super().close()

    def progress(total: int) -> Progress:
        seen.append(("progress", total))
        return Line(total, stream)

    ncclparse.check(
        [logs],
        hardware=A3_MEGA,
        on_notes=lambda notes: seen.append(("notes", len(notes))),
        progress=progress,
        on_parsed=lambda result, failures: seen.append(
            ("parsed", len(result.accounting), failures)
        ),
    )
    assert seen == [("notes", 1), ("progress", 2), "closed", ("parsed", 2, [])]


def test_a_history_gives_the_baseline_without_the_inputs_own_logs(
    tmp_path: Path,
) -> None:
    history = tmp_path / "history"
    nights = []
    for n in range(5):  # five other logs: the same runs, other bytes
        night = tmp_path / f"night{n}.log"
        night.write_text(EXAMPLE.read_text() + "\n" * (n + 1))
        nights.append(str(night))
    ingest(ncclparse.parse_many(nights), history, tags={"cluster": "a"})
    ingest(ncclparse.parse_many([str(EXAMPLE)]), history, tags={"cluster": "a"})
    run = ncclparse.check(
        [EXAMPLE], history=history, tags={"cluster": "a"}, hardware=A3_MEGA
    )
    today = dt.datetime.now(dt.UTC).date().isoformat()
    where = f"{EXAMPLE} run 0 ({HOSTS})"
    # Five runs, not six: the input's own log, ingested too, is left out.
    assert [c for c in _cases(run) if c[0] == "history"] == [
        ("history", "baseline", "pass",
         f"5 run(s) with cluster=a, on {today}, make the baseline (up to the 20 "
         "most recent per size, within 30 days)"),
        ("history", f"{SERIES.format('out-of-place')} [{EXAMPLE}#0]", "pass",
         f"{where} {SERIES.format('out-of-place')}: 31 sizes within history noise"),
        ("history", f"{SERIES.format('in-place')} [{EXAMPLE}#0]", "pass",
         f"{where} {SERIES.format('in-place')}: 31 sizes within history noise"),
    ]  # fmt: skip
    assert run.result.tags == {"cluster": "a"}


class _NeverRead:
    """Inputs that fail the test when read."""

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("inputs read before the options were checked")


def test_the_first_night_needs_a_history() -> None:
    with pytest.raises(CheckConfigError) as caught:
        ncclparse.check(_NeverRead(), first_night=True)
    assert str(caught.value) == "--first-night needs --history"


def test_a_missing_history_needs_the_first_night(tmp_path: Path) -> None:
    missing = tmp_path / "history"
    with pytest.raises(CheckConfigError) as caught:
        ncclparse.check(_NeverRead(), history=missing)
    assert str(caught.value) == (
        f"{missing}: history directory not found (on the first night, before "
        "`ingest` has created it, pass --first-night)"
    )
    run = ncclparse.check(
        [EXAMPLE], history=missing, first_night=True, hardware=A3_MEGA
    )
    assert run.passed
    [baseline] = [c for c in run.result.cases if c.name == "baseline"]
    assert (baseline.status, baseline.message) == (
        "skip",
        f"first night (--first-night): no baseline: {missing} (not created yet) "
        "holds no run; tonight is judged without history",
    )


def test_a_bad_hardware_option_is_a_configuration_error() -> None:
    with pytest.raises(CheckConfigError) as caught:
        ncclparse.check([EXAMPLE], hardware=HardwareOptions(intra_bw="fast"))
    assert isinstance(caught.value.__cause__, ProfileError)
    assert str(caught.value) == str(caught.value.__cause__)
    assert "fast" in str(caught.value)


def test_rules_are_applied() -> None:
    rules = rules_from_mapping(
        {"rule": [{"name": "floor", "metric": "busbw_gbps", "threshold": 400}]}
    )
    run = ncclparse.check([EXAMPLE], rules, hardware=A3_MEGA)
    floors = [c for c in run.result.cases if c.rule == "floor"]
    assert [c.status for c in floors] == ["fail", "fail"]
    assert floors[0].message == (
        f"{EXAMPLE} run 0 ({HOSTS}) {SERIES.format('out-of-place')}: busbw_gbps "
        "below 400.0 GB/s at 31 of 31 sizes: 8 GiB (8589934592 B) 338.8 GB/s < "
        "400.0 GB/s, 4 GiB (4294967296 B) 330.6 GB/s < 400.0 GB/s, 2 GiB "
        "(2147483648 B) 318.4 GB/s < 400.0 GB/s, 1 GiB (1073741824 B) 297.9 GB/s < "
        "400.0 GB/s, 512 MiB (536870912 B) 263.7 GB/s < 400.0 GB/s and 26 more "
        "(down to 8 B 0.00011 GB/s < 400.0 GB/s)"
    )
    assert not run.passed


def test_the_documented_example_runs(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    block = code_block("nightly.md", "From Python", "python")
    exec(compile(block, "docs/nightly.md", "exec"), {})
    # What the example's comments say it prints.
    assert capsys.readouterr().out == (
        "True\n"
        "skip history first night (--first-night): no baseline: history (not created "
        "yet) holds no run; tonight is judged without history\n"
        "skip slow-host 1 run(s): too few runs per shape over different hosts\n"
    )
