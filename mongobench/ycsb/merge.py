"""Merging several YCSB processes' results: histograms, percentiles, sums."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from hdrh.histogram import HdrHistogram

from mongobench.core import latency
from mongobench.ycsb import parse

# Operation sections that are client operations (CLEANUP, INIT, ... are not).
_OPS = ("INSERT", "READ", "UPDATE", "SCAN", "DELETE", "READ-MODIFY-WRITE")


def combine(
    results: Sequence[parse.YcsbResult],
    histograms: Sequence[Mapping[str, str]] | None = None,
) -> tuple[parse.YcsbResult, str]:
    """One result from processes that ran a phase together, and how its percentiles were
    obtained: throughput is the sum, runtime the longest, the average weighted by operations,
    and percentiles exact from the merged HdrHistogram logs when every process left one
    (else the worst process's value, an upper bound)."""
    if not results:
        raise ValueError("no results to combine")
    if len(results) == 1:
        return results[0], "one process"
    sources = set()
    ops: dict[str, parse.OpStats] = {}
    names = sorted({n for r in results for n in r.ops})
    for name in names:
        idx = [i for i, r in enumerate(results) if name in r.ops]
        parts = [results[i].ops[name] for i in idx]
        count = sum(p.operations for p in parts)
        avg = None
        if count and all(p.average_us is not None for p in parts):
            avg = sum(p.average_us * p.operations for p in parts) / count
        wanted = sorted({q for p in parts for q in p.percentiles_us})
        merged = merged_op_histogram([histograms[i] for i in idx], name) if histograms else None
        pct: dict[float, float] = {}
        if merged is not None:
            for q in wanted:
                pct[q] = histogram_percentile_ms(merged, q) * 1000.0
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
        ops[name] = parse.OpStats(
            name=name,
            operations=count,
            average_us=avg,
            min_us=min(mins) if mins else None,
            max_us=max(maxs) if maxs else None,
            percentiles_us=pct,
            returns=returns,
        )
    result = parse.YcsbResult(
        runtime_ms=max(r.runtime_ms for r in results),
        throughput=sum(r.throughput for r in results),
        ops=ops,
        metrics={},
    )
    return result, " + ".join(sorted(sources)) or "max over processes"


def op_p99(
    parsed: Sequence[parse.YcsbResult], histograms: Sequence[Mapping[str, str]], op: str
) -> tuple[float | None, str]:
    """p99 (ms) of `op` over processes that ran together (op_percentile)."""
    return op_percentile(parsed, histograms, op, 99.0)


def op_percentile(
    parsed: Sequence[parse.YcsbResult],
    histograms: Sequence[Mapping[str, str]],
    op: str,
    p: float,
) -> tuple[float | None, str]:
    """The `p`th percentile (ms) of `op` over processes that ran together (`parsed[i]` and
    `histograms[i]` from process i), and its source: exact from the merged logs when every
    process left a usable one (also for a single process), else the largest printed
    per-process value (an upper bound), None when a process printed none."""
    merged = merged_op_histogram(histograms, op)
    if merged is not None:
        return histogram_percentile_ms(merged, p), "merged histograms"
    values = [r.percentile_ms(op, p) for r in parsed]
    if any(v is None for v in values):
        return None, "missing"
    return max(values), "max over processes"


# ----------------------------------------------------------------------------- histogram logs


def merged_op_histogram(histograms: Sequence[Mapping[str, str]], op: str):
    """The HdrHistogram of `op` merged over processes (`histograms[i]`: op -> `.hdr` log text
    of process i), or None when a process has no log for it, a log is damaged or the merged
    histogram is empty: callers then fall back to the printed per-process values."""
    texts = [h.get(op) for h in histograms]
    if not texts or not all(texts):
        return None
    try:
        merged = merge_histogram_logs(texts)
    except ValueError:
        return None
    return merged if merged.get_total_count() else None


def merge_histogram_logs(texts: Iterable[str]):
    """One HdrHistogram (microseconds) from YCSB ``.hdr`` interval logs of several processes,
    so a step's p99 is exact over all processes rather than a max of per-process p99s."""
    merged = latency.new_histogram()
    for text in texts:
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", '"')):
                continue
            fields = line.split(",")
            if fields[0].startswith("Tag="):
                fields = fields[1:]
            if len(fields) < 4:
                raise ValueError(f"not an HdrHistogram log line: {line[:80]!r}")
            merged.add(HdrHistogram.decode(fields[3]))
    return merged


def histogram_percentile_ms(hist, p: float) -> float | None:
    """Percentile in ms with Java HdrHistogram's rank rule (ceil), so merged values agree with
    what YCSB prints; the Python library rounds the rank and can land one value lower."""
    total = hist.get_total_count()
    if total == 0:
        return None
    rank = max(1, math.ceil(p / 100.0 * total))
    seen = 0
    for item in hist.get_recorded_iterator():
        seen += item.count_at_value_iterated_to
        if seen >= rank:
            return hist.get_highest_equivalent_value(item.value_iterated_to) / 1000.0
    return hist.get_max_value() / 1000.0
