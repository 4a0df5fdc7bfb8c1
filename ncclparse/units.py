"""Read bandwidths, sizes and times as people write them.

Conventions (the ones nccl-tests and the alpha-beta literature use):

* Bandwidth is decimal: ``1 GB/s = 1e9 bytes/s`` and ``1 Gbps = 1e9 bits/s = 0.125
  GB/s``. A lower-case ``b`` is bits, an upper-case ``B`` is bytes, so ``400Gbps`` is 50
  GB/s and ``50GB/s`` or ``50GBps`` is 50 GB/s. Explicit binary units (``GiB/s``) are
  accepted and converted exactly (``1 GiB/s = 1.073741824 GB/s``).
* Sizes are decimal too (``10GB = 1e10`` bytes); ``GiB`` is ``2**30``. A bare integer is
  bytes.
* Times take ``ns``, ``us`` (also ``µs``/``μs``), ``ms`` or ``s``.

Ambiguous spellings are rejected with a :class:`~ncclparse.errors.ProfileError` that
says what to write instead: a bandwidth or time without a unit (``450``), a bare prefix
(``50G``, which nccl-tests' ``-e 8G`` reads as binary), a size given as a rate or a rate
as a size, and bit/byte forms whose case cannot tell (``GBPS``, ``gbps``, ``gb/s``).

Numbers that are already floats (not strings) are taken in the unit of the function's
result: GB/s, bytes or microseconds. That is how TOML profiles with unit-named keys
(``intra_gbps = 450``) are read.
"""

from __future__ import annotations

import math
import re

from ncclparse.errors import ProfileError

__all__ = ["bandwidth_gbps", "size_bytes", "time_us"]

_NUMBER = r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*(?P<unit>[^\s\d].*?)?\s*$")

_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}

# <prefix><B|b|bit|bits|byte|bytes><"/s" | "ps">; the case of B/b decides bytes/bits.
_RATE = re.compile(
    r"^(?P<prefix>[kKMGTP]i?|)(?P<what>B|b|bit|bits|byte|bytes|Byte|Bytes)(?:/s|ps)$"
)
_SIZE = re.compile(r"^(?P<prefix>[kKMGTP]i?|)(?P<what>B|byte|bytes)$")
_TIME = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "μs": 1.0, "ms": 1e3, "s": 1e6}


def bandwidth_gbps(value: str | float) -> float:
    """Return a bandwidth in GB/s (1e9 bytes/s) from ``'400Gbps'``, ``'450 GB/s'`` ...

    A float is taken as GB/s already. Raises ProfileError for a missing, unknown or
    ambiguous unit, or a value that is not positive and finite.
    """
    if not isinstance(value, str):
        return _positive(float(value), f"{value} GB/s")
    number, unit = _split(value, "bandwidth", "450GB/s (bytes) or 400Gbps (bits)")
    match = _RATE.match(unit)
    if match is None:
        raise ProfileError(_rate_hint(value, number, unit))
    scale = _prefix_scale(match.group("prefix"), value)
    bits = match.group("what") in ("b", "bit", "bits")
    return _positive(number * scale / (8.0 if bits else 1.0) / 1e9, repr(value))


def size_bytes(value: str | float) -> int:
    """Return a size in bytes from ``'10GB'``, ``'1.5 MB'``, ``'1GiB'`` or
    ``'1048576'``.

    A bare integer (string or number) is bytes. Raises ProfileError for an ambiguous
    or unknown unit, a rate given as a size, or a non-integral byte count.
    """
    if not isinstance(value, str):
        return _whole(float(value), str(value))
    number, unit = _split(value, "size", "", unit_required=False)
    if not unit:
        return _whole(number, repr(value))
    match = _SIZE.match(unit)
    if match is None:
        if _RATE.match(unit):
            raise ProfileError(f"{value!r} is a bandwidth, not a size: write e.g. 10GB")
        raise ProfileError(_size_hint(value, number, unit))
    return _whole(number * _prefix_scale(match.group("prefix"), value), repr(value))


def time_us(value: str | float) -> float:
    """Return a time in microseconds from ``'2us'``, ``'1.5 ms'``, ``'500ns'``,
    ``'0.1s'``.

    A float is taken as microseconds already. Raises ProfileError for a missing or
    unknown unit or a negative or non-finite value.
    """
    if not isinstance(value, str):
        return _non_negative(float(value), f"{value} us")
    number, unit = _split(value, "time", "2us, 1.5ms or 0.1s")
    scale = _TIME.get(unit)
    if scale is None:
        raise ProfileError(f"unknown time unit in {value!r}: write ns, us, ms or s")
    return _non_negative(number * scale, repr(value))


def _split(
    text: str, kind: str, example: str, *, unit_required: bool = True
) -> tuple[float, str]:
    match = _QUANTITY.match(text)
    if match is None:
        raise ProfileError(f"cannot read {text!r} as a {kind}: write e.g. {example}")
    unit = match.group("unit") or ""
    if unit_required and not unit:
        raise ProfileError(f"{kind} {text!r} has no unit: write e.g. {example}")
    return float(match.group("num")), unit


def _prefix_scale(prefix: str, text: str) -> float:
    if prefix in _BINARY:
        return _BINARY[prefix]
    if prefix in _DECIMAL:
        return _DECIMAL[prefix]
    raise ProfileError(
        f"unknown unit prefix {prefix!r} in {text!r}"
    )  # pragma: no cover


def _rate_hint(text: str, number: float, unit: str) -> str:
    shown = f"{number:g}"
    if unit in _DECIMAL or unit in _BINARY or unit in ("g", "m", "t"):
        return (
            f"bandwidth {text!r} is ambiguous (bits or bytes? decimal or binary?): "
            f"write {shown}GB/s for bytes or {shown}Gbps for bits"
        )
    if _SIZE.match(unit):
        return f"{text!r} is a size, not a bandwidth: write {shown}{unit}/s"
    if re.fullmatch(_RATE.pattern, unit, re.IGNORECASE):
        # GBPS / gbps / gb/s: the case of "b" is what tells bits from bytes.
        return (
            f"bandwidth {text!r} is ambiguous: write {shown}GB/s (bytes) or "
            f"{shown}Gbps (bits); the case of B/b tells bytes from bits"
        )
    return f"unknown bandwidth unit in {text!r}: write e.g. 450GB/s or 400Gbps"


def _size_hint(text: str, number: float, unit: str) -> str:
    shown = f"{number:g}"
    if unit in _DECIMAL or unit in ("g", "m"):
        return (
            f"size {text!r} is ambiguous (nccl-tests reads {unit} as binary): "
            f"write {shown}{unit.upper()}B for 1e9-style units "
            f"or {shown}{unit.upper()}iB for binary"
        )
    if unit in _BINARY:
        return f"size {text!r} is missing its B: write {shown}{unit}B"
    if re.fullmatch(r"[kKMGTP]?(b|bit|bits)", unit):
        return f"size {text!r} is in bits: write bytes, e.g. {shown}{unit[:-1]}B"
    return f"unknown size unit in {text!r}: write e.g. 10GB, 64MiB or 1048576"


def _positive(value: float, text: str) -> float:
    if not math.isfinite(value) or value <= 0:
        raise ProfileError(f"bandwidth {text} must be a positive number")
    return value


def _non_negative(value: float, text: str) -> float:
    if not math.isfinite(value) or value < 0:
        raise ProfileError(f"time {text} must be a non-negative number")
    return value


def _whole(value: float, text: str) -> int:
    if not math.isfinite(value) or value < 0:
        raise ProfileError(f"size {text} must be a non-negative number of bytes")
    rounded = round(value)
    # 1.5 bytes is a typo; 0.1GB is 1e8 up to float error, so allow a tiny slack.
    if abs(value - rounded) > 1e-6 * max(1.0, abs(value)):
        raise ProfileError(f"size {text} is not a whole number of bytes")
    return int(rounded)
