"""RunOnClients (mongobench_pkb.ycsb): the readings that bracket a stress step's run begin
once every YCSB process's workload has begun and end as the last process ends, before
anything is stopped or fetched."""

import threading

import pytest
from fakevm import NEEDS_PKB, FakeVm

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from perfkitbenchmarker import errors

from mongobench_pkb import ycsb as mongobench_ycsb


@pytest.fixture
def recorded(monkeypatch, pkb_flags):
    """Start/Wait/Stop/Fetch replaced by recorders (PKB's flags parsed: its threads read
    them): client vm1's processes end 0.2 s after vm0's, so its thread is the last to see its
    processes end."""
    events, lock = [], threading.Lock()

    def note(what, vm):
        with lock:
            events.append((what, vm.name))

    def wait(vm, started, timeout_s, **kwargs):
        if vm.name == "vm1":
            threading.Event().wait(0.2)
        note("ended", vm)
        return {s.name: ("state", vm.name) for s in started}

    monkeypatch.setattr(mongobench_ycsb, "Start", lambda vm, specs: specs)
    monkeypatch.setattr(mongobench_ycsb, "Wait", wait)
    monkeypatch.setattr(mongobench_ycsb, "Stop", lambda vm, started: note("stop", vm))

    def fetch(vm, started, local_dir):
        note("fetch", vm)
        return {s.name: ("output", vm.name) for s in started}

    monkeypatch.setattr(mongobench_ycsb, "Fetch", fetch)
    return events, note


class _Proc:
    def __init__(self, stem, client):
        self.stem, self.phase, self.client = stem, "run", client


def test_on_end_runs_once_when_the_last_client_ends_before_its_stop_and_fetch(recorded):
    events, note = recorded
    clients = [FakeVm("vm0"), FakeVm("vm1")]
    procs = [_Proc("p0", 0), _Proc("p1", 1), _Proc("p2", 1)]
    got = mongobench_ycsb.RunOnClients(
        clients,
        procs,
        lambda p, vm: {},
        60,
        lambda vm: "/tmp",
        on_end=lambda: note("readings", clients[0]),
    )
    assert set(got) == {"p0", "p1", "p2"}
    assert [e for e in events if e[0] == "readings"] == [("readings", "vm0")]
    at = events.index(("readings", "vm0"))
    # after both clients' processes ended; before the last client's stop and fetch
    assert events.index(("ended", "vm0")) < at and events.index(("ended", "vm1")) < at
    assert at < events.index(("stop", "vm1")) < events.index(("fetch", "vm1"))


def test_on_end_runs_when_a_client_fails_and_the_failure_still_reaches_the_caller(
    recorded, monkeypatch
):
    events, note = recorded

    def wait(vm, started, timeout_s, **kwargs):
        note("ended", vm)
        if vm.name == "vm1":
            raise RuntimeError("YCSB on vm1 did not end in time")
        return {s.name: ("state", vm.name) for s in started}

    monkeypatch.setattr(mongobench_ycsb, "Wait", wait)
    clients = [FakeVm("vm0"), FakeVm("vm1")]
    with pytest.raises(errors.VmUtil.ThreadException, match="did not end"):
        mongobench_ycsb.RunOnClients(
            clients,
            [_Proc("p0", 0), _Proc("p1", 1)],
            lambda p, vm: {},
            60,
            lambda vm: "/tmp",
            on_end=lambda: note("readings", clients[0]),
        )
    assert events.count(("readings", "vm0")) == 1
    assert ("stop", "vm1") in events  # nothing is left running


def _printing(note, lines_after_s):
    """A Wait whose processes print their first status line `lines_after_s[vm]` seconds in
    and end 0.3 s later."""

    def wait(vm, started, timeout_s, *, poll_s=None, collected=None, **kwargs):
        assert poll_s is not None and collected is not None  # polled: their lines are seen
        threading.Event().wait(lines_after_s[vm.name])
        for s in started:
            collected.setdefault(s.name, []).append("0 sec: 0 operations;")
        note("printed", vm)
        threading.Event().wait(0.3)
        note("ended", vm)
        return {s.name: ("state", vm.name) for s in started}

    return wait


def test_on_start_runs_once_after_every_process_printed_and_before_on_end(recorded, monkeypatch):
    events, note = recorded
    monkeypatch.setattr(mongobench_ycsb, "STOP_CHECK_S", 0.02)
    monkeypatch.setattr(mongobench_ycsb, "Wait", _printing(note, {"vm0": 0.0, "vm1": 0.1}))
    clients = [FakeVm("vm0"), FakeVm("vm1")]
    mongobench_ycsb.RunOnClients(
        clients,
        [_Proc("p0", 0), _Proc("p1", 1), _Proc("p2", 1)],
        lambda p, vm: {},
        60,
        lambda vm: "/tmp",
        on_start=lambda: note("start readings", clients[0]),
        on_end=lambda: note("end readings", clients[0]),
    )
    assert events.count(("start readings", "vm0")) == 1
    at = events.index(("start readings", "vm0"))
    # after the last process printed its first line (vm1's), before any ended
    assert events.index(("printed", "vm1")) < at < events.index(("ended", "vm0"))
    assert at < events.index(("end readings", "vm0"))


def test_on_start_is_skipped_when_the_processes_end_before_every_one_printed(recorded, monkeypatch):
    events, note = recorded
    monkeypatch.setattr(mongobench_ycsb, "STOP_CHECK_S", 0.02)

    def wait(vm, started, timeout_s, **kwargs):  # they end without a status line
        note("ended", vm)
        return {s.name: ("state", vm.name) for s in started}

    monkeypatch.setattr(mongobench_ycsb, "Wait", wait)
    clients = [FakeVm("vm0")]
    mongobench_ycsb.RunOnClients(
        clients,
        [_Proc("p0", 0)],
        lambda p, vm: {},
        60,
        lambda vm: "/tmp",
        on_start=lambda: note("start readings", clients[0]),
        on_end=lambda: note("end readings", clients[0]),
    )
    assert ("start readings", "vm0") not in events
    assert events.count(("end readings", "vm0")) == 1


def test_a_failed_on_start_is_logged_and_the_run_goes_on(recorded, monkeypatch, caplog):
    events, note = recorded
    monkeypatch.setattr(mongobench_ycsb, "STOP_CHECK_S", 0.02)
    monkeypatch.setattr(mongobench_ycsb, "Wait", _printing(note, {"vm0": 0.0}))

    def broken():
        raise errors.VirtualMachine.RemoteCommandError("ssh: connection reset")

    clients = [FakeVm("vm0")]
    got = mongobench_ycsb.RunOnClients(
        clients,
        [_Proc("p0", 0)],
        lambda p, vm: {},
        60,
        lambda vm: "/tmp",
        on_start=broken,
        on_end=lambda: note("end readings", clients[0]),
    )
    assert set(got) == {"p0"} and ("end readings", "vm0") in events
    assert "the call at the workload's start failed: ssh: connection reset" in caplog.text
