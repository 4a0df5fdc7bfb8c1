"""The ``ncclparse`` command line: options in, library calls, files out.

Library errors become ``Error: ...`` messages in one place (:class:`_Cli`); commands
contain no parsing or table logic of their own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

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
    from ncclparse.schema import MEASUREMENTS_SCHEMA
    from ncclparse.storage import batch_writer, table_writer, write_table

    inputs = _inputs_or_stdin(inputs)
    # Rows are written while the inputs are read: memory stays flat for huge logs.
    if output is None:
        sink = batch_writer(sys.stdout.buffer, MEASUREMENTS_SCHEMA, fmt or "csv")
    else:
        sink = table_writer(output, MEASUREMENTS_SCHEMA, fmt)
    with sink as write:
        result, failures = _parse_inputs(inputs, quiet, on_batch=write)
    if runs_output is not None:
        write_table(result.runs, runs_output, fmt)
    _exit_on(failures)


def _inputs_or_stdin(inputs: tuple[str, ...]) -> tuple[str, ...]:
    if inputs:
        return inputs
    if sys.stdin.isatty():
        raise click.UsageError("no INPUTS given and standard input is a terminal")
    return ("-",)


def _parse_inputs(
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
@_hardware_options
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
) -> None:
    """Write a self-contained report of INPUTS: verdicts, charts, tables, warnings.

    The HTML page needs no network and no JavaScript; the same inputs give the same
    bytes. Exit status as for `parse`.
    """
    from ncclparse.report import build_context, render_report

    result, failures = _parse_inputs(inputs, quiet)
    context = build_context(
        result,
        profile=profile,
        intra_bw=intra_bw,
        inter_bw=inter_bw,
        gpus_per_node=gpus_per_node,
        nodes=nodes,
        command_line=_command_line(),
        failures=failures,
    )
    text = render_report(context, format=fmt, template_dir=template_dir)
    _write_text(text, output, default=Path(f"ncclparse-report.{fmt}"))
    _exit_on(failures)


def _command_line() -> str:
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


# --- check, ingest, compare: nightly cluster health (docs/nightly.md) ---------------

EXIT_CHECK_FAILED = 1  # check: a case failed (including missing or bad inputs)
EXIT_REGRESSION = 3  # compare --fail-on-regression: a size regressed


def _rules_option(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Load --rules while parsing options, so a bad file is a usage error (exit 2)."""
    from ncclparse.rules import DEFAULT_RULES, RulesError, load_rules

    try:
        return DEFAULT_RULES if value is None else load_rules(value)
    except RulesError as exc:
        raise click.BadParameter(str(exc), ctx, param) from exc


def _tags_option(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> dict[str, str]:
    tags = {}
    for item in value:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not key=value", ctx, param)
        tags[key.strip()] = text.strip()
    return tags


_TAG = click.option(
    "--tag",
    "tags",
    multiple=True,
    callback=_tags_option,
    help="key=value (repeatable), e.g. cluster=a. check: history rows must have them.",
)
_OUT = click.Path(dir_okay=False, path_type=Path)


@cli.command()
@click.argument("inputs", nargs=-1, type=str)
@click.option(
    "--rules",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=_rules_option,
    help="TOML rules file (docs/check-json.md). Default: built-in rules.",
)
@click.option(
    "--history",
    "history_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="History dataset (from `ingest`) to judge against.",
)
@_TAG
@click.option("--junit", type=_OUT, help="Write JUnit XML here.")
@click.option("--json", "json_path", type=_OUT, help="Write JSON here.")
@click.option("--prometheus", type=_OUT, help="Write a Prometheus textfile here.")
@click.option("--markdown", type=_OUT, help="Write a Markdown summary here.")
@click.option(
    "--report",
    "report_path",
    type=_OUT,
    help="Write the HTML report here, with the failed cases and slow hosts.",
)
@click.option("-v", "--verbose", is_flag=True, help="Print passing cases too.")
@click.option("-q", "--quiet", is_flag=True, help="No per-input summary on stderr.")
@_hardware_options
def check(
    inputs: tuple[str, ...],
    rules: Any,
    history_dir: Path | None,
    tags: dict[str, str],
    junit: Path | None,
    json_path: Path | None,
    prometheus: Path | None,
    markdown: Path | None,
    report_path: Path | None,
    verbose: bool,
    quiet: bool,
    **hardware: Any,
) -> None:
    """Judge INPUTS per size and regime, against rules and history.

    Exit status: 0 every case passed, 1 a case failed (a threshold, a regression, a
    slow host, or bad data: missing, empty, unrecognised, truncated or failed input,
    #wrong > 0, out-of-bounds FAILED), 2 usage or unreadable configuration.
    """
    from ncclparse.check import check as run_check
    from ncclparse.errors import ProfileError
    from ncclparse.history import read_history, source_keys
    from ncclparse.outputs import to_text, write_outputs

    result, failures = _parse_inputs(inputs, quiet)
    history = read_history(history_dir, tags=tags) if history_dir else None
    keys = frozenset(source_keys(result).values())
    try:
        outcome = run_check(
            result,
            rules,
            input_failures=failures,
            history=history,
            exclude_keys=keys,
            **hardware,
        )
    except ProfileError as exc:  # a bad hardware option is configuration: exit 2
        raise click.UsageError(str(exc)) from exc
    write_outputs(
        outcome,
        junit=junit,
        json_path=json_path,
        prometheus=prometheus,
        markdown=markdown,
    )
    if report_path is not None:
        from ncclparse.report import build_context, render_report
        from ncclparse.storage import atomic_output

        with atomic_output(report_path, binary=False) as handle:
            context = build_context(
                result,
                command_line=_command_line(),
                failures=failures,
                check=outcome,
                **hardware,
            )
            handle.write(render_report(context))
    click.echo(to_text(outcome, verbose=verbose), nl=False)
    sys.exit(0 if outcome.passed else EXIT_CHECK_FAILED)


@cli.command()
@click.argument("inputs", nargs=-1, type=str)
@click.option(
    "--history",
    "history_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="History dataset directory (created if missing).",
)
@_TAG
@click.option(
    "--date",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Partition date (default: today, UTC).",
)
@click.option("-q", "--quiet", is_flag=True, help="No per-input summary on stderr.")
def ingest(
    inputs: tuple[str, ...],
    history_dir: Path,
    tags: dict[str, str],
    date: Any,
    quiet: bool,
) -> None:
    """Append INPUTS to the history dataset; a log already there is skipped.

    Exit status as for `parse`.
    """
    from ncclparse.history import ingest as add_to_history

    result, failures = _parse_inputs(inputs, quiet)
    done = add_to_history(
        result, history_dir, tags=tags, date=date.date() if date else None
    )
    click.echo(
        f"{history_dir}: {len(done.added)} added ({done.rows} rows), "
        f"{len(done.skipped)} already present, {len(done.empty)} without measurements",
        err=True,
    )
    _exit_on(failures)


@cli.command()
@click.argument("baseline")
@click.argument("candidate")
@click.option("-o", "--output", type=_OUT, help="Write here (default: stdout).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown", "html"]),
    help="Default: by the extension of --output, else text.",
)
@click.option(
    "--threshold",
    type=click.FloatRange(0, 1, min_open=True),
    default=0.05,
    show_default=True,
    help="Relative busbw change that counts as a change.",
)
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help=f"Exit with status {EXIT_REGRESSION} when a size regressed.",
)
def compare(
    baseline: str,
    candidate: str,
    output: Path | None,
    fmt: str | None,
    threshold: float,
    fail_on_regression: bool,
) -> None:
    """Compare BASELINE with CANDIDATE size by size and give a verdict.

    Each is a log file or directory of logs, a Parquet/Arrow measurements table, or a
    history directory.
    """
    from ncclparse.compare import compare as run_compare
    from ncclparse.compare import format_for, load_measurements, render
    from ncclparse.storage import atomic_output

    found = run_compare(
        load_measurements(baseline), load_measurements(candidate), threshold=threshold
    )
    text = render(found, format_for(output, fmt))
    if output is None:
        click.echo(text, nl=False)
    else:
        with atomic_output(output, binary=False) as handle:
            handle.write(text)
    if fail_on_regression and found.verdict == "regression":
        sys.exit(EXIT_REGRESSION)
