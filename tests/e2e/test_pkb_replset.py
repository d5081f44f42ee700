"""mongodb_perftables with deployment=replset through the real ./pkb.py.

Three stand-in members on the test bed's static server VM (consecutive
ports), started with --replset, initiated by the engine from the client VM
(replSetInitiate, then replSetGetStatus until one primary), and used through
a replicaSet URI with w:majority. The stand-in simulates membership (discovery,
primary/secondary roles, secondaries refusing writes) but does not replicate
data: this checks the PKB and engine side of the deployment, not MongoDB's
replication. Runs when PKB_DIR names a PKB checkout.
"""

import pytest
from pkb_helpers import listening, run_on_own_sshd, two_group_config

from testbed import bed as testbed

pytestmark = pytest.mark.e2e


def test_replica_set_deployment_initiated_and_used(pkb_python, tmp_path, pkb_temp):
    port = testbed.free_port_block(3)
    path, sshd = two_group_config(
        tmp_path,
        "mongodb_perftables",
        {
            "mongodb_perftables_deployment": "replset",
            "mongobench_mongod_server": "standin",
            "mongodb_perftables_port": port,
            "mongodb_perftables_scale": "smoke",
            "mongodb_perftables_experiments": "insert_docsize,updateapi",
        },
    )
    run_dir, samples = run_on_own_sshd(pkb_python, "mongodb_perftables", path, pkb_temp, sshd)
    tput = [s for s in samples if s["metric"] == "Operation Throughput"]
    assert len(tput) == 5 + 8
    for s in tput:
        labels = s["labels"]
        assert "|deployment:replset|" in labels and "|topology:replset|" in labels
        assert "|replset_members:3|" in labels and "|write_concern:majority|" in labels
        assert s["value"] > 0
    # the engine initiated the set from the client and saw member 0 elected
    log = open(f"{run_dir}/pkb.log").read()
    assert "mongobench topology up" in log
    assert f'"rs0": "127.0.0.1:{port}"' in log
    # every member was stopped by PID at cleanup
    assert listening(range(port, port + 3)) == []
