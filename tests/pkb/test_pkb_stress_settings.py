"""mongodb_stress's flags build the engine's StressSettings (issue 24, item 2): each flag's
default is the settings' default, and settings a run cannot use are refused by
CheckPrerequisites, before anything is provisioned, in one line naming the flags."""

import dataclasses

import pytest
from fakevm import NEEDS_PKB

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from absl import flags
from perfkitbenchmarker import errors
from perfkitbenchmarker.linux_benchmarks import (
    mongodb_stress_benchmark as stress,
)

from mongobench.stress.settings import StressSettings, pkb_flag


class _Group:
    def __init__(self, vm_count):
        self.vm_count = vm_count


class _Config:
    vm_groups = {"servers": _Group(1), "clients": _Group(1)}


def test_every_setting_is_a_flag_whose_default_is_the_engines(pkb_flags):
    pkb_flags()
    for f in dataclasses.fields(StressSettings):
        flag = flags.FLAGS[pkb_flag(f.name).removeprefix("--")]
        default = tuple(flag.default) if f.name == "addresses" else flag.default
        assert default == f.default, f.name
    assert stress._Settings() == StressSettings()


def test_the_flags_reach_the_settings(pkb_flags):
    pkb_flags(
        mongodb_stress_records_per_instance="5000",
        mongodb_stress_server_addresses="10.0.0.5,eth1",
        mongodb_stress_steady_tolerance="0.05",
        mongodb_stress_read_p99_sla_ms="7.5",
        mongodb_stress_hold_memory="false",
        mongodb_stress_first_step="5",
    )
    got = stress._Settings()
    assert (got.records, got.addresses, got.sla_ms, got.hold, got.first_step) == (
        5000,
        ("10.0.0.5", "eth1"),
        7.5,
        False,
        5,
    )
    assert got.steady_rule.tolerance == 0.05


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"mongodb_stress_max_instances": "2", "mongodb_stress_min_instances": "3"},
            "--mongodb_stress_max_instances 2 is below --mongodb_stress_min_instances 3",
        ),
        (
            {"mongodb_stress_first_port": "65535", "mongodb_stress_max_instances": "2"},
            "--mongodb_stress_first_port 65535: instance ports would exceed 65535"
            " (the last would be 65536)",
        ),
        (
            {
                "mongodb_stress_stress_ng_per_numa_node": "true",
                "mongodb_stress_hold_memory": "false",
            },
            "--mongodb_stress_stress_ng_per_numa_node needs --mongodb_stress_hold_memory",
        ),
    ],
)
def test_settings_a_run_cannot_use_fail_before_provisioning(pkb_flags, given, message):
    pkb_flags(**given)
    with pytest.raises(errors.Config.InvalidValue) as e:
        stress.CheckPrerequisites(_Config())
    assert str(e.value) == message
