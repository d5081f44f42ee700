"""The audit of acknowledged writes covers the update experiments, mixed and bucket's inserts
(issue 23): 0 lost on the stand-in, with the check named."""

import threading

import pymongo
import pytest
from standin_helpers import built_workdir

from mongobench.driver import base
from mongobench.driver.catalog import WORKLOADS
from mongobench.perftables import runner as perftables
from mongobench.perftables.request import PerftablesRun
from mongobench.reports import results
from testbed import bed as testbed

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = testbed.start_server(str(built_workdir(tmp_path_factory, "audit-updates")))
    yield srv
    srv.stop()


CHECKS = {
    (
        "update_fields",
        "1, 500000, plain",
    ): "sum of n0 = before + acknowledged updates (each adds 1)",
    ("replace", "500000"): "documents = before (updates and replaces neither add nor remove)",
    ("update_indexed", "False"): "sum of n0 = before + acknowledged updates (each adds 1)",
    ("update_indexed", "True"): "documents = before (updates and replaces neither add nor remove)",
}


@pytest.mark.parametrize("client_path", ["multiplexed", "pymongo"])
def test_updates_are_audited_and_nothing_is_lost(server, tmp_path, client_path):
    run = perftables.run(
        PerftablesRun(
            experiments=["update_fields", "replace", "update_indexed"],
            scale="smoke",
            out=str(tmp_path / "r.json"),
            variants=["1, 500000, plain", "500000", "False", "True"],
            overrides={"duration_s": 1},
            os_path="none",
            client_path=client_path,
        ),
        server.uri,
        log=lambda m: None,
    )
    by = {(r["experiment"], r["label"]): r for r in run["results"]}
    assert set(by) == set(CHECKS)
    for key, check in CHECKS.items():
        res = by[key]
        assert res["status"] == "ok", res.get("error")
        assert res["audit"]["check"] == check, key
        assert res["audit"]["lost_writes"] == 0, (key, res["audit"])
    summed = by[("update_fields", "1, 500000, plain")]["audit"]
    assert summed["found"] - summed["expected"] == 0 and summed["expected"] > 0
    assert all(s["metadata"]["lost_writes"] == 0 for s in results.to_samples(run))


@pytest.mark.parametrize("client_path", ["multiplexed", "pymongo"])
def test_mixed_and_bucket_writes_are_audited(server, tmp_path, client_path):
    run = perftables.run(
        PerftablesRun(
            experiments=["shell_mixed", "shell_bucket"],
            scale="smoke",
            out=str(tmp_path / "r.json"),
            overrides={"duration_s": 1},
            os_path="none",
            client_path=client_path,
        ),
        server.uri,
        log=lambda m: None,
    )
    checks = set()
    for res in run["results"]:
        assert res["status"] == "ok", res.get("error")
        assert res["audit"]["lost_writes"] == 0, (res["label"], res["audit"])
        assert res["audit"]["expected"] > 0, res["audit"]
        checks.add(res["audit"]["check"])
    # the pushes into buckets are counted inside the buckets
    assert "records in buckets = before + acknowledged pushes" in checks


def test_a_lost_push_is_found(server):
    """The bucket audit counts the records inside the buckets: one removed from a bucket
    after it was acknowledged is one lost write."""
    db = pymongo.MongoClient(server.uri)["audit_bucket"]
    wl = WORKLOADS["bucket"](db, {"records": 20, "bucket_size": 5, "threads": 1}, log=print)
    wl.prepare()
    before = base.audit_baseline(wl)
    stats = base.ThreadStats()
    wl.worker(0, 1, stats, threading.Event())
    assert base.audit(wl, before, stats)["lost_writes"] == 0
    db[wl.coll_name].update_one({"_id": 0}, {"$pop": {"items": 1}})
    assert base.audit(wl, before, stats)["lost_writes"] == 1
