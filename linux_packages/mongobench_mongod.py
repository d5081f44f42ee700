"""PKB package module: what a server VM needs before `mongobench_pkb.mongod.Deploy` runs.

`vm.Install("mongobench_mongod")` (PKB calls it only when install_packages is true) installs
what `mongobench_pkb.mongod.InstallMethod()` names: MongoDB's server and mongos packages
from MongoDB's own repository for the VM's OS (series or full version
--mongobench_mongodb_version), curl and tar for a tarball, a Java runtime for the stand-in,
nothing for preinstalled binaries. Deploying, starting and stopping instances is
`mongobench_pkb.mongod`.

`vm.Uninstall("mongobench_mongod")` (PKB's teardown of a static VM that installed packages)
removes the repository's files the install created; the packages themselves go with PKB's
restore (`mongobench_pkb.host`).
"""

import posixpath

from perfkitbenchmarker import errors

from mongobench.deploy import install
from mongobench_pkb import host, mongod

# the repository's files the install created (not those the host had), in PKB's install
# directory, which PKB's teardown removes after the packages
CREATED_FILES = posixpath.join(host.PKB_INSTALL_DIR, "mongobench_mongod.created")


def _InstallFromRepository(vm):
    """MongoDB's repository, then its packages, through PKB's package mechanism (which retries,
    e.g. while unattended-upgrades holds the dpkg lock at boot)."""
    plat = mongod.Platform(vm)
    version = mongod.MongodbVersion()
    try:
        repo = install.repo_setup_commands(plat.family, plat.release, plat.arch, version)
        files = install.repo_files(plat.family, plat.release, plat.arch, version)
        packages = install.server_packages(plat.family, plat.release, plat.arch, version)
    except install.UnsupportedPlatform as e:
        raise errors.Setup.InvalidSetupError(
            f"{vm.name}: {e}; supported platforms: docs/platforms.md (or preinstalled"
            " binaries: --mongobench_mongod_bin_dir)"
        ) from e
    prerequisites = install.repo_prerequisites(plat)
    if prerequisites:
        vm.InstallPackages(" ".join(prerequisites))
    vm.RemoteCommand(install.record_new_files_command(files, CREATED_FILES))
    for cmd in repo:
        vm.RemoteCommand(cmd)
    if plat.package_manager == "apt":
        vm.AptUpdate()  # the new repository's lists (PKB's InstallPackages updates only once)
    vm.InstallPackages(" ".join(packages))
    for cmd in install.after_install_commands():
        vm.RemoteCommand(cmd)


def _Install(vm):
    method = mongod.InstallMethod()
    if method == "standin":
        vm.Install("mongobench_ycsb")  # the stand-in is Java, like the YCSB client
    elif method == "tarball":
        vm.InstallPackages("curl tar")
    elif method == "repository":
        _InstallFromRepository(vm)


def AptInstall(vm):
    """mongod from MongoDB's apt repository (or a JRE for the stand-in, curl for tarballs)."""
    _Install(vm)


def YumInstall(vm):
    """mongod from MongoDB's yum repository (or a JRE for the stand-in, curl for tarballs)."""
    _Install(vm)


def _Uninstall(vm):
    vm.RemoteCommand(install.remove_recorded_files_command(CREATED_FILES))


def AptUninstall(vm):
    """Removes MongoDB's apt list and keyring if the install created them."""
    _Uninstall(vm)


def YumUninstall(vm):
    """Removes MongoDB's yum repo file if the install created it."""
    _Uninstall(vm)
