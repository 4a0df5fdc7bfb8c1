"""``ncclparse parse`` and ``analyze``: logs into tables."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ncclparse.cli.options import (
    FILTERS,
    INPUTS,
    JOBS,
    OUTPUT_FILE,
    QUIET,
    TABLE_FORMAT,
    exit_on,
    hardware_options,
    inputs_or_stdin,
    parse_inputs,
    parse_points,
)

if TYPE_CHECKING:
    from ncclparse.efficiency import HardwareOptions
    from ncclparse.inputs.walk import Filters


@click.command()
@INPUTS
@click.option(
    "-o",
    "--output",
    type=OUTPUT_FILE,
    help="Write the measurements table here (.parquet, .arrow, .csv, .jsonl). "
    "Default: CSV on standard output.",
)
@click.option(
    "--runs",
    "runs_output",
    type=OUTPUT_FILE,
    help="Also write the runs table here (same formats).",
)
@click.option(
    "--format", "fmt", type=TABLE_FORMAT, help="Output format (default: by extension)."
)
@FILTERS
@JOBS
@QUIET
def parse(
    inputs: tuple[str, ...],
    output: Path | None,
    runs_output: Path | None,
    fmt: str | None,
    quiet: bool,
    filters: Filters,
    jobs: int,
) -> None:
    """Parse benchmark logs into the measurements (and runs) tables.

    INPUTS are files, directories (searched recursively) or - for standard input;
    with none, standard input is read when it is not a terminal. Exit status 1 when
    any input could not be read or recognised; the others are still written.
    """
    from ncclparse.schema import MEASUREMENTS_SCHEMA
    from ncclparse.store.tables import batch_writer, table_writer, write_table

    inputs = inputs_or_stdin(inputs)
    # Rows are written while the inputs are read: memory stays flat for huge logs.
    if output is None:
        sink = batch_writer(sys.stdout.buffer, MEASUREMENTS_SCHEMA, fmt or "csv")
    else:
        sink = table_writer(output, MEASUREMENTS_SCHEMA, fmt)
    with sink as write:
        result, failures = parse_inputs(
            inputs, quiet, on_batch=write, filters=filters, jobs=jobs
        )
    if runs_output is not None:
        write_table(result.runs, runs_output, fmt)
    exit_on(failures)


@click.command()
@INPUTS
@click.option(
    "-o",
    "--output",
    type=OUTPUT_FILE,
    help="Write the analysed measurements here (default: CSV on stdout).",
)
@click.option(
    "--fits",
    "fits_output",
    type=OUTPUT_FILE,
    help="Also write the per-series alpha-beta fits here.",
)
@click.option(
    "--format", "fmt", type=TABLE_FORMAT, help="Output format (default: by extension)."
)
@FILTERS
@JOBS
@QUIET
@hardware_options
def analyze(
    inputs: tuple[str, ...],
    output: Path | None,
    fits_output: Path | None,
    fmt: str | None,
    quiet: bool,
    hardware: HardwareOptions,
    filters: Filters,
    jobs: int,
) -> None:
    """Recompute bandwidths, ideal, efficiency, fits and gap attribution for INPUTS.

    Assumptions made (e.g. a hardware profile picked from the GPU name) are printed
    on stderr. Exit status as for `parse`.
    """
    from ncclparse.efficiency import analyze as run_analysis
    from ncclparse.inputs.points import ANALYZE_LIMITS
    from ncclparse.store.tables import write_table, write_to

    result, failures = parse_points(inputs, quiet, ANALYZE_LIMITS, filters, jobs)
    analysis = run_analysis(result.measurements, hardware, result.runs)
    for assumption in analysis.assumptions:
        click.echo(f"Assumed: {assumption}", err=True)
    if output is None:
        write_to(analysis.rows, sys.stdout.buffer, fmt or "csv")
    else:
        write_table(analysis.rows, output, fmt)
    if fits_output is not None:
        write_table(analysis.fits, fits_output, fmt)
    exit_on(failures)
