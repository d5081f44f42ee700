"""`compare` on recorded results (issue 21 item 4): warnings when runs differ in settings
(--set overrides, scale, server version, client VMs and processes, target), unreplicated and
noisy differences marked, client p50/p99 latency beside throughput."""

from __future__ import annotations

import json
import pathlib

from mongobench.core import latency
from mongobench.reports import compare, results, runs


def _result(label: str, index: int, docs_per_s: float) -> dict:
    rec = latency.LatencyRecorder()
    for us in (1000, 2000, 3000, 40_000):
        rec.record("insert", us)
    return {
        "status": "ok", "experiment": "insert_docsize", "label": label, "variant_index": index,
        "settings": {"doc_size_kb": int(label), "threads": 10}, "duration_s": 1.0,
        "threads": 10, "ops": {"insert": int(docs_per_s)}, "docs": int(docs_per_s),
        "bytes": int(docs_per_s) * 1024, "errors": {}, "latency": rec.encode(),
        "server_before": {}, "server_after": {}, "start": 1_795_000_000.0,
        "server_info": {"storage_engine": "wiredTiger"},
    }  # fmt: skip


def _run(tput: dict[str, float], **run) -> dict:
    return {
        "tool": "mongobench perftables", "scale": "smoke", "topology": "Single",
        "server_version": "8.0.4", "overrides": {}, "client_vms": 1,
        "results": [_result(label, i, v) for i, (label, v) in enumerate(tput.items())],
        **run,
    }  # fmt: skip


def _write(path: pathlib.Path, doc: dict) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


def test_runs_differing_in_overrides_and_target_are_warned_about(tmp_path):
    a = _write(tmp_path / "a.json", _run({"4": 1000.0}))
    b = _write(tmp_path / "b.json", _run({"4": 1200.0}, overrides={"threads": 32}))
    standin = _run({"4": 900.0})
    standin["results"][0]["server_info"] = {"storage_engine": "none (stand-in, in memory)"}
    c = _write(tmp_path / "c.json", standin)
    found = runs.load_runs([a, b, c], {"a.json": "A", "b.json": "B", "c.json": "C"})
    warnings = runs.comparability_warnings(found)
    heads = [w.split(" (")[0] for w in warnings]
    assert heads == ["the runs differ in setting overrides", "the runs differ in target"]
    assert "A: overrides (none); B: overrides threads=32; C: overrides (none)" in warnings[0]
    assert "A: target_kind mongod" in warnings[1] and "C: target_kind stand-in" in warnings[1]
    twin = _write(tmp_path / "twin.json", _run({"4": 1010.0}))
    same = runs.load_runs([a, twin], {"a.json": "A", "twin.json": "T"})
    assert runs.comparability_warnings(same) == []


def test_results_without_recorded_overrides_are_not_warned_about():
    # results written before the engine recorded its overrides: nothing to compare
    md = results.metadata({"scale": "smoke"}, _result("4", 0, 10.0))
    assert "overrides" not in md
    assert results.metadata(_run({}), _result("4", 0, 10.0))["overrides"] == "(none)"
    run = _run({}, overrides={"write_concern": 1, "threads": 32})
    assert results.metadata(run, _result("4", 0, 10.0))["overrides"] == "threads=32,write_concern=1"


def _table(text: str, heading: str) -> list[list[str]]:
    block = text.split(heading, 1)[1].split("\n\n", 2)[1]
    return [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()]


def test_single_runs_are_marked_unreplicated_and_latency_sits_beside_throughput(tmp_path):
    a = _write(tmp_path / "a.json", _run({"4": 1000.0, "32": 500.0}))
    b = _write(tmp_path / "b.json", _run({"4": 1100.0, "32": 400.0}))
    out = tmp_path / "r.md"
    text, _ = compare.compare([a, b], str(out), labels={"a.json": "A", "b.json": "B"},
                              baseline="A")  # fmt: skip
    assert "single runs (no --repeats): A, B: their differences are unreplicated" in text
    rows = _table(text, "### Expected insert speed by document size")
    header = rows[0]
    assert header[1:4] == ["A (Speed (docs/s))", "A p50 (ms)", "A p99 (ms)"]
    assert header[4:7] == ["B (Speed (docs/s))", "B p50 (ms)", "B p99 (ms)"]
    four = next(r for r in rows[2:] if r[0] == "4")
    assert four[1] == "1000" and four[4] == "1100"
    p50, p99 = float(four[2]), float(four[3])
    assert 1.5 <= p50 <= 3.1 and p99 > 30  # the recorder's 1/2/3/40 ms, within its precision
    assert four[-1] == "+10.0% (unreplicated)"


def test_noisy_figures_are_flagged_in_compare(tmp_path):
    def repeated(path, means, intervals):
        # PKB results (JSON lines) of repeated variants: mean and 95 % interval
        lines = []
        for i, ((label, mean), (lo, hi)) in enumerate(zip(means.items(), intervals, strict=True)):
            md = {"experiment": "insert_docsize", "variant": label, "variant_index": i,
                  "repeats": 3, "ci95_low": lo, "ci95_high": hi, "scale": "smoke"}  # fmt: skip
            lines.append({"metric": "Document Throughput", "value": mean, "unit": "docs/sec",
                          "metadata": md, "run_uri": path.stem})  # fmt: skip
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        return str(path)

    a = repeated(tmp_path / "a.json", {"4": 9815.0, "32": 1000.0}, [(0.0, 19786.0), (990, 1010)])
    b = repeated(tmp_path / "b.json", {"4": 9000.0, "32": 1100.0}, [(8900, 9100), (1090, 1110)])
    text, _ = compare.compare([a, b], str(tmp_path / "r.md"),
                              labels={"a.json": "A", "b.json": "B"}, baseline="A")  # fmt: skip
    rows = {r[0]: r for r in _table(text, "### Expected insert speed by document size")[2:]}
    assert rows["4"][1] == "9815 ± 9893 (noisy)"
    assert rows["4"][2] == "9000 ± 100"
    assert rows["4"][-1] == "-8.3% (within noise)"  # the wide interval covers the other
    assert rows["32"][-1] == "+10.0%"  # both tight, no overlap: a real difference
    assert "single runs" not in text
