"""Runs Performance Tables experiments against one MongoDB URI.

Per variant: untimed preparation (pymongo), serverStatus before, OS sampling,
the timed phase of `threads` clients, serverStatus after. The timed phase runs
on the multiplexed driver (virtual clients, one operation in flight each, on
event loops in several processes: driver.procs) unless the run asks for the
pymongo reference path (one thread per client) or the variant is the
pipelined harness-cost experiment. The raw result of each
variant (counts, encoded latency histograms, counters, OS readings) is written
to the output file as soon as the variant ends, so a failure later loses
nothing. `mongobench.results` turns raw results into samples and tables.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import ipaddress
import threading
import time
import traceback
import typing

import pymongo
from pymongo import MongoClient
from pymongo.errors import (
    ConfigurationError,
    ConnectionFailure,
    NetworkTimeout,
    OperationFailure,
    ProtocolError,
    PyMongoError,
    ServerSelectionTimeoutError,
)

from mongobench.core import interrupt, redact
from mongobench.core.files import write_json_atomic
from mongobench.core.poll import PollTimeout, poll_until
from mongobench.driver import base, connection, ops, procs, sources
from mongobench.driver.base import ThreadStats
from mongobench.driver.catalog import WORKLOADS
from mongobench.measure import ossampler, serverstats
from mongobench.perftables import (
    checks,
    coordination,
    identity,
    probe,
    progress,
    quiesce,
    ratesteps,
)
from mongobench.perftables import experiments as exp_mod
from mongobench.perftables.result import ABSENT, RESULT_SCHEMA, VariantResult
from mongobench.remote import provenance

if typing.TYPE_CHECKING:
    from mongobench.perftables.request import PerftablesRun

# After a variant with errors, how long the server has to answer a ping before the
# remaining variants are failed without running (each would wait for server
# selection, 30 s by default, for a server that is gone).
PING_TIMEOUT_S = 5.0
# After the first contact (which gets the URI's, or pymongo's 30 s, server selection), the
# run's client waits this long for a server to select: a server that died mid-variant
# costs seconds, not 30 s per operation and again for the finish. A URI that sets
# serverSelectionTimeoutMS keeps its own.
RUN_SELECTION_MS = 5000
# Seconds between two OS readings (and serverStatus signal readings) in a timed phase.
OS_INTERVAL_S = 1.0


def reason(e: BaseException, uri: str = "", gone: bool = False) -> str:
    """One line saying why the target cannot be used, with no secret in it
    (`gone`: a connection failure means the server cannot be reached any more)."""
    if isinstance(e, NetworkTimeout) and not isinstance(e, ServerSelectionTimeoutError):
        why = f"no reply from the server: {str(e).split(' (configured timeouts', 1)[0]}"
    elif isinstance(e, ServerSelectionTimeoutError) or (gone and isinstance(e, ConnectionFailure)):
        # "host:port: [Errno 111] Connection refused (configured timeouts: ...), Timeout:
        # 30s, Topology Description: <...>": the first part is the reason.
        text = str(e).split(", Timeout:", 1)[0].split(" (configured timeouts", 1)[0]
        why = f"server unreachable: {text}"
    elif isinstance(e, ProtocolError):
        why = str(e)
    elif isinstance(e, OperationFailure) and e.code == 13:
        why = str(e)
    elif isinstance(e, OperationFailure) and (e.code == 18 or "auth" in str(e).lower()):
        why = f"authentication failed: {(e.details or {}).get('errmsg') or e}"
    elif isinstance(e, ConfigurationError):
        why = f"bad connection string: {e}"
    elif isinstance(e, ConnectionFailure):
        why = f"connection failed: {e}"
    else:
        why = f"{type(e).__name__}: {e}"
    return " ".join(redact.text(why, uri).split())[:200]


def reachable(client) -> str | None:
    """None when the server answers a ping within PING_TIMEOUT_S, else the reason.

    A pooled connection that broke says only that the server went away at some
    point (the multiplexed path leaves this client idle during the timed phase):
    the second ping opens a new connection and says whether it is there now."""
    for attempt in (1, 2):
        try:
            with pymongo.timeout(PING_TIMEOUT_S):
                client.admin.command("ping")
            return None
        except ServerSelectionTimeoutError as e:
            return reason(e)
        except ConnectionFailure as e:
            if attempt == 2:
                return reason(e, gone=True)
        except PyMongoError as e:
            return reason(e)
    return None


def connect(uri: str, app_name: str = "mongobench", **kwargs) -> MongoClient:
    # One connection per client thread, plus head-room for the monitor.
    return MongoClient(uri, appname=app_name, **kwargs)


def on_this_host(client) -> bool:
    """Whether every server the client found listens on a loopback address: the client
    then shares the server's host (the CLI against a local server, the test bed). PKB's
    benchmark decides it for VMs (mongodb_perftables_benchmark: the hosts' boot ids)."""
    hosts = [h for h, _ in client.nodes]
    if not hosts:
        return False
    for h in hosts:
        try:
            if not (h == "localhost" or ipaddress.ip_address(h).is_loopback):
                return False
        except ValueError:
            return False
    return True


def server_status(client) -> dict | None:
    try:
        return client.admin.command("serverStatus")
    except PyMongoError:
        return None


def topology(client) -> str:
    _first_contact(client)
    client.admin.command("ping")  # forces discovery
    return client.topology_description.topology_type_name


def _first_contact(client, timeout_s: float = 10.0) -> None:
    """Fails at once, in words, when every seed answered in another protocol (a URI
    naming an sshd or HTTP port): pymongo would retry for its server selection timeout,
    then say only "Got response id ..."."""

    def protocol_errors():
        seeds = list(client.topology_description.server_descriptions().values())
        if any(sd.server_type_name != "Unknown" for sd in seeds):
            return True, []  # one answered as MongoDB: the ping decides
        bad = [sd for sd in seeds if isinstance(sd.error, ProtocolError)]
        return bool(seeds) and len(bad) == len(seeds), bad

    try:
        bad = poll_until(protocol_errors, timeout=timeout_s, interval=0.1)
    except PollTimeout:
        return  # still trying (a slow or starting server): the ping says why, if anything
    if bad:
        where = ", ".join(f"{h}:{p}" for h, p in (sd.address for sd in bad))
        raise ProtocolError(
            f"{where} did not answer in MongoDB's wire protocol: not a MongoDB port?"
        )


def first_use(client, auth_retry_s: float = 0.0, log=print, sleep=time.sleep, clock=time.monotonic):
    """The deployment's topology and version, on the first connection. With `auth_retry_s`,
    an authentication failure (code 18) is retried for that long: a database user that was
    just created (Atlas applies users asynchronously) may not be known to every member yet."""
    deadline = clock() + auth_retry_s
    while True:
        try:
            return topology(client), client.server_info().get("version", "unknown")
        except OperationFailure as e:
            left = deadline - clock()
            if e.code != 18 or left <= 0:
                raise
            log(f"authentication failed; retrying for up to {left:.0f} s more (a new user"
                " may not be applied yet)")  # fmt: skip
            sleep(min(5.0, left))


def check_access(client, database: str, uri: str) -> None:
    """Fails once, before the first variant, when the server needs credentials the URI
    lacks (or the user may not use `database`), instead of every variant failing alone."""
    try:
        client[database].list_collection_names()
    except OperationFailure as e:
        if e.code in (13, 18) or "auth" in str(e).lower():
            has_user = bool(connection.options(uri).username)
            hint = "" if has_user else "; the URI names no user: add user:password@"
            raise OperationFailure(
                f"not authorized on database {database!r}: {e.details.get('errmsg', e)}{hint}",
                code=13,
            ) from None
        raise


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
    bound is `client`'s socketTimeoutMS, see run); `interval_s`, the timed phase's
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
    (over their timed phases) plus this process's. `request`: the run options (database,
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
    mark = {}

    def on_ready():
        if sampler:
            sampler.start()
        mark.update(start=time.time(), cpu0=time.process_time())

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
    parent_cpu = time.process_time() - mark["cpu0"]
    return {
        "stats": res.stats,
        "failures": [],
        "start": res.start,  # the common start (of every client VM)
        "duration_s": res.wall_s,
        "stopped_early": cap is not None and res.wall_s >= cap,
        "client_process_cpu_s": res.cpu_s + parent_cpu,
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


def run(request: PerftablesRun, uri: str, log=print, bar: bool = False, estimate=None) -> dict:
    """Every variant `request` (a validated request.PerftablesRun, for_target `uri`)
    plans; results go to its `out` file after each variant.

    A failed variant is recorded with its error and the run goes on; the
    caller decides how to fail (the CLI exits non-zero). An `[i/N]` line is
    logged as each variant ends, and a heartbeat every 30 s while one runs
    (`bar`: a progress bar too, for a terminal). The request's `reply_timeout`, resolved
    here (see checks.reply_timeout), bounds every wait for the server (every pymongo call gets it
    as socketTimeoutMS, the multiplexed timed phase as its no-reply limit). `repeats`: each
    variant runs that many times, interleaved (see schedule); the samples fold them into a
    mean with its 95 % interval (core.repeats). `auth_retry_s`: see first_use.
    `estimate`: the plan's estimate (its metadata: estimated_seconds, estimated_data_mb,
    estimate_rates), kept in the results and on every sample beside the measured figures.
    `rate_steps` (ratesteps.parse): each variant runs closed loop, then in an open loop at
    each step's rate (a curve). `interval_s`: seconds of each variant's per-interval
    figures (see run_variant; 0: none).
    """
    if not request.validated:
        request.validate()
    request = request.for_target(uri, log)
    plans = request.plans  # planned once (validate checked the options)
    rate_steps = request.steps
    database, overrides, client_path = request.database, request.overrides, request.client_path
    bound, bound_from = checks.reply_timeout(uri, request.reply_timeout)
    if bound_from != "uri":  # the URI's own timeoutMS/socketTimeoutMS is what the user asked
        log(f"reply timeout: {bound:g} s ({bound_from}; --reply-timeout or the URI's"
            " socketTimeoutMS/timeoutMS sets it)")  # fmt: skip
    # every variant waits this long for a reply (run_variant)
    resolved = dataclasses.replace(request, reply_timeout=bound)
    max_threads = max((int(v.settings.get("threads", 1)) for _, vs in plans for v in vs), default=1)
    target = redact.uri(uri)
    try:
        # One pooled connection per client thread, or threads queue for connections.
        client = connect(
            uri, maxPoolSize=max(100, max_threads + 10), socketTimeoutMS=int(bound * 1000)
        )
    except (PyMongoError, ValueError) as e:
        raise redact.TargetError(f"{target}: {reason(e, uri)}") from None
    try:
        try:
            kind, version = first_use(client, request.auth_retry_s, log)
            check_access(client, database, uri)
        except PyMongoError as e:
            raise redact.TargetError(f"{target}: {reason(e, uri)}") from None
        shared = on_this_host(client)  # the servers it found (a new client knows none yet)
        if "serverselectiontimeoutms=" not in uri.partition("?")[2].lower():
            client.close()
            client = connect(
                uri,
                maxPoolSize=max(100, max_threads + 10),
                serverSelectionTimeoutMS=RUN_SELECTION_MS,
                socketTimeoutMS=int(bound * 1000),
            )
        server, caps = _probe(client, database, uri, log)
        doc = {
            "schema": RESULT_SCHEMA,
            "tool": "mongobench perftables",
            "scale": str(request.scale),
            "scale_factor": exp_mod.parse_scale(request.scale),
            "database": database,
            "topology": kind,
            "server_version": version,
            "reply_timeout_s": bound,
            "server": server,  # product, its version, backend, the MongoDB it claims
            "capabilities": caps,
            "target": target,
            # a server on this machine: client and server CPU are one (measure.bottleneck)
            "shared_host": shared,
            "client_path": client_path,
            "client_vms": request.client_vms,
            "interval_s": request.interval_s or None,
            "repeats": request.repeats,
            # --set (and the URI's write concern): what `compare` checks runs agree on
            "overrides": {k: overrides[k] for k in sorted(overrides or {})},
            "provenance": provenance.engine(),  # this client's engine, Python, pymongo
            "estimate": dict(estimate or {}),
            **({"rate_steps": [st.name for st in rate_steps]} if rate_steps else {}),
            "results": [],
        }
        out_path, repeats = request.out, request.repeats
        write_json_atomic(out_path, doc)
        order = schedule(plans, repeats)
        runs = len(order) * (1 + len(rate_steps or ()))
        bar_ = progress.terminal_bar(runs) if bar else None
        track = progress.Progress(runs, log, bar=bar_)
        leader = (
            coordination.Leader(client, request.run_id, request.client_vms, on_phase=track.phase)
            if request.client_vms > 1
            else None
        )
        interrupted = False
        try:
            _run_plans(client, resolved, uri, order, doc, _Run(target, track, log, caps, leader))
        except KeyboardInterrupt as e:  # the partial results are written; the caller says so
            e.run, interrupted = doc, True
            raise
        finally:
            track.close()
            if leader is not None:
                # Interrupted: tell the followers, do not wait for them (PKB stops them)
                leader.finish(timeout=0.0 if interrupted else 30.0)
        return doc
    finally:
        client.close()


def schedule(plans, repeats: int = 1) -> list[tuple]:
    """(experiment, variant, repeat) in run order. With repeats, every variant runs once per
    round and the rounds alternate direction (a b c, c b a, a b c): a drift over the run
    (a warming cache, a filling disk, a noisy neighbour) does not favour the early ones."""
    flat = [(e, v) for e, vs in plans for v in vs]
    out = []
    for r in range(repeats):
        out += [(e, v, r) for e, v in (flat if r % 2 == 0 else reversed(flat))]
    return out


def _probe(client, database: str, uri: str, log) -> tuple[dict, dict]:
    """The server's identity and capabilities (probe), said once in the log."""
    answers = probe.gather(client)
    server = probe.server_identity(client, answers)
    caps = probe.capabilities(client, database, answers, uri)
    if server["server_product"] == "FerretDB" and caps.get("backend"):
        server["server_backend"] = caps["backend"]
    caps.pop("explain", None)
    log(f"server: {identity.describe(server)}")
    if caps.get("lacks"):
        log(f"server lacks: {', '.join(caps['lacks'])} (variants that need them are n/a)")
    return server, caps


class _Run(typing.NamedTuple):
    """What every variant of a run shares besides its request: the redacted target, the
    progress, the log, the server's capabilities (probe) and the coordination leader."""

    target: str
    track: progress.Progress
    log: typing.Callable
    caps: dict | None
    leader: coordination.Leader | None


def _run_plans(client, request: PerftablesRun, uri: str, order, doc, run: _Run):
    """The variants in `order` (see schedule); each result is written as soon as it
    exists. A variant that needs a feature the server lacks (`run.caps`, see probe) is n/a,
    not run. The request's rate steps: after each variant, its open-loop steps at the rates
    its closed-loop throughput gives."""
    target, track, log, caps = run.target, run.track, run.log, run.caps
    repeats, out_path, steps = request.repeats, request.out, request.steps
    gone = None  # why the server cannot be reached any more
    ran = None  # the last variant that ran: the next one waits until its work is done
    done = []  # VariantResults in run order: doc["results"] holds their dicts

    def write():
        doc["results"] = [r.to_dict() for r in done]
        write_json_atomic(out_path, doc)

    queue = collections.deque((e, v, r, 0, None) for e, v, r in order)
    while queue:
        experiment, v, r, step, closed = queue.popleft()
        name = f"{experiment.name}/{v.label}"
        track.begin(name if repeats == 1 else f"{name} (repeat {r + 1}/{repeats})")
        missing = probe.lacking(v.settings, caps)
        if gone:
            res = _failed(experiment, v, f"not run: {gone}")
            track.end(res.error)
        elif missing:
            res = _not_applicable(experiment, v, f"server lacks {', '.join(missing)}")
            track.end(f"n/a ({res.reason})")
        else:
            quiet = _quiet(client, request.database, ran, request.reply_timeout, name, log)
            ran = {}
            log(track.line("running"))
            try:
                ran = res = run_variant(
                    client, experiment, v, request, uri, log, track.phase, run.leader
                )
                summary = _one_line(res)
                if not res.acknowledged:
                    # Nothing was acknowledged: there is no measurement, only errors.
                    res.status, res.error = "failed", redact.text(_nothing_acknowledged(res), uri)
                    summary = f"FAILED {res.error}"
            except NetworkTimeout:  # a stuck server: one line, the bound named
                why = (
                    f"no reply from the server in {request.reply_timeout:g} s (the reply timeout:"
                    f" --reply-timeout or the URI's socketTimeoutMS) during {track.current_phase}"
                )
                res = _failed(experiment, v, redact.text(why, uri))
                summary = f"FAILED {res.error}"
            except Exception as e:  # noqa: BLE001 - recorded, reported, fails the run
                res = _failed(experiment, v, redact.text(f"{type(e).__name__}: {e}", uri))
                summary = f"FAILED {res.error}"
            except KeyboardInterrupt as e:  # SIGTERM or SIGINT: kept, marked, and stop
                sig = interrupt.of(e)
                res = _failed(experiment, v, f"interrupted by {sig.name}")
                res.interrupted, res.fails_run = sig.name, res.error
                if repeats > 1:
                    res.repeat, res.repeats = r, repeats
                done.append(res)
                doc["interrupted"] = f"{sig.name} during {experiment.name} [{v.label}]"
                write()
                track.end(f"INTERRUPTED by {sig.name}")
                raise sig from None
            track.end(summary)
            if quiet is not None:
                res.quiesce = quiet
        if repeats > 1:
            res.repeat, res.repeats = r, repeats
        if steps:
            queue.extendleft(reversed(_rate_steps(experiment, v, r, step, closed, res, steps, log)))
        too_many = _error_share(res)
        if too_many:
            res.fails_run = too_many
        done.append(res)
        write()
        if not gone and (res.status == "failed" or res.had_errors):
            why = res.server_lost or reachable(client)
            if why:
                gone = f"{target}: {why} (after {experiment.name} [{v.label}])"
                doc["unreachable"] = gone
                if res.status == "ok":  # a fragment measured before the server went
                    res.fails_run = f"the server was lost during this variant: {why}"
                write()


def _rate_steps(experiment, v, r, step, closed, res, steps, log) -> list[tuple]:
    """Marks `res` with its rate step; after a closed-loop result (step 0), the queue
    entries of its open-loop steps (none when it gave no throughput to step from)."""
    if step:
        res.rate_step = ratesteps.step_record(step, steps, closed)
        return []
    closed = ratesteps.closed_loop_rate(res.to_dict())
    res.rate_step = ratesteps.step_record(0, steps, closed)
    if closed is None:
        if res.status != "n/a":
            log(f"rate steps of {experiment.name} [{v.label}] not run: its closed loop"
                " measured no throughput")  # fmt: skip
        return []
    return [
        (experiment, ratesteps.step_variant(v, st, closed), r, i, closed)
        for i, st in enumerate(steps, 1)
    ]


def _quiet(client, database, ran, bound, name, log) -> dict | None:
    """Before a variant: wait until the previous one's work is done on the server (quiesce),
    at most `bound` (the reply timeout); None before the first variant."""
    if ran is None:
        return None
    limit = getattr(ran, "connections_before", None)  # ran: {} when it raised
    limit = None if limit is ABSENT else limit
    if limit is not None and ran.client_path != "multiplexed":
        limit += int(ran.threads or 0)  # the pymongo path's connections stay pooled
    q = quiesce.wait(client, database, bound, limit)
    msg = quiesce.line(q, bound, name)
    if msg:
        log(msg)
    return q


# A variant with a larger share of failed operations fails the run (its figures are kept,
# marked): they describe a troubled server, not its speed.
ERROR_SHARE_LIMIT = 0.01


def _error_share(res: VariantResult) -> str | None:
    if res.status != "ok":
        return None
    errors = sum((res.errors or {}).values())
    total = errors + res.acknowledged
    if not total or errors / total <= ERROR_SHARE_LIMIT:
        return None
    return (
        f"{errors} of {total} operations failed ({errors / total:.1%},"
        f" more than {ERROR_SHARE_LIMIT:.0%})"
    )


def _failed(experiment, variant, error: str) -> VariantResult:
    return _unmeasured("failed", experiment, variant, error=error)


def _not_applicable(experiment, variant, why: str) -> VariantResult:
    """A variant the server cannot run: reported `n/a (why)`, never FAILED."""
    return _unmeasured("n/a", experiment, variant, reason=why)


def _unmeasured(status, experiment, variant, **why) -> VariantResult:
    return VariantResult(
        status=status,
        experiment=experiment.name,
        label=variant.label,
        variant_index=variant.index,
        params=variant.params,
        settings=variant.settings,
        **why,
    )


def _nothing_acknowledged(res: VariantResult) -> str:
    errors = res.errors or {}
    if not errors:
        return "no operation was acknowledged (and none failed: nothing was measured)"
    kinds = "; ".join(f"{k}={n}" for k, n in sorted(errors.items()))
    sample = next(iter((res.error_samples or {}).values()), "")
    return (
        f"no operation was acknowledged; {sum(errors.values())} failed ({kinds})"
        + (f": {sample}" if sample else "")
    )[:1000]


def _one_line(res: VariantResult) -> str:
    ops = res.acknowledged
    errors = sum(res.errors.values())
    ol = res.open_loop
    offered = (
        f", {ol['achieved_ops_per_s']:.0f} of {ol['target_ops_per_s']:g} ops/s offered"
        if ol
        else ""
    )
    return (
        f"{ops} ops, {res.docs} docs in {res.duration_s:.2f}s "
        f"({res.docs / max(res.duration_s, 1e-9):.0f} docs/s), {errors} errors{offered}"
    )
