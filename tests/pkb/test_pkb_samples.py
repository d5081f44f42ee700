"""The PKB side of issue 21's figures: engine samples become PKB samples (time series
through PKB's own CreateTimeSeriesSample), and the provisioned disk of PKB's spec reaches
the engine's settings for the bottleneck judgement."""

from types import SimpleNamespace

import pytest
from fakevm import NEEDS_PKB

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from perfkitbenchmarker import sample
from perfkitbenchmarker.linux_benchmarks import (
    mongodb_perftables_benchmark as perftables,
)

from mongobench.core import samples as core_samples
from mongobench_pkb import engine


def test_a_time_series_becomes_pkbs_time_series_sample():
    s = core_samples.time_series(
        "Operation Throughput time series", [10.0, 12.5], [1000.0, 1001.0], "ops/sec", 1.0,
        {"experiment": "updateapi", "variant": "0, update_one, False"},
    )  # fmt: skip
    s["timestamp"] = 999.5
    got = engine.ToSample(s)
    want = sample.CreateTimeSeriesSample(
        values=[10.0, 12.5], timestamps=[1000.0, 1001.0], metric="Operation Throughput time series",
        units="ops/sec", interval=1.0,
        additional_metadata={"experiment": "updateapi", "variant": "0, update_one, False"},
    )  # fmt: skip
    assert isinstance(got, sample.Sample)
    assert (got.metric, got.value, got.unit, got.metadata) == (
        want.metric, want.value, want.unit, want.metadata,
    )  # fmt: skip
    assert got.metadata[sample.VALUES] == [10.0, 12.5]
    assert got.metadata[sample.TIMESTAMPS] == [1000.0, 1001.0]
    assert got.timestamp == 999.5


def test_a_plain_sample_keeps_its_timestamp():
    got = engine.ToSample(
        {"metric": "Time Taken", "value": 1.5, "unit": "sec", "metadata": {}, "timestamp": 5.0}
    )
    assert (got.metric, got.value, got.unit, got.timestamp) == ("Time Taken", 1.5, "sec", 5.0)


def _spec(disk):
    vm = SimpleNamespace(machine_type="n2-standard-4", scratch_disks=[disk])
    return SimpleNamespace(vm_groups={"servers": [vm]})


def test_the_provisioned_disk_of_pkbs_spec_reaches_the_settings():
    pd = SimpleNamespace(disk_type="pd-balanced", provisioned_iops=3000,
                         provisioned_throughput=140, metadata={"type": "pd-balanced"},
                         num_striped_disks=1)  # fmt: skip
    labels = perftables._HardwareLabels(_spec(pd), "standalone")
    assert labels == {"instance_type": "n2-standard-4", "disk_type": "pd-balanced",
                      "disk_iops": 3000, "disk_mb_s": 140}  # fmt: skip
    static = SimpleNamespace(disk_type=None, provisioned_iops=None, provisioned_throughput=None,
                             metadata={}, num_striped_disks=1)  # fmt: skip
    assert perftables._HardwareLabels(_spec(static), "standalone") == {
        "instance_type": "n2-standard-4", "disk_type": "unknown",
    }  # fmt: skip
