"""A test-bed run says its plan, data volume and estimated time first, and the estimate
holds: after one run against the target recorded its rates, the next run's estimate is
within 2x of the time it took."""

import json
import subprocess
import sys
import time

import pytest

from mongobench.reports import results

pytestmark = pytest.mark.integration

EXPERIMENTS = "insert_idtype,delete,aggregation"  # inserts, operations, a timed phase


def _run(tmp_path, uri_file, name):
    out = tmp_path / f"{name}.json"
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "mongobench", "perftables", "run", "--uri-file", uri_file,
         "--scale", "smoke", "--experiments", EXPERIMENTS, "--os-path", "none",
         "--rates", "standin", "--out", str(out)],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stderr[-3000:]
    return p, json.loads(out.read_text()), took


def test_the_estimate_comes_first_and_is_within_2x_of_the_measured_time(tmp_path, uri_file):
    p, first, _ = _run(tmp_path, uri_file, "first")
    line = p.stderr.splitlines()[0]
    assert line.startswith("plan: 7 variant(s) of 3 experiment(s) (insert_idtype, delete,")
    assert "nominal data" in line and "estimated time" in line and "scale smoke" in line
    assert "rates: default (standin)" in line
    assert first["estimate"]["estimate_rates"] == "default (standin)"

    p, second, took = _run(tmp_path, uri_file, "second")
    estimated = second["estimate"]["estimated_seconds"]
    assert second["estimate"]["estimate_rates"].startswith("past runs")
    print(f"estimated {estimated:.1f} s, took {took:.1f} s")
    assert took / 2 <= estimated <= took * 2
    assert "took " in p.stderr and "(estimated " in p.stderr
    # the samples carry it beside the measured figures
    md = results.to_samples(second)[0]["metadata"]
    assert md["estimated_seconds"] == estimated and md["estimated_data_mb"] > 0
