"""Runs Performance Tables experiments against one MongoDB URI.

Per variant: untimed preparation, serverStatus before, OS sampling, the timed
phase in `threads` client threads, serverStatus after. The raw result of each
variant (counts, encoded latency histograms, counters, OS readings) is written
to the output file as soon as the variant ends, so a failure later loses
nothing. `mongobench.results` turns raw results into samples and tables.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
import traceback

from pymongo import MongoClient
from pymongo.errors import PyMongoError

from mongobench import experiments as exp_mod
from mongobench import ossampler, redact, serverstats
from mongobench.workloads import WORKLOADS, ThreadStats

RESULT_SCHEMA = 1


def connect(uri: str, app_name: str = "mongobench", **kwargs) -> MongoClient:
    # One connection per client thread, plus head-room for the monitor.
    return MongoClient(uri, appname=app_name, **kwargs)


def server_status(client) -> dict | None:
    try:
        return client.admin.command("serverStatus")
    except PyMongoError:
        return None


def topology(client) -> str:
    client.admin.command("ping")  # forces discovery
    return client.topology_description.topology_type_name


def run_variant(
    client,
    database: str,
    experiment: exp_mod.Experiment,
    variant: exp_mod.Variant,
    log=print,
    os_path: str | None = None,
    os_interval: float = 1.0,
    max_seconds: float | None = None,
    uri: str | None = None,
) -> dict:
    """One variant, end to end; returns its raw result."""
    workload_cls = WORKLOADS.get(experiment.workload)
    if workload_cls is None:
        raise exp_mod.ExperimentError(
            f"experiment {experiment.name}: unknown workload {experiment.workload!r}"
        )
    db = client[database]
    workload = workload_cls(db, variant.settings, log=log)
    workload.uri = uri
    prep_started = time.time()
    prepared = workload.prepare()
    prep_s = time.time() - prep_started
    nthreads = int(variant.settings.get("threads", 1))

    before = serverstats.extract(server_status(client))
    sampler = ossampler.Sampler(os_path, os_interval).start() if os_path is not False else None
    stop = threading.Event()
    stats = [ThreadStats() for _ in range(nthreads)]
    failures = []

    def body(i):
        try:
            workload.worker(i, nthreads, stats[i], stop)
        except Exception:  # noqa: BLE001 - a crashed thread fails the variant, loudly
            failures.append(traceback.format_exc())
            stop.set()

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(nthreads)]
    started = time.time()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    deadline = None if max_seconds is None else t0 + max_seconds
    for t in threads:
        t.join(None if deadline is None else max(0.0, deadline - time.perf_counter()))
        if deadline is not None and time.perf_counter() >= deadline:
            stop.set()
    for t in threads:
        t.join()
    duration = time.perf_counter() - t0
    client_cpu_s = time.process_time() - cpu0
    os_summary = sampler.stop() if sampler else None
    finished = workload.finish() if not failures else {}
    status_after = server_status(client)
    after = serverstats.extract(status_after)
    if failures:
        raise RuntimeError(
            f"{experiment.name} [{variant.label}]: client thread failed:\n{failures[0]}"
        )

    total = ThreadStats()
    for s in stats:
        total.merge(s)
    return {
        "schema": RESULT_SCHEMA,
        "status": "ok",
        "experiment": experiment.name,
        "workload": experiment.workload,
        "variant_index": variant.index,
        "label": variant.label,
        "params": variant.params,
        "settings": variant.settings,
        "prepared": prepared,
        "prepare_s": prep_s,
        "planned": workload.planned(),
        "start": started,
        "duration_s": duration,
        "stopped_early": stop.is_set(),
        "threads": nthreads,
        "ops": dict(total.ops),
        "docs": total.docs,
        "bytes": total.bytes,
        "errors": dict(total.errors),
        "counters": dict(total.counters),
        "finished": finished,
        "error_samples": total.error_samples,
        "latency": total.latency.encode(),
        "server_before": before,
        "server_after": after,
        "server_info": serverstats.server_info(status_after),
        "os_client": os_summary,
        "client_process_cpu_s": client_cpu_s,
        "sampler_cpu_s": sampler.cpu_s if sampler else None,
        "os_client_device": sampler.device_label if sampler else None,
    }


def write_json_atomic(path: str, data) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, default=str)
    os.replace(tmp, path)


def run(
    uri: str,
    names: list[str] | None,
    scale: str | float,
    out_path: str,
    database: str = "mongobench",
    variants: list[str] | None = None,
    overrides: dict | None = None,
    log=print,
    os_path: str | None = None,
    max_seconds: float | None = None,
    experiments_file: str | None = None,
    skip: str | None = None,
) -> dict:
    """Every selected variant; results go to `out_path` after each variant.

    A failed variant is recorded with its error and the run goes on; the
    caller decides how to fail (the CLI exits non-zero).
    """
    catalog = exp_mod.load(experiments_file or exp_mod.PERFTABLES_FILE)
    plans = exp_mod.plan(catalog, names, scale, variants, overrides, skip)
    max_threads = max((int(v.settings.get("threads", 1)) for _, vs in plans for v in vs), default=1)
    # One pooled connection per client thread, or threads queue for connections.
    client = connect(uri, maxPoolSize=max(100, max_threads + 10))
    try:
        doc = {
            "schema": RESULT_SCHEMA,
            "tool": "mongobench perftables",
            "scale": str(scale),
            "scale_factor": exp_mod.parse_scale(scale),
            "database": database,
            "topology": topology(client),
            "server_version": client.server_info().get("version", "unknown"),
            "target": redact.uri(uri),
            "results": [],
        }
        write_json_atomic(out_path, doc)
        for experiment, variant_list in plans:
            for v in variant_list:
                log(f"{experiment.name} [{v.label}]: running")
                try:
                    res = run_variant(
                        client,
                        database,
                        experiment,
                        v,
                        log,
                        os_path,
                        max_seconds=max_seconds,
                        uri=uri,
                    )
                    log(f"{experiment.name} [{v.label}]: {_one_line(res)}")
                except Exception as e:  # noqa: BLE001 - recorded, reported, fails the run
                    res = {
                        "schema": RESULT_SCHEMA,
                        "status": "failed",
                        "experiment": experiment.name,
                        "label": v.label,
                        "params": v.params,
                        "settings": v.settings,
                        "error": redact.text(f"{type(e).__name__}: {e}", uri),
                    }
                    log(f"{experiment.name} [{v.label}]: FAILED {res['error']}")
                doc["results"].append(res)
                write_json_atomic(out_path, doc)
        return doc
    finally:
        client.close()


def _one_line(res: dict) -> str:
    ops = sum(res["ops"].values())
    errors = sum(res["errors"].values())
    return (
        f"{ops} ops, {res['docs']} docs in {res['duration_s']:.2f}s "
        f"({res['docs'] / max(res['duration_s'], 1e-9):.0f} docs/s), {errors} errors"
    )
