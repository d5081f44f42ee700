"""Several client VMs against the stand-in: a leader run and a follower process share every
timed phase from one start time; the counts are merged exactly once."""

import subprocess
import sys
import time

import pytest
from pymongo import MongoClient

from mongobench.driver import base, native
from mongobench.perftables import coordination
from mongobench.perftables import runner as perftables
from mongobench.perftables.request import PerftablesRun
from mongobench.reports import results

pytestmark = pytest.mark.integration


def _follower(uri_file, run_id, index, log):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mongobench",
            "perftables",
            "follow",
            "--uri-file",
            uri_file,
            "--run-id",
            run_id,
            "--client-index",
            str(index),
            "--processes",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _run_with_follower(
    uri_file, server_uri, tmp_path, experiments, variants, database, overrides=None
):
    run_id = f"it{int(time.time() * 1000)}"
    log = open(tmp_path / f"follower-{database}.log", "w+")
    follower = _follower(uri_file, run_id, 1, log)
    try:
        run = perftables.run(
            PerftablesRun(
                experiments=experiments,
                scale="smoke",
                out=str(tmp_path / f"{database}.json"),
                database=database,
                variants=variants,
                os_path="none",
                processes=1,
                client_vms=2,
                run_id=run_id,
                overrides=overrides,
            ),
            server_uri,
            log=lambda _: None,
        )
        assert follower.wait(60) == 0
    finally:
        follower.kill()
    log.seek(0)
    follower_log = log.read()
    n = len(variants)
    assert f"client VM 1: job {n - 1}: " in follower_log, follower_log
    assert f"after {n} timed phase(s)" in follower_log
    with MongoClient(server_uri) as c:
        # the coordination collection is gone once the follower said bye
        assert f"run_{run_id}" not in c[coordination.COORD_DB].list_collection_names()
    for r in run["results"]:
        assert r["status"] == "ok" and not r["errors"], r.get("error")
        assert r["client_vms"] == 2 and r["client_processes"] == 2
        vms = r["client_per_vm"]
        assert [v["vm"] for v in vms] == [0, 1] and all(v["ops"] > 0 for v in vms)
        # each VM's loop, and the run's over both (compiled where it is built; an open loop's
        # is Python's)
        paced = "target_ops_per_s" in (overrides or {})
        assert {v["loop"] for v in vms} == {r["client_loop"]} == {native.kind(paced=paced)}
        assert {v["sources"] for v in vms} == {r["client_sources"]}  # the same on both VMs
        assert not paced or r["client_sources"] == "python"  # an open loop's sources
        assert sum(v["ops"] for v in vms) == sum(r["ops"].values())
        # both VMs' intervals merged by interval start on the common clock: they add up
        assert sum(r["series"]["ops"]) == sum(r["ops"].values())
        assert sum(r["series"]["docs"]) == r["docs"]
    return run


def test_two_client_vms_split_hot_document_updates_and_merge_once(uri_file, server_uri, tmp_path):
    run = _run_with_follower(
        uri_file, server_uri, tmp_path, ["concurrency"], ["10, False", "20, True"], "mb_vms"
    )
    ten, twenty = run["results"]
    with MongoClient(server_uri) as c:
        count = c["mb_vms"]["hotspot"].find_one({"_id": 0})["count"]
    # every update of both VMs in both variants, counted once
    assert sum(twenty["ops"].values()) == twenty["settings"]["total_ops"]
    assert sum(ten["ops"].values()) == ten["settings"]["total_ops"]
    assert count == ten["settings"]["total_ops"] + twenty["settings"]["total_ops"]
    tput = [x for x in results.to_samples(run) if x["metric"] == "Operation Throughput"]
    assert [x["metadata"]["client_vms"] for x in tput] == [2, 2]


def test_two_client_vms_split_a_bulk_insert(uri_file, server_uri, tmp_path):
    run = _run_with_follower(uri_file, server_uri, tmp_path, ["insert_docsize"], ["4"], "mb_vmi")
    [r] = run["results"]
    assert r["docs"] == r["settings"]["total_docs"]
    with MongoClient(server_uri) as c:  # both VMs' documents, each inserted once
        assert c["mb_vmi"][base.COLLECTION].count_documents({}) == r["docs"]
    assert r["bytes"] == r["docs"] * int(r["settings"]["doc_size_kb"] * 1024)


def test_a_follower_that_never_comes_fails_the_variant_not_the_run(
    server_uri, tmp_path, monkeypatch
):
    monkeypatch.setattr(coordination, "READY_TIMEOUT_S", 2.0)
    run = perftables.run(
        PerftablesRun(
            experiments=["concurrency"],
            scale="smoke",
            out=str(tmp_path / "r.json"),
            database="mb_vms2",
            variants=["10, False"],
            os_path="none",
            processes=1,
            client_vms=2,
            run_id=f"lonely{int(time.time() * 1000)}",
        ),
        server_uri,
        log=lambda _: None,
    )
    [r] = run["results"]
    assert r["status"] == "failed"
    assert "client VMs ready: nothing from ready-0-1 within 2 s" in r["error"]


def test_a_lonely_leader_says_what_it_waits_for_and_waits_once(server_uri, tmp_path, monkeypatch):
    # issue 22: a leader without followers took the ready timeout (180 s) per variant while
    # its heartbeat said "timed phase 2m00s"
    monkeypatch.setattr(coordination, "READY_TIMEOUT_S", 2.0)
    phases = []
    real = coordination.Leader

    def leader(client, run_id, vms, on_phase=None):
        return real(client, run_id, vms, on_phase=lambda *a: (phases.append(a), on_phase(*a)))

    monkeypatch.setattr(coordination, "Leader", leader)
    t0 = time.monotonic()
    run = perftables.run(
        PerftablesRun(
            experiments=["concurrency"],
            scale="smoke",
            out=str(tmp_path / "r.json"),
            database="mb_vms3",
            variants=["10, False", "20, True"],
            os_path="none",
            processes=1,
            client_vms=2,
            run_id=f"lonely{int(time.time() * 1000)}",
        ),
        server_uri,
        log=lambda _: None,
    )
    first, second = run["results"]
    assert "client VMs ready: nothing from ready-0-1 within 2 s" in first["error"]
    assert second["error"].endswith("not run: client VMs ready: nothing from ready-0-1 within 2 s")
    assert phases == [("waiting for client VM(s) 1 to be ready", 2.0)]  # once, not per variant
    assert time.monotonic() - t0 < 30


def test_client_ranges_cover_every_client_once():
    for clients in (1, 2, 5, 10, 401):
        for vms in (1, 2, 3, 4):
            got = [i for v in range(vms) for i in coordination.client_range(clients, vms, v)]
            assert got == list(range(clients)), (clients, vms)


def test_a_follower_that_starts_late_is_reported(uri_file, server_uri, tmp_path, monkeypatch):
    """A start time already past when the follower reads it (as a clock out of step
    would make it): the variant runs, and its result, samples and log say how late."""
    monkeypatch.setattr(coordination, "START_MARGIN_S", -0.5)
    run_id, lines = f"late{int(time.time() * 1000)}", []
    with open(tmp_path / "follower.log", "w+") as log:
        follower = _follower(uri_file, run_id, 1, log)
        try:
            run = perftables.run(
                PerftablesRun(
                    experiments=["concurrency"],
                    scale="smoke",
                    out=str(tmp_path / "late.json"),
                    database="mb_vml",
                    variants=["10, False"],
                    os_path="none",
                    processes=1,
                    client_vms=2,
                    run_id=run_id,
                ),
                server_uri,
                log=lines.append,
            )
            assert follower.wait(60) == 0
        finally:
            follower.kill()
    [r] = run["results"]
    assert r["status"] == "ok" and sum(r["ops"].values()) == r["settings"]["total_ops"]
    late = r["client_per_vm"][1]["late_s"]
    assert late >= 0.5 and r["client_per_vm"][0]["late_s"] == 0.0
    assert any("client VM 1 started" in line and "after the common start" in line for line in lines)
    md = results.to_samples(run)[0]["metadata"]
    assert md["client_vm_late_s"] == round(late, 3)


def test_two_client_vms_share_one_open_loop_rate(uri_file, server_uri, tmp_path):
    """target_ops_per_s is the variant's rate over every client of every client VM: two VMs
    together achieve it (each VM alone at the full rate would double it), each about half,
    and the service time of both VMs is merged with their intended-time latency."""
    over = {"target_ops_per_s": 60, "duration_s": 2.0, "total_ops": 10**9, "threads": 4}
    run = _run_with_follower(
        uri_file, server_uri, tmp_path, ["concurrency"], ["10, False"], "mb_vmo", over
    )
    [r] = run["results"]
    assert 0.85 <= r["open_loop"]["achieved_share"] <= 1.1, r["open_loop"]
    vms = r["client_per_vm"]
    assert all(0.35 <= v["ops"] / sum(r["ops"].values()) <= 0.65 for v in vms), vms
    figures = {op: f["count"] for op, f in results.latency_figures(r).items()}
    service = {op: f["count"] for op, f in results.latency_figures(r, "service_latency").items()}
    assert figures == service == {"update": sum(r["ops"].values())}
