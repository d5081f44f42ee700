"""Atlas process and disk measurements over each variant's window: the seed's Resource Usage.

Seed 000 reads, per test, the Admin API measurements of the cluster's processes:
SYSTEM_NORMALIZED_CPU_USER + _KERNEL (CPU Usage), SYSTEM_NORMALIZED_CPU_IOWAIT, the data
disk's DISK_PARTITION_IOPS_TOTAL and DISK_PARTITION_THROUGHPUT_WRITE/_READ (bytes/s, shown
as MB/s of 1,048,576 bytes) and OP_EXECUTION_TIME_WRITES (ms), each the mean of the
non-null data points. Here the run's whole span is fetched once per process (a few calls,
not a few per variant: the measurement endpoints are rate limited) and cut into each
variant's window: the data points whose interval overlaps it. A variant shorter than the
granularity gets the interval(s) it overlaps, which also hold whatever ran next to it.
"""

from __future__ import annotations

import logging
import math
import time
import urllib.parse
from datetime import datetime, timezone

from mongobench.core.units import MiB
from mongobench.deploy.atlas.api import AtlasClient, AtlasError

log = logging.getLogger("mongobench.atlas")

CPU_USER = "SYSTEM_NORMALIZED_CPU_USER"
CPU_KERNEL = "SYSTEM_NORMALIZED_CPU_KERNEL"
CPU_IOWAIT = "SYSTEM_NORMALIZED_CPU_IOWAIT"
OP_TIME_WRITES = "OP_EXECUTION_TIME_WRITES"
DISK_IOPS = "DISK_PARTITION_IOPS_TOTAL"
DISK_WRITE = "DISK_PARTITION_THROUGHPUT_WRITE"
DISK_READ = "DISK_PARTITION_THROUGHPUT_READ"
PROCESS_METRICS = (CPU_USER, CPU_KERNEL, CPU_IOWAIT, OP_TIME_WRITES)
DISK_METRICS = (DISK_IOPS, DISK_WRITE, DISK_READ)

# The units each metric is kept in, and the factor from every unit Atlas may answer with.
_UNITS = {
    "PERCENT": ("PERCENT", 1.0),
    "MILLISECONDS": ("MILLISECONDS", 1.0),
    "MICROSECONDS": ("MILLISECONDS", 1e-3),
    "SCALAR_PER_SECOND": ("SCALAR_PER_SECOND", 1.0),
    "BYTES_PER_SECOND": ("BYTES_PER_SECOND", 1.0),
    "KILOBYTES_PER_SECOND": ("BYTES_PER_SECOND", 1024.0),
    "MEGABYTES_PER_SECOND": ("BYTES_PER_SECOND", float(MiB)),
}
_EXPECTED = {
    CPU_USER: "PERCENT", CPU_KERNEL: "PERCENT", CPU_IOWAIT: "PERCENT",
    OP_TIME_WRITES: "MILLISECONDS", DISK_IOPS: "SCALAR_PER_SECOND",
    DISK_WRITE: "BYTES_PER_SECOND", DISK_READ: "BYTES_PER_SECOND",
}  # fmt: skip

GRANULARITIES = {"PT10S": 10, "PT1M": 60, "PT5M": 300}
# Processes that hold data (no mongos, config servers or arbiters).
DATA_PROCESS_TYPES = {
    "REPLICA_PRIMARY", "REPLICA_SECONDARY", "SHARD_PRIMARY", "SHARD_SECONDARY", "STANDALONE",
}  # fmt: skip


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _paged(client: AtlasClient, path: str) -> list[dict]:
    items, page = [], 1
    while True:
        doc = client.request("GET", f"{path}?pageNum={page}&itemsPerPage=500") or {}
        results = doc.get("results") or []
        items += results
        if not results or len(items) >= doc.get("totalCount", len(items)):
            return items
        page += 1


def _hosts(uri: str) -> set[str]:
    """host:port of each host of a mongodb:// string (lowercased)."""
    netloc = urllib.parse.urlsplit(uri).netloc.rpartition("@")[2] if uri else ""
    return {h.lower() if ":" in h else f"{h.lower()}:27017" for h in netloc.split(",") if h}


def cluster_processes(client: AtlasClient, cluster: dict) -> list[dict]:
    """The data-bearing processes of `cluster` (a cluster document) in the project: those its
    standard connection string names, or whose alias is <cluster name>-shard-..."""
    prefix = f"{cluster['name'].lower()}-shard-"
    hosts = _hosts((cluster.get("connectionStrings") or {}).get("standard", ""))
    out = []
    for p in _paged(client, f"/groups/{client.project_id}/processes"):
        if p.get("typeName") not in DATA_PROCESS_TYPES:
            continue
        port = p.get("port", 27017)
        names = {
            str(p.get("id", "")).lower(),
            f"{p.get('hostname', '')}:{port}".lower(),
            f"{p.get('userAlias', '')}:{port}".lower(),
        }
        alias = (p.get("userAlias") or p.get("hostname") or "").lower()
        if names & hosts or alias.startswith(prefix):
            out.append(p)
    return out


def _series(doc: dict | None, wanted) -> dict[str, list[tuple[float, float | None]]]:
    """name -> [(timestamp, value in the metric's kept unit)] of a measurements reply."""
    out = {}
    for m in (doc or {}).get("measurements") or []:
        name = m.get("name")
        if name not in wanted:
            continue
        unit, factor = _UNITS.get(m.get("units"), (None, 1.0))
        if unit != _EXPECTED[name]:
            raise ValueError(f"Atlas measurement {name} in unexpected units {m.get('units')!r}")
        out[name] = [
            (parse_iso(p["timestamp"]), None if p.get("value") is None else p["value"] * factor)
            for p in m.get("dataPoints") or []
        ]
    return out


def fetch(
    client: AtlasClient, process_id: str, start: float, end: float, granularity: str = "PT1M"
) -> dict:
    """The process' and its data partition's measurements over [start, end] (epoch seconds),
    widened to whole intervals: {"process", "partition", "series": {name: [(t, v)]}}."""
    step = GRANULARITIES[granularity]
    window = [
        ("granularity", granularity),
        ("start", iso(math.floor(start / step) * step)),
        ("end", iso(math.ceil(end / step) * step)),
    ]
    base = f"/groups/{client.project_id}/processes/{urllib.parse.quote(process_id, safe=':')}"

    def query(metrics):
        return urllib.parse.urlencode(window + [("m", m) for m in metrics])

    series = _series(
        client.request("GET", f"{base}/measurements?{query(PROCESS_METRICS)}"), PROCESS_METRICS
    )
    partitions = [d.get("partitionName") for d in _paged(client, f"{base}/disks")]
    partitions = [p for p in partitions if p]
    # Atlas names the data volume "data"; a host with another layout has one partition.
    partition = "data" if "data" in partitions else (partitions[0] if partitions else None)
    if partition:
        path = f"{base}/disks/{urllib.parse.quote(partition, safe='')}/measurements"
        series.update(_series(client.request("GET", f"{path}?{query(DISK_METRICS)}"), DISK_METRICS))
    return {"process": process_id, "partition": partition, "series": series}


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def summarize(series: dict, start: float, end: float, step: float) -> dict:
    """The seed's figures over [start, end]: means of the data points whose interval
    [t, t + step) overlaps it, nulls left out; `points` counts the intervals used."""

    def inside(name) -> dict[float, float | None]:
        return {t: v for t, v in series.get(name, []) if t < end and t + step > start}

    user, kernel = inside(CPU_USER), inside(CPU_KERNEL)
    cpu = [
        (user.get(t) or 0.0) + (kernel.get(t) or 0.0)
        for t in sorted(user.keys() | kernel.keys())
        if user.get(t) is not None or kernel.get(t) is not None
    ]
    write, read = _mean(inside(DISK_WRITE).values()), _mean(inside(DISK_READ).values())
    return {
        "cpu_pct": _mean(cpu),
        "iowait_pct": _mean(inside(CPU_IOWAIT).values()),
        "iops": _mean(inside(DISK_IOPS).values()),
        "write_mb_s": None if write is None else write / MiB,
        "read_mb_s": None if read is None else read / MiB,
        "op_exec_writes_ms": _mean(inside(OP_TIME_WRITES).values()),
        "points": len(cpu),
    }


def attach(
    run: dict,
    client: AtlasClient,
    cluster: dict,
    granularity: str = "PT1M",
    settle_s: float = 90.0,
    sleep=time.sleep,
    clock=time.time,
) -> None:
    """Adds `atlas_server` (the busiest process' figures, see summarize) and
    `atlas_server_hosts` to every successful variant of a perftables run, as
    ossampler.attach_server_os does with server VM readings.

    Waits until `settle_s` after the last variant ended first: Atlas publishes an
    interval's point after it ends. An API failure does not lose the run's results: each
    variant gets `atlas_error` and its figures stay missing (n/a), never zero.
    """
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {sorted(GRANULARITIES)}")
    done = [r for r in run.get("results", []) if r.get("status") == "ok" and "start" in r]
    if not done:
        return
    start = min(r["start"] for r in done)
    end = max(r["start"] + r["duration_s"] for r in done)
    wait = end + settle_s - clock()
    if wait > 0:
        log.info("atlas: waiting %.0fs for the last variant's measurements", wait)
        sleep(wait)
    try:
        processes = cluster_processes(client, cluster)
        if not processes:
            raise AtlasError(f"no data-bearing process of cluster {cluster['name']} listed")
        fetched = [fetch(client, p["id"], start, end, granularity) for p in processes]
    except (AtlasError, ValueError) as e:
        log.error("atlas: measurements not read: %s", e)
        for r in done:
            r["atlas_error"] = str(e)
        return
    step = GRANULARITIES[granularity]
    for r in done:
        per_host = {}
        for f in fetched:
            figs = summarize(f["series"], r["start"], r["start"] + r["duration_s"], step)
            if figs["points"]:
                per_host[f["process"]] = dict(figs, partition=f["partition"])
        if not per_host:
            r["atlas_error"] = "no Atlas data point in the variant's window"
            continue
        # The primary does the work: the busiest process, as with server VMs.
        busiest = max(per_host, key=lambda h: per_host[h]["cpu_pct"] or 0.0)
        r["atlas_server"] = dict(per_host[busiest], process=busiest, granularity=granularity)
        r["atlas_server_hosts"] = per_host
