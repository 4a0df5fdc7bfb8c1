"""Shared fixtures: where the real logs and their golden expectations live."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

FIXTURES = Path(__file__).parent / "fixtures"
NCCL_LOGS = sorted((FIXTURES / "nccl").glob("*.log"))


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()
