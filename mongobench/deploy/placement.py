"""Where the members of replica sets, shards, config servers and mongos go, and their URIs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mongobench.core.shardkey import shard_collection_command
from mongobench.deploy.topology import (
    add_shard_command,
    enable_sharding_command,
    hostport,
    mongos_uri,
    replset_config,
)


@dataclass(frozen=True)
class Instance:
    role: str  # mongod (replica set member or standalone) | configsvr | shardsvr | mongos
    host: str
    port: int
    replset: str | None = None
    index: int = 0  # the instance's number on its VM (its directory)
    vm: int | None = None  # position in the planner's host list; None: not a server host

    @property
    def address(self) -> str:
        return hostport(self.host, self.port)


@dataclass(frozen=True)
class ReplicaSetPlan:
    instances: list[Instance]
    config: dict  # replSetInitiate config


@dataclass(frozen=True)
class ShardedPlan:
    instances: list[Instance]  # config servers, shard members, mongos (the start order)
    config_replset: dict  # replSetInitiate config of the config server replica set
    shard_replsets: list[dict]  # one per shard
    admin_commands: list[dict]  # run on a mongos, in order
    mongos: list[Instance]


def _allocate(host: str, base: int, taken: dict, skip: Iterable[int] = ()) -> int:
    """First port >= `base` that `host` has not used (`taken`: host -> ports, updated) and
    that is not in `skip`."""
    used = taken.setdefault(host, set())
    port = base
    while port in used or port in skip:
        port += 1
    used.add(port)
    return port


def initiation(config: dict) -> dict:
    """A replica set as the topology plan initiates it: its config, seeded by member 0."""
    return {"config": config, "seed": config["members"][0]["host"]}


def data_processes(instances: Iterable[Instance]) -> dict[str, int]:
    """Data-bearing processes (all but mongos) per host address: they share its memory."""
    counts: dict[str, int] = {}
    for inst in instances:
        if inst.role != "mongos":
            counts[inst.host] = counts.get(inst.host, 0) + 1
    return counts


def replica_set_plan(
    hosts: list[str], members: int, port: int, name: str = "rs0"
) -> ReplicaSetPlan:
    """`members` members round-robin over `hosts` (index i on hosts[i % len]); members that
    share a host address get consecutive ports from `port`."""
    placed = place_round_robin(members, hosts, port)
    instances = [
        Instance("mongod", hosts[h], p, name, index=i, vm=h) for i, (h, p) in enumerate(placed)
    ]
    config = replset_config(name, [i.address for i in instances])
    return ReplicaSetPlan(instances, config)


@dataclass(frozen=True)
class Sharding:
    """What a sharded cluster is besides its hosts: the database (enableSharding), the
    collection sharded by `shard_key` (None: each collection is sharded by whoever creates
    it), the base ports of config servers, shard members and mongos, and the replica-set
    names of the config servers and of the shards (`shard_prefix` + shard number)."""

    database: str
    collection: str | None = None
    shard_key: str | dict | None = None
    config_port: int = 27019
    shard_port: int = 27018
    mongos_port: int = 27017
    config_replset: str = "cfg"
    shard_prefix: str = "shard"


def _sharded_plan(
    config_hosts: list[tuple[str, int | None]],
    shard_hosts: list[list[tuple[str, int | None]]],
    mongos_hosts: list[tuple[str, int | None]],
    sharding: Sharding,
    taken: dict | None,
) -> ShardedPlan:
    """The one builder of sharded plans. Hosts are (address, vm position). Ports and
    instance indices are given in the order shards, config servers, mongos, from one `taken`;
    shard members never get the config server's or mongos' base port (when that differs)."""
    if not config_hosts or not shard_hosts or not all(shard_hosts) or not mongos_hosts:
        raise ValueError("need config server hosts, at least one shard and at least one mongos")
    taken = {} if taken is None else taken
    o = sharding
    config_port, shard_port, mongos_port = o.config_port, o.shard_port, o.mongos_port
    index = 0

    def place(role, placed, base, skip=(), replset=None):
        nonlocal index
        out = []
        for host, vm in placed:
            out.append(Instance(role, host, _allocate(host, base, taken, skip), replset, index, vm))
            index += 1
        return out

    shard_skip = {config_port, mongos_port} - {shard_port}
    shards = [
        place("shardsvr", hosts, shard_port, shard_skip, f"{o.shard_prefix}{i}")
        for i, hosts in enumerate(shard_hosts)
    ]
    config = place(
        "configsvr", config_hosts, config_port, {mongos_port} - {config_port}, o.config_replset
    )
    mongos = place("mongos", list(dict.fromkeys(mongos_hosts)), mongos_port)
    shard_cfgs, commands = [], []
    for members in shards:
        name, addresses = members[0].replset, [m.address for m in members]
        shard_cfgs.append(replset_config(name, addresses))
        commands.append(add_shard_command(name, addresses, name=name))
    commands.append(enable_sharding_command(o.database))
    if o.collection:  # else each collection is sharded by whoever creates it
        commands.append(shard_collection_command(f"{o.database}.{o.collection}", o.shard_key))
    return ShardedPlan(
        instances=config + [m for members in shards for m in members] + mongos,
        config_replset=replset_config(
            o.config_replset, [c.address for c in config], configsvr=True
        ),
        shard_replsets=shard_cfgs,
        admin_commands=commands,
        mongos=mongos,
    )


def sharded_cluster_plan(
    config_hosts: list[str],
    shard_hosts: list[list[str]],
    mongos_hosts: list[str],
    sharding: Sharding,
    *,
    taken: dict | None = None,
) -> ShardedPlan:
    """Everything a sharded cluster needs, as data: which process runs where, the
    replSetInitiate configs, and the mongos commands (addShard per shard,
    enableSharding, shardCollection with the experiment's key).

    shard_hosts[i] lists the hosts of shard i's replica set; one host gives a
    single-member replica set (shards cannot be standalone mongods). Each shard member
    listens on its host's first free port from shard_port (skipping the config server
    and mongos ports), so several shards can share a host.
    """
    return _sharded_plan(
        [(h, None) for h in config_hosts],
        [[(h, None) for h in hosts] for hosts in shard_hosts],
        [(h, None) for h in mongos_hosts],
        sharding,
        taken,
    )


def placed_sharded_plan(
    hosts: list[str],
    client_host: str,
    *,
    shards: int,
    shard_members: int,
    config_members: int,
    port: int,
    database: str,
) -> ShardedPlan:
    """The PKB benchmark's sharded cluster: shard members then config servers round-robin
    over `hosts` (shard s = members s*M..s*M+M-1; the config servers start again at host 0),
    one mongos on `client_host`; every process from `port` on, consecutive where they share
    a host address; no shardCollection (the engine shards per experiment)."""
    if shards < 1 or shard_members < 1 or config_members < 1 or not hosts:
        raise ValueError("need at least one shard, member, config server and host")

    def on(k):
        return (hosts[k % len(hosts)], k % len(hosts))

    shard_hosts = [
        [on(k) for k in range(s * shard_members, (s + 1) * shard_members)] for s in range(shards)
    ]
    return _sharded_plan(
        [on(j) for j in range(config_members)],
        shard_hosts,
        [(client_host, None)],
        Sharding(database, config_port=port, shard_port=port, mongos_port=port),
        None,
    )


def config_db_string(plan: ShardedPlan) -> str:
    """sharding.configDB for mongos: 'cfg/h1:27019,h2:27019,h3:27019'."""
    return config_db_string_of(plan.config_replset)


def config_db_string_of(config_replset: dict) -> str:
    members = [m["host"] for m in config_replset["members"]]
    return f"{config_replset['_id']}/{','.join(members)}"


def mongos_placement(placement: str, client_hosts: list[str], server_hosts: list[str]) -> list[str]:
    """Where mongos runs: 'client' = one per client VM (each client uses its own),
    'server' = one per server VM (clients share them)."""
    if placement == "client":
        hosts = client_hosts
    elif placement == "server":
        hosts = server_hosts
    else:
        raise ValueError(f"mongos placement must be 'client' or 'server', not {placement!r}")
    if not hosts:
        raise ValueError(f"no {placement} hosts to place mongos on")
    return list(dict.fromkeys(hosts))


def client_uri_for(
    client_host: str, placement: str, mongos: list[str], mongos_port: int = 27017, **options
) -> str:
    """URI one client VM uses: its local mongos ('client' placement), else all of them."""
    if placement == "client":
        return mongos_uri([hostport("127.0.0.1", mongos_port)], **options)
    return mongos_uri([hostport(h, mongos_port) for h in mongos], **options)


# ---- placement and start-up plans ------------------------------------------------


def place_round_robin(
    count: int, hosts: list[str], base_port: int, taken: dict | None = None
) -> list[tuple[int, int]]:
    """(host index, port) of `count` processes spread round-robin over `hosts`.

    Processes that share a host address (several members per VM, or static VMs
    that are one machine) get consecutive free ports from `base_port`; `taken`
    (host -> set of ports, updated in place) carries ports used by earlier calls.
    """
    if count < 1 or not hosts:
        raise ValueError("need at least one process and one host")
    taken = {} if taken is None else taken
    return [
        (i % len(hosts), _allocate(hosts[i % len(hosts)], base_port, taken)) for i in range(count)
    ]


def default_cache_gb(total_memory_kb: int, data_processes: int = 1) -> float:
    """mongod's own WiredTiger default, max(50 % of (RAM - 1 GB), 0.25 GB), shared
    between the data-bearing processes of one host (two decimals)."""
    gb = total_memory_kb / 1024 / 1024
    return round(max(0.5 * (gb - 1) / max(1, data_processes), 0.25), 2)
