"""One stress run's settings, as a typed object: every option of the search declared once.

PKB's mongodb_stress benchmark builds a `StressSettings` from its flags in
CheckPrerequisites (each flag's default is this class's), `validate()` checks it once,
before anything is provisioned, in one line naming the flag and the value, and the stages
and the engine take the object (report.run_metadata, steps.run_properties) instead
of the options one by one. The stress engine runs on the PKB host, so nothing crosses a VM
boundary: unlike perftables' request, the object is not written to a file.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from mongobench.deploy.mongod import FIRST_PORT, WIREDTIGER_MIN_CACHE_GB
from mongobench.stress import steady
from mongobench.ycsb.status import STATUS_INTERVAL_S

# Seed 003's defaults and the choices of the options; the modules that act on them (steps,
# search, seeding) import them from here, so settings imports none of those.
TARGET_PER_PROCESS = 25_000  # ops/s offered by each YCSB process
RUN_THREADS = 10
LOAD_THREADS = 30
READ_P99_SLA_MS = 3.0
SEARCHES = ("linear", "bounded")  # search.next_step
SEEDINGS = ("copy", "load")  # seeding.choose

FLAG_PREFIX = "--mongodb_stress_"
# Fields whose PKB flag is not FLAG_PREFIX + the field's name.
FLAG_NAMES = {
    "target_ops": "target_ops_per_client",
    "sla_ms": "read_p99_sla_ms",
    "records": "records_per_instance",
    "memory_gb": "server_memory_gb",
    "vcpus": "server_vcpus",
    "disk_gb": "disk_free_gb",
    "load_batch": "load_batch_size",
    "load_timeout": "load_timeout_seconds",
    "step_grace": "step_grace_seconds",
    "hold": "hold_memory",
    "hold_gb": "hold_memory_gb",
    "stress_ng_per_numa": "stress_ng_per_numa_node",
    "addresses": "server_addresses",
    "seeding": "data_seeding",
}
NUMACTL_CPU = ("none", "node", "cpus")
NUMACTL_MEMORY = ("none", "bind", "interleave")
MAX_PORT = 65535


def pkb_flag(name: str) -> str:
    """The PKB flag of field `name`: 'records' -> '--mongodb_stress_records_per_instance'."""
    return FLAG_PREFIX + FLAG_NAMES.get(name, name)


class SettingsError(ValueError):
    """Settings a stress run cannot use: one line naming the option and the value."""


@dataclass(frozen=True)
class StressSettings:
    """What one stress run is asked to do (see each flag's help in mongodb_stress_benchmark).
    The defaults are the flags' defaults."""

    search: str = "bounded"  # SEARCHES
    target_ops: int = TARGET_PER_PROCESS  # ops/s offered by each YCSB process
    step_seconds: int = 180
    sla_ms: float = READ_P99_SLA_MS  # read p99 SLA of "Maximum Throughput for Latency SLA"
    min_instances: int = 1
    first_step: int | None = (
        None  # the bounded search's first step; None: search.first_bounded_step
    )
    max_instances: int | None = None  # None: what fits in memory and on disk
    records: int | None = None  # per instance; None: sized from the server
    cache_gb: float | None = None  # WiredTiger cache per instance; None: sized
    memory_gb: float | None = None  # server memory for sizing; None (or 0): read
    vcpus: int | None = None  # server vCPUs for sizing; None: read
    disk_gb: float | None = None  # free disk for sizing; None: read
    first_port: int = FIRST_PORT  # instance i listens on first_port + i
    run_threads: int = RUN_THREADS
    load_threads: int = LOAD_THREADS
    load_batch: int = 100
    load_timeout: int = 6 * 3600  # seconds loading the instances of one step may take
    step_grace: int = 120  # seconds YCSB processes get beyond step_seconds
    hold: bool = True  # stress-ng holds the memory the instances are not meant to have
    hold_gb: float | None = None  # a fixed hold instead of the computed one (testing)
    stress_ng_workers: int | None = None  # None: min(vCPUs, 8)
    stress_ng_per_numa: bool = False
    numactl_cpu: str = "none"  # NUMACTL_CPU
    numactl_memory: str = "none"  # NUMACTL_MEMORY
    addresses: tuple[str, ...] = ()  # server addresses the clients use; (): the internal IP
    bind_ip: str | None = None  # None: the server addresses and 127.0.0.1
    histograms: bool = True
    drop_caches: bool = True
    host_settings: bool = True
    tls: bool = False
    seeding: str = "copy"  # SEEDINGS
    source_loaders: int | None = None  # YCSB load processes of the copy source; None: clients
    step_stop: str = "steady"  # steady.STOPS
    steady_min_seconds: float = steady.MIN_SECONDS
    steady_tolerance: float = steady.TOLERANCE
    status_interval_s: int = STATUS_INTERVAL_S

    def __post_init__(self):
        object.__setattr__(self, "addresses", tuple(self.addresses))  # a flag gives a list

    # -- validation ----------------------------------------------------------------

    def validate(self, name: Callable[[str], str] = pkb_flag) -> StressSettings:
        """Self, when a run can use every option; else a SettingsError (a ValueError) in one
        line naming the option by `name` (default: its PKB flag) and the value. Touches no
        VM: what needs the server (what fits, its NUMA nodes) is checked by Prepare."""

        def bad(key, why):
            raise SettingsError(f"{name(key)}: {why}, not {getattr(self, key)!r}")

        for key, choices in (
            ("search", SEARCHES),
            ("numactl_cpu", NUMACTL_CPU),
            ("numactl_memory", NUMACTL_MEMORY),
            ("seeding", SEEDINGS),
            ("step_stop", steady.STOPS),
        ):
            if getattr(self, key) not in choices:
                bad(key, f"must be one of {', '.join(choices)}")
        for key in _WHOLE:
            value = getattr(self, key)
            if (value is not None or key not in _OPTIONAL) and not (_whole(value) and value >= 1):
                bad(key, "must be a whole number >= 1")
        for key in ("sla_ms", "memory_gb", "disk_gb", "hold_gb", "steady_min_seconds"):
            value = getattr(self, key)
            if value is not None and not (_number(value) and 0 <= value < math.inf):
                bad(key, "must be a number >= 0")
        if self.cache_gb is not None and not (
            _number(self.cache_gb) and WIREDTIGER_MIN_CACHE_GB <= self.cache_gb < math.inf
        ):
            bad("cache_gb", f"must be a number of GB >= {WIREDTIGER_MIN_CACHE_GB}")
        if not (_number(self.steady_tolerance) and 0.001 <= self.steady_tolerance <= 0.5):
            bad("steady_tolerance", "must be a number in [0.001, 0.5]")
        for key in _BOOLS:
            if not isinstance(getattr(self, key), bool):
                bad(key, "must be true or false")
        if not all(isinstance(a, str) and a for a in self.addresses):
            bad("addresses", "must be a list of addresses, interface names or 'all'")
        if self.max_instances is not None and self.max_instances < self.min_instances:
            raise SettingsError(
                f"{name('max_instances')} {self.max_instances} is below"
                f" {name('min_instances')} {self.min_instances}"
            )
        last = self.first_port + (self.max_instances or 1) - 1
        if last > MAX_PORT:
            raise SettingsError(
                f"{name('first_port')} {self.first_port}: instance ports would exceed"
                f" {MAX_PORT} (the last would be {last})"
            )
        if self.first_step is not None and self.search != "bounded":
            raise SettingsError(
                f"{name('first_step')} {self.first_step}: only the bounded search has a first"
                f" step, not {name('search')} {self.search}"
            )
        if self.stress_ng_per_numa and not self.hold:
            raise SettingsError(f"{name('stress_ng_per_numa')} needs {name('hold')}")
        return self

    # -- what runs -----------------------------------------------------------------

    @property
    def uses_numactl(self) -> bool:
        return self.numactl_cpu != "none" or self.numactl_memory != "none"

    @property
    def steady_rule(self) -> steady.SteadyRule:
        """The steady-state stop's rule (its window is steady.WINDOW)."""
        return steady.SteadyRule(
            min_seconds=self.steady_min_seconds, tolerance=self.steady_tolerance
        )


_WHOLE = (
    "target_ops", "step_seconds", "min_instances", "first_step", "max_instances", "records", "vcpus",
    "first_port", "run_threads", "load_threads", "load_batch", "load_timeout", "step_grace",
    "stress_ng_workers", "source_loaders", "status_interval_s",
)  # fmt: skip
_BOOLS = ("hold", "stress_ng_per_numa", "histograms", "drop_caches", "host_settings", "tls")
_OPTIONAL = {f.name for f in dataclasses.fields(StressSettings) if f.default is None}


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
