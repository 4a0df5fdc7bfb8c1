"""ncclparse: collective-communication benchmark logs into Arrow tables.

>>> import ncclparse
>>> result = ncclparse.parse("all_reduce.log")      # doctest: +SKIP
>>> result.measurements.to_pandas()                  # doctest: +SKIP
"""

from __future__ import annotations

from .api import ParseResult, parse, parse_many
from .errors import (
    InputError,
    LogFormatError,
    NcclParseError,
    ProfileError,
    SchemaError,
    UnknownLogFormatError,
)
from .schema import MEASUREMENTS_SCHEMA, RUNS_SCHEMA, SCHEMA_VERSION

__version__ = "0.1.0"

__all__ = [
    "MEASUREMENTS_SCHEMA",
    "RUNS_SCHEMA",
    "SCHEMA_VERSION",
    "InputError",
    "LogFormatError",
    "NcclParseError",
    "ParseResult",
    "ProfileError",
    "SchemaError",
    "UnknownLogFormatError",
    "parse",
    "parse_many",
]
