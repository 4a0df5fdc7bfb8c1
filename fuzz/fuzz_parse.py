"""Coverage-guided fuzzing of every parser with atheris (not part of the test suite).

    pip install atheris -e .
    python fuzz/fuzz_parse.py fuzz/corpus -max_total_time=600

The corpus directory is seeded with the real logs of tests/fixtures on first use. A
crash is any exception other than an NcclParseError, a result whose tables do not
conform to the schema or whose line accounting does not add up, or (with the native
scanner built) tables, accounting or error that differ from those of the Python
path; atheris then writes the input to ./crash-<hash>.
"""

from __future__ import annotations

import io
import shutil
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import atheris

# ncclparse loads its parsers lazily: import them here so that they are instrumented.
with atheris.instrument_imports():
    import ncclparse
    import ncclparse.api
    import ncclparse.parsers
    from ncclparse import schema
    from ncclparse.parsers import _lines

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def one_input(data: bytes) -> None:
    try:
        result = ncclparse.parse(io.BytesIO(data), name="fuzz")
    except ncclparse.NcclParseError as exc:
        _same_in_python(data, str(exc))
        return
    _same_in_python(data, _tables(result))
    schema.conform(result.measurements, schema.MEASUREMENTS_SCHEMA)
    schema.conform(result.runs, schema.RUNS_SCHEMA)
    lines = len(data.decode("utf-8", errors="replace").splitlines())
    counted = sum(result.accounting["fuzz"].values())
    # str.splitlines also splits at a few separators the reader keeps inside lines.
    if counted > lines:
        raise AssertionError(f"{counted} lines accounted for, {lines} in the input")


def _tables(result: Any) -> Any:
    # NaN is not equal to itself: compare the printed tables.
    return (
        str(result.measurements.to_pylist()),
        str(result.runs.to_pylist()),
        result.accounting,
    )


def _same_in_python(data: bytes, native: Any) -> None:
    """The Python path (no scanner, no row reader, no native columns) gives what the
    native one gave (which read the input's bytes: io.BytesIO is seekable)."""
    if _lines.scan_block is None:
        return
    with (
        mock.patch.object(_lines, "scan_block", None),
        mock.patch.object(_lines, "read_rows", None),
        mock.patch.object(_lines, "dict_columns", None),
    ):
        try:
            python: Any = _tables(ncclparse.parse(io.BytesIO(data), name="fuzz"))
        except ncclparse.NcclParseError as exc:
            python = str(exc)
    if python != native:
        raise AssertionError("the native and the Python path differ")


def _seed(corpus: Path) -> None:
    if corpus.exists() and any(corpus.iterdir()):
        return
    corpus.mkdir(parents=True, exist_ok=True)
    for path in sorted(FIXTURES.glob("*/*")):
        if path.suffix in (".log", ".csv", ".json") and path.stat().st_size < 64_000:
            shutil.copy(path, corpus / f"{path.parent.name}-{path.name}")


if __name__ == "__main__":
    corpora = [Path(a) for a in sys.argv[1:] if not a.startswith("-")]
    for corpus in corpora[:1]:
        _seed(corpus)
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
