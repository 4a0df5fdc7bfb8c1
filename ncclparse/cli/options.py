"""What the commands share: reading INPUTS, the hardware option bundle, writing text.

Library errors are turned into messages once, by the group (:mod:`ncclparse.cli.app`);
here inputs that cannot be read are echoed and counted for the exit status.
"""

from __future__ import annotations

import functools
import json
import math
import shlex
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import click

if TYPE_CHECKING:
    from ncclparse.inputs.walk import Filters
    from ncclparse.parsers import ParseResult

EXIT_BAD_INPUT = 1  # an input could not be read or recognised (others still written)
# check, ingest, history: the machine failed, not the fabric: an output that cannot
# be written, a history that cannot be read, written or locked.
EXIT_INFRASTRUCTURE = 4
TABLE_FORMAT = click.Choice(["parquet", "arrow", "csv", "jsonl"])
OUTPUT_FILE = click.Path(dir_okay=False, path_type=Path)
# The option bundles every command that reads logs shares.
INPUTS = click.argument("inputs", nargs=-1, type=str)
QUIET = click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="No per-input summary on stderr (compare, trend: no summary of what was "
    "written); errors still show.",
)
# Worker processes for many files by default: one per CPU, up to this many (each
# holds its own parse, ~100 MB at most).
AUTO_JOBS = 8


def _jobs(ctx: Any, param: Any, value: str) -> int:
    """``--jobs``: a count from 1 on, or ``auto`` (the CPUs, up to AUTO_JOBS)."""
    if value == "auto":
        from ncclparse.inputs.workers import available_cpus

        return min(available_cpus(), AUTO_JOBS)
    try:
        jobs = int(value)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise click.BadParameter(f"{value!r} is not a count from 1 on, nor 'auto'")
    return jobs


JOBS = click.option(
    "-j",
    "--jobs",
    default="auto",
    show_default=True,
    callback=_jobs,
    metavar="N|auto",
    help="Parse files in N worker processes (1: none; auto: one per CPU, up to "
    f"{AUTO_JOBS}). The tables are the same.",
)
_HARDWARE = ("profile", "intra_bw", "inter_bw", "gpus_per_node", "nodes", "hw_latency")


def inputs_or_stdin(inputs: tuple[str, ...]) -> tuple[str, ...]:
    if inputs:
        return inputs
    if sys.stdin.isatty():
        raise click.UsageError("no INPUTS given and standard input is a terminal")
    return ("-",)


def parse_inputs(
    inputs: tuple[str, ...],
    quiet: bool,
    on_batch: Any = None,
    notes: list[Any] | None = None,
    filters: Filters | None = None,
    jobs: int = 1,
) -> tuple[Any, list[Exception]]:
    """Parse INPUTS (stdin when none and not a terminal); echo summaries and errors.

    What directory walks skipped is echoed as notes, and kept in ``notes`` if given
    (``ncclparse.inputs.walk.Note``). ``filters`` (from :func:`input_filters`) select
    the files of directory walks. While parsing, a progress line is drawn on stderr
    when it is a terminal and not ``quiet`` (:mod:`ncclparse.inputs.progress`), and
    wiped before anything else is written.
    """
    from ncclparse.inputs.parsing import read_inputs

    echo = ReadingEcho(quiet, on_batch)
    result, failures, found = read_inputs(
        inputs_or_stdin(inputs),
        filters=filters,
        jobs=jobs,
        on_batch=echo.on_batch,
        on_notes=echo.notes,
        progress=echo.progress,
    )
    if notes is not None:
        notes.extend(found)
    echo.parsed(result, failures)
    return result, failures


class ReadingEcho:
    """What a command shows on stderr while its inputs are read (the hooks of
    :func:`ncclparse.inputs.parsing.read_inputs` and ``ncclparse.check``): the
    walk's notes, a progress line when stderr is a terminal and not ``quiet``, then
    a summary line per input (not ``quiet``) and the inputs that failed.
    ``on_batch`` receives the rows as they are parsed (parse's CSV)."""

    def __init__(self, quiet: bool, on_batch: Any = None) -> None:
        self.quiet = quiet
        self._rows = on_batch
        self._line: Any = None

    def notes(self, found: list[Any]) -> None:
        from ncclparse.formatting import shown_name

        for note in found:
            click.echo(f"Note: {shown_name(note.text)}", err=True)

    def progress(self, total: int) -> Any:
        from ncclparse.inputs import progress

        if progress.enabled(self.quiet, sys.stderr):
            self._line = progress.Progress(total, sys.stderr)
        return self._line

    @property
    def on_batch(self) -> Any:
        if self._rows is None or not _stdout_is_terminal():
            return self._rows
        rows = self._rows

        def batches(batch: Any) -> None:
            # Rows for the terminal: wipe the line before they are written.
            if self._line is not None:
                self._line.close()
            rows(batch)

        return batches

    def parsed(self, result: ParseResult, failures: list[Exception]) -> None:
        from ncclparse.formatting import shown_name

        # A name from the file system is one line, whatever it holds (a newline
        # would forge a line of its own).
        if not self.quiet:
            for line in summary_lines(result):
                click.echo(shown_name(line), err=True)
        for failure in failures:
            click.echo(f"Error: {shown_name(str(failure))}", err=True)


def parse_points(
    inputs: tuple[str, ...],
    quiet: bool,
    limits: tuple[int, int],
    filters: Filters | None = None,
    jobs: int = 1,
) -> tuple[Any, list[Exception]]:
    """As :func:`parse_inputs`, for commands that judge points: rows stream into a
    :class:`ncclparse.inputs.points.PointTable`, which merges the repeats of a point
    when there are more rows than ``limits`` allow (the merged runs say so in their
    warnings).

    Raises TooManyPoints when the points themselves are too many.
    """
    import dataclasses

    from ncclparse.inputs.points import PointTable, with_merge_notes

    points = PointTable(limits)
    result, failures = parse_inputs(
        inputs, quiet, on_batch=points.add, filters=filters, jobs=jobs
    )
    measurements = points.table()
    runs = with_merge_notes(result.runs, points.merged_runs())
    return dataclasses.replace(result, measurements=measurements, runs=runs), failures


def summary_lines(result: ParseResult) -> list[str]:
    """One line per parsed source: runs, their statuses, rows and warnings."""
    runs = result.runs.to_pydict()
    by_source: dict[str, list[int]] = {}
    for index, source in enumerate(runs["source"]):
        by_source.setdefault(source, []).append(index)
    lines = []
    for source in result.accounting:
        indices = by_source.get(source, [])
        statuses = Counter(runs["status"][i] for i in indices)
        rows = sum(runs["rows"][i] for i in indices)
        warnings = sum(len(runs["warnings"][i]) for i in indices)
        tools = sorted({runs["tool"][i] for i in indices})
        status = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) or "no run"
        lines.append(
            f"{source}: {' '.join(tools) or 'no tool'}, {len(indices)} "
            f"run{'s' * (len(indices) != 1)} ({status}), {rows} rows, "
            f"{warnings} warning{'s' * (warnings != 1)}"
        )
    return lines


def exit_on(failures: list[Exception]) -> None:
    if failures:
        sys.exit(EXIT_BAD_INPUT)


def input_filters(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--include`` and ``--exclude`` (repeatable) to ``command``, which
    receives them as one ``filters`` value (:class:`ncclparse.inputs.walk.Filters`) for
    :func:`parse_inputs`."""

    @functools.wraps(command)
    def with_filters(*args: Any, **kwargs: Any) -> Any:
        from ncclparse.inputs.walk import Filters

        filters = Filters(kwargs.pop("include"), kwargs.pop("exclude"))
        return command(*args, filters=filters, **kwargs)

    decorated = click.option(
        "--exclude",
        multiple=True,
        metavar="GLOB",
        help="In directories, skip files and directories matching GLOB (path "
        "relative to the directory, or name; repeatable).",
    )(with_filters)
    return click.option(
        "--include",
        multiple=True,
        metavar="GLOB",
        help="In directories, read only files matching GLOB (path relative to the "
        "directory, or name, e.g. '*.log'; repeatable); files named on the command "
        "line are always read.",
    )(decorated)


# The option bundle for commands that walk INPUTS directories.
FILTERS = input_filters


# URI schemes pyarrow.fs.FileSystem.from_uri knows (abfs from pyarrow 16 on).
URI_SCHEMES = ("s3", "gs", "gcs", "abfs", "abfss", "hdfs", "viewfs", "file")


def _location(ctx: Any, param: Any, value: str | None) -> str | None:
    """A directory or a URI (``scheme://...``) of a scheme pyarrow can open; a
    URI of another scheme is a usage error (exit 2), before anything is read."""
    if value is None:
        return None
    scheme, found, _ = value.partition("://")
    named = found and scheme.isascii() and scheme.replace("+", "").isalnum()
    if named and scheme.lower() not in URI_SCHEMES:
        known = ", ".join(f"{s}://" for s in URI_SCHEMES)
        message = f"{value}: unknown URI scheme {scheme!r} (one of {known})"
        raise click.BadParameter(message, ctx, param)
    return value


LOCATION: dict[str, Any] = {"metavar": "DIR|URI", "callback": _location}


def history_option(help: str, *, required: bool = False) -> Callable[..., Any]:
    """``--history DIR|URI`` (``history_dir``), defaulting to NCCLPARSE_HISTORY."""
    return click.option(
        "--history",
        "history_dir",
        required=required,
        envvar="NCCLPARSE_HISTORY",
        show_envvar=True,
        help=help,
        **LOCATION,
    )


def history_locking(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--lock/--no-lock`` and ``--lock-timeout`` for commands that write a history
    (passed as ``lock`` and ``lock_timeout``)."""
    command = click.option(
        "--lock-timeout",
        type=click.FloatRange(min=0),
        default=600.0,
        show_default=True,
        envvar="NCCLPARSE_LOCK_TIMEOUT",
        show_envvar=True,
        help="Seconds to wait for another ingest's lock on a local history.",
    )(command)
    return click.option(
        "--lock/--no-lock",
        default=True,
        show_default=True,
        help="Lock a local history while writing. --no-lock: for file systems "
        "without flock (run one ingest at a time); object stores are never locked, "
        "and readers keep each log's earliest ingest.",
    )(command)


LOCKING = history_locking


@overload
def hardware_options(
    command: Callable[..., Any], *, validate: bool = True
) -> Callable[..., Any]: ...


@overload
def hardware_options(
    command: None = None, *, validate: bool = True
) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...


def hardware_options(
    command: Callable[..., Any] | None = None, *, validate: bool = True
) -> Any:
    """Add the hardware options to ``command``, which receives them as one
    ``hardware`` value (:class:`ncclparse.efficiency.HardwareOptions`). With
    ``validate``, a profile or figure that cannot be read is a usage error (exit 2)
    before any input is read; ``check`` validates them itself, so that its outputs
    are replaced by failing ones (``@hardware_options(validate=False)``)."""
    if command is None:
        return functools.partial(hardware_options, validate=validate)

    @functools.wraps(command)
    def with_hardware(*args: Any, **kwargs: Any) -> Any:
        from ncclparse.efficiency.hardware import HardwareOptions
        from ncclparse.errors import ProfileError

        given = {name: kwargs.pop(name) for name in _HARDWARE}
        hardware = HardwareOptions(**given)
        try:  # a misspelt preset or a bad file is configuration: exit 2, read nothing
            if validate:
                hardware.resolve()
        except ProfileError as exc:
            raise click.UsageError(str(exc)) from exc
        return command(*args, hardware=hardware, **kwargs)

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
    decorated: Callable[..., Any] = with_hardware
    for option in reversed(options):
        decorated = option(decorated)
    return decorated


def show_values(values: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(values, indent=2, default=str))
    else:
        for key, value in values.items():
            click.echo(f"{key}: {value}")


def command_line() -> str:
    """How ncclparse was invoked, for the report footer (shell-quoted, each
    argument shown as a name from the file system is: one line, control characters
    and the bytes of a name that is not UTF-8 as escapes)."""
    from ncclparse.formatting import shown_name

    program = Path(sys.argv[0]).name
    program = "python -m ncclparse" if program == "__main__.py" else program
    return " ".join([program, *(shown_name(shlex.quote(a)) for a in sys.argv[1:])])


def _stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def write_text(text: str, output: Path | None, *, default: Path) -> None:
    """Write UTF-8 ``text`` to ``output``; without one, to stdout or (a terminal)
    to ``default``, whose path is then printed."""
    from ncclparse.store.atomic import atomic_output

    if output is None and not _stdout_is_terminal():
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.buffer.flush()
        return
    path = output or default
    with atomic_output(path, binary=False) as handle:
        handle.write(text)
    if output is None:
        click.echo(path)


def parse_tags(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> dict[str, str]:
    """``--tag KEY=VALUE`` items as a dict; a malformed one is a usage error (exit
    2) with one message for every command."""
    tags = {}
    for item in value:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", ctx, param)
        tags[key.strip()] = text.strip()
    return tags


def tag_option(help: str) -> Callable[..., Any]:
    """``--tag KEY=VALUE`` (repeatable), passed as ``tags`` (a dict): the one
    declaration of ``check``, ``ingest`` and ``trend``."""
    return click.option(
        "--tag",
        "tags",
        multiple=True,
        callback=parse_tags,
        metavar="KEY=VALUE",
        help=help,
    )


def _threshold(ctx: Any, param: Any, value: str | float) -> float:
    """``--threshold``: a fraction (0.05) or a percent with its sign (5%), above 0
    and below 100 %. A bare number of 1 or more is refused, not guessed."""
    text = str(value).strip()
    percent = text.endswith("%")
    try:
        number = float(text.removesuffix("%").strip())
    except ValueError:
        number = math.nan
    fraction = number / 100 if percent else number
    if not 0 < fraction < 1:  # NaN fails too
        hint = "" if percent or not 1 <= number < 100 else f" (for percent: {text}%)"
        raise click.BadParameter(
            f"{text!r} is not a fraction between 0 and 1 (0.05) nor a percent "
            f"between 0% and 100% (5%){hint}",
            ctx,
            param,
        )
    return fraction


def threshold_option(default: float, help: str) -> Callable[..., Any]:
    """``--threshold`` as a fraction or a percent (see :func:`_threshold`)."""
    from ncclparse.formatting import format_threshold

    return click.option(
        "--threshold",
        default=format_threshold(default),
        show_default=True,
        callback=_threshold,
        metavar="FRACTION|PERCENT%",
        help=help,
    )


def load_rules(path: Path | None) -> Any:
    """The rules of ``--rules`` (default: the built-in ones); a bad file is a usage
    error (exit 2)."""
    from ncclparse.health.rules import DEFAULT_RULES, RulesError
    from ncclparse.health.rules import load_rules as read

    try:
        return DEFAULT_RULES if path is None else read(path)
    except RulesError as exc:
        raise click.BadParameter(str(exc), param_hint="'--rules'") from exc
