"""Query-string parsing and validation with hard caps (site process)."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import unquote_plus

Query = Mapping[str, str]

_MAX_DIGITS = 12


class BadParameter(ValueError):
    """A query or path value outside its allowed range: answered with HTTP 400."""


def parse_query(raw: str) -> dict[str, str]:
    """Parse ``a=1&b=2`` into a dict (the last value of a repeated name wins)."""
    values: dict[str, str] = {}
    if not raw:
        return values
    for pair in raw.split("&"):
        if not pair:
            continue
        name, _, value = pair.partition("=")
        if "%" in pair or "+" in pair:
            name, value = unquote_plus(name), unquote_plus(value)
        values[name] = value
    return values


def int_param(query: Query, name: str, default: int, low: int, high: int) -> int:
    """Return the integer ``name`` from the query, checked against ``low..high``."""
    raw = query.get(name)
    if raw is None:
        return default
    return checked_int(raw, name, low, high)


def checked_int(raw: str, name: str, low: int, high: int, max_digits: int = _MAX_DIGITS) -> int:
    """Parse a plain decimal ``raw`` in ``low..high`` or raise :class:`BadParameter`."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > max_digits:
        raise BadParameter(f"{name} must be an integer in {low}..{high}, got {_shown(raw)}")
    value = int(raw)
    if not low <= value <= high:
        raise BadParameter(f"{name} must be an integer in {low}..{high}, got {value}")
    return value


def choice_param(query: Query, name: str, choices: tuple[str, ...]) -> str:
    """Return ``name`` from the query if it is one of ``choices`` (the first is the default)."""
    raw = query.get(name)
    if raw is None:
        return choices[0]
    if raw not in choices:
        raise BadParameter(f"{name} must be one of {'|'.join(choices)}, got {_shown(raw)}")
    return raw


def _shown(raw: str) -> str:
    """Quote a bad value for an error message, truncated."""
    return repr(raw if len(raw) <= 40 else raw[:40] + "...")
