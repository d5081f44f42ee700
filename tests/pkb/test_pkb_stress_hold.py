"""mongodb_stress's memory hold kept from step to step as parts (mongobench_pkb.stress over
mongobench.stress.holdparts), with real stress-ng processes on a VM whose commands run here:
a step starts and stops only the parts that differ, the others keep their processes, a part
that ends is seen at the step's end, and the search's end stops them all."""

import os
import shutil
import subprocess
import types

import pytest
from fakevm import NEEDS_PKB, LocalVm

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)
if not shutil.which("stress-ng"):
    pytest.skip("stress-ng is not installed (apt-get install stress-ng)", allow_module_level=True)
if os.geteuid() != 0 and not shutil.which("sudo"):
    pytest.skip("stress-ng --vm-locked needs root or sudo", allow_module_level=True)

from mongobench.core.units import GiB
from mongobench.remote.probes import NumaNode
from mongobench.stress import holdparts
from mongobench_pkb import stress as mongobench_stress
from mongobench_pkb import stress_ng as mongobench_stress_ng

MIB = 1024 * 1024
PER, BASE = 4 * MIB, 3 * MIB  # an instance's share, what no instance may have


@pytest.fixture
def vm(tmp_path, monkeypatch):
    monkeypatch.setattr(mongobench_stress_ng, "WorkDir", lambda vm: str(tmp_path / "sng"))
    local = LocalVm(str(tmp_path))
    mongobench_stress_ng.Check(local)
    yield local
    mongobench_stress_ng.StopAll(local)


def _state():
    sizing = types.SimpleNamespace(
        usable_memory=3 * PER + BASE, memory_per_instance=PER, max_instances=3
    )
    facts = {"vcpus": 2, "numa": (NumaNode(0, (0, 1), 1024),)}
    return types.SimpleNamespace(
        hold={}, steps_started=0, sizing=sizing, facts=facts, instance_nodes=[0, 0, 0]
    )


def _settings():
    return types.SimpleNamespace(
        hold_gb=None,
        stress_ng_per_numa=False,
        numactl_memory="none",
        stress_ng_workers=2,
        step_seconds=10,
        step_grace=10,
    )


def _step(vm, st, settings, n):
    """What Step does with the hold around its measurement (no load: nothing released)."""
    st.steps_started += 1
    want, kept = holdparts.parts(lambda m: mongobench_stress._HoldPlan(st, settings, m), n, 3)
    held = {k: p for k, (p, _) in st.hold.items()}
    stop = holdparts.changes(held, want)[0]
    mongobench_stress._StopHold(vm, st, stop)
    return kept, stop, mongobench_stress._AdjustHold(vm, st, settings, want)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return "State:\tZ" not in f.read()
    except OSError:
        return False


def _pids(st):
    return {k: h.pids[0] for k, (_, h) in st.hold.items()}


def test_steps_start_and_stop_only_the_parts_that_differ(vm):
    st, settings = _state(), _settings()
    assert _step(vm, st, settings, 1) == (True, [], 3)  # slots 1 and 2, and the base
    first = _pids(st)
    assert set(first) == {"slot1", "slot2", "base"}
    held = mongobench_stress_ng.Held(vm, mongobench_stress._HeldTogether(vm, st))
    assert held >= 2 * PER + BASE - 3 * MIB  # stress-ng rounds each part to KiB
    assert mongobench_stress._HoldShortfall(vm, st) is None

    assert _step(vm, st, settings, 3) == (True, ["slot1", "slot2"], 0)  # up: two parts stop
    assert _pids(st) == {"base": first["base"]} and _alive(first["base"])
    assert not _alive(first["slot1"]) and not _alive(first["slot2"])

    assert _step(vm, st, settings, 2) == (True, [], 1)  # down: slot 2's part again
    assert _pids(st)["base"] == first["base"] and _pids(st)["slot2"] != first["slot2"]
    assert mongobench_stress._HoldShortfall(vm, st) is None

    mongobench_stress.ReleaseHold(vm, st)
    assert st.hold == {}
    assert not any(_alive(p) for p in first.values())


def test_a_part_that_ended_is_seen_at_the_steps_end(vm):
    st, settings = _state(), _settings()
    _step(vm, st, settings, 2)
    _, hold = st.hold["slot2"]
    # the part's session (stress-ng and its workers) ends, as its own --timeout would end it
    subprocess.run(["sudo", "kill", "-KILL", "--", f"-{hold.pids[0]}"], check=True)
    for _ in range(50):
        if not _alive(hold.pids[0]):
            break
        subprocess.run(["sleep", "0.1"], check=True)
    why = mongobench_stress._HoldShortfall(vm, st)
    assert why and "a hold process ended" in why and f"{(PER + BASE) / GiB:.2f} GiB" in why
    mongobench_stress.ReleaseHold(vm, st)  # stopping a part that is gone is no error
    assert st.hold == {}


def test_a_fixed_hold_is_started_once(vm):
    st, settings = _state(), _settings()
    settings.hold_gb = 5 * MIB / GiB
    assert _step(vm, st, settings, 1)[2] == 1
    pid = _pids(st)["base"]
    for n in (3, 2, 1):
        assert _step(vm, st, settings, n) == (True, [], 0)
    assert _pids(st) == {"base": pid} and _alive(pid)
    mongobench_stress.ReleaseHold(vm, st)
    assert not _alive(pid)
