"""A least-squares slope with a one-sided 95% bound from its residuals, and Student's t quantiles (pure).

All values are plain floats (bytes against responses, for the growth verdict); nothing here knows about crawls.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: Student's t, one-sided 95% (two-sided 90%), by degrees of freedom 1-30; the normal's 1.645 beyond.
_T95 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761, 1.753,
        1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697)


def t95(df: int) -> float:
    """The one-sided 95% quantile of Student's t with ``df`` degrees of freedom (inf for df < 1)."""
    if df < 1:
        return math.inf
    return _T95[df - 1] if df <= len(_T95) else 1.645 + 1.524 / df  # Cornish-Fisher: within 0.1% past 30


@dataclass(frozen=True, slots=True)
class Slope:
    """A least-squares slope of y against x: the estimate, its standard error, the residuals' spread, the points."""

    slope: float
    se: float
    residual_sd: float
    points: int

    @property
    def df(self) -> int:
        """Degrees of freedom of the residuals."""
        return self.points - 2

    @property
    def lower(self) -> float:
        """The one-sided 95% lower bound of the slope."""
        return self.slope - t95(self.df) * self.se

    @property
    def upper(self) -> float:
        """The one-sided 95% upper bound of the slope."""
        return self.slope + t95(self.df) * self.se


def sxx(xs: Sequence[float]) -> float:
    """The sum of squared deviations of ``xs`` from their mean (the leverage a slope gets from them)."""
    if not xs:
        return 0.0
    mean = sum(xs) / len(xs)
    return sum((x - mean) ** 2 for x in xs)


def slope_only(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The least-squares slope of ``ys`` against ``xs`` (0 with fewer than two distinct x)."""
    spread = sxx(xs)
    if len(xs) < 2 or spread <= 0:
        return 0.0
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / spread


def fit(xs: Sequence[float], ys: Sequence[float], noise_floor: float = 0.0) -> Slope:
    """Fit ``ys = a + b * xs``; the residuals' spread is at least ``noise_floor`` (a few points can fit by chance)."""
    n = len(xs)
    b = slope_only(xs, ys)
    spread = sxx(xs)
    if n < 3 or spread <= 0:
        return Slope(b, math.inf, math.inf, n)
    mx, my = sum(xs) / n, sum(ys) / n
    residual = sum((y - my - b * (x - mx)) ** 2 for x, y in zip(xs, ys, strict=True))
    sd = max(math.sqrt(residual / (n - 2)), noise_floor)
    return Slope(b, sd / math.sqrt(spread), sd, n)
