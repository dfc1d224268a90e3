"""Growth that stopped: memory that rose and then stayed flat to the end of the crawl, a plateau (pure: no pytest, no Scrapy).

A bounded cache filling up (Scrapy's ``LocalCache(limit=...)``, an SQLite page cache, an ``lru_cache(maxsize=...)``)
makes memory rise and then stay flat. Judged as one line over the whole window, the rise reads as a leak (the trend's
lower bound over the threshold) or, a bend fitted with one line, as noise no verdict can use. :func:`find_plateau` looks
for the knot: the earliest judged checkpoint after which memory stayed flat to the end, the flat part's one-sided 95%
upper bound under the threshold (no leak of the threshold or more went on after it), and the growth before it faster
than that bound by the threshold or more (growth that stopped, not a leak going on at the same rate). A leak that
continues to the end keeps its rate in the flat part's place, so its upper bound stays over the threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_crawlmem.core.leaktrend import NOISE_FLOOR_BYTES, TREND_MIN_POINTS
from pytest_crawlmem.core.trend import Slope, fit, slope_only

#: The flat part spans at least this share of the judged window ("hundreds of responses" in a long crawl).
PLATEAU_MIN_SHARE = 1 / 3
#: ... and holds at least this many judged checkpoints (three intervals, as a trend needs).
PLATEAU_MIN_POINTS = TREND_MIN_POINTS
#: Growth that stopped, not growth that slowed: the rise before the knot is at least this many times the flat part's
#: slope. Measured (benchmarks/detection.py, saved crawls): a keeper of 1 KiB a product over 609 responses (0.7 KiB/response
#: after the knot, under the threshold as measured) rose 2.8x faster in its warm-up, and read "levelled off" without
#: this; SQLite's 1 MiB page cache rose 4.1-10x faster than after it was full, Scrapy's LocalCache(limit=200) 17x or more.
PLATEAU_DROP = 3.5


@dataclass(frozen=True)
class Plateau:
    """Memory that rose until ``at_responses`` and stayed flat after it (bytes of the judged level series).

    ``flat`` is the fit of the flat part, from ``at_responses`` to ``end_responses`` (the close, or the last checkpoint
    taken while the crawl ran when its end released ``released_bytes`` or more); ``level_bytes`` the level at the knot,
    ``rise_per_response`` the growth rate before it (the least-squares slope of the checkpoints from ``start_responses``
    to the knot).
    """

    start_responses: int
    at_responses: int
    end_responses: int
    level_bytes: float
    rise_per_response: float
    flat: Slope
    released_bytes: float = 0.0

    @property
    def flat_responses(self) -> int:
        """Responses of the flat part."""
        return self.end_responses - self.at_responses


def find_plateau(
    xs: Sequence[float], ys: Sequence[float], threshold: float, *, first: int = 0, close_released: float = 0.0,
) -> Plateau | None:
    """The plateau of the level series ``ys`` at response counts ``xs`` (``None`` when memory did not level off).

    ``xs[first:]`` are the judged checkpoints (after the warm-up): the knot and the flat part are among them, and the
    flat part's share is of their window; the ones before are drained checkpoints of the warm-up, part of the rise only
    (a cache filling from the crawl's start may be full by the end of the warm-up).

    ``close_released``: when the last point is the crawl's close and it fell this far or more below the one before it
    (what the crawl's end let go of: a database closed, a queue dropped), the flat part ends at the one before it (a
    fall says nothing of the rate while the crawl ran, and one line through it is noise); 0: the close is judged.
    A knot with no checkpoint before it is a plateau only then (otherwise the whole window's trend is the flat part's,
    and the regular verdict reads it). Of the knots that qualify, the one where a line before it and a line after it
    fit the points best is where memory levelled off.
    """
    n = len(xs)
    if n < 2:
        return None
    end = n
    released = 0.0
    if close_released > 0 and ys[-2] - ys[-1] >= close_released:
        end, released = n - 1, ys[-2] - ys[-1]
    window = xs[-1] - xs[first]
    found: list[tuple[float, Plateau]] = []
    for m in range(first, end - PLATEAU_MIN_POINTS + 1):
        if m == 0 and end == n:
            continue
        if xs[end - 1] - xs[m] < PLATEAU_MIN_SHARE * window:
            break  # later knots leave only shorter flat parts
        flat = fit(xs[m:end], ys[m:end], NOISE_FLOOR_BYTES)
        if flat.upper >= threshold:
            continue
        rise = slope_only(xs[: m + 1], ys[: m + 1]) if m else 0.0
        if m and rise < max(threshold + max(flat.upper, 0.0), PLATEAU_DROP * flat.slope):
            continue
        misfit = _misfit(xs[: m + 1], ys[: m + 1]) + _misfit(xs[m:end], ys[m:end])
        found.append((misfit, Plateau(int(xs[0]), int(xs[m]), int(xs[end - 1]), ys[m], rise, flat, released)))
    return min(found, key=lambda f: f[0])[1] if found else None  # the knot two lines fit best (the earliest of equals)


def _misfit(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The residual sum of squares of the least-squares line through the points (0 for one or two)."""
    if len(xs) < 3:
        return 0.0
    b = slope_only(xs, ys)
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((y - my - b * (x - mx)) ** 2 for x, y in zip(xs, ys, strict=True))
