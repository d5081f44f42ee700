"""The bottleneck judgement (measure.bottleneck) on recorded figures: each case of issue 21."""

import datetime
import pathlib

import pytest
from bson import json_util
from test_results_report import RUN, raw_result

from mongobench.measure import bottleneck, serverstats
from mongobench.reports import results

DATA = pathlib.Path(__file__).parent.parent / "data"

# serverStatus excerpts in mongod 7.0's shape (the manual's field names): a WiredTiger
# cache of 1 GiB, execution tickets and the global lock's queue.
GIB = 1 << 30


def status(fill=0.5, dirty=0.02, evicted=100, read_out=3, write_out=5, total=128, queue=0):
    return {
        "wiredTiger": {
            "cache": {
                "maximum bytes configured": GIB,
                "bytes currently in the cache": int(fill * GIB),
                "tracked dirty bytes in the cache": int(dirty * GIB),
                "pages evicted by application threads": evicted,
            },
        },
        "queues": {
            "execution": {
                "read": {"out": read_out, "available": total - read_out, "totalTickets": total},
                "write": {"out": write_out, "available": total - write_out, "totalTickets": total},
            }
        },
        "globalLock": {"currentQueue": {"total": queue, "readers": 0, "writers": queue}},
    }


def _judge(figs=None, settings=None, signals=None, **kw):
    found = bottleneck.readings(figs or {}, settings, signals=signals, **{
        k: kw.pop(k) for k in ("client_share", "client_cores") if k in kw
    })  # fmt: skip
    return bottleneck.judge(found, **kw)


def test_a_named_resource_says_its_source():
    assert _judge({"cpu_pct": 93.0}) == "server CPU (93%, os sampler)"
    line = _judge({"cpu_pct": 30.0}, client_share=0.97, client_cores=2)
    assert line == "client CPU (97% of 2 cores, driver processes)"
    line = _judge({"cpu_pct": 40.0, "os_iops": 2900.0}, {"disk_iops": 3000})
    assert line == "disk IOPS (97% of 3000, os sampler)"
    line = _judge({"os_write_mb_s": 100.0, "os_read_mb_s": 20.0}, {"disk_mb_s": 125})
    assert line == "disk MB/s (96% of 125 MB/s, os sampler)"
    line = _judge({"net_out_mb_s": 110.0}, {"network_mb_s": 120})
    assert line == "network (92% of 120 MB/s, serverStatus)"


def test_below_the_threshold_nothing_is_named():
    line = _judge({"cpu_pct": 43.0}, client_share=0.05, client_cores=2)
    assert line == "none saturated (highest: server CPU 43%)"
    assert _judge({}) == "unknown (no figures)"
    assert bottleneck.SATURATED == 0.8


def test_a_rate_limited_client_that_got_its_rate_is_offered_load():
    found = bottleneck.readings({"cpu_pct": 20.0}, client_share=0.1, client_cores=1)
    line = bottleneck.judge(found, offered_share=0.99, offered_rate=500)
    assert line == "offered load (99% of 500 ops/s; highest: server CPU 20%)"
    # a saturated resource that held the rate down is named instead
    found = bottleneck.readings({"cpu_pct": 95.0})
    assert bottleneck.judge(found, offered_share=0.6, offered_rate=500).startswith("server CPU")


def test_an_open_loop_that_met_its_rate_on_a_shared_host_is_offered_load():
    """The test bed's client shares the server's host: CPU judges nothing there, but a
    rate that was met says what set the throughput (the open loop's target)."""
    found = bottleneck.readings({"cpu_pct": 97.0}, client_share=0.4, client_cores=2)
    line = bottleneck.judge(found, shared_host=True, offered_share=0.98, offered_rate=50)
    assert line == "offered load (98% of 50 ops/s; shared host, highest: server CPU 97%)"
    missed = bottleneck.judge(found, shared_host=True, offered_share=0.5, offered_rate=50)
    assert missed.startswith("shared host (")


def test_on_a_shared_host_cpu_names_nothing_but_server_signals_still_do():
    found = bottleneck.readings({"cpu_pct": 99.0}, client_share=0.98, client_cores=1)
    line = bottleneck.judge(found, shared_host=True)
    assert line == "shared host (client and server on one machine; highest: server CPU 99%)"
    sig = serverstats.summarize_signals([serverstats.signals(status(write_out=128, queue=40))])
    found = bottleneck.readings({"cpu_pct": 99.0}, client_share=1.0, signals=sig)
    assert bottleneck.judge(found, shared_host=True) == "write tickets (100% in use, serverStatus)"


def test_wiredtiger_cache_and_eviction_from_recorded_server_status():
    calm = serverstats.signals(status())
    assert calm["cache_fill_pct"] == pytest.approx(50.0, abs=0.01)
    assert calm["cache_dirty_pct"] == pytest.approx(2.0, abs=0.01)
    assert calm["read_tickets_pct"] == pytest.approx(3 / 128 * 100)
    sig = serverstats.summarize_signals([calm, serverstats.signals(status(evicted=100))])
    assert sig["app_evictions"] == 0
    assert _judge(signals=dict(sig, clients=8)).startswith("none saturated (highest: ")
    # dirty share past WiredTiger's 20 % trigger
    dirty = serverstats.summarize_signals([calm, serverstats.signals(status(dirty=0.24))])
    assert _judge(signals=dirty) == (
        "WiredTiger dirty cache (120% of the 20% dirty trigger, serverStatus)"
    )
    # application threads evicting pages: the cache held the operations up
    ev = serverstats.summarize_signals([calm, serverstats.signals(status(evicted=5100))])
    assert ev["app_evictions"] == 5000
    assert _judge(signals=ev) == (
        "WiredTiger eviction (5000 pages evicted by application threads, serverStatus)"
    )
    full = serverstats.summarize_signals([serverstats.signals(status(fill=0.94))])
    assert _judge(signals=full).startswith("WiredTiger cache (99% of the 95% eviction trigger")


def test_tickets_and_queue_and_older_servers():
    busy = serverstats.summarize_signals([serverstats.signals(status(read_out=120))])
    assert _judge(signals=busy) == "read tickets (94% in use, serverStatus)"
    queued = serverstats.summarize_signals([serverstats.signals(status(queue=7))])
    assert (
        _judge(signals=dict(queued, clients=8))
        == "lock queue (7 of 8 clients queued, serverStatus)"
    )
    # 6.0 and older: wiredTiger.concurrentTransactions
    old = {"wiredTiger": {"concurrentTransactions": {"write": {"out": 128, "totalTickets": 128}}}}
    assert serverstats.signals(old)["write_tickets_pct"] == 100.0
    # a server without these sections (the stand-in without --tickets, FerretDB): nothing
    assert set(serverstats.signals({"version": "7.0.0"}).values()) == {None}


def _rs(name):
    return json_util.loads((DATA / "rs_status" / name).read_text())


def test_replication_lag_from_recorded_rs_status():
    doc = _rs("8.0_pss_ready.json")
    lag = serverstats.repl_lag_s(doc)
    assert lag is not None and lag >= 0
    primary = next(m for m in doc["members"] if m["stateStr"] == "PRIMARY")
    lagging = dict(doc["members"][-1] if doc["members"][-1] is not primary else doc["members"][0])
    lagging.update(stateStr="SECONDARY",
                   optimeDate=primary["optimeDate"] - datetime.timedelta(seconds=12))  # fmt: skip
    late = dict(doc, members=[primary, lagging])
    assert serverstats.repl_lag_s(late) == 12.0
    assert _judge(signals={"repl_lag_s": 12.0}) == (
        "replication lag (12.0 s, limit 10 s, replSetGetStatus)"
    )
    assert serverstats.repl_lag_s(_rs("7.0_no_primary_yet.json")) is None


def test_perftables_samples_never_judge_the_client_by_host_cpu():
    res = raw_result()  # the client VM's host CPU: 50 %
    res.update(os_client={"cpu_pct": 100.0}, client_process_cpu_s=0.2, client_cores=2)
    [s] = [
        s for s in results.to_samples(dict(RUN, results=[res]))
        if s["metric"] == "Operation Throughput"
    ]  # fmt: skip
    assert s["metadata"]["bottleneck"] == "none saturated (highest: client CPU 5%)"
    res.update(os_server={"cpu_pct": 97.0})
    shared = dict(RUN, shared_host=True, results=[res])
    md = next(s["metadata"] for s in results.to_samples(shared))
    assert md["bottleneck"] == (
        "shared host (client and server on one machine; highest: server CPU 97%)"
    )
    assert md["shared_host"] is True


# PKB disks as their specs describe them (attribute values of PKB's disk objects): a GCE
# pd-balanced with provisioned IOPS and throughput, an AWS gp3 striped over two volumes
# (PKB's StripedDisk sums iops/throughput in its metadata), a static VM's disk (nothing).
PD_BALANCED = dict(provisioned_iops=3000, provisioned_throughput=140,
                   metadata={"type": "pd-balanced", "size": 500}, stripes=1)  # fmt: skip
GP3_STRIPED = dict(provisioned_iops=3000, provisioned_throughput=125,
                   metadata={"type": "gp3", "iops": 6000, "throughput": 250}, stripes=2)  # fmt: skip
STATIC = dict(provisioned_iops=None, provisioned_throughput=None, metadata={}, stripes=1)


def test_provisioned_disk_from_pkbs_disk_spec():
    assert bottleneck.provisioned_disk(**PD_BALANCED) == {"disk_iops": 3000, "disk_mb_s": 140}
    assert bottleneck.provisioned_disk(**GP3_STRIPED) == {"disk_iops": 6000, "disk_mb_s": 250}
    assert bottleneck.provisioned_disk(**STATIC) == {}
    # no metadata figure: provisioned per volume times the stripes
    striped = dict(PD_BALANCED, stripes=4)
    assert bottleneck.provisioned_disk(**striped) == {"disk_iops": 12000, "disk_mb_s": 560}


def test_disk_judged_against_the_provisioned_figures_of_pkbs_spec():
    # recorded server VM figures of a write-heavy variant: 2,950 IOPS, 131 MB/s, CPU 35 %
    figs = {"cpu_pct": 35.0, "os_iops": 2950.0, "os_write_mb_s": 121.0, "os_read_mb_s": 10.0}
    line = _judge(figs, bottleneck.provisioned_disk(**PD_BALANCED))
    assert line == "disk IOPS (98% of 3000, os sampler)"
    # twice the disk: nothing saturated, the highest named
    line = _judge(figs, bottleneck.provisioned_disk(**GP3_STRIPED))
    assert line == "none saturated (highest: disk MB/s 52%)"
    # without a provisioned figure the disk is not judged at all
    assert _judge(figs, bottleneck.provisioned_disk(**STATIC)) == (
        "none saturated (highest: server CPU 35%)"
    )


def test_network_mb_s_is_a_setting_the_user_can_give():
    from mongobench.perftables import experiments as exp_mod

    assert exp_mod.parse_overrides(["network_mb_s=1250"], "--set") == {"network_mb_s": 1250.0}
