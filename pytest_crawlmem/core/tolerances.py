"""Tolerances of a regression check against a baseline: ``peak_rss:10%,leak_per_response:1KiB`` (pure, any process).

Parsed where they are written (the ``compare_fail`` budget, ``--crawlmem-compare-fail``) and applied by
:mod:`pytest_crawlmem.harness.baseline`; this module knows nothing of baseline files.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pytest_crawlmem.core.units import UnitError, format_size, parse_count, parse_seconds, parse_size

# figure -> how its absolute tolerance is written ("size", "seconds" or "count")
FIGURES: dict[str, str] = {
    "peak_rss": "size",
    "rss_growth": "size",
    "traced_peak": "size",
    "leak_per_response": "size",
    "duration_seconds": "seconds",
    "responses": "count",
    "items": "count",
}
# Measured with benchmarks/baseline_spread.py (README, "Baselines"): an unchanged tree stays
# inside them, a crawl retaining 2 KiB more per response breaks leak_per_response.
DEFAULT_TOLERANCES = "peak_rss:10%,rss_growth:32MiB,leak_per_response:1KiB"


@dataclass(frozen=True)
class Tolerance:
    """How far one figure may move from the baseline median: ``relative`` percent or an absolute amount."""

    figure: str
    amount: float
    relative: bool

    def allowance(self, median: float) -> float:
        """The change tolerated around ``median``, in the figure's unit."""
        return abs(median) * self.amount / 100 if self.relative else self.amount

    def describe(self) -> str:
        """``+10%``, ``+1.0 KiB``, ``+5 s``, ``+3``."""
        return "+" + _amount_text(self.figure, self.amount, self.relative)

    def __str__(self) -> str:
        """``peak_rss:10%``, ``rss_growth:32MiB``: the exact form it is written in."""
        if self.relative:
            return f"{self.figure}:{_plain(self.amount)}%"
        if FIGURES[self.figure] == "size":
            whole = int(self.amount)
            for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
                if whole and whole % factor == 0:
                    return f"{self.figure}:{whole // factor}{unit}"
            return f"{self.figure}:{whole}B"
        return f"{self.figure}:{_plain(self.amount)}{'s' if FIGURES[self.figure] == 'seconds' else ''}"


def _plain(number: float) -> str:
    """``10``, ``2.5``: a number without an exponent or trailing zeros."""
    return f"{number:.6f}".rstrip("0").rstrip(".")


def _amount_text(figure: str, amount: float, relative: bool) -> str:
    if relative:
        return f"{_plain(amount)}%"
    kind = FIGURES[figure]
    if kind == "size":
        return format_size(amount)
    return f"{_plain(amount)} s" if kind == "seconds" else _plain(amount)


_PERCENT_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*$")


def parse_tolerance(entry: str, *, source: str) -> Tolerance:
    """Parse ``figure:amount`` (``peak_rss:10%``, ``leak_per_response:1KiB``); raise UnitError naming ``source``."""
    figure, sep, amount = entry.partition(":")
    figure = figure.strip()
    known = ", ".join(FIGURES)
    if not sep or figure not in FIGURES:
        raise UnitError(f"invalid tolerance {entry!r} from {source}: expected FIGURE:AMOUNT with a figure among {known}")
    percent = _PERCENT_RE.match(amount)
    if percent is not None:
        value = float(percent.group(1))
        if not math.isfinite(value):
            raise UnitError(f"invalid tolerance {entry!r} from {source}: the percentage must be finite")
        return Tolerance(figure, value, relative=True)
    try:
        kind = FIGURES[figure]
        if kind == "size":
            absolute = float(parse_size(amount.strip(), source=source))
        elif kind == "seconds":
            text = amount.strip()  # parse_seconds wants > 0; a tolerance of 0 s is allowed
            absolute = 0.0 if re.fullmatch(r"0+(?:\.0+)?\s*s?", text) else parse_seconds(text, source=source)
        else:
            absolute = float(parse_count(amount.strip(), source=source))
    except UnitError as exc:
        raise UnitError(
            f"invalid tolerance {entry!r} from {source}: expected a percentage like '10%' or an amount like"
            f" {'1KiB' if FIGURES[figure] == 'size' else '5'} ({exc})"
        ) from exc
    return Tolerance(figure, absolute, relative=False)


def parse_tolerances(value: object, *, source: str) -> dict[str, Tolerance]:
    """Parse ``peak_rss:10%,leak_per_response:1KiB,...`` into tolerances by figure; raise UnitError naming ``source``."""
    if not isinstance(value, str) or not value.strip():
        raise UnitError(f"invalid tolerance {value!r} from {source}: expected 'FIGURE:AMOUNT,...', like 'peak_rss:10%'")
    tolerances: dict[str, Tolerance] = {}
    for entry in value.split(","):
        if entry.strip():
            tolerance = parse_tolerance(entry.strip(), source=source)
            tolerances[tolerance.figure] = tolerance
    if not tolerances:
        raise UnitError(f"invalid tolerance {value!r} from {source}: no FIGURE:AMOUNT in it")
    return tolerances


def parse_compare_fail(value: object, *, source: str) -> str:
    """The ``compare_fail`` marker key: validate the tolerances, return them in canonical form."""
    return ",".join(str(t) for t in parse_tolerances(value, source=source).values())


def merge_tolerances(*layers: str | None) -> dict[str, Tolerance]:
    """Tolerances by figure from canonical strings, later layers overriding earlier ones per figure."""
    merged: dict[str, Tolerance] = {}
    for layer in layers:
        if layer:
            merged.update(parse_tolerances(layer, source="validated tolerances"))
    return merged
