"""What the installed package exposes: templates, entry points, version."""

from __future__ import annotations

import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import ncclparse

ROOT = Path(__file__).parent.parent


def test_every_template_is_visible_through_the_package() -> None:
    shipped = {p.name for p in files("ncclparse.templates").iterdir() if p.is_file()}
    in_repo = {p.name for p in (ROOT / "templates").iterdir() if p.is_file()}
    assert in_repo <= shipped


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ncclparse", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == f"ncclparse, version {ncclparse.__version__}\n"
