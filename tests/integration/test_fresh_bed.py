"""`mongobench testbed up --fresh`: machines that are really separate, and really gone after down.

Two machines (server, client): each answers ssh on its own link-local address with its own
host name, reaches the other machine and the bed's package proxy, and nothing else (no route
off the link). After `down`: no namespace, bridge, process or mount of the bed is left and its
directory is gone. Needs root (namespaces, chroot); the first run builds the Debian root
tarball (mmdebstrap, a few minutes), later runs take it from the cache.
"""

import os
import subprocess

import pytest

from testbed import bed as testbed
from testbed import fresh

pytestmark = pytest.mark.integration


def ssh(state, machine, command):
    m = state["machines"][machine]
    cmd = ["ssh", "-i", state["ssh_key"], "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
           "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10",
           f"root@{m['address']}", command]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_fresh_machines_are_separate_and_leave_nothing(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the fresh test bed needs root (network namespaces, chroot, mounts)")
    d = str(tmp_path / "tb")
    state = testbed.up(d, fresh_machines=True)
    try:
        server, client = (state["machines"][n]["address"] for n in ("server", "client"))
        assert server != client and server.startswith("169.254.")
        assert ssh(state, "client", "hostname").stdout.strip() == "client"
        assert ssh(state, "server", "hostname").stdout.strip() == "server"
        # client -> server over the link, by address and by host name
        probe = (
            "python3 -c 'import socket,sys; s=socket.create_connection((sys.argv[1],22),5);"
            " print(s.recv(4).decode())' "
        )
        assert ssh(state, "client", probe + server).stdout.strip() == "SSH-"
        assert ssh(state, "client", probe + "server").stdout.strip() == "SSH-"
        # nothing off the link: no route to this host's other networks or beyond
        off = ssh(state, "client", probe + "192.0.2.1")
        assert off.returncode != 0 and "unreachable" in off.stderr
        # a fresh image: what the plugin must install is missing
        for package in fresh.NOT_IN_IMAGE:
            status = ssh(state, "server", f"dpkg-query -W -f='${{Status}}' {package}").stdout
            assert status != "install ok installed"
        # apt is configured for the bed's proxy, which listens on the host side of the link
        assert state["fresh"]["proxy"] in ssh(state, "server", "apt-config dump").stdout
        pids = [pid for m in state["machines"].values() for pid in fresh.namespace_pids(m["ns"])]
        assert pids
        with pytest.raises(RuntimeError, match="already up"):
            testbed.up(d, fresh_machines=True)
    finally:
        testbed.down(d)
    assert fresh.leftovers(state["fresh"]) == []
    assert not [p for p in pids if os.path.exists(f"/proc/{p}")]
    assert not fresh.mounts_under(str(tmp_path))
    assert not os.path.exists(d)


def test_beds_started_at_the_same_moment_claim_different_nets():
    # both picked 169.254.100.0/24 before (a CI run beside a developer's bed): "File exists"
    if os.geteuid() != 0:
        pytest.skip("the fresh test bed needs root (network namespaces)")
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        nets = list(pool.map(lambda _: fresh.claim_net(), range(4)))
    try:
        assert len(set(nets)) == 4, nets
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        assert all(f"{fresh.bridge_name(n)}:" in links for n in nets)
    finally:
        for n in nets:
            subprocess.run(["ip", "link", "del", fresh.bridge_name(n)], capture_output=True)
