"""mongodb_perftables with a server VM: deployment=standalone on the test bed.

The test bed has no mongod, so the servers VM runs the project's stand-in in
its place (--mongobench_mongod_server=standin); the samples say so. What this
checks is the PKB side: server deployment, OS metrics sampled on the server
VM during each timed phase, cleanup by PID. Runs when PKB_DIR names a PKB
checkout (see tests/e2e/test_pkb.py).
"""

import glob
import json
import os

import pytest
import yaml
from pkb_helpers import listening, run_pkb

from mongobench.remote import provenance
from testbed import bed as testbed

pytestmark = pytest.mark.e2e


def test_standalone_server_vm_with_os_metrics(pkb_python, tmp_path):
    import tempfile

    state = testbed.up(str(tmp_path / "tb"), server="standin")
    pkb_temp = tempfile.mkdtemp(prefix="pkb-", dir="/tmp")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    vm = {
        "ip_address": "127.0.0.1",
        "internal_ip": "127.0.0.1",
        "user_name": state["ssh_user"],
        "ssh_port": state["ssh_port"],
        "ssh_private_key": state["ssh_key"],
        "os_type": "debian12",
        "install_packages": False,
        "disk_specs": [{"mount_point": str(scratch)}],
    }
    port = testbed.free_port()
    cfg = {
        "mongodb_perftables": {
            "vm_groups": {
                "clients": {"static_vms": [dict(vm)]},
                "servers": {"static_vms": [dict(vm)]},
            },
            "flags": {
                "mongodb_perftables_deployment": "standalone",
                "mongobench_mongod_server": "standin",
                "mongodb_perftables_port": port,
                "mongodb_perftables_scale": "smoke",
                "mongodb_perftables_experiments": "insert_docsize,concurrency",
            },
        }
    }
    path = tmp_path / "standalone.yaml"
    path.write_text(yaml.safe_dump(cfg))
    try:
        p = run_pkb(pkb_python, "mongodb_perftables", path, pkb_temp)
    finally:
        testbed.down(str(tmp_path / "tb"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    [results] = glob.glob(os.path.join(pkb_temp, "runs", "*", "perfkitbenchmarker_results.json"))
    samples = [json.loads(line) for line in open(results)]
    tput = [s for s in samples if s["metric"] == "Operation Throughput"]
    assert len(tput) == 5 + 12
    for s in tput:
        assert "|server_kind:standin|" in s["labels"] and "|deployment:standalone|" in s["labels"]
    # The server VM's OS was sampled during the timed phases.
    cpu = [s for s in samples if s["metric"] == "Server CPU Usage"]
    assert len(cpu) >= 10 and all(0 <= s["value"] <= 100 for s in cpu)
    # Provenance on every sample; each variant's samples stamped with its own start.
    version = provenance.package_version()  # + the commit PKB's engine saw
    ours = [s for s in samples if "|variant_index:" in s["labels"]]  # not PKB's own
    assert len(ours) > len(tput)
    for s in ours:
        labels = s["labels"]
        assert f"|mongobench_version:{version}" in labels, labels
        assert f"|storage_engine:{provenance.STANDIN_ENGINE}|" in labels
        assert "|server_version:7.0.0|" in labels and "|pymongo_version:" in labels
    stamps = [s["timestamp"] for s in tput]
    assert len(set(stamps)) == len(tput)  # one start per variant, not the end of Run
    by_stamp = {}
    for s in ours:
        by_stamp.setdefault(s["timestamp"], set()).add(s["metric"])
    assert all("Time Taken" in by_stamp[t] for t in stamps)
    assert len([s for s in samples if s["metric"] == "Server CPU Steal"]) == len(cpu)
    # Nothing left listening on the server port: the stand-in was stopped by PID.
    assert listening([port]) == []
