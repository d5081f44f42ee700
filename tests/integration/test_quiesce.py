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
from mongobench.perftables.request import PerftablesRun
from mongobench.reports import results
from testbed import bed as testbed

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = testbed.start_server(str(built_workdir(tmp_path_factory, "quiesce")))
    yield srv
    srv.stop()


def _client(uri):
    c = pymongo.MongoClient(uri, maxPoolSize=1)
    c.admin.command("ping")  # its connection (and its monitor's) open
    return c


def _closing_one_by_one(clients, every_s=0.3):
    """Another client's work ending bit by bit: its connections close one by one."""

    def body():
        for c in clients:
            time.sleep(every_s)
            c.close()

    threading.Thread(target=body, daemon=True).start()


def test_waits_until_the_leftover_connections_are_gone(server):
    client = pymongo.MongoClient(server.uri)
    try:
        limit = quiesce.connections(client)
        assert limit is not None
        others = [_client(server.uri) for _ in range(10)]
        assert quiesce.connections(client) >= limit + 10
        _closing_one_by_one(others)
        q = quiesce.wait(client, "mongobench", 20.0, limit)
        assert quiesce.connections(client) <= limit
    finally:
        client.close()
    assert q["by"] == "connections" and not q["busy"], q
    assert 2.0 <= q["s"] < 15, q


def test_still_busy_at_the_bound_is_said(server):
    client = pymongo.MongoClient(server.uri)
    others, stop = [], threading.Event()

    def opening():  # new connections keep coming: the count never settles
        while not stop.wait(0.3):
            others.append(_client(server.uri))

    try:
        limit = quiesce.connections(client)
        others.extend(_client(server.uri) for _ in range(3))
        threading.Thread(target=opening, daemon=True).start()
        t0 = time.monotonic()
        q = quiesce.wait(client, "mongobench", 3.0, limit)
        elapsed = time.monotonic() - t0
    finally:
        stop.set()
        client.close()
        time.sleep(0.5)
        for c in others:
            c.close()
    assert q["by"] == "connections" and q["busy"] and q["left"] > 0, q
    assert elapsed < 15, elapsed
    text = quiesce.line(q, 3.0, "insert_batchsize/1000")
    assert text.startswith("warning: before insert_batchsize/1000: the server was still busy after")


def test_connections_held_by_live_clients_settle(server):
    # a count that stays put (the run's pooled connections) is not waited for to the bound
    client = pymongo.MongoClient(server.uri)
    held = [_client(server.uri) for _ in range(3)]
    try:
        limit = quiesce.connections(client) - 3
        q = quiesce.wait(client, "mongobench", 30.0, limit)
    finally:
        client.close()
        for c in held:
            c.close()
    assert q["by"] == "connections" and not q["busy"] and q["s"] < 10, q


def test_every_variant_but_the_first_records_its_wait(server, tmp_path, monkeypatch):
    lines, others = [], []
    real = perftables.run_variant

    def leaves_connections(*args, **kwargs):
        res = real(*args, **kwargs)
        if not others:  # the first variant's work ends bit by bit after it ended
            others.extend(_client(server.uri) for _ in range(10))
            _closing_one_by_one(others)
        return res

    monkeypatch.setattr(perftables, "run_variant", leaves_connections)
    run = perftables.run(
        PerftablesRun(
            experiments=["insert_batchsize"],
            scale="smoke",
            out=str(tmp_path / "r.json"),
            variants=["1000", "2000"],
            os_path="none",
        ),
        server.uri,
        log=lines.append,
    )
    first, second = run["results"]
    assert "quiesce" not in first
    assert second["quiesce"]["by"] == "connections" and not second["quiesce"]["busy"]
    assert second["quiesce"]["s"] >= 2.0, second["quiesce"]
    assert any(
        "waited" in line and "for the server to finish earlier work" in line for line in lines
    )
    by_variant = {s["metadata"]["variant"]: s["metadata"] for s in results.to_samples(run)}
    assert "quiesce_s" not in by_variant["1000"]
    assert by_variant["2000"]["quiesce_s"] == second["quiesce"]["s"]
    assert by_variant["2000"]["quiesce_by"] == "connections"
    assert by_variant["2000"]["quiesce_busy"] is False
