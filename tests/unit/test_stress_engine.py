"""The engine pieces the mongodb_stress PKB module calls: server facts, memory hold plans, run
metadata, the search loop and its samples, one mongod/mongos config builder, one p99 merge."""

from __future__ import annotations

import pathlib
import platform
import subprocess

import pytest
import yaml

from mongobench.core import units
from mongobench.deploy import mongod
from mongobench.remote import probes
from mongobench.stress import placement, search, sizing, steps
from mongobench.stress import report as stress_report
from mongobench.stress.settings import StressSettings
from mongobench.ycsb import merge, parse
from testbed import simulator

GiB = units.GiB
DATA = pathlib.Path(__file__).resolve().parent.parent / "data"


def host_file(name: str) -> str:
    return (DATA / "hosts" / name).read_text()


# ----------------------------------------------------------------------------- server facts


def facts_output(df="Avail\n5368709120\n", nodes="2\n", numactl=None, ip=None) -> str:
    numactl = host_file("numactl-2node-split.txt") if numactl is None else numactl
    ip = host_file("ip-o-addr-2nic.txt") if ip is None else ip
    lscpu = host_file("lscpu-1socket-ht.txt")
    return "---".join([df, nodes, "0-7\n", numactl, lscpu, ip])


def test_server_facts_command_runs_and_parses_here(tmp_path):
    out = subprocess.run(
        ["bash", "-c", probes.server_facts_command(str(tmp_path))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    parsed = probes.parse_server_facts(out)
    assert probes.parse_df_avail(parsed["df"]) > 0
    assert parsed["numa_nodes"] >= 1 and parsed["cpus"]
    assert {c for node in parsed["numa"] for c in node.cpus} <= set(parsed["cpus"])


def test_parse_server_facts():
    parsed = probes.parse_server_facts(facts_output())
    assert parsed["numa_nodes"] == 2 and parsed["cpus"] == list(range(8))
    assert [n.id for n in parsed["numa"]] == [0, 1]
    assert parsed["cores"] == probes.parse_lscpu_cores(host_file("lscpu-1socket-ht.txt"))
    assert [a.interface for a in parsed["interfaces"]] == [
        a.interface for a in probes.parse_ip_addr(host_file("ip-o-addr-2nic.txt"))
    ]
    bare = probes.parse_server_facts(facts_output(nodes="\n", numactl="", ip=""))
    # no NUMA information: one node with every CPU; no `ip`: no address check
    assert bare["numa_nodes"] == 1
    assert bare["numa"] == (probes.NumaNode(0, tuple(range(8))),)
    assert bare["interfaces"] is None


def test_sizing_inputs_prefer_flags_over_the_server():
    parsed = probes.parse_server_facts(facts_output())
    server = sizing.server_sizing_inputs(parsed, vm_memory_bytes=64 * GiB, vm_vcpus=16)
    assert (server["memory_bytes"], server["vcpus"], server["disk_free_bytes"]) == (
        64 * GiB,
        16,
        5 * GiB,
    )
    assert server["sources"] == {"memory": "server", "vcpus": "server", "disk_free": "server"}
    assert server["numa"] is parsed["numa"] and server["interfaces"] is parsed["interfaces"]
    # flags win; an unreadable df does not matter then, and disk 0 is a value, not "unset"
    parsed["df"] = "df: cannot access"
    flagged = sizing.server_sizing_inputs(
        parsed, vm_memory_bytes=64 * GiB, vm_vcpus=16, memory_gb=1.5, vcpus=4, disk_gb=0.0
    )
    assert (flagged["memory_bytes"], flagged["vcpus"], flagged["disk_free_bytes"]) == (
        int(1.5 * GiB),
        4,
        0,
    )
    assert flagged["sources"] == {"memory": "flag", "vcpus": "flag", "disk_free": "flag"}
    with pytest.raises(ValueError, match="no number in df output"):
        sizing.server_sizing_inputs(parsed, vm_memory_bytes=1, vm_vcpus=1)


# ----------------------------------------------------------------------------- memory hold


def test_hold_plan_single_fixed_and_per_node():
    nodes = probes.parse_numactl_hardware(host_file("numactl-2node-split.txt"))
    usable, m = 360 * GiB, 40 * GiB
    args = dict(nodes=nodes, instance_nodes=[0, 1, 0, 1, 0])
    assert placement.hold_plan(usable, m, 3, **args) == placement.HoldPlan(240 * GiB)
    assert placement.hold_plan(usable, m, 3, fixed_bytes=7, **args) == placement.HoldPlan(7)
    unbound = placement.hold_plan(usable, m, 3, per_node=True, **args)
    assert unbound.hold_bytes == 0 and unbound.cpu_nodes == {0, 1}
    assert unbound.node_bytes == placement.hold_per_node(usable, nodes, [0, 1, 0], m, bound=False)
    bound = placement.hold_plan(usable, m, 3, per_node=True, bound=True, **args)
    assert bound.node_bytes == placement.hold_per_node(usable, nodes, [0, 1, 0], m, bound=True)
    fixed = placement.hold_plan(usable, m, 3, per_node=True, fixed_bytes=10 * GiB, **args)
    assert fixed.node_bytes == placement.split_by_node_size(10 * GiB, nodes)
    cxl = probes.parse_numactl_hardware(host_file("numactl-cxl-memory-node.txt"))
    plan = placement.hold_plan(70 * GiB, 10 * GiB, 1, nodes=cxl, instance_nodes=[0], per_node=True)
    assert plan.cpu_nodes == {0}  # the memory-only node gets a process without CPU binding


# ----------------------------------------------------------------------------- run metadata


def _sizing():
    return sizing.plan_sizing(64 * GiB, 16, 1000 * GiB, records=2_000_000)


def _meta(**kw):
    nodes = probes.parse_numactl_hardware(host_file("numactl-cxl-memory-node.txt"))
    facts = {
        "memory_bytes": 64 * GiB,
        "vcpus": 16,
        "disk_free_bytes": int(999.994 * GiB),
        "numa_nodes": len(nodes),
        "numa": nodes,
        "sources": {"memory": "flag", "vcpus": "server", "disk_free": "server"},
    }
    extra = {k: kw.pop(k) for k in ("numactl_prefixes", "tls_meta") if k in kw}
    return stress_report.run_metadata(
        {"mongodb_version": "8.0.4"},
        _sizing(),
        facts,
        ["10.0.0.1", "10.0.1.1"],
        StressSettings(drop_caches=False, **kw),
        client_vms=2,
        numactl_prefixes=extra.get("numactl_prefixes", [[], []]),
        tls_meta=extra.get("tls_meta", {}),
    )


def test_run_metadata_keys_and_values():
    meta = _meta()
    assert list(meta) == [
        "mongodb_version",
        "server_version",
        "storage_engine",
        "mongobench_version",
        "python_version",
        "pymongo_version",
        "ycsb_binding_version",
        "ycsb_version",
        "java_driver_version",
        *_sizing().metadata(),
        "search",
        "search_first_step",
        "target_ops_per_client",
        "step_seconds",
        "run_threads",
        "load_threads",
        "load_batch_size",
        "workload",
        "client_vms",
        "server_memory_gib",
        "server_vcpus",
        "server_disk_free_gib",
        "server_numa_nodes",
        "server_numa_cpu_nodes",
        "sizing_inputs",
        "server_addresses",
        "first_port",
        "numactl_cpu",
        "numactl_memory",
        "histograms",
        "drop_caches",
        "memory_hold",
        "tls",
    ]
    assert meta["server_memory_gib"] == 64.0 and meta["server_disk_free_gib"] == 999.99
    assert (meta["server_numa_nodes"], meta["server_numa_cpu_nodes"]) == (2, 1)
    assert meta["sizing_inputs"] == "memory:flag,vcpus:server,disk_free:server"
    assert meta["server_addresses"] == "10.0.0.1,10.0.1.1"
    assert meta["workload"] == "90% read / 10% update, zipfian, 10 x 100 B fields"
    assert meta["memory_hold"] == "stress-ng"
    # Provenance: the server's from its deploy (kind unknown here), the engine's and YCSB's.
    assert (meta["server_version"], meta["storage_engine"]) == ("8.0.4", "unknown")
    assert meta["python_version"] == platform.python_version()
    assert meta["java_driver_version"] and meta["ycsb_binding_version"]


def test_run_metadata_hold_numactl_and_tls():
    assert _meta(stress_ng_per_numa=True, hold_gb=2.5)["memory_hold"] == (
        "stress-ng per NUMA node, fixed 2.5 GiB (--mongodb_stress_hold_memory_gb)"
    )
    assert _meta(hold=False, hold_gb=2.5)["memory_hold"] == (
        "skipped (--nomongodb_stress_hold_memory): data may fit in the page cache"
    )
    prefixes = [
        ["numactl", "--cpunodebind=0", "--membind=0", "--"],
        ["numactl", "--cpunodebind=1", "--membind=1", "--"],
    ]
    meta = _meta(
        numactl_memory="bind",
        numactl_prefixes=prefixes,
        tls=True,
        tls_meta={"tls_mode": "requireTLS", "tls_key": "ec"},
    )
    assert list(meta)[-4:] == ["tls", "numactl_instances", "tls_mode", "tls_key"]
    assert (
        meta["numactl_instances"] == "0:--cpunodebind=0 --membind=0;1:--cpunodebind=1 --membind=1"
    )
    assert stress_report.numactl_description([[], []]) == "0:;1:"


# ----------------------------------------------------------------------------- search loop


def _server():
    return simulator.SimulatedServer(simulator.peaked_capacity(3, 8))


def test_run_search_runs_next_step_and_logs():
    server, logs = _server(), []
    found = search.run_search(
        lambda n: (server.measure(n, 25000), {"n": n}),
        server.max_instances,
        log=lambda m, problem=False: logs.append((m, problem)),
    )
    assert [r.instances for r in found.history] == [1, 2, 3, 4, 5]
    assert found.infos == [{"n": n} for n in range(1, 6)] and found.failure is None
    assert logs[0] == ("step 1 with 1 instance(s)", False)
    r = found.history[0]
    assert logs[1] == (
        f"1 instance(s): {r.throughput:.1f} ops/s, read p99 {r.read_p99_ms} ms",
        False,
    )
    # same schedule as next_step called by hand
    history = []
    while (n := search.next_step(history, 8)) is not None:
        history.append(server.measure(n, 25000))
    assert history == found.history


def test_run_search_ends_at_a_failed_step_and_lets_other_errors_through():
    server, logs = _server(), []

    def step(n):
        if n == 3:
            raise steps.StepError("step 3: mongod instance(s) not running")
        return server.measure(n, 25000), {}

    found = search.run_search(
        step, 8, search="linear", log=lambda m, problem=False: logs.append((m, problem))
    )
    assert [r.instances for r in found.history] == [1, 2]
    assert found.failure == (3, 3, "step 3: mongod instance(s) not running")
    assert logs[-1] == ("step 3: mongod instance(s) not running", True)

    def broken(n):
        raise KeyError("not a step failure")

    with pytest.raises(KeyError):
        search.run_search(broken, 8)


def test_search_samples_order_and_metadata():
    server = _server()
    found = search.run_search(lambda n: (server.measure(n, 25000), {"load_seconds": n}), 8)
    out = stress_report.search_samples(
        found,
        metadata={"run": "x"},
        search_seconds=12.5,
        records_loaded=5_000,
        sla_ms=3.0,
        mongodb_version="8.0.4",
        max_instances=8,
    )
    metrics = [s["metric"] for s in out]
    per_step = [
        "overall Throughput",
        "read p99 latency",
        "read 99thPercentileLatency",
        "update p99 latency",
        "update 99thPercentileLatency",
    ]
    assert metrics == per_step * 5 + [
        "Records Loaded",
        "Maximum Throughput",
        "Maximum Throughput for Latency SLA",
    ]
    assert out[0]["metadata"]["load_seconds"] == 1 and out[-4]["metadata"]["load_seconds"] == 5
    assert out[-3] == {
        "metric": "Records Loaded",
        "value": 5000.0,
        "unit": "records",
        "metadata": {"run": "x", "search_seconds": 12.5},
    }
    assert out[-2]["metadata"]["instances"] == 3 and out[-2]["metadata"]["search_seconds"] == 12.5


def test_search_samples_after_a_failure():
    server = _server()
    found = search.Search(
        history=[server.measure(1, 25000)], infos=[{}], failure=(2, 2, "E" * 2500)
    )
    out = stress_report.search_samples(
        found,
        metadata={"run": "x"},
        search_seconds=1.0,
        records_loaded=0,
        sla_ms=3.0,
        mongodb_version=None,
        max_instances=8,
    )
    assert [s["metric"] for s in out] == [
        "Step Failed",
        "overall Throughput",
        "read p99 latency",
        "read 99thPercentileLatency",
        "update p99 latency",
        "update 99thPercentileLatency",
        "Records Loaded",
    ]  # no KPIs from a search that did not finish
    assert out[0] == {
        "metric": "Step Failed",
        "value": 1.0,
        "unit": "count",
        "metadata": {"run": "x", "step": 2, "instances": 2, "error": "E" * 2000},
    }


# ----------------------------------------------------------------------------- mongod config


def test_instance_config_roles_and_port():
    def conf(port=None, **kw):
        options = mongod.InstanceOptions(**kw)
        text = mongod.instance_config(2, options, base_dir="/w", version="8.0.4", port=port)
        return yaml.safe_load(text)

    plain = conf()
    assert plain["net"]["port"] == 27019
    assert plain["storage"]["wiredTiger"]["engineConfig"]["cacheSizeGB"] == 1.0  # default
    shard = conf(port=30000, role="shardsvr", replset="shard0", cache_gb=2)
    assert shard["net"]["port"] == 30000
    assert shard["sharding"] == {"clusterRole": "shardsvr"}
    assert shard["replication"] == {"replSetName": "shard0"}
    router = conf(role="mongos", config_db="cfg/a:27019", tls_certificate_key_file="/w/s.pem")
    assert "storage" not in router
    assert router["sharding"] == {"configDB": "cfg/a:27019"}
    assert router["net"] == {
        "port": 27019,
        "bindIp": "127.0.0.1",
        "tls": {"mode": "requireTLS", "certificateKeyFile": "/w/s.pem"},
    }
    with pytest.raises(ValueError, match="a mongos needs config_db"):
        conf(role="mongos")
    with pytest.raises(ValueError, match="must be replica sets"):
        conf(role="configsvr")


# ----------------------------------------------------------------------------- p99 merge


def test_merged_op_histogram_and_op_p99():
    ycsb = DATA / "ycsb"
    text = (ycsb / "standin_run_hdr212.txt").read_text()
    hdr = {op: (ycsb / f"standin_hdr212_{op}.hdr").read_text() for op in ("READ", "UPDATE")}
    parsed = [parse.parse_output(text)] * 2
    merged = merge.merged_op_histogram([hdr, hdr], "READ")
    assert (
        merged.get_total_count() == 2 * merge.merged_op_histogram([hdr], "READ").get_total_count()
    )
    assert merge.op_p99(parsed[:1], [hdr], "READ") == (5.851, "merged histograms")
    # a process without its log, a damaged log, only empty logs: the printed p99s' maximum
    empty = {"READ": "#[Histogram log format version 1.3]\n"}
    for logs in ([hdr, {"UPDATE": hdr["UPDATE"]}], [hdr, {"READ": "1,2,3,x"}], [empty, empty]):
        assert merge.merged_op_histogram(logs, "READ") is None
        assert merge.op_p99(parsed, logs, "READ") == (5.851, "max over processes")
    assert merge.op_p99(parsed, [{}, {}], "SCAN") == (None, "missing")


def test_bounded_looks_for_the_sla_step_from_the_top():
    # Steps 5..8 are over the SLA, step 2 within it. Steps 3 and 4 could both beat step 2
    # within the SLA: the highest goes first, and when it meets the SLA the lower one cannot
    # beat it (3 x 25,500 < 99,500), so one step is saved; the KPIs are the same either way.
    def r(n, thr, p99):
        return steps.StepResult(n, thr, p99)

    history = [r(2, 49_750, 1.5), r(8, 114_000, 9.0), r(5, 118_000, 9.0)]
    history += [r(6, 120_000, 9.0), r(7, 118_500, 9.0)]
    assert search.next_step(history, 16, search="bounded") == 4  # was 3
    done = [*history, r(4, 99_500, 2.5)]
    assert search.next_step(done, 16, search="bounded") is None
    over = [*history, r(4, 99_500, 4.0)]  # 4 over the SLA too: then 3
    assert search.next_step(over, 16, search="bounded") == 3
