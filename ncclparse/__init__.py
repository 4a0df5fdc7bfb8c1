"""ncclparse: collective-communication benchmark logs into Arrow tables.

>>> import ncclparse
>>> result = ncclparse.parse("all_reduce.log")      # doctest: +SKIP
>>> result.measurements.to_pandas()                  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ncclparse._version import __version__
from ncclparse.errors import (
    InputError,
    NcclParseError,
    ProfileError,
    SchemaError,
    UnknownLogFormatError,
)

if TYPE_CHECKING:
    from ncclparse.api import ParseResult, parse, parse_many
    from ncclparse.health.nightly import CheckConfigError, CheckRun, check
    from ncclparse.report.notebook import plot_bandwidth, plot_efficiency, plot_time
    from ncclparse.schema import MEASUREMENTS_SCHEMA, RUNS_SCHEMA, SCHEMA_VERSION

# pyarrow, pandas and numpy load on first use, so that `ncclparse --help` and the
# error classes stay cheap to import.
_LAZY = {
    "ParseResult": "ncclparse.api",
    "parse": "ncclparse.api",
    "parse_many": "ncclparse.api",
    # the nightly check: parse, read the history, judge (what `ncclparse check` does)
    "check": "ncclparse.health.nightly",
    "CheckConfigError": "ncclparse.health.nightly",
    "CheckRun": "ncclparse.health.nightly",
    # matplotlib charts for notebooks (matplotlib loads only when one is asked for)
    "plot_bandwidth": "ncclparse.report.notebook",
    "plot_efficiency": "ncclparse.report.notebook",
    "plot_time": "ncclparse.report.notebook",
    "MEASUREMENTS_SCHEMA": "ncclparse.schema",
    "RUNS_SCHEMA": "ncclparse.schema",
    "SCHEMA_VERSION": "ncclparse.schema",
    "FAILURES_SCHEMA": "ncclparse.inputs.lake",
    "empty_frame": "ncclparse.inputs.lake",
    "parse_contents": "ncclparse.inputs.lake",
    "parse_path": "ncclparse.inputs.lake",
    "spark_ddl": "ncclparse.inputs.lake",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ncclparse' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (``dir(ncclparse)``, notebooks' completion), lazy ones too."""
    return sorted(__all__)


__all__ = [
    "FAILURES_SCHEMA",
    "MEASUREMENTS_SCHEMA",
    "RUNS_SCHEMA",
    "SCHEMA_VERSION",
    "CheckConfigError",
    "CheckRun",
    "InputError",
    "NcclParseError",
    "ParseResult",
    "ProfileError",
    "SchemaError",
    "UnknownLogFormatError",
    "__version__",
    "check",
    "empty_frame",
    "parse",
    "parse_contents",
    "parse_many",
    "parse_path",
    "plot_bandwidth",
    "plot_efficiency",
    "plot_time",
    "spark_ddl",
]
