"""Mean and 95 % confidence interval of a few repeated measurements (Student's t)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

# Two-sided 95 % quantiles of Student's t (t_0.975) by degrees of freedom: the standard
# table; past 120 degrees of freedom the normal's 1.960.
_T975 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
    9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120,
    17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064,
    25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000,
    120: 1.980,
}  # fmt: skip


def t975(df: int) -> float:
    """t_0.975 with `df` degrees of freedom (df >= 1). Between table rows the row of fewer
    degrees of freedom is used: its t is larger, the interval a little wider, never narrower."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, not {df}")
    if df > 120:
        return 1.960
    return _T975[max(row for row in _T975 if row <= df)]


@dataclass(frozen=True)
class Interval:
    n: int
    mean: float
    stdev: float  # sample standard deviation (n - 1); 0 for one value
    low: float  # 95 % confidence interval of the mean; the mean itself for one value
    high: float

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high


def interval(values) -> Interval:
    """Mean, stdev and the t-based 95 % confidence interval of the mean of `values`."""
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("no values")
    mean = statistics.fmean(xs)
    if len(xs) == 1:
        return Interval(1, mean, 0.0, mean, mean)
    sd = statistics.stdev(xs)
    half = t975(len(xs) - 1) * sd / math.sqrt(len(xs))
    return Interval(len(xs), mean, sd, mean - half, mean + half)
