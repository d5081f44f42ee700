"""bench_client --replay's replay server: requests recorded through the proxy against
the stand-in, then answered by scripts/replay_server.c with the recorded replies, in
each connection's order, responseTo patched."""

from __future__ import annotations

import os
import shutil
import sys

import pytest
from pymongo import MongoClient

from mongobench.driver import multiplex, protocol

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import replay

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler"),
]
DB = "replayserver"


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    return replay.build(str(tmp_path_factory.mktemp("replay")))


def find(i: int, rid: int) -> bytes:
    return protocol.encode_msg({"find": "docs", "filter": {"_id": i}, "limit": 1, "$db": DB}, rid)


def read_replies(sock, n: int) -> list[bytes]:
    """`n` whole replies from a blocking socket."""
    sock.setblocking(True)
    sock.settimeout(10)
    buf, out = b"", []
    while len(out) < n:
        while len(buf) < 4 or len(buf) < int.from_bytes(buf[:4], "little"):
            data = sock.recv(1 << 16)
            assert data, "connection closed"
            buf += data
        length = int.from_bytes(buf[:4], "little")
        out.append(buf[:length])
        buf = buf[length:]
    return out


def response_to(msg: bytes) -> int:
    return int.from_bytes(msg[8:12], "little")


def first_id(msg: bytes):
    return protocol._reply_doc(msg)["cursor"]["firstBatch"][0]["_id"]


@pytest.fixture
def recorded(server_uri, tmp_path):
    """Finds of documents 1-3 on one connection through the recording proxy."""
    with MongoClient(server_uri) as c:
        c[DB]["docs"].drop()
        c[DB]["docs"].insert_many([{"_id": i, "v": i * 10} for i in range(1, 4)])
    rec = replay.Recorder(server_uri)
    try:
        [sock] = multiplex.open_sockets(rec.uri, 1)
        sock.setblocking(True)
        for i in (1, 2, 3):
            sock.sendall(find(i, i))
            [reply] = read_replies(sock, 1)
            assert first_id(reply) == i  # through the proxy: the stand-in's answer
        sock.close()
        path = str(tmp_path / "pairs")
        # the connection's hello and the three finds
        assert rec.write(path) == 4
    finally:
        rec.close()
    return path


def test_each_request_gets_its_recorded_reply_in_order_with_responseto_patched(binary, recorded):
    server = replay.Server(binary, recorded)
    try:
        [a, b] = multiplex.open_sockets(server.uri, 2)  # hello answered from the recording
        # pipelined, in another order than recorded, ids the recording never saw
        a.sendall(find(3, 701) + find(1, 702) + find(2, 703) + find(3, 704))
        b.sendall(find(2, 901))
        got = read_replies(a, 4)
        assert [response_to(m) for m in got] == [701, 702, 703, 704]
        assert [first_id(m) for m in got] == [3, 1, 2, 3]
        [other] = read_replies(b, 1)
        assert response_to(other) == 901 and first_id(other) == 2
        # a request never recorded gets one of its shape (a find on "docs")...
        a.sendall(find(99, 705))
        [shaped] = read_replies(a, 1)
        assert response_to(shaped) == 705 and first_id(shaped) in (1, 2, 3)
        # ... and one of no recorded shape an error; moreToCome gets no reply at all
        quiet = bytearray(protocol.encode_msg({"ping": 1, "$db": DB}, 706))
        quiet[16] |= 2  # flagBits: moreToCome
        a.sendall(bytes(quiet) + protocol.encode_msg({"drop": "docs", "$db": DB}, 707))
        [err] = read_replies(a, 1)
        doc = protocol._reply_doc(err)
        assert response_to(err) == 707 and doc["ok"] == 0 and "nothing recorded" in doc["errmsg"]
        a.close()
        b.close()
    finally:
        counts = server.stop()
    assert counts["exact"] >= 5 and counts["by_shape"] >= 1 and counts["missed"] == 2
    assert counts["requests"] == counts["exact"] + counts["by_shape"] + counts["missed"]


def test_a_real_client_reads_the_recorded_documents_from_the_replay(binary, server_uri, tmp_path):
    # pymongo's requests carry a session id of their own: the replay answers them by shape,
    # the recorded replies in turn
    with MongoClient(server_uri) as c:
        c[DB]["docs"].drop()
        c[DB]["docs"].insert_many([{"_id": i, "v": i * 10} for i in range(1, 4)])
    rec = replay.Recorder(server_uri)
    try:
        with MongoClient(rec.uri) as c:
            recorded = [c[DB]["docs"].find_one({"_id": i}) for i in (1, 2, 3)]
        path = str(tmp_path / "pairs")
        rec.write(path)
    finally:
        rec.close()
    assert [d["v"] for d in recorded] == [10, 20, 30]
    server = replay.Server(binary, path, cpu=replay.cpus()[0])
    try:
        with MongoClient(server.uri) as c:
            assert [c[DB]["docs"].find_one({"_id": i}) for i in (1, 2, 3)] == recorded
    finally:
        server.stop()
