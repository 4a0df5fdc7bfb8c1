"""Check rules: thresholds per collective, size range and regime, and their TOML file.

A :class:`Rules` value holds everything ``ncclparse check`` judges against: threshold
rules (:class:`Rule`), what must be present (:class:`Expectations`), how history
baselines are built (:class:`HistoryPolicy`) and when a host is named slow
(:class:`BlamePolicy`), the efficiency thresholds of the run verdict
(:class:`VerdictPolicy`) and when a run is far below the other runs of its shape
that night (:class:`CohortPolicy`). :data:`DEFAULT_RULES` applies when no file is
given; a rules file (:func:`load_rules`) replaces only the sections it has. The
file format is documented in ``docs/check-json.md`` (section "Rules file").
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from ncclparse._settings import (
    Count,
    Flag,
    Number,
    SettingError,
    Spec,
    Word,
    checked,
    read_toml,
)
from ncclparse.collectives import COLLECTIVES
from ncclparse.errors import NcclParseError
from ncclparse.units import size_bytes

__all__ = [
    "DEFAULT_RULES",
    "METRICS",
    "REGIMES",
    "UNJUDGED",
    "BlamePolicy",
    "CohortPolicy",
    "Expectations",
    "HistoryPolicy",
    "Rule",
    "Rules",
    "RulesError",
    "VerdictPolicy",
    "load_rules",
    "rules_from_mapping",
]

Metric = Literal["efficiency", "busbw_gbps", "time_us"]
Unjudged = Literal["fail", "skip"]
UNJUDGED: tuple[str, ...] = ("fail", "skip")
METRICS: tuple[str, ...] = ("efficiency", "busbw_gbps", "time_us")
REGIMES: tuple[str, ...] = ("latency-bound", "bandwidth-bound")
# time is a ceiling; efficiency and bandwidth are floors.
_CEILINGS = frozenset({"time_us"})


class RulesError(NcclParseError):
    """A rules file cannot be read or holds an invalid rule (exit status 2)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One threshold applied to every series it selects, size by size.

    ``metric`` is ``efficiency`` (busbw / AIBooster ideal, a floor), ``busbw_gbps``
    (recomputed bus bandwidth, a floor) or ``time_us`` (a ceiling). A row fails when
    it is worse than :attr:`limit`, the threshold widened by ``tolerance`` (a
    fraction: 0.05 lets a 40 % floor pass down to 38 %). ``None`` selectors match
    anything; size bounds are inclusive bytes. ``enabled = False`` switches the
    rule off, and the check says so.
    """

    name: str
    metric: Metric
    threshold: float
    collective: str | None = None
    regime: str | None = None
    size_min: int | None = None
    size_max: int | None = None
    tolerance: float = 0.0
    enabled: bool = True

    @property
    def is_ceiling(self) -> bool:
        """True when values above the limit fail (time), False for floors."""
        return self.metric in _CEILINGS

    @property
    def limit(self) -> float:
        """The threshold after tolerance: the value a row may not be worse than."""
        scale = 1 + self.tolerance if self.is_ceiling else 1 - self.tolerance
        return self.threshold * scale

    def describe(self) -> str:
        """One line: what the rule selects and its threshold."""
        parts = [self.collective or "any collective", self.regime or "any regime"]
        if self.size_min is not None or self.size_max is not None:
            low = self.size_min if self.size_min is not None else 0
            high = self.size_max if self.size_max is not None else "max"
            parts.append(f"sizes {low}..{high} B")
        sign = "<=" if self.is_ceiling else ">="
        tol = f" (tolerance {self.tolerance:g})" if self.tolerance else ""
        return f"{', '.join(parts)}: {self.metric} {sign} {self.threshold:g}{tol}"


@dataclass(frozen=True, slots=True)
class Expectations:
    """What must be present: collectives (across all inputs) and sizes (per series)."""

    collectives: tuple[str, ...] = ()
    sizes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class HistoryPolicy:
    """How a baseline is built and when a drop from it is a regression.

    The baseline of a series and size is the most recent ``window`` runs not older
    than ``max_age_days`` (0: no limit); with fewer than ``min_runs`` the size is
    skipped. ``enabled = False`` switches history judging off, and the check says
    so. A bandwidth-bound size regresses when its busbw is below the median by
    more than both ``mad_k`` scaled MADs (1.4826 x MAD, the normal-consistent
    spread) and ``min_drop`` x median; a latency-bound size when its time is above
    the median by more than ``mad_k`` scaled MADs and ``min_rise`` x median.
    """

    window: int = 20
    max_age_days: int = 30
    min_runs: int = 5
    mad_k: float = 4.0
    min_drop: float = 0.05
    min_rise: float = 0.10
    enabled: bool = True

    def busbw_floor(self, median: float, mad: float) -> float:
        """The lowest busbw that is not a regression from a baseline of this
        ``median`` and raw ``mad``."""
        return median - max(self.mad_k * _SCALE * mad, self.min_drop * median)

    def time_ceiling(self, median: float, mad: float) -> float:
        """The highest time that is not a regression from a baseline of this
        ``median`` and raw ``mad``."""
        return median + max(self.mad_k * _SCALE * mad, self.min_rise * median)


# A raw MAD times this estimates the standard deviation of normal data.
_SCALE = 1.4826


@dataclass(frozen=True, slots=True)
class BlamePolicy:
    """When a host is named slow.

    A run is slow when its score (typical time / its time, 1.0 = typical) is below
    ``slow_score``. A host is named when at least ``min_runs`` runs include it, at
    least ``min_slow_fraction`` of them are slow, and runs with it score at least
    ``min_deficit`` (a fraction) below runs without it. ``enabled = False``
    switches the slow-host rule off, and the check says so.
    """

    min_runs: int = 2
    slow_score: float = 0.9
    min_slow_fraction: float = 0.8
    min_deficit: float = 0.1
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class VerdictPolicy:
    """The efficiency thresholds of a run's verdict: fractions of what healthy
    hardware reaches (docs/efficiency.md section 2, ``expected_busbw_gbps``).

    At least ``good`` is healthy (OK), below ``poor`` is far below the ideal (FAIL),
    between is CHECK. ``check`` fails a run whose efficiency verdict is FAIL, and
    one whose sweep stops before bandwidth can be judged (the largest size still
    latency-bound, or no plateau reached) unless ``unjudged`` is ``"skip"`` (a
    deliberate latency-only sweep), when that run's verdict case is skipped.
    """

    good: float = 0.85
    poor: float = 0.6
    unjudged: Unjudged = "fail"


@dataclass(frozen=True, slots=True)
class CohortPolicy:
    """When a run is far below the other runs of its shape in the same check.

    At a bandwidth-bound size, a run fails when its busbw is more than ``threshold``
    (a fraction) below the median of the other runs of its shape. A shape needs
    ``min_runs`` runs (at least 3: of two runs apart, neither tells which is slow);
    ``enabled = false`` turns the rule off.
    """

    threshold: float = 0.15
    min_runs: int = 3
    enabled: bool = True


# Of two runs that disagree, neither tells which one is slow.
MIN_COHORT = 3


@dataclass(frozen=True, slots=True)
class Rules:
    """Everything a check judges against; ``origin`` names the rules file (None:
    the built-in rules)."""

    rules: tuple[Rule, ...]
    expect: Expectations = field(default_factory=Expectations)
    history: HistoryPolicy = field(default_factory=HistoryPolicy)
    blame: BlamePolicy = field(default_factory=BlamePolicy)
    verdict: VerdictPolicy = field(default_factory=VerdictPolicy)
    cohort: CohortPolicy = field(default_factory=CohortPolicy)
    origin: str | None = None


# Efficiency against the ideal is the verdict's (VerdictPolicy); the default rule
# catches what the verdict does not judge: small messages gone slow. The 1 ms ceiling
# up to 1 MiB is far above NVLink and InfiniBand small-message times (10-150 us in the
# corpus) yet below a socket fallback's. History (median + MAD) catches small drops.
DEFAULT_RULES = Rules(
    rules=(Rule("latency", "time_us", 1000.0, regime="latency-bound", size_max=2**20),)
)


def load_rules(path: str | Path) -> Rules:
    """Read a TOML rules file; sections it lacks keep :data:`DEFAULT_RULES`' values.

    Raises RulesError (never OSError or a TOML error) for a file that cannot be read,
    is not UTF-8 TOML, or holds an unknown key or invalid value, naming the file.
    """
    try:
        data = read_toml(path)
    except SettingError as exc:
        text = str(exc).replace(": cannot read:", ": cannot read rules:")
        raise RulesError(text) from None
    try:
        return replace(rules_from_mapping(data), origin=str(path))
    except RulesError as exc:
        raise RulesError(f"{path}: {exc}") from exc


def rules_from_mapping(data: dict[str, Any]) -> Rules:
    """Build :class:`Rules` from parsed TOML (``rule`` array, ``expect``, ``history``,
    ``blame``, ``verdict``, ``cohort`` tables). A ``rule`` array, even empty,
    replaces the default rules.
    """
    _known(
        data, {"rule", "expect", "history", "blame", "verdict", "cohort"}, "top level"
    )
    rules = DEFAULT_RULES.rules
    if "rule" in data:
        if not isinstance(data["rule"], list):
            raise RulesError("'rule' must be an array of tables ([[rule]])")
        rules = tuple(_rule(item, i) for i, item in enumerate(data["rule"]))
        names = [r.name for r in rules]
        if len(set(names)) != len(names):
            raise RulesError(f"rule names must be unique: {names}")
    expect = DEFAULT_RULES.expect
    if "expect" in data:
        table = _table(data, "expect")
        _known(table, {"collectives", "sizes"}, "[expect]")
        collectives = tuple(
            _collective(c, "[expect]") for c in _list(table, "collectives")
        )
        sizes = tuple(_size(s, "[expect] sizes") for s in _list(table, "sizes"))
        expect = Expectations(collectives, sizes)
    return Rules(
        rules=rules,
        expect=expect,
        history=_history(data),
        blame=_policy(data, "blame", DEFAULT_RULES.blame),
        verdict=_verdict(data),
        cohort=_cohort(data),
    )


# What a rules file may give each policy key, where its type's spec (_type_spec) is
# not enough: a value out of these ranges switches judging off without saying so (a
# window below min_runs never gives a baseline, min_drop = 1 never regresses); that
# is said explicitly, with [history] enabled = false. A section's key not listed
# here takes its type's spec, so a new section needs no entry.
_SPECS: dict[str, dict[str, Spec]] = {
    "history": {
        "window": Count(1, 1000),
        "min_runs": Count(1, 1000),
        "max_age_days": Count(0, 3650),  # ten years; 0: no age limit
        "mad_k": Number(0, 100),
        "min_drop": Number(0, 0.9),
        "min_rise": Number(0, 10),
    },
    "blame": {
        "min_runs": Count(1, 1000),
        "slow_score": Number(0, 1, above=True),
        "min_slow_fraction": Number(0, 1, above=True),
        "min_deficit": Number(0, 0.9),
    },
    "cohort": {"min_runs": Count(1, 1000)},  # below MIN_COHORT: _cohort says why
    "verdict": {
        "good": Number(0, 10, above=True),
        "poor": Number(0, 10, above=True),
        "unjudged": Word(UNJUDGED),
    },
}


def _history(data: dict[str, Any]) -> HistoryPolicy:
    policy: HistoryPolicy = _policy(data, "history", DEFAULT_RULES.history)
    if policy.enabled and policy.window < policy.min_runs:
        raise RulesError(
            f"[history] window: {policy.window} is below min_runs {policy.min_runs}: "
            "no size would ever have a baseline, so history would judge nothing "
            "(to switch history judging off, say so: [history] enabled = false)"
        )
    return policy


def _verdict(data: dict[str, Any]) -> VerdictPolicy:
    policy: VerdictPolicy = _policy(data, "verdict", DEFAULT_RULES.verdict)
    if not 0 <= policy.poor <= policy.good:
        raise RulesError(
            f"[verdict]: need 0 <= poor <= good, got poor {policy.poor:g} and good "
            f"{policy.good:g}"
        )
    return policy


def _cohort(data: dict[str, Any]) -> CohortPolicy:
    table = dict(_table(data, "cohort")) if "cohort" in data else {}
    # The one switch among numbers: taken out before the numbers are read.
    enabled = table.pop("enabled", DEFAULT_RULES.cohort.enabled)
    if not isinstance(enabled, bool):
        raise RulesError(f"[cohort] enabled: expected true or false, got {enabled!r}")
    given = {"cohort": table} if "cohort" in data else {}
    policy: CohortPolicy = _policy(given, "cohort", DEFAULT_RULES.cohort)
    if policy.min_runs < MIN_COHORT:
        raise RulesError(
            f"[cohort] min_runs: must be at least {MIN_COHORT} (of two runs apart, "
            f"neither tells which is slow), got {policy.min_runs}"
        )
    if policy.threshold >= 1:
        raise RulesError(
            f"[cohort] threshold: a fraction below 1, got {policy.threshold:g}"
        )
    return replace(policy, enabled=enabled)


def _rule(item: Any, index: int) -> Rule:
    where = f"rule {index + 1}"
    if not isinstance(item, dict):
        raise RulesError(f"{where}: must be a table")
    allowed = {f.name for f in fields(Rule)}
    _known(item, allowed, where)
    name = item.get("name", f"rule-{index + 1}")
    if not isinstance(name, str) or not name:
        raise RulesError(f"{where}: 'name' must be a non-empty string")
    where = f"rule {name!r}"
    metric = item.get("metric")
    if metric not in METRICS:
        raise RulesError(f"{where}: 'metric' must be one of {', '.join(METRICS)}")
    # A floor at 0 never fails (and a ceiling at 0 always does): a rule is
    # switched off only with enabled = false.
    threshold = _setting(
        Number(0, above=True), item.get("threshold"), f"{where} threshold"
    )
    enabled = _setting(Flag(), item.get("enabled", True), f"{where} enabled")
    tolerance = _setting(Number(), item.get("tolerance", 0.0), f"{where} tolerance")
    if tolerance >= 1:
        raise RulesError(f"{where}: tolerance is a fraction below 1, got {tolerance}")
    regime = item.get("regime")
    if regime is not None and regime not in REGIMES:
        raise RulesError(f"{where}: 'regime' must be one of {', '.join(REGIMES)}")
    collective = item.get("collective")
    sizes = [
        None if item.get(k) is None else _size(item[k], f"{where} {k}")
        for k in ("size_min", "size_max")
    ]
    low, high = sizes
    if low is not None and high is not None and low > high:
        raise RulesError(f"{where}: size_min is above size_max")
    return Rule(
        name=name,
        metric=metric,
        threshold=threshold,
        collective=None if collective is None else _collective(collective, where),
        regime=regime,
        size_min=sizes[0],
        size_max=sizes[1],
        tolerance=tolerance,
        enabled=enabled,
    )


def _policy(data: dict[str, Any], key: str, default: Any) -> Any:
    if key not in data:
        return default
    table = _table(data, key)
    _known(table, {f.name for f in fields(default)}, f"[{key}]")
    specs = _SPECS.get(key, {})
    values = {
        name: _setting(
            specs.get(name) or _type_spec(getattr(default, name)),
            value,
            f"[{key}] {name}",
        )
        for name, value in table.items()
    }
    return replace(default, **values)


def _type_spec(default: Any) -> Spec:
    """The spec of a policy key from its default value's type."""
    if isinstance(default, bool):
        return Flag()
    if isinstance(default, int):
        return Count()
    if isinstance(default, str):
        return Word()
    return Number()


def _setting(spec: Spec, value: Any, where: str) -> Any:
    try:
        return checked(spec, value, where)
    except SettingError as exc:
        raise RulesError(str(exc)) from None


def _known(table: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise RulesError(
            f"{where}: unknown key(s) {', '.join(unknown)} "
            f"(known: {', '.join(sorted(allowed))})"
        )


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data[key]
    if not isinstance(value, dict):
        raise RulesError(f"'{key}' must be a table ([{key}])")
    return value


def _list(table: dict[str, Any], key: str) -> list[Any]:
    value = table.get(key, [])
    if not isinstance(value, list):
        raise RulesError(f"'{key}' must be an array")
    return value


def _size(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise RulesError(f"{where}: expected a size such as 256MiB, got {value!r}")
    try:
        return size_bytes(value)
    except NcclParseError as exc:
        raise RulesError(f"{where}: {exc}") from exc


def _collective(value: Any, where: str) -> str:
    if value not in COLLECTIVES:
        raise RulesError(
            f"{where}: unknown collective {value!r} (one of {', '.join(COLLECTIVES)})"
        )
    return str(value)
