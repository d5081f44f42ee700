"""The unmodified ./pkb.py against the test bed's static VM.

Runs when PKB_DIR names a PKB checkout; PKB_PYTHON is the Python of an
environment with PKB's requirements (default: python3.12). The plugin is
installed into that environment with `pip install -e` if it is not there.
"""

import glob
import json
import re

import pytest
from pkb_helpers import dpkg_selections, helpmatch, run_pkb

from testbed import bed as testbed

pytestmark = pytest.mark.e2e


def test_helpmatch_lists_our_flags(pkb_python):
    out = helpmatch(pkb_python, "mongodb_perftables")
    assert "--mongodb_perftables_scale" in out and "--mongodb_perftables_uri_file" in out


def test_every_benchmark_registers_with_its_flags(pkb_python):
    for name, flag in (
        ("mongodb_stress", "--mongodb_stress_target_ops_per_client"),
        ("mongodb_ycsb_sweep", "--mongodb_ycsb_sweep_sizes_mb"),
        ("mongobench_pkb.mongod", "--mongobench_mongodb_version"),
    ):
        out = helpmatch(pkb_python, name)
        assert flag in out, name


# "<date> <time>,<ms> ... mongobench <vm>: [i/N] experiment/variant: <n> ops, ..."
PROGRESS = re.compile(
    r"^\S+ (\d\d:\d\d:\d\d),\d+ .*mongobench \S+: \[(\d+)/(\d+)\] (\w+)/(.+?): \d+ ops, ",
    re.M,
)


def test_perftables_on_the_test_bed(pkb_python, tmp_path, pkb_temp):
    state = testbed.up(str(tmp_path / "tb"))
    before = dpkg_selections()
    try:
        p = run_pkb(
            pkb_python,
            "mongodb_perftables",
            state["configs"]["mongodb_perftables"],
            pkb_temp,
            "--mongobench_progress_seconds=2",
            timeout=1200,
        )
    finally:
        testbed.down(str(tmp_path / "tb"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "SUCCEEDED" in p.stdout + p.stderr
    assert dpkg_selections() == before  # the static host's packages are as they were
    [results] = glob.glob(str(pkb_temp / "runs" / "*" / "perfkitbenchmarker_results.json"))
    samples = [json.loads(line) for line in open(results)]
    tput = [
        s
        for s in samples
        if s["metric"] == "Document Throughput" and "|experiment:insert_docsize|" in s["labels"]
    ]
    variants = sorted(int(s["labels"].split("|doc_size_kb:")[1].split("|")[0]) for s in tput)
    assert variants == [1, 4, 32, 256, 2048]
    for s in tput:
        assert s["unit"] == "docs/sec" and s["value"] > 0
        assert "|experiment:insert_docsize|" in s["labels"] and "|scale:smoke|" in s["labels"]
    # Every experiment, every variant but the ones the stand-in cannot run.
    from mongobench.perftables import experiments as exp_mod

    plan = exp_mod.plan(exp_mod.load(), None, "smoke", skip=testbed.STANDIN_UNSUPPORTED)
    want = {(e.name, v.label) for e, vs in plan for v in vs}
    got = set()
    for s in samples:
        if s["metric"] == "Operation Throughput":
            labels = s["labels"]
            exp = labels.split("|experiment:")[1].split("|")[0]
            got.add((exp, labels.split("|variant:")[1].split("|")[0]))
    assert got == want
    assert not [s for s in samples if s["metric"] == "Variant Failed"]
    log = open(glob.glob(str(pkb_temp / "runs" / "*" / "pkb.log"))[0]).read()
    assert state["uri"] not in log  # the target is passed in a file, never on a command line
    # The plan's estimate, logged by CheckPrerequisites before anything was provisioned, and
    # the engine's on every sample.
    plan_at = log.index(f"mongodb_perftables plan: {len(want)} variant(s) of")
    assert plan_at < log.index("Provisioning resources for benchmark")
    assert all("|estimated_seconds:" in s["labels"] for s in tput)
    # The seed's definitions: Average Op Latency is the server's (opLatencies deltas), each
    # variant shows its key shape, and the report renders the seed's tables from the file.
    avg = [s for s in samples if s["metric"] == "Average Op Latency"]
    assert avg and all("|latency_source:server|" in s["labels"] for s in avg)
    assert all("|key_example:" in s["labels"] for s in tput)
    from mongobench import cli

    out = tmp_path / "report.md"
    assert cli.main(["report", "--pkb-results", results, "--out", str(out)]) == 0
    text = out.read_text()
    assert "| Document Size (KB) |" in text and "| Num Threads | Updating Index |" in text
    # Live progress: an [i/N] line per variant reached pkb.log while the engine ran (the
    # lines came with many polls, in order, before the results were pulled).
    lines = PROGRESS.findall(log)
    assert {(e, v) for _, _, _, e, v in lines} == want
    assert [int(i) for _, i, _, _, _ in lines] == list(range(1, len(want) + 1))
    assert {n for _, _, n, _, _ in lines} == {str(len(want))}
    assert len({t for t, *_ in lines}) >= 3, lines  # not one burst at the end
    pulled = log.index("mongodb_perftables raw results saved")
    assert log.index(f"[{len(want)}/{len(want)}]") < pulled


def test_perftables_from_two_client_vms(pkb_python, tmp_path, pkb_temp):
    """A hot-document variant from two client VMs (the test bed's host twice, separate
    work directories): one start time, counts merged once, equal to the server's."""
    from pymongo import MongoClient

    state = testbed.up(str(tmp_path / "tb"), client_vms=2)
    try:
        p = run_pkb(
            pkb_python,
            "mongodb_perftables",
            state["configs"]["mongodb_perftables"],
            pkb_temp,
            "--mongodb_perftables_experiments=concurrency",
            "--mongodb_perftables_variants=20, False",
            "--mongodb_perftables_client_processes=1",
            timeout=900,
        )
        with MongoClient(state["uri"]) as c:
            count = c["mongobench"]["hotspot"].find_one({"_id": 0})["count"]
    finally:
        testbed.down(str(tmp_path / "tb"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    [run_dir] = glob.glob(str(pkb_temp / "runs" / "*"))
    run = json.load(open(f"{run_dir}/perftables-results.json"))
    [r] = run["results"]
    assert r["status"] == "ok" and r["client_vms"] == 2 and r["client_processes"] == 2
    assert [v["vm"] for v in r["client_per_vm"]] == [0, 1]
    assert all(v["ops"] > 0 for v in r["client_per_vm"])
    assert sum(r["ops"].values()) == r["settings"]["total_ops"] == count
    samples = [json.loads(line) for line in open(f"{run_dir}/perfkitbenchmarker_results.json")]
    [tput] = [s for s in samples if s["metric"] == "Operation Throughput"]
    assert "|client_vms:2|" in tput["labels"] and "|client_processes:2|" in tput["labels"]
    log = open(f"{run_dir}/pkb.log").read()
    assert "the leader is done after 1 timed phase(s)" in log  # the follower's last line


def test_perftables_repeats_give_intervals(pkb_python, tmp_path, pkb_temp):
    """--mongodb_perftables_repeats 2: each variant runs twice, interleaved, and its samples
    carry the mean with stdev and 95 % interval; the progress lines say the repeat."""
    state = testbed.up(str(tmp_path / "tb"))
    try:
        p = run_pkb(
            pkb_python,
            "mongodb_perftables",
            state["configs"]["mongodb_perftables"],
            pkb_temp,
            "--mongodb_perftables_experiments=insert_docsize",
            "--mongodb_perftables_variants=1;4",
            "--mongodb_perftables_repeats=2",
            "--mongobench_progress_seconds=2",
            timeout=900,
        )
    finally:
        testbed.down(str(tmp_path / "tb"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    [run_dir] = glob.glob(str(pkb_temp / "runs" / "*"))
    run = json.load(open(f"{run_dir}/perftables-results.json"))
    assert [(r["label"], r["repeat"]) for r in run["results"]] == [
        ("1", 0), ("4", 0), ("4", 1), ("1", 1),
    ]  # fmt: skip
    samples = [json.loads(line) for line in open(f"{run_dir}/perfkitbenchmarker_results.json")]
    tput = [s for s in samples if s["metric"] == "Document Throughput"]
    assert len(tput) == 2  # one per variant, not per run
    for s in tput:
        labels = s["labels"]
        assert "|repeats:2|" in labels and "|ci95_low:" in labels and "|stdev:" in labels
    log = open(f"{run_dir}/pkb.log").read()
    assert "[4/4] insert_docsize/1 (repeat 2/2): " in log


def test_perftables_rate_steps_give_a_curve_in_the_samples(pkb_python, tmp_path, pkb_temp):
    """--mongodb_perftables_rate_steps 0.5,2: a hot-document variant runs closed loop, then in
    an open loop at half and twice its throughput; PKB's samples carry each step, the open
    ones their target, achieved rate and service-time latency."""
    state = testbed.up(str(tmp_path / "tb"))
    try:
        p = run_pkb(
            pkb_python,
            "mongodb_perftables",
            state["configs"]["mongodb_perftables"],
            pkb_temp,
            "--mongodb_perftables_experiments=concurrency",
            "--mongodb_perftables_variants=10, False",
            "--mongodb_perftables_client_processes=1",
            "--mongodb_perftables_rate_steps=0.5,2",
            timeout=900,
        )
    finally:
        testbed.down(str(tmp_path / "tb"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    [run_dir] = glob.glob(str(pkb_temp / "runs" / "*"))
    run = json.load(open(f"{run_dir}/perftables-results.json"))
    assert [r["label"] for r in run["results"]] == ["10, False", "10, False @ 0.5x",
                                                     "10, False @ 2x"]  # fmt: skip
    samples = [json.loads(line) for line in open(f"{run_dir}/perfkitbenchmarker_results.json")]
    tput = {s["labels"].split("|rate_step_name:")[1].split("|")[0]: s["labels"]
            for s in samples if s["metric"] == "Operation Throughput"}  # fmt: skip
    assert set(tput) == {"closed loop", "0.5x", "2x"}
    assert "|target_ops_per_s:" in tput["2x"] and "|achieved_of_target_pct:" in tput["2x"]
    assert "|target_ops_per_s:" not in tput["closed loop"]
    assert any(s["metric"] == "update service p99 latency" for s in samples)
