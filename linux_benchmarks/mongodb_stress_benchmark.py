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
that cannot change a KPI (mongobench.stress.search.next_step). KPIs: `Maximum Throughput` and
`Maximum Throughput for Latency SLA` (best step whose read p99 <= the SLA; 0 with a reason
when none), plus per-step samples. A failed YCSB process, a missing p99 or a dead mongod
ends the search with a clear error (a `Step Failed` sample; the run ends FAILED after the
steps already measured are published).

With --mongodb_stress_tls every instance accepts TLS connections only (requireTLS) with a
server certificate from a CA made for the run on the PKB host (mongobench.remote.tlscerts: the
certificate names every server address the clients use); its PEM reaches the server VM as a
0600 file, the CA certificate the client VMs, and YCSB trusts exactly that CA.

Cleanup stops every mongod, YCSB and stress-ng process the benchmark started, by PID,
removes its directories and restores the host settings it changed.

The arithmetic (sizing, plans, placement, the search loop, results, KPIs, sample metadata)
is mongobench.stress; this module runs it on the VMs.
"""

import dataclasses
import logging
import os
import time

from absl import flags
from perfkitbenchmarker import background_tasks, configs, errors, sample, vm_util
from perfkitbenchmarker.linux_packages import (
    mongobench_host,
    mongobench_mongod,
    mongobench_stress_ng,
    mongobench_ycsb,
)

from mongobench.core import units
from mongobench.deploy import mongod
from mongobench.remote import probes
from mongobench.stress import placement, search, steps
from mongobench.stress import report as stress_report
from mongobench.stress import sizing as stress_sizing

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
"""

_TARGET_OPS = flags.DEFINE_integer(
    "mongodb_stress_target_ops_per_client",
    steps.TARGET_PER_PROCESS,
    "Offered load of each YCSB process (ops/s).",
    lower_bound=1,
)
_DURATION = flags.DEFINE_integer(
    "mongodb_stress_step_seconds",
    180,
    "Duration of each step (seconds).",
    lower_bound=1,
)
_SLA_MS = flags.DEFINE_float(
    "mongodb_stress_read_p99_sla_ms",
    search.READ_P99_SLA_MS,
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
    1,
    "Smallest number of instances the search may measure.",
    lower_bound=1,
)
_SEARCH = flags.DEFINE_enum(
    "mongodb_stress_search",
    "bounded",
    search.SEARCHES,
    "bounded: skip only steps that cannot change a KPI (n processes cannot exceed n x"
    " target); linear: the anchor's schedule 1, 2, 3, ... until the peak rule stops it.",
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
    mongod.FIRST_PORT,
    "Port of instance 0; instance i listens on first_port + i.",
    lower_bound=1,
    upper_bound=65535,
)
_RUN_THREADS = flags.DEFINE_integer(
    "mongodb_stress_run_threads",
    steps.RUN_THREADS,
    "Threads of each YCSB run process.",
    lower_bound=1,
)
_LOAD_THREADS = flags.DEFINE_integer(
    "mongodb_stress_load_threads",
    steps.LOAD_THREADS,
    "Threads of each YCSB load process.",
    lower_bound=1,
)
_LOAD_BATCH = flags.DEFINE_integer(
    "mongodb_stress_load_batch_size",
    100,
    "Records per insert call while loading (1: one insert per record).",
    lower_bound=1,
)
_LOAD_TIMEOUT = flags.DEFINE_integer(
    "mongodb_stress_load_timeout_seconds",
    6 * 3600,
    "Longest time loading the instances of one step may take.",
    lower_bound=1,
)
_STEP_GRACE = flags.DEFINE_integer(
    "mongodb_stress_step_grace_seconds",
    120,
    "Time YCSB processes get beyond the step duration (JVM start, connecting) before the"
    " step fails.",
    lower_bound=1,
)
_HOLD = flags.DEFINE_bool(
    "mongodb_stress_hold_memory",
    True,
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
    False,
    "One stress-ng per NUMA node (numactl --membind/--cpunodebind), each holding its share.",
)
_NUMACTL_CPU = flags.DEFINE_enum(
    "mongodb_stress_numactl_cpu",
    "none",
    ["none", "node", "cpus"],
    "Instance CPU placement: node (instances alternate over NUMA nodes) or cpus (each"
    " instance bound to its own contiguous share of the CPUs, shares sized for the maximum"
    " instance count).",
)
_NUMACTL_MEMORY = flags.DEFINE_enum(
    "mongodb_stress_numactl_memory",
    "none",
    ["none", "bind", "interleave"],
    "Instance memory placement: bind (to the instance's node) or interleave (all nodes).",
)
_ADDRESSES = flags.DEFINE_list(
    "mongodb_stress_server_addresses",
    [],
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
    True,
    "Every YCSB process writes HdrHistogram logs and a step's p99 is computed exactly over"
    " all its processes (else: the largest per-process p99, an upper bound).",
)
_DROP_CACHES = flags.DEFINE_bool(
    "mongodb_stress_drop_caches",
    True,
    "Drop the server's page cache before each step's run phase.",
)
_HOST_SETTINGS = flags.DEFINE_bool(
    "mongodb_stress_host_settings",
    True,
    "Apply the production-notes host settings on the server (THP per version, swappiness,"
    " zone_reclaim_mode, readahead); the previous values are restored at cleanup.",
)
_TLS = flags.DEFINE_bool(
    "mongodb_stress_tls",
    False,
    "Instances accept TLS connections only (requireTLS), with a certificate from a CA made"
    " for this run on the PKB host (cryptography package); YCSB connects with tls=true and"
    " trusts that CA.",
)
_CLIENT_VMS = flags.DEFINE_integer(
    "mongodb_stress_client_vms",
    None,
    "Number of YCSB client VMs (overrides the clients group's vm_count).",
    lower_bound=1,
)
FLAGS = flags.FLAGS


def GetConfig(user_config):
    config = configs.LoadConfig(BENCHMARK_CONFIG, user_config, BENCHMARK_NAME)
    if _CLIENT_VMS.value:
        config["vm_groups"]["clients"]["vm_count"] = _CLIENT_VMS.value
    return config


def CheckPrerequisites(benchmark_config):
    """Validates flags and groups before anything is provisioned."""
    groups = benchmark_config.vm_groups
    if set(groups) != {"servers", "clients"}:
        raise errors.Config.InvalidValue(
            f"mongodb_stress needs the VM groups servers and clients, got {sorted(groups)}"
        )
    if groups["servers"].vm_count != 1:
        raise errors.Config.InvalidValue("mongodb_stress runs on exactly one server VM")
    if _MAX_INSTANCES.value and _MAX_INSTANCES.value < _MIN_INSTANCES.value:
        raise errors.Config.InvalidValue(
            "--mongodb_stress_max_instances is below --mongodb_stress_min_instances"
        )
    if _FIRST_PORT.value + (_MAX_INSTANCES.value or 1) - 1 > 65535:
        raise errors.Config.InvalidValue("instance ports would exceed 65535")
    uses_numactl = _NUMACTL_CPU.value != "none" or _NUMACTL_MEMORY.value != "none"
    if uses_numactl and FLAGS.mongobench_mongod_server == "standin":
        raise errors.Config.InvalidValue("numactl placement applies to mongod, not the stand-in")
    if _STRESS_NG_NUMA.value and not _HOLD.value:
        raise errors.Config.InvalidValue(
            "--mongodb_stress_stress_ng_per_numa_node needs --mongodb_stress_hold_memory"
        )


# ----------------------------------------------------------------------------- state


@dataclasses.dataclass
class _State:
    server: mongobench_mongod.Server
    sizing: stress_sizing.Sizing
    facts: dict
    hosts: tuple
    bind_ip: str
    numactl: list  # numactl prefix of each instance 0..max_instances-1 ([] each: none)
    instance_nodes: list  # NUMA node id of each instance
    tls_pem: str | None  # the server's certificate-key PEM on the server VM
    metadata: dict
    loaded: set = dataclasses.field(default_factory=set)
    running: set = dataclasses.field(default_factory=set)
    failure: str | None = None


def _Vms(spec):
    return spec.vm_groups["servers"][0], list(spec.vm_groups["clients"])


def _UsesNumactl():
    return _NUMACTL_CPU.value != "none" or _NUMACTL_MEMORY.value != "none"


def _ServerFacts(vm, server):
    """Memory, vCPUs, free disk under the instances directory, NUMA nodes, cores, online CPUs
    and network addresses of the server (the flags win where given)."""
    out, _ = vm.RemoteCommand(probes.server_facts_command(server.instances_dir))
    return stress_sizing.server_sizing_inputs(
        probes.parse_server_facts(out),
        vm_memory_bytes=vm.total_memory_kb * 1024,
        vm_vcpus=vm.NumCpusForBenchmark(),
        memory_gb=_MEMORY_GB.value,
        vcpus=_VCPUS.value,
        disk_gb=_DISK_GB.value,
    )


def _PrepareServer(vm):
    vm.Install("mongobench_mongod")
    if _HOLD.value:
        vm.Install("mongobench_stress_ng")
        mongobench_stress_ng.Check(vm, numactl=_STRESS_NG_NUMA.value)
    if _UsesNumactl():
        if vm.install_packages:
            vm.InstallPackages("numactl")
        _, _, rc = vm.RemoteCommandWithReturnCode("command -v numactl", ignore_failure=True)
        if rc:
            raise errors.Setup.InvalidSetupError(
                f"{vm.name}: numactl is not installed (needed by --mongodb_stress_numactl_*)"
            )
    return mongobench_mongod.Deploy(vm)


def _PrepareClient(vm):
    vm.Install("mongobench_ycsb")
    return mongobench_ycsb.Deploy(vm)


def Prepare(benchmark_spec):
    """Installs and ships what each VM needs, sizes the run, applies host settings."""
    benchmark_spec.always_call_cleanup = True  # stop what we started even when a stage fails
    server_vm, clients = _Vms(benchmark_spec)
    for vm in [server_vm, *clients]:
        mongobench_host.ProtectStaticVm(vm)
    tasks = [((_PrepareServer, server_vm), {})] + [((_PrepareClient, vm), {}) for vm in clients]
    results = background_tasks.RunThreaded(lambda f, vm: f(vm), tasks)
    server = results[0]

    facts = _ServerFacts(server_vm, server)
    try:
        sizing = stress_sizing.plan_sizing(
            facts["memory_bytes"],
            facts["vcpus"],
            facts["disk_free_bytes"],
            records=_RECORDS.value,
            cache_gb=_CACHE_GB.value,
            max_instances_cap=_MAX_INSTANCES.value,
        )
    except ValueError as e:
        raise errors.Benchmarks.PrepareException(f"mongodb_stress sizing: {e}") from e
    if sizing.max_instances < _MIN_INSTANCES.value:
        raise errors.Benchmarks.PrepareException(
            f"only {sizing.max_instances} instance(s) fit, below --mongodb_stress_min_instances"
        )
    try:
        hosts = placement.resolve_server_addresses(
            _ADDRESSES.value,
            internal_ips=server_vm.GetInternalIPs(),
            interfaces=facts["interfaces"],
        )
    except ValueError as e:
        raise errors.Config.InvalidValue(f"--mongodb_stress_server_addresses: {e}") from e
    bind_ip = _BIND_IP.value or ",".join(dict.fromkeys([*hosts, "127.0.0.1"]))
    try:
        numactl = placement.placement_prefixes(
            sizing.max_instances,
            facts["numa"],
            cpu=_NUMACTL_CPU.value,
            memory=_NUMACTL_MEMORY.value,
            cores=facts["cores"],
        )
        placed = placement.instance_nodes(sizing.max_instances, facts["numa"])
    except ValueError as e:
        raise errors.Config.InvalidValue(f"--mongodb_stress_numactl_*: {e}") from e
    tls_pem, tls_meta = (
        mongobench_mongod.SetUpTls(
            server_vm,
            clients,
            server,
            hosts,
            os.path.join(vm_util.GetTempDir(), "mongodb_stress", "tls"),
        )
        if _TLS.value
        else (None, {})
    )

    meta = stress_report.run_metadata(
        server.metadata(),
        sizing,
        facts,
        hosts,
        search=_SEARCH.value,
        target_ops=_TARGET_OPS.value,
        step_seconds=_DURATION.value,
        run_threads=_RUN_THREADS.value,
        load_threads=_LOAD_THREADS.value,
        load_batch=_LOAD_BATCH.value,
        client_vms=len(clients),
        first_port=_FIRST_PORT.value,
        numactl_cpu=_NUMACTL_CPU.value,
        numactl_memory=_NUMACTL_MEMORY.value,
        numactl_prefixes=numactl,
        histograms=_HISTOGRAMS.value,
        drop_caches=_DROP_CACHES.value,
        hold=_HOLD.value,
        hold_per_numa=_STRESS_NG_NUMA.value,
        hold_gb=_HOLD_GB.value,
        tls=_TLS.value,
        tls_meta=tls_meta,
    )
    if _HOST_SETTINGS.value:
        meta.update(mongobench_mongod.ApplyHostSettings(server_vm, server, server.instances_dir))
    else:
        meta["host_settings_applied"] = False
    benchmark_spec.mongodb_stress = _State(
        server, sizing, facts, hosts, bind_ip, numactl, placed, tls_pem, meta
    )
    logging.info("mongodb_stress sizing: %s", sizing.metadata())


# ----------------------------------------------------------------------------- steps


def _Instance(st, index):
    return mongobench_mongod.NewInstance(
        st.server,
        index,
        host=st.hosts[index % len(st.hosts)],
        bind_ip=st.bind_ip,
        first_port=_FIRST_PORT.value,
        tls_pem=st.tls_pem,
    )


def _EnsureInstances(vm, st, n):
    """Instances 0..n-1 running; on a real mongod, those above n are stopped (their data
    stays on disk) so they take no memory from this step. The stand-in keeps data in memory:
    its instances keep running."""
    if st.server.persistent:
        extra = sorted(i for i in st.running if i >= n)
        if extra:
            mongobench_mongod.Stop(vm, st.server, [_Instance(st, i) for i in extra])
            st.running.difference_update(extra)

    def start(index):
        inst = _Instance(st, index)
        config = mongobench_mongod.Config(st.server, inst, cache_gb=st.sizing.cache_gb)
        mongobench_mongod.Start(vm, st.server, inst, config, numactl=st.numactl[index])
        return index

    todo = [i for i in range(n) if i not in st.running]
    if todo:
        started = background_tasks.RunThreaded(start, todo, max_concurrent_threads=8)
        st.running.update(started)
        if st.server.kind == "mongod" and "mongod_ulimit_nofile" not in st.metadata:
            limits = mongobench_mongod.Limits(vm, _Instance(st, todo[0]))
            st.metadata.update({f"mongod_ulimit_{k}": v for k, v in limits.items()})


def _TlsCa(st, vm):
    return mongobench_ycsb.TlsCaPath(vm) if st.tls_pem else None


def _LocalDir(vm):
    path = os.path.join(vm_util.GetTempDir(), "mongodb_stress", vm.name)
    os.makedirs(path, exist_ok=True)
    return path


def _ReturnCode(state, output, what, timeout_s):
    if state.running:
        raise steps.StepError(f"{what} did not finish within {timeout_s}s and was stopped")
    return output.returncode


def _Load(clients, st, plan):
    """Loads the instances of plan.load (those never loaded), in parallel over the clients."""

    def props(p, vm):
        return steps.load_properties(
            p,
            threads=_LOAD_THREADS.value,
            batchsize=_LOAD_BATCH.value,
            tls_ca_file=_TlsCa(st, vm),
        )

    timeout = _LOAD_TIMEOUT.value
    results = mongobench_ycsb.RunOnClients(clients, plan.load, props, timeout, 0, _LocalDir)
    for p in plan.load:
        state, out = results[p.stem]
        rc = _ReturnCode(state, out, f"loading instance {p.instance}", timeout)
        steps.load_result(p, rc, out.text)
        st.loaded.add(p.instance)


def _HoldMemory(vm, st, n):
    """stress-ng holding what the n running instances must not have (per NUMA node when
    asked: for instances bound to their node, each node keeps its own instances' share)."""
    plan = placement.hold_plan(
        st.sizing.usable_memory,
        st.sizing.memory_per_instance,
        n,
        nodes=st.facts["numa"],
        instance_nodes=st.instance_nodes,
        fixed_bytes=int(_HOLD_GB.value * units.GiB) if _HOLD_GB.value is not None else None,
        per_node=_STRESS_NG_NUMA.value,
        bound=_NUMACTL_MEMORY.value == "bind",
    )
    return mongobench_stress_ng.Start(
        vm,
        plan.hold_bytes,
        node_bytes=plan.node_bytes,
        cpu_nodes=plan.cpu_nodes,
        name=f"step{n:03d}",
        workers=_STRESS_NG_WORKERS.value or max(1, min(8, st.facts["vcpus"])),
        # a safety net should nobody stop it: stress-ng ends by itself after the step
        timeout_s=_DURATION.value + _STEP_GRACE.value + 900,
    )


def _Step(spec, n):
    """Runs step n; returns (StepResult, step metadata). Raises StepError."""
    st = spec.mongodb_stress
    server_vm, clients = _Vms(spec)
    plan = steps.plan_step(
        n,
        loaded=st.loaded,
        clients=len(clients),
        records=st.sizing.records,
        hosts=st.hosts,
        first_port=_FIRST_PORT.value,
    )
    info = {"loaded_instances": ",".join(str(p.instance) for p in plan.load) or "none"}
    t0 = time.time()
    _EnsureInstances(server_vm, st, n)
    if plan.load:
        _Load(clients, st, plan)
    info["load_seconds"] = round(time.time() - t0, 1)

    if _DROP_CACHES.value:
        _, stderr, rc = server_vm.RemoteCommandWithReturnCode(
            "sync && echo 3 | sudo tee /proc/sys/vm/drop_caches >/dev/null", ignore_failure=True
        )
        info["caches_dropped"] = not rc
        if rc:
            logging.warning("%s: could not drop the page cache: %s", server_vm.name, stderr)
    hold = None
    if _HOLD.value:
        hold = _HoldMemory(server_vm, st, n)
        info["hold_gib"] = round((hold.hold_bytes if hold else 0) / units.GiB, 3)
    try:

        def props(p, vm):
            return steps.run_properties(
                p,
                directory=mongobench_ycsb.RunDir(vm),
                duration_s=_DURATION.value,
                target=_TARGET_OPS.value,
                threads=_RUN_THREADS.value,
                histograms=_HISTOGRAMS.value,
                tls_ca_file=_TlsCa(st, vm),
            )

        t1 = time.time()
        timeout = _DURATION.value + _STEP_GRACE.value
        results = mongobench_ycsb.RunOnClients(
            clients, plan.run, props, timeout, _DURATION.value, _LocalDir
        )
        info["run_wall_seconds"] = round(time.time() - t1, 1)
        dead = mongobench_mongod.DeadInstances(
            server_vm, st.server, [_Instance(st, i) for i in range(n)]
        )
    finally:
        mongobench_stress_ng.Stop(server_vm, hold)
    outputs = []
    for p in plan.run:
        state, out = results[p.stem]
        rc = _ReturnCode(state, out, f"step {n}: YCSB for instance {p.instance}", timeout)
        hists = {op: out.histograms[op] for op in ("READ", "UPDATE") if op in out.histograms}
        outputs.append(steps.ProcessOutput(p.instance, p.client, rc, out.text, hists))
    result = steps.step_result(n, outputs, dead_instances=dead, first_port=_FIRST_PORT.value)
    return result, info


def _Log(message, problem=False):
    (logging.error if problem else logging.info)("mongodb_stress: %s", message)


def Run(benchmark_spec):
    st = benchmark_spec.mongodb_stress
    t0 = time.time()
    found = search.run_search(
        lambda n: _Step(benchmark_spec, n),
        st.sizing.max_instances,
        search=_SEARCH.value,
        min_instances=_MIN_INSTANCES.value,
        target_per_process=_TARGET_OPS.value,
        sla_ms=_SLA_MS.value,
        log=_Log,
    )
    st.failure = found.failure[2] if found.failure else None
    samples = stress_report.search_samples(
        found,
        metadata=st.metadata,
        search_seconds=round(time.time() - t0, 1),
        records_loaded=st.sizing.records * len(st.loaded),
        sla_ms=_SLA_MS.value,
        mongodb_version=st.server.version,
        max_instances=st.sizing.max_instances,
    )
    return [sample.Sample(**s) for s in samples]


def _ServerDiagnosticPaths(vm):
    return mongobench_mongod.DiagnosticPaths(vm) + mongobench_stress_ng.DiagnosticPaths(vm)


def Cleanup(benchmark_spec):
    """Stops every process the benchmark started (by PID), removes its directories and
    restores the server's host settings, as far as Prepare got (every step is tried); then
    fails the run if a step failed or something could not be undone. Runs once: PKB calls
    it again after a Cleanup that raised."""
    if getattr(benchmark_spec, "mongodb_stress_cleaned_up", False):
        return
    benchmark_spec.mongodb_stress_cleaned_up = True
    server_vm, clients = _Vms(benchmark_spec)
    st = getattr(benchmark_spec, "mongodb_stress", None)
    # No state: Prepare stopped half-way.
    keep = mongobench_host.KeepDiagnostics(benchmark_spec, st is None or st.failure)

    def kept(vm, paths_of):  # after the stops (complete outputs), before any removal
        return [mongobench_host.DiagnosticsStep(vm, paths_of)] if keep else []

    def client(vm):
        return mongobench_host.Undo(
            [
                (f"stop YCSB on {vm.name}", lambda: mongobench_ycsb.StopAll(vm)),
                *kept(vm, mongobench_ycsb.DiagnosticPaths),
                (f"remove YCSB on {vm.name}", lambda: mongobench_ycsb.Remove(vm)),
            ]
        )

    problems = [p for got in background_tasks.RunThreaded(client, clients) for p in got]
    name = server_vm.name
    problems += mongobench_host.Undo(
        [
            (f"stop stress-ng on {name}", lambda: mongobench_stress_ng.StopAll(server_vm)),
            (f"stop mongod on {name}", lambda: mongobench_mongod.StopAll(server_vm)),
            *kept(server_vm, _ServerDiagnosticPaths),
            (
                f"restore host settings on {name}",
                lambda: mongobench_mongod.RestoreHostSettings(server_vm),
            ),
            (f"remove stress-ng on {name}", lambda: mongobench_stress_ng.Remove(server_vm)),
            (f"remove mongod on {name}", lambda: mongobench_mongod.Remove(server_vm)),
        ]
    )
    if st is not None and st.failure:
        problems.append(f"mongodb_stress: a step failed: {st.failure}")
    if problems:
        raise errors.Benchmarks.RunError(" | ".join(problems))
