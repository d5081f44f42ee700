"""A pipelined OP_MSG client: the cheap-per-operation path of the driver.

pymongo spends most of an operation in Python and system calls (about 11 per
operation); any client that waits for each reply pays one send and one
receive per operation. This client keeps up to two batches of `depth` requests
in flight on each connection: one `sendall` carries a batch, and the next
batch is sent before the replies to the previous one are read, so those
replies are already waiting and come back in one or two `recv` calls. The
per-operation cost is BSON encoding/decoding plus a share of two system calls.

Latency of an operation is measured from the send of its batch to the arrival
of its reply, so it includes the queueing in the pipeline: report it as such.

Scope: unauthenticated or TLS connections to a standalone or to the primary
that pymongo discovered (replica sets, SRV URIs). Credentials in the URI are
refused with a clear error: this client does not implement SCRAM.
"""

from __future__ import annotations

import itertools
import socket
import ssl
import struct
import time

import bson
from pymongo import uri_parser

OP_MSG = 2013
_HEADER = struct.Struct("<iiii")
_ids = itertools.count(1)


class WireError(RuntimeError):
    """A command failed or the connection broke."""


def target(uri: str, primary: tuple[str, int] | None = None) -> dict:
    """Host, port and TLS settings for `uri`; refuses credentials."""
    parsed = uri_parser.parse_uri(uri)
    if parsed.get("username"):
        raise WireError(
            "the pipelined driver does not authenticate (no SCRAM); use driver=pymongo"
            " for deployments that need credentials"
        )
    opts = {k.lower(): v for k, v in parsed.get("options", {}).items()}
    host, port = primary or parsed["nodelist"][0]
    return {
        "host": host,
        "port": int(port),
        "tls": bool(opts.get("tls") or opts.get("ssl")),
        "tls_ca": opts.get("tlscafile"),
        "tls_insecure": bool(opts.get("tlsinsecure") or opts.get("tlsallowinvalidcertificates")),
    }


def next_id() -> int:
    return next(_ids)


def encode_msg(command: dict, request_id: int) -> bytes:
    body = b"\x00\x00\x00\x00" + b"\x00" + bson.encode(command)  # flags, section kind 0
    return _HEADER.pack(16 + len(body), request_id, 0, OP_MSG) + body


class Template:
    """An OP_MSG encoded once; each use patches the request id and Int64 fields.

    `command` holds `bson.Int64` sentinels (distinct values) where the variable
    integers go; `use(*values)` returns the message with them in place.
    """

    def __init__(self, command: dict, sentinels: list[int]):
        self.raw = bytearray(encode_msg(command, 0))
        self.offsets = []
        for value in sentinels:
            needle = struct.pack("<q", value)
            if self.raw.count(needle) != 1:
                raise ValueError(f"sentinel {value} must occur exactly once")
            self.offsets.append(self.raw.index(needle))

    def use(self, request_id: int, *values: int) -> bytes:
        buf = bytearray(self.raw)
        struct.pack_into("<i", buf, 4, request_id)
        for off, value in zip(self.offsets, values, strict=True):
            struct.pack_into("<q", buf, off, value)
        return bytes(buf)


class Connection:
    """One socket; `pipeline()` sends a batch of commands and returns their replies."""

    def __init__(
        self, host: str, port: int, tls: bool = False, tls_ca=None, tls_insecure=False, timeout=30.0
    ):
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls:
            ctx = ssl.create_default_context(cafile=tls_ca)
            if tls_insecure:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            sock = ctx.wrap_socket(sock, server_hostname=host)
        self.sock = sock
        self._buf = bytearray()

    def close(self) -> None:
        self.sock.close()

    def pipeline(self, commands: list[dict]) -> list[tuple[dict, float]]:
        """Replies (decoded) with the seconds from send to each reply, in order."""
        ids = [next(_ids) for _ in commands]
        return self.pipeline_raw(
            [encode_msg(c, i) for c, i in zip(commands, ids, strict=True)], ids
        )

    def pipeline_raw(self, messages: list[bytes], ids: list[int]):
        """Like pipeline() for encoded messages (see Template)."""
        return self.receive(ids, self.send(messages))

    def send(self, messages: list[bytes]) -> float:
        """Sends a batch; returns its send time for receive()."""
        t0 = time.perf_counter()
        self.sock.sendall(b"".join(messages))
        return t0

    def receive(self, ids: list[int], sent_at: float) -> list[tuple[dict, float]]:
        """The replies to a batch sent at `sent_at`, with seconds since then."""
        out = []
        for rid in ids:
            length, _, response_to, opcode = self._read_header()
            body = self._read(length - 16)
            elapsed = time.perf_counter() - sent_at
            if response_to != rid or opcode != OP_MSG:
                raise WireError(f"unexpected reply (to {response_to}, opcode {opcode}) for {rid}")
            if body[4] != 0:
                raise WireError("reply without a kind-0 section")
            # The C decoder beats RawBSONDocument's lazy (pure Python) parsing 4x here.
            out.append((bson.decode(body[5:]), elapsed))
        return out

    def _read_header(self):
        return _HEADER.unpack(self._read(16))

    def _read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self._buf)))
            if not chunk:
                raise WireError("connection closed by the server")
            self._buf += chunk
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    def command(self, command: dict) -> dict:
        reply, _ = self.pipeline([command])[0]
        if not reply.get("ok"):
            raise WireError(f"{next(iter(command))} failed: {reply.get('errmsg', reply)}")
        return reply
