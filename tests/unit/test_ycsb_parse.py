"""YCSB output parsing, property files and command lines (mongobench.ycsb)."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from mongobench.remote import javabuild
from mongobench.ycsb import merge, parse, properties

DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "ycsb"


def data(name: str) -> str:
    return (DATA / name).read_text()


def props_dict(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


# --- real outputs of YCSB 0.17.0 + MongoDB, verbatim from seed 002


def test_seed002_read_write_mix_exact_numbers():
    r = parse.parse_output(data("seed002_run_readwrite_1000.txt"))
    assert r.runtime_ms == 1532
    assert r.throughput == 652.7415143603133
    assert r.operations == 1000
    read, update = r.ops["READ"], r.ops["UPDATE"]
    assert read.operations == 496 and update.operations == 504
    assert read.average_us == 920.4092741935484
    assert (read.min_us, read.max_us) == (194, 13647)
    assert read.percentiles_us == {95.0: 2189, 99.0: 3841}
    assert read.returns == {"OK": 496}
    assert update.average_us == 1020.0555555555555
    assert update.percentiles_us == {95.0: 2343, 99.0: 3543}
    assert r.p99_ms("READ") == 3.841
    assert r.p99_ms("UPDATE") == 3.543
    assert r.p99_by_op_ms == {"READ": 3.841, "UPDATE": 3.543}
    assert r.not_found == 0


def test_seed002_operations_taken_from_statuses_when_the_line_is_missing():
    # The seed's 10M write-only run has no "[UPDATE], Operations" line.
    r = parse.parse_output(data("seed002_run_writeonly_10000000.txt"))
    assert r.runtime_ms == 4326840
    assert r.throughput == 2311.1554852964287
    assert r.ops["UPDATE"].operations == 10_000_000
    assert r.operations == 10_000_000
    assert r.ops["UPDATE"].average_us == 428.107673
    assert r.p99_ms("UPDATE") == 1.231
    assert r.ops["UPDATE"].percentile_ms(95) == 0.746


def test_seed002_load():
    r = parse.parse_output(data("seed002_load_100000.txt"), required_ops=["INSERT"])
    assert r.throughput == 4915.937469275391
    assert r.operations == 100_000
    assert r.ops["INSERT"].percentiles_us == {95.0: 374, 99.0: 580}
    assert r.ops["INSERT"].min_us == 109


def test_seed002_missing_requested_percentile_names_op_and_statistic():
    # YCSB 0.17 prints only p95/p99 by default: asking for p99.9 is a clear error, not a KeyError.
    with pytest.raises(parse.YcsbError, match=r"99\.9th percentile latency of READ.*p95, p99"):
        parse.parse_output(data("seed002_run_readwrite_1000.txt"), required_percentiles=[99, 99.9])


# --- real outputs of our YCSB binding against the stand-in


def test_standin_run_with_hdrhistogram_percentiles():
    r = parse.parse_output(
        data("standin_run_ok.txt"), required_ops=["READ", "UPDATE"], required_percentiles=[50, 99.9]
    )
    assert r.operations == 1000  # CLEANUP is not an operation
    assert r.ops["CLEANUP"].operations == 2
    assert r.ops["READ"].percentiles_us == {50.0: 956, 95.0: 6015, 99.0: 10263, 99.9: 27871}
    assert r.ops["UPDATE"].percentile_ms(99.9) == 59.455
    assert r.throughput == 429.36882782310005
    # GC counters are kept raw, never mistaken for operations
    assert r.metrics[("TOTAL_GCs", "Count")] == 3
    assert "TOTAL_GCs" not in r.ops


def test_dead_server_is_a_clear_error_although_ycsb_exits_0():
    with pytest.raises(parse.YcsbError, match="cannot connect to mongodb://127.0.0.1:1/"):
        parse.parse_output(data("standin_dead_port.txt"))


def test_crash_while_writing_histogram_logs_is_reported():
    # HdrHistogram 2.1.4 (YCSB 0.17's) needs JAXB, absent from Java 11+; the per-op summary
    # is then missing although [OVERALL] was printed.
    with pytest.raises(parse.YcsbError, match="NoClassDefFoundError: javax/xml/bind"):
        parse.parse_output(data("standin_hdr_fileoutput_jaxb_crash.txt"))


# --- failure shapes, built from the real output


def _without(text: str, needle: str) -> str:
    return "\n".join(line for line in text.splitlines() if needle not in line)


def test_missing_p99_of_one_op():
    text = _without(data("standin_run_ok.txt"), "[UPDATE], 99thPercentileLatency(us)")
    with pytest.raises(parse.YcsbError, match=r"99th percentile latency of UPDATE"):
        parse.parse_output(text)


def test_error_statuses_and_failed_sections():
    text = data("standin_run_ok.txt") + "[UPDATE], Return=ERROR, 3\n"
    with pytest.raises(parse.YcsbError, match="UPDATE: 3 errors"):
        parse.parse_output(text)
    text = data("standin_run_ok.txt") + "[READ-FAILED], Operations, 7\n"
    with pytest.raises(parse.YcsbError, match="READ-FAILED=7"):
        parse.parse_output(text)


def test_no_operations_and_truncated_output():
    overall_only = "[OVERALL], RunTime(ms), 1300\n[OVERALL], Throughput(ops/sec), 0.0\n"
    with pytest.raises(parse.YcsbError, match="no operations"):
        parse.parse_output(overall_only)
    truncated = _without(data("standin_run_ok.txt"), "[OVERALL]")
    with pytest.raises(parse.YcsbError, match="did not finish"):
        parse.parse_output(truncated)
    with pytest.raises(parse.YcsbError, match="did not finish"):
        parse.parse_output("")


def test_required_op_absent():
    with pytest.raises(parse.YcsbError, match="no READ operations.*UPDATE"):
        parse.parse_output(data("seed002_run_writeonly_10000000.txt"), required_ops=["READ"])


def test_not_found_is_counted_not_judged():
    text = data("standin_run_ok.txt").replace("[READ], Return=OK, 881", "[READ], Return=OK, 871")
    text += "[READ], Return=NOT_FOUND, 10\n"
    r = parse.parse_output(text)
    assert r.not_found == 10
    assert r.ops["READ"].returns == {"OK": 871, "NOT_FOUND": 10}


def test_read_modify_write_counted_once():
    text = """\
[OVERALL], RunTime(ms), 1000
[OVERALL], Throughput(ops/sec), 100.0
[READ], Operations, 60
[READ], 99thPercentileLatency(us), 900
[READ], Return=OK, 60
[UPDATE], Operations, 60
[UPDATE], 99thPercentileLatency(us), 900
[UPDATE], Return=OK, 60
[READ-MODIFY-WRITE], Operations, 20
[READ-MODIFY-WRITE], 99thPercentileLatency(us), 1800
"""
    assert parse.parse_output(text).operations == 100


# --- YCSB 0.1.x format: millisecond percentiles, integer return codes, histogram buckets

OLD = """\
YCSB Client 0.1
Command line: -db com.yahoo.ycsb.db.MongoDbClient -P workloads/workloadb -t
Loading workload...
Starting test.
[OVERALL], RunTime(ms), 10110.0
[OVERALL], Throughput(ops/sec), 98.91196834817013
[UPDATE], Operations, 52
[UPDATE], AverageLatency(us), 1245.514
[UPDATE], MinLatency(us), 283
[UPDATE], MaxLatency(us), 54735
[UPDATE], 95thPercentileLatency(ms), 2
[UPDATE], 99thPercentileLatency(ms), 7
[UPDATE], Return=0, 52
[UPDATE], 0, 40
[UPDATE], 1, 9
[UPDATE], >1000, 0
[READ], Operations, 948
[READ], AverageLatency(us), 922.095
[READ], MinLatency(us), 540
[READ], MaxLatency(us), 92604
[READ], 95thPercentileLatency(ms), 1
[READ], 99thPercentileLatency(ms), 3
[READ], Return=0, 948
[READ], 0, 900
"""


def test_old_format_percentiles_in_ms():
    r = parse.parse_output(OLD, required_ops=["READ", "UPDATE"])
    assert r.runtime_ms == 10110.0
    assert r.operations == 1000
    assert r.p99_ms("READ") == 3.0 and r.p99_ms("UPDATE") == 7.0
    assert r.ops["READ"].percentiles_us == {95.0: 1000.0, 99.0: 3000.0}
    assert r.ops["UPDATE"].returns == {"OK": 52}
    assert r.metrics[("UPDATE", ">1000")] == 0  # buckets stay raw


def test_old_format_nonzero_return_code_is_an_error():
    text = OLD.replace("[READ], Return=0, 948", "[READ], Return=0, 936\n[READ], Return=1, 12")
    with pytest.raises(parse.YcsbError, match="READ: 12 errors"):
        parse.parse_output(text)


def test_old_format_without_p99_is_a_clear_error():
    text = _without(OLD, "[READ], 99thPercentileLatency(ms)")
    with pytest.raises(parse.YcsbError, match="99th percentile latency of READ.*p95"):
        parse.parse_output(text)


# --- property files and command lines


def test_workload_properties_defaults_and_key_range():
    text = properties.Workload(
        recordcount=3000,
        insertstart=2000,
        insertcount=1000,
        operationcount=50_000,
        target=25_000,
        threadcount=10,
        urlfile="/run/uri",
        maxexecutiontime=180,
        histogram_prefix="/out/step003-i002-",
    ).text()
    p = props_dict(text)
    assert p["workload"] == "site.ycsb.workloads.CoreWorkload"
    assert (p["recordcount"], p["insertstart"], p["insertcount"]) == ("3000", "2000", "1000")
    assert (p["readproportion"], p["updateproportion"]) == ("0.9", "0.1")
    assert (p["scanproportion"], p["insertproportion"]) == ("0", "0")
    assert p["requestdistribution"] == "zipfian"
    assert (p["fieldcount"], p["fieldlength"]) == ("10", "100")
    assert p["measurementtype"] == "hdrhistogram"
    assert p["hdrhistogram.percentiles"] == "50,95,99,99.9"
    assert p["target"] == "25000" and p["threadcount"] == "10"
    assert p["maxexecutiontime"] == "180"
    assert p["status.interval"] == "10"  # the -s lines of the phase's time series (ycsb.status)
    assert p["mongodb.urlfile"] == "/run/uri"
    assert "mongodb.url" not in p
    assert p["hdrhistogram.fileoutput"] == "true"
    assert p["hdrhistogram.output.path"] == "/out/step003-i002-"


def test_workload_properties_unthrottled_without_optional_keys():
    p = props_dict(properties.Workload(recordcount=10, target=0).text())
    assert "target" not in p and "insertstart" not in p and "maxexecutiontime" not in p
    assert p["operationcount"] == "10"


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"recordcount": 0}, "recordcount"),
        ({"recordcount": 10, "readproportion": 0.5}, "sum to 1"),
        ({"recordcount": 10, "readproportion": 1.2, "updateproportion": -0.2}, ">= 0"),
        ({"recordcount": 10, "insertstart": 5, "insertcount": 6}, "does not fit"),
        ({"recordcount": 10, "operationcount": 2**31}, "operationcount"),
        ({"recordcount": 10, "threadcount": 0}, "threadcount"),
    ],
)
def test_workload_properties_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        properties.Workload(**kwargs).text()


def test_ycsb_command():
    cmd = properties.ycsb_command(
        "/lib/*", "run", "/w/p.properties", java="/jdk/bin/java", extra_jvm=["-Xmx1g"]
    )
    assert cmd == [
        "/jdk/bin/java",
        "-Xmx1g",
        "-cp",
        "/lib/*",
        javabuild.YCSB_CLIENT_CLASS,
        "-t",
        "-db",
        javabuild.YCSB_BINDING_CLASS,
        "-P",
        "/w/p.properties",
        "-s",
    ]
    assert properties.ycsb_command("cp", "load", "p")[4] == "-load"
    with pytest.raises(ValueError, match="phase"):
        properties.ycsb_command("cp", "transactions", "p")


# --- HdrHistogram logs (written by YCSB with HdrHistogram 2.1.12 on the classpath)


def test_histogram_log_percentiles_match_what_ycsb_printed():
    printed = parse.parse_output(data("standin_run_hdr212.txt")).ops["READ"]
    hist = merge.merge_histogram_logs([data("standin_hdr212_READ.hdr")])
    assert hist.get_total_count() == printed.operations == 897
    for p, value_us in printed.percentiles_us.items():
        assert merge.histogram_percentile_ms(hist, p) == value_us / 1000.0, p


def test_merging_logs_of_several_processes():
    one = data("standin_hdr212_UPDATE.hdr")
    merged = merge.merge_histogram_logs([one, one, one])
    single = merge.merge_histogram_logs([one])
    assert merged.get_total_count() == 3 * single.get_total_count() == 3 * 103
    assert merge.histogram_percentile_ms(merged, 99) == merge.histogram_percentile_ms(single, 99)
    assert merge.histogram_percentile_ms(merge.merge_histogram_logs([]), 99) is None
    with pytest.raises(ValueError, match="not an HdrHistogram log line"):
        merge.merge_histogram_logs(["0.1,2.0\n"])


def _seed_outputs():
    data = pathlib.Path(__file__).resolve().parents[1] / "data" / "ycsb"
    text = (data / "seed002_all_outputs.txt").read_text()
    blocks = [b for b in re.split(r"^=== output \d+\n", text, flags=re.M) if b.strip()]
    expected = json.loads((data / "seed002_all_expected.json").read_text())
    return list(zip(blocks, expected, strict=True))


@pytest.mark.parametrize("index", range(28))
def test_every_seed002_output_parses_to_its_printed_numbers(index):
    """All 28 YCSB outputs of seed 002: runtime, throughput and every per-op figure."""
    block, expected = _seed_outputs()[index]
    res = parse.parse_output(block, required_percentiles=())
    assert res.runtime_ms == expected["OVERALL|RunTime(ms)"]
    assert res.throughput == pytest.approx(expected["OVERALL|Throughput(ops/sec)"])
    for key, value in expected.items():
        op, stat = key.split("|")
        if op == "OVERALL":
            continue
        s = res.ops[op]
        if stat == "AverageLatency(us)":
            assert s.average_us == pytest.approx(value)
        elif stat == "99thPercentileLatency(us)":
            assert s.percentiles_us[99.0] == value
        elif stat == "95thPercentileLatency(us)":
            assert s.percentiles_us[95.0] == value
        elif stat.startswith("Return="):
            assert s.returns[stat.split("=", 1)[1]] == value
        assert res.metrics[(op, stat)] == pytest.approx(value)


def test_status_lines_are_told_from_the_rest_of_stderr():
    lines = data("standin_run_hdr212.txt").splitlines()
    status = [line for line in lines if parse.is_status_line(line)]
    assert status and all(" sec: " in line and " operations;" in line for line in status)
    assert not parse.is_status_line("mongo client connection created with mongodb://h:1/")
    assert not parse.is_status_line("[OVERALL], RunTime(ms), 2290")


def test_judge_a_process_that_did_not_end_well_names_how_then_its_first_failure_line():
    ok = (DATA / "seed002_run_readwrite_1000.txt").read_text()
    crash = (DATA / "standin_hdr_fileoutput_jaxb_crash.txt").read_text()
    assert parse.judge(ok).operations == parse.parse_output(ok).operations
    assert parse.judge(parse.Outcome(ok, 0)).throughput == parse.parse_output(ok).throughput
    cases = [
        (parse.Outcome(ok, 1), "YCSB exited with status 1; output ends:\n"),
        (parse.Outcome(ok, None), "YCSB process vanished without an exit status; output ends:"),
        (parse.Outcome("", 1), "YCSB exited with status 1; no output"),
        (
            parse.Outcome(ok, None, running=True, timeout_s=90),
            "YCSB still running after 90 s (stopped); output ends:",
        ),
        (
            parse.Outcome(crash, 1),
            'YCSB exited with status 1: Exception in thread "Thread-1"'
            " java.lang.NoClassDefFoundError: javax/xml/bind/DatatypeConverter",
        ),
    ]
    for outcome, message in cases:
        with pytest.raises(parse.YcsbError) as e:
            parse.judge(outcome)
        assert str(e.value).startswith(message), str(e.value)
    # a whole output that exited 1 is still a failure: the exit status is judged first
    with pytest.raises(parse.YcsbError) as e:
        parse.judge(parse.Outcome(ok, 1))
    assert str(e.value).endswith(ok.strip().splitlines()[-1])
