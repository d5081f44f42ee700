"""Host safety for static machines (bare metal, the local test bed).

With install_packages true (the default of --static_vm_file entries), PKB snapshots the
host's dpkg selections and at teardown restores them with `apt-get --purge
dselect-upgrade`, which purges what the run installed and also upgrades every host package
that has a newer version in the apt lists (135 unrelated packages in a trial). Unless the
user opts in, these benchmarks switch install_packages off on static VMs before they
install anything: nothing is installed, so nothing is purged or upgraded at teardown.

With the opt-in (--mongobench_static_package_changes):
- PKB's teardown (PackageCleanup: uninstall each package, then restore the snapshot)
  stopped at the first package with "Set changed size during iteration": it iterates the
  set of installed packages while Uninstall removes from it, and the snapshot was never
  restored. Such a VM gets a set that iterates over a copy of itself (`_PackageSet`).
- On Debian and Ubuntu the restore purges only what the run installed and upgrades
  nothing (`RestoreAddedPackages`, in place of PKB's). Elsewhere PKB's own restore runs
  (`rpm -e` of the packages not in its snapshot: no upgrades).

What Cleanup keeps and undoes is `mongobench_pkb.stages`.
"""

import functools
import logging
import posixpath

from absl import flags
from perfkitbenchmarker import errors, os_types

from mongobench.deploy import hostpackages

# PKB's linux_packages.INSTALL_DIR, where its package snapshot lies (the wing does not import
# linux_packages, which imports the wing; tests/pkb checks that the two agree)
PKB_INSTALL_DIR = "/opt/pkb"

_ALLOW = flags.DEFINE_bool(
    "mongobench_static_package_changes",
    False,
    "Let the MongoDB benchmarks install OS packages on static VMs. PKB's teardown removes"
    " them again: on Debian and Ubuntu the packages the run installed are purged, only"
    " they, and only when that removes no package the host had (PKB's own restore would"
    " also upgrade host packages). Off by default: static hosts must already have what the"
    " benchmark needs.",
)


def ProtectStaticVm(vm):
    """Makes sure PKB will neither install nor purge packages on a static VM, or, with the
    opt-in, that its teardown removes exactly what the run installed."""
    if not getattr(vm, "is_static", False) or not vm.install_packages:
        return
    if _ALLOW.value:
        logging.warning(
            "%s: static VM with install_packages and --mongobench_static_package_changes:"
            " packages will be installed, and removed again at PKB's teardown.",
            vm.name,
        )
        packages = getattr(vm, "_installed_packages", None)
        if isinstance(packages, set) and not isinstance(packages, _PackageSet):
            vm._installed_packages = _PackageSet(packages)
        if getattr(vm, "BASE_OS_TYPE", None) == os_types.DEBIAN:
            vm.RestorePackages = functools.partial(RestoreAddedPackages, vm)
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


def RestoreAddedPackages(vm):
    """In place of PKB's RestorePackages on a static Debian or Ubuntu VM (its PackageCleanup
    calls it at teardown): takes off the packages selected for install now and not in PKB's
    snapshot, when apt's simulation of their purge removes no other package; raises
    otherwise, naming them (mongobench.deploy.hostpackages)."""
    snapshot_file = posixpath.join(PKB_INSTALL_DIR, "dpkg_selections")
    snapshot, _ = vm.RemoteCommand(f"cat {snapshot_file}")
    now, _ = vm.RemoteCommand("dpkg --get-selections")
    packages = hostpackages.added(snapshot, now)
    if not packages:
        logging.info("%s: no package to purge: the run installed none", vm.name)
        return
    simulation, stderr, rc = vm.RemoteCommandWithReturnCode(
        hostpackages.simulate_command(packages), ignore_failure=True
    )
    others = hostpackages.others_removed(packages, simulation)
    if rc or others:
        why = (
            f"that would also remove {', '.join(others)}, which the host had before and"
            " which now depend on them"
            if others
            else f"apt refuses the purge: {stderr.strip()[-500:]}"
        )
        raise errors.VirtualMachine.VmStateError(
            f"{vm.name}: the {len(packages)} packages this run installed were left installed"
            f" ({why}). Installed by the run: {', '.join(packages)}"
        )
    for command in hostpackages.undo_commands(snapshot, packages):
        vm.RemoteCommand(command)
    logging.info(
        "%s: removed the %d packages the run installed: %s", vm.name, len(packages),
        " ".join(packages),
    )  # fmt: skip
