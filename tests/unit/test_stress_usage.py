"""Server CPU, client CPU and the bottleneck line of each stress step (issue 14, seed 003's
Tuning Notes), and the samples they become."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from mongobench.stress import report as stress_report
from mongobench.stress import search, usage
from testbed import simulator

DISKS = (
    "   8       0 sda {r} 0 {rs} 0 {w} 0 {ws} 0 0 0 0 0 0 0 0 0 0\n"
    "   8       1 sda1 {r} 0 {rs} 0 {w} 0 {ws} 0 0 0 0 0 0 0 0 0 0\n"
    "   7       0 loop0 5 0 10 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
)


def proc_text(t, user, system, idle, iowait, steal=0, reads=0, writes=0, mark=True):
    """What READING_COMMAND prints on a host: epoch seconds, /proc/stat, /proc/diskstats."""
    stat = f"cpu  {user} 0 {system} {idle} {iowait} 0 0 {steal} 0 0\ncpu0 1 2 3 4\nintr 7\n"
    disks = DISKS.format(r=reads, rs=reads * 8, w=writes, ws=writes * 8)
    return f"{t}\n{stat}" + ("--mongobench-diskstats--\n" if mark else "") + disks


def readings(busy_pct, seconds=180.0, iowait_pct=0.0, ios=0):
    """Two readings `seconds` apart whose CPU was `busy_pct` busy (of 10,000 jiffies)."""
    busy, io = int(busy_pct * 100), int(iowait_pct * 100)
    a = usage.parse_reading(proc_text(1000.0, 100, 100, 800, 0))
    b = usage.parse_reading(
        proc_text(1000.0 + seconds, 100 + busy, 100, 800 + 10_000 - busy - io, io, writes=ios)
    )
    return [a, b]


@pytest.mark.skipif(not os.path.exists("/proc/diskstats"), reason="needs Linux /proc")
def test_reading_command_on_this_host():
    out = subprocess.run(["bash", "-c", usage.READING_COMMAND], capture_output=True, text=True)
    r = usage.parse_reading(out.stdout)
    assert abs(r["t"] - time.time()) < 60 and r["cpu"]["total"] > 0


def test_parse_reading_takes_the_hosts_clock_cpu_and_physical_disks():
    r = usage.parse_reading(proc_text("1700000000.250", 300, 100, 600, 50, reads=40, writes=60))
    assert r["t"] == 1700000000.25
    assert r["cpu"] == {"busy": 400, "iowait": 50, "steal": 0, "total": 1050}
    # sda only: its partition and the loop device are not counted again
    assert r["io"] == {"reads": 40, "read_sectors": 320, "writes": 60, "write_sectors": 480}
    with pytest.raises(ValueError, match="not the output"):
        usage.parse_reading(proc_text(1.0, 1, 1, 1, 1, mark=False))


def test_server_cpu_bound_step():
    info = usage.step_usage(
        readings(96.0, iowait_pct=2.0, ios=18_000),
        {"client-0": readings(40.0), "client-1": readings(55.0)},
        throughput=70_000,
        offered=100_000,
    )
    assert info["server_cpu_pct"] == 96.0 and info["server_iowait_pct"] == 2.0
    assert info["server_disk_iops"] == 100.0  # 18,000 writes in 180 s
    assert info["client_cpu_pct"] == 55.0 and info["client_cpu_busiest_vm"] == "client-1"
    assert info["offered_load_pct"] == 70.0
    assert info["bottleneck"] == "server CPU (96%, os sampler)"
    assert usage.tuning_note(info) is None  # > 90 %: nothing to check


def test_client_bound_and_offered_load_bound_steps():
    client = usage.step_usage(
        readings(45.0), {"c0": readings(97.0)}, throughput=60_000, offered=100_000
    )
    assert client["bottleneck"] == "client CPU (97%, client VM)"
    note = usage.tuning_note(client)
    assert note.startswith("server CPU 45% (not > 90%): check whether network or storage")
    # every process got what it offered: the target, not the server, set the throughput
    offered = usage.step_usage(
        readings(30.0), {"c0": readings(20.0)}, throughput=49_750, offered=50_000
    )
    assert offered["bottleneck"] == ("offered load (100% of 50000 ops/s; highest: server CPU 30%)")
    none = usage.step_usage([], {"c0": []}, throughput=1.0, offered=None)
    assert none["bottleneck"] == "unknown (no figures)" and none["server_cpu_pct"] is None
    assert none["client_cpu_busiest_vm"] is None and usage.tuning_note(none) is None


def test_search_samples_carry_each_steps_cpu_and_the_peaks_bottleneck():
    server = simulator.SimulatedServer(simulator.peaked_capacity(3, 8))
    cpu = {1: 30.0, 2: 55.0, 3: 80.0, 4: 88.0, 5: 89.0}

    def step(n):
        result = server.measure(n, 25_000)
        info = usage.step_usage(
            readings(cpu[n]), {"c0": readings(20.0)}, throughput=1.0, offered=None
        )
        return result, info

    found = search.run_search(step, 8)
    out = stress_report.search_samples(
        found,
        metadata={"run": "x"},
        search_seconds=1.0,
        records_loaded=1,
        sla_ms=3.0,
        mongodb_version=None,
        max_instances=8,
    )
    server_cpu = [s for s in out if s["metric"] == "Server CPU Usage"]
    assert [(s["value"], s["unit"], s["metadata"]["step"]) for s in server_cpu] == [
        (cpu[n], "%", n) for n in range(1, 6)
    ]
    assert server_cpu[2]["metadata"]["bottleneck"] == "server CPU (80%, os sampler)"
    assert len([s for s in out if s["metric"] == "Client CPU Usage"]) == 5
    top = next(s for s in out if s["metric"] == "Maximum Throughput")
    assert top["metadata"]["instances"] == 3 and top["metadata"]["server_cpu_pct"] == 80.0
    assert top["metadata"]["bottleneck"] == "server CPU (80%, os sampler)"
    assert "server CPU 80% (not > 90%)" in top["metadata"]["tuning_note"]
    sla = next(s for s in out if s["metric"] == "Maximum Throughput for Latency SLA")
    assert "tuning_note" not in sla["metadata"]
