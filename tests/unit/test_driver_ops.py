"""Requests and reply checks of the multiplexed driver, on constructed replies."""

from __future__ import annotations

import functools
import random
import socket
import struct
import threading

import bson
import pytest
from bson.raw_bson import RawBSONDocument
from native_helpers import compiled

from mongobench.driver import multiplex, ops, replies
from mongobench.driver.base import ThreadStats
from mongobench.driver.docgen import DocFactory
from mongobench.driver.queries import compile_template


def message(doc: dict, response_to: int = 1) -> bytearray:
    body = b"\x00\x00\x00\x00\x00" + bson.encode(doc)
    return bytearray(struct.pack("<iiii", 16 + len(body), 9, response_to, ops.OP_MSG) + body)


def sections(msg) -> tuple[dict, dict[str, list]]:
    """(kind-0 document, {identifier: documents}) of an OP_MSG."""
    length, _, _, opcode = struct.unpack_from("<iiii", msg)
    assert opcode == ops.OP_MSG and length == len(msg)
    p, body, seqs = 20, None, {}
    while p < length:
        kind, p = msg[p], p + 1
        size = struct.unpack_from("<i", msg, p)[0]
        if kind == 0:
            body = bson.decode(bytes(msg[p : p + size]))
        else:
            z = msg.index(0, p + 4)
            name, q, docs = bytes(msg[p + 4 : z]).decode(), z + 1, []
            while q < p + size:
                n = struct.unpack_from("<i", msg, q)[0]
                docs.append(bson.decode(bytes(msg[q : q + n])))
                q += n
            seqs[name] = docs
        p += size
    return body, seqs


# ------------------------------------------------------------------------------ requests


def test_template_writes_values_and_request_id():
    k0, k1, k2 = ops.sentinel(0), ops.sentinel(1), ops.sentinel(2)
    t = ops.update_tmpl("db", "c", {"_id": k0}, {"$set": {"a": k1, "b": k2}}, [k0, k1, k2],
                        {"w": "majority"})  # fmt: skip
    buf = t.buffer()
    t.write(buf, 77, 5, -6, 2**40)
    assert struct.unpack_from("<i", buf, 4)[0] == 77
    body, _ = sections(buf)
    assert body == {
        "update": "c", "ordered": True,
        "updates": [{"q": {"_id": 5}, "u": {"$set": {"a": -6, "b": 2**40}}}],
        "writeConcern": {"w": "majority"}, "$db": "db",
    }  # fmt: skip


def test_template_refuses_a_missing_or_repeated_sentinel():
    k0 = ops.sentinel(0)
    with pytest.raises(ValueError, match="exactly once"):
        ops.Tmpl({"find": "c", "filter": {"a": k0, "b": k0}, "$db": "d"}, [k0])
    with pytest.raises(ValueError, match="exactly once"):
        ops.Tmpl({"find": "c", "$db": "d"}, [k0])


def test_pipeline_update_and_find_and_modify_encode_as_pymongo_sends_them():
    k0 = ops.sentinel(0)
    pipeline = [{"$set": {"n0": {"$add": ["$n0", 1]}}}]
    t = ops.update_tmpl("d", "c", {"_id": k0}, pipeline, [k0])
    buf = t.buffer()
    t.write(buf, 1, 3)
    assert sections(buf)[0]["updates"] == [{"q": {"_id": 3}, "u": pipeline}]
    t = ops.find_and_modify_tmpl("d", "c", {"_id": k0}, {"$inc": {"n": 1}}, [k0], upsert=True)
    buf = t.buffer()
    t.write(buf, 1, 4)
    body = sections(buf)[0]
    assert (body["query"], body["new"], body["upsert"]) == ({"_id": 4}, True, True)


def test_find_regex_and_in_templates():
    slot = "^" + ops.text_sentinel(3)
    t = ops.find_tmpl("d", "k", {"name": {"$regex": slot}}, [slot], ops.Find({"name": 1}, limit=10))
    buf = t.buffer()
    t.write(buf, 1, b"^abq")
    body = sections(buf)[0]
    assert body["filter"] == {"name": {"$regex": "^abq"}}
    assert (body["projection"], body["limit"]) == ({"name": 1}, 10)
    assert "skip" not in body and "batchSize" not in body

    settings = {"docs": 1000}
    template = {"_id": {"$in": "RANDINTLIST(0,docs,5)"}, "g": "RANDINT(3,9)"}
    compiled = compile_template(template, settings)
    t = ops.find_tmpl("d", "q", compiled.query, compiled.slots, ops.Find(skip=7, limit=5))
    buf = t.buffer()
    t.write(buf, 1, *compiled.values(random.Random(4)))
    body = sections(buf)[0]
    # One compiler: the same values from the same rng as the query the pymongo path sends.
    query = compiled(random.Random(4))
    assert body["filter"] == query
    assert len(query["_id"]["$in"]) == 5 and 3 <= query["g"] < 9
    assert (body["skip"], body["limit"]) == (7, 5)


def test_find_options_are_one_typed_object():
    """ops.Find: find_one as pymongo sends it, a batchSize no larger than the limit, and
    no option at all by default."""
    one = sections(ops.find_tmpl("d", "k", {"_id": 3}, [], ops.FIND_ONE).raw)[0]
    assert (one["limit"], one["singleBatch"]) == (1, True) and "projection" not in one
    capped = sections(ops.find_tmpl("d", "k", {}, [], ops.Find(limit=4, batch_size=10)).raw)[0]
    assert (capped["limit"], capped["batchSize"]) == (4, 4)
    bare = sections(ops.find_tmpl("d", "k", {}, []).raw)[0]
    assert bare == {"find": "k", "filter": {}, "$db": "d"}


def test_bulk_insert_is_a_document_sequence():
    bulk = ops.BulkInsert("d", "c", {"w": 1})
    docs = DocFactory(1024, "objectid", n_int_fields=2, seed=3)
    buf = bytearray(bulk.prefix_size() + 4 * docs.size)
    pos = bulk.write_prefix(buf, 5, 4 * docs.size)
    assert docs.write(buf, pos, 4) == 4 * docs.size
    body, seqs = sections(buf)
    assert body == {"insert": "c", "ordered": False, "$db": "d", "writeConcern": {"w": 1}}
    got = seqs["documents"]
    assert len(got) == 4
    ids = [d["_id"] for d in got]
    assert ids == sorted(ids) and len(set(ids)) == 4  # ObjectIds in order, as a driver makes them
    assert len({d["s0"] for d in got}) == 4  # fresh random text per document
    assert bulk.max_docs(docs.size) == (ops.MAX_MESSAGE - bulk.prefix_size()) // docs.size
    assert bulk.max_docs(100) == ops.MAX_WRITE_BATCH


@pytest.mark.parametrize("id_type", ["objectid", "uuid", "business_id", "serial"])
def test_doc_batch_makes_docfactory_documents(id_type):
    """A batch written into a message has the same fields, order, types and size as
    the documents `make` gives the pymongo path."""
    ref = DocFactory(4096, id_type, n_int_fields=3, seed=1)
    ref_doc = bson.decode((ref.make(_id=7) if id_type == "serial" else ref.make()).raw)
    docs = DocFactory(4096, id_type, n_int_fields=3, seed=1)
    buf = bytearray(2 * docs.size)
    docs.write(buf, 0, 2, [7, 8] if id_type == "serial" else None)
    a = bson.decode(bytes(buf[: docs.size]))
    b = bson.decode(bytes(buf[docs.size :]))
    assert docs.size == len(ref.make(_id=7).raw if id_type == "serial" else ref.make().raw)
    assert list(a) == list(ref_doc)
    assert [type(v) for v in a.values()] == [type(v) for v in ref_doc.values()]
    assert a["_id"] != b["_id"] and a["s1"] != b["s1"]
    assert all(0 <= a[f"i{k}"] < 1_000_000 for k in range(3))
    if id_type == "serial":
        assert (a["_id"], b["_id"]) == (7, 8)


# --------------------------------------------------------------------------- reply checks


def test_write_check_success_is_remembered_by_its_bytes():
    check = replies.WriteCheck("update")
    ok = message({"n": 1, "nModified": 1, "ok": 1.0})
    assert check(ok, len(ok)) == (None, 1, 1, 0, None, 0)
    assert len(check.memo) == 1
    assert check(ok, len(ok)) == (None, 1, 1, 0, None, 0)
    missed = message({"n": 0, "nModified": 0, "ok": 1.0})
    assert check(missed, len(missed))[:3] == (None, 0, 0)
    upserted = message({"n": 1, "nModified": 0, "upserted": [{"index": 0, "_id": 9}], "ok": 1})
    assert check(upserted, len(upserted))[:4] == (None, 1, 0, 1)
    assert len(check.memo) == 2  # the upserted reply (an _id in it) is not remembered


@pytest.mark.parametrize(
    "reply, bulk, kind, write_errors",
    [
        ({"n": 0, "writeErrors": [{"index": 0, "code": 11000, "errmsg": "E11000 dup"}], "ok": 1},
         False, "DuplicateKeyError", 1),
        ({"n": 0, "writeErrors": [{"index": 0, "code": 121, "errmsg": "invalid"}], "ok": 1},
         False, "WriteError", 1),
        ({"n": 3, "writeErrors": [{"index": 1, "code": 11000, "errmsg": "dup"},
                                  {"index": 4, "code": 11000, "errmsg": "dup"}], "ok": 1},
         True, "BulkWriteError", 2),
        ({"n": 1, "writeConcernError": {"code": 100, "errmsg": "no"}, "ok": 1},
         False, "WriteConcernError", 0),
        ({"n": 1, "writeConcernError": {"code": 64, "errmsg": "waiting"}, "ok": 1},
         False, "WTimeoutError", 0),
        ({"n": 5, "writeConcernError": {"code": 64, "errmsg": "waiting"}, "ok": 1},
         True, "BulkWriteError", 0),
        ({"ok": 0, "code": 10107, "errmsg": "not primary"}, False, "NotPrimaryError", 0),
        ({"ok": 0, "code": 11000, "errmsg": "dup"}, True, "DuplicateKeyError", 0),
        ({"ok": 0, "code": 50, "errmsg": "time"}, False, "ExecutionTimeout", 0),
        ({"ok": 0, "code": 2, "errmsg": "bad value"}, False, "OperationFailure", 0),
    ],
)  # fmt: skip
def test_write_errors_named_as_pymongo_raises_them(reply, bulk, kind, write_errors):
    msg = message(reply)
    out = replies.WriteCheck("insert", bulk=bulk)(msg, len(msg))
    assert out[0] == kind
    assert out[1] == reply.get("n", 0)
    assert out[5] == write_errors
    assert out[4]


def cursor_reply(docs, cid=0, batch="firstBatch", order="mongod", extra=None, ns="d.c"):
    if order == "mongod":
        cursor = {batch: docs, "id": bson.Int64(cid), "ns": ns}
    else:
        cursor = {"id": bson.Int64(cid), "ns": ns, batch: docs}
    return message({"cursor": cursor, "ok": 1.0, **(extra or {})})


@pytest.mark.parametrize("counter", ["compiled", "python"])
@pytest.mark.parametrize("order", ["mongod", "id first"])
def test_cursor_check_counts_documents_and_reads_the_cursor_id(order, counter, monkeypatch):
    if counter == "python":  # the memo and the Python walk: where the module is not built
        monkeypatch.setattr(replies, "_compiled_count", None)
    else:
        compiled()
    check = replies.CursorCheck("find")
    for n in (0, 1, 2, 101, 1, 1, 0):
        docs = [{"_id": i, "pad": "x" * (i % 7)} for i in range(n)]
        msg = cursor_reply(docs, cid=1000 + n, order=order)
        assert check(msg, len(msg)) == (None, n, 1000 + n, None)
    # Same length and layout, other content: the remembered shape still counts right.
    a = cursor_reply([{"_id": 1, "v": "aaaa"}], cid=5, order=order)
    b = cursor_reply([{"_id": 2, "v": "bbbb"}], cid=6, order=order)
    assert len(a) == len(b)
    assert check(a, len(a)) == (None, 1, 5, None)
    assert check(b, len(b)) == (None, 1, 6, None)
    c = cursor_reply([{}, {}], cid=7, order=order)
    d = cursor_reply([{"_id": 1}], cid=7, order=order)
    assert check(c, len(c))[1] == 2 and check(d, len(d))[1] == 1
    more = replies.CursorCheck("find", b"nextBatch")
    msg = cursor_reply([{}] * 3, cid=0, batch="nextBatch", order=order)
    assert more(msg, len(msg)) == (None, 3, 0, None)


@pytest.mark.parametrize("order", ["mongod", "id first"])
def test_one_layout_serves_replies_of_every_length(monkeypatch, order):
    """A find by key returns documents of varying sizes: after the first reply, replies
    of other lengths and batch sizes are checked from the layout, never walked (in both
    orders of the cursor's fields: mongod's, and the stand-in's, id first)."""
    cursor_reply = functools.partial(globals()["cursor_reply"], order=order)
    check = replies.CursorCheck("find")
    first = cursor_reply([{"_id": 0, "v": "a"}], cid=0)
    assert check(first, len(first)) == (None, 1, 0, None)
    monkeypatch.setattr(replies, "fields", None)  # from here on: no walking ...
    monkeypatch.setattr(replies.Check, "decoded", None)  # ... and no decoding
    rng = random.Random(5)
    for i in range(50):
        n = rng.choice((0, 1, 1, 2, 7, 101))
        docs = [{"_id": j, "v": "x" * rng.randrange(300)} for j in range(n)]
        msg = cursor_reply(docs, cid=i * 1000)
        assert check(msg, len(msg)) == (None, n, i * 1000, None)
    assert len(check.shapes) == 1
    # Replica-set fields vary in length too: one more layout, then no walking.
    monkeypatch.undo()
    rs = cursor_reply([{"_id": 1}], extra=replica_set_fields(0))
    assert check(rs, len(rs)) == (None, 1, 0, None)
    monkeypatch.setattr(replies, "fields", None)
    for i in range(1, 20):
        extra = replica_set_fields(i)
        extra["$clusterTime"]["signature"]["hash"] = bson.Binary(b"h" * (i % 5 + 18))
        msg = cursor_reply([{"_id": i, "v": "y" * i}] * (i % 3), cid=i, extra=extra)
        assert check(msg, len(msg)) == (None, i % 3, i, None)
    assert len(check.shapes) == 2


@pytest.mark.parametrize("order", ["mongod", "id first"])
def test_a_layout_does_not_hide_another_reply(order):
    """Replies that share a remembered layout's bytes in part are walked or decoded."""
    cursor_reply = functools.partial(globals()["cursor_reply"], order=order)
    check = replies.CursorCheck("find")
    ok = cursor_reply([{"_id": 0}], cid=0)
    assert check(ok, len(ok)) == (None, 1, 0, None)
    bad = bytearray(cursor_reply([{"_id": 1, "v": "long"}], cid=0))
    at = bad.index(b"\x01ok\x00") + 4
    bad[at : at + 8] = struct.pack("<d", 0.0)
    assert check(bad, len(bad))[0] == "OperationFailure"
    wce = cursor_reply([{"_id": 2}], cid=0, extra={"writeConcernError": {"code": 64}})
    assert check(wce, len(wce))[0] == "InvalidOperation"  # decoded, as before
    other_ns = cursor_reply([{"_id": 3}], cid=9, ns="d.other")
    assert check(other_ns, len(other_ns)) == (None, 1, 9, None)  # walked: a second layout
    assert len(check.shapes) == 2
    # A batch length that does not add up with the cursor's is not taken from the layout.
    broken = bytearray(cursor_reply([{"_id": 4}, {"_id": 5}], cid=0))
    a = broken.index(b"firstBatch\x00") + len(b"firstBatch\x00")
    struct.pack_into("<i", broken, a, struct.unpack_from("<i", broken, a)[0] - 1)
    assert check(broken, len(broken))[0] == "InvalidBSON"


def array_at(docs) -> tuple[bytes, int, int]:
    """An encoded array of `docs` inside a document: (bytes, its start, its end)."""
    raw = bson.encode({"a": docs})
    return raw, 7, len(raw) - 1  # after the length, type 4 and "a\x00"; before the final NUL


@pytest.mark.parametrize("n", [1, 2, 9, 10, 11, 99, 100, 101, 400, 1001])
def test_equal_size_documents_are_counted_from_the_last_key(n):
    raw, a, e = array_at([{"_id": i % 10, "v": "x" * 40} for i in range(n)])
    assert replies.equal_size_count(raw, a, e) == n == replies.count_elements(raw, a)


@pytest.mark.parametrize(
    "docs",
    [
        [],  # no documents
        [{"v": "x" * k} for k in (3, 4, 3)],  # the last one's size differs from the first
        [{"v": "x" * k} for k in (3, 4, 5)],
        [{"v": "xx"}, {"v": "x"}, {"v": "x"}],  # sizes differ; the last matches a later one
        [{"a": 1}, [1, 2], {"a": 2}],  # not only documents
        # a last document whose content ends like an element of the first one's size
        [{"v": "x"}, {"p": bson.Binary(b"\x03" + b"7\x00" + bson.encode({"v": "y"})[:-1])}],
        [{"v": "x"}, {"p": bson.Binary(b"\x00\x03" + b"7\x00" + bson.encode({"v": "y"})[:-1])}],
    ],
)
def test_other_arrays_are_not_guessed(docs):
    raw, a, e = array_at(docs)
    assert replies.equal_size_count(raw, a, e) == 0  # walked instead
    check = replies.CursorCheck("find")
    msg = cursor_reply(docs)
    assert check(msg, len(msg))[1] == len(docs)


def test_equal_sizes_in_the_middle_do_not_matter_when_the_last_key_is_found():
    docs = [{"v": "x" * k} for k in (5, 6, 4, 5)]  # first and last of one size
    raw, a, e = array_at(docs)
    assert replies.equal_size_count(raw, a, e) == 4  # the count is the last key's


def test_cursor_check_errors():
    check = replies.CursorCheck("find")
    msg = message({"ok": 0, "code": 43, "errmsg": "cursor id 5 not found"})
    assert check(msg, len(msg))[0] == "CursorNotFound"
    msg = message({"ok": 0, "code": 2, "errmsg": "bad query"})
    assert check(msg, len(msg))[0] == "OperationFailure"
    msg = message({"ok": 1})
    assert check(msg, len(msg))[0] == "InvalidOperation"
    ok = cursor_reply([{"a": 1}], cid=0)
    assert check(ok, len(ok))[0] is None
    # A learnt shape does not hide an error of the same length.
    bad = bytearray(ok)
    bad[bad.index(b"\x01ok\x00") + 4 : bad.index(b"\x01ok\x00") + 12] = struct.pack("<d", 0.0)
    assert check(bad, len(bad))[0] == "OperationFailure"


def test_find_and_modify_check():
    check = replies.FindAndModifyCheck("find_one_and_update")
    found = message({"lastErrorObject": {"n": 1, "updatedExisting": True},
                     "value": {"_id": 1, "count": 2}, "ok": 1.0})  # fmt: skip
    assert check(found, len(found)) == (None, True, False, None)
    missed = message({"lastErrorObject": {"n": 0, "updatedExisting": False}, "value": None,
                      "ok": 1.0})  # fmt: skip
    assert check(missed, len(missed)) == (None, False, False, None)
    upserted = message({"lastErrorObject": {"n": 1, "updatedExisting": False, "upserted": 5},
                        "value": {"_id": 5}, "ok": 1.0})  # fmt: skip
    assert check(upserted, len(upserted)) == (None, True, True, None)
    wce = message({"lastErrorObject": {"n": 1}, "value": {"_id": 5}, "ok": 1.0,
                   "writeConcernError": {"code": 64, "errmsg": "slow"}})  # fmt: skip
    assert check(wce, len(wce))[0] == "WTimeoutError"
    dup = message({"ok": 0, "code": 11000, "errmsg": "E11000"})
    assert check(dup, len(dup))[0] == "DuplicateKeyError"


def replica_set_fields(i: int) -> dict:
    """What a replica set adds to every reply (all of it varies)."""
    return {
        "$clusterTime": {"clusterTime": bson.Timestamp(1700000000 + i, 1),
                         "signature": {"hash": bson.Binary(bytes([i % 256]) * 20),
                                       "keyId": bson.Int64(7)}},
        "operationTime": bson.Timestamp(1700000000 + i, 1),
    }  # fmt: skip


def test_replica_set_replies_are_checked_without_decoding(monkeypatch):
    write, cursor = replies.WriteCheck("update"), replies.CursorCheck("read")
    first = cursor_reply([{"_id": 0, "v": "a"}], extra=replica_set_fields(0))
    assert cursor(first, len(first)) == (None, 1, 0, None)  # learns the layout
    monkeypatch.setattr(replies, "fields", None)  # from here on: no walking ...
    monkeypatch.setattr(replies.Check, "decoded", None)  # ... and no decoding
    for i in range(1, 4):
        reply = cursor_reply([{"_id": i, "v": "b"}], cid=0, extra=replica_set_fields(i))
        assert len(reply) == len(first)
        assert cursor(reply, len(reply)) == (None, 1, 0, None)
    monkeypatch.undo()
    for i in range(3):
        reply = message({"n": 1, "electionId": bson.ObjectId(), "opTime": {"ts": i},
                         "nModified": 1, "ok": 1.0, **replica_set_fields(i)})  # fmt: skip
        monkeypatch.setattr(replies.Check, "decoded", None)
        assert write(reply, len(reply)) == (None, 1, 1, 0, None, 0)
    assert not write.memo  # replies that vary are not remembered
    # The layout does not hide a field that is not a varying one.
    wce = message({"n": 1, "ok": 1.0, "writeConcernError": {"code": 64, "errmsg": "w"}})
    monkeypatch.undo()
    assert write(wce, len(wce))[0] == "WTimeoutError"


def test_undecodable_reply_is_an_error():
    msg = message({"n": 1, "ok": 1})
    msg[25] = 0x7A  # an unknown BSON type
    assert replies.WriteCheck("update")(msg, len(msg))[0] == "InvalidBSON"
    assert replies.CursorCheck("find")(msg, len(msg))[0] == "InvalidBSON"


# --------------------------------------------------------------------------- the loop


def fake_server(sock, replies, split_at=None):
    """Answers each request with the next reply (response_to = its request id)."""
    f = sock.makefile("rb")
    for reply in replies:
        head = f.read(16)
        if len(head) < 16:
            return
        length, rid = struct.unpack_from("<ii", head)
        f.read(length - 16)
        reply = bytearray(reply)
        struct.pack_into("<i", reply, 8, rid)
        if split_at:  # the reply in two pieces: the loop must wait for the rest
            sock.sendall(reply[:split_at])
            threading.Event().wait(0.05)
            sock.sendall(reply[split_at:])
        else:
            sock.sendall(reply)
    sock.close()


def test_loop_latency_partial_and_large_replies_and_a_closed_connection():
    big = cursor_reply([{"pad": "y" * 50_000}])  # larger than the client's buffer
    small = message({"n": 1, "nModified": 1, "ok": 1.0})
    pairs = [socket.socketpair() for _ in range(3)]
    scripts = [([small] * 5, 10), ([big] * 3, None), ([small] * 2, None)]  # 3rd: closes early
    servers = [
        threading.Thread(target=fake_server, args=(b, r, s), daemon=True)
        for (_, b), (r, s) in zip(pairs, scripts, strict=True)
    ]
    for t in servers:
        t.start()
    ping = ops.Tmpl({"ping": 1, "$db": "admin"})

    def source(c):
        write_like = c.index != 1
        check = replies.WriteCheck("w") if write_like else replies.CursorCheck("r")
        buf = ping.buffer()
        for _ in range(5 if c.index != 1 else 3):
            ping.write(buf, c.rid)
            t0 = multiplex.time.perf_counter()
            out = yield buf, check
            assert out[0] is None
            c.stats.latency.record(check.op, (c.run.now - t0) * 1e6)
            c.stats.ops[check.op] += 1

    run, stats = multiplex.Run(), ThreadStats()
    members = [multiplex.Client(i, 3, run, stats) for i in range(3)]
    for a, _ in pairs:
        a.setblocking(False)
    multiplex.Loop([a for a, _ in pairs], members, source, run, stats, timeout=5).run_all()
    assert dict(stats.ops) == {"w": 7, "r": 3}
    assert dict(stats.errors) == {"w: AutoReconnect": 1}
    hist = stats.latency.histograms["w"]
    assert hist.get_total_count() == 7
    assert hist.get_max_value() >= 40_000  # the split replies waited 50 ms for their rest


def test_client_quota_split():
    run, stats = multiplex.Run(), ThreadStats()
    quotas = [multiplex.Client(i, 3, run, stats, total=10).quota for i in range(3)]
    assert quotas == [4, 3, 3]
    assert multiplex.Client(0, 3, run, stats).quota is None


def test_placeholder_document_is_found_in_a_template():
    docs = DocFactory(1024, "serial", seed=1)
    k0 = ops.sentinel(0)
    t = ops.update_tmpl("d", "c", {"_id": k0}, RawBSONDocument(docs.raw), [k0])
    at = t.raw.index(docs.raw)
    buf = t.buffer()
    t.write(buf, 1, 42)
    docs.write(buf, at, 1, (42,))
    body = sections(buf)[0]
    assert body["updates"][0]["q"] == {"_id": 42}
    assert body["updates"][0]["u"]["_id"] == 42
