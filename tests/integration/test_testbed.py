"""`scripts/testbed up|down` (`python -m testbed`): real processes, really stopped."""

import pathlib
import subprocess
import sys

import pytest
import yaml
from pymongo import MongoClient

from testbed import bed as testbed

pytestmark = pytest.mark.integration


def test_up_serves_mongo_and_ssh_then_down_stops_everything(tmp_path):
    d = str(tmp_path / "tb")
    state = testbed.up(d)
    try:
        assert all(testbed.alive(p) for p in state["pids"].values())
        with open(state["uri_file"]) as f:
            uri = f.read().strip()
        with MongoClient(uri, serverSelectionTimeoutMS=5000) as c:
            assert c.admin.command("ping")["ok"] == 1
        ssh = [
            "ssh",
            "-i",
            state["ssh_key"],
            "-p",
            str(state["ssh_port"]),
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            f"{state['ssh_user']}@127.0.0.1",
            "echo ok",
        ]
        assert (
            subprocess.run(ssh, capture_output=True, text=True, timeout=30).stdout.strip() == "ok"
        )
        cfg = yaml.safe_load(open(state["configs"]["mongodb_perftables"]))
        vm = cfg["mongodb_perftables"]["vm_groups"]["clients"]["static_vms"][0]
        assert vm["install_packages"] is False and vm["ssh_port"] == state["ssh_port"]
        with pytest.raises(RuntimeError, match="already up"):
            testbed.up(d)
    finally:
        testbed.down(d)
    assert not any(testbed.alive(p) for p in state["pids"].values())
    assert not (tmp_path / "tb").exists()


def test_cli_up_down(tmp_path):
    d = str(tmp_path / "tb2")
    run = [sys.executable, "-m", "testbed"]
    repo = pathlib.Path(__file__).resolve().parents[2]  # `testbed` is a checkout's package
    up = subprocess.run(
        run + ["up", "--no-ssh", "--dir", d], capture_output=True, text=True, timeout=180, cwd=repo
    )
    assert up.returncode == 0, up.stderr
    assert "mongodb://127.0.0.1:" in up.stdout
    subprocess.run(run + ["down", "--dir", d], check=True, timeout=60, cwd=repo)
    assert not (tmp_path / "tb2").exists()
