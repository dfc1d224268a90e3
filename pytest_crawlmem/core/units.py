"""Exact parsing and human formatting of sizes and durations (pure: no pytest, no Scrapy)."""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

_UNITS: dict[str, int] = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*([A-Za-z]*)\s*$")
_SECONDS: dict[str, int] = {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}
_MAX_BYTES = 1024**6  # one exbibyte: anything larger is a typo


class UnitError(ValueError):
    """A size or duration that cannot be parsed; the message names the value and its source."""


def parse_size(value: object, *, source: str = "value") -> int:
    """Return ``value`` (int bytes or a string such as ``"1.5 GiB"``) as whole bytes.

    SI (kB, MB, GB, TB = powers of 1000) and IEC (KiB, MiB, GiB, TiB = powers of 1024)
    units are exact; fractions of a byte round half up.
    """
    if isinstance(value, bool):
        raise UnitError(f"invalid size {value!r} for {source}: expected bytes or a string like '25 MiB'")
    if isinstance(value, int):
        number = Decimal(value)
        unit = "b"
    elif isinstance(value, float):
        raise UnitError(
            f"invalid size {value!r} for {source}: give whole bytes as an int or a string like '1.5 MiB'"
        )
    elif isinstance(value, str):
        match = _SIZE_RE.match(value)
        if match is None:
            raise UnitError(
                f"invalid size {value!r} for {source}: expected a number and a unit, like '25 MB' or '1.5 GiB'"
            )
        try:
            number = Decimal(match.group(1))
        except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
            raise UnitError(f"invalid size {value!r} for {source}") from exc
        unit = match.group(2).lower() or "b"
        if unit not in _UNITS:
            raise UnitError(
                f"invalid size {value!r} for {source}: unknown unit {match.group(2)!r}"
                " (use B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)"
            )
    else:
        raise UnitError(
            f"invalid size {value!r} for {source}: expected bytes or a string like '25 MiB',"
            f" not {type(value).__name__}"
        )
    if number < 0:
        raise UnitError(f"invalid size {value!r} for {source}: must not be negative")
    result = int((number * _UNITS[unit]).to_integral_value(rounding=ROUND_HALF_UP))
    if result > _MAX_BYTES:
        raise UnitError(f"invalid size {value!r} for {source}: larger than 1 EiB")
    return result


def parse_seconds(value: object, *, source: str = "value") -> float:
    """Return ``value`` (a number or a string like ``"90 s"`` / ``"2 min"``) as seconds > 0."""
    if isinstance(value, bool):
        raise UnitError(f"invalid duration {value!r} for {source}: expected seconds > 0")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        match = _SIZE_RE.match(value)
        unit = match.group(2).lower() if match else ""
        if match is None or unit not in _SECONDS:
            raise UnitError(f"invalid duration {value!r} for {source}: expected seconds > 0, like '30' or '2 min'")
        seconds = float(match.group(1)) * _SECONDS[unit]
    else:
        raise UnitError(f"invalid duration {value!r} for {source}: expected seconds > 0")
    if not seconds > 0 or seconds == float("inf"):
        raise UnitError(f"invalid duration {value!r} for {source}: expected seconds > 0")
    return seconds


def parse_count(value: object, *, source: str = "value") -> int:
    """Return ``value`` as a count >= 0 (an int, or a string of digits)."""
    if isinstance(value, bool):
        raise UnitError(f"invalid count {value!r} for {source}: expected a whole number >= 0")
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    if isinstance(value, int) and value >= 0:
        return value
    raise UnitError(f"invalid count {value!r} for {source}: expected a whole number >= 0")


def parse_ratio(value: object, *, source: str = "value") -> float:
    """Return ``value`` as a ratio > 0: a number, or a string such as ``"8"``, ``"8.5x"``."""
    number: object = value
    if isinstance(value, str):
        text = value.strip().lower().removesuffix("x").strip()
        number = float(text) if re.fullmatch(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+", text) else None
    if isinstance(number, (int, float)) and not isinstance(number, bool) and 0 < number < float("inf"):
        return float(number)
    raise UnitError(f"invalid ratio {value!r} for {source}: expected a number > 0, like 8 or '8x'")


def format_size(num_bytes: float) -> str:
    """Return ``num_bytes`` in IEC units for people: ``612.4 MiB``, ``-3.0 KiB``, ``512 B``."""
    sign = "-" if num_bytes < 0 else ""
    value = abs(float(num_bytes))
    if value < 1024:
        return f"{sign}{value:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{sign}{value:.1f} {unit}"


def format_duration(seconds: float) -> str:
    """``9.3 s``, ``12.5 min``, ``5.6 h``."""
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:,.1f} h"
