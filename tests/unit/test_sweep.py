"""The dataset-size sweep engine (mongobench.sweep): plan, property files, samples."""

from __future__ import annotations

import json
import pathlib

import pytest

from mongobench import cli
from mongobench.core import stats
from mongobench.remote import shipping
from mongobench.reports import caption, report
from mongobench.sweep import plan, runner
from mongobench.sweep import properties as sweep_properties
from mongobench.sweep import samples as sweep_samples
from mongobench.sweep.request import SweepRun
from mongobench.ycsb import merge
from mongobench.ycsb import parse as ycsb

DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "ycsb"
GiB = 1024**3
PH = plan.PHASES_BY_NAME
RUN = SweepRun()  # the defaults: one thread, no cap, usertable


def data(name: str) -> str:
    return (DATA / name).read_text()


def props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def by_metric(samples):
    return {(s["metric"]): s for s in samples}


# ----------------------------------------------------------------------------- plan


def test_default_plan_is_the_seeds_sizes_of_1kb_records():
    steps = plan.plan()
    assert [s.size_mb for s in steps] == [1, 2, 3, 10, 100, 1000, 10000]
    assert [s.records for s in steps] == [1000, 2000, 3000, 10_000, 100_000, 1_000_000, 10**7]
    assert [s.operations for s in steps] == [s.records for s in steps]  # seed: ops = records
    assert steps[-1].dataset_bytes == 10 * 10**9
    assert [s.label for s in steps][-3:] == ["100 MB", "1 GB", "10 GB"]
    assert all(s.exceeds_memory is None for s in steps)  # memory unknown: not guessed


def test_operation_count_override_and_fractional_sizes():
    steps = plan.plan("0.2,0.1", operation_count=500)
    assert [(s.size_mb, s.records, s.operations) for s in steps] == [
        (0.1, 100, 500),
        (0.2, 200, 500),
    ]


def test_sizes_beyond_memory_are_allowed_and_flagged():
    steps = plan.plan([1000, 10000], memory_bytes=8 * GiB, memory_source="flag")
    assert [s.exceeds_memory for s in steps] == [False, True]
    md = steps[1].metadata()
    assert md["exceeds_memory"] is True
    assert md["memory_mb"] == 8192 and md["memory_source"] == "flag"
    assert md["dataset_mb"] == 10000 and md["records"] == 10**7 and md["size_mb"] == 10000
    assert "exceeds_memory" not in plan.plan([1])[0].metadata()
    assert plan.plan([1])[0].metadata()["memory_source"] == "unknown"


@pytest.mark.parametrize(
    "value,match",
    [
        ("0", "> 0"),
        ("-1", "> 0"),
        ("abc", "number"),
        ("0.0001", "one 1 KB record"),
        ("1,1", "repeat"),
    ],
)
def test_bad_sizes(value, match):
    with pytest.raises(plan.SweepError, match=match):
        plan.plan(value)


def test_bad_operation_count():
    with pytest.raises(plan.SweepError, match="operation count"):
        plan.plan([1], operation_count=0)


def test_phases():
    assert [p.name for p in plan.parse_phases("all")] == [
        "load",
        "read_only",
        "update_only",
        "read_update",
    ]
    assert [p.name for p in plan.parse_phases("read_update,load")] == ["load", "read_update"]
    with pytest.raises(plan.SweepError, match="load phase is needed"):
        plan.parse_phases("read_only")
    with pytest.raises(plan.SweepError, match="unknown phase"):
        plan.parse_phases("load,scan")


# ----------------------------------------------------------------------------- properties


def test_property_files_per_phase():
    step = plan.plan([2], operation_count=5000)[0]
    load = props(
        sweep_properties.phase_properties(
            step, PH["load"], SweepRun(load_batchsize=100), "/w/target.uri"
        )
    )
    assert load["recordcount"] == "2000" and load["operationcount"] == "2000"
    assert load["insertproportion"] == "1" and load["readproportion"] == "0"
    assert load["batchsize"] == "100"
    assert load["mongodb.urlfile"] == "/w/target.uri" and "mongodb.url" not in load
    assert load["fieldcount"] == "10" and load["fieldlength"] == "100"  # 1 KB records
    assert load["requestdistribution"] == "zipfian"
    assert "99" in load["hdrhistogram.percentiles"].split(",")

    read = props(
        sweep_properties.phase_properties(step, PH["read_only"], SweepRun(threads=4), "/u")
    )
    assert (read["readproportion"], read["updateproportion"]) == ("1", "0")
    assert read["operationcount"] == "5000" and read["threadcount"] == "4"
    assert "batchsize" not in read and "table" not in read

    update = props(sweep_properties.phase_properties(step, PH["update_only"], RUN, "/u"))
    assert (update["readproportion"], update["updateproportion"]) == ("0", "1")

    mixed = props(
        sweep_properties.phase_properties(
            step, PH["read_update"], SweepRun(max_seconds=60, table="t"), "/u"
        )
    )
    assert (mixed["readproportion"], mixed["updateproportion"]) == ("0.5", "0.5")
    assert mixed["maxexecutiontime"] == "60" and mixed["table"] == "t"


# ----------------------------------------------------------------------------- samples


def test_seed_load_output_gives_the_seeds_numbers():
    step = plan.plan([100])[0]
    samples = sweep_samples.measure(step, PH["load"], data("seed002_load_100000.txt"), {"k": "v"})
    m = by_metric(samples)
    # PKB's ycsb_stats names and units (mongodb_ycsb's samples)
    assert set(m) == {
        "overall RunTime",
        "overall Throughput",
        "insert AverageLatency",
        "insert 95thPercentileLatency",
        "insert 99thPercentileLatency",
        "insert p95 latency",
        "insert p99 latency",
    }
    assert m["overall RunTime"]["value"] == 20342 and m["overall RunTime"]["unit"] == "ms"
    tput = m["overall Throughput"]
    assert tput["value"] == 4915.937469275391 and tput["unit"] == "ops/sec"
    assert m["insert AverageLatency"]["value"] == pytest.approx(0.19481688)
    assert m["insert 95thPercentileLatency"]["value"] == 0.374
    assert m["insert p95 latency"]["value"] == 0.374
    assert m["insert 99thPercentileLatency"]["value"] == 0.58
    assert m["insert p99 latency"]["value"] == 0.58
    assert {s["unit"] for n, s in m.items() if n.startswith("insert ")} == {"ms"}
    md = m["insert p99 latency"]["metadata"]
    assert md["size_mb"] == 100 and md["records"] == 100_000 and md["phase"] == "load"
    assert md["op"] == "INSERT" and md["op_count"] == 100_000 and md["k"] == "v"
    assert "op" not in m["overall Throughput"]["metadata"]
    assert "stopped_early" not in md and "missing_metrics" not in md


def test_seed_mixed_output_latency_per_operation():
    step = plan.plan([1])[0]
    samples = sweep_samples.measure(step, PH["read_update"], data("seed002_run_readwrite_1000.txt"))
    assert len(samples) == 2 + 2 * 5
    m = by_metric(samples)
    assert m["overall RunTime"]["value"] == 1532
    assert m["overall Throughput"]["value"] == 652.7415143603133
    assert m["read AverageLatency"]["value"] == pytest.approx(0.9204092741935484)
    assert m["read p95 latency"]["value"] == 2.189
    assert m["read 99thPercentileLatency"]["value"] == m["read p99 latency"]["value"] == 3.841
    assert m["update p99 latency"]["value"] == 3.543
    assert m["update p99 latency"]["metadata"]["op_count"] == 504
    assert m["overall RunTime"]["metadata"]["phase_title"] == "50/50 read/update"


def test_seed_10gb_update_only_exceeds_an_8gb_machine():
    step = plan.plan([10000], memory_bytes=8 * GiB)[0]
    samples = sweep_samples.measure(
        step, PH["update_only"], data("seed002_run_writeonly_10000000.txt")
    )
    m = by_metric(samples)
    assert m["overall RunTime"]["value"] == 4326840
    assert m["update p99 latency"]["value"] == 1.231
    assert all(s["metadata"]["exceeds_memory"] is True for s in samples)


def test_failed_output_is_one_failure_sample_and_a_failed_load_skips_the_runs():
    step = plan.plan([1])[0]
    samples = sweep_samples.measure(step, PH["load"], data("standin_dead_port.txt"))
    assert [s["metric"] for s in samples] == ["Phase Failed"]
    assert samples[0]["value"] == 1 and "cannot connect" in samples[0]["metadata"]["error"]
    assert sweep_samples.failed(samples) == samples
    skipped = sweep_samples.skipped_phases(plan.PHASES, PH["load"])
    assert [p.name for p in skipped] == ["read_only", "update_only", "read_update"]
    assert sweep_samples.skipped_phases(plan.PHASES, PH["read_only"]) == []


class _DropFailed(Exception):
    pass


def test_sweep_loop_drop_failure_failed_load_and_final_drop():
    steps = plan.plan([1, 2, 3])
    drops = iter([None, _DropFailed("no primary"), None, _DropFailed("gone")])
    logs, after, ran = [], [], []

    def drop():
        if (e := next(drops)) is not None:
            raise e

    def run_phase(step, phase):
        ran.append((step.size_mb, phase.name))
        if step.size_mb == 3:  # its load fails
            return [sweep_samples.failure_sample(step, phase, "YCSB died", {"k": "v"})]
        res = _result({"READ": (1, 1.0, {95.0: 1.0, 99.0: 1.0})})
        return sweep_samples.phase_samples(step, phase, res, {"k": "v"})

    samples = runner.sweep_steps(
        SweepRun(phases=["load", "read_only"]),
        steps,
        {"k": "v"},
        runner.SweepHooks(
            drop=drop,
            drop_errors=(_DropFailed,),
            describe_error=lambda e: f"<{e}>",
            run_phase=run_phase,
            log=lambda m, problem=False: logs.append((m, problem)),
            after_phase=lambda got: after.append(len(got)),
        ),
    )
    assert ran == [(1, "load"), (1, "read_only"), (3, "load")]
    failures = [
        (s["metadata"]["size_mb"], s["metadata"]["phase"], s["metadata"]["error"])
        for s in sweep_samples.failed(samples)
    ]
    assert failures == [
        (2, "load", "could not drop the collection before loading: <no primary>"),
        (2, "read_only", "could not drop the collection before loading: <no primary>"),
        (3, "load", "YCSB died"),
        (3, "read_only", "skipped: the load failed"),
    ]
    assert all(s["metadata"]["k"] == "v" for s in samples)
    assert len(after) == 3 and after[-1] == len(samples) - 1  # not after the skipped phase
    assert [m for m, problem in logs if problem] == [
        "2 MB: could not drop the collection before loading: <no primary>",
        "3 MB Load FAILED: YCSB died",
        "the final drop failed: <gone>",
    ]
    kept = runner.sweep_steps(
        SweepRun(phases=["load"], keep_data=True),
        steps[:1],
        {},
        runner.SweepHooks(
            drop=lambda: ran.append("drop"),
            drop_errors=(),
            describe_error=str,
            run_phase=lambda s, p: [],
            log=lambda m, problem=False: None,
        ),
    )
    assert kept == [] and ran[-1] == "drop" and ran.count("drop") == 1


def _result(ops, runtime_ms=1000.0, throughput=100.0):
    stats = {
        name: ycsb.OpStats(name=name, operations=n, average_us=avg, percentiles_us=pct)
        for name, (n, avg, pct) in ops.items()
    }
    return ycsb.YcsbResult(runtime_ms=runtime_ms, throughput=throughput, ops=stats, metrics={})


def test_missing_percentile_is_listed_not_zero_and_early_stop_is_flagged():
    step = plan.plan([1])[0]  # 1000 operations planned
    res = _result({"READ": (600, 500.0, {99.0: 2000.0}), "CLEANUP": (1, 10.0, {99.0: 1.0})})
    samples = sweep_samples.phase_samples(step, PH["read_only"], res)
    metrics = [s["metric"] for s in samples]
    assert metrics == [
        "overall RunTime",
        "overall Throughput",
        "read AverageLatency",
        "read 99thPercentileLatency",
        "read p99 latency",
    ]
    missing = "read 95thPercentileLatency,read p95 latency"
    assert all(s["metadata"]["missing_metrics"] == missing for s in samples)
    assert all(s["metadata"]["stopped_early"] is True for s in samples)
    assert samples[0]["metadata"]["operations"] == 600


def test_results_file_round_trips_through_the_pkb_loader(tmp_path):
    step = plan.plan([1], memory_bytes=GiB)[0]
    samples = sweep_samples.measure(step, PH["read_update"], data("seed002_run_readwrite_1000.txt"))
    path = tmp_path / "results.json"
    sweep_samples.write_results(str(path), samples, "abc123")
    lines = path.read_text().splitlines()
    assert len(lines) == len(samples)
    assert json.loads(lines[0])["test"] == "mongodb_ycsb_sweep"
    loaded = report.load_pkb_results(str(path))
    assert [s["metric"] for s in loaded] == [s["metric"] for s in samples]
    assert loaded[0]["run_uri"] == "abc123"
    assert loaded[0]["metadata"]["exceeds_memory"] is False


def test_table_text():
    step = plan.plan([1])[0]
    samples = sweep_samples.measure(step, PH["read_update"], data("seed002_run_readwrite_1000.txt"))
    samples += sweep_samples.measure(step, PH["load"], data("standin_dead_port.txt"))
    text = sweep_samples.table_text(samples)
    lines = text.splitlines()
    assert lines[2].startswith("| 1 MB | 1000 | Load |") and "FAILED" in lines[2]
    assert (
        "| 1 MB | 1000 | 50/50 read/update | 1.532 | 652.7 | READ 3.841, UPDATE 3.543 |"
        in (lines[3])
    )
    assert lines[3].endswith("| n/a |")  # memory unknown
    # the provenance line under the table, as under the perftables tables (reports.caption)
    note = caption.sweep_line(samples)
    assert note.startswith("Target: ") and "size 1 MB;" in note
    assert "no error bars (one run per variant)" in note


def test_cli_plan(capsys):
    assert cli.main(["sweep", "plan", "--sizes", "1,10000", "--memory-mb", "4096"]) == 0
    out = capsys.readouterr().out
    assert "| 1 MB | 1000 | 1000 | 1 | no |" in out
    assert "| 10 GB | 10000000 | 10000000 | 10000 | yes |" in out


def test_cli_run_needs_a_target():
    with pytest.raises(SystemExit):
        cli.main(["sweep", "run", "--sizes", "1"])


# ----------------------------------------------------------------------------- several clients


def test_several_processes_split_the_keys_of_a_load_and_the_operations_of_a_run():
    step = plan.plan([0.01], operation_count=7)[0]  # 10 records
    load = [
        props(t) for t in sweep_properties.process_properties(step, PH["load"], RUN, ["/u"] * 3)
    ]
    assert [(p["insertstart"], p["insertcount"]) for p in load] == [
        ("0", "4"),
        ("4", "3"),
        ("7", "3"),
    ]
    assert {p["recordcount"] for p in load} == {"10"}
    run = [
        props(t)
        for t in sweep_properties.process_properties(
            step, PH["read_update"], RUN, ["/u"] * 3, ["/r/a-", "/r/b-", "/r/c-"]
        )
    ]
    assert [p["operationcount"] for p in run] == ["3", "2", "2"]
    assert all("insertstart" not in p and p["recordcount"] == "10" for p in run)
    assert [p["hdrhistogram.output.path"] for p in run] == ["/r/a-", "/r/b-", "/r/c-"]
    # More processes than operations: the empty shares are left out.
    tiny = plan.plan([0.002], operation_count=1)[0]
    assert len(sweep_properties.process_properties(tiny, PH["read_only"], RUN, ["/u"] * 4)) == 1
    assert len(sweep_properties.process_properties(tiny, PH["load"], RUN, ["/u"] * 4)) == 2
    one = sweep_properties.process_properties(step, PH["load"], RUN, ["/u"])
    assert one == [sweep_properties.phase_properties(step, PH["load"], RUN, "/u")]


def test_combining_processes_sums_throughput_and_merges_histograms():
    text = data("standin_run_hdr212.txt")
    r = ycsb.parse_output(text)
    hist = {"READ": data("standin_hdr212_READ.hdr"), "UPDATE": data("standin_hdr212_UPDATE.hdr")}
    both, source = merge.combine([r, r], [hist, hist])
    assert source == "merged histograms"
    assert both.throughput == 2 * r.throughput and both.runtime_ms == r.runtime_ms
    assert both.ops["READ"].operations == 2 * r.ops["READ"].operations
    assert both.ops["READ"].average_us == pytest.approx(r.ops["READ"].average_us)
    assert both.ops["READ"].percentiles_us[99.0] == r.ops["READ"].percentiles_us[99.0]
    without, source = merge.combine([r, r])
    assert source == "max over processes"
    assert without.ops["UPDATE"].percentiles_us == r.ops["UPDATE"].percentiles_us
    assert merge.combine([r]) == (r, "one process")

    step = plan.plan([1], operation_count=r.operations * 2)[0]
    samples = sweep_samples.measure_processes(
        step, PH["read_update"], [text, text], {}, [hist, hist]
    )
    md = by_metric(samples)["read p99 latency"]["metadata"]
    assert md["ycsb_processes"] == 2 and md["latency_source"] == "merged histograms"
    assert "stopped_early" not in md

    failed = sweep_samples.measure_processes(
        step, PH["read_update"], [text, data("standin_dead_port.txt")]
    )
    assert [s["metric"] for s in failed] == ["Phase Failed"]
    assert failed[0]["metadata"]["error"].startswith("YCSB process 2 of 2: ")

    # a process that exited non-zero, or hung, fails the phase whatever its output says
    hung = ycsb.Outcome(text, None, running=True, timeout_s=600)
    failed = sweep_samples.measure_processes(step, PH["read_update"], [ycsb.Outcome(text, 0), hung])
    assert failed[0]["metadata"]["error"].startswith(
        "YCSB process 2 of 2: YCSB still running after 600 s (stopped); output ends:"
    )
    failed = sweep_samples.measure(step, PH["read_update"], ycsb.Outcome(text, 3))
    assert failed[0]["metadata"]["error"].startswith("YCSB exited with status 3; output ends:")


def test_drop_command_keeps_the_uri_in_its_file_and_reports_server_memory():
    cmd = shipping.sweep_drop_command("/s/mongobench", "/s/mongobench-ycsb/target.uri", "usertable")
    assert cmd == (
        "cd /s/mongobench && /s/mongobench/venv/bin/python -m mongobench sweep drop"
        " --uri-file /s/mongobench-ycsb/target.uri --table usertable"
    )
    assert runner.parse_drop_output('noise\n{"dropped": "t", "server_memory_mb": 4096}\n') == (
        4096 * 1024 * 1024
    )
    assert runner.parse_drop_output('{"dropped": "t", "server_memory_mb": null}') is None
    with pytest.raises(ValueError, match="no result line"):
        runner.parse_drop_output("Traceback ...")


def test_database_name_follows_the_binding():
    assert runner.database_name("mongodb://h:1/bench?w=1") == "bench"
    assert runner.database_name("mongodb://h:1/") == "ycsb"
    assert runner.database_name("mongodb://u:p@h:1/admin") == "ycsb"


def test_sweep_repeats_run_phases_interleaved_and_fold_them():
    steps = plan.plan([1, 2])
    phases = [PH["load"], PH["read_only"], PH["update_only"]]
    ran, tput = [], iter(range(100, 1000, 10))

    def run_phase(step, phase):
        ran.append((step.size_mb, phase.name))
        res = _result({"READ": (1, 1.0, {95.0: 1.0, 99.0: 1.0})}, throughput=float(next(tput)))
        return sweep_samples.phase_samples(step, phase, res, {})

    samples = runner.sweep_steps(
        SweepRun(phases=[p.name for p in phases], keep_data=True, repeats=3),
        steps,
        {},
        runner.SweepHooks(
            drop=lambda: None, drop_errors=(), describe_error=str, run_phase=run_phase,
            log=lambda m, problem=False: None,
        ),
    )  # fmt: skip
    # the load once per size, the run phases 3 times in rounds of alternating direction
    one_size = ["load", "read_only", "update_only", "update_only", "read_only", "read_only",
                "update_only"]  # fmt: skip
    assert ran == [(1, p) for p in one_size] + [(2, p) for p in one_size]
    by = {
        (s["metadata"]["size_mb"], s["metadata"]["phase"]): s
        for s in samples
        if s["metric"] == sweep_samples.THROUGHPUT_METRIC
    }
    assert len(by) == 6  # one throughput sample per size and phase
    load, read = by[(1, "load")], by[(1, "read_only")]
    assert load["value"] == 100.0 and "repeats" not in load["metadata"]
    values = [110.0, 140.0, 150.0]  # read_only's three runs at 1 MB
    iv = stats.interval(values)
    assert read["value"] == pytest.approx(iv.mean) and read["metadata"]["repeats"] == 3
    assert read["metadata"]["ci95_low"] == pytest.approx(iv.low)
    assert read["metadata"]["repeat_values"] == "110,140,150"
    assert runner.phase_schedule(phases) == [(p, 0) for p in phases]


def test_this_hosts_memory_only_for_a_local_server():
    from mongobench.sweep.runner import on_this_host

    assert on_this_host("mongodb://127.0.0.1:27017/")
    assert on_this_host("mongodb://localhost:1,127.0.0.2:2/")
    assert not on_this_host("mongodb://db1.example.com:27017/")
    assert not on_this_host("mongodb://127.0.0.1:1,10.0.0.5:2/")


def test_p50_latency_is_a_sample_of_every_operation_when_ycsb_printed_it():
    """Our property files ask YCSB for p50 (hdrhistogram.percentiles; 0.17's default is
    95,99): its 50thPercentileLatency(us) becomes `<op> p50 latency` and
    `<op> 50thPercentileLatency` (ms); an output without it (the seed's) lists no p50 as
    missing."""
    step = plan.plan([1])[0]
    text = pathlib.Path(__file__).parent.parent / "data" / "ycsb" / "standin_run_ok.txt"
    m = by_metric(sweep_samples.measure(step, PH["read_update"], text.read_text()))
    assert m["read p50 latency"]["value"] == m["read 50thPercentileLatency"]["value"] == 0.956
    assert m["update p50 latency"]["value"] == 1.783
    assert m["update p50 latency"]["unit"] == "ms"
    assert m["update p50 latency"]["metadata"]["op"] == "UPDATE"
    for phase in plan.PHASES:
        asked = props(sweep_properties.phase_properties(step, phase, RUN, "/u"))
        assert {"50", "95", "99"} <= set(asked["hdrhistogram.percentiles"].split(","))
