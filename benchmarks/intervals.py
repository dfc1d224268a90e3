"""A distribution-free confidence interval of a median (pure: the benchmarks' per-round ratios)."""

from __future__ import annotations

import math

#: Confidence of the interval around a median ratio.
CONFIDENCE = 0.95


def median_interval(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """A distribution-free ``confidence`` interval of the median: the order statistics ``x(k)`` and ``x(n-k+1)`` with the
    largest ``k`` whose binomial coverage is at least ``confidence`` (None when ``values`` are too few for it).

    The per-round ratios of a noisy machine are not normal (a core slowed down for a second skews one round), so the
    interval is the sign test's, as for any median: with 30 rounds it is ``[x(10), x(21)]``, covering 95.7%.
    """
    xs, n = sorted(values), len(values)
    best = None
    for k in range(1, n // 2 + 1):
        tail = sum(math.comb(n, i) for i in range(k)) / 2**n  # P(fewer than k of n fall below the median)
        if 1 - 2 * tail < confidence:
            break
        best = (xs[k - 1], xs[n - k])
    return best
