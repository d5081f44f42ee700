"""The one results loader of `report` and `compare` (issue 21 item 5): PKB JSON lines, the
engine's perftables --out and --samples files, sweep --out files; failed and n/a variants
as rows (issue 23 item 7)."""

import json

import pytest

from mongobench import cli
from mongobench.core import latency
from mongobench.reports import loader, report, results, runs


def _ok(label: str, index: int, docs: int = 100) -> dict:
    rec = latency.LatencyRecorder()
    for us in (1000, 2000, 3000):
        rec.record("insert", us)
    return {
        "status": "ok", "experiment": "insert_docsize", "label": label, "variant_index": index,
        "settings": {"doc_size_kb": int(label), "threads": 10}, "duration_s": 2.0,
        "threads": 10, "ops": {"insert": docs}, "docs": docs, "bytes": docs * 1024,
        "errors": {}, "latency": rec.encode(), "server_before": {}, "server_after": {},
        "start": 1_795_000_000.0,
    }  # fmt: skip


def perftables_out() -> dict:
    """A `perftables run --out` document: one measured, one failed and one n/a variant."""
    return {
        "schema": 1,
        "tool": loader.PERFTABLES_TOOL,
        "scale": "smoke",
        "scale_factor": 1e-4,
        "topology": "Single",
        "server_version": "7.0.0",
        "results": [
            _ok("4", 1),
            {"status": "failed", "experiment": "insert_docsize", "label": "32",
             "variant_index": 3, "settings": {"doc_size_kb": 32}, "error": "boom: 10 failed"},
            {"status": "n/a", "experiment": "insert_docsize", "label": "16", "variant_index": 2,
             "settings": {"doc_size_kb": 16}, "reason": "server lacks $lookup"},
        ],
    }  # fmt: skip


def test_perftables_out_file_loads_as_the_samples_pkb_gets(tmp_path):
    path = tmp_path / "perftables-results.json"
    path.write_text(json.dumps(perftables_out(), indent=1))
    got = loader.load(str(path))
    want = results.run_samples(perftables_out())
    assert [s["metric"] for s in got] == [s["metric"] for s in want]
    assert {"Document Throughput", "Variant Failed", "Variant Not Applicable"} <= {
        s["metric"] for s in got
    }
    assert all(
        set(s) == {"metric", "value", "unit", "metadata", "run_uri", "timestamp"} for s in got
    )
    tput = next(s for s in got if s["metric"] == "Document Throughput")
    assert tput["value"] == 50 and tput["timestamp"] == 1_795_000_000.0


def test_samples_array_and_pkb_json_lines_load_alike(tmp_path):
    samples = results.run_samples(perftables_out())
    array, lines = tmp_path / "samples.json", tmp_path / "pkb.json"
    array.write_text(json.dumps(samples))
    lines.write_text("".join(json.dumps(s) + "\n" for s in samples))
    a, b = loader.load(str(array)), loader.load(str(lines))
    assert [(s["metric"], s["value"], s["metadata"]) for s in a] == [
        (s["metric"], s["value"], s["metadata"]) for s in b
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            '{"schema": 1, "results": []}',
            "neither a sample nor a `mongobench perftables run --out`",
        ),
        ('[{"metric": "x", "value": "1"}]', "item 1: not a sample"),
        ("[1]", "item 1: not a sample"),
    ],
)
def test_other_json_is_refused_naming_the_file(tmp_path, content, expected):
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=expected) as e:
        loader.load(str(path))
    assert str(path) in str(e.value)


def test_failed_and_na_variants_are_rows_of_the_tables(tmp_path):
    text = report.render(results.run_samples(perftables_out()))
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    failed = next(r for r in rows if r.startswith("| 32 |"))
    na = next(r for r in rows if r.startswith("| 16 |"))
    assert "FAILED" in failed and "not run" in na
    assert "| 4 |" in text
    # the reasons are listed under the tables
    assert "- 32: boom: 10 failed" in text
    assert "- 16: n/a (server lacks $lookup)" in text
    # the provenance line describes the measured rows only
    assert text.count("Target: stand-in") == 0 and "Target: a compatible server" in text


def test_cli_samples_and_report_keep_failures(tmp_path, capsys):
    """The CLI's --samples file (results.run_samples) and `report` on the --out file both show
    the failed and n/a variants (issue 23 item 7: they vanished from both)."""
    out = tmp_path / "perftables-results.json"
    out.write_text(json.dumps(perftables_out()))
    md = tmp_path / "report.md"
    assert cli.main(["report", "--results", str(out), "--out", str(md)]) == 0
    text = md.read_text()
    assert "| 32 |" in text and "FAILED" in text and "not run" in text
    # one measured variant: a table row, no single-bar plot (issue 21 item 8)
    assert not (tmp_path / "plots" / "insert_docsize.png").exists()
    metrics = [s["metric"] for s in results.run_samples(perftables_out())]
    assert metrics.count("Variant Failed") == 1 and metrics.count("Variant Not Applicable") == 1


def test_a_failed_repeat_does_not_hide_the_variants_figures():
    doc = perftables_out()
    doc["results"][1] = dict(doc["results"][1], label="4", variant_index=1)
    rows = report.group(results.run_samples(doc))["insert_docsize"]
    four = [r for k, r in rows.items() if k[2] == "4"]
    assert len(four) == 1 and not four[0].get("_status") and four[0]["docs_per_s"] == 50


def _sweep_lines(run_uri: str) -> str:
    out = []
    for size, tput in ((1, 900.0), (2, 800.0)):
        md = {"phase": "read_only", "ycsb_phase": "run", "size_mb": size, "op": "READ",
              "exceeds_memory": False}  # fmt: skip
        out.append({"metric": "overall Throughput", "value": tput, "unit": "ops/sec",
                    "metadata": md, "run_uri": run_uri})  # fmt: skip
        out.append({"metric": "read p99 latency", "value": 2.5, "unit": "ms",
                    "metadata": md, "run_uri": run_uri})  # fmt: skip
    return "".join(json.dumps(s) + "\n" for s in out)


def test_report_renders_a_sweep_file_and_sweep_runs_are_labelled(tmp_path):
    path = tmp_path / "sweep.json"
    path.write_text(_sweep_lines("r1"))
    found = runs.sweep_runs([(str(path), loader.load(str(path)))])
    assert [r.label for r in found] == ["r1"]
    md = tmp_path / "sweep.md"
    assert cli.main(["report", "--results", str(path), "--out", str(md)]) == 0
    text = md.read_text()
    assert "## Dataset-size sweep" in text and "### Read-only" in text and "900" in text
    assert (tmp_path / "plots" / "sweep_throughput_log.png").exists()
