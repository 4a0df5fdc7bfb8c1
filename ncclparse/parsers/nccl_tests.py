"""nccl-tests and rccl-tests text output, every era (docs/nccl-tests-format.md).

The parser is a state machine over numbered lines. Each line is classified once (the
line accounting of schema.md) as a measurement, a line of the tool's own structure, an
error the tool printed, known foreign noise, blank, or a line that is named in the
run's warnings. Output of several launcher ranks (``[1,0]<stdout>:`` prefixes) is read
as separate streams, so interleaved copies of a non-MPI build become separate runs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, cast

from . import _lines
from ._lines import MAX_LINE, Line, Rows, Skipped, as_line
from ._model import KEEP_ROWS, Run
from ._native_rows import NativeColumns
from ._nccl_infer import (
    infer_collective,
    infer_nodes_from_elided,
    infer_ranks,
)
from ._nccl_layout import (
    ImpossibleValue,
    Layout,
    RowError,
    header_layout,
    is_count,
    layout_from_row,
    read_row,
    row_spec,
)
from ._nccl_lines import (
    CUT_OWN,
    CUT_RANK,
    FAILURE,
    GLUED_NOISE,
    NUMBERS_ONLY,
    OPENERS,
    ROW_START,
    is_rank_zero,
    nccl_code,
    sniff,
)
from ._nccl_recognise import Seen, command_reads, recognise, recognised
from ._nccl_recover import cut_row_doubt, shown, split_trailing, undecorate_line
from ._nccl_state import (
    StreamState,
    grow_ranks,
    set_library,
    split_copies,
    worth_keeping,
)
from ._nccl_topology import (
    ALGORITHMS,
    PROTOCOLS,
    Facts,
    Topology,
    matrix_header,
    matrix_row,
    normalise_list,
)

NAME = "nccl-tests"
READS_SKIPPED = True  # takes Skipped runs of plain NCCL debug lines too
# nccl-tests -T (src/common.cu): `HOST: Test timeout (60s) common.cu:518`.
_TIMEOUT = re.compile(r"Test timeout \((?P<s>[0-9]{1,9})s\)", re.ASCII)
# -I 1 -K N: `# Per-Iteration Report: ...; summary skips first N iterations `.
_ITER_SKIP = re.compile(r"summary skips first (?P<n>[0-9]{1,9}) iterations", re.ASCII)
# What ROW_START can match first once blanks are stripped.
_ROW_FIRST = frozenset("-0123456789")


def _requested(run: Run) -> None:
    """Set the run's nccl_algo / nccl_proto / algo_source: what NCCL says it read
    from the environment, else what the command line sets."""
    sources = []
    for name, column, names in (
        ("NCCL_ALGO", "nccl_algo", ALGORITHMS),
        ("NCCL_PROTO", "nccl_proto", PROTOCOLS),
    ):
        value, source = run.nccl_env.get(name), "env"
        if not value:
            value, source = run.command_env.get(name), "command"
        if value:
            setattr(run, column, normalise_list(value, names))
            if source not in sources:
                sources.append(source)
    run.algo_source = ",".join(sources) or None


# What the parser does with one kind of the tool's own lines.
_Handler = Callable[["_Parser", StreamState, int, Seen], None]


class _Parser:
    def __init__(self, source: str, emit: Callable[[Run], None]) -> None:
        self.source = source
        self.emit = emit
        self.emitted = 0
        self.runs: list[Run] = []  # opened and not yet emitted
        self.states: dict[str | None, StreamState] = {}
        # The line accounting: a plain dict (a Counter's += costs 2.5x, once a line).
        self.accounting: dict[str, int] = {}
        self.pending_command: tuple[int, str] | None = None
        self.pending_version: re.Match[str] | None = None
        # Topology facts printed while no run of the main stream was taking them:
        # before a run starts (NCCL init precedes the table) or after one ended.
        self.pending_topology: Topology | None = None
        # NCCL_ALGO / NCCL_PROTO set by echoed lines before the benchmark's command
        # (`-x NCCL_ALGO=Ring \` continuation lines, `export NCCL_ALGO=...`).
        self.pending_settings: dict[str, str] = {}
        # The column names of the last `Enabled NCCL Func/Proto/Algo Matrix` header.
        self.matrix_names: tuple[list[str], list[str]] | None = None

    # --- runs -------------------------------------------------------------------
    def _open(self, state: StreamState, line: int) -> Run:
        self._close(state)
        start = line
        run = Run(tool="nccl-tests", first_line=start)
        if self.pending_command is not None:
            run.first_line, command = self.pending_command
            self._set_command(run, command)
            self.pending_command = None
        if self.pending_version is not None:
            set_library(run, self.pending_version)
            self.pending_version = None
        if self.pending_settings:
            run.command_env = {**self.pending_settings, **run.command_env}
            self.pending_settings = {}
        state.run, state.phase, state.openers = run, "preamble", set()
        state.layout, state.placements, state.old_keys = None, None, None
        state.before_2_10, state.row_fields = False, None
        state.device_index, state.elided = {}, False
        state.copies, state.repeats, state.footers = 1, Counter(), 0
        state.rank_lines = Counter()
        state.topology = None
        if state is self.states.get(None):
            state.topology, self.pending_topology = self.pending_topology, None
        self.runs.append(run)
        return run

    def _current(self, state: StreamState, line: int) -> Run:
        return state.run if state.run is not None else self._open(state, line)

    def _close(self, state: StreamState) -> None:
        run = state.run
        if run is None:
            return
        self._flush_unread(state)
        self._flush_wrapped(state)
        if state.pending is not None:
            number, _ = state.pending
            run.warn(number, "data row cut by other output and never completed")
            state.pending = None
        if run.status == "truncated" and run.rows:
            run.warn(run.last_line, "input ended before the footer (run truncated)")
        # Inference reads the first KEEP_ROWS rows, whether later ones came as dicts
        # or as columns (feed_rows).
        run.seal_rows(all_after=True)
        infer_collective(run, state.old_keys, self.source, state.before_2_10)
        nodes = None
        if state.topology is not None:
            for name, value in state.topology.columns().items():
                setattr(run, name, value)
            nodes = state.topology.nnodes
            state.topology = None
        _requested(run)
        runs = split_copies(run, state) if state.copies > 1 else [run]
        self.runs.extend(runs[1:])
        for each in runs:
            infer_ranks(each, state.elided, launch=True)
            if state.elided:
                infer_nodes_from_elided(each, state.device_index)
            if each.nnodes is None:
                each.nnodes = nodes  # NCCL's `nNodes` when no Rank line tells
            each.set_row_collective(each.collectives[0] if each.collectives else None)
        state.run = None
        self._release()

    def _release(self) -> None:
        """Emit the ended runs that start before every open one, in source order."""
        open_runs = [s.run for s in self.states.values() if s.run is not None]
        if not open_runs:  # most closes: every run ended is ready
            ready, self.runs = self.runs, []
        else:
            limit = min(r.first_line for r in open_runs)
            open_ids = {id(r) for r in open_runs}
            ready = [
                r for r in self.runs if r.first_line < limit and id(r) not in open_ids
            ]
            ready_ids = {id(r) for r in ready}
            self.runs = [r for r in self.runs if id(r) not in ready_ids]
        for run in sorted(ready, key=lambda r: r.first_line):
            if worth_keeping(run):
                if not self.emitted:
                    run.first_line = 1  # what precedes the first run is its context
                self.emitted += 1
                self.emit(run)

    def _set_command(self, run: Run, command: str) -> None:
        run.command = command
        if "rccl-tests/" in command.partition("_perf")[0]:  # .../rccl-tests/build/
            run.tool = "rccl-tests"
        collective, settings = command_reads(command)
        run.add_collective(collective)
        run.command_env.update(self.pending_settings)
        run.command_env.update(settings)
        self.pending_settings = {}

    # --- lines ------------------------------------------------------------------
    def feed(self, line: Line) -> None:
        # Rank 0 prints the benchmark's output, so its tagged lines and untagged ones
        # (stderr, a shell) are one stream; other ranks' tagged lines are read apart.
        key = None if line.stream is None or is_rank_zero(line.stream) else line.stream
        state = self._state(key)
        text, mark = line.text, None
        if text[:1] != "#":  # the tool's own `#` lines: as undecorate_line gives them
            text, mark = undecorate_line(text)
        kind = self._classify(state, line, text)
        # Named when removing it made the line readable as the tool's own output.
        if mark is not None and kind in ("structure", "measurement", "error"):
            self._current(state, line.number).warn(
                line.number, f"line decoration {mark!r} removed before reading"
            )
        own = kind not in ("blank", "warned")  # the run's lines, NCCL noise included
        if kind == "warned" and not line.complete and state.run is not None:
            own = self._cut_line(state, state.run, line, text)
            kind = "warned_named"
        accounting = self.accounting
        accounting[kind] = accounting.get(kind, 0) + 1
        if kind == "warned":
            state.unread.append(line.number)
        elif kind != "blank":
            self._flush_unread(state)
        # A line cut by the end of input may read as anything (`========` as a banner
        # rule): it never stretches a run that is already complete.
        if (
            state.run is not None
            and own
            and (line.complete or state.run.status != "complete")
        ):
            state.run.last_line = line.number

    def _cut_line(self, state: StreamState, run: Run, line: Line, text: str) -> bool:
        """A line cut by the end of input that could not be read: named in the run's
        warnings; returns whether it is the run's own line."""
        # A Rank line cut by the end of input still proves that rank exists.
        cut = CUT_RANK.match(text.strip().lstrip("#").strip())
        if cut is not None and state.phase == "preamble":
            rank = int(cut.group("rank"))
            grow_ranks(run, rank)
            run.hosts[rank] = cut.group("host")
        run.warn(line.number, _cut_message(line))
        # A cut row, Rank or `#` line is the run's, unless the run is complete (it
        # would start the next); other text (prose) is not.
        return run.status != "complete" and (
            cut is not None or CUT_OWN.match(text) is not None
        )

    def _state(self, key: str | None) -> StreamState:
        state = self.states.get(key)
        if state is None:  # not setdefault: that would build a StreamState per line
            state = self.states[key] = StreamState()
        return state

    def skip_noise(self, skipped: Skipped) -> None:
        """Account for plain NCCL debug lines passed over: as feed() would for noise."""
        state = self._state(None)
        self._count("noise", skipped.lines)
        self._flush_unread(state)
        if state.run is not None:
            state.run.last_line = skipped.last
        if skipped.topology is not None:
            self._topology(state, skipped.topology)

    def feed_rows(self, rows: Rows) -> None:
        """Read a batch of lines that may be data rows (:class:`Rows`): natively,
        each plain row of the table the main stream is in; line by line, the rest.

        The same as feeding every line and every plain NCCL line between them: a row
        is read natively only where feed() would go straight to _row and add its
        rows with no warning (the native reader gives None for every other line).
        """
        state = self._state(None)
        numbers, raws, facts = rows.numbers, rows.raws, rows.facts
        reader = _NativeRows(numbers, raws)
        measurements = noise = 0
        previous, index = numbers[0] - 1, 0
        while index < len(numbers):
            number = numbers[index]
            if number - previous > 1:  # plain NCCL lines: as skip_noise()
                noise += number - previous - 1
                said = facts.get(index) if facts else None
                self._passed_over(state, number - 1, said)
            run, layout, read = state.run, state.layout, None
            if run is not None and layout is not None and _plain_table(state):
                read = reader.read(index, run, layout)
            if read is None or run is None:
                reader.flush()  # feed() may end the run: its rows first
                self.feed(as_line(number, raws[index]))
                previous, index = number, index + 1
                continue
            fields, dicts, stop = read
            run.add_rows_in_range(dicts)
            if stop > index + 1:  # lines read as columns, plain NCCL lines between
                last = numbers[stop - 1]
                noise += last - number - (stop - 1 - index)
                if facts:
                    self._facts_between(state, facts, index + 1, stop)
                number = last
            state.row_fields = fields
            measurements += stop - index
            if state.unread:
                self._flush_unread(state)
            run.last_line = number
            previous, index = number, stop
        reader.flush()
        if measurements:
            self._count("measurement", measurements)
        if noise:
            self._count("noise", noise)

    def _passed_over(self, state: StreamState, last: int, facts: Facts | None) -> None:
        """Plain NCCL lines up to line ``last`` between rows of a batch, and the
        topology facts they said: as skip_noise() (the caller counts them)."""
        if state.unread:
            self._flush_unread(state)
        if state.run is not None:
            state.run.last_line = last
        if facts is not None:
            self._topology(state, facts)

    def _facts_between(
        self, state: StreamState, facts: dict[int, Facts], start: int, stop: int
    ) -> None:
        """The topology facts of the plain NCCL lines among rows read as columns
        (batch indices ``start`` to ``stop``); the same facts again add nothing."""
        applied = None
        for at in range(start, stop):
            said = facts.get(at)
            if said is not None and said is not applied:
                self._topology(state, said)
                applied = said

    def _topology(self, state: StreamState, facts: Facts) -> None:
        """Give topology facts to the run they are about, or keep them for the next
        (:meth:`_facts_of`)."""
        self._facts_of(state).add(facts)

    def _facts_of(self, state: StreamState) -> Topology:
        """The facts of the run that NCCL lines of ``state`` are about, or of the next.

        A stream without a benchmark run of its own (another rank's NCCL lines) speaks
        for the main stream's run. Facts printed once that run has ended (footer,
        failure) or before any run wait for the next run of the main stream: NCCL
        initialises before nccl-tests prints its table. Left over at the end of the
        input, they go to the run whose span they are in (finish).
        """
        run = state.run
        if run is None or not (state.openers or run.hosts or run.rows):
            state = self.states.get(None) or state
            run = state.run
        if run is not None and run.status != "failed" and state.phase != "footer":
            if state.topology is None:
                state.topology = Topology()
            return state.topology
        if self.pending_topology is None:
            self.pending_topology = Topology()
        return self.pending_topology

    def _matrix(self, state: StreamState, stripped: str) -> bool:
        """Read a line of NCCL's `Enabled NCCL Func/Proto/Algo Matrix`, if it is one."""
        names = matrix_header(stripped)
        if names is not None:
            self.matrix_names = names
            return True
        row = matrix_row(stripped, self.matrix_names)
        if row is None:
            return False
        self._facts_of(state).add_matrix_row(*row)
        return True

    def _classify(self, state: StreamState, line: Line, text: str) -> str:
        stripped = text.strip()
        if not stripped:
            return "blank"
        # A row starts with a digit or `-` after blanks: other lines skip the pattern.
        if (stripped[0] in _ROW_FIRST and ROW_START.match(text)) or (
            state.pending and NUMBERS_ONLY.match(text)
        ):
            return self._data(state, line, text)
        self._flush_wrapped(state)
        if "|" in stripped and line.complete and self._matrix(state, stripped):
            return "noise"
        seen = recognised(stripped) if line.complete else recognise(stripped, False)
        if seen.settings:
            self.pending_settings.update(seen.settings)
        kind, number = seen.kind, line.number
        if kind == "failure" or (seen.tool_error and state.run):
            return self._failure(state, number, stripped)
        if kind == "killed":
            return self._ended(
                state, number, seen.value.message, failure=seen.value.failure
            )
        if kind == "fatal":
            return self._ended(state, number, seen.value, failure=True)
        if kind == "command":
            self._command(state, number, stripped)
            return "noise"
        if kind == "noise":
            self._noise(state, seen)
            return "noise"
        if kind == "cut":
            if seen.value is not None:
                self._opener(state, "params", number).params.update(dict(seen.value))
            return "warned"
        handler = self._STRUCTURE.get(kind)
        if handler is not None:
            handler(self, state, number, seen)
            return "structure"
        return "noise" if kind == "shell" else "warned"

    def _noise(self, state: StreamState, seen: Seen) -> None:
        """Read what known noise tells: NCCL's version, topology facts."""
        version = seen.match
        if version:
            if state.run is None:
                self.pending_version = version  # printed before the first line
            elif state.run.library_version is None:
                set_library(state.run, version)
        if seen.value is not None:
            self._topology(state, seen.value)

    # --- the tool's own lines: preamble (version, params ...) and table frame ----
    def _version(self, state: StreamState, number: int, seen: Seen) -> None:
        """`# nccl-tests version 2.13.8 nccl-headers=N nccl-library=N` (or rccl-)."""
        match = seen.match
        assert match is not None
        run = self._opener(state, "version", number)
        run.tool_version = match.group("v")
        if match.group("tool") == "r":
            run.tool = "rccl-tests"
        if match.group("lib"):
            run.library_version = nccl_code(int(match.group("lib")))

    def _starting(self, state: StreamState, number: int, seen: Seen) -> None:
        """`# Collective test starting: all_reduce_perf` (or `concluded`)."""
        assert seen.match is not None
        if seen.match.group("what") == "starting":
            run = self._opener(state, "starting", number)
        else:
            run = self._current(state, number)
            self._concluded(state, number, run)
        run.add_collective(seen.value)

    def _params(self, state: StreamState, number: int, seen: Seen) -> None:
        pairs, rccl_form = seen.value
        run = self._opener(state, "params", number)
        run.params.update(pairs)
        if rccl_form:
            run.tool = "rccl-tests"

    def _rccl_version(self, state: StreamState, number: int, seen: Seen) -> None:
        assert seen.match is not None
        run = self._current(state, number)
        run.tool, run.tool_version = "rccl-tests", seen.match.group("v")

    def _rccl_block(self, state: StreamState, number: int, seen: Seen) -> None:
        match = seen.match
        assert match is not None
        run = self._current(state, number)
        if match.group("what") == "RCCL":  # RCCL's NCCL_DEBUG=VERSION block
            run.tool = "rccl-tests"
            if run.library_version is None and match.group("v"):
                run.library_version = match.group("v")

    def _compiled(self, state: StreamState, number: int, seen: Seen) -> None:
        assert seen.match is not None
        self._current(state, number).library_version = seen.match.group("v")

    def _using(self, state: StreamState, number: int, seen: Seen) -> None:
        if not self._in_preamble(state):
            self._open(state, number)

    def _group(self, state: StreamState, number: int, seen: Seen) -> None:
        state.placements = seen.value

    def _units(self, state: StreamState, number: int, seen: Seen) -> None:
        """The `(B) (elements) ... (us)` units line: nothing to read."""

    def _opener(self, state: StreamState, kind: str, number: int) -> Run:
        order = OPENERS[kind]
        run = state.run
        if (
            run is not None
            and kind in state.openers
            and state.phase == "preamble"
            and not run.hosts
            and run.status != "failed"
            and all(OPENERS[k] <= order for k in state.openers)
        ):
            state.copies += 1  # the same preamble line again, before any Rank line
            return run
        if (
            run is None
            or state.phase != "preamble"
            or run.status == "failed"
            or any(OPENERS[k] >= order for k in state.openers)
        ):
            run = self._open(state, number)
        state.openers.add(kind)
        return run

    @staticmethod
    def _in_preamble(state: StreamState) -> bool:
        """Whether the stream's run is open and still before its table (a Rank or
        `Using devices` line then belongs to it; otherwise it starts a new run)."""
        run = state.run
        return run is not None and state.phase == "preamble" and run.status != "failed"

    def _rank(self, state: StreamState, number: int, seen: Seen) -> None:
        if not self._in_preamble(state):
            self._open(state, number)
        run = state.run
        assert run is not None
        rank, host, device, index = seen.value
        grow_ranks(run, rank)
        run.hosts[rank] = host
        state.rank_lines[rank] += 1
        run.devices[rank] = device
        state.device_index[rank] = index
        if device and device.startswith("AMD "):
            run.tool = "rccl-tests"

    def _header(self, state: StreamState, number: int, seen: Seen) -> None:
        if state.run is None or state.phase == "footer" or state.run.rows:
            self._open(state, number)
        words, narrow_type = seen.value
        state.layout = header_layout(words, state.placements)
        keys = state.layout.keys
        if (
            keys != ("size", "count", "type", "redop", "root")
            or state.layout.time_in_ms
        ):
            state.old_keys = keys  # E0-E2: the key columns tell the collective
        # `%6s` type label (4 spaces after `count`/`N`) and `error`: E0-E1; E2 widened
        # the column to 8 for bfloat16 (format doc section 2). Spacing a user changed
        # tells nothing.
        state.before_2_10 = state.layout.wrong_kind == "max_deviation" and narrow_type
        state.phase = "table"

    def _out_of_bounds(self, state: StreamState, number: int, seen: Seen) -> None:
        """`# Out of bounds values : 0 OK`: the first footer line."""
        match = seen.match
        assert match is not None
        run = self._current(state, number)
        run.oob_values = int(match.group("n"))
        run.oob_ok = None if match.group("ok") is None else match.group("ok") == "OK"
        state.phase = "footer"

    def _average(self, state: StreamState, number: int, seen: Seen) -> None:
        match = seen.match
        assert match is not None
        run = self._current(state, number)
        try:
            run.avg_busbw_gbps = float(match.group("v"))
        except ValueError:
            run.warn(number, f"unreadable average bus bandwidth {match.group('v')!r}")
        if match.group("ok") is not None:
            run.avg_busbw_ok = match.group("ok") == "OK"
        state.footers += 1
        if run.status == "truncated" and state.footers >= state.copies:
            run.status = "complete"
        state.phase = "footer"

    @staticmethod
    def _concluded(state: StreamState, number: int, run: Run) -> None:
        """`# Collective test concluded`, nccl-tests' last line, after a footer
        without its `Avg bus bandwidth` line (trimmed from a paste): the run is
        complete when its rows reach the parameter line's maxBytes."""
        if not (
            run.status == "truncated"
            and state.phase == "footer"
            and run.oob_values is not None
            and run.avg_busbw_gbps is None
            and state.copies == 1
        ):
            return
        short = rows_short_of(run)
        if short is None:
            run.status = "complete"
            run.warn(number, NO_AVERAGE)
        else:
            run.warn(number, f"no Avg bus bandwidth line, and {short}: truncated")

    def _failure(self, state: StreamState, number: int, stripped: str) -> str:
        """An error the tool printed: the run failed (timed out, with -T)."""
        run = self._current(state, number)
        if run.status != "failed" and state.phase != "preamble":
            state.phase = "footer"
        run.status = "failed"
        run.error(number, stripped)
        if timeout := _TIMEOUT.search(stripped):
            run.timeout_s = int(timeout.group("s"))
        return "error"

    def _ended(
        self, state: StreamState, number: int, message: str, *, failure: bool
    ) -> str:
        """A launcher/shell line: a process died of a signal (rule in _signals), or
        Open MPI aborted the job (_ompi: a failure)."""
        if state.run is None:  # another rank's stream: the main stream's run
            state = self.states.get(None) or state
        run = state.run
        if run is None:
            return "noise"  # no run to end: a launcher line, as before
        run.error(number, message)
        if failure:
            if run.status != "failed" and state.phase != "preamble":
                state.phase = "footer"
            run.status = "failed"
        return "error"

    def _misc_structure(self, state: StreamState, number: int, seen: Seen) -> None:
        run, body = self._current(state, number), seen.body
        if body.startswith("......"):
            state.elided = True
        elif body.startswith("Errors with asterisks"):
            run.tool = "rccl-tests"
        elif body.startswith("Blocking Enabled"):
            run.params["blocking"] = body.split(":", 1)[-1].strip()
        elif body.startswith("Per-Iteration Report"):
            # -I 1 (-K N): the JSON config's per_iter_skip, 0 without -K.
            skip = _ITER_SKIP.search(body)
            run.params["per_iter_skip"] = skip.group("n") if skip else "0"
        elif body.startswith("GPU memory usage"):
            run.params["gpu_memory_usage"] = body.split(":", 1)[-1].strip()
        elif body.startswith("Reducing maxBytes"):
            run.warn(number, body)
        elif body.startswith("error:") and body[6:].strip():
            run.error(number, body)

    # The handler of each kind of the tool's own lines (_nccl_recognise.recognise).
    _STRUCTURE: ClassVar[
        dict[str, Callable[[_Parser, StreamState, int, Seen], None]]
    ] = {
        "version": _version,
        "starting": _starting,
        "params": _params,
        "rccl_version": _rccl_version,
        "rccl_block": _rccl_block,
        "compiled": _compiled,
        "rank": _rank,
        "using": _using,
        "names": _header,
        "group": _group,
        "units": _units,
        "oob": _out_of_bounds,
        "avg": _average,
        "misc": _misc_structure,
    }

    def _command(self, state: StreamState, number: int, text: str) -> None:
        run = state.run
        if run is None or state.phase != "preamble" or state.openers or run.hosts:
            self.pending_command = (number, text)
            self._close(state)
        else:
            self._set_command(run, text)

    def _data(self, state: StreamState, line: Line, text: str) -> str:
        number = line.number
        glued = GLUED_NOISE.search(text) if "CCL " in text else None
        if glued is not None:
            text = text[: glued.start()]
        tokens = text.split()
        if state.pending is not None and not ROW_START.match(text):
            return self._rejoin(state, line, tokens)
        self._flush_wrapped(state)
        if state.pending is not None:
            first, _ = state.pending
            self._current(state, number).warn(
                first, "data row cut by other output and never completed"
            )
            state.pending = None
        if ("ailure" in text or "imeout" in text) and FAILURE.search(text):
            # The process printed its error (`HOST: Test timeout (30s) ...`) after
            # the unfinished row, on the same line: an error, not a measurement.
            run = self._current(state, number)
            run.warn(number, "data row cut by an error message: not a measurement")
            return self._failure(state, number, text.strip())
        if glued is not None and (
            state.layout is None or len(tokens) < 3 + state.layout.metric_tokens
        ):
            state.pending = (number, tokens)
            return "measurement"
        tokens, trailing = split_trailing(tokens, state.layout)
        if trailing:
            self._current(state, number).warn(
                number, f"text after the row's last value ignored: {shown(trailing)}"
            )
        if (
            line.complete
            and state.layout is not None
            and 3 <= len(tokens) < 3 + state.layout.metric_tokens
        ):
            # Too short for the layout: the rest may follow on the next line (a row
            # wrapped by a terminal or an editor); if not, it is read as it is.
            state.pending, state.wrapped = (number, tokens), True
            return "measurement"
        return self._row(state, number, tokens, complete=line.complete)

    def _rejoin(self, state: StreamState, line: Line, tokens: list[str]) -> str:
        """The rest of a data row that was cut (or wrapped): read with its start."""
        assert state.pending is not None
        first, before = state.pending
        state.pending = None
        how = "wrapped over two lines" if state.wrapped else "cut by other output"
        state.wrapped = False
        run = self._current(state, line.number)
        run.warn(first, f"data row {how}; rejoined with line {line.number}")
        return self._row(state, first, before + tokens, complete=line.complete)

    def _flush_wrapped(self, state: StreamState) -> None:
        """A short row whose continuation never came: read (and named) as it is."""
        if state.pending is not None and state.wrapped:
            number, tokens = state.pending
            state.pending, state.wrapped = None, False
            if self._row(state, number, tokens, complete=True) != "measurement":
                self._count("measurement", -1)
                self._count("warned_named", 1)

    def _row(
        self,
        state: StreamState,
        number: int,
        tokens: list[str],
        complete: bool,
    ) -> str:
        if state.run is None or (
            state.phase == "footer" and state.footers >= state.copies
        ):
            self._open(state, number)
        run = state.run
        assert run is not None
        if complete:
            read = self._whole_row(state, run, number, tokens)
        else:
            read = self._last_row(state, run, number, tokens)
        if read is None:
            return "warned_named"
        keys, blocks = read
        if state.copies > 1:
            key = (keys["dtype"], keys["redop"], keys["root"], keys["size_bytes"])
            keys["_copy"] = state.repeats[key] % state.copies
            state.repeats[key] += 1
        self._add_blocks(state, run, number, keys, blocks)
        return "measurement"

    def _whole_row(
        self, state: StreamState, run: Run, number: int, tokens: list[str]
    ) -> tuple[dict[str, Any], list[dict[str, Any] | None]] | None:
        """A data line read in the stream's layout (or the layout it shows): its
        keys and blocks, or None when it is unreadable (named in the warnings)."""
        if state.layout is None:
            state.layout = layout_from_row(tokens)
            if state.layout is None:
                run.warn(number, "looks like a data row but matches no known layout")
                return None
        state.phase = "table"
        try:
            read = read_row(tokens, state.layout)
        except ImpossibleValue as exc:  # worded as the other parsers word it
            run.refuse(number, str(exc), " ".join(tokens))
            return None
        except RowError as exc:
            run.warn(number, f"unreadable data row: {exc}")
            return None
        state.row_fields = len(tokens)
        return read

    def _add_blocks(
        self,
        state: StreamState,
        run: Run,
        number: int,
        keys: dict[str, Any],
        blocks: list[dict[str, Any] | None],
    ) -> None:
        """One row per placement a data line measured."""
        assert state.layout is not None
        for placement, block in zip(state.layout.placements, blocks, strict=True):
            if block is None:
                continue
            if block.pop("over_tolerance"):
                run.warn(number, f"{placement} error marked * (over the tolerance)")
            if "i_p99" in state.layout.half and "per_iter_skip" in run.params:
                block["iter_skipped"] = iter_skipped(run)
            run.add_row(
                {
                    "line": number,
                    "placement": placement,
                    "reported_bytes": keys["size_bytes"],
                    **keys,
                    **block,
                }
            )

    def _last_row(
        self, state: StreamState, run: Run, number: int, tokens: list[str]
    ) -> tuple[dict[str, Any], list[dict[str, Any] | None]] | None:
        """A data line without a newline (the input's last): its row, unless cut.

        It is cut when provably incomplete (cut_row_doubt); otherwise it is read,
        with a warning, and a last value that may itself be cut is set to null.
        """
        cut = "last line cut off by the end of input: not a measurement"
        layout = state.layout or layout_from_row(tokens)
        fields = state.row_fields
        if layout is None:
            run.warn(number, cut)
            return None
        if fields is not None and len(tokens) < fields:
            run.warn(number, f"{cut} ({len(tokens)} fields, the rows before {fields})")
            return None
        try:
            keys, blocks = read_row(tokens, layout)
        except RowError:
            run.warn(number, cut)
            return None
        why, uncertain = cut_row_doubt(tokens, layout, keys, blocks)
        if why is not None:
            run.warn(number, f"{cut} ({why})")
            return None
        message = (
            "last line has no newline; read as a whole row (every field present "
            "and consistent)"
        )
        if uncertain is not None:
            last = blocks[-1]  # the block the last token is in (N/A: not uncertain)
            if last is not None:
                last[uncertain] = None
            message += f"; its last value {tokens[-1][:24]!r} may be cut: set to null"
        run.warn(number, message)
        state.layout, state.phase = layout, "table"
        return keys, blocks

    def _flush_unread(self, state: StreamState) -> None:
        if not state.unread:
            return
        run = state.run if state.run is not None else self._open(state, state.unread[0])
        first, last = state.unread[0], state.unread[-1]
        where = f"line {first}" if first == last else f"lines {first}-{last}"
        count = len(state.unread)
        run.warn(
            where,
            f"{count} line{'s' * (count > 1)} not recognised "
            "as benchmark output (kept out of the tables)",
        )
        state.unread = []

    def finish(self) -> Counter[str]:
        for key, state in list(self.states.items()):
            self._flush_unread(state)  # even in a stream with no run: opens one
            pending = self.pending_topology
            if key is None and state.run is not None and pending is not None:
                # Printed after the last run ended, inside its span: its facts.
                if state.topology is None:
                    state.topology = pending
                else:
                    state.topology.merge(pending)
                self.pending_topology = None
            self._close(state)
        # Rows whose warning names them are accounted as warned, not twice.
        self._count("warned", self.accounting.pop("warned_named", 0))
        return Counter(self.accounting)

    def _count(self, kind: str, lines: int) -> None:
        self.accounting[kind] = self.accounting.get(kind, 0) + lines


class _NativeRows:
    """The native reads of one Rows batch, each made for the run and layout the
    parser is in when it reaches a line (and made again when they change).

    A run's first KEEP_ROWS rows are dicts (inference reads them); after those,
    rows are read as columns (:class:`NativeColumns`) and go to the run's spill in
    batches: :meth:`flush` writes those read so far, and must come before the
    parser reads any line itself.
    """

    def __init__(self, numbers: list[int], raws: list[str]) -> None:
        self.numbers, self.raws = numbers, raws
        self.key: tuple[Run, Layout, str | None, bool] | None = None
        self.start = 0  # the index of the first line of the current read
        self.dicts: _lines.RowsRead | None = None
        self.columns: NativeColumns | None = None
        self.end = 0  # the index after the last line of the current read
        self.fields: list[int] = []  # of the columns' lines
        self.ends: list[int] = []
        self.run: Run | None = None  # whose rows the columns are
        self.written = self.read_to = 0  # the columns' rows written, and read

    def read(
        self, index: int, run: Run, layout: Layout
    ) -> tuple[int, tuple[dict[str, Any], ...], int] | None:
        """Line ``index`` read natively for ``run`` in ``layout``, or None.

        Returns (the token count of the last line read, row dicts, the index after
        the last line read): every line from ``index`` up to the next one the parser
        must read itself, as their dicts or (as columns) no dicts. The state the
        parser reads a line in is the same for every such line (plain rows of one
        table), so each need not come back to it."""
        skip = run.params.get("per_iter_skip") if "i_p99" in layout.half else None
        columnar = len(run.rows) >= KEEP_ROWS and _lines.read_rows_columns is not None
        key = self.key
        if (
            key is None
            or key[0] is not run
            or key[1] is not layout
            or key[2:] != (skip, columnar)
            or index >= self.end
        ):
            self._read(index, run, layout, skip, columnar)
        at = index - self.start
        if self.columns is not None:
            if not self.fields[at]:
                return None
            stop = len(self.fields)
            if not self.fields[-1]:  # reading stopped after a line for the parser
                stop -= 1
            self.read_to = self.ends[stop - 1]
            return self.fields[stop - 1], (), self.start + stop
        dicts = self.dicts
        if dicts is None or dicts[at] is None:
            return None
        end = at + 1
        while end < len(dicts) and dicts[end] is not None:
            end += 1
        if end == at + 1:
            fields, rows = cast("tuple[int, tuple[dict[str, Any], ...]]", dicts[at])
            return fields, rows, index + 1
        read = cast("list[tuple[int, tuple[dict[str, Any], ...]]]", dicts[at:end])
        rows = tuple(row for _, each in read for row in each)
        return read[-1][0], rows, self.start + end

    def _read(
        self, index: int, run: Run, layout: Layout, skip: str | None, columnar: bool
    ) -> None:
        """Read from line ``index`` to the first line the parser must read itself
        (each line is read once; dicts only up to the run's KEEP_ROWS-th row)."""
        self.flush()
        self.key, self.start = (run, layout, skip, columnar), index
        self.dicts = self.columns = None
        self.end = index + 1  # nothing read: the next line is looked at anew
        skipped = None if skip is None else _count(skip)
        if skip is not None and skipped is None:
            return  # a -K that is no count: the parser's to read (iter_skipped)
        spec = row_spec(layout, skipped)
        if spec is None:
            return
        numbers, raws = self.numbers, self.raws
        read_rows, read_columns = _lines.read_rows, _lines.read_rows_columns
        if columnar and read_columns is not None:
            output = read_columns(numbers, raws, spec, index, len(raws))
            self.columns = NativeColumns(output, layout.cputime, skipped)
            self.fields = self.columns.fields.tolist()
            self.ends = self.columns.ends.tolist()
            self.run, self.written, self.read_to = run, 0, 0
            self.end = index + len(self.fields)
        elif read_rows is not None:
            # A line gives at most two rows: past KEEP_ROWS, columns take over.
            limit = max(1, (KEEP_ROWS - len(run.rows) + 1) // 2)
            self.dicts = read_rows(numbers, raws, spec, index, limit)
            self.end = index + len(self.dicts)

    def flush(self) -> None:
        """Write the rows read as columns so far to their run."""
        columns, run = self.columns, self.run
        if columns is not None and run is not None and self.read_to > self.written:
            run.add_batch(columns.rows(self.written, self.read_to))
            self.written = self.read_to


def iter_skipped(run: Run) -> int | None:
    """The run's -K (``per_iter_skip``) as every block of an -I table carries it, or
    None when the params line gave something that is no count (``1x``)."""
    return _count(run.params["per_iter_skip"])


def _count(text: str) -> int | None:
    return int(text) if is_count(text) else None


def _plain_table(state: StreamState) -> bool:
    """Whether the stream is in a table whose next row, if plain, the native reader
    may read (no row waiting for its rest, no copies of the run to tell apart)."""
    return state.phase == "table" and state.pending is None and state.copies == 1


NO_AVERAGE = (
    "no Avg bus bandwidth line: complete, as the Out of bounds line and `Collective "
    "test concluded` end the run and its rows reach maxBytes"
)


def rows_short_of(run: Run) -> str | None:
    """Why the rows of ``run`` may not be all its sizes (None: they are): the next
    size after its largest, by the parameter line's step, must exceed maxBytes."""
    params = run.params
    step = _STEP.match(params.get("step", ""))
    maximum = params.get("maxBytes", "")
    if step is None or not maximum.isdigit():
        return "no parameter line tells the sizes to expect"
    if run.spill is not None or not run.rows:
        return "its rows cannot be checked against maxBytes"
    largest = max(row["size_bytes"] for row in run.rows)
    amount = int(step.group("n"))
    following = largest * amount if step.group("kind") == "factor" else largest + amount
    if following > int(maximum) and largest <= int(maximum):
        return None
    return f"its largest size {largest} is not the last before maxBytes {maximum}"


_STEP = re.compile(r"^(?P<n>\d{1,19})\((?P<kind>factor|bytes)\)$", re.ASCII)


def _cut_message(line: Line) -> str:
    if len(line.text) >= MAX_LINE:  # cut by the reader, wherever it is
        return f"line longer than {MAX_LINE >> 20} MiB characters: cut and not read"
    return "last line cut off by the end of input"


def parse(
    lines: Iterable[Line | Skipped | Rows], source: str, emit: Callable[[Run], None]
) -> Counter[str]:
    """Parse nccl-tests/rccl-tests text output (see module docstring).

    Each run goes to ``emit`` once it has ended, in source order; returns the line
    accounting.
    """
    parser = _Parser(source, emit)
    for line in lines:
        if isinstance(line, Skipped):
            parser.skip_noise(line)
        elif isinstance(line, Rows):
            parser.feed_rows(line)
        else:
            parser.feed(line)
    return parser.finish()


__all__ = ["NAME", "READS_SKIPPED", "parse", "sniff"]
