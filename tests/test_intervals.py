"""The median's interval of the overhead benchmark (benchmarks/intervals.py): the sign test's order statistics."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from intervals import median_interval


@pytest.mark.parametrize(("n", "k"), [(6, 1), (16, 4), (30, 10), (40, 14)])
def test_the_interval_is_the_sign_tests_order_statistics(n: int, k: int) -> None:
    """Textbook ranks: n=16 -> x(4), x(13); n=30 -> x(10), x(21) (coverage 97.9% and 95.7%)."""
    values = [float(i) for i in range(1, n + 1)]
    random.Random(n).shuffle(values)
    assert median_interval(values) == (k, n - k + 1)


def test_too_few_values_give_no_interval() -> None:
    """Five values cover the median with at most 93.75%: no 95% interval, rather than one that overstates it."""
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) is None
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0], confidence=0.9) == (1.0, 5.0)


def test_the_interval_covers_the_median_at_its_confidence() -> None:
    """Over 2,000 seeded samples of 30 skewed ratios, the interval holds the true median at least 95% of the time."""
    rng = random.Random(26)
    true_median = 1.05  # lognormal around 1.05: the median of exp(N(log 1.05, s)) is 1.05
    covered = 0
    for _ in range(2000):
        values = [1.05 * rng.lognormvariate(0.0, 0.2) for _ in range(30)]
        interval = median_interval(values)
        assert interval is not None
        covered += interval[0] <= true_median <= interval[1]
    assert covered / 2000 >= 0.95
