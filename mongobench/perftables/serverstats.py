"""serverStatus counters, taken before and after a timed phase.

Each counter is a path into the serverStatus document. A server that lacks a
section (stand-ins, some Atlas tiers, mongos) yields None for it: callers
report the figure as missing, never as zero.
"""

from __future__ import annotations

from dataclasses import dataclass

from mongobench.remote.provenance import STANDIN_ENGINE


@dataclass(frozen=True)
class Counter:
    key: str
    paths: tuple[tuple[str, ...], ...]  # first path present wins
    unit: str  # unit of the counter itself


COUNTERS = (
    Counter("cache_pages_read", (("wiredTiger", "cache", "pages read into cache"),), "pages"),
    Counter("cache_bytes_written", (("wiredTiger", "block-manager", "bytes written"),), "bytes"),
    Counter("wal_bytes", (("wiredTiger", "log", "total size of compressed records"),), "bytes"),
    Counter("write_conflicts", (("metrics", "operation", "writeConflicts"),), "count"),
    Counter(
        "network_bytes_out",
        (("network", "physicalBytesOut"), ("network", "bytesOut")),
        "bytes",
    ),
    Counter("op_insert", (("opcounters", "insert"),), "count"),
    Counter("op_query", (("opcounters", "query"),), "count"),
    Counter("op_update", (("opcounters", "update"),), "count"),
    Counter("op_delete", (("opcounters", "delete"),), "count"),
    Counter("op_getmore", (("opcounters", "getmore"),), "count"),
    Counter("op_command", (("opcounters", "command"),), "count"),
    # opLatencies: total time (µs, as mongod reports it) and count per kind of operation.
    *(
        Counter(f"oplat_{kind}_{field}", (("opLatencies", kind, field),), unit)
        for kind in ("reads", "writes", "commands")
        for field, unit in (("latency", "us"), ("ops", "count"))
    ),
)

OP_LATENCY_KINDS = ("reads", "writes", "commands")


def _lookup(doc: dict, path: tuple[str, ...]):
    cur = doc
    for part in path:
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    if isinstance(cur, bool) or not isinstance(cur, (int, float)):
        # Int64 is an int subclass; anything else is not a counter.
        return None
    return cur


def extract(status: dict | None) -> dict[str, float | None]:
    """The counters this project uses, None where the server lacks them."""
    out = {}
    for c in COUNTERS:
        value = None
        if status:
            for path in c.paths:
                value = _lookup(status, path)
                if value is not None:
                    break
        out[c.key] = value
    return out


def deltas(before: dict, after: dict) -> dict[str, float | None]:
    """after - before per counter; None when either side is missing.

    A negative delta means the server restarted between the two readings: the
    figure is unknowable, so it is None too.
    """
    out = {}
    for key in before.keys() | after.keys():
        b, a = before.get(key), after.get(key)
        out[key] = None if a is None or b is None or a < b else a - b
    return out


def op_latency_ms(delta: dict, kind: str) -> float | None:
    """Mean server-side latency (ms) of `kind` over a phase, from opLatencies deltas:
    latency ÷ ops. None when the server has no opLatencies or ran no such operation."""
    latency_us, ops = delta.get(f"oplat_{kind}_latency"), delta.get(f"oplat_{kind}_ops")
    if latency_us is None or not ops:
        return None
    return latency_us / ops / 1000.0


def server_info(status: dict | None) -> dict:
    """Version, storage engine and process kind for sample metadata."""
    status = status or {}
    engine = (status.get("storageEngine") or {}).get("name")
    if not engine:
        # The stand-in says process "java" and has no storageEngine section.
        engine = STANDIN_ENGINE if status.get("process") == "java" else "unknown"
    info = {
        "server_version": status.get("version", "unknown"),
        "server_process": status.get("process", "unknown"),
        "storage_engine": engine,
    }
    # 8.0+: whether TCMalloc runs with per-CPU caches (off when glibc registers rseq and
    # mongod lacks GLIBC_TUNABLES=glibc.pthread.rseq=0); absent on older servers.
    per_cpu = (status.get("tcmalloc") or {}).get("usingPerCPUCaches")
    if isinstance(per_cpu, bool):
        info["tcmalloc_per_cpu_caches"] = per_cpu
    return info
