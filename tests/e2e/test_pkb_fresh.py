"""The PKB benchmarks on fresh machines (`scripts/testbed up --fresh`), through ./pkb.py.

One bed for the module: a server machine and a client machine, each a network namespace with
its own link-local address, minimal Debian root (what a fresh cloud image holds) and sshd;
packages come through the bed's apt-cacher-ng. The PKB configs set install_packages: true, so
the plugin's own install steps (vm.Install / InstallPackages) must bring everything the run
needs: python3-venv, the engine's pip requirements, a Java runtime for the stand-in that runs
in place of mongod on the server VM. Server and client are different machines: bind
addresses, internal IPs, replica-set host names and the client->server path are real.
Runs when PKB_DIR names a PKB checkout; needs root (namespaces, chroot).
"""

import glob
import json
import os
import subprocess

import pytest
from pkb_helpers import dpkg_selections, run_pkb

from testbed import bed as testbed
from testbed import fresh

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("fresh") / "tb")
    state = testbed.up(d, fresh_machines=True)
    yield state
    testbed.down(d)
    assert fresh.leftovers(state["fresh"]) == []
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [m["ns"] for m in state["machines"].values() if m["ns"] in names]
    assert not os.path.exists(d)


def on(state, machine, command, check=True):
    """Runs `command` on a fresh machine over its sshd, as PKB does."""
    m = state["machines"][machine]
    ssh = ["ssh", "-i", state["ssh_key"], "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
           "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", f"root@{m['address']}",
           command]  # fmt: skip
    p = subprocess.run(ssh, capture_output=True, text=True, timeout=300)
    assert not check or p.returncode == 0, p.stderr
    return p.stdout


def installed(state, machine, package) -> bool:
    out = on(state, machine, f"dpkg-query -W -f='${{Status}}' {package} 2>/dev/null", check=False)
    return out.strip() == "install ok installed"


def config(state, tmp_path, flags, clients=("client",)):
    vms = {n: testbed.fresh_vm(state["machines"][n], state["ssh_key"]) for n in state["machines"]}
    cfg = {
        "mongodb_perftables": {
            "vm_groups": {
                "clients": {"static_vms": [vms[c] for c in clients]},
                "servers": {"static_vms": [vms["server"]]},
            },
            "flags": dict({"mongobench_mongod_server": "standin", "mongodb_perftables_scale": "smoke"},
                          **testbed.FRESH_FLAGS, **flags),
        }
    }  # fmt: skip
    path = tmp_path / "fresh.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


def run(pkb_python, benchmark, path, pkb_temp, stages=(testbed.FRESH_RUN_STAGES,)):
    """run_pkb (by default without the teardown stage: see testbed.FRESH_RUN_STAGES);
    asserts success and that this host's packages are untouched. Returns (pkb.log text,
    samples)."""
    before = dpkg_selections()
    p = run_pkb(pkb_python, benchmark, path, pkb_temp, *stages, timeout=1800)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert dpkg_selections() == before
    [run_dir] = glob.glob(str(pkb_temp / "runs" / "*"))
    samples = [json.loads(line) for line in open(f"{run_dir}/perfkitbenchmarker_results.json")]
    assert not [s for s in samples if s["metric"] == "Variant Failed"]
    return open(f"{run_dir}/pkb.log").read(), samples


def dpkg_installs(state, machine) -> str:
    """The machine's dpkg log: every package installed on it since its image was made."""
    return on(state, machine, "cat /var/log/dpkg.log", check=False)


def test_a_fresh_vm_without_package_installs_fails_clearly(bed, pkb_python, tmp_path, pkb_temp):
    # install_packages false (the plugin's default on static VMs): nothing is installed, and
    # Deploy says what is missing before it tries to make the engine's venv.
    for package in fresh.NOT_IN_IMAGE:
        on(bed, "client", f"apt-get purge -y -q {package} >/dev/null 2>&1 || true")
    uri = tmp_path / "uri"
    uri.write_text(f"mongodb://{bed['machines']['server']['address']}:27017/\n")
    vm = testbed.fresh_vm(bed["machines"]["client"], bed["ssh_key"])
    cfg = {"mongodb_perftables": {"vm_groups": {"clients": {"static_vms": [vm]}},
                                  "flags": {"mongodb_perftables_uri_file": str(uri),
                                            "mongodb_perftables_scale": "smoke"}}}  # fmt: skip
    path = tmp_path / "no-install.yaml"
    path.write_text(json.dumps(cfg))
    p = run_pkb(pkb_python, "mongodb_perftables", path, pkb_temp, testbed.FRESH_RUN_STAGES)
    assert p.returncode != 0
    out = p.stdout + p.stderr
    assert "with the venv module is required on the client VM" in out, out[-3000:]
    assert "apt-get install python3-venv" in out


def test_standalone_installs_what_a_fresh_server_lacks(bed, pkb_python, tmp_path, pkb_temp):
    # What a fresh image lacks is absent before the run (removed, if an earlier run left it).
    on(bed, "server", f"apt-get purge -y -q {' '.join(fresh.NOT_IN_IMAGE)} >/dev/null 2>&1 || true")
    for package in fresh.NOT_IN_IMAGE:
        assert not installed(bed, "server", package)
    log_before = dpkg_installs(bed, "server")
    packages = "dpkg-query -W -f='${Package} ${Version} ${Status}\\n'"
    before = {m: on(bed, m, packages) for m in ("server", "client")}
    server = bed["machines"]["server"]["address"]
    path = config(
        bed,
        tmp_path,
        {
            "mongodb_perftables_deployment": "standalone",
            "mongodb_perftables_experiments": "insert_docsize",
        },
    )
    # every stage, teardown too: PKB's PackageCleanup removes what the run installed, with
    # the plugin's restore (mongobench_pkb.host): the same packages at the same versions
    log, samples = run(pkb_python, "mongodb_perftables", path, pkb_temp, stages=())
    tput = [s for s in samples if s["metric"] == "Operation Throughput"]
    assert tput and all(s["value"] > 0 for s in tput)
    assert all("|server_kind:standin|" in s["labels"] for s in tput)
    assert "Set changed size during iteration" not in log
    assert "dselect-upgrade" not in log
    for machine, listed in before.items():
        assert on(bed, machine, packages) == listed, machine
        assert on(bed, machine, "test -e /opt/pkb || echo gone") == "gone\n"
    assert "the run installed: " in log
    # The plugin's own install steps put them on the server VM during the run.
    new = dpkg_installs(bed, "server")[len(log_before) :]
    for package in fresh.NOT_IN_IMAGE:
        assert f" install {package}:" in new, f"{package} not installed by the run"
    # The client reached the server at its own address, not over a shared loopback.
    assert f"{server}:" in log
    cpu = [s for s in samples if s["metric"] == "Server CPU Usage"]
    assert cpu


@pytest.mark.parametrize(
    "deployment,label,members",
    [
        ("replset", "|replset_members:3|", ['"rs0": "{server}:']),
        ("sharded", "|shards:2|", ['"shard1": "{server}:', '"cfg": "{server}:']),
    ],
)
def test_topology_on_fresh_machines(
    bed, pkb_python, tmp_path, pkb_temp, deployment, label, members
):
    server = bed["machines"]["server"]["address"]
    flags = {
        "mongodb_perftables_deployment": deployment,
        "mongodb_perftables_experiments": "insert_docsize",
    }
    log, samples = run(pkb_python, "mongodb_perftables", config(bed, tmp_path, flags), pkb_temp)
    tput = [s for s in samples if s["metric"] == "Operation Throughput"]
    assert tput and all(label in s["labels"] for s in tput)
    # members are known by the server VM's internal IP
    for member in members:
        assert member.format(server=server) in log


def test_stress_on_fresh_machines(bed, pkb_python, pkb_temp):
    server = bed["machines"]["server"]["address"]
    log, samples = run(pkb_python, "mongodb_stress", bed["configs"]["mongodb_stress"], pkb_temp)
    by_metric = {}
    for s in samples:
        by_metric.setdefault(s["metric"], []).append(s)
    assert "Step Failed" not in by_metric
    steps = by_metric["overall Throughput"]
    assert steps and all(s["value"] > 0 for s in steps)
    assert by_metric["Maximum Throughput"] and by_metric["Server CPU Usage"]
    # data seeding by copy on the server VM, each copy verified from the client VM
    top = by_metric["Maximum Throughput"][0]["labels"]
    assert "|data_seeding:copy|" in top and "|data_seeding_verified:True|" in top
    # YCSB on the client VM drove the stand-ins on the server VM's address
    assert f"{server}:27017" in log
