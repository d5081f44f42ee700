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
from mongobench.driver.workload import CursorRead, Declared, KeyedDelete, KeyedWrite

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
}  # fmt: skip
RUNS = {"delete_one": 5, "delete_many": 4}  # operations, where not OPS
LIMIT = 4  # documents every cursor returns here


class FakeColl:
    """What the pymongo executor calls, recorded; every write matches and modifies one
    document, every cursor returns LIMIT documents."""

    def __init__(self):
        self.calls = []

    def update_one(self, q, u):
        self.calls.append({"q": q, "u": u})
        return SimpleNamespace(matched_count=1, modified_count=1)

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


def _workload(case):
    name = "update_indexed" if case == "update_indexed_inc" else case
    name = "delete" if case.startswith("delete") else name
    return name, dict(DECLARED[case], total_ops=OPS)


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
    gen = sources.make(name, s, "db", None)(multiplex.Client(0, 1, multiplex.Run(), stats, OPS))
    sent, out = [], None
    while True:
        try:
            data, check = gen.send(out) if out is not None else next(gen)
        except StopIteration:
            return sent, stats
        sent.append(protocol._reply_doc(bytes(data)))
        if "update" in sent[-1] or "delete" in sent[-1]:
            reply = {"n": 1, "nModified": 1, "ok": 1.0}
        else:
            batch = {"firstBatch": [{}] * LIMIT, "id": bson.Int64(0), "ns": "db.c"}
            reply = {"cursor": batch, "ok": 1.0}
        msg = bytearray(protocol.encode_msg(reply, 9))
        out = check(msg, len(msg))


@pytest.mark.parametrize("case", sorted(DECLARED))
def test_both_executors_send_and_count_the_same(case):
    assert issubclass(WORKLOADS[_workload(case)[0]], Declared)
    calls, ref = run_pymongo(case)
    sent, mine = run_multiplexed(case)
    assert len(sent) == len(calls) == RUNS.get(case, OPS)
    for body, call in zip(sent, calls, strict=True):
        if "deletes" in body:
            assert body["deletes"][0] == call
        elif "updates" in body:
            stmt = body["updates"][0]
            assert {"q": stmt["q"], "u": stmt["u"]} == call
        elif "aggregate" in body:
            assert body["pipeline"] == call["pipeline"]
        else:
            assert body["filter"] == call["filter"]
            assert body["projection"] == call["projection"]
            assert body.get("skip", 0) == call.get("skip", 0)
            assert body["limit"] == call["limit"]
    keys = [c.get("q", c.get("filter", c.get("pipeline"))) for c in calls]
    if case != "hot_update":  # the values change per operation
        assert len({repr(k) for k in keys}) > 1
    assert dict(mine.ops) == dict(ref.ops) and sum(mine.ops.values()) == RUNS.get(case, OPS)
    assert (mine.docs, mine.bytes) == (ref.docs, ref.bytes)
    assert dict(mine.errors) == dict(ref.errors)
    assert dict(mine.error_samples) == dict(ref.error_samples)
    # delete_many's ranges [0,3) [3,6) [6,9) [9,11), one document deleted of each
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
