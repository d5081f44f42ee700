"""The fresh test bed's pure parts: mirror detection, PKB configs, one-line preflight."""

import os
import subprocess
import sys
import time

import pytest
import yaml

from testbed import bed as testbed
from testbed import fresh


def test_host_mirror_from_deb822_and_one_line_sources(tmp_path):
    deb822 = tmp_path / "debian.sources"
    deb822.write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\n"
    )
    assert fresh.host_mirror((str(deb822),)) == "http://mirror.example/debian"
    one = tmp_path / "sources.list"
    one.write_text("# x\ndeb https://tls.example/debian bookworm main\n"
                   "deb [arch=amd64] http://plain.example/debian/ bookworm main\n")  # fmt: skip
    assert fresh.host_mirror((str(one),)) == "http://plain.example/debian"


def test_fresh_configs_put_server_and_clients_on_their_own_machines(tmp_path):
    machines = {
        n: {"address": f"169.254.100.{10 + i}", "ns": f"mb100-{i}"}
        for i, n in enumerate(testbed.fresh_machine_names(2))
    }
    state = {"ssh_key": "/k", "machines": machines}
    paths = testbed.fresh_configs(str(tmp_path), state, client_vms=2)
    perf = yaml.safe_load(open(paths["mongodb_perftables"]))["mongodb_perftables"]
    groups = perf["vm_groups"]
    assert [vm["ip_address"] for vm in groups["servers"]["static_vms"]] == ["169.254.100.10"]
    assert [vm["ip_address"] for vm in groups["clients"]["static_vms"]] == [
        "169.254.100.11",
        "169.254.100.12",
    ]
    for vm in groups["servers"]["static_vms"] + groups["clients"]["static_vms"]:
        assert vm["install_packages"] is True and vm["user_name"] == "root"
        assert vm["internal_ip"] == vm["ip_address"]
    assert perf["flags"]["mongobench_static_package_changes"] is True
    assert perf["flags"]["mongobench_mongod_server"] == "standin"
    stress = yaml.safe_load(open(paths["mongodb_stress"]))["mongodb_stress"]
    assert stress["vm_groups"]["servers"]["static_vms"][0]["ip_address"] == "169.254.100.10"
    assert stress["vm_groups"]["clients"]["static_vms"][0]["ip_address"] == "169.254.100.11"


def test_preflight_names_missing_commands_and_packages(monkeypatch):
    monkeypatch.setattr(fresh.os, "geteuid", lambda: 0)
    monkeypatch.setattr(fresh, "_which", lambda c: None if c == "mmdebstrap" else "/x")
    with pytest.raises(
        fresh.FreshBedError, match="lacks mmdebstrap; install: apt-get install mmdebstrap"
    ):
        fresh.preflight()
    monkeypatch.setattr(fresh.os, "geteuid", lambda: 1000)
    with pytest.raises(fresh.FreshBedError, match="needs root"):
        fresh.preflight()


def test_a_proxy_that_never_listens_is_stopped(tmp_path, monkeypatch):
    # It is not in the bed's state yet, so `down` could not find it: start_proxy stops it.
    script = tmp_path / "acng"
    script.write_text(f"#!/bin/sh\necho $$ > {tmp_path}/pid\nexec sleep 60\n")
    script.chmod(0o755)
    monkeypatch.setattr(fresh, "_which", lambda c: str(script))
    monkeypatch.setattr(fresh, "host_address", lambda net: "127.0.0.1")

    def never(*a, **k):
        # the proxy has started (its pid written) and still does not listen; without this
        # wait it could be stopped before its first line ran, and the pid file never appear
        deadline = time.monotonic() + 30
        while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        raise fresh.PollTimeout("never")

    monkeypatch.setattr(fresh, "poll_until", never)
    with pytest.raises(fresh.FreshBedError, match="does not listen"):
        fresh.start_proxy(100, str(tmp_path), str(tmp_path / "cache"))
    pid = int((tmp_path / "pid").read_text())
    assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]


def test_host_processes_naming_a_machine_are_leftovers():
    # PKB's ssh ControlMaster processes name root@<address> on their command line.
    # one process each (dash forks for `sleep`, and its child names the address until exec)
    sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
    p = subprocess.Popen([*sleeper, "root@169.254.199.10"])
    other = subprocess.Popen([*sleeper, "root@169.254.199.100"])
    try:
        found = fresh.processes_naming(["169.254.199.10"], wait=0)
        assert [pid for pid, _ in found] == [p.pid]
        state = {"machines": {"server": {"ns": "mb199-0", "address": "169.254.199.10"}}}
        # the command line is cut at 120 characters: the interpreter's path may be long
        listed = fresh.leftovers(state)
        assert any(line.startswith(f"process {p.pid} ({sys.executable}") for line in listed)
    finally:
        for proc in (p, other):
            proc.kill()
            proc.wait()
    assert fresh.processes_naming(["169.254.199.10"], wait=0) == []
