"""Static hosts: PKB's teardown removes the packages the plugin was allowed to install, and
only them (mongobench_pkb.host), driven through PKB's own PackageCleanup and Debian
Uninstall."""

import pickle

import pytest
from fakevm import NEEDS_PKB, FakeVm

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from perfkitbenchmarker import errors, linux_packages, os_types
from perfkitbenchmarker import linux_virtual_machine as lvm

from mongobench_pkb import host

PACKAGES = {"mongobench_client", "mongobench_ycsb", "mongobench_stress_ng"}
SNAPSHOT = "adduser\t\t\tinstall\nstress-ng\t\t\tinstall\nold-tool\t\t\tdeinstall\n"
# the run installed two packages, and old-tool again (the host had removed it, keeping its
# configuration files)
NOW = (
    "adduser\t\t\tinstall\nstress-ng\t\t\tinstall\nold-tool\t\t\tinstall\n"
    "python3-venv\t\t\tinstall\nlibjudydebian1:amd64\t\t\tinstall\n"
)
ALONE = "Purg python3-venv [3.11.2-1+b1]\nPurg libjudydebian1 [1.0.5-5+b2]\n"
WITH_A_HOST_PACKAGE = ALONE + "Purg stress-ng [0.15.06-2]\n"


class StaticDebianVm(FakeVm):
    """A static Debian VM with PKB's own package cleanup."""

    is_static = True
    BASE_OS_TYPE = os_types.DEBIAN

    def __init__(self, simulation=ALONE):
        super().__init__(
            answers={
                "cat /opt/pkb/dpkg_selections": (SNAPSHOT, 0),
                "dpkg --get-selections": (NOW, 0),
                "apt-get -s purge": (simulation, 0),
            }
        )
        self._installed_packages = set(PACKAGES)
        self.pkbs_restore = False

    def Uninstall(self, package_name):
        lvm.BaseDebianMixin.Uninstall(self, package_name)

    def RestorePackages(self):
        self.pkbs_restore = True

    def PackageCleanup(self):
        lvm.BaseLinuxMixin.PackageCleanup(self)

    def purges(self):
        return [c for c in self.commands() if "apt-get purge" in c or "apt-get remove" in c]


def test_the_snapshot_is_where_pkb_writes_it():
    assert host.PKB_INSTALL_DIR == linux_packages.INSTALL_DIR


def test_pkbs_package_cleanup_stops_at_the_first_package_on_its_own():
    # the PKB bug the plugin works around: nothing after the first package is undone
    vm = StaticDebianVm()
    with pytest.raises(RuntimeError, match="Set changed size during iteration"):
        vm.PackageCleanup()
    assert not vm.pkbs_restore and len(vm._installed_packages) == len(PACKAGES) - 1


def test_teardown_purges_what_the_run_installed_and_upgrades_nothing(pkb_flags):
    pkb_flags(mongobench_static_package_changes=True)
    vm = StaticDebianVm()
    host.ProtectStaticVm(vm)
    assert vm.install_packages
    vm._installed_packages.add("mongobench_mongod")  # installed later, in Prepare
    vm.PackageCleanup()
    assert vm._installed_packages == set()
    assert not vm.pkbs_restore  # PKB's apt-get --purge dselect-upgrade
    assert vm.purges() == [
        "sudo DEBIAN_FRONTEND=noninteractive apt-get remove -y -q old-tool",
        "sudo DEBIAN_FRONTEND=noninteractive apt-get purge -y -q libjudydebian1:amd64 python3-venv",
    ]
    assert not [c for c in vm.commands() if "upgrade" in c]
    assert vm.commands()[-1] == "sudo rm -rf /opt/pkb"
    # PKB pickles the spec, its VMs with it, after each stage
    assert pickle.loads(pickle.dumps(vm))._installed_packages == set()


def test_a_purge_that_would_remove_a_host_package_is_refused_loudly(pkb_flags):
    pkb_flags(mongobench_static_package_changes=True)
    vm = StaticDebianVm(simulation=WITH_A_HOST_PACKAGE)
    host.ProtectStaticVm(vm)
    with pytest.raises(errors.VirtualMachine.VmStateError, match="also remove stress-ng"):
        vm.PackageCleanup()
    assert vm.purges() == []


def test_without_the_opt_in_nothing_is_installed_so_nothing_is_undone(pkb_flags):
    vm = StaticDebianVm()
    host.ProtectStaticVm(vm)
    assert not vm.install_packages and type(vm._installed_packages) is set
    assert "RestorePackages" not in vars(vm)
