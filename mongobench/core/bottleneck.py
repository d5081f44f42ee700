"""The bottleneck of a measured window: the resource closest to its limit.

One judgement for every benchmark: perftables variants (mongobench.reports.results) and
stress steps (mongobench.stress.usage) pass the figures they measured and get the same line,
e.g. "server CPU (93%)".
"""

from __future__ import annotations


# Utilisation of each resource against its limit; the highest is the bottleneck.
# Disk limits come from settings (disk_iops, disk_mb_s: the provisioned figures).
# client_cpu_cores: the client's CPU use as a share of its capacity (the caller
# divides by the cores its processes can use: one per Python process, the GIL).
# offered_pct: throughput as a share of the load the clients offered (a rate-limited
# client: near 100 % the offered load, not the server, set the throughput).
def bottleneck(figs: dict, settings: dict | None = None, client_cpu_cores: float | None = None):
    """(resource, utilisation 0..1) of the resource closest to its limit, or None."""
    settings = settings or {}
    ratios = {}
    if figs.get("cpu_pct") is not None:
        ratios["server CPU"] = figs["cpu_pct"] / 100.0
    if figs.get("os_iops") is not None and _number(settings.get("disk_iops")):
        ratios["disk IOPS"] = figs["os_iops"] / float(settings["disk_iops"])
    if figs.get("os_write_mb_s") is not None and _number(settings.get("disk_mb_s")):
        mb = figs["os_write_mb_s"] + (figs.get("os_read_mb_s") or 0.0)
        ratios["disk MB/s"] = mb / float(settings["disk_mb_s"])
    client = []
    if figs.get("client_cpu_pct") is not None:
        client.append(figs["client_cpu_pct"] / 100.0)
    if client_cpu_cores is not None:
        client.append(client_cpu_cores)
    if client:
        ratios["client"] = max(client)
    if figs.get("offered_pct") is not None:
        ratios["offered load"] = figs["offered_pct"] / 100.0
    if not ratios:
        return None
    name = max(ratios, key=ratios.get)
    return name, ratios[name]


def describe(neck: tuple[str, float] | None) -> str:
    """The metadata line of a bottleneck() result: 'server CPU (93%)' or 'unknown'."""
    return f"{neck[0]} ({neck[1] * 100:.0f}%)" if neck else "unknown"


def _number(value) -> bool:
    try:
        return float(value) > 0
    except (TypeError, ValueError):
        return False
