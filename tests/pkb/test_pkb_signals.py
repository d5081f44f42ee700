"""SIGTERM to ./pkb.py during Prepare or Run is handled like Ctrl-C (issue 22, bad 2): the
benchmark modules raise a KeyboardInterrupt in PKB's main thread, which PKB answers by
calling Cleanup (the benchmarks set always_call_cleanup). Without it PKB ended at once,
Cleanup skipped, the detached engine running on. The end-to-end run of it is in
tests/e2e/test_pkb_issue22_campaign.py."""

import os
import signal
import time

import pytest
from fakevm import NEEDS_PKB

pytest.importorskip("perfkitbenchmarker.pkb", reason=NEEDS_PKB)

from perfkitbenchmarker import errors
from perfkitbenchmarker.linux_benchmarks import (
    mongodb_perftables_benchmark as perftables,
)
from perfkitbenchmarker.linux_benchmarks import (
    mongodb_stress_benchmark as stress,
)
from perfkitbenchmarker.linux_benchmarks import (
    mongodb_ycsb_sweep_benchmark as sweep,
)

from mongobench.core import interrupt
from mongobench_pkb import stages


class _SigtermOnUse:
    """A benchmark spec whose first read sends SIGTERM to this process (as `kill PKB` would
    mid-stage) and then waits, as a stage waits for its VM."""

    def __getattr__(self, name):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        raise AssertionError("SIGTERM did not interrupt the stage")


@pytest.mark.parametrize("module", [perftables, stress, sweep], ids=lambda m: m.BENCHMARK_NAME)
@pytest.mark.parametrize("stage", ["Prepare", "Run"])
def test_sigterm_in_a_stage_is_a_keyboard_interrupt_and_cleanup_is_asked_for(module, stage):
    before = signal.getsignal(signal.SIGTERM)
    spec = _SigtermOnUse()
    with pytest.raises(KeyboardInterrupt) as e:
        getattr(module, stage)(spec)
    assert isinstance(e.value, interrupt.Interrupted) and e.value.signum == signal.SIGTERM
    if stage == "Prepare":
        assert spec.__dict__["always_call_cleanup"] is True  # PKB calls Cleanup on it
    assert signal.getsignal(signal.SIGTERM) is before  # Cleanup: SIGTERM as before


class _Config:
    vm_groups = {"clients": type("G", (), {"vm_count": 1})()}


def test_an_empty_sweep_phase_list_names_the_flag(pkb_flags, tmp_path):
    uri = tmp_path / "target.uri"
    uri.write_text("mongodb://db.example:27017/\n")
    pkb_flags(mongodb_ycsb_sweep_uri_file=str(uri), mongodb_ycsb_sweep_phases="")
    with pytest.raises(errors.Config.InvalidValue) as e:
        sweep.CheckPrerequisites(_Config())
    assert str(e.value) == (
        "--mongodb_ycsb_sweep_phases: no phase given (an empty list); leave it out for all"
    )


def _dies(signum, frame):
    raise SystemExit(f"PKB ended by signal {signum}")  # what SIGTERM's default does to PKB


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_cleanup_lets_every_step_run_then_stops_pkb(signum):
    # A second SIGTERM during Cleanup ended PKB half-way (the engine it had not stopped
    # yet kept running, its work directory stayed); a Ctrl-C skipped the rest of Cleanup
    # (PKB's second call found the once-guard set).
    before = signal.signal(signal.SIGTERM, _dies)
    try:
        done = []

        def stop_engine():
            os.kill(os.getpid(), signum)
            time.sleep(0.2)
            done.append("stop the engine")

        steps = [("stop the engine", stop_engine), ("remove it", lambda: done.append("remove"))]
        spec = type("Spec", (), {"status_detail": "SIGTERM"})()
        with pytest.raises(KeyboardInterrupt) as e:
            stages.Cleanup(spec, "mongodb_perftables", lambda keep: stages.Undo(steps))
        assert done == ["stop the engine", "remove"]
        assert isinstance(e.value, interrupt.Interrupted) and e.value.signum == signum
        assert signal.getsignal(signal.SIGTERM) is _dies
    finally:
        signal.signal(signal.SIGTERM, before)
