"""What a stress run reports: the run's sample metadata and the samples of a search."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mongobench.core.samples import failure_sample, sample
from mongobench.core.units import GiB
from mongobench.remote import provenance
from mongobench.stress import usage
from mongobench.stress.search import (
    MAX_METRIC,
    STEP_THROUGHPUT_METRIC,
    Search,
    first_bounded_step,
    select_kpis,
    step_kpis,
)
from mongobench.stress.settings import StressSettings
from mongobench.stress.sizing import Sizing
from mongobench.ycsb import status

WORKLOAD = "90% read / 10% update, zipfian, 10 x 100 B fields"
FAILED_METRIC = "Step Failed"
ERROR_LIMIT = 2000  # characters of a failed step's error kept in its sample
# Per-step usage samples (step metadata key -> metric, in %), under perftables' names.
USAGE_METRICS = {
    "server_cpu_pct": "Server CPU Usage",
    "server_iowait_pct": "Server IO Wait",
    "client_cpu_pct": "Client CPU Usage",
}


def numactl_description(prefixes: Sequence[Sequence[str]]) -> str:
    """Each instance's numactl options as it is started: '0:--cpunodebind=0 --membind=0;1:...'
    (a prefix is ['numactl', options..., '--'])."""
    return ";".join(f"{i}:{' '.join(p[1:-1])}" for i, p in enumerate(prefixes))


def run_metadata(
    server_meta: Mapping,
    sizing: Sizing,
    facts: Mapping,
    hosts: Sequence[str],
    settings: StressSettings,
    *,
    client_vms: int,
    numactl_prefixes: Sequence[Sequence[str]],
    tls_meta: Mapping,
) -> dict:
    """The metadata every sample of a run carries: the server (`server_meta`), the sizing,
    the server facts sizing used (stress.sizing.server_sizing_inputs), the server addresses
    and the run's settings (flag values), and the provenance of the engine, of the YCSB
    client and of the server (its version and storage engine)."""
    s = settings
    if s.hold:
        memory_hold = "stress-ng per NUMA node" if s.stress_ng_per_numa else "stress-ng"
        if s.hold_gb is not None:
            memory_hold += f", fixed {s.hold_gb:g} GiB (--mongodb_stress_hold_memory_gb)"
    else:
        memory_hold = "skipped (--nomongodb_stress_hold_memory): data may fit in the page cache"
    numa_meta = {}
    if s.uses_numactl:
        numa_meta["numactl_instances"] = numactl_description(numactl_prefixes)
    return {
        **server_meta,
        "server_version": server_meta.get("mongodb_version") or "unknown",
        "storage_engine": provenance.storage_engine_of(server_meta.get("server_kind")),
        **provenance.engine(),
        **provenance.ycsb(),
        **sizing.metadata(),
        "search": s.search,
        **(
            {
                "search_first_step": first_bounded_step(
                    sizing.max_instances, s.min_instances, s.first_step
                )
            }
            if s.search == "bounded"
            else {}
        ),
        "target_ops_per_client": s.target_ops,
        "step_seconds": s.step_seconds,
        "run_threads": s.run_threads,
        "load_threads": s.load_threads,
        "load_batch_size": s.load_batch,
        "workload": WORKLOAD,
        "client_vms": client_vms,
        "server_memory_gib": round(facts["memory_bytes"] / GiB, 2),
        "server_vcpus": facts["vcpus"],
        "server_disk_free_gib": round(facts["disk_free_bytes"] / GiB, 2),
        "server_numa_nodes": facts["numa_nodes"],
        "server_numa_cpu_nodes": sum(1 for n in facts["numa"] if n.cpus),
        "sizing_inputs": ",".join(f"{k}:{v}" for k, v in facts["sources"].items()),
        "server_addresses": ",".join(hosts),
        "first_port": s.first_port,
        "numactl_cpu": s.numactl_cpu,
        "numactl_memory": s.numactl_memory,
        "histograms": s.histograms,
        "drop_caches": s.drop_caches,
        "memory_hold": memory_hold,
        "tls": s.tls,
        **numa_meta,
        **tls_meta,
    }


def search_samples(
    found: Search,
    *,
    metadata: Mapping,
    search_seconds: float,
    records_loaded: int,
    sla_ms: float,
    mongodb_version: str | None,
    max_instances: int,
) -> list[dict]:
    """The samples of a search (core.samples dicts), in this order: the failed step (with
    the run's `metadata`, its step number, instance count and error), each step's
    throughput and p99s and, where its step metadata (`found.infos`) has them, its server
    CPU, server iowait and busiest client's CPU (stress.usage), the records loaded, and,
    when the search ended without a failure, the two KPIs (stress.search.select_kpis) with
    their step's metadata (bottleneck included) and, on Maximum Throughput, seed 003's
    tuning note when that step's server CPU was not > 90 %. All but the failure carry
    `search_seconds`."""
    out = []
    if found.failure:
        step, instances, error = found.failure
        md = {**metadata, "step": step, "instances": instances}
        out.append(failure_sample(FAILED_METRIC, error, md, limit=ERROR_LIMIT))
    common = {**metadata, "search_seconds": search_seconds}
    by_step: dict[int, list] = {}
    for k in step_kpis(found.history, common):
        by_step.setdefault(k.metadata["step"], []).append(k)
    for step, kpis in by_step.items():
        md = {**kpis[0].metadata, **found.infos[step - 1]}
        out.extend(sample(k.metric, k.value, k.unit, md) for k in kpis)
        for key, metric in USAGE_METRICS.items():
            if md.get(key) is not None:
                out.append(sample(metric, md[key], "%", md))
        # the step's throughput and latencies over time (YCSB's status lines)
        ser = getattr(found.history[step - 1], "series", None)  # None: a result pickled before
        out.extend(status.samples(ser, md, STEP_THROUGHPUT_METRIC))
    out.append(sample("Records Loaded", records_loaded, "records", common))
    if found.history and not found.failure:
        kpis = select_kpis(
            found.history,
            sla_ms=sla_ms,
            mongodb_version=mongodb_version,
            max_instances=max_instances,
            metadata=common,
        )
        for k in kpis:
            md = dict(k.metadata)
            if "step" in md:  # the measured step's usage and bottleneck
                md.update(found.infos[md["step"] - 1])
            if k.metric == MAX_METRIC and (note := usage.tuning_note(md)):
                md["tuning_note"] = note
            out.append(sample(k.metric, k.value, k.unit, md))
    return out
