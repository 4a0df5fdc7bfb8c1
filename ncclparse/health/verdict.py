"""The verdict of a run: is the data sound, is the run whole, is the fabric healthy?

One function, :func:`judge_run`, used by the report, the Markdown summary and
``ncclparse check``. A verdict is the most severe of its findings: the run's status
(failed, truncated), data errors (``#wrong`` > 0, out-of-bounds values, measurement
lines with an impossible value (runs ``refused``), printed busbw
disagreeing with the recomputed one) and, per block (a series with both placements):

* the median efficiency of the plateau sizes against the ideal, judged with the
  thresholds of :class:`~ncclparse.health.rules.VerdictPolicy` only when the plateau
  was reached and the ideal's figures were given (or, on one node, are the GPU's own);
  otherwise a note says what was measured and why it is not judged;
* anomalies that need no hardware figures: a GPU collective's busbw collapsing at
  some size (FAIL), busbw falling with size, in-place and out-of-place far apart, a
  wide spread of times at one size.

Levels, from best to worst: ``ok``, ``info`` (nothing wrong, but nothing judged
either), ``warn``, ``bad``; said as OK, NOTE, CHECK, FAIL
(:func:`ncclparse.health.outcomes.outcome_of`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from ncclparse.efficiency.algorithms import RULED_OUT, SHOWN
from ncclparse.efficiency.fits import MIN_SIZES, PLATEAU, STILL_RISING
from ncclparse.formatting import (
    format_bytes,
    format_gbps,
    format_percent,
    series_label,
)
from ncclparse.health.outcomes import Level, outcome_of, symbol_of
from ncclparse.health.rules import VerdictPolicy
from ncclparse.schema import BLOCK_KEYS, NCCL_TOOLS, SERIES_KEYS

__all__ = [
    "JUDGED_COLUMNS",
    "JUDGED_FIT_COLUMNS",
    "LABELS",
    "MISPRINT",
    "RECOMPUTABLE",
    "AnalysedRows",
    "Aspect",
    "Finding",
    "Level",
    "Remedy",
    "Verdict",
    "blocks_of",
    "judge_run",
    "judged",
    "no_plateau",
]

# What a finding is about: the run as a whole, its data, or the fabric's efficiency.
Aspect = Literal["status", "data", "efficiency"]
# A row of analysed measurements: a pandas row or a plain mapping.
Row: TypeAlias = "Mapping[str, Any] | pd.Series[Any]"
_RANK: dict[Level, int] = {"ok": 0, "info": 1, "warn": 2, "bad": 3}
# The analysed columns a verdict reads (of rows; of fits, JUDGED_FIT_COLUMNS): a caller
# judging many runs selects these first, as every per-run selection copies them.
JUDGED_COLUMNS = (
    *SERIES_KEYS,
    "line",
    "size_bytes",
    "time_min_us",
    "time_max_us",
    "wrong",
    "wrong_kind",
    "time_us",
    "busbw_gbps",
    "busbw_calc_gbps",
    "busbw_mismatch",
    "cputime",
    "grouped",
    "ideal_busbw_gbps",
    "ideal_basis",
    "algorithm",
    "algorithm_basis",
    "expected_busbw_gbps",
    "ideal_low_busbw_gbps",
    "algorithm_low",
    "expected_low_busbw_gbps",
    "efficiency",
    "efficiency_note",
    "regime",
    "plateau",
)
JUDGED_FIT_COLUMNS = ("source", "run", "collective", "placement", "crossover_bytes")
# Tools whose printed algbw and busbw are size / time and busbw = algbw x the bus
# factor (nccl-tests-format.md sec. 7). IMB's Mbytes/sec counts both directions of
# a PingPong or Sendrecv, so its bandwidth is not compared.
RECOMPUTABLE = frozenset({"nccl-tests", "rccl-tests"})
# A printed bandwidth is contradicted when it is off by more than the rounding of its
# digits and of the time's, and by more than this fraction: a corrupt or edited row
# (x3, a digit lost), not a log re-printed from rounded figures. Below it, beyond the
# rounding, the printed busbw is a CHECK.
MISPRINT = 0.05
FALL = 0.8  # busbw at the largest size below 80 % of its peak: falling with size
# A GPU collective's busbw below half of what a smaller size reached: it collapsed
# there (a stall, a path or protocol fault). Healthy nccl-tests sweeps rise with size
# in the bandwidth-bound range, give or take a protocol switch (docs/efficiency.md:
# the corpus' dips); CPU benchmarks (oneCCL, IMB) fall by 80-99 % where a message
# outgrows a cache, which is not a fault, so they are not judged on it.
COLLAPSE = 0.5
APART = 0.75  # in-place below 75 % of out-of-place (or the reverse): apart
SPREAD = 2.0  # slowest time over twice the fastest at one size: a wide spread
# A plateau this many times the line rate of the fastest algorithm the figures allow
# (in-network reduction included, which at most halves the bytes sent): the figures
# cannot be the machine's (a unit mistaken: Mb/s for Gb/s, bits for bytes), and every
# log would pass as above the ideal. Up to it, a profile a little low is a NOTE.
IMPLAUSIBLE = 4.0
# Each level's word and symbol (health.outcomes: the one vocabulary).
LABELS: dict[Level, tuple[str, str]] = {
    level: (outcome_of(level), symbol_of(outcome_of(level))) for level in _RANK
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One reason behind a verdict, at its own level, about one ``aspect``."""

    level: Level
    text: str
    aspect: Aspect = "efficiency"

    @property
    def label(self) -> str:
        """The level as a word: OK, NOTE, CHECK, FAIL."""
        return LABELS[self.level][0]

    @property
    def symbol(self) -> str:
        """The level as a symbol: ✓, i, !, ✗."""
        return LABELS[self.level][1]


@dataclass(frozen=True, slots=True)
class Verdict:
    """A run's verdict: worst ``level``, its ``label``/``symbol``, a one-line
    ``headline`` (the worst finding) and every finding, worst first."""

    level: Level
    label: str
    symbol: str
    headline: str
    findings: tuple[Finding, ...]

    def worst(self, aspect: Aspect) -> Level | None:
        """The worst level among the findings about ``aspect`` (None: none)."""
        found: Level | None = None
        for finding in self.findings:
            if finding.aspect == aspect and (
                found is None or _RANK[finding.level] > _RANK[found]
            ):
                found = finding.level
        return found


RowBlock = tuple[tuple[Any, ...], "AnalysedRows"]


def blocks_of(rows: AnalysedRows) -> list[RowBlock]:
    """The blocks (BLOCK_KEYS) of one run's analysed rows, in key order."""
    if len(rows) and all(_constant(rows[key]) for key in BLOCK_KEYS):
        # Most runs are one block: a dozen-key groupby per run took seconds at
        # 1,000 logs. The key is the first row's (a missing value as NaN/None:
        # series_label reads both as missing).
        return [(tuple(rows[key][0] for key in BLOCK_KEYS), rows)]
    keys = pd.DataFrame({key: rows[key] for key in BLOCK_KEYS})
    grouped = keys.groupby(list(BLOCK_KEYS), dropna=False, sort=True)
    return [
        (cast("tuple[Any, ...]", key), rows.take(group.index.to_numpy()))
        for key, group in grouped
    ]


def _constant(values: npt.NDArray[Any]) -> bool:
    """True when every value of ``values`` is the same (all missing counts)."""
    missing = pd.isna(values)
    if missing.all():
        return True
    return not missing.any() and bool((values == values[0]).all())


def judge_run(
    run: Mapping[str, Any],
    rows: AnalysedRows,
    policy: VerdictPolicy,
    fits: pd.DataFrame | None = None,
    blocks: Sequence[RowBlock] | None = None,
) -> Verdict:
    """Return the verdict of one run.

    ``run`` is a ``runs`` table row as a mapping; ``rows`` are the run's analysed rows
    (:func:`ncclparse.efficiency.analyze`'s columns, any order; at least
    JUDGED_COLUMNS); ``fits`` the run's fits, for the crossover size named when even
    the largest size is latency-bound; ``blocks`` the rows' :func:`blocks_of`, when
    the caller has them already.
    """
    mine = rows
    gpu = run.get("tool") in NCCL_TOOLS
    findings = [*_status(run), *_data(run, mine)]
    found = blocks_of(mine) if blocks is None else blocks
    for key, block in found:
        where = series_label(dict(zip(BLOCK_KEYS, key, strict=True)))
        prefix = f"{where}: " if len(found) > 1 else ""
        findings.extend(_efficiency(block, fits, policy, prefix, gpu=gpu))
    if not findings:
        findings.append(Finding("info", "no measurement to judge"))
    findings.sort(key=lambda f: -_RANK[f.level])
    level = findings[0].level
    label, symbol = LABELS[level]
    return Verdict(level, label, symbol, findings[0].text, tuple(findings))


def _judged_positions(block: AnalysedRows) -> npt.NDArray[np.intp]:
    placement = block["placement"]
    size = block["size_bytes"]
    for wanted in ("out-of-place", "in-place"):
        mine = np.flatnonzero((placement == wanted) & (size > 0))
        if len(mine):
            # NumPy order, stable as sort_values' was.
            return mine[np.argsort(size[mine], kind="stable")]
    return np.zeros(0, np.intp)


class AnalysedRows:
    """Analysed rows (:func:`ncclparse.efficiency.analyze`'s) as NumPy columns, each
    read once when first asked for, from a DataFrame or from whole-table arrays, at
    some positions: judging 1,000 runs with a pandas selection per value took
    seconds. Text and nullable columns are object arrays (null: None), numbers float
    or int (null: NaN). The one form the verdict reads; :meth:`frame` gives the
    report its DataFrame."""

    __slots__ = ("_at", "_cache", "_source")

    def __init__(
        self,
        source: pd.DataFrame | Mapping[str, npt.NDArray[Any]],
        at: npt.NDArray[np.intp] | None = None,
    ) -> None:
        self._source = source
        self._at = at
        self._cache: dict[str, npt.NDArray[Any]] = {}

    def __len__(self) -> int:
        if self._at is not None:
            return len(self._at)
        if isinstance(self._source, pd.DataFrame):
            return len(self._source)
        return len(next(iter(self._source.values()), ()))

    def __getitem__(self, name: str) -> npt.NDArray[Any]:
        found = self._cache.get(name)
        if found is None:
            source = self._source
            values = (
                _numpy(source[name])
                if isinstance(source, pd.DataFrame)
                else source[name]
            )
            found = values if self._at is None else values[self._at]
            self._cache[name] = found
        return found

    @property
    def names(self) -> list[str]:
        return [str(name) for name in self._source]

    def take(self, positions: npt.NDArray[np.intp]) -> AnalysedRows:
        """The rows at ``positions`` (of these rows)."""
        at = positions if self._at is None else self._at[positions]
        return AnalysedRows(self._source, at)

    def row(self, index: int) -> Mapping[str, Any]:
        """Row ``index`` (negative from the end) as a mapping of its values."""
        return _Row(self, index)

    def true(self, name: str) -> npt.NDArray[np.bool_]:
        """Where boolean column ``name`` is true (null: false, as pandas' eq)."""
        return np.array([v is True for v in self[name].tolist()], dtype=bool)

    def frame(self) -> pd.DataFrame:
        """The rows as a DataFrame: of a DataFrame, its own rows (index, types)."""
        source = self._source
        if isinstance(source, pd.DataFrame):
            return source if self._at is None else source.iloc[self._at]
        return pd.DataFrame({name: self[name] for name in self.names})


class _Row(Mapping[str, Any]):
    __slots__ = ("_index", "_rows")

    def __init__(self, rows: AnalysedRows, index: int) -> None:
        self._rows, self._index = rows, index

    def __getitem__(self, name: str) -> Any:
        return self._rows[name][self._index]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows.names)

    def __len__(self) -> int:
        return len(self._rows.names)


def _numpy(column: pd.Series[Any]) -> npt.NDArray[Any]:
    """A column's values; an extension type's as objects, null as None."""
    if isinstance(column.dtype, np.dtype):
        return column.to_numpy()
    values = np.array(column.astype(object).to_numpy(), dtype=object)  # writable
    values[pd.isna(values)] = None
    return values


def judged(block: AnalysedRows) -> AnalysedRows:
    """The rows of a block that are judged: one placement (out-of-place when
    measured), non-zero sizes, by size."""
    return block.take(_judged_positions(block))


def _status(run: Mapping[str, Any]) -> list[Finding]:
    found = []
    if run.get("net") == "Socket" and (run.get("nnodes") or 0) > 1:
        nics = ", ".join(run.get("nics") or []) or "unnamed interfaces"
        found.append(
            Finding(
                "warn",
                f"NCCL moved data between nodes over TCP sockets ({nics}), not RDMA: "
                "expected only where the nodes have no InfiniBand/RoCE/EFA",
                "status",
            )
        )
    if run["status"] == "failed":
        errors = run["errors"]
        first = errors[0] if errors else "no error text"
        more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
        found.append(Finding("bad", f"the run failed: {first}{more}", "status"))
    elif run["status"] == "truncated":
        found.append(
            Finding(
                "warn",
                f"truncated: the log ends at line {run['last_line']} before the "
                "run's footer; larger sizes were not measured",
                "status",
            )
        )
    if not run["rows"]:
        found.append(Finding("bad", "the run produced no measurement", "status"))
    return found


def _data(run: Mapping[str, Any], rows: AnalysedRows) -> list[Finding]:
    found = []
    line = rows["line"]
    wrong = (rows["wrong_kind"] == "count") & (rows["wrong"].astype(float) > 0)
    if wrong.any():
        first = rows.row(int(np.flatnonzero(wrong)[np.argmin(line[wrong])]))
        found.append(
            Finding(
                "bad",
                f"data errors: {int(wrong.sum())} measurements with #wrong > 0 "
                f"(first: {format_bytes(first['size_bytes'])} {first['placement']}, "
                f"line {first['line']})",
                "data",
            )
        )
    refused: Sequence[str] = run.get("refused") or []
    if len(refused):
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        found.append(
            Finding(
                "bad",
                f"data error: a measurement line with an impossible value was not "
                f"read: {refused[0]}{more}",
                "data",
            )
        )
    oob = run.get("oob_values")
    if (oob or 0) > 0 or run.get("oob_ok") is False:
        found.append(Finding("bad", f"Out of bounds values: {oob} FAILED", "data"))
    mismatch = rows.true("busbw_mismatch")  # null: not judged
    contradicted = mismatch & _contradicted(rows)
    if contradicted.any():
        found.append(
            Finding(
                "bad",
                f"printed busbw contradicts size and time by more than "
                f"{MISPRINT:.0%} in {int(contradicted.sum())} rows (first at line "
                f"{line[contradicted].min()}): a corrupt or edited log",
                "data",
            )
        )
    mismatch &= ~contradicted
    if mismatch.any():
        found.append(
            Finding(
                "warn",
                f"printed busbw disagrees with the recomputed one in "
                f"{int(mismatch.sum())} rows (first at line {line[mismatch].min()})",
                "data",
            )
        )
    return found


def _contradicted(rows: AnalysedRows) -> npt.NDArray[np.bool_]:
    """Where the printed busbw is off the recomputed one by more than MISPRINT: of a
    RECOMPUTABLE tool, not a busbw printed as 0, a CPU time (nccl-tests computes the
    bandwidth from the GPU time) or a grouped row. As the integrity case judges."""
    printed = rows["busbw_gbps"].astype(float)
    recomputed = rows["busbw_calc_gbps"].astype(float)
    tool = np.array([t in RECOMPUTABLE for t in rows["tool"].tolist()], dtype=bool)
    with np.errstate(invalid="ignore"):
        far = np.abs(printed - recomputed) > MISPRINT * np.abs(recomputed)
    usable = tool & ~rows.true("cputime") & ~rows.true("grouped") & (printed != 0)
    return np.asarray(usable & far, dtype=bool)


def _efficiency(
    block: AnalysedRows,
    fits: pd.DataFrame | None,
    policy: VerdictPolicy,
    where: str,
    *,
    gpu: bool = False,
) -> list[Finding]:
    """The efficiency finding of one block: the median efficiency of its plateau
    sizes, judged only on a reached plateau and an ideal that is not assumed; and
    the anomalies that need no hardware figures (``gpu``: a GPU collective's, which
    may collapse)."""
    rows = judged(block)
    if not len(rows):
        return []
    found = _anomalies(block, rows, where, gpu=gpu)
    largest = rows.row(-1)
    size = format_bytes(largest["size_bytes"])
    if _number(largest["efficiency"]) is None:
        reason = _text(largest["efficiency_note"]) or "no ideal bandwidth for this row"
        return [
            *found,
            Finding("info", f"{where}efficiency unknown at {size}: {reason}"),
        ]
    if largest["regime"] == "latency-bound":
        crossover = format_bytes(_crossover(fits, largest))
        return [
            *found,
            Finding(
                "info",
                f"{where}even the largest size ({size}) is latency-bound (crossover "
                f"n* = {crossover}): large-message efficiency not measured",
            ),
        ]
    measured = rows["efficiency"].astype(float)
    plateau = np.flatnonzero(rows.true("plateau") & ~np.isnan(measured))
    if not len(plateau):
        figures = _figures(largest["efficiency"], largest, largest)
        why, remedy = no_plateau(rows)
        text = (
            f"{where}no plateau reached: busbw still rising at the largest size, "
            f"so {figures} is a lower bound; measure larger sizes to judge"
            if remedy == "larger"
            else f"{where}no plateau reached: {why}; {figures} is not judged"
        )
        return [*found, Finding("info", text)]
    found.append(_judgement(rows, plateau, policy, where))
    return found


def _judgement(
    rows: AnalysedRows, plateau: npt.NDArray[np.intp], policy: VerdictPolicy, where: str
) -> Finding:
    """The efficiency finding of a block's plateau: its median busbw against what
    healthy hardware reaches with the algorithm NCCL ran (docs/efficiency.md,
    section 4). Where the algorithm is not known, against the lowest and the
    highest of those it could have run: FAIL only when poor against the lowest, OK
    only when healthy against the highest, otherwise the lenient reading's level
    with both readings said (a NOTE where that is OK)."""
    busbw = rows["busbw_calc_gbps"][plateau].astype(float)
    reading = _reading(rows, plateau, "expected_busbw_gbps", "ideal_busbw_gbps")
    low = _reading(rows, plateau, "expected_low_busbw_gbps", "ideal_low_busbw_gbps")
    strict = _algorithm(rows["algorithm"][plateau])
    lenient = _algorithm(rows["algorithm_low"][plateau])
    span = _span(rows, plateau)
    median = _median(busbw)
    if (rows["ideal_basis"][plateau] == "assumed").any():
        return Finding(
            "info",
            f"{where}unverified: median busbw {format_gbps(median)}{span} against an "
            "ideal whose NIC count and speed are assumed from a preset; pass "
            "--profile or --inter-bw to judge it",
        )
    line_rate = median / reading.line_rate
    if line_rate > IMPLAUSIBLE:
        return Finding(
            "bad",
            f"{where}hardware figures too low to judge: median busbw "
            f"{format_gbps(median)}{span} is {format_percent(line_rate)} of "
            f"{_its(strict)} line rate ({format_gbps(reading.line_rate)}), beyond "
            "what any algorithm reaches, in-network reduction included; check the "
            "hardware profile's bandwidths and their units (GB/s, Gb/s)",
        )
    if line_rate > 1 + RULED_OUT:
        # Beyond every bound the profile allows: the profile may be too low.
        return Finding(
            "info",
            f"{where}above the ideal: median busbw {format_gbps(median)}{span} is "
            f"{format_percent(line_rate)} of {_its(strict)} line rate "
            f"({format_gbps(reading.line_rate)}); in-network reduction (SHARP) or a "
            "hardware profile that is too low",
        )
    level = _level(median / reading.expected, policy)
    low_level = _level(median / low.expected, policy)
    measured = f"median busbw {format_gbps(median)}{span}"
    words = {"ok": "healthy", "warn": "below healthy", "bad": "far below healthy"}
    if low.expected == reading.expected:
        said = _said(median, reading, strict)
        return Finding(level, f"{where}{words[level]}: {measured}: {said}")
    # Where the log names the NICs but not their speed, the readings differ by it.
    speeds = bool((rows["ideal_basis"][plateau] == "nics read").any())
    slow, fast = (" on 100 Gb/s NICs", " on the preset's NICs") if speeds else ("", "")
    both = (
        f"{measured}: as {_a(lenient)}{slow}, {_said(median, low, None)}; as "
        f"{_a(strict)}{fast}, {_said(median, reading, None)}"
    )
    what = "the NICs' speed" if speeds else "the algorithm"
    if low_level == level:
        return Finding(level, f"{where}{words[level]} whatever {what}: {both}")
    advice = (
        "; pass --profile or --inter-bw with your NICs to tell"
        if speeds
        else "; set NCCL_ALGO=Ring to test the network"
        if lenient == "ring"
        else f"; set NCCL_ALGO to {strict} or {lenient} to tell"
    )
    if low_level == "ok":
        return Finding("info", f"{where}depends on {what}: {both}{advice}")
    return Finding(
        low_level, f"{where}below healthy for any {what[4:]}: {both}{advice}"
    )


@dataclass(frozen=True, slots=True)
class _Reading:
    """One reading of a plateau: the median expected busbw of its rows (line rate
    times the healthy fraction) and the median line rate."""

    expected: float
    line_rate: float


def _reading(
    rows: AnalysedRows, plateau: npt.NDArray[np.intp], expected: str, line: str
) -> _Reading:
    return _Reading(_median(rows[expected][plateau]), _median(rows[line][plateau]))


def _level(ratio: float, policy: VerdictPolicy) -> Level:
    if ratio >= policy.good:
        return "ok"
    return "warn" if ratio >= policy.poor else "bad"


def _said(median: float, reading: _Reading, algorithm: str | None) -> str:
    """ "83.1 % of a ring's line rate (400 GB/s), 90.1 % of what healthy hardware
    reaches (369 GB/s)"; without ``algorithm``: "83.1 % of its line rate ..."."""
    whose = "its" if algorithm is None else _its(algorithm)
    return (
        f"{format_percent(median / reading.line_rate)} of {whose} line rate "
        f"({format_gbps(reading.line_rate)}), "
        f"{format_percent(median / reading.expected)} of what healthy hardware "
        f"reaches ({format_gbps(reading.expected)})"
    )


def _span(rows: AnalysedRows, plateau: npt.NDArray[np.intp]) -> str:
    first = format_bytes(rows["size_bytes"][plateau[0]])
    last = format_bytes(rows["size_bytes"][plateau[-1]])
    return f" at {first}" if first == last else f" on the plateau, {first} to {last}"


def _algorithm(values: npt.NDArray[Any]) -> str | None:
    """The algorithm most of a plateau's rows are judged by."""
    named = [str(v) for v in values.tolist() if v is not None]
    return max(sorted(set(named)), key=named.count) if named else None


def _name(algorithm: str | None) -> str:
    return SHOWN.get(algorithm or "", "link")


def _a(algorithm: str | None) -> str:
    name = _name(algorithm)
    return f"{'an' if name[0] in 'aeiouNP' else 'a'} {name}"


def _its(algorithm: str | None) -> str:
    return f"{_a(algorithm)}'s"


# What would let a sweep that reached no plateau be judged: larger sizes (busbw
# still rising), more sizes (too few to find one), or neither (it does not level off).
Remedy = Literal["larger", "more", "none"]


def no_plateau(rows: AnalysedRows) -> tuple[str, Remedy]:
    """Why the judged rows of a block (:func:`judged`, by size) hold no plateau
    (sizes within 10 % of the peak, the fit's: docs/efficiency.md), and the remedy.
    Sizes are read by their median busbw, or algbw (size over time, as the fit
    reads it) where no busbw is computed: IMB PingPong has no busbw factor."""
    sizes = rows["size_bytes"].astype(np.int64)
    word, bandwidth = "busbw", rows["busbw_calc_gbps"].astype(float)
    if not (bandwidth > 0).any():
        with np.errstate(divide="ignore", invalid="ignore"):
            algbw = sizes / rows["time_us"].astype(float) / 1e3  # bytes/µs to GB/s
        word, bandwidth = "algbw", np.where(np.isfinite(algbw), algbw, np.nan)
    distinct, index = np.unique(sizes, return_inverse=True)
    medians = np.full(len(distinct), np.nan)
    for at in range(len(distinct)):
        values = bandwidth[index == at]
        values = values[~np.isnan(values)]
        if len(values):
            medians[at] = np.median(values)
    if not (medians > 0).any():
        return "bandwidth could not be computed", "none"
    if len(distinct) < MIN_SIZES:
        many = "1 size" if len(distinct) == 1 else f"{len(distinct)} sizes"
        return (
            f"only {many} measured, too few to find a plateau: it takes {MIN_SIZES}",
            "more",
        )
    if medians[-1] > STILL_RISING * medians[-2]:
        return f"{word} is still rising there", "larger"
    peak = int(np.nanargmax(medians))
    if (medians >= PLATEAU * medians[peak]).sum() < 2:
        return (
            f"{word} peaks at {format_bytes(int(distinct[peak]))}, "
            f"{format_gbps(float(medians[peak]))}, and no other size comes within "
            f"{(1 - PLATEAU) * 100:.0f} % of it",
            "none",
        )
    return f"{word} does not level off", "none"


def _figures(
    efficiency: float,
    first: Row,
    last: Row,
    plateau: tuple[npt.NDArray[Any], npt.NDArray[Any]] | None = None,
) -> str:
    """ "88.2 % of the ideal on the plateau, 2 GiB to 8 GiB (330.6 GB/s of 375.0
    GB/s)" or, for one row, "... at 8 GiB (...)". ``plateau``: the busbw and ideal
    busbw of the plateau's rows."""
    eff = format_percent(efficiency)
    if plateau is None or len(plateau[0]) == 1:
        return (
            f"{eff} of the ideal at {format_bytes(last['size_bytes'])} "
            f"({format_gbps(last['busbw_calc_gbps'])} of "
            f"{format_gbps(last['ideal_busbw_gbps'])})"
        )
    busbw, ideal = (_median(values) for values in plateau)
    return (
        f"{eff} of the ideal on the plateau, {format_bytes(first['size_bytes'])} to "
        f"{format_bytes(last['size_bytes'])} (median busbw {format_gbps(busbw)} of "
        f"{format_gbps(ideal)})"
    )


def _median(values: npt.NDArray[Any]) -> float:
    """The median of the numbers among ``values`` (NaN when none), as pandas'."""
    numbers = values.astype(float)
    numbers = numbers[~np.isnan(numbers)]
    return float(np.median(numbers)) if len(numbers) else float("nan")


def _anomalies(
    block: AnalysedRows, rows: AnalysedRows, where: str, *, gpu: bool = False
) -> list[Finding]:
    """What is wrong whatever the hardware: bus bandwidth collapsing at some size
    (``gpu`` collectives only: see COLLAPSE), or falling at the largest sizes,
    in-place and out-of-place far apart, a wide spread of times at one size."""
    found = []
    records = _records(rows)
    bound = [
        r for r in records if r["regime"] == "bandwidth-bound" and _pos(r["busbw"])
    ]
    collapsed = _collapsed(bound) if gpu else []
    if collapsed:
        found.append(_collapse_finding(collapsed, bound[-1], where))
    if len(bound) >= 2 and not any(at is bound[-1] for at, _ in collapsed):
        peak = max(bound, key=lambda r: float(r["busbw"]))
        last = bound[-1]
        if last["busbw"] < FALL * peak["busbw"]:
            drop = 1 - last["busbw"] / peak["busbw"]
            found.append(
                Finding(
                    "warn",
                    f"{where}busbw falls with size: {format_gbps(last['busbw'])} at "
                    f"{format_bytes(last['size_bytes'])}, {format_percent(drop)} "
                    f"below its peak {format_gbps(peak['busbw'])} at "
                    f"{format_bytes(peak['size_bytes'])}",
                )
            )
    by_place: dict[str, dict[int, float]] = {}
    for r in _records(block):
        if r["size_bytes"] > 0 and _pos(r["busbw"]):
            by_place.setdefault(r["placement"], {})[r["size_bytes"]] = r["busbw"]
    common = set(by_place.get("in-place", {})) & set(by_place.get("out-of-place", {}))
    if common:
        top = max(common)
        inp, out = by_place["in-place"][top], by_place["out-of-place"][top]
        if min(out, inp) < APART * max(out, inp):
            found.append(
                Finding(
                    "warn",
                    f"{where}in-place and out-of-place differ at {format_bytes(top)}: "
                    f"{format_gbps(inp)} vs {format_gbps(out)} busbw",
                )
            )
    wide = [
        r
        for r in records
        if r["regime"] == "bandwidth-bound"
        and _pos(r["tmin"])
        and _pos(r["tmax"])
        and r["tmax"] > SPREAD * r["tmin"]
    ]
    if wide:
        row = wide[-1]
        more = f" and {len(wide) - 1} more sizes" if len(wide) > 1 else ""
        found.append(
            Finding(
                "warn",
                f"{where}times spread {row['tmax'] / row['tmin']:.1f}x at "
                f"{format_bytes(row['size_bytes'])} (min {row['tmin']:g} us, max "
                f"{row['tmax']:g} us){more}",
            )
        )
    return found


def _collapsed(
    bound: list[dict[str, Any]],
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each bandwidth-bound row (of ``bound``, by size) whose busbw is below COLLAPSE
    times the best of the smaller sizes, with that best row."""
    found = []
    best: dict[str, Any] | None = None
    for row in bound:
        if best is not None and row["busbw"] < COLLAPSE * best["busbw"]:
            found.append((row, best))
        if best is None or row["busbw"] > best["busbw"]:
            best = row
    return found


def _collapse_finding(
    collapsed: list[tuple[dict[str, Any], dict[str, Any]]],
    last: dict[str, Any],
    where: str,
) -> Finding:
    """FAIL naming the first collapsed size, how many did, and the largest size."""
    at, best = collapsed[0]
    drop = 1 - at["busbw"] / best["busbw"]
    largest = f"{format_gbps(last['busbw'])} at the largest size, " + format_bytes(
        last["size_bytes"]
    )
    if len(collapsed) == 1:
        more = "" if at is last else f" ({largest})"
    elif any(row is last for row, _ in collapsed):
        more = f" ({len(collapsed)} sizes collapsed, up to the largest, "
        more += f"{format_bytes(last['size_bytes'])})"
    else:
        more = f" ({len(collapsed)} sizes collapsed; {largest})"
    return Finding(
        "bad",
        f"{where}busbw collapses at {format_bytes(at['size_bytes'])}: "
        f"{format_gbps(at['busbw'])}, {format_percent(drop)} below "
        f"{format_gbps(best['busbw'])} at the smaller "
        f"{format_bytes(best['size_bytes'])}{more}",
    )


def _records(rows: AnalysedRows) -> list[dict[str, Any]]:
    """The columns the anomaly checks read, one plain dict per row."""
    columns = {
        "size_bytes": "size_bytes",
        "placement": "placement",
        "regime": "regime",
        "busbw": "busbw_calc_gbps",
        "tmin": "time_min_us",
        "tmax": "time_max_us",
    }
    # Series.tolist gives Python scalars as to_dict("records") does, 50x faster.
    values = [rows[column].tolist() for column in columns.values()]
    return [dict(zip(columns, row, strict=True)) for row in zip(*values, strict=True)]


def _pos(value: Any) -> bool:
    """A number above zero (not null, not NaN)."""
    number = _number(value)
    return number is not None and number > 0


def _crossover(fits: pd.DataFrame | None, row: Row) -> float | None:
    if fits is None or fits.empty:
        return None
    same = fits[
        (fits["placement"] == row["placement"])
        & (fits["collective"].fillna("") == (_text(row["collective"]) or ""))
    ]
    return _number(same["crossover_bytes"].iloc[0]) if not same.empty else None


def _number(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _text(value: Any) -> str | None:
    return (
        None
        if value is None or (not isinstance(value, str) and pd.isna(value))
        else str(value)
    )
