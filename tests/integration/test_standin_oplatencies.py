"""serverStatus.opLatencies in mongod's shape, and unacknowledged (w:0) writes, which pymongo
sends as OP_MSG with moreToCome and no reply to read. Both hold for a real mongod as well."""

from __future__ import annotations

import time

import pymongo
import pytest
from bson.int64 import Int64
from pymongo.write_concern import WriteConcern

pytestmark = pytest.mark.integration

KINDS = ("reads", "writes", "commands", "transactions")


def _client(uri: str, **kwargs) -> pymongo.MongoClient:
    # No retries: a dropped connection must show as an error, not be papered over.
    return pymongo.MongoClient(
        uri, serverSelectionTimeoutMS=5000, retryReads=False, retryWrites=False, **kwargs
    )


def _latencies(client) -> dict:
    return client.admin.command("serverStatus")["opLatencies"]


def _grew(before: dict, after: dict, kind: str) -> tuple[int, int]:
    """(ops, latency in µs) added to `kind` between two serverStatus samples."""
    return (
        after[kind]["ops"] - before[kind]["ops"],
        after[kind]["latency"] - before[kind]["latency"],
    )


def test_op_latencies_count_reads_and_writes_like_mongod(server_uri):
    with _client(server_uri) as client:
        coll = client.oplatencies.counted
        coll.drop()
        coll.insert_many([{"_id": i, "n": i} for i in range(20)])

        before = _latencies(client)
        for kind in KINDS:
            assert set(before[kind]) >= {"latency", "ops"}
            # NumberLong, as mongod reports them.
            assert isinstance(before[kind]["ops"], Int64)
            assert isinstance(before[kind]["latency"], Int64)

        for i in range(7):
            assert coll.find_one({"_id": i})["n"] == i
        assert [d["_id"] for d in coll.find({"_id": {"$lt": 10}}, batch_size=4)] == list(
            range(10)
        )  # find + 2 getMore
        assert coll.count_documents({"n": {"$gte": 5}}) == 15  # an aggregate
        assert sorted(coll.distinct("n", {"n": {"$lt": 3}})) == [0, 1, 2]
        reads = _latencies(client)
        assert _grew(before, reads, "reads")[0] == 7 + 3 + 1 + 1
        assert _grew(before, reads, "reads")[1] > 0
        assert _grew(before, reads, "writes") == (0, 0)
        assert _grew(before, reads, "commands")[0] >= 1  # the first serverStatus

        coll.insert_one({"_id": 100})
        coll.insert_many([{"_id": 101}, {"_id": 102}])  # one insert command
        assert coll.update_one({"_id": 100}, {"$set": {"x": 1}}).modified_count == 1
        assert coll.update_many({"_id": {"$gt": 100}}, {"$set": {"x": 2}}).modified_count == 2
        assert coll.find_one_and_update({"_id": 101}, {"$inc": {"x": 1}})["x"] == 2
        assert coll.delete_one({"_id": 102}).deleted_count == 1
        writes = _latencies(client)
        assert _grew(reads, writes, "writes")[0] == 6
        assert _grew(reads, writes, "writes")[1] > 0
        assert _grew(reads, writes, "reads") == (0, 0)

        # Totals only grow.
        for kind in KINDS:
            for field in ("ops", "latency"):
                assert before[kind][field] <= reads[kind][field] <= writes[kind][field]


def test_unacknowledged_writes_apply_and_keep_the_connection(server_uri):
    # One connection, so every operation below goes over the one that sent the w:0 writes.
    with _client(server_uri, maxPoolSize=1) as client, _client(server_uri) as other:
        db = client.oplatencies
        db.unacked.drop()
        me = db.command("whatsmyuri")["you"]
        unacked = db.get_collection("unacked", write_concern=WriteConcern(w=0))

        # Unordered: pymongo sends ordered w:0 bulk writes acknowledged, batch by batch.
        result = unacked.insert_many(
            [{"_id": i, "pad": "x" * 100} for i in range(1000)], ordered=False
        )
        assert not result.acknowledged
        unacked.insert_one({"_id": "one"})
        unacked.insert_one({"_id": "one", "dup": True})  # fails: no answer, connection kept
        unacked.update_one({"_id": 0}, {"$set": {"updated": True}})

        # Unacknowledged: the second connection may look before the writes are applied.
        deadline = time.monotonic() + 10
        while True:
            count = other.oplatencies.unacked.count_documents({})
            updated = other.oplatencies.unacked.count_documents({"updated": True})
            if (count, updated) == (1001, 1) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert (count, updated) == (1001, 1)

        # The first connection still answers, and is the same connection.
        assert db.command("whatsmyuri")["you"] == me
        assert db.unacked.find_one({"_id": "one"}) == {"_id": "one"}
        assert db.unacked.count_documents({}) == 1001
        assert db.command("whatsmyuri")["you"] == me
