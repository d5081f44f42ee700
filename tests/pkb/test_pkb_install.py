"""What the plugin installs on a VM, through PKB's package mechanism (issue 20): the engine's
prerequisites on every VM the engine is deployed to, servers included (defect 1); a C
compiler and Python's headers on every VM: the driver's compiled loop (issue 26), and
hdrhistogram where it has no wheel (defect 3, aarch64); MongoDB's
repository and packages with PKB's InstallPackages and AptUpdate, which retry, and no
hand-written apt-get or dnf (defect 7)."""

import pytest
from fakevm import NEEDS_PKB, RHEL_9, UBUNTU_2204, FakeVm

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from perfkitbenchmarker import linux_packages, vm_util
from perfkitbenchmarker.linux_packages import mongobench_mongod

from mongobench.deploy import install
from mongobench.remote import shipping
from mongobench_pkb import engine


@pytest.fixture
def pkb_temp(tmp_path, monkeypatch):
    monkeypatch.setattr(vm_util, "GetTempDir", lambda: str(tmp_path))


def test_a_server_vm_gets_the_engines_packages_before_the_engine(pkb_flags, pkb_temp):
    server = FakeVm("server0")
    engine.Deploy(server)
    packages = server.calls.index(("InstallPackages", APT))
    venv_check = server.calls.index(("RemoteCommand", engine.VENV_CHECK))
    assert packages < venv_check
    # PKB's Install runs a package module once per VM: a second Deploy installs nothing more
    engine.Deploy(server)
    assert [c for c in server.calls if c[0] == "InstallPackages"] == [server.calls[packages]]


APT = "python3 python3-venv python3-pip gcc libc6-dev python3-dev"
YUM = "python3 python3-pip gcc python3-devel"


@pytest.mark.parametrize(
    "os_release,arch,packages",
    [
        (None, "x86_64", APT),
        (None, "aarch64", APT),
        (RHEL_9, "x86_64", YUM),
        (RHEL_9, "aarch64", YUM),
    ],
)
def test_every_vm_gets_a_compiler_and_pythons_headers(pkb_flags, os_release, arch, packages):
    vm = FakeVm("client0", arch=arch, **({"os_release": os_release} if os_release else {}))
    vm.Install("mongobench_client")
    assert ("InstallPackages", packages) in vm.calls


def test_a_compiled_loop_that_does_not_build_is_a_warning(pkb_flags, pkb_temp, caplog):
    # e.g. a static host without install_packages and without gcc: the Python loop runs
    vm = FakeVm("client0", answers={"driver.native build": ("", 0, shipping.BUILD_FAILED)})
    engine.Deploy(vm)
    assert any(
        r.levelname == "WARNING" and "client0" in r.message and "client_loop: python" in r.message
        for r in caplog.records
    )


def test_mongodb_comes_from_pkbs_package_mechanism_on_apt(pkb_flags):
    vm = FakeVm("server0")
    mongobench_mongod.AptInstall(vm)
    commands = vm.commands()
    assert not [c for c in commands if "apt-get" in c or "dpkg" in c]
    steps = [c[0] if c[0] != "RemoteCommand" else c[1].split()[0] for c in vm.calls]
    prereq = vm.calls.index(("InstallPackages", "gnupg curl ca-certificates"))
    key = next(i for i, c in enumerate(vm.calls) if c[1:] and "gpg --batch" in str(c[1]))
    listed = next(i for i, c in enumerate(vm.calls) if c[1:] and "| sudo tee" in str(c[1]))
    update = vm.calls.index(("AptUpdate",))
    server = vm.calls.index(("InstallPackages", "mongodb-org-server mongodb-org-mongos"))
    # which of the repository's files the host lacks is recorded before they are written
    recorded = next(i for i, c in enumerate(vm.calls) if c[1:] and ".created" in str(c[1]))
    assert prereq < recorded < key < listed < update < server, steps
    assert "systemctl disable --now mongod" in commands[-2]


@pytest.mark.parametrize("os_release", [UBUNTU_2204, RHEL_9])
def test_pkbs_teardown_removes_the_repository_files_the_install_created(pkb_flags, os_release):
    from perfkitbenchmarker import linux_virtual_machine as lvm

    vm = FakeVm("server0", os_release=os_release)
    vm._installed_packages = {"mongobench_mongod"}
    uninstall = lvm.BaseDebianMixin if "ubuntu" in os_release else lvm.BaseRedHatMixin
    uninstall.Uninstall(vm, "mongobench_mongod")  # as PKB's PackageCleanup calls it
    record = mongobench_mongod.CREATED_FILES
    assert vm.commands() == [install.remove_recorded_files_command(record)]
    assert record.startswith(linux_packages.INSTALL_DIR + "/")  # PKB removes it after


def test_mongodb_comes_from_pkbs_package_mechanism_on_dnf(pkb_flags):
    vm = FakeVm("server0", os_release=RHEL_9, arch="aarch64")
    pkb_flags(mongobench_mongodb_version="8.0.4")
    mongobench_mongod.YumInstall(vm)
    assert not [c for c in vm.commands() if "dnf" in c.split() or "yum" in c.split()]
    assert ("InstallPackages", "mongodb-org-server-8.0.4 mongodb-org-mongos-8.0.4") in vm.calls
    assert ("AptUpdate",) not in vm.calls
