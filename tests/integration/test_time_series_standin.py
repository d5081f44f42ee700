"""Time series inside a variant (core.series) on the stand-in: a duration-bound variant gets
one interval per `interval_s` of its timed phase, merged over the worker processes (or
client threads) by interval start, and its intervals' operations and documents sum to the
variant's own counts; the samples carry them in PKB's time-series form."""

import math

import pytest
from pymongo import MongoClient

from mongobench.core import samples as core_samples
from mongobench.perftables import runner as perftables
from mongobench.perftables.request import PerftablesRun
from mongobench.reports import results

pytestmark = pytest.mark.integration

DB = "mb_series"
INTERVAL = 0.25


@pytest.fixture(autouse=True)
def _clean(server_uri):
    yield
    with MongoClient(server_uri) as c:
        c.drop_database(DB)


@pytest.mark.parametrize("path", ["multiplexed", "pymongo"])
def test_a_duration_bound_variant_gets_its_intervals(server_uri, tmp_path, path):
    over = {"duration_s": 2.0, "total_ops": 10**9, "preload_docs": 50, "doc_size_kb": 1,
            "threads": 4, "write_concern": 1}  # fmt: skip
    run = perftables.run(
        PerftablesRun(
            experiments=["updateapi"],
            scale="smoke",
            out=str(tmp_path / "r.json"),
            database=DB,
            variants=["0, update_one, False"],
            overrides=over,
            os_path="none",
            client_path=path,
            processes=2,
            interval_s=INTERVAL,
        ),
        server_uri,
        log=lambda m: None,
    )
    [r] = run["results"]
    assert r["status"] == "ok" and not r["errors"], r.get("error") or r["errors"]
    ser = r["series"]
    n = math.ceil(r["duration_s"] / INTERVAL)
    assert n >= 8
    assert len(ser["ops"]) == n, (len(ser["ops"]), r["duration_s"])
    assert ser["t_s"] == [pytest.approx(k * INTERVAL) for k in range(n)]
    assert sum(ser["ops"]) == sum(r["ops"].values()) > 0
    assert sum(ser["docs"]) == r["docs"]
    assert sum(ser["errors"]) == 0
    # every full interval of a closed loop saw operations, and their latencies
    assert all(ops > 0 for ops in ser["ops"][:-1]), ser["ops"]
    assert all(p is not None and p > 0 for p in ser["p99_ms"][:-1]), ser["p99_ms"]
    assert ser["start"] == r["start"]

    ts = [s for s in results.to_samples(run) if core_samples.is_time_series(s)]
    by_metric = {s["metric"]: s for s in ts}
    tput = by_metric["Operation Throughput time series"]
    md = tput["metadata"]
    assert md["interval"] == INTERVAL and md["experiment"] == "updateapi"
    assert len(md["values"]) == len(md["timestamps"]) == n
    assert md["timestamps"][0] == pytest.approx(r["start"])
    # ops/s of each interval over its own length: they add back to the count
    got = sum(v * s for v, s in zip(md["values"], ser["seconds"], strict=True))
    assert got == pytest.approx(sum(r["ops"].values()))
    assert "p99 latency time series" in by_metric


def test_no_intervals_when_asked_for_none(server_uri, tmp_path):
    over = {"duration_s": 0.3, "total_ops": 10**9, "preload_docs": 20, "threads": 2,
            "write_concern": 1}  # fmt: skip
    run = perftables.run(
        PerftablesRun(
            experiments=["updateapi"],
            scale="smoke",
            out=str(tmp_path / "r.json"),
            database=DB,
            variants=["0, update_one, False"],
            overrides=over,
            os_path="none",
            processes=1,
            interval_s=0,
        ),
        server_uri,
        log=lambda m: None,
    )
    [r] = run["results"]
    assert r["status"] == "ok" and r["series"] is None
    assert not [s for s in results.to_samples(run) if core_samples.is_time_series(s)]
