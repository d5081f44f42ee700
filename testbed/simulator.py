"""A simulated server for the stress search: compares search strategies without a server."""

from __future__ import annotations

import dataclasses
import functools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from mongobench.stress import steady
from mongobench.stress.search import Kpi, _walk_stop, run_search, select_kpis
from mongobench.stress.settings import READ_P99_SLA_MS, TARGET_PER_PROCESS
from mongobench.stress.steps import Copying, StepResult, plan_step

# ----------------------------------------------------------------------------- simulation


@dataclass(frozen=True)
class SimulatedServer:
    """A server whose capacity per instance count is known: capacity[n-1] ops/s with n
    instances; `noise[n-1]` a fixed relative error of that step's measurement."""

    capacity: tuple[float, ...]
    noise: tuple[float, ...] = ()
    read_p99_base_ms: float = 0.8
    read_p99_slope_ms: float = 4.0

    @property
    def max_instances(self) -> int:
        return len(self.capacity)

    def measure(self, n: int, target: float) -> StepResult:
        """A saturated step delivers the capacity (plus noise); an unsaturated one 99.5 % of
        the offered load, as a throttled YCSB does. p99 grows with utilisation."""
        offered = n * target
        eps = self.noise[n - 1] if self.noise else 0.0
        thr = min(0.995 * offered, self.capacity[n - 1] * (1.0 + eps))
        util = offered / self.capacity[n - 1]
        p99 = self.read_p99_base_ms + self.read_p99_slope_ms * util**4
        return StepResult(n, thr, p99, 1.5 * p99, p99_source="simulated")


def peaked_capacity(
    peak: int, max_instances: int, *, saturation: float = 0.8, target: float = TARGET_PER_PROCESS
) -> tuple[float, ...]:
    """Capacity rising to its maximum at `peak` instances, then falling: C(n) = P (n/peak)
    e^(1 - n/peak), with P = `saturation` x the offered load at the peak."""
    top = saturation * peak * target
    return tuple(top * (n / peak) * math.exp(1.0 - n / peak) for n in range(1, max_instances + 1))


def noise(max_instances: int, sigma: float, seed: int) -> tuple[float, ...]:
    rng = random.Random(seed)
    return tuple(rng.gauss(0.0, sigma) for _ in range(max_instances))


@dataclass(frozen=True)
class CostModel:
    """Wall-time model of a search. Loads are bounded by the server's insert capacity
    (records/s over all loaders: one data disk takes data and journal writes of every
    instance), each loader by its own rate.

    `seeding` "copy" (stress.seeding; the anchor always loads): only instance 0 is loaded, the
    others get copies of its data files: a copy round stops the source cleanly, copies to
    every new instance at `copy_rate` records/s in all (one data disk), restarts it and
    verifies each copy, in `copy_overhead_seconds` plus the copying. `copy_rate` inf: reflink
    clones (XFS, btrfs: metadata only), made for every instance the search may use in the
    first round."""

    records_per_instance: int = 10_000_000
    loader_rate: float = 30_000.0
    load_capacity: float = 30_000.0
    step_seconds: float = 180.0
    # A step's work around its measurement, as mongobench_pkb.stress.Step does it, measured
    # through ./pkb.py on the test bed (docs/stress.md, "A step's overhead"): 21.5 s around a
    # step that starts no instance (drop caches, stress-ng start until its memory is held,
    # /proc readings, YCSB's start and JVM up to its first status line; after it, its end
    # seen, the outputs fetched, readings, dead-instance check, stress-ng stop), with ~13
    # ssh round trips of ~1 s each on that loaded 2-core host. Not in it (not measurable
    # there): populating and freeing a hold of tens of GiB, a mongod start over real data.
    step_overhead_seconds: float = 21.5
    load_overhead_seconds: float = 30.0  # start the instances to load, JVM start
    seeding: str = "load"
    copy_rate: float = math.inf
    copy_overhead_seconds: float = 30.0  # clean shutdown, restart, verification (JVM start)
    # A step's 10 s status intervals: each interval's rate is off by a relative
    # gauss(0, interval_noise); a saturated step also starts with the dropped page cache
    # warming up (1 - warmup e^(-t/tau)). Below saturation YCSB's throttle catches up what a
    # slow start missed (it schedules operation k at start + k / target), so the offered
    # load is delivered throughout, with half the noise. The step's throughput is their mean
    # (YCSB's figure), or with step_stop "steady" what stress.steady makes of the intervals
    # up to its stop, stop_lag_seconds after the rule held: PKB sees the status line that
    # closes the window within a 2 s poll, checks within 2 s, and YCSB ends on its stop file
    # (measured on the test bed: 4.3 s from that line to YCSB's final line).
    curves: bool = False  # False: a step measures its capacity exactly, in step_seconds
    step_stop: str = "full"
    steady_rule: steady.SteadyRule = steady.SteadyRule()
    warmup: float = 0.3
    warmup_tau_seconds: float = 15.0
    interval_noise: float = 0.01
    stop_lag_seconds: float = 4.3
    curve_seed: int = 0  # another value: another draw of every step's interval noise
    source_loaders: int = 1  # YCSB processes loading the copy source (steps.Copying)

    def load_seconds(self, instances: int, loaders: int | None = None) -> float:
        """Loading `instances` instances with `loaders` YCSB processes (default: one each)."""
        if instances <= 0:
            return 0.0
        rate = min((loaders or instances) * self.loader_rate, self.load_capacity)
        return self.load_overhead_seconds + instances * self.records_per_instance / rate

    def copy_seconds(self, instances: int) -> float:
        if instances <= 0:
            return 0.0
        return self.copy_overhead_seconds + instances * self.records_per_instance / self.copy_rate

    @property
    def step_total_seconds(self) -> float:
        return self.step_seconds + self.step_overhead_seconds


@dataclass(frozen=True)
class SimRun:
    steps: tuple[int, ...]
    records_loaded: int
    load_seconds: float
    wall_seconds: float
    kpis: tuple[Kpi, ...]
    measured_seconds: float = 0.0  # the steps' measurements alone

    @property
    def peak(self) -> int:
        return self.kpis[0].metadata["instances"]

    @property
    def sla_peak(self) -> int | None:
        return self.kpis[1].metadata.get("instances")


def step_curve(
    rate: float, saturated: bool, cost: CostModel, seed: str, interval_s: float = 10.0
) -> list[float]:
    """The status-interval rates of one step of cost.step_seconds (see CostModel)."""
    rng = random.Random(seed)
    sigma = cost.interval_noise * (1.0 if saturated else 0.5)
    warmup = cost.warmup if saturated else 0.0
    tau = cost.warmup_tau_seconds
    out = []
    for k in range(int(cost.step_seconds // interval_s)):
        a, b = k * interval_s, (k + 1) * interval_s
        warm = 1.0 - warmup * tau * (math.exp(-a / tau) - math.exp(-b / tau)) / interval_s
        out.append(rate * warm * (1.0 + rng.gauss(0.0, sigma)))
    return out


@functools.lru_cache(maxsize=4096)
def measured_step(
    rate: float, saturated: bool, cost: CostModel, seed: str, stop: str, interval_s: float = 10.0
) -> tuple[float, float]:
    """(throughput, seconds measured) of a step of step_curve's rates under `stop`."""
    rates = step_curve(rate, saturated, cost, seed, interval_s)
    full = (sum(rates) / len(rates), len(rates) * interval_s)
    if stop == "full":
        return full
    got = steady.steady_at(rates, interval_s, cost.steady_rule, cost.step_seconds)
    if got is None:
        return full
    # YCSB ends stop_lag_seconds after the interval that made the rule hold closed: what it
    # measured is every interval up to then and that part of the next
    seconds = min(len(rates) * interval_s, got.seconds + cost.stop_lag_seconds)
    k, part = int(seconds // interval_s), seconds % interval_s
    ops = sum(rates[:k]) * interval_s + (rates[k] * part if k < len(rates) else 0.0)
    measured = ops / seconds
    return steady.full_step_throughput(measured, seconds, got.rate, cost.step_seconds), seconds


def _measured(
    r: StepResult, server: SimulatedServer, cost: CostModel, target: float, stop: str
) -> tuple[float, float]:
    """(throughput, seconds measured) of step r under `cost` (its curve when cost.curves)."""
    if not cost.curves:
        return r.throughput, cost.step_seconds
    saturated = r.throughput < 0.99 * r.instances * target
    seed = f"{r.instances}:{server.noise}:{cost.curve_seed}"
    return measured_step(r.throughput, saturated, cost, seed, stop)


def simulate(
    server: SimulatedServer,
    *,
    search: str,
    cost: CostModel = CostModel(),
    target: float = TARGET_PER_PROCESS,
    sla_ms: float = READ_P99_SLA_MS,
    clients: int = 2,
    measure: Callable[[int], StepResult] | None = None,
    first_step: int | None = None,
) -> SimRun:
    """Runs a search against `server` with the engine's own run_search and plan_step.
    search "anchor" is the anchor's schedule (linear, every step reloads all its instances);
    "linear" and "bounded" load each instance once (or, with cost.seeding "copy", instance 0
    only and copy its files to the others). `load_seconds` counts loading and copying."""
    measure = measure or (lambda n: server.measure(n, target))
    loaded: set[int] = set()
    records = load_s = wall = 0.0
    step_s: list[float] = []
    copying = cost.seeding == "copy" and search != "anchor"

    def step(n: int) -> tuple[StepResult, dict]:
        nonlocal records, load_s, wall
        plan = plan_step(
            n,
            loaded=() if search == "anchor" else loaded,
            clients=clients,
            records=cost.records_per_instance,
            hosts=("server",),
            copying=Copying(
                # clones (reflink) cost nothing: every instance the search may use in one round
                upto=server.max_instances if math.isinf(cost.copy_rate) else 0,
                loaders=cost.source_loaders,
            )
            if copying
            else None,
        )
        new = len({p.instance for p in plan.load})
        records += sum(p.insertcount for p in plan.load)
        seconds = cost.load_seconds(new, len(plan.load)) + cost.copy_seconds(len(plan.copy))
        load_s += seconds
        wall += seconds
        loaded.update(p.instance for p in plan.load)
        loaded.update(plan.copy)
        r = measure(n)
        stop = "full" if search == "anchor" else cost.step_stop
        thr, seconds = _measured(r, server, cost, target, stop)
        wall += seconds + cost.step_overhead_seconds
        step_s.append(seconds)
        return dataclasses.replace(r, throughput=thr), {}

    history = run_search(
        step,
        server.max_instances,
        search="linear" if search == "anchor" else search,
        target_per_process=target,
        sla_ms=sla_ms,
        first_step=first_step,
    ).history
    kpis = select_kpis(history, sla_ms=sla_ms, max_instances=server.max_instances)
    return SimRun(
        tuple(r.instances for r in history), int(records), load_s, wall, tuple(kpis), sum(step_s)
    )


def proof_steps(
    server: SimulatedServer,
    *,
    target: float = TARGET_PER_PROCESS,
    sla_ms: float = READ_P99_SLA_MS,
    tolerance: float = 0.02,
) -> tuple[int, ...]:
    """The steps any search must measure to know both KPIs of `server` (its curve known in
    advance, as no search knows it): every step up to where the seed's walk stops after the
    peak (two successive falls, search._walk_stop) that could deliver more than the best step
    within the SLA (n x target x (1 + tolerance) above it, the bounded search's own bound),
    and every step above the peak up to that stop. Fewer leave a KPI unproven: a step not
    measured could have beaten it."""
    thr = {n: server.measure(n, target).throughput for n in range(1, server.max_instances + 1)}
    p99 = {n: server.measure(n, target).read_p99_ms for n in thr}
    best = max(thr.values())
    peak = min(n for n in thr if thr[n] == best)
    stop = _walk_stop(thr, peak, server.max_instances)
    sla_best = max((thr[n] for n in thr if n <= stop and p99[n] <= sla_ms), default=0.0)
    bound = target * (1.0 + tolerance)
    return tuple(n for n in range(1, stop + 1) if n > peak or n * bound > sla_best)


def floor_seconds(server: SimulatedServer, cost: CostModel, target: float = TARGET_PER_PROCESS):
    """What no data seeding and no search can go below on `server` under `cost`: the
    proof_steps alone, each its overhead and what it measures (stopped steady when
    cost.step_stop says so), without loading or copying any data."""
    return sum(
        _measured(server.measure(n, target), server, cost, target, cost.step_stop)[1]
        + cost.step_overhead_seconds
        for n in proof_steps(server, target=target)
    )
