#!/usr/bin/env python3
"""Wall time of the mongodb_stress search against the anchor's schedule, on a simulated server.

The server's throughput curve is known (it peaks at N - 2 instances, so the anchor's rule runs
exactly N steps); both schedules use the engine's own next_step/plan_step. The anchor reloads
every instance at every step; this project searches with "bounded" and seeds data by copy
(instance 0 loaded once, the others copies of its data files; stress.seeding), or by loading
each instance once (--mongodb_stress_data_seeding=load).

The ratio (this project's wall time / the anchor's) at N = 8 is printed under every cost
model: server insert capacity = 1, 2, 4 loaders or unbounded, 10M or 20M records, copies by
reflink clone or plain copy. Beside it the floor: the bounded search's steps alone (their
180 s + overhead each), which no data seeding can go below. Exits 1 when the KPIs of the
bounded search are ever lower than the anchor's, or when the disk-bound model (the default)
misses the target ratio with reflink copies.

    .venv/bin/python scripts/bench_stress_search.py
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from mongobench.core import units
from mongobench.stress import sizing
from mongobench.testbed import simulator

NS = (4, 6, 8, 10, 12)
TARGET_N, TARGET_RATIO = 8, 0.15
MAX_INSTANCES = 16
REFERENCE = (128 * units.GiB, 32)  # memory, vCPUs of the reference server
NOISE_SIGMA, NOISE_SEEDS = 0.03, 200
# A plain copy on one data disk: read + write of ~1,256 B per record at ~250 MB/s.
PLAIN_COPY_RATE = 250e6 / 1256


def model(**changes) -> simulator.CostModel:
    records = sizing.plan_sizing(*REFERENCE, 10**13).records
    cost = simulator.CostModel(records_per_instance=records, seeding="copy")
    return dataclasses.replace(cost, **changes)


def kpis(run: simulator.SimRun) -> tuple[float, float]:
    return run.kpis[0].value, run.kpis[1].value


def compare(n: int, cost: simulator.CostModel, noise: tuple[float, ...] = ()) -> dict:
    """The schedules on a server whose capacity peaks at n - 2 instances: the anchor's,
    linear and bounded with `cost`'s seeding, and bounded loading every instance."""
    server = simulator.SimulatedServer(simulator.peaked_capacity(n - 2, MAX_INSTANCES), noise=noise)
    out = {
        s: simulator.simulate(server, search=s, cost=cost) for s in ("anchor", "linear", "bounded")
    }
    loading = dataclasses.replace(cost, seeding="load")
    out["bounded-load"] = simulator.simulate(server, search="bounded", cost=loading)
    return out


def hours(seconds: float) -> str:
    return f"{seconds / 3600:5.2f}"


def main() -> int:
    started = time.perf_counter()
    cost = model()
    print("mongodb_stress search vs the anchor's schedule, simulated server")
    print(
        f"model: {cost.records_per_instance:,} records/instance (sizing of a "
        f"{REFERENCE[0] // units.GiB} GiB / {REFERENCE[1]} vCPU server); loads server-bound at "
        f"{cost.load_capacity:,.0f} records/s, one loader {cost.loader_rate:,.0f}/s; "
        f"step {cost.step_seconds:.0f} s + {cost.step_overhead_seconds:.0f} s, "
        f"load phase + {cost.load_overhead_seconds:.0f} s; data seeding by copy: instance 0 "
        f"loaded, reflink clones for the others, + {cost.copy_overhead_seconds:.0f} s per copy "
        f"round (stop, restart, verify); capacity peaks at N-2 instances of {MAX_INSTANCES}"
    )
    print()
    print(
        " N peak | anchor steps  Mrec  wall h | linear steps Mrec wall h ratio"
        " | bounded steps Mrec wall h ratio | bounded+load ratio | same KPIs"
    )
    ratios = {}
    for n in NS:
        r = compare(n, cost)
        a, lin, b, bl = r["anchor"], r["linear"], r["bounded"], r["bounded-load"]
        same = kpis(a) == kpis(lin) == kpis(b) == kpis(bl) and a.peak == b.peak == n - 2
        ratios[n] = b.wall_seconds / a.wall_seconds
        print(
            f"{n:2d} {n - 2:4d} | {len(a.steps):12d} {a.records_loaded / 1e6:5.0f} {hours(a.wall_seconds)}"
            f"  | {len(lin.steps):12d} {lin.records_loaded / 1e6:4.0f} {hours(lin.wall_seconds)}"
            f" {lin.wall_seconds / a.wall_seconds:5.3f}"
            f" | {len(b.steps):13d} {b.records_loaded / 1e6:4.0f} {hours(b.wall_seconds)}"
            f" {ratios[n]:5.3f} | {bl.wall_seconds / a.wall_seconds:18.3f} | {'yes' if same else 'NO'}"
        )
        if not same:
            print(f"    KPIs differ: anchor {kpis(a)} linear {kpis(lin)} bounded {kpis(b)}")
            return 1

    equal = higher = lower = steps_a = steps_b = 0
    for n in range(4, 13):
        for seed in range(NOISE_SEEDS):
            r = compare(n, cost, simulator.noise(MAX_INSTANCES, NOISE_SIGMA, seed))
            a, b = kpis(r["anchor"]), kpis(r["bounded"])
            if kpis(r["bounded-load"]) != b:
                print(f"    seeding changed the KPIs at N={n}, seed {seed}")
                return 1
            steps_a += len(r["anchor"].steps)
            steps_b += len(r["bounded"].steps)
            if a == b:
                equal += 1
            elif all(y >= x for x, y in zip(a, b, strict=True)):
                higher += 1
            else:
                lower += 1
    total = equal + higher + lower
    print()
    print(
        f"noisy capacity (sigma {NOISE_SIGMA:.0%}, {NOISE_SEEDS} seeds x N=4..12): bounded KPIs equal "
        f"the anchor's in {equal}/{total}, higher in {higher} (noise stopped the anchor before the "
        f"peak), lower in {lower} (with copies and with loads alike); steps {steps_a} -> "
        f"{steps_b} ({steps_b / steps_a - 1:+.1%})"
    )

    print()
    print(
        f"every cost model at N={TARGET_N} (target ratio <= {TARGET_RATIO}); floor = the bounded "
        "search's steps alone, without any data:"
    )
    print(
        "  records  insert capacity | anchor h | load once | copy reflink | copy plain | floor"
        " | target"
    )
    missed = []
    for records in (cost.records_per_instance, 2 * cost.records_per_instance):
        for mult in (1, 2, 4, None):
            cap = cost.loader_rate * mult if mult else float("inf")
            c = model(records_per_instance=records, load_capacity=cap)
            r = compare(TARGET_N, c)
            a, b = r["anchor"], r["bounded"]
            plain = compare(TARGET_N, dataclasses.replace(c, copy_rate=PLAIN_COPY_RATE))["bounded"]
            floor = len(b.steps) * c.step_total_seconds / a.wall_seconds
            ratio = b.wall_seconds / a.wall_seconds
            label = f"{mult} loader(s)" if mult else "unbounded"
            met = ratio <= TARGET_RATIO
            if not met:
                missed.append((records, label, ratio, floor))
            verdict = (
                "met" if met else ("MISSED" + (" (floor above)" if floor > TARGET_RATIO else ""))
            )
            print(
                f"  {records / 1e6:5.0f}M  {label:>15} | {hours(a.wall_seconds)}    "
                f"| {r['bounded-load'].wall_seconds / a.wall_seconds:9.3f} | {ratio:12.3f} "
                f"| {plain.wall_seconds / a.wall_seconds:10.3f} | {floor:5.3f} | {verdict}"
            )

    ratio = ratios[TARGET_N]
    ok = ratio <= TARGET_RATIO and lower == 0
    elapsed = time.perf_counter() - started
    print()
    if missed:
        print(
            f"{len(missed)} cost model(s) miss {TARGET_RATIO}: where the server absorbs parallel"
            " loaders the anchor's loads shrink, and the steps this search must measure (their"
            f" {cost.step_total_seconds:.0f} s each) already cost more than {TARGET_RATIO} of it"
            " (floor column); copying removes the loads, not the steps."
        )
    print(
        f"N={TARGET_N}, disk-bound loads, reflink copies: this project's wall time / anchor's = "
        f"{ratio:.3f} (target <= {TARGET_RATIO:.3f}) -> {'OK' if ok else 'MISSED'}  [{elapsed:.1f} s]"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
