"""The sweep loop (local runner and PKB benchmark) and the sweep run locally by the engine:
drop, load, phases, YCSB processes."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence

from pymongo import MongoClient, uri_parser
from pymongo.errors import PyMongoError

from mongobench.core import interrupt, redact
from mongobench.core import repeats as repeats_mod
from mongobench.core.units import MiB
from mongobench.measure import serverstats
from mongobench.remote import javabuild
from mongobench.sweep.plan import (
    DEFAULT_DATABASE,
    DEFAULT_TABLE,
    FAILED_METRIC,
    Phase,
    SizeStep,
)
from mongobench.sweep.properties import phase_properties
from mongobench.sweep.request import SweepRun
from mongobench.sweep.samples import (
    base_metadata,
    failed,
    failure_sample,
    measure,
    skipped_phases,
    write_results,
)
from mongobench.ycsb import properties as ycsb
from mongobench.ycsb.parse import Outcome

# ----------------------------------------------------------------------------- local runner


def database_name(uri: str) -> str:
    """The database our YCSB binding uses for `uri`: the URI's, or ycsb when none (or admin)."""

    db = uri_parser.parse_uri(uri, warn=True, connect_timeout=5).get("database")
    return DEFAULT_DATABASE if not db or db == "admin" else db


def drop_collection(uri: str, table: str = DEFAULT_TABLE, timeout_ms: int = 20_000) -> None:
    """Drops the benchmark collection so the next load rebuilds it from nothing."""

    client = MongoClient(uri, serverSelectionTimeoutMS=timeout_ms, appname="mongobench-sweep")
    try:
        client[database_name(uri)].drop_collection(table)
    finally:
        client.close()


def server_memory_bytes(uri: str, timeout_ms: int = 20_000) -> int | None:
    """Memory of the server's host from hostInfo (memLimitMB, the cgroup limit, when lower
    than memSizeMB); None when the server does not say (stand-ins, restricted tiers)."""

    client = MongoClient(uri, serverSelectionTimeoutMS=timeout_ms, appname="mongobench-sweep")
    try:
        system = client.admin.command("hostInfo").get("system") or {}
    except PyMongoError:
        return None
    finally:
        client.close()
    sizes = [system.get(k) for k in ("memSizeMB", "memLimitMB")]
    sizes = [int(v) for v in sizes if isinstance(v, (int, float)) and v > 0]
    return min(sizes) * MiB if sizes else None


def server_facts(uri: str, timeout_ms: int = 20_000) -> dict[str, str]:
    """`server_version` (buildInfo) and `storage_engine` (serverStatus) for sample metadata;
    "unknown" for what the server does not say (the stand-in says it has no engine)."""

    client = MongoClient(uri, serverSelectionTimeoutMS=timeout_ms, appname="mongobench-sweep")
    facts = {"server_version": "unknown", "storage_engine": "unknown"}
    try:
        facts["server_version"] = str(client.server_info().get("version") or "unknown")
        status = client.admin.command("serverStatus")
        facts["storage_engine"] = serverstats.server_info(status)["storage_engine"]
    except PyMongoError:
        pass  # restricted users may not run serverStatus: the version alone still helps
    finally:
        client.close()
    return facts


def _drop_result(stdout: str) -> dict:
    for line in reversed(stdout.strip().splitlines()):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and "dropped" in doc:
            return doc
    raise ValueError(f"no result line from the drop command: {stdout[-300:]!r}")


def parse_drop_output(stdout: str) -> int | None:
    """Server memory in bytes from `sweep_drop_command`'s output; None when the server did not say."""
    mb = _drop_result(stdout).get("server_memory_mb")
    return int(mb) * MiB if mb else None


def parse_drop_server(stdout: str) -> dict[str, str]:
    """`server_version` and `storage_engine` from `sweep_drop_command`'s output ("unknown"
    when the server, or an engine older than these keys, did not say)."""
    doc = _drop_result(stdout)
    return {k: str(doc.get(k) or "unknown") for k in ("server_version", "storage_engine")}


def on_this_host(uri: str) -> bool:
    """Every host of the URI is a loopback address or this machine's name: only then does
    this host's memory describe the server's."""
    try:
        hosts = [h for h, _ in uri_parser.parse_uri(uri)["nodelist"]]
    except (PyMongoError, ValueError):
        return False
    local = {"localhost", "127.0.0.1", "::1", socket.gethostname()}
    return bool(hosts) and all(h in local or h.startswith("127.") for h in hosts)


def host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def run_ycsb(
    props_text: str,
    phase: Phase,
    workdir: str,
    stem: str,
    *,
    classpath: str | None = None,
    java: str = "java",
    timeout: float | None = None,
) -> Outcome:
    """Runs one YCSB client process; returns its outcome (judged by `measure`)."""

    props_path = os.path.join(workdir, f"{stem}.properties")
    with open(props_path, "w") as f:
        f.write(props_text)
    cmd = ycsb.ycsb_command(
        classpath or javabuild.ycsb_classpath(), phase.ycsb_phase, props_path, java=java
    )
    try:
        proc = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout
        return Outcome(out or "", None, running=True, timeout_s=timeout)
    return Outcome(proc.stdout + "\n" + proc.stderr, proc.returncode)


def run_sweep(
    request: SweepRun,
    uri_file: str,
    *,
    extra_metadata: Mapping | None = None,
    classpath: str | None = None,
    java: str = "java",
    connect_timeout_ms: int = 20_000,
    log: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr, flush=True),
) -> list[dict]:
    """The whole sweep `request` asks for against the server of `uri_file`, here, with our
    YCSB client.

    Per size: drop the collection, load, run each workload. The URI reaches YCSB only through
    ``mongodb.urlfile``. Returns the samples; with the request's `out`, they are also
    written as a PKB results file after every phase. A failed phase gives a `Phase Failed`
    sample (a failed load skips that size's runs) and the sweep goes on. `extra_metadata`
    (the estimate's) joins every sample, under the request's own metadata.
    """

    if not request.validated:
        request.validate()
    uri = redact.read_uri(uri_file=uri_file)
    memory_bytes, memory_source = request.memory
    if memory_bytes is None:
        memory_bytes = server_memory_bytes(uri, connect_timeout_ms)
        memory_source = "server hostInfo"
    if memory_bytes is None and on_this_host(uri):
        memory_bytes, memory_source = host_memory_bytes(), "this host (the server is local)"
    elif memory_bytes is None:  # a remote server: this host's memory says nothing about it
        log("memory of the server unknown (no hostInfo memSizeMB): exceeds_memory is not"
            " judged; give it with --memory-mb (--mongodb_ycsb_sweep_memory_mb in PKB)")  # fmt: skip
    steps = request.steps(memory_bytes, memory_source)
    run_uri = request.run_uri or uuid.uuid4().hex[:8]
    server = server_facts(uri, connect_timeout_ms)
    metadata = {**server, **(extra_metadata or {}), **request.metadata}
    base_md = base_metadata(steps, request.threads, metadata)
    timeout = request.local_timeout()
    out, raw_dir = request.out, request.raw_dir
    if raw_dir:
        os.makedirs(raw_dir, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="mongobench-sweep-") as workdir:

        def run_phase(step: SizeStep, phase: Phase) -> list[dict]:
            props = phase_properties(step, phase, request, os.path.abspath(uri_file))
            stem = f"{step.records}-{phase.name}"
            outcome = run_ycsb(
                props, phase, workdir, stem, classpath=classpath, java=java, timeout=timeout
            )
            outcome = dataclasses.replace(outcome, text=redact.text(outcome.text, uri))
            if raw_dir:
                with open(os.path.join(raw_dir, f"{stem}.txt"), "w") as f:
                    f.write(outcome.text)
            return measure(step, phase, outcome, base_md, request.status_interval_s)

        hooks = SweepHooks(
            drop=lambda: drop_collection(uri, request.table, connect_timeout_ms),
            drop_errors=(PyMongoError,),
            describe_error=lambda e: redact.text(str(e), uri),
            run_phase=run_phase,
            log=lambda message, problem=False: log(f"sweep: {message}"),
            after_phase=(lambda got: write_results(out, got, run_uri)) if out else None,
        )
        samples = sweep_steps(request, steps, base_md, hooks)
    if out:
        write_results(out, samples, run_uri)
    return samples


# ----------------------------------------------------------------------------- the sweep loop


@dataclasses.dataclass(frozen=True)
class SweepHooks:
    """What the sweep loop does at each event, where it runs (here or on PKB's VMs).

    `drop()` drops the collection (on `drop_errors`, every phase of that size fails with
    `describe_error(e)`); `run_phase(step, phase)` runs one phase and returns its samples;
    `log(message, problem=False)` hears each event; `after_phase(samples so far)` follows
    each phase run."""

    drop: Callable[[], object]
    drop_errors: tuple[type[BaseException], ...]
    describe_error: Callable[[BaseException], str]
    run_phase: Callable[[SizeStep, Phase], list[dict]]
    log: Callable[..., None]
    after_phase: Callable[[list[dict]], None] | None = None


def sweep_steps(
    request: SweepRun, steps: Sequence[SizeStep], metadata: Mapping, hooks: SweepHooks
) -> list[dict]:
    """The sweep loop of the local runner and of the PKB benchmark.

    Per size: drop the collection, then run each of the request's phases; a failed load
    skips the size's other phases. With the request's `repeats`, the run phases (not the
    load: the data is there once) run that many times in rounds of alternating direction,
    and their samples are folded into the mean with its 95 % interval (core.repeats). At
    the end, drop again unless the request's `keep_data`.
    """

    phases, repeats = request.phase_list, request.repeats
    log = hooks.log
    samples: list[dict] = []
    for step in steps:
        try:
            hooks.drop()
        except hooks.drop_errors as e:
            error = f"could not drop the collection before loading: {hooks.describe_error(e)}"
            log(f"{step.label}: {error}", problem=True)
            samples += [failure_sample(step, p, error, metadata) for p in phases]
            continue
        skip: list[Phase] = []
        for phase, r in phase_schedule(phases, repeats):
            if phase in skip:
                if r == 0:
                    samples.append(
                        failure_sample(step, phase, "skipped: the load failed", metadata)
                    )
                continue
            again = f" (repeat {r + 1}/{repeats})" if repeats > 1 else ""
            log(f"{step.label} ({step.records} records): {phase.title}{again}")
            try:
                got = hooks.run_phase(step, phase)
            except KeyboardInterrupt as e:  # SIGTERM or SIGINT: kept, marked, and stop
                error = f"interrupted by {interrupt.of(e).name}"
                log(f"{step.label} {phase.title}: {error}", problem=True)
                samples.append(failure_sample(step, phase, error, metadata))
                if hooks.after_phase is not None:
                    hooks.after_phase(samples)
                raise
            for s in failed(got):
                log(f"{step.label} {phase.title} FAILED: {s['metadata']['error']}", problem=True)
                skip = skipped_phases(phases, phase)
            if repeats > 1 and phase.ycsb_phase == "run":
                for s in got:
                    if s["metric"] != FAILED_METRIC:
                        s["metadata"]["repeat"] = r
            samples.extend(got)
            if hooks.after_phase is not None:
                hooks.after_phase(samples)
    if not request.keep_data:
        try:
            hooks.drop()
        except hooks.drop_errors as e:
            log(f"the final drop failed: {hooks.describe_error(e)}", problem=True)
    return repeats_mod.combine(samples, repeats_mod.SWEEP_IDENTITY)


def phase_schedule(phases: Sequence[Phase], repeats: int = 1) -> list[tuple[Phase, int]]:
    """(phase, repeat) at one size: every phase once in order, then the run phases again in
    rounds of alternating direction (a drift over the size favours no workload)."""
    runs = [p for p in phases if p.ycsb_phase == "run"]
    out = [(p, 0) for p in phases]
    for r in range(1, repeats):
        out += [(p, r) for p in (runs if r % 2 == 0 else list(reversed(runs)))]
    return out
