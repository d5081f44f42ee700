"""Time series inside a timed phase: operations, documents, errors and latency per interval.

The interval clock is the phase's common start (every worker process and client VM starts
its timed phase at one handed-out time), so interval `k` is
[start + k * interval_s, start + (k + 1) * interval_s) on every client, and the intervals
of processes and client VMs merge by `k` (their start on the common clock).

A recorder (`Series.live`) belongs to one ThreadStats (a worker process's event loop, or
one pymongo client thread). It is cut when the clock passes an interval boundary: the
multiplexed loop checks at each wake-up (no clock read per operation), a client thread at
each recorded operation or error (LatencyRecorder.tick). A cut gives the interval that just
ended everything counted since the last cut: the operations and documents (deltas of the
stats' counters, so the intervals always sum to the phase's counts), the errors, and the
latencies recorded in it, kept to two significant digits (within 5 %) so that an hour of
one-second intervals stays a few MB. The last interval is usually shorter than the others;
its rate is over its own length.
"""

from __future__ import annotations

import base64
import json
import math
import time
import zlib
from array import array
from collections import Counter

DEFAULT_INTERVAL_S = 1.0
# Intervals a variant's phase must span for the report to draw its throughput over time.
LONG_PHASE_INTERVALS = 5
PERCENTILES = (50.0, 95.0, 99.0)


def quantize(micros: int) -> int:
    """`micros` to two significant digits (nearest): the latency key of an interval."""
    if micros < 100:
        return max(int(micros), 1)
    p = 10 ** (len(str(int(micros))) - 2)
    return (int(micros) + p // 2) // p * p


class _Row:
    __slots__ = ("ops", "docs", "errors", "keys", "counts")

    def __init__(self):
        self.ops = self.docs = self.errors = 0
        self.keys, self.counts = array("q"), array("q")

    def latencies(self) -> Counter:
        return Counter(dict(zip(self.keys, self.counts, strict=True)))

    def add_latencies(self, found: Counter) -> None:
        if self.keys:
            found = self.latencies() + found
        items = sorted(found.items())
        self.keys = array("q", (k for k, _ in items))
        self.counts = array("q", (n for _, n in items))


class Series:
    """Intervals of `interval_s` seconds, by index from the common start: merged ones, or
    one recorder's (see `live`)."""

    def __init__(self, interval_s: float):
        if not interval_s > 0:
            raise ValueError(f"interval must be > 0 seconds, not {interval_s}")
        self.interval_s = float(interval_s)
        self.rows: dict[int, _Row] = {}
        self.stats = None  # a live recorder's ThreadStats
        self.next_cut = math.inf

    @classmethod
    def live(cls, stats, interval_s: float, t0: float) -> Series:
        """A recorder of `stats` whose interval 0 starts at `t0` (time.perf_counter() of
        the common start); it is attached to the stats (stats.series) and returned."""
        s = cls(interval_s)
        s.stats, s.t0, s.k = stats, t0, 0
        s._base = s._totals()
        s.next_cut = t0 + s.interval_s
        stats.series = s
        return s

    def _totals(self) -> tuple[int, int, int]:
        st = self.stats
        return sum(st.ops.values()), st.docs, sum(st.errors.values())

    def check(self, now: float | None = None) -> None:
        """Cuts when the clock (perf_counter seconds) has passed the current interval."""
        now = time.perf_counter() if now is None else now
        if now >= self.next_cut:
            self.cut(now)

    def cut(self, now: float) -> None:
        """Everything counted since the last cut goes to the current interval (every
        operation since then completed in it: a later one would have cut earlier); the
        current interval becomes the one holding `now`."""
        totals = self._totals()
        row = self.rows.get(self.k)
        if row is None:
            row = self.rows[self.k] = _Row()
        row.ops += totals[0] - self._base[0]
        row.docs += totals[1] - self._base[1]
        row.errors += totals[2] - self._base[2]
        self._base = totals
        found = Counter()
        for pending in self.stats.latency.take_pending().values():
            for micros, n in pending.items():
                found[quantize(micros)] += n
        if found:
            row.add_latencies(found)
        if not (row.ops or row.docs or row.errors or row.keys):
            del self.rows[self.k]
        self.k = max(self.k, int((now - self.t0) // self.interval_s))
        self.next_cut = self.t0 + (self.k + 1) * self.interval_s

    def close(self, now: float | None = None) -> None:
        """The end of the phase: the last counts go to the current interval."""
        if self.stats is not None:
            self.cut(time.perf_counter() if now is None else now)
            self.stats = None
            self.next_cut = math.inf

    # -- merged form
    def merge(self, other: Series) -> None:
        if other.interval_s != self.interval_s:
            raise ValueError(
                f"cannot merge intervals of {other.interval_s:g} s into {self.interval_s:g} s"
            )
        for k, o in other.rows.items():
            row = self.rows.get(k)
            if row is None:
                row = self.rows[k] = _Row()
            row.ops += o.ops
            row.docs += o.docs
            row.errors += o.errors
            if o.keys:
                row.add_latencies(o.latencies())

    def encode(self) -> dict:
        """Plain data (pipes between processes, documents between client VMs): the rows
        as compressed JSON, so an hour of intervals stays far below a document's 16 MB."""
        rows = [
            [k, r.ops, r.docs, r.errors, list(r.keys), list(r.counts)]
            for k, r in sorted(self.rows.items())
        ]
        packed = zlib.compress(json.dumps(rows, separators=(",", ":")).encode(), 6)
        return {"interval_s": self.interval_s, "rows_z": base64.b64encode(packed).decode()}

    @classmethod
    def decode(cls, data: dict) -> Series:
        s = cls(data["interval_s"])
        rows = json.loads(zlib.decompress(base64.b64decode(data["rows_z"])))
        for k, ops, docs, errors, keys, counts in rows:
            row = s.rows[int(k)] = _Row()
            row.ops, row.docs, row.errors = ops, docs, errors
            row.keys, row.counts = array("q", keys), array("q", counts)
        return s

    def summary(self, start: float, duration_s: float) -> dict:
        """The stored form of a variant's series: for every interval from 0 to the end of
        the phase (`duration_s` after `start`, epoch seconds), its start (seconds from the
        phase's start), length, counts, rates and latency percentiles (ms; None without an
        operation)."""
        dt = self.interval_s
        last = max([*self.rows, max(0, math.ceil(duration_s / dt) - 1)])
        out = {"interval_s": dt, "start": start, "t_s": [], "seconds": [], "ops": [],
               "docs": [], "errors": [], "ops_per_s": [], "docs_per_s": [],
               **{f"p{p:g}_ms": [] for p in PERCENTILES}, "max_ms": []}  # fmt: skip
        for k in range(last + 1):
            row = self.rows.get(k) or _Row()
            length = min(dt, duration_s - k * dt) if duration_s > k * dt else dt
            length = max(length, 1e-3)
            out["t_s"].append(round(k * dt, 6))
            out["seconds"].append(round(length, 6))
            out["ops"].append(row.ops)
            out["docs"].append(row.docs)
            out["errors"].append(row.errors)
            out["ops_per_s"].append(row.ops / length)
            out["docs_per_s"].append(row.docs / length)
            pct = percentiles(row.keys, row.counts)
            for p in PERCENTILES:
                out[f"p{p:g}_ms"].append(pct.get(p))
            out["max_ms"].append(row.keys[-1] / 1000.0 if row.keys else None)
        return out


def percentiles(keys, counts, wanted=PERCENTILES) -> dict[float, float]:
    """{p: ms} of latencies `keys` (microseconds, ascending) seen `counts` times: the
    smallest value with at least p % of the operations at or below it."""
    total = sum(counts)
    if not total:
        return {}
    out, seen, i = {}, 0, 0
    for p in sorted(wanted):
        need = math.ceil(total * p / 100.0)
        while seen + counts[i] < need:
            seen += counts[i]
            i += 1
        out[p] = keys[i] / 1000.0
    return out
