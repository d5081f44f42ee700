"""core.series: intervals cut on a clock, merged by interval start, summed back to the
phase's counts, and their latency percentiles."""

import pytest

from mongobench.core import series
from mongobench.core.samples import is_time_series
from mongobench.driver import procs
from mongobench.driver.base import ThreadStats
from mongobench.reports import results


def _op(stats: ThreadStats, micros: int, op: str = "insert", docs: int = 1) -> None:
    stats.latency.record(op, micros)
    stats.ops[op] += 1
    stats.docs += docs


def _recorded(t0: float, events: list[tuple[float, int]], interval: float = 1.0):
    """A recorder fed (time, latency us) operations, cut at each as a loop would."""
    st = ThreadStats()
    st.record_intervals(interval, t0)
    for t, micros in events:
        st.series.check(t)
        _op(st, micros)
    return st


def test_operations_go_to_the_interval_they_completed_in():
    st = _recorded(100.0, [(100.1, 1000), (100.5, 2000), (101.2, 3000), (104.9, 4000)])
    st.close_intervals(105.3)
    rows = {k: (r.ops, list(r.keys)) for k, r in st.series.rows.items()}
    # nothing in intervals 2 and 3 (a stall shows as empty intervals, not a smear)
    assert rows == {0: (2, [1000, 2000]), 1: (1, [3000]), 4: (1, [4000])}


def test_errors_and_documents_per_interval():
    st = ThreadStats()
    st.record_intervals(1.0, 0.0)
    _op(st, 500, docs=10)
    st.series.check(1.5)
    st.errors["insert: AutoReconnect"] += 3
    st.close_intervals(1.7)
    s = st.series.summary(start=1000.0, duration_s=1.7)
    assert s["ops"] == [1, 0] and s["docs"] == [10, 0] and s["errors"] == [0, 3]
    assert s["seconds"] == [1.0, pytest.approx(0.7)]
    assert s["p50_ms"] == [0.5, None]


def test_processes_merge_by_interval_start_and_sum_to_the_counts():
    a = _recorded(10.0, [(10.2, 100), (11.1, 200), (12.5, 300)])
    a.close_intervals(13.0)
    b = _recorded(50.0, [(50.9, 150), (51.0, 250), (51.5, 350), (52.99, 450)])
    b.close_intervals(53.0)
    total = ThreadStats()
    for part in (a, b):  # as procs.run merges its workers' pipes
        total.merge(procs.decode_stats(procs.encode_stats(part)))
    s = total.series.summary(start=0.0, duration_s=3.0)
    assert s["ops"] == [2, 3, 2]
    assert sum(s["ops"]) == sum(total.ops.values()) == 7
    assert s["ops_per_s"] == [2.0, 3.0, 2.0]
    assert s["max_ms"] == [0.15, 0.35, 0.45]


def test_a_late_worker_counts_from_the_common_start():
    # a client VM that started 0.6 s late: its t0 is the common start's, not its own
    st = ThreadStats()
    st.record_intervals(1.0, 20.0 - 0.6)
    st.series.check(20.5)
    _op(st, 100)
    st.close_intervals(20.6)
    assert list(st.series.rows) == [1]


def test_the_pymongo_path_checks_the_clock_at_each_operation(monkeypatch):
    clock = iter([0.5, 1.2, 3.4, 3.5])
    monkeypatch.setattr(series.time, "perf_counter", lambda: next(clock))
    st = ThreadStats()
    st.record_intervals(1.0, 0.0, tick=True)
    for micros in (10, 20, 30):
        _op(st, micros)
    st.close_intervals()
    assert {k: r.ops for k, r in st.series.rows.items()} == {0: 1, 1: 1, 3: 1}
    assert st.latency.tick is None


def test_an_empty_phase_still_has_its_intervals():
    st = ThreadStats()
    st.record_intervals(0.5, 0.0)
    st.close_intervals(1.2)
    s = st.series.summary(start=0.0, duration_s=1.2)
    assert s["ops"] == [0, 0, 0] and s["p99_ms"] == [None, None, None]


@pytest.mark.parametrize(
    ("micros", "key"), [(7, 7), (99, 99), (123, 120), (1250, 1300), (98765, 99000)]
)
def test_latencies_keep_two_significant_digits(micros, key):
    assert series.quantize(micros) == key


def test_percentiles():
    keys, counts = [100, 200, 1000], [50, 45, 5]
    assert series.percentiles(keys, counts) == {50.0: 0.1, 95.0: 0.2, 99.0: 1.0}
    assert series.percentiles([], []) == {}


def test_intervals_of_different_lengths_do_not_merge():
    a, b = series.Series(1.0), series.Series(2.0)
    with pytest.raises(ValueError, match="cannot merge"):
        a.merge(b)


def test_the_samples_are_in_pkbs_time_series_form():
    st = _recorded(0.0, [(0.1, 1000), (1.5, 2000), (1.6, 4000)])
    st.close_intervals(2.0)
    res = {"series": st.series.summary(start=1000.0, duration_s=2.0), "start": 1000.0}
    out = results.series_samples(res, {"experiment": "e", "variant": "v"})
    assert all(is_time_series(s) for s in out)
    tput = next(s for s in out if s["metric"] == "Operation Throughput time series")
    md = tput["metadata"]
    assert tput["value"] == 0 and tput["unit"] == "ops/sec"
    assert md["values"] == [1.0, 2.0] and md["timestamps"] == [1000.0, 1001.0]
    assert md["interval"] == 1.0 and md["experiment"] == "e"
    p99 = next(s for s in out if s["metric"] == "p99 latency time series")
    assert p99["metadata"]["values"] == [1.0, 4.0]


def _run_with_series(n_intervals: int) -> dict:
    st = ThreadStats()
    st.record_intervals(1.0, 0.0)
    for k in range(n_intervals):
        st.series.check(k + 0.5)
        for _ in range(10 + k):
            _op(st, 1000)
    st.close_intervals(n_intervals)
    res = {
        "status": "ok", "experiment": "updateapi", "label": "0, update_one, False",
        "variant_index": 0, "settings": {"threads": 1}, "params": {}, "threads": 1,
        "start": 1000.0, "duration_s": float(n_intervals), "ops": dict(st.ops),
        "docs": st.docs, "bytes": 0, "errors": {}, "latency": st.latency.encode(),
        "client_process_cpu_s": 0.1, "client_cores": 1,
        "series": st.series.summary(start=1000.0, duration_s=float(n_intervals)),
    }  # fmt: skip
    return {"scale": "smoke", "results": [res]}


@pytest.mark.parametrize("labels", [False, True])
def test_the_report_draws_throughput_over_time_for_a_long_phase(tmp_path, labels):
    from mongobench.reports import report, timeseries

    out = results.to_samples(_run_with_series(8))
    if labels:  # PKB's collapsed labels: the lists as text
        for s in out:
            s["metadata"] = {k: str(v) for k, v in s["metadata"].items()}
    [line] = timeseries.long_phases(out)["updateapi"]
    assert line.seconds == tuple(float(k) for k in range(8))
    assert line.values == tuple(float(10 + k) for k in range(8))
    text = report.render(out, plots_dir=str(tmp_path / "plots"))
    assert "(plots/updateapi-over-time.png)" in text
    assert (tmp_path / "plots" / "updateapi-over-time.png").stat().st_size > 0


def test_a_short_phase_gets_no_plot_over_time(tmp_path):
    from mongobench.reports import report

    text = report.render(results.to_samples(_run_with_series(2)), plots_dir=str(tmp_path))
    assert "over-time" not in text
    assert not (tmp_path / "updateapi-over-time.png").exists()
