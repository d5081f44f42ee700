"""mongodb_stress engine: sizing, stress-ng, mongod instances, step plans, search and KPIs.

Pure functions (no PKB, no I/O): the PKB module runs the commands and files they return.
Step n runs mongod instances 0..n-1 on the server and n YCSB processes, one per instance,
spread round-robin over the client VMs. Sizing follows Intel's mongodb_stress benchmark;
its weaknesses are fixed here: data is loaded into an instance once and reused by later
steps (the anchor reloaded every instance at every step: N(N+1)/2 loads for N steps), every
YCSB process has its own output and histogram files, and a failed process, a missing p99 or
a dead mongod is a StepError rather than a KeyError or a silent zero.
"""

from __future__ import annotations

import ipaddress
import math
import random
import re
import shlex
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from mongobench import mongod, ycsb

KiB = 1024
GiB = 1024**3

FIRST_PORT = 27017
FIELD_COUNT = 10
FIELD_LENGTH = 100
RECORD_OVERHEAD_BYTES = 256  # the anchor's rough per-record overhead on top of the fields
OS_RESERVE_BYTES = 1_000_000 * KiB  # the anchor leaves 1,000,000 KB to the OS
TARGET_PER_PROCESS = 25_000  # ops/s offered by each YCSB process
RUN_THREADS = 10
LOAD_THREADS = 30
READ_P99_SLA_MS = 3.0
SEARCHES = ("linear", "bounded")

MAX_METRIC = "Maximum Throughput"
SLA_METRIC = "Maximum Throughput for Latency SLA"
THROUGHPUT_UNIT = "ops/sec"


class StepError(RuntimeError):
    """A step whose measurement cannot be trusted: failed YCSB process, missing p99, dead mongod."""


# ----------------------------------------------------------------------------- sizing


def usable_memory_bytes(
    total_memory_bytes: int, *, os_reserve_bytes: int = OS_RESERVE_BYTES
) -> int:
    return max(0, int(total_memory_bytes) - int(os_reserve_bytes))


def estimated_instances(vcpus: int, *, ceiling: int = 16, scaling: float = 0.032) -> int:
    """The anchor's guess of how many instances a server of `vcpus` carries:
    ceil(ceiling x (1 - e^(-scaling x vCPU))), at least 1."""
    if vcpus < 1:
        raise ValueError(f"vcpus must be >= 1, got {vcpus}")
    return max(1, math.ceil(ceiling * (1.0 - math.exp(-scaling * vcpus))))


def records_per_instance(
    usable_memory: int,
    vcpus: int,
    *,
    record_bytes: int = FIELD_COUNT * FIELD_LENGTH + RECORD_OVERHEAD_BYTES,
    min_records: int = 2_000_000,
    max_records: int = 20_000_000,
    round_to: int = 1_000_000,
    ceiling: int = 16,
    scaling: float = 0.032,
) -> int:
    """Usable memory / estimated instances / bytes per record, rounded to `round_to` (half up)
    and clamped to [min_records, max_records]."""
    raw = (
        usable_memory / estimated_instances(vcpus, ceiling=ceiling, scaling=scaling) / record_bytes
    )
    rounded = math.floor(raw / round_to + 0.5) * round_to
    return int(min(max(rounded, min_records), max_records))


def database_bytes(
    records: int, *, field_count: int = FIELD_COUNT, field_length: int = FIELD_LENGTH
) -> int:
    return int(records) * field_count * field_length


def cache_size_gb(
    records: int,
    *,
    fraction: float = 0.25,
    min_gb: float = 1.0,
    field_count: int = FIELD_COUNT,
    field_length: int = FIELD_LENGTH,
) -> float:
    """WiredTiger cache (GiB, 2 decimals): `fraction` of the database, at least `min_gb`, so the
    data does not fit in cache and reads reach the disk."""
    db = database_bytes(records, field_count=field_count, field_length=field_length)
    return max(float(min_gb), round(fraction * db / GiB, 2))


def memory_per_instance_bytes(
    records: int,
    cache_gb: float,
    *,
    process_bytes: int = GiB,
    bytes_per_record: int = 256,
    file_cache_bytes: int | None = None,
) -> int:
    """cache + process overhead + per-record bookkeeping + file cache (default: = cache)."""
    cache = int(cache_gb * GiB)
    file_cache = cache if file_cache_bytes is None else int(file_cache_bytes)
    return cache + int(process_bytes) + int(records) * int(bytes_per_record) + file_cache


def max_instances(
    usable_memory: int,
    disk_free_bytes: int,
    memory_per_instance: int,
    disk_per_instance: int,
    cap: int | None = None,
) -> int:
    """Instances that fit in memory and on disk, optionally capped."""
    fits = min(usable_memory // memory_per_instance, disk_free_bytes // disk_per_instance)
    return int(min(fits, cap) if cap else fits)


@dataclass(frozen=True)
class Sizing:
    usable_memory: int
    records: int
    cache_gb: float
    memory_per_instance: int
    disk_per_instance: int
    fits_memory: int
    fits_disk: int
    max_instances: int

    def metadata(self) -> dict:
        return {
            "records_per_instance": self.records,
            "wiredtiger_cache_gb": self.cache_gb,
            "memory_per_instance_gib": round(self.memory_per_instance / GiB, 2),
            "disk_per_instance_gib": round(self.disk_per_instance / GiB, 2),
            "usable_memory_gib": round(self.usable_memory / GiB, 2),
            "instances_fit_memory": self.fits_memory,
            "instances_fit_disk": self.fits_disk,
            "max_instances": self.max_instances,
        }


def plan_sizing(
    total_memory_bytes: int,
    vcpus: int,
    disk_free_bytes: int,
    *,
    records: int | None = None,
    cache_gb: float | None = None,
    cache_fraction: float = 0.25,
    min_cache_gb: float = 1.0,
    max_instances_cap: int | None = None,
    os_reserve_bytes: int = OS_RESERVE_BYTES,
    field_count: int = FIELD_COUNT,
    field_length: int = FIELD_LENGTH,
    record_overhead_bytes: int = RECORD_OVERHEAD_BYTES,
    min_records: int = 2_000_000,
    max_records: int = 20_000_000,
    process_bytes: int = GiB,
    bookkeeping_bytes_per_record: int = 256,
    disk_bytes_per_record: int | None = None,
    ceiling: int = 16,
    scaling: float = 0.032,
) -> Sizing:
    """Everything the anchor derives from the server's memory, vCPUs and free disk; any value
    can be forced (`records`, `cache_gb`) or its constant changed. Raises ValueError when not
    even one instance fits."""
    usable = usable_memory_bytes(total_memory_bytes, os_reserve_bytes=os_reserve_bytes)
    if records is None:
        records = records_per_instance(
            usable,
            vcpus,
            record_bytes=field_count * field_length + record_overhead_bytes,
            min_records=min_records,
            max_records=max_records,
            ceiling=ceiling,
            scaling=scaling,
        )
    if cache_gb is None:
        cache_gb = cache_size_gb(
            records,
            fraction=cache_fraction,
            min_gb=min_cache_gb,
            field_count=field_count,
            field_length=field_length,
        )
    mem = memory_per_instance_bytes(
        records,
        cache_gb,
        process_bytes=process_bytes,
        bytes_per_record=bookkeeping_bytes_per_record,
    )
    per_record = (
        field_count * field_length if disk_bytes_per_record is None else disk_bytes_per_record
    )
    disk = int(records) * per_record
    fits_mem, fits_disk = usable // mem, int(disk_free_bytes) // disk
    n = max_instances(usable, int(disk_free_bytes), mem, disk, max_instances_cap)
    if n < 1:
        raise ValueError(
            f"no mongod instance fits: each needs {mem / GiB:.1f} GiB of memory "
            f"({usable / GiB:.1f} GiB usable) and {disk / GiB:.1f} GiB of disk "
            f"({disk_free_bytes / GiB:.1f} GiB free) for {records} records; lower the record count"
        )
    return Sizing(
        usable, int(records), float(cache_gb), mem, disk, int(fits_mem), int(fits_disk), n
    )


# ----------------------------------------------------------------------------- stress-ng


def memory_to_hold_bytes(usable_memory: int, instances: int, memory_per_instance: int) -> int:
    """What stress-ng must hold so that n instances get only their share (never negative)."""
    return max(0, int(usable_memory) - int(instances) * int(memory_per_instance))


def split_evenly(total: int, parts: int) -> list[int]:
    """`total` in `parts` integers that differ by at most one and sum to `total`."""
    if parts < 1:
        raise ValueError("parts must be >= 1")
    q, r = divmod(int(total), parts)
    return [q + (1 if i < r else 0) for i in range(parts)]


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


# ----------------------------------------------------------------------------- mongod instances


def instance_port(index: int, first_port: int = FIRST_PORT) -> int:
    return first_port + index


@dataclass(frozen=True)
class InstancePaths:
    root: str
    dbpath: str
    log: str
    config: str
    pid_file: str
    stdout: str


def instance_paths(index: int, base_dir: str) -> InstancePaths:
    root = f"{base_dir.rstrip('/')}/mongod-{index}"
    return InstancePaths(
        root=root,
        dbpath=f"{root}/data",
        log=f"{root}/mongod.log",
        config=f"{root}/mongod.conf",
        pid_file=f"{root}/mongod.pid",
        stdout=f"{root}/mongod.stdout",
    )


def instance_config(
    index: int,
    *,
    base_dir: str,
    cache_gb: float,
    version: str,
    bind_ip: str = "127.0.0.1",
    first_port: int = FIRST_PORT,
    tls_certificate_key_file: str | None = None,
    extra: Mapping | None = None,
) -> str:
    """mongod YAML for instance `index`: port first_port+index, its own dbPath and log, the
    WiredTiger cache, valid for `version` (no storage.journal.enabled, gone since 6.1; no
    fork, the runner tracks PIDs). TLS only (requireTLS) with a certificate-key file when
    given."""
    paths = instance_paths(index, base_dir)
    tls = mongod.tls_settings(tls_certificate_key_file) if tls_certificate_key_file else None
    config = mongod.mongod_config(
        index,
        instance_port(index, first_port),
        paths.dbpath,
        paths.log,
        cache_gb,
        bind_ip,
        version=version,
        extra=dict(extra) if extra else None,
        tls=tls,
    )
    return mongod.render_config(config, index)


@dataclass(frozen=True)
class NumaNode:
    """A NUMA node as `numactl --hardware` lists it: its id, CPUs (none for a memory-only
    node such as CXL memory) and memory size in MB (None when unknown)."""

    id: int
    cpus: tuple[int, ...]
    size_mb: int | None = None


_NUMA_LINE = re.compile(r"^node\s+(\d+)\s+(cpus|size):\s*(.*?)\s*$")


def parse_numactl_hardware(text: str) -> tuple[NumaNode, ...]:
    """Nodes from `numactl --hardware` (node ids as the kernel numbers them: not always
    0..n-1). Empty when the host has no NUMA ("No NUMA available on this system")."""
    cpus: dict[int, tuple[int, ...]] = {}
    sizes: dict[int, int] = {}
    for line in text.splitlines():
        m = _NUMA_LINE.match(line.strip())
        if not m:
            continue
        node, what, value = int(m[1]), m[2], m[3]
        if what == "cpus":
            cpus[node] = tuple(int(c) for c in value.split())
        else:
            size = re.fullmatch(r"(\d+)\s*MB", value)
            if size:
                sizes[node] = int(size[1])
    return tuple(NumaNode(n, cpus[n], sizes.get(n)) for n in sorted(cpus))


def parse_lscpu_cores(text: str) -> dict[int, tuple[int, int]]:
    """CPU id -> (socket, core) from `lscpu -p=CPU,CORE,SOCKET` (or plain `lscpu -p`, whose
    first columns are CPU,Core,Socket): the threads of one core share the pair. CPUs whose
    core is unknown ("-") are left out."""
    out = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split(",")
        if len(cols) >= 3 and cols[0].isdigit() and cols[1].isdigit() and cols[2].isdigit():
            out[int(cols[0])] = (int(cols[2]), int(cols[1]))
    return out


def format_cpu_list(cpus: Sequence[int]) -> str:
    """[0, 1, 2, 3, 8, 10, 11] -> '0-3,8,10-11' (the kernel's and numactl's list syntax)."""
    ids = sorted(set(cpus))
    parts, k = [], 0
    while k < len(ids):
        j = k
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[k]) if j == k else f"{ids[k]}-{ids[j]}")
        k = j + 1
    return ",".join(parts)


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


# ----------------------------------------------------------------------------- server addresses


@dataclass(frozen=True)
class InterfaceAddress:
    """One address of `ip -o addr show`: interface, address, prefix length, scope."""

    interface: str
    address: str
    prefixlen: int
    scope: str

    @property
    def version(self) -> int:
        return ipaddress.ip_address(self.address).version


_IP_ADDR_LINE = re.compile(
    r"^\d+:\s+(?P<ifname>[^\s@]+)(?:@\S+)?\s+inet6?\s+(?P<addr>[0-9A-Fa-f.:]+)/(?P<len>\d+)"
    r".*?\bscope\s+(?P<scope>\S+)"
)


def parse_ip_addr(text: str) -> list[InterfaceAddress]:
    """Addresses from `ip -o addr show` (one line per address, IPv4 and IPv6)."""
    out = []
    for line in text.splitlines():
        m = _IP_ADDR_LINE.match(line.strip())
        if m:
            out.append(InterfaceAddress(m["ifname"], m["addr"], int(m["len"]), m["scope"]))
    return out


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


# ----------------------------------------------------------------------------- step plans


@dataclass(frozen=True)
class YcsbProcess:
    """One YCSB process: its instance, the client VM (index) that runs it, its key range and
    its file stem (`<stem>.properties`, `.out`, `.err`, `<stem>-<OP>.hdr`), unique per run."""

    phase: str  # "load" or "run"
    instance: int
    client: int
    host: str
    port: int
    insertstart: int
    insertcount: int
    recordcount: int
    stem: str

    def uri(self, options: str = "") -> str:
        return f"mongodb://{self.host}:{self.port}/ycsb" + (f"?{options}" if options else "")


def _url(proc: YcsbProcess, url: str | None, urlfile: str | None, tls_ca_file: str | None):
    """The process's own URI unless one is given; tls=true with a CA (the binding then trusts
    that CA only and checks that the certificate names proc.host)."""
    if url or urlfile:
        return url
    return proc.uri("tls=true" if tls_ca_file else "")


@dataclass(frozen=True)
class StepPlan:
    step: int  # = number of instances and of YCSB run processes
    instances: tuple[int, ...]
    load: tuple[YcsbProcess, ...]  # instances not loaded yet, loaded in parallel before the step
    run: tuple[YcsbProcess, ...]

    @property
    def clients_used(self) -> int:
        return len({p.client for p in self.run})


def _process(phase, instance, client, hosts, records, first_port, stem) -> YcsbProcess:
    return YcsbProcess(
        phase=phase,
        instance=instance,
        client=client,
        host=hosts[instance % len(hosts)],
        port=instance_port(instance, first_port),
        insertstart=instance * records,
        insertcount=records,
        recordcount=(instance + 1) * records,
        stem=stem,
    )


def plan_step(
    n: int,
    *,
    loaded: Collection[int],
    clients: int,
    records: int,
    hosts: Sequence[str],
    first_port: int = FIRST_PORT,
) -> StepPlan:
    """Step n: instances 0..n-1, each driven by its own YCSB process; process i runs on client
    VM i mod `clients`. Instances missing from `loaded` get a load process first (spread over
    the clients the same way). `hosts` are the server's addresses (several NICs: instance i
    is reached on hosts[i mod len])."""
    if n < 1 or clients < 1 or records < 1 or not hosts:
        raise ValueError("need n >= 1, clients >= 1, records >= 1 and at least one host")
    todo = [i for i in range(n) if i not in set(loaded)]
    loads = tuple(
        _process("load", i, j % clients, hosts, records, first_port, f"load-i{i:03d}")
        for j, i in enumerate(todo)
    )
    runs = tuple(
        _process("run", i, i % clients, hosts, records, first_port, f"step{n:03d}-i{i:03d}")
        for i in range(n)
    )
    return StepPlan(step=n, instances=tuple(range(n)), load=loads, run=runs)


def run_properties(
    proc: YcsbProcess,
    *,
    directory: str,
    duration_s: int,
    target: float | None = TARGET_PER_PROCESS,
    threads: int = RUN_THREADS,
    url: str | None = None,
    urlfile: str | None = None,
    histograms: bool = False,
    tls_ca_file: str | None = None,
    extra: Mapping | None = None,
) -> str:
    """90 % read / 10 % update, zipfian, 1 KB records, on the process's own key range, ended
    by `duration_s`. With `histograms`, HdrHistogram logs go to `<directory>/<stem>-<OP>.hdr`
    (step_result then merges them exactly); that needs HdrHistogram >= 2.1.10 on the YCSB
    classpath: YCSB 0.17's 2.1.4 needs JAXB, absent from Java 11+, and the run fails.
    With `tls_ca_file` (the CA certificate on the client VM) the process connects with TLS."""
    return ycsb.workload_properties(
        recordcount=proc.recordcount,
        insertstart=proc.insertstart,
        insertcount=proc.insertcount,
        operationcount=ycsb.MAX_OPERATION_COUNT,
        readproportion=0.9,
        updateproportion=0.1,
        requestdistribution="zipfian",
        target=target,
        threadcount=threads,
        maxexecutiontime=duration_s,
        url=_url(proc, url, urlfile, tls_ca_file),
        urlfile=urlfile,
        histogram_prefix=f"{directory.rstrip('/')}/{proc.stem}-" if histograms else None,
        tls_ca_file=tls_ca_file,
        extra=extra,
    )


def load_properties(
    proc: YcsbProcess,
    *,
    threads: int = LOAD_THREADS,
    batchsize: int | None = None,
    url: str | None = None,
    urlfile: str | None = None,
    tls_ca_file: str | None = None,
    extra: Mapping | None = None,
) -> str:
    """Inserts the instance's key range [insertstart, insertstart + records), unthrottled
    (with TLS when `tls_ca_file` is given, as run_properties)."""
    return ycsb.workload_properties(
        recordcount=proc.recordcount,
        insertstart=proc.insertstart,
        insertcount=proc.insertcount,
        operationcount=proc.insertcount,
        threadcount=threads,
        batchsize=batchsize,
        url=_url(proc, url, urlfile, tls_ca_file),
        urlfile=urlfile,
        tls_ca_file=tls_ca_file,
        extra=extra,
    )


# ----------------------------------------------------------------------------- step results


@dataclass(frozen=True)
class ProcessOutput:
    """What one YCSB run process left: exit code, stdout+stderr, optional `.hdr` logs by op."""

    instance: int
    client: int
    returncode: int | None
    output: str
    histograms: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StepResult:
    instances: int
    throughput: float  # ops/s, summed over processes
    read_p99_ms: float | None
    update_p99_ms: float | None = None
    clients: int = 1
    processes: int = 1
    operations: int = 0
    p99_source: str = ""
    process_throughputs: tuple[float, ...] = ()

    def metadata(self) -> dict:
        return {
            "instances": self.instances,
            "clients": self.clients,
            "ycsb_processes": self.processes,
            "operations": self.operations,
            "p99_read_latency_ms": self.read_p99_ms,
            "p99_update_latency_ms": self.update_p99_ms,
            "p99_source": self.p99_source,
        }


def _merged_p99(outputs: Sequence[ProcessOutput], op: str) -> float | None:
    texts = [o.histograms[op] for o in outputs if op in o.histograms]
    if len(texts) != len(outputs):
        return None
    try:
        return ycsb.histogram_percentile_ms(ycsb.merge_histogram_logs(texts), 99.0)
    except ValueError:  # damaged log: fall back to the printed per-process values
        return None


def step_result(
    n: int,
    outputs: Sequence[ProcessOutput],
    *,
    dead_instances: Mapping[int, str] | Collection[int] = (),
    required_ops: Sequence[str] = ("READ", "UPDATE"),
    first_port: int = FIRST_PORT,
) -> StepResult:
    """Combines the step's YCSB outputs; raises StepError naming the process or instance.

    Throughput is the sum over processes. p99 per op is exact over all processes when every
    process supplied its histogram log for that op, otherwise the largest per-process p99 (an
    upper bound; `p99_source` says which). NOT_FOUND reads mean an instance lacks its data.
    """
    if dead_instances:
        detail = dead_instances if isinstance(dead_instances, Mapping) else {}
        names = ", ".join(
            f"{i} (port {instance_port(i, first_port)}{': ' + detail[i] if i in detail else ''})"
            for i in sorted(dead_instances)
        )
        raise StepError(f"step {n}: mongod instance(s) not running after the step: {names}")
    if sorted(o.instance for o in outputs) != list(range(n)):
        got = sorted(o.instance for o in outputs)
        raise StepError(f"step {n}: expected one YCSB output per instance 0..{n - 1}, got {got}")
    parsed = []
    for o in outputs:
        where = f"step {n}: YCSB process for instance {o.instance} on client {o.client}"
        if o.returncode != 0:
            tail = "\n".join(o.output.strip().splitlines()[-5:])
            raise StepError(f"{where} exited with {o.returncode}; output ends:\n{tail}")
        try:
            res = ycsb.parse_output(o.output, required_ops=required_ops)
        except ycsb.YcsbError as exc:
            raise StepError(f"{where}: {exc}") from exc
        if res.not_found:
            raise StepError(
                f"{where}: {res.not_found} operations found no document; instance "
                f"{o.instance} lacks (part of) its data"
            )
        parsed.append(res)

    def p99(op: str) -> tuple[float | None, str]:
        merged = _merged_p99(outputs, op)
        if merged is not None:
            return merged, "merged histograms"
        values = [r.p99_ms(op) for r in parsed]
        if any(v is None for v in values):
            return None, "missing"
        return max(values), "max over processes"

    read, source = p99("READ")
    update = p99("UPDATE")[0] if all("UPDATE" in r.ops for r in parsed) else None
    if read is None:
        raise StepError(f"step {n}: no READ p99 latency in the YCSB outputs")
    return StepResult(
        instances=n,
        throughput=sum(r.throughput for r in parsed),
        read_p99_ms=read,
        update_p99_ms=update,
        clients=len({o.client for o in outputs}),
        processes=len(outputs),
        operations=sum(r.operations for r in parsed),
        p99_source=source,
        process_throughputs=tuple(r.throughput for r in parsed),
    )


def load_result(proc: YcsbProcess, returncode: int | None, output: str) -> ycsb.YcsbResult:
    """Checks one load process: exit status 0, no failure in its output, and exactly its key
    range inserted (a short load would make later reads NOT_FOUND). Raises StepError."""
    last = proc.insertstart + proc.insertcount - 1
    where = (
        f"loading instance {proc.instance} (port {proc.port}, keys {proc.insertstart}..{last}) "
        f"from client {proc.client}"
    )
    if returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-5:])
        raise StepError(f"{where}: YCSB exited with {returncode}; output ends:\n{tail}")
    try:
        res = ycsb.parse_output(output, required_ops=["INSERT"], required_percentiles=())
    except ycsb.YcsbError as exc:
        raise StepError(f"{where}: {exc}") from exc
    done = res.ops["INSERT"].operations
    if done != proc.insertcount:
        raise StepError(f"{where}: {done} records inserted, expected {proc.insertcount}")
    return res


# ----------------------------------------------------------------------------- search


def anchor_should_stop(throughputs: Sequence[float], min_steps: int = 3) -> bool:
    """The anchor's rule: after at least `min_steps` steps, stop when the best so far is
    strictly greater than both of the last two."""
    if len(throughputs) < min_steps:
        return False
    best = max(throughputs)
    return best > throughputs[-1] and best > throughputs[-2]


def next_step(
    history: Sequence[StepResult],
    max_instances: int,
    *,
    search: str = "linear",
    min_instances: int = 1,
    target_per_process: float | None = TARGET_PER_PROCESS,
    sla_ms: float = READ_P99_SLA_MS,
    tolerance: float = 0.02,
    first_step: int = 2,
) -> int | None:
    """Instance count of the next step, or None when the search is over.

    "linear" is the anchor's schedule: min_instances, +1, ... until anchor_should_stop or
    max_instances. "bounded" skips only steps that provably cannot change a KPI: n YCSB
    processes with a per-process target cannot exceed n x target (x (1 + tolerance)). It
    starts at `first_step` and doubles n while every step delivered its offered load (so no
    smaller step can be the best), then measures, lowest first, every step up to two above
    the best that could still beat the best, and then those that could beat the best step
    within the SLA. Its KPIs equal the linear search's on the same measurements unless the
    linear search stopped before the peak (then they are higher); on the simulated curves of
    the tests without noise it never needs more steps.
    Without a target (unthrottled YCSB) there is no bound and it falls back to "linear".
    """
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {SEARCHES}, got {search!r}")
    if max_instances < min_instances:
        raise ValueError(f"max_instances {max_instances} < min_instances {min_instances}")
    if search == "linear" or not target_per_process:
        if not history:
            return min_instances
        last = history[-1].instances
        if anchor_should_stop([r.throughput for r in history]) or last >= max_instances:
            return None
        return last + 1

    if not history:
        return min(max(min_instances, first_step), max_instances)
    thr = {r.instances: r.throughput for r in history}
    p99 = {r.instances: r.read_p99_ms for r in history}
    measured = sorted(thr)
    bound = target_per_process * (1.0 + tolerance)

    if all(thr[n] >= (1.0 - tolerance) * n * target_per_process for n in measured):
        if measured[-1] < max_instances:  # still unsaturated: nothing below can be the peak
            return min(2 * measured[-1], max_instances)

    best = max(thr.values())
    peak_hi = max(n for n in measured if thr[n] == best)
    # The linear walk would stop two steps above the peak; below that, measure every step
    # that could still beat the best, lowest first (it raises the best fastest on the way up).
    stop = min(max_instances, peak_hi + 2)
    todo = [
        m
        for m in range(min_instances, stop + 1)
        if m not in thr and (m > peak_hi or m * bound > best)
    ]
    if todo:
        return todo[0]
    within = [thr[n] for n in measured if p99[n] is not None and p99[n] <= sla_ms]
    sla_best = max(within, default=0.0)
    todo = [m for m in range(min_instances, stop + 1) if m not in thr and m * bound > sla_best]
    return todo[0] if todo else None


# ----------------------------------------------------------------------------- KPIs


@dataclass(frozen=True)
class Kpi:
    metric: str
    value: float
    unit: str
    metadata: dict


def _best(results: Sequence[StepResult]) -> StepResult:
    # Ties go to the fewer instances, as the anchor's strict comparison did.
    return min(results, key=lambda r: (-r.throughput, r.instances))


def select_kpis(
    history: Sequence[StepResult],
    *,
    sla_ms: float = READ_P99_SLA_MS,
    mongodb_version: str | None = None,
    max_instances: int | None = None,
    metadata: Mapping | None = None,
) -> list[Kpi]:
    """`Maximum Throughput` (best step) and `Maximum Throughput for Latency SLA` (best step
    whose read p99 <= sla_ms; 0 with a reason when none)."""
    if not history:
        raise ValueError("no steps were measured")
    common = dict(metadata or {})
    common.update(
        {
            "mongodb_version": mongodb_version,
            "read_p99_sla_ms": sla_ms,
            "steps_run": len(history),
            "instances_tried": [r.instances for r in history],
            "max_instances": max_instances,
        }
    )
    order = {id(r): k + 1 for k, r in enumerate(history)}

    def describe(r: StepResult) -> dict:
        return {**common, **r.metadata(), "step": order[id(r)]}

    best = _best(history)
    top_meta = describe(best)
    largest = max(r.instances for r in history)
    if best.instances == largest:
        limit = " (the instance limit)" if max_instances == largest else ""
        top_meta["warning"] = (
            f"maximum throughput was at the largest instance count tried, {largest}{limit}; "
            "the server may have more capacity"
        )
    kpis = [Kpi(MAX_METRIC, best.throughput, THROUGHPUT_UNIT, top_meta)]

    ok = [r for r in history if r.read_p99_ms is not None and r.read_p99_ms <= sla_ms]
    if ok:
        within = _best(ok)
        kpis.append(Kpi(SLA_METRIC, within.throughput, THROUGHPUT_UNIT, describe(within)))
    else:
        lowest = min(
            history, key=lambda r: r.read_p99_ms if r.read_p99_ms is not None else math.inf
        )
        reason = (
            f"no step met read p99 <= {sla_ms:g} ms; the lowest read p99 was "
            f"{lowest.read_p99_ms:g} ms with {lowest.instances} instance(s)"
        )
        kpis.append(Kpi(SLA_METRIC, 0.0, THROUGHPUT_UNIT, {**common, "reason": reason}))
    return kpis


def step_kpis(history: Sequence[StepResult], metadata: Mapping | None = None) -> list[Kpi]:
    """Per-step samples: throughput and read/update p99 of every step."""
    out = []
    for k, r in enumerate(history, 1):
        meta = {**(metadata or {}), **r.metadata(), "step": k}
        out.append(Kpi("Step Throughput", r.throughput, THROUGHPUT_UNIT, meta))
        if r.read_p99_ms is not None:
            out.append(Kpi("Step Read p99 Latency", r.read_p99_ms, "ms", meta))
        if r.update_p99_ms is not None:
            out.append(Kpi("Step Update p99 Latency", r.update_p99_ms, "ms", meta))
    return out


# ----------------------------------------------------------------------------- remote processes
#
# Shell commands (no I/O here) that start a process detached with a PID file, report its
# state, wait for its port, and stop exactly the processes whose PID files we wrote. The PKB
# package modules run them over ssh; the unit tests run them locally.

STATE_RUNNING, STATE_EXITED, STATE_GONE = "running", "exited", "gone"


def background_command(
    argv: Sequence[str],
    *,
    pid_file: str,
    stdout: str,
    stderr: str | None = None,
    rc_file: str | None = None,
    sudo: bool = False,
    run_as: str | None = None,
    nofile: int | None = None,
    nproc: int | None = None,
    wait_s: int = 30,
) -> str:
    """Starts `argv` detached and returns once its PID is in `pid_file` (and prints it).

    The process gets its own session (setsid: no terminal, survives the ssh session and sudo's
    pty), stdin from /dev/null, stdout to `stdout`, stderr to `stderr` (default: `stdout`).
    `pid_file` holds the PID of argv's own process (setsid and numactl exec, they do not fork).
    `nofile`/`nproc` raise the limits of this process only (needs root: `sudo`); where even
    root cannot, the hard limit is used and stderr says so. With `rc_file`, a shell in the
    same session waits for it and writes its exit status there (so a finished process can be
    told from a killed or vanished one). `run_as` drops to that user. Stale PID and
    exit-status files are removed first.
    """
    q = shlex.quote
    cmd = " ".join(q(str(a)) for a in argv)
    if run_as:
        cmd = f"setpriv --reuid={q(run_as)} --regid={q(run_as)} --init-groups {cmd}"
    err = f"2>{q(stderr)}" if stderr else "2>&1"
    launch = f"{cmd} >{q(stdout)} {err} </dev/null"
    if rc_file:
        inner = f"{launch} & echo $! >{q(pid_file)}; wait $!; echo $? >{q(rc_file)}"
        start = f"setsid bash -c {q(inner)} >/dev/null 2>&1 </dev/null &"
    else:
        start = f"setsid {launch} & echo $! >{q(pid_file)};"
    # Plain `;` lists: `a && b &` would put the whole list in a background subshell and $!
    # would be that subshell's PID, not the process's.
    limits = "".join(
        # A host whose hard limit root cannot raise (a container without CAP_SYS_RESOURCE)
        # gets its hard limit and a line on stderr, not a failed start.
        f"ulimit -{opt} {int(value)} 2>/dev/null || {{ ulimit -{opt} $(ulimit -H{opt}) && "
        f'echo "{what} limit stays at $(ulimit -H{opt}), not {int(value)}" >&2; }} || exit 1; '
        for opt, value, what in (("n", nofile, "open files"), ("u", nproc, "processes"))
        if value
    )
    stale = f"rm -f {q(pid_file)}" + (f" {q(rc_file)}" if rc_file else "")
    script = (
        f"{stale}; {limits}{start} "
        f"i=0; while [ ! -s {q(pid_file)} ] && [ $i -lt {int(wait_s) * 10} ]; do "
        f"sleep 0.1; i=$((i+1)); done; "
        f"test -s {q(pid_file)} || {{ echo 'no PID file {pid_file} after {int(wait_s)}s' >&2; exit 1; }}; "
        f"cat {q(pid_file)}"
    )
    # bash, not sh: dash has no `ulimit -u`
    return ("sudo " if sudo else "") + f"bash -c {q(script)}"


def _alive_test(pid_file_word: str, marker: str) -> str:
    """Shell test, true when the PID in the file (a shell word: quoted path or "$f") is a live
    process whose command line holds `marker` (a path of this run), so that a reused PID is
    never taken for ours; leaves the PID in $p."""
    return (
        f'{{ p=$(cat {pid_file_word} 2>/dev/null) && [ -n "$p" ] && '
        f'grep -qaF -- {shlex.quote(marker)} /proc/"$p"/cmdline 2>/dev/null; }}'
    )


def process_states_command(entries: Sequence[tuple[str, str, str | None]], *, marker: str) -> str:
    """One line per (name, pid_file, rc_file): `name running PID`, `name exited RC` or
    `name gone` (no live process, no exit status). Parse with parse_process_states."""
    q = shlex.quote
    parts = []
    for name, pid_file, rc_file in entries:
        if not re.fullmatch(r"[\w.@:-]+", name):
            raise ValueError(f"process name must be a plain word, got {name!r}")
        exited = (
            f'elif test -s {q(rc_file)}; then echo "{name} {STATE_EXITED} $(cat {q(rc_file)})"; '
            if rc_file
            else ""
        )
        parts.append(
            f'if {_alive_test(q(pid_file), marker)}; then echo "{name} {STATE_RUNNING} $p"; '
            f"{exited}else echo {q(name + ' ' + STATE_GONE)}; fi;"
        )
    return "sh -c " + shlex.quote(" ".join(parts) + " true")


@dataclass(frozen=True)
class ProcessState:
    state: str  # running | exited | gone
    value: int | None = None  # the PID when running, the exit status when exited

    @property
    def running(self) -> bool:
        return self.state == STATE_RUNNING


def parse_process_states(text: str) -> dict[str, ProcessState]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2 or parts[1] not in (STATE_RUNNING, STATE_EXITED, STATE_GONE):
            continue
        value = int(parts[2]) if len(parts) > 2 and re.fullmatch(r"-?\d+", parts[2]) else None
        out[parts[0]] = ProcessState(parts[1], value)
    return out


def stop_processes_command(
    pid_files: Sequence[str],
    *,
    marker: str,
    timeout_s: int = 30,
    sudo: bool = False,
    session: bool = False,
) -> str:
    """SIGTERM to each live process of `pid_files` (checked against `marker`), SIGKILL to any
    left after `timeout_s`, then the PID files are removed. With `session`, the other members
    of each process's session are killed too (stress-ng's workers): background_command gave
    it a session of its own, and the command never touches its own session."""
    if not pid_files:
        return "true"
    q = shlex.quote
    files = " ".join(q(f) for f in pid_files)
    alive = _alive_test('"$f"', marker)
    kill_session = (
        'for s in $sids; do [ "$s" = "$me" ] && continue; '
        'for m in $(ps -o pid= -s "$s" 2>/dev/null); do kill -KILL "$m" 2>/dev/null; done; done; '
        if session
        else ""
    )
    script = (
        "me=$(ps -o sid= -p $$ | tr -d ' '); pids=; sids=; "
        f"for f in {files}; do "
        f"if {alive}; then "
        'pids="$pids $p"; sids="$sids $(ps -o sid= -p "$p" | tr -d \' \')"; '
        'kill -TERM "$p" 2>/dev/null; fi; done; '
        f"i=0; while [ $i -lt {int(timeout_s) * 5} ]; do left=; "
        # a zombie (exited, not yet reaped) has an empty cmdline: it counts as gone
        'for p in $pids; do grep -qa . /proc/"$p"/cmdline 2>/dev/null && left="$left $p"; done; '
        '[ -z "$left" ] && break; sleep 0.2; i=$((i+1)); done; '
        'for p in $pids; do kill -KILL "$p" 2>/dev/null; done; '
        f"{kill_session}"
        f"rm -f {files}; true"
    )
    return ("sudo " if sudo else "") + "bash -c " + q(script)


def pid_files_command(directory: str, pattern: str = "*.pid") -> str:
    """Lists the PID files under `directory` (recursively; nothing when it does not exist)."""
    q = shlex.quote
    return f"test -d {q(directory)} && find {q(directory)} -name {q(pattern)} -type f || true"


def wait_ready_command(
    pid_file: str, host: str, port: int, *, marker: str, timeout_s: int = 120
) -> str:
    """Waits until something accepts TCP on host:port; fails at once when the process of
    `pid_file` is gone (no waiting out the timeout for a server that died at start)."""
    script = (
        f"i=0; while [ $i -lt {int(timeout_s) * 5} ]; do "
        f"(exec 3<>/dev/tcp/{host}/{int(port)}) 2>/dev/null && exit 0; "
        f"{_alive_test(shlex.quote(pid_file), marker)} || {{ echo 'the server process exited' >&2; exit 2; }}; "
        "sleep 0.2; i=$((i+1)); done; "
        f"echo 'nothing listens on {host}:{int(port)} after {int(timeout_s)}s' >&2; exit 1"
    )
    return "bash -c " + shlex.quote(script)


def locked_memory_command(pid_files: Sequence[str], *, marker: str, field: str = "VmLck") -> str:
    """Prints the `field` (kB, from /proc/PID/status) of every member of the sessions of the
    live processes in `pid_files`: the memory stress-ng's workers hold. Sum with sum_kib."""
    if not re.fullmatch(r"Vm[A-Za-z]+", field):
        raise ValueError(f"not a /proc status memory field: {field!r}")
    q = shlex.quote
    files = " ".join(q(f) for f in pid_files)
    alive = _alive_test('"$f"', marker)
    script = (
        f"for f in {files}; do "
        f"if {alive}; then "
        "s=$(ps -o sid= -p \"$p\" | tr -d ' '); "
        'for m in $(ps -o pid= -s "$s" 2>/dev/null); do '
        f"awk '/^{field}:/ {{print $2}}' /proc/$m/status 2>/dev/null; done; fi; done; true"
    )
    return "bash -c " + q(script)


def sum_kib(text: str) -> int:
    """Sum of the integer lines of `text` (kB values), in bytes."""
    return sum(int(t) for t in text.split() if t.isdigit()) * KiB


def java_major_version(text: str) -> int:
    """Major version from `java -version` output: '1.8.0_392' -> 8, '17.0.15' -> 17, '21' -> 21."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?[^"]*"', text)
    if not m:
        raise ValueError(f"no version in java -version output: {text.strip()[:200]!r}")
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def parse_cpu_list(text: str) -> list[int]:
    """Kernel CPU list ('0-3,8,10-11', as in /sys/devices/system/cpu/online) -> ids."""
    out: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"not a CPU list: {text.strip()!r}")
        out.extend(range(int(lo), int(hi if sep else lo) + 1))
    return out


def parse_df_avail(text: str) -> int:
    """Bytes from `df -B1 --output=avail DIR` (a header line, then the number)."""
    numbers = [t for t in text.split() if t.isdigit()]
    if not numbers:
        raise ValueError(f"no number in df output: {text.strip()[:200]!r}")
    return int(numbers[-1])


# ----------------------------------------------------------------------------- simulation


@dataclass(frozen=True)
class SimulatedServer:
    """A server whose capacity per instance count is known: capacity[n-1] ops/s with n
    instances; `noise[n-1]` a fixed relative error of that step's measurement."""

    capacity: tuple[float, ...]
    noise: tuple[float, ...] = ()
    read_p99_base_ms: float = 0.8
    read_p99_slope_ms: float = 4.0

    @property
    def max_instances(self) -> int:
        return len(self.capacity)

    def measure(self, n: int, target: float) -> StepResult:
        """A saturated step delivers the capacity (plus noise); an unsaturated one 99.5 % of
        the offered load, as a throttled YCSB does. p99 grows with utilisation."""
        offered = n * target
        eps = self.noise[n - 1] if self.noise else 0.0
        thr = min(0.995 * offered, self.capacity[n - 1] * (1.0 + eps))
        util = offered / self.capacity[n - 1]
        p99 = self.read_p99_base_ms + self.read_p99_slope_ms * util**4
        return StepResult(n, thr, p99, 1.5 * p99, p99_source="simulated")


def peaked_capacity(
    peak: int, max_instances: int, *, saturation: float = 0.8, target: float = TARGET_PER_PROCESS
) -> tuple[float, ...]:
    """Capacity rising to its maximum at `peak` instances, then falling: C(n) = P (n/peak)
    e^(1 - n/peak), with P = `saturation` x the offered load at the peak."""
    top = saturation * peak * target
    return tuple(top * (n / peak) * math.exp(1.0 - n / peak) for n in range(1, max_instances + 1))


def noise(max_instances: int, sigma: float, seed: int) -> tuple[float, ...]:
    rng = random.Random(seed)
    return tuple(rng.gauss(0.0, sigma) for _ in range(max_instances))


@dataclass(frozen=True)
class CostModel:
    """Wall-time model of a search. Loads are bounded by the server's insert capacity
    (records/s over all loaders: one data disk takes data and journal writes of every
    instance), each loader by its own rate."""

    records_per_instance: int = 10_000_000
    loader_rate: float = 30_000.0
    load_capacity: float = 30_000.0
    step_seconds: float = 180.0
    step_overhead_seconds: float = 60.0  # drop caches, stress-ng, start mongods, JVM warm-up
    load_overhead_seconds: float = 30.0  # start the instances to load, JVM start

    def load_seconds(self, instances: int) -> float:
        if instances <= 0:
            return 0.0
        rate = min(instances * self.loader_rate, self.load_capacity)
        return self.load_overhead_seconds + instances * self.records_per_instance / rate

    @property
    def step_total_seconds(self) -> float:
        return self.step_seconds + self.step_overhead_seconds


@dataclass(frozen=True)
class SimRun:
    steps: tuple[int, ...]
    records_loaded: int
    load_seconds: float
    wall_seconds: float
    kpis: tuple[Kpi, ...]

    @property
    def peak(self) -> int:
        return self.kpis[0].metadata["instances"]

    @property
    def sla_peak(self) -> int | None:
        return self.kpis[1].metadata.get("instances")


def simulate(
    server: SimulatedServer,
    *,
    search: str,
    cost: CostModel = CostModel(),
    target: float = TARGET_PER_PROCESS,
    sla_ms: float = READ_P99_SLA_MS,
    clients: int = 2,
    measure: Callable[[int], StepResult] | None = None,
) -> SimRun:
    """Runs a search against `server` with the engine's own next_step and plan_step.
    search "anchor" is the anchor's schedule (linear, every step reloads all its instances);
    "linear" and "bounded" load each instance once."""
    measure = measure or (lambda n: server.measure(n, target))
    algo = "linear" if search == "anchor" else search
    history: list[StepResult] = []
    loaded: set[int] = set()
    records = load_s = wall = 0.0
    while (
        n := next_step(
            history, server.max_instances, search=algo, target_per_process=target, sla_ms=sla_ms
        )
    ) is not None:
        plan = plan_step(
            n,
            loaded=() if search == "anchor" else loaded,
            clients=clients,
            records=cost.records_per_instance,
            hosts=("server",),
        )
        new = len(plan.load)
        records += new * cost.records_per_instance
        load_s += cost.load_seconds(new)
        wall += cost.load_seconds(new) + cost.step_total_seconds
        loaded.update(p.instance for p in plan.load)
        history.append(measure(n))
    kpis = select_kpis(history, sla_ms=sla_ms, max_instances=server.max_instances)
    return SimRun(tuple(r.instances for r in history), int(records), load_s, wall, tuple(kpis))
