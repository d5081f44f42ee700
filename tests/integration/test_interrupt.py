"""SIGTERM and SIGINT stop the engine's whole process tree within 2 s (issue 22, bad 2):
worker processes and YCSB's Java included, the partial results written with the
interrupted variant or phase marked, one line on stderr and no traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from mongobench.remote import javabuild

pytestmark = pytest.mark.integration

STOP_S = 2.0


def session_members(sid: int) -> list[str]:
    """`pid command` of every live (not zombie) process of session `sid`."""
    out = subprocess.run(
        ["ps", "-o", "pid=,stat=,args=", "-s", str(sid)], capture_output=True, text=True
    ).stdout
    return [line for line in out.splitlines() if line.split()[1][0] != "Z"]


def start(*argv) -> subprocess.Popen:
    # a session of its own, as PKB starts the engine: every descendant is found by its sid
    return subprocess.Popen(
        [sys.executable, "-m", "mongobench", *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"no {what} within {timeout} s")


def stop(proc: subprocess.Popen, signum: int) -> tuple[float, str]:
    """Sends `signum` to the engine alone; returns (seconds until its whole session was
    gone, its stderr)."""
    t0 = time.monotonic()
    proc.send_signal(signum)
    try:
        wait_for(lambda: not session_members(proc.pid), 30, "end of the session")
    finally:
        leftover = session_members(proc.pid)
        for line in leftover:
            os.kill(int(line.split()[0]), signal.SIGKILL)
    elapsed = time.monotonic() - t0
    _, err = proc.communicate(timeout=10)
    assert not leftover, leftover
    return elapsed, err


def workers_of(pid: int) -> list[str]:
    return [m for m in session_members(pid) if int(m.split()[0]) != pid]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_perftables_stops_with_its_workers_and_keeps_the_partial_results(
    tmp_path, uri_file, signum
):
    out = tmp_path / "r.json"
    proc = start(
        "perftables", "run", "--uri-file", uri_file, "--scale", "smoke", "--os-path", "none",
        "--experiments", "update_fields", "--variants", "1, 500000, plain;10, 500000, plain",
        "--set", "duration_s=60", "--processes", "2", "--out", str(out),
    )  # fmt: skip
    # the first variant's timed phase runs in two worker processes
    wait_for(lambda: len(workers_of(proc.pid)) >= 2, 120, "worker processes")
    time.sleep(1.0)
    elapsed, err = stop(proc, signum)
    name = signal.Signals(signum).name
    assert elapsed < STOP_S, elapsed
    assert proc.returncode == 128 + signum, err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last == (
        f"mongobench: stopped by {name} during update_fields [1, 500000, plain];"
        f" 1 variant result(s) in {out}"
    )
    run = json.loads(out.read_text())
    (res,) = run["results"]
    assert res["status"] == "failed" and res["interrupted"] == name
    assert res["error"] == f"interrupted by {name}" == res["fails_run"]
    assert run["interrupted"] == f"{name} during update_fields [1, 500000, plain]"


def test_sweep_stops_ycsb_and_marks_the_phase(tmp_path, server_uri):
    javabuild.build()
    uri = tmp_path / "uri"
    uri.write_text(server_uri.rstrip("/") + "/t_interrupt\n")
    uri.chmod(0o600)
    out = tmp_path / "sweep.json"
    proc = start(
        "sweep", "run", "--uri-file", str(uri), "--sizes", "50", "--phases", "load",
        "--out", str(out),
    )  # fmt: skip
    wait_for(
        lambda: any(" java " in f" {m} " or "/java " in m for m in workers_of(proc.pid)),
        120,
        "YCSB's Java process",
    )
    time.sleep(1.0)
    elapsed, err = stop(proc, signal.SIGTERM)
    assert elapsed < STOP_S, elapsed
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == "mongobench: stopped by SIGTERM"
    (sample,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert sample["metric"] == "Phase Failed"
    assert sample["metadata"]["error"] == "interrupted by SIGTERM"
