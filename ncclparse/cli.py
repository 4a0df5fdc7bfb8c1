"""The ``ncclparse`` command line: options in, library calls, files out.

Library errors become ``Error: ...`` messages in one place (:class:`_Cli`); commands
contain no parsing or table logic of their own.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ncclparse import __version__
from ncclparse.errors import InputError, NcclParseError

EXIT_BAD_INPUT = 1  # an input could not be read or recognised (others still written)


class _Cli(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NcclParseError as exc:
            raise click.ClickException(str(exc)) from exc


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ncclparse")
def cli() -> None:
    """Parse NCCL/RCCL/oneCCL/IMB benchmark logs and judge fabric efficiency."""


_FORMAT = click.Choice(["parquet", "arrow", "csv", "jsonl"])


@cli.command()
@click.argument("inputs", nargs=-1, type=str)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the measurements table here (.parquet, .arrow, .csv, .jsonl). "
    "Default: CSV on standard output.",
)
@click.option(
    "--runs",
    "runs_output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the runs table here (same formats).",
)
@click.option(
    "--format", "fmt", type=_FORMAT, help="Output format (default: by extension)."
)
@click.option("-q", "--quiet", is_flag=True, help="No per-input summary on stderr.")
def parse(
    inputs: tuple[str, ...],
    output: Path | None,
    runs_output: Path | None,
    fmt: str | None,
    quiet: bool,
) -> None:
    """Parse benchmark logs into the measurements (and runs) tables.

    INPUTS are files, directories (searched recursively) or - for standard input;
    with none, standard input is read when it is not a terminal. Exit status 1 when
    any input could not be read or recognised; the others are still written.
    """
    from ncclparse.api import parse_many, summary_lines
    from ncclparse.inputs import expand
    from ncclparse.storage import write_table, write_to

    if not inputs:
        if sys.stdin.isatty():
            raise click.UsageError("no INPUTS given and standard input is a terminal")
        inputs = ("-",)
    expanded = list(expand(inputs))
    missing = [e for e in expanded if isinstance(e, InputError)]
    result = parse_many(e for e in expanded if not isinstance(e, InputError))
    if output is None:
        write_to(result.measurements, sys.stdout.buffer, fmt or "csv")
    else:
        write_table(result.measurements, output, fmt)
    if runs_output is not None:
        write_table(result.runs, runs_output, fmt)
    if not quiet:
        for line in summary_lines(result):
            click.echo(line, err=True)
    failures = [*missing, *result.failures]
    for failure in failures:
        click.echo(f"Error: {failure}", err=True)
    if failures:
        sys.exit(EXIT_BAD_INPUT)
