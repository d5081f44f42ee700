"""The open loop (target_ops_per_s): each virtual client's intended schedule (no drift,
an even split over every client, catch-up accounting), latency counted from the
intended send time beside the service time, and the multiplexed loop holding each
operation until it is due, against a wire-protocol echo server on socket pairs whose
replies take a fixed time."""

from __future__ import annotations

import itertools
import socket
import struct
import threading
import time

import pytest

from mongobench.core import latency as lat
from mongobench.driver import multiplex, protocol
from mongobench.driver.base import ThreadStats
from mongobench.driver.cursor_sources import micros
from mongobench.perftables import checks, variant
from mongobench.perftables import experiments as exp_mod


# ------------------------------------------------------------------------ the schedule
def test_the_schedule_is_computed_from_the_epoch_without_drift():
    s = multiplex.Schedule(300.0, index=2, clients=7)
    dues = [s.next(1000.0) for _ in range(200_001)]
    assert dues[0] == 1000.0 + 2 / 300.0
    # the 200000th send is exactly where the rate puts it: nothing accumulates
    assert dues[-1] == pytest.approx(1000.0 + (200_000 * 7 + 2) / 300.0, abs=1e-9)
    gaps = {round(b - a, 9) for a, b in itertools.pairwise(dues)}
    assert gaps == {round(7 / 300.0, 9)}  # each client at its share: rate / clients


def test_the_rate_is_split_evenly_over_every_client_and_interleaved():
    rate, n = 1000.0, 6
    schedules = [multiplex.Schedule(rate, i, n) for i in range(n)]
    sends = sorted(t for s in schedules for t in (s.next(0.0) for _ in range(500)))
    # together: one send every 1/rate seconds, evenly spaced (no burst of all clients)
    gaps = [b - a for a, b in itertools.pairwise(sends)]
    assert min(gaps) == pytest.approx(1 / rate) and max(gaps) == pytest.approx(1 / rate)
    # over any window each client has its share (they differ by at most one)
    due = [sum(1 for k in range(500) if s.due(k) < 0.2) for s in schedules]
    assert sum(due) == 200 and max(due) - min(due) <= 1


def test_a_late_client_owes_what_its_schedule_had_due():
    s = multiplex.Schedule(100.0, index=0, clients=1)  # one every 10 ms: 0, 10, 20 ms ...
    assert s.owed(0.0) == 1  # the first is due at the start
    for _ in range(3):
        s.next(0.0)
    assert s.owed(0.0299) == 0  # three due (0, 10, 20 ms), three begun
    assert s.owed(0.0301) == 1
    assert s.owed(1.0) == 98  # 101 due by 1 s (0 .. 1000 ms), 3 begun
    late = multiplex.Schedule(100.0, index=3, clients=4)  # first due at 30 ms
    assert late.owed(0.02) == 0 and late.owed(0.031) == 1


def test_a_bad_rate_is_refused():
    with pytest.raises(ValueError, match="target_ops_per_s must be > 0"):
        multiplex.Schedule(0.0, 0, 1)


# ------------------------------------------------------- intended time and service time
def test_latency_counts_from_the_intended_time_and_service_time_from_the_send():
    stats, run = ThreadStats(), multiplex.Run()
    run.epoch = 500.0
    c = multiplex.Client(1, 4, run, stats)
    c.pace(200.0)  # 50 per second each; client 1 first due 5 ms after the epoch
    assert c.begin() == pytest.approx(500.005) and c.due == pytest.approx(500.005)
    c.lag = 0.030  # the loop sent it 30 ms late (the client was still busy)
    c.record("update", 40_000.0)  # reply 40 ms after the intended time
    assert c.begin() == pytest.approx(500.025)  # the next one: 4 clients / 200 per s later
    intended = lat.summarize(stats.latency.histograms["update"])
    service = lat.summarize(stats.service.histograms["update"])
    assert intended["p50_ms"] == pytest.approx(40.0, rel=0.01)
    assert service["p50_ms"] == pytest.approx(10.0, rel=0.01)


def test_a_closed_loop_client_starts_on_the_clock_and_records_no_service_time():
    stats = ThreadStats()
    c = multiplex.Client(0, 1, multiplex.Run(), stats)
    before = time.perf_counter()
    assert before <= c.begin() <= time.perf_counter()
    assert c.due is None and c.record == stats.latency.record
    c.record("read", 100.0)
    assert not stats.service.histograms


def test_the_service_figures_travel_between_processes():
    from mongobench.driver import procs

    stats = ThreadStats()
    stats.service.record("read", 1234.0)
    back = procs.decode_stats(procs.encode_stats(stats))
    assert back.service.histograms["read"].get_total_count() == 1
    old = procs.encode_stats(stats)
    del old["service_latency"]  # a follower of an older engine: none
    assert not procs.decode_stats(old).service.histograms


# ------------------------------------------------------------------- the loop, paced
_HDR = struct.Struct("<iiii")


class EchoServer:
    """Answers every OP_MSG on its sockets after `delay` seconds with the request's own
    body (a reply to its request id), one at a time per socket; keeps when each request
    arrived (perf_counter)."""

    def __init__(self, n: int, delay: float):
        pairs = [socket.socketpair() for _ in range(n)]
        self.client_socks = [a for a, _ in pairs]
        for a in self.client_socks:
            a.setblocking(False)
        self.arrivals: list[float] = []
        self.delay = delay
        self.threads = [
            threading.Thread(target=self._serve, args=(b,), daemon=True) for _, b in pairs
        ]
        for t in self.threads:
            t.start()

    def _serve(self, sock):
        with sock:
            while True:
                head = self._read(sock, 16)
                if head is None:
                    return
                length, rid, _, op = _HDR.unpack(head)
                body = self._read(sock, length - 16)
                self.arrivals.append(time.perf_counter())
                time.sleep(self.delay)
                try:
                    sock.sendall(_HDR.pack(length, 0, rid, op) + body)
                except OSError:
                    return

    @staticmethod
    def _read(sock, n):
        out = b""
        while len(out) < n:
            try:
                got = sock.recv(n - len(out))
            except OSError:
                return None
            if not got:
                return None
            out += got
        return out


def _ok(buf, length):
    return (None,)


_ok.op = "ping"


def _pings(c: multiplex.Client):
    run, stats = c.run, c.stats
    for _ in c.ops():
        if run.stopped:
            return
        t0 = c.begin()
        out = yield protocol.encode_msg({"ping": 1, "$db": "admin"}, c.rid), _ok
        assert out[0] is None
        c.record("ping", micros(run, t0))
        stats.ops["ping"] += 1


def _loop(server, source, clients, total=None):
    run, stats = multiplex.Run(), ThreadStats()
    members = [multiplex.Client(i, clients, run, stats, total) for i in range(clients)]
    return multiplex.Loop(server.client_socks, members, source, run, stats, timeout=10.0)


def test_the_loop_sends_no_operation_before_it_is_due_and_keeps_the_rate():
    server = EchoServer(2, delay=0.001)
    loop = _loop(server, multiplex.paced(_pings, 100.0), clients=2, total=40)
    t0 = time.perf_counter()
    loop.run_all()
    wall = time.perf_counter() - t0
    assert loop.stats.ops["ping"] == 40
    arrivals = sorted(server.arrivals)
    epoch = loop.run.epoch
    # op j of the variant (client j % 2) is due j / 100 s after the start: never sent early
    for j, t in enumerate(arrivals):
        assert t >= epoch + j / 100.0 - 1e-6, (j, t - epoch)
    assert wall >= 0.39  # 40 operations at 100 per second: the loop did not run ahead
    assert wall < 0.39 + 1.5  # nor drift far behind (generous: a loaded 2-core machine)
    # every client did its quota: nothing is owed, however late the last ones were
    assert not loop.stats.counters["open_loop_owed_ops"]
    intended = lat.summarize(loop.stats.latency.histograms["ping"])
    service = lat.summarize(loop.stats.service.histograms["ping"])
    assert intended["count"] == service["count"] == 40
    assert service["p50_ms"] <= intended["p50_ms"]


def test_beyond_capacity_latency_counts_the_wait_the_closed_loop_hides():
    """One client, a server answering in 10 ms (at most 100 per second), asked for 400 per
    second for one second: the sends fall behind, each operation's latency counts from its
    intended time (hundreds of ms by the end), its service time stays near 10 ms, and what
    the schedule had due but could not be begun is counted."""
    server = EchoServer(1, delay=0.010)
    loop = _loop(server, multiplex.paced(_pings, 400.0), clients=1)
    loop.deadline = time.perf_counter() + 1.0
    loop.run_all()
    done = loop.stats.ops["ping"]
    assert 0 < done <= 110  # the server's capacity, not the target
    intended = lat.summarize(loop.stats.latency.histograms["ping"])
    service = lat.summarize(loop.stats.service.histograms["ping"])
    assert service["p50_ms"] >= 10.0
    assert intended["p50_ms"] > 5 * service["p50_ms"], (intended, service)
    assert intended["max_ms"] > 400.0  # by the end it was ~750 ms behind its schedule
    # about 400 were due in the second: those not begun are owed (catch-up accounting)
    assert loop.stats.counters["open_loop_owed_ops"] >= 400 - done - 50


def test_a_client_that_did_its_quota_late_owes_nothing():
    server = EchoServer(1, delay=0.05)  # 2 operations due 10 ms apart, each taking 50 ms
    loop = _loop(server, multiplex.paced(_pings, 100.0), clients=1, total=2)
    loop.run_all()
    assert loop.stats.ops["ping"] == 2
    assert not loop.stats.counters["open_loop_owed_ops"]  # late, but all done


def test_a_stopped_open_loop_drops_the_operations_it_holds_without_an_error():
    server = EchoServer(3, delay=0.0)
    loop = _loop(server, multiplex.paced(_pings, 3.0), clients=3)  # one a second each
    loop.deadline = time.perf_counter() + 0.3
    t0 = time.perf_counter()
    loop.run_all()
    assert time.perf_counter() - t0 < 1.0  # not held until the next due time (1 s away)
    assert loop.stats.ops["ping"] == 1  # client 0 at the start; 1 and 2 were due later
    assert not loop.stats.errors and not loop.timers and not loop.conns


# --------------------------------------------------------------- settings and refusals
def _plan(workload="hot_update", **settings):
    e = exp_mod.Experiment("e", "E", "S", workload, ["threads"], {"threads": 2}, [{}])
    v = exp_mod.Variant("e", 0, "2", {}, {"threads": 2, **settings})
    return [(e, [v])]


def test_target_ops_per_s_is_a_setting_with_a_range():
    assert exp_mod.parse_overrides(["target_ops_per_s=250"]) == {"target_ops_per_s": 250}
    with pytest.raises(exp_mod.ExperimentError, match="target_ops_per_s=0 is not a number"):
        exp_mod.parse_overrides(["target_ops_per_s=0"])


def test_the_pymongo_path_refuses_an_open_loop_up_front():
    checks.check_open_loop(_plan(target_ops_per_s=100), "multiplexed")
    checks.check_open_loop(_plan(), "pymongo")  # closed loop: fine
    with pytest.raises(exp_mod.ExperimentError, match="--client-path pymongo is a closed loop"):
        checks.check_open_loop(_plan(target_ops_per_s=100), "pymongo")
    with pytest.raises(exp_mod.ExperimentError, match="pipelined client, a closed loop only"):
        checks.check_open_loop(
            _plan("read_update", driver="pipelined", target_ops_per_s=5), "multiplexed"
        )


def test_open_loop_figures_compare_the_achieved_rate_with_the_target():
    stats = ThreadStats()
    stats.ops["update"] = 450
    stats.counters["open_loop_owed_ops"] = 3
    fig = variant.open_loop_figures({"target_ops_per_s": 100}, stats, 5.0)
    assert fig == {
        "target_ops_per_s": 100.0,
        "achieved_ops_per_s": 90.0,
        "achieved_share": 0.9,
        "owed_ops": 3,
    }
    assert variant.open_loop_figures({}, stats, 5.0) is None
