"""YCSB's status lines (its `-s` output) as a time series of a phase.

With `-s`, YCSB prints a line every `status.interval` seconds on stderr:

    2026-11-27 08:47:01:053 13 sec: 101 operations; 26.12 current ops/sec; est completion in
    43 minutes [READ: Count=24, Max=173567, Min=19760, Avg=79070.67, 90=116159, 99=173567,
    99.9=173567, 99.99=173567] [UPDATE: Count=4, ...]

(the date is the client's local time to the millisecond, the operations are cumulative, the
bracketed figures are the interval's, latencies in microseconds; a failed operation counts
under `<OP>-FAILED`). A phase's series is built from them as core.series builds the
engine's own: interval `k` is `[t0 + k * interval, t0 + (k + 1) * interval)` after the
phase's first status line (its "0 sec" line, printed at the start); each line closes the
interval it ends in, with the operations done since the line before (deltas of the
cumulative count, so the intervals add up to YCSB's own total), the failed ones, and the
interval's per-operation latencies. Several processes (client VMs) merge by interval start
from the earliest process's start; within an interval their latency averages are weighted
by count and their percentiles and maxima are the highest of them (a percentile of merged
processes cannot be computed from theirs: the highest is an upper bound).

The dates are read as UTC (PKB's VMs run in UTC); the series' timestamps are those.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mongobench.core import samples as core_samples

# YCSB's own default status.interval; the sweep and stress runs set it explicitly.
STATUS_INTERVAL_S = 10

_LINE = re.compile(
    r"^(?P<date>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d):(?P<ms>\d{1,3}) (?P<elapsed>\d+) sec: "
    r"(?P<ops>\d+) operations;(?P<rest>.*)$"
)
_GROUP = re.compile(r"\[(?P<op>[A-Z][A-Z0-9_-]*): (?P<stats>[^\]]*)\]")
# Latency statistics of a status group, in microseconds: name -> our key (ms)
_STATS = {"Avg": "avg_ms", "90": "p90_ms", "99": "p99_ms", "99.9": "p99.9_ms", "Max": "max_ms"}
_NON_OPS = ("CLEANUP", "INIT")


@dataclass(frozen=True)
class StatusLine:
    at: float  # epoch seconds (the line's date read as UTC)
    operations: int  # cumulative
    groups: dict[str, dict[str, float]] = field(default_factory=dict)  # op -> stat -> value


def parse_lines(text: str) -> list[StatusLine]:
    """The status lines of one YCSB process's output (stdout and stderr, in any order of
    other lines), in their order."""
    out = []
    for raw in text.splitlines():
        m = _LINE.match(raw.strip())
        if not m:
            continue
        at = calendar.timegm(time.strptime(m["date"], "%Y-%m-%d %H:%M:%S")) + int(m["ms"]) / 1e3
        groups = {}
        for g in _GROUP.finditer(m["rest"]):
            stats = {}
            for part in g["stats"].split(","):
                name, _, value = part.strip().partition("=")
                try:
                    stats[name] = float(value)
                except ValueError:
                    continue
            groups[g["op"]] = stats
        out.append(StatusLine(at, int(m["ops"]), groups))
    return out


@dataclass
class _Interval:
    ops: int = 0
    errors: int = 0
    end: float = 0.0  # the last line closing it
    latency: dict[str, dict[str, float]] = field(default_factory=dict)  # op -> key -> ms
    counts: dict[str, float] = field(default_factory=dict)  # op -> count (for the averages)

    def add_group(self, op: str, stats: dict[str, float]) -> None:
        n = stats.get("Count", 0.0)
        if not n:
            return
        mine = self.latency.setdefault(op, {})
        before = self.counts.get(op, 0.0)
        self.counts[op] = before + n
        for name, key in _STATS.items():
            if name not in stats:
                continue
            v = stats[name] / 1000.0
            if key == "avg_ms":
                mine[key] = (mine.get(key, 0.0) * before + v * n) / (before + n)
            else:
                mine[key] = max(mine.get(key, 0.0), v)


def series(outputs: Sequence[str], interval_s: float = STATUS_INTERVAL_S) -> dict | None:
    """The phase's series from its processes' outputs (None without two status lines):
    {"interval_s", "start" (epoch), "t_s", "seconds", "ops", "errors", "ops_per_s",
    "latency": {op: {"avg_ms"|"p90_ms"|"p99_ms"|"p99.9_ms"|"max_ms": [per interval]}}}."""
    procs = [lines for lines in (parse_lines(t) for t in outputs) if len(lines) >= 2]
    if not procs:
        return None
    t0 = min(lines[0].at for lines in procs)
    rows: dict[int, _Interval] = {}
    for lines in procs:
        for prev, line in zip(lines, lines[1:], strict=False):
            k = max(0, round((line.at - t0) / interval_s) - 1)
            row = rows.setdefault(k, _Interval())
            row.ops += line.operations - prev.operations
            row.end = max(row.end, line.at)
            for op, stats in line.groups.items():
                if op.endswith("-FAILED"):
                    row.errors += int(stats.get("Count", 0))
                elif op not in _NON_OPS:
                    row.add_group(op, stats)
    last = max(rows)
    ops_names = sorted({op for r in rows.values() for op in r.latency})
    out = {
        "interval_s": float(interval_s), "start": t0, "t_s": [], "seconds": [], "ops": [],
        "errors": [], "ops_per_s": [],
        "latency": {op: {key: [] for key in _STATS.values()} for op in ops_names},
    }  # fmt: skip
    for k in range(last + 1):
        row = rows.get(k) or _Interval()
        length = interval_s
        if k == last:  # the final line comes when the phase ends: its own length
            length = max(row.end - (t0 + k * interval_s), 1e-3)
        out["t_s"].append(round(k * interval_s, 6))
        out["seconds"].append(round(length, 6))
        out["ops"].append(row.ops)
        out["errors"].append(row.errors)
        out["ops_per_s"].append(row.ops / length)
        for op in ops_names:
            got = row.latency.get(op, {})
            for key in _STATS.values():
                out["latency"][op][key].append(got.get(key))
    return out


# Latency series of each operation: (series key, the statistic's name in PKB's scheme)
LATENCY_SERIES = (
    ("avg_ms", "AverageLatency"),
    ("p90_ms", "p90 latency"),
    ("p99_ms", "p99 latency"),
    ("p99.9_ms", "p99.9 latency"),
    ("max_ms", "MaxLatency"),
)


def samples(ser: dict | None, md: Mapping, throughput_metric: str) -> list[dict]:
    """A phase's series as PKB time-series samples (core.samples.time_series): the
    throughput (`<throughput_metric> time series`, ops/sec), `Operation Errors time
    series` (count) and per operation `<op> <stat> time series` (ms, only the intervals
    that had the operation), each with `md`, `interval_s` and `intervals`."""
    if not ser or not ser.get("t_s"):
        return []
    stamps = [ser["start"] + t for t in ser["t_s"]]
    dt = ser["interval_s"]
    ts_md = dict(md, interval_s=dt, intervals=len(stamps))
    out = [
        core_samples.time_series(
            f"{throughput_metric} time series", ser["ops_per_s"], stamps, "ops/sec", dt, ts_md
        ),
        core_samples.time_series(
            "Operation Errors time series", ser["errors"], stamps, "count", dt, ts_md
        ),
    ]
    for op, by_key in sorted(ser.get("latency", {}).items()):
        for key, stat in LATENCY_SERIES:
            pairs = [(t, v) for t, v in zip(stamps, by_key.get(key, ()), strict=False) if v]
            if pairs:
                times, values = zip(*pairs, strict=True)
                out.append(
                    core_samples.time_series(
                        f"{op.lower()} {stat} time series",
                        values,
                        times,
                        "ms",
                        dt,
                        dict(ts_md, op=op),
                    )  # fmt: skip
                )
    return out
