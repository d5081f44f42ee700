"""The search for peak throughput: the next step, the loop that runs the steps, and the KPIs
of the steps run."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from mongobench.stress.settings import READ_P99_SLA_MS, SEARCHES, TARGET_PER_PROCESS
from mongobench.stress.steps import StepError, StepResult

MAX_METRIC = "Maximum Throughput"
SLA_METRIC = "Maximum Throughput for Latency SLA"
THROUGHPUT_UNIT = "ops/sec"
# Per-step samples under PKB's ycsb_stats names (as sweep.plan), so they sit beside
# mongodb_ycsb's: the throughput summed over processes, p99 per operation in ms in both of
# PKB's forms (YCSB's summary line, the histogram percentile).
STEP_THROUGHPUT_METRIC = "overall Throughput"
P99_STATS = ("p99 latency", "99thPercentileLatency")
P50_STATS = ("p50 latency", "50thPercentileLatency")


# ----------------------------------------------------------------------------- search


def fell_twice(throughputs: Sequence[float]) -> bool:
    """The seed's stop rule, "until the throughput goes down for two successive iterations":
    each of the last two steps measured less than the step before it. The anchor's code
    stopped earlier, as soon as the best so far beat both of the last two steps (10, 20, 15,
    18 stops there; here 18 > 15 is no fall and the walk goes on)."""
    t = throughputs
    return len(t) >= 3 and t[-3] > t[-2] > t[-1]


def _walk_stop(thr: Mapping[int, float], peak: int, max_instances: int) -> int:
    """Where a linear walk that reached `peak` stops at the latest, as far as the steps above
    the peak are measured: the first k >= peak + 2 with thr[k-2] > thr[k-1] > thr[k]
    (fell_twice), or the next k whose steps are not all measured yet."""
    k = peak + 2
    while k < max_instances and k - 1 in thr and k in thr and not thr[k - 2] > thr[k - 1] > thr[k]:
        k += 1
    return min(k, max_instances)


def first_bounded_step(max_instances: int, min_instances: int = 1, asked: int | None = None) -> int:
    """Where the bounded search starts: `asked`, else a quarter of the most instances the
    server holds, at least 3; within min_instances..max_instances. On peaked curves
    (testbed.simulator) with the peak anywhere from 1 to max_instances, three saturations
    each, max_instances 3..32, this start measures 1,400 steps beyond those that prove the
    KPIs, against 2,802 from step 2 and 1,014 from the best start for each max_instances
    (about 40 %, which costs more where the peak is at 1 or 2: 135 against 99 here)."""
    first = max(3, round(max_instances / 4)) if asked is None else asked
    return min(max(min_instances, first), max_instances)


def next_step(
    history: Sequence[StepResult],
    max_instances: int,
    *,
    search: str = "linear",
    min_instances: int = 1,
    target_per_process: float | None = TARGET_PER_PROCESS,
    sla_ms: float = READ_P99_SLA_MS,
    tolerance: float = 0.02,
    first_step: int | None = None,
) -> int | None:
    """Instance count of the next step, or None when the search is over.

    "linear" is the seed's schedule: min_instances, +1, ... until the throughput fell at two
    successive steps (fell_twice) or max_instances. "bounded" skips only steps that provably
    cannot change a KPI: n YCSB processes with a per-process target cannot exceed n x target
    (x (1 + tolerance)). It starts at `first_step` (default: first_bounded_step) and doubles n
    while every step delivered
    its offered load (so no smaller step can be the best), then measures every step above
    the best up to where the linear walk would stop (two successive falls after it, at
    least two steps), below that, lowest first, every step that could still beat the best,
    and then those that could beat the best step within the SLA, highest first (when it
    meets the SLA, it rules out the lower ones). Its KPIs equal the linear
    search's on the same measurements unless the linear search stopped at two falls on the
    way up that doubling stepped over (then they are higher); on the simulated curves of the
    tests without noise it never needs more steps.
    Without a target (unthrottled YCSB) there is no bound and it falls back to "linear".
    """
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {SEARCHES}, got {search!r}")
    if max_instances < min_instances:
        raise ValueError(f"max_instances {max_instances} < min_instances {min_instances}")
    if search == "linear" or not target_per_process:
        if not history:
            return min_instances
        last = history[-1].instances
        if fell_twice([r.throughput for r in history]) or last >= max_instances:
            return None
        return last + 1

    if not history:
        return first_bounded_step(max_instances, min_instances, first_step)
    thr = {r.instances: r.throughput for r in history}
    p99 = {r.instances: r.read_p99_ms for r in history}
    measured = sorted(thr)
    bound = target_per_process * (1.0 + tolerance)

    if all(thr[n] >= (1.0 - tolerance) * n * target_per_process for n in measured):
        if measured[-1] < max_instances:  # still unsaturated: nothing below can be the peak
            return min(2 * measured[-1], max_instances)

    best = max(thr.values())
    peak_hi = max(n for n in measured if thr[n] == best)
    # Above the peak, every step the linear walk would measure; below it, every step that
    # could still beat the best, lowest first (it raises the best fastest on the way up).
    stop = _walk_stop(thr, peak_hi, max_instances)
    todo = [
        m
        for m in range(min_instances, stop + 1)
        if m not in thr and (m > peak_hi or m * bound > best)
    ]
    if todo:
        return todo[0]
    within = [thr[n] for n in measured if p99[n] is not None and p99[n] <= sla_ms]
    sla_best = max(within, default=0.0)
    todo = [m for m in range(min_instances, stop + 1) if m not in thr and m * bound > sla_best]
    # highest first: a step that meets the SLA rules out every lower one it out-delivers
    return todo[-1] if todo else None


@dataclass
class Search:
    """What a search measured: the results and step metadata of steps 1..k, and the failure
    that ended it (step number, instance count, error text) or None."""

    history: list[StepResult] = field(default_factory=list)
    infos: list[dict] = field(default_factory=list)
    failure: tuple[int, int, str] | None = None


def _no_log(message: str, *, problem: bool = False) -> None:
    pass


def run_search(
    step: Callable[[int], tuple[StepResult, dict]],
    max_instances: int,
    *,
    search: str = "linear",
    min_instances: int = 1,
    target_per_process: float | None = TARGET_PER_PROCESS,
    sla_ms: float = READ_P99_SLA_MS,
    first_step: int | None = None,
    log: Callable[..., None] = _no_log,
) -> Search:
    """Runs `step(n)` (-> its StepResult and step metadata) for each instance count
    next_step chooses until the search is over or a step raises StepError, which ends the
    search as its `failure`. `log(message, problem=False)` hears each step's start and result
    and the failure (problem=True)."""
    out = Search()
    while (
        n := next_step(
            out.history,
            max_instances,
            search=search,
            min_instances=min_instances,
            target_per_process=target_per_process,
            sla_ms=sla_ms,
            first_step=first_step,
        )
    ) is not None:
        k = len(out.history) + 1
        log(f"step {k} with {n} instance(s)")
        try:
            result, info = step(n)
        except StepError as e:
            out.failure = (k, n, str(e))
            log(str(e), problem=True)
            break
        log(f"{n} instance(s): {result.throughput:.1f} ops/s, read p99 {result.read_p99_ms} ms")
        out.history.append(result)
        out.infos.append(info)
    return out


# ----------------------------------------------------------------------------- KPIs


@dataclass(frozen=True)
class Kpi:
    metric: str
    value: float
    unit: str
    metadata: dict


def _best(results: Sequence[StepResult]) -> StepResult:
    # Ties go to the fewer instances, as the anchor's strict comparison did.
    return min(results, key=lambda r: (-r.throughput, r.instances))


def select_kpis(
    history: Sequence[StepResult],
    *,
    sla_ms: float = READ_P99_SLA_MS,
    mongodb_version: str | None = None,
    max_instances: int | None = None,
    metadata: Mapping | None = None,
) -> list[Kpi]:
    """`Maximum Throughput` (best step) and `Maximum Throughput for Latency SLA` (best step
    whose read p99 <= sla_ms; 0 with a reason when none)."""
    if not history:
        raise ValueError("no steps were measured")
    common = dict(metadata or {})
    common.update(
        {
            "mongodb_version": mongodb_version,
            "read_p99_sla_ms": sla_ms,
            "steps_run": len(history),
            "instances_tried": [r.instances for r in history],
            "max_instances": max_instances,
        }
    )
    order = {id(r): k + 1 for k, r in enumerate(history)}

    def describe(r: StepResult) -> dict:
        return {**common, **r.metadata(), "step": order[id(r)]}

    best = _best(history)
    top_meta = describe(best)
    largest = max(r.instances for r in history)
    if best.instances == largest:
        limit = " (the instance limit)" if max_instances == largest else ""
        top_meta["warning"] = (
            f"maximum throughput was at the largest instance count tried, {largest}{limit}; "
            "the server may have more capacity"
        )
    kpis = [Kpi(MAX_METRIC, best.throughput, THROUGHPUT_UNIT, top_meta)]

    ok = [r for r in history if r.read_p99_ms is not None and r.read_p99_ms <= sla_ms]
    if ok:
        within = _best(ok)
        kpis.append(Kpi(SLA_METRIC, within.throughput, THROUGHPUT_UNIT, describe(within)))
    else:
        lowest = min(
            history, key=lambda r: r.read_p99_ms if r.read_p99_ms is not None else math.inf
        )
        reason = (
            f"no step met read p99 <= {sla_ms:g} ms; the lowest read p99 was "
            f"{lowest.read_p99_ms:g} ms with {lowest.instances} instance(s)"
        )
        kpis.append(Kpi(SLA_METRIC, 0.0, THROUGHPUT_UNIT, {**common, "reason": reason}))
    return kpis


def step_kpis(history: Sequence[StepResult], metadata: Mapping | None = None) -> list[Kpi]:
    """Per-step samples: throughput and read/update p50 and p99 of every step (`overall
    Throughput`, `read p50 latency`, `read 50thPercentileLatency`, `read p99 latency`,
    `read 99thPercentileLatency`, `update ...`)."""
    out = []
    for k, r in enumerate(history, 1):
        meta = {**(metadata or {}), **r.metadata(), "step": k}
        out.append(Kpi(STEP_THROUGHPUT_METRIC, r.throughput, THROUGHPUT_UNIT, meta))
        for op, p50, p99 in (
            ("read", r.read_p50_ms, r.read_p99_ms),
            ("update", r.update_p50_ms, r.update_p99_ms),
        ):
            for value, stats in ((p50, P50_STATS), (p99, P99_STATS)):
                if value is not None:
                    out.extend(Kpi(f"{op} {stat}", value, "ms", meta) for stat in stats)
    return out
