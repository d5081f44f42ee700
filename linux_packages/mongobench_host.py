"""Host safety for static machines (bare metal, the local test bed), and what Cleanup keeps.

With install_packages true (the default of --static_vm_file entries), PKB
snapshots the host's dpkg selections and at teardown runs
`apt-get --purge dselect-upgrade`, which removed packages and upgraded
unrelated ones in a trial. Unless the user opts in, these benchmarks switch
install_packages off on static VMs before they install anything: nothing is
installed, so nothing is purged or upgraded at teardown.

Cleanup of a failed run (or of any run with --mongobench_keep_diagnostics) first pulls the
diagnostics (mongod logs and FTDC, YCSB outputs, the engine's raw results) into PKB's run
directory: `KeepDiagnostics` decides, `DiagnosticsStep` is the Cleanup step.
"""

import logging

from absl import flags
from perfkitbenchmarker.linux_packages import mongobench_vm

_ALLOW = flags.DEFINE_bool(
    "mongobench_static_package_changes",
    False,
    "Let the MongoDB benchmarks install OS packages on static VMs (PKB then"
    " restores its dpkg snapshot at teardown with apt-get --purge"
    " dselect-upgrade, which can remove and upgrade host packages). Off by"
    " default: static hosts must already have what the benchmark needs.",
)

_KEEP_DIAGNOSTICS = flags.DEFINE_bool(
    "mongobench_keep_diagnostics",
    False,
    "Keep the MongoDB benchmarks' diagnostics (mongod logs and diagnostic.data, YCSB outputs,"
    " the engine's raw results) in the run directory under diagnostics/<vm>/ after a"
    " successful run too; a failed run always keeps them. Secret files (the target URI,"
    " TLS keys, users files) are never copied.",
)


def KeepDiagnostics(benchmark_spec, failed):
    """Whether Cleanup pulls the diagnostics: after a failure (`failed`: the benchmark's
    own, e.g. a failed variant; or a stage that raised, which PKB records in status_detail
    before it calls Cleanup), else when --mongobench_keep_diagnostics asks."""
    stage_failed = bool(getattr(benchmark_spec, "status_detail", None))
    return stage_failed or bool(failed) or _KEEP_DIAGNOSTICS.value


def DiagnosticsStep(vm, paths_of):
    """The Undo step that pulls `paths_of(vm)` (computed when it runs) from `vm` into
    `<run directory>/diagnostics/<vm name>/` (mongobench_vm.PullDiagnostics). Diagnostics
    that cannot be pulled are logged, not a cleanup problem: they never fail a good run."""

    def pull():
        try:
            mongobench_vm.PullDiagnostics(vm, paths_of(vm))
        except Exception as e:  # noqa: BLE001 -- the removal steps after it must still run
            logging.error("mongobench: could not keep the diagnostics of %s: %s", vm.name, e)

    return (f"keep the diagnostics of {vm.name}", pull)


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
        return
    logging.warning(
        "%s: static VM: install_packages switched off so that PKB leaves the"
        " host's packages as they are (no install, no purge at teardown). Use"
        " --mongobench_static_package_changes to allow changes.",
        vm.name,
    )
    vm.install_packages = False


def Undo(steps):
    """Runs every (description, function) step of a Cleanup, in order, even after one fails.

    Cleanup may follow a Prepare that stopped half-way: each step undoes what exists
    and does nothing otherwise. Returns the descriptions of what could not be undone,
    with the reason, so the caller can fail the run and say so."""
    problems = []
    for description, fn in steps:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 -- one failed step must not skip the others
            logging.error("cleanup: could not %s: %s", description, e)
            problems.append(f"could not {description}: {e}")
    return problems
