"""Throughput over time inside each long phase, from time-series samples (PKB host only).

A variant's `Operation Throughput time series` sample (reports.results.series_samples, or a
sweep or stress phase's `... time series` from YCSB's status lines) holds its per-interval
values in PKB's time-series form. The report draws one panel per experiment (or sweep
phase) with a line per variant whose phase spans at least core.series.LONG_PHASE_INTERVALS
intervals: seconds since the phase's start on x, its throughput on y. Shorter phases have
too few points to show a shape (their table figure says all there is).
"""

from __future__ import annotations

import ast
import json
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from mongobench.core.series import LONG_PHASE_INTERVALS

THROUGHPUT_SERIES = "Operation Throughput time series"
# A sweep phase's and a stress step's, from YCSB's status lines (ycsb.status.samples)
YCSB_THROUGHPUT_SERIES = "overall Throughput time series"


@dataclass(frozen=True)
class Line:
    label: str  # the variant (and run, when several)
    seconds: tuple[float, ...]  # interval starts, seconds after the phase's start
    values: tuple[float, ...]
    unit: str
    interval_s: float


def _numbers(v) -> list[float] | None:
    """A list of numbers from a sample's metadata: a list (`metadata`), or its text as PKB
    writes labels (`[1.0, 2.5]`)."""
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            try:
                v = ast.literal_eval(v)
            except (ValueError, SyntaxError):
                return None
    if not isinstance(v, (list, tuple)):
        return None
    try:
        return [float(x) for x in v]
    except (TypeError, ValueError):
        return None


def variant_label(md: Mapping) -> str:
    """A perftables variant's line: its label."""
    return str(md.get("variant") or md.get("phase") or "?")


def size_label(md: Mapping) -> str:
    """A sweep phase's line: its dataset size (`1 MB`)."""
    return str(md.get("size_label") or f"{md.get('size_mb', '?')} MB")


def step_label(md: Mapping) -> str:
    """A stress step's line: `step 3 (3 instances)`."""
    n = md.get("instances")
    return f"step {md.get('step', '?')}" + (f" ({n} instances)" if n not in (None, "") else "")


def long_phases(
    samples: Sequence[Mapping],
    metric: str = THROUGHPUT_SERIES,
    group_key: str | None = "experiment",
    label_of: Callable[[Mapping], str] = variant_label,
) -> dict[str, list[Line]]:
    """group (the samples' `group_key` metadata; "" for all when None) -> one Line per long
    phase with a `metric` time series, labelled by `label_of(metadata)`, in the samples'
    order."""
    runs = {s.get("run_uri", "") for s in samples if s.get("metric") == metric}
    out: dict[str, list[Line]] = {}
    for s in samples:
        if s.get("metric") != metric:
            continue
        md = s.get("metadata") or {}
        values, stamps = _numbers(md.get("values")), _numbers(md.get("timestamps"))
        if not values or not stamps or len(values) != len(stamps):
            continue
        if len(values) < LONG_PHASE_INTERVALS:
            continue
        try:
            interval = float(md.get("interval"))
        except (TypeError, ValueError):
            continue
        label = label_of(md)
        if md.get("repeat") not in (None, ""):
            label += f" (repeat {int(float(md['repeat'])) + 1})"
        if len(runs) > 1 and s.get("run_uri"):
            label = f"{s['run_uri']}: {label}"
        first = stamps[0]
        line = Line(label, tuple(t - first for t in stamps), tuple(values), s.get("unit", ""),
                    interval)  # fmt: skip
        group = "" if group_key is None else str(md.get(group_key) or "?")
        out.setdefault(group, []).append(line)
    return out


def plot(
    title: str,
    lines: Sequence[Line],
    path: str,
    note: str | None = None,
    legend: str = "variant",
) -> str | None:
    """One panel, a line per phase (its throughput per interval over seconds since its
    start), the legend titled `legend`; the PNG's path, or None without lines."""
    if not lines:
        return None
    # Imported here: matplotlib is not a client requirement (client VMs never plot).
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 4.6))
    ax = fig.subplots()
    for line in lines:
        # each value is the rate over its interval: drawn as steps over the interval
        xs = [*line.seconds, line.seconds[-1] + line.interval_s]
        ax.step(xs, [*line.values, line.values[-1]], where="post", label=line.label)
    units = sorted({line.unit for line in lines})
    ax.set_xlabel("seconds since the phase's start")
    ax.set_ylabel(f"throughput ({', '.join(units)})")
    ax.set_ylim(bottom=0)
    intervals = sorted({line.interval_s for line in lines})
    per = ", ".join(f"{i:g}" for i in intervals)
    ax.set_title(textwrap.fill(f"{title}: throughput over time (per {per} s)", 80), fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", ncol=2 if len(lines) > 6 else 1, title=legend)
    if note:
        fig.text(0.01, 0.005, note, fontsize="x-small", va="bottom", wrap=True)
        fig.tight_layout(rect=(0, 0.06, 1, 1))
    else:
        fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path
