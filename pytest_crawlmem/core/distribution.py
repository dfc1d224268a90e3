"""A constant-memory histogram of non-negative integers (response sizes, latencies) and its percentiles.

Pure: no pytest, no Scrapy. Values up to 16 are kept exactly; above, each octave
(2**k, 2**(k+1)] is split into 16 buckets, so a percentile is at most 6.25% high, the
maximum is exact, and counting values above a power of two is exact (bucket edges
fall on every power of two). Adding a value is a few integer operations and one dict
update, cheap enough for every response of a crawl.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

_EXACT_UP_TO = 16
_SUB_BUCKET_BITS = 5  # the mantissa keeps 5 bits: 16 buckets per octave


def bucket_upper_bound(value: int) -> int:
    """Return the upper bound (inclusive) of the bucket holding ``value``."""
    if value <= _EXACT_UP_TO:
        return max(value, 0)
    x = value - 1
    shift = x.bit_length() - _SUB_BUCKET_BITS
    return ((x >> shift) + 1) << shift


class Histogram:
    """Counts of values by bucket, with the exact count, sum and maximum (crawl process)."""

    __slots__ = ("buckets", "count", "max_value", "total")

    def __init__(self, values: Iterable[int] = ()) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.total = 0
        self.max_value = 0
        for value in values:
            self.add(value)

    def add(self, value: int) -> None:
        """Count one value."""
        bound = bucket_upper_bound(value)
        self.buckets[bound] = self.buckets.get(bound, 0) + 1
        self.count += 1
        self.total += value
        if value > self.max_value:
            self.max_value = value

    def percentile(self, q: float) -> int | None:
        """The nearest-rank ``q`` percentile (0 < q <= 100), as its bucket's upper bound capped at the max."""
        if not self.count:
            return None
        rank = max(1, math.ceil(q / 100 * self.count))
        seen = 0
        for bound in sorted(self.buckets):
            seen += self.buckets[bound]
            if seen >= rank:
                return min(bound, self.max_value)
        return self.max_value

    def count_above(self, limit: int) -> int:
        """How many values were greater than ``limit`` (exact when ``limit`` is a power of two or <= 16)."""
        return sum(n for bound, n in self.buckets.items() if bound > limit)


def next_power_of_two(value: int) -> int:
    """The smallest power of two greater than or equal to ``value`` (1 for 0)."""
    return 1 << max(value - 1, 0).bit_length()
