"""What a sweep will cost before it runs: the data it loads and its wall time.

Per size: the load (its records) and each run phase (its operations) at the target's YCSB
rate, plus a fixed start-up per phase (the JVM, connecting). The rate is what earlier sweeps
against the same target measured (measure.rates' file, under "sweep <target>"),
else DEFAULT_RATES.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from mongobench.core.units import human_bytes, human_seconds
from mongobench.measure.rates import read_record, target_key, write_record
from mongobench.sweep.plan import Phase, SizeStep


@dataclass(frozen=True)
class SweepRates:
    ops_s: float  # YCSB operations per second, one process of the configured threads
    phase_overhead_s: float
    source: str = "default"


DEFAULT_RATES = {
    "mongod": SweepRates(ops_s=3000.0, phase_overhead_s=5.0),
    "standin": SweepRates(ops_s=400.0, phase_overhead_s=3.0),
}


def _key(uri: str) -> str:
    return "sweep " + target_key(uri)


def rates_for(uri: str | None, kind: str = "mongod") -> SweepRates:
    past = read_record(_key(uri)) if uri else None
    if past:
        try:
            return SweepRates(
                float(past["ops_s"]),
                float(past["phase_overhead_s"]),
                source=f"past runs ({past.get('updated', '?')})",
            )
        except (KeyError, TypeError, ValueError):
            pass
    base = DEFAULT_RATES.get(kind, DEFAULT_RATES["mongod"])
    return SweepRates(base.ops_s, base.phase_overhead_s, source=f"default ({kind})")


@dataclass
class SweepEstimate:
    sizes: list[str]
    phases: int
    volume_bytes: float
    seconds: float
    rates: SweepRates

    def metadata(self) -> dict:
        return {
            "estimated_seconds": round(self.seconds, 1),
            "estimated_data_mb": round(self.volume_bytes / 1e6, 1),
            "estimate_rates": self.rates.source,
        }

    def summary(self) -> str:
        return (
            f"{len(self.sizes)} size(s) ({', '.join(self.sizes)}) x {self.phases} phase(s):"
            f" nominal data {human_bytes(self.volume_bytes)},"
            f" estimated time {human_seconds(self.seconds)} (rates: {self.rates.source})"
        )


def estimate(
    steps: Sequence[SizeStep], phases: Sequence[Phase], rates: SweepRates, repeats: int = 1
) -> SweepEstimate:
    seconds = volume = 0.0
    for s in steps:
        volume += s.dataset_bytes
        seconds += rates.phase_overhead_s + s.records / rates.ops_s  # the load
        for p in phases:
            if p.ycsb_phase == "load":
                continue
            seconds += repeats * (rates.phase_overhead_s + s.operations / rates.ops_s)
    n = len([p for p in phases if p.ycsb_phase != "load"]) + 1
    return SweepEstimate([s.label for s in steps], n, volume, seconds, rates)


def record(uri: str, samples: list[dict], wall_s: float) -> None:
    """Keeps the YCSB rate and per-phase start-up this sweep measured against `uri`."""
    runs = [
        s
        for s in samples
        if s.get("metric") == "overall RunTime" and s["metadata"].get("operations")
    ]
    run_s = sum(s["value"] for s in runs) / 1000.0
    ops = sum(s["metadata"]["operations"] for s in runs)
    if not runs or run_s <= 0:
        return
    write_record(
        _key(uri),
        {
            "ops_s": ops / run_s,
            "phase_overhead_s": max(0.0, wall_s - run_s) / len(runs),
            "updated": time.strftime("%Y-%m-%d"),
        },
    )
