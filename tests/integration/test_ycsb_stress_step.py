"""One real mini mongodb_stress step: YCSB load + run through mongobench.ycsb and the engine."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import time

import pytest

from mongobench.deploy import mongod
from mongobench.remote import javabuild, processes
from mongobench.stress import steps
from mongobench.stress.settings import StressSettings
from mongobench.ycsb import merge, parse, properties
from testbed import bed as testbed

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
    cmd = properties.ycsb_command(javabuild.ycsb_classpath(), phase, str(path))
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
        properties.Workload(
            recordcount=RECORDS, insertstart=0, insertcount=RECORDS, threadcount=2, urlfile=urlfile
        ).text(),
        tmp_path,
    )
    assert load.returncode == 0, output(load)[-3000:]
    loaded = parse.parse_output(output(load), required_ops=["INSERT"])
    assert loaded.operations == RECORDS

    run = run_ycsb(
        "run",
        properties.Workload(
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
        ).text(),
        tmp_path,
    )
    assert run.returncode == 0, output(run)[-3000:]
    result = parse.parse_output(output(run), required_ops=["READ", "UPDATE"])
    assert result.throughput > 0
    assert result.operations == OPS
    assert result.ops["READ"].operations + result.ops["UPDATE"].operations == OPS
    assert result.ops["READ"].operations > result.ops["UPDATE"].operations > 0
    for op in ("READ", "UPDATE"):
        assert result.p99_ms(op) > 0, op
        assert set(result.ops[op].percentiles_us) == {50.0, 95.0, 99.0, 99.9}
    assert result.throughput <= 500 * 1.05  # the target held

    # The same output through the engine: a one-instance step.
    step = steps.step_result(1, [steps.ProcessOutput(0, 0, run.returncode, output(run))])
    assert step.throughput == result.throughput
    assert step.read_p99_ms == result.p99_ms("READ")
    assert step.update_p99_ms == result.p99_ms("UPDATE")


def test_dead_port_is_a_ycsb_error(tmp_path):
    uri = f"mongodb://127.0.0.1:{testbed.free_port()}/ycsb?serverSelectionTimeoutMS=1000"
    run = run_ycsb(
        "run",
        properties.Workload(
            recordcount=RECORDS, operationcount=100, threadcount=2, maxexecutiontime=10, url=uri
        ).text(),
        tmp_path,
    )
    text = output(run)
    with pytest.raises(parse.YcsbError, match="cannot connect to mongodb://127.0.0.1"):
        parse.parse_output(text)
    with pytest.raises(steps.StepError, match="instance 0 on client 0: YCSB reported a failure"):
        steps.step_result(1, [steps.ProcessOutput(0, 0, run.returncode, text)])


def test_histogram_logs_per_process(server_uri, tmp_path):
    """With HdrHistogram >= 2.1.10 on the classpath every process writes its own .hdr logs and
    the merged p99 equals YCSB's; YCSB 0.17's 2.1.4 needs JAXB (absent from Java 11+) and the
    run must then fail clearly, not yield a number."""
    urlfile = write_uri(tmp_path, server_uri.rstrip("/") + "/t_stress_hist")
    base = {"recordcount": 200, "insertstart": 0, "insertcount": 200, "urlfile": urlfile}
    load = run_ycsb("load", properties.Workload(**base).text(), tmp_path)
    assert load.returncode == 0, output(load)[-3000:]
    prefix = str(tmp_path / "p0-")
    run = run_ycsb(
        "run",
        properties.Workload(**base, operationcount=400, histogram_prefix=prefix).text(),
        tmp_path,
    )
    jars = [p.name for p in javabuild.ycsb_lib_dir().glob("HdrHistogram-*.jar")]
    try:
        result = parse.parse_output(output(run), required_ops=["READ", "UPDATE"])
    except parse.YcsbError as exc:
        assert "NoClassDefFoundError" in str(exc), exc
        assert jars == ["HdrHistogram-2.1.4.jar"], jars
        return
    hist = merge.merge_histogram_logs([pathlib.Path(prefix + "READ.hdr").read_text()])
    assert hist.get_total_count() == result.ops["READ"].operations
    assert merge.histogram_percentile_ms(hist, 99) == result.p99_ms("READ")


# ----------------------------------------------------------------------------- a full step


def sh(cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", cmd], capture_output=True, text=True, timeout=180, check=check
    )


def wait_exited(entries, marker, timeout=YCSB_TIMEOUT_S):
    deadline = time.time() + timeout
    while True:
        states = processes.parse_process_states(
            sh(processes.process_states_command(entries, marker=marker)).stdout
        )
        if all(s.state == "exited" for s in states.values()) or time.time() > deadline:
            return states
        time.sleep(0.5)


def run_processes(procs, props, d):
    """Starts one detached YCSB process per plan entry, as on a client VM, and waits."""
    entries = []
    for p in procs:
        base = f"{d}/{p.stem}"
        pathlib.Path(base + ".properties").write_text(props(p))
        argv = properties.ycsb_command(javabuild.ycsb_classpath(), p.phase, base + ".properties")
        sh(
            processes.background_command(
                argv,
                processes.Launch(
                    pid_file=base + ".pid",
                    stdout=base + ".out",
                    stderr=base + ".err",
                    rc_file=base + ".rc",
                ),
            )
        )
        entries.append((p.stem, base + ".pid", base + ".rc"))
    states = wait_exited(entries, d)
    assert all(s.state == "exited" for s in states.values()), states
    texts = {
        p.stem: pathlib.Path(f"{d}/{p.stem}.out").read_text()
        + pathlib.Path(f"{d}/{p.stem}.err").read_text()
        for p in procs
    }
    return states, texts


def test_two_instance_step_with_background_processes(tmp_path):
    """Step 2 as the benchmark runs it on VMs: two stand-in instances on their own ports, each
    loaded once by its own YCSB process, then one throttled run process per instance with
    its own output and histogram files; exact p99 over both; a dead instance is a StepError."""
    if not shutil.which("java") or not shutil.which("mvn"):
        pytest.skip("java and mvn are needed")
    javabuild.build()
    d = str(tmp_path)
    first = testbed.free_port_block(2)
    server_marker = str(javabuild.JAVA_DIR)  # on the stand-ins' command lines (classpath)
    pid_files = []
    try:
        for i in range(2):
            paths = mongod.instance_paths(i, d)
            os.makedirs(paths.root)
            port = mongod.instance_port(i, first)
            sh(
                processes.background_command(
                    javabuild.standin_command("127.0.0.1", port),
                    processes.Launch(pid_file=paths.pid_file, stdout=paths.stdout),
                )
            )
            pid_files.append(paths.pid_file)
            sh(
                processes.wait_ready_command(
                    paths.pid_file, "127.0.0.1", port, marker=server_marker
                )
            )

        plan = steps.plan_step(
            2, loaded=(), clients=2, records=300, hosts=("127.0.0.1",), first_port=first
        )
        assert [p.instance for p in plan.load] == [0, 1]
        states, texts = run_processes(
            plan.load, lambda p: steps.load_properties(p, threads=2, batchsize=50), d
        )
        for p in plan.load:
            assert steps.load_result(p, states[p.stem].value, texts[p.stem]).operations == 300

        states, texts = run_processes(
            plan.run,
            lambda p: steps.run_properties(
                p, StressSettings(step_seconds=4, target_ops=150, run_threads=2), directory=d
            ),
            d,
        )
        outputs = []
        for p in plan.run:
            hists = {
                op: pathlib.Path(f"{d}/{p.stem}-{op}.hdr").read_text() for op in ("READ", "UPDATE")
            }
            outputs.append(
                steps.ProcessOutput(
                    p.instance, p.client, states[p.stem].value, texts[p.stem], hists
                )
            )
        result = steps.step_result(2, outputs, first_port=first)
        assert result.p99_source == "merged histograms"
        assert (result.processes, result.clients) == (2, 2)
        assert 0 < result.throughput <= 2 * 150 * 1.05
        assert result.read_p99_ms > 0 and result.update_p99_ms > 0

        # instance 1 dies: the step cannot be trusted, and says which instance
        sh(processes.stop_processes_command([pid_files[1]], marker=server_marker, timeout_s=10))
        entries = [(f"mongod-{i}", mongod.instance_paths(i, d).pid_file, None) for i in range(2)]
        alive = processes.parse_process_states(
            sh(processes.process_states_command(entries, marker=server_marker)).stdout
        )
        dead = {i: "gone" for i in range(2) if not alive[f"mongod-{i}"].running}
        assert dead == {1: "gone"}
        with pytest.raises(
            steps.StepError, match=f"not running after the step: 1 \\(port {first + 1}: gone\\)"
        ):
            steps.step_result(2, outputs, dead_instances=dead, first_port=first)
    finally:
        sh(
            processes.stop_processes_command(pid_files, marker=server_marker, timeout_s=10),
            check=False,
        )


def test_stop_file_ends_a_run_early_with_its_summary(server_uri, tmp_path):
    """The steady-state stop's mechanism: YCSB (the project's StoppableCoreWorkload) ends a
    60 s run soon after its stop file appears, exits 0 and prints its full summary (a SIGTERM
    would lose it); without the stop file the same properties run to maxexecutiontime."""
    urlfile = write_uri(tmp_path, server_uri.rstrip("/") + "/t_stress_stop")
    load = run_ycsb(
        "load",
        properties.Workload(
            recordcount=RECORDS, insertstart=0, insertcount=RECORDS, threadcount=2, urlfile=urlfile
        ).text(),
        tmp_path,
    )
    assert load.returncode == 0, output(load)[-3000:]
    stop = tmp_path / "run.stop"
    proc = steps._process("run", 0, 0, ("localhost",), RECORDS, 27017, "stop-run")
    props = steps.run_properties(
        proc,
        StressSettings(step_seconds=60, target_ops=200, run_threads=2, histograms=False),
        directory=str(tmp_path),
        urlfile=urlfile,
        stop_file=str(stop),
    )
    path = tmp_path / "run.properties"
    path.write_text(props)
    cmd = properties.ycsb_command(javabuild.ycsb_classpath(), "run", str(path))
    t0 = time.monotonic()
    run = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    time.sleep(8)
    stop.touch()
    out, err = run.communicate(timeout=YCSB_TIMEOUT_S)
    took = time.monotonic() - t0
    assert run.returncode == 0, (out + err)[-3000:]
    assert took < 40, took  # not its 60 s
    assert "stop file" in err
    result = parse.parse_output(out + err, required_ops=["READ", "UPDATE"])
    assert 0 < result.runtime_ms < 40_000 and result.operations > 0
    assert result.p99_ms("READ") > 0
