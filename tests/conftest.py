"""Shared fixtures: where the real logs and their golden expectations live."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import settings

# No property test has a deadline: a wall-clock limit is not what they check, and on
# a loaded 2-core machine hypothesis failed slow examples (then printed huge inputs).
settings.register_profile("ncclparse", deadline=None)
settings.load_profile("ncclparse")

FIXTURES = Path(__file__).parent / "fixtures"
NCCL_LOGS = sorted((FIXTURES / "nccl").glob("*.log"))


def string_lists(table: pa.Table, name: str) -> list[list[str]]:
    """A non-null list<string> column (errors, warnings) as Python lists."""
    # to_pylist() is typed list[Any | None]; the runs schema makes these non-null.
    return cast("list[list[str]]", table.column(name).to_pylist())


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()
