"""mongodb_stress engine (mongobench.stress): sizing, stress-ng, mongod config, plans, search, KPIs."""

from __future__ import annotations

import math
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from mongobench.core import split as core_split
from mongobench.core import units
from mongobench.core.poll import poll_until
from mongobench.deploy import mongod
from mongobench.remote import probes, processes
from mongobench.stress import placement, sizing, steps
from mongobench.stress import search as stress_search
from mongobench.stress.settings import StressSettings
from testbed import simulator

GiB = units.GiB
DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "ycsb"
R = 10_000_000
NO_HDR = StressSettings(histograms=False)


def props_dict(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


# ----------------------------------------------------------------------------- sizing


@pytest.mark.parametrize("vcpus,expected", [(1, 1), (2, 1), (16, 7), (32, 11), (64, 14), (96, 16)])
def test_estimated_instances(vcpus, expected):
    assert sizing.estimated_instances(vcpus) == expected
    assert expected == max(1, math.ceil(16 * (1 - math.exp(-0.032 * vcpus))))


def test_records_per_instance_follows_the_anchor_formula():
    usable = sizing.usable_memory_bytes(128 * GiB)
    assert usable == 128 * GiB - 1_000_000 * 1024
    raw = usable / 11 / 1256  # 11 = ceil(16 (1 - e^(-0.032 x 32)))
    assert 9.5e6 < raw < 10.5e6
    assert sizing.records_per_instance(usable, 32) == 10_000_000
    # Constants are arguments: 2 x the bytes per record halves the count (rounded to millions).
    assert sizing.records_per_instance(usable, 32, record_bytes=2512) == 5_000_000


def test_records_are_clamped_and_rounded_half_up():
    assert sizing.records_per_instance(4 * GiB, 16) == 2_000_000  # below the 2M floor
    usable = sizing.usable_memory_bytes(24 * GiB)
    assert sizing.records_per_instance(usable, 2) == 20_000_000  # 19.7M -> 20M
    assert sizing.records_per_instance(usable, 2, max_records=50_000_000) == 20_000_000
    assert sizing.records_per_instance(4 * usable, 2) == 20_000_000  # 78.8M: the ceiling
    assert sizing.records_per_instance(2_500_000 * 1256, 1, min_records=0) == 3_000_000
    assert sizing.records_per_instance(2_499_999 * 1256, 1, min_records=0) == 2_000_000


def test_cache_and_memory_per_instance():
    assert sizing.database_bytes(R) == 10_000_000_000
    assert sizing.cache_size_gb(R) == round(0.25 * 1e10 / GiB, 2) == 2.33
    assert sizing.cache_size_gb(2_000_000) == 1.0  # 0.47 GiB -> the 1 GB minimum
    assert sizing.cache_size_gb(R, fraction=0.5, min_gb=3) == 4.66
    mem = sizing.memory_per_instance_bytes(R, 2.33)
    assert mem == 2 * int(2.33 * GiB) + GiB + 256 * R
    assert sizing.memory_per_instance_bytes(R, 2.33, file_cache_bytes=0) == mem - int(2.33 * GiB)


def test_max_instances_is_the_tightest_limit():
    assert sizing.max_instances(100, 1000, 10, 10) == 10  # memory
    assert sizing.max_instances(1000, 55, 10, 10) == 5  # disk
    assert sizing.max_instances(1000, 1000, 10, 10, cap=3) == 3  # cap
    assert sizing.max_instances(5, 1000, 10, 10) == 0


def test_plan_sizing_and_overrides():
    s = sizing.plan_sizing(128 * GiB, 32, 2000 * GiB)
    assert (s.records, s.cache_gb) == (10_000_000, 2.33)
    assert s.memory_per_instance == sizing.memory_per_instance_bytes(s.records, s.cache_gb)
    assert s.fits_memory == s.usable_memory // s.memory_per_instance == 15
    assert s.fits_disk == 2000 * GiB // 10**10
    assert s.max_instances == 15
    assert s.metadata()["records_per_instance"] == 10_000_000

    forced = sizing.plan_sizing(
        128 * GiB, 32, 50 * GiB, records=4_000_000, cache_gb=2.0, max_instances_cap=12
    )
    assert (forced.records, forced.cache_gb) == (4_000_000, 2.0)
    assert forced.max_instances == min(forced.fits_memory, forced.fits_disk, 12) == 12
    assert sizing.plan_sizing(128 * GiB, 32, 25 * GiB).max_instances == 2  # 10 GB per instance


def test_plan_sizing_takes_a_changed_model():
    assert sizing.plan_sizing(128 * GiB, 32, 2000 * GiB, model=sizing.ANCHOR) == (
        sizing.plan_sizing(128 * GiB, 32, 2000 * GiB)
    )
    model = sizing.SizingModel(cache_fraction=0.5, min_cache_gb=3, disk_bytes_per_record=2000)
    s = sizing.plan_sizing(128 * GiB, 32, 2000 * GiB, model=model)
    assert (s.records, s.cache_gb) == (10_000_000, 4.66)  # cache_size_gb(R, fraction=0.5)
    assert s.disk_per_instance == 2 * 10**10
    small = sizing.SizingModel(max_records=3_000_000, process_bytes=0)
    s = sizing.plan_sizing(128 * GiB, 32, 2000 * GiB, model=small)
    assert s.records == 3_000_000
    assert s.memory_per_instance == sizing.memory_per_instance_bytes(
        s.records, s.cache_gb, process_bytes=0
    )


def test_plan_sizing_fails_clearly_when_nothing_fits():
    with pytest.raises(ValueError, match="no mongod instance fits.*GiB of disk"):
        sizing.plan_sizing(128 * GiB, 32, 5 * GiB)
    with pytest.raises(ValueError, match="of memory"):
        sizing.plan_sizing(4 * GiB, 2, 1000 * GiB, records=20_000_000)


# ----------------------------------------------------------------------------- stress-ng


def test_memory_to_hold_is_never_negative():
    assert sizing.memory_to_hold_bytes(100 * GiB, 3, 20 * GiB) == 40 * GiB
    assert sizing.memory_to_hold_bytes(100 * GiB, 6, 20 * GiB) == 0
    assert core_split.split_evenly(10, 3) == [4, 3, 3]


def test_stress_ng_command_single_node():
    cmds = placement.stress_ng_commands(40 * GiB, workers=8, yaml_path="/r/sng.yaml", timeout_s=900)
    assert cmds == [
        [
            "stress-ng",
            "--vm",
            "8",
            "--vm-bytes",
            f"{40 * GiB // 1024}k",  # the total: stress-ng splits it over the 8 workers
            "--vm-keep",
            "--vm-locked",
            "--vm-hang",
            "0",
            "--yaml",
            "/r/sng.yaml",
            "--timeout",
            "900s",
        ]
    ]
    assert placement.stress_ng_commands(0, workers=8, yaml_path="/r/s.yaml") == []


def test_stress_ng_commands_per_numa_node():
    cmds = placement.stress_ng_commands(
        {0: 3 * GiB // 2 + 1023, 1: 3 * GiB // 2}, workers=5, yaml_path="/r/sng.yaml"
    )
    assert [c[:5] for c in cmds] == [
        ["numactl", "--membind=0", "--cpunodebind=0", "--", "stress-ng"],
        ["numactl", "--membind=1", "--cpunodebind=1", "--", "stress-ng"],
    ]
    held = [int(c[c.index("--vm-bytes") + 1].rstrip("k")) for c in cmds]
    assert held == [3 * GiB // 2 // 1024] * 2  # KiB, the odd bytes dropped
    assert [c[c.index("--vm") + 1] for c in cmds] == ["3", "2"]
    assert [c[c.index("--yaml") + 1] for c in cmds] == ["/r/sng-node0.yaml", "/r/sng-node1.yaml"]
    # a memory-only node (CXL) has no CPUs to bind stress-ng's workers to; nothing to hold
    # on a node: no process there
    cmds = placement.stress_ng_commands(
        {0: 0, 1: GiB, 2: GiB}, workers=2, yaml_path="/r/s.yaml", cpu_nodes={0, 1}
    )
    assert [c[:4] for c in cmds] == [
        ["numactl", "--membind=1", "--cpunodebind=1", "--"],
        ["numactl", "--membind=2", "--", "stress-ng"],
    ]


@pytest.mark.skipif(not shutil.which("stress-ng"), reason="stress-ng not installed")
def test_stress_ng_accepts_the_generated_command(tmp_path):
    (cmd,) = placement.stress_ng_commands(
        32 * 1024 * 1024, workers=2, yaml_path=str(tmp_path / "m.yaml"), timeout_s=2
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "vm" in (tmp_path / "m.yaml").read_text()


# ----------------------------------------------------------------------------- mongod


@pytest.mark.parametrize("version", ["6.0.19", "7.0.14", "8.0.4"])
def test_instance_config_valid_for_version(version):
    text = mongod.instance_config(
        3,
        mongod.InstanceOptions(cache_gb=2.33, bind_ip="0.0.0.0"),
        base_dir="/data/mb/",
        version=version,
    )
    conf = yaml.safe_load(text)
    assert conf["net"] == {"port": 27020, "bindIp": "0.0.0.0"}
    assert conf["storage"]["dbPath"] == "/data/mb/mongod-3/data"
    assert conf["storage"]["wiredTiger"]["engineConfig"]["cacheSizeGB"] == 2.33
    assert conf["systemLog"]["path"] == "/data/mb/mongod-3/mongod.log"
    assert "journal" not in conf["storage"]  # storage.journal.enabled is gone since 6.1
    assert "processManagement" not in conf  # no fork: the runner keeps the PID


def test_instance_config_tls_and_extra():
    conf = yaml.safe_load(
        mongod.instance_config(
            0,
            mongod.InstanceOptions(
                cache_gb=1,
                tls_certificate_key_file="/d/server.pem",
                extra={"net": {"maxIncomingConnections": 2000}},
            ),
            base_dir="/d",
            version="8.0.0",
        )
    )
    assert conf["net"]["tls"] == {"mode": "requireTLS", "certificateKeyFile": "/d/server.pem"}
    assert conf["net"]["maxIncomingConnections"] == 2000 and conf["net"]["port"] == 27017
    with pytest.raises(ValueError, match="removed in MongoDB 6.1"):
        mongod.instance_config(
            0,
            mongod.InstanceOptions(cache_gb=1, extra={"storage": {"journal": {"enabled": False}}}),
            base_dir="/d",
            version="7.0.2",
        )


def test_instance_paths_are_per_instance():
    a, b = mongod.instance_paths(0, "/x"), mongod.instance_paths(1, "/x")
    assert {a.dbpath, a.log, a.pid_file}.isdisjoint({b.dbpath, b.log, b.pid_file})


HOSTS = pathlib.Path(__file__).resolve().parent.parent / "data" / "hosts"


def host_file(name: str) -> str:
    return (HOSTS / name).read_text()


def test_numactl_hardware_recordings_parse():
    split = probes.parse_numactl_hardware(host_file("numactl-2node-split.txt"))
    assert [(n.id, n.size_mb, len(n.cpus)) for n in split] == [(0, 191297, 48), (1, 191383, 48)]
    assert split[0].cpus == tuple(range(24)) + tuple(range(48, 72))
    inter = probes.parse_numactl_hardware(host_file("numactl-2node-interleaved.txt"))
    assert inter[0].cpus == tuple(range(0, 64, 2)) and inter[1].cpus == tuple(range(1, 64, 2))
    cxl = probes.parse_numactl_hardware(host_file("numactl-cxl-memory-node.txt"))
    assert [(n.id, n.cpus, n.size_mb) for n in cxl] == [
        (0, tuple(range(17)), 63678),
        (1, (), 16122),
    ]
    assert probes.parse_numactl_hardware("No NUMA available on this system\n") == ()
    cores = probes.parse_lscpu_cores(host_file("lscpu-1socket-ht.txt"))
    assert cores[0] == cores[4] == (0, 0) and cores[3] == cores[7] == (0, 3)
    assert probes.parse_lscpu_cores("# CPU,Core,Socket\n0,0,0\n1,-,0\n") == {0: (0, 0)}
    assert probes.format_cpu_list([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"


def _two_socket_cores():
    # Linux's usual numbering on a 2-socket host with SMT (the layout of the
    # numactl-2node-split recording): CPU c and c + 48 are the two threads of one core.
    return {c: (0 if c % 48 < 24 else 1, c % 48) for c in range(96)}


def test_two_node_placement_keeps_cpus_and_memory_on_one_node():
    nodes = probes.parse_numactl_hardware(host_file("numactl-2node-split.txt"))
    assert placement.instance_nodes(5, nodes) == [0, 1, 0, 1, 0]
    pre = placement.placement_prefixes(
        4, nodes, cpu="cpus", memory="bind", cores=_two_socket_cores()
    )
    assert pre == [
        ["numactl", "--physcpubind=0-11,48-59", "--membind=0", "--"],
        ["numactl", "--physcpubind=24-35,72-83", "--membind=1", "--"],
        ["numactl", "--physcpubind=12-23,60-71", "--membind=0", "--"],
        ["numactl", "--physcpubind=36-47,84-95", "--membind=1", "--"],
    ]
    # without core ids: still the node's own CPUs, in id order
    plain = placement.split_node_cpus(4, nodes)
    assert plain[0] == list(range(24)) and plain[2] == list(range(48, 72))
    # every CPU used once, and each instance's CPUs all on its memory's node
    groups = placement.split_node_cpus(3, nodes, _two_socket_cores())
    assert sorted(c for g in groups for c in g) == list(range(96))
    for i, g in enumerate(groups):
        assert set(g) <= set(nodes[placement.instance_nodes(3, nodes)[i]].cpus)
    assert [len(g) for g in groups] == [24, 48, 24]

    inter = probes.parse_numactl_hardware(host_file("numactl-2node-interleaved.txt"))
    pre = placement.placement_prefixes(2, inter, cpu="cpus", memory="bind")
    # the anchor's split of all CPU ids (0-31, 32-63) would have mixed both nodes here
    assert pre[0] == [
        "numactl",
        "--physcpubind=" + ",".join(map(str, range(0, 64, 2))),
        "--membind=0",
        "--",
    ]
    assert pre[1][1] == "--physcpubind=" + ",".join(map(str, range(1, 64, 2)))
    assert placement.placement_prefixes(3, inter, cpu="node", memory="interleave") == [
        ["numactl", "--cpunodebind=0", "--interleave=all", "--"],
        ["numactl", "--cpunodebind=1", "--interleave=all", "--"],
        ["numactl", "--cpunodebind=0", "--interleave=all", "--"],
    ]
    assert placement.placement_prefixes(2, inter) == [[], []]


def test_placement_skips_memory_only_nodes_and_sibling_threads_stay_together():
    cxl = probes.parse_numactl_hardware(host_file("numactl-cxl-memory-node.txt"))
    # no instance on the CPU-less node 1: --cpunodebind=1 would fail to start mongod
    assert placement.instance_nodes(3, cxl) == [0, 0, 0]
    assert placement.placement_prefixes(2, cxl, cpu="node", memory="bind")[1] == [
        "numactl",
        "--cpunodebind=0",
        "--membind=0",
        "--",
    ]
    one = (probes.NumaNode(0, tuple(range(8))),)
    cores = probes.parse_lscpu_cores(host_file("lscpu-1socket-ht.txt"))
    assert placement.split_node_cpus(2, one, cores) == [[0, 1, 4, 5], [2, 3, 6, 7]]
    assert placement.split_node_cpus(2, one) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError, match="own CPUs on NUMA node 0"):
        placement.split_node_cpus(9, one)
    with pytest.raises(ValueError, match="no NUMA node with CPUs"):
        placement.instance_nodes(1, (probes.NumaNode(0, ()),))


def test_numactl_prefix_validates():
    assert placement.numactl_prefix() == []
    assert placement.numactl_prefix(node=3, cpu="cpus", cpus=[4, 5, 6], memory="bind") == [
        "numactl",
        "--physcpubind=4-6",
        "--membind=3",
        "--",
    ]
    with pytest.raises(ValueError, match="CPU ids"):
        placement.numactl_prefix(node=0, cpu="cpus")
    with pytest.raises(ValueError, match="NUMA node"):
        placement.numactl_prefix(memory="bind")
    with pytest.raises(ValueError, match="unknown"):
        placement.numactl_prefix(node=0, memory="local")


def test_memory_hold_per_node():
    nodes = probes.parse_numactl_hardware(host_file("numactl-2node-split.txt"))
    usable, m = 360 * GiB, 40 * GiB
    # unbound: the total to hold (360 - 3 x 40 GiB) split by node size; nothing is lost
    free = placement.hold_per_node(usable, nodes, [0, 1, 0], m, bound=False)
    assert sum(free.values()) == 240 * GiB
    assert free[0] < free[1] and free[1] - free[0] < 100 * 2**20  # 191297 vs 191383 MB
    # bound: node 0 carries two instances and must keep memory for two
    bound = placement.hold_per_node(usable, nodes, [0, 1, 0], m, bound=True)
    share = placement.split_by_node_size(usable, nodes)
    assert bound == {0: share[0] - 2 * m, 1: share[1] - m}
    # a node that cannot even fit its instances holds nothing
    assert placement.hold_per_node(usable, nodes, [0] * 6, m, bound=True)[0] == 0
    # a memory-only node keeps none for bound instances, part of the total for unbound ones
    cxl = probes.parse_numactl_hardware(host_file("numactl-cxl-memory-node.txt"))
    assert (
        placement.hold_per_node(70 * GiB, cxl, [0], 10 * GiB, bound=True)[1]
        == (placement.split_by_node_size(70 * GiB, cxl)[1])
    )
    assert placement.split_by_node_size(10, (probes.NumaNode(0, (0,)), probes.NumaNode(2, ()))) == {
        0: 5,
        2: 5,
    }
    with pytest.raises(ValueError, match="unknown NUMA node"):
        placement.hold_per_node(usable, nodes, [3], m, bound=True)
    cmds = placement.stress_ng_commands(bound, workers=8, yaml_path="/r/h.yaml", cpu_nodes={0, 1})
    assert [c[1] for c in cmds] == ["--membind=0", "--membind=1"]


def test_server_addresses_one_per_nic():
    two = probes.parse_ip_addr(host_file("ip-o-addr-2nic.txt"))
    assert [(a.interface, a.address, a.prefixlen, a.scope) for a in two] == [
        ("lo", "127.0.0.1", 8, "host"),
        ("eth0", "10.0.0.2", 24, "global"),
        ("eth1", "172.18.0.2", 16, "global"),
    ]
    resolve = placement.resolve_server_addresses
    ips = ["10.0.0.2", "172.18.0.2"]
    assert resolve([], internal_ips=ips, interfaces=two) == ("10.0.0.2",)
    assert resolve(["all"], internal_ips=ips, interfaces=two) == ("10.0.0.2", "172.18.0.2")
    assert resolve(["eth1", "eth0", "10.0.0.2"], internal_ips=ips, interfaces=two) == (
        "172.18.0.2",
        "10.0.0.2",
    )
    # the whole loopback network is local on Linux (the test bed uses 127.0.0.2)
    assert resolve(["127.0.0.1", "127.0.0.2"], internal_ips=ips, interfaces=two) == (
        "127.0.0.1",
        "127.0.0.2",
    )
    with pytest.raises(ValueError, match="not an address of the server"):
        resolve(["10.0.0.3"], internal_ips=ips, interfaces=two)
    with pytest.raises(ValueError, match="interfaces: eth0, eth1, lo"):
        resolve(["eth2"], internal_ips=ips, interfaces=two)

    one = probes.parse_ip_addr(host_file("ip-o-addr-1nic-ipv6.txt"))
    assert [a.version for a in one] == [4, 6, 4, 6, 6]
    assert resolve(["eth0"], internal_ips=["192.0.2.2"], interfaces=one) == ("192.0.2.2",)
    with pytest.raises(ValueError, match="IPv6"):
        resolve(["fd00::2"], internal_ips=["192.0.2.2"], interfaces=one)
    with pytest.raises(ValueError, match="no internal IP"):
        resolve([], internal_ips=[])
    # without the server's listing addresses are taken as given, names cannot be resolved
    assert resolve(["198.51.100.7"], internal_ips=ips) == ("198.51.100.7",)
    with pytest.raises(ValueError, match="cannot resolve interface"):
        resolve(["eth0"], internal_ips=ips)
    assert (
        probes.parse_ip_addr("5: eth0@if6    inet 10.1.0.4/16 scope global eth0\\ x")[0].interface
        == "eth0"
    )  # containers name veth peers eth0@ifN


# ----------------------------------------------------------------------------- step plans


def test_plan_step_loads_only_new_instances_and_spreads_processes():
    plan = steps.plan_step(
        5, loaded={0, 1, 2}, clients=2, records=R, hosts=["10.0.0.5", "10.0.1.5"]
    )
    assert plan.instances == (0, 1, 2, 3, 4)
    assert [(p.instance, p.client) for p in plan.load] == [(3, 0), (4, 1)]
    assert [(p.instance, p.client) for p in plan.run] == [(0, 0), (1, 1), (2, 0), (3, 1), (4, 0)]
    assert plan.clients_used == 2
    assert [p.port for p in plan.run] == [27017, 27018, 27019, 27020, 27021]
    assert [p.host for p in plan.run[:2]] == ["10.0.0.5", "10.0.1.5"]  # several NICs
    ranges = [(p.insertstart, p.insertstart + p.insertcount) for p in plan.run]
    assert ranges == [(i * R, (i + 1) * R) for i in range(5)]
    assert all(p.recordcount == p.insertstart + p.insertcount for p in plan.run)
    stems = [p.stem for p in plan.run + plan.load]
    assert len(set(stems)) == len(stems)
    assert plan.run[3].uri() == "mongodb://10.0.1.5:27020/ycsb"


def test_plan_step_rejects_nonsense():
    with pytest.raises(ValueError):
        steps.plan_step(0, loaded=(), clients=1, records=R, hosts=["h"])
    with pytest.raises(ValueError):
        steps.plan_step(2, loaded=(), clients=1, records=R, hosts=[])


def test_run_and_load_properties():
    plan = steps.plan_step(3, loaded=(), clients=2, records=R, hosts=["srv"])
    proc = plan.run[2]
    assert "hdrhistogram.fileoutput" not in steps.run_properties(proc, NO_HDR, directory="/c")
    p = props_dict(steps.run_properties(proc, StressSettings(), directory="/c/run1/"))
    assert (p["insertstart"], p["insertcount"], p["recordcount"]) == (
        "20000000",
        "10000000",
        "30000000",
    )
    assert (p["readproportion"], p["updateproportion"], p["requestdistribution"]) == (
        "0.9",
        "0.1",
        "zipfian",
    )
    assert (p["target"], p["threadcount"], p["maxexecutiontime"]) == ("25000", "10", "180")
    assert p["hdrhistogram.output.path"] == "/c/run1/step003-i002-"
    assert p["mongodb.url"] == "mongodb://srv:27019/ycsb"
    assert p["hdrhistogram.percentiles"] == "50,95,99,99.9"
    p2 = props_dict(
        steps.run_properties(plan.run[1], StressSettings(), directory="/c/run1", urlfile="/c/u1")
    )
    assert p2["hdrhistogram.output.path"] != p["hdrhistogram.output.path"]
    assert p2["mongodb.urlfile"] == "/c/u1" and "mongodb.url" not in p2
    # the run's settings are the properties' (not the defaults)
    asked = StressSettings(target_ops=500, run_threads=3, step_seconds=42, status_interval_s=2)
    p3 = props_dict(steps.run_properties(proc, asked, directory="/c"))
    assert (p3["target"], p3["threadcount"], p3["maxexecutiontime"]) == ("500", "3", "42")
    assert p3["status.interval"] == "2"

    lp = props_dict(steps.load_properties(plan.load[1], batchsize=100))
    assert (lp["insertstart"], lp["insertcount"], lp["operationcount"]) == (
        "10000000",
        "10000000",
        "10000000",
    )
    assert lp["threadcount"] == "30" and lp["batchsize"] == "100" and "target" not in lp


def test_tls_properties_turn_tls_on_with_the_ca():
    plan = steps.plan_step(2, loaded=(), clients=1, records=R, hosts=["10.0.0.5", "10.0.1.5"])
    ca = "/scratch/mongobench-ycsb/tls/ca.pem"
    run = props_dict(steps.run_properties(plan.run[1], NO_HDR, directory="/c", tls_ca_file=ca))
    assert run["mongodb.url"] == "mongodb://10.0.1.5:27018/ycsb?tls=true"
    assert run["mongodb.tlsCAFile"] == ca
    load = props_dict(steps.load_properties(plan.load[0], tls_ca_file=ca))
    assert load["mongodb.url"] == "mongodb://10.0.0.5:27017/ycsb?tls=true"
    assert load["mongodb.tlsCAFile"] == ca
    # without a CA: plain connections, no TLS property
    plain = props_dict(steps.load_properties(plan.load[0]))
    assert plain["mongodb.url"] == "mongodb://10.0.0.5:27017/ycsb"
    assert "mongodb.tlsCAFile" not in plain
    # a given URI (file) is used as it is: its tls option is the caller's
    own = props_dict(steps.load_properties(plan.load[0], urlfile="/u", tls_ca_file=ca))
    assert own["mongodb.urlfile"] == "/u" and "mongodb.url" not in own
    assert own["mongodb.tlsCAFile"] == ca


# ----------------------------------------------------------------------------- step results


def outputs(n: int, text: str, **kw) -> list[steps.ProcessOutput]:
    return [
        steps.ProcessOutput(instance=i, client=i % 2, returncode=0, output=text, **kw)
        for i in range(n)
    ]


def test_step_result_from_real_ycsb_outputs():
    text = (DATA / "standin_run_ok.txt").read_text()
    r = steps.step_result(3, outputs(3, text))
    assert r.throughput == pytest.approx(3 * 429.36882782310005)
    assert r.operations == 3000
    assert (r.read_p99_ms, r.update_p99_ms) == (10.263, 21.887)
    assert r.p99_source == "max over processes"
    assert (r.clients, r.processes) == (2, 3)
    assert r.metadata()["p99_read_latency_ms"] == 10.263


def test_step_result_merges_histogram_logs_when_every_process_has_them():
    text = (DATA / "standin_run_hdr212.txt").read_text()
    hists = {op: (DATA / f"standin_hdr212_{op}.hdr").read_text() for op in ("READ", "UPDATE")}
    r = steps.step_result(2, outputs(2, text, histograms=hists))
    assert r.p99_source == "merged histograms"
    assert r.read_p99_ms == 5.851  # same data twice: the merged p99 equals the printed one
    assert r.update_p99_ms == 11.927


def test_step_errors_are_clear():
    ok = (DATA / "standin_run_ok.txt").read_text()
    dead = (DATA / "standin_dead_port.txt").read_text()
    no_p99 = "\n".join(line for line in ok.splitlines() if "[READ], 99thPercentile" not in line)

    with pytest.raises(
        steps.StepError,
        match=r"step 2: mongod instance\(s\) not running.*1 \(port 27018: exit 137\)",
    ):
        steps.step_result(2, outputs(2, ok), dead_instances={1: "exit 137"})
    with pytest.raises(
        steps.StepError, match="instance 1 on client 1: YCSB reported a failure: .*cannot connect"
    ):
        steps.step_result(2, [outputs(2, ok)[0], steps.ProcessOutput(1, 1, 0, dead)])
    with pytest.raises(steps.StepError, match="99th percentile latency of READ"):
        steps.step_result(1, outputs(1, no_p99))
    with pytest.raises(steps.StepError, match="YCSB exited with status 1; output ends"):
        steps.step_result(1, [steps.ProcessOutput(0, 0, 1, ok)])
    with pytest.raises(steps.StepError, match=r"one YCSB output per instance 0..2, got \[0, 1\]"):
        steps.step_result(3, outputs(2, ok))
    missing = ok.replace(
        "[READ], Return=OK, 881", "[READ], Return=OK, 800\n[READ], Return=NOT_FOUND, 81"
    )
    with pytest.raises(steps.StepError, match="81 operations found no document; instance 0 lacks"):
        steps.step_result(1, outputs(1, missing))


# ----------------------------------------------------------------------------- search


def test_seed_stop_rule():
    assert not stress_search.fell_twice([10, 5])  # fewer than 3 steps
    assert not stress_search.fell_twice([10, 20, 15])  # one fall
    assert stress_search.fell_twice([10, 20, 15, 12])
    assert not stress_search.fell_twice([10, 20, 15, 20])  # a fall, then a rise
    assert not stress_search.fell_twice([10, 20, 20, 15])  # a tie is no fall
    assert stress_search.fell_twice([30, 20, 10])
    # the anchor's code stopped here (the best beat both of the last two); the seed's text
    # ("goes down for two successive iterations") goes on
    assert not stress_search.fell_twice([10, 20, 15, 18])


# A server whose throughput rises to a peak at n = 5 then falls (ops/s per instance count).
PEAK5 = (25_000, 50_000, 74_000, 92_000, 100_000, 96_000, 90_000, 84_000, 78_000, 72_000)
P99_PEAK5 = (0.9, 1.0, 1.4, 2.6, 3.4, 5.0, 7.0, 9.0, 11.0, 13.0)


def measure_peak5(n: int) -> steps.StepResult:
    return steps.StepResult(n, min(0.995 * 25_000 * n, PEAK5[n - 1]), P99_PEAK5[n - 1], 2.0)


def run(search: str, measure=measure_peak5, max_instances: int = len(PEAK5), **kw):
    history = []
    while (n := stress_search.next_step(history, max_instances, search=search, **kw)) is not None:
        history.append(measure(n))
    return history


def test_linear_search_is_the_anchors_schedule():
    h = run("linear")
    assert [r.instances for r in h] == [1, 2, 3, 4, 5, 6, 7]
    top, sla = stress_search.select_kpis(h, sla_ms=3.0, mongodb_version="8.0.4")
    assert (top.metric, top.value, top.unit) == ("Maximum Throughput", 100_000, "ops/sec")
    assert top.metadata["instances"] == 5 and top.metadata["step"] == 5
    assert (
        top.metadata["p99_read_latency_ms"] == 3.4 and top.metadata["p99_update_latency_ms"] == 2.0
    )
    assert top.metadata["mongodb_version"] == "8.0.4" and "warning" not in top.metadata
    assert (sla.metric, sla.value) == ("Maximum Throughput for Latency SLA", 92_000)
    assert sla.metadata["instances"] == 4


def test_bounded_search_finds_the_same_kpis_in_fewer_steps():
    linear, bounded = run("linear"), run("bounded")
    # From 3 (at least 3; a quarter of 10 is less), which delivers its load, then 6; 4 and 5
    # could beat 6's 96,000 (n x 25,500); 1 and 2 cannot beat 3's 74,000.
    assert [r.instances for r in bounded] == [3, 6, 4, 5, 7]
    assert len(bounded) < len(linear)
    assert [k.value for k in stress_search.select_kpis(bounded)] == [
        k.value for k in stress_search.select_kpis(linear)
    ]
    assert stress_search.select_kpis(bounded)[0].metadata["instances"] == 5


def test_bounded_search_measures_a_skipped_step_when_it_could_hold_the_sla_kpi():
    p99 = dict(enumerate(P99_PEAK5, 1)) | {4: 3.5}  # 4 now misses the SLA, 3 may meet it

    def measure(n):
        return steps.StepResult(n, min(0.995 * 25_000 * n, PEAK5[n - 1]), p99[n])

    # from 2, doubling steps over 3
    linear, bounded = run("linear", measure=measure), run("bounded", measure=measure, first_step=2)
    assert [r.instances for r in bounded] == [2, 4, 5, 6, 7, 3]
    sla_linear, sla_bounded = (stress_search.select_kpis(h)[1] for h in (linear, bounded))
    assert sla_linear.value == sla_bounded.value == 74_000
    assert sla_bounded.metadata["instances"] == 3


# Falls once after the peak, recovers, then falls twice: the anchor's code stopped at 7.
DIP = (25_000, 50_000, 74_000, 92_000, 100_000, 96_000, 98_000, 90_000, 84_000, 78_000)


def measure_dip(n: int) -> steps.StepResult:
    return steps.StepResult(n, min(0.995 * 25_000 * n, DIP[n - 1]), P99_PEAK5[n - 1], 2.0)


def test_linear_search_goes_on_until_two_successive_falls():
    assert [r.instances for r in run("linear", measure=measure_dip)] == list(range(1, 10))


def test_bounded_search_measures_above_the_peak_what_linear_would():
    linear, bounded = run("linear", measure=measure_dip), run("bounded", measure=measure_dip)
    assert [r.instances for r in bounded] == [3, 6, 4, 5, 7, 8, 9]
    assert [k.value for k in stress_search.select_kpis(bounded)] == [
        k.value for k in stress_search.select_kpis(linear)
    ]


def test_first_step_is_a_quarter_of_the_instances_at_least_3_within_the_range():
    first = stress_search.first_bounded_step
    assert [first(m) for m in (1, 2, 3, 8, 12, 16, 18, 32)] == [1, 2, 3, 3, 3, 4, 4, 8]
    assert first(16, min_instances=6) == 6 and first(16, asked=2) == 2 and first(4, asked=9) == 4


def test_first_step_measures_fewer_steps_beyond_the_proof_than_starting_at_2():
    """Peaks anywhere from 1 to max_instances, three saturations: the steps measured beyond
    those that prove the KPIs (simulator.proof_steps), summed over max_instances 4..16."""

    def excess(first_step):
        total = 0
        for m in range(4, 17):
            for sat in (0.6, 0.8, 0.95):
                for peak in range(1, m + 1):
                    server = simulator.SimulatedServer(
                        simulator.peaked_capacity(peak, m, saturation=sat)
                    )
                    ran = stress_search.run_search(
                        lambda n, s=server: (s.measure(n, 25_000.0), {}),
                        m,
                        search="bounded",
                        target_per_process=25_000.0,
                        first_step=first_step(m),
                    )
                    total += len(ran.history) - len(simulator.proof_steps(server))
        return total

    default, from_2 = excess(stress_search.first_bounded_step), excess(lambda m: 2)
    assert 0 < default < 0.6 * from_2


def test_bounded_search_needs_a_target():
    assert [r.instances for r in run("bounded", target_per_process=None)] == [1, 2, 3, 4, 5, 6, 7]
    with pytest.raises(ValueError, match="search must be"):
        stress_search.next_step([], 4, search="binary")


def test_search_stops_at_the_instance_limit_and_warns():
    def rising(n):
        return steps.StepResult(n, 0.995 * 25_000 * n, 1.0)

    for search in ("linear", "bounded"):
        h = run(search, measure=rising, max_instances=6)
        assert max(r.instances for r in h) == 6
        top = stress_search.select_kpis(h, max_instances=6)[0]
        assert top.metadata["instances"] == 6
        assert "largest instance count tried, 6 (the instance limit)" in top.metadata["warning"]
    assert [r.instances for r in run("bounded", measure=rising, max_instances=6)] == [3, 6]
    assert [r.instances for r in run("bounded", measure=rising, max_instances=6, first_step=2)] == [
        2, 4, 6,
    ]  # fmt: skip


def test_sla_kpi_is_zero_with_a_reason_when_no_step_meets_it():
    h = run("linear")
    top, sla = stress_search.select_kpis(h, sla_ms=0.5)
    assert sla.value == 0 and sla.unit == "ops/sec"
    assert sla.metadata["reason"] == (
        "no step met read p99 <= 0.5 ms; the lowest read p99 was 0.9 ms with 1 instance(s)"
    )
    assert top.value == 100_000
    with pytest.raises(ValueError):
        stress_search.select_kpis([])


def test_step_kpis():
    h = run("linear")[:2]
    kpis = stress_search.step_kpis(h)
    # PKB's ycsb_stats names and units, as mongodb_ycsb's samples
    per_step = [
        ("overall Throughput", "ops/sec"),
        ("read p99 latency", "ms"),
        ("read 99thPercentileLatency", "ms"),
        ("update p99 latency", "ms"),
        ("update 99thPercentileLatency", "ms"),
    ]
    assert [(k.metric, k.unit) for k in kpis] == per_step * 2
    assert [k.value for k in kpis[:5]] == [
        h[0].throughput,
        h[0].read_p99_ms,
        h[0].read_p99_ms,
        h[0].update_p99_ms,
        h[0].update_p99_ms,
    ]
    assert [k.metadata["step"] for k in kpis] == [1] * 5 + [2] * 5


# ----------------------------------------------------------------------------- simulated server


@pytest.mark.parametrize("peak", range(1, 12))
def test_simulated_peaks_found_with_load_once(peak):
    server = simulator.SimulatedServer(simulator.peaked_capacity(peak, 16))
    anchor = simulator.simulate(server, search="anchor")
    linear = simulator.simulate(server, search="linear")
    bounded = simulator.simulate(server, search="bounded")
    assert anchor.peak == linear.peak == bounded.peak == peak
    assert anchor.sla_peak == linear.sla_peak == bounded.sla_peak
    n = len(anchor.steps)
    assert n == min(peak + 2, 16) if peak > 1 else n == 3
    # Records: the anchor reloads every instance at every step, we load each once.
    assert anchor.records_loaded == n * (n + 1) // 2 * R
    assert linear.records_loaded == n * R
    assert bounded.records_loaded <= 2 * n * R
    # one step more than the anchor where the peak is at 1: the first step is above it
    assert len(bounded.steps) <= len(anchor.steps) + (peak == 1)
    assert bounded.wall_seconds < anchor.wall_seconds and linear.wall_seconds < anchor.wall_seconds


def test_wall_time_at_eight_steps_within_a_third_of_the_anchor():
    server = simulator.SimulatedServer(simulator.peaked_capacity(6, 16))  # anchor: steps 1..8
    cost = simulator.CostModel()
    anchor = simulator.simulate(server, search="anchor", cost=cost)
    bounded = simulator.simulate(server, search="bounded", cost=cost)
    assert anchor.steps == tuple(range(1, 9))
    # Wall time by hand: anchor step n loads n instances (server-bound) then runs.
    step = cost.step_seconds + cost.step_overhead_seconds
    per_instance = R / cost.load_capacity
    expected = sum(cost.load_overhead_seconds + n * per_instance + step for n in range(1, 9))
    assert anchor.wall_seconds == pytest.approx(expected)
    assert bounded.wall_seconds / anchor.wall_seconds <= 1 / 3


@pytest.mark.parametrize("sigma", [0.02, 0.05])
def test_noisy_server_same_kpis_unless_the_anchor_stopped_early(sigma):
    steps_anchor = steps_bounded = differ = 0
    for peak in (3, 5, 6, 8):
        for seed in range(40):
            server = simulator.SimulatedServer(
                simulator.peaked_capacity(peak, 16), noise=simulator.noise(16, sigma, seed)
            )
            a = simulator.simulate(server, search="anchor")
            b = simulator.simulate(server, search="bounded")
            steps_anchor += len(a.steps)
            steps_bounded += len(b.steps)
            if a.kpis[0].value != b.kpis[0].value:
                differ += 1
                # Only when noise made the anchor stop before the peak: then ours is higher.
                assert b.kpis[0].value > a.kpis[0].value and max(a.steps) < b.peak
            if a.kpis[1].value != b.kpis[1].value:
                assert b.kpis[1].value > a.kpis[1].value
    assert steps_bounded < steps_anchor
    assert differ <= 8  # of 160 runs


# ----------------------------------------------------------------------------- load checks


def test_load_result_checks_the_key_range():
    text = (DATA / "seed002_load_100000.txt").read_text()
    (proc,) = steps.plan_step(1, loaded=(), clients=1, records=100_000, hosts=("h",)).load
    assert steps.load_result(proc, 0, text).ops["INSERT"].operations == 100_000
    (short,) = steps.plan_step(1, loaded=(), clients=1, records=200_000, hosts=("h",)).load
    with pytest.raises(steps.StepError, match="100000 records inserted, expected 200000"):
        steps.load_result(short, 0, text)
    with pytest.raises(
        steps.StepError, match="loading instance 0 .*: YCSB exited with status 1; output ends"
    ):
        steps.load_result(proc, 1, text)
    dead = (DATA / "standin_dead_port.txt").read_text()
    with pytest.raises(steps.StepError, match="loading instance 0 .*YCSB"):
        steps.load_result(proc, 0, dead)


# ----------------------------------------------------------------------------- remote processes
# The commands are run here with the local bash, as they run over ssh on a VM.


def sleeper(marker: str, seconds: int = 30) -> list[str]:
    """A process whose command line holds `marker` (the run's path) and that sleeps."""
    return [sys.executable, "-c", f"import time; time.sleep({seconds})", marker]


def live_members(sid: int) -> list[str]:
    """Processes of session `sid` that have not exited (zombies wait for a reaper: dead)."""
    out = sh(f"ps -o pid=,stat= -s {sid}", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if "Z" not in line.split()[1]]


def sh(cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", cmd], capture_output=True, text=True, timeout=60, check=check
    )


def states(entries, marker):
    return processes.parse_process_states(
        sh(processes.process_states_command(entries, marker=marker)).stdout
    )


def test_background_process_pid_state_and_stop(tmp_path):
    d = str(tmp_path)
    pid_file, out = f"{d}/sleep.pid", f"{d}/sleep.out"
    # the marker is a path of this run: it must be on the command line of the process
    cmd = processes.background_command(sleeper(d), processes.Launch(pid_file=pid_file, stdout=out))
    p = sh(cmd)  # returns at once, prints the PID
    pid = int(p.stdout.strip())
    assert int(pathlib.Path(pid_file).read_text()) == pid
    # The PID is the process itself (setsid execs it); just after the fork its command
    # line may still be the shell's, so wait for the exec.
    cmdline = pathlib.Path(f"/proc/{pid}/cmdline")
    poll_until(lambda: ("time.sleep(30)\0" in cmdline.read_text(), None), timeout=5, interval=0.01)
    assert sh(f"ps -o sid= -p {pid}").stdout.strip() == str(pid)  # its own session
    assert states([("s", pid_file, None)], d) == {"s": processes.ProcessState("running", pid)}
    # another run's marker does not match: a reused PID is never taken for ours
    assert states([("s", pid_file, None)], "/elsewhere")["s"].state == "gone"
    sh(processes.stop_processes_command([pid_file], marker=d, timeout_s=5))
    assert live_members(pid) == []
    assert not pathlib.Path(pid_file).exists()
    assert states([("s", pid_file, None)], d)["s"].state == "gone"


def test_background_limits_fall_back_to_the_hard_limit(tmp_path):
    d = str(tmp_path)
    pid_file = f"{d}/l.pid"
    # above fs.nr_open: not even root may set it, so the hard limit is used and said
    p = sh(
        processes.background_command(
            sleeper(d),
            processes.Launch(pid_file=pid_file, stdout=f"{d}/o", nofile=10**9, nproc=100),
        )
    )
    pid = int(p.stdout.split()[-1])
    limits = pathlib.Path(f"/proc/{pid}/limits").read_text()
    hard = sh("ulimit -Hn").stdout.strip()
    assert f"open files limit stays at {hard}, not 1000000000" in p.stderr
    nofile = next(line for line in limits.splitlines() if line.startswith("Max open files"))
    assert nofile.split()[3] == hard
    nproc = next(line for line in limits.splitlines() if line.startswith("Max processes"))
    assert nproc.split()[2] == "100"  # a limit that can be set is set
    sh(processes.stop_processes_command([pid_file], marker=d))


def test_background_process_exit_status(tmp_path):
    d = str(tmp_path)
    entries = []
    for name, code in (("ok", 0), ("bad", 3)):
        pid_file, rc = f"{d}/{name}.pid", f"{d}/{name}.rc"
        argv = ["bash", "-c", f"echo out-{name}; echo err-{name} >&2; exit {code}", d]
        sh(
            processes.background_command(
                argv,
                processes.Launch(
                    pid_file=pid_file,
                    stdout=f"{d}/{name}.out",
                    stderr=f"{d}/{name}.err",
                    rc_file=rc,
                ),
            )
        )
        entries.append((name, pid_file, rc))
    for _ in range(50):
        got = states(entries, d)
        if all(s.state == "exited" for s in got.values()):
            break
        time.sleep(0.1)
    assert got == {
        "ok": processes.ProcessState("exited", 0),
        "bad": processes.ProcessState("exited", 3),
    }
    assert (tmp_path / "bad.out").read_text() == "out-bad\n"
    assert (tmp_path / "bad.err").read_text() == "err-bad\n"


def test_stopped_process_reports_its_signal(tmp_path):
    d = str(tmp_path)
    pid_file, rc = f"{d}/s.pid", f"{d}/s.rc"
    sh(
        processes.background_command(
            sleeper(d, 60), processes.Launch(pid_file=pid_file, stdout=f"{d}/o", rc_file=rc)
        )
    )
    sh(processes.stop_processes_command([pid_file], marker=d, timeout_s=5))
    for _ in range(50):
        if (tmp_path / "s.rc").exists() and (tmp_path / "s.rc").read_text().strip():
            break
        time.sleep(0.1)
    assert (tmp_path / "s.rc").read_text().strip() == "143"  # SIGTERM: not a finished run


def test_stop_kills_the_whole_session_only_when_asked(tmp_path):
    d = str(tmp_path)
    pid_file = f"{d}/tree.pid"
    # a parent that ignores SIGTERM and has a child: like stress-ng and its workers
    script = "trap '' TERM; sleep 60 & wait"
    sh(
        processes.background_command(
            ["bash", "-c", script, d], processes.Launch(pid_file=pid_file, stdout=f"{d}/o")
        )
    )
    pid = int((tmp_path / "tree.pid").read_text())
    time.sleep(0.3)
    assert len(live_members(pid)) == 2
    sh(processes.stop_processes_command([pid_file], marker=d, timeout_s=1, session=True))
    time.sleep(0.2)
    assert live_members(pid) == []


def test_wait_ready_fails_fast_when_the_server_died(tmp_path):
    d = str(tmp_path)
    pid_file = f"{d}/srv.pid"
    sh(
        processes.background_command(
            ["bash", "-c", "exit 1", d], processes.Launch(pid_file=pid_file, stdout=f"{d}/o")
        )
    )
    time.sleep(0.2)
    t0 = time.time()
    p = sh(
        processes.wait_ready_command(pid_file, "127.0.0.1", 9, marker=d, timeout_s=30), check=False
    )
    assert p.returncode == 2 and "exited" in p.stderr
    assert time.time() - t0 < 5


def test_wait_ready_sees_a_listening_port(tmp_path):
    import socket

    d = str(tmp_path)
    pid_file = f"{d}/srv.pid"
    sh(
        processes.background_command(
            sleeper(d), processes.Launch(pid_file=pid_file, stdout=f"{d}/o")
        )
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = sh(processes.wait_ready_command(pid_file, "127.0.0.1", port, marker=d, timeout_s=5))
        assert p.returncode == 0
    sh(processes.stop_processes_command([pid_file], marker=d))


def test_pid_files_listing(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.pid").write_text("1")
    (tmp_path / "y.pid").write_text("1")
    (tmp_path / "z.rc").write_text("0")
    listed = sh(processes.pid_files_command(str(tmp_path))).stdout.split()
    assert sorted(listed) == sorted([str(tmp_path / "a" / "x.pid"), str(tmp_path / "y.pid")])
    assert sh(processes.pid_files_command(str(tmp_path / "missing"))).stdout == ""


@pytest.mark.skipif(not shutil.which("stress-ng"), reason="stress-ng not installed")
def test_stress_ng_hold_is_measured_and_stopped(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("--vm-locked needs root")
    d = str(tmp_path)
    hold = 32 * 1024 * 1024
    (cmd,) = placement.stress_ng_commands(hold, workers=2, yaml_path=f"{d}/h.yaml", timeout_s=60)
    pid_file = f"{d}/h.pid"
    sh(processes.background_command(cmd, processes.Launch(pid_file=pid_file, stdout=f"{d}/h.out")))
    held = 0
    for _ in range(100):
        held = processes.sum_kib(sh(processes.locked_memory_command([pid_file], marker=d)).stdout)
        if held >= hold:
            break
        time.sleep(0.1)
    assert hold <= held < hold + 8 * 1024 * 1024
    pid = int((tmp_path / "h.pid").read_text())
    sh(processes.stop_processes_command([pid_file], marker=d, timeout_s=10, session=True))
    time.sleep(0.2)
    assert live_members(pid) == []


@pytest.mark.skipif(not shutil.which("stress-ng"), reason="stress-ng not installed")
def test_stress_ng_hold_is_resident_once_rss_anon_says_so(tmp_path):
    """VmLck counts the locked mapping before stress-ng has touched its pages; the hold is in
    force once the workers' anonymous resident memory (RssAnon, what the PKB wing's Held
    reads beside VmLck) reaches it."""
    if os.geteuid() != 0:
        pytest.skip("--vm-locked needs root")
    d = str(tmp_path)
    hold = 64 * 1024 * 1024
    (cmd,) = placement.stress_ng_commands(hold, workers=2, yaml_path=f"{d}/h.yaml", timeout_s=60)
    pid_file = f"{d}/h.pid"
    sh(processes.background_command(cmd, processes.Launch(pid_file=pid_file, stdout=f"{d}/h.out")))
    try:
        resident = 0
        for _ in range(300):
            cmd = processes.locked_memory_command([pid_file], marker=d, field="RssAnon")
            resident = processes.sum_kib(sh(cmd).stdout)
            if resident >= hold - 1024 * 1024:
                break
            time.sleep(0.1)
        assert hold - 1024 * 1024 <= resident < hold + 16 * 1024 * 1024
        locked = processes.sum_kib(sh(processes.locked_memory_command([pid_file], marker=d)).stdout)
        assert locked >= hold - 1024 * 1024
    finally:
        sh(processes.stop_processes_command([pid_file], marker=d, timeout_s=10, session=True))


def test_command_helpers_reject_bad_input():
    with pytest.raises(ValueError):
        processes.process_states_command([("a b", "/p", None)], marker="/m")
    with pytest.raises(ValueError):
        processes.locked_memory_command(["/p"], marker="/m", field="x; rm")
    assert "RssAnon" in processes.locked_memory_command(["/p"], marker="/m", field="RssAnon")
    assert processes.stop_processes_command([], marker="/m") == "true"


@pytest.mark.parametrize(
    "text,major",
    [
        ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment', 17),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ('openjdk version "11.0.2" 2019-01-15', 11),
    ],
)
def test_java_major_version(text, major):
    assert probes.java_major_version(text) == major


def test_java_major_version_rejects_other_output():
    with pytest.raises(ValueError, match="no version"):
        probes.java_major_version("bash: java: command not found")


def test_host_fact_parsers():
    assert probes.parse_cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert probes.parse_cpu_list("0") == [0]
    with pytest.raises(ValueError):
        probes.parse_cpu_list("0-x")
    assert probes.parse_df_avail("   Avail\n123456789\n") == 123456789
    with pytest.raises(ValueError):
        probes.parse_df_avail("Avail\n")
    assert processes.sum_kib("12\n32768\n\n32768\n") == (12 + 2 * 32768) * 1024


def test_stop_with_session_waits_until_orphaned_workers_are_gone(tmp_path):
    # issue 22: the engine ended on SIGTERM and its workers, orphaned, kept running (30 s
    # seen, their work directory already deleted). With `session` (the engine's Cleanup),
    # the command returns once every process of the engine's session is gone.
    d = str(tmp_path)
    pid_file = f"{d}/engine.pid"
    script = "(trap '' TERM; sleep 60) & (trap '' TERM; sleep 60) & sleep 60"
    sh(
        processes.background_command(
            ["bash", "-c", script, d],
            processes.Launch(pid_file=pid_file, stdout=f"{d}/o", rc_file=f"{d}/rc"),
        )
    )
    pid = int((tmp_path / "engine.pid").read_text())
    sid = int(sh(f"ps -o sid= -p {pid}").stdout)
    poll_until(lambda: (len(live_members(sid)) >= 4, None), timeout=5, interval=0.05)
    t0 = time.monotonic()
    sh(processes.stop_processes_command([pid_file], marker=d, timeout_s=5, session=True))
    assert live_members(sid) == []  # no sleep first: gone when the command returns
    assert time.monotonic() - t0 < processes.SESSION_GRACE_S + processes.SESSION_GONE_S + 2


def test_step_result_and_its_samples_carry_p50_beside_p99():
    text = (DATA / "standin_run_ok.txt").read_text()
    r = steps.step_result(2, outputs(2, text))
    assert (r.read_p50_ms, r.update_p50_ms) == (0.956, 1.783)
    assert r.metadata()["p50_read_latency_ms"] == 0.956
    got = {k.metric: k.value for k in stress_search.step_kpis([r])}
    assert got["read p50 latency"] == got["read 50thPercentileLatency"] == 0.956
    assert got["update p50 latency"] == 1.783 and got["read p99 latency"] == 10.263
    plan = steps.plan_step(1, loaded=[], clients=1, records=100, hosts=["h"])
    asked = props_dict(steps.run_properties(plan.run[0], NO_HDR, directory="/w"))
    assert {"50", "95", "99"} <= set(asked["hdrhistogram.percentiles"].split(","))
