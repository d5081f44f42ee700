"""Constants and helpers the end-to-end tests share (their fixtures are in conftest.py)."""

import glob
import json
import os
import pathlib
import subprocess

import yaml

from testbed import bed as testbed

REPO = pathlib.Path(__file__).resolve().parents[2]
PKB_DIR = os.environ.get("PKB_DIR")


def dpkg_selections() -> str:
    """The host's package selections: a static run must leave them as they were."""
    return subprocess.run(["dpkg", "--get-selections"], capture_output=True, text=True).stdout


CLOUD_RULE = str(pathlib.Path(__file__).with_name("pkb_cloud_rule.py"))


def run_pkb(pkb_python, benchmark, config, temp_dir, *flags, env=None, timeout=900, cloud=False):
    """The unmodified ./pkb.py on one benchmark config; returns the CompletedProcess.
    cloud=True: PKB's Cleanup rule for cloud VMs (pkb_cloud_rule.py) on the static VMs."""
    return subprocess.run(
        [pkb_python, CLOUD_RULE if cloud else "pkb.py", f"--benchmarks={benchmark}",
         f"--benchmark_config_file={config}", f"--temp_dir={temp_dir}", *flags],
        cwd=PKB_DIR, capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip


def listening(ports) -> list[int]:
    """Which of `ports` something still listens on (a run must stop what it started)."""
    out = []
    for port in ports:
        ss = subprocess.run(["ss", "-ltn", f"sport = :{port}"], capture_output=True, text=True)
        if "LISTEN" in ss.stdout:
            out.append(port)
    return out


def sshd_vm(tmp_path):
    """A private sshd on this host (testbed.start_sshd under tmp_path/tb) and a static VM on
    it whose scratch directory is tmp_path/scratch; returns (sshd, vm, scratch). The caller
    stops the sshd (testbed.stop_pid(sshd.pid))."""
    sshd = testbed.start_sshd(str(tmp_path / "tb"))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return sshd, testbed.static_vm(sshd, str(scratch)), scratch


def bed_vm(tmp_path, **up):
    """The test bed up under tmp_path/tb (testbed.up(..., **up)) and a static VM on its sshd
    whose scratch directory is tmp_path/scratch; returns (state, vm, scratch). The caller
    brings the bed down (testbed.down(str(tmp_path / "tb")))."""
    state = testbed.up(str(tmp_path / "tb"), **up)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    sshd = testbed.Sshd(
        state["pids"]["sshd"], state["ssh_port"], state["ssh_key"], state["ssh_user"]
    )
    return state, testbed.static_vm(sshd, str(scratch)), scratch


def config_with(path, benchmark, vm, flags):
    """Writes a benchmark config whose clients group is the static VM `vm`; returns path."""
    path.write_text(yaml.safe_dump({benchmark: {"vm_groups": {"clients": {"static_vms": [vm]}},
                                                "flags": flags}}))  # fmt: skip
    return path


def failing_variant_flags(uri_file):
    """mongodb_perftables flags of a run whose first variant fails and second succeeds: the
    stand-in has no collMod, so update_fields' validation variant fails against it when it is
    run although the capability probe found it lacking (run_unsupported; else it is n/a)."""
    return {
        "mongodb_perftables_set": "run_unsupported=true",
        "mongodb_perftables_uri_file": uri_file,
        "mongodb_perftables_scale": "smoke",
        "mongodb_perftables_experiments": "update_fields",
        "mongodb_perftables_variants": "50, 500000, validation;1, 500000, plain",
    }


def two_group_config(tmp_path, benchmark, flags):
    """A benchmark config whose clients and servers groups are both the test bed's own
    static VM (a private sshd on this host); returns (config path, sshd)."""
    sshd, vm, _ = sshd_vm(tmp_path)
    groups = {
        "clients": {"static_vms": [vm]},
        "servers": {"static_vms": [json.loads(json.dumps(vm))]},
    }
    path = tmp_path / f"{benchmark}.yaml"
    path.write_text(yaml.safe_dump({benchmark: {"vm_groups": groups, "flags": flags}}))
    return path, sshd


def helpmatch(pkb_python, name) -> str:
    """./pkb.py --helpmatch=<name>: the flags PKB knows for that module."""
    return subprocess.run(
        [pkb_python, "pkb.py", f"--helpmatch={name}"],
        cwd=PKB_DIR, capture_output=True, text=True, timeout=300,
    ).stdout  # fmt: skip


def run_on_own_sshd(pkb_python, benchmark, config, temp_dir, sshd):
    """run_pkb on a two_group_config, then the checks every such run needs: it succeeded,
    left the host's packages as they were, and reported no failed variant. Stops the sshd.
    Returns (run directory, samples)."""
    before = dpkg_selections()
    try:
        p = run_pkb(pkb_python, benchmark, config, temp_dir)
    finally:
        testbed.stop_pid(sshd.pid)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert dpkg_selections() == before
    run_dir = glob.glob(str(temp_dir / "runs" / "*"))[0]
    samples = [json.loads(line) for line in open(f"{run_dir}/perfkitbenchmarker_results.json")]
    assert not [s for s in samples if s["metric"] == "Variant Failed"]
    return run_dir, samples
