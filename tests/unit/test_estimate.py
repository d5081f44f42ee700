"""Estimates before running (perftables.estimate, sweep.estimate) and the CLI around them:
the plan line, the confirmation above an hour, list, --version, defaults and examples."""

import argparse
import json
import os
import subprocess
import sys

import pytest

from mongobench import cli
from mongobench.measure import rates as rates_store
from mongobench.perftables import estimate as est
from mongobench.perftables import experiments as exp_mod
from mongobench.sweep import estimate as sweep_est
from mongobench.sweep import plan as sweep_plan

CATALOG = exp_mod.load()
RATES = est.Rates(insert_mb_s=10.0, load_mb_s=20.0, ops_s=1000.0, overhead_s=2.0)


def _planned(names, scale="full", **kw):
    return exp_mod.plan(CATALOG, names, scale, **kw)


def test_insert_variants_cost_their_documents_at_the_insert_rate():
    e = est.estimate(_planned(["insert_docsize"], variants=["1"]), RATES)
    (v,) = e.variants
    assert v.labels == {"doc_size_kb": 1}
    assert v.volume_bytes == 25_165_824 * 1024  # 24 GiB, no preload
    assert v.seconds == pytest.approx(2.0 + 25_165_824 * 1024 / 1e6 / 10.0)


def test_duration_bound_variants_cost_their_duration_and_a_reused_preload_once():
    e = est.estimate(_planned(["query_fetch"]), RATES)
    first, second = e.variants[:2]
    preload = 5_000_000 * 4 * 1024
    assert first.volume_bytes == preload and second.volume_bytes == 0  # kept by the marker
    assert second.seconds == pytest.approx(2.0 + 300 + 300)  # duration and warm-up
    assert first.seconds == pytest.approx(second.seconds + preload / 1e6 / 20.0)


def test_inserting_workloads_load_their_preload_again():
    e = est.estimate(_planned(["insert_nindexes"]), RATES)
    assert len({v.volume_bytes for v in e.variants}) == 1  # every variant preloads 3M again


def test_repeats_multiply_and_metadata_says_so():
    one = est.estimate(_planned(["delete"]), RATES)
    three = est.estimate(_planned(["delete"]), RATES, repeats=3)
    assert three.seconds == pytest.approx(3 * one.seconds)
    md = three.metadata()
    assert set(md) == {"estimated_seconds", "estimated_data_mb", "estimate_rates"}
    assert "2 variant(s) x 3 repeats of 1 experiment(s) (delete)" in three.summary()


def test_full_scale_is_flagged_as_hours():
    e = est.estimate(_planned(None), est.rates_for(None))
    assert len(e.variants) == 92
    assert e.seconds > est.CONFIRM_ABOVE_S and e.volume_bytes > 500e9


def test_past_runs_replace_the_default_rates_for_their_target_only(tmp_path, monkeypatch):
    monkeypatch.setenv(rates_store.RATES_ENV, str(tmp_path / "rates.json"))
    uri = "mongodb://alice:s3cret@db.example:27017/"
    assert est.rates_for(uri).source == "default (mongod)"
    results = [
        {"status": "ok", "experiment": "insert_docsize", "planned": {"docs": 10},
         "duration_s": 2.0, "bytes": 8_000_000, "prepare_s": 0.5,
         "settings": {"preload_docs": 0}, "prepared": {}, "ops": {"insert": 4}},
        {"status": "ok", "experiment": "delete", "planned": {}, "duration_s": 1.0,
         "bytes": 0, "prepare_s": 1.5, "ops": {"delete": 500},
         "settings": {"preload_docs": 1000, "doc_size_kb": 1}, "prepared": {}},
    ]  # fmt: skip
    est.record(uri, results, wall_s=9.0)
    got = est.rates_for(uri)
    assert got.source.startswith("past runs")
    assert got.insert_mb_s == pytest.approx(4.0)
    assert got.ops_s == pytest.approx(500.0)
    assert got.load_mb_s == pytest.approx(1000 * 1024 / 1e6 / 1.5)
    assert got.overhead_s == pytest.approx((9.0 - 5.0) / 2)
    assert "s3cret" not in (tmp_path / "rates.json").read_text()  # keyed by the redacted URI
    assert est.rates_for("mongodb://other:27017/").source == "default (mongod)"


def test_cost_from_the_price_tables_names_what_has_no_price():
    line = est.cost(3600, [("m5.large", 2), ("x9.huge", 1)], "M30")
    from mongobench.core import pricing

    usd = 2 * pricing.INSTANCE_PRICES["m5.large"] + pricing.price_per_hour("M30")
    assert line.startswith(f"estimated cost ${usd:.2f}")
    assert "without x9.huge (no price known)" in line
    assert est.cost(3600) == ""  # static hosts, a URI: no bill to estimate


def test_sweep_estimate_counts_load_and_run_phases(tmp_path, monkeypatch):
    monkeypatch.setenv(rates_store.RATES_ENV, str(tmp_path / "rates.json"))
    steps = sweep_plan.plan([1, 2])
    phases = sweep_plan.parse_phases("all")
    rates = sweep_est.SweepRates(ops_s=100.0, phase_overhead_s=1.0)
    e = sweep_est.estimate(steps, phases, rates)
    assert e.seconds == pytest.approx(2 * 4 * 1.0 + 3000 / 100 * 4)  # 2 sizes x (load + 3 runs)
    assert e.volume_bytes == pytest.approx(3_000_000)
    uri = "mongodb://h:1/"
    md = {"operations": 1000}
    samples = [{"metric": "overall RunTime", "value": 2000.0, "metadata": md}] * 4
    sweep_est.record(uri, samples, wall_s=12.0)
    got = sweep_est.rates_for(uri)
    assert (got.ops_s, got.phase_overhead_s) == (500.0, 1.0)


# ------------------------------------------------------------------------------------ CLI


def _cli(*argv, stdin=subprocess.DEVNULL):
    return subprocess.run(
        [sys.executable, "-m", "mongobench", *argv],
        capture_output=True, text=True, timeout=120, stdin=stdin,
    )  # fmt: skip


def test_a_run_over_an_hour_is_refused_without_a_terminal_or_yes(tmp_path):
    uri = tmp_path / "uri"
    uri.write_text("mongodb://127.0.0.1:9/\n")
    p = _cli("perftables", "run", "--uri-file", str(uri), "--scale", "full",
             "--out", str(tmp_path / "r.json"), "--os-path", "none")  # fmt: skip
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert lines[0].startswith("plan: 92 variant(s) of 22 experiment(s)")
    assert "estimated time" in lines[0] and f"results to {tmp_path / 'r.json'}" in lines[0]
    assert "over an hour" in lines[-1] and "pass --yes" in lines[-1]
    assert not (tmp_path / "r.json").exists()  # nothing ran


def test_a_sweep_over_an_hour_is_refused_without_yes(tmp_path):
    uri = tmp_path / "uri"
    uri.write_text("mongodb://127.0.0.1:9/\n")
    p = _cli("sweep", "run", "--uri-file", str(uri))
    assert p.returncode != 0
    assert p.stderr.startswith("sweep: plan: 7 size(s)")
    assert "pass --yes" in p.stderr.strip().splitlines()[-1]


def test_list_prints_one_variant_a_line_with_labels_volume_and_time():
    p = _cli("perftables", "list")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "insert_docsize: Expected insert speed by document size [insert]"
    assert lines[1].split() == ["doc_size_kb=1", "25.8", "GB", lines[1].split()[-1]]
    assert lines[1].split()[-1].startswith("~")
    conc = [ln for ln in lines if ln.strip().startswith("threads=10, index_update=")]
    assert len(conc) == 2  # labels named, never joined into "10, False, 20, ..."
    assert lines[-1].startswith("total at scale full: 92 variant(s)")
    variant_lines = [ln for ln in lines if ln.startswith("  ")]
    assert len(variant_lines) == 92


def test_list_json_keeps_everything_and_adds_the_estimate():
    p = _cli("perftables", "list", "--format", "json", "--scale", "smoke")
    doc = json.loads(p.stdout)
    v = doc["experiments"][0]["variants"][0]
    assert {"settings", "key_example", "nominal_data_bytes", "estimated_seconds"} <= set(v) | set(
        v["settings"]
    )
    assert doc["estimate"]["estimated_seconds"] > 0
    assert "deviations" in doc["experiments"][0]


def test_version():
    p = _cli("--version")
    assert p.returncode == 0
    assert p.stdout.startswith("mongobench 0.") and p.stdout.count("\n") == 1


def _parsers(parser, path=("mongobench",)):
    yield path, parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _parsers(sub, (*path, name))


def test_every_command_has_examples_and_shows_defaults():
    for path, p in _parsers(cli.build_parser()):
        assert p.epilog and p.epilog.startswith("examples:\n  "), path
        assert " ".join(path[1:]) in p.epilog or len(path) == 1, path
    text = _cli("perftables", "list", "--help").stdout
    assert "(default: full)" in " ".join(text.split())
    text = " ".join(_cli("perftables", "run", "--help").stdout.split())
    assert "raw results (JSON) (default: perftables-results.json)" in text
    assert "(default: None)" not in text


def test_the_pkb_command_line_passes_yes():
    from mongobench.remote import shipping

    cmd = shipping.perftables_command("/w", "/w/u", "/w/run.json")
    assert " --yes" in cmd


def test_the_demo_says_first_what_it_runs_against_and_where_it_writes():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p = subprocess.Popen(
        [os.path.join(root, "scripts", "demo")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "PATH": "/usr/bin:/bin"},  # no mongod: the stand-in
    )  # fmt: skip
    try:
        first = p.stdout.readline()
    finally:
        os.killpg(p.pid, 9)
        p.wait()
    assert first.startswith("demo: experiments all at smoke scale against the stand-in")
    assert "not MongoDB" in first and "writes to /" in first
