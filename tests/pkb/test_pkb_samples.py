"""The PKB side of issue 21's figures: engine samples become PKB samples (time series
through PKB's own CreateTimeSeriesSample)."""

import pytest
from fakevm import NEEDS_PKB

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from perfkitbenchmarker import sample
from perfkitbenchmarker.linux_packages import mongobench_client

from mongobench.core import samples as core_samples


def test_a_time_series_becomes_pkbs_time_series_sample():
    s = core_samples.time_series(
        "Operation Throughput time series", [10.0, 12.5], [1000.0, 1001.0], "ops/sec", 1.0,
        {"experiment": "updateapi", "variant": "0, update_one, False"},
    )  # fmt: skip
    s["timestamp"] = 999.5
    got = mongobench_client.ToSample(s)
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
    got = mongobench_client.ToSample(
        {"metric": "Time Taken", "value": 1.5, "unit": "sec", "metadata": {}, "timestamp": 5.0}
    )
    assert (got.metric, got.value, got.unit, got.timestamp) == ("Time Taken", 1.5, "sec", 5.0)
