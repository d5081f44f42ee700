"""Which client runs a timed phase, and how its capacity enters the results."""

import dataclasses
import json

import pytest
from test_results_report import RUN, raw_result

from mongobench import cli
from mongobench.driver import sources
from mongobench.driver.catalog import WORKLOADS
from mongobench.driver.workload import CursorRead, KeyedDelete, Split
from mongobench.driver.writes import Inserts, Records
from mongobench.perftables import checks
from mongobench.perftables import experiments as exp_mod
from mongobench.perftables.request import PerftablesRun
from mongobench.remote import shipping
from mongobench.reports import results


def test_timed_path_is_multiplexed_unless_asked_or_pipelined():
    assert checks.timed_path("hot_update", {}) == "multiplexed"
    assert checks.timed_path("bucket", {}) == "multiplexed"
    assert checks.timed_path("read_update", {"driver": "pymongo"}) == "multiplexed"
    assert checks.timed_path("read_update", {"driver": "pipelined"}) == "pipelined"
    assert checks.timed_path("read_update", {"driver": "pipelined"}, "pymongo") == "pipelined"
    assert checks.timed_path("query", {}, "pymongo") == "pymongo"
    assert checks.timed_path("no_source_yet", {}) == "pymongo"
    with pytest.raises(exp_mod.ExperimentError, match="multiplexed, pymongo, not 'fast'"):
        checks.timed_path("query", {}, "fast")


def test_every_declared_workload_has_a_source():
    workloads = {e.workload for e in exp_mod.load().values()}
    assert workloads <= set(sources.SOURCES)


def test_loops_without_an_end_are_refused():
    read = CursorRead("find", "c", {"_id": 1})
    with pytest.raises(ValueError, match="workload query needs total_ops or duration_s"):
        sources.check_bounds("query", read, {"total_ops": None, "duration_s": None})
    sources.check_bounds("query", read, {"duration_s": 1})
    sources.check_bounds("delete", KeyedDelete("c", 10), {})  # ends with its data
    endless = Inserts("c", doc=None)  # one batch an operation, as many as asked
    with pytest.raises(ValueError, match="workload insert needs"):
        sources.check_bounds("insert", endless, {})
    sources.check_bounds("insert", dataclasses.replace(endless, total=10), {})
    # a split ends with its data only when both sides do
    with pytest.raises(ValueError, match="workload mixed needs"):
        sources.check_bounds("mixed", Split(1, dataclasses.replace(endless, total=10), read), {})
    sources.check_bounds(
        "mixed", Split(1, KeyedDelete("c", 10), Records("w", "c", 5, "insert", (), dict)), {}
    )


def test_the_catalog_data_bounded_workloads():
    """Which experiments end with their data follows from their declarations: inserts of a
    total, seed 004's bucket records, deletes."""
    bounded = set()
    for e in exp_mod.load().values():
        for _, variants in exp_mod.plan(exp_mod.load(), [e.name], "smoke", None):
            for v in variants:
                d = WORKLOADS[e.workload](None, v.settings).declare()
                if sources.data_bounded(d):
                    bounded.add(e.workload)
    assert bounded == {"insert", "delete", "bucket"}


def _sample(samples, metric):
    [s] = [s for s in samples if s["metric"] == metric]
    return s


def test_bottleneck_divides_client_cpu_by_the_cores_it_can_use():
    res = raw_result()  # 2 s; the OS says the client machine was 50% busy
    res.update(client_process_cpu_s=3.6)  # 1.8 cores
    one = _sample(results.to_samples(dict(RUN, results=[res])), "Operation Throughput")
    # no capacity given: one core
    assert one["metadata"]["bottleneck"] == "client CPU (180% of 1 cores, driver processes)"
    res.update(client_cores=2, client_processes=2, client_vms=1, client_path="multiplexed")
    two = _sample(results.to_samples(dict(RUN, results=[res])), "Operation Throughput")
    assert two["metadata"]["bottleneck"] == "client CPU (90% of 2 cores, driver processes)"
    assert two["metadata"]["client_processes"] == 2
    assert two["metadata"]["client_vms"] == 1
    assert two["metadata"]["client_path"] == "multiplexed"
    # 1.8 of 8 cores: the host's 50% is not the driver's and is not judged
    res.update(client_cores=8)
    eight = _sample(results.to_samples(dict(RUN, results=[res])), "Operation Throughput")
    assert eight["metadata"]["bottleneck"] == "none saturated (highest: client CPU 22%)"


def test_the_client_request_carries_processes_and_path():
    # PKB ships the run options as a request file beside target.uri, not as flags
    cmd = shipping.perftables_command("/w", "/w/u", "/w/run.json")
    assert cmd.endswith("--uri-file /w/u --request /w/run.json --yes")
    sent = json.loads(PerftablesRun(processes=4, client_path="pymongo").to_json())
    assert (sent["processes"], sent["client_path"]) == (4, "pymongo")
    bare = json.loads(PerftablesRun().to_json())
    assert (bare["processes"], bare["client_path"]) == (None, "multiplexed")


def test_cli_takes_processes_and_client_path(capsys):
    for bad in (["--processes", "0"], ["--client-path", "threads"]):
        with pytest.raises(SystemExit):
            cli.main(["perftables", "run", "--uri", "mongodb://x", *bad])
        assert "--" + bad[0].lstrip("-") in capsys.readouterr().err
