"""The open loop on the stand-in (issue 21, done when): a server that admits one write at a
time (--tickets 1, each held 5 ms: at most ~200 updates/s) is saturated by two clients.
Closed loop, each client waits for its reply before the next send, so the latency stays
near two ticket holds however far behind the intended rate the clients are (coordinated
omission). Open loop at 500/s, beyond what the server can do, every operation's latency
counts from when it should have been sent: it exceeds the closed-loop figure, while its
service time (from the actual send) does not tell the difference. Below saturation (the
unlimited stand-in) the open loop gets its rate and the bottleneck line says so. Orderings with wide margins, not
timings: the machine is a loaded 2-core one."""

import re

import pytest

from mongobench.core import latency as lat
from mongobench.perftables import runner as perftables
from mongobench.perftables.request import PerftablesRun
from mongobench.reports import report, results
from testbed import bed as testbed

pytestmark = pytest.mark.integration

OVER = {"duration_s": 2.0, "total_ops": 10**9, "threads": 2, "write_concern": 1}


@pytest.fixture(scope="module")
def one_ticket(tmp_path_factory):
    srv = testbed.start_server(
        str(tmp_path_factory.mktemp("openloop")), "standin", tickets=1, ticket_hold_ms=5
    )
    yield srv
    srv.stop()


def _variant(uri, tmp_path, name, log=lambda m: None, **extra) -> tuple[dict, dict]:
    run = perftables.run(
        PerftablesRun(
            experiments=["concurrency"],
            scale="smoke",
            out=str(tmp_path / f"{name}.json"),
            database="mb_open",
            variants=["10, False"],
            overrides=dict(OVER, **extra),
            os_path="none",
            processes=1,
        ),
        uri,
        log=log,
    )
    [r] = run["results"]
    assert r["status"] == "ok" and not r["errors"], r.get("error") or r["errors"]
    return run, r


def _p50(encoded: dict) -> float:
    hist = lat.LatencyRecorder.decode(encoded).histograms["update"]
    return lat.summarize(hist)["p50_ms"]


def test_beyond_saturation_the_open_loop_latency_exceeds_the_closed_loop_figure(
    one_ticket, tmp_path
):
    _, closed = _variant(one_ticket.uri, tmp_path, "closed")
    assert "open_loop" not in closed and "service_latency" not in closed
    closed_rate = sum(closed["ops"].values()) / closed["duration_s"]
    closed_p50 = _p50(closed["latency"])
    assert closed_rate <= 230  # one 5 ms ticket: the server is the limit

    # beyond what one 5 ms ticket allows (200/s) whatever the closed loop got on a loaded
    # machine (its own figure can be far lower: twice it may not saturate the server)
    target = 500
    run, paced = _variant(one_ticket.uri, tmp_path, "open", target_ops_per_s=target)
    ol = paced["open_loop"]
    assert ol["target_ops_per_s"] == target
    assert ol["achieved_share"] < 0.8  # the server could not keep up
    assert ol["owed_ops"] > 0  # operations due that no client could begin
    intended, service = _p50(paced["latency"]), _p50(paced["service_latency"])
    # coordinated omission corrected: the wait behind the schedule is in the latency
    assert intended > 3 * closed_p50, (intended, closed_p50)
    assert intended > 3 * service, (intended, service)
    md = {s["metric"]: s["metadata"] for s in results.to_samples(run)}
    assert not md["Operation Throughput"]["bottleneck"].startswith("offered load")


def test_below_saturation_the_open_loop_gets_its_rate(server_uri, tmp_path):
    lines = []
    run, paced = _variant(server_uri, tmp_path, "slow", lines.append, target_ops_per_s=40)
    ol = paced["open_loop"]
    # the variant's [i/N] line says the rate it got against the offered one
    assert any(re.search(r"\[1/1\] .* errors, \d+ of 40 ops/s offered,", x) for x in lines), lines
    assert 0.9 <= ol["achieved_share"] <= 1.05, ol
    assert ol["owed_ops"] <= 3  # at most one a client behind when the phase ended
    md = {s["metric"]: s["metadata"] for s in results.to_samples(run)}
    line = md["Operation Throughput"]["bottleneck"]
    assert line.startswith("offered load (") and "of 40 ops/s" in line, line
    assert md["Operation Throughput"]["target_ops_per_s"] == 40


def test_rate_steps_give_a_latency_versus_throughput_curve(one_ticket, tmp_path):
    """--rate-steps 40/s,500/s: the closed loop, then well below and beyond what one 5 ms
    ticket allows (rates, not fractions of a closed-loop figure a loaded machine makes
    low); the steps are results of their own, the report draws the curve, and beyond
    saturation the latency exceeds the closed loop's."""
    run = perftables.run(
        PerftablesRun(
            experiments=["concurrency"],
            scale="smoke",
            out=str(tmp_path / "steps.json"),
            database="mb_open",
            variants=["10, False"],
            overrides=dict(OVER, duration_s=1.5),
            os_path="none",
            processes=1,
            rate_steps="40/s,500/s",
        ),
        one_ticket.uri,
        log=lambda m: None,
    )
    closed, half, twice = run["results"]
    assert [r["label"] for r in run["results"]] == ["2, False", "2, False @ 40/s",
                                                     "2, False @ 500/s"]  # fmt: skip
    assert all(r["status"] == "ok" and not r["errors"] for r in run["results"])
    assert closed["rate_step"]["closed_loop_ops_per_s"] > 0
    assert closed["rate_step"]["step"] == 0 and "open_loop" not in closed
    assert half["open_loop"]["target_ops_per_s"] == 40
    assert twice["open_loop"]["target_ops_per_s"] == 500
    assert twice["rate_step"] == dict(
        closed["rate_step"], step=2, name="500/s", fraction=None, rate=500.0
    )
    assert half["open_loop"]["achieved_share"] >= 0.85  # below saturation: got its rate
    assert twice["open_loop"]["achieved_share"] < 0.8  # beyond it: the server's pace
    assert _p50(twice["latency"]) > 3 * _p50(closed["latency"])
    samples = results.to_samples(run)
    steps = {
        s["metadata"]["rate_step_name"] for s in samples if s["metric"] == "update p50 latency"
    }
    assert steps == {"closed loop", "40/s", "500/s"}
    text = report.render(samples, plots_dir=str(tmp_path / "plots"))
    assert "### Latency versus throughput: 2, False" in text
    assert (tmp_path / "plots" / "concurrency-rate-0.png").exists()
