"""Quiet between variants against FerretDB (SQLite): its currentOp is always empty and its
serverStatus has no connections, so the run waits until a small write goes through."""

import threading
import time

import pymongo
import pytest
from ferretdb_helpers import start

from mongobench.perftables import quiesce
from mongobench.perftables import runner as perftables
from mongobench.perftables.request import PerftablesRun
from mongobench.reports import results

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ferret(tmp_path_factory):
    srv = start(tmp_path_factory.mktemp("ferret-quiesce"))
    yield srv
    srv.stop()


def test_waits_for_abandoned_inserts_by_a_write_probe(ferret):
    client = pymongo.MongoClient(ferret.uri)
    gave_up = threading.Event()

    def abandoned():  # 2 MB documents, and a client that stops waiting after 1 s
        other = pymongo.MongoClient(ferret.uri, socketTimeoutMS=1000)
        try:
            docs = [{"x": "a" * (2 << 20)} for _ in range(40)]
            other.mongobench.abandoned.insert_many(docs, ordered=False)
        except pymongo.errors.PyMongoError:
            pass
        finally:
            gave_up.set()
            other.close()

    try:
        assert quiesce.run_ops(client, "mongobench") is None  # FerretDB's currentOp is empty
        assert quiesce.connections(client) is None
        t = threading.Thread(target=abandoned)
        t.start()
        assert gave_up.wait(60)
        q = quiesce.wait(client, "mongobench", 120.0, conn_limit=10)
        count = client.mongobench.abandoned.estimated_document_count()
        time.sleep(2.0)
        assert client.mongobench.abandoned.estimated_document_count() == count  # quiet
        assert "mongobench_quiesce" not in client.mongobench.list_collection_names()
        t.join()
    finally:
        client.close()
    assert q["by"] == "write probe" and not q["busy"], q


def test_the_second_variant_records_its_wait(ferret, tmp_path):
    run = perftables.run(
        PerftablesRun(
            experiments=["insert_batchsize"],
            scale="smoke",
            out=str(tmp_path / "r.json"),
            variants=["1000", "2000"],
            os_path="none",
        ),
        ferret.uri,
        log=lambda m: None,
    )
    first, second = run["results"]
    assert "quiesce" not in first
    assert second["quiesce"]["by"] == "write probe" and not second["quiesce"]["busy"]
    md = {s["metadata"]["variant"]: s["metadata"] for s in results.to_samples(run)}
    assert md["2000"]["quiesce_by"] == "write probe"
