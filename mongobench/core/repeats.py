"""Repeated runs (perftables variants, sweep phases: `--repeats N`) folded into one sample
per figure.

Each figure's value becomes the mean over the repeats that succeeded, with `repeats`,
`stdev`, `ci95_low` and `ci95_high` (Student's t) in its metadata and the single values in
`repeat_values`; the timestamp is the first repeat's start. Only samples that say which
`repeat` they come from are folded: the others, and time series, pass through unchanged.
"""

from __future__ import annotations

from mongobench.core import stats
from mongobench.core.samples import is_time_series

# What makes two samples the same figure of the same thing measured (in different repeats).
PERFTABLES_IDENTITY = ("experiment", "variant", "op", "hardware_step")
SWEEP_IDENTITY = ("size_mb", "phase", "op")


def combine(samples: list[dict], identity=PERFTABLES_IDENTITY) -> list[dict]:
    """One sample per figure (metric, unit and the `identity` metadata); order of first
    appearance is kept."""
    groups: dict[tuple | int, list[dict]] = {}
    for i, s in enumerate(samples):
        md = s.get("metadata") or {}
        key = (s["metric"], s.get("unit"), *(md.get(k) for k in identity))
        # a time series (core.samples.time_series) stays one per run: nothing to average
        folded = md.get("repeat") is not None and not is_time_series(s)
        groups.setdefault(key if folded else i, []).append(s)
    out = []
    for group in groups.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        iv = stats.interval(s["value"] for s in group)
        first = group[0]
        md = dict(first.get("metadata") or {})
        md.pop("repeat", None)
        md.update(
            repeats=iv.n,
            stdev=iv.stdev,
            ci95_low=iv.low,
            ci95_high=iv.high,
            repeat_values=",".join(f"{s['value']:.6g}" for s in group),
        )
        combined = dict(first, value=iv.mean, metadata=md)
        stamps = [s["timestamp"] for s in group if s.get("timestamp") is not None]
        if stamps:
            combined["timestamp"] = min(stamps)
        out.append(combined)
    return out


def interval_of(s: dict) -> stats.Interval | None:
    """The confidence interval a combined sample carries (None for a single run)."""
    md = s.get("metadata") or {}
    if not md.get("repeats") or md["repeats"] < 2 or md.get("ci95_low") is None:
        return None
    return stats.Interval(md["repeats"], s["value"], md["stdev"], md["ci95_low"], md["ci95_high"])
