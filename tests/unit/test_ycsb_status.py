"""ycsb.status: YCSB's -s status lines as a phase's time series, from recorded outputs of
our binding against the stand-in (status.interval=1; a load, and a run by two processes
started together), merged by interval start."""

import pathlib

import pytest

from mongobench.ycsb import parse, status

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "ycsb"


def _text(name: str) -> str:
    return (DATA / name).read_text()


def test_status_lines_of_a_recorded_load():
    lines = status.parse_lines(_text("standin_status1s_load.txt"))
    assert len(lines) == 38
    first, last = lines[0], lines[-1]
    assert first.operations == 0 and last.operations == 3000
    # "2026-11-27 08:46:10:099" read as UTC, to the millisecond
    assert first.at == pytest.approx(1795769170.099, abs=1e-6)
    insert = lines[-2].groups["INSERT"]
    assert insert["Count"] == 181 and insert["Avg"] == 11197.25 and insert["Max"] == 68031


def test_the_intervals_add_up_to_ycsbs_own_count():
    text = _text("standin_status1s_load.txt")
    ser = status.series([text], interval_s=1)
    total = parse.parse_output(text, required_ops=["INSERT"], required_percentiles=()).operations
    assert sum(ser["ops"]) == total == 3000
    assert len(ser["ops"]) == len(ser["t_s"]) == len(ser["ops_per_s"]) == 36
    assert ser["t_s"][:3] == [0, 1, 2] and ser["seconds"][0] == 1
    # the first seconds are the JVM and connection start: no operation yet
    assert ser["ops"][:4] == [0, 0, 0, 0]
    assert ser["ops"][4] == 31
    insert = ser["latency"]["INSERT"]
    assert insert["p99_ms"][:4] == [None, None, None, 750.079]
    # the last line closes the phase: its rate is over its own length, not a whole interval
    assert ser["seconds"][-1] < 1.5
    assert ser["ops_per_s"][-1] == pytest.approx(ser["ops"][-1] / ser["seconds"][-1])
    assert sum(ser["errors"]) == 0


def test_two_processes_merge_by_interval_start():
    a, b = _text("standin_status1s_run_p0.txt"), _text("standin_status1s_run_p1.txt")
    one, two = status.series([a], 1), status.series([b], 1)
    both = status.series([a, b], 1)
    assert sum(both["ops"]) == sum(one["ops"]) + sum(two["ops"]) == 3000
    # process 1 started 0.6 s before process 0: the merged series starts with it
    assert both["start"] == two["start"] < one["start"]
    assert len(both["ops"]) >= max(len(one["ops"]), len(two["ops"]))

    # percentiles are the highest of the processes', averages weighted by count
    def top(ser, key):
        return max(v for v in ser["latency"]["READ"][key] if v is not None)

    assert top(both, "p99_ms") == max(top(one, "p99_ms"), top(two, "p99_ms"))
    assert top(both, "max_ms") == max(top(one, "max_ms"), top(two, "max_ms"))


def test_failed_operations_are_the_intervals_errors():
    # YCSB's status format, a failed READ counted under READ-FAILED (constructed)
    text = "\n".join([
        "2026-11-27 10:00:00:000 0 sec: 0 operations; est completion in 0 second",
        "2026-11-27 10:00:10:000 10 sec: 500 operations; 50 current ops/sec; [READ: Count=480,"
        " Max=9000, Min=100, Avg=1000, 90=2000, 99=5000, 99.9=9000, 99.99=9000]"
        " [READ-FAILED: Count=20, Max=30000, Min=1000, Avg=20000, 90=30000, 99=30000,"
        " 99.9=30000, 99.99=30000]",
        "2026-11-27 10:00:20:000 20 sec: 1000 operations; 50 current ops/sec; [READ: Count=500,"
        " Max=8000, Min=100, Avg=900, 90=1900, 99=4000, 99.9=8000, 99.99=8000]",
    ])  # fmt: skip
    ser = status.series([text], interval_s=10)
    assert ser["ops"] == [500, 500] and ser["errors"] == [20, 0]
    assert ser["latency"]["READ"]["p99_ms"] == [5.0, 4.0]
    assert "READ-FAILED" not in ser["latency"]


def test_no_series_without_status_lines():
    text = _text("standin_run_ok.txt")
    assert status.series([text]) is not None  # its "0 sec" and final lines: one interval
    summary = "\n".join(ln for ln in text.splitlines() if not parse.is_status_line(ln))
    assert status.series([summary]) is None
    assert status.series([]) is None


def _recorded_run() -> list[str]:
    return [_text("standin_status1s_run_p0.txt"), _text("standin_status1s_run_p1.txt")]


def test_a_sweep_phase_gets_its_time_series():
    from mongobench.core.samples import is_time_series
    from mongobench.sweep import plan
    from mongobench.sweep import samples as sweep_samples

    step = plan.plan([1])[0]
    out = sweep_samples.measure_processes(step, plan.PHASES_BY_NAME["read_update"], _recorded_run())
    ts = {s["metric"]: s for s in out if is_time_series(s)}
    tput = ts["overall Throughput time series"]
    md = tput["metadata"]
    assert md["phase"] == "read_update" and md["interval"] == status.STATUS_INTERVAL_S
    assert tput["unit"] == "ops/sec" and len(md["values"]) == len(md["timestamps"]) >= 8
    ser = status.series(_recorded_run(), status.STATUS_INTERVAL_S)
    assert sum(v * s for v, s in zip(md["values"], ser["seconds"], strict=True)) == pytest.approx(
        3000
    )
    assert "read p99 latency time series" in ts and "update AverageLatency time series" in ts
    assert ts["Operation Errors time series"]["metadata"]["values"] == [0] * len(md["values"])
    # the phase's usual figures are still there
    assert any(s["metric"] == "overall Throughput" for s in out)
    # the sweep runner hands over its processes' outcomes (ycsb.Outcome), not their texts
    outcomes = [parse.Outcome(text=t) for t in _recorded_run()]
    again = sweep_samples.measure_processes(step, plan.PHASES_BY_NAME["read_update"], outcomes)
    assert [s["metadata"]["values"] for s in again if is_time_series(s)] == [
        s["metadata"]["values"] for s in ts.values()
    ]


def test_a_stress_step_gets_its_time_series():
    from mongobench.core.samples import is_time_series
    from mongobench.stress import report, search, steps

    outs = [steps.ProcessOutput(instance=i, client=i, returncode=0, output=t)
            for i, t in enumerate(_recorded_run())]  # fmt: skip
    r = steps.step_result(2, outs)
    assert sum(r.series["ops"]) == r.operations == 3000
    found = search.Search(history=[r], infos=[{}])
    out = report.search_samples(
        found, metadata={"benchmark": "stress"}, search_seconds=1.0, records_loaded=3000,
        sla_ms=1000.0, mongodb_version="7.0", max_instances=2,
    )  # fmt: skip
    [tput] = [s for s in out if s["metric"] == "overall Throughput time series"]
    assert is_time_series(tput) and tput["metadata"]["step"] == 1
    assert tput["metadata"]["instances"] == 2
