"""Names from the file system are shown escaped in every output of ``check``: one
line per name, control characters as escapes, and a name that is not UTF-8 keeps
its bytes (``\\xe9``), so that a log named to look like a verdict forges nothing
and every file can still be identified (:func:`ncclparse.formatting.shown_name`)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclparse.cli.app import cli
from ncclparse.cli.options import command_line
from tests import _derive as derive

FORGED = "a\nFAIL: 0 failed, 99 passed\nb.log"
NAMES = {
    FORGED: "a\\nFAIL: 0 failed, 99 passed\\nb.log",
    "bell\x07\x08.log": "bell\\x07\\x08.log",
    os.fsdecode(b"latin\xe9.log"): "latin\\xe9.log",
    os.fsdecode(b"latin\xe8.log"): "latin\\xe8.log",  # told apart from the one above
}


def test_hostile_names_are_escaped_in_every_output(
    runner: CliRunner, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in NAMES:
        shutil.copy(derive.HEALTHY, logs / name)
    # Derived: cut after 1 MiB, so that it fails and the Markdown names it too.
    (logs / os.fsdecode(b"latin\xe9.log")).write_text(
        derive.cut(derive.healthy(), 2**20)
    )
    out = {k: tmp_path / f"out.{k}" for k in ("xml", "json", "md", "html", "prom")}
    result = runner.invoke(
        cli,
        ["check", str(logs), "-v", "--junit", str(out["xml"]), "--json",
         str(out["json"]), "--markdown", str(out["md"]), "--report",
         str(out["html"]), "--prometheus", str(out["prom"])],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    shown = {f"{logs}/{escaped}" for escaped in NAMES.values()}
    # stdout and stderr: one line per case and per input, none forged.
    lines = result.stdout.splitlines()
    assert "FAIL: 0 failed, 99 passed" not in lines
    assert [line for line in lines if "b.log" in line] == [
        line for line in lines if f"{logs}/{NAMES[FORGED]}" in line
    ]
    assert lines[-1].startswith(("PASS: ", "FAIL: "))
    assert sorted(line.split(": nccl-tests")[0] for line in result.stderr.splitlines()
                  if ": nccl-tests," in line) == sorted(shown)  # fmt: skip
    # JSON and JUnit: each log by its escaped name, no U+FFFD.
    document = json.loads(out["json"].read_text())
    assert {c["source"] for c in document["cases"] if c["rule"] == "integrity"} == (
        shown
    )
    names = {c.get("name") for c in ET.parse(out["xml"]).iter("testcase")}
    assert {f"{n} run 0" for n in NAMES.values()} <= names  # relative to logs/
    for path in out.values():
        text = path.read_text(encoding="utf-8")
        assert "\ufffd" not in text
        assert not [c for c in text if ord(c) < 32 and c not in "\n\t"], path.name
    assert "latin\\\\xe9.log" in out["md"].read_text()  # Markdown's own backslash


def test_the_command_line_in_a_report_footer_is_shown_escaped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A name that is not UTF-8 given as an argument ended `report` with a
    UnicodeEncodeError traceback when the page was written."""
    argv = ["/usr/bin/ncclparse", "report", os.fsdecode(b"latin\xe9.log"), "a\nb.log"]
    monkeypatch.setattr(sys, "argv", argv)
    assert command_line() == "ncclparse report 'latin\\xe9.log' 'a\\nb.log'"


# A tool's error line with a terminal's escapes in it: clear the screen (ESC [2J), set
# the window title (OSC ... BEL), a C1 control sequence introducer and a right-to-left
# override that reverses what follows it on screen.
HOSTILE_ERROR = (
    "ztan-mig-235z: Test NCCL failure common.cu:892 'unhandled system error "
    "\x1b[2J\x1b]0;pwned\x07 \x9b31m \u202egol.exe'"
)
HOSTILE_SHOWN = (
    "ztan-mig-235z: Test NCCL failure common.cu:892 'unhandled system error "
    "\\x1b[2J\\x1b]0;pwned\\x07 \\x9b31m \\u202egol.exe'"
)


def _unsafe(text: str) -> list[str]:
    """The characters of ``text`` a terminal or a CI page would act on."""
    return [c for c in text if not c.isprintable() and c not in "\n\t"]


def test_hostile_log_text_is_escaped_in_every_output(
    runner: CliRunner, tmp_path: Path
) -> None:
    """A log line quoted in the integrity case, and a host name from a Rank line,
    reached stdout, the Markdown summary, the JUnit file and the report raw."""
    rows = derive.healthy().splitlines(keepends=True)
    last_row = max(i for i, line in enumerate(rows) if derive._ROW.match(line))
    rows.insert(last_row + 1, HOSTILE_ERROR + "\n")
    log = tmp_path / "failed.log"
    log.write_text("".join(rows).replace("ztan-mig-gq73", "ztan\x07gq73"))
    out = {k: tmp_path / f"out.{k}" for k in ("xml", "json", "md", "html")}
    result = runner.invoke(
        cli,
        ["check", str(log), "-v", "--junit", str(out["xml"]), "--json",
         str(out["json"]), "--markdown", str(out["md"]), "--report",
         str(out["html"])],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    integrity = next(
        line for line in result.stdout.splitlines() if line.startswith("FAIL integ")
    )
    assert integrity == (
        f"FAIL integrity: {log} run 0 (hosts ztan-mig-235z, ztan\\x07gq73) "
        f"all_reduce: run failed; tool reported errors: line {last_row + 2}: "
        f"{HOSTILE_SHOWN}"
    )
    assert _unsafe(result.output) == []
    for path in out.values():
        assert _unsafe(path.read_text(encoding="utf-8")) == [], path.name
    # Markdown backslashes the escapes' own backslash, so they show as typed.
    assert "\\\\x1b\\[2J" in out["md"].read_text()
    cases = json.loads(out["json"].read_text())["cases"]
    [failed] = [c for c in cases if c["rule"] == "integrity"]
    assert failed["message"] == integrity.removeprefix("FAIL integrity: ")
    assert "<td>ztan-mig-235z (8 ranks), ztan\\x07gq73 (8 ranks)</td>" in (
        out["html"].read_text()
    )
