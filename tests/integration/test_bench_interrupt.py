"""A bench told to stop (SIGTERM, as `kill` or a CI timeout sends it) stops the stand-in it
started and deletes its work directory, as Ctrl-C does: it once left the server running
and up to a GB in /tmp."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.integration
SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "bench_client.py")


def _children(pid: int) -> dict[int, str]:
    """pid's descendants, each with its command line."""
    parent, cmd = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                parent[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd[int(name)] = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
    out, todo = {}, [pid]
    while todo:
        p = todo.pop()
        for child, par in parent.items():
            if par == p and child not in out:
                out[child] = cmd.get(child, "")
                todo.append(child)
    return out


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie is ended
    except OSError:
        return True


def _work_has_uri(tmp_path) -> bool:
    return any(
        os.path.exists(os.path.join(tmp_path, n, "uri"))
        for n in os.listdir(tmp_path)
        if n.startswith("bench-client-")
    )


@pytest.mark.parametrize("when", ["starting", "started"])
def test_sigterm_stops_the_bench_s_server_and_deletes_its_work(tmp_path, when):
    """`starting`: as soon as the server's process exists (inside testbed.start_server,
    which must stop it: its own session never sees the caller's Ctrl-C); `started`: once
    the bench holds it (its URI written), inside main's `finally`."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    cmd = [sys.executable, SCRIPT, "--no-native", "--rounds", "1", "--records", "1000",
           "--experiment", "query_fetch", "--variant", "1 document, cached"]  # fmt: skip
    bench = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline, server = time.monotonic() + 300, None
        while server is None and time.monotonic() < deadline and bench.poll() is None:
            found = [p for p, c in _children(bench.pid).items() if "StandinServer" in c]
            server = found[0] if found else None
            time.sleep(0.2)
        assert server is not None, bench.stderr.read().decode()[-2000:] if bench.poll() else ""
        while when == "started" and not _work_has_uri(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert any(n.startswith("bench-client-") for n in os.listdir(tmp_path))
        bench.send_signal(signal.SIGTERM)
        _, err = bench.communicate(timeout=120)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    assert bench.returncode == 128 + signal.SIGTERM, err.decode()[-2000:]
    assert "interrupted (SIGTERM)" in err.decode()
    deadline = time.monotonic() + 30
    while not _gone(server) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _gone(server), "the stand-in outlived its bench"
    assert not [n for n in os.listdir(tmp_path) if n.startswith("bench-client-")]
