"""One side of ``compare``: its measurements, each row named by its run's identity.

A run's identity is what the nightly runs it as: its host set (the hosts of its
ranks, sorted, joined by "_": ``node01_node03``; host names have no "_"), or, when
the log names no host, the log's path within the directory given (its file name for
a file; a table's ``source``). Logs are read in bounded memory: the repeats of a
point are merged, as ``report`` and ``analyze`` do
(:class:`~ncclparse.inputs.points.PointTable`), so a long ``-N`` log costs its
points, not its rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ncclparse import schema
from ncclparse._arrow import distinct_rows, key_codes
from ncclparse.inputs.points import ANALYZE_LIMITS, PointTable
from ncclparse.inputs.walk import Filters, read_side

__all__ = ["IDENTITY", "load_side", "run_identity"]

IDENTITY = "identity"  # the column load_side adds (health.compare reads it)


def run_identity(hosts: Iterable[str | None] | None) -> str:
    """The host set of a run's ranks ("node01_node03"); "" when none is known."""
    return "_".join(sorted({h for h in hosts or () if h}))


def load_side(path: str, filters: Filters | None = None, *, jobs: int = 1) -> pa.Table:
    """The ``measurements`` of ``path`` (as
    :func:`~ncclparse.inputs.walk.load_measurements` reads it: logs, a table or a
    history) with an :data:`IDENTITY` column (see the module doc).

    Raises NcclParseError naming the input when it cannot be read, and
    TooManyPoints past ANALYZE_LIMITS' distinct points.
    """
    points = PointTable(ANALYZE_LIMITS)
    table, runs = read_side(path, filters, jobs=jobs, on_batch=points.add)
    if runs is None:  # a table or a history: already in memory
        names = _identities(table) if "hosts" in table.column_names else None
        table = table.select(list(schema.MEASUREMENT_COLUMNS))
        return table.append_column(
            IDENTITY, table["source"] if names is None else names
        )
    table = points.table()
    root = path if os.path.isdir(path) else os.path.dirname(path)
    identity = {
        (source, run): run_identity(hosts) or _relative(str(source), root)
        for source, run, hosts in zip(
            runs["source"].to_pylist(),
            runs["run"].to_pylist(),
            runs["hosts"].to_pylist(),
            strict=True,
        )
    }
    named = [
        identity.get((source, run), source)
        for source, run in zip(
            table["source"].to_pylist(), table["run"].to_pylist(), strict=True
        )
    ]
    return table.append_column(IDENTITY, pa.array(named, pa.string()))


def _identities(table: pa.Table) -> pa.DictionaryArray[Any, Any]:
    """Each row's run identity, worked out once per run (``ingest_key`` and
    ``run``: a history's rows carry their run's hosts): its hosts, else its
    source."""
    first, run_of = distinct_rows([key_codes(table[k]) for k in ("ingest_key", "run")])
    names = [
        run_identity(hosts) or str(source)
        for hosts, source in zip(
            table["hosts"].take(first).to_pylist(),
            table["source"].take(first).to_pylist(),
            strict=True,
        )
    ]
    distinct, code = np.unique(np.asarray(names, dtype=object), return_inverse=True)
    return pa.DictionaryArray.from_arrays(
        pa.array(code.ravel()[run_of], pa.int32()),
        pa.array(distinct.tolist(), pa.string()),
    )


def _relative(source: str, root: str) -> str:
    """``source``'s path within ``root`` ("/" separated), else itself."""
    try:
        relative = os.path.relpath(source, root or ".")
    except ValueError:  # another drive on Windows
        return source
    if relative.startswith(".."):
        return source
    return Path(relative).as_posix()
