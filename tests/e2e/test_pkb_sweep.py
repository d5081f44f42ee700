"""The unmodified ./pkb.py runs mongodb_ycsb_sweep on the test bed's static VM, and
`mongobench compare` reports on what it produced.

Runs when PKB_DIR names a PKB checkout; PKB_PYTHON is the Python of its environment (default
python3.12). The benchmark config is written here (the test bed's own configs belong to
testbed/bed.py).
"""

import glob
import json
import os
import pathlib
import re
import shutil

import pytest
import yaml
from pkb_helpers import dpkg_selections, helpmatch, run_pkb

from mongobench import cli
from mongobench.reports import report
from testbed import bed as testbed

pytestmark = pytest.mark.e2e
SIZES = "0.1,0.2"


def sweep_config(state: dict, path: pathlib.Path) -> str:
    scratch = os.path.join(state["dir"], "scratch-sweep")
    os.makedirs(scratch, exist_ok=True)
    sshd = testbed.Sshd(
        state["pids"]["sshd"], state["ssh_port"], state["ssh_key"], state["ssh_user"]
    )
    cfg = {
        "mongodb_ycsb_sweep": {
            "vm_groups": {"clients": {"static_vms": [testbed.static_vm(sshd, scratch)]}},
            "flags": {
                "mongodb_ycsb_sweep_uri_file": state["uri_file"],
                "mongodb_ycsb_sweep_sizes_mb": SIZES,
                "mongodb_ycsb_sweep_max_seconds": 120,
                "mongodb_ycsb_sweep_status_interval_s": 1,
            },
        }
    }
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return str(path)


def test_helpmatch_lists_the_sweep_flags(pkb_python):
    out = helpmatch(pkb_python, "mongodb_ycsb_sweep")
    assert "--mongodb_ycsb_sweep_sizes_mb" in out and "--mongodb_ycsb_sweep_uri_file" in out


def test_sweep_on_the_test_bed_then_compare(pkb_python, tmp_path, pkb_temp):
    state = testbed.up(str(tmp_path / "tb"))
    before = dpkg_selections()
    try:
        p = run_pkb(
            pkb_python,
            "mongodb_ycsb_sweep",
            sweep_config(state, tmp_path / "sweep.yaml"),
            pkb_temp,
            "--mongodb_ycsb_sweep_repeats=2",
            timeout=1800,
        )
    finally:
        testbed.down(str(tmp_path / "tb"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "SUCCEEDED" in p.stdout + p.stderr
    assert dpkg_selections() == before  # the static host's packages are as they were
    [results] = glob.glob(str(pkb_temp / "runs" / "*" / "perfkitbenchmarker_results.json"))
    samples = report.load_pkb_results(results)
    sweep_samples = [s for s in samples if "phase" in s["metadata"]]
    assert not [s for s in sweep_samples if s["metric"] == "Phase Failed"]

    # Runtime and throughput for every size and phase; p99 for each phase's operations.
    tput = {
        (s["metadata"]["size_mb"], s["metadata"]["phase"]): s
        for s in sweep_samples
        if s["metric"] == "overall Throughput"
    }
    phases = ["load", "read_only", "update_only", "read_update"]
    assert sorted(tput) == sorted((size, ph) for size in ("0.1", "0.2") for ph in phases)
    for (size, _), s in tput.items():
        md = s["metadata"]
        assert s["unit"] == "ops/sec" and s["value"] > 0
        assert md["records"] == {"0.1": "100", "0.2": "200"}[size]
        assert md["exceeds_memory"] == "False" and md["memory_source"] == "client VM"
        # the run phases ran twice, interleaved, folded into a mean with its interval
        if md["phase"] == "load":
            assert "repeats" not in md
        else:
            assert md["repeats"] == "2" and len(md["repeat_values"].split(",")) == 2
            assert float(md["ci95_low"]) <= s["value"] <= float(md["ci95_high"])
    p99 = {
        (s["metadata"]["size_mb"], s["metadata"]["phase"], s["metadata"]["op"])
        for s in sweep_samples
        if s["metric"] == f"{s['metadata'].get('op', '').lower()} p99 latency"
    }
    assert ("0.2", "read_update", "READ") in p99 and ("0.2", "read_update", "UPDATE") in p99
    assert ("0.1", "load", "INSERT") in p99
    # The estimate: logged by CheckPrerequisites before provisioning, and on every sample.
    log = open(glob.glob(str(pkb_temp / "runs" / "*" / "pkb.log"))[0]).read()
    plan_at = log.index("mongodb_ycsb_sweep plan: 2 size(s) (0.1 MB, 0.2 MB) x 4 phase(s)")
    assert plan_at < log.index("Provisioning resources for benchmark")
    assert all(float(s["metadata"]["estimated_seconds"]) > 0 for s in tput.values())
    # PKB's ycsb_stats names (mongodb_ycsb's), with its units
    units = {s["metric"]: s["unit"] for s in sweep_samples if s["metric"] != "Phase Failed"}
    assert units["overall RunTime"] == "ms" and units["overall Throughput"] == "ops/sec"
    for name in (
        "read AverageLatency",
        "read 50thPercentileLatency",
        "read p50 latency",
        "update p50 latency",
        "read 95thPercentileLatency",
        "read p95 latency",
        "update 99thPercentileLatency",
        "update p99 latency",
    ):
        assert units[name] == "ms", name
    log = open(glob.glob(str(pkb_temp / "runs" / "*" / "pkb.log"))[0]).read()
    assert state["uri"] not in log  # the target travels in a file, never on a command line
    # YCSB's -s status lines reached pkb.log while its processes ran.
    assert re.search(r"YCSB \S+/\S+: .*\d+ sec: \d+ operations", log), "no YCSB status line"
    # each phase's time series from them, every --mongodb_ycsb_sweep_status_interval_s=1
    series = [s for s in sweep_samples if s["metric"] == "overall Throughput time series"]
    assert {(s["metadata"]["size_mb"], s["metadata"]["phase"]) for s in series} <= set(tput)
    assert series and all(float(s["metadata"]["interval"]) == 1.0 for s in series)

    # The comparison report over the test bed's results, as if from two machine types.
    copy = tmp_path / "second.json"
    shutil.copy(results, copy)
    out = tmp_path / "report" / "compare.md"
    args = ["compare", "--pkb-results", results, str(copy), "--out", str(out)]
    args += ["--label", f"{results}=testbed-a", "--label", "second.json=testbed-b"]
    args += ["--price", "testbed-a=0.1"]
    assert cli.main(args) == 0
    text = out.read_text()
    assert "| testbed-a | perfkitbenchmarker_results.json |" in text
    assert "testbed-b Throughput (ops/s)" in text and "testbed-a ops/$" in text
    pngs = sorted(os.listdir(tmp_path / "report" / "compare-plots"))
    # a phase of 5 status intervals or more also gets its throughput over time
    assert {p for p in pngs if p.endswith("_over_time.png")} <= {
        f"sweep_{phase}_over_time.png" for phase in phases
    }
    assert [p for p in pngs if not p.endswith("_over_time.png")] == [
        "sweep_p99.png",
        "sweep_runtime_linear.png",
        "sweep_runtime_log.png",
        "sweep_throughput_linear.png",
        "sweep_throughput_log.png",
    ]
    assert json.dumps(state["uri"]) not in text
