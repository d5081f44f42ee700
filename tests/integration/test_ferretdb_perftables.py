"""Perftables against FerretDB (SQLite): it is named with its version, $lookup is n/a (never
FAILED), and the audit finds the concurrent $inc it acknowledged but lost."""

import pytest
from ferretdb_helpers import start

from mongobench.perftables import runner as perftables
from mongobench.perftables.request import PerftablesRun
from mongobench.reports import report, results

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ferret(tmp_path_factory):
    srv = start(tmp_path_factory.mktemp("ferret-perftables"))
    yield srv
    srv.stop()


def test_ferretdb_run_names_it_marks_na_and_audits(ferret, tmp_path):
    run = perftables.run(
        PerftablesRun(
            experiments=["aggregation", "concurrency"],
            scale="smoke",
            out=str(tmp_path / "r.json"),
            variants=["$lookup of 400 documents", "10, False"],
            os_path="none",
        ),
        ferret.uri,
        log=lambda m: None,
    )
    by = {(r["experiment"], r["label"]): r for r in run["results"]}
    lookup = by[("aggregation", "$lookup of 400 documents")]
    assert lookup["status"] == "n/a" and lookup["reason"] == "server lacks $lookup"
    assert results.failed(run) == []
    hot = by[("concurrency", "10, False")]
    assert hot["status"] == "ok"
    assert hot["audit"]["lost_writes"] > 0, hot["audit"]  # FerretDB loses concurrent $inc
    samples = results.to_samples(run)
    assert all(s["metadata"]["server_product"] == "FerretDB" for s in samples)
    assert all(s["metadata"]["server_product_version"] == "v1.24.2" for s in samples)
    assert {s["metadata"]["server_backend"] for s in samples} == {"SQLite"}
    na = [s for s in samples if s["metric"] == results.NA_METRIC]
    assert [s["metadata"]["na_reason"] for s in na] == ["server lacks $lookup"]
    text = report.render(samples)
    assert "$lookup of 400 documents: n/a (server lacks $lookup)" in text
    assert "lost_writes" in text
