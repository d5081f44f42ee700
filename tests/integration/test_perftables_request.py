"""`perftables run --request run.json` against the stand-in: the request file alone gives
every run option (what PKB's benchmark ships beside target.uri on the client VM)."""

import json
import subprocess
import sys

import pytest

from mongobench.perftables.request import PerftablesRun
from mongobench.perftables.result import VariantResult

pytestmark = pytest.mark.integration


def test_run_from_a_request_file(uri_file, tmp_path):
    out, samples = tmp_path / "r.json", tmp_path / "s.json"
    request = PerftablesRun(
        experiments=["insert_docsize"],
        variants=["1", "4"],
        scale="smoke",
        database="mb_request",
        overrides={"threads": 2},
        out=str(out),
        samples=str(samples),
        os_path="none",
        interval_s=0,
        processes=1,
    )
    path = tmp_path / "run.json"
    request.write(str(path))
    p = subprocess.run(
        [sys.executable, "-m", "mongobench", "perftables", "run", "--uri-file", uri_file,
         "--request", str(path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    run = json.loads(out.read_text())
    assert run["database"] == "mb_request" and run["interval_s"] is None
    assert run["overrides"] == {"threads": 2}
    assert [(r["experiment"], r["label"], r["status"]) for r in run["results"]] == [
        ("insert_docsize", "1", "ok"),
        ("insert_docsize", "4", "ok"),
    ]
    assert all(r["threads"] == 2 and r["client_processes"] == 1 for r in run["results"])
    assert all(r["series"] is None for r in run["results"])
    # every key of a written result is a VariantResult field, and nothing else is written
    assert all(VariantResult.from_dict(r).to_dict() == r for r in run["results"])
    metrics = {s["metric"] for s in json.loads(samples.read_text())}
    assert "Document Throughput" in metrics
