"""One declaration, two executors (driver.workload): the multiplexed executor's requests
and the pymongo executor's calls carry the same statements, drawn from the same seeds,
and count the same; no server (the cross-path integration test runs both on the stand-in)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import bson
import pytest

from mongobench.driver import multiplex, ops, protocol, sources
from mongobench.driver.base import ThreadStats
from mongobench.driver.catalog import WORKLOADS
from mongobench.driver.docgen import DocFactory
from mongobench.driver.workload import (
    CursorRead,
    Declared,
    KeyedDelete,
    KeyedMix,
    KeyedUpsert,
    KeyedWrite,
    Split,
)
from mongobench.driver.writes import Inserts, Records
from mongobench.driver.zipfian import Zipfian

OPS = 5
DECLARED = {
    "hot_update": {"preload_docs": 10, "doc_size_kb": 1, "threads": 1},
    "update_fields": {"preload_docs": 500, "doc_size_kb": 1, "threads": 1, "n_fields": 3,
                      "doc_range": 400, "expressive": True},
    "replace": {"preload_docs": 500, "doc_size_kb": 1, "threads": 1, "doc_range": 500},
    "update_indexed": {"preload_docs": 500, "doc_size_kb": 1, "threads": 1, "indexes": 3,
                       "update_indexed_fields": True},
    "update_indexed_inc": {"preload_docs": 500, "doc_size_kb": 1, "threads": 1, "indexes": 3,
                           "update_indexed_fields": False},
    "query": {"preload_docs": 1000, "doc_size_kb": 1, "group_size": 100, "threads": 1,
              "limit": 4, "skip": 2, "query": {"_id": {"$in": "RANDINTLIST(0,docs,4)"},
                                                "group": "RANDINT(0,groups)"}},
    "aggregate": {"preload_docs": 1000, "doc_size_kb": 1, "group_size": 100, "threads": 1,
                  "pipeline": [{"$match": {"group": "RANDINT(0,groups)"}}]},
    "regex_prefix": {"preload_docs": 1000, "threads": 1, "prefix_len": 3, "limit": 4},
    # data-bounded: each key deleted once (delete_many: 3 keys an operation, the last 2;
    # every delete here deletes one document, so delete_many falls short)
    "delete_one": {"preload_docs": OPS, "doc_size_kb": 1, "threads": 1, "docs_per_delete": 1},
    "delete_many": {"preload_docs": 11, "doc_size_kb": 1, "threads": 1, "docs_per_delete": 3},
    # a zipfian key, then a read or an update; the fakes find no document of a key % 3 == 0
    "read_update": {"preload_docs": 500, "doc_size_kb": 1, "threads": 1, "read_proportion": 0.5,
                    "driver": "pymongo", "total_ops": 40},
    # new keys (>= 10**9) miss: upserted, or inserted after the miss
    **{f"update_api_{fn}_{'upsert' if up else 'fallback'}": {
        "preload_docs": 500, "doc_size_kb": 1, "threads": 1, "total_ops": 20, "function": fn,
        "upsert": up, "percent_new": 40} for fn in ("update_one", "find_one_and_update")
       for up in (True, False)},
    # data-bounded inserts: 8 documents in batches of 3, 3, 2 (serial: after the preload's 4)
    "insert_bulk": {"doc_size_kb": 0.25, "total_docs": 8, "batch_size": 3, "threads": 1,
                    "id_type": "uuid", "secondary_indexes": 2},
    "insert_one": {"doc_size_kb": 0.25, "total_docs": 4, "batch_size": 1, "threads": 1,
                   "id_type": "business_id"},
    "insert_serial": {"doc_size_kb": 0.25, "total_docs": 8, "batch_size": 3, "threads": 1,
                      "id_type": "serial", "preload_docs": 4},
    # mixed: the one client inserts (insert_threads 1) or finds (0)
    "mixed": {"preload_docs": 1000, "doc_size_kb": 0.25, "group_size": 100, "threads": 1,
              "insert_threads": 1, "query": {"_id": "RANDINT(0,docs)"}},
    "mixed_find": {"preload_docs": 1000, "doc_size_kb": 1, "group_size": 100, "threads": 1,
                   "insert_threads": 0, "query": {"_id": "RANDINT(0,docs)"}, "expect_full": False},
    # each record once: 7 pushed into buckets of 3, or inserted one by one
    "bucket_push": {"records": 7, "bucket_size": 3, "threads": 1},
    "bucket_insert": {"records": 6, "bucket_size": 0, "threads": 1},
}  # fmt: skip
RUNS = {  # operations, where not OPS
    "delete_one": 5, "delete_many": 4, "read_update": 40, "insert_bulk": 3, "insert_one": 4,
    "insert_serial": 3, "bucket_push": 7, "bucket_insert": 6,
}  # fmt: skip
RUNS.update((case, 20) for case in DECLARED if case.startswith("update_api"))
LIMIT = 4  # documents every cursor returns here
NEW = 10**9  # update_api's new keys start beyond


class FakeColl:
    """What the pymongo executor calls, recorded; every write matches and modifies one
    document, every cursor returns LIMIT documents."""

    def __init__(self):
        self.calls = []

    def update_one(self, q, u, upsert=False):
        self.calls.append({"q": q, "u": _plain(u), **_upsert(upsert)})
        hit = q["_id"] < NEW
        return SimpleNamespace(matched_count=int(hit), modified_count=int(hit),
                               upserted_id=None if hit or not upsert else q["_id"])  # fmt: skip

    def find_one_and_update(self, q, u, upsert, return_document):
        assert return_document  # the document after the update
        self.calls.append({"q": q, "u": _plain(u), "upsert": upsert})
        return {} if q["_id"] < NEW or upsert else None

    def insert_one(self, doc):
        self.calls.append({"documents": [_doc(doc)]})

    def insert_many(self, docs, ordered):
        assert ordered is False
        self.calls.append({"documents": [_doc(d) for d in docs]})

    def find_one(self, q):
        self.calls.append({"filter": q, "projection": None, "limit": 1, "single": True})
        return {} if q["_id"] % 3 else None

    def delete_one(self, q):
        self.calls.append({"q": q, "limit": 1})
        return SimpleNamespace(deleted_count=1)

    def delete_many(self, q):
        self.calls.append({"q": q, "limit": 0})
        return SimpleNamespace(deleted_count=1)

    def replace_one(self, q, doc):
        self.calls.append({"q": q, "u": bson.decode(doc.raw)})
        return SimpleNamespace(matched_count=1, modified_count=1)

    def find(self, query, projection):
        call = {"filter": query, "projection": projection}
        self.calls.append(call)
        cursor = SimpleNamespace()

        def skip(n):
            call["skip"] = n
            return cursor

        def limit(n):
            call["limit"] = n
            return [{}] * LIMIT

        cursor.skip, cursor.limit = skip, limit
        return cursor

    def aggregate(self, pipeline):
        self.calls.append({"pipeline": pipeline})
        return [{}] * LIMIT


def _plain(u):
    """An update as it goes on the wire (its documents decoded, as the sent bodies are)."""
    return bson.decode(bson.encode({"u": u}))["u"]


def _upsert(upsert):
    return {"upsert": True} if upsert else {}


def _doc(doc) -> dict:
    """A document as the server would store it, less what differs between two runs of one
    declaration: a record's time, an ObjectId's (its time and the process's random bytes)."""
    doc = bson.decode(doc.raw) if hasattr(doc, "raw") else doc
    if not isinstance(doc, dict):  # a pipeline update
        return doc
    doc = {k: v for k, v in doc.items() if k != "ts"}
    if isinstance(doc.get("_id"), bson.ObjectId):
        doc["_id"] = "ObjectId"
    for stmt in doc.get("$push", {}).values():
        stmt.pop("ts", None)
    return doc


def _workload(case):
    name = {"update_indexed_inc": "update_indexed", "mixed_find": "mixed"}.get(case, case)
    name = case.split("_")[0] if case.startswith(("delete", "insert", "bucket")) else name
    name = "update_api" if case.startswith("update_api") else name
    return name, {"total_ops": OPS, **DECLARED[case]}


def _sent(data) -> dict:
    """An OP_MSG request: its command, with the documents of a document sequence."""
    data = bytes(data)
    end = 21 + int.from_bytes(data[21:25], "little")
    body = bson.decode(data[21:end])
    if end < len(data):  # kind 1: int32 size, "documents\0", the documents
        assert data[end] == 1
        at = data.index(b"\0", end + 5) + 1
        body["documents"] = bson.decode_all(data[at:])
    if "documents" in body:
        body["documents"] = [_doc(d) for d in body["documents"]]
    for stmt in body.get("updates", ()):
        stmt["u"] = _doc(stmt["u"])
    return body


def _reply(body: dict) -> dict:
    """The fakes' answer on the wire: what FakeColl answers the pymongo executor."""
    if "findAndModify" in body:
        key, hit = body["query"]["_id"], body["query"]["_id"] < NEW
        found = hit or body["upsert"]
        leo = {"n": int(found), "updatedExisting": hit, **({} if hit else {"upserted": key})}
        return {"lastErrorObject": leo if found else {"n": 0}, "value": {"_id": key} if found
                else None, "ok": 1.0}  # fmt: skip
    if "updates" in body and body["updates"][0].get("upsert"):
        key = body["updates"][0]["q"]["_id"]
        if key >= NEW:
            return {"n": 1, "nModified": 0, "upserted": [{"index": 0, "_id": key}], "ok": 1.0}
    if "updates" in body:
        n = int(body["updates"][0]["q"]["_id"] < NEW)
        return {"n": n, "nModified": n, "ok": 1.0}
    if "insert" in body:
        return {"n": len(body["documents"]), "ok": 1.0}
    if "delete" in body:
        return {"n": 1, "ok": 1.0}
    n = (1 if body["filter"]["_id"] % 3 else 0) if body.get("singleBatch") else LIMIT
    batch = {"firstBatch": [{}] * n, "id": bson.Int64(0), "ns": "db.c"}
    return {"cursor": batch, "ok": 1.0}


def nonzero(counts) -> dict:
    return {k: v for k, v in counts.items() if v}


def run_pymongo(case):
    name, s = _workload(case)
    coll = FakeColl()
    w = WORKLOADS[name](None, s)
    w.collection = lambda name: coll
    stats = ThreadStats()
    w.worker(0, 1, stats, threading.Event())
    return coll.calls, stats


def run_multiplexed(case):
    """The multiplexed executor's requests (decoded), each answered with a success."""
    name, s = _workload(case)
    stats = ThreadStats()
    client = multiplex.Client(0, 1, multiplex.Run(), stats, s["total_ops"])
    gen = sources.make(name, s, "db", None)(client)
    sent, out = [], None
    while True:
        try:
            data, check = gen.send(out) if out is not None else next(gen)
        except StopIteration:
            return sent, stats
        sent.append(_sent(data))
        msg = bytearray(protocol.encode_msg(_reply(sent[-1]), 9))
        out = check(msg, len(msg))


@pytest.mark.parametrize("case", sorted(DECLARED))
def test_both_executors_send_and_count_the_same(case):
    assert issubclass(WORKLOADS[_workload(case)[0]], Declared)
    calls, ref = run_pymongo(case)
    sent, mine = run_multiplexed(case)
    assert len(sent) == len(calls)
    for body, call in zip(sent, calls, strict=True):
        if "deletes" in body:
            assert body["deletes"][0] == call
        elif "updates" in body:
            stmt = body["updates"][0]
            call = dict(call, u=_doc(call["u"]))  # a bucket's record: less its time
            assert {"q": stmt["q"], "u": stmt["u"], **_upsert(stmt.get("upsert"))} == call
        elif "findAndModify" in body:
            assert body["new"] is True
            assert {"q": body["query"], "u": body["update"], "upsert": body["upsert"]} == call
        elif "insert" in body:
            assert body["documents"] == call["documents"]
        elif "aggregate" in body:
            assert body["pipeline"] == call["pipeline"]
        else:
            assert body["filter"] == call["filter"]
            assert body.get("projection") == call["projection"]
            assert body.get("skip", 0) == call.get("skip", 0)
            assert body["limit"] == call["limit"]
            assert body.get("singleBatch", False) == call.get("single", False)
    keys = [c.get("q", c.get("filter", c.get("pipeline", c.get("documents")))) for c in calls]
    if case not in ("hot_update", "mixed"):  # the values change per operation
        assert len({repr(k) for k in keys}) > 1
    assert dict(mine.ops) == dict(ref.ops)
    missed = mine.errors["read: RuntimeError"] if case == "read_update" else 0  # not found
    assert sum(mine.ops.values()) + missed == RUNS.get(case, OPS)
    assert (mine.docs, mine.bytes) == (ref.docs, ref.bytes)
    assert dict(mine.errors) == dict(ref.errors)
    assert dict(mine.error_samples) == dict(ref.error_samples)
    assert nonzero(mine.counters) == nonzero(ref.counters)
    mine_counts = {op: h.get_total_count() for op, h in mine.latency.histograms.items()}
    assert mine_counts == {op: h.get_total_count() for op, h in ref.latency.histograms.items()}
    # the audit's sampled ids: the first documents of the first two batches (an ObjectId
    # differs between two factories: its time and the process's random bytes)
    assert len(mine.written_ids) == len(ref.written_ids)
    assert len(ref.written_ids) == (2 if case.startswith("insert") or case == "mixed" else 0)
    if case != "mixed":
        assert mine.written_ids == ref.written_ids
    if case == "insert_serial":  # after the preload's 0..3
        assert [d["_id"] for c in calls for d in c["documents"]] == list(range(4, 12))
    # delete_many's ranges [0,3) [3,6) [6,9) [9,11), one document deleted of each
    if case == "read_update":  # both operations drawn; a read of a missing document an error
        assert set(mine.ops) == {"read", "update"} and missed > 0
        assert mine.error_samples == {"read: RuntimeError": "document not found"}
        assert mine.docs == mine.ops["read"] + mine.ops["update"]
    elif case.startswith("update_api"):  # new keys inserted or upserted, the others matched
        fn = DECLARED[case]["function"]
        assert mine.ops[fn] == RUNS[case] == mine.docs
        new, existing = mine.counters["new_keys"], mine.counters["existing_keys"]
        assert new and existing and new + existing == RUNS[case]
        fallback = 0 if DECLARED[case]["upsert"] else new
        assert mine.counters["fallback_inserts"] == fallback
        assert len(sent) == RUNS[case] + fallback
    else:
        assert dict(mine.errors) == ({"delete: RuntimeError": 7} if case == "delete_many" else {})


def test_deletes_walk_each_clients_share_once():
    d = WORKLOADS["delete"](None, dict(DECLARED["delete_many"], preload_docs=10)).declare()
    assert isinstance(d, KeyedDelete) and d.op == "delete_many"
    assert [list(d.steps(i, 2)) for i in range(2)] == [[(0, 3), (3, 5)], [(5, 8), (8, 10)]]
    with pytest.raises(ValueError, match="docs_per_delete must be >= 1, not 0"):
        KeyedDelete("c", 10, 0)


def test_filler_puts_values_where_the_sentinels_are():
    k0, t = ops.sentinel(0), "^" + ops.text_sentinel(2)
    fill = ops.filler({"_id": k0, "a": [k0, 3], "name": {"$regex": t}, "x": "y"}, (k0, t))
    assert fill((7, b"^ab")) == {"_id": 7, "a": [7, 3], "name": {"$regex": "^ab"}, "x": "y"}
    assert ops.filler({"n": 5})(()) == {"n": 5}


def test_declarations_refuse_what_no_executor_runs():
    k0 = ops.sentinel(0)
    with pytest.raises(ValueError, match="counted must be n or nModified"):
        KeyedWrite("update", "c", {"_id": k0}, {"$inc": {"n": 1}}, (k0,), counted="matched")
    with pytest.raises(ValueError, match="not both"):
        KeyedWrite("update", "c", {"_id": k0}, None, (k0,), keys=5)
    with pytest.raises(ValueError, match="addressed by keys"):
        KeyedWrite("replace", "c", {"_id": k0}, None, (k0,), doc=lambda i: None)
    with pytest.raises(ValueError, match="one value of one slot"):
        KeyedWrite("update", "c", {"_id": 0}, {"$inc": {"n": 1}}, keys=5)
    with pytest.raises(ValueError, match="find or aggregate"):
        CursorRead("count", "c", {})
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        Inserts("c", lambda idx: None, batch=0)
    serial = Inserts("c", lambda idx: DocFactory(64, "serial"))
    with pytest.raises(ValueError, match="serial _ids are numbered in a total"):
        serial.factory(0)
    with pytest.raises(ValueError, match="insert or update, not 'delete'"):
        Records("r", "c", 5, "delete", (), dict)


def test_an_upsert_that_neither_matched_nor_inserted_is_an_error_on_both_executors():
    """pymongo's executor counts it as the multiplexed one does (the removed pymongo worker
    raised it out of the client thread)."""
    s = dict(DECLARED["update_api_update_one_upsert"], total_ops=6, percent_new=100)
    coll = FakeColl()
    coll.update_one = lambda q, u, upsert: SimpleNamespace(matched_count=0, upserted_id=None)
    w = WORKLOADS["update_api"](None, s)
    w.collection = lambda name: coll
    ref = ThreadStats()
    w.worker(0, 1, ref, threading.Event())
    mine = ThreadStats()
    gen = sources.make("update_api", s, "db", None)(
        multiplex.Client(0, 1, multiplex.Run(), mine, 6)
    )
    out = None
    while True:
        try:
            _, check = gen.send(out) if out is not None else next(gen)
        except StopIteration:
            break
        msg = bytearray(protocol.encode_msg({"n": 0, "nModified": 0, "ok": 1.0}, 9))
        out = check(msg, len(msg))
    for stats in (ref, mine):
        assert dict(stats.errors) == {"update_one: RuntimeError": 6}
        assert stats.error_samples == {"update_one: RuntimeError": KeyedUpsert.MISSED}
        assert not stats.ops and not stats.counters and stats.docs == 0


def test_keyed_mix_and_upsert_refuse_what_no_executor_runs():
    k0 = ops.sentinel(0)
    with pytest.raises(ValueError, match="function must be one of"):
        WORKLOADS["update_api"](None, dict(DECLARED["update_api_update_one_upsert"],
                                           function="replace_one")).declare()  # fmt: skip
    with pytest.raises(ValueError, match="its key and the operation's number"):
        KeyedMix("c", Zipfian(10), 0.5, {"_id": k0}, {"$set": {"n": 1}}, (k0,))


def test_split_gives_the_first_clients_the_head():
    d = WORKLOADS["mixed"](None, DECLARED["mixed"] | {"threads": 3, "insert_threads": 2}).declare()
    assert isinstance(d, Split) and isinstance(d.head, Inserts) and not d.head.count_bytes
    assert [type(d.pick(i)) for i in range(3)] == [Inserts, Inserts, CursorRead]
    b = WORKLOADS["insert"](None, DECLARED["insert_bulk"] | {"threads": 3}).declare()
    assert [list(b.steps(i, 3)) for i in range(3)] == [[(0, 3)], [(3, 3)], [(6, 2)]]
    assert [b.sizes(i, 3) for i in range(3)] == [{3}, {3}, {2}]
