"""The sweep's and the stress steps' YCSB time series (issue 21, item 6): the status interval
as an option (property files, series, CLI), and `report` drawing throughput over time for
each long sweep phase and stress step, from recorded YCSB outputs of our binding against the
stand-in (status.interval=1)."""

from __future__ import annotations

import json
import pathlib

import pytest

from mongobench import cli
from mongobench.core.samples import is_time_series
from mongobench.stress import report as stress_report
from mongobench.stress import search, steps
from mongobench.stress.settings import StressSettings
from mongobench.sweep import plan
from mongobench.sweep import properties as sweep_properties
from mongobench.sweep import samples as sweep_samples
from mongobench.sweep.request import SweepRun
from mongobench.ycsb import status

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "ycsb"
READ_UPDATE = plan.PHASES_BY_NAME["read_update"]


def _recorded_run() -> list[str]:
    return [(DATA / f"standin_status1s_run_p{i}.txt").read_text() for i in (0, 1)]


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _sweep_samples(interval_s: int = 1) -> list[dict]:
    steps_ = plan.plan([1, 2])
    out = []
    for step in steps_:
        for phase in (plan.PHASES_BY_NAME["read_only"], READ_UPDATE):
            out += sweep_samples.measure_processes(
                step, phase, _recorded_run(), {"threads": 1}, status_interval_s=interval_s
            )
    return out


def _write_lines(path: pathlib.Path, samples: list[dict], run_uri: str = "r1") -> str:
    path.write_text(
        "".join(
            json.dumps({**s, "run_uri": run_uri, "timestamp": 1795769170.0}) + "\n" for s in samples
        )  # fmt: skip
    )
    return str(path)


# ----------------------------------------------------------------------------- the interval


def test_the_sweep_status_interval_reaches_ycsb_and_the_series():
    step = plan.plan([1])[0]
    for phase in plan.PHASES:
        default = sweep_properties.phase_properties(step, phase, SweepRun(), "/u")
        assert _props(default)["status.interval"] == "10"
        given = sweep_properties.phase_properties(step, phase, SweepRun(status_interval_s=3), "/u")
        assert _props(given)["status.interval"] == "3"
    [props] = sweep_properties.process_properties(
        step, READ_UPDATE, SweepRun(status_interval_s=2), ["/u"]
    )
    assert _props(props)["status.interval"] == "2"
    out = sweep_samples.measure_processes(step, READ_UPDATE, _recorded_run(), status_interval_s=1)
    [tput] = [s for s in out if s["metric"] == "overall Throughput time series"]
    assert tput["metadata"]["interval"] == 1 and tput["metadata"]["interval_s"] == 1
    assert len(tput["metadata"]["values"]) == 84  # a 1 s series of the 84 s recorded run
    with pytest.raises(ValueError, match="status_interval_s must be a whole number >= 1"):
        sweep_properties.phase_properties(step, READ_UPDATE, SweepRun(status_interval_s=0), "/u")


def test_the_stress_status_interval_reaches_ycsb_and_the_series():
    sp = steps.plan_step(2, loaded=[0, 1], clients=1, records=100, hosts=["h"])
    props = steps.run_properties(sp.run[0], StressSettings(status_interval_s=5), directory="/w")
    assert _props(props)["status.interval"] == "5"
    default = steps.run_properties(sp.run[0], StressSettings(), directory="/w")
    assert _props(default)["status.interval"] == str(status.STATUS_INTERVAL_S)
    outs = [steps.ProcessOutput(instance=i, client=0, returncode=0, output=t)
            for i, t in enumerate(_recorded_run())]  # fmt: skip
    r = steps.step_result(2, outs, status_interval_s=1)
    assert r.series["interval_s"] == 1.0 and len(r.series["ops"]) >= 10
    assert sum(r.series["ops"]) == r.operations


@pytest.mark.parametrize("value", ["0", "-2", "1.5", "x"])
def test_the_cli_refuses_a_bad_status_interval_in_one_line(value, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["sweep", "run", "--uri-file", "/nonexistent", "--status-interval-s", value])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--status-interval-s" in err and "must be a whole number >= 1" in err


# ----------------------------------------------------------------------------- report


def test_report_draws_throughput_over_time_for_each_long_sweep_phase(tmp_path):
    results = _write_lines(tmp_path / "sweep.json", _sweep_samples())
    (tmp_path / "r").mkdir()
    out = tmp_path / "r" / "report.md"
    assert cli.main(["report", "--results", results, "--out", str(out)]) == 0
    text = out.read_text()
    plots = tmp_path / "r" / "plots"
    for name, title in (("read_only", "Read-only"), ("read_update", "50/50 read/update")):
        png = plots / f"sweep_{name}_over_time.png"
        assert png.stat().st_size > 1000
        assert f"![{title}: throughput over time](plots/{png.name})" in text
    assert not (plots / "sweep_load_over_time.png").exists()  # no load phase was run


def test_a_sweep_of_short_phases_gets_no_plot_over_time(tmp_path):
    results = _write_lines(tmp_path / "sweep.json", _sweep_samples(interval_s=30))
    out = tmp_path / "report.md"
    assert cli.main(["report", "--results", results, "--out", str(out)]) == 0
    assert "over time" not in out.read_text()


def _stress_samples() -> list[dict]:
    outs = [steps.ProcessOutput(instance=i, client=0, returncode=0, output=t)
            for i, t in enumerate(_recorded_run())]  # fmt: skip
    history = [steps.step_result(2, outs, status_interval_s=1)] * 2
    found = search.Search(history=history, infos=[{}, {}])
    return stress_report.search_samples(
        found, metadata={"search": "linear", "records_per_instance": 1500},
        search_seconds=30.0, records_loaded=3000, sla_ms=1000.0, mongodb_version="7.0",
        max_instances=2,
    )  # fmt: skip


def test_report_renders_a_stress_run_with_its_steps_over_time(tmp_path):
    samples = _stress_samples()
    assert any(is_time_series(s) for s in samples)
    results = _write_lines(tmp_path / "stress.json", samples)
    out = tmp_path / "report.md"
    assert cli.main(["report", "--results", results, "--out", str(out)]) == 0
    text = out.read_text()
    assert "## Stress KPIs (mongodb_stress)" in text
    assert "| Maximum Throughput (ops/s) |" in text
    png = tmp_path / "plots" / "stress_steps_over_time.png"
    assert png.stat().st_size > 1000
    assert f"(plots/{png.name})" in text
    # on stdout without plots: the tables alone
    assert cli.main(["report", "--results", results]) == 0


def test_the_lines_of_sweep_phases_and_stress_steps(tmp_path):
    from mongobench.reports import timeseries

    sweep = timeseries.long_phases(
        _sweep_samples(), timeseries.YCSB_THROUGHPUT_SERIES, "phase", timeseries.size_label
    )
    assert sorted(sweep) == ["read_only", "read_update"]
    assert [line.label for line in sweep["read_update"]] == ["1 MB", "2 MB"]
    assert sweep["read_update"][0].interval_s == 1.0
    stress = timeseries.long_phases(
        _stress_samples(), timeseries.YCSB_THROUGHPUT_SERIES, None, timeseries.step_label
    )
    assert [line.label for line in stress[""]] == ["step 1 (2 instances)", "step 2 (2 instances)"]
