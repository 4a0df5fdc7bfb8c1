"""The layer contract of pyproject.toml ([tool.importlinter]): parsers -> inputs and
store -> efficiency -> health -> report -> api -> cli, no import from a layer above."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parent.parent


def _lint(root: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """lint-imports' exit status for the package under ``root`` (0: kept)."""
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root))
    for name in [
        m for m in sys.modules if m == "ncclparse" or m.startswith("ncclparse.")
    ]:
        monkeypatch.delitem(sys.modules, name)
    return lint_imports(config_filename=str(root / "pyproject.toml"), no_cache=True)


def test_the_package_keeps_its_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _lint(ROOT, monkeypatch) == 0


def test_an_arrow_up_breaks_the_contract(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The contract is not empty: the parsers importing the report breaks it."""
    shutil.copytree(
        ROOT / "ncclparse",
        tmp_path / "ncclparse",
        ignore=shutil.ignore_patterns("__pycache__", "*.so"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    result = tmp_path / "ncclparse" / "parsers" / "result.py"
    result.write_text(result.read_text() + "\nimport ncclparse.report.render\n")
    assert _lint(tmp_path, monkeypatch) == 1
