"""mongodb_stress on PKB VMs: preparing the server and clients, running one step, cleaning up.

The arithmetic (sizing, placement, step plans, the search, results, KPIs, usage and sample
metadata) is the engine's (`mongobench.stress`); this module carries it out over ssh with
`mongobench_mongod`, `mongobench_ycsb` and `mongobench_stress_ng`. The benchmark's flags
arrive as the engine's `StressSettings`; the run's `State` carries them from Prepare on. It
installs nothing, so it lives here, not in linux_packages/.

    st = mongobench_stress.Prepare(server_vm, clients, settings)
    result, info = mongobench_stress.Step(server_vm, clients, st, n)
    problems = mongobench_stress.Cleanup(server_vm, clients, keep_diagnostics)
"""

import concurrent.futures
import dataclasses
import logging
import os
import posixpath
import shlex
import time

from perfkitbenchmarker import background_tasks, errors, vm_util

from mongobench.core import units
from mongobench.deploy.mongod import instance_port
from mongobench.remote import probes
from mongobench.stress import holdparts, placement, seeding, steady, steps, usage
from mongobench.stress import report as stress_report
from mongobench.stress import sizing as stress_sizing
from mongobench.stress.settings import StressSettings
from mongobench_pkb import host as mongobench_host
from mongobench_pkb import mongod as mongobench_mongod
from mongobench_pkb import stages
from mongobench_pkb import stress_ng as mongobench_stress_ng
from mongobench_pkb import ycsb as mongobench_ycsb

VERIFY_TIMEOUT_S = 600
DROP_CACHES_COMMAND = "sync && echo 3 | sudo tee /proc/sys/vm/drop_caches >/dev/null"
STRESS_NG_SAFETY_S = 900  # stress-ng ends by itself this long after a step should have
# A kept hold's stress-ng ends by itself once every step left could have run: each at most
# its seconds, its grace and this much around it (instances started, caches dropped).
BETWEEN_STEPS_S = 300


@dataclasses.dataclass
class State:
    """The run's state on PKB's benchmark_spec (`mongodb_stress`), from Prepare on: its
    settings, what Prepare found and chose, and what the steps have done so far."""

    settings: StressSettings  # the flags' options, validated in CheckPrerequisites
    server: mongobench_mongod.Server
    sizing: stress_sizing.Sizing
    facts: dict
    hosts: tuple
    bind_ip: str
    numactl: list  # numactl prefix of each instance 0..max_instances-1 ([] each: none)
    instance_nodes: list  # NUMA node id of each instance
    tls_pem: str | None  # the server's certificate-key PEM on the server VM
    metadata: dict
    seeding: "seeding.Seeding" = None  # stress.seeding.Seeding, chosen by Prepare
    reflink: bool = False  # copies are clones (stress.seeding.reflink_probe_command)
    loaded: set = dataclasses.field(default_factory=set)  # instances holding their data
    ycsb_loaded: set = dataclasses.field(default_factory=set)  # ... loaded by YCSB
    pending: dict = dataclasses.field(default_factory=dict)  # copy -> its source's Fingerprint
    verified: dict = dataclasses.field(default_factory=dict)  # copy -> Fingerprint it matched
    running: set = dataclasses.field(default_factory=set)
    failure: str | None = None
    # the memory hold kept from step to step (stress.holdparts): part key -> (Part, its Hold)
    hold: dict = dataclasses.field(default_factory=dict)
    steps_started: int = 0

    @property
    def copying(self):
        return self.seeding is not None and self.seeding.mode == "copy"


# ----------------------------------------------------------------------------- prepare


def CheckPrerequisites():
    """Before any VM exists: the MongoDB version flags agree and the PKB host can build the
    YCSB client (and the stand-in)."""
    mongobench_mongod.CheckPrerequisites()
    mongobench_ycsb.CheckPrerequisites()


def _ServerFacts(vm, server, settings):
    """Memory, vCPUs, free disk under the instances directory, NUMA nodes, cores, online CPUs
    and network addresses of the server (the flags win where given)."""
    out, _ = vm.RemoteCommand(probes.server_facts_command(server.instances_dir))
    return stress_sizing.server_sizing_inputs(
        probes.parse_server_facts(out),
        vm_memory_bytes=vm.total_memory_kb * 1024,
        vm_vcpus=vm.NumCpusForBenchmark(),
        memory_gb=settings.memory_gb,
        vcpus=settings.vcpus,
        disk_gb=settings.disk_gb,
    )


def _PrepareServer(vm, settings):
    vm.Install("mongobench_mongod")
    if settings.hold:
        vm.Install("mongobench_stress_ng")
        mongobench_stress_ng.Check(vm, numactl=settings.stress_ng_per_numa)
    if settings.uses_numactl:
        if vm.install_packages:
            vm.InstallPackages("numactl")
        _, _, rc = vm.RemoteCommandWithReturnCode("command -v numactl", ignore_failure=True)
        if rc:
            raise errors.Setup.InvalidSetupError(
                f"{vm.name}: numactl is not installed (needed by --mongodb_stress_numactl_*)"
            )
    return mongobench_mongod.Deploy(vm)


def _PrepareClient(vm, settings):
    vm.Install("mongobench_ycsb")
    return mongobench_ycsb.Deploy(vm)


def _Sizing(facts, settings):
    try:
        sizing = stress_sizing.plan_sizing(
            facts["memory_bytes"],
            facts["vcpus"],
            facts["disk_free_bytes"],
            records=settings.records,
            cache_gb=settings.cache_gb,
            max_instances_cap=settings.max_instances,
        )
    except ValueError as e:
        raise errors.Benchmarks.PrepareException(f"mongodb_stress sizing: {e}") from e
    if sizing.max_instances < settings.min_instances:
        raise errors.Benchmarks.PrepareException(
            f"only {sizing.max_instances} instance(s) fit, below --mongodb_stress_min_instances"
        )
    return sizing


def Prepare(server_vm, clients, settings):
    """Installs and ships what each VM needs, sizes the run, places the instances, makes the
    TLS material when asked and applies host settings; returns the run's State."""
    for vm in [server_vm, *clients]:
        mongobench_host.ProtectStaticVm(vm)
    tasks = [((_PrepareServer, server_vm), {})] + [((_PrepareClient, vm), {}) for vm in clients]
    server = background_tasks.RunThreaded(lambda f, vm: f(vm, settings), tasks)[0]

    facts = _ServerFacts(server_vm, server, settings)
    sizing = _Sizing(facts, settings)
    try:
        hosts = placement.resolve_server_addresses(
            list(settings.addresses),
            internal_ips=server_vm.GetInternalIPs(),
            interfaces=facts["interfaces"],
        )
    except ValueError as e:
        raise errors.Config.InvalidValue(f"--mongodb_stress_server_addresses: {e}") from e
    bind_ip = settings.bind_ip or ",".join(dict.fromkeys([*hosts, "127.0.0.1"]))
    try:
        numactl = placement.placement_prefixes(
            sizing.max_instances,
            facts["numa"],
            cpu=settings.numactl_cpu,
            memory=settings.numactl_memory,
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
        if settings.tls
        else (None, {})
    )

    meta = stress_report.run_metadata(
        server.metadata(),
        sizing,
        facts,
        hosts,
        settings,
        client_vms=len(clients),
        numactl_prefixes=numactl,
        tls_meta=tls_meta,
    )
    meta.update(steady.describe(settings.step_stop, settings.steady_rule))
    meta.update(mongobench_mongod.DataFilesystem(server_vm, server, server.instances_dir))
    if settings.host_settings:
        meta.update(mongobench_mongod.ApplyHostSettings(server_vm, server, server.instances_dir))
    else:
        meta["host_settings_applied"] = False
    logging.info("mongodb_stress sizing: %s", sizing.metadata())
    st = State(settings, server, sizing, facts, hosts, bind_ip, numactl, placed, tls_pem, meta)
    _ChooseSeeding(server_vm, st, settings)
    return st


def _ChooseSeeding(vm, st, settings):
    """Copy or load (stress.seeding.choose over every instance's config), and for copies
    whether the scratch disk clones files; recorded in the run's metadata."""
    configs = [
        mongobench_mongod.Config(st.server, _Instance(st, settings, i), cache_gb=st.sizing.cache_gb)
        for i in range(st.sizing.max_instances)
    ]
    st.seeding = seeding.choose(settings.seeding, server_kind=st.server.kind, configs=configs)
    st.metadata.update(st.seeding.metadata())
    if st.copying:
        _, _, rc = vm.RemoteCommandWithReturnCode(
            seeding.reflink_probe_command(st.server.instances_dir), ignore_failure=True
        )
        st.reflink = rc == 0
        st.metadata["data_copy"] = "reflink" if st.reflink else "plain"
    logging.info("mongodb_stress data seeding: %s (%s)", st.seeding.mode, st.seeding.reason)


# ----------------------------------------------------------------------------- steps


def _Instance(st, settings, index):
    return mongobench_mongod.NewInstance(
        st.server,
        index,
        host=st.hosts[index % len(st.hosts)],
        bind_ip=st.bind_ip,
        port=instance_port(index, settings.first_port),
        tls_pem=st.tls_pem,
    )


def _EnsureInstances(vm, st, settings, n):
    """Instances 0..n-1 running; on a real mongod, those above n are stopped (their data
    stays on disk) so they take no memory from this step. The stand-in keeps data in memory:
    its instances keep running."""
    if st.server.persistent:
        extra = sorted(i for i in st.running if i >= n)
        if extra:
            mongobench_mongod.Stop(vm, st.server, [_Instance(st, settings, i) for i in extra])
            st.running.difference_update(extra)
    _StartInstances(vm, st, settings, [i for i in range(n) if i not in st.running])


def _StartInstances(vm, st, settings, todo):
    """Starts the instances `todo` (with copies, the stand-in keeps its data files)."""

    def start(index):
        inst = _Instance(st, settings, index)
        config = mongobench_mongod.Config(st.server, inst, cache_gb=st.sizing.cache_gb)
        mongobench_mongod.Start(
            vm, st.server, inst, config, numactl=st.numactl[index], data_files=st.copying
        )
        return index

    if todo:
        started = background_tasks.RunThreaded(start, todo, max_concurrent_threads=8)
        st.running.update(started)
        if st.server.kind == "mongod" and "mongod_ulimit_nofile" not in st.metadata:
            limits = mongobench_mongod.Limits(vm, _Instance(st, settings, todo[0]))
            st.metadata.update({f"mongod_ulimit_{k}": v for k, v in limits.items()})
            mongobench_mongod.CheckAllocator(
                vm, st.server, _Instance(st, settings, todo[0]), st.metadata
            )


def _TlsCa(st, vm):
    return mongobench_ycsb.TlsCaPath(vm) if st.tls_pem else None


def _LocalDir(vm):
    path = os.path.join(vm_util.GetTempDir(), "mongodb_stress", vm.name)
    os.makedirs(path, exist_ok=True)
    return path


def _Load(clients, st, settings, plan):
    """Loads the instances of plan.load (those never loaded), in parallel over the clients."""

    def props(p, vm):
        return steps.load_properties(
            p,
            threads=settings.load_threads,
            batchsize=settings.load_batch,
            tls_ca_file=_TlsCa(st, vm),
        )

    timeout = settings.load_timeout
    results = mongobench_ycsb.RunOnClients(clients, plan.load, props, timeout, _LocalDir)
    for p in plan.load:
        state, out = results[p.stem]
        steps.load_result(p, out.returncode, out.text, running=state.running, timeout_s=timeout)
        st.loaded.add(p.instance)
        st.ycsb_loaded.add(p.instance)


def _Fingerprints(clients, st, procs):
    """instance -> stress.seeding.Fingerprint of each process's instance (record count,
    SHA-256 of sampled records), read by the YCSB binding's VerifyData on the first client VM
    in one JVM. StepError with its stderr when an instance cannot be read."""
    vm = clients[0]
    files = {}
    for p in procs:
        path = posixpath.join(mongobench_ycsb.RunDir(vm), f"verify-i{p.instance:03d}.properties")
        extra = {seeding.SAMPLES_PROPERTY: seeding.VERIFY_SAMPLES}
        text = steps.load_properties(p, tls_ca_file=_TlsCa(st, vm), extra=extra)
        mongobench_ycsb.WriteRemoteFile(vm, path, text)
        files[p.instance] = path
    argv = seeding.verify_command(
        mongobench_ycsb.Java(),
        mongobench_ycsb.Classpath(mongobench_ycsb.WorkDir(vm)),
        list(files.values()),
    )
    out, err, rc = vm.RemoteCommandWithReturnCode(
        shlex.join(argv), ignore_failure=True, timeout=VERIFY_TIMEOUT_S
    )
    got = seeding.parse_verify(out)
    missing = [i for i, f in files.items() if f not in got]
    if rc or missing:
        tail = "\n".join(err.strip().splitlines()[-5:])
        raise steps.StepError(
            f"data seeding: VerifyData on {vm.name} could not read instance(s) {missing}"
            f" (exit {rc}):\n{tail}"
        )
    return {i: got[f] for i, f in files.items()}


def _Copy(vm, clients, st, settings, plan):
    """The source (running, loaded) is fingerprinted and checked, stopped cleanly, its
    dbPath copied to every instance of plan.copy in parallel; the copies then await their
    verification (st.pending). Returns step metadata."""
    t0 = time.time()
    [source_proc] = [p for p in plan.run if p.instance == plan.source]
    fp = _Fingerprints(clients, st, [source_proc])[plan.source]
    seeding.check_source(fp, st.sizing.records)
    source = _Instance(st, settings, plan.source)
    mongobench_mongod.Stop(vm, st.server, [source])
    st.running.discard(plan.source)
    targets = [_Instance(st, settings, i).paths.dbpath for i in plan.copy]
    _, err, rc = vm.RemoteCommandWithReturnCode(
        seeding.copy_command(source.paths.dbpath, targets), ignore_failure=True
    )
    if rc:
        raise steps.StepError(f"data seeding: copying instance {plan.source}'s files: {err}")
    for i in plan.copy:
        st.pending[i] = fp
        st.loaded.add(i)
    return {
        "copied_instances": ",".join(str(i) for i in plan.copy),
        "copy_seconds": round(time.time() - t0, 1),
    }


def _VerifyCopies(clients, st, plan):
    """Every copy this step runs that was not verified yet equals its source (record count,
    sampled records), else StepError; the run's metadata then says so."""
    todo = [p for p in plan.run if p.instance in st.pending]
    if not todo:
        return {}
    got = _Fingerprints(clients, st, todo)
    for p in todo:
        seeding.check_copy(p.instance, got[p.instance], st.pending[p.instance])
        st.verified[p.instance] = st.pending.pop(p.instance)
    source = st.verified[todo[-1].instance]
    st.metadata.update(seeding.verification_metadata(source, st.verified))
    return {"verified_copies": ",".join(str(p.instance) for p in todo)}


def _HoldPlan(st, settings, n):
    """What stress-ng holds while n instances run (per NUMA node when asked: for instances
    bound to their node, each node keeps its own instances' share)."""
    hold_gb = settings.hold_gb
    return placement.hold_plan(
        st.sizing.usable_memory,
        st.sizing.memory_per_instance,
        n,
        nodes=st.facts["numa"],
        instance_nodes=st.instance_nodes,
        fixed_bytes=int(hold_gb * units.GiB) if hold_gb is not None else None,
        per_node=settings.stress_ng_per_numa,
        bound=settings.numactl_memory == "bind",
    )


def _StopHold(vm, st, keys=None):
    """Stops the kept hold's parts `keys` (default: all) in one command."""
    keys = sorted(st.hold) if keys is None else keys
    if keys:
        parts = [st.hold.pop(k)[1] for k in keys]
        mongobench_stress_ng.Stop(vm, mongobench_stress_ng.Together(vm.name, parts))


def ReleaseHold(vm, st):
    """Stops whatever the steps' hold still holds, once the search is over however it
    ended. Never raises (it runs while an error may be on its way out): a failure is
    logged, and Cleanup stops every stress-ng process of the run in any case."""
    try:
        _StopHold(vm, st)
    except Exception as e:  # noqa: BLE001 - Cleanup's StopAll is the backstop
        st.hold.clear()
        logging.warning("%s: could not stop the kept stress-ng hold (Cleanup will): %s", vm.name, e)


def _HeldTogether(vm, st):
    return mongobench_stress_ng.Together(vm.name, [h for _, h in st.hold.values()])


def _AdjustHold(vm, st, settings, want):
    """Starts the parts of `want` the kept hold lacks and waits until they hold their
    memory; returns how many it started. The kept parts are not read again: each step's end
    checks them all (_HoldShortfall), so a part that ended since fails the step it weakened."""
    _, start = holdparts.changes({k: p for k, (p, _) in st.hold.items()}, want)
    left = max(1, st.sizing.max_instances - st.steps_started + 1)  # this step and those after
    started = mongobench_stress_ng.StartParts(
        vm,
        start,
        name=f"step{st.steps_started:03d}",
        workers=settings.stress_ng_workers or max(1, min(8, st.facts["vcpus"])),
        cpu_nodes={node.id for node in st.facts["numa"] if node.cpus},
        timeout_s=left * (settings.step_seconds + settings.step_grace + BETWEEN_STEPS_S)
        + STRESS_NG_SAFETY_S,
    )
    st.hold.update({p.key: (p, started[p.key]) for p in start})
    return len(start)


def _HoldShortfall(vm, st):
    """None, or why the hold holds less than its parts at the step's end (a stress-ng
    process ended during the step, or since the step before: it ran with less pressure)."""
    if not st.hold:
        return None
    want = holdparts.total({k: p for k, (p, _) in st.hold.items()})
    held = mongobench_stress_ng.Held(vm, _HeldTogether(vm, st))
    if held >= want - holdparts.MIN_PART_BYTES * len(st.hold):
        return None
    return (
        f"stress-ng held {held / units.GiB:.2f} GiB at the step's end, not"
        f" {want / units.GiB:.2f} GiB: a hold process ended during the step or since the"
        " step before"
    )


def _DropCaches(vm):
    _, stderr, rc = vm.RemoteCommandWithReturnCode(DROP_CACHES_COMMAND, ignore_failure=True)
    if rc:
        logging.warning("%s: could not drop the page cache: %s", vm.name, stderr)
    return not rc


def _OsReadings(vms):
    """One /proc reading of each VM (stress.usage), taken in parallel."""

    def read(vm):
        out, _ = vm.RemoteCommand(usage.READING_COMMAND, should_pre_log=False)
        return usage.parse_reading(out)

    got = background_tasks.RunThreaded(read, list(vms))
    return dict(zip([vm.name for vm in vms], got, strict=True))


def Step(server_vm, clients, st, n):
    """Runs step n; returns (StepResult, step metadata with its usage and bottleneck).
    Raises StepError."""
    settings = st.settings
    plan = steps.plan_step(
        n,
        loaded=st.loaded,
        clients=len(clients),
        records=st.sizing.records,
        hosts=st.hosts,
        first_port=settings.first_port,
        copying=steps.Copying(
            seeding.SOURCE,
            # clones cost nothing: every instance the search may use, in the first round
            upto=st.sizing.max_instances if st.reflink else 0,
            loaders=settings.source_loaders or len(clients),
        )
        if st.copying
        else None,
    )
    loaded = sorted({p.instance for p in plan.load})
    info = {"loaded_instances": ",".join(str(i) for i in loaded) or "none"}
    if plan.load:
        info["load_processes"] = len(plan.load)
    st.steps_started += 1
    want, kept = {}, False
    if settings.hold:
        want, kept = holdparts.parts(
            lambda m: _HoldPlan(st, settings, m), n, st.sizing.max_instances
        )
    held = {k: part for k, (part, _) in st.hold.items()}
    # YCSB's loads run without the hold (as before it was kept); otherwise only the parts
    # this step must not hold stop, before its instances start or its copies are made.
    drop = sorted(held) if plan.load else holdparts.changes(held, want)[0]
    _StopHold(server_vm, st, drop)
    t0 = time.time()
    if st.copying:  # the source runs alone while it is loaded and copied
        if plan.load or plan.copy:
            _StartInstances(
                server_vm, st, settings, [plan.source] if plan.source not in st.running else []
            )
        if plan.load:
            _Load(clients, st, settings, plan)
        if plan.copy:
            info.update(_Copy(server_vm, clients, st, settings, plan))
        _EnsureInstances(server_vm, st, settings, n)
        info.update(_VerifyCopies(clients, st, plan))
    else:
        _EnsureInstances(server_vm, st, settings, n)
        if plan.load:
            _Load(clients, st, settings, plan)
    info["load_seconds"] = round(time.time() - t0, 1)

    vms = [server_vm, *clients]
    if settings.drop_caches:
        info["caches_dropped"] = _DropCaches(server_vm)
    if settings.hold:
        info["hold_parts_started"] = _AdjustHold(server_vm, st, settings, want)
        info["hold_parts_stopped"] = len(drop)
        info["hold_parts"] = len(st.hold)
        info["hold_kept"] = kept
        info["hold_gib"] = round(holdparts.total(want) / units.GiB, 3)
    early = settings.step_stop == "steady"

    def props(p, vm):
        run_dir = mongobench_ycsb.RunDir(vm)
        return steps.run_properties(
            p,
            settings,
            directory=run_dir,
            tls_ca_file=_TlsCa(st, vm),
            stop_file=mongobench_ycsb.StopFile(run_dir, p.stem) if early else None,
        )

    watch = (
        steady.Watch(
            settings.steady_rule,
            len(plan.run),
            settings.step_seconds,
            settings.status_interval_s,
        )
        if early
        else None
    )
    began = {}  # read once every YCSB process has printed a status line
    t1 = time.time()
    timeout = settings.step_seconds + settings.step_grace
    after = {}  # read as the last YCSB process ends, before the outputs are fetched
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # kept if the workload's start is not seen: read while YCSB starts (an ssh round
        # per VM, in series with nothing)
        at_start = pool.submit(_OsReadings, vms)
        results = mongobench_ycsb.RunOnClients(
            clients,
            plan.run,
            props,
            timeout,
            _LocalDir,
            stop_when=watch,
            on_start=lambda: began.update(_OsReadings(vms)),
            on_end=lambda: after.update(_OsReadings(vms)),
        )
        before = at_start.result()
    info["run_wall_seconds"] = round(time.time() - t1, 1)
    instances = [_Instance(st, settings, i) for i in range(n)]
    # the dead-instance check and the hold's: independent, in parallel
    dead, shortfall = background_tasks.RunThreaded(
        lambda task: task(),
        [
            lambda: mongobench_mongod.DeadInstances(server_vm, st.server, instances),
            lambda: _HoldShortfall(server_vm, st),
        ],
    )
    if shortfall:
        raise steps.StepError(shortfall)
    outputs = []
    for p in plan.run:
        state, out = results[p.stem]
        hists = {op: out.histograms[op] for op in ("READ", "UPDATE") if op in out.histograms}
        outputs.append(
            steps.ProcessOutput(
                p.instance, p.client, out.returncode, out.text, hists, state.running, timeout
            )
        )
    result = steps.step_result(
        n,
        outputs,
        dead_instances=dead,
        first_port=settings.first_port,
        status_interval_s=settings.status_interval_s,
    )
    if watch is not None:
        result, stop_info = watch.apply(result)
        info.update(stop_info)
        if watch.steady:
            logging.info(
                "mongobench: step %d steady after %.0f s (%.0f ops/s within %.1f %%): ended early",
                n, watch.steady.seconds, watch.steady.rate, 100 * settings.steady_rule.tolerance,
            )  # fmt: skip
    info["usage_from"] = "workload start" if began else "YCSB start"
    readings = {name: [(began or before)[name], after[name]] for name in before}
    info.update(
        usage.step_usage(
            readings.pop(server_vm.name),
            readings,
            throughput=result.throughput,
            offered=n * settings.target_ops,
        )
    )
    return result, info


# ----------------------------------------------------------------------------- cleanup


def _ServerDiagnosticPaths(vm):
    return mongobench_mongod.DiagnosticPaths(vm) + mongobench_stress_ng.DiagnosticPaths(vm)


def Cleanup(server_vm, clients, keep_diagnostics):
    """Stops every process the benchmark started (by PID), keeps the diagnostics when asked
    (after the stops: complete outputs; before any removal), removes its directories and
    restores the server's host settings; every step is tried. Returns what went wrong."""

    def kept(vm, paths_of):
        return [stages.DiagnosticsStep(vm, paths_of)] if keep_diagnostics else []

    def client(vm):
        return stages.Undo(
            [
                (f"stop YCSB on {vm.name}", lambda: mongobench_ycsb.StopAll(vm)),
                *kept(vm, mongobench_ycsb.DiagnosticPaths),
                (f"remove YCSB on {vm.name}", lambda: mongobench_ycsb.Remove(vm)),
            ]
        )

    problems = [p for got in background_tasks.RunThreaded(client, clients) for p in got]
    name = server_vm.name
    problems += stages.Undo(
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
    return problems
