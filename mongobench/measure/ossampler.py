"""OS metrics of a host during a timed phase: CPU, iowait, data-disk I/O.

Reads /proc/stat and /proc/diskstats every `interval` seconds (a few
microseconds of work), in a thread of the driver or as a process of its own on
a server VM:

    python -m mongobench.measure.ossampler --path /scratch --out os.jsonl

which appends one JSON reading per line until it receives SIGTERM or SIGINT.
`summarize()` turns readings into the seed's Resource Usage figures.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors on every device
_VIRTUAL_PREFIXES = ("loop", "ram", "zram", "dm-", "md", "sr", "nbd")


def read_cpu(text: str) -> dict[str, int]:
    """The aggregate `cpu` line of /proc/stat, in jiffies."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            v = [int(x) for x in line.split()[1:]]
            v += [0] * (8 - len(v))
            user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
            return {
                "busy": user + nice + system + irq + softirq,
                "iowait": iowait,
                "steal": steal,
                "total": sum(v[:8]),
            }
    raise ValueError("no aggregate cpu line in /proc/stat")


def read_disks(text: str) -> dict[str, dict[str, int]]:
    """Per-device I/O counters from /proc/diskstats."""
    disks = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 14:
            continue
        disks[f[2]] = {
            "major": int(f[0]),
            "minor": int(f[1]),
            "reads": int(f[3]),
            "read_sectors": int(f[5]),
            "writes": int(f[7]),
            "write_sectors": int(f[9]),
        }
    return disks


def device_for_path(path: str, disks: dict[str, dict[str, int]]) -> str | None:
    """Name of the block device holding `path`, if /proc/diskstats has it."""
    st = os.stat(path)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    for name, d in disks.items():
        if (d["major"], d["minor"]) == (major, minor):
            return name
    return None


def physical_disks(disks: dict[str, dict[str, int]]) -> list[str]:
    """Whole physical disks, to sum when the data path's device is unknown."""
    names = [n for n in disks if not n.startswith(_VIRTUAL_PREFIXES)]
    # Drop partitions (sda1, nvme0n1p1, vda2) whose parent disk is listed.
    return [n for n in names if not any(n != p and n.startswith(p) for p in names)]


def reading(devices: list[str] | None, proc: str = "/proc") -> dict:
    with open(os.path.join(proc, "stat")) as f:
        stat = f.read()
    with open(os.path.join(proc, "diskstats")) as f:
        diskstats = f.read()
    return reading_of(stat, diskstats, devices, time.time())


def reading_of(stat: str, diskstats: str, devices: list[str] | None, t: float) -> dict:
    """One reading from the texts of /proc/stat and /proc/diskstats taken at `t` (here or
    on another host), summing `devices` (None: every physical disk)."""
    cpu = read_cpu(stat)
    disks = read_disks(diskstats)
    io = {"reads": 0, "read_sectors": 0, "writes": 0, "write_sectors": 0}
    for name in devices if devices is not None else physical_disks(disks):
        d = disks.get(name)
        if d:
            for k in io:
                io[k] += d[k]
    return {"t": t, "cpu": cpu, "io": io}


def summarize(readings: list[dict], ncpu_hint: int | None = None) -> dict[str, float | None]:
    """Averages between the first and last reading (None with fewer than two)."""
    keys = ("cpu_pct", "iowait_pct", "steal_pct", "iops", "read_mb_s", "write_mb_s")
    if len(readings) < 2:
        return dict.fromkeys(keys)
    a, b = readings[0], readings[-1]
    dt = b["t"] - a["t"]
    dtot = b["cpu"]["total"] - a["cpu"]["total"]
    if dt <= 0 or dtot <= 0:
        return dict.fromkeys(keys)
    dio = {k: b["io"][k] - a["io"][k] for k in a["io"]}
    mib = SECTOR_BYTES / (1024 * 1024)
    return {
        "cpu_pct": 100.0 * (b["cpu"]["busy"] - a["cpu"]["busy"]) / dtot,
        "iowait_pct": 100.0 * (b["cpu"]["iowait"] - a["cpu"]["iowait"]) / dtot,
        "steal_pct": 100.0 * (b["cpu"]["steal"] - a["cpu"]["steal"]) / dtot,
        "iops": (dio["reads"] + dio["writes"]) / dt,
        "read_mb_s": dio["read_sectors"] * mib / dt,
        "write_mb_s": dio["write_sectors"] * mib / dt,
    }


def resolve_devices(path: str | None, proc: str = "/proc") -> tuple[list[str] | None, str]:
    """Devices to watch for `path` and a label for metadata."""
    if not os.path.exists(os.path.join(proc, "diskstats")):
        return [], "none"
    with open(os.path.join(proc, "diskstats")) as f:
        disks = read_disks(f.read())
    if path:
        dev = device_for_path(path, disks)
        if dev:
            return [dev], dev
    return None, "all-physical"


class Sampler:
    """Samples in a daemon thread between start() and stop()."""

    def __init__(self, path: str | None = None, interval: float = 1.0):
        self.interval = interval
        self.devices, self.device_label = resolve_devices(path)
        self.readings: list[dict] = []
        self.cpu_s = 0.0  # CPU the sampling itself used: its cost to the client
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="ossampler")

    def start(self) -> Sampler:
        self.readings.append(reading(self.devices))
        self._thread.start()
        return self

    def _loop(self):
        while not self._stop.wait(self.interval):
            t0 = time.thread_time()
            self.readings.append(reading(self.devices))
            self.cpu_s += time.thread_time() - t0

    def stop(self) -> dict[str, float | None]:
        self._stop.set()
        self._thread.join()
        self.readings.append(reading(self.devices))
        return summarize(self.readings)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", help="data directory whose disk to watch")
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--out", required=True, help="JSON-lines file to append to")
    args = parser.parse_args(argv)
    devices, label = resolve_devices(args.path)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with open(args.out, "a") as out:
        out.write(json.dumps({"device": label}) + "\n")
        while True:
            out.write(json.dumps(reading(devices)) + "\n")
            out.flush()
            if stop.wait(args.interval):
                out.write(json.dumps(reading(devices)) + "\n")
                return 0


def load(path: str) -> tuple[str, list[dict]]:
    """Readings written by main(), and the device label."""
    label, readings = "unknown", []
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if "device" in rec:
                label = rec["device"]
            else:
                readings.append(rec)
    return label, readings


if __name__ == "__main__":
    sys.exit(main())


def window(readings: list[dict], start: float, end: float) -> list[dict]:
    """The readings that bracket [start, end]: the last one at or before the
    start through the first one at or after the end, so a 1 s interval still
    covers a phase shorter than it."""
    before = [r for r in readings if r["t"] <= start]
    after = [r for r in readings if r["t"] >= end]
    inside = [r for r in readings if start < r["t"] < end]
    out = before[-1:] + inside + after[:1]
    return out if len(out) >= 2 and out[0]["t"] <= start and out[-1]["t"] >= end else []


def attach_server_os(run: dict, readings_by_host: dict[str, list[dict]]) -> None:
    """Adds `os_server` to every variant of a perftables run from server-VM readings.

    With several server VMs (a replica set), CPU and iowait are the busiest
    host's and disk figures are the busiest host's too (the primary does the
    work); each host's figures are kept under `os_server_hosts`. A variant the
    readings do not cover gets nothing: missing, not zero.
    """
    for res in run.get("results", []):
        if res.get("status") != "ok":
            continue
        start, end = res["start"], res["start"] + res["duration_s"]
        per_host = {}
        for host, readings in readings_by_host.items():
            span = window(readings, start, end)
            if span:
                per_host[host] = summarize(span)
        if not per_host:
            continue
        busiest = max(per_host, key=lambda h: per_host[h]["cpu_pct"] or 0.0)
        res["os_server"] = per_host[busiest]
        res["os_server_hosts"] = per_host
