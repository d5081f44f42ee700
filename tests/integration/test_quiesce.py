"""Quiet between variants (issue 23): before each variant the run waits, bounded, until the
server has no work left from the previous one; the wait is in the results, the samples and the
log. On the stand-in (no currentOp) by its connection count."""

import threading
import time

import pymongo
import pytest
from standin_helpers import built_workdir

from mongobench.perftables import quiesce
from mongobench.perftables import runner as perftables
from mongobench.reports import results
from mongobench.testbed import bed as testbed

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = testbed.start_server(str(built_workdir(tmp_path_factory, "quiesce")))
    yield srv
    srv.stop()


def _leftover_connections(uri, n=4):
    """A client holding `n` open connections (another client's work still going on)."""
    other = pymongo.MongoClient(uri, maxPoolSize=n, minPoolSize=n)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pool = [other.admin.command("ping") for _ in range(n)]
        if len(pool) == n and other.admin.command("serverStatus")["connections"]["current"]:
            break
    time.sleep(1.0)  # minPoolSize fills in the background
    return other


def test_waits_until_the_leftover_connections_are_gone(server):
    client = pymongo.MongoClient(server.uri)
    try:
        limit = quiesce.connections(client)
        assert limit is not None
        other = _leftover_connections(server.uri)
        assert quiesce.connections(client) > limit
        threading.Timer(2.0, other.close).start()
        q = quiesce.wait(client, "mongobench", 20.0, limit)
    finally:
        client.close()
    assert q["by"] == "connections" and not q["busy"], q
    assert 1.5 <= q["s"] < 15, q


def test_still_busy_at_the_bound_is_said(server):
    client = pymongo.MongoClient(server.uri)
    other = None
    try:
        limit = quiesce.connections(client)
        other = _leftover_connections(server.uri)
        t0 = time.monotonic()
        q = quiesce.wait(client, "mongobench", 1.5, limit)
        elapsed = time.monotonic() - t0
    finally:
        client.close()
        if other:
            other.close()
    assert q["by"] == "connections" and q["busy"] and q["left"] > 0, q
    assert elapsed < 10, elapsed
    text = quiesce.line(q, 1.5, "insert_batchsize/1000")
    assert text.startswith("warning: before insert_batchsize/1000: the server was still busy after")


def test_every_variant_but_the_first_records_its_wait(server, tmp_path, monkeypatch):
    lines, others = [], []
    real = perftables.run_variant

    def leaves_connections(*args, **kwargs):
        res = real(*args, **kwargs)
        if not others:  # the first variant's work goes on for 2 s after it ended
            others.append(_leftover_connections(server.uri))
            threading.Timer(2.0, others[0].close).start()
        return res

    monkeypatch.setattr(perftables, "run_variant", leaves_connections)
    run = perftables.run(
        server.uri, ["insert_batchsize"], "smoke", str(tmp_path / "r.json"),
        variants=["1000", "2000"], log=lines.append, os_path=False,
    )  # fmt: skip
    first, second = run["results"]
    assert "quiesce" not in first
    assert second["quiesce"]["by"] == "connections" and not second["quiesce"]["busy"]
    assert second["quiesce"]["s"] >= 1.0, second["quiesce"]
    assert any(
        "waited" in line and "for the server to finish earlier work" in line for line in lines
    )
    by_variant = {s["metadata"]["variant"]: s["metadata"] for s in results.to_samples(run)}
    assert "quiesce_s" not in by_variant["1000"]
    assert by_variant["2000"]["quiesce_s"] == second["quiesce"]["s"]
    assert by_variant["2000"]["quiesce_by"] == "connections"
    assert by_variant["2000"]["quiesce_busy"] is False
