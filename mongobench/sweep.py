"""YCSB dataset-size sweep (seed 002): one collection rebuilt and measured at growing sizes.

For each dataset size (MB of 1 KB records: 10 fields x 100 B, so 1 MB = 1,000 records) the
collection is dropped, loaded with YCSB, then read-only, update-only and 50/50 read/update
workloads run over it (zipfian keys, operation count = record count unless overridden). Every
size and phase yields samples: runtime, throughput, and average/p95/p99 latency per operation.
Sizes larger than the memory of the machine holding the data are allowed; their samples say so
(``exceeds_memory``).

Pure planning and sample functions (no PKB imports), plus `run_sweep`, a local runner that
starts our YCSB client as subprocesses (the engine CLI and the integration test use it; the PKB
module runs the same property files on client VMs).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from mongobench import redact, stress, ycsb

BENCHMARK_NAME = "mongodb_ycsb_sweep"
DEFAULT_SIZES_MB = (1, 2, 3, 10, 100, 1000, 10000)
FIELD_COUNT = 10
FIELD_LENGTH = 100
RECORD_BYTES = FIELD_COUNT * FIELD_LENGTH  # "1 KB" records, as in the seed
RECORDS_PER_MB = 1_000_000 // RECORD_BYTES  # the seed: 1,000 records ~ 1 MB
DEFAULT_TABLE = "usertable"
DEFAULT_DATABASE = "ycsb"  # our binding's database when the URI names none (or admin)
DISTRIBUTION = "zipfian"
MB = 1_000_000
MiB = 1024 * 1024

RUNTIME_METRIC = "Runtime"
THROUGHPUT_METRIC = "Throughput"
FAILED_METRIC = "Phase Failed"
LATENCY_STATS = (("Average", None), ("p95", 95.0), ("p99", 99.0))
# Operation sections that are client operations (CLEANUP, INIT, ... are not).
_OPS = ("INSERT", "READ", "UPDATE", "SCAN", "DELETE", "READ-MODIFY-WRITE")


class SweepError(ValueError):
    """A bad size list, phase name or option."""


@dataclass(frozen=True)
class Phase:
    name: str
    title: str
    ycsb_phase: str  # "load" or "run"
    read: float
    update: float
    insert: float
    ops: tuple[str, ...]  # operations the phase must report


PHASES = (
    Phase("load", "Load", "load", 0.0, 0.0, 1.0, ("INSERT",)),
    Phase("read_only", "Read-only", "run", 1.0, 0.0, 0.0, ("READ",)),
    Phase("update_only", "Update-only", "run", 0.0, 1.0, 0.0, ("UPDATE",)),
    Phase("read_update", "50/50 read/update", "run", 0.5, 0.5, 0.0, ("READ", "UPDATE")),
)
PHASES_BY_NAME = {p.name: p for p in PHASES}


def latency_metric(op: str, stat: str) -> str:
    """``READ p99 Latency``, ``UPDATE Average Latency``, ..."""
    return f"{op} {stat} Latency"


def size_label(size_mb: float) -> str:
    return f"{size_mb / 1000:g} GB" if size_mb >= 1000 else f"{size_mb:g} MB"


def parse_sizes(value: str | Iterable[float] | None) -> list[float]:
    """``"1,2,3"`` (MB) -> [1.0, 2.0, 3.0]; None -> the seed's sizes. An empty value is
    an error, not the default sweep (which loads up to 10 GB)."""
    if value is None:
        return [float(s) for s in DEFAULT_SIZES_MB]
    items = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for item in items:
        if isinstance(item, str):
            item = item.strip()
            if not item:
                continue
        try:
            size = float(item)
        except (TypeError, ValueError):
            raise SweepError(f"dataset size must be a number of MB, not {item!r}") from None
        if not size > 0 or size != size or size == float("inf"):
            raise SweepError(f"dataset size must be > 0 MB, not {item!r}")
        if round(size * RECORDS_PER_MB) < 1:
            raise SweepError(f"dataset size {size:g} MB is less than one 1 KB record")
        out.append(size)
    if not out:
        raise SweepError("no dataset sizes given")
    if len(set(out)) != len(out):
        raise SweepError(f"dataset sizes repeat: {value}")
    return out


def parse_phases(value: str | Iterable[str] | None) -> list[Phase]:
    """Phase names (``load`` is always first and required for the runs)."""
    if value is None or value == "" or value == [] or value == "all" or value == ["all"]:
        return list(PHASES)
    names = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)
    names = [n for n in names if n]
    unknown = [n for n in names if n not in PHASES_BY_NAME]
    if unknown:
        raise SweepError(
            f"unknown phase(s) {', '.join(unknown)}; phases: {', '.join(PHASES_BY_NAME)}"
        )
    if "load" not in names:
        raise SweepError("the load phase is needed: every size is rebuilt before it is measured")
    return [p for p in PHASES if p.name in names]


@dataclass(frozen=True)
class SizeStep:
    """One dataset size of the sweep."""

    size_mb: float
    records: int
    operations: int  # operationcount of the run phases
    memory_bytes: int | None = None
    memory_source: str | None = None

    @property
    def dataset_bytes(self) -> int:
        return self.records * RECORD_BYTES

    @property
    def exceeds_memory(self) -> bool | None:
        """True when the records alone are larger than the memory; None when it is unknown."""
        if not self.memory_bytes:
            return None
        return self.dataset_bytes > self.memory_bytes

    @property
    def label(self) -> str:
        return size_label(self.size_mb)

    def metadata(self) -> dict:
        md = {
            "size_mb": self.size_mb,
            "size_label": self.label,
            "records": self.records,
            "operation_count": self.operations,
            "record_bytes": RECORD_BYTES,
            "dataset_mb": round(self.dataset_bytes / MB, 3),
        }
        if self.memory_bytes:
            md["exceeds_memory"] = self.exceeds_memory
            md["memory_mb"] = round(self.memory_bytes / MiB)
            md["memory_source"] = self.memory_source or "given"
        else:
            md["memory_source"] = "unknown"
        return md


def plan(
    sizes_mb: Iterable[float] | str | None = None,
    *,
    operation_count: int | None = None,
    memory_bytes: int | None = None,
    memory_source: str | None = None,
) -> list[SizeStep]:
    """The sweep's sizes, smallest first: records = size x 1,000, operations = records unless
    `operation_count` fixes them for every size."""
    if operation_count is not None and not 0 < operation_count <= ycsb.MAX_OPERATION_COUNT:
        raise SweepError(f"operation count must be in 1..{ycsb.MAX_OPERATION_COUNT}")
    steps = []
    for size in sorted(parse_sizes(sizes_mb)):
        records = int(round(size * RECORDS_PER_MB))
        if records > ycsb.MAX_OPERATION_COUNT:
            raise SweepError(f"{size:g} MB is more records than YCSB can count")
        steps.append(
            SizeStep(
                size_mb=size,
                records=records,
                operations=operation_count or records,
                memory_bytes=int(memory_bytes) if memory_bytes else None,
                memory_source=memory_source,
            )
        )
    return steps


def phase_properties(
    step: SizeStep,
    phase: Phase,
    *,
    urlfile: str | None = None,
    url: str | None = None,
    threads: int = 1,
    distribution: str = DISTRIBUTION,
    load_batchsize: int | None = None,
    max_seconds: int | None = None,
    table: str = DEFAULT_TABLE,
    percentiles: Sequence[float] = ycsb.DEFAULT_PERCENTILES,
    insertstart: int | None = None,
    insertcount: int | None = None,
    operationcount: int | None = None,
    histogram_prefix: str | None = None,
) -> str:
    """The YCSB property file of one phase at one size (the URI only through `urlfile`).

    One process does it all by default; `insertstart`/`insertcount` give a load process its own
    key range and `operationcount` a run process its share (see `process_properties`)."""
    extra = {"table": table} if table != DEFAULT_TABLE else None
    if operationcount is None:
        loading = phase.ycsb_phase == "load"
        operationcount = (insertcount or step.records) if loading else step.operations
    return ycsb.workload_properties(
        recordcount=step.records,
        operationcount=operationcount,
        insertstart=insertstart,
        insertcount=insertcount,
        histogram_prefix=histogram_prefix,
        readproportion=phase.read,
        updateproportion=phase.update,
        insertproportion=phase.insert,
        requestdistribution=distribution,
        fieldcount=FIELD_COUNT,
        fieldlength=FIELD_LENGTH,
        threadcount=threads,
        percentiles=percentiles,
        url=url,
        urlfile=urlfile,
        maxexecutiontime=max_seconds,
        batchsize=load_batchsize if phase.ycsb_phase == "load" else None,
        extra=extra,
    )


def process_properties(
    step: SizeStep,
    phase: Phase,
    processes: int,
    *,
    histogram_prefixes: Sequence[str] | None = None,
    urlfiles: Sequence[str] | None = None,
    **kwargs,
) -> list[str]:
    """Property files of `processes` YCSB processes (one per client VM) sharing one phase: a
    load splits the key range, a run splits the operations over all keys. Processes whose
    share would be empty are left out, so the list may be shorter. With several processes,
    `histogram_prefixes` (one per process) turn on HdrHistogram logs so percentiles can be
    merged exactly (`combine`). `urlfiles` (one per process) replaces `urlfile` when the URI
    file's path differs between client VMs. Empty shares are always the last ones."""
    if processes < 1:
        raise SweepError("at least one YCSB process is needed")
    if processes == 1:
        prefix = histogram_prefixes[0] if histogram_prefixes else None
        if urlfiles:
            kwargs["urlfile"] = urlfiles[0]
        return [phase_properties(step, phase, histogram_prefix=prefix, **kwargs)]
    total = step.records if phase.ycsb_phase == "load" else step.operations
    out, start = [], 0
    for i, share in enumerate(stress.split_evenly(total, processes)):
        if share == 0:
            continue
        prefix = histogram_prefixes[i] if histogram_prefixes else None
        if urlfiles:
            kwargs["urlfile"] = urlfiles[i]
        if phase.ycsb_phase == "load":
            props = phase_properties(
                step,
                phase,
                insertstart=start,
                insertcount=share,
                histogram_prefix=prefix,
                **kwargs,
            )
        else:
            props = phase_properties(
                step, phase, operationcount=share, histogram_prefix=prefix, **kwargs
            )
        out.append(props)
        start += share
    return out


def combine(
    results: Sequence[ycsb.YcsbResult],
    histograms: Sequence[Mapping[str, str]] | None = None,
) -> tuple[ycsb.YcsbResult, str]:
    """One result from processes that ran a phase together, and how its percentiles were
    obtained: throughput is the sum, runtime the longest, the average weighted by operations,
    and percentiles exact from the merged HdrHistogram logs when every process left one
    (else the worst process's value, an upper bound)."""
    if not results:
        raise ValueError("no results to combine")
    if len(results) == 1:
        return results[0], "one process"
    sources = set()
    ops: dict[str, ycsb.OpStats] = {}
    names = sorted({n for r in results for n in r.ops})
    for name in names:
        idx = [i for i, r in enumerate(results) if name in r.ops]
        parts = [results[i].ops[name] for i in idx]
        count = sum(p.operations for p in parts)
        avg = None
        if count and all(p.average_us is not None for p in parts):
            avg = sum(p.average_us * p.operations for p in parts) / count
        wanted = sorted({q for p in parts for q in p.percentiles_us})
        texts = [histograms[i].get(name) for i in idx] if histograms else []
        pct: dict[float, float] = {}
        if texts and all(texts):
            try:
                merged = ycsb.merge_histogram_logs(texts)
            except ValueError:
                merged = None
            if merged is not None and merged.get_total_count():
                for q in wanted:
                    pct[q] = ycsb.histogram_percentile_ms(merged, q) * 1000.0
                sources.add("merged histograms")
        if not pct:
            for q in wanted:
                values = [p.percentiles_us.get(q) for p in parts]
                if all(v is not None for v in values):
                    pct[q] = max(values)
            if name in _OPS:
                sources.add("max over processes")
        returns: dict[str, int] = {}
        for p in parts:
            for k, v in p.returns.items():
                returns[k] = returns.get(k, 0) + v
        mins = [p.min_us for p in parts if p.min_us is not None]
        maxs = [p.max_us for p in parts if p.max_us is not None]
        ops[name] = ycsb.OpStats(
            name=name,
            operations=count,
            average_us=avg,
            min_us=min(mins) if mins else None,
            max_us=max(maxs) if maxs else None,
            percentiles_us=pct,
            returns=returns,
        )
    result = ycsb.YcsbResult(
        runtime_ms=max(r.runtime_ms for r in results),
        throughput=sum(r.throughput for r in results),
        ops=ops,
        metrics={},
    )
    return result, " + ".join(sorted(sources)) or "max over processes"


# ----------------------------------------------------------------------------- samples


def _sample(metric: str, value: float, unit: str, md: Mapping) -> dict:
    return {"metric": metric, "value": float(value), "unit": unit, "metadata": dict(md)}


def phase_metadata(step: SizeStep, phase: Phase, extra: Mapping | None = None) -> dict:
    md = dict(extra or {})
    md.update(step.metadata())
    md.update({"phase": phase.name, "phase_title": phase.title, "ycsb_phase": phase.ycsb_phase})
    return md


def phase_samples(
    step: SizeStep, phase: Phase, result: ycsb.YcsbResult, metadata: Mapping | None = None
) -> list[dict]:
    """Runtime, throughput and average/p95/p99 latency per operation of one phase."""
    md = phase_metadata(step, phase, metadata)
    expected = step.records if phase.ycsb_phase == "load" else step.operations
    md["operations"] = result.operations
    if result.operations < expected:
        md["stopped_early"] = True  # maxexecutiontime ended the phase
    if result.not_found:
        md["not_found"] = result.not_found
    missing = []
    out = [
        _sample(RUNTIME_METRIC, result.runtime_ms / 1000.0, "sec", md),
        _sample(THROUGHPUT_METRIC, result.throughput, "ops/sec", md),
    ]
    for op in _OPS:
        stats = result.ops.get(op)
        if stats is None or stats.operations == 0:
            continue
        op_md = dict(md, op=op, op_count=stats.operations)
        for stat, p in LATENCY_STATS:
            if p is None:
                value = None if stats.average_us is None else stats.average_us / 1000.0
            else:
                value = stats.percentile_ms(p)
            if value is None:
                missing.append(f"{op} {stat}")
                continue
            out.append(_sample(latency_metric(op, stat), value, "ms", op_md))
    if missing:
        for s in out:
            s["metadata"]["missing_metrics"] = ",".join(missing)
    return out


def failure_sample(
    step: SizeStep, phase: Phase, error: str, metadata: Mapping | None = None
) -> dict:
    md = phase_metadata(step, phase, metadata)
    md["error"] = error[:1000]
    return _sample(FAILED_METRIC, 1, "count", md)


def skipped_phases(phases: Sequence[Phase], failed: Phase) -> list[Phase]:
    """Phases that cannot run at a size once `failed` failed there (a failed load: all)."""
    if failed.ycsb_phase == "load":
        return [p for p in phases if p is not failed]
    return []


def measure(
    step: SizeStep, phase: Phase, output: str, metadata: Mapping | None = None
) -> list[dict]:
    """Samples of one phase from YCSB's output; a failed phase gives one `Phase Failed`."""
    return measure_processes(step, phase, [output], metadata)


def measure_processes(
    step: SizeStep,
    phase: Phase,
    outputs: Sequence[str],
    metadata: Mapping | None = None,
    histograms: Sequence[Mapping[str, str]] | None = None,
) -> list[dict]:
    """Samples of one phase run by one or more YCSB processes (their outputs, and optionally
    their HdrHistogram logs by operation). Any failed process fails the phase: one `Phase
    Failed` sample naming it, never a partial figure."""
    results = []
    for i, text in enumerate(outputs):
        try:
            results.append(
                ycsb.parse_output(text, required_ops=phase.ops, required_percentiles=(99.0,))
            )
        except ycsb.YcsbError as e:
            who = f"YCSB process {i + 1} of {len(outputs)}: " if len(outputs) > 1 else ""
            return [failure_sample(step, phase, who + str(e), metadata)]
    if not results:
        return [failure_sample(step, phase, "no YCSB process ran", metadata)]
    result, source = combine(results, histograms)
    md = dict(metadata or {})
    md["ycsb_processes"] = len(results)
    if len(results) > 1:
        md["latency_source"] = source
    return phase_samples(step, phase, result, md)


def failed(samples: Iterable[Mapping]) -> list[Mapping]:
    return [s for s in samples if s["metric"] == FAILED_METRIC]


def table_text(samples: Sequence[Mapping]) -> str:
    """A markdown table: one row per size and phase (throughput, runtime, p99 per op)."""
    rows: dict = {}
    for s in samples:
        md = s["metadata"]
        key = (float(md["size_mb"]), [p.name for p in PHASES].index(md["phase"]))
        row = rows.setdefault(key, {"md": md, "p99": {}})
        if s["metric"] == THROUGHPUT_METRIC:
            row["tput"] = s["value"]
        elif s["metric"] == RUNTIME_METRIC:
            row["runtime"] = s["value"]
        elif s["metric"] == FAILED_METRIC:
            row["error"] = md.get("error", "failed")
        elif s["metric"].endswith(" p99 Latency"):
            row["p99"][md["op"]] = s["value"]
    lines = [
        "| Size | Records | Phase | Runtime (s) | Throughput (ops/s) | p99 (ms) | > memory |",
        "| --: | --: | :-- | --: | --: | :-- | :-- |",
    ]
    for (_, _), row in sorted(rows.items()):
        md = row["md"]
        exceeds = md.get("exceeds_memory")
        p99 = ", ".join(f"{op} {v:.3f}" for op, v in row["p99"].items()) or "n/a"
        if "error" in row:
            p99 = "FAILED: " + str(row["error"])[:80]
        lines.append(
            f"| {md['size_label']} | {md['records']} | {md['phase_title']} | "
            f"{_fmt(row.get('runtime'), 3)} | {_fmt(row.get('tput'), 1)} | {p99} | "
            f"{'n/a' if exceeds is None else ('yes' if exceeds else 'no')} |"
        )
    return "\n".join(lines)


def _fmt(value, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def results_lines(
    samples: Iterable[Mapping], run_uri: str, test: str = BENCHMARK_NAME
) -> list[str]:
    """Samples as PKB results lines (``perfkitbenchmarker_results.json``, metadata as a dict,
    as PKB writes it with --collapse_labels=False), so `mongobench compare` reads them."""
    now = time.time()
    return [
        json.dumps(
            {
                "metric": s["metric"],
                "value": s["value"],
                "unit": s["unit"],
                "metadata": s["metadata"],
                "test": test,
                "run_uri": run_uri,
                "timestamp": now,
                "product_name": "mongobench",
            },
            default=str,
        )
        for s in samples
    ]


def write_results(path: str, samples: Sequence[Mapping], run_uri: str) -> None:
    """Atomically (re)writes the results file: a crash later loses nothing written so far."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write("".join(line + "\n" for line in results_lines(samples, run_uri)))
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- local runner


def database_name(uri: str) -> str:
    """The database our YCSB binding uses for `uri`: the URI's, or ycsb when none (or admin)."""
    from pymongo import uri_parser

    db = uri_parser.parse_uri(uri, warn=True, connect_timeout=5).get("database")
    return DEFAULT_DATABASE if not db or db == "admin" else db


def drop_collection(uri: str, table: str = DEFAULT_TABLE, timeout_ms: int = 20_000) -> None:
    """Drops the benchmark collection so the next load rebuilds it from nothing."""
    from pymongo import MongoClient

    client = MongoClient(uri, serverSelectionTimeoutMS=timeout_ms, appname="mongobench-sweep")
    try:
        client[database_name(uri)].drop_collection(table)
    finally:
        client.close()


def server_memory_bytes(uri: str, timeout_ms: int = 20_000) -> int | None:
    """Memory of the server's host from hostInfo (memLimitMB, the cgroup limit, when lower
    than memSizeMB); None when the server does not say (stand-ins, restricted tiers)."""
    from pymongo import MongoClient
    from pymongo.errors import PyMongoError

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


def drop_command(engine_dir: str, uri_file: str, table: str = DEFAULT_TABLE) -> str:
    """Shell command that drops the collection with the engine deployed on a client VM (see
    `mongobench.deploy`) and prints ``{"dropped": ..., "server_memory_mb": ...}``. No secret:
    the URI stays in its file."""
    q = shlex.quote
    args = [f"{engine_dir}/venv/bin/python", "-m", "mongobench", "sweep", "drop"]
    args += ["--uri-file", uri_file, "--table", table]
    return f"cd {q(engine_dir)} && " + " ".join(q(a) for a in args)


def parse_drop_output(stdout: str) -> int | None:
    """Server memory in bytes from `drop_command`'s output; None when the server did not say."""
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
    import subprocess

    from mongobench import javabuild

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
    from pymongo.errors import PyMongoError

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


# ----------------------------------------------------------------------------- CLI


def _metadata_pairs(pairs: Sequence[str] | None) -> dict:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--metadata takes key=value, not {pair!r}")
        out[key.strip()] = value
    return out


def _memory_args(args) -> tuple[int | None, str | None]:
    if args.memory_mb:
        return int(args.memory_mb * MiB), "--memory-mb"
    return None, None


def cmd_plan(args) -> int:
    memory, source = _memory_args(args)
    if memory is None:
        memory, source = host_memory_bytes(), "this host"
    try:
        steps = plan(args.sizes, operation_count=args.operations, memory_bytes=memory)
    except SweepError as e:
        raise SystemExit(f"mongobench: {e}") from None
    print(f"memory: {round(memory / MiB) if memory else 'unknown'} MiB ({source})")
    print("| Size | Records | Operations per run | Dataset (MB) | > memory |")
    print("| --: | --: | --: | --: | :-- |")
    for s in steps:
        ex = s.exceeds_memory
        print(
            f"| {s.label} | {s.records} | {s.operations} | {s.dataset_bytes / MB:g} | "
            f"{'n/a' if ex is None else ('yes' if ex else 'no')} |"
        )
    return 0


def cmd_run(args) -> int:
    memory, source = _memory_args(args)
    uri_file = args.uri_file
    tmp = None
    if args.uri_env:
        try:
            value = redact.read_uri(env=args.uri_env)
        except ValueError as e:
            raise SystemExit(f"mongobench: {e}") from None
        fd, tmp = tempfile.mkstemp(prefix="mongobench-uri-")  # 0600: YCSB reads the URI here
        with os.fdopen(fd, "w") as f:
            f.write(value + "\n")
        uri_file = tmp
    try:
        samples = run_sweep(
            uri_file,
            args.sizes,
            out=args.out,
            phases=args.phases,
            operation_count=args.operations,
            threads=args.threads,
            memory_bytes=memory,
            memory_source=source,
            max_seconds=args.max_seconds,
            load_batchsize=args.load_batchsize,
            table=args.table,
            keep_data=args.keep_data,
            raw_dir=args.raw_dir,
            metadata=_metadata_pairs(args.metadata),
            run_uri=args.run_uri,
        )
    except (SweepError, OSError, ValueError) as e:
        raise SystemExit(f"mongobench: {e}") from None
    finally:
        if tmp:
            os.remove(tmp)
    print(table_text(samples))
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
    return 1 if failed(samples) else 0


def cmd_drop(args) -> int:
    try:
        uri = redact.read_uri(uri_file=args.uri_file, env=args.uri_env)
    except (OSError, ValueError) as e:
        raise SystemExit(f"mongobench: {e}") from None
    drop_collection(uri, args.table)
    memory = server_memory_bytes(uri)
    print(
        json.dumps(
            {"dropped": args.table, "server_memory_mb": round(memory / MiB) if memory else None}
        )
    )
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """`mongobench sweep plan|run|drop`."""
    p = subparsers.add_parser("sweep", help="YCSB dataset-size sweep (seed 002)")
    sub = p.add_subparsers(dest="action", required=True)
    sizes = argparse.ArgumentParser(add_help=False)
    sizes.add_argument(
        "--sizes",
        default=",".join(str(s) for s in DEFAULT_SIZES_MB),
        help="dataset sizes in MB of 1 KB records (default: %(default)s)",
    )
    sizes.add_argument(
        "--operations", type=int, help="operations per workload (default: the record count)"
    )
    sizes.add_argument(
        "--memory-mb",
        type=float,
        help="memory (MiB) of the machine holding the data, for exceeds_memory (default, run:"
        " the server's hostInfo, else this host's; plan: this host's)",
    )
    pl = sub.add_parser("plan", parents=[sizes], help="sizes, record counts, memory flags")
    pl.set_defaults(func=cmd_plan)

    run = sub.add_parser("run", parents=[sizes], help="run the sweep here against a URI")
    target = run.add_mutually_exclusive_group(required=True)
    target.add_argument("--uri-file", help="file holding the connection string")
    target.add_argument("--uri-env", help="environment variable holding the connection string")
    run.add_argument("--out", help="results file (PKB results format, one JSON sample a line)")
    run.add_argument("--phases", default="all", help="load,read_only,update_only,read_update")
    run.add_argument("--threads", type=int, default=1, help="YCSB client threads")
    run.add_argument("--max-seconds", type=int, help="cap on each phase (YCSB maxexecutiontime)")
    run.add_argument("--load-batchsize", type=int, help="insert batch size of the load")
    run.add_argument("--table", default=DEFAULT_TABLE, help="collection (dropped at each size)")
    run.add_argument("--keep-data", action="store_true", help="leave the last size's data")
    run.add_argument("--raw-dir", help="keep every YCSB output (redacted) here")
    run.add_argument("--metadata", action="append", metavar="KEY=VALUE", help="add to every sample")
    run.add_argument("--run-uri", help="run id written into the results (default: random)")
    run.set_defaults(func=cmd_run)

    dr = sub.add_parser(
        "drop", help="drop the sweep's collection; print the server's memory (JSON)"
    )
    dtarget = dr.add_mutually_exclusive_group(required=True)
    dtarget.add_argument("--uri-file")
    dtarget.add_argument("--uri-env")
    dr.add_argument("--table", default=DEFAULT_TABLE)
    dr.set_defaults(func=cmd_drop)
    return p
