"""The sweep benchmark builds the engine's typed request (SweepRun) from its flags, validated
once with the flags named, keeps it in its typed state (SweepState) and runs the sweep loop
and the property files from it (issue 24, item 2). The sweep runs on the PKB host: no
request file goes to a VM."""

import pickle
import types

import pytest
from fakevm import NEEDS_PKB, FakeVm

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from perfkitbenchmarker import errors, vm_util
from perfkitbenchmarker.linux_benchmarks import mongodb_ycsb_sweep_benchmark as sweep

from mongobench.core.units import MiB
from mongobench.sweep import runner
from mongobench.sweep.request import SweepRun


def test_the_flags_build_the_request_once(pkb_flags):
    pkb_flags(
        mongodb_ycsb_sweep_sizes_mb="0.5,2",
        mongodb_ycsb_sweep_phases="load,read_only",
        mongodb_ycsb_sweep_threads="4",
        mongodb_ycsb_sweep_memory_mb="1024",
        mongodb_ycsb_sweep_repeats="2",
        mongodb_ycsb_sweep_table="sweep_t",
    )
    request = sweep._Request()
    assert request == SweepRun(
        sizes_mb=[0.5, 2.0],
        phases=["load", "read_only"],
        threads=4,
        memory_mb=1024,
        phase_timeout=43200,
        table="sweep_t",
        repeats=2,
    )
    assert sweep._Request() is request  # one object per PKB process
    assert request.memory == (1024 * MiB, "--mongodb_ycsb_sweep_memory_mb")
    pkb_flags(mongodb_ycsb_sweep_phases="all")
    assert sweep._Request().phases is None


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"mongodb_ycsb_sweep_sizes_mb": ""}, "--mongodb_ycsb_sweep_sizes_mb: no dataset sizes"),
        ({"mongodb_ycsb_sweep_sizes_mb": "1,x"}, "--mongodb_ycsb_sweep_sizes_mb: dataset size"),
        ({"mongodb_ycsb_sweep_phases": "scan"}, "--mongodb_ycsb_sweep_phases: unknown phase"),
        ({"mongodb_ycsb_sweep_table": "a$b"}, "--mongodb_ycsb_sweep_table 'a$b':"),
        (
            {"mongodb_ycsb_sweep_sizes_mb": "0.01", "mongodb_ycsb_sweep_operation_count": "5"},
            "--mongodb_ycsb_sweep_sizes_mb, --mongodb_ycsb_sweep_operation_count: 0.01 MB: 5",
        ),
    ],
)
def test_a_bad_flag_is_named_before_anything_is_provisioned(pkb_flags, tmp_path, flags, expected):
    uri = tmp_path / "target.uri"
    uri.write_text("mongodb://db.example:27017/\n")
    pkb_flags(mongodb_ycsb_sweep_uri_file=str(uri), **flags)
    with pytest.raises(errors.Config.InvalidValue) as e:
        sweep.CheckPrerequisites(types.SimpleNamespace(vm_groups={}))
    assert str(e.value).startswith(expected), str(e.value)
    assert "\n" not in str(e.value)


def test_the_state_is_typed_and_pickles_with_its_request(pkb_flags):
    pkb_flags(mongodb_ycsb_sweep_sizes_mb="1")
    state = sweep.SweepState(request=sweep._Request(), uri_files=["/w/target.uri"])
    back = pickle.loads(pickle.dumps(state))  # PKB pickles the benchmark spec
    assert back == state and back.request.validated
    assert back.request.memory == (None, None) and back.failed == []


def test_run_passes_the_one_request_to_the_loop_and_the_property_files(
    pkb_flags, tmp_path, monkeypatch
):
    pkb_flags(
        mongodb_ycsb_sweep_uri_file=str(tmp_path / "target.uri"),
        mongodb_ycsb_sweep_sizes_mb="0.1",
        mongodb_ycsb_sweep_phases="load,read_only",
        mongodb_ycsb_sweep_threads="3",
        mongodb_ycsb_sweep_phase_timeout="77",
        mongodb_ycsb_sweep_keep_data="true",
    )
    (tmp_path / "target.uri").write_text("mongodb://db.example:27017/\n")
    monkeypatch.setattr(vm_util, "GetTempDir", lambda: str(tmp_path))
    started, waited = [], []
    ycsb = sweep.mongobench_ycsb  # the YCSB module the benchmark drives, wherever it lives
    monkeypatch.setattr(ycsb, "Start", lambda vm, specs: started.extend(specs) or specs)
    monkeypatch.setattr(ycsb, "Wait", lambda vm, procs, timeout: waited.append(timeout) or {})
    monkeypatch.setattr(ycsb, "Fetch", lambda vm, procs, d: {})
    monkeypatch.setattr(ycsb, "Stop", lambda vm, procs: None)
    drops = []
    monkeypatch.setattr(sweep, "_Drop", lambda vm, state: drops.append(state.request))
    request = sweep._Request()
    state = sweep.SweepState(
        request=request, uri_files=["/w/target.uri"], memory=(10**9, "server hostInfo")
    )
    spec = types.SimpleNamespace(vm_groups={"clients": [FakeVm("c0")]}, mongobench_sweep=state)
    seen = []
    real_loop = runner.sweep_steps
    monkeypatch.setattr(
        runner, "sweep_steps", lambda req, *a: seen.append(req) or real_loop(req, *a)
    )
    samples = sweep.Run(spec)
    assert seen == [request] and drops == [request]  # kept data: one drop, before the load
    # The fakes give no YCSB output: the load fails, and the run phase is skipped.
    [load] = started
    assert load.name == "s100-load-c0" and "threadcount=3" in load.properties.splitlines()
    assert waited == [77]  # the request's phase timeout
    assert {s.metadata["phase"] for s in samples} == {"load", "read_only"}
    assert len(state.failed) == 2 and "0.1 MB read_only: skipped" in state.failed[1]
