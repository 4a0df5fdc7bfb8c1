"""``ncclparse check``, ``ingest`` and ``compare``: nightly cluster health.

See docs/nightly.md; the commands are loaded only when called (ncclparse.cli.app).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ncclparse.cli.options import (
    INPUTS,
    OUTPUT_FILE,
    QUIET,
    command_line,
    exit_on,
    hardware_options,
    parse_inputs,
)

if TYPE_CHECKING:
    from ncclparse.efficiency import HardwareOptions

EXIT_CHECK_FAILED = 1  # check: a case failed (including missing or bad inputs)
EXIT_REGRESSION = 3  # compare --fail-on-regression: a size regressed


def _rules_option(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Load --rules while parsing options, so a bad file is a usage error (exit 2)."""
    from ncclparse.health.rules import DEFAULT_RULES, RulesError, load_rules

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


@click.command()
@INPUTS
@click.option(
    "--rules",
    type=OUTPUT_FILE,
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
@click.option("--junit", type=OUTPUT_FILE, help="Write JUnit XML here.")
@click.option("--json", "json_path", type=OUTPUT_FILE, help="Write JSON here.")
@click.option(
    "--prometheus", type=OUTPUT_FILE, help="Write a Prometheus textfile here."
)
@click.option("--markdown", type=OUTPUT_FILE, help="Write a Markdown summary here.")
@click.option(
    "--report",
    "report_path",
    type=OUTPUT_FILE,
    help="Write the HTML report here, with the failed cases and slow hosts.",
)
@click.option("-v", "--verbose", is_flag=True, help="Print passing cases too.")
@QUIET
@hardware_options
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
    hardware: HardwareOptions,
) -> None:
    """Judge INPUTS per size and regime, against rules and history.

    Exit status: 0 every case passed, 1 a case failed (a threshold, a regression, a
    slow host, or bad data: missing, empty, unrecognised, truncated or failed input,
    #wrong > 0, out-of-bounds FAILED), 2 usage or unreadable configuration.
    """
    from ncclparse.errors import ProfileError
    from ncclparse.health.check import check as run_check
    from ncclparse.health.history import read_history, source_keys
    from ncclparse.health.outputs import to_text, write_outputs

    result, failures = parse_inputs(inputs, quiet)
    history = read_history(history_dir, tags=tags) if history_dir else None
    keys = frozenset(source_keys(result).values())
    try:
        outcome = run_check(
            result,
            rules,
            input_failures=failures,
            history=history,
            exclude_keys=keys,
            hardware=hardware,
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
                outcome.analysis,
                command_line=command_line(),
                failures=failures,
                policy=rules.verdict,
                check=outcome,
            )
            handle.write(render_report(context))
    click.echo(to_text(outcome, verbose=verbose), nl=False)
    sys.exit(0 if outcome.passed else EXIT_CHECK_FAILED)


@click.command()
@INPUTS
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
@QUIET
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
    from ncclparse.health.history import ingest as add_to_history

    result, failures = parse_inputs(inputs, quiet)
    done = add_to_history(
        result, history_dir, tags=tags, date=date.date() if date else None
    )
    click.echo(
        f"{history_dir}: {len(done.added)} added ({done.rows} rows), "
        f"{len(done.skipped)} already present, {len(done.empty)} without measurements",
        err=True,
    )
    exit_on(failures)


@click.command()
@click.argument("baseline")
@click.argument("candidate")
@click.option("-o", "--output", type=OUTPUT_FILE, help="Write here (default: stdout).")
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
    from ncclparse.health.compare import compare as run_compare
    from ncclparse.health.outputs import comparison_format, render_comparison
    from ncclparse.inputs import load_measurements
    from ncclparse.report.render import render_comparison_html
    from ncclparse.storage import atomic_output

    found = run_compare(
        load_measurements(baseline), load_measurements(candidate), threshold=threshold
    )
    chosen = comparison_format(output, fmt)
    if chosen == "html":
        text = render_comparison_html(found)
    else:
        text = render_comparison(found, chosen)
    if output is None:
        click.echo(text, nl=False)
    else:
        with atomic_output(output, binary=False) as handle:
            handle.write(text)
    if fail_on_regression and found.verdict == "regression":
        sys.exit(EXIT_REGRESSION)
