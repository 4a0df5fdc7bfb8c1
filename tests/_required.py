"""Tests of an outside tool (Spark, promtool) skip where it is missing, unless the run
says the tool must be there: ``NCCLPARSE_REQUIRE=spark,promtool`` (CI sets it once it
has installed them) turns such a skip into a failure, so that a CI log that says
"passed" means the tool really ran."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["missing"]


def missing(tool: str, why: str) -> NoReturn:
    """``tool`` is not usable here, because ``why``: skip, or fail when required."""
    if tool in os.environ.get("NCCLPARSE_REQUIRE", "").split(","):
        pytest.fail(f"{tool} is required here (NCCLPARSE_REQUIRE) but {why}")
    pytest.skip(why)
