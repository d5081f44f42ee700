"""Run options travel as one typed object, not parameter by parameter (issue 24: no function
takes more than 8 parameters for run options): the multiplexed driver's timed phase takes a
procs.Phase, in this process, in its workers and across client VMs."""

import dataclasses
import inspect

from mongobench.driver import procs
from mongobench.perftables import coordination


def _params(fn):
    return [p for p in inspect.signature(fn).parameters if p != "self"]


def test_the_timed_phase_takes_its_options_as_one_phase():
    for fn in (procs.run, procs._worker, coordination.Leader.timed):
        params = _params(fn)
        assert len(params) <= 8, (fn.__qualname__, params)
        assert "phase" in params, fn.__qualname__
        assert not {"total", "duration", "timeout", "interval"} & set(params), fn.__qualname__


def test_a_phase_is_frozen_with_the_old_defaults():
    phase = procs.Phase()
    assert (phase.total, phase.duration, phase.timeout, phase.interval) == (None, None, 30.0, None)
    assert dataclasses.is_dataclass(phase) and procs.Phase.__dataclass_params__.frozen
