"""Rate steps (--rate-steps): the spec, the refusal of multi-operation and bulk variants
before anything runs, the step variants, and the report's latency-versus-throughput
table and plot from samples."""

from __future__ import annotations

import pytest

from mongobench.perftables import checks, ratesteps
from mongobench.perftables import experiments as exp_mod
from mongobench.reports import ratecurve, report


def test_the_spec_takes_auto_fractions_or_rates():
    auto = ratesteps.parse("auto")
    assert [s.fraction for s in auto] == list(ratesteps.DEFAULT_FRACTIONS)
    assert auto[0].fraction == 0.1 and auto[-1].fraction == 1.2
    steps = ratesteps.parse("1.2, 0.25,0.5")
    assert [s.name for s in steps] == ["0.25x", "0.5x", "1.2x"]  # rising
    assert steps[0].target(400.0) == 100.0
    rates = ratesteps.parse("400/s,100/s")
    assert [s.name for s in rates] == ["100/s", "400/s"] and rates[1].target(1.0) == 400.0
    assert ratesteps.parse(None) is None


@pytest.mark.parametrize(
    "spec, words",
    [
        ("", "give 'auto'"),
        ("0.5,,1", "give 'auto'"),
        ("fast", "neither a fraction"),
        ("0", "must be a number > 0"),
        ("-1/s", "must be a number > 0"),
        ("0.5,100/s", "cannot be mixed"),
        ("500", "give a rate as 500/s"),
        ("0.5,0.5", "given twice"),
    ],
)
def test_a_bad_spec_is_one_line_naming_the_flag(spec, words):
    with pytest.raises(exp_mod.ExperimentError, match=words) as e:
        ratesteps.parse(spec, "--mongodb_perftables_rate_steps")
    assert str(e.value).startswith("--mongodb_perftables_rate_steps") and "\n" not in str(e.value)


def _plans(names, variants=None):
    catalog = exp_mod.load()
    return exp_mod.plan(catalog, names, "smoke", variants)


def test_single_operation_variants_are_accepted():
    plans = _plans(["concurrency", "query_full", "updateapi"])
    checks.check_rate_steps(plans, ratesteps.parse("auto"))  # no error


@pytest.mark.parametrize(
    "name, words",
    [
        ("insert_batchsize", "inserts in batches of"),
        ("shell_mixed", "mixes inserts and queries"),
        ("kv_read_update", "mixes reads and updates"),
    ],
)
def test_multi_operation_and_bulk_variants_are_refused_up_front(name, words):
    with pytest.raises(exp_mod.ExperimentError, match=words) as e:
        checks.check_rate_steps(_plans([name]), ratesteps.parse("0.5"))
    assert "rate steps need a single-operation variant" in str(e.value)


def test_rate_steps_need_the_multiplexed_path_and_set_the_rate_themselves():
    plans = _plans(["concurrency"])
    with pytest.raises(exp_mod.ExperimentError, match="multiplexed client path only"):
        checks.check_rate_steps(plans, ratesteps.parse("0.5"), "pymongo")
    catalog = exp_mod.load()
    given = exp_mod.plan(catalog, ["concurrency"], "smoke", None, {"target_ops_per_s": 50})
    with pytest.raises(exp_mod.ExperimentError, match="sets target_ops_per_s"):
        checks.check_rate_steps(given, ratesteps.parse("0.5"))
    checks.check_rate_steps(plans, None, "pymongo")  # no steps: nothing to refuse


def test_a_step_is_the_variant_at_its_rate_under_its_own_label():
    [(_, [v, *_])] = _plans(["concurrency"])
    [step] = ratesteps.parse("0.5")
    sv = ratesteps.step_variant(v, step, 301.0)
    assert sv.settings["target_ops_per_s"] == 150.5 and "target_ops_per_s" not in v.settings
    assert sv.label == f"{v.label} @ 0.5x" and sv.params == v.params
    rec = ratesteps.step_record(1, [step], 301.0)
    assert rec == {"step": 1, "steps": 1, "closed_loop_ops_per_s": 301.0, "name": "0.5x",
                   "fraction": 0.5, "rate": None}  # fmt: skip
    assert ratesteps.closed_loop_rate({"status": "ok", "ops": {"u": 50}, "duration_s": 2}) == 25
    assert ratesteps.closed_loop_rate({"status": "failed"}) is None


def _samples():
    """What results.to_samples gives for a closed loop and two steps of one variant."""
    out = []
    for step, name, target, achieved, p50, p99, sp99 in (
        (0, None, None, 200.0, 10.0, 20.0, None),
        (1, "0.5x", 100.0, 99.0, 6.0, 9.0, 8.0),
        (2, "2x", 400.0, 190.0, 700.0, 1400.0, 25.0),
    ):
        md = {"experiment": "concurrency", "variant_index": 0, "rate_step": step,
              "rate_steps": 2, "variant": "2, False" + (f" @ {name}" if name else ""),
              "threads": 2, "index_update": False}  # fmt: skip
        if name:
            md.update(rate_step_name=name, target_ops_per_s=target)
        op = dict(md, op="update")
        out += [
            {
                "metric": "Operation Throughput",
                "value": achieved,
                "unit": "ops/sec",
                "metadata": md,
            },
            {"metric": "update p50 latency", "value": p50, "unit": "ms", "metadata": op},
            {"metric": "update p99 latency", "value": p99, "unit": "ms", "metadata": op},
        ]
        if sp99:
            out.append({"metric": "update service p99 latency", "value": sp99, "unit": "ms",
                        "metadata": op})  # fmt: skip
    return out


def test_the_report_shows_the_curve_and_keeps_steps_out_of_the_tables(tmp_path):
    curves = ratecurve.collect(_samples())
    [points] = curves["concurrency"].values()
    assert [p["name"] for p in points] == ["closed loop", "0.5x", "2x"]
    assert points[2]["achieved"] == 190.0 and points[2]["p99_ms"] == 1400.0
    assert points[2]["service_p99_ms"] == 25.0
    text = report.render(_samples(), plots_dir=str(tmp_path / "plots"))
    assert "### Latency versus throughput: 2, False" in text
    assert "| 2x | 400 | 190 | 700 | 1400 | n/a | 25.00 |" in text
    assert (tmp_path / "plots" / "concurrency-rate-0.png").stat().st_size > 1000
    assert "](plots/concurrency-rate-0.png)" in text
    # the experiment's own table has the closed-loop row only
    rows = report.group(_samples())["concurrency"]
    assert [k[2] for k in rows] == ["2, False"]


def test_an_experiment_run_only_as_rate_steps_gets_its_curve_and_table(tmp_path):
    """Rate-step samples without a closed-loop row (the experiment's own tables are empty)
    are still rendered: the experiment's heading, the curve's table and plot; and `report`
    takes such a file."""
    import json

    from mongobench import cli

    steps = [s for s in _samples() if s["metadata"]["rate_step"]]
    assert not report.group(steps)
    text = report.render(steps, plots_dir=str(tmp_path / "plots"))
    assert "No Performance Tables samples found." not in text
    assert "## Impact of hot documents and concurrency on write performance" in text
    assert "### Latency versus throughput: 2, False" in text
    assert "| 2x | 400 | 190 | 700 | 1400 | n/a | 25.00 |" in text
    assert (tmp_path / "plots" / "concurrency-rate-0.png").stat().st_size > 1000
    path = tmp_path / "steps.json"
    path.write_text("".join(json.dumps(s) + "\n" for s in steps))
    out = tmp_path / "report.md"
    assert cli.main(["report", "--results", str(path), "--out", str(out)]) == 0
    assert "### Latency versus throughput: 2, False" in out.read_text()
