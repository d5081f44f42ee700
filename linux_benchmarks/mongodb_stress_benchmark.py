"""MongoDB stress: maximum throughput as mongod instances and YCSB clients grow.

Re-creates Intel's mongodb_stress benchmark with its weaknesses fixed. Step n runs mongod
instances 0..n-1 on the server VM (port first_port+i, own data directory, log and config
valid for the MongoDB version in use) and n YCSB processes spread round-robin over the
client VMs, each on its own instance with its own key range, output and histogram files,
offering --mongodb_stress_target_ops_per_client ops/s (90 % read / 10 % update, zipfian,
1 KB records) for --mongodb_stress_step_seconds. stress-ng holds, locked, the memory the n
instances are not meant to have, so the data does not fit in cache.

Faster than the anchor: each instance is loaded once and reused by later steps (the anchor
reloaded every instance at every step), and the default "bounded" search skips only steps
that cannot change a KPI (mongobench.stress.search.next_step); "linear" walks 1, 2, 3, ...
until the throughput fell at two successive steps, as seed 003 states. KPIs: `Maximum
Throughput` and `Maximum Throughput for Latency SLA` (best step whose read p99 <= the SLA;
0 with a reason when none), plus per-step samples. A failed YCSB process, a missing p99 or a dead mongod
ends the search with a clear error (a `Step Failed` sample; the run ends FAILED after the
steps already measured are published).

With --mongodb_stress_tls every instance accepts TLS connections only (requireTLS) with a
server certificate from a CA made for the run on the PKB host (mongobench.remote.tlscerts: the
certificate names every server address the clients use); its PEM reaches the server VM as a
0600 file, the CA certificate the client VMs, and YCSB trusts exactly that CA.

Cleanup stops every mongod, YCSB and stress-ng process the benchmark started, by PID,
removes its directories and restores the host settings it changed.

Each step also records the server's CPU (and iowait), the busiest client VM's CPU and a
bottleneck line (the resource closest to its limit, measure.bottleneck as for perftables), for
seed 003's Tuning Notes; Maximum Throughput carries the note when its step's server CPU was
not > 90 %.

The arithmetic (sizing, plans, placement, the search loop, results, KPIs, usage, sample
metadata) is mongobench.stress; mongobench_pkb.stress carries it out on the VMs;
this module holds the flags and the stages.
"""

import logging
import time
from typing import Any

from absl import flags
from perfkitbenchmarker import benchmark_spec as bm_spec
from perfkitbenchmarker import configs, errors, sample

from mongobench.core import interrupt
from mongobench.deploy import mongod
from mongobench.stress import report as stress_report
from mongobench.stress import search, steady
from mongobench.stress import settings as stress_settings
from mongobench.stress.settings import StressSettings
from mongobench_pkb import engine as mongobench_engine
from mongobench_pkb import mongod as mongobench_mongod
from mongobench_pkb import stages
from mongobench_pkb import stress as mongobench_stress

DEFAULTS = StressSettings()  # each flag's default is the engine's
BENCHMARK_NAME = "mongodb_stress"
BENCHMARK_CONFIG = """
mongodb_stress:
  description: >
    Adds mongod instances and YCSB clients until throughput peaks; reports the maximum
    throughput and the maximum throughput within a read p99 latency SLA.
  vm_groups:
    servers:
      vm_spec: *default_dual_core
      disk_spec: *default_500_gb
      vm_count: 1
    clients:
      vm_spec: *default_dual_core
      vm_count: 1
  flags:
    # MongoDB's production notes: XFS for WiredTiger data (PKB formats the data disk)
    disk_fs_type: xfs
"""

_TARGET_OPS = flags.DEFINE_integer(
    "mongodb_stress_target_ops_per_client",
    DEFAULTS.target_ops,
    "Offered load of each YCSB process (ops/s).",
    lower_bound=1,
)
_DURATION = flags.DEFINE_integer(
    "mongodb_stress_step_seconds",
    DEFAULTS.step_seconds,
    "Duration of each step (seconds).",
    lower_bound=1,
)
_SLA_MS = flags.DEFINE_float(
    "mongodb_stress_read_p99_sla_ms",
    DEFAULTS.sla_ms,
    'Read p99 latency SLA (ms) for "Maximum Throughput for Latency SLA".',
    lower_bound=0.0,
)
_MAX_INSTANCES = flags.DEFINE_integer(
    "mongodb_stress_max_instances",
    None,
    "Cap on the number of mongod instances (default: what fits in memory and on disk).",
    lower_bound=1,
)
_MIN_INSTANCES = flags.DEFINE_integer(
    "mongodb_stress_min_instances",
    DEFAULTS.min_instances,
    "Smallest number of instances the search may measure.",
    lower_bound=1,
)
_FIRST_STEP = flags.DEFINE_integer(
    "mongodb_stress_first_step",
    None,
    "The bounded search's first step (instances); it doubles from there while every step"
    " delivers its offered load. Default: a quarter of the most instances the server holds, at"
    " least 3 (fewest steps when the peak may lie anywhere). Set it just below a peak you"
    " expect (a server type measured before) to measure fewer steps.",
    lower_bound=1,
)
_SEARCH = flags.DEFINE_enum(
    "mongodb_stress_search",
    DEFAULTS.search,
    stress_settings.SEARCHES,
    "bounded: skip only steps that cannot change a KPI (n processes cannot exceed n x"
    " target); linear: seed 003's schedule 1, 2, 3, ... until the throughput fell at two"
    " successive steps.",
)
_RECORDS = flags.DEFINE_integer(
    "mongodb_stress_records_per_instance",
    None,
    "Records per instance (default: sized from the server's memory and vCPUs, 2M..20M).",
    lower_bound=1,
)
_CACHE_GB = flags.DEFINE_float(
    "mongodb_stress_cache_gb",
    None,
    "WiredTiger cache per instance in GB (default: max(1, 25 % of the instance's data)).",
    lower_bound=mongod.WIREDTIGER_MIN_CACHE_GB,
)
_MEMORY_GB = flags.DEFINE_float(
    "mongodb_stress_server_memory_gb",
    None,
    "Server memory used for sizing (GiB; default: read from the server).",
    lower_bound=0.0,
)
_VCPUS = flags.DEFINE_integer(
    "mongodb_stress_server_vcpus",
    None,
    "Server vCPUs used for sizing (default: read from the server).",
    lower_bound=1,
)
_DISK_GB = flags.DEFINE_float(
    "mongodb_stress_disk_free_gb",
    None,
    "Free disk for instance data (GiB; default: read from the server's data directory).",
    lower_bound=0.0,
)
_FIRST_PORT = flags.DEFINE_integer(
    "mongodb_stress_first_port",
    DEFAULTS.first_port,
    "Port of instance 0; instance i listens on first_port + i.",
    lower_bound=1,
    upper_bound=65535,
)
_RUN_THREADS = flags.DEFINE_integer(
    "mongodb_stress_run_threads",
    DEFAULTS.run_threads,
    "Threads of each YCSB run process.",
    lower_bound=1,
)
_LOAD_THREADS = flags.DEFINE_integer(
    "mongodb_stress_load_threads",
    DEFAULTS.load_threads,
    "Threads of each YCSB load process.",
    lower_bound=1,
)
_LOAD_BATCH = flags.DEFINE_integer(
    "mongodb_stress_load_batch_size",
    DEFAULTS.load_batch,
    "Records per insert call while loading (1: one insert per record).",
    lower_bound=1,
)
_LOAD_TIMEOUT = flags.DEFINE_integer(
    "mongodb_stress_load_timeout_seconds",
    DEFAULTS.load_timeout,
    "Longest time loading the instances of one step may take.",
    lower_bound=1,
)
_STEP_GRACE = flags.DEFINE_integer(
    "mongodb_stress_step_grace_seconds",
    DEFAULTS.step_grace,
    "Time YCSB processes get beyond the step duration (JVM start, connecting) before the"
    " step fails.",
    lower_bound=1,
)
_HOLD = flags.DEFINE_bool(
    "mongodb_stress_hold_memory",
    DEFAULTS.hold,
    "Hold the memory the instances of a step are not meant to have with stress-ng (locked),"
    " so the data does not fit in cache. Off only for test beds; samples say so.",
)
_HOLD_GB = flags.DEFINE_float(
    "mongodb_stress_hold_memory_gb",
    None,
    "Hold exactly this much (GiB) at every step instead of the computed amount (testing).",
    lower_bound=0.0,
)
_STRESS_NG_WORKERS = flags.DEFINE_integer(
    "mongodb_stress_stress_ng_workers",
    None,
    "stress-ng --vm workers (default: min(vCPUs, 8)).",
    lower_bound=1,
)
_STRESS_NG_NUMA = flags.DEFINE_bool(
    "mongodb_stress_stress_ng_per_numa_node",
    DEFAULTS.stress_ng_per_numa,
    "One stress-ng per NUMA node (numactl --membind/--cpunodebind), each holding its share.",
)
_NUMACTL_CPU = flags.DEFINE_enum(
    "mongodb_stress_numactl_cpu",
    DEFAULTS.numactl_cpu,
    stress_settings.NUMACTL_CPU,
    "Instance CPU placement: node (instances alternate over NUMA nodes) or cpus (each"
    " instance bound to its own contiguous share of the CPUs, shares sized for the maximum"
    " instance count).",
)
_NUMACTL_MEMORY = flags.DEFINE_enum(
    "mongodb_stress_numactl_memory",
    DEFAULTS.numactl_memory,
    stress_settings.NUMACTL_MEMORY,
    "Instance memory placement: bind (to the instance's node) or interleave (all nodes).",
)
_ADDRESSES = flags.DEFINE_list(
    "mongodb_stress_server_addresses",
    list(DEFAULTS.addresses),
    "Server addresses the clients use, one per NIC: IPv4 addresses, interface names of the"
    " server (eth1: its IPv4 address), or 'all' (every internal IP PKB knows for the server"
    " VM). Instance i is reached on address i mod count (default: the internal IP).",
)
_BIND_IP = flags.DEFINE_string(
    "mongodb_stress_bind_ip",
    None,
    "mongod bindIp (default: the server addresses and 127.0.0.1).",
)
_HISTOGRAMS = flags.DEFINE_bool(
    "mongodb_stress_histograms",
    DEFAULTS.histograms,
    "Every YCSB process writes HdrHistogram logs and a step's p99 is computed exactly over"
    " all its processes (else: the largest per-process p99, an upper bound).",
)
_DROP_CACHES = flags.DEFINE_bool(
    "mongodb_stress_drop_caches",
    DEFAULTS.drop_caches,
    "Drop the server's page cache before each step's run phase.",
)
_HOST_SETTINGS = flags.DEFINE_bool(
    "mongodb_stress_host_settings",
    DEFAULTS.host_settings,
    "Apply the production-notes host settings on the server (THP per version, swappiness,"
    " zone_reclaim_mode, readahead); the previous values are restored at cleanup.",
)
_TLS = flags.DEFINE_bool(
    "mongodb_stress_tls",
    DEFAULTS.tls,
    "Instances accept TLS connections only (requireTLS), with a certificate from a CA made"
    " for this run on the PKB host (cryptography package); YCSB connects with tls=true and"
    " trusts that CA.",
)
_SEEDING = flags.DEFINE_enum(
    "mongodb_stress_data_seeding",
    DEFAULTS.seeding,
    stress_settings.SEEDINGS,
    "copy: YCSB loads instance 0, which is then shut down cleanly and its data files copied"
    " to the other instances (cp --reflink=auto), each copy verified (record count, SHA-256"
    " of sampled records) before its step; loading is used instead where copying is not"
    " possible (instances' storage settings differ), and the metadata says why. load: YCSB"
    " loads every instance.",
)
_SOURCE_LOADERS = flags.DEFINE_integer(
    "mongodb_stress_source_loaders",
    None,
    "YCSB load processes that load the copy source (instance 0) with"
    " --mongodb_stress_data_seeding=copy, each its own slice of the key range, spread over"
    " the client VMs (default: one per client VM). A server that absorbs parallel loaders"
    " loads it that much sooner; one whose disk is the limit takes as long.",
    lower_bound=1,
)
_STEP_STOP = flags.DEFINE_enum(
    "mongodb_stress_step_stop",
    DEFAULTS.step_stop,
    steady.STOPS,
    "steady: a step ends early once its throughput is steady (after"
    " --mongodb_stress_steady_min_seconds, its last 6 status intervals give the full"
    " step's throughput within --mongodb_stress_steady_tolerance); its throughput counts"
    " the seconds left to --mongodb_stress_step_seconds at their mean rate. full: every"
    " step runs --mongodb_stress_step_seconds (seed 003).",
)
_STEADY_MIN_SECONDS = flags.DEFINE_float(
    "mongodb_stress_steady_min_seconds",
    DEFAULTS.steady_min_seconds,
    "Shortest measurement of a step with --mongodb_stress_step_stop=steady.",
    lower_bound=0,
)
_STEADY_TOLERANCE = flags.DEFINE_float(
    "mongodb_stress_steady_tolerance",
    DEFAULTS.steady_tolerance,
    "Largest relative error a steady stop may add to a step's throughput: the 95 %"
    " confidence interval of the window's mean rate plus its trend's continuation, times"
    " the share of the step left (--mongodb_stress_step_stop=steady).",
    lower_bound=0.001,
    upper_bound=0.5,
)
_CLIENT_VMS = flags.DEFINE_integer(
    "mongodb_stress_client_vms",
    None,
    "Number of YCSB client VMs (overrides the clients group's vm_count).",
    lower_bound=1,
)
_STATUS_INTERVAL = flags.DEFINE_integer(
    "mongodb_stress_status_interval_s",
    DEFAULTS.status_interval_s,
    "Seconds between YCSB's status lines (status.interval): the interval of each step's"
    " time series (`overall Throughput time series`, ...).",
    lower_bound=1,
)
FLAGS = flags.FLAGS


def GetConfig(user_config: dict[str, Any]) -> dict[str, Any]:
    config = configs.LoadConfig(BENCHMARK_CONFIG, user_config, BENCHMARK_NAME)
    if _CLIENT_VMS.value:
        config["vm_groups"]["clients"]["vm_count"] = _CLIENT_VMS.value
    return config


def CheckPrerequisites(benchmark_config) -> None:
    """Validates flags and groups before anything is provisioned."""
    groups = benchmark_config.vm_groups
    if set(groups) != {"servers", "clients"}:
        raise errors.Config.InvalidValue(
            f"mongodb_stress needs the VM groups servers and clients, got {sorted(groups)}"
        )
    if groups["servers"].vm_count != 1:
        raise errors.Config.InvalidValue("mongodb_stress runs on exactly one server VM")
    mongobench_mongod.CheckPrerequisites(benchmark_config)  # docs/platforms.md
    settings = _Settings()  # every run option, checked once
    if settings.uses_numactl and FLAGS.mongobench_mongod_server == "standin":
        raise errors.Config.InvalidValue("numactl placement applies to mongod, not the stand-in")
    mongobench_stress.CheckPrerequisites()


def _Settings() -> StressSettings:
    """The run options of this benchmark's flags as the engine's settings
    (mongobench.stress.settings.StressSettings), validated; its errors name the flags."""
    try:
        return StressSettings(
            search=_SEARCH.value,
            target_ops=_TARGET_OPS.value,
            step_seconds=_DURATION.value,
            sla_ms=_SLA_MS.value,
            min_instances=_MIN_INSTANCES.value,
            first_step=_FIRST_STEP.value,
            max_instances=_MAX_INSTANCES.value,
            records=_RECORDS.value,
            cache_gb=_CACHE_GB.value,
            memory_gb=_MEMORY_GB.value,
            vcpus=_VCPUS.value,
            disk_gb=_DISK_GB.value,
            first_port=_FIRST_PORT.value,
            run_threads=_RUN_THREADS.value,
            load_threads=_LOAD_THREADS.value,
            load_batch=_LOAD_BATCH.value,
            load_timeout=_LOAD_TIMEOUT.value,
            step_grace=_STEP_GRACE.value,
            hold=_HOLD.value,
            hold_gb=_HOLD_GB.value,
            stress_ng_workers=_STRESS_NG_WORKERS.value,
            stress_ng_per_numa=_STRESS_NG_NUMA.value,
            numactl_cpu=_NUMACTL_CPU.value,
            numactl_memory=_NUMACTL_MEMORY.value,
            addresses=tuple(_ADDRESSES.value),
            bind_ip=_BIND_IP.value,
            histograms=_HISTOGRAMS.value,
            drop_caches=_DROP_CACHES.value,
            host_settings=_HOST_SETTINGS.value,
            tls=_TLS.value,
            seeding=_SEEDING.value,
            source_loaders=_SOURCE_LOADERS.value,
            step_stop=_STEP_STOP.value,
            steady_min_seconds=_STEADY_MIN_SECONDS.value,
            steady_tolerance=_STEADY_TOLERANCE.value,
            status_interval_s=_STATUS_INTERVAL.value,
        ).validate()
    except stress_settings.SettingsError as e:
        raise errors.Config.InvalidValue(str(e)) from None


def _Vms(spec):
    return spec.vm_groups["servers"][0], list(spec.vm_groups["clients"])


# SIGTERM to PKB is handled like Ctrl-C: Cleanup runs (PKB alone would end at once).
@interrupt.sigterm_as_ctrl_c()
def Prepare(benchmark_spec: bm_spec.BenchmarkSpec) -> None:
    """Installs and ships what each VM needs, sizes the run, applies host settings."""
    benchmark_spec.always_call_cleanup = True  # stop what we started even when a stage fails
    server_vm, clients = _Vms(benchmark_spec)
    benchmark_spec.mongodb_stress = mongobench_stress.Prepare(server_vm, clients, _Settings())


def _Log(message, problem=False):
    (logging.error if problem else logging.info)("mongodb_stress: %s", message)


@interrupt.sigterm_as_ctrl_c()
def Run(benchmark_spec: bm_spec.BenchmarkSpec) -> list[sample.Sample]:
    """Searches for the peak; samples of every step and the two KPIs."""
    st: mongobench_stress.State = benchmark_spec.mongodb_stress
    server_vm, clients = _Vms(benchmark_spec)
    settings = st.settings
    t0 = time.time()
    try:
        found = search.run_search(
            lambda n: mongobench_stress.Step(server_vm, clients, st, n),
            st.sizing.max_instances,
            search=settings.search,
            min_instances=settings.min_instances,
            first_step=settings.first_step,
            target_per_process=settings.target_ops,
            sla_ms=settings.sla_ms,
            log=_Log,
        )
    finally:  # the memory hold is kept from step to step: released once the search is over
        mongobench_stress.ReleaseHold(server_vm, st)
    st.failure = found.failure[2] if found.failure else None
    samples = stress_report.search_samples(
        found,
        metadata=st.metadata,
        search_seconds=round(time.time() - t0, 1),
        records_loaded=st.sizing.records * len(st.ycsb_loaded),
        sla_ms=settings.sla_ms,
        mongodb_version=st.server.version,
        max_instances=st.sizing.max_instances,
    )
    return [mongobench_engine.ToSample(s) for s in samples]


def Cleanup(benchmark_spec: bm_spec.BenchmarkSpec) -> None:
    """Stops every process the benchmark started (by PID), removes its directories and
    restores the server's host settings, as far as Prepare got (every step is tried); then
    fails the run if a step failed or something could not be undone (stages.Cleanup: once)."""
    server_vm, clients = _Vms(benchmark_spec)
    st = getattr(benchmark_spec, "mongodb_stress", None)
    stages.Cleanup(
        benchmark_spec,
        BENCHMARK_NAME,
        lambda keep: mongobench_stress.Cleanup(server_vm, clients, keep),
        failure=f"mongodb_stress: a step failed: {st.failure}" if st and st.failure else None,
        incomplete=st is None,  # Prepare stopped half-way
    )
