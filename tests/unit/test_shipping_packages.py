"""The OS packages the engine's virtualenv needs on a VM (issue 20, defect 3: hdrhistogram
has Linux wheels for x86_64 only, so an aarch64 VM builds it from its sdist; issue 26: every
VM builds the driver's compiled loop)."""

import pytest

from mongobench.remote import shipping


@pytest.mark.parametrize("arch", ["x86_64", "aarch64", "arm64", "ppc64le"])
def test_every_architecture_gets_a_compiler_and_pythons_headers(arch):
    apt = shipping.system_packages("apt", arch)
    assert {"gcc", "libc6-dev", "python3-dev", "python3-venv"} <= set(apt)
    assert {"gcc", "python3-devel"} <= set(shipping.system_packages("yum", arch))


def test_hdrhistogram_is_still_what_needs_it():
    # the reason for the build packages: drop them when the engine no longer needs hdrhistogram
    assert any(r.startswith("hdrhistogram") for r in shipping.requirements())


def test_an_unknown_package_manager_is_refused():
    with pytest.raises(ValueError, match="unknown package manager 'zypper'"):
        shipping.system_packages("zypper", "x86_64")
