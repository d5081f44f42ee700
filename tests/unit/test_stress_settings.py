"""StressSettings (issue 24, item 2): a stress run's options declared once, with the
defaults the mongodb_stress flags had, and validated once in one line naming the flag and
the value."""

import dataclasses

import pytest

from mongobench.stress import steady
from mongobench.stress.settings import SettingsError, StressSettings, pkb_flag

# The flags' defaults before the settings were declared in the engine (mongodb_stress_*).
OLD_DEFAULTS = {
    "search": "bounded",
    "target_ops": 25_000,
    "step_seconds": 180,
    "sla_ms": 3.0,
    "min_instances": 1,
    "first_step": None,
    "max_instances": None,
    "records": None,
    "cache_gb": None,
    "memory_gb": None,
    "vcpus": None,
    "disk_gb": None,
    "first_port": 27017,
    "run_threads": 10,
    "load_threads": 30,
    "load_batch": 100,
    "load_timeout": 6 * 3600,
    "step_grace": 120,
    "hold": True,
    "hold_gb": None,
    "stress_ng_workers": None,
    "stress_ng_per_numa": False,
    "numactl_cpu": "none",
    "numactl_memory": "none",
    "addresses": (),
    "bind_ip": None,
    "histograms": True,
    "drop_caches": True,
    "host_settings": True,
    "tls": False,
    "seeding": "copy",
    "source_loaders": None,
    "step_stop": "steady",
    "steady_min_seconds": 60.0,
    "steady_tolerance": 0.01,
    "status_interval_s": 10,
}


def test_the_defaults_are_the_flags_old_defaults_and_valid():
    defaults = StressSettings()
    assert dataclasses.asdict(defaults) == OLD_DEFAULTS
    assert defaults.validate() is defaults
    assert defaults.steady_rule == steady.SteadyRule()
    assert not defaults.uses_numactl


def test_every_field_names_its_flag():
    names = {f.name: pkb_flag(f.name) for f in dataclasses.fields(StressSettings)}
    assert names["records"] == "--mongodb_stress_records_per_instance"
    assert names["target_ops"] == "--mongodb_stress_target_ops_per_client"
    assert names["sla_ms"] == "--mongodb_stress_read_p99_sla_ms"
    assert names["hold"] == "--mongodb_stress_hold_memory"
    assert names["step_stop"] == "--mongodb_stress_step_stop"
    assert len(set(names.values())) == len(names)


def test_addresses_given_as_a_list_are_kept_as_a_tuple():
    got = StressSettings(addresses=["10.0.0.5", "eth1"])
    assert got.addresses == ("10.0.0.5", "eth1")
    assert hash(got)  # frozen and hashable: one object for the whole run


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"search": "binary"}, "--mongodb_stress_search: must be one of linear, bounded, not 'binary'"),
        ({"seeding": "clone"}, "--mongodb_stress_data_seeding: must be one of copy, load, not 'clone'"),
        ({"step_stop": "never"}, "--mongodb_stress_step_stop: must be one of steady, full, not 'never'"),
        ({"numactl_cpu": "all"}, "--mongodb_stress_numactl_cpu: must be one of none, node, cpus, not 'all'"),
        ({"records": 0}, "--mongodb_stress_records_per_instance: must be a whole number >= 1, not 0"),
        ({"target_ops": 2.5}, "--mongodb_stress_target_ops_per_client: must be a whole number >= 1, not 2.5"),
        ({"step_seconds": None}, "--mongodb_stress_step_seconds: must be a whole number >= 1, not None"),
        ({"load_batch": True}, "--mongodb_stress_load_batch_size: must be a whole number >= 1, not True"),
        ({"first_step": 0}, "--mongodb_stress_first_step: must be a whole number >= 1, not 0"),
        ({"sla_ms": -1.0}, "--mongodb_stress_read_p99_sla_ms: must be a number >= 0, not -1.0"),
        ({"memory_gb": float("inf")}, "--mongodb_stress_server_memory_gb: must be a number >= 0, not inf"),
        ({"cache_gb": 0.1}, "--mongodb_stress_cache_gb: must be a number of GB >= 0.25, not 0.1"),
        ({"steady_tolerance": 0.9}, "--mongodb_stress_steady_tolerance: must be a number in [0.001, 0.5], not 0.9"),
        ({"tls": "yes"}, "--mongodb_stress_tls: must be true or false, not 'yes'"),
        ({"addresses": ("",)}, "--mongodb_stress_server_addresses: must be a list of addresses, interface names or 'all', not ('',)"),
        (
            {"max_instances": 2, "min_instances": 3},
            "--mongodb_stress_max_instances 2 is below --mongodb_stress_min_instances 3",
        ),
        (
            {"first_step": 4, "search": "linear"},
            "--mongodb_stress_first_step 4: only the bounded search has a first step, not"
            " --mongodb_stress_search linear",
        ),
        (
            {"first_port": 65534, "max_instances": 3},
            "--mongodb_stress_first_port 65534: instance ports would exceed 65535 (the last would be 65536)",
        ),
        (
            {"stress_ng_per_numa": True, "hold": False},
            "--mongodb_stress_stress_ng_per_numa_node needs --mongodb_stress_hold_memory",
        ),
    ],
)  # fmt: skip
def test_settings_a_run_cannot_use_are_refused_in_one_line(changes, message):
    with pytest.raises(SettingsError) as e:
        StressSettings(**changes).validate()
    assert str(e.value) == message
    assert isinstance(e.value, ValueError)


def test_the_errors_name_options_as_asked():
    with pytest.raises(SettingsError, match=r"^stress: records: must be a whole number"):
        StressSettings(records=-5).validate(lambda name: f"stress: {name}")


def test_edges_that_a_run_can_use():
    edge = StressSettings(
        first_port=65533,
        max_instances=3,
        min_instances=3,
        cache_gb=0.25,
        steady_tolerance=0.5,
        steady_min_seconds=0,
        hold_gb=0.0,
        memory_gb=0.0,
        numactl_memory="bind",
    )
    assert edge.validate() is edge and edge.uses_numactl
    assert edge.steady_rule.tolerance == 0.5
