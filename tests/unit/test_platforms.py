"""The support matrix (mongobench.deploy.platforms): one table of data, checked against a
run's VM specs before anything is provisioned (issue 20, defect 5), and docs/platforms.md
shows that very table."""

import os
import pathlib
import subprocess
import sys

import pytest

from mongobench.deploy import install, platforms
from mongobench.remote import shipping

FLAG = "--mongobench_mongodb_version"


def test_7_0_on_pkbs_default_ubuntu2404_is_refused_naming_the_flag_and_the_choices():
    with pytest.raises(platforms.UnsupportedPlatform) as e:
        platforms.check_pkb_server("ubuntu2404", "7.0", None, FLAG)
    msg = str(e.value)
    assert msg.startswith(f"{FLAG}=7.0: MongoDB publishes no Community packages for os_type")
    assert "MongoDB series on os_type ubuntu2404: 8.0" in msg
    assert "os_types with 7.0: ubuntu2004, ubuntu2204, debian11, debian12, rhel8, rhel9" in msg
    assert "amazonlinux2023" in msg and "tarball" not in msg  # no route that is refused too


@pytest.mark.parametrize(
    "os_type,version,arch",
    [
        ("amazonlinux2023", "8.0", "aarch64"),
        ("amazonlinux2023", "7.0.14", None),
        ("ubuntu2004", "8.0", "x86_64"),
        ("ubuntu2004", "6.0", "aarch64"),
        ("debian11", "7.0", "x86_64"),
        ("rocky_linux9", "6.0", "aarch64"),
        ("ubuntu2404", "8.0.4", "aarch64"),
    ],
)
def test_platforms_mongodb_ships_packages_for_pass(os_type, version, arch):
    platforms.check_pkb_server(os_type, version, arch, FLAG)


@pytest.mark.parametrize(
    "os_type,version,arch,why",
    [
        ("debian12", "8.0", "aarch64", "os_types with 8.0 on aarch64: ubuntu2004, ubuntu2204"),
        ("amazonlinux2", "8.0", None, "publishes no Community packages for os_type amazonlinux2"),
        ("ubuntu2204", "5.0", None, "supported MongoDB series are 6.0, 7.0, 8.0"),
        ("amazonlinux2023", "6.0", None, "MongoDB series on os_type amazonlinux2023: 7.0, 8.0"),
    ],
)
def test_unsupported_server_platforms_name_the_choices(os_type, version, arch, why):
    with pytest.raises(platforms.UnsupportedPlatform, match=why):
        platforms.check_pkb_server(os_type, version, arch, FLAG)


def test_clients_need_a_python_the_os_ships():
    # RHEL 9's python3 is 3.9: its python3.11 package is installed instead of failing
    assert platforms.check_pkb_client("rhel9") == "python3.11"
    assert platforms.check_pkb_client("amazonlinux2023") == "python3.11"
    assert platforms.check_pkb_client("ubuntu2404") == "python3"
    with pytest.raises(platforms.UnsupportedPlatform) as e:
        platforms.check_pkb_client("ubuntu2004")
    assert "client os_type ubuntu2004: the engine needs Python >= 3.10" in str(e.value)
    assert "client os_types: ubuntu2204, ubuntu2404, debian12, rhel8, rhel9" in str(e.value)


def test_install_builds_its_commands_from_the_same_table():
    # every server entry has a repository the install commands can write
    for (family, release, arch), versions in platforms.SERVER.items():
        for series in versions:
            assert install.repo_setup_commands(family, release, arch, series)
    assert install._SUPPORT is platforms.SERVER and install._DISTROS is platforms.DISTROS
    with pytest.raises(install.UnsupportedPlatform, match="give the URL itself"):
        install.tarball_url("8.0.4", "amzn", "2023", "x86_64")


def test_docs_show_the_matrix():
    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "platforms.md"
    assert platforms.markdown_table() in doc.read_text()


def test_python_probe_prefers_a_new_enough_python3_then_python3_11(tmp_path):
    old = tmp_path / "python3"
    old.write_text("#!/bin/sh\nexit 1\n")  # a python3 older than 3.10 fails the check
    old.chmod(0o755)
    (tmp_path / "python3.11").symlink_to(sys.executable)
    env = dict(os.environ, PATH=f"{tmp_path}:/usr/bin:/bin")
    run = subprocess.run(
        ["sh", "-c", shipping.python_probe_command()], capture_output=True, text=True, env=env
    )
    assert run.stdout.strip() == "python3.11"
    old.unlink()
    (tmp_path / "python3").symlink_to(sys.executable)
    run = subprocess.run(
        ["sh", "-c", shipping.python_probe_command()], capture_output=True, text=True, env=env
    )
    assert run.stdout.strip() == "python3"
    for p in tmp_path.iterdir():
        p.unlink()
    env["PATH"] = str(tmp_path)
    run = subprocess.run(
        ["/bin/sh", "-c", shipping.python_probe_command()], capture_output=True, text=True, env=env
    )
    assert run.returncode != 0 and run.stdout == ""
