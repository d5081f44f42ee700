"""Repeats: Student's t intervals, the interleaved schedule, samples folded per figure."""

import math
import statistics

import pytest

from mongobench.core import repeats, stats
from mongobench.perftables import runner


def test_t_quantiles_and_interval_by_hand():
    assert stats.t975(1) == 12.706 and stats.t975(4) == 2.776 and stats.t975(30) == 2.042
    assert stats.t975(35) == 2.042  # between rows: the wider one
    assert stats.t975(500) == 1.960
    with pytest.raises(ValueError):
        stats.t975(0)
    iv = stats.interval([10.0, 12.0, 14.0])
    half = 4.303 * 2.0 / math.sqrt(3)  # stdev of 10, 12, 14 is 2
    assert (iv.n, iv.mean, iv.stdev) == (3, 12.0, 2.0)
    assert iv.low == pytest.approx(12 - half) and iv.high == pytest.approx(12 + half)
    one = stats.interval([5])
    assert (one.stdev, one.low, one.high) == (0.0, 5.0, 5.0)
    assert iv.overlaps(stats.interval([16.0, 17.0, 18.0]))
    assert not iv.overlaps(stats.interval([30.0, 31.0, 32.0]))


def test_schedule_interleaves_rounds_in_alternating_direction():
    plans = [("A", ["a1", "a2"]), ("B", ["b1"])]
    order = [(e, v, r) for e, v, r in runner.schedule(plans, 3)]
    assert order == [
        ("A", "a1", 0), ("A", "a2", 0), ("B", "b1", 0),
        ("B", "b1", 1), ("A", "a2", 1), ("A", "a1", 1),
        ("A", "a1", 2), ("A", "a2", 2), ("B", "b1", 2),
    ]  # fmt: skip
    assert runner.schedule(plans) == [("A", "a1", 0), ("A", "a2", 0), ("B", "b1", 0)]


def _sample(metric, value, variant, ts, **md):
    return {
        "metric": metric, "value": value, "unit": "docs/sec", "timestamp": ts,
        "metadata": {"experiment": "insert_docsize", "variant": variant, **md},
    }  # fmt: skip


def test_combine_folds_repeats_per_figure_and_keeps_singles():
    samples = [
        _sample("Document Throughput", 100.0, "1", 30.0, repeat=0),
        _sample("Document Throughput", 900.0, "4", 31.0),
        _sample("Document Throughput", 110.0, "1", 10.0, repeat=1),
        _sample("Document Throughput", 120.0, "1", 20.0, repeat=2),
        _sample("read p99 latency", 2.0, "1", 30.0, op="read", repeat=0),
        _sample("read p99 latency", 4.0, "1", 10.0, op="read", repeat=1),
        _sample("Document Throughput", 7.0, "9", 1.0),  # two runs that are not repeats
        _sample("Document Throughput", 8.0, "9", 2.0),
    ]
    out = repeats.combine(samples)
    assert [(s["metric"], s["metadata"]["variant"]) for s in out] == [
        ("Document Throughput", "1"),
        ("Document Throughput", "4"),
        ("read p99 latency", "1"),
        ("Document Throughput", "9"),
        ("Document Throughput", "9"),
    ]
    tput, single, p99, *unrelated = out
    assert unrelated == samples[-2:]
    md = tput["metadata"]
    iv = stats.interval([100, 110, 120])
    assert tput["value"] == 110.0 and tput["timestamp"] == 10.0
    assert md["repeats"] == 3 and md["stdev"] == statistics.stdev([100, 110, 120])
    assert (md["ci95_low"], md["ci95_high"]) == (iv.low, iv.high)
    assert md["repeat_values"] == "100,110,120" and "repeat" not in md
    assert single == samples[1] and "repeats" not in single["metadata"]
    assert p99["value"] == 3.0 and p99["metadata"]["repeats"] == 2
    assert repeats.interval_of(tput) == iv
    assert repeats.interval_of(single) is None
