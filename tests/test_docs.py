"""The documented recipes run: every Python block of the README executes as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_readme_python_blocks_run(monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _BLOCK.findall((ROOT / "README.md").read_text())
    assert blocks, "the README has a library example"
    monkeypatch.chdir(ROOT)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
