"""``ncclparse parse`` end to end: inputs, outputs, summaries and exit status."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner

from ncclparse import schema
from ncclparse.cli import cli
from tests.conftest import FIXTURES

COMPLETE = (
    FIXTURES / "nccl" / "repo-ztan-a3mega_allreduce_16rank_2node_h100_complete.log"
)


def test_parse_writes_parquet_and_runs(runner: CliRunner, tmp_path: Path) -> None:
    out, runs = tmp_path / "m.parquet", tmp_path / "r.parquet"
    result = runner.invoke(
        cli, ["parse", str(COMPLETE), "-o", str(out), "--runs", str(runs)]
    )
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == (
        f"{COMPLETE}: nccl-tests, 1 run (1 complete), 62 rows, 0 warnings\n"
    )
    table = pq.read_table(out)
    assert table.num_rows == 62
    assert table.schema.metadata[schema.VERSION_KEY] == b"1"
    assert (
        table.schema.remove_metadata() == schema.MEASUREMENTS_SCHEMA.remove_metadata()
    )
    assert pq.read_table(runs).column("hosts").to_pylist()[0][8] == "ztan-mig-gq73"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.parquet", "r.parquet"]


def test_standard_input_to_csv_on_standard_output(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["parse", "-q"], input=COMPLETE.read_bytes())
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith('"source","run","line","tool"')
    assert lines[1].startswith(
        '"-",0,32,"nccl-tests",,"all_reduce","out-of-place",8,8,2,'
    )
    assert len(lines) == 63
    assert result.stderr == ""


def test_jsonl_runs_keep_lists_and_maps(runner: CliRunner, tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    result = runner.invoke(
        cli,
        [
            "parse",
            str(COMPLETE),
            "-q",
            "-o",
            str(tmp_path / "m.csv"),
            "--runs",
            str(runs),
        ],
    )
    assert result.exit_code == 0
    (run,) = [json.loads(line) for line in runs.read_text().splitlines()]
    assert run["params"]["maxBytes"] == "8589934592"
    assert run["nnodes"] == 2
    assert len(run["hosts"]) == 16


def test_bad_and_missing_inputs_fail_but_the_rest_is_written(
    runner: CliRunner, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    shutil.copy(COMPLETE, logs / "sub" / "good.log")
    (logs / "notes.txt").write_text("hello\n")
    (logs / ".hidden").write_text("ignored\n")
    out = tmp_path / "m.parquet"
    result = runner.invoke(
        cli, ["parse", str(logs), str(tmp_path / "missing.log"), "-o", str(out)]
    )
    assert result.exit_code == 1
    assert pq.read_table(out).num_rows == 62
    assert result.stderr.splitlines() == [
        f"{logs}/sub/good.log: nccl-tests, 1 run (1 complete), 62 rows, 0 warnings",
        f"Error: {tmp_path}/missing.log: no such file or directory",
        f"Error: {logs}/notes.txt:1: not a recognised benchmark log (nccl-tests, "
        "rccl-tests, oneCCL benchmark or IMB); first line: 'hello'",
    ]


def test_unknown_extension_is_an_error_and_writes_nothing(
    runner: CliRunner, tmp_path: Path
) -> None:
    result = runner.invoke(
        cli, ["parse", str(COMPLETE), "-o", str(tmp_path / "m.xlsx")]
    )
    assert result.exit_code == 1
    assert "cannot tell the format from the extension '.xlsx'" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_usage_error_exit_status(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["parse", "--format", "xml", str(COMPLETE)])
    assert result.exit_code == 2


def test_every_command_has_help(runner: CliRunner) -> None:
    for name, command in cli.commands.items():
        assert command.help, name
        assert runner.invoke(cli, [name, "--help"]).exit_code == 0
