"""Server topologies on PKB VMs for mongodb_perftables: a standalone mongod, a replica set,
or a sharded cluster (config and shard replica sets on the servers VMs, a mongos on the
client VM), started with `mongobench_mongod` and initiated by the engine on the client VM.

The plans (which instance on which VM, ports, replica-set configs, admin commands) are the
engine's (`mongobench.deploy.placement`); this module only carries them out over ssh. It
installs nothing, so it lives here, not in linux_packages/. What it starts is recorded in a
`Servers` (the benchmark's state keeps it: PKB pickles it between stages, Cleanup reads it).
"""

import dataclasses
import json
import logging
import os

from perfkitbenchmarker import errors

from mongobench.deploy import placement, topology
from mongobench_pkb import mongod as mongobench_mongod
from mongobench_pkb import vm as mongobench_vm


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the benchmark's flags say about the servers to start."""

    port: int
    cache_gb: float | None
    host_settings: bool
    replset_members: int
    shards: int
    shard_members: int
    config_members: int
    write_concern: str
    database: str
    topology_timeout: int


@dataclasses.dataclass
class Servers:
    """The run's server side: the `servers` VMs and what starting them recorded (the sample
    `metadata`, which the benchmark starts with its deployment kind; each VM's data directory,
    for the OS sampler; whether host settings were applied, for Cleanup to restore)."""

    vms: list
    metadata: dict
    data_paths: dict = dataclasses.field(default_factory=dict)  # VM name -> data directory
    host_settings_applied: bool = False
    allocator_checked: bool = False
    sharded: bool = False


def _DeployServers(vms, record, settings):
    """mongobench_mongod on every VM that runs server processes; host settings applied."""
    servers = {}
    for vm in vms:
        vm.Install("mongobench_mongod")
        server = mongobench_mongod.Deploy(vm)
        if vm in record.vms:
            record.metadata.update(
                mongobench_mongod.DataFilesystem(vm, server, server.instances_dir)
            )
        if settings.host_settings and server.kind == "mongod" and vm in record.vms:
            record.metadata.update(
                mongobench_mongod.ApplyHostSettings(vm, server, server.instances_dir)
            )
            record.host_settings_applied = True
        servers[vm.name] = server
    record.metadata.update(next(iter(servers.values())).metadata())
    return servers


def _Start(vm, server, settings, planned, data_processes, config_db=None):
    """Starts the planned instance (a mongobench.deploy.placement.Instance) on `vm`."""
    inst = mongobench_mongod.NewInstance(
        server,
        planned.index,
        host=vm.internal_ip,
        port=planned.port,
        role=planned.role,
        replset=planned.replset,
    )
    cache = settings.cache_gb
    if cache is None and planned.role != "mongos" and server.kind == "mongod":
        cache = placement.default_cache_gb(vm.total_memory_kb, data_processes)
    config = mongobench_mongod.Config(server, inst, cache_gb=cache, config_db=config_db)
    mongobench_mongod.Start(vm, server, inst, config)
    return inst


def _CheckAllocator(vm, server, inst, record):
    """The first data-bearing mongod's allocator, verified and recorded once per run."""
    if not record.allocator_checked and inst.role != "mongos":
        mongobench_mongod.CheckAllocator(vm, server, inst, record.metadata)
        record.allocator_checked = True


def StartStandalone(record, settings):
    """One mongod (or the stand-in) on the servers VM; returns its URI."""
    if len(record.vms) != 1:
        raise errors.Config.InvalidValue(
            f"deployment standalone needs exactly one servers VM, not {len(record.vms)}"
        )
    vm = record.vms[0]
    server = _DeployServers([vm], record, settings)[vm.name]
    inst = _Start(
        vm, server, settings, placement.Instance("mongod", vm.internal_ip, settings.port), 1
    )
    _CheckAllocator(vm, server, inst, record)
    record.data_paths = {vm.name: inst.paths.dbpath}
    record.metadata.update(topology="standalone")
    return inst.uri(database="")


def _StartPlanned(instances, client, servers, record, settings, config_db=None):
    """Starts each planned instance on its VM (a server VM by position, else the client)."""
    per_host = placement.data_processes(instances)
    for inst in instances:
        vm = client if inst.vm is None else record.vms[inst.vm]
        data = 0 if inst.role == "mongos" else per_host[inst.host]
        started = _Start(vm, servers[vm.name], settings, inst, data, config_db)
        if inst.role in ("mongod", "shardsvr"):
            record.data_paths.setdefault(vm.name, started.paths.dbpath)
            _CheckAllocator(vm, servers[vm.name], started, record)


def StartReplicaSet(record, client, workdir, settings):
    """The seed's replica set: members over the servers VMs, initiated from the client (the
    engine in `workdir` there)."""
    servers = _DeployServers(record.vms, record, settings)
    hosts = [vm.internal_ip for vm in record.vms]
    plan = placement.replica_set_plan(hosts, settings.replset_members, settings.port, "rs0")
    _StartPlanned(plan.instances, client, servers, record, settings)
    _RunPlan(client, workdir, settings, {"replsets": [placement.initiation(plan.config)]})
    addresses = [inst.address for inst in plan.instances]
    record.metadata.update(
        topology="replset", replset_members=len(addresses), write_concern=settings.write_concern
    )
    return topology.replica_set_uri(addresses, "rs0", w=settings.write_concern)


def StartSharded(record, client, workdir, settings):
    """Config server replica set and shard replica sets on the servers VMs, a mongos on
    the client VM; collections are sharded by the engine as experiments create them."""
    plan = placement.placed_sharded_plan(
        [vm.internal_ip for vm in record.vms],
        client.internal_ip,
        shards=settings.shards,
        shard_members=settings.shard_members,
        config_members=settings.config_members,
        port=settings.port,
        database=settings.database,
    )
    servers = _DeployServers([*record.vms, client], record, settings)
    _StartPlanned(plan.instances[: -len(plan.mongos)], client, servers, record, settings)
    replsets = [placement.initiation(c) for c in [plan.config_replset, *plan.shard_replsets]]
    _RunPlan(client, workdir, settings, {"replsets": replsets})
    config_db = placement.config_db_string_of(plan.config_replset)
    _StartPlanned(plan.mongos, client, servers, record, settings, config_db)
    mongos = plan.mongos[0].address
    _RunPlan(client, workdir, settings, {"mongos": mongos, "admin_commands": plan.admin_commands})
    record.sharded = True
    record.metadata.update(
        topology="sharded",
        shards=settings.shards,
        shard_members=settings.shard_members,
        config_members=settings.config_members,
        mongos="client",
        write_concern=settings.write_concern,
    )
    return topology.mongos_uri([mongos], w=settings.write_concern)


def _RunPlan(client, workdir, settings, plan):
    """Initiation and admin commands run by the engine on the client VM (pymongo is there)."""
    remote = os.path.join(workdir, "topology-plan.json")
    mongobench_vm.WriteRemoteFile(client, remote, json.dumps(plan))
    out, _ = client.RobustRemoteCommand(
        f"cd {workdir} && venv/bin/python -m mongobench topology up --plan {remote}"
        f" --timeout {settings.topology_timeout}"
    )
    logging.info("mongodb_perftables: topology %s", (out.strip().splitlines() or [""])[-1])
