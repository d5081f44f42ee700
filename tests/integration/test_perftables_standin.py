"""Every declared experiment at smoke scale against the test-bed server."""

import json
import subprocess
import sys

import pytest
from pymongo import MongoClient

from mongobench import experiments as exp_mod
from mongobench import perftables, results

pytestmark = pytest.mark.integration


def test_every_experiment_runs_and_counts_what_it_did(server_uri, tmp_path):
    out = tmp_path / "r.json"
    run = perftables.run(
        server_uri, None, "smoke", str(out), database="mb_it", os_path=str(tmp_path)
    )
    assert run == json.loads(out.read_text())
    catalog = exp_mod.load()
    expected = sum(len(e.resolve("smoke")) for e in catalog.values())
    assert len(run["results"]) == expected
    assert not results.failed(run)
    for r in run["results"]:
        planned = r["planned"]["docs"]
        assert r["docs"] == planned, r["label"]
        assert r["bytes"] == planned * r["settings"]["doc_size_kb"] * 1024
        assert not r["errors"]
        assert r["os_client"]["cpu_pct"] is not None
    # The last variant's collection holds exactly the preload plus the timed inserts.
    last = run["results"][-1]
    with MongoClient(server_uri) as c:
        n = c["mb_it"]["perftables"].count_documents({})
    assert n == last["prepared"]["preload_docs"] + last["docs"]
    samples = results.to_samples(run)
    per_variant = {
        (s["metadata"]["experiment"], s["metadata"]["variant"])
        for s in samples
        if s["metric"] == "Document Throughput"
    }
    assert len(per_variant) == expected


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
        "1,4",
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
    from mongobench.workloads import InsertWorkload, ThreadStats

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
            n_bytes = f.n_bytes

            def batch(self, n):
                return docs[:n]

        w._insert(coll, Replay(), 10, stats, None)
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
