"""The multiplexed loop's framing on both loops, the compiled one (driver.native) and the
Python reference: replies in pieces, larger than the buffer, out of protocol or cut off,
requests larger than the socket takes at once. A peer thread plays the server over a
socketpair with scripted bytes (the loop reads frames; what they mean is the checks' part,
tested against the stand-in in tests/integration/test_driver_multiplex.py)."""

from __future__ import annotations

import datetime
import os
import pathlib
import socket
import struct
import subprocess
import sys
import threading
import time

import bson
import pytest
from native_helpers import compiled

from mongobench.driver import multiplex, native, replies, sources
from mongobench.remote import shipping

KINDS = [native.NATIVE, native.PYTHON]


@pytest.fixture(params=KINDS)
def kind(request, monkeypatch):
    if request.param == native.NATIVE:
        compiled()
    monkeypatch.setenv(native.ENV, request.param)
    return request.param


class Echo:
    """A check that returns the reply's bytes."""

    op = "read"

    def __call__(self, buf, length):
        return bytes(buf[:length])


def frame(rid: int, payload: bytes, response_to: int = 0) -> bytes:
    return struct.pack("<iiii", 16 + len(payload), rid, response_to, 2013) + payload


def read_frame(sock) -> bytes:
    head = b""
    while len(head) < 16:
        head += sock.recv(16 - len(head))
    (length,) = struct.unpack_from("<i", head)
    body = b""
    while len(body) < length - 16:
        body += sock.recv(length - 16 - len(body))
    return head + body


def run(kind, requests, serve, timeout=5.0):
    """Runs one client sending `requests` (payloads) while `serve(peer)` plays the server;
    returns (the check outcomes, the client's stats, the loop)."""
    mine, peer = socket.socketpair()
    mine.setblocking(False)
    outcomes = []

    def source(c):
        for payload in requests:
            outcomes.append((yield frame(c.rid, payload), Echo()))

    server = threading.Thread(target=serve, args=(peer,), daemon=True)
    server.start()
    loop = multiplex.prepare_clients(None, source, range(1), 1, timeout=timeout, socks=[mine])
    assert loop.kind == kind
    stats, _, _ = multiplex.run_prepared(loop)
    server.join(5)
    peer.close()
    return outcomes, stats, loop


def test_replies_in_pieces_and_larger_than_the_buffer(kind):
    big = bytes(range(256)) * 400  # 100 KB: more than the 16 KB buffer

    def serve(peer):
        for payload in (b"x" * 10, big):
            req = read_frame(peer)
            reply = frame(9, payload, response_to=struct.unpack_from("<i", req, 4)[0])
            for i in range(0, len(reply), 7000):  # pieces, each its own wake-up
                peer.sendall(reply[i : i + 7000] if i else reply[:5])
                time.sleep(0.005)
                if not i:
                    peer.sendall(reply[5:7000])

    outcomes, stats, loop = run(kind, [b"a", b"b"], serve)
    assert [o[16:] for o in outcomes] == [b"x" * 10, big]
    assert not stats.errors


def test_a_request_larger_than_the_socket_takes_is_sent_whole(kind):
    payload = b"q" * (8 << 20)  # a socketpair takes a few hundred KB at once

    def serve(peer):
        req = read_frame(peer)
        peer.sendall(frame(5, struct.pack("<q", len(req)), response_to=1))

    outcomes, stats, _ = run(kind, [payload], serve)
    assert not stats.errors
    assert struct.unpack_from("<q", outcomes[0], 16)[0] == 16 + len(payload)


@pytest.mark.parametrize(
    ("reply", "error", "message"),
    [
        (
            frame(9, b"ok", response_to=77),
            "read: ProtocolError",
            "unexpected reply (to 77, 18 bytes)",
        ),
        (
            struct.pack("<iiii", 5, 9, 1, 2013),
            "read: ProtocolError",
            "unexpected reply (to 1, 16 bytes)",
        ),
        (
            struct.pack("<iiii", 100 << 20, 9, 1, 2013),
            "read: ProtocolError",
            "malformed reply (length 104857600)",
        ),
        (b"", "read: AutoReconnect", "connection closed by the server"),
    ],
)
def test_a_reply_out_of_protocol_fails_its_client(kind, reply, error, message):
    def serve(peer):
        read_frame(peer)
        peer.sendall(reply)
        peer.shutdown(socket.SHUT_WR)

    outcomes, stats, _ = run(kind, [b"a", b"b"], serve)
    assert outcomes == []
    assert dict(stats.errors) == {error: 1}
    assert stats.error_samples[error] == message


def test_no_reply_at_all_times_the_client_out(kind, monkeypatch):
    monkeypatch.setattr(multiplex, "TICK", 0.05)
    started = time.perf_counter()
    _, stats, _ = run(kind, [b"a"], lambda peer: read_frame(peer), timeout=0.3)
    assert dict(stats.errors) == {"read: NetworkTimeout": 1}
    assert time.perf_counter() - started < 3


def test_the_compiled_loop_is_not_used_where_it_cannot_serve(monkeypatch):
    compiled()
    assert native.kind() == native.NATIVE
    assert native.kind(tls=True) == native.PYTHON  # it reads plain sockets only
    assert native.kind(paced=True) == native.PYTHON  # an open loop's held sends
    monkeypatch.setenv(native.ENV, native.PYTHON)
    assert native.kind() == native.PYTHON


def test_a_stale_build_is_not_loaded(monkeypatch):
    module = compiled()
    assert module.SOURCE_HASH == native.source_hash()
    monkeypatch.setattr(native, "source_hash", lambda: "another source")
    with pytest.warns(UserWarning, match="stale"):
        assert native._load() is None


def test_a_failed_build_says_why_and_a_client_vms_setup_goes_on(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CC", "false")  # a compiler that fails
    assert native.main(["build"]) == 1
    assert "building _loop.c failed" in capsys.readouterr().err
    [cmd] = [c for c in shipping.setup_commands(str(tmp_path), "a.tgz") if "native build" in c]
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(native.__file__).parents[2]))
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=env, check=False)
    assert p.returncode == 0 and shipping.BUILD_FAILED in p.stderr  # the Python loop runs


def _every_type(i: int) -> dict:
    """A document with a value of every BSON type (sizes vary with i)."""
    return {
        "d": 1.5, "s": "x" * (i % 9), "o": {"a": i}, "a": [i] * (i % 4),
        "b": bson.Binary(b"y" * (i % 5)), "u": bson.Binary(b"z" * 16, 4), "id": bson.ObjectId(),
        "t": True, "dt": datetime.datetime(2026, 1, 1), "n": None,
        "re": bson.Regex("^a" + "b" * (i % 3), "i"), "js": bson.Code("f()"),
        "jsw": bson.Code("g()", {"v": i}), "i32": i, "ts": bson.Timestamp(i, 1),
        "i64": bson.Int64(i), "dec": bson.Decimal128("1.5"), "min": bson.MinKey(),
        "max": bson.MaxKey(),
    }  # fmt: skip


@pytest.mark.parametrize("n", [0, 1, 2, 11, 100])
def test_the_compiled_count_is_the_python_count(n):
    count = compiled().count_elements
    raw = bson.encode({"a": [_every_type(i) for i in range(n)] + list(range(n))})
    for buf in (raw, bytearray(raw), memoryview(raw)):
        assert count(buf, 7) == replies.count_elements(raw, 7) == 2 * n
    doc = _every_type(n)
    assert count(bson.encode(doc), 0) == replies.count_elements(bson.encode(doc), 0) == len(doc)


def test_the_compiled_count_refuses_what_python_refuses():
    count = compiled().count_elements
    raw = bytearray(bson.encode({"a": [{"x": 1}, "s"]}))
    unknown = bytearray(raw)
    unknown[7 + 4] = 0x42  # the first element's type
    cut = raw[:14]  # inside the first element's name
    for bad in (unknown, cut):
        with pytest.raises((ValueError, IndexError, struct.error)):
            replies.count_elements(bad, 7)
        with pytest.raises(ValueError):
            count(bad, 7)
    stuck = bytearray(raw)
    struct.pack_into("<i", stuck, 7 + 4 + 3, -10)  # a negative length: Python loops on it
    with pytest.raises(ValueError, match="does not advance"):
        count(stuck, 7)


@pytest.mark.parametrize(
    ("kind", "ints", "made"),
    [
        (native.NATIVE, 0, "compiled"),
        (native.NATIVE, 65, "python"),  # its twin writes 64 integer fields at most
        (native.PYTHON, 0, "python"),
    ],
)
def test_the_loop_says_whether_its_sources_are_compiled(monkeypatch, kind, ints, made):
    """Loop.sources (the results' client_sources): a source's compiled twin where the
    compiled loop runs, the Python source where the twin cannot stand in or the loop is
    Python's."""
    if kind == native.NATIVE:
        compiled()
    monkeypatch.setenv(native.ENV, kind)
    settings = {"doc_size_kb": 1, "threads": 1, "id_type": "uuid", "batch_size": 10,
                "total_docs": 10, "secondary_indexes": ints}  # fmt: skip
    source = sources.make("insert", settings, "db")
    mine, peer = socket.socketpair()
    try:
        loop = multiplex.prepare_clients(None, source, range(1), 1, socks=[mine])
        assert (loop.kind, loop.sources) == (kind, made)
    finally:
        mine.close()
        peer.close()
