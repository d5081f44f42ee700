"""Every declared experiment at smoke scale against the test-bed server."""

import json
import subprocess
import sys

import pytest
from pymongo import MongoClient

from mongobench.perftables import experiments as exp_mod
from mongobench.perftables import runner as perftables
from mongobench.perftables import variant
from mongobench.perftables.request import PerftablesRun
from mongobench.reports import results

pytestmark = pytest.mark.integration


# What the stand-in cannot do: the probe finds it, and these variants are n/a with the
# reason, never run and never FAILED.
UNSUPPORTED_BY_STANDIN = {
    ("update_fields", "50, 500000, validation"): "server lacks collMod validators",
    ("update_fields", "50, 500000, pipeline"): "server lacks pipeline updates",
}


def test_every_experiment_runs_and_counts_what_it_did(server_uri, tmp_path):
    out = tmp_path / "r.json"
    run = perftables.run(
        PerftablesRun(scale="smoke", out=str(out), database="mb_it", os_path=str(tmp_path)),
        server_uri,
    )
    assert run == json.loads(out.read_text())
    catalog = exp_mod.load()
    expected = sum(len(e.resolve("smoke")) for e in catalog.values())
    assert len(run["results"]) == expected
    assert results.failed(run) == []
    na = {(r["experiment"], r["label"]): r["reason"] for r in results.not_applicable(run)}
    assert na == UNSUPPORTED_BY_STANDIN
    assert run["server"]["server_product"] == "stand-in (mongo-java-server)"
    # The audit of acknowledged writes: every write experiment checked, nothing lost.
    audited = {r["experiment"] for r in run["results"] if r.get("audit")}
    assert {"concurrency", "delete", "updateapi", "insert_batchsize"} <= audited, audited
    assert all(r["audit"]["lost_writes"] == 0 for r in run["results"] if r.get("audit"))
    by_key = {(r["experiment"], r["label"]): r for r in run["results"] if r["status"] == "ok"}
    for (experiment, label), r in by_key.items():
        s, ops = r["settings"], sum(r["ops"].values())
        assert not r["errors"], (experiment, label, r["errors"])
        assert r["os_client"]["cpu_pct"] is not None
        if r["workload"] == "insert":
            assert r["docs"] == s["total_docs"] == r["planned"]["docs"]
            assert r["bytes"] == r["docs"] * int(s["doc_size_kb"] * 1024)
        elif s.get("total_ops"):
            assert ops == s["total_ops"], (experiment, label)
        elif s.get("duration_s"):
            assert r["duration_s"] >= s["duration_s"] and ops > 0, (experiment, label)
        if r["workload"] == "query" and s.get("expect_full"):
            assert r["docs"] == ops * s["limit"], (experiment, label)
    # Counted from what happened, checked against the server.
    hot = [r for k, r in by_key.items() if k[0] == "concurrency"]
    with MongoClient(server_uri) as c:
        count = c["mb_it"]["hotspot"].find_one({"_id": 0})["count"]
        assert count == sum(sum(r["ops"].values()) for r in hot)
        assert c["mb_it"]["deletes"].count_documents({}) == 0
    for (experiment, label), r in by_key.items():
        if experiment == "delete":
            assert r["docs"] == r["settings"]["preload_docs"]
        if experiment == "updateapi" and label.startswith("50") and label.endswith("False"):
            assert r["counters"]["fallback_inserts"] == r["counters"]["new_keys"] > 0
        if experiment == "shell_mixed":
            assert r["ops"]["insert"] > 0 and r["ops"]["find"] > 0
    samples = results.to_samples(run)
    per_variant = {
        (s["metadata"]["experiment"], s["metadata"]["variant"])
        for s in samples
        if s["metric"] == "Operation Throughput"
    }
    assert per_variant == set(by_key)
    # The stand-in keeps no storage: the bucket test's size is missing, not 0.
    assert not any(s["metric"] == "Storage Size" for s in samples)
    # The report renders every section, with a plot per experiment of two variants or more
    # (one variant is its table row alone: a single bar says nothing more).
    from mongobench.reports import report

    text = report.render(samples, catalog, plots_dir=str(tmp_path / "plots"))
    for e in catalog.values():
        assert f"## {e.title}" in text
        ran = {variant for experiment, variant in by_key if experiment == e.name}
        assert (tmp_path / "plots" / f"{e.name}.png").exists() == (len(ran) > 1), e.name
    for section in {e.section for e in catalog.values()}:
        assert f"# {section}" in text


def test_cli_prints_the_seed_table_and_fails_on_a_dead_server(uri_file, tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "mongobench",
        "perftables",
        "run",
        "--uri-file",
        uri_file,
        "--experiments",
        "insert_docsize",
        "--variants",
        "1;4",
        "--out",
        str(tmp_path / "a.json"),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (
        "| Document Size (KB) | Time Taken (s) | Data Loaded (MB) | Speed (docs/s) | Speed (MB/s) |"
        in p.stdout
    )
    assert p.stdout.count("\n| 1 |") == 2 and p.stdout.count("\n| 4 |") == 2  # both tables

    dead = tmp_path / "dead.uri"
    dead.write_text("mongodb://u:hunter2secret@127.0.0.1:1/?serverSelectionTimeoutMS=500\n")
    cmd[cmd.index(uri_file)] = str(dead)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "hunter2secret" not in p.stdout + p.stderr


def test_errors_are_counted_not_thrown_away(server_uri, tmp_path):
    """Duplicate keys: the failed inserts are errors, not throughput."""
    from mongobench.driver import writes
    from mongobench.driver.base import ThreadStats
    from mongobench.driver.insert import InsertWorkload

    with MongoClient(server_uri) as c:
        db = c["mb_err"]
        w = InsertWorkload(
            db,
            {
                "doc_size_kb": 1,
                "total_docs": 50,
                "batch_size": 10,
                "threads": 1,
                "id_type": "objectid",
                "write_concern": 1,
            },
        )
        w.prepare()
        coll = w.collection()
        f = w.factory(seed=1)
        docs = f.batch(10)
        coll.insert_many(docs[:5])
        stats = ThreadStats()

        class Replay:  # the same 10 documents again: 5 duplicates
            size, id_type = f.size, f.id_type

            def batch(self, n, ids=None):
                return docs[:n]

        writes.inserter(coll, Replay(), w.declare(), stats)(0, 10)
        assert stats.docs == 5
        assert sum(stats.errors.values()) == 5
        assert "insert: BulkWriteError" in stats.errors


def test_unknown_experiment_is_a_clear_error(uri_file):
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "mongobench",
            "perftables",
            "run",
            "--uri-file",
            uri_file,
            "--experiments",
            "insert_nope",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode != 0 and "unknown experiment(s) insert_nope" in p.stderr


def test_pipelined_driver_reads_and_updates_for_real(server_uri):
    """Every pipelined operation hits the server: counters and documents agree."""
    from mongobench.driver import connection, protocol

    catalog = exp_mod.load()
    e = catalog["kv_read_update"]
    [v] = [x for x in e.resolve("smoke") if x.settings["driver"] == "pipelined"]
    v.settings.update(duration_s=None, total_ops=3000, read_proportion=0.5)
    with MongoClient(server_uri) as c:
        request = PerftablesRun(database="mb_wire", os_path="none")
        res = variant.run_variant(c, e, v, request, server_uri, log=lambda m: None).to_dict()
        assert not res["errors"]
        assert sum(res["ops"].values()) == 3000 and res["docs"] == 3000
        assert 1200 < res["ops"]["update"] < 1800
        # Updates set n0 to the request id: the documents really changed.
        assert c["mb_wire"]["kv"].count_documents({"n0": {"$gt": 0}}) > 100
    host, port = server_uri.split("//")[1].rstrip("/").split(":")
    conn = connection.Connection(host, int(port))
    try:
        with pytest.raises(protocol.WireError, match="failed"):
            conn.command({"nosuchcommand": 1, "$db": "admin"})
        assert conn.command({"ping": 1, "$db": "admin"})["ok"] == 1
    finally:
        conn.close()
