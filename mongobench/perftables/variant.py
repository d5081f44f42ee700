"""One Performance Tables variant, end to end: untimed preparation (pymongo), serverStatus
before, OS and serverStatus sampling, the timed phase of `threads` clients, serverStatus after,
the audit of acknowledged writes. The timed phase runs on the multiplexed driver (virtual
clients, one operation in flight each, on event loops in several processes: driver.procs)
unless the run asks for the pymongo reference path (one thread per client) or the variant is
the pipelined harness-cost experiment (checks.timed_path)."""

from __future__ import annotations

import functools
import threading
import time
import traceback

from pymongo.errors import PyMongoError

from mongobench.core import redact
from mongobench.driver import base, connection, ops, procs, sources
from mongobench.driver.base import ThreadStats
from mongobench.driver.catalog import WORKLOADS
from mongobench.measure import ossampler, serverstats
from mongobench.perftables import checks
from mongobench.perftables import experiments as exp_mod
from mongobench.perftables.request import PerftablesRun
from mongobench.perftables.result import ABSENT, VariantResult
from mongobench.perftables.target import reachable, server_status

# Seconds between two OS readings (and serverStatus signal readings) in a timed phase.
OS_INTERVAL_S = 1.0


def open_loop_figures(settings: dict, stats: ThreadStats, duration_s: float) -> dict | None:
    """An open-loop variant's rate against its target (None in a closed loop)."""
    rate = settings.get("target_ops_per_s")
    if not rate:
        return None
    achieved = sum(stats.ops.values()) / max(duration_s, 1e-9)
    return {
        "target_ops_per_s": float(rate),
        "achieved_ops_per_s": achieved,
        "achieved_share": achieved / float(rate),
        # operations the schedule had due by the end that no client could begin
        "owed_ops": stats.counters.get("open_loop_owed_ops", 0),
    }


def run_variant(
    client,
    experiment: exp_mod.Experiment,
    variant: exp_mod.Variant,
    request: PerftablesRun,
    uri: str | None = None,
    log=print,
    on_phase=None,
    leader=None,
) -> VariantResult:
    """One variant, end to end; returns its raw result (result.VariantResult).

    Preparation and the measurements around the timed phase go through
    pymongo (`client`); the timed phase through `checks.timed_path`. `request` (a
    request.PerftablesRun) gives the run options: `processes`, the multiplexed path's
    worker processes (default: this machine's CPUs); `reply_timeout`, after which the
    multiplexed timed phase fails its clients when no reply at all came (the control path's
    bound is `client`'s socketTimeoutMS, see runner.run); `interval_s`, the timed phase's
    throughput, errors and latency per interval of that many seconds in the result's
    `series` (core.series; 0: none); database, os_path, max_seconds, client_path.
    `on_phase(name, planned_s)` is told when prepare, timed and finish begin.
    `leader`: a coordination.Leader when several client VMs share timed phases.
    """
    database, max_seconds, client_path = request.database, request.max_seconds, request.client_path
    interval_s = request.interval_s or None
    os_path, os_interval = request.sampler_path, OS_INTERVAL_S
    on_phase = on_phase or (lambda name, planned_s=None: None)
    workload_cls = WORKLOADS.get(experiment.workload)
    if workload_cls is None:
        raise exp_mod.ExperimentError(
            f"experiment {experiment.name}: unknown workload {experiment.workload!r}"
        )
    path = checks.timed_path(experiment.workload, variant.settings, client_path)
    if path == "multiplexed" and not uri:
        raise ValueError("the multiplexed client path needs the target URI")
    db = client[database]
    workload = workload_cls(db, variant.settings, log=log)
    workload.uri = uri
    on_phase("prepare")
    prep_started = time.time()
    prepared = workload.prepare()
    prep_s = time.time() - prep_started
    try:  # outside the timed window, like the audit
        baseline = base.audit_baseline(workload)
    except PyMongoError:  # a server that went away fails the timed phase, in its words
        baseline = None
    nthreads = int(variant.settings.get("threads", 1))

    status_before = server_status(client)
    before = serverstats.extract(status_before)
    os_sampler = ossampler.Sampler(os_path, os_interval) if os_path is not False else None
    # serverStatus's saturation signals over the phase (measure.bottleneck judges them)
    rs = client.topology_description.topology_type_name == "ReplicaSetWithPrimary"
    signals = serverstats.SignalSampler(client, os_interval, replica_set=rs)
    sampler = _PhaseSamplers(os_sampler, signals)
    planned = variant.settings.get("duration_s")
    on_phase("timed", min(float(planned), max_seconds or float("inf")) if planned else None)
    try:
        if path == "multiplexed":
            timed = _timed_multiplexed(
                uri, request, experiment.workload, workload, nthreads, sampler, leader
            )
        else:
            timed = _timed_threads(workload, nthreads, sampler, max_seconds, interval_s)
    except BaseException:
        sampler.stop()  # started: its threads must end with the variant
        raise
    os_summary, server_signals = sampler.stop()
    for vm in timed.get("client_per_vm") or ():
        if vm["late_s"] > 0:  # its clients missed the common start: not all ran together
            log(
                f"warning: {experiment.name} [{variant.label}]: client VM {vm['vm']} started"
                f" {vm['late_s']:.2f} s after the common start (clocks out of step, or it read"
                " the start time late); the sample says client_vm_late_s"
            )
    on_phase("finish")
    failures = timed.pop("failures")
    # Failed operations: is the server still there? A lost one has nothing to finish or to
    # report (each call would wait for server selection); the caller marks the fragment.
    lost = reachable(client) if sum(timed["stats"].errors.values()) else None
    finished = workload.finish() if not failures and not lost else {}
    status_after = server_status(client) if not lost else None
    after = serverstats.extract(status_after)
    if failures:
        raise RuntimeError(
            f"{experiment.name} [{variant.label}]: client thread failed:\n{failures[0]}"
        )

    total = timed.pop("stats")
    open_loop = open_loop_figures(variant.settings, total, timed["duration_s"])
    if status_after is None and sum(total.errors.values()):
        baseline = None  # the server did not answer serverStatus after errors: no audit wait
    try:
        audit = base.audit(workload, baseline, total)
    except PyMongoError as e:
        audit = None
        log(f"warning: {experiment.name} [{variant.label}]: the audit of acknowledged writes"
            f" could not read the server: {redact.text(str(e), uri or '')[:200]}")  # fmt: skip
    if audit and audit["lost_writes"]:
        log(
            f"warning: {experiment.name} [{variant.label}]: {audit['lost_writes']} acknowledged"
            f" writes are not on the server ({audit['check']}: expected {audit['expected']},"
            f" found {audit['found']}); the samples say lost_writes"
        )
    timed.setdefault("client_vms", 1)
    return VariantResult(
        status="ok",
        experiment=experiment.name,
        workload=experiment.workload,
        variant_index=variant.index,
        label=variant.label,
        params=variant.params,
        settings=variant.settings,
        prepared=prepared,
        prepare_s=prep_s,
        planned=workload.planned(),
        **timed,  # start, duration_s, stopped_early, client_process_cpu_s, client_*
        threads=nthreads,
        client_path=path,
        ops=dict(total.ops),
        docs=total.docs,
        bytes=total.bytes,
        errors=dict(total.errors),
        had_errors=bool(sum(total.errors.values())),
        server_lost=lost or ABSENT,
        counters=dict(total.counters),
        finished=finished,
        audit=audit,
        error_samples=total.error_samples,
        latency=total.latency.encode(),  # open loop: from the intended send times
        open_loop=open_loop or ABSENT,
        service_latency=total.service.encode() if open_loop else ABSENT,
        server_before=before,
        # the connections before the timed phase: the next variant's quiet check (quiesce)
        connections_before=((status_before or {}).get("connections") or {}).get("current"),
        server_after=after,
        server_info=serverstats.server_info(status_after),
        os_client=os_summary,
        server_signals=server_signals,
        # per interval of the timed phase, on the common clock (core.series)
        series=(
            total.series.summary(timed["start"], timed["duration_s"])
            if total.series is not None
            else None
        ),
        sampler_cpu_s=os_sampler.cpu_s if os_sampler else None,
        os_client_device=os_sampler.device_label if os_sampler else None,
    )


class _PhaseSamplers:
    """The OS sampler (or None) and the serverStatus signal sampler of one timed phase,
    started together at its start; stop() -> (OS summary, signals), each None when the
    phase never started."""

    def __init__(self, os_sampler, signals):
        self.os, self.signals, self.started = os_sampler, signals, False

    def start(self) -> None:
        self.started = True
        if self.os:
            self.os.start()
        self.signals.start()

    def stop(self) -> tuple:
        if not self.started:
            return None, None
        self.started = False
        return (self.os.stop() if self.os else None), self.signals.stop()


def _timed_threads(workload, nthreads: int, sampler, max_seconds, interval_s=None) -> dict:
    """The timed phase in `nthreads` threads of this process (pymongo, pipelined). Each
    thread sets up its collection handles, documents and connections, then waits at the
    workload's gate (Workload.ready); the window starts when the last one is ready."""
    stop = threading.Event()
    stats = [ThreadStats() for _ in range(nthreads)]
    failures = []
    mark, opened = {}, threading.Event()

    def start():  # the barrier's action: run by the last thread to arrive, before any goes
        if sampler:
            sampler.start()
        mark.update(started=time.time(), cpu0=time.process_time(), t0=time.perf_counter())
        for st in stats:  # each thread's intervals, from the common start
            st.record_intervals(interval_s, mark["t0"], tick=True)
        opened.set()

    gate, local, walls = threading.Barrier(nthreads, action=start), threading.local(), {}

    def ready():
        if getattr(local, "t0", None) is None:
            gate.wait()  # BrokenBarrierError: a thread failed before it was ready
            local.t0 = time.perf_counter()

    def body(i):
        local.t0 = None
        try:
            workload.worker(i, nthreads, stats[i], stop)
            ready()  # a worker that never called it: its whole run was timed (not silent)
            walls[i] = time.perf_counter() - local.t0
            stats[i].close_intervals()  # its last counts: in its last interval
        except threading.BrokenBarrierError:
            pass  # another thread failed before the start: its failure is reported
        except Exception:  # noqa: BLE001 - a crashed thread fails the variant, loudly
            failures.append(traceback.format_exc())
            stop.set()
            gate.abort()

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(nthreads)]
    workload.gate = ready
    try:
        for t in threads:
            t.start()
        while not opened.wait(0.05):
            if gate.broken or not any(t.is_alive() for t in threads):
                break
        if not opened.is_set():  # failed before the start: nothing was timed
            for t in threads:
                t.join()
            start()
        t0 = mark["t0"]
        deadline = None if max_seconds is None else t0 + max_seconds
        for t in threads:
            t.join(None if deadline is None else max(0.0, deadline - time.perf_counter()))
            if deadline is not None and time.perf_counter() >= deadline:
                stop.set()
        for t in threads:
            t.join()
        duration = time.perf_counter() - t0
    except KeyboardInterrupt:  # SIGTERM or SIGINT: the client threads stop with the variant
        stop.set()
        gate.abort()
        raise
    finally:
        workload.gate = None
    total = ThreadStats()
    for s in stats:
        total.merge(s)
    return {
        "stats": total,
        "failures": failures,
        "start": mark["started"],
        "duration_s": duration,
        "stopped_early": stop.is_set(),
        "client_process_cpu_s": time.process_time() - mark["cpu0"],
        "client_processes": 1,
        "client_cores": 1,  # one Python process: one core (the GIL)
        "client_worker_wall_s": max(walls.values(), default=0.0),
    }


def _timed_multiplexed(uri, request, name, workload, nthreads, sampler, leader=None):
    """The timed phase as `nthreads` virtual clients over worker processes (and over
    every client VM with a coordination `leader`); the client CPU is the workers'
    (over their timed phases) plus this process's from the common start to the last
    worker's result (procs.Result.parent_cpu_s). `request`: the run options (database,
    max_seconds, processes, reply_timeout, interval_s; see run_variant)."""
    database, max_seconds, processes = request.database, request.max_seconds, request.processes
    reply_timeout = request.reply_timeout or checks.DEFAULT_REPLY_TIMEOUT_S
    interval_s = request.interval_s or None
    s = workload.s
    sources.check_bounds(name, workload.declare(), s)
    wc = ops.write_concern(s.get("write_concern"), connection.options(uri).write_concern)
    make = functools.partial(sources.make, name, s, database, wc)
    duration = float(s["duration_s"]) if s.get("duration_s") else None
    cap = max_seconds if max_seconds and (duration is None or max_seconds < duration) else None

    def on_ready():
        if sampler:
            sampler.start()

    vms, per_vm = 1, None
    phase = procs.Phase(
        total=s.get("total_ops"),
        duration=cap or duration,
        timeout=reply_timeout,
        interval=interval_s,
    )
    if leader is not None and leader.vms > 1:
        res, cores, per_vm = leader.timed(
            uri, name, s, database, nthreads, processes, phase, on_ready
        )
        vms = leader.vms
    else:
        res = procs.run(uri, make, nthreads, processes, phase, on_ready=on_ready)
        cores = min(res.processes, procs.default_processes())
    return {
        "stats": res.stats,
        "failures": [],
        "start": res.start,  # the common start (of every client VM)
        "duration_s": res.wall_s,
        "stopped_early": cap is not None and res.wall_s >= cap,
        "client_process_cpu_s": res.cpu_s + res.parent_cpu_s,
        "client_processes": res.processes,
        "client_cores": cores,
        "client_per_process": res.per_process,
        "client_worker_wall_s": res.worker_wall_s,
        "client_vms": vms,
        **({"client_per_vm": per_vm} if per_vm else {}),
        # the loop the workers ran (driver.native) and their sources, over every client VM
        "client_loop": procs.kinds(per_vm or res.per_process),
        "client_sources": procs.kinds(per_vm or res.per_process, "sources"),
    }
