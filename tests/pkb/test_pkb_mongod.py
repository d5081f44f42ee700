"""The mongod orchestration (mongobench_pkb.mongod) and the perftables topologies
(mongobench_pkb.topology) on FakeVms, through PKB's own package registry and flags: what they
run on the VMs, and what they record in the benchmark's typed state for Run and Cleanup
(issue 24, item 3)."""

import json
import types

import pytest
from fakevm import NEEDS_PKB, FakeVm

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from perfkitbenchmarker.linux_benchmarks import mongodb_perftables_benchmark as perftables

from mongobench_pkb import atlas as mongobench_atlas
from mongobench_pkb import mongod, topology

BIN = "/opt/mongodb/bin"


class ServerVm(FakeVm):
    """A server VM with preinstalled mongod 8.0.4 in BIN; each start prints a PID."""

    def __init__(self, name, ip, **kw):
        answers = {f"{BIN}/mongod --version": ("db version v8.0.4\n", 0), "--config": ("4242\n", 0)}
        super().__init__(name, answers=answers, **kw)
        self.internal_ip = ip
        self.total_memory_kb = 8 * 1024 * 1024
        self.robust = []

    def RobustRemoteCommand(self, command, **kwargs):
        self.robust.append(command)
        return "topology ready\n", ""


def _settings(**kw):
    values = dict(
        port=27017, cache_gb=None, host_settings=False, replset_members=3, shards=2,
        shard_members=1, config_members=1, write_concern="majority", database="perftables",
        topology_timeout=60,
    )  # fmt: skip
    values.update(kw)
    return topology.Settings(**values)


def _started(vm):
    """(binary, config path) of every mongod/mongos started on `vm`."""
    out = []
    for c in vm.commands():
        if "--config" in c:
            words = c.split()
            i = words.index("--config")
            out.append((words[i - 1].strip("'"), words[i + 1].strip("'")))
    return out


def test_new_instance_ports_and_roles(pkb_flags):
    server = mongod.Server("s0", "mongod", "/w", BIN, "8.0.4", "8.0.4", "perfkit")
    inst = mongod.NewInstance(server, 3, host="10.0.0.1")
    assert (inst.port, inst.bind_ip, inst.name) == (27020, "10.0.0.1", "mongod-3")
    assert inst.paths.root == "/w/instances/mongod-3"
    assert mongod.NewInstance(server, 3, host="h", port=30000).port == 30000
    with pytest.raises(ValueError, match="replica set member"):
        mongod.NewInstance(server, 0, host="h", role="shardsvr")


def test_a_standalone_is_recorded_in_the_typed_state(pkb_flags):
    pkb_flags(mongobench_mongod_bin_dir=BIN)
    vm = ServerVm("server0", "10.0.0.5")
    servers = topology.Servers([vm], {"deployment": "standalone"})
    uri = topology.StartStandalone(servers, _settings())
    assert uri == "mongodb://10.0.0.5:27017/"
    assert ("Install", "mongobench_mongod") in vm.calls  # PKB's package mechanism
    [(binary, config)] = _started(vm)
    assert binary == f"{BIN}/mongod" and config.endswith("/instances/mongod-0/mongod.conf")
    assert servers.data_paths == {"server0": config.rsplit("/", 1)[0] + "/data"}
    assert servers.metadata["topology"] == "standalone"
    assert servers.metadata["mongod_install"] == "bin_dir"
    assert servers.metadata["mongodb_version"] == "8.0.4"
    assert servers.allocator_checked and not servers.host_settings_applied


def test_a_replica_set_is_initiated_by_the_engine_in_its_workdir(pkb_flags):
    pkb_flags(mongobench_mongod_bin_dir=BIN)
    vms = [ServerVm(f"server{i}", f"10.0.0.{i + 1}") for i in range(3)]
    client = ServerVm("client0", "10.0.0.9")
    servers = topology.Servers(vms, {"deployment": "replset"})
    uri = topology.StartReplicaSet(servers, client, "/engine", _settings())
    assert uri.startswith("mongodb://10.0.0.1:27017,10.0.0.2:27017,10.0.0.3:27017/")
    assert "replicaSet=rs0" in uri and "w=majority" in uri
    assert [len(_started(vm)) for vm in vms] == [1, 1, 1] and not _started(client)
    assert sorted(servers.data_paths) == ["server0", "server1", "server2"]
    [plan_write] = [c for c in client.commands() if "topology-plan.json" in c]
    plan = json.loads(plan_write.split("printf %s ", 1)[1].rsplit(" > ", 1)[0].strip("'"))
    assert plan["replsets"][0]["config"]["_id"] == "rs0"
    [up] = client.robust
    assert up.startswith("cd /engine && venv/bin/python -m mongobench topology up")
    assert servers.metadata["replset_members"] == 3 and not servers.sharded


def test_a_sharded_cluster_puts_the_mongos_on_the_client(pkb_flags):
    pkb_flags(mongobench_mongod_bin_dir=BIN)
    vms = [ServerVm(f"server{i}", f"10.0.0.{i + 1}") for i in range(2)]
    client = ServerVm("client0", "10.0.0.9")
    servers = topology.Servers(vms, {"deployment": "sharded"})
    uri = topology.StartSharded(servers, client, "/engine", _settings())
    assert uri.startswith("mongodb://10.0.0.9:")
    assert [b.rsplit("/", 1)[1] for b, _ in _started(client)] == ["mongos"]
    assert servers.sharded and servers.metadata["shards"] == 2
    assert len(client.robust) == 2  # replica sets initiated, then the mongos's admin commands


def test_cleanup_restores_host_settings_only_where_applied(pkb_flags):
    server, client = ServerVm("server0", "10.0.0.1"), ServerVm("client0", "10.0.0.9")
    state = perftables.State(topology.Servers([server], {}, host_settings_applied=True))
    spec = types.SimpleNamespace(vm_groups={"clients": [client], "servers": [server]})
    names = [name for name, _ in perftables._CleanupSteps(spec, state, keep=False)]
    assert "restore host settings on server0" in names
    assert "restore host settings on client0" not in names
    state.servers.host_settings_applied = False
    names = [name for name, _ in perftables._CleanupSteps(spec, state, keep=False)]
    assert not [n for n in names if n.startswith("restore host settings")]


class _Leftovers:
    def __init__(self):
        self.torn_down = False

    def leftovers(self):
        return [] if self.torn_down else ["cluster pkb-r1"]

    def teardown(self):
        self.torn_down = True
        return []


def test_pkbs_teardown_finds_the_atlas_deployment_in_the_typed_state():
    deployment = _Leftovers()
    state = perftables.State(topology.Servers([], {}), atlas=deployment)
    mongobench_atlas._TeardownLeftovers(None, types.SimpleNamespace(mongobench=state))
    assert deployment.torn_down


def test_stop_signals_exactly_the_instances_by_their_pid_files(pkb_flags):
    vm = ServerVm("server0", "10.0.0.1")
    server = mongod.Server("server0", "mongod", "/w", BIN, "8.0.4", "8.0.4", "perfkit")
    insts = [mongod.NewInstance(server, i, host="10.0.0.1") for i in (0, 2)]
    mongod.Stop(vm, server, insts)
    [stop] = vm.commands()
    assert "/w/instances/mongod-0/" in stop and "/w/instances/mongod-2/" in stop
    assert "mongod-1" not in stop
