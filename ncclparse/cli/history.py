"""``ncclparse history``: upkeep of a history dataset (``ingest`` adds to it)."""

from __future__ import annotations

import sys
from typing import Any

import click

from ncclparse.cli.options import EXIT_INFRASTRUCTURE, LOCKING, history_option


@click.group()
def history() -> None:
    """Look after a history dataset written by `ingest`."""


@history.command()
@history_option(
    "History dataset: a directory or a URI (s3://, gs://, abfs://, file://).",
    required=True,
)
@click.option(
    "--before",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Only partitions dated before this day (default: all). Tonight's partition "
    "is best left until its ingests are done.",
)
@LOCKING
def compact(history_dir: str, before: Any, lock: bool, lock_timeout: float) -> None:
    """Merge the files of each date partition into one.

    One ingest a night writes one file a night; several ingests a night (one per
    cluster, retries) or lock-free writers make many small files, and every check
    opens them all. Rows are kept as they are. A compaction cut short (killed, a
    lost connection) or two at once leave rows in two files; readers take each
    ingest's rows from one, and the next compaction leaves one file again.

    Exit status: 0 done, 4 the history cannot be read, written or locked.
    """
    from ncclparse.errors import NcclParseError
    from ncclparse.store.history import compact as merge

    try:
        done = merge(
            history_dir,
            before=before.date() if before else None,
            lock=lock,
            lock_timeout=lock_timeout,
        )
    # HistoryError, or the merged file that cannot be written (disk full, read-only):
    # the machine's fault either way.
    except NcclParseError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_INFRASTRUCTURE)
    files = sum(len(replaced) for _, replaced, _ in done.merged)
    stale = (
        f"; {len(done.removed)} stale temporary file(s) of killed writers removed"
        if done.removed
        else ""
    )
    click.echo(
        f"{history_dir}: {len(done.merged)} partition(s) compacted, {files} files "
        f"into {len(done.merged)} ({done.rows} rows){stale}",
        err=True,
    )
