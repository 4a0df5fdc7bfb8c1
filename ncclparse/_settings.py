"""Typed settings files: one schema mechanism for the rules and profile TOML files.

:func:`read_toml` reads a settings file (UTF-8 TOML) and :func:`checked` checks one
value against its :data:`Spec`: numbers are numbers and never booleans, counts are
whole numbers, words are strings, tables are tables, each within its range. Every
refusal is a :class:`SettingError` naming the key and the reason; the caller names
the file (its own error class, exit status 2).
"""

from __future__ import annotations

import codecs
import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ncclparse.errors import NcclParseError

__all__ = [
    "Count",
    "Figure",
    "Flag",
    "Number",
    "SettingError",
    "Spec",
    "Table",
    "Word",
    "checked",
    "read_toml",
]


class SettingError(NcclParseError):
    """A settings file cannot be read, or one of its values is refused."""


@dataclass(frozen=True, slots=True)
class Number:
    """A finite int or float (not a boolean) in ``[low, high]``; ``above``: the low
    bound itself is refused."""

    low: float = 0.0
    high: float = math.inf
    above: bool = False

    def check(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"expected a number, got {_shown(value)}")
        try:
            number = float(value)
        except OverflowError:  # an integer of 400 digits: out of any range
            number = math.inf
        low_ok = number > self.low if self.above else number >= self.low
        if not math.isfinite(number) or not low_ok or number > self.high:
            raise ValueError(f"expected a number {self._range()}, got {_shown(value)}")
        return number

    def _range(self) -> str:
        low = f"{'>' if self.above else '>='} {self.low:g}"
        return low if self.high == math.inf else f"{low} and <= {self.high:g}"


@dataclass(frozen=True, slots=True)
class Count:
    """A whole number (an int, not a float nor a boolean) in ``[low, high]``."""

    low: int = 0
    high: int = 2**31 - 1

    def check(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected a whole number, got {_shown(value)}")
        if not self.low <= value <= self.high:
            raise ValueError(
                f"expected a whole number from {self.low} to {self.high}, got {value}"
            )
        return value


@dataclass(frozen=True, slots=True)
class Flag:
    """``true`` or ``false``."""

    def check(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {_shown(value)}")
        return value


@dataclass(frozen=True, slots=True)
class Word:
    """A non-empty string; one of ``choices`` when given."""

    choices: tuple[str, ...] = ()

    def check(self, value: Any) -> str:
        if self.choices and not (isinstance(value, str) and value in self.choices):
            raise ValueError(
                f"expected one of {', '.join(map(repr, self.choices))}, "
                f"got {_shown(value)}"
            )
        if not isinstance(value, str) or not value:
            raise ValueError(f"expected a non-empty string, got {_shown(value)}")
        return value


@dataclass(frozen=True, slots=True)
class Figure:
    """A quantity given as a number or as a string with a unit (``"400Gbps"``),
    converted by ``parse`` (:mod:`ncclparse.units`), which raises NcclParseError."""

    parse: Callable[[str | float], float]

    def check(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(
                f"expected a number or a string with a unit, got {_shown(value)}"
            )
        try:
            return self.parse(value)
        except NcclParseError as exc:
            raise ValueError(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class Table:
    """A table of strings (``[sources]``)."""

    def check(self, value: Any) -> dict[str, str]:
        if not isinstance(value, dict):
            raise ValueError(f"expected a table, got {_shown(value)}")
        for key, item in value.items():
            if not isinstance(item, str):
                raise ValueError(f"{key}: expected a string, got {_shown(item)}")
        return dict(value)


Spec = Number | Count | Flag | Word | Figure | Table


def checked(spec: Spec, value: Any, key: str) -> Any:
    """``value`` as ``spec`` wants it; SettingError("KEY: reason") when refused."""
    try:
        return spec.check(value)
    except ValueError as exc:
        raise SettingError(f"{key}: {exc}") from None


def read_toml(path: str | Path) -> dict[str, Any]:
    """The top-level table of the TOML file at ``path``.

    Raises SettingError naming the file (and the line, where known) when it cannot
    be read, is not UTF-8 or is not TOML.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise SettingError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    # A byte order mark, as Windows editors save UTF-8: TOML has none, and tomllib
    # would call the first line invalid.
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SettingError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x})"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingError(f"{path}: not valid TOML: {exc}") from None


def _shown(value: Any) -> str:
    """A refused value with its TOML type: ``true (a boolean)``."""
    if value is None:
        return "None (the key is missing)"
    kinds = {bool: "a boolean", int: "an integer", float: "a float", str: "a string"}
    kind = kinds.get(type(value)) or (
        "a table"
        if isinstance(value, dict)
        else "an array"
        if isinstance(value, list)
        else f"a {type(value).__name__}"
    )
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    if isinstance(value, bool):
        shown = "true" if value else "false"
    return f"{shown} ({kind})"
