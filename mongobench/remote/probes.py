"""Host probes and their parsers: NUMA nodes, CPU lists, cores, interfaces, disk space, limits."""

from __future__ import annotations

import ipaddress
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass


def process_limits_command(pid_file: str) -> str:
    return f"cat /proc/$(cat {shlex.quote(pid_file)})/limits"


def parse_process_limits(text: str) -> dict:
    """Soft limits of the running server from /proc/PID/limits."""
    out = {}
    for line in text.splitlines():
        for label, key in (("Max open files", "nofile"), ("Max processes", "nproc")):
            if line.startswith(label):
                soft = line[len(label) :].split()[0]
                out[key] = soft if soft == "unlimited" else int(soft)
    return out


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


# ----------------------------------------------------------------------------- server facts


def server_facts_command(instances_dir: str) -> str:
    """One command for a server's facts, sections separated by `---` lines: free disk under
    `instances_dir`, NUMA node directories, online CPUs, `numactl --hardware` (empty when
    numactl is missing), `lscpu -p` cores and `ip -o addr` addresses."""
    return (
        f"df -B1 --output=avail {shlex.quote(instances_dir)}; echo ---; "
        "ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l; echo ---; "
        "cat /sys/devices/system/cpu/online; echo ---; "
        "numactl --hardware 2>/dev/null; echo ---; "
        "lscpu -p=CPU,CORE,SOCKET 2>/dev/null; echo ---; "
        "ip -o addr show 2>/dev/null; true"
    )


def parse_server_facts(text: str) -> dict:
    """The output of server_facts_command: `df` (its text, parsed by parse_df_avail only when
    needed), `numa_nodes` (>= 1), `numa` (one node with every CPU when numactl reports none),
    `cores`, `cpus` and `interfaces` (None when `ip` printed nothing: no address check)."""
    df, nodes, online, numactl, lscpu, ip_addr = text.split("---")
    cpus = parse_cpu_list(online)
    return {
        "df": df,
        "numa_nodes": max(1, int(nodes.strip() or 1)),
        "numa": parse_numactl_hardware(numactl) or (NumaNode(0, tuple(cpus)),),
        "cores": parse_lscpu_cores(lscpu),
        "cpus": cpus,
        "interfaces": parse_ip_addr(ip_addr) or None,
    }
