"""perftables on the multiplexed path (the default) and the pymongo reference path:
the same counts, and results that say which client ran them and on what."""

import pytest
from pymongo import MongoClient

from mongobench.driver import native
from mongobench.perftables import runner as perftables
from mongobench.perftables.request import PerftablesRun
from mongobench.reports import results

pytestmark = pytest.mark.integration

PLAN = {
    "concurrency": ["10, False", "10, True"],
    "updateapi": ["50, update_one, False", "50, find_one_and_update, True"],
    "shell_bucket": ["5", "0"],
}


def _run(uri, tmp_path, path, processes) -> list[dict]:
    out = []
    for name, variants in PLAN.items():
        run = perftables.run(
            PerftablesRun(
                experiments=[name],
                scale="smoke",
                out=str(tmp_path / f"{path}-{name}.json"),
                database="mb_paths",
                variants=variants,
                os_path="none",
                client_path=path,
                processes=processes,
            ),
            uri,
            log=lambda m: None,
        )
        assert run["client_path"] == path
        out += run["results"]
    return out


def test_both_paths_count_the_same(server_uri, tmp_path):
    with MongoClient(server_uri) as c:
        c["mb_paths"]["hotspot"].drop()
        c["mb_paths"]["perftables_meta"].delete_many({})
    mux = _run(server_uri, tmp_path, "multiplexed", 2)
    ref = _run(server_uri, tmp_path, "pymongo", 2)
    assert [r["label"] for r in mux] == [r["label"] for r in ref]
    for a, b in zip(mux, ref, strict=True):
        key = (a["experiment"], a["label"])
        assert a["status"] == b["status"] == "ok", key
        assert not a["errors"] and not b["errors"], key
        assert a["ops"] == b["ops"] and a["docs"] == b["docs"], key
        assert a["counters"] == b["counters"], key
        assert a["client_path"] == "multiplexed" and b["client_path"] == "pymongo"
        assert a["client_processes"] == min(2, a["threads"]) and b["client_processes"] == 1
        assert a["client_vms"] == b["client_vms"] == 1
        assert 0 < a["client_process_cpu_s"] and a["duration_s"] > 0
    hot = [r for r in mux + ref if r["experiment"] == "concurrency"]
    with MongoClient(server_uri) as c:
        count = c["mb_paths"]["hotspot"].find_one({"_id": 0})["count"]
    # Every update both paths counted reached the document, and nothing else did.
    assert count == sum(r["ops"]["update"] for r in hot) > 0
    md = next(
        s["metadata"]
        for s in results.to_samples({"results": mux})
        if s["metric"] == "Operation Throughput"
    )
    assert md["client_path"] == "multiplexed" and md["client_vms"] == 1
    assert md["client_processes"] == 2
    assert md["client_loop"] == native.kind()  # the compiled loop where it is built
    # concurrency's keyed updates have a compiled twin, which the compiled loop runs
    compiled_twin = "compiled" if native.kind() == native.NATIVE else "python"
    assert {r["client_sources"] for r in mux if r["experiment"] == "concurrency"} == {compiled_twin}
    assert md["client_sources"] in ("compiled", "python")


def test_max_seconds_stops_a_multiplexed_phase_early(server_uri, tmp_path):
    run = perftables.run(
        PerftablesRun(
            experiments=["concurrency"],
            scale="smoke",
            out=str(tmp_path / "cap.json"),
            database="mb_paths",
            variants=["10, False"],
            overrides={"total_ops": 10**9},
            os_path="none",
            max_seconds=1.0,
            processes=2,
        ),
        server_uri,
        log=lambda m: None,
    )
    [r] = run["results"]
    assert r["status"] == "ok" and not r["errors"] and r["client_path"] == "multiplexed"
    assert r["stopped_early"] is True
    assert 1.0 <= r["duration_s"] < 5.0
    assert 0 < sum(r["ops"].values()) < r["settings"]["total_ops"]
