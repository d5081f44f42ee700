"""`mongobench report` on the engine's own --out files (issue 21 item 5): a real
`perftables run --out` and a real `sweep run --out`, both made against the test-bed server."""

from __future__ import annotations

import json

import pytest

from mongobench import cli
from mongobench.remote import javabuild

pytestmark = pytest.mark.integration
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_report_renders_a_perftables_out_file_with_its_na_row(uri_file, tmp_path, capsys):
    out, samples = tmp_path / "perftables-results.json", tmp_path / "samples.json"
    rc = cli.main(
        ["perftables", "run", "--uri-file", uri_file, "--scale", "smoke", "--rates", "standin",
         "--experiments", "insert_idtype,update_fields", "--database", "mb_report_out",
         "--variants", "objectid;uuid;50, 500000, validation", "--out", str(out),
         "--samples", str(samples)]
    )  # fmt: skip
    assert rc == 0
    capsys.readouterr()
    # The --samples file keeps the n/a variant (issue 23 item 7).
    metrics = [s["metric"] for s in json.loads(samples.read_text())]
    assert metrics.count("Variant Not Applicable") == 1
    md = tmp_path / "report.md"
    assert cli.main(["report", "--results", str(out), "--out", str(md)]) == 0
    text = md.read_text()
    assert "## Impact of primary key type on write speed" in text
    assert "| OBJECT_ID |" in text and "| UUID |" in text
    # the stand-in's n/a variant is a row of its table, and its reason is listed
    row = next(line for line in text.splitlines() if line.startswith("| 50 | 500000 | validation"))
    assert "not run" in row
    assert "50, 500000, validation: n/a (server lacks collMod validators)" in text
    assert "stand-in: not a performance figure" in text
    png = tmp_path / "plots" / "insert_idtype.png"
    assert png.read_bytes().startswith(PNG_SIGNATURE)
    assert "](plots/insert_idtype.png)" in text


def test_report_renders_a_sweep_out_file(server_uri, tmp_path, capsys):
    javabuild.build()
    uri_file = tmp_path / "uri"
    uri_file.write_text(server_uri.rstrip("/") + "/t_report_sweep\n")
    uri_file.chmod(0o600)
    out = tmp_path / "sweep-results.json"
    rc = cli.main(
        ["sweep", "run", "--uri-file", str(uri_file), "--sizes", "0.1,0.2", "--phases",
         "load,read_only", "--out", str(out), "--run-uri", "sweep1"]
    )  # fmt: skip
    assert rc == 0
    capsys.readouterr()
    md = tmp_path / "sweep.md"
    assert cli.main(["report", "--results", str(out), "--out", str(md)]) == 0
    text = md.read_text()
    assert "## Dataset-size sweep (YCSB, seed 002)" in text
    assert "### Load" in text and "### Read-only" in text
    rows = [line for line in text.split("### Read-only")[1].splitlines() if line.startswith("| 0.")]
    assert len(rows) == 2 and "n/a" not in rows[0]
    for name in ("sweep_throughput_log.png", "sweep_runtime_linear.png", "sweep_p99.png"):
        assert (tmp_path / "plots" / name).read_bytes().startswith(PNG_SIGNATURE)
