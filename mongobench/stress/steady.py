"""The steady-state stop of a stress step: end its measurement once the throughput has settled.

Seed 003 measures every step for 3 minutes. Most of them settle much sooner: after the JVMs
start and the dropped page cache warms up, the step's throughput (the sum of its YCSB
processes' status-line rates, ycsb.status) stays within its noise. A step stops early when,
after `min_seconds`, the last `window` status intervals give its full `step_seconds`
throughput within `tolerance`.

That throughput is the operations measured plus the seconds left counted at the window's
rate, (measured x seconds + rate x (step_seconds - seconds)) / step_seconds, so a warm-up at
the start weighs as it would over the full step (full_step_throughput). Only the seconds left
are estimated, so the rule bounds the estimate's error on them (step_error), the sum of:

- the 95 % confidence interval of the window's mean rate (Student's t), and
- the error if the window's least-squares trend went on to the end of the step,

scaled by the share of the step left. A step stopped at 60 of 180 s estimates two thirds
of it; one stopped at 120 s, a third. Without a steady window the step runs its full time, as
the seed's. p99 latencies are the measured seconds' own.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mongobench.ycsb import status

STOPS = ("steady", "full")
MIN_SECONDS = 60.0
WINDOW = 6  # status intervals: 60 s at YCSB's 10 s, one WiredTiger checkpoint period
TOLERANCE = 0.01

# Student's t, two-sided 95 %, by degrees of freedom (beyond 30: the normal's 1.96)
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t95(df: int) -> float:
    return _T95[df - 1] if df <= len(_T95) else 1.96


@dataclass(frozen=True)
class SteadyRule:
    min_seconds: float = MIN_SECONDS
    window: int = WINDOW
    tolerance: float = TOLERANCE

    def __post_init__(self):
        if self.window < 3:
            raise ValueError(
                f"the steady window needs 3 status intervals or more, got {self.window}"
            )
        if not 0 < self.tolerance < 1:
            raise ValueError(f"the steady tolerance must be in (0, 1), got {self.tolerance}")
        if self.min_seconds < 0:
            raise ValueError(f"min_seconds must be >= 0, got {self.min_seconds}")


@dataclass(frozen=True)
class Steady:
    """Where a step became steady: after `intervals` status intervals (`seconds`), at the
    window's mean `rate` (ops/s), with the CI half-width and trend relative to it, and the
    bound they give on the full step's throughput (step_error)."""

    intervals: int
    seconds: float
    rate: float
    half_width: float
    drift: float
    step_error: float


def window_stats(rates: Sequence[float]) -> tuple[float, float, float]:
    """Mean, relative 95 % CI half-width of the mean, relative change of the least-squares
    trend across the window."""
    w = len(rates)
    mean = statistics.fmean(rates)
    if mean <= 0:
        return mean, math.inf, math.inf
    half = t95(w - 1) * statistics.stdev(rates) / math.sqrt(w) / mean
    slope = statistics.linear_regression(range(w), rates).slope
    return mean, half, abs(slope) * (w - 1) / mean


def step_error(
    half: float, drift: float, seconds: float, window: int, interval_s: float, step_seconds: float
) -> float:
    """The relative error bound of a full step's throughput estimated at `seconds` from a
    window of `window` intervals with CI half-width `half` and trend `drift` (window_stats):
    the CI plus the trend's continuation (the window's rate is off by both at worst), on the
    share of the step left. The trend runs from the window's middle to the middle of the
    seconds left."""
    left = max(0.0, step_seconds - seconds)
    share = left / step_seconds
    per_second = drift / ((window - 1) * interval_s)
    bias = per_second * (left / 2 + window * interval_s / 2)
    return (half + bias) * share


def steady_at(
    rates: Sequence[float], interval_s: float, rule: SteadyRule, step_seconds: float
) -> Steady | None:
    """The first point at which the step's interval rates (ops/s of each complete status
    interval, in order) give its `step_seconds` throughput within rule.tolerance, or None."""
    w = rule.window
    for k in range(w, len(rates) + 1):
        seconds = k * interval_s
        if seconds < rule.min_seconds:
            continue
        mean, half, drift = window_stats(rates[k - w : k])
        err = step_error(half, drift, seconds, w, interval_s, step_seconds)
        if err <= rule.tolerance:
            return Steady(k, seconds, mean, half, drift, err)
    return None


def complete_rates(series: dict | None) -> list[float]:
    """The rates of a running step's complete status intervals (ycsb.status.series of its
    processes' status lines so far): the last interval may still be filling up."""
    if not series:
        return []
    return list(series["ops_per_s"][:-1])


def full_step_throughput(
    measured: float, seconds: float, rate: float, step_seconds: float
) -> float:
    """The throughput of a full step whose first `seconds` delivered `measured` ops/s and
    whose remaining seconds run at the steady `rate`."""
    if seconds >= step_seconds:
        return measured
    return (measured * seconds + rate * (step_seconds - seconds)) / step_seconds


def describe(stop: str, rule: SteadyRule) -> dict:
    """Sample metadata of the step stop rule."""
    meta = {"step_stop": stop}
    if stop == "steady":
        meta.update(
            steady_min_seconds=rule.min_seconds,
            steady_window_intervals=rule.window,
            steady_tolerance=rule.tolerance,
        )
    return meta


class Watch:
    """The live check of one step (stop_when of the PKB wing's RunOnClients): called with
    the status lines of its `processes` YCSB processes so far (name -> lines), true once
    they are steady for a step of `step_seconds` (then `steady` says where). Only intervals
    every process has closed count, so a client whose lines arrive later never looks like a
    fall. The status interval is read from the lines (YCSB prints one at the start, then one
    every interval) unless `interval_s` is given."""

    def __init__(
        self,
        rule: SteadyRule,
        processes: int,
        step_seconds: float,
        interval_s: float | None = None,
    ):
        self.rule = rule
        self.processes = processes
        self.step_seconds = step_seconds
        self.interval_s = interval_s
        self.steady: Steady | None = None

    def __call__(self, lines: Mapping[str, Sequence[str]]) -> bool:
        if self.steady is not None:
            return True
        parsed = [status.parse_lines("\n".join(got)) for got in lines.values()]
        if len(parsed) < self.processes or any(len(p) < 2 for p in parsed):
            return False
        interval = self.interval_s or max(1.0, round(parsed[0][1].at - parsed[0][0].at))
        t0 = min(p[0].at for p in parsed)
        # rounded, as status.series places lines: YCSB prints its first line late (0.6 s on
        # the test bed) and the later ones on its start's cadence
        closed = round((min(p[-1].at for p in parsed) - t0) / interval)
        ser = status.series(["\n".join(got) for got in lines.values()], interval)
        # every process has closed these intervals: each a full interval of operations (the
        # series takes its newest interval's length from its last line, which may lag)
        rates = [ops / interval for ops in ser["ops"][:closed]] if ser else []
        self.steady = steady_at(rates, interval, self.rule, self.step_seconds)
        return self.steady is not None

    def apply(self, result):
        """The step's result and metadata after the run: with a steady stop, its throughput
        counts the seconds left to its `step_seconds` at the steady rate (full_step_throughput);
        YCSB's own figure over the measured seconds stays in `measured_throughput`."""
        meta = {}
        step_seconds = self.step_seconds
        ser = result.series
        seconds = (ser["t_s"][-1] + ser["seconds"][-1]) if ser and ser["t_s"] else None
        meta["step_measured_seconds"] = round(seconds, 1) if seconds is not None else None
        if self.steady is None or seconds is None or seconds >= step_seconds:
            meta["steady_reached"] = self.steady is not None
            return result, meta
        full = full_step_throughput(result.throughput, seconds, self.steady.rate, step_seconds)
        meta.update(
            steady_reached=True,
            steady_after_seconds=self.steady.seconds,
            steady_rate=round(self.steady.rate, 3),
            steady_half_width=round(self.steady.half_width, 5),
            steady_drift=round(self.steady.drift, 5),
            steady_step_error=round(self.steady.step_error, 5),
            measured_throughput=result.throughput,
        )
        return dataclasses.replace(result, throughput=full), meta
