"""Host safety for static machines (bare metal, the local test bed).

With install_packages true (the default of --static_vm_file entries), PKB
snapshots the host's dpkg selections and at teardown runs
`apt-get --purge dselect-upgrade`, which removed packages and upgraded
unrelated ones in a trial. Unless the user opts in, these benchmarks switch
install_packages off on static VMs before they install anything: nothing is
installed, so nothing is purged or upgraded at teardown.

With the opt-in, PKB's teardown of a static VM that installed packages (PackageCleanup:
uninstall each package, restore the snapshot) stopped at the first package with "Set changed
size during iteration": it iterates the set of installed packages while Uninstall removes
from it, so the host's packages were never restored. ProtectStaticVm gives such a VM a set
that iterates over a copy of itself (`_PackageSet`).

What Cleanup keeps and undoes is `mongobench_pkb.stages`.
"""

import logging

from absl import flags

_ALLOW = flags.DEFINE_bool(
    "mongobench_static_package_changes",
    False,
    "Let the MongoDB benchmarks install OS packages on static VMs (PKB then"
    " restores its dpkg snapshot at teardown with apt-get --purge"
    " dselect-upgrade, which can remove and upgrade host packages). Off by"
    " default: static hosts must already have what the benchmark needs.",
)


def ProtectStaticVm(vm):
    """Makes sure PKB will neither install nor purge packages on a static VM."""
    if not getattr(vm, "is_static", False) or not vm.install_packages:
        return
    if _ALLOW.value:
        logging.warning(
            "%s: static VM with install_packages and"
            " --mongobench_static_package_changes: PKB will install packages and"
            " restore its package snapshot at teardown.",
            vm.name,
        )
        packages = getattr(vm, "_installed_packages", None)
        if isinstance(packages, set) and not isinstance(packages, _PackageSet):
            vm._installed_packages = _PackageSet(packages)
        return
    logging.warning(
        "%s: static VM: install_packages switched off so that PKB leaves the"
        " host's packages as they are (no install, no purge at teardown). Use"
        " --mongobench_static_package_changes to allow changes.",
        vm.name,
    )
    vm.install_packages = False


class _PackageSet(set):
    """PKB's set of the packages a VM installed, iterated over a copy of itself: PKB's
    PackageCleanup uninstalls while it iterates, and Uninstall removes from the set."""

    def __iter__(self):
        return iter(list(super().__iter__()))
