import json

import pytest

from mongobench.core import latency
from mongobench.perftables import experiments as exp_mod
from mongobench.reports import report, results


def raw_result(label="4", docs=1000, duration=2.0, errors=None, server=True):
    rec = latency.LatencyRecorder()
    for us in (1000, 2000, 3000, 4000):
        rec.record("insert", us)
    before = {
        "cache_pages_read": 10,
        "cache_bytes_written": 0,
        "wal_bytes": 0,
        "write_conflicts": 0,
        "network_bytes_out": 0,
    }
    after = {
        "cache_pages_read": 30,
        "cache_bytes_written": 2048 * 10,
        "wal_bytes": 1024 * 6,
        "write_conflicts": 4,
        "network_bytes_out": 2**20,
    }
    if not server:
        before = after = dict.fromkeys(before)
    return {
        "status": "ok",
        "experiment": "insert_docsize",
        "label": label,
        "variant_index": 1,
        "params": {"doc_size_kb": int(label)},
        "settings": {"doc_size_kb": int(label), "threads": 10, "total_docs": docs},
        "duration_s": duration,
        "threads": 10,
        "ops": {"insert": 4},
        "docs": docs,
        "bytes": docs * 4096,
        "errors": errors or {},
        "latency": rec.encode(),
        "server_before": before,
        "server_after": after,
        "os_client": {"cpu_pct": 50.0},
        "prepared": {"preload_docs": 0},
    }


RUN = {"scale": "smoke", "scale_factor": 1.2e-4, "server_version": "7.0.1", "topology": "Single"}


def test_figures_follow_the_seed_definitions():
    f = results.figures(raw_result())
    assert f["docs_per_s"] == 500
    assert f["data_mb"] == pytest.approx(1000 * 4096 / 2**20)
    # The seed's units: KB / ms for Speed (MB/s), bytes / ms for the KB/s figures.
    assert f["mb_per_s"] == pytest.approx(1000 * 4 / 2 / 1000)
    assert f["cache_read_pages_s"] == 10
    assert f["cache_write_kb_s"] == pytest.approx(2048 * 10 / 2 / 1000)
    assert f["wal_kb_s"] == pytest.approx(1024 * 6 / 2 / 1000)
    assert f["write_conflicts"] == 4
    # No opLatencies in these counters: the server-side figure is missing, not the client's.
    assert f["avg_latency_ms"] is None
    assert f["client_avg_latency_ms"] == pytest.approx(2.5, rel=0.01)
    assert f["cpu_pct"] is None  # no server VM: missing, not the client's CPU
    assert f["client_cpu_pct"] == 50.0


def test_seed_units_61248_docs_of_1kb_are_61_25_mb_per_s():
    # Seed 001: 24,576 MB of 1 KB documents at 61,248 docs/s shows as 61.25 MB/s (KB / ms).
    docs, duration = 61248 * 411, 411.0
    res = dict(raw_result(docs=docs, duration=duration), bytes=docs * 1024)
    f = results.figures(res)
    assert f["docs_per_s"] == 61248
    assert f["data_mb"] == pytest.approx(docs / 1024)  # Data Loaded: MB of 1024 KB
    assert f"{f['mb_per_s']:.2f}" == "61.25"
    assert f["mb_per_s"] / (docs * 1024 / 2**20 / duration) == pytest.approx(1.024)
    # Write from Cache / Write to WAL: bytes / ms, "KB" of 1000 bytes.
    res["server_after"] = dict(res["server_after"], cache_bytes_written=61_248_000 * 411)
    res["server_after"]["wal_bytes"] = 2_000_000 * 411
    f = results.figures(res)
    assert f["cache_write_kb_s"] == pytest.approx(61248)
    assert f["wal_kb_s"] == pytest.approx(2000)


def with_op_latencies(res, writes=(0, 0, 1000, 2_500_000), reads=(0, 0, 0, 0)):
    """opLatencies counters before/after: (ops, µs) before then after, per kind."""
    ops0, lat0, ops1, lat1 = writes
    r0, rl0, r1, rl1 = reads
    before = dict(res["server_before"], oplat_writes_ops=ops0, oplat_writes_latency=lat0)
    before.update(oplat_reads_ops=r0, oplat_reads_latency=rl0)
    after = dict(res["server_after"], oplat_writes_ops=ops1, oplat_writes_latency=lat1)
    after.update(oplat_reads_ops=r1, oplat_reads_latency=rl1)
    before.update(oplat_commands_ops=5, oplat_commands_latency=100)
    after.update(oplat_commands_ops=9, oplat_commands_latency=900)
    return dict(res, server_before=before, server_after=after)


def test_average_op_latency_is_server_side_and_client_keeps_its_own_name():
    res = with_op_latencies(raw_result(), writes=(10, 7_000, 1010, 2_507_000), reads=(3, 30, 5, 90))
    f = results.figures(res)
    assert f["avg_latency_ms"] == pytest.approx(2.5)  # 2.5 s over 1,000 writes
    assert f["server_writes_latency_ms"] == pytest.approx(2.5)
    assert f["server_reads_latency_ms"] == pytest.approx(0.03)
    assert f["server_commands_latency_ms"] == pytest.approx(0.2)
    assert f["client_avg_latency_ms"] == pytest.approx(2.5, rel=0.01)
    samples = results.to_samples(dict(RUN, results=[res]))
    by_metric = {s["metric"]: s for s in samples}
    avg = by_metric["Average Op Latency"]
    assert avg["metadata"]["latency_source"] == "server"
    assert avg["metadata"]["latency_kind"] == "writes"
    client = by_metric["Client Average Op Latency"]
    assert client["metadata"]["latency_source"] == "client"
    assert by_metric["insert AverageLatency"]["metadata"]["latency_source"] == "client"
    assert "latency_source" not in by_metric["Document Throughput"]["metadata"]

    # A read workload is read against the reads class.
    query = dict(res, ops={"find": 2})
    assert results.figures(query)["avg_latency_ms"] == pytest.approx(0.03)
    # No opLatencies (a server that lacks them): n/a, never the client's mean.
    bare = raw_result()
    assert results.figures(bare)["avg_latency_ms"] is None
    md = results.to_samples(dict(RUN, results=[bare]))[0]["metadata"]
    assert "avg_latency_ms" in md["missing_metrics"].split(",")
    # A restart between the readings (counters went back): unknowable, not negative.
    restarted = with_op_latencies(raw_result(), writes=(5000, 9_000_000, 10, 20_000))
    assert results.figures(restarted)["avg_latency_ms"] is None


def test_samples_carry_metadata_and_omit_missing_figures():
    run = dict(
        RUN,
        results=[
            raw_result(server=False, errors={"insert: AutoReconnect": 2}),
            {"status": "failed", "experiment": "insert_docsize", "label": "1", "error": "x"},
        ],
    )
    samples = results.to_samples(run, {"cloud": "Static"})
    names = {s["metric"] for s in samples}
    assert "Document Throughput" in names
    # per-operation latency under PKB's ycsb_stats scheme, all in ms
    op_latency = {s["metric"]: s for s in samples if s["metadata"].get("op") == "insert"}
    assert set(op_latency) == {
        "insert AverageLatency",
        "insert p50 latency",
        "insert p95 latency",
        "insert p99 latency",
        "insert p99.9 latency",
        "insert MaxLatency",
    }
    assert {s["unit"] for s in op_latency.values()} == {"ms"}
    assert "Write to WAL" not in names and "Server CPU Usage" not in names
    md = next(s["metadata"] for s in samples if s["metric"] == "Document Throughput")
    assert md["experiment"] == "insert_docsize" and md["variant"] == "4" and md["doc_size_kb"] == 4
    assert md["scale"] == "smoke" and md["server_version"] == "7.0.1" and md["cloud"] == "Static"
    assert "wal_kb_s" in md["missing_metrics"].split(",")
    assert md["error_types"] == "insert: AutoReconnect=2"
    assert next(s for s in samples if s["metric"] == "Operation Errors")["value"] == 2
    assert [r["label"] for r in results.failed(run)] == ["1"]
    p99 = next(s for s in samples if s["metric"] == "insert p99 latency")
    assert p99["unit"] == "ms" and p99["value"] == pytest.approx(4.0, rel=0.01)


def test_parse_pkb_labels():
    assert report.parse_labels("|experiment:insert_docsize|,|target:mongodb://h:1/x|,|a:b,c|") == {
        "experiment": "insert_docsize",
        "target": "mongodb://h:1/x",
        "a": "b,c",
    }


def pkb_lines(samples, collapse=True):
    lines = []
    for s in samples:
        rec = {"metric": s["metric"], "value": s["value"], "unit": s["unit"], "run_uri": "abc"}
        if collapse:
            rec["labels"] = ",".join(f"|{k}:{v}|" for k, v in s["metadata"].items())
        else:
            rec["metadata"] = s["metadata"]
        lines.append(json.dumps(rec))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("collapse", [True, False])
def test_report_from_pkb_results_has_seed_headers(tmp_path, collapse):
    run = dict(RUN, results=[raw_result("4"), raw_result("1", docs=4000)])
    run["results"][1]["variant_index"] = 0
    path = tmp_path / "perfkitbenchmarker_results.json"
    path.write_text(pkb_lines(results.to_samples(run), collapse))
    text = report.render(report.load_pkb_results(str(path)), exp_mod.load())
    assert "# Data Ingestion" in text and "## Expected insert speed by document size" in text
    assert (
        "| Document Size (KB) | Time Taken (s) | Data Loaded (MB) | Speed (docs/s) | Speed (MB/s) |"
        in text
    )
    assert (
        "| Document Size (KB) | CPU Usage (%) | Time waiting for I/O (%) | Read into Cache (Pages/s) |"
        in text
    )
    rows = [ln for ln in text.splitlines() if ln.startswith("| 1 |") or ln.startswith("| 4 |")]
    assert rows[0].startswith("| 1 | 2.0 | 16 | 2000 |")  # the seed's sort: document size
    assert "| 4 | n/a | n/a | 10 | 10 | 3 |" in text


def test_report_rejects_garbage(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{not json\n")
    with pytest.raises(ValueError, match="x.json:1"):
        report.load_pkb_results(str(p))
    assert "No Performance Tables samples" in report.render([], exp_mod.load())


def test_latency_encode_merge_roundtrip():
    a, b = latency.LatencyRecorder(), latency.LatencyRecorder()
    for v in range(1, 1001):
        a.record("read", v)
    b.record("read", 5_000_000)
    b.record("update", 10)
    merged = latency.LatencyRecorder.decode(a.encode())
    merged.merge(latency.LatencyRecorder.decode(b.encode()))
    s = latency.summarize(merged.histograms["read"])
    assert s["count"] == 1001
    assert s["p50_ms"] == pytest.approx(0.5, rel=0.01)
    assert s["max_ms"] == pytest.approx(5000, rel=0.01)
    assert latency.summarize(latency.new_histogram()) == {"count": 0}


def test_report_writes_plots_and_bottleneck_lines(tmp_path):
    run = dict(RUN, results=[raw_result("4"), raw_result("1", docs=4000)])
    run["results"][0]["client_process_cpu_s"] = 1.8  # 0.9 cores over 2 s
    path = tmp_path / "r.json"
    path.write_text(pkb_lines(results.to_samples(run)))
    plots = tmp_path / "plots"
    text = report.render(report.load_pkb_results(str(path)), exp_mod.load(), plots_dir=str(plots))
    assert "![Expected insert speed by document size](plots/insert_docsize.png)" in text
    png = (plots / "insert_docsize.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000
    assert "- 4: client CPU (90% of 1 cores, driver processes)" in text
    assert "- 1: unknown (no figures)" in text  # the host's CPU is not the client's
