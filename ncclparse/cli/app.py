"""The ``ncclparse`` command line: options in, library calls, files out.

Library errors become ``Error: ...`` messages in one place (:class:`_Cli`); commands
contain no parsing or table logic of their own.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any, Literal

import click

from ncclparse import __version__
from ncclparse.errors import InputError, NcclParseError

EXIT_BAD_INPUT = 1  # an input could not be read or recognised (others still written)


# Commands kept in other modules, imported only when called: start-up stays cheap and
# this module small.
_LAZY_COMMANDS = {
    "ideal": "ncclparse.cli.models",
    "model": "ncclparse.cli.models",
    "profiles": "ncclparse.cli.models",
    "check": "ncclparse.cli.nightly",
    "ingest": "ncclparse.cli.nightly",
    "compare": "ncclparse.cli.nightly",
}


class _Cli(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NcclParseError as exc:
            raise click.ClickException(str(exc)) from exc

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in _LAZY_COMMANDS:
            command = getattr(importlib.import_module(_LAZY_COMMANDS[name]), name)
            assert isinstance(command, click.Command)
            return command
        return super().get_command(ctx, name)


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
    from ncclparse.schema import MEASUREMENTS_SCHEMA
    from ncclparse.storage import batch_writer, table_writer, write_table

    inputs = _inputs_or_stdin(inputs)
    # Rows are written while the inputs are read: memory stays flat for huge logs.
    if output is None:
        sink = batch_writer(sys.stdout.buffer, MEASUREMENTS_SCHEMA, fmt or "csv")
    else:
        sink = table_writer(output, MEASUREMENTS_SCHEMA, fmt)
    with sink as write:
        result, failures = parse_inputs(inputs, quiet, on_batch=write)
    if runs_output is not None:
        write_table(result.runs, runs_output, fmt)
    exit_on(failures)


def _inputs_or_stdin(inputs: tuple[str, ...]) -> tuple[str, ...]:
    if inputs:
        return inputs
    if sys.stdin.isatty():
        raise click.UsageError("no INPUTS given and standard input is a terminal")
    return ("-",)


def parse_inputs(
    inputs: tuple[str, ...], quiet: bool, on_batch: Any = None
) -> tuple[Any, list[Exception]]:
    """Parse INPUTS (stdin when none and not a terminal); echo summaries and errors."""
    from ncclparse.api import parse_many, summary_lines
    from ncclparse.inputs import expand

    expanded = list(expand(_inputs_or_stdin(inputs)))
    missing = [e for e in expanded if isinstance(e, InputError)]
    result = parse_many(
        (e for e in expanded if not isinstance(e, InputError)), on_batch=on_batch
    )
    if not quiet:
        for line in summary_lines(result):
            click.echo(line, err=True)
    failures: list[Exception] = [*missing, *result.failures]
    for failure in failures:
        click.echo(f"Error: {failure}", err=True)
    return result, failures


def exit_on(failures: list[Exception]) -> None:
    if failures:
        sys.exit(EXIT_BAD_INPUT)


def hardware_options(command: Any) -> Any:
    """The hardware options shared by the commands that compare with the ideal."""
    options = [
        click.option(
            "--profile",
            help="Preset name (see `ncclparse profiles`) or a "
            "TOML file. Default: a preset matching the GPU named in the log.",
        ),
        click.option(
            "--intra-bw", help="B, per-GPU intra-node bandwidth, e.g. 450GB/s."
        ),
        click.option(
            "--inter-bw", help="I, per-node inter-node bandwidth, e.g. 400Gbps."
        ),
        click.option("--gpus-per-node", type=int, help="P, ranks per node."),
        click.option(
            "--nodes", type=int, help="Q, number of nodes (default: from the log)."
        ),
        click.option(
            "--hw-latency",
            help="The hardware's per-step latency alpha, e.g. 2us: splits the fitted "
            "latency into hardware and software (default: unknown).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@cli.command()
@click.argument("inputs", nargs=-1, type=str)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the analysed measurements here (default: CSV on stdout).",
)
@click.option(
    "--fits",
    "fits_output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the per-series alpha-beta fits here.",
)
@click.option(
    "--format", "fmt", type=_FORMAT, help="Output format (default: by extension)."
)
@click.option("-q", "--quiet", is_flag=True, help="No per-input summary on stderr.")
@hardware_options
def analyze(
    inputs: tuple[str, ...],
    output: Path | None,
    fits_output: Path | None,
    fmt: str | None,
    quiet: bool,
    profile: str | None,
    intra_bw: str | None,
    inter_bw: str | None,
    gpus_per_node: int | None,
    nodes: int | None,
    hw_latency: str | None,
) -> None:
    """Recompute bandwidths, ideal, efficiency, fits and gap attribution for INPUTS.

    Assumptions made (e.g. a hardware profile picked from the GPU name) are printed
    on stderr. Exit status as for `parse`.
    """
    from ncclparse.efficiency import analyze as run_analysis
    from ncclparse.storage import write_table, write_to

    result, failures = parse_inputs(inputs, quiet)
    analysis = run_analysis(
        result.measurements,
        profile,
        intra_bw=intra_bw,
        inter_bw=inter_bw,
        gpus_per_node=gpus_per_node,
        nodes=nodes,
        hw_latency=hw_latency,
    )
    for assumption in analysis.assumptions:
        click.echo(f"Assumed: {assumption}", err=True)
    if output is None:
        write_to(analysis.rows, sys.stdout.buffer, fmt or "csv")
    else:
        write_table(analysis.rows, output, fmt)
    if fits_output is not None:
        write_table(analysis.fits, fits_output, fmt)
    exit_on(failures)


def show_values(values: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(values, indent=2, default=str))
    else:
        for key, value in values.items():
            click.echo(f"{key}: {value}")


@cli.command()
@click.argument("inputs", nargs=-1, type=str)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
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
@click.option("-q", "--quiet", is_flag=True, help="No per-input summary on stderr.")
@hardware_options
def report(
    inputs: tuple[str, ...],
    output: Path | None,
    fmt: Literal["html", "md"],
    template_dir: Path | None,
    quiet: bool,
    profile: str | None,
    intra_bw: str | None,
    inter_bw: str | None,
    gpus_per_node: int | None,
    nodes: int | None,
    hw_latency: str | None,
) -> None:
    """Write a self-contained report of INPUTS: verdicts, charts, tables, warnings.

    The HTML page needs no network and no JavaScript; the same inputs give the same
    bytes. Exit status as for `parse`.
    """
    from ncclparse.report import build_context, render_report

    result, failures = parse_inputs(inputs, quiet)
    context = build_context(
        result,
        profile=profile,
        intra_bw=intra_bw,
        inter_bw=inter_bw,
        gpus_per_node=gpus_per_node,
        nodes=nodes,
        hw_latency=hw_latency,
        command_line=command_line(),
        failures=failures,
    )
    text = render_report(context, format=fmt, template_dir=template_dir)
    _write_text(text, output, default=Path(f"ncclparse-report.{fmt}"))
    exit_on(failures)


def command_line() -> str:
    """How ncclparse was invoked, for the report footer (shell-quoted)."""
    import shlex

    program = Path(sys.argv[0]).name
    program = "python -m ncclparse" if program == "__main__.py" else program
    return " ".join([program, *map(shlex.quote, sys.argv[1:])])


def _stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def _write_text(text: str, output: Path | None, *, default: Path) -> None:
    """Write UTF-8 ``text`` to ``output``; without one, to stdout or (a terminal)
    to ``default``, whose path is then printed."""
    from ncclparse.storage import atomic_output

    if output is None and not _stdout_is_terminal():
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.buffer.flush()
        return
    path = output or default
    with atomic_output(path, binary=False) as handle:
        handle.write(text)
    if output is None:
        click.echo(path)
