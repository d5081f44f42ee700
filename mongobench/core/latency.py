"""Client-side latency per operation type, in HdrHistogram (microseconds)."""

from __future__ import annotations

import base64
from collections import Counter

from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour: nothing a client waits for is longer
SIGNIFICANT_DIGITS = 3
PERCENTILES = (50.0, 95.0, 99.0, 99.9)


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


class LatencyRecorder:
    """One histogram per operation type; one recorder per thread (not locked).

    `record()` only counts the integer microsecond in a dict (a C-level
    increment); the counts go into HdrHistogram when the histograms are read.
    HdrHistogram's own record_value is Python and cost more than the rest of
    a pipelined operation. The result is the same histogram.
    """

    def __init__(self):
        self._hist: dict[str, HdrHistogram] = {}
        self._pending: dict[str, Counter] = {}
        # Called before each operation is recorded, when set: a client thread's interval
        # recorder (core.series) checks the clock there.
        self.tick = None

    def record(self, op: str, micros: float) -> None:
        if self.tick is not None:
            self.tick()
        pending = self._pending.get(op)
        if pending is None:
            pending = self._pending[op] = Counter()
        pending[int(micros)] += 1

    @property
    def histograms(self) -> dict[str, HdrHistogram]:
        self.take_pending()
        return self._hist

    def take_pending(self) -> dict[str, Counter]:
        """The latencies recorded since the last call (op -> Counter of microseconds), now
        in the histograms too (core.series keeps them per interval)."""
        taken, self._pending = self._pending, {}
        for op, pending in taken.items():
            hist = self._hist.get(op)
            if hist is None:
                hist = self._hist[op] = new_histogram()
            for micros, count in pending.items():
                hist.record_value(min(max(micros, LOWEST_US), HIGHEST_US), count)
        return taken

    def merge(self, other: LatencyRecorder) -> None:
        mine = self.histograms
        for op, hist in other.histograms.items():
            if op not in mine:
                mine[op] = new_histogram()
            mine[op].add(hist)

    def encode(self) -> dict[str, str]:
        """Compressed histograms, so several clients can be merged exactly."""
        return {op: base64.b64encode(h.encode()).decode() for op, h in self.histograms.items()}

    @classmethod
    def decode(cls, encoded: dict[str, str]) -> LatencyRecorder:
        rec = cls()
        for op, text in encoded.items():
            hist = HdrHistogram.decode(base64.b64decode(text))
            # decode() keeps the encoder's range; merge into ours to normalise.
            rec._hist[op] = new_histogram()
            rec._hist[op].add(hist)
        return rec


def summarize(hist: HdrHistogram) -> dict[str, float]:
    """Count, mean, percentiles and max in milliseconds."""
    if hist.get_total_count() == 0:
        return {"count": 0}
    out = {
        "count": hist.get_total_count(),
        "mean_ms": hist.get_mean_value() / 1000.0,
        "max_ms": hist.get_max_value() / 1000.0,
    }
    for p in PERCENTILES:
        out[f"p{p:g}_ms"] = hist.get_value_at_percentile(p) / 1000.0
    return out
