"""mongodb_perftables with deployment=atlas through the real ./pkb.py, and no secret anywhere.

The Atlas Admin API is the local fake of tests/atlas_fake.py (documented
endpoints, digest auth, states that move on as they are polled); its
"cluster" is a stand-in server that enforces SCRAM, and a database user the
benchmark creates through the API becomes a real user of that server. The
run resizes the cluster between two hardware steps, then every output file of
the run (PKB's run directory, the static host's scratch directory, PKB's
stdout and stderr) is searched for the three secrets: the API private key,
the generated database password and the server's admin password.
Runs when PKB_DIR names a PKB checkout (see tests/e2e/conftest.py).
"""

import glob
import json
import os
import secrets

import pytest
import yaml
from atlas_fake import PRIVATE, PROJECT, PUBLIC, serve
from pkb_helpers import dpkg_selections, run_pkb
from pymongo import MongoClient

from testbed import bed as testbed

pytestmark = pytest.mark.e2e


def files_containing(roots, needles):
    hits = []
    for root in roots:
        for dirpath, _, names in os.walk(root):
            for name in names:
                path = os.path.join(dirpath, name)
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError:  # sockets, vanished files
                    continue
                hits += [(path, n) for n in needles if n.encode() in data]
    return hits


def test_atlas_hardware_matrix_and_no_secret_in_any_output(pkb_python, tmp_path, pkb_temp):
    admin_password = secrets.token_urlsafe(18)
    users_file = tmp_path / "server" / "users.json"
    users_file.parent.mkdir()
    users_file.write_text(json.dumps([{"user": "root", "password": admin_password}]))
    os.chmod(users_file, 0o600)
    srv = testbed.start_server(str(tmp_path / "server"), kind="standin", users_file=str(users_file))
    sshd = testbed.start_sshd(str(tmp_path / "tb"))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    created = {}

    def on_user(action, user, password):
        # what Atlas does with a database user: it becomes a user of the cluster
        admin_uri = f"mongodb://root:{admin_password}@127.0.0.1:{srv.port}/?authSource=admin"
        with MongoClient(admin_uri) as c:
            if action == "create":
                c.admin.command("createUser", user, pwd=password, roles=["readWriteAnyDatabase"])
                created[user] = password
            else:
                c.admin.command("dropUser", user)

    cfg = {
        "mongodb_perftables": {
            "vm_groups": {"clients": {"static_vms": [testbed.static_vm(sshd, str(scratch))]}},
            "flags": {
                "mongodb_perftables_deployment": "atlas",
                "mongodb_perftables_scale": "smoke",
                "mongodb_perftables_experiments": "insert_instancesize,query_fetch_io",
                "mongobench_atlas_hardware": "M30;M40:disk_iops=3000",
                "mongobench_atlas_connection": "standard",
                "mongobench_atlas_poll_s": 0,
                # the fake publishes at once: no wait for Atlas' measurement delay
                "mongobench_atlas_metrics_delay_s": 0,
            },
        }
    }
    path = tmp_path / "atlas.yaml"
    before = dpkg_selections()
    env = dict(
        os.environ,
        ATLAS_PROJECT_ID=PROJECT,
        ATLAS_PUBLIC_KEY=PUBLIC,
        ATLAS_PRIVATE_KEY=PRIVATE,
    )
    try:
        # Atlas applies a new user some seconds after the POST: the run must wait for it
        with serve(apply_delay_s=5) as fake:
            fake.connection_strings = {
                "standard": f"mongodb://127.0.0.1:{srv.port}/",
                "standardSrv": "mongodb+srv://not-used.example.net",
            }
            fake.on_user = on_user
            cfg["mongodb_perftables"]["flags"]["mongobench_atlas_api_base"] = fake.base
            path.write_text(yaml.safe_dump(cfg))
            p = run_pkb(pkb_python, "mongodb_perftables", path, pkb_temp, env=env)
            leftovers = (dict(fake.clusters), dict(fake.users), dict(fake.access_list))
            methods = [(m, path) for m, path, _, _ in fake.requests]
    finally:
        srv.stop()
        testbed.stop_pid(sshd.pid)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert dpkg_selections() == before

    # Everything the run made in Atlas is gone: cluster, database user, access list.
    assert leftovers == ({}, {}, {})
    assert [m for m, _ in methods].count("PATCH") == 1  # one resize: M30 -> M40
    assert len(created) == 1

    [results] = glob.glob(str(pkb_temp / "runs" / "*" / "perfkitbenchmarker_results.json"))
    samples = [json.loads(line) for line in open(results)]
    assert not [s for s in samples if s["metric"] == "Variant Failed"]
    tput = [s for s in samples if s["metric"] == "Operation Throughput"]
    by_step = {}
    for s in tput:
        step = s["labels"].split("|hardware_step:")[1].split("|")[0]
        by_step.setdefault(step, []).append(s["labels"])
    assert sorted(by_step) == ["0", "1"] and all(len(v) == 2 for v in by_step.values())
    for labels in by_step["0"]:
        assert "|deployment:atlas|" in labels and "|atlas_tier:M30|" in labels
        assert "|instance_type:Atlas M30|" in labels and "|atlas_price_per_hour_usd:0.54|" in labels
    for labels in by_step["1"]:
        assert "|atlas_tier:M40|" in labels and "|atlas_disk_iops:3000|" in labels
        assert "|instance_type:Atlas M40|" in labels and "|disk_iops:3000|" in labels
    # Resource Usage from the Admin API's process and disk measurements of each window
    assert all("|server_metrics_source:atlas measurements (PT1M)|" in s for s in by_step["0"])
    # the out-of-cache query table gets its $ per hour from the cluster's price
    dollars = [s for s in samples if "|experiment:query_fetch_io|" in s["labels"]]
    assert any("|price_per_hour:1.04|" in s["labels"] for s in dollars)

    # No secret in any file of the run, on the "client VM", or in PKB's output.
    needles = [PRIVATE, admin_password, *created.values()]
    assert files_containing([pkb_temp, scratch], needles) == []
    for text in (p.stdout, p.stderr):
        assert not [n for n in needles if n in text]
    # the client VM's work directory (with the 0600 URI file) was removed at cleanup
    assert not glob.glob(str(scratch / "mongobench*" / "target.uri"))


def test_teardown_stage_without_cleanup_leaves_nothing_in_atlas(pkb_python, tmp_path, pkb_temp):
    # A teardown without cleanup skips the benchmark's Cleanup: PKB's Teardown stage must
    # still remove the cluster, the database user and the access-list entry the run made,
    # and keep the entry that existed before the run.
    srv = testbed.start_server(str(tmp_path / "server"), kind="standin")
    sshd = testbed.start_sshd(str(tmp_path / "tb"))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    vm = testbed.static_vm(sshd, str(scratch))
    cfg = {
        "mongodb_perftables": {
            "vm_groups": {"clients": {"static_vms": [vm]}},
            "flags": {
                "mongodb_perftables_deployment": "atlas",
                "mongodb_perftables_scale": "smoke",
                "mongobench_atlas_connection": "standard",
                "mongobench_atlas_poll_s": 0,
            },
        }
    }
    path = tmp_path / "atlas.yaml"
    env = dict(
        os.environ, ATLAS_PROJECT_ID=PROJECT, ATLAS_PUBLIC_KEY=PUBLIC, ATLAS_PRIVATE_KEY=PRIVATE
    )
    office = {"ipAddress": vm["ip_address"], "comment": "there before the run"}
    try:
        with serve(apply_delay_s=0.5) as fake:
            fake.connection_strings = {
                "standard": f"mongodb://127.0.0.1:{srv.port}/",
                "standardSrv": "mongodb+srv://not-used.example.net",
            }
            fake.access_list[vm["ip_address"]] = dict(office)
            cfg["mongodb_perftables"]["flags"]["mongobench_atlas_api_base"] = fake.base
            path.write_text(yaml.safe_dump(cfg))
            # PKB allows no teardown right after prepare in one invocation: a later one
            # tears the run down from its pickled spec (the user's --run_stage=teardown)
            first = run_pkb(pkb_python, "mongodb_perftables", path, pkb_temp,
                            "--run_stage=provision,prepare", "--run_uri=cloudtd1", env=env)  # fmt: skip
            assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
            assert fake.clusters and fake.users  # Prepare made them; no Cleanup ran
            p = run_pkb(pkb_python, "mongodb_perftables", path, pkb_temp,
                        "--run_stage=teardown", "--run_uri=cloudtd1", env=env)  # fmt: skip
            made = [r for r in fake.requests if r[0] == "POST"]
            leftovers = (dict(fake.clusters), dict(fake.users), dict(fake.access_list))
    finally:
        srv.stop()
        testbed.stop_pid(sshd.pid)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert {m[1].rsplit("/", 1)[-1] for m in made} >= {"clusters", "databaseUsers"}
    assert "Atlas resources left at teardown" in p.stderr
    # the client's entry was there before the run: used, neither changed nor deleted
    assert leftovers == ({}, {}, {vm["ip_address"]: office})
