"""``ncclparse report``: the self-contained HTML page or Markdown summary."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from ncclparse.cli.options import (
    FILTERS,
    INPUTS,
    JOBS,
    OUTPUT_FILE,
    QUIET,
    command_line,
    exit_on,
    hardware_options,
    parse_points,
    write_text,
)
from ncclparse.inputs.limits import REPORT_LIMITS

if TYPE_CHECKING:
    from ncclparse.efficiency import HardwareOptions
    from ncclparse.inputs.walk import Filters


class _TooManyPoints(click.ClickException):
    """More points than a report draws: a usage error (exit 2), not a bad input."""

    exit_code = 2


# The command's help, naming the limit the command applies (not a copy of it).
_HELP = f"""Write a self-contained report of INPUTS: verdicts, charts, tables, warnings.

The HTML page needs no network and no JavaScript; the same inputs give the same
bytes. Exit status as for `parse`; when no input could be read, no page is written
(an existing one is left as it was), nor past {REPORT_LIMITS[1]:,} distinct
measurement points (exit 2: far more than a night's sweep).
"""


@click.command(help=_HELP)
@INPUTS
@click.option(
    "-o",
    "--output",
    type=OUTPUT_FILE,
    help="Write the report here. Default: standard output when it is not a "
    "terminal, else ncclparse-report.html (.md) here, whose path is printed.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md"]),
    default="html",
    show_default=True,
    help="html: the full self-contained page; md: a short Markdown summary.",
)
@click.option(
    "--template-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Use templates from this directory first (report.html, summary.md, ...).",
)
@click.option(
    "--title",
    metavar="TEXT",
    help="Title of the page (default: the input, or how many) and the name of "
    "standard input in it (default: 'standard input').",
)
@FILTERS
@JOBS
@QUIET
@hardware_options
def report(
    inputs: tuple[str, ...],
    output: Path | None,
    fmt: Literal["html", "md"],
    template_dir: Path | None,
    title: str | None,
    quiet: bool,
    hardware: HardwareOptions,
    filters: Filters,
    jobs: int,
) -> None:
    """The ``report`` command (its help: the decorator's, which names the limit)."""
    from ncclparse.inputs.points import REPORT_LIMITS, TooManyPoints
    from ncclparse.report import build_context, render_report

    try:
        result, failures = parse_points(inputs, quiet, REPORT_LIMITS, filters, jobs)
    except TooManyPoints as exc:
        raise _TooManyPoints(str(exc)) from None
    if failures and result.runs.num_rows == 0:
        # Nothing to report: an existing page (last night's) is left as it was.
        raise click.ClickException("no report written: no input could be read")
    context = build_context(
        result,
        hardware=hardware,
        command_line=command_line(),
        failures=failures,
        title=title,
    )
    text = render_report(context, format=fmt, template_dir=template_dir)
    write_text(text, output, default=Path(f"ncclparse-report.{fmt}"))
    exit_on(failures)
