"""The steady-state stop of a stress step (stress.steady) on recorded and simulated curves."""

from __future__ import annotations

import math
import pathlib
import random
import statistics

import pytest

from mongobench.stress import steady
from mongobench.ycsb import status

DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "ycsb"
RULE = steady.SteadyRule()  # 60 s at least, 6 intervals, 1 %


def curve(seed, *, level=100_000.0, sigma=0.005, ramp=0.3, tau=15.0, n=18, dt=10.0):
    """A step's 10 s interval rates: a cold page cache warming up (1 - ramp e^(-t/tau),
    averaged over each interval) times interval noise."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        a, b = k * dt, (k + 1) * dt
        warm = 1.0 - ramp * tau * (math.exp(-a / tau) - math.exp(-b / tau)) / dt
        out.append(level * warm * (1.0 + rng.gauss(0.0, sigma)))
    return out


def test_flat_curve_stops_at_the_minimum():
    got = steady.steady_at(curve(1, ramp=0.0, sigma=0.002), 10.0, RULE, 180.0)
    assert got is not None and got.seconds == 60.0 and got.intervals == 6
    assert got.rate == pytest.approx(100_000, rel=0.01)


def test_warm_up_is_waited_out():
    # A slow warm-up (tau 40 s) is still rising at 60 s: the rule waits until the rest of
    # the step at the window's rate, and at its trend, gives the full step within 1 %.
    rates = curve(2, tau=40.0, sigma=0.002)
    got = steady.steady_at(rates, 10.0, RULE, 180.0)
    assert got is not None and got.seconds > 60.0 and got.step_error <= RULE.tolerance
    _, _, drift = steady.window_stats(rates[got.intervals - RULE.window : got.intervals])
    assert drift > RULE.tolerance  # still rising: the old rule on the rate alone waited on
    measured = statistics.fmean(rates[: got.intervals])
    est = steady.full_step_throughput(measured, got.seconds, got.rate, 180.0)
    assert est == pytest.approx(statistics.fmean(rates), rel=RULE.tolerance)
    # the same window, were the step twice as long, leaves more to estimate: not yet steady
    longer = curve(2, tau=40.0, sigma=0.002, n=36)
    assert steady.steady_at(longer[: got.intervals], 10.0, RULE, 360.0) is None


def test_drift_and_noise_stop_only_where_little_is_left_to_estimate():
    # +1 % per interval, no noise: were the trend to go on, the window's rate would miss the
    # rest by more than 1 % of the step until 30 s are left
    rising = [100_000 * (1 + 0.01 * k) for k in range(18)]
    got = steady.steady_at(rising, 10.0, RULE, 180.0)
    assert got.seconds == 150.0 and got.drift > 0.04 and got.step_error <= RULE.tolerance
    # 5 % per interval: the window's CI (about 5 %) is within 1 % of the step only when a
    # sixth of it or less is left to estimate
    noisy = curve(3, ramp=0.0, sigma=0.05)
    got = steady.steady_at(noisy, 10.0, RULE, 180.0)
    assert got.seconds >= 120.0 and got.half_width * (180 - got.seconds) / 180 <= RULE.tolerance
    assert steady.steady_at(noisy[:11], 10.0, RULE, 180.0) is None


def test_recorded_standin_curve_is_not_steady():
    # Two YCSB processes on the stand-in of a loaded 2-core host, 1 s status lines: slow
    # start, then a rising, noisy rate. No window of it is steady within 2 %.
    texts = [(DATA / f"standin_status1s_run_p{i}.txt").read_text() for i in (0, 1)]
    ser = status.series(texts, interval_s=1)
    rates = steady.complete_rates(ser)
    assert len(rates) > 60
    assert (
        steady.steady_at(
            rates, 1.0, steady.SteadyRule(min_seconds=10, window=4, tolerance=0.02), 180.0
        )
        is None
    )
    # the rule looks at complete intervals only: the last one is still filling up
    assert rates == ser["ops_per_s"][:-1]


def test_full_step_throughput_matches_the_full_step_on_noisy_curves():
    # 200 warm-up curves, 1 % noise an interval: every step stops early, and the throughput
    # it reports is within 1 % of what its full 180 s measured (YCSB's own throughput) in
    # 95 % of them: the rule bounds the estimate of the seconds left at 95 % confidence.
    errors, stopped = [], []
    for seed in range(200):
        rates = curve(seed, sigma=0.01, ramp=0.3, tau=random.Random(seed).uniform(5, 30))
        got = steady.steady_at(rates, 10.0, RULE, 180.0)
        assert got is not None and got.step_error <= RULE.tolerance
        measured = statistics.fmean(rates[: got.intervals])
        est = steady.full_step_throughput(measured, got.seconds, got.rate, 180.0)
        errors.append(abs(est / statistics.fmean(rates) - 1))
        stopped.append(got.seconds)
    assert statistics.fmean(stopped) < 120  # the rule on the rate alone: 134 s, 1 in 5 full
    assert sum(e <= RULE.tolerance for e in errors) >= 0.95 * len(errors)
    assert max(errors) < 1.5 * RULE.tolerance, max(errors)
    # without the correction the warm-up of a shortened step would weigh 3 x as much
    assert steady.full_step_throughput(90.0, 180.0, 100.0, 180.0) == 90.0


def test_step_error_scales_with_the_share_left():
    # the CI, at 60 s, on the two thirds left; the trend, at 120 s: 1.5 % over the window's
    # 50 s from first to last interval, on from its middle to the rest's (30 + 30 s): 1.8 %,
    # on the third left
    assert steady.step_error(0.015, 0.0, 60.0, 6, 10.0, 180.0) == pytest.approx(0.01)
    assert steady.step_error(0.0, 0.015, 120.0, 6, 10.0, 180.0) == pytest.approx(
        0.015 / 50 * 60 / 3
    )
    assert steady.step_error(0.5, 0.5, 180.0, 6, 10.0, 180.0) == 0.0  # nothing left


def test_rule_checks_its_settings():
    with pytest.raises(ValueError, match="3 status intervals"):
        steady.SteadyRule(window=2)
    with pytest.raises(ValueError, match="tolerance"):
        steady.SteadyRule(tolerance=0)
    assert steady.describe("full", RULE) == {"step_stop": "full"}
    assert steady.describe("steady", RULE)["steady_window_intervals"] == 6


def status_lines(start, rates, lag=0.0, dt=10):
    """YCSB status lines of one process: a line every `dt` s with the cumulative count."""
    out, ops = [], 0
    for k in range(len(rates) + 1):
        t = start + lag + dt * k
        stamp = f"2026-11-27 08:{int(t // 60):02d}:{int(t % 60):02d}:{int(t * 1000 % 1000):03d}"
        out.append(
            f"{stamp} {dt * k} sec: {ops} operations; {rates[k - 1] if k else 0} current ops/sec;"
        )
        if k < len(rates):
            ops += int(rates[k] * dt)
    return out


def test_watch_stops_once_every_process_is_steady_and_applies_the_rest():
    a = status_lines(0, [40_000] + [50_000] * 11)  # a warm-up interval, then flat
    b = status_lines(0.5, [40_000] + [50_000] * 11)
    watch = steady.Watch(steady.SteadyRule(), processes=2, step_seconds=180.0)
    assert not watch({"p0": a[:8]})  # one process only: never steady
    assert not watch({"p0": a[:8], "p1": b[:3]})  # p1's lines lag: its intervals not closed
    assert not watch({"p0": a[:5], "p1": b[:5]})  # 40 s: before the 60 s minimum
    assert not watch({"p0": a[:8], "p1": b[:7]})  # p1 has not closed its 7th interval yet
    # 70 s closed by every process, the last 6 intervals flat: steady as soon as the last
    # process's line for it arrives (it waited for the next line before: 10 s later)
    assert watch({"p0": a[:8], "p1": b[:8]})
    assert watch.steady.seconds == 70.0 and watch.steady.rate == pytest.approx(100_000)

    from mongobench.stress.steps import StepResult

    ser = status.series(["\n".join(a[:9]), "\n".join(b[:9])])
    measured = StepResult(2, 97_500.0, 1.0, 1.5, series=ser)
    result, meta = watch.apply(measured)
    assert meta["steady_reached"] and meta["measured_throughput"] == 97_500.0
    assert meta["step_measured_seconds"] == pytest.approx(80.5, abs=0.6)
    # the seconds left to 180 at the steady rate
    secs = meta["step_measured_seconds"]
    assert result.throughput == pytest.approx(
        (97_500 * secs + 100_000 * (180 - secs)) / 180, rel=1e-3
    )
    # a step that ran its full time keeps YCSB's figure
    full = steady.Watch(steady.SteadyRule(), processes=2, step_seconds=60.0)
    kept, meta = full.apply(measured)
    assert kept.throughput == 97_500.0 and meta["steady_reached"] is False


def test_simulated_search_with_steady_steps_finds_the_same_kpis_sooner():
    from testbed import simulator

    server = simulator.SimulatedServer(simulator.peaked_capacity(6, 16))
    base = simulator.CostModel(seeding="copy", curves=True)
    full = simulator.simulate(server, search="bounded", cost=base)
    fast = simulator.simulate(
        server,
        search="bounded",
        cost=simulator.CostModel(seeding="copy", curves=True, step_stop="steady"),
    )
    assert (fast.peak, fast.sla_peak) == (full.peak, full.sla_peak) == (6, 3)
    for a, b in zip(full.kpis, fast.kpis, strict=True):
        assert b.value == pytest.approx(a.value, rel=0.01)
    assert full.measured_seconds == 180.0 * len(full.steps)
    assert fast.measured_seconds < 0.75 * full.measured_seconds
    assert fast.wall_seconds < full.wall_seconds


def test_watch_reads_the_status_interval_from_the_lines():
    # 2 s status lines (a shorter status.interval): 6 intervals are 12 s
    a = status_lines(0, [25_000] * 12, dt=2)
    watch = steady.Watch(steady.SteadyRule(min_seconds=10), processes=1, step_seconds=180.0)
    assert not watch({"p0": a[:6]})  # 5 intervals closed
    assert watch({"p0": a[:7]})  # 6 closed: steady at once
    assert watch.steady.seconds == 12.0 and watch.steady.rate == pytest.approx(25_000)


def test_proof_steps_and_floor_are_what_no_search_goes_below():
    from testbed import simulator

    # peak at 6 of 16: step 3 is the best within the SLA (3 ms); 3..8 prove both KPIs
    server = simulator.SimulatedServer(simulator.peaked_capacity(6, 16))
    assert simulator.proof_steps(server) == (3, 4, 5, 6, 7, 8)
    cost = simulator.CostModel(seeding="copy", curves=True, step_stop="steady")
    run = simulator.simulate(server, search="bounded", cost=cost)
    assert set(simulator.proof_steps(server)) <= set(run.steps)  # every search measures them
    floor = simulator.floor_seconds(server, cost)
    # from step 4 (a quarter of 16) the search measures just those; from step 2, one more
    assert floor == pytest.approx(run.wall_seconds - run.load_seconds)
    assert sorted(run.steps) == [3, 4, 5, 6, 7, 8]
    from_2 = simulator.simulate(server, search="bounded", cost=cost, first_step=2)
    assert floor < from_2.wall_seconds - from_2.load_seconds and 2 in from_2.steps
    full = simulator.floor_seconds(server, simulator.CostModel(curves=True))
    assert full == pytest.approx(6 * (180 + simulator.CostModel().step_overhead_seconds))


def test_steady_stop_measures_up_to_the_lag_after_the_window():
    from testbed import simulator

    cost = simulator.CostModel(curves=True, step_stop="steady", stop_lag_seconds=4.0)
    thr, seconds = simulator.measured_step(50_000.0, False, cost, "unsaturated", "steady")
    rates = simulator.step_curve(50_000.0, False, cost, "unsaturated")
    got = steady.steady_at(rates, 10.0, cost.steady_rule, cost.step_seconds)
    assert got.seconds in (60.0, 70.0)  # no warm-up below saturation
    assert seconds == pytest.approx(got.seconds + 4.0)  # YCSB ends 4 s after the window
    assert thr == pytest.approx(50_000.0, rel=0.01)


def test_watch_counts_intervals_on_the_cadence_when_the_first_line_is_late():
    # measured on the test bed: "0 sec" printed 0.59 s after YCSB's start, the later lines
    # on the start's 10 s cadence; the 60 s line closes 6 intervals
    a = status_lines(0, [100] * 8)
    a[0] = a[0].replace("08:00:00:000", "08:00:00:590")
    watch = steady.Watch(steady.SteadyRule(), processes=1, step_seconds=180.0, interval_s=10)
    assert not watch({"p0": a[:6]})
    assert watch({"p0": a[:7]})  # the 60 s line: steady at once (was at the 70 s line)
    assert watch.steady.seconds == 60.0
