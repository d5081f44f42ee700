"""Samples, failure samples and the text table of the sweep."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence

from mongobench.core import files
from mongobench.core import samples as core_samples
from mongobench.core.markdown import fixed, md_table
from mongobench.core.samples import sample
from mongobench.remote import provenance
from mongobench.sweep.plan import (
    BENCHMARK_NAME,
    DISTRIBUTION,
    FAILED_METRIC,
    LATENCY_STATS,
    OPTIONAL_STATS,
    P99_STAT,
    PHASES,
    RUNTIME_METRIC,
    THROUGHPUT_METRIC,
    Phase,
    SizeStep,
    latency_metric,
)
from mongobench.ycsb import parse as ycsb
from mongobench.ycsb import status as ycsb_status
from mongobench.ycsb.merge import _OPS, combine


def base_metadata(steps: Sequence[SizeStep], threads: int, extra: Mapping | None = None) -> dict:
    """Metadata of every sample of a sweep: `extra` (user keys first), then the sweep's own
    and the provenance of the engine and of the YCSB client."""
    return {
        **(extra or {}),
        "threads": threads,
        "request_distribution": DISTRIBUTION,
        "sweep_sizes_mb": ",".join(f"{s.size_mb:g}" for s in steps),
        **provenance.engine(),
        **provenance.ycsb(),
    }


def phase_metadata(step: SizeStep, phase: Phase, extra: Mapping | None = None) -> dict:
    md = dict(extra or {})
    md.update(step.metadata())
    md.update({"phase": phase.name, "phase_title": phase.title, "ycsb_phase": phase.ycsb_phase})
    return md


def phase_samples(
    step: SizeStep, phase: Phase, result: ycsb.YcsbResult, metadata: Mapping | None = None
) -> list[dict]:
    """Runtime, throughput and average/p50/p95/p99 latency per operation of one phase, under
    PKB's ycsb_stats names and units (`overall RunTime` in ms, latencies in ms)."""
    md = phase_metadata(step, phase, metadata)
    expected = step.records if phase.ycsb_phase == "load" else step.operations
    md["operations"] = result.operations
    if result.operations < expected:
        md["stopped_early"] = True  # maxexecutiontime ended the phase
    if result.not_found:
        md["not_found"] = result.not_found
    missing = []
    out = [
        sample(RUNTIME_METRIC, result.runtime_ms, "ms", md),
        sample(THROUGHPUT_METRIC, result.throughput, "ops/sec", md),
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
                if stat not in OPTIONAL_STATS:
                    missing.append(latency_metric(op, stat))
                continue
            out.append(sample(latency_metric(op, stat), value, "ms", op_md))
    if missing:
        for s in out:
            s["metadata"]["missing_metrics"] = ",".join(missing)
    return out


def failure_sample(
    step: SizeStep, phase: Phase, error: str, metadata: Mapping | None = None
) -> dict:
    return core_samples.failure_sample(FAILED_METRIC, error, phase_metadata(step, phase, metadata))


def skipped_phases(phases: Sequence[Phase], failed: Phase) -> list[Phase]:
    """Phases that cannot run at a size once `failed` failed there (a failed load: all)."""
    if failed.ycsb_phase == "load":
        return [p for p in phases if p is not failed]
    return []


def measure(
    step: SizeStep,
    phase: Phase,
    output: ycsb.Outcome | str,
    metadata: Mapping | None = None,
    status_interval_s: int = ycsb_status.STATUS_INTERVAL_S,
) -> list[dict]:
    """Samples of one phase from its YCSB process's outcome (or output, the process having
    exited 0); a failed phase gives one `Phase Failed`."""
    return measure_processes(step, phase, [output], metadata, status_interval_s=status_interval_s)


def measure_processes(
    step: SizeStep,
    phase: Phase,
    outputs: Sequence[ycsb.Outcome | str],
    metadata: Mapping | None = None,
    histograms: Sequence[Mapping[str, str]] | None = None,
    status_interval_s: int = ycsb_status.STATUS_INTERVAL_S,
) -> list[dict]:
    """Samples of one phase run by one or more YCSB processes (their outcomes, judged by
    `ycsb.judge`, and optionally their HdrHistogram logs by operation), with the phase's
    time series from their status lines (every `status_interval_s`, the property files'
    status.interval). Any failed process fails the phase: one `Phase Failed` sample naming
    it, never a partial figure."""
    results = []
    for i, outcome in enumerate(outputs):
        try:
            results.append(
                ycsb.judge(outcome, required_ops=phase.ops, required_percentiles=(99.0,))
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
    # the phase's time series from YCSB's status lines (merged over the processes)
    texts = [o.text if isinstance(o, ycsb.Outcome) else o for o in outputs]
    ser = ycsb_status.series(texts, status_interval_s)
    over_time = ycsb_status.samples(ser, phase_metadata(step, phase, md), THROUGHPUT_METRIC)
    return phase_samples(step, phase, result, md) + over_time


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
            row["runtime"] = s["value"] / 1000.0  # ms, as PKB's; the table says seconds
        elif s["metric"] == FAILED_METRIC:
            row["error"] = md.get("error", "failed")
        elif "op" in md and s["metric"] == latency_metric(md["op"], P99_STAT):
            row["p99"][md["op"]] = s["value"]
    headers = ["Size", "Records", "Phase", "Runtime (s)", "Throughput (ops/s)", "p99 (ms)"]
    table = []
    for (_, _), row in sorted(rows.items()):
        md = row["md"]
        p99 = ", ".join(f"{op} {v:.3f}" for op, v in row["p99"].items()) or "n/a"
        if "error" in row:
            p99 = "FAILED: " + str(row["error"])[:80]
        table.append(
            [md["size_label"], md["records"], md["phase_title"], fixed(row.get("runtime"), 3),
             fixed(row.get("tput"), 1), p99, yes_no(md.get("exceeds_memory"))]
        )  # fmt: skip
    return md_table(
        [*headers, "> memory"], table, ["--:", "--:", ":--", "--:", "--:", ":--", ":--"]
    )


def yes_no(flag: bool | None) -> str:
    """yes / no, or n/a when unknown (exceeds_memory without a memory figure)."""
    return "n/a" if flag is None else ("yes" if flag else "no")


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
    """(Re)writes the results file (core.files: atomic for a regular file): a crash later
    loses nothing written so far."""
    files.write_text(path, "".join(line + "\n" for line in results_lines(samples, run_uri)))
