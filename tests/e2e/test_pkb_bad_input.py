"""Bad flags through the unmodified ./pkb.py: CheckPrerequisites rejects them, before
anything is provisioned, with a message naming the flag or value (and no password)."""

import pytest
import yaml
from pkb_helpers import run_pkb

pytestmark = pytest.mark.e2e

SECRET = "pkbSecr3tPw"
# Never contacted: CheckPrerequisites fails before any VM is used.
VM = {
    "ip_address": "127.0.0.1",
    "user_name": "nobody",
    "ssh_port": 1,
    "ssh_private_key": "/nonexistent",
    "os_type": "debian12",
    "install_packages": False,
}


def _config(tmp_path, benchmark, flags):
    path = tmp_path / "c.yaml"
    groups = {"clients": {"static_vms": [VM]}}
    path.write_text(yaml.safe_dump({benchmark: {"vm_groups": groups, "flags": flags}}))
    return path


@pytest.mark.parametrize(
    ("flags", "uri", "expected"),
    [
        ({"mongodb_perftables_set": "bogus_key=5"}, None,
         "--mongodb_perftables_set: unknown setting 'bogus_key'; known settings:"),
        ({"mongodb_perftables_set": "threads=abc"}, None,
         "--mongodb_perftables_set: threads='abc' is not an integer"),
        ({"mongodb_perftables_set": "threads=0"}, None,
         "--mongodb_perftables_set: threads=0 is not an integer in [1, 10000]"),
        ({"mongodb_perftables_max_seconds": -5}, None,
         "--mongodb_perftables_max_seconds must be > 0 seconds, not -5"),
        ({"mongodb_perftables_set": "target_ops_per_s=100",
          "mongodb_perftables_client_path": "pymongo"}, None,
         "--mongodb_perftables_client_path pymongo is a closed loop only"),
        ({"mongodb_perftables_rate_steps": "0.5,100/s"}, None,
         "--mongodb_perftables_rate_steps '0.5,100/s': fractions and rates"),
        ({"mongodb_perftables_rate_steps": "auto",
          "mongodb_perftables_experiments": "insert_batchsize"}, None,
         "--mongodb_perftables_rate_steps: insert_batchsize [10] inserts in batches of 10"),
        ({}, f"user:{SECRET}@host", "not a MongoDB connection string"),
        ({}, f"mongodb://user:{SECRET}@host:99999/", "mongodb://***@host:99999/: Port must be"),
    ],
)  # fmt: skip
def test_perftables_rejects_bad_input_up_front(
    pkb_python, tmp_path, pkb_temp, flags, uri, expected
):
    uri_file = tmp_path / "target.uri"
    uri_file.write_text((uri or "mongodb://127.0.0.1:27017/") + "\n")
    flags = {"mongodb_perftables_uri_file": str(uri_file), **flags}
    p = run_pkb(pkb_python, "mongodb_perftables", _config(tmp_path, "mongodb_perftables", flags),
                pkb_temp, timeout=300)  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert expected in out, out[-3000:]
    assert SECRET not in out


def test_perftables_total_docs_and_a_wide_skip_list_pass_the_plan_check(
    pkb_python, tmp_path, pkb_temp
):
    # total_docs=300 once crashed the plan (str * float) and a skip list naming other
    # experiments aborted it; the plan check now passes and the next check (a bad
    # --mongodb_perftables_max_seconds, so nothing is provisioned) is what fails.
    uri_file = tmp_path / "target.uri"
    uri_file.write_text("mongodb://127.0.0.1:27017/\n")
    flags = {
        "mongodb_perftables_uri_file": str(uri_file),
        "mongodb_perftables_set": "total_docs=300",
        "mongodb_perftables_experiments": "insert_batchsize,insert_docsize",
        "mongodb_perftables_skip": "update_fields/50, 500000, pipeline",
        "mongodb_perftables_max_seconds": 0,
    }
    p = run_pkb(pkb_python, "mongodb_perftables", _config(tmp_path, "mongodb_perftables", flags),
                pkb_temp, timeout=300)  # fmt: skip
    out = p.stdout + p.stderr
    assert "TypeError" not in out and "skip names unknown" not in out
    assert "--mongodb_perftables_max_seconds must be > 0 seconds, not 0" in out, out[-3000:]


def test_sweep_rejects_empty_sizes(pkb_python, tmp_path, pkb_temp):
    uri_file = tmp_path / "target.uri"
    uri_file.write_text("mongodb://127.0.0.1:27017/\n")
    flags = {"mongodb_ycsb_sweep_uri_file": str(uri_file), "mongodb_ycsb_sweep_sizes_mb": ""}
    p = run_pkb(pkb_python, "mongodb_ycsb_sweep", _config(tmp_path, "mongodb_ycsb_sweep", flags),
                pkb_temp, timeout=300)  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert "--mongodb_ycsb_sweep_sizes_mb: no dataset sizes given" in out, out[-3000:]


def test_atlas_cluster_in_another_region_than_the_clients_is_refused_up_front(
    pkb_python, tmp_path, pkb_temp
):
    # Cloud client VMs in GCP us-central1 against the default Atlas cluster (AWS US_EAST_1):
    # refused in CheckPrerequisites, naming the flags and where the cluster should go.
    path = tmp_path / "c.yaml"
    groups = {
        "clients": {
            "cloud": "GCP",
            "vm_spec": {"GCP": {"machine_type": "n2-standard-2", "zone": "us-central1-b"}},
        }
    }
    flags = {"mongodb_perftables_deployment": "atlas"}
    path.write_text(yaml.safe_dump({"mongodb_perftables": {"vm_groups": groups, "flags": flags}}))
    p = run_pkb(pkb_python, "mongodb_perftables", path, pkb_temp, "--ignore_package_requirements",
                timeout=300)  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert (
        "the Atlas cluster would be in --mongobench_atlas_provider=AWS"
        " --mongobench_atlas_region=US_EAST_1 but clients in GCP us-central1-b"
        " (Atlas GCP CENTRAL_US)"
    ) in out, out[-3000:]
    assert "--mongobench_atlas_provider=GCP --mongobench_atlas_region=CENTRAL_US" in out
    assert "--mongobench_atlas_allow_remote_clients" in out
    assert "Provisioning" not in out and "gcloud compute" not in out


@pytest.mark.parametrize(
    ("servers", "flags", "expected"),
    [
        # MongoDB 7.0 on PKB's default image: once found only in Prepare, after the VMs
        ({"cloud": "GCP", "os_type": "ubuntu2404",
          "vm_spec": {"GCP": {"machine_type": "n2-standard-2", "zone": "us-central1-b"}}},
         {"mongobench_mongodb_version": "7.0"},
         "servers: --mongobench_mongodb_version=7.0: MongoDB publishes no Community packages"
         " for os_type ubuntu2404 on x86_64; MongoDB series on os_type ubuntu2404 on x86_64:"
         " 8.0; os_types with 7.0 on x86_64: ubuntu2004, ubuntu2204"),
        # Debian has no arm64 packages: the Graviton machine type says aarch64
        ({"cloud": "AWS", "os_type": "debian12",
          "vm_spec": {"AWS": {"machine_type": "m7g.large", "zone": "us-east-1a"}}},
         {},
         "os_type debian12 on aarch64; os_types with 8.0 on aarch64: ubuntu2004"),
    ],
)  # fmt: skip
def test_unsupported_server_platform_is_refused_up_front(
    pkb_python, tmp_path, pkb_temp, servers, flags, expected
):
    path = tmp_path / "c.yaml"
    groups = {"clients": {"static_vms": [VM]}, "servers": servers}
    flags = {"mongodb_perftables_deployment": "standalone", **flags}
    path.write_text(yaml.safe_dump({"mongodb_perftables": {"vm_groups": groups, "flags": flags}}))
    p = run_pkb(pkb_python, "mongodb_perftables", path, pkb_temp, "--ignore_package_requirements",
                timeout=300)  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert expected in out, out[-3000:]
    assert "Provisioning" not in out


def test_stress_rejects_contradicting_flags_up_front(pkb_python, tmp_path, pkb_temp):
    # The flags' StressSettings is validated in CheckPrerequisites: contradicting flags are
    # refused in one line naming both flags and their values, before any VM is used.
    path = tmp_path / "c.yaml"
    groups = {"clients": {"static_vms": [VM]}, "servers": {"static_vms": [dict(VM, ssh_port=2)]}}
    flags = {"mongodb_stress_max_instances": 2, "mongodb_stress_min_instances": 3}
    path.write_text(yaml.safe_dump({"mongodb_stress": {"vm_groups": groups, "flags": flags}}))
    p = run_pkb(pkb_python, "mongodb_stress", path, pkb_temp, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert "--mongodb_stress_max_instances 2 is below --mongodb_stress_min_instances 3" in out, out[
        -3000:
    ]
    assert "Provisioning" not in out
