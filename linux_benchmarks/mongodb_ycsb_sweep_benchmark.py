"""MongoDB dataset-size sweep with YCSB (seed 002).

For each dataset size (default 1, 2, 3, 10, 100, 1000, 10000 MB of 1 KB records) the
collection is dropped and rebuilt by a YCSB load, then read-only, update-only and 50/50
read/update workloads run over it (zipfian keys, operation count = record count unless
overridden). Every size and phase yields samples under PKB's ycsb_stats names (those of
mongodb_ycsb): `overall RunTime` (ms), `overall Throughput`, and per operation
`<op> AverageLatency`, `<op> 50thPercentileLatency`, `<op> 95thPercentileLatency`,
`<op> 99thPercentileLatency`, `<op> p50 latency`, `<op> p95 latency`, `<op> p99 latency` (ms),
with metadata size_mb, records, phase and
exceeds_memory.

The target is any deployment given by connection string (file or environment variable on the
PKB host). The string reaches each client VM in a 0600 file and YCSB through the binding's
`mongodb.urlfile`: never on a command line, in pkb.log or in a sample. YCSB is the project's
client (mongobench_pkb.ycsb); with several client VMs each runs one YCSB process per
phase (load: its own key range; runs: its share of the operations) and percentiles are merged
from their HdrHistogram logs.

The run options are the engine's typed request (mongobench.sweep.request.SweepRun), built
from these flags and validated once in CheckPrerequisites (its errors name the flags). The
sweep runs on the PKB host (YCSB processes on the client VMs; the engine there only drops
the collection), so the request is not shipped to a VM: it is the one object Prepare keeps
in the benchmark's typed state (SweepState) and Run, the sweep loop and every property file
take.
"""

import dataclasses
import logging
import os
import posixpath
from typing import Any

from absl import flags
from perfkitbenchmarker import benchmark_spec as bm_spec
from perfkitbenchmarker import configs, errors, sample, vm_util

from mongobench.core import interrupt, redact
from mongobench.perftables import estimate as estimate_mod
from mongobench.remote import shipping
from mongobench.sweep import estimate as sweep_estimate
from mongobench.sweep import plan, runner
from mongobench.sweep import properties as sweep_properties
from mongobench.sweep import samples as sweep_samples
from mongobench.sweep.request import SweepRun, phases_option, pkb_flag, sizes_option
from mongobench.ycsb import parse as ycsb_parse
from mongobench.ycsb import status as ycsb_status
from mongobench_pkb import engine as mongobench_engine
from mongobench_pkb import host as mongobench_host
from mongobench_pkb import stages, target
from mongobench_pkb import ycsb as mongobench_ycsb

BENCHMARK_NAME = "mongodb_ycsb_sweep"
BENCHMARK_CONFIG = """
mongodb_ycsb_sweep:
  description: >
    YCSB dataset-size sweep: per size, rebuild the collection, load it, run
    read-only, update-only and 50/50 workloads. Give the target with
    --mongodb_ycsb_sweep_uri_file or --mongodb_ycsb_sweep_uri_env.
  vm_groups:
    clients:
      vm_spec: *default_dual_core
      vm_count: 1
"""

_TARGET = target.DefineUriFlags(
    BENCHMARK_NAME, " Its database (default ycsb) holds the collection."
)
_SIZES = flags.DEFINE_list(
    "mongodb_ycsb_sweep_sizes_mb",
    [str(s) for s in plan.DEFAULT_SIZES_MB],
    "Dataset sizes in MB of 1 KB records (1 MB = 1,000 records); fractions allowed.",
)
_PHASES = flags.DEFINE_list(
    "mongodb_ycsb_sweep_phases",
    ["all"],
    "Phases per size: load (always), read_only, update_only, read_update; or all.",
)
_OPERATIONS = flags.DEFINE_integer(
    "mongodb_ycsb_sweep_operation_count",
    None,
    "Operations of each workload at every size (default: the size's record count).",
    lower_bound=1,
)
_THREADS = flags.DEFINE_integer(
    "mongodb_ycsb_sweep_threads",
    1,
    "Client threads of each YCSB process (the seed used 1).",
    lower_bound=1,
)
_MEMORY_MB = flags.DEFINE_integer(
    "mongodb_ycsb_sweep_memory_mb",
    None,
    "Memory (MiB) of the machine holding the data, for exceeds_memory (default: the server's"
    " hostInfo, else the first client VM's memory).",
    lower_bound=1,
)
_MAX_SECONDS = flags.DEFINE_integer(
    "mongodb_ycsb_sweep_max_seconds",
    None,
    "Cap on each phase (YCSB maxexecutiontime); a capped phase is marked stopped_early.",
    lower_bound=1,
)
_PHASE_TIMEOUT = flags.DEFINE_integer(
    "mongodb_ycsb_sweep_phase_timeout",
    43200,
    "Seconds to wait for one phase before stopping its YCSB processes and failing it.",
    lower_bound=1,
)
_LOAD_BATCHSIZE = flags.DEFINE_integer(
    "mongodb_ycsb_sweep_load_batchsize",
    None,
    "Insert batch size of the load (default 1, as the seed).",
    lower_bound=1,
)
_TABLE = flags.DEFINE_string(
    "mongodb_ycsb_sweep_table",
    plan.DEFAULT_TABLE,
    "Collection the sweep drops and rebuilds at every size.",
)
_KEEP_DATA = flags.DEFINE_bool(
    "mongodb_ycsb_sweep_keep_data",
    False,
    "Leave the last size's collection in place (default: dropped at the end).",
)
_REPEATS = flags.DEFINE_integer(
    "mongodb_ycsb_sweep_repeats",
    1,
    "Runs of each size's run phases (the load runs once), interleaved in rounds of"
    " alternating direction; samples carry the mean with repeats, stdev, ci95_low and"
    " ci95_high (t-distribution).",
    lower_bound=1,
)
_STATUS_INTERVAL = flags.DEFINE_integer(
    "mongodb_ycsb_sweep_status_interval_s",
    ycsb_status.STATUS_INTERVAL_S,
    "Seconds between YCSB's status lines (status.interval): the interval of each phase's"
    " time series (`overall Throughput time series`, ...).",
    lower_bound=1,
)
FLAGS = flags.FLAGS


def GetConfig(user_config: dict[str, Any]) -> dict[str, Any]:
    return configs.LoadConfig(BENCHMARK_CONFIG, user_config, BENCHMARK_NAME)


def CheckPrerequisites(benchmark_config) -> None:
    """Validates flags and the target before anything is provisioned, then logs the sweep's
    estimated data volume, wall time and cost (PKB does not ask)."""
    mongobench_engine.CheckPrerequisites(benchmark_config)  # docs/platforms.md
    request = _Request()  # every run option, checked once
    est = _Estimate(request, _ReadUri())
    mongobench_ycsb.CheckPrerequisites()
    vms = [
        (getattr(group.vm_spec, "machine_type", None), group.vm_count or 1)
        for group in (getattr(benchmark_config, "vm_groups", None) or {}).values()
        if not getattr(group, "static_vms", None)
    ]
    cost = estimate_mod.cost(est.seconds, vms)
    logging.info("mongodb_ycsb_sweep plan: %s%s", est.summary(), f"; {cost}" if cost else "")


_RUN_FLAGS = (
    _SIZES,
    _PHASES,
    _OPERATIONS,
    _THREADS,
    _MEMORY_MB,
    _MAX_SECONDS,
    _PHASE_TIMEOUT,
    _LOAD_BATCHSIZE,
    _TABLE,
    _KEEP_DATA,
    _REPEATS,
    _STATUS_INTERVAL,
)
_REQUESTS = {}  # flag values -> their request: built and validated once per PKB process


def _Request() -> SweepRun:
    """The run options of this benchmark's flags as the engine's request
    (mongobench.sweep.request.SweepRun), validated; its errors name the flags."""
    key = repr([f.value for f in _RUN_FLAGS])
    if key not in _REQUESTS:
        try:
            _REQUESTS[key] = SweepRun(
                sizes_mb=sizes_option(_SIZES.value, pkb_flag("sizes_mb")),
                phases=phases_option(_PHASES.value),
                operation_count=_OPERATIONS.value,
                threads=_THREADS.value,
                memory_mb=_MEMORY_MB.value,
                max_seconds=_MAX_SECONDS.value,
                phase_timeout=_PHASE_TIMEOUT.value,
                load_batchsize=_LOAD_BATCHSIZE.value,
                table=_TABLE.value,
                keep_data=_KEEP_DATA.value,
                repeats=_REPEATS.value,
                status_interval_s=_STATUS_INTERVAL.value,
            ).validate(pkb_flag)
        except ValueError as e:  # RequestError
            raise errors.Config.InvalidValue(str(e)) from None
    return _REQUESTS[key]


def _Estimate(request, uri):
    rates = sweep_estimate.rates_for(uri)
    return sweep_estimate.estimate(request.steps(), request.phase_list, rates, request.repeats)


@dataclasses.dataclass
class SweepState:
    """What Prepare leaves for Run and Cleanup (benchmark_spec.mongobench_sweep). No secret:
    PKB pickles the benchmark spec to disk."""

    request: SweepRun
    uri_files: list[str] = dataclasses.field(default_factory=list)  # target.uri per client
    engine_dir: str | None = None  # the engine on the first client (it drops the collection)
    memory: tuple[int, str] | None = None  # (bytes, where from) of the data's machine
    server: dict | None = None  # server_version, storage_engine (the last drop's)
    failed: list[str] = dataclasses.field(default_factory=list)  # Run's failed phases


def _ReadUri():
    return _TARGET.Read()


def _Clients(benchmark_spec):
    return benchmark_spec.vm_groups["clients"]


def _Drop(vm, state: SweepState):
    """Drops the collection with the engine on the first client `vm`; returns the server's
    memory in bytes when its hostInfo says (its version and storage engine go to the state)."""
    stdout, _ = vm.RobustRemoteCommand(
        shipping.sweep_drop_command(state.engine_dir, state.uri_files[0], state.request.table)
    )
    memory = runner.parse_drop_output(stdout)
    state.server = runner.parse_drop_server(stdout)
    return memory


# SIGTERM to PKB is handled like Ctrl-C: Cleanup runs (PKB alone would end at once).
@interrupt.sigterm_as_ctrl_c()
def Prepare(benchmark_spec: bm_spec.BenchmarkSpec) -> None:
    # PKB calls Cleanup on cloud VMs, and after a failed stage, only with this flag.
    benchmark_spec.always_call_cleanup = True
    clients = _Clients(benchmark_spec)
    for vm in clients:
        mongobench_host.ProtectStaticVm(vm)
    state = SweepState(request=_Request())  # the run options, checked in CheckPrerequisites
    benchmark_spec.mongobench_sweep = state
    uri = _ReadUri()
    for vm in clients:
        vm.Install("mongobench_ycsb")
        workdir = mongobench_ycsb.Deploy(vm)
        path = posixpath.join(workdir, "target.uri")
        mongobench_engine.PushSecret(vm, path, uri + "\n")
        state.uri_files.append(path)
    first = clients[0]
    state.engine_dir = mongobench_engine.Deploy(first)
    server_memory = _Drop(first, state)  # also removes what an earlier run may have left
    given, source = state.request.memory
    if given:
        state.memory = (given, source)
    elif server_memory:
        state.memory = (server_memory, "server hostInfo")
    else:
        state.memory = (first.total_memory_kb * 1024, "client VM")


def _Outputs(vm, procs, states, local_dir, timeout_s):
    """(outcome, histograms) of each process, judged by sweep_samples.measure_processes."""
    outputs = mongobench_ycsb.Fetch(vm, procs, local_dir)
    out = []
    for p in procs:
        o = outputs.get(p.name)
        st = states.get(p.name)
        outcome = ycsb_parse.Outcome(
            o.text if o else "",
            o.returncode if o else None,
            running=st is not None and st.running,
            timeout_s=timeout_s,
        )
        out.append((outcome, dict(o.histograms) if o else {}))
    return out


def _RunPhase(clients, state: SweepState, step, phase, base_md, local_dir):
    request = state.request
    n = len(clients)
    names = [f"s{step.records}-{phase.name}-c{i}" for i in range(n)]
    prefixes = None
    if n > 1:
        prefixes = [
            posixpath.join(mongobench_ycsb.RunDir(vm), name + "-")
            for vm, name in zip(clients, names, strict=True)
        ]
    props = sweep_properties.process_properties(step, phase, request, state.uri_files, prefixes)
    used = list(zip(clients, names, props, strict=False))  # empty shares are the last ones
    started = []
    try:
        for vm, name, text in used:
            spec = mongobench_ycsb.ProcessSpec(name, phase.ycsb_phase, text)
            started.append((vm, mongobench_ycsb.Start(vm, [spec])))
        results = []
        for vm, procs in started:  # status lines reach pkb.log while Wait polls
            states = mongobench_ycsb.Wait(vm, procs, request.phase_timeout)
            if any(s.running for s in states.values()):
                mongobench_ycsb.Stop(vm, procs)
            results += _Outputs(vm, procs, states, local_dir, request.phase_timeout)
    finally:
        for vm, procs in started:  # only ours, by PID; a no-op for finished ones
            mongobench_ycsb.Stop(vm, procs)
    uri = _ReadUri()
    outcomes = [dataclasses.replace(o, text=redact.text(o.text, uri)) for o, _ in results]
    hists = [h for _, h in results] if n > 1 else None
    return sweep_samples.measure_processes(
        step, phase, outcomes, base_md, hists, status_interval_s=request.status_interval_s
    )


def _Log(message, problem=False):
    (logging.error if problem else logging.info)("mongodb_ycsb_sweep: %s", message)


@interrupt.sigterm_as_ctrl_c()
def Run(benchmark_spec: bm_spec.BenchmarkSpec) -> list[sample.Sample]:
    clients = _Clients(benchmark_spec)
    state: SweepState = benchmark_spec.mongobench_sweep
    request = state.request
    steps = request.steps(*state.memory)
    base_md = sweep_samples.base_metadata(steps, request.threads, state.server)
    base_md.update(client_vms=len(clients), table=request.table)
    base_md.update(_Estimate(request, _ReadUri()).metadata())  # what CheckPrerequisites logged
    local_dir = os.path.join(vm_util.GetTempDir(), "ycsb-sweep")
    hooks = runner.SweepHooks(
        drop=lambda: _Drop(clients[0], state),
        drop_errors=(errors.VirtualMachine.RemoteCommandError, ValueError),
        describe_error=lambda e: str(e)[-500:],
        run_phase=lambda step, phase: _RunPhase(clients, state, step, phase, base_md, local_dir),
        log=_Log,
    )
    samples = runner.sweep_steps(request, steps, base_md, hooks)
    logging.info("mongodb_ycsb_sweep: YCSB outputs kept in %s", local_dir)
    # Cleanup turns failures into a FAILED status after these samples are kept.
    state.failed = [
        f"{s['metadata']['size_label']} {s['metadata']['phase']}: {s['metadata']['error'][:300]}"
        for s in sweep_samples.failed(samples)
    ]
    return [mongobench_engine.ToSample(s) for s in samples]


def Cleanup(benchmark_spec: bm_spec.BenchmarkSpec) -> None:
    """Stops our YCSB processes and removes our directories on every client, as far as
    Prepare got; then fails the run when a phase failed or something could not be undone
    (stages.Cleanup: once)."""
    state = getattr(benchmark_spec, "mongobench_sweep", None)
    if state is None:  # Prepare never started
        return
    failed = state.failed
    failure = None
    if failed:
        failure = (
            f'{len(failed)} phase(s) failed (their samples are named "Phase Failed"): '
            + "; ".join(failed)
        )
    stages.Cleanup(
        benchmark_spec,
        BENCHMARK_NAME,
        lambda keep: stages.Undo(_CleanupSteps(benchmark_spec, keep)),
        failure=failure,
    )


def _CleanupSteps(benchmark_spec, keep):
    clients = _Clients(benchmark_spec)
    steps = []
    for vm in clients:
        steps.append((f"stop YCSB on {vm.name}", lambda vm=vm: mongobench_ycsb.StopAll(vm)))
        if keep:  # stopped first (complete outputs), kept before anything is deleted
            steps.append(stages.DiagnosticsStep(vm, mongobench_ycsb.DiagnosticPaths))
        steps.append((f"remove YCSB on {vm.name}", lambda vm=vm: mongobench_ycsb.Remove(vm)))
    steps.append(
        (f"remove the engine on {clients[0].name}", lambda: mongobench_engine.Remove(clients[0]))
    )
    return steps
