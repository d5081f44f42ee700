"""The target URI flag pair, defined once (mongobench_pkb.target) for each benchmark that
takes a target, read and checked before anything is provisioned."""

import pytest
from fakevm import NEEDS_PKB

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from absl import flags
from perfkitbenchmarker import errors
from perfkitbenchmarker.linux_benchmarks import mongodb_perftables_benchmark as perftables_bm
from perfkitbenchmarker.linux_benchmarks import mongodb_ycsb_sweep_benchmark as sweep_bm


def test_each_benchmark_gets_its_pair_from_the_one_definition(pkb_flags, tmp_path):
    for bm in (perftables_bm, sweep_bm):
        t = bm._TARGET
        assert (t.file.name, t.env.name) == (
            f"{bm.BENCHMARK_NAME}_uri_file",
            f"{bm.BENCHMARK_NAME}_uri_env",
        )
        # filed under the benchmark's module: --helpmatch=<benchmark> lists them
        for name in (t.file.name, t.env.name):
            assert flags.FLAGS.find_module_defining_flag(name) == bm.__name__
    with pytest.raises(
        errors.Config.InvalidValue,
        match="exactly one of --mongodb_ycsb_sweep_uri_file or --mongodb_ycsb_sweep_uri_env",
    ):
        sweep_bm._TARGET.Read()
    uri = tmp_path / "target.uri"
    uri.write_text("mongodb://db.example:27017/ycsb\n")
    pkb_flags(mongodb_ycsb_sweep_uri_file=str(uri))
    assert sweep_bm._TARGET.Read().startswith("mongodb://db.example:27017/ycsb")
    assert sweep_bm._TARGET.Given() and not perftables_bm._TARGET.Given()
    # a benchmark config's flags count before they are applied
    assert perftables_bm._TARGET.Given({"mongodb_perftables_uri_env": "TARGET"})
