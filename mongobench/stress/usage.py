"""What a stress step used: CPU and disk of the server and CPU of the client VMs over the
step's run phase, and the step's bottleneck line.

The PKB module reads each VM's /proc/stat and /proc/diskstats (READING_COMMAND) once every
YCSB run process has printed a status line (their workload has begun: within 2 s of it, not
the JVM's start-up before it) and as soon as the last has ended, before their outputs are
fetched (the step's metadata `usage_from`: "workload start"; "YCSB start" when the processes
ended before that was seen, and the reading taken before they started stands in). The
averages are the OS sampler's
(measure.ossampler.summarize) and the bottleneck is measure.bottleneck's, as for perftables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mongobench.measure import bottleneck, ossampler

_MARK = "--mongobench-diskstats--"
# Only /proc/stat's aggregate line: its intr line runs to tens of KB on a large host.
READING_COMMAND = f"date +%s.%N && head -n 1 /proc/stat && echo {_MARK} && cat /proc/diskstats"
CPU_ALERT_PCT = 90.0  # seed 003's Tuning Notes: a server CPU not > 90 % points elsewhere


def parse_reading(text: str) -> dict:
    """An ossampler reading (every physical disk) from READING_COMMAND's output."""
    head, mark, diskstats = text.partition(_MARK)
    stamp, _, stat = head.strip().partition("\n")
    if not mark:
        raise ValueError(f"not the output of the /proc reading command: {text[:200]!r}")
    return ossampler.reading_of(stat, diskstats, None, float(stamp))


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def step_usage(
    server: Sequence[dict],
    clients: Mapping[str, Sequence[dict]],
    *,
    throughput: float,
    offered: float | None,
    shared_host: bool = False,
    disk_iops: float | None = None,
    disk_mb_s: float | None = None,
) -> dict:
    """Step metadata from the server's readings and each client VM's (name -> readings,
    first and last bracket the run phase): server CPU, iowait, steal and disk figures, the
    busiest client VM's CPU, the share of the offered load delivered, and `bottleneck`
    (measure.bottleneck.judge: 'server CPU (96%, os sampler)', 'none saturated (highest:
    ...)', 'offered load (99% of 50000 ops/s; ...)': the rate-limited clients, not the
    server, set the throughput; a shared-host note when `shared_host`)."""
    srv = ossampler.summarize(list(server))
    per_client = {name: ossampler.summarize(list(r)) for name, r in clients.items()}
    measured = [n for n in per_client if per_client[n]["cpu_pct"] is not None]
    busiest = max(measured, key=lambda n: per_client[n]["cpu_pct"], default=None)
    client_cpu = per_client[busiest]["cpu_pct"] if busiest else None
    offered_pct = 100.0 * throughput / offered if offered else None
    # YCSB's client VMs: their host CPU is the only client figure (a Java process, no
    # per-process accounting here); on a shared host CPU names nothing (measure.bottleneck).
    found = bottleneck.readings(
        {
            "cpu_pct": srv["cpu_pct"],
            "os_iops": srv["iops"],
            "os_write_mb_s": srv["write_mb_s"],
            "os_read_mb_s": srv["read_mb_s"],
            "client_host_cpu_pct": client_cpu,
        },  # fmt: skip
        {"disk_iops": disk_iops, "disk_mb_s": disk_mb_s},
    )
    offered_share = throughput / offered if offered else None
    return {
        "server_cpu_pct": _round(srv["cpu_pct"]),
        "server_iowait_pct": _round(srv["iowait_pct"]),
        "server_steal_pct": _round(srv["steal_pct"]),
        "server_disk_iops": _round(srv["iops"]),
        "server_disk_read_mb_s": _round(srv["read_mb_s"], 2),
        "server_disk_write_mb_s": _round(srv["write_mb_s"], 2),
        "client_cpu_pct": _round(client_cpu),
        "client_cpu_busiest_vm": busiest,
        "offered_load_pct": _round(offered_pct),
        "bottleneck": bottleneck.judge(
            found, shared_host=shared_host, offered_share=offered_share, offered_rate=offered
        ),
    }


def tuning_note(info: Mapping) -> str | None:
    """Seed 003's Tuning Notes for a step whose server CPU was not > 90 %, else None."""
    cpu = info.get("server_cpu_pct")
    if cpu is None or cpu > CPU_ALERT_PCT:
        return None
    return (
        f"server CPU {cpu:g}% (not > {CPU_ALERT_PCT:g}%): check whether network or storage"
        " bandwidth is saturated; if neither, add client VMs (seed 003 Tuning Notes)"
    )
