"""A server-bound variant is judged as the server: a stand-in that admits one write at a
time (--tickets 1, each holding its ticket 5 ms) makes eight clients wait on it, and the
variant's bottleneck line names the write tickets from serverStatus. The same variant on
the unlimited stand-in names no client from host CPU: the client shares the server's host
here, so CPU names nothing."""

import os
import threading
import time

import pytest
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from mongobench.perftables import runner as perftables
from mongobench.perftables.request import PerftablesRun
from mongobench.reports import results
from testbed import bed as testbed

pytestmark = pytest.mark.integration

OVER = {"duration_s": 3.0, "total_ops": 10**9, "threads": 8, "write_concern": 1}


def _line(uri, tmp_path, name) -> tuple[dict, str]:
    run = perftables.run(
        PerftablesRun(
            experiments=["concurrency"],
            scale="smoke",
            out=str(tmp_path / f"{name}.json"),
            database="mb_neck",
            variants=["10, False"],
            overrides=OVER,
            os_path="none",
            processes=1,
        ),
        uri,
        log=lambda m: None,
    )
    [r] = run["results"]
    assert r["status"] == "ok" and not r["errors"], r.get("error") or r["errors"]
    md = next(s["metadata"] for s in results.to_samples(run))
    return run, md["bottleneck"]


@pytest.fixture(scope="module")
def one_ticket(tmp_path_factory):
    srv = testbed.start_server(
        str(tmp_path_factory.mktemp("tickets")), "standin", tickets=1, ticket_hold_ms=5
    )
    yield srv
    srv.stop()


def test_a_server_bound_variant_is_judged_as_the_server(one_ticket, tmp_path):
    run, line = _line(one_ticket.uri, tmp_path, "tickets")
    assert run["shared_host"] is True  # a loopback target
    [r] = run["results"]
    assert r["server_signals"]["write_tickets_pct"] == 100.0
    assert r["server_signals"]["queue"] >= 1
    assert line == "write tickets (100% in use, serverStatus)", line
    # 8 clients on one 5 ms ticket: at most 200 updates/s
    assert sum(r["ops"].values()) / r["duration_s"] <= 210


def _insert(client, i):
    try:
        client.mb.t.insert_one({"_id": i})
    except PyMongoError:
        pass  # the server was stopped under the waiting writers


def test_a_blocked_connection_holds_up_no_other(tmp_path):
    """As mongod's thread per connection: writers waiting for the only ticket (held 2 s each)
    hold up their own connections only, and serverStatus on another one reads them at once.
    On netty's event-loop threads (2 per CPU), more blocked writers than threads left
    serverStatus waiting for a ticket's release, so its reading was taken when none was in use."""
    srv = testbed.start_server(str(tmp_path), "standin", tickets=1, ticket_hold_ms=2000)
    writers = 2 * (os.cpu_count() or 1) + 2  # a blocked request on every event-loop thread
    clients = [MongoClient(srv.uri) for _ in range(writers)]
    try:
        for i, c in enumerate(clients):
            c.admin.command("ping")  # connected before the first one holds the ticket
            threading.Thread(target=_insert, args=(c, i), daemon=True).start()
        with MongoClient(srv.uri, socketTimeoutMS=1500) as probe:
            status = {}
            for _ in range(40):  # until every writer's request has reached the server
                status = probe.admin.command("serverStatus")
                if status["globalLock"]["currentQueue"]["writers"] == writers - 1:
                    break
                time.sleep(0.02)
            # a 1.5 s socket timeout: answered while a writer holds its 2 s ticket
            assert status["queues"]["execution"]["write"]["out"] == 1
            assert status["globalLock"]["currentQueue"]["writers"] == writers - 1
    finally:
        srv.stop()
        for c in clients:
            c.close()


def test_the_unlimited_standin_names_no_client_from_host_cpu(server_uri, tmp_path):
    run, line = _line(server_uri, tmp_path, "free")
    assert run["results"][0]["server_signals"]["write_tickets_pct"] is None  # no tickets
    assert not line.startswith("client"), line
    assert line.startswith(("shared host (", "none saturated (")), line
