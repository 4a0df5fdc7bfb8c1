"""Parsing many sources into one result, in this process or in worker processes.

:func:`parse_sources` is what ``ncclparse.parse_many`` and every command run: a
source that fails is kept as a failure and the others go on; each source is reported
to a :class:`~ncclparse.inputs.progress.Progress` as it is read or merged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pyarrow as pa

from ncclparse.errors import NcclParseError
from ncclparse.inputs.progress import Progress, tracked
from ncclparse.parsers import Collector, ParseResult, Source, parse_source, result_of


def parse_sources(
    sources: Iterable[Source | tuple[Source, str | None]],
    on_batch: Callable[[pa.RecordBatch], None] | None,
    jobs: int,
    progress: Progress | None,
) -> ParseResult:
    """``ncclparse.parse_many``, each source reported to ``progress`` (if any) as
    it is read (:func:`~ncclparse.inputs.progress.tracked`) or, parsed by a worker,
    once merged."""
    if jobs < 1:
        raise ValueError(f"jobs must be 1 or more, not {jobs}")
    collector = Collector(on_batch)
    failures: list[NcclParseError] = []

    def here(source: Source, name: str | None) -> None:
        try:
            parse_source(collector, source, name)
        except NcclParseError as exc:
            failures.append(exc)

    items = (item if isinstance(item, tuple) else (item, None) for item in sources)
    if jobs == 1:  # lazily: a tracked source is opened when its turn comes
        for source, name in items if progress is None else tracked(items, progress):
            here(source, name)
    else:
        from ncclparse.inputs import workers

        workers.parse_in_workers(
            items, jobs, here, workers.merged_into(collector, failures), progress
        )
    return result_of(collector, tuple(failures))
