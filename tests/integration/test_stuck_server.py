"""A server that stops answering (SIGSTOP: connections are accepted, nothing replies) fails the
variant within the reply timeout, in one line, on the control path (pymongo: prepare) and in the
multiplexed timed phase; the run never hangs."""

import os
import signal
import threading
import time

import pytest
from standin_helpers import built_workdir

from mongobench.driver.catalog import WORKLOADS
from mongobench.perftables import checks, target, variant
from mongobench.perftables import experiments as exp_mod
from mongobench.perftables import runner as perftables
from mongobench.perftables.request import PerftablesRun
from testbed import bed as testbed

pytestmark = pytest.mark.integration

QUICK = "serverSelectionTimeoutMS=2000"
BOUND_S = 3.0


@pytest.fixture
def frozen_server(tmp_path_factory):
    """A stand-in, and a function that freezes it; thawed and stopped afterwards."""
    workdir = built_workdir(tmp_path_factory, "stuck")
    srv = testbed.start_server(str(workdir))

    def freeze():
        os.kill(srv.pid, signal.SIGSTOP)
        # The stop reaches every JVM thread asynchronously: a request sent meanwhile could
        # still be answered. Wait until each thread is stopped.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            states = []
            for tid in os.listdir(f"/proc/{srv.pid}/task"):
                with open(f"/proc/{srv.pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            if all(st in "tT" for st in states):
                return
            time.sleep(0.01)
        raise AssertionError("the stand-in did not stop")

    yield srv, freeze
    try:
        os.kill(srv.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    srv.stop()


def _bounded(fn, limit_s):
    """fn() in a thread; fails the test (instead of hanging it) when it runs past limit_s."""
    out = {}

    def body():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out["error"] = e

    t0 = time.monotonic()
    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(limit_s)
    assert not t.is_alive(), f"still waiting after {limit_s} s: the wait is not bounded"
    return out, time.monotonic() - t0


def test_stuck_in_prepare_fails_the_variant_within_the_bound(tmp_path, frozen_server, monkeypatch):
    srv, freeze = frozen_server
    base = WORKLOADS["insert"]

    class FrozenBeforePrepare(base):
        def prepare(self):
            freeze()
            return super().prepare()

    monkeypatch.setitem(WORKLOADS, "insert", FrozenBeforePrepare)
    lines = []
    out, elapsed = _bounded(
        lambda: perftables.run(
            PerftablesRun(
                experiments=["insert_batchsize"],
                scale="smoke",
                out=str(tmp_path / "r.json"),
                variants=["1000", "2000"],
                reply_timeout=BOUND_S,
            ),
            f"{srv.uri}?{QUICK}",
            log=lines.append,
        ),  # fmt: skip
        60,
    )
    run = out["value"]
    first, second = run["results"]
    assert first["status"] == "failed"
    assert first["error"].startswith(f"no reply from the server in {BOUND_S:g} s")
    assert first["error"].endswith("during prepare")
    assert "\n" not in first["error"]
    assert second["error"].startswith("not run:")
    assert run["reply_timeout_s"] == BOUND_S
    assert any(line.startswith(f"reply timeout: {BOUND_S:g} s (flag;") for line in lines)
    # the bound, a ping of at most 5 s, and start-up: far from the former unbounded wait
    assert elapsed < 30, elapsed


def test_stuck_in_the_timed_phase_fails_within_the_bound(frozen_server):
    srv, freeze = frozen_server
    uri = f"{srv.uri}?{QUICK}&socketTimeoutMS={int(BOUND_S * 1000)}"
    catalog = exp_mod.load()
    [(experiment, variants)] = exp_mod.plan(
        catalog,
        ["replace"],
        "full",
        ["500000"],
        {"preload_docs": 200, "duration_s": 60, "threads": 2},
    )
    assert checks.reply_timeout(uri) == (BOUND_S, "uri")
    client = target.connect(uri, socketTimeoutMS=int(BOUND_S * 1000))

    def on_phase(name, planned_s=None):
        if name == "timed":  # workers start, connect, then the server freezes mid-phase
            threading.Timer(1.5, freeze).start()

    try:
        out, elapsed = _bounded(
            lambda: variant.run_variant(
                client,
                experiment,
                variants[0],
                PerftablesRun(processes=1, reply_timeout=BOUND_S),
                uri,
                log=lambda m: None,
                on_phase=on_phase,
            ).to_dict(),
            45,
        )
    finally:
        client.close()
    # Either the loop's no-reply limit or the workers' handshake hit the bound: never the
    # former fixed 30 s, never the 60 s duration.
    if "error" in out:
        text = str(out["error"])
        assert f"in {BOUND_S:g} s" in text, text
    else:
        res = out["value"]
        assert res["errors"].get("replace: NetworkTimeout"), res["errors"]
        assert f"no reply in {BOUND_S:g} s" in str(res["error_samples"])
    assert elapsed < 25, elapsed
    print(f"timed phase: {elapsed:.1f} s", out.get("error") or out["value"]["error_samples"])


def test_stuck_with_the_default_bound_on_the_run_client(tmp_path, frozen_server, monkeypatch):
    # The URI sets no serverSelectionTimeoutMS: the run reconnects with its own 5 s selection.
    # That client had no socketTimeoutMS when the bound was the default: prepare hung forever.
    srv, freeze = frozen_server
    monkeypatch.setattr(checks, "DEFAULT_REPLY_TIMEOUT_S", BOUND_S)
    base = WORKLOADS["insert"]

    class FrozenBeforePrepare(base):
        def prepare(self):
            freeze()
            return super().prepare()

    monkeypatch.setitem(WORKLOADS, "insert", FrozenBeforePrepare)
    lines = []
    out, elapsed = _bounded(
        lambda: perftables.run(
            PerftablesRun(
                experiments=["insert_batchsize"],
                scale="smoke",
                out=str(tmp_path / "r.json"),
                variants=["1000"],
            ),
            srv.uri,
            log=lines.append,
        ),  # fmt: skip
        60,
    )
    (first,) = out["value"]["results"]
    assert first["status"] == "failed"
    assert first["error"].startswith(f"no reply from the server in {BOUND_S:g} s")
    assert any(line.startswith(f"reply timeout: {BOUND_S:g} s (default;") for line in lines)
    assert elapsed < 30, elapsed
