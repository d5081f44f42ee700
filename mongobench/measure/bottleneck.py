"""The bottleneck of a measured window: which resource, if any, was saturated.

One judgement for every benchmark: perftables variants (mongobench.reports.results) and
stress steps (mongobench.stress.usage) pass the figures they measured (`readings`) and get
the same line (`judge`):

- a named resource with its source, when one is at or above SATURATED of its limit:
  `server CPU (93%, os sampler)`, `client CPU (98% of 2 cores, driver processes)`,
  `WiredTiger dirty cache (110% of the 20% trigger, serverStatus)`;
- `none saturated (highest: server CPU 43%)` when none is;
- `offered load (99% of 500 ops/s; highest: client CPU 12%)` for a rate-limited client
  (an open loop's target_ops_per_s, a throttled YCSB) that got its rate and nothing was
  saturated; on a shared host whose highest figure is a CPU, `offered load (...; shared
  host, highest: ...)`;
- `shared host (client and server on one machine; highest: client CPU 97%)` when the
  highest is a CPU figure and the client runs on the server's host (the test bed): each
  side's CPU is then the other's too, so neither can be named;
- `unknown (no figures)`.

The client's figure is the driver's own processes' CPU over the cores they may use (one
per Python process, at most the VM's CPUs, summed over every client VM), never the client
VM's host-wide CPU, which counts everything else that runs there.
"""

from __future__ import annotations

from dataclasses import dataclass

SATURATED = 0.8  # a resource at or above this share of its limit is named
OFFERED_MET = 0.9  # a rate-limited client that got this share of its rate: offered load

# WiredTiger's defaults: application threads start evicting at eviction_trigger (95 % of
# the cache) and eviction_dirty_trigger (20 % dirty).
CACHE_TRIGGER_PCT = 95.0
DIRTY_TRIGGER_PCT = 20.0
REPL_LAG_LIMIT_S = 10.0  # lag at which a secondary is saturated for this judgement


@dataclass(frozen=True)
class Reading:
    resource: str  # "server CPU"
    ratio: float  # use against its limit (1.0: at the limit)
    source: str  # where the figure comes from ("os sampler", "serverStatus", ...)
    detail: str = ""  # how the ratio reads ("of 2 cores"), shown with a named resource
    cpu: bool = False  # a CPU figure (void when client and server share a host)
    text: str = ""  # replaces "<ratio>% <detail>" where a count reads better

    def named(self) -> str:
        detail = f" {self.detail}" if self.detail else ""
        return f"{self.resource} ({self.text or f'{self.ratio * 100:.0f}%{detail}'}, {self.source})"

    def short(self) -> str:
        return f"{self.resource} {self.ratio * 100:.0f}%"


def positive(value) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


def readings(
    figs: dict,
    settings: dict | None = None,
    *,
    client_share: float | None = None,
    client_cores: float | None = None,
    server_source: str = "os sampler",
    signals: dict | None = None,
) -> list[Reading]:
    """Every resource the figures can judge, against its limit.

    `figs`: the server VM's OS figures (cpu_pct, os_iops, os_write_mb_s, os_read_mb_s),
    network (net_in_mb_s, net_out_mb_s) and, for a stress step, `client_host_cpu_pct`
    (a YCSB client VM's host CPU: its only client figure). `settings`: the provisioned
    disk_iops, disk_mb_s and network_mb_s when known. `client_share`: the driver
    processes' CPU over the `client_cores` they may use. `signals`: serverStatus readings
    over the phase (serverstats.SignalSampler): cache_fill_pct, cache_dirty_pct,
    read_tickets_pct, write_tickets_pct, queue, clients, app_evictions, repl_lag_s."""
    settings, signals = settings or {}, signals or {}
    out = []
    if figs.get("cpu_pct") is not None:
        out.append(Reading("server CPU", figs["cpu_pct"] / 100.0, server_source, cpu=True))
    iops, mb_s = positive(settings.get("disk_iops")), positive(settings.get("disk_mb_s"))
    if figs.get("os_iops") is not None and iops:
        out.append(Reading("disk IOPS", figs["os_iops"] / iops, server_source, f"of {iops:g}"))
    if figs.get("os_write_mb_s") is not None and mb_s:
        mb = figs["os_write_mb_s"] + (figs.get("os_read_mb_s") or 0.0)
        out.append(Reading("disk MB/s", mb / mb_s, server_source, f"of {mb_s:g} MB/s"))
    net = positive(settings.get("network_mb_s"))
    if net and (figs.get("net_out_mb_s") is not None or figs.get("net_in_mb_s") is not None):
        mb = max(figs.get("net_out_mb_s") or 0.0, figs.get("net_in_mb_s") or 0.0)
        out.append(Reading("network", mb / net, "serverStatus", f"of {net:g} MB/s"))
    out += _server_signals(signals)
    if client_share is not None:
        cores = f"of {client_cores:g} cores" if client_cores else ""
        out.append(Reading("client CPU", client_share, "driver processes", cores, cpu=True))
    elif figs.get("client_host_cpu_pct") is not None:
        out.append(
            Reading("client CPU", figs["client_host_cpu_pct"] / 100.0, "client VM", cpu=True)
        )
    return out


def _server_signals(s: dict) -> list[Reading]:
    out = []
    src = "serverStatus"
    if s.get("cache_fill_pct") is not None:
        out.append(
            Reading(
                "WiredTiger cache",
                s["cache_fill_pct"] / CACHE_TRIGGER_PCT,
                src,
                f"of the {CACHE_TRIGGER_PCT:g}% eviction trigger",
            )
        )
    if s.get("cache_dirty_pct") is not None:
        out.append(
            Reading(
                "WiredTiger dirty cache",
                s["cache_dirty_pct"] / DIRTY_TRIGGER_PCT,
                src,
                f"of the {DIRTY_TRIGGER_PCT:g}% dirty trigger",
            )
        )
    if s.get("app_evictions"):  # application threads evicted pages: the cache held them up
        out.append(
            Reading(
                "WiredTiger eviction",
                1.0,
                src,
                text=f"{s['app_evictions']:.0f} pages evicted by application threads",
            )
        )
    for kind in ("read", "write"):
        pct = s.get(f"{kind}_tickets_pct")
        if pct is not None:
            out.append(Reading(f"{kind} tickets", pct / 100.0, src, "in use"))
    if s.get("queue") is not None and s.get("clients"):
        share = min(1.0, s["queue"] / s["clients"])
        text = f"{s['queue']:.0f} of {s['clients']:.0f} clients queued"
        out.append(Reading("lock queue", share, src, text=text))
    if s.get("repl_lag_s") is not None:
        out.append(
            Reading(
                "replication lag",
                s["repl_lag_s"] / REPL_LAG_LIMIT_S,
                "replSetGetStatus",
                text=f"{s['repl_lag_s']:.1f} s, limit {REPL_LAG_LIMIT_S:g} s",
            )
        )
    return out


def judge(
    found: list[Reading],
    *,
    shared_host: bool = False,
    offered_share: float | None = None,
    offered_rate: float | None = None,
) -> str:
    """The bottleneck line of `found` (see the module's docstring)."""
    if not found:
        if offered_share is not None and offered_share >= OFFERED_MET:
            return f"offered load ({offered_share * 100:.0f}% of {offered_rate:g} ops/s)"
        return "unknown (no figures)"
    top = max(found, key=lambda r: r.ratio)
    met = offered_share is not None and offered_share >= OFFERED_MET

    def offered(note: str = "") -> str:
        return (
            f"offered load ({offered_share * 100:.0f}% of {offered_rate:g} ops/s;"
            f" {note}highest: {top.short()})"
        )

    if shared_host:  # CPU figures are both sides' at once: judge by the others
        other = max((r for r in found if not r.cpu), key=lambda r: r.ratio, default=None)
        if other is not None and other.ratio >= SATURATED:
            return other.named()
        if top.cpu and met:  # the rate was met: the load, not the host, set the throughput
            return offered("shared host, ")
        if top.cpu:
            return f"shared host (client and server on one machine; highest: {top.short()})"
    if top.ratio >= SATURATED:
        return top.named()
    if met:
        return offered()
    return f"none saturated (highest: {top.short()})"


def provisioned_disk(
    provisioned_iops=None,
    provisioned_throughput=None,
    metadata: dict | None = None,
    stripes: int | None = None,
) -> dict:
    """The disk limits the judgement compares against (`disk_iops`, `disk_mb_s` settings)
    from a PKB disk's spec: its metadata's `iops`/`throughput` (PKB's own figures, summed
    over striped disks), else its provisioned_iops/provisioned_throughput times the
    stripes. Throughput is MB/s as the clouds provision it (MiB/s), as the OS sampler's
    disk MB/s. Nothing for a figure PKB does not know (a static VM, a disk type with no
    provisioned performance): the judgement then leaves that resource out."""
    md = metadata or {}
    n = int(stripes or 1) if positive(stripes) else 1
    iops = positive(md.get("iops")) or (
        positive(provisioned_iops) * n if positive(provisioned_iops) else None
    )
    mb_s = positive(md.get("throughput")) or (
        positive(provisioned_throughput) * n if positive(provisioned_throughput) else None
    )
    out = {}
    if iops:
        out["disk_iops"] = int(iops) if float(iops).is_integer() else iops
    if mb_s:
        out["disk_mb_s"] = mb_s
    return out
