"""What the installed package exposes: templates, entry points, version."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ncclparse
from ncclparse.report.render import environment

ROOT = Path(__file__).parent.parent


def test_every_template_is_visible_to_the_renderer() -> None:
    """Installed, the templates are the package ncclparse.templates (package data);
    from an unpacked sdist, the tree's templates/: either way the renderer sees all."""
    in_repo = {
        p.name for p in (ROOT / "templates").iterdir() if p.name != "__init__.py"
    }
    assert in_repo <= set(environment().list_templates())
    assert "report.html" in in_repo


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ncclparse", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == f"ncclparse, version {ncclparse.__version__}\n"
