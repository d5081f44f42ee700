"""The sweep run locally by the engine: drop, load, phases, YCSB processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

from pymongo import MongoClient, uri_parser
from pymongo.errors import PyMongoError

from mongobench.core import redact
from mongobench.core.units import MiB
from mongobench.remote import javabuild
from mongobench.sweep.plan import (
    DEFAULT_DATABASE,
    DEFAULT_TABLE,
    DISTRIBUTION,
    Phase,
    SizeStep,
    parse_phases,
    phase_properties,
    plan,
)
from mongobench.sweep.samples import failed, failure_sample, measure, skipped_phases, write_results
from mongobench.ycsb import properties as ycsb

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


def parse_drop_output(stdout: str) -> int | None:
    """Server memory in bytes from `sweep_drop_command`'s output; None when the server did not say."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and "dropped" in doc:
            mb = doc.get("server_memory_mb")
            return int(mb) * MiB if mb else None
    raise ValueError(f"no result line from the drop command: {stdout[-300:]!r}")


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
) -> str:
    """Runs one YCSB client process; returns its stdout + stderr (judged by `measure`)."""

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
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else ""
        return out + f"\nException in thread main: YCSB timed out after {timeout} s\n"
    text = proc.stdout + "\n" + proc.stderr
    if proc.returncode:
        text += f"\nException in thread main: YCSB exited with status {proc.returncode}\n"
    return text


def run_sweep(
    uri_file: str,
    sizes: Iterable[float] | str | None = None,
    *,
    out: str | None = None,
    phases: Iterable[str] | str | None = None,
    operation_count: int | None = None,
    threads: int = 1,
    memory_bytes: int | None = None,
    memory_source: str | None = None,
    max_seconds: int | None = None,
    load_batchsize: int | None = None,
    table: str = DEFAULT_TABLE,
    keep_data: bool = False,
    raw_dir: str | None = None,
    metadata: Mapping | None = None,
    run_uri: str | None = None,
    classpath: str | None = None,
    java: str = "java",
    connect_timeout_ms: int = 20_000,
    log: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr, flush=True),
) -> list[dict]:
    """The whole sweep against the server of `uri_file`, here, with our YCSB client.

    Per size: drop the collection, load, run each workload. The URI reaches YCSB only through
    ``mongodb.urlfile``. Returns the samples; with `out`, they are also written as a PKB results
    file after every phase. A failed phase gives a `Phase Failed` sample (a failed load skips
    that size's runs) and the sweep goes on.
    """

    uri = redact.read_uri(uri_file=uri_file)
    chosen = parse_phases(phases)
    if memory_bytes is None:
        memory_bytes = server_memory_bytes(uri, connect_timeout_ms)
        memory_source = "server hostInfo"
    if memory_bytes is None:
        memory_bytes, memory_source = host_memory_bytes(), "this host"
    steps = plan(
        sizes,
        operation_count=operation_count,
        memory_bytes=memory_bytes,
        memory_source=memory_source,
    )
    run_uri = run_uri or uuid.uuid4().hex[:8]
    base_md = dict(metadata or {})
    base_md.update(
        {"threads": threads, "request_distribution": DISTRIBUTION, "sweep_sizes_mb": _sizes(steps)}
    )
    samples: list[dict] = []
    timeout = None if not max_seconds else max_seconds + 300
    if raw_dir:
        os.makedirs(raw_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mongobench-sweep-") as workdir:
        for step in steps:
            try:
                drop_collection(uri, table, connect_timeout_ms)
            except PyMongoError as e:
                error = f"could not drop the collection before loading: {redact.text(str(e), uri)}"
                log(f"sweep: {step.label}: {error}")
                samples += [failure_sample(step, p, error, base_md) for p in chosen]
                continue
            skip: list[Phase] = []
            for phase in chosen:
                if phase in skip:
                    samples.append(failure_sample(step, phase, "skipped: the load failed", base_md))
                    continue
                log(f"sweep: {step.label} ({step.records} records): {phase.title}")
                props = phase_properties(
                    step,
                    phase,
                    urlfile=os.path.abspath(uri_file),
                    threads=threads,
                    max_seconds=max_seconds,
                    load_batchsize=load_batchsize,
                    table=table,
                )
                stem = f"{step.records}-{phase.name}"
                output = run_ycsb(
                    props, phase, workdir, stem, classpath=classpath, java=java, timeout=timeout
                )
                output = redact.text(output, uri)
                if raw_dir:
                    with open(os.path.join(raw_dir, f"{stem}.txt"), "w") as f:
                        f.write(output)
                got = measure(step, phase, output, base_md)
                for s in failed(got):
                    log(f"sweep: {step.label} {phase.title} FAILED: {s['metadata']['error']}")
                    skip = skipped_phases(chosen, phase)
                samples.extend(got)
                if out:
                    write_results(out, samples, run_uri)
        if not keep_data:
            try:
                drop_collection(uri, table, connect_timeout_ms)
            except PyMongoError as e:
                log(f"sweep: the final drop failed: {redact.text(str(e), uri)}")
    if out:
        write_results(out, samples, run_uri)
    return samples


def _sizes(steps: Sequence[SizeStep]) -> str:
    return ",".join(f"{s.size_mb:g}" for s in steps)
