"""``ncclparse check``, ``ingest`` and ``compare``: nightly cluster health.

See docs/nightly.md; the commands are loaded only when called (ncclparse.cli.app).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

import click

from ncclparse.cli.options import (
    EXIT_INFRASTRUCTURE,
    FILTERS,
    INPUTS,
    JOBS,
    LOCKING,
    OUTPUT_FILE,
    QUIET,
    ReadingEcho,
    command_line,
    exit_on,
    hardware_options,
    history_option,
    inputs_or_stdin,
    load_rules,
    parse_inputs,
    tag_option,
    threshold_option,
)

if TYPE_CHECKING:
    from ncclparse.efficiency import HardwareOptions
    from ncclparse.health.nightly import CheckRun
    from ncclparse.health.rules import Rules
    from ncclparse.inputs.walk import Filters

EXIT_CHECK_FAILED = 1  # check: a case failed (bad inputs too), or an internal error
# 2: usage or configuration, click's status for a UsageError (check raises those late)
# compare --fail-on-regression: a size or an aligned run regressed, or a run of the
# baseline is missing from the candidate (a lost measurement is no pass)
EXIT_REGRESSION = 3


class _OutputError(Exception):
    """An output of ``check`` could not be written (exit 4)."""


def _pushgateway_option(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> str | None:
    """A Pushgateway URL (http:// or https://); prometheus_client is looked for
    when the check runs (_needs_prometheus_client), so that its absence, an exit 2
    too, replaces the outputs."""
    from urllib.parse import urlsplit

    if not value:
        return None
    url = urlsplit(value)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise click.BadParameter(
            f"{value!r} is not an http:// or https:// URL", ctx, param
        )
    return value


def _needs_prometheus_client() -> None:
    """A usage error (exit 2) when --pushgateway cannot push: no prometheus_client."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise click.UsageError(
            "--pushgateway needs prometheus_client: pip install "
            "'ncclparse[pushgateway]'"
        ) from None


# check's outputs: any path. A directory (or a file that cannot be) in the way is
# found when they are written, so that the check fails (exit 4) replacing the others
# rather than stopping at the option (exit 2) with yesterday's outputs in place.
_CHECK_OUTPUT = click.Path(path_type=Path)


class _Terminated(BaseException):
    """SIGTERM or SIGHUP (timeout, Slurm, Kubernetes): handled as Ctrl-C is."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, frame: object) -> None:
    raise _Terminated(signum)


def _job_option(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not value:  # the Pushgateway refuses an empty job name
        raise click.BadParameter("the job name is empty", ctx, param)
    return value


_TAG = tag_option(
    "Repeatable, e.g. cluster=a. ingest: stored with the runs; check: the history "
    "runs of the baseline must have them."
)


@click.command()
@INPUTS
@click.option(
    "--rules",
    type=OUTPUT_FILE,
    envvar="NCCLPARSE_RULES",
    show_envvar=True,
    help="TOML rules file (docs/check-json.md). Default: built-in rules.",
)
@history_option(
    "History dataset (from `ingest`) to judge against, a directory or a URI "
    "(s3://, gs://, abfs://, file://); a history that gives no baseline fails the "
    "check.",
)
@_TAG
@click.option(
    "--first-night",
    is_flag=True,
    help="With --history: no baseline is expected yet, so the directory may be "
    "missing and a history without runs for the --tag values is a skipped case, not "
    "a failure. No effect once there is a baseline.",
)
@click.option(
    "--expect-history/--no-expect-history",
    default=True,
    show_default=True,
    help="With --history: every series shape (tool, collective, dtype, redop, root, "
    "placement, ranks, nodes) of the baseline must be in INPUTS.",
)
@click.option("--junit", type=_CHECK_OUTPUT, help="Write JUnit XML here.")
@click.option("--json", "json_path", type=_CHECK_OUTPUT, help="Write JSON here.")
@click.option(
    "--prometheus", type=_CHECK_OUTPUT, help="Write a Prometheus textfile here."
)
@click.option(
    "--pushgateway",
    metavar="URL",
    callback=_pushgateway_option,
    envvar="NCCLPARSE_PUSHGATEWAY",
    show_envvar=True,
    help="Push the Prometheus metrics to this Pushgateway (http:// or https://), "
    "grouped by --pushgateway-job and the --tag values. Needs "
    "pip install 'ncclparse[pushgateway]'.",
)
@click.option(
    "--pushgateway-job",
    metavar="NAME",
    default="ncclparse",
    show_default=True,
    callback=_job_option,
    help="The job label of the Pushgateway group.",
)
@click.option(
    "--markdown",
    type=_CHECK_OUTPUT,
    help='Append a Markdown summary to this file (e.g. "$GITHUB_STEP_SUMMARY", '
    "which other steps write too).",
)
@click.option(
    "--report",
    "report_path",
    type=_CHECK_OUTPUT,
    help="Write the HTML report here, with the failed cases and slow hosts.",
)
@click.option("-v", "--verbose", is_flag=True, help="Print passing cases too.")
@FILTERS
@JOBS
@QUIET
@hardware_options(validate=False)  # check fails closed: its outputs are replaced
def check(
    inputs: tuple[str, ...],
    rules: Path | None,
    history_dir: str | None,
    tags: dict[str, str],
    first_night: bool,
    expect_history: bool,
    junit: Path | None,
    json_path: Path | None,
    prometheus: Path | None,
    pushgateway: str | None,
    pushgateway_job: str,
    markdown: Path | None,
    report_path: Path | None,
    verbose: bool,
    filters: Filters,
    jobs: int,
    quiet: bool,
    hardware: HardwareOptions,
) -> None:
    """Judge INPUTS per size and regime, against rules and history.

    Exit status: 0 every case passed; 1 a case failed (a threshold, a regression, a
    slow host, no baseline in the history, or bad data: missing, empty,
    unrecognised, truncated or failed input, #wrong > 0, out-of-bounds FAILED) or
    an internal error; 2 usage or configuration (an unreadable rules file, a bad
    hardware option, a missing history directory without --first-night); 4 the
    check could not complete for the machine's sake (an output that cannot be
    written, a history that cannot be read, a push to --pushgateway that failed, a
    process judging runs killed by a signal, e.g. out of memory).
    The outputs are written all or nothing, then pushed; when the check cannot
    complete (2, 4, an internal error) they are replaced by failing ones.
    """
    from ncclparse.errors import NcclParseError
    from ncclparse.health.forked import ChildDied
    from ncclparse.report.check_outputs import to_text, write_all
    from ncclparse.store.atomic import append_block
    from ncclparse.store.history import HistoryError
    from ncclparse.store.spool import SpoolError

    push = None if pushgateway is None else _Push(pushgateway, pushgateway_job, tags)
    outputs = _Outputs(junit, json_path, prometheus, markdown, report_path, push)
    _not_an_input(outputs, inputs)  # before any output is written, even a failing one
    previous = _on_termination(_raise_terminated)
    try:
        if push is not None:
            _needs_prometheus_client()
        outcome, files = _judge(
            inputs,
            load_rules(rules),
            _History(history_dir, tags, first_night, expect_history),
            outputs,
            (quiet, filters, jobs),
            hardware,
        )
        text = to_text(outcome, verbose=verbose)
        # The summary is appended after the others are in place (append_block).
        summary = None if markdown is None else (markdown, "".join(files.pop(markdown)))
        try:
            write_all(files)  # JUnit and JSON made as they are written
            if summary is not None:
                append_block(*summary)
        except NcclParseError as exc:  # a file that cannot be written
            raise _OutputError(str(exc)) from exc
        _push(outputs, outcome)
    except click.UsageError as exc:  # configuration found bad late: still exit 2
        _write_failed(outputs, exc.format_message())
        raise
    except KeyboardInterrupt:
        _write_failed(outputs, "interrupted")
        raise
    except _Terminated as stop:
        _write_failed(outputs, f"terminated by {signal.Signals(stop.signum).name}")
        # Then end as the signal would have ended it (status 128 + its number).
        _on_termination(signal.SIG_DFL)
        os.kill(os.getpid(), stop.signum)
        raise
    except (HistoryError, SpoolError, ChildDied, _OutputError) as exc:
        _give_up(outputs, exc, EXIT_INFRASTRUCTURE)
    except Exception as exc:
        _give_up(outputs, exc)
    finally:
        _on_termination(previous)
    click.echo(text, nl=False)
    sys.exit(0 if outcome.passed else EXIT_CHECK_FAILED)


_TERMINATING = (signal.SIGTERM, signal.SIGHUP)


def _on_termination(handler: Any) -> dict[int, Any]:
    """Set ``handler`` for SIGTERM and SIGHUP: one handler, or the mapping this
    returned before; return the handlers it replaced, by signal. Only the main
    thread may set handlers: elsewhere (a library caller's thread) nothing changes;
    nor does it for None (what getsignal says of a handler not set from Python)."""
    wanted = (
        handler if isinstance(handler, dict) else dict.fromkeys(_TERMINATING, handler)
    )
    before: dict[int, Any] = {}
    try:
        for signum, each in wanted.items():
            if each is not None:
                before[signum] = signal.getsignal(signum)
                signal.signal(signum, each)
    except ValueError:
        pass
    return before


def _not_an_input(outputs: _Outputs, inputs: tuple[str, ...]) -> None:
    """A usage error when an output is another output's file, or a log the INPUTS
    hold (named, or in a directory walked): writing it would replace one output with
    another, or a log with a report. ncclparse's own outputs in a logs directory
    (yesterday's) are no logs (:func:`ncclparse.inputs.walk.not_a_log`)."""
    from ncclparse.inputs.walk import not_a_log

    named: dict[Path, str] = {}
    files = (
        ("--junit", outputs.junit),
        ("--json", outputs.json_path),
        ("--prometheus", outputs.prometheus),
        ("--markdown", outputs.markdown),
        ("--report", outputs.report),
    )
    for option, path in files:
        if path is None:
            continue
        where = path.resolve()
        if where in named:
            raise click.UsageError(
                f"{option} {path} is also the file of {named[where]}"
            )
        named[where] = option
    local = [Path(i).resolve() for i in inputs if i != "-" and "://" not in i]
    for where, option in named.items():
        try:
            read = where.is_file() and (
                where in local
                or (
                    any(where.is_relative_to(d) for d in local if d.is_dir())
                    and not_a_log(where) is None
                )
            )
        except OSError:  # a name the OS refuses: writing it fails (exit 4)
            read = False
        if read:
            raise click.UsageError(f"{option} {where} is a log among the INPUTS")


class _History(NamedTuple):
    """What ``check`` was told of the history."""

    directory: str | None
    tags: dict[str, str]
    first_night: bool
    expect: bool


class _Outputs(NamedTuple):
    junit: Path | None
    json_path: Path | None
    prometheus: Path | None
    markdown: Path | None
    report: Path | None
    pushgateway: _Push | None = None


class _Push(NamedTuple):
    """Where --pushgateway pushes: the group of the job and the --tag values."""

    url: str
    job: str
    tags: dict[str, str]


class _PushError(_OutputError):
    """The push to --pushgateway failed (exit 4)."""


def _push(outputs: _Outputs, outcome: Any) -> None:
    """Push ``outcome``'s metrics to --pushgateway, when given; a _PushError when
    the push fails."""
    from ncclparse.report.check_outputs import push_metrics

    if outputs.pushgateway is None:
        return
    url, job, _ = outputs.pushgateway
    try:
        push_metrics(outcome, url, job=job, timestamp=time.time())
    except OSError as exc:
        raise _PushError(f"{url}: cannot push to the Pushgateway: {_why(exc)}") from exc


def _why(exc: Exception) -> str:
    """Why a push failed: the gateway's answer, or the network's."""
    from urllib.error import HTTPError, URLError

    if isinstance(exc, HTTPError):
        try:
            said = exc.read().decode("utf-8", errors="replace").strip()
        except OSError:
            said = ""
        return f"HTTP {exc.code} {exc.reason}" + (f": {said}" if said else "")
    if isinstance(exc, URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__


def _judge(
    inputs: tuple[str, ...],
    rules: Any,
    given: _History,
    outputs: _Outputs,
    reading: tuple[bool, Filters, int],
    hardware: HardwareOptions,
) -> tuple[Any, dict[Path, Iterable[str]]]:
    """Read, judge and render everything ``check`` writes, writing nothing: the
    result and each output file's text by path (JUnit and JSON in pieces made as
    they are written: :func:`ncclparse.report.check_outputs.output_pieces`)."""
    from ncclparse.health.integrity import SWITCHED_OFF
    from ncclparse.health.nightly import CheckConfigError
    from ncclparse.health.nightly import check as run_check
    from ncclparse.report.check_outputs import output_pieces

    quiet, filters, jobs = reading
    echo = ReadingEcho(quiet)
    try:
        run = run_check(
            _stdin_unless_terminal(inputs),
            rules,
            history=given.directory,
            tags=given.tags,
            first_night=given.first_night,
            expect_history=given.expect,
            hardware=hardware,
            filters=filters,
            jobs=jobs,
            on_notes=echo.notes,
            progress=echo.progress,
            on_parsed=echo.parsed,
            report_rows=False,  # the report analyses its points itself (_report_page)
            keep_rows=outputs.report is not None,  # ... from the parsed rows
        )
    except CheckConfigError as exc:  # configuration: exit 2
        raise click.UsageError(str(exc)) from exc
    outcome = run.result
    for case in outcome.cases:
        # The first night, and a rule switched off: said loud.
        baseline = case.rule == "history" and case.name == "baseline"
        if case.status == "skip" and (baseline or case.name == SWITCHED_OFF):
            click.echo(f"Note: {case.message}", err=True)
    files = output_pieces(
        outcome,
        junit=outputs.junit,
        json_path=outputs.json_path,
        prometheus=outputs.prometheus,
        markdown=outputs.markdown,
        roots=inputs,  # JUnit names are relative to them, stable night to night
    )
    if outputs.report is not None:
        files[outputs.report] = [_report_page(run, rules, hardware)]
    return outcome, files


def _report_page(run: CheckRun, rules: Rules, hardware: HardwareOptions) -> str:
    """The page ``report`` draws of the check's inputs, with the check's sections:
    its points analysed in batches of runs, as ``report`` does (the check kept only
    what its outputs read), a point's repeats merged as ``report`` merges them
    (the check merges them only past more rows). A usage error (exit 2) past the
    points a report draws (REPORT_LIMITS, docs/robustness.md; as many as a check
    takes, today)."""
    from ncclparse.inputs.points import REPORT_LIMITS, as_points
    from ncclparse.report import build_context, render_report

    points, limit = run.parsed.measurements.num_rows, REPORT_LIMITS[1]
    if points > limit:
        raise click.UsageError(
            f"--report: the inputs hold {points:,} distinct measurement points, "
            f"more than a report draws ({limit:,}); leave out --report, or "
            "report fewer logs at a time"
        )
    # Merged by the check already, the points are those report draws: merging them
    # again would only copy every point (0.2 GB at 500,000 of them).
    parsed = run.parsed if run.merged else as_points(run.parsed, REPORT_LIMITS)
    context = build_context(
        parsed,
        hardware=hardware,
        command_line=command_line(),
        failures=list(run.input_failures),
        policy=rules.verdict,
        check=run.result,
    )
    return render_report(context)


def _stdin_unless_terminal(inputs: tuple[str, ...]) -> Iterator[str]:
    """INPUTS, else standard input (a usage error when it is a terminal). Lazy: the
    library reads it once it has checked the history options, whose errors come
    first."""
    yield from inputs_or_stdin(inputs)


def _give_up(
    outputs: _Outputs, exc: Exception, status: int = EXIT_CHECK_FAILED
) -> NoReturn:
    """Replace the outputs by failing ones naming ``exc``; exit with ``status`` and
    one line."""
    from ncclparse.errors import NcclParseError
    from ncclparse.health.forked import ChildDied
    from ncclparse.store.spool import SpoolError

    if isinstance(exc, NcclParseError | SpoolError | ChildDied | _OutputError):
        message = str(exc)
    else:
        message = (
            f"internal error: {type(exc).__name__}: {exc} (a bug in ncclparse; "
            "please report it)"
        )
    message = " ".join(message.split())  # one line, whatever the exception says
    if isinstance(exc, _PushError):  # the gateway would refuse the failing push too
        outputs = outputs._replace(pushgateway=None)
    _write_failed(outputs, message)
    click.echo(f"Error: {message}", err=True)
    sys.exit(status)


def _write_failed(outputs: _Outputs, message: str) -> None:
    """Write each requested output as a failed check saying ``message``, each on its
    own (one that cannot be written does not keep the others from being replaced),
    then push it to --pushgateway; a file that cannot be written, or a push that
    fails, is named on stderr."""
    from ncclparse.health.check import error_result
    from ncclparse.report.check_outputs import (
        error_html,
        push_metrics,
        to_json,
        to_junit,
        to_markdown,
        to_prometheus,
    )
    from ncclparse.store.atomic import append_block, atomic_output

    failed = error_result(message)
    renderings: tuple[tuple[Path | None, Callable[[], str]], ...] = (
        (outputs.prometheus, lambda: to_prometheus(failed, timestamp=time.time())),
        (outputs.junit, lambda: to_junit(failed)),
        (outputs.json_path, lambda: to_json(failed)),
        (outputs.markdown, lambda: to_markdown(failed)),
        (outputs.report, lambda: error_html(message)),
    )
    for path, render in renderings:
        if path is None:
            continue
        try:
            text = render()
        except Exception:  # the renderer is what failed: the alert must still fire
            prometheus = path == outputs.prometheus
            text = _PROMETHEUS_FAILED if prometheus else f"check failed: {message}\n"
        try:
            if path == outputs.markdown:  # a summary is appended, as when it passes
                append_block(path, text)
            else:
                with atomic_output(path, binary=False) as handle:
                    handle.write(text)
        except Exception as exc:
            if str(exc) != message:  # else said once, by the caller
                click.echo(f"Error: {exc}", err=True)
    if outputs.pushgateway is not None:  # the gateway keeps the last push: replace it
        url, job, tags = outputs.pushgateway
        try:
            push_metrics(
                dataclasses.replace(failed, tags=tags),
                url,
                job=job,
                timestamp=time.time(),
            )
        except Exception as exc:
            click.echo(
                f"Error: {url}: cannot push to the Pushgateway: {_why(exc)}", err=True
            )


# What the Prometheus textfile says when even its renderer failed.
_PROMETHEUS_FAILED = (
    "# HELP ncclparse_check_passed 1 when every check case passed.\n"
    "# TYPE ncclparse_check_passed gauge\n"
    "ncclparse_check_passed 0\n"
)


def _night_date(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """--date, refused beyond tomorrow (UTC) as the history refuses it."""
    import datetime as dt

    from ncclparse.store.history import check_night_date

    if value is not None:
        try:
            check_night_date(value.date(), dt.datetime.now(dt.UTC))
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx, param) from None
    return value


@click.command()
@INPUTS
@history_option(
    "History dataset: a directory (created if missing) or a URI (s3://, "
    "gs://, abfs://, file://).",
    required=True,
)
@_TAG
@click.option(
    "--date",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    callback=_night_date,
    help="Partition date (default: today, UTC); at most one day ahead of today.",
)
@LOCKING
@FILTERS
@JOBS
@QUIET
def ingest(
    inputs: tuple[str, ...],
    history_dir: str,
    tags: dict[str, str],
    date: Any,
    lock: bool,
    lock_timeout: float,
    filters: Filters,
    jobs: int,
    quiet: bool,
) -> None:
    """Append INPUTS to the history dataset; a log already there is skipped.

    Exit status: 0 done, 1 an input could not be read (the others are added), 4
    the history cannot be created, read, written or locked (nothing is added).
    """
    from ncclparse.store.history import HistoryError
    from ncclparse.store.history import ingest as add_to_history
    from ncclparse.store.spool import Spool, SpoolError

    try:
        spool = Spool()
        with spool:  # the rows wait on disk for their runs: memory stays flat
            result, failures = parse_inputs(
                inputs, quiet, on_batch=spool.write, filters=filters, jobs=jobs
            )
            done = add_to_history(
                result,
                history_dir,
                tags=tags,
                date=date.date() if date else None,
                lock=lock,
                lock_timeout=lock_timeout,
                spool=spool,
            )
    except (HistoryError, SpoolError) as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_INFRASTRUCTURE)
    click.echo(
        f"{history_dir}: {len(done.added)} added ({done.rows} rows), "
        f"{len(done.skipped)} already present, {len(done.empty)} without measurements"
        + (
            f"; {len(done.removed)} stale temporary file(s) of killed ingests removed"
            if done.removed
            else ""
        ),
        err=True,
    )
    exit_on(failures)


if TYPE_CHECKING:
    _Choice = click.Choice[str]
else:  # click < 8.2 has no generic Choice
    _Choice = click.Choice


class _CompareFormat(_Choice):
    """text, json, md or html; ``markdown``, the old spelling of md, still read."""

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Any:
        return super().convert("md" if value == "markdown" else value, param, ctx)


_COMPARE_SUFFIXES = {".json": "json", ".md": "md", ".html": "html", ".htm": "html"}


@click.command()
@click.argument("baseline")
@click.argument("candidate")
@click.option("-o", "--output", type=OUTPUT_FILE, help="Write here (default: stdout).")
@click.option(
    "--format",
    "fmt",
    type=_CompareFormat(["text", "json", "md", "html"]),
    help="text: headed columns for a terminal; json; md: a Markdown table; html: a "
    "self-contained page with a chart. Default: by the extension of --output (.json, "
    ".md, .html), else text.",
)
@click.option(
    "--baseline-name",
    metavar="TEXT",
    help="What to call the baseline. Default: BASELINE as given.",
)
@click.option(
    "--candidate-name",
    metavar="TEXT",
    help="What to call the candidate. Default: CANDIDATE as given.",
)
@threshold_option(
    0.05,
    "Bus bandwidth change that counts as a change, of the median or of any aligned "
    "run: a fraction (0.05) or a percent (5%).",
)
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help=f"Exit with status {EXIT_REGRESSION} when a size or an aligned run "
    "regressed, or a baseline run is missing from the candidate.",
)
@JOBS
@QUIET
def compare(
    baseline: str,
    candidate: str,
    output: Path | None,
    fmt: str | None,
    baseline_name: str | None,
    candidate_name: str | None,
    threshold: float,
    fail_on_regression: bool,
    jobs: int,
    quiet: bool,
) -> None:
    """Compare BASELINE with CANDIDATE size by size and run by run, and give a
    verdict.

    Each is a log file or directory of logs, a Parquet/Arrow measurements table, or a
    history directory (all of it: every night, every tag). The output names both
    sides and what was read of each; per size it gives each side's median bus
    bandwidth (GB/s) and time (µs), the bus bandwidth change (%), and the worst of
    the runs aligned by host set (else by log file) with its change; then each
    aligned run at its worst size, and the missing and new runs.

    Exit status: 0 compared; 1 an input cannot be read; 2 usage; 3 with
    --fail-on-regression, a regression or a missing run (named on stderr).
    """
    from ncclparse.health.compare import compare as run_compare
    from ncclparse.inputs.sides import load_side
    from ncclparse.store.atomic import atomic_output

    base_table = load_side(baseline, jobs=jobs)
    cand_table = load_side(candidate, jobs=jobs)
    found = run_compare(
        base_table,
        cand_table,
        threshold=threshold,
        baseline_side=_compare_side(baseline, baseline_name, base_table),
        candidate_side=_compare_side(candidate, candidate_name, cand_table),
    )
    from ncclparse.report.comparison import (
        render_comparison,
        run_change_text,
        verdict_line,
    )

    text = render_comparison(found, _compare_format(output, fmt))
    if output is None:
        click.echo(text, nl=False)
    else:
        with atomic_output(output, binary=False) as handle:
            handle.write(text)
        if not quiet:
            click.echo(f"{output}: {verdict_line(found)}", err=True)
    failed = found.verdict == "regression" or bool(found.missing_runs)
    if fail_on_regression and failed:
        for change in found.regressed_runs:
            click.echo(f"Regressed: {run_change_text(change)}", err=True)
        for missing in found.missing_runs:
            click.echo(f"Missing from the candidate: {missing}", err=True)
        sys.exit(EXIT_REGRESSION)


def _compare_format(output: Path | None, fmt: str | None) -> str:
    """--format, else by the extension of --output, else text."""
    if fmt is not None:
        return fmt
    suffix = output.suffix.lower() if output is not None else ""
    return _COMPARE_SUFFIXES.get(suffix, "text")


def _compare_side(path: str, name: str | None, table: Any) -> Any:
    """One side of ``compare``: its name (``name``, else the path as given) and what
    was read of it; for a history, which nights."""
    from ncclparse.health.compare import Side, describe

    shown = name if name is not None else path
    about = describe(table, shown)
    nights = _history_nights(path)
    if nights is not None:
        if not nights:
            span = "every night"
        elif len(nights) == 1:
            span = f"1 night, {nights[0]}"
        else:
            span = f"{len(nights)} nights, {nights[0]} to {nights[-1]}"
        about = f"history, all of it: {span}, every tag; {about}"
    return Side(shown, about)


def _history_nights(path: str) -> list[str] | None:
    """The dates of a history's partitions, sorted (empty when they cannot be
    listed cheaply: an object store); None when ``path`` is not a history (as
    :func:`ncclparse.inputs.sides.load_measurements` tells)."""
    from ncclparse.store.locations import is_uri

    if is_uri(path):
        from ncclparse.store.locations import location

        try:
            listed = location(path).listing()
        except Exception:  # load_measurements read it: a listing error is unlikely
            return None
        names = [i.base_name for i in listed if i.base_name.startswith("date=")]
    else:
        where = Path(path)
        if not where.is_dir() or where.suffix.lower() in (".parquet", ".pq"):
            return None
        names = [p.name for p in where.glob("date=*")]
    if not names:
        return None
    return sorted(n.removeprefix("date=") for n in names)
