"""Parsing many sources into one result, in this process or in worker processes.

:func:`parse_sources` is what ``ncclparse.parse_many`` and every command run: a
source that fails is kept as a failure and the others go on; each source is reported
to a :class:`~ncclparse.inputs.progress.Progress` as it is read or merged.
:func:`read_inputs` does it for what a user named: files, directories, URIs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import pyarrow as pa

from ncclparse.errors import InputError, NcclParseError
from ncclparse.inputs.progress import Progress, tracked
from ncclparse.parsers import Collector, ParseResult, Source, parse_source, result_of

if TYPE_CHECKING:
    from ncclparse.inputs.walk import Filters, Note


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


def read_inputs(
    inputs: Iterable[str],
    *,
    filters: Filters | None = None,
    jobs: int = 1,
    on_batch: Callable[[pa.RecordBatch], None] | None = None,
    on_notes: Callable[[list[Note]], None] | None = None,
    progress: Callable[[int], Progress | None] | None = None,
) -> tuple[ParseResult, list[Exception], list[Note]]:
    """Expand and parse ``inputs`` (files, directories, URIs, ``-`` for standard
    input: :func:`~ncclparse.inputs.walk.expand` with ``filters``) in ``jobs``
    processes.

    Returns the result, the inputs that failed (missing ones first, then those that
    did not parse) and the notes of the walk (what a directory walk skipped).
    ``on_notes`` is given those notes once the walk is done, before any parsing;
    ``progress`` is given the number of sources and returns the
    :class:`~ncclparse.inputs.progress.Progress` to report them to (or None), which
    is closed, wiping its line, when parsing ends.
    """
    from ncclparse.inputs.walk import expand

    notes: list[Note] = []
    expanded = list(expand(tuple(inputs), notes, filters=filters))
    if on_notes is not None:
        on_notes(notes)
    missing = [e for e in expanded if isinstance(e, InputError)]
    sources = [e for e in expanded if not isinstance(e, InputError)]
    line = None if progress is None else progress(len(sources))
    try:
        result = parse_sources(sources, on_batch, jobs, line)
    finally:
        if line is not None:
            line.close()
    return result, [*missing, *result.failures], notes
