"""The PKB wing by its real names (mongobench_pkb.*), and the Cleanup stage the three
benchmarks share (mongobench_pkb.stages) driven through a benchmark's own Cleanup on FakeVms."""

import importlib
import types

import pytest
from fakevm import NEEDS_PKB, FakeVm

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from perfkitbenchmarker import errors, linux_packages
from perfkitbenchmarker.linux_benchmarks import mongodb_ycsb_sweep_benchmark as sweep_bm

from mongobench.sweep.request import SweepRun
from mongobench_pkb import stages
from mongobench_pkb import vm as mongobench_vm

WING = (
    "atlas",
    "engine",
    "host",
    "mongod",
    "stages",
    "stress",
    "stress_ng",
    "topology",
    "vm",
    "ycsb",
)


def test_the_wing_imports_by_its_real_names_and_linux_packages_only_installs():
    for name in WING:
        module = importlib.import_module(f"mongobench_pkb.{name}")
        assert module.__name__ == f"mongobench_pkb.{name}"
    ours = {n: m for n, m in linux_packages.PACKAGES.items() if n.startswith("mongobench")}
    assert sorted(ours) == [
        "mongobench_client",
        "mongobench_mongod",
        "mongobench_stress_ng",
        "mongobench_ycsb",
    ]
    for name, module in ours.items():
        assert hasattr(module, "AptInstall") and hasattr(module, "YumInstall"), name


def _spec(failed, clients):
    return types.SimpleNamespace(
        vm_groups={"clients": clients},
        mongobench_sweep=sweep_bm.SweepState(request=SweepRun(), failed=failed),
        status_detail=None,
    )


def _archived(vm):
    return [c for c in vm.commands() if mongobench_vm.DIAGNOSTICS_ARCHIVE in c and "tar" in c]


def test_a_failed_run_keeps_diagnostics_undoes_every_step_and_raises_once(pkb_flags):
    c0 = FakeVm("c0", answers={"rm -rf": ("", 1)})  # its removals fail
    c1 = FakeVm("c1")
    spec = _spec(["s1-load: YCSB exited with status 1"], [c0, c1])
    with pytest.raises(errors.Benchmarks.RunError) as e:
        sweep_bm.Cleanup(spec)
    problems = str(e.value).split(" | ")
    assert problems[0].startswith("could not remove YCSB on c0: ")
    assert problems[-1] == (
        '1 phase(s) failed (their samples are named "Phase Failed"):'
        " s1-load: YCSB exited with status 1"
    )
    # c0's failed removal did not skip c1: stopped, kept (after the stop), removed
    commands = c1.commands()
    kept = commands.index(_archived(c1)[0])
    removed = next(i for i, c in enumerate(commands) if "rm -rf" in c and "ycsb" in c)
    assert 0 < kept < removed
    assert _archived(c0)
    # PKB calls Cleanup again after a Cleanup that raised: nothing more happens
    before = len(c0.calls) + len(c1.calls)
    sweep_bm.Cleanup(spec)
    assert len(c0.calls) + len(c1.calls) == before


def test_a_good_run_keeps_diagnostics_only_when_asked(pkb_flags):
    vm = FakeVm("c0")
    sweep_bm.Cleanup(_spec([], [vm]))
    assert not _archived(vm)
    assert any("rm -rf" in c for c in vm.commands())
    pkb_flags(mongobench_keep_diagnostics=True)
    vm = FakeVm("c0")
    sweep_bm.Cleanup(_spec([], [vm]))
    assert _archived(vm)


def test_a_stage_that_raised_keeps_the_diagnostics_of_an_unfinished_run():
    undo_calls = []
    spec = types.SimpleNamespace(status_detail=None)
    with pytest.raises(errors.Benchmarks.RunError, match="^could not stop x: gone$"):
        stages.Cleanup(
            spec,
            "some_benchmark",
            lambda keep: undo_calls.append(keep) or ["could not stop x: gone"],
            incomplete=True,
        )
    assert undo_calls == [True]
    spec = types.SimpleNamespace(status_detail="Prepare raised")
    stages.Cleanup(spec, "some_benchmark", lambda keep: undo_calls.append(keep) or [])
    assert undo_calls == [True, True]
