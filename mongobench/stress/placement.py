"""Placement of stress instances: NUMA binding, stress-ng memory holds, server addresses."""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from mongobench.core.split import split_evenly
from mongobench.core.units import KiB
from mongobench.remote.probes import InterfaceAddress, NumaNode, format_cpu_list
from mongobench.stress.sizing import memory_to_hold_bytes


def stress_ng_commands(
    hold_bytes: int | Mapping[int, int],
    *,
    workers: int,
    yaml_path: str,
    cpu_nodes: Collection[int] | None = None,
    timeout_s: int | None = None,
    stress_ng: str = "stress-ng",
    numactl: str = "numactl",
) -> list[list[str]]:
    """argv lists that together hold `hold_bytes` of locked memory until killed.

    `--vm-bytes` is the total of one stress-ng process, split over its `--vm` workers;
    `--vm-keep --vm-hang 0` touch it once and keep it; `--vm-locked` mlocks it so it cannot
    be swapped out. `hold_bytes` as a mapping NUMA node id -> bytes (hold_per_node) starts
    one process per node under `numactl --membind=<id>`, plus `--cpunodebind=<id>` for nodes
    in `cpu_nodes` (default: all; a memory-only node, e.g. CXL memory, has no CPUs to bind
    to), each with its own YAML file and a share of the workers. Empty when nothing needs
    holding.
    """
    if workers < 1:
        raise ValueError("workers must be >= 1")
    per_node = isinstance(hold_bytes, Mapping)
    shares = dict(sorted(hold_bytes.items())) if per_node else {None: int(hold_bytes)}
    per_node_workers = [max(1, w) for w in split_evenly(workers, len(shares))]
    cmds = []
    for (node, share), w in zip(shares.items(), per_node_workers, strict=True):
        kib = int(share) // KiB
        if kib <= 0:
            continue
        path = yaml_path
        if per_node:
            stem, dot, ext = yaml_path.rpartition(".")
            path = f"{stem}-node{node}.{ext}" if dot else f"{yaml_path}-node{node}"
        cmd = [stress_ng, "--vm", str(w), "--vm-bytes", f"{kib}k", "--vm-keep", "--vm-locked"]
        cmd += ["--vm-hang", "0", "--yaml", path]
        if timeout_s:
            cmd += ["--timeout", f"{int(timeout_s)}s"]
        if per_node:
            bind = [f"--membind={node}"]
            if cpu_nodes is None or node in cpu_nodes:
                bind.append(f"--cpunodebind={node}")
            cmd = [numactl, *bind, "--", *cmd]
        cmds.append(cmd)
    return cmds


def split_by_node_size(total: int, nodes: Sequence[NumaNode]) -> dict[int, int]:
    """`total` bytes over the nodes in proportion to their memory (evenly when a size is
    unknown); the shares sum to `total`."""
    if not nodes:
        raise ValueError("no NUMA nodes")
    sizes = [n.size_mb for n in nodes]
    if any(not s for s in sizes):
        return {n.id: b for n, b in zip(nodes, split_evenly(total, len(nodes)), strict=True)}
    whole = sum(sizes)
    out = {n.id: int(total) * n.size_mb // whole for n in nodes}
    out[nodes[0].id] += int(total) - sum(out.values())
    return out


def hold_per_node(
    usable_memory: int,
    nodes: Sequence[NumaNode],
    instance_nodes: Sequence[int],
    memory_per_instance: int,
    *,
    bound: bool,
) -> dict[int, int]:
    """What stress-ng must hold on each node (id -> bytes) while instances run on the nodes
    `instance_nodes` (one entry per running instance).

    Unbound instances take memory from any node: the total to hold is split in proportion to
    node sizes. Instances bound to their node (numactl --membind) can only use that node, so
    each node keeps exactly what its own instances are meant to have: a node with two
    instances must not be left with the memory of one and a half."""
    if not bound:
        total = memory_to_hold_bytes(usable_memory, len(instance_nodes), memory_per_instance)
        return split_by_node_size(total, nodes)
    shares = split_by_node_size(usable_memory, nodes)
    unknown = set(instance_nodes) - set(shares)
    if unknown:
        raise ValueError(f"instances on unknown NUMA node(s) {sorted(unknown)}")
    return {
        node: max(0, share - instance_nodes.count(node) * int(memory_per_instance))
        for node, share in shares.items()
    }


@dataclass(frozen=True)
class HoldPlan:
    """What stress-ng holds during a step: `hold_bytes` in one process, or per NUMA node
    (`node_bytes`: node id -> bytes, one process each, on the nodes `cpu_nodes` that have
    CPUs; `hold_bytes` is then 0)."""

    hold_bytes: int
    node_bytes: dict[int, int] | None = None
    cpu_nodes: set[int] | None = None


def hold_plan(
    usable_memory: int,
    memory_per_instance: int,
    n: int,
    *,
    nodes: Sequence[NumaNode],
    instance_nodes: Sequence[int],
    fixed_bytes: int | None = None,
    per_node: bool = False,
    bound: bool = False,
) -> HoldPlan:
    """The hold while n instances run (`instance_nodes`: the node of each instance, at least
    n): what they must not have, or `fixed_bytes` when given; per node when asked
    (`per_node`; a fixed amount is split in proportion to node sizes, a computed one by
    hold_per_node, `bound`: instances bound to their node's memory)."""
    if not per_node:
        amount = (
            fixed_bytes
            if fixed_bytes is not None
            else memory_to_hold_bytes(usable_memory, n, memory_per_instance)
        )
        return HoldPlan(amount)
    if fixed_bytes is not None:
        shares = split_by_node_size(fixed_bytes, nodes)
    else:
        shares = hold_per_node(
            usable_memory, nodes, instance_nodes[:n], memory_per_instance, bound=bound
        )
    return HoldPlan(0, shares, {node.id for node in nodes if node.cpus})


def instance_nodes(instances: int, nodes: Sequence[NumaNode]) -> list[int]:
    """NUMA node id of instance 0..instances-1: they alternate over the nodes that have CPUs
    (a memory-only node can hold no instance)."""
    cpu_nodes = [n.id for n in nodes if n.cpus]
    if not cpu_nodes:
        raise ValueError("no NUMA node with CPUs")
    return [cpu_nodes[i % len(cpu_nodes)] for i in range(instances)]


def _core_order(cpus: Sequence[int], cores: Mapping[int, tuple[int, int]] | None) -> list[int]:
    """The node's CPUs with the threads of each core next to each other (cores in order of
    their first CPU), so a contiguous share holds whole cores; in id order when the core of
    any CPU is unknown."""
    if not cores or any(c not in cores for c in cpus):
        return sorted(cpus)
    first: dict[tuple[int, int], int] = {}
    for c in sorted(cpus):
        first.setdefault(cores[c], c)
    return sorted(cpus, key=lambda c: (first[cores[c]], c))


def split_node_cpus(
    instances: int,
    nodes: Sequence[NumaNode],
    cores: Mapping[int, tuple[int, int]] | None = None,
) -> list[list[int]]:
    """CPU ids of each of `instances` instances: instance i runs on node instance_nodes()[i]
    and gets a contiguous share (sizes differ by at most one CPU) of that node's CPUs, whole
    cores first when `cores` (parse_lscpu_cores) is known. Splitting all CPU ids in id
    order instead would give an instance CPUs of two nodes on hosts that number CPUs across
    sockets (0,2,4.. on node 0) and put two instances on the two threads of the same cores
    (0-23 and 48-71 on node 0)."""
    placed = instance_nodes(instances, nodes)
    by_id = {n.id: n for n in nodes}
    groups: list[list[int]] = [[] for _ in range(instances)]
    for node in dict.fromkeys(placed):
        members = [i for i, n in enumerate(placed) if n == node]
        ordered = _core_order(by_id[node].cpus, cores)
        if len(members) > len(ordered):
            raise ValueError(
                f"cannot give {len(members)} instances their own CPUs on NUMA node {node}"
                f" ({len(ordered)} CPUs)"
            )
        start = 0
        for i, size in zip(members, split_evenly(len(ordered), len(members)), strict=True):
            groups[i] = sorted(ordered[start : start + size])
            start += size
    return groups


def numactl_prefix(
    *,
    node: int | None = None,
    cpu: str = "none",
    memory: str = "none",
    cpus: Sequence[int] | None = None,
    numactl: str = "numactl",
) -> list[str]:
    """numactl argv prefix for one instance: cpu "node" (--cpunodebind of `node`) or "cpus"
    (the given CPU ids); memory "bind" (--membind to `node`) or "interleave" (all nodes)."""
    if cpu not in ("none", "node", "cpus") or memory not in ("none", "bind", "interleave"):
        raise ValueError(f"unknown numactl placement cpu={cpu!r} memory={memory!r}")
    if node is None and (cpu == "node" or memory == "bind"):
        raise ValueError(f"cpu={cpu!r} memory={memory!r} needs the instance's NUMA node")
    args = []
    if cpu == "node":
        args.append(f"--cpunodebind={node}")
    elif cpu == "cpus":
        if not cpus:
            raise ValueError("cpu='cpus' needs the CPU ids of the instance")
        args.append("--physcpubind=" + format_cpu_list(cpus))
    if memory == "bind":
        args.append(f"--membind={node}")
    elif memory == "interleave":
        args.append("--interleave=all")
    return [numactl, *args, "--"] if args else []


def placement_prefixes(
    instances: int,
    nodes: Sequence[NumaNode],
    *,
    cpu: str = "none",
    memory: str = "none",
    cores: Mapping[int, tuple[int, int]] | None = None,
    numactl: str = "numactl",
) -> list[list[str]]:
    """numactl prefix of every instance 0..instances-1 (plan for the most instances a run may
    start, so an instance keeps its CPUs from step to step). With cpu "cpus" and memory
    "bind", each instance's memory is on the node of its CPUs."""
    if cpu == "none" and memory == "none":
        return [[] for _ in range(instances)]
    placed = instance_nodes(instances, nodes)
    groups = split_node_cpus(instances, nodes, cores) if cpu == "cpus" else None
    return [
        numactl_prefix(
            node=placed[i],
            cpu=cpu,
            memory=memory,
            cpus=groups[i] if groups else None,
            numactl=numactl,
        )
        for i in range(instances)
    ]


def _is_local(address: str, interfaces: Sequence[InterfaceAddress]) -> bool:
    ip = ipaddress.ip_address(address)
    for a in interfaces:
        if a.address == address:
            return True
        # Linux answers on the whole loopback network (127.0.0.2 too), not just 127.0.0.1
        if a.scope == "host" and ip in ipaddress.ip_network(f"{a.address}/{a.prefixlen}", False):
            return True
    return False


def resolve_server_addresses(
    specs: Sequence[str],
    *,
    internal_ips: Sequence[str],
    interfaces: Sequence[InterfaceAddress] | None = None,
) -> tuple[str, ...]:
    """The server addresses clients use, one per NIC (instance i is reached on address i mod
    count). `specs` (--mongodb_stress_server_addresses): empty = the VM's internal IP; "all" =
    every internal IP PKB knows for the VM (one per NIC on multi-NIC cloud VMs); otherwise
    IPv4 addresses or interface names (the interface's first global IPv4 address), so a
    config can name NICs before their addresses exist. With `interfaces` (the server's
    `ip -o addr`), every address must be one of the server's. IPv6 is refused: URIs and
    bindIp lists here are built for IPv4."""
    names = [str(x).strip() for x in specs if str(x).strip()]
    if not names:
        names = list(internal_ips[:1])
    elif names == ["all"]:
        names = list(internal_ips)
    if not names:
        raise ValueError("the server VM has no internal IP address")
    out: list[str] = []
    for name in names:
        try:
            ip = ipaddress.ip_address(name)
        except ValueError:
            ip = None
        if ip is None:
            if interfaces is None:
                raise ValueError(
                    f"cannot resolve interface {name!r} without the server's addresses"
                )
            found = [
                a.address
                for a in interfaces
                if a.interface == name and a.version == 4 and a.scope != "link"
            ]
            if not found:
                have = sorted({a.interface for a in interfaces})
                raise ValueError(
                    f"{name!r} is neither an IPv4 address nor an interface with one on the"
                    f" server (interfaces: {', '.join(have) or 'none'})"
                )
            address = found[0]
        elif ip.version != 4:
            raise ValueError(f"{name}: IPv6 server addresses are not supported; give IPv4 ones")
        else:
            address = str(ip)
            if interfaces is not None and not _is_local(address, interfaces):
                mine = ", ".join(f"{a.interface} {a.address}" for a in interfaces if a.version == 4)
                raise ValueError(f"{address} is not an address of the server (it has: {mine})")
        if address not in out:
            out.append(address)
    return tuple(out)
