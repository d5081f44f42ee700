"""PKB package module: stress-ng from the OS package manager (`vm.Install(
"mongobench_stress_ng")`; PKB runs it only when install_packages is true). Holding memory with
it is `mongobench_pkb.stress_ng` (which says why PKB's own stress_ng package is not used).
"""


def AptInstall(vm):
    vm.InstallPackages("stress-ng")


def YumInstall(vm):
    vm.InstallPackages("stress-ng")
