"""PKB package module: the Java runtime the project's jars (the YCSB client, the stand-in
server) need on a VM. `vm.Install("mongobench_ycsb")` adds it through the OS package manager
(PKB runs it only when install_packages is true). Shipping the jars and running YCSB is
`mongobench_pkb.ycsb`.
"""

from perfkitbenchmarker import errors

JRE_APT_PACKAGES = ("openjdk-17-jre-headless", "openjdk-21-jre-headless")
JRE_YUM_PACKAGE = "java-17-openjdk-headless"


def AptInstall(vm):
    """A headless Java runtime (17, else 21) from the distribution."""
    for package in JRE_APT_PACKAGES:
        if vm.HasPackage(package):
            vm.InstallPackages(package)
            return
    raise errors.Setup.InvalidSetupError(
        f"{vm.name}: none of {', '.join(JRE_APT_PACKAGES)} is available from apt"
    )


def YumInstall(vm):
    vm.InstallPackages(JRE_YUM_PACKAGE)
