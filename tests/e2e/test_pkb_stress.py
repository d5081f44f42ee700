"""mongodb_stress through the unmodified ./pkb.py on the test bed (stand-in servers).

Runs when PKB_DIR names a PKB checkout; PKB_PYTHON is the Python of an environment with
PKB's requirements (default: python3.12). The test bed's mongodb_stress config is the
smallest run (3 s steps, 200 ops/s per YCSB process, 1000 records, at most 3 instances);
the command line adds a small stress-ng hold so that its start and stop by PID are exercised
too (the config itself holds no memory).
"""

import glob
import json
import os
import pathlib
import re
import shutil
import subprocess
import time

import pytest
from pkb_helpers import dpkg_selections, run_pkb

from mongobench.core.units import GiB
from mongobench.stress import holdparts, sizing
from mongobench.stress.placement import HoldPlan
from testbed import bed as testbed

pytestmark = pytest.mark.e2e
HOLD_GB = 0.03  # 30 MiB of locked memory per step: harmless, but stress-ng really runs
STARTED = re.compile(r"mongobench: started (YCSB|standin|mongod|stress-ng) (\S+).*? pid (\d+)")


def labels(s: dict) -> dict:
    """PKB's collapsed labels '|k:v|k:v|' as a dict."""
    out = {}
    for part in s["labels"].strip("|").split("|"):
        key, _, value = part.partition(":")
        out[key] = value
    return out


def alive_with(pid: int, marker: str) -> bool:
    """The PID is a live process (not a zombie) of this run (its command line holds marker)."""
    try:
        cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return marker.encode() in cmdline


def run_stress(pkb_python, tmp_path, pkb_temp, *flags):
    """./pkb.py's mongodb_stress with `flags` on a test bed of its own, down again before
    this returns: (the run's directory, its samples) once it succeeded."""
    state = testbed.up(str(tmp_path / "tb"))
    try:
        p = run_pkb(
            pkb_python,
            "mongodb_stress",
            state["configs"]["mongodb_stress"],
            pkb_temp,
            *flags,
            timeout=1200,
        )
    finally:
        testbed.down(str(tmp_path / "tb"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    [run_dir] = glob.glob(str(pkb_temp / "runs" / "*"))
    samples = [json.loads(line) for line in open(f"{run_dir}/perfkitbenchmarker_results.json")]
    return run_dir, samples


def test_stress_on_the_test_bed(pkb_python, tmp_path, pkb_temp):
    if os.geteuid() != 0 and not shutil.which("sudo"):
        pytest.skip("stress-ng --vm-locked needs root or sudo")
    if not shutil.which("stress-ng"):
        pytest.skip("stress-ng is not installed (apt-get install stress-ng)")
    state = testbed.up(str(tmp_path / "tb"))
    scratch = str(tmp_path / "tb" / "scratch")
    before = dpkg_selections()
    t0 = time.time()
    try:
        p = run_pkb(
            pkb_python,
            "mongodb_stress",
            state["configs"]["mongodb_stress"],
            pkb_temp,
            "--mongodb_stress_hold_memory",
            f"--mongodb_stress_hold_memory_gb={HOLD_GB}",
            # the config's 3 s steps: under a load of 26 on this 2-core host both YCSB
            # processes of a step connected after their 3 s were over (0 operations)
            "--mongodb_stress_step_seconds=10",
            "--mongodb_stress_status_interval_s=2",
            # at most 3 instances would start at 3 and end there: from 2, two steps, the
            # second on the first's data and its copies
            "--mongodb_stress_first_step=2",
            timeout=1200,
        )
        leftover = os.listdir(scratch)  # the run's directories are gone (before `down`)
    finally:
        testbed.down(str(tmp_path / "tb"))
    runtime = time.time() - t0
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "SUCCEEDED" in p.stdout + p.stderr
    assert dpkg_selections() == before  # the static host's packages are as they were

    [results] = glob.glob(str(pkb_temp / "runs" / "*" / "perfkitbenchmarker_results.json"))
    samples = [json.loads(line) for line in open(results)]
    by_metric = {}
    for s in samples:
        by_metric.setdefault(s["metric"], []).append(s)

    [top] = by_metric["Maximum Throughput"]
    [sla] = by_metric["Maximum Throughput for Latency SLA"]
    meta = labels(top)
    assert top["unit"] == "ops/sec" and top["value"] > 0
    for key in ("step", "instances", "clients", "p99_read_latency_ms", "p99_update_latency_ms",
                "p50_read_latency_ms", "p50_update_latency_ms"):  # fmt: skip
        assert meta[key] not in ("", "None"), key
    assert meta["server_kind"] == "standin"  # nobody takes these for MongoDB numbers
    assert "not MongoDB" in meta["mongodb_version"] and "not MongoDB" in meta["server_warning"]
    assert meta["p99_source"] == "merged histograms"  # every process had its own .hdr files
    assert meta["search"] == "bounded" and meta["records_per_instance"] == "1000"
    assert meta["search_first_step"] == "2"
    assert meta["memory_hold"].startswith("stress-ng")
    assert int(meta["instances"]) <= 3
    sla_meta = labels(sla)
    assert sla["unit"] == "ops/sec"
    if sla["value"] > 0:
        assert float(sla_meta["p99_read_latency_ms"]) <= float(sla_meta["read_p99_sla_ms"])
    else:
        assert sla_meta["reason"].startswith("no step met read p99")

    steps = by_metric["overall Throughput"]
    tried = [int(n) for n in re.findall(r"\d+", meta["instances_tried"])]
    assert len(steps) == int(meta["steps_run"]) == len(tried) >= 2
    assert sorted(int(labels(s)["instances"]) for s in steps) == sorted(tried)
    assert all(s["value"] > 0 for s in steps)
    for name in (
        "read p50 latency",
        "update p50 latency",
        "read p99 latency",
        "read 99thPercentileLatency",
        "update p99 latency",
        "update 99thPercentileLatency",
    ):  # PKB's ycsb_stats names, in ms
        assert len(by_metric[name]) == len(steps) and by_metric[name][0]["unit"] == "ms"
    for s in steps:
        assert float(labels(s)["hold_gib"]) == pytest.approx(HOLD_GB, abs=0.001)
    # each step's time series from YCSB's status lines, every 2 s
    series = by_metric["overall Throughput time series"]
    assert len(series) == len(steps) and all(float(labels(s)["interval"]) == 2 for s in series)
    # seed 003's Tuning Notes: the server's CPU at every step, and what limited each step
    cpu = by_metric["Server CPU Usage"]
    assert len(cpu) == len(steps) and all(s["unit"] == "%" and 0 <= s["value"] <= 100 for s in cpu)
    assert all(labels(s)["bottleneck"] != "unknown" for s in steps)
    # the usage window begins once the step's workload has (its JVMs' start-up left out)
    assert {labels(s)["usage_from"] for s in steps} <= {"workload start", "YCSB start"}
    assert any(labels(s)["usage_from"] == "workload start" for s in steps)
    assert meta["bottleneck"] != "unknown" and meta["server_cpu_pct"] not in ("", "None")
    # Data seeding by copy: YCSB loaded instance 0 only, once; every other instance got a
    # copy of its data files (the stand-in keeps its store in its dbpath), verified (record
    # count, SHA-256 of sampled records) before its step; YCSB ran on every copy.
    [loaded] = by_metric["Records Loaded"]
    assert loaded["value"] == 1000
    assert meta["data_seeding"] == "copy", meta.get("data_seeding_reason")
    assert meta["data_copy"] in ("reflink", "plain")
    assert meta["data_seeding_verified"] == "True"
    copies = [int(i) for i in meta["data_seeding_copies"].split(",")]
    assert copies == list(range(1, max(tried)))
    assert meta["data_seeding_records"] == "1000" and meta["data_seeding_sampled_keys"] == "64"
    assert re.fullmatch(r"[0-9a-f]{64}", meta["data_seeding_sha256"])
    first = min(steps, key=lambda s: int(labels(s)["step"]))
    assert labels(first)["loaded_instances"] == "0" and labels(first)["copied_instances"]
    assert all(labels(s)["loaded_instances"] == "none" for s in steps if s is not first)
    assert "Step Failed" not in by_metric

    # Every process the benchmark started (it logs each PID) is gone, and nothing of the
    # run's work directories is left running.
    [log] = glob.glob(str(pkb_temp / "runs" / "*" / "pkb.log"))
    started = STARTED.findall(open(log).read())
    # YCSB's -s status lines reached pkb.log while its processes ran.
    assert re.search(r"YCSB \S+/\S+: .*\d+ sec: \d+ operations", open(log).read()), (
        "no YCSB status line"
    )
    kinds = {kind for kind, _, _ in started}
    assert {"YCSB", "standin", "stress-ng"} <= kinds, kinds
    assert len({pid for _, _, pid in started}) == len(started)
    left = [(k, n, pid) for k, n, pid in started if alive_with(int(pid), scratch)]
    assert left == []
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    assert [line for line in ps.splitlines() if scratch in line] == []
    assert leftover == []

    print(
        f"\nmongodb_stress on the test bed: {runtime:.0f} s; Maximum Throughput "
        f"{top['value']:.1f} ops/s with {meta['instances']} instance(s) (read p99 "
        f"{meta['p99_read_latency_ms']} ms); Maximum Throughput for Latency SLA "
        f"{sla['value']:.1f} ops/s ({sla_meta.get('reason', 'met')}); steps {tried}"
    )


def test_stress_keeps_its_memory_hold_as_parts_on_the_test_bed(pkb_python, tmp_path, pkb_temp):
    """The computed hold (what the instances must not have) kept from step to step as parts:
    a server sized as 3 instances of the test bed's config and 50 MiB more, so a step of n
    instances holds one instance's memory for each slot it does not run, plus 50 MiB. The
    first step starts its parts after the load and copies; a later step starts or stops
    only the parts that differ, and every stress-ng process is gone at the end."""
    if os.geteuid() != 0 and not shutil.which("sudo"):
        pytest.skip("stress-ng --vm-locked needs root or sudo")
    if not shutil.which("stress-ng"):
        pytest.skip("stress-ng is not installed (apt-get install stress-ng)")
    per = sizing.memory_per_instance_bytes(1000, 0.25)  # the test bed config's records, cache
    base = 50 * 1024 * 1024
    memory_gb = (sizing.OS_RESERVE_BYTES + 3 * per + base) / GiB
    scratch = str(tmp_path / "tb" / "scratch")
    run_dir, samples = run_stress(
        pkb_python,
        tmp_path,
        pkb_temp,
        "--mongodb_stress_hold_memory",
        f"--mongodb_stress_server_memory_gb={memory_gb!r}",
        "--mongodb_stress_step_seconds=10",
        "--mongodb_stress_status_interval_s=2",
        "--mongodb_stress_first_step=2",
    )
    steps = sorted(
        (labels(s) for s in samples if s["metric"] == "overall Throughput"),
        key=lambda m: int(m["step"]),
    )
    assert len(steps) >= 2
    held: dict = {}
    for meta in steps:
        n = int(meta["instances"])
        want, kept = holdparts.parts(lambda m: HoldPlan(max(0, 3 * per + base - m * per)), n, 3)
        stop, start = holdparts.changes(held, want)
        if meta["loaded_instances"] != "none":
            stop, start = sorted(held), list(want.values())  # YCSB loads run without it
        assert meta["hold_kept"] == "True"
        assert int(meta["hold_parts_started"]) == len(start), (n, meta)
        assert int(meta["hold_parts_stopped"]) == len(stop), (n, meta)
        assert int(meta["hold_parts"]) == len(want)
        assert float(meta["hold_gib"]) == pytest.approx(((3 - n) * per + base) / GiB, abs=0.002)
        held = want
    # a part is started once and kept: each start is one stress-ng line in pkb.log
    log = open(f"{run_dir}/pkb.log").read()
    started = [pid for kind, _, pid in STARTED.findall(log) if kind == "stress-ng"]
    assert len(started) == sum(int(m["hold_parts_started"]) for m in steps)
    # after the first step, a step starts only the parts it lacks (with plain copies too)
    walk = [(m["instances"], m["hold_parts_started"], m["hold_parts_stopped"]) for m in steps]
    assert all(int(m["hold_parts_started"]) < int(m["hold_parts"]) for m in steps[1:]), walk
    assert [pid for pid in started if alive_with(int(pid), scratch)] == []
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    assert [line for line in ps.splitlines() if scratch in line] == []


def test_stress_with_tls_on_the_test_bed(pkb_python, tmp_path, pkb_temp):
    """--mongodb_stress_tls: the stand-ins serve TLS only with the run's certificate, every
    YCSB process connects with tls=true and the run's CA, and every sample says tls."""
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    run_dir, samples = run_stress(
        pkb_python,
        tmp_path,
        pkb_temp,
        "--mongodb_stress_tls",
        "--mongodb_stress_max_instances=2",
        # the config's 3 s steps are too short with TLS: in one trial on a 2-core
        # test bed a YCSB process did 2 operations in its 3 s (JVM start, first TLS
        # handshakes) and the step failed for want of UPDATE latencies
        "--mongodb_stress_step_seconds=10",
    )
    # the benchmark's own samples (PKB adds its run-time samples under the same test name)
    ours = [s for s in samples if s["test"] == "mongodb_stress" and "|search:" in s["labels"]]
    metrics = {s["metric"] for s in ours}
    assert {
        "Maximum Throughput",
        "Maximum Throughput for Latency SLA",
        "overall Throughput",
    } <= metrics
    assert "Step Failed" not in metrics
    for s in ours:
        meta = labels(s)
        assert meta["tls"] == "True", s["metric"]
        assert meta["tls_mode"] == "requireTLS" and meta["tls_server_names"] == "127.0.0.1"
    [top] = [s for s in ours if s["metric"] == "Maximum Throughput"]
    assert top["value"] > 0 and labels(top)["p99_source"] == "merged histograms"
    # the copies were verified over TLS too (VerifyData trusts the run's CA as YCSB does)
    assert labels(top)["data_seeding"] == "copy" and labels(top)["data_seeding_verified"] == "True"

    log = open(f"{run_dir}/pkb.log").read()
    # the stand-ins got the PEM; YCSB trusted the run's CA; no key material was logged
    assert "--tls-cert-key-file" in log and "mongodb.tlsCAFile=" in log
    assert "PRIVATE KEY" not in log
    # on the PKB host only the CA certificate is left: the CA's key was deleted after
    # signing, the server's PEM after it reached the server VM
    left = set(os.listdir(f"{run_dir}/mongodb_stress/tls"))
    assert "ca.pem" in left and left.isdisjoint({"server.pem", "ca.key", "server.key"}), left


def test_stress_steady_stop_on_the_test_bed(pkb_python, tmp_path, pkb_temp):
    """--mongodb_stress_step_stop=steady (the default) really ends a step early: one
    instance, a 300 s step at a rate the stand-in keeps easily, a wide tolerance (the test
    bed's host is shared): PKB sees the status lines settle, YCSB sees its stop file and
    ends with its summary, and the step's samples say so."""
    t0 = time.time()
    run_dir, samples = run_stress(
        pkb_python,
        tmp_path,
        pkb_temp,
        "--mongodb_stress_min_instances=1",
        "--mongodb_stress_max_instances=1",
        "--mongodb_stress_step_seconds=300",
        "--mongodb_stress_steady_min_seconds=20",
        "--mongodb_stress_steady_tolerance=0.5",
        "--mongodb_stress_target_ops_per_client=100",
    )
    runtime = time.time() - t0  # the test bed's start and stop too: the bound allows them
    [step] = [s for s in samples if s["metric"] == "overall Throughput"]
    [top] = [s for s in samples if s["metric"] == "Maximum Throughput"]
    meta = labels(step)
    assert labels(top)["step_stop"] == "steady" and labels(top)["steady_window_intervals"] == "6"
    assert meta["steady_reached"] == "True", meta
    # ended well before its 300 s: 6 closed 10 s intervals, then the next status poll
    measured = float(meta["step_measured_seconds"])
    assert 60 <= measured < 200, meta
    assert float(meta["run_wall_seconds"]) < 240, meta
    assert float(meta["steady_after_seconds"]) >= 60
    # the rule's bound on the step's throughput, within the tolerance given
    assert 0 <= float(meta["steady_step_error"]) <= 0.5, meta
    # YCSB's own figure over the measured seconds, and the full step's estimate beside it
    assert float(meta["measured_throughput"]) > 0 and step["value"] > 0
    assert step["value"] == pytest.approx(top["value"])
    log = open(f"{run_dir}/pkb.log").read()
    assert re.search(r"step 1 steady after \d+ s", log)
    assert runtime < 900
