"""Which MongoDB version is installed when PKB's own --mongodb_version is set too (issue 20,
defect 11: a config pinning 7.0 for PKB's MongoDB benchmarks silently got 8.0)."""

import pytest

from mongobench.deploy import install


@pytest.mark.parametrize(
    "ours,ours_set,pkbs,pkbs_set,chosen",
    [
        ("8.0", False, "8.0", False, "8.0"),  # nothing set: our default
        ("8.0", False, "7.0", True, "7.0"),  # only PKB's: honoured
        ("7.0.14", True, "8.0", False, "7.0.14"),  # only ours
        ("7.0", True, "7.0", True, "7.0"),  # both, the same
        ("8.0", False, None, False, "8.0"),  # PKB without that flag
    ],
)
def test_the_version_set_is_the_version_installed(ours, ours_set, pkbs, pkbs_set, chosen):
    assert install.chosen_version(ours, ours_set, pkbs, pkbs_set) == chosen


def test_both_set_and_different_is_refused_in_one_line():
    with pytest.raises(ValueError) as e:
        install.chosen_version("8.0", True, "7.0", True)
    assert str(e.value) == (
        "--mongodb_version=7.0 and --mongobench_mongodb_version=8.0 disagree: set one of them"
        " (or both to the same version)"
    )
