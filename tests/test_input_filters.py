"""What a directory walk reads: ncclparse's own outputs and other files that are never
a log are skipped and named in the walk's note (never silently, never a failure);
Markdown is read only when it holds benchmark output; --include/--exclude select the
files of a walk, what they leave out counted. A file named on the command line is
always read (docs/robustness.md, "Inputs")."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

import ncclparse
from ncclparse.cli import cli
from ncclparse.errors import InputError
from ncclparse.inputs.walk import Filters, Note, expand, not_a_log
from tests import _derive as derive

ROOT = Path(__file__).parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
IMB = FIXTURES / "imb"
# Every Markdown file that describes logs: none of them is one.
PROSE = [
    *sorted(FIXTURES.glob("*/SOURCES.md")),
    FIXTURES / "expected" / "nccl" / "README.md",
    FIXTURES / "expected" / "nccl_unseen" / "README.md",
    ROOT / "README.md",
    ROOT / "examples" / "README.md",
    ROOT / "docs" / "robustness.md",
    ROOT / "docs" / "nightly.md",
]
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


def _found(items: Sequence[object]) -> list[str]:
    return [item[1] for item in items if isinstance(item, tuple)]


def _outputs(runner: CliRunner, logs: Path, into: Path) -> None:
    """What ncclparse writes, from the logs in ``logs``, into ``into``."""
    into.mkdir(exist_ok=True)
    log = str(logs / "night.log")
    done = runner.invoke(cli, ["check", log, "-q", "--json", str(into / "check.json"),
                               "--junit", str(into / "check.xml"),
                               "--prometheus", str(into / "check.prom"),
                               "--markdown", str(into / "check.md"),
                               "--report", str(into / "check.html")])  # fmt: skip
    assert (into / "check.json").exists(), done.output
    for args in (
        ["parse", log, "-q", "-o", str(into / "m.csv"), "--runs", str(into / "r.csv")],
        ["parse", log, "-q", "-o", str(into / "m.jsonl")],
        ["parse", log, "-q", "-o", str(into / "m.parquet")],
        ["analyze", log, "-o", str(into / "a.csv"), "--fits", str(into / "f.csv")],
        ["report", log, "-q", "-o", str(into / "report.html")],
        ["report", log, "-q", "--format", "md", "-o", str(into / "summary.md")],
        ["compare", log, log, "-o", str(into / "compare.json")],
    ):
        done = runner.invoke(cli, args)
        assert done.exit_code == 0, (args, done.output)


def test_a_walk_skips_ncclparse_outputs_and_names_them(
    runner: CliRunner, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(derive.HEALTHY, logs / "night.log")
    _outputs(runner, logs, logs / "out")
    (logs / "out" / "plot.png").write_bytes(PNG)
    notes: list[Note] = []
    found = list(expand((str(logs),), notes))
    assert found == [(logs / "night.log", str(logs / "night.log"))]
    out = f"{logs}/out"
    assert notes == [
        Note(
            str(logs),
            f"{logs}: skipped 15 files that are not logs (ncclparse CSV/JSONL table: "
            "5, HTML: 2, ncclparse JSON output: 2, Markdown without benchmark output: "
            "2, Prometheus text: 1, XML: 1, Parquet/Arrow table: 1, image: 1): "
            f"{out}/a.csv, {out}/check.html, {out}/check.json, {out}/check.md, "
            f"{out}/check.prom and 10 more",
        )
    ]
    # Named on the command line, each is read, and is not a log.
    result = ncclparse.parse_many([logs / "out" / "check.json", logs / "night.log"])
    [failure] = result.failures
    assert isinstance(failure, ncclparse.UnknownLogFormatError)
    assert failure.source == str(logs / "out" / "check.json")
    assert result.measurements.num_rows == 62


def test_the_cli_says_what_it_skipped_and_still_exits_0(
    runner: CliRunner, tmp_path: Path
) -> None:
    shutil.copy(derive.HEALTHY, tmp_path / "night.log")
    (tmp_path / "night.html.gz").write_bytes(b"\x1f\x8b not even gzip")
    shutil.copy(IMB / "SOURCES.md", tmp_path / "SOURCES.md")
    result = runner.invoke(cli, ["parse", str(tmp_path), "-q"])
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        f"Note: {tmp_path}: skipped 2 files that are not logs (Markdown without "
        f"benchmark output: 1, HTML: 1): {tmp_path}/SOURCES.md, "
        f"{tmp_path}/night.html.gz\n"
    )
    assert len(result.stdout.splitlines()) == 63


def test_nccl_tests_json_logs_are_read_and_own_json_is_told_by_its_content(
    tmp_path: Path,
) -> None:
    shutil.copytree(FIXTURES / "nccl_json", tmp_path / "j")
    (tmp_path / "j" / "check.json").write_text('{"format": "ncclparse-check"}\n')
    # A JSON file that only mentions ncclparse is not ncclparse's.
    (tmp_path / "j" / "zz.json").write_text('{"note": "format ncclparse-check"}\n')
    notes: list[Note] = []
    found = _found(list(expand((str(tmp_path / "j"),), notes)))
    logs = sorted(str(p) for p in (FIXTURES / "nccl_json").glob("*.json"))
    assert [f for f in found if f.endswith(".json")] == [
        *(str(tmp_path / "j" / Path(p).name) for p in logs),
        str(tmp_path / "j" / "zz.json"),
    ]
    assert len(logs) == 8  # fixtures/nccl_json/SOURCES.md lists them
    [note] = notes
    assert note.text == (
        f"{tmp_path / 'j'}: skipped 2 files that are not logs (Markdown without "
        f"benchmark output: 1, ncclparse JSON output: 1): {tmp_path}/j/SOURCES.md, "
        f"{tmp_path}/j/check.json"
    )


@pytest.mark.parametrize("prose", PROSE, ids=lambda p: str(p.relative_to(ROOT)))
def test_markdown_prose_is_never_a_log(prose: Path, tmp_path: Path) -> None:
    assert not_a_log(prose) == "Markdown without benchmark output"
    with pytest.raises(ncclparse.UnknownLogFormatError):
        ncclparse.parse(prose)  # named explicitly: read, and not a log


def test_sources_md_is_no_imb_log_though_it_names_the_program() -> None:
    text = (IMB / "SOURCES.md").read_text()
    assert '"Intel(R) MPI Benchmarks 2021.8, MPI-1 part"' in text
    with pytest.raises(ncclparse.UnknownLogFormatError, match=r"SOURCES\.md:1: not"):
        ncclparse.parse(IMB / "SOURCES.md")


@pytest.mark.parametrize("log", sorted(IMB.glob("*.log")), ids=lambda p: p.name)
def test_every_imb_log_is_still_read_as_imb(log: Path) -> None:
    runs = ncclparse.parse(log).runs
    assert runs.num_rows > 0
    assert set(runs.column("tool").to_pylist()) == {"imb"}


def test_a_pasted_log_in_markdown_is_read(tmp_path: Path) -> None:
    """A GitHub issue saved as Markdown, the log pasted in a fenced block."""
    log = derive.healthy()
    (tmp_path / "issue.md").write_text(
        f"# all_reduce is slow on 2 nodes\n\nOutput:\n\n```\n{log}```\n\nThanks!\n"
    )
    shutil.copy(IMB / "SOURCES.md", tmp_path / "SOURCES.md")
    notes: list[Note] = []
    assert _found(list(expand((str(tmp_path),), notes))) == [str(tmp_path / "issue.md")]
    assert len(notes) == 1
    assert ncclparse.parse(tmp_path / "issue.md").measurements.num_rows == 62


def test_a_directory_of_non_logs_only_is_an_error_that_counts_them(
    tmp_path: Path,
) -> None:
    (tmp_path / "report.html").write_text("<html></html>\n")
    (tmp_path / ".hidden.log").write_text("x\n")
    (tmp_path / "a.log").write_text("x\n")
    notes: list[Note] = []
    found = list(expand((str(tmp_path),), notes, filters=Filters(exclude=("a.*",))))
    assert [str(e) for e in found] == [
        f"{tmp_path}: directory holds no log file (1 hidden entry, 1 file that is not "
        "a log and 1 file matching --exclude skipped)"
    ]
    assert [n.text for n in notes] == [
        f"{tmp_path}: skipped 1 file that is not a log (HTML: 1): "
        f"{tmp_path}/report.html; 1 file matching --exclude"
    ]


def _tree(root: Path) -> None:
    for name in ("c.log", "node1/a.log", "node1/b.txt", "node2/a.log", "old/x.log"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(derive.HEALTHY, root / name)


@pytest.mark.parametrize(
    ("include", "exclude", "read", "said"),
    [
        ((), (), ["c.log", "node1/a.log", "node1/b.txt", "node2/a.log", "old/x.log"],
         None),
        (("*.log",), (), ["c.log", "node1/a.log", "node2/a.log", "old/x.log"],
         "1 file not matching --include"),
        # A name pattern and a relative-path pattern; a directory is not entered.
        ((), ("b.txt", "node2/*", "old/"), ["c.log", "node1/a.log"],
         "2 files and 1 directory matching --exclude"),
        (("node*/*",), ("*.txt",), ["node1/a.log", "node2/a.log"],
         "2 files not matching --include; 1 file matching --exclude"),
    ],
)  # fmt: skip
def test_include_and_exclude_select_the_files_of_a_walk(
    tmp_path: Path,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    read: list[str],
    said: str | None,
) -> None:
    _tree(tmp_path)
    notes: list[Note] = []
    filters = Filters(include, exclude)
    found = list(expand((str(tmp_path),), notes, filters=filters))
    assert _found(found) == [str(tmp_path / name) for name in read]
    assert [n.text for n in notes] == ([f"{tmp_path}: skipped {said}"] if said else [])


def test_filters_leave_files_named_on_the_command_line_alone(
    runner: CliRunner, tmp_path: Path
) -> None:
    _tree(tmp_path)
    named = tmp_path / "node1" / "b.txt"
    result = runner.invoke(
        cli,
        ["parse", str(tmp_path), str(named), "--include", "*.log",
         "--exclude", "node*", "--exclude", "old"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"Note: {tmp_path}: skipped 3 directories matching --exclude",
        f"{tmp_path / 'c.log'}: nccl-tests, 1 run (1 complete), 62 rows, 0 warnings",
        f"{named}: nccl-tests, 1 run (1 complete), 62 rows, 0 warnings",
    ]


@pytest.mark.parametrize("command", ["parse", "analyze", "report"])
def test_the_commands_that_read_logs_take_the_filters(
    runner: CliRunner, command: str, tmp_path: Path
) -> None:
    _tree(tmp_path)
    out = tmp_path / ("out.html" if command == "report" else "out.csv")
    result = runner.invoke(
        cli,
        [command, str(tmp_path), "--exclude", "node?", "--include", "*.log",
         "--exclude", "old", "-o", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == (
        f"Note: {tmp_path}: skipped 3 directories matching --exclude"
    )
    assert f"{tmp_path / 'c.log'}: nccl-tests" in result.stderr
    assert "node1" not in result.stderr.split("\n", 1)[1]


def test_an_include_that_matches_nothing_leaves_a_directory_without_a_log(
    tmp_path: Path,
) -> None:
    _tree(tmp_path)
    found = list(expand((str(tmp_path),), [], filters=Filters(include=("*.gz",))))
    assert [str(e) for e in found if isinstance(e, InputError)] == [
        f"{tmp_path}: directory holds no log file (5 files not matching --include "
        "skipped)"
    ]


def test_a_rules_file_beside_the_logs_is_skipped() -> None:
    """examples/ ships a rules file: `ncclparse parse examples/` read it as a log
    and failed (not a recognised benchmark log)."""
    examples = Path(__file__).parent.parent / "examples"
    notes: list[Note] = []
    found = [
        item[1] for item in expand((str(examples),), notes) if isinstance(item, tuple)
    ]
    assert found == [
        f"{examples}/{name}"
        for name in (
            "all_reduce_16rank_2node_h100.log",
            "all_reduce_failed_midrun.log",
            "alltoall_8gpu_a100.log",
        )
    ]
    assert notes == [
        Note(
            str(examples),
            f"{examples}: skipped 2 files that are not logs (Markdown without "
            f"benchmark output: 1, TOML: 1): {examples}/README.md, "
            f"{examples}/nightly-rules.toml",
        )
    ]
