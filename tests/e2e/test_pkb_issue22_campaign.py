"""Faults and bad input, round two (issue 22): the cases through the unmodified ./pkb.py.

Refused before anything is provisioned (CheckPrerequisites or flag parsing, no VM
contacted), or survived as stated: a server killed in the last variant fails the run with
that variant marked (FAILED, no unmarked throughput), and Ctrl-C or SIGTERM to pkb.py
mid-variant runs Cleanup and leaves no engine process behind (a terminal's Ctrl-C during
Cleanup kills none of its ssh commands). No device node is replaced. The engine's own cases are in
tests/integration/test_issue22_campaign.py (which lists all 36 cases and where each is replayed).
Runs when PKB_DIR names a PKB checkout (see tests/e2e/conftest.py).
"""

import glob
import json
import os
import signal
import subprocess
import time

import pytest
import yaml
from campaign_helpers import devices_intact
from pkb_helpers import CLOUD_RULE, PKB_DIR, bed_vm, config_with, run_pkb

from testbed import bed as testbed

pytestmark = pytest.mark.e2e

# Never contacted: the run must be refused before any VM is used.
NO_VM = {
    "ip_address": "127.0.0.1",
    "user_name": "nobody",
    "ssh_port": 1,
    "ssh_private_key": "/nonexistent",
    "os_type": "debian12",
    "install_packages": False,
}
TWO_VARIANTS = "1, 500000, plain;10, 500000, plain"


@pytest.mark.parametrize(
    ("case", "flags", "uri", "expected"),
    [
        ("port 70000", {}, "mongodb://127.0.0.1:70000/", "Port must be"),
        ("perftables port 70000", {"mongodb_perftables_port": 70000}, None,
         "mongodb_perftables_port"),
        ("empty experiments list", {"mongodb_perftables_experiments": ""}, None,
         "--mongodb_perftables_experiments: empty"),
        ("database a.b", {"mongodb_perftables_database": "a.b"}, None,
         "--mongodb_perftables_database 'a.b'"),
        ("database ''", {"mongodb_perftables_database": ""}, None,
         "--mongodb_perftables_database"),
        ("skip everything", {"mongodb_perftables_experiments": "insert_idtype",
                             "mongodb_perftables_variants": "uuid",
                             "mongodb_perftables_skip": "insert_idtype/uuid"}, None,
         "nothing to run"),
    ],
)  # fmt: skip
def test_refused_before_anything_is_provisioned(
    pkb_python, tmp_path, pkb_temp, case, flags, uri, expected
):
    uri_file = tmp_path / "target.uri"
    uri_file.write_text((uri or "mongodb://127.0.0.1:27017/") + "\n")
    flags = {"mongodb_perftables_uri_file": str(uri_file), **flags}
    config = tmp_path / "c.yaml"
    groups = {"clients": {"static_vms": [NO_VM]}}
    config.write_text(yaml.safe_dump({"mongodb_perftables": {"vm_groups": groups,
                                                             "flags": flags}}))  # fmt: skip
    p = run_pkb(pkb_python, "mongodb_perftables", config, pkb_temp, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out[-3000:]
    assert expected in out, out[-3000:]
    # nothing was provisioned: the VM (an sshd that does not exist) was never tried
    assert "Provisioning" not in out, out[-3000:]
    after_pkb_case()


def _pkb_log(temp_dir) -> str:
    logs = glob.glob(str(temp_dir / "runs" / "*" / "pkb.log"))
    return open(logs[0]).read() if logs else ""


def _sigint_as_from_a_terminal():
    # A shell's background job (CI started with `&`) starts with SIGINT ignored, and Python
    # keeps an ignored SIGINT ignored: PKB would never see the test's Ctrl-C.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _own_group_with_sigint():
    # a terminal's foreground job: PKB leads its own process group, so that a Ctrl-C sent to
    # the group (os.killpg) reaches PKB and its ssh children, not this test
    os.setpgid(0, 0)
    _sigint_as_from_a_terminal()


def _start_pkb(pkb_python, config, temp_dir, *flags, cloud=False, group=False):
    # output to a file: an unread pipe fills and blocks PKB
    out = open(temp_dir / "pkb-output.txt", "w+")
    return subprocess.Popen(
        [pkb_python, CLOUD_RULE if cloud else "pkb.py", "--benchmarks=mongodb_perftables",
         f"--benchmark_config_file={config}", f"--temp_dir={temp_dir}",
         "--mongobench_progress_seconds=0.5", *flags],
        cwd=PKB_DIR, stdout=out, stderr=subprocess.STDOUT, text=True,
        preexec_fn=_own_group_with_sigint if group else _sigint_as_from_a_terminal,
    )  # fmt: skip


def _output(temp_dir) -> str:
    return (temp_dir / "pkb-output.txt").read_text()


def _wait_log(temp_dir, text, proc, timeout=600, poll_s=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in _pkb_log(temp_dir):
            return
        if proc.poll() is not None:
            raise AssertionError(f"pkb.py ended before {text!r}: {_output(temp_dir)[-3000:]}")
        time.sleep(poll_s)
    raise AssertionError(f"no {text!r} in pkb.log within {timeout} s")


def _engine_processes(scratch) -> list[str]:
    """Live processes working in the static VM's scratch directory (the engine runs there,
    and its workers inherit that directory): `pid command`."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if cmd and cwd.startswith(str(scratch)) and "mongobench" in cmd:
            out.append(f"{pid} {cmd}")
    return out


def after_pkb_case(scratch=None):
    """The post-checks every PKB case shares: no engine process left in the static VM's
    scratch directory, /dev/full still a device, no /dev/plots (campaign_helpers)."""
    if scratch is not None:
        assert _engine_processes(scratch) == []
    devices_intact()


STOP_BOUND_S = 180  # from the signal to PKB's end, Cleanup included, on a loaded 2-core host


def _ssh_children(pid: int) -> list[int]:
    """PKB's ssh child processes (its remote commands)."""
    out = []
    for child in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{child}/stat") as f:
                ppid = int(f.read().rpartition(")")[2].split()[1])
            with open(f"/proc/{child}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")[0]
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and os.path.basename(cmd) == b"ssh":
            out.append(int(child))
    return out


def _two_variants_through_pkb(pkb_python, tmp_path, pkb_temp, duration_s, processes, group=False):
    """./pkb.py started (not waited for) on update_fields' two variants against the bed."""
    state, vm, scratch = bed_vm(tmp_path)
    flags = {
        "mongodb_perftables_uri_file": state["uri_file"],
        "mongodb_perftables_scale": "smoke",
        "mongodb_perftables_experiments": "update_fields",
        "mongodb_perftables_variants": TWO_VARIANTS,
        "mongodb_perftables_set": f"duration_s={duration_s}",
        "mongodb_perftables_client_processes": processes,
    }
    config = config_with(tmp_path / "p.yaml", "mongodb_perftables", vm, flags)
    return state, scratch, _start_pkb(pkb_python, config, pkb_temp, group=group)


def _wait_timed_phase(pkb_temp, scratch, proc):
    """Until the first variant's timed phase runs: the engine and its two workers."""
    _wait_log(pkb_temp, "[1/2] update_fields/1, 500000, plain: running", proc)
    deadline = time.monotonic() + 60
    while len(_engine_processes(scratch)) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(_engine_processes(scratch)) >= 3, _pkb_log(pkb_temp)[-4000:]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_B5_a_signal_to_pkb_mid_variant_runs_cleanup(pkb_python, tmp_path, pkb_temp, signum):
    # bad 2: Ctrl-C on ./pkb.py left two engine workers running for about 30 s, their work
    # directory already deleted (Cleanup sent TERM to the engine's PID only); SIGTERM to
    # pkb.py ended PKB without its Cleanup, and the detached engine ran to its end.
    state, scratch, proc = _two_variants_through_pkb(
        pkb_python, tmp_path, pkb_temp, duration_s=300, processes=2
    )
    try:
        _wait_timed_phase(pkb_temp, scratch, proc)
        t0 = time.monotonic()
        proc.send_signal(signum)
        if signum == signal.SIGTERM:
            # and a second SIGTERM once Cleanup runs: it ended PKB half-way through Cleanup
            # (the work directory stayed, the engine ran on if not stopped yet)
            _wait_log(pkb_temp, "Cleaning up benchmark mongodb_perftables", proc)
            time.sleep(0.5)  # into our Cleanup (PKB logs that line just before calling it)
            proc.send_signal(signum)
        proc.wait(timeout=STOP_BOUND_S + 120)
        elapsed = time.monotonic() - t0
        out = _output(pkb_temp)
        left = _engine_processes(scratch)
    finally:
        if proc.poll() is None:
            proc.kill()
        testbed.down(str(tmp_path / "tb"))
    assert proc.returncode != 0, out[-3000:]
    assert left == [], left
    assert os.listdir(scratch) == []  # Cleanup ran, after the engine was gone
    assert "Cleaning up benchmark mongodb_perftables" in _pkb_log(pkb_temp)
    if signum == signal.SIGTERM:
        assert (
            "mongobench: SIGTERM during mongodb_perftables's Cleanup: mongodb_perftables's"
            " Cleanup goes on" in _pkb_log(pkb_temp)
        ), _pkb_log(pkb_temp)[-4000:]
    # well before the variant's 300 s would have ended by itself
    assert elapsed < STOP_BOUND_S, elapsed
    after_pkb_case(scratch)


def test_B5_a_terminal_s_ctrl_c_during_cleanup_leaves_every_step_undone(
    pkb_python, tmp_path, pkb_temp
):
    # A terminal's Ctrl-C goes to the whole foreground process group: PKB and its ssh
    # children. Our Cleanup held the signal, but the ssh child running a Cleanup command
    # died of it, and that step was reported as not undone (on a static host: whatever
    # it undoes stays). Here a first Ctrl-C mid-variant starts Cleanup, and a second one
    # reaches the group while Cleanup's ssh command runs.
    state, scratch, proc = _two_variants_through_pkb(
        pkb_python, tmp_path, pkb_temp, duration_s=300, processes=2, group=True
    )
    try:
        _wait_timed_phase(pkb_temp, scratch, proc)
        os.killpg(proc.pid, signal.SIGINT)
        _wait_log(pkb_temp, "Cleaning up benchmark mongodb_perftables", proc, poll_s=0.02)
        deadline = time.monotonic() + 60
        while not _ssh_children(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        ssh = _ssh_children(proc.pid)
        assert ssh, _pkb_log(pkb_temp)[-4000:]
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=STOP_BOUND_S + 120)
        log = _pkb_log(pkb_temp)
        left = _engine_processes(scratch)
    finally:
        if proc.poll() is None:
            proc.kill()
        testbed.down(str(tmp_path / "tb"))
    assert proc.returncode != 0, _output(pkb_temp)[-3000:]
    assert (
        "mongobench: SIGINT during mongodb_perftables's Cleanup: mongodb_perftables's"
        " Cleanup goes on" in log
    ), log[-4000:]
    assert "cleanup: could not" not in log, log[-4000:]
    # no remote command of Cleanup lost its ssh (255: PKB runs the command again, and a
    # file copy, e.g. the diagnostics, is not retried)
    cleanup = log.partition("Cleaning up benchmark mongodb_perftables")[2]
    at = cleanup.find("ReturnCode:255")
    assert at < 0, cleanup[max(0, at - 3000) : at + 200]
    assert left == [], left
    assert os.listdir(scratch) == []
    after_pkb_case(scratch)


def test_B5_sigterm_during_provision_ends_pkb_with_nothing_started(pkb_python, tmp_path, pkb_temp):
    # PKB has no SIGTERM handler: in its own Provision stage SIGTERM ends it at once. Our
    # benchmark has started nothing yet (Prepare deploys the engine): nothing is left.
    state, vm, scratch = bed_vm(tmp_path)
    flags = {
        "mongodb_perftables_uri_file": state["uri_file"],
        "mongodb_perftables_scale": "smoke",
        "mongodb_perftables_experiments": "update_fields",
        "mongodb_perftables_variants": TWO_VARIANTS,
    }
    config = config_with(tmp_path / "p.yaml", "mongodb_perftables", vm, flags)
    proc = _start_pkb(pkb_python, config, pkb_temp)
    try:
        _wait_log(pkb_temp, "Provisioning resources for benchmark mongodb_perftables", proc,
                  poll_s=0.02)  # fmt: skip
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        log = _pkb_log(pkb_temp)
        left = _engine_processes(scratch)
    finally:
        if proc.poll() is None:
            proc.kill()
        testbed.down(str(tmp_path / "tb"))
    assert proc.returncode == -signal.SIGTERM, _output(pkb_temp)[-3000:]
    assert "Preparing benchmark mongodb_perftables" not in log, log[-3000:]  # in Provision
    assert left == [] and os.listdir(scratch) == []
    after_pkb_case(scratch)


def _samples(temp_dir) -> list[dict]:
    """The run's samples, their collapsed labels '|k:v|k:v|' as a dict in `md`."""
    (path,) = glob.glob(str(temp_dir / "runs" / "*" / "perfkitbenchmarker_results.json"))
    out = []
    for line in open(path):
        s = json.loads(line)
        s["md"] = dict(part.partition(":")[::2] for part in s["labels"].strip("|").split("|"))
        out.append(s)
    return out


def _status(temp_dir) -> dict:
    (path,) = glob.glob(str(temp_dir / "runs" / "*" / "completion_statuses.json"))
    (status,) = [json.loads(line) for line in open(path)]
    return status


def test_B2_a_server_killed_in_the_last_variant_fails_the_pkb_run(pkb_python, tmp_path, pkb_temp):
    # bad 1: the server died during the last variant after some operations were
    # acknowledged; PKB said SUCCEEDED and published the fragment as that variant's figures
    state, scratch, proc = _two_variants_through_pkb(
        pkb_python, tmp_path, pkb_temp, duration_s=20, processes=1
    )
    try:
        _wait_log(pkb_temp, "[2/2] update_fields/10, 500000, plain: running", proc)
        time.sleep(3.0)  # some operations of the last variant are acknowledged
        testbed.stop_pid(state["pids"]["server"])
        proc.wait(timeout=600)
        out = _output(pkb_temp)
    finally:
        if proc.poll() is None:
            proc.kill()
        testbed.down(str(tmp_path / "tb"))
    assert proc.returncode != 0, out[-3000:]
    status = _status(pkb_temp)
    assert status["status"] == "FAILED", status
    assert "update_fields [10, 500000, plain]" in status["status_detail"], status
    samples = [s for s in _samples(pkb_temp) if s["md"].get("experiment") == "update_fields"]
    last = [s for s in samples if s["md"].get("variant") == "10, 500000, plain"]
    assert last, samples
    # the fragment measured before the server died is kept only marked (fails_run), or the
    # variant is a "Variant Failed" sample: never published as that variant's throughput
    for s in last:
        assert s["metric"] == "Variant Failed" or s["md"].get("fails_run"), s
    first = [s for s in samples if s["md"].get("variant") == "1, 500000, plain"]
    assert any(s["metric"] != "Variant Failed" and not s["md"].get("fails_run")
               for s in first), first  # fmt: skip
    after_pkb_case(scratch)
