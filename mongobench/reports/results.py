"""Raw variant results -> derived figures -> PKB-shaped samples.

`COLUMNS` is the one registry of every figure: its sample metric name, unit,
and the seed's table header. Figures a server or host could not provide are
None here, absent from the samples, and listed in `missing_metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mongobench.core import latency as lat
from mongobench.core import repeats, samples
from mongobench.core.samples import failure_sample, sample
from mongobench.core.units import MiB
from mongobench.measure import bottleneck, serverstats
from mongobench.perftables import identity
from mongobench.remote import provenance


@dataclass(frozen=True)
class Column:
    metric: str
    unit: str
    header: str
    digits: int = 0


COLUMNS = {
    "time_s": Column("Time Taken", "sec", "Time Taken (s)", 1),
    "data_mb": Column("Data Loaded", "MB", "Data Loaded (MB)"),
    "docs_per_s": Column("Document Throughput", "docs/sec", "Speed (docs/s)"),
    "mb_per_s": Column("Data Throughput", "MB/sec", "Speed (MB/s)", 2),
    "ops_per_s": Column("Operation Throughput", "ops/sec", "Speed (ops/s)"),
    # Server-side, as the seed's (Atlas OP_EXECUTION_TIME_WRITES): opLatencies deltas.
    "avg_latency_ms": Column("Average Op Latency", "ms", "Average Op Latency (ms)", 2),
    # Client-side: includes the network, the write concern's wait and retries/fallbacks.
    "client_avg_latency_ms": Column(
        "Client Average Op Latency", "ms", "Client Average Op Latency (ms)", 2
    ),
    "server_reads_latency_ms": Column("Server Read Latency", "ms", "Server Read Latency (ms)", 2),
    "server_writes_latency_ms": Column(
        "Server Write Latency", "ms", "Server Write Latency (ms)", 2
    ),
    "server_commands_latency_ms": Column(
        "Server Command Latency", "ms", "Server Command Latency (ms)", 2
    ),
    "errors": Column("Operation Errors", "count", "Errors"),
    "cpu_pct": Column("Server CPU Usage", "%", "CPU Usage (%)"),
    "iowait_pct": Column("Server IO Wait", "%", "Time waiting for I/O (%)"),
    "steal_pct": Column("Server CPU Steal", "%", "CPU Steal (%)", 1),
    "os_iops": Column("Server Disk IOPS", "ops/sec", "O/S IOPS"),
    "os_write_mb_s": Column("Server Disk Write", "MB/sec", "O/S Write (MB/s)"),
    "os_read_mb_s": Column("Server Disk Read", "MB/sec", "O/S Read (MB/s)"),
    "cache_read_pages_s": Column("Read into Cache", "pages/sec", "Read into Cache (Pages/s)"),
    "cache_write_kb_s": Column("Write from Cache", "KB/sec", "Write from Cache (KB/s)"),
    "wal_kb_s": Column("Write to WAL", "KB/sec", "Write to WAL (KB/s)"),
    "write_conflicts": Column("Write Conflicts", "count", "writeConflicts"),
    "net_out_mb_s": Column("Network Out", "MB/sec", "Network Out (MB/s)", 2),
    "client_cpu_pct": Column("Client CPU Usage", "%", "Client CPU (%)"),
    "client_steal_pct": Column("Client CPU Steal", "%", "Client CPU Steal (%)", 1),
    "client_cpu_us_per_op": Column("Client CPU per Operation", "us", "Client CPU per op (us)"),
    "p99_latency_ms": Column("P99 Op Latency", "ms", "p99 Latency (ms)", 2),
    "insert_ops_per_s": Column("Insert Throughput", "ops/sec", "Inserts (ops/s)"),
    "find_ops_per_s": Column("Query Throughput", "ops/sec", "Queries (ops/s)"),
    "storage_mb": Column("Storage Size", "MB", "Storage Size (MB)", 2),
    "price_per_hour": Column("Price", "$/hour", "$ per hour", 2),
    "ops_per_dollar": Column("Operations per Dollar", "ops/$", "Ops per $"),
}

# Per-operation latency samples ("<op> <name>", ms): PKB's ycsb_stats scheme, as the sweep's
# and the stress search's YCSB figures ("insert AverageLatency", "find p99 latency").
LATENCY_STATS = (
    ("mean_ms", "AverageLatency"),
    ("p50_ms", "p50 latency"),
    ("p95_ms", "p95 latency"),
    ("p99_ms", "p99 latency"),
    ("p99.9_ms", "p99.9 latency"),
    ("max_ms", "MaxLatency"),
)

# Per-interval figures of a timed phase (the result's `series`, core.series) as PKB
# time-series samples: (series key, metric, unit). Latencies are over every operation type
# of the interval; an interval without an operation has none (left out of those series).
TIME_SERIES = (
    ("ops_per_s", "Operation Throughput time series", "ops/sec"),
    ("docs_per_s", "Document Throughput time series", "docs/sec"),
    ("errors", "Operation Errors time series", "count"),
    ("p50_ms", "p50 latency time series", "ms"),
    ("p95_ms", "p95 latency time series", "ms"),
    ("p99_ms", "p99 latency time series", "ms"),
    ("max_ms", "MaxLatency time series", "ms"),
)

# Figures a server or host may be unable to provide (reported in missing_metrics).
_SERVER_FIGURES = {
    "cpu_pct", "iowait_pct", "steal_pct", "os_iops", "os_write_mb_s", "os_read_mb_s", "cache_read_pages_s",
    "cache_write_kb_s", "wal_kb_s", "write_conflicts", "net_out_mb_s", "client_cpu_pct",
    "client_steal_pct", "avg_latency_ms",
}  # fmt: skip

# The seed's units: its pipelines divide KB (Speed) and bytes (cache, WAL) by the duration
# in milliseconds, so its "MB/s" is 1000 KB/s and its "KB/s" 1000 bytes/s.
SEED_MB_PER_S_KB = 1000.0  # KB (of 1024 bytes) per seed "MB", Speed (MB/s)
SEED_KB_BYTES = 1000.0  # bytes per seed "KB", Write from Cache / Write to WAL (KB/s)

# Client operation names the server counts as reads in opLatencies (mongod's classes);
# every other operation of a timed phase is a write (insert/update/delete/findAndModify).
_SERVER_READ_OPS = {"find", "read", "aggregate", "getmore", "count", "distinct"}

# Settings copied into every sample's metadata when the variant has them.
_SETTING_KEYS_MAX = 40


def figures(res: dict) -> dict[str, float | None]:
    """The table figures of one raw variant result."""
    d = max(res["duration_s"], 1e-9)
    server = serverstats.deltas(res.get("server_before") or {}, res.get("server_after") or {})
    # Server VM readings, or else the Atlas measurements of the variant's window.
    os_server = res.get("os_server") or res.get("atlas_server") or {}
    os_client = res.get("os_client") or {}
    hist = lat.LatencyRecorder.decode(res.get("latency") or {})
    main_op = _main_op(res)
    client_avg = p99 = None
    if main_op in hist.histograms:
        summary = lat.summarize(hist.histograms[main_op])
        client_avg, p99 = summary.get("mean_ms"), summary.get("p99_ms")

    def per_s(v, div=1.0):
        return None if v is None else v / div / d

    data_mb = res["bytes"] / MiB
    ops = res.get("ops") or {}
    storage = (res.get("finished") or {}).get("storage_bytes")
    price = res.get("settings", {}).get("price_per_hour")
    ops_per_s = sum(ops.values()) / d
    return {
        "time_s": d,
        "data_mb": data_mb,
        "docs_per_s": res["docs"] / d,
        "mb_per_s": res["bytes"] / 1024.0 / SEED_MB_PER_S_KB / d,
        "ops_per_s": ops_per_s,
        "avg_latency_ms": server_latency(res)[0],
        "client_avg_latency_ms": client_avg,
        **{
            f"server_{kind}_latency_ms": serverstats.op_latency_ms(server, kind)
            for kind in serverstats.OP_LATENCY_KINDS
        },
        "p99_latency_ms": p99,
        "errors": float(sum(res["errors"].values())),
        "cpu_pct": os_server.get("cpu_pct"),
        "iowait_pct": os_server.get("iowait_pct"),
        "steal_pct": os_server.get("steal_pct"),
        "os_iops": os_server.get("iops"),
        "os_write_mb_s": os_server.get("write_mb_s"),
        "os_read_mb_s": os_server.get("read_mb_s"),
        "cache_read_pages_s": per_s(server.get("cache_pages_read")),
        "cache_write_kb_s": per_s(server.get("cache_bytes_written"), SEED_KB_BYTES),
        "wal_kb_s": per_s(server.get("wal_bytes"), SEED_KB_BYTES),
        "write_conflicts": server.get("write_conflicts"),
        "net_out_mb_s": per_s(server.get("network_bytes_out"), MiB),
        "client_cpu_pct": os_client.get("cpu_pct"),
        "client_steal_pct": os_client.get("steal_pct"),
        "client_cpu_us_per_op": (
            res["client_process_cpu_s"] * 1e6 / sum(ops.values())
            if ops and res.get("client_process_cpu_s") is not None
            else None
        ),
        "insert_ops_per_s": ops["insert"] / d if "insert" in ops else None,
        "find_ops_per_s": ops["find"] / d if "find" in ops else None,
        "storage_mb": storage / MiB if storage else None,
        "price_per_hour": float(price) if price else None,
        "ops_per_dollar": ops_per_s * 3600 / float(price) if price else None,
    }


def _main_op(res: dict) -> str | None:
    """The operation type the Average Op Latency column describes."""
    ops = res.get("ops") or {}
    return max(ops, key=ops.get) if ops else None


def server_kind(op: str | None) -> str:
    """The opLatencies class (reads/writes) of a client operation name."""
    return "reads" if (op or "").lower() in _SERVER_READ_OPS else "writes"


def server_latency(res: dict) -> tuple[float | None, dict]:
    """(Average Op Latency in ms, its metadata): the mean server-side latency of the
    variant's main operation class from serverStatus.opLatencies deltas; on a server
    without them (no serverStatus rights), Atlas' OP_EXECUTION_TIME_WRITES for writes.
    Never the client's figure: None when the server gives neither."""
    kind = server_kind(_main_op(res))
    delta = serverstats.deltas(res.get("server_before") or {}, res.get("server_after") or {})
    value = serverstats.op_latency_ms(delta, kind)
    if value is not None:
        return value, {"latency_source": "server", "latency_kind": kind}
    atlas = (res.get("atlas_server") or {}).get("op_exec_writes_ms")
    if kind == "writes" and atlas is not None:
        return atlas, {"latency_source": "atlas OP_EXECUTION_TIME_WRITES", "latency_kind": kind}
    return None, {}


def latency_figures(res: dict, key: str = "latency") -> dict[str, dict[str, float]]:
    """Per-operation latency summaries: `latency` (an open loop's from the intended send
    times) or `service_latency` (an open loop's from the actual sends)."""
    hist = lat.LatencyRecorder.decode(res.get(key) or {})
    return {op: lat.summarize(h) for op, h in sorted(hist.histograms.items())}


def metadata(run: dict, res: dict) -> dict:
    info = res.get("server_info") or {}
    md = {
        "experiment": res["experiment"],
        "variant": res["label"],
        "variant_index": res.get("variant_index", -1),
        "scale": run.get("scale"),
        "scale_factor": run.get("scale_factor"),
        "server_version": run.get("server_version") or info.get("server_version") or "unknown",
        # serverStatus after the phase: "unknown" when it has none, the stand-in's says so
        "storage_engine": info.get("storage_engine") or "unknown",
        "topology": run.get("topology"),
        "threads": res.get("threads"),
    }
    if "tcmalloc_per_cpu_caches" in info:
        md["tcmalloc_per_cpu_caches"] = info["tcmalloc_per_cpu_caches"]
    md.update(server_identity(run))
    if md["storage_engine"] == "unknown" and md.get("server_backend"):
        md["storage_engine"] = f"{md['server_product']}/{md['server_backend']}"
    md.update(engine_metadata(run))
    if "overrides" in run:  # absent from results written before the engine recorded them
        md["overrides"] = overrides_text(run["overrides"])
    md.update(run.get("estimate") or {})  # what the run was estimated to cost, before it ran
    # The client that ran the timed phase: its path, loop, sources, processes and VMs.
    for key in ("client_path", "client_loop", "client_sources", "client_processes", "client_vms"):
        if res.get(key) is not None:
            md[key] = res[key]
    # A client VM that started after the common start ran part of its share alone.
    late = max((vm.get("late_s") or 0.0 for vm in res.get("client_per_vm") or ()), default=0.0)
    if late > 0:
        md["client_vm_late_s"] = round(late, 3)
    for k, v in list(res.get("settings", {}).items())[:_SETTING_KEYS_MAX]:
        md.setdefault(k, v if isinstance(v, (int, float, str, bool)) or v is None else str(v))
    for k, v in (res.get("settings") or {}).items():
        # what the scale made of a setting (Workload.ran_as), and a scaled label key's
        # full-scale value (perftables.experiments.NOMINAL)
        if k.startswith(("ran_as_", "nominal_")):
            md[k] = v
    for k, v in (res.get("prepared") or {}).items():
        md[k] = v
    for k, v in (res.get("counters") or {}).items():
        md[k] = v
    ol = res.get("open_loop")
    if ol:  # target_ops_per_s (in the settings) against what was achieved
        md["achieved_ops_per_s"] = round(ol["achieved_ops_per_s"], 3)
        md["achieved_of_target_pct"] = round(100.0 * ol["achieved_share"], 1)
    step = res.get("rate_step")
    if step:  # one point of a latency-versus-throughput curve (perftables.ratesteps)
        md["rate_step"], md["rate_steps"] = step["step"], step["steps"]
        md["rate_step_name"] = step.get("name") or "closed loop"
        if step.get("closed_loop_ops_per_s") is not None:
            md["closed_loop_ops_per_s"] = round(step["closed_loop_ops_per_s"], 3)
    if res.get("repeats"):  # one of several runs of the variant; combined by reports.repeats
        md["repeat"] = res["repeat"]
    if res.get("stopped_early"):
        md["stopped_early"] = True
    atlas = res.get("atlas_server") or {}
    if res.get("os_server"):
        md["server_metrics_source"] = "os sampler"
    elif atlas:
        md["server_metrics_source"] = f"atlas measurements ({atlas.get('granularity')})"
        md["atlas_process"] = atlas.get("process")
    if res.get("atlas_error"):
        md["atlas_measurements_error"] = res["atlas_error"]
    # Failed operations are never in the throughput, but the figures of such a
    # variant describe a troubled run: say so on every sample.
    audit = res.get("audit")
    if audit:  # the acknowledged writes checked after the timed phase (driver.base.audit)
        md["lost_writes"] = audit["lost_writes"]
        md["audit_expected"], md["audit_found"] = audit["expected"], audit["found"]
        if "sampled_ids" in audit:  # acknowledged inserts looked up by _id
            md["audit_sampled_ids"] = audit["sampled_ids"]
            md["audit_sampled_missing"] = audit["sampled_missing"]
    quiet = res.get("quiesce")
    if quiet:  # the wait before the variant for the previous one's work (perftables.quiesce)
        md["quiesce_s"], md["quiesce_by"] = quiet["s"], quiet["by"]
        md["quiesce_busy"] = quiet["busy"]
    md["had_errors"] = bool(sum((res.get("errors") or {}).values()))
    if res.get("fails_run"):  # figures kept, marked, and the run fails
        md["fails_run"] = res["fails_run"]
    return md


NO_OVERRIDES = "(none)"


def overrides_text(overrides: dict | None) -> str:
    """`threads=32,write_concern=1` (sorted), or "(none)": the run's setting overrides."""
    return ",".join(f"{k}={v}" for k, v in sorted((overrides or {}).items())) or NO_OVERRIDES


def engine_metadata(run: dict) -> dict:
    """The provenance of the engine that ran `run` (the client's, not this host's); None
    from a results file written before the engine recorded it."""
    prov = run.get("provenance") or {}
    return {k: prov.get(k) for k in provenance.ENGINE_KEYS}


def to_samples(run: dict, extra_metadata: dict | None = None) -> list[dict]:
    """Samples (metric, value, unit, metadata, timestamp) for every successful variant;
    the timestamp is the variant's start (epoch seconds), when its timed phase began."""
    out, series = [], []
    for res in run["results"]:
        if res.get("status") != "ok":
            continue
        md = metadata(run, res)
        stamp = res.get("start")
        md.update(extra_metadata or {})
        figs = figures(res)
        md["bottleneck"] = bottleneck_line(run, res, figs)
        if run.get("shared_host"):
            md["shared_host"] = True
        missing = sorted(k for k, v in figs.items() if v is None and k in _SERVER_FIGURES)
        md["missing_metrics"] = ",".join(missing)
        if res["errors"]:
            md["error_types"] = ";".join(f"{k}={v}" for k, v in sorted(res["errors"].items()))
        per_figure = _figure_metadata(res)
        for key, value in figs.items():
            if value is None:
                continue
            col = COLUMNS[key]
            fig_md = dict(md, **per_figure[key]) if key in per_figure else md
            out.append(_stamped(sample(col.metric, value, col.unit, fig_md), stamp))
        open_loop = bool(res.get("open_loop"))
        for key, kind in (("latency", ""), ("service_latency", "service ")):
            for op, summary in latency_figures(res, key).items():
                if not summary.get("count"):
                    continue
                op_md = dict(md, op=op, op_count=summary["count"], latency_source="client")
                if open_loop:  # docs/perftables.md: open loop
                    op_md["latency_from"] = "actual send" if kind else "intended send time"
                for stat, name in LATENCY_STATS:
                    metric = f"{op} {kind}{name}"
                    out.append(_stamped(sample(metric, summary[stat], "ms", op_md), stamp))
        series.extend(series_samples(res, md))
    # A variant run several times (--repeats) gives one sample per figure: the mean and its
    # 95 % interval; its time series stay one per run (metadata `repeat`).
    return repeats.combine(out) + series + na_samples(run, extra_metadata)


def series_samples(res: dict, md: dict) -> list[dict]:
    """The variant's per-interval figures (its `series`) as PKB time-series samples, each
    stamped with the variant's start; none when the run recorded none."""
    ser = res.get("series")
    if not ser or not ser.get("t_s"):
        return []
    start = float(ser["start"])
    stamps = [start + t for t in ser["t_s"]]
    ts_md = dict(md, interval_s=ser["interval_s"], intervals=len(stamps))
    out = []
    for key, metric, unit in TIME_SERIES:
        pairs = [(t, v) for t, v in zip(stamps, ser.get(key) or (), strict=False) if v is not None]
        if not pairs:
            continue
        times, values = zip(*pairs, strict=True)
        s = samples.time_series(metric, values, times, unit, ser["interval_s"], ts_md)
        out.append(_stamped(s, res.get("start")))
    return out


FAILED_METRIC = "Variant Failed"


def failure_samples(run: dict, extra_metadata: dict | None = None) -> list[dict]:
    """One `Variant Failed` sample (1 count, its error in `error`) per variant that fails
    the run (results.failed): PKB's results, the CLI's --samples and `report` show it."""
    out = []
    for r in failed(run):
        md = dict(extra_metadata or {}, **engine_metadata(run))
        md.update(
            experiment=r["experiment"],
            variant=r["label"],
            server_version=run.get("server_version"),
            scale=run.get("scale"),
            topology=run.get("topology"),
        )
        if r.get("variant_index") is not None:
            md["variant_index"] = r["variant_index"]
        for k, v in list((r.get("settings") or {}).items())[:_SETTING_KEYS_MAX]:
            md.setdefault(k, v if isinstance(v, (int, float, str, bool)) or v is None else str(v))
        out.append(failure_sample(FAILED_METRIC, r["error"], md))
    return out


def run_samples(run: dict, extra_metadata: dict | None = None) -> list[dict]:
    """Every sample of a run: the measured variants' (to_samples, n/a variants included) and
    one per failed variant (failure_samples)."""
    return to_samples(run, extra_metadata) + failure_samples(run, extra_metadata)


def bottleneck_line(run: dict, res: dict, figs: dict | None = None) -> str:
    """measure.bottleneck's judgement of one variant: the server VM's OS figures (or Atlas'),
    serverStatus's signals over the phase, the provisioned disk and network from the
    settings, and the client as the driver's own processes' CPU over the cores they may use
    (one per Python process, at most each VM's CPUs, over every client VM); never the
    client VM's host-wide CPU. `run["shared_host"]`: the client runs on the server's host."""
    figs = figs if figs is not None else figures(res)
    cpu_s, cores = res.get("client_process_cpu_s"), res.get("client_cores") or 1
    share = cpu_s / max(res["duration_s"], 1e-9) / cores if cpu_s is not None else None
    signals = dict(res.get("server_signals") or {}, clients=res.get("threads"))
    source = (
        "atlas measurements"
        if res.get("atlas_server") and not res.get("os_server")
        else ("os sampler")
    )
    settings = res.get("settings") or {}
    found = bottleneck.readings(
        figs, settings, client_share=share, client_cores=cores, server_source=source,
        signals=signals,
    )  # fmt: skip
    rate = bottleneck.positive(settings.get("target_ops_per_s"))
    return bottleneck.judge(
        found,
        shared_host=bool(run.get("shared_host")),
        offered_share=figs["ops_per_s"] / rate if rate else None,
        offered_rate=rate,
    )


def _figure_metadata(res: dict) -> dict[str, dict]:
    """Metadata of single figures: where each latency comes from."""
    client = {"latency_source": "client", "latency_op": _main_op(res)}
    out = {"client_avg_latency_ms": client, "p99_latency_ms": client}
    out["avg_latency_ms"] = server_latency(res)[1]
    for kind in serverstats.OP_LATENCY_KINDS:
        out[f"server_{kind}_latency_ms"] = {"latency_source": "server", "latency_kind": kind}
    return out


def _stamped(s: dict, timestamp: float | None) -> dict:
    if timestamp is not None:
        s["timestamp"] = float(timestamp)
    return s


def failed(run: dict) -> list[dict]:
    """Variants that fail the run: those that failed, and those whose figures exist but
    cannot be trusted (`fails_run`: the server was lost during it, or too many of its
    operations failed); each with its `error`."""
    return [
        r if r.get("status") != "ok" else {**r, "error": r["fails_run"]}
        for r in run["results"]
        if r.get("status") not in ("ok", NOT_APPLICABLE) or r.get("fails_run")
    ]


NOT_APPLICABLE = "n/a"
NA_METRIC = "Variant Not Applicable"


def not_applicable(run: dict) -> list[dict]:
    """Variants not run because the server lacks a feature they need (probe); not failures."""
    return [r for r in run["results"] if r.get("status") == NOT_APPLICABLE]


def na_samples(run: dict, extra_metadata: dict | None = None) -> list[dict]:
    """One `Variant Not Applicable` sample (1 count) per such variant, its reason in
    `na_reason`: samples say n/a instead of leaving the variant out."""
    out = []
    for res in not_applicable(run):
        md = {
            "experiment": res["experiment"],
            "variant": res["label"],
            "variant_index": res.get("variant_index", -1),
            "scale": run.get("scale"),
            "server_version": run.get("server_version") or "unknown",
            "topology": run.get("topology"),
            **server_identity(run),
            **engine_metadata(run),
            "na_reason": res.get("reason", "?"),
            **(extra_metadata or {}),
        }
        out.append(sample(NA_METRIC, 1, "count", md))
    return out


def server_identity(run: dict) -> dict:
    """The server's product, its own version, backend and claimed MongoDB (perftables.identity);
    "unknown" from a results file written before the probe existed."""
    ident = run.get("server") or {}
    return {k: ident.get(k) or ("unknown" if k != "server_backend" else None)
            for k in identity.KEYS}  # fmt: skip
