"""A real mini dataset-size sweep (our YCSB client against the test-bed server), then the
comparison report over results files made from it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import socket

import pymongo
import pytest

from mongobench import cli
from mongobench.core import pricing
from mongobench.remote import javabuild
from mongobench.reports import compare, report
from mongobench.sweep import runner
from mongobench.sweep import samples as sweep_samples
from mongobench.sweep.request import SweepRun

pytestmark = pytest.mark.integration
PHASES = ["load", "read_only", "update_only", "read_update"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def write_uri(path: pathlib.Path, uri: str) -> str:
    path.write_text(uri + "\n")
    os.chmod(path, 0o600)
    return str(path)


@pytest.fixture(scope="module")
def swept(server_uri, tmp_path_factory):
    """One sweep at 0.1 and 0.2 MB through the CLI, data kept to check the rebuild."""
    javabuild.build()
    d = tmp_path_factory.mktemp("sweep")
    uri = server_uri.rstrip("/") + "/t_sweep"
    uri_file = write_uri(d / "uri", uri)
    out = d / "results.json"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        rc = cli.main(
            [
                "sweep",
                "run",
                "--uri-file",
                uri_file,
                "--sizes",
                "0.2,0.1",
                "--out",
                str(out),
                "--raw-dir",
                str(d / "raw"),
                "--keep-data",
                "--run-uri",
                "standin1",
                "--memory-mb",
                "0.15",  # 0.2 MB of records do not fit: flagged, still measured
            ]
        )
    return {"rc": rc, "out": out, "uri": uri, "dir": d, "printed": printed.getvalue()}


def test_the_printed_table_ends_with_its_provenance(swept):
    table, note = swept["printed"].rstrip().rsplit("\n\n", 1)
    rows = table.splitlines()
    assert all(r.startswith("|") for r in rows) and any(r.startswith("| 0.1 MB |") for r in rows)
    assert note.startswith("Target: ") and "stand-in: not a performance figure" in note


def test_every_size_and_phase_has_runtime_throughput_and_p99(swept):
    assert swept["rc"] == 0
    samples = report.load_pkb_results(str(swept["out"]))
    assert not sweep_samples.failed(samples)
    assert {s["run_uri"] for s in samples} == {"standin1"}
    tput = {
        (s["metadata"]["size_mb"], s["metadata"]["phase"]): s
        for s in samples
        if s["metric"] == "overall Throughput"
    }
    assert sorted(tput) == sorted((size, p) for size in (0.1, 0.2) for p in PHASES)
    for (size, _phase), s in tput.items():
        md = s["metadata"]
        assert s["value"] > 0 and s["unit"] == "ops/sec"
        assert md["records"] == round(size * 1000)
        assert md["operations"] == md["records"]  # operation count = record count
        assert md["exceeds_memory"] is (size == 0.2)
        assert md["memory_source"] == "--memory-mb"
    by_key = {
        (s["metadata"]["size_mb"], s["metadata"]["phase"], s["metric"]): s["value"] for s in samples
    }
    for size in (0.1, 0.2):
        assert by_key[(size, "load", "insert p99 latency")] > 0
        assert by_key[(size, "read_only", "read p95 latency")] > 0
        assert by_key[(size, "read_only", "read 95thPercentileLatency")] > 0
        assert by_key[(size, "update_only", "update AverageLatency")] > 0
        for op in ("read", "update"):
            assert by_key[(size, "read_update", f"{op} p99 latency")] > 0
            assert by_key[(size, "read_update", f"{op} 99thPercentileLatency")] > 0
        assert by_key[(size, "load", "overall RunTime")] > 0
    # One raw YCSB output per size and phase, kept for inspection.
    assert len(list((swept["dir"] / "raw").glob("*.txt"))) == 8


def test_each_size_rebuilds_the_collection(swept):
    client = pymongo.MongoClient(swept["uri"], serverSelectionTimeoutMS=5000)
    try:
        coll = client["t_sweep"]["usertable"]
        assert coll.count_documents({}) == 200  # the last size only: 0.1 MB was dropped
        doc = coll.find_one({})
        assert len([k for k in doc if k != "_id"]) == 10
    finally:
        client.close()


def test_unreachable_target_fails_every_phase_clearly(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri_file = write_uri(tmp_path / "uri", f"mongodb://127.0.0.1:{port}/x")
    request = SweepRun(sizes_mb=[0.05], memory_mb=1000)
    samples = runner.run_sweep(request, uri_file, connect_timeout_ms=500, log=lambda m: None)
    assert [s["metric"] for s in samples] == ["Phase Failed"] * 4
    assert "could not drop the collection" in samples[0]["metadata"]["error"]


def test_compare_two_machine_types_from_the_standin_results(swept, tmp_path):
    """The same results relabelled as two machine types (the second twice as fast)."""
    paths = []
    for machine, factor in (("n2-standard-2", 1.0), ("n2-standard-4", 2.0)):
        path = tmp_path / f"{machine}.json"
        with open(swept["out"]) as src, open(path, "w") as dst:
            for line in src:
                rec = json.loads(line)
                rec["run_uri"] = f"run-{machine}"
                rec["metadata"]["clients_machine_type"] = machine
                if rec["metric"] == "overall Throughput":
                    rec["value"] *= factor
                dst.write(json.dumps(rec) + "\n")
        paths.append(str(path))
    out = tmp_path / "report.md"
    text, plots = compare.compare(paths, str(out), prices={"n2-standard-4": 0.2})
    assert out.read_text() == text
    assert len(plots) == 5
    for p in plots:
        assert pathlib.Path(p).read_bytes()[:8] == PNG_SIGNATURE
    assert "| n2-standard-2 | n2-standard-2.json | run-n2-standard-2 | sweep |" in text
    rows = [ln for ln in text.split("### 50/50 read/update")[1].splitlines() if ln.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    assert header[:5] == [
        "Size",
        "n2-standard-2 Runtime (s)",
        "n2-standard-4 Runtime (s)",
        "n2-standard-2 Throughput (ops/s)",
        "n2-standard-4 Throughput (ops/s)",
    ]
    assert header[-2:] == ["n2-standard-2 ops/$", "n2-standard-4 ops/$"]
    cells = [c.strip() for c in rows[3].strip("|").split("|")]  # 0.2 MB
    assert cells[0] == "0.2 MB †"
    a, b = float(cells[3].rstrip(" †")), float(cells[4].rstrip(" †"))
    assert b == pytest.approx(2 * a, rel=0.02)
    assert float(cells[-1]) == pytest.approx(b * 3600 / 0.2, rel=0.02)
    assert float(cells[-2]) == pytest.approx(
        a * 3600 / pricing.INSTANCE_PRICES["n2-standard-2"], rel=0.02
    )
