"""Static hosts: PKB's teardown restores the packages the plugin was allowed to install
(mongobench_pkb.host), driven through PKB's own PackageCleanup and Debian Uninstall."""

import pytest
from fakevm import NEEDS_PKB, FakeVm

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from perfkitbenchmarker import linux_virtual_machine as lvm

from mongobench_pkb import host

PACKAGES = {"mongobench_client", "mongobench_ycsb", "mongobench_stress_ng"}


class StaticDebianVm(FakeVm):
    """A static Debian VM with PKB's own package cleanup."""

    is_static = True

    def __init__(self):
        super().__init__()
        self._installed_packages = set(PACKAGES)
        self.restored = False

    def Uninstall(self, package_name):
        lvm.BaseDebianMixin.Uninstall(self, package_name)

    def RestorePackages(self):
        self.restored = True

    def PackageCleanup(self):
        lvm.BaseLinuxMixin.PackageCleanup(self)


def test_pkbs_package_cleanup_stops_at_the_first_package_on_its_own():
    # the PKB bug the plugin works around: nothing after the first package is undone
    vm = StaticDebianVm()
    with pytest.raises(RuntimeError, match="Set changed size during iteration"):
        vm.PackageCleanup()
    assert not vm.restored and len(vm._installed_packages) == len(PACKAGES) - 1


def test_allowed_package_changes_are_undone_at_teardown(pkb_flags):
    pkb_flags(mongobench_static_package_changes=True)
    vm = StaticDebianVm()
    host.ProtectStaticVm(vm)
    assert vm.install_packages
    vm._installed_packages.add("mongobench_mongod")  # installed later, in Prepare
    vm.PackageCleanup()
    assert vm.restored and vm._installed_packages == set()
    assert ("RemoteCommand", "sudo rm -rf /opt/pkb") in vm.calls


def test_without_the_opt_in_nothing_is_installed_so_nothing_is_undone(pkb_flags):
    vm = StaticDebianVm()
    host.ProtectStaticVm(vm)
    assert not vm.install_packages and type(vm._installed_packages) is set
