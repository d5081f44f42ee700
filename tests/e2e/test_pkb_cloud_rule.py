"""The benchmarks under PKB's Cleanup rule for cloud VMs (tests/e2e/pkb_cloud_rule.py).

On the test bed's static VMs PKB always calls Cleanup; on cloud VMs only when the
benchmark asks for it. These runs apply the cloud rule and check that a failed variant,
phase or Prepare ends the run FAILED and leaves nothing behind: no work directory on the
"VM", no process listening, and on Atlas no cluster, user or access-list entry.
Runs when PKB_DIR names a PKB checkout (see tests/e2e/conftest.py).
"""

import glob
import json
import os

import pytest
import yaml
from atlas_fake import PRIVATE, PROJECT, PUBLIC, serve
from pkb_helpers import (
    bed_vm,
    config_with,
    dpkg_selections,
    failing_variant_flags,
    listening,
    run_pkb,
    sshd_vm,
)

from testbed import bed as testbed

pytestmark = pytest.mark.e2e


def samples_of(temp_dir):
    [results] = glob.glob(str(temp_dir / "runs" / "*" / "perfkitbenchmarker_results.json"))
    return [json.loads(line) for line in open(results)]


def left_in(scratch):
    """What a run left in the static VM's scratch directory (its work directories)."""
    return sorted(os.listdir(scratch))


def test_failed_variant_fails_the_run_and_cleans_up(pkb_python, tmp_path, pkb_temp):
    state, vm, scratch = bed_vm(tmp_path)
    flags = failing_variant_flags(state["uri_file"])
    path = config_with(tmp_path / "p.yaml", "mongodb_perftables", vm, flags)
    before = dpkg_selections()
    try:
        p = run_pkb(pkb_python, "mongodb_perftables", path, pkb_temp, cloud=True)
    finally:
        testbed.down(str(tmp_path / "tb"))
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "FAILED" in out, out[-3000:]
    assert "variant(s) failed" in out
    samples = samples_of(pkb_temp)
    assert [s for s in samples if s["metric"] == "Variant Failed"]
    assert [s for s in samples if s["metric"] == "Operation Throughput"]  # the good one is kept
    assert left_in(scratch) == []  # Cleanup ran: the engine's work directory is gone
    assert dpkg_selections() == before


def test_failed_sweep_prepare_cleans_up(pkb_python, tmp_path, pkb_temp):
    sshd, vm, scratch = sshd_vm(tmp_path)
    uri_file = tmp_path / "uri"
    uri_file.write_text(
        f"mongodb://127.0.0.1:{testbed.free_port()}/?serverSelectionTimeoutMS=2000\n"
    )
    flags = {"mongodb_ycsb_sweep_uri_file": str(uri_file), "mongodb_ycsb_sweep_sizes_mb": "0.1"}
    path = config_with(tmp_path / "s.yaml", "mongodb_ycsb_sweep", vm, flags)
    try:
        p = run_pkb(pkb_python, "mongodb_ycsb_sweep", path, pkb_temp, cloud=True)
    finally:
        testbed.stop_pid(sshd.pid)
    out = p.stdout + p.stderr
    # Nothing answers on that port: Prepare fails after YCSB and the engine were shipped.
    assert p.returncode != 0 and "FAILED" in out, out[-3000:]
    assert left_in(scratch) == []


def test_atlas_prepare_failing_after_the_cluster_exists_leaves_nothing(
    pkb_python, tmp_path, pkb_temp
):
    sshd, vm, scratch = sshd_vm(tmp_path)
    env = dict(os.environ, ATLAS_PROJECT_ID=PROJECT, ATLAS_PUBLIC_KEY=PUBLIC,
               ATLAS_PRIVATE_KEY=PRIVATE)  # fmt: skip
    try:
        with serve() as fake:
            # the cluster and the access-list entry exist when Atlas refuses the user
            fake.faults.append(("POST", "/databaseUsers", 400, False))
            flags = {
                "mongodb_perftables_deployment": "atlas",
                "mongodb_perftables_scale": "smoke",
                "mongodb_perftables_experiments": "insert_docsize",
                "mongobench_atlas_api_base": fake.base,
                "mongobench_atlas_poll_s": 0,
            }
            path = config_with(tmp_path / "a.yaml", "mongodb_perftables", vm, flags)
            p = run_pkb(pkb_python, "mongodb_perftables", path, pkb_temp, env=env, cloud=True)
            leftovers = (dict(fake.clusters), dict(fake.users), dict(fake.access_list))
            made = [(m, path) for m, path, _, _ in fake.requests if m == "POST"]
    finally:
        testbed.stop_pid(sshd.pid)
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "FAILED" in out, out[-3000:]
    assert any("/clusters" in path for _, path in made)  # the cluster did exist
    assert any("/accessList" in path for _, path in made)
    assert leftovers == ({}, {}, {})
    assert left_in(scratch) == []
    assert PRIVATE not in out


def test_stress_under_the_cloud_rule_leaves_nothing(pkb_python, tmp_path, pkb_temp):
    state = testbed.up(str(tmp_path / "tb"))
    cfg = yaml.safe_load(open(state["configs"]["mongodb_stress"]))
    first = cfg["mongodb_stress"]["flags"]["mongodb_stress_first_port"]
    scratch = cfg["mongodb_stress"]["vm_groups"]["servers"]["static_vms"][0]["disk_specs"][0][
        "mount_point"
    ]
    try:
        p = run_pkb(pkb_python, "mongodb_stress", state["configs"]["mongodb_stress"], pkb_temp,
                    cloud=True)  # fmt: skip
        remaining = left_in(scratch)
    finally:
        testbed.down(str(tmp_path / "tb"))
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert [s for s in samples_of(pkb_temp) if s["metric"] == "Maximum Throughput"]
    assert listening(range(first, first + 3)) == []
    assert remaining == []


def test_unreachable_target_fails_with_one_line_and_cleans_up(pkb_python, tmp_path, pkb_temp):
    sshd, vm, scratch = sshd_vm(tmp_path)
    port = testbed.free_port()
    uri_file = tmp_path / "uri"
    uri_file.write_text(
        f"mongodb://bench:pkbSecr3tPw@127.0.0.1:{port}/?serverSelectionTimeoutMS=2000\n"
    )
    flags = {
        "mongodb_perftables_uri_file": str(uri_file),
        "mongodb_perftables_scale": "smoke",
        "mongodb_perftables_experiments": "insert_docsize",
    }
    path = config_with(tmp_path / "u.yaml", "mongodb_perftables", vm, flags)
    try:
        p = run_pkb(pkb_python, "mongodb_perftables", path, pkb_temp, cloud=True)
    finally:
        testbed.stop_pid(sshd.pid)
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "FAILED" in out, out[-3000:]
    # PKB's status detail is the engine's one line: the redacted target and the reason.
    [statuses] = glob.glob(str(pkb_temp / "runs" / "*" / "completion_statuses.json"))
    [status] = [json.loads(line) for line in open(statuses)]
    detail = status["status_detail"]
    assert status["status"] == "FAILED"
    assert detail.startswith(f"mongobench: mongodb://bench:***@127.0.0.1:{port}/"), detail
    assert "server unreachable" in detail and "Traceback" not in detail
    assert "pkbSecr3tPw" not in out
    assert left_in(scratch) == []
