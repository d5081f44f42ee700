"""Where the members of replica sets, shards, config servers and mongos go, and their URIs."""

from __future__ import annotations

from dataclasses import dataclass

from mongobench.deploy.topology import (
    add_shard_command,
    enable_sharding_command,
    hostport,
    mongos_uri,
    replset_config,
    shard_collection_command,
)


@dataclass(frozen=True)
class Instance:
    role: str  # configsvr | shardsvr | mongos | replica | standalone
    host: str
    port: int
    replset: str | None = None

    @property
    def address(self) -> str:
        return hostport(self.host, self.port)


@dataclass(frozen=True)
class ShardedPlan:
    instances: list[Instance]
    config_replset: dict  # replSetInitiate config of the config server replica set
    shard_replsets: list[dict]  # one per shard
    admin_commands: list[dict]  # run on a mongos, in order
    mongos: list[Instance]


def sharded_cluster_plan(
    config_hosts: list[str],
    shard_hosts: list[list[str]],
    mongos_hosts: list[str],
    database: str,
    collection: str | None,
    shard_key: str | dict | None,
    config_port: int = 27019,
    shard_port: int = 27018,
    mongos_port: int = 27017,
    config_replset: str = "cfg",
    shard_prefix: str = "shard",
) -> ShardedPlan:
    """Everything a sharded cluster needs, as data: which process runs where, the
    replSetInitiate configs, and the mongos commands (addShard per shard,
    enableSharding, shardCollection with the experiment's key).

    shard_hosts[i] lists the hosts of shard i's replica set; one host gives a
    single-member replica set (shards cannot be standalone mongods). Shard i
    listens on the i-th free port from shard_port (skipping the config server
    and mongos ports), so several shards can share a host.
    """
    if not config_hosts or not shard_hosts or not mongos_hosts:
        raise ValueError("need config server hosts, at least one shard and at least one mongos")
    cfg_members = [hostport(h, config_port) for h in config_hosts]
    instances = [Instance("configsvr", h, config_port, config_replset) for h in config_hosts]
    shard_cfgs, commands = [], []
    # shard i gets its own port (shards may share hosts), never the config or mongos port
    taken = {config_port, mongos_port}
    ports = []
    port = shard_port
    while len(ports) < len(shard_hosts):
        if port not in taken:
            ports.append(port)
        port += 1
    for i, hosts in enumerate(shard_hosts):
        name = f"{shard_prefix}{i}"
        port = ports[i]
        instances += [Instance("shardsvr", h, port, name) for h in hosts]
        members = [hostport(h, port) for h in hosts]
        shard_cfgs.append(replset_config(name, members))
        commands.append(add_shard_command(name, members, name=name))
    mongos = [Instance("mongos", h, mongos_port) for h in dict.fromkeys(mongos_hosts)]
    commands.append(enable_sharding_command(database))
    if collection:  # else each collection is sharded by whoever creates it
        commands.append(shard_collection_command(f"{database}.{collection}", shard_key))
    return ShardedPlan(
        instances=instances + mongos,
        config_replset=replset_config(config_replset, cfg_members, configsvr=True),
        shard_replsets=shard_cfgs,
        admin_commands=commands,
        mongos=mongos,
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
    out = []
    for i in range(count):
        h = i % len(hosts)
        used = taken.setdefault(hosts[h], set())
        port = base_port
        while port in used:
            port += 1
        used.add(port)
        out.append((h, port))
    return out


def default_cache_gb(total_memory_kb: int, data_processes: int = 1) -> float:
    """mongod's own WiredTiger default, max(50 % of (RAM - 1 GB), 0.25 GB), shared
    between the data-bearing processes of one host (two decimals)."""
    gb = total_memory_kb / 1024 / 1024
    return round(max(0.5 * (gb - 1) / max(1, data_processes), 0.25), 2)
