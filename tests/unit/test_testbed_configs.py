"""The test bed's PKB configs: K static client VMs on this host, each its own work dir."""

import yaml

from testbed import bed as testbed


def test_two_client_vms_share_the_host_with_separate_scratch_dirs(tmp_path):
    sshd = testbed.Sshd(pid=1, port=2222, key=str(tmp_path / "id"), user="bench")
    paths = testbed.pkb_configs(str(tmp_path), sshd, str(tmp_path / "uri"), client_vms=2)
    cfg = yaml.safe_load(open(paths["mongodb_perftables"]))["mongodb_perftables"]
    vms = cfg["vm_groups"]["clients"]["static_vms"]
    assert len(vms) == 2 and cfg["vm_groups"]["clients"]["vm_count"] == 2
    assert {vm["ssh_port"] for vm in vms} == {2222} and all(
        not vm["install_packages"] for vm in vms
    )
    scratch = [vm["disk_specs"][0]["mount_point"] for vm in vms]
    assert scratch == [str(tmp_path / "scratch"), str(tmp_path / "scratch-client1")]
    assert all((tmp_path / s).is_dir() for s in scratch)
    one = testbed.pkb_configs(str(tmp_path / "one"), sshd, str(tmp_path / "uri"))
    cfg1 = yaml.safe_load(open(one["mongodb_perftables"]))["mongodb_perftables"]
    assert len(cfg1["vm_groups"]["clients"]["static_vms"]) == 1


def test_perftables_config_of_another_server_has_no_empty_skip(tmp_path):
    import yaml

    sshd = testbed.Sshd(pid=1, port=2222, key=str(tmp_path / "id"), user="bench")
    for kind, has_skip in (("ferretdb", False), ("standin", True)):
        paths = testbed.pkb_configs(str(tmp_path / kind), sshd, str(tmp_path / "uri"), kind)
        flags = yaml.safe_load(open(paths["mongodb_perftables"]))["mongodb_perftables"]["flags"]
        assert ("mongodb_perftables_skip" in flags) == has_skip, kind
        assert flags.get("mongodb_perftables_skip", "x") != ""  # PKB refuses an empty list
