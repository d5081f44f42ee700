"""Provenance against the test-bed server: the server's version and storage engine as the
sweep's drop command and a perftables run record them, and each variant's timestamp."""

import json
import os
import subprocess
import sys

import pytest

from mongobench.perftables import runner as perftables
from mongobench.perftables import target
from mongobench.perftables.request import PerftablesRun
from mongobench.remote import provenance
from mongobench.reports import results
from mongobench.sweep import runner as sweep_runner

pytestmark = pytest.mark.integration


def _expected_engine(server_uri):
    """The stand-in has no storage engine; a real mongod says wiredTiger."""
    with target.connect(server_uri) as client:
        status = target.server_status(client)
    return provenance.STANDIN_ENGINE if status.get("process") == "java" else "wiredTiger"


def test_sweep_drop_reports_the_servers_version_and_engine(server_uri, tmp_path):
    facts = sweep_runner.server_facts(server_uri)
    assert facts["server_version"][0].isdigit(), facts
    assert facts["storage_engine"] == _expected_engine(server_uri)
    uri_file = tmp_path / "uri"
    uri_file.write_text(server_uri + "\n")
    os.chmod(uri_file, 0o600)
    out = subprocess.run(
        [sys.executable, "-m", "mongobench", "sweep", "drop", "--uri-file", str(uri_file)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert sweep_runner.parse_drop_server(out) == facts
    assert json.loads(out.strip().splitlines()[-1])["dropped"]


def test_perftables_run_records_provenance_and_each_variants_start(server_uri, tmp_path):
    run = perftables.run(
        PerftablesRun(
            experiments=["insert_docsize"],
            scale="smoke",
            out=str(tmp_path / "r.json"),
            database="mb_prov",
            variants=["1", "4"],
            os_path=str(tmp_path),
        ),
        server_uri,
    )
    assert run["provenance"] == provenance.engine()
    ok = [r for r in run["results"] if r["status"] == "ok"]
    assert len(ok) == 2 and ok[0]["start"] < ok[1]["start"]
    samples = results.to_samples(run)
    for s in samples:
        md = s["metadata"]
        res = next(r for r in ok if r["label"] == md["variant"])
        assert s["timestamp"] == res["start"]
        assert md["server_version"] == run["server_version"]
        assert md["storage_engine"] == _expected_engine(server_uri)
        assert md["mongobench_version"] == provenance.engine()["mongobench_version"]
    # The client's OS figures include steal (0 on most hosts, never missing on Linux).
    assert {"Client CPU Steal"} <= {s["metric"] for s in samples}
