"""mongodb_perftables with deployment=sharded through the real ./pkb.py.

On the test bed's static VMs: a one-member config-server replica set and two
one-member shard replica sets (stand-ins with --replset) on the servers VM, a
stand-in mongos (--mongos) on the client VM; the engine initiates the sets,
runs addShard/enableSharding on the mongos, and every collection an
experiment creates is sharded on `_id` hashed. The stand-in mongos keeps the
data itself (no distribution): this checks the deployment and sharding
plumbing, not MongoDB's balancing. Runs when PKB_DIR names a PKB checkout.
"""

import re

import pytest
from pkb_helpers import listening, run_on_own_sshd, two_group_config

from testbed import bed as testbed

pytestmark = pytest.mark.e2e


def test_sharded_deployment_initiated_and_used(pkb_python, tmp_path, pkb_temp):
    port = testbed.free_port_block(4)  # two shards, the config server, the mongos
    path, sshd = two_group_config(
        tmp_path,
        "mongodb_perftables",
        {
            "mongodb_perftables_deployment": "sharded",
            "mongobench_mongod_server": "standin",
            "mongodb_perftables_port": port,
            "mongodb_perftables_scale": "smoke",
            "mongodb_perftables_experiments": "insert_docsize,query_fetch",
            # query_fetch's variants are duration-bound (0.4 s at smoke): several intervals
            "mongodb_perftables_interval_s": 0.1,
        },
    )
    run_dir, samples = run_on_own_sshd(pkb_python, "mongodb_perftables", path, pkb_temp, sshd)
    from mongobench.perftables import experiments as exp_mod

    plan = exp_mod.plan(exp_mod.load(), ["insert_docsize", "query_fetch"], "smoke")
    tput = [s for s in samples if s["metric"] == "Operation Throughput"]
    assert len(tput) == sum(len(vs) for _, vs in plan)
    for s in tput:
        labels = s["labels"]
        assert "|deployment:sharded|" in labels and "|topology:sharded|" in labels
        assert "|shards:2|" in labels and "|mongos:client|" in labels
        assert "|sharded:True|" in labels and "|shard_key:_id:hashed|" in labels
    # each variant's time series, in PKB's time-series form (CreateTimeSeriesSample)
    series = [s for s in samples if s["metric"] == "Operation Throughput time series"]
    assert len(series) == len(tput)
    timed = [s for s in series if "|experiment:query_fetch|" in s["labels"]]
    assert len(timed) == sum(len(vs) for e, vs in plan if e.name == "query_fetch")
    for s in timed:
        assert "|duration_s:0.4|" in s["labels"], s["labels"]
        assert s["value"] == 0 and s["unit"] == "ops/sec" and "|interval:0.1|" in s["labels"]
        values = re.search(r"\|values:\[([^\]]*)\]\|", s["labels"]).group(1).split(", ")
        stamps = re.search(r"\|timestamps:\[([^\]]*)\]\|", s["labels"]).group(1).split(", ")
        assert len(values) == len(stamps) >= 4, s["labels"]
        assert sum(float(v) for v in values) > 0, values
    log = open(f"{run_dir}/pkb.log").read()
    # config servers and both shards initiated, then the shards registered on the mongos
    assert '"cfg": "127.0.0.1:' in log and '"shard1": "127.0.0.1:' in log
    assert '"admin": ["addShard", "addShard", "enableSharding"]' in log
    assert listening(range(port, port + 4)) == []
