"""One real mini mongodb_stress step: YCSB load + run through mongobench.ycsb and the engine."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from mongobench import javabuild, stress, testbed, ycsb

pytestmark = pytest.mark.integration

YCSB_TIMEOUT_S = 180
RECORDS, OPS = 500, 1000


def write_uri(tmp_path: pathlib.Path, uri: str) -> str:
    path = tmp_path / "uri"
    path.write_text(uri + "\n")
    os.chmod(path, 0o600)
    return str(path)


def run_ycsb(phase: str, props: str, tmp_path: pathlib.Path) -> subprocess.CompletedProcess:
    path = tmp_path / f"{phase}.properties"
    path.write_text(props)
    cmd = ycsb.ycsb_command(javabuild.ycsb_classpath(), phase, str(path))
    return subprocess.run(
        cmd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=YCSB_TIMEOUT_S,
        check=False,
    )


def output(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout + proc.stderr


def test_mini_step_load_and_run(server_uri, tmp_path):
    urlfile = write_uri(tmp_path, server_uri.rstrip("/") + "/t_stress_step")
    load = run_ycsb(
        "load",
        ycsb.workload_properties(
            recordcount=RECORDS, insertstart=0, insertcount=RECORDS, threadcount=2, urlfile=urlfile
        ),
        tmp_path,
    )
    assert load.returncode == 0, output(load)[-3000:]
    loaded = ycsb.parse_output(output(load), required_ops=["INSERT"])
    assert loaded.operations == RECORDS

    run = run_ycsb(
        "run",
        ycsb.workload_properties(
            recordcount=RECORDS,
            insertstart=0,
            insertcount=RECORDS,
            operationcount=OPS,
            readproportion=0.9,
            updateproportion=0.1,
            requestdistribution="zipfian",
            target=500,
            threadcount=2,
            maxexecutiontime=20,
            urlfile=urlfile,
        ),
        tmp_path,
    )
    assert run.returncode == 0, output(run)[-3000:]
    result = ycsb.parse_output(output(run), required_ops=["READ", "UPDATE"])
    assert result.throughput > 0
    assert result.operations == OPS
    assert result.ops["READ"].operations + result.ops["UPDATE"].operations == OPS
    assert result.ops["READ"].operations > result.ops["UPDATE"].operations > 0
    for op in ("READ", "UPDATE"):
        assert result.p99_ms(op) > 0, op
        assert set(result.ops[op].percentiles_us) == {50.0, 95.0, 99.0, 99.9}
    assert result.throughput <= 500 * 1.05  # the target held

    # The same output through the engine: a one-instance step.
    step = stress.step_result(1, [stress.ProcessOutput(0, 0, run.returncode, output(run))])
    assert step.throughput == result.throughput
    assert step.read_p99_ms == result.p99_ms("READ")
    assert step.update_p99_ms == result.p99_ms("UPDATE")


def test_dead_port_is_a_ycsb_error(tmp_path):
    uri = f"mongodb://127.0.0.1:{testbed.free_port()}/ycsb?serverSelectionTimeoutMS=1000"
    run = run_ycsb(
        "run",
        ycsb.workload_properties(
            recordcount=RECORDS, operationcount=100, threadcount=2, maxexecutiontime=10, url=uri
        ),
        tmp_path,
    )
    text = output(run)
    with pytest.raises(ycsb.YcsbError, match="cannot connect to mongodb://127.0.0.1"):
        ycsb.parse_output(text)
    with pytest.raises(stress.StepError, match="instance 0 on client 0: YCSB reported a failure"):
        stress.step_result(1, [stress.ProcessOutput(0, 0, run.returncode, text)])


def test_histogram_logs_per_process(server_uri, tmp_path):
    """With HdrHistogram >= 2.1.10 on the classpath every process writes its own .hdr logs and
    the merged p99 equals YCSB's; YCSB 0.17's 2.1.4 needs JAXB (absent from Java 11+) and the
    run must then fail clearly, not yield a number."""
    urlfile = write_uri(tmp_path, server_uri.rstrip("/") + "/t_stress_hist")
    base = {"recordcount": 200, "insertstart": 0, "insertcount": 200, "urlfile": urlfile}
    load = run_ycsb("load", ycsb.workload_properties(**base), tmp_path)
    assert load.returncode == 0, output(load)[-3000:]
    prefix = str(tmp_path / "p0-")
    run = run_ycsb(
        "run",
        ycsb.workload_properties(**base, operationcount=400, histogram_prefix=prefix),
        tmp_path,
    )
    jars = [p.name for p in javabuild.ycsb_lib_dir().glob("HdrHistogram-*.jar")]
    try:
        result = ycsb.parse_output(output(run), required_ops=["READ", "UPDATE"])
    except ycsb.YcsbError as exc:
        assert "NoClassDefFoundError" in str(exc), exc
        assert jars == ["HdrHistogram-2.1.4.jar"], jars
        return
    hist = ycsb.merge_histogram_logs([pathlib.Path(prefix + "READ.hdr").read_text()])
    assert hist.get_total_count() == result.ops["READ"].operations
    assert ycsb.histogram_percentile_ms(hist, 99) == result.p99_ms("READ")
