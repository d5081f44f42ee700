"""A server-bound variant is judged as the server: a stand-in that admits one write at a
time (--tickets 1, each holding its ticket 5 ms) makes eight clients wait on it, and the
variant's bottleneck line names the write tickets from serverStatus. The same variant on
the unlimited stand-in names no client from host CPU: the client shares the server's host
here, so CPU names nothing."""

import pytest

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


def test_the_unlimited_standin_names_no_client_from_host_cpu(server_uri, tmp_path):
    run, line = _line(server_uri, tmp_path, "free")
    assert run["results"][0]["server_signals"]["write_tickets_pct"] is None  # no tickets
    assert not line.startswith("client"), line
    assert line.startswith(("shared host (", "none saturated (")), line
