import collections
import random
import socket
import struct
import threading
import time

import bson
import pytest

from mongobench.core import latency
from mongobench.driver import connection, ops, protocol
from mongobench.driver.readupdate import _found_one, _updated_one
from mongobench.driver.zipfian import Zipfian


def written(t: ops.Tmpl, rid: int, *values) -> bytes:
    buf = t.buffer()
    t.write(buf, rid, *values)
    return bytes(buf)


def test_template_patches_id_and_values():
    s = ops.sentinel(0)
    t = ops.Tmpl({"find": "kv", "filter": {"_id": s}, "$db": "d"}, [s])
    msg = written(t, 42, 7)
    length, rid, to, opcode = struct.unpack("<iiii", msg[:16])
    assert (length, rid, to, opcode) == (len(msg), 42, 0, protocol.OP_MSG)
    assert bson.decode(msg[21:]) == {"find": "kv", "filter": {"_id": 7}, "$db": "d"}
    assert msg == protocol.encode_msg(
        {"find": "kv", "filter": {"_id": bson.Int64(7)}, "$db": "d"}, 42
    )
    with pytest.raises(ValueError, match="exactly once"):
        ops.Tmpl({"a": s, "b": s}, [s])


def test_template_with_two_values_in_either_order():
    a, b, c = ops.sentinel(1), ops.sentinel(2), ops.sentinel(3)
    cmd = {"u": {"$set": {"n0": b}}, "q": {"_id": a}, "$db": "d"}
    t = ops.Tmpl(cmd, [a, b])  # a comes after b in the message
    buf = bytearray(t.size + 3)
    t.write(memoryview(buf)[3:], 9, 11, 22)  # at an offset, as the pipelined driver packs
    expected = protocol.encode_msg(
        {"u": {"$set": {"n0": bson.Int64(22)}}, "q": {"_id": bson.Int64(11)}, "$db": "d"}, 9
    )
    assert bytes(buf[3:]) == expected == written(t, 9, 11, 22)
    three = ops.Tmpl({"a": a, "b": b, "c": c}, [b, c, a])
    assert bson.decode(written(three, 1, 5, 6, 4)[21:]) == {"a": 4, "b": 5, "c": 6}


def test_options_from_the_uri():
    o = connection.options(
        "mongodb://us%3Aer:p%40ss@h1,h2:27018/mydb?replicaSet=rs0&ssl=true"
        "&tlsAllowInvalidHostnames=true&authMechanism=SCRAM-SHA-1"
    )
    assert o.seeds == [("h1", 27017), ("h2", 27018)]
    assert (o.username, o.password, o.auth_source, o.mechanism) == (
        "us:er",
        "p@ss",
        "mydb",
        "SCRAM-SHA-1",
    )
    assert o.tls and o.tls_allow_invalid_hostnames and not o.tls_allow_invalid_certs
    assert o.replica_set == "rs0" and not o.direct
    assert "p@ss" not in repr(o)  # secrets stay out of logs
    o = connection.options(
        "mongodb://u:secret@h/db?authSource=other&tls=true&tlsInsecure=true&directConnection=true"
    )
    assert o.auth_source == "other" and o.tls and o.tls_allow_invalid_certs and o.direct
    assert "secret" not in repr(o)
    assert o.write_concern is None
    o = connection.options("mongodb://h:1/?w=majority&wTimeoutMS=500&journal=true")
    assert (o.username, o.auth_source, o.tls, o.seeds) == (None, "admin", False, [("h", 1)])
    assert o.write_concern == {"w": "majority", "wtimeout": 500, "j": True}
    with pytest.raises(protocol.WireError, match="not MONGODB-X509") as e:
        connection.options("mongodb://u:pw9@h/?authMechanism=MONGODB-X509&tls=true")
    assert "pw9" not in str(e.value)


def test_srv_uri_resolves_to_tls_seeds(monkeypatch):
    """mongodb+srv:// goes through pymongo's resolver: hosts from SRV, options from TXT,
    TLS on by default."""
    from pymongo.synchronous import srv_resolver

    monkeypatch.setattr(
        srv_resolver._SrvResolver,
        "get_hosts",
        lambda self: [("a.cluster0.example.net", 27017), ("b.cluster0.example.net", 27017)],
    )
    monkeypatch.setattr(
        srv_resolver._SrvResolver, "get_options", lambda self: "authSource=admin&replicaSet=atlas-x"
    )
    o = connection.options("mongodb+srv://u:pw@cluster0.example.net/")
    assert o.seeds == [("a.cluster0.example.net", 27017), ("b.cluster0.example.net", 27017)]
    assert o.tls and o.replica_set == "atlas-x" and o.auth_source == "admin"


class _FakeConn:
    """What find_primary sees of a server: its hello reply (recorded shapes)."""

    def __init__(self, hello):
        self._hello, self.closed = hello, False

    def hello(self, o):
        return self._hello

    def close(self):
        self.closed = True


RS = {"setName": "rs0", "hosts": ["a:1", "b:2", "c:3"], "ok": 1.0}


def _opener(servers, opened):
    def open_(host, port):
        opened.append(f"{host}:{port}")
        if f"{host}:{port}" not in servers:
            raise ConnectionRefusedError(111, "Connection refused")
        return _FakeConn(servers[f"{host}:{port}"])

    return open_


def test_find_primary_follows_the_primary_and_never_settles_for_a_secondary():
    servers = {
        "a:1": {**RS, "secondary": True, "isWritablePrimary": False, "primary": "c:3"},
        "b:2": {**RS, "secondary": True, "isWritablePrimary": False, "primary": "c:3"},
        "c:3": {**RS, "isWritablePrimary": True, "primary": "c:3"},
    }
    opened = []
    o = connection.Options(seeds=[("x", 9), ("a", 1)], replica_set="rs0")
    conn, hello = connection.find_primary(o, _opener(servers, opened))
    assert hello is servers["c:3"] and opened == ["x:9", "a:1", "c:3"]
    # No primary (election in progress): every member is asked, then a clear error.
    no_primary = {k: {**RS, "secondary": True, "isWritablePrimary": False} for k in servers}
    opened = []
    with pytest.raises(protocol.WireError, match="found none.*a:1 is a secondary") as e:
        connection.find_primary(connection.Options(seeds=[("a", 1)]), _opener(no_primary, opened))
    assert sorted(opened) == ["a:1", "b:2", "c:3"] and "c:3 is a secondary" in str(e.value)
    # directConnection to a secondary: refused, not followed.
    opened = []
    with pytest.raises(protocol.WireError, match="a:1 is a secondary"):
        connection.find_primary(
            connection.Options(seeds=[("a", 1)], direct=True), _opener(servers, opened)
        )
    assert opened == ["a:1"]
    # Standalone, mongos, legacy isMaster replies.
    for reply in ({"ismaster": True, "ok": 1}, {"msg": "isdbgrid", "ismaster": True, "ok": 1}):
        conn, hello = connection.find_primary(
            connection.Options(seeds=[("s", 1)]), _opener({"s:1": reply}, [])
        )
        assert hello is reply
    # A standalone is not the replica set the URI names.
    with pytest.raises(protocol.WireError, match="not a member of replica set rs0"):
        connection.find_primary(
            connection.Options(seeds=[("s", 1)], replica_set="rs0"),
            _opener({"s:1": {"ismaster": True, "ok": 1}}, []),
        )
    assert connection.server_role({**RS, "arbiterOnly": True}) == "arbiter"


def test_zipfian_is_skewed_and_in_range():
    z = Zipfian(10_000)
    rng = random.Random(3)
    keys = [z.key(rng.random()) for _ in range(50_000)]
    assert min(keys) >= 0 and max(keys) < 10_000
    top = collections.Counter(keys).most_common(10)
    # With theta 0.99 the ten hottest keys take a large share; uniform would give 0.1 %.
    assert sum(c for _, c in top) / len(keys) > 0.2
    assert len(set(keys)) > 2_000
    big = Zipfian(100_000_000)  # zeta by integral beyond 10^5 terms: quick and sane
    assert 0 < big.rank(0.5) < 100_000_000


def test_zipfian_sampler_gives_the_same_keys():
    for n in (1, 2, 3, 1000, 100_000_000):
        z = Zipfian(n)
        a, b = random.Random(5), random.Random(5)
        sample = z.sampler(b.random)
        assert [z.key(a.random()) for _ in range(5000)] == [sample() for _ in range(5000)]


def test_recorder_buffering_gives_the_same_histogram():
    buffered = latency.LatencyRecorder()
    direct = latency.new_histogram()
    rng = random.Random(1)
    for _ in range(10_000):
        v = rng.expovariate(1 / 500.0) + 1
        buffered.record("read", v)
        direct.record_value(int(v))
    h = buffered.histograms["read"]
    assert h.get_total_count() == direct.get_total_count()
    for p in (50, 99, 99.9):
        assert h.get_value_at_percentile(p) == direct.get_value_at_percentile(p)
    buffered.record("read", 10)  # records after a read are kept too
    assert buffered.histograms["read"].get_total_count() == 10_001


# --- the reply path, over a real loopback TCP connection (the test writes the replies)


@pytest.fixture
def tcp_pair():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    conn = connection.Connection.over(client, timeout=5)
    yield conn, server
    conn.close()
    server.close()


def reply(response_to: int, doc: dict) -> bytes:
    body = b"\0\0\0\0\0" + bson.encode(doc)
    return struct.pack("<iiii", 16 + len(body), 0, response_to, protocol.OP_MSG) + body


def read_reply(docs, **extra):
    return {"cursor": {"firstBatch": docs, "id": bson.Int64(0), "ns": "d.kv"}, "ok": 1.0, **extra}


def test_replies_are_checked_and_only_new_shapes_decoded(tcp_pair):
    conn, server = tcp_pair
    judged = collections.Counter()

    def counting(accept):
        def wrapped(doc):
            judged[accept.__name__] += 1
            return accept(doc)

        return wrapped

    reads = protocol.ReplyShapes("read", counting(_found_one), inner=b"\x04firstBatch\x00")
    updates = protocol.ReplyShapes("update", counting(_updated_one))
    doc = {"_id": 1, "s": "x" * 100, "n0": bson.Int64(5)}
    replies = [
        read_reply([doc]),
        read_reply([{**doc, "_id": 2, "s": "y" * 100}]),  # same shape, other content
        {"n": 1, "nModified": 1, "ok": 1.0},
        {"n": 1, "nModified": 1, "ok": 1.0},  # same bytes
        {"n": 1, "nModified": 0, "ok": 1.0},  # same length, other bytes: a success too
        read_reply([]),  # not found
        {"n": 0, "nModified": 0, "ok": 1.0},  # not found
        {"ok": 0.0, "errmsg": "boom", "code": 2, "codeName": "BadValue"},
        {"n": 1, "nModified": 1, "ok": 1.0, "writeConcernError": {"code": 64, "errmsg": "wc"}},
        {"n": 0, "ok": 1.0, "writeErrors": [{"index": 0, "code": 11000, "errmsg": "dup"}]},
        read_reply([doc, doc]),  # two documents for one key
        read_reply([doc], ok=0.0),  # learned bytes outside the document differ
        read_reply([{**doc, "_id": 3}]),
    ]
    checks = [reads, reads] + [updates] * 3 + [reads, updates, reads, updates, updates, reads]
    checks += [reads, reads]
    data = b"".join(reply(100 + i, r) for i, r in enumerate(replies))
    # Half now, the rest later: the client waits for it (SO_RCVLOWAT, then anything).
    server.sendall(data[: len(data) // 2])
    later = threading.Timer(0.05, server.sendall, [data[len(data) // 2 :]])
    later.start()
    t0 = time.perf_counter()
    times, failures = conn.receive_checked(100, checks, t0)
    later.join()
    assert len(times) == len(replies) and times == sorted(times) and times[-1] >= 0.04
    failures = dict(failures)
    assert failures.pop(11).startswith("error: {'cursor'")  # ok: 0 without errmsg
    assert failures == {
        5: "document not found",
        6: "document not found",
        7: "BadValue: boom",
        8: "write concern error: {'code': 64, 'errmsg': 'wc'}",
        9: "write error: {'index': 0, 'code': 11000, 'errmsg': 'dup'}",
        10: "2 documents for one key",
    }
    # Decoded: the first read and update, the nModified 0 variant, every failure,
    # none of the replies of a shape already seen.
    assert judged == {"_found_one": 1 + 4, "_updated_one": 2 + 3}
    assert reads.expect == len(reply(0, replies[0])) and updates.expect == len(reply(0, replies[2]))

    server.sendall(reply(7, {"ok": 1.0}))
    with pytest.raises(protocol.WireError, match="unexpected reply \\(to 7"):
        conn.receive_checked(113, [updates], 0.0)


def test_a_reply_larger_than_the_buffer(tcp_pair):
    conn, server = tcp_pair
    big = {"cursor": {"firstBatch": [{"b": bson.Binary(b"z" * (3 * protocol.BUF_BYTES))}]}, "ok": 1}
    sender = threading.Thread(target=server.sendall, args=(reply(1, big) + reply(2, {"ok": 1}),))
    sender.start()
    (got, _), (small, _) = conn.receive([1, 2], time.perf_counter())
    sender.join()
    assert len(got["cursor"]["firstBatch"][0]["b"]) == 3 * protocol.BUF_BYTES and small == {"ok": 1}
    server.close()
    with pytest.raises(protocol.WireError, match="closed by the server"):
        conn.receive([3], 0.0)
