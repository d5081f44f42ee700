"""PKB package module: what the `mongobench` engine needs on a VM before
`mongobench_pkb.engine.Deploy` ships it (python3 and venv; a C compiler and Python's headers for
the driver's compiled loop and, where hdrhistogram has no wheel (aarch64), for it; python3.11
where the OS's python3 is too old),
through the OS package manager. `vm.Install("mongobench_client")`; PKB skips it on VMs with
install_packages: false.
"""

from mongobench.deploy import platforms
from mongobench.remote import shipping


def AptInstall(vm):
    vm.InstallPackages(" ".join(shipping.system_packages("apt", vm.cpu_arch)))


def YumInstall(vm):
    """The engine's packages; on RHEL 8/9 and Amazon Linux 2023 (python3 is 3.6/3.9
    there) also the python3.11 package the engine runs on (docs/platforms.md)."""
    packages = shipping.system_packages("yum", vm.cpu_arch)
    python = platforms.PKB_OS_TYPES.get(getattr(vm, "OS_TYPE", None))
    package = platforms.client_python_package(*python) if python else None
    if package and package != "python3":
        packages += [package, f"{package}-pip", f"{package}-devel"]  # its headers
    vm.InstallPackages(" ".join(packages))
