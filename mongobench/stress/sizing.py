"""Sizing of mongodb_stress (Intel's formulas): records and cache per instance, how many fit."""

from __future__ import annotations

import math
from dataclasses import dataclass

from mongobench.core.units import GiB, KiB
from mongobench.remote.probes import parse_df_avail
from mongobench.ycsb.properties import FIELD_COUNT, FIELD_LENGTH

RECORD_OVERHEAD_BYTES = 256  # the anchor's rough per-record overhead on top of the fields
OS_RESERVE_BYTES = 1_000_000 * KiB  # the anchor leaves 1,000,000 KB to the OS


# ----------------------------------------------------------------------------- sizing


def usable_memory_bytes(
    total_memory_bytes: int, *, os_reserve_bytes: int = OS_RESERVE_BYTES
) -> int:
    return max(0, int(total_memory_bytes) - int(os_reserve_bytes))


def estimated_instances(vcpus: int, *, ceiling: int = 16, scaling: float = 0.032) -> int:
    """The anchor's guess of how many instances a server of `vcpus` carries:
    ceil(ceiling x (1 - e^(-scaling x vCPU))), at least 1."""
    if vcpus < 1:
        raise ValueError(f"vcpus must be >= 1, got {vcpus}")
    return max(1, math.ceil(ceiling * (1.0 - math.exp(-scaling * vcpus))))


def records_per_instance(
    usable_memory: int,
    vcpus: int,
    *,
    record_bytes: int = FIELD_COUNT * FIELD_LENGTH + RECORD_OVERHEAD_BYTES,
    min_records: int = 2_000_000,
    max_records: int = 20_000_000,
    round_to: int = 1_000_000,
    ceiling: int = 16,
    scaling: float = 0.032,
) -> int:
    """Usable memory / estimated instances / bytes per record, rounded to `round_to` (half up)
    and clamped to [min_records, max_records]."""
    raw = (
        usable_memory / estimated_instances(vcpus, ceiling=ceiling, scaling=scaling) / record_bytes
    )
    rounded = math.floor(raw / round_to + 0.5) * round_to
    return int(min(max(rounded, min_records), max_records))


def database_bytes(
    records: int, *, field_count: int = FIELD_COUNT, field_length: int = FIELD_LENGTH
) -> int:
    return int(records) * field_count * field_length


def cache_size_gb(
    records: int,
    *,
    fraction: float = 0.25,
    min_gb: float = 1.0,
    field_count: int = FIELD_COUNT,
    field_length: int = FIELD_LENGTH,
) -> float:
    """WiredTiger cache (GiB, 2 decimals): `fraction` of the database, at least `min_gb`, so the
    data does not fit in cache and reads reach the disk."""
    db = database_bytes(records, field_count=field_count, field_length=field_length)
    return max(float(min_gb), round(fraction * db / GiB, 2))


def memory_per_instance_bytes(
    records: int,
    cache_gb: float,
    *,
    process_bytes: int = GiB,
    bytes_per_record: int = 256,
    file_cache_bytes: int | None = None,
) -> int:
    """cache + process overhead + per-record bookkeeping + file cache (default: = cache)."""
    cache = int(cache_gb * GiB)
    file_cache = cache if file_cache_bytes is None else int(file_cache_bytes)
    return cache + int(process_bytes) + int(records) * int(bytes_per_record) + file_cache


def max_instances(
    usable_memory: int,
    disk_free_bytes: int,
    memory_per_instance: int,
    disk_per_instance: int,
    cap: int | None = None,
) -> int:
    """Instances that fit in memory and on disk, optionally capped."""
    fits = min(usable_memory // memory_per_instance, disk_free_bytes // disk_per_instance)
    return int(min(fits, cap) if cap else fits)


@dataclass(frozen=True)
class Sizing:
    usable_memory: int
    records: int
    cache_gb: float
    memory_per_instance: int
    disk_per_instance: int
    fits_memory: int
    fits_disk: int
    max_instances: int

    def metadata(self) -> dict:
        return {
            "records_per_instance": self.records,
            "wiredtiger_cache_gb": self.cache_gb,
            "memory_per_instance_gib": round(self.memory_per_instance / GiB, 2),
            "disk_per_instance_gib": round(self.disk_per_instance / GiB, 2),
            "usable_memory_gib": round(self.usable_memory / GiB, 2),
            "instances_fit_memory": self.fits_memory,
            "instances_fit_disk": self.fits_disk,
            "max_instances": self.max_instances,
        }


@dataclass(frozen=True)
class SizingModel:
    """The constants of the anchor's sizing formulas (ANCHOR), any of which a caller of
    plan_sizing may change."""

    cache_fraction: float = 0.25
    min_cache_gb: float = 1.0
    os_reserve_bytes: int = OS_RESERVE_BYTES
    field_count: int = FIELD_COUNT
    field_length: int = FIELD_LENGTH
    record_overhead_bytes: int = RECORD_OVERHEAD_BYTES
    min_records: int = 2_000_000
    max_records: int = 20_000_000
    process_bytes: int = GiB
    bookkeeping_bytes_per_record: int = 256
    disk_bytes_per_record: int | None = None  # None: field_count x field_length
    ceiling: int = 16
    scaling: float = 0.032


ANCHOR = SizingModel()


def plan_sizing(
    total_memory_bytes: int,
    vcpus: int,
    disk_free_bytes: int,
    *,
    records: int | None = None,
    cache_gb: float | None = None,
    max_instances_cap: int | None = None,
    model: SizingModel = ANCHOR,
) -> Sizing:
    """Everything the anchor derives from the server's memory, vCPUs and free disk; any value
    can be forced (`records`, `cache_gb`) or a constant of its formulas changed (`model`).
    Raises ValueError when not even one instance fits."""
    m = model
    usable = usable_memory_bytes(total_memory_bytes, os_reserve_bytes=m.os_reserve_bytes)
    if records is None:
        records = records_per_instance(
            usable,
            vcpus,
            record_bytes=m.field_count * m.field_length + m.record_overhead_bytes,
            min_records=m.min_records,
            max_records=m.max_records,
            ceiling=m.ceiling,
            scaling=m.scaling,
        )
    if cache_gb is None:
        cache_gb = cache_size_gb(
            records,
            fraction=m.cache_fraction,
            min_gb=m.min_cache_gb,
            field_count=m.field_count,
            field_length=m.field_length,
        )
    mem = memory_per_instance_bytes(
        records,
        cache_gb,
        process_bytes=m.process_bytes,
        bytes_per_record=m.bookkeeping_bytes_per_record,
    )
    per_record = (
        m.field_count * m.field_length
        if m.disk_bytes_per_record is None
        else m.disk_bytes_per_record
    )
    disk = int(records) * per_record
    fits_mem, fits_disk = usable // mem, int(disk_free_bytes) // disk
    n = max_instances(usable, int(disk_free_bytes), mem, disk, max_instances_cap)
    if n < 1:
        raise ValueError(
            f"no mongod instance fits: each needs {mem / GiB:.1f} GiB of memory "
            f"({usable / GiB:.1f} GiB usable) and {disk / GiB:.1f} GiB of disk "
            f"({disk_free_bytes / GiB:.1f} GiB free) for {records} records; lower the record count"
        )
    return Sizing(
        usable, int(records), float(cache_gb), mem, disk, int(fits_mem), int(fits_disk), n
    )


# ----------------------------------------------------------------------------- stress-ng


def memory_to_hold_bytes(usable_memory: int, instances: int, memory_per_instance: int) -> int:
    """What stress-ng must hold so that n instances get only their share (never negative)."""
    return max(0, int(usable_memory) - int(instances) * int(memory_per_instance))


# ----------------------------------------------------------------------------- sizing inputs


def server_sizing_inputs(
    parsed: dict,
    *,
    vm_memory_bytes: int,
    vm_vcpus: int,
    memory_gb: float | None = None,
    vcpus: int | None = None,
    disk_gb: float | None = None,
) -> dict:
    """The server facts sizing uses: memory, vCPUs and free disk from the flags when given
    (memory/vCPUs: when non-zero), else from the VM and `parsed` (probes.parse_server_facts,
    whose NUMA/CPU/interface facts are kept); `sources` says which."""
    return {
        "memory_bytes": int(memory_gb * GiB) if memory_gb else vm_memory_bytes,
        "vcpus": vcpus or vm_vcpus,
        "disk_free_bytes": int(disk_gb * GiB)
        if disk_gb is not None
        else parse_df_avail(parsed["df"]),
        "numa_nodes": parsed["numa_nodes"],
        "numa": parsed["numa"],
        "cores": parsed["cores"],
        "cpus": parsed["cpus"],
        "interfaces": parsed["interfaces"],
        "sources": {
            "memory": "flag" if memory_gb else "server",
            "vcpus": "flag" if vcpus else "server",
            "disk_free": "flag" if disk_gb is not None else "server",
        },
    }
