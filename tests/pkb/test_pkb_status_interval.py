"""The YCSB status interval of the sweep and stress benchmarks (issue 21, item 6): a flag
each, a positive whole number refused otherwise when the flag is parsed (before anything is
provisioned), reaching the stress settings."""

import pytest
from fakevm import NEEDS_PKB

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from absl import flags
from perfkitbenchmarker.linux_benchmarks import (
    mongodb_stress_benchmark as stress,
)
from perfkitbenchmarker.linux_benchmarks import (
    mongodb_ycsb_sweep_benchmark as sweep,
)

from mongobench.ycsb import status


@pytest.mark.parametrize(
    "flag", ["mongodb_ycsb_sweep_status_interval_s", "mongodb_stress_status_interval_s"]
)
def test_the_status_interval_flags_take_a_positive_whole_number(pkb_flags, flag):
    assert flags.FLAGS[flag].default == status.STATUS_INTERVAL_S
    for bad in ("0", "-5", "2.5"):
        with pytest.raises(flags.IllegalFlagValueError):
            pkb_flags(**{flag: bad})
    pkb_flags(**{flag: "3"})
    assert flags.FLAGS[flag].value == 3


def test_the_stress_settings_carry_the_status_interval(pkb_flags):
    pkb_flags(mongodb_stress_status_interval_s="4")
    assert stress._Settings().status_interval_s == 4
    pkb_flags(mongodb_ycsb_sweep_status_interval_s="2")
    assert sweep._STATUS_INTERVAL.value == 2
