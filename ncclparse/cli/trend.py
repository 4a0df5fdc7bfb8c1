"""``ncclparse trend``: the history drawn over nights, per series and size.

Exit status: 0 the page was written; 1 the history holds no run (with the
``--tag`` values) to draw, and nothing is written; 2 usage or configuration (an
unknown option, a bad ``--tag`` or ``--rules``, a history directory that does not
exist, a URI of an unknown scheme); 4 infrastructure (the history cannot be read,
the page cannot be written), as ``check`` and ``ingest`` (docs/trend.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ncclparse.cli.options import (
    EXIT_INFRASTRUCTURE,
    QUIET,
    command_line,
    history_option,
    load_rules,
    tag_option,
)

EXIT_NOTHING_TO_DRAW = 1


@click.command()
@history_option(
    "History dataset written by `ingest`: a directory or a URI (s3://, gs://, "
    "abfs://, file://).",
    required=True,
)
@tag_option("Only runs ingested with this tag (repeatable), as `check --tag`.")
@click.option(
    "-o",
    "--output",
    # Any path: a directory in the way is found when writing (exit 4, as documented).
    type=click.Path(path_type=Path),
    required=True,
    help="Write the HTML page here.",
)
@click.option(
    "--sizes",
    type=click.IntRange(min=1, max=12),
    default=3,
    show_default=True,
    help="How many of each series' largest message sizes to draw.",
)
@click.option(
    "--rules",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Rules file whose [history] window and thresholds make the band "
    "(default: the built-in ones, as `check`).",
)
@click.option("--title", help="Page title (default: 'ncclparse trend: HISTORY').")
@QUIET
def trend(
    history_dir: str,
    tags: dict[str, str],
    output: Path,
    sizes: int,
    rules: Path | None,
    title: str | None,
    quiet: bool,
) -> None:
    """Draw the history over nights: per series, busbw at its largest sizes, one
    point per night, with the baseline band `check --history` would have used
    that night and the nights it would have flagged.

    One self-contained HTML page (no script, no network); the same history gives
    the same bytes.

    Exit status: 0 written; 1 nothing to draw (no run with the --tag values; the
    message says what the history holds); 2 usage (including a history directory
    that does not exist); 4 the history cannot be read or the page written.
    """
    from ncclparse.errors import NcclParseError
    from ncclparse.report.trend import render_trend, trend_of, trend_page
    from ncclparse.store.atomic import atomic_output
    from ncclparse.store.history import HistoryError, history_exists

    policy = load_rules(rules).history
    try:
        if not history_exists(history_dir):
            raise click.UsageError(f"{history_dir}: history directory not found")
        found = trend_of(history_dir, tags=tags, policy=policy, sizes=sizes)
    except HistoryError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_INFRASTRUCTURE)
    if found.points.empty:
        if found.runs == 0:
            why = ""
        elif found.matched == 0:
            why = " (no run with the --tag values)"
        else:  # failed, truncated or #wrong runs only
            why = " (no row a baseline could use)"
        click.echo(f"Error: nothing to draw{why}: {found.describe()}", err=True)
        sys.exit(EXIT_NOTHING_TO_DRAW)
    text = render_trend(trend_page(found, title=title, command_line=command_line()))
    try:
        with atomic_output(output, binary=False) as handle:
            handle.write(text)
    except NcclParseError as exc:  # atomic_output names the path and the cause
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_INFRASTRUCTURE)
    except OSError as exc:  # a full disk while writing
        click.echo(f"Error: {output}: cannot write: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_INFRASTRUCTURE)
    flagged = int(found.points["flagged"].sum())
    if quiet:
        return
    click.echo(
        f"{output}: {len(found.series())} series over {len(found.dates)} night(s), "
        f"{flagged} flagged point(s)",
        err=True,
    )
