"""Configuration errors end a command before any input is read (exit 2), and a
command that could read nothing leaves an existing output as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import ncclparse
from ncclparse.cli.app import cli

EXAMPLE = str(
    Path(__file__).resolve().parent.parent
    / "examples"
    / "all_reduce_16rank_2node_h100.log"
)
UNKNOWN = "Error: unknown hardware profile 'h10O': use one of "


@pytest.mark.parametrize("command", ["report", "analyze"])
def test_a_misspelt_profile_is_exit_2_before_any_log_is_read(
    command: str, tmp_path: Path
) -> None:
    out = tmp_path / ("r.html" if command == "report" else "a.parquet")
    result = CliRunner().invoke(
        cli, [command, EXAMPLE, "--profile", "h10O", "-o", str(out)]
    )
    assert result.exit_code == 2
    assert UNKNOWN in result.stderr
    assert "nccl-tests, 1 run" not in result.stderr  # the log was not parsed
    assert not out.exists()


def test_a_report_of_nothing_leaves_the_last_page(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text("last night's report")
    result = CliRunner().invoke(
        cli, ["report", str(tmp_path / "nosuch.log"), "-o", str(page)]
    )
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"Error: {tmp_path / 'nosuch.log'}: no such file or directory",
        "Error: no report written: no input could be read",
    ]
    assert page.read_text() == "last night's report"


def test_a_report_with_one_readable_input_is_written(tmp_path: Path) -> None:
    """Nothing is lost: the page of what could be read names what could not."""
    page = tmp_path / "report.html"
    missing = tmp_path / "nosuch.log"
    result = CliRunner().invoke(cli, ["report", EXAMPLE, str(missing), "-o", str(page)])
    assert result.exit_code == 1
    assert str(missing) in page.read_text()


def test_dir_lists_the_public_names() -> None:
    names = dir(ncclparse)
    assert names == sorted(ncclparse.__all__)
    assert {"parse", "parse_many", "check", "__version__"} <= set(names)
    assert not {"Any", "TYPE_CHECKING", "importlib", "annotations"} & set(names)


def test_a_profile_of_another_gpu_is_not_applied() -> None:
    """--profile h100 on an A100 log: judged against H100 figures it would FAIL;
    the profile is not applied to it and the assumptions say why."""
    from ncclparse.efficiency import HardwareOptions, analyze

    log = Path(__file__).parent / "fixtures/nccl_info/efa-2node-16gpu-a100-p4d-eks.log"
    parsed = ncclparse.parse(log)
    got = analyze(parsed.measurements, HardwareOptions(profile="h100"), parsed.runs)
    assert got.rows.column("ideal_busbw_gbps").null_count == got.rows.num_rows
    assert (
        "profile h100 not applied to A100-SXM4-40GB rows: it describes another GPU; "
        "pass a profile for that GPU to judge them"
    ) in got.assumptions
    same = analyze(parsed.measurements, HardwareOptions(profile="aws-p4d"), parsed.runs)
    assert same.rows.column("ideal_busbw_gbps").null_count < same.rows.num_rows


@pytest.mark.parametrize(
    ("option", "content", "reason"),
    [
        ("--profile", b"intra_gbps = true\ngpus_per_node = 8\n",
         "intra_gbps: expected a number or a string with a unit, got true (a "
         "boolean)"),
        ("--profile", b'base = "h100"\nsources = 5\n',
         "sources: expected a table, got 5 (an integer)"),
        ("--profile", b'base = "h100"\n\xff = 1\n', ":2: not UTF-8 text (byte 0xff)"),
        ("--rules", b"# r\xe9gles\n", ":1: not UTF-8 text (byte 0xe9)"),
        ("--rules", b"[history]\nmax_age_days = 9223372036854775807\n",
         "[history] max_age_days: expected a whole number from 0 to 3650, got "
         "9223372036854775807"),
    ],
)  # fmt: skip
def test_a_bad_settings_file_is_exit_2_naming_file_and_key(
    tmp_path: Path, option: str, content: bytes, reason: str
) -> None:
    """Each was read as 1 GB/s (every log passed) or ended as an internal error
    (exit 1, "a bug in ncclparse")."""
    path = tmp_path / "settings.toml"
    path.write_bytes(content)
    out = tmp_path / "out.json"
    result = CliRunner().invoke(
        cli, ["check", EXAMPLE, option, str(path), "--json", str(out)]
    )
    assert result.exit_code == 2, result.output
    said = " ".join(result.stderr.split())
    assert f"{path}{reason}" in said or f"{path}: {reason}" in said
    assert "bug in ncclparse" not in said
