"""serverStatus counters, taken before and after a timed phase.

Each counter is a path into the serverStatus document. A server that lacks a
section (stand-ins, some Atlas tiers, mongos) yields None for it: callers
report the figure as missing, never as zero.
"""

from __future__ import annotations

import threading
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


# -------------------------------------------------------------- saturation signals
# Point-in-time figures of serverStatus that say whether the server held the clients up:
# read during the timed phase (SignalSampler), their highest values judged by
# measure.bottleneck. Each is None on a server that lacks its section.


def _pct(part, whole) -> float | None:
    if part is None or not whole:
        return None
    return 100.0 * part / whole


def signals(status: dict | None) -> dict[str, float | None]:
    """One reading: WiredTiger cache fill and dirty share (% of the configured cache),
    read and write tickets in use (%: `queues.execution` on 7.0+, else
    `wiredTiger.concurrentTransactions`), the global lock's queue, and the counter of
    pages evicted by application threads."""
    status = status or {}
    cache = ("wiredTiger", "cache")
    size = _lookup(status, (*cache, "maximum bytes configured"))
    out = {
        "cache_fill_pct": _pct(_lookup(status, (*cache, "bytes currently in the cache")), size),
        "cache_dirty_pct": _pct(
            _lookup(status, (*cache, "tracked dirty bytes in the cache")), size
        ),
        "app_evicted": _lookup(status, (*cache, "pages evicted by application threads")),
        "queue": _lookup(status, ("globalLock", "currentQueue", "total")),
    }
    for kind in ("read", "write"):
        pct = None
        for root in (("queues", "execution"), ("wiredTiger", "concurrentTransactions")):
            used = _lookup(status, (*root, kind, "out"))
            total = _lookup(status, (*root, kind, "totalTickets"))
            if used is not None and total:
                pct = _pct(used, total)
                break
        out[f"{kind}_tickets_pct"] = pct
    return out


def repl_lag_s(rs_status: dict | None) -> float | None:
    """The largest lag (s) of a secondary behind the primary in replSetGetStatus; None
    without a primary or secondaries."""
    members = (rs_status or {}).get("members") or []
    primary = next((m for m in members if m.get("stateStr") == "PRIMARY"), None)
    secondaries = [m for m in members if m.get("stateStr") == "SECONDARY"]
    if primary is None or not secondaries or primary.get("optimeDate") is None:
        return None
    lags = [
        (primary["optimeDate"] - m["optimeDate"]).total_seconds()
        for m in secondaries
        if m.get("optimeDate") is not None
    ]
    return max(0.0, max(lags)) if lags else None


class SignalSampler:
    """Reads serverStatus (and replSetGetStatus on a replica set) every `interval`
    seconds of a timed phase through `client` (pymongo's, thread-safe); `stop()` returns
    the highest of each signal, the application-thread evictions over the phase, and the
    number of readings."""

    def __init__(self, client, interval: float = 1.0, replica_set: bool = False):
        self.client, self.interval, self.replica_set = client, interval, replica_set
        self.readings: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="signals")

    def _read(self) -> None:
        try:
            got = signals(self.client.admin.command("serverStatus"))
        except Exception:  # noqa: BLE001 - no rights or a lost server: no signal, not a failure
            return
        if self.replica_set:
            try:
                got["repl_lag_s"] = repl_lag_s(self.client.admin.command("replSetGetStatus"))
            except Exception:  # noqa: BLE001 - as above
                got["repl_lag_s"] = None
        self.readings.append(got)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._read()

    def start(self) -> SignalSampler:
        self._read()
        self._thread.start()
        return self

    def stop(self) -> dict[str, float | None]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._read()
        return summarize_signals(self.readings)


def summarize_signals(readings: list[dict]) -> dict[str, float | None]:
    """The highest value of each signal over `readings`; app_evictions: the counter's
    growth from the first reading to the last."""
    out: dict[str, float | None] = {"readings": len(readings)}
    keys = {k for r in readings for k in r} - {"app_evicted"}
    for k in sorted(keys):
        vals = [r[k] for r in readings if r.get(k) is not None]
        out[k] = max(vals) if vals else None
    ev = [r["app_evicted"] for r in readings if r.get("app_evicted") is not None]
    out["app_evictions"] = ev[-1] - ev[0] if len(ev) >= 2 and ev[-1] >= ev[0] else None
    return out
