"""The ``ncclparse`` command line: options in, library calls, files out.

Library errors become ``Error: ...`` messages in one place (:class:`_Cli`); commands
contain no parsing or table logic of their own.
"""

from __future__ import annotations

import json
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
    from ncclparse.storage import write_table, write_to

    result, failures = _parse_inputs(inputs, quiet)
    if output is None:
        write_to(result.measurements, sys.stdout.buffer, fmt or "csv")
    else:
        write_table(result.measurements, output, fmt)
    if runs_output is not None:
        write_table(result.runs, runs_output, fmt)
    _exit_on(failures)


def _parse_inputs(inputs: tuple[str, ...], quiet: bool) -> tuple[Any, list[Exception]]:
    """Parse INPUTS (stdin when none and not a terminal); echo summaries and errors."""
    from ncclparse.api import parse_many, summary_lines
    from ncclparse.inputs import expand

    if not inputs:
        if sys.stdin.isatty():
            raise click.UsageError("no INPUTS given and standard input is a terminal")
        inputs = ("-",)
    expanded = list(expand(inputs))
    missing = [e for e in expanded if isinstance(e, InputError)]
    result = parse_many(e for e in expanded if not isinstance(e, InputError))
    if not quiet:
        for line in summary_lines(result):
            click.echo(line, err=True)
    failures: list[Exception] = [*missing, *result.failures]
    for failure in failures:
        click.echo(f"Error: {failure}", err=True)
    return result, failures


def _exit_on(failures: list[Exception]) -> None:
    if failures:
        sys.exit(EXIT_BAD_INPUT)


def _hardware_options(command: Any) -> Any:
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
@_hardware_options
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
) -> None:
    """Recompute bandwidths, ideal, efficiency, fits and gap attribution for INPUTS.

    Assumptions made (e.g. a hardware profile picked from the GPU name) are printed
    on stderr. Exit status as for `parse`.
    """
    from ncclparse.efficiency import analyze as run_analysis
    from ncclparse.storage import write_table, write_to

    result, failures = _parse_inputs(inputs, quiet)
    analysis = run_analysis(
        result.measurements,
        profile,
        intra_bw=intra_bw,
        inter_bw=inter_bw,
        gpus_per_node=gpus_per_node,
        nodes=nodes,
    )
    for assumption in analysis.assumptions:
        click.echo(f"Assumed: {assumption}", err=True)
    if output is None:
        write_to(analysis.rows, sys.stdout.buffer, fmt or "csv")
    else:
        write_table(analysis.rows, output, fmt)
    if fits_output is not None:
        write_table(analysis.fits, fits_output, fmt)
    _exit_on(failures)


@cli.command()
@click.option("--intra-bw", required=True, help="B, per-GPU intra-node bandwidth.")
@click.option("--inter-bw", help="I, per-node inter-node bandwidth (multi-node).")
@click.option("--gpus-per-node", type=int, required=True, help="P, ranks per node.")
@click.option("--nodes", type=int, default=1, show_default=True, help="Q, nodes.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def ideal(
    intra_bw: str, inter_bw: str | None, gpus_per_node: int, nodes: int, as_json: bool
) -> None:
    """Print the ideal bus bandwidth (seed 003, AIBooster) and both of its terms."""
    from ncclparse.efficiency import ideal_bandwidth

    found = ideal_bandwidth(
        intra_bw, inter_bw, gpus_per_node=gpus_per_node, nodes=nodes
    )
    _show(found.as_dict(), as_json)


@cli.command()
@click.argument("collective")
@click.option("--size", required=True, help="Message size, e.g. 10GB.")
@click.option("--ranks", type=int, help="P, ranks in the collective.")
@click.option("--alpha", help="Per-step latency, e.g. 2us.")
@click.option("--bandwidth", help="Per-link bandwidth, e.g. 50GB/s.")
@click.option(
    "--algorithm",
    help="ring, tree, rhd, binomial, pairwise, direct; or "
    "hierarchical, scale-out, scale-up (seed 000 / 004 models).",
)
@click.option("--gpus-per-node", type=int, help="hierarchical: GPUs per node.")
@click.option("--nodes", type=int, help="hierarchical / scale-out: nodes.")
@click.option("--intra-alpha", help="hierarchical: intra-node latency.")
@click.option("--intra-bandwidth", help="hierarchical: intra-node bandwidth.")
@click.option("--inter-alpha", help="hierarchical: inter-node latency.")
@click.option("--inter-bandwidth", help="hierarchical: inter-node bandwidth.")
@click.option("--nic-bandwidth", help="scale-out: bandwidth of one NIC.")
@click.option("--nics-per-node", type=int, default=1, show_default=True)
@click.option(
    "--derating",
    type=float,
    default=0.8,
    show_default=True,
    help="scale-out: achievable fraction of NIC bandwidth (seed 004).",
)
@click.option("--ranks-per-node", type=int, default=1, show_default=True)
@click.option("--xe-bandwidth", help="scale-out / scale-up: Xe-link bandwidth.")
@click.option("--xe-links", type=int, default=0, show_default=True)
@click.option("--pcie-bandwidth", help="scale-out: host staging over PCIe.")
@click.option("--mdfi-bandwidth", help="scale-up: MDFI bandwidth between tiles.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def model(
    collective: str, size: str, algorithm: str | None, as_json: bool, **options: Any
) -> None:
    """Predict a collective's time from a cost model, with its terms."""
    from ncclparse import costmodels

    o = options
    if algorithm == "hierarchical":
        found: Any = costmodels.hierarchical_all_reduce(
            size,
            o["gpus_per_node"],
            o["nodes"],
            o["intra_alpha"],
            o["intra_bandwidth"],
            o["inter_alpha"],
            o["inter_bandwidth"],
        )
    elif algorithm == "scale-out":
        found = costmodels.scale_out_all_reduce(
            size,
            o["nodes"],
            nic_bandwidth=o["nic_bandwidth"],
            nics_per_node=o["nics_per_node"],
            derating=o["derating"],
            ranks_per_node=o["ranks_per_node"],
            xe_bandwidth=o["xe_bandwidth"],
            xe_links=o["xe_links"],
            pcie_bandwidth=o["pcie_bandwidth"],
        )
    elif algorithm == "scale-up":
        found = costmodels.scale_up_all_reduce(
            size,
            o["ranks_per_node"],
            xe_bandwidth=o["xe_bandwidth"],
            mdfi_bandwidth=o["mdfi_bandwidth"],
        )
    else:
        if None in (o["ranks"], o["alpha"], o["bandwidth"]):
            raise click.UsageError("--ranks, --alpha and --bandwidth are required")
        found = costmodels.predict(
            collective, size, o["ranks"], o["alpha"], o["bandwidth"], algorithm
        )
    _show(found.as_dict(), as_json)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def profiles(as_json: bool) -> None:
    """List the built-in hardware profiles with their figures and sources."""
    from ncclparse.hardware import PRESETS

    if as_json:
        click.echo(json.dumps({k: p.as_dict() for k, p in PRESETS.items()}, indent=2))
    else:
        for preset in PRESETS.values():
            click.echo(preset.summary())


def _show(values: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(values, indent=2, default=str))
    else:
        for key, value in values.items():
            click.echo(f"{key}: {value}")
