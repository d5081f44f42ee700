"""A pipelined OP_MSG client: the cheap-per-operation path of the driver.

pymongo spends most of an operation in Python and system calls (about 11 per
operation); any client that waits for each reply pays one send and one
receive per operation. This client keeps up to two batches of `depth` requests
in flight on each connection: one send carries a batch, and the next batch is
sent before the replies to the previous one are read. What costs a pipelined
client most is waking up: a reader that waits for "any data" wakes for every
reply a server sends. So when the socket is empty, the reader asks the kernel
(SO_RCVLOWAT) to wake it only once the bytes of the next COALESCE replies are
expected to be there (the shortest success of each kind seen so far), or after
PATIENCE. Requests are written into one buffer by one `struct` call each (see
Template); replies are checked in place (see ReplyShapes): a reply is decoded
only when its bytes are not those of a success already seen, so every reply is
checked but few are decoded.

Latency of an operation is measured from the send of its batch to the wake-up
that read its reply, so it includes the queueing in the pipeline and the wait
for the replies read with it: report it as such.

Scope (`connect`): standalone servers, mongos and replica sets (the primary,
found by asking the seeds `hello`; never a secondary), `mongodb+srv://` (pymongo's
URI parser resolves SRV and TXT records), load balancers, TLS (`tls`/`ssl`,
`tlsCAFile`, `tlsCertificateKeyFile`[`Password`], `tlsAllowInvalidCertificates`,
`tlsAllowInvalidHostnames`, `tlsInsecure`), and SCRAM-SHA-256 / SCRAM-SHA-1
authentication (RFC 5802, RFC 7677) with the URI's user, password and authSource.
Other mechanisms (X.509, AWS, Kerberos, OIDC) are refused with a clear error.
No secret (password, key password) ever goes into an exception or a repr.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import os
import select
import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import bson
from pymongo import uri_parser

OP_MSG = 2013
_HEADER = struct.Struct("<iiii")
BUF_BYTES = 1 << 20  # receive buffer; grows for a larger message
MAX_MESSAGE = 64 << 20  # MongoDB's maxMessageSizeBytes is 48 MB
MAX_LOWAT = 256 << 10
PATIENCE = 0.005  # s to wait for the bytes expected before taking fewer
COALESCE = 16  # replies expected per wake-up of receive_checked
_WOULD_BLOCK = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-1")


class WireError(RuntimeError):
    """A command failed, the connection broke, or the deployment cannot be used."""


class AuthError(WireError):
    """Authentication failed (wrong credentials, or the server could not prove itself)."""


# ----------------------------------------------------------------------------- options


@dataclass
class Options:
    """What `connect` needs from a connection string. Secrets stay out of repr()."""

    seeds: list[tuple[str, int]]
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    auth_source: str = "admin"
    mechanism: str | None = None  # from authMechanism; None: negotiated
    tls: bool = False
    tls_ca: str | None = None
    tls_cert_key: str | None = None
    tls_cert_key_password: str | None = field(default=None, repr=False)
    tls_allow_invalid_certs: bool = False
    tls_allow_invalid_hostnames: bool = False
    replica_set: str | None = None
    direct: bool = False
    load_balanced: bool = False
    connect_timeout: float = 20.0
    write_concern: dict | None = None  # from w, wTimeoutMS, journal; None: the server's default


def options(uri: str) -> Options:
    """Parses `uri` with pymongo's parser (which resolves `mongodb+srv://` names,
    turns TLS on for them and reads their TXT options)."""
    parsed = uri_parser.parse_uri(uri)
    opts = parsed.get("options") or {}  # pymongo's case-insensitive dict
    mechanism = opts.get("authMechanism")
    if mechanism and mechanism not in SCRAM_MECHANISMS:
        raise WireError(
            f"the pipelined driver supports SCRAM-SHA-256 and SCRAM-SHA-1, not {mechanism};"
            " use driver=pymongo for this deployment"
        )
    user = parsed.get("username")
    if mechanism and not user:
        raise WireError(f"authMechanism={mechanism} needs a user name in the URI")
    insecure = bool(opts.get("tlsInsecure"))
    wc = {
        k: opts[o]
        for k, o in (("w", "w"), ("wtimeout", "wTimeoutMS"), ("j", "journal"))
        if o in opts
    }
    return Options(
        seeds=[(h, int(p)) for h, p in parsed["nodelist"]],
        username=user,
        password=parsed.get("password"),
        auth_source=opts.get("authSource") or parsed.get("database") or "admin",
        mechanism=mechanism,
        tls=bool(opts.get("tls") or opts.get("ssl")),
        tls_ca=opts.get("tlsCAFile"),
        tls_cert_key=opts.get("tlsCertificateKeyFile"),
        tls_cert_key_password=opts.get("tlsCertificateKeyFilePassword"),
        tls_allow_invalid_certs=insecure or bool(opts.get("tlsAllowInvalidCertificates")),
        tls_allow_invalid_hostnames=insecure or bool(opts.get("tlsAllowInvalidHostnames")),
        replica_set=opts.get("replicaSet"),
        direct=bool(opts.get("directConnection")),
        load_balanced=bool(opts.get("loadBalanced")),
        connect_timeout=float(opts.get("connectTimeoutMS") or 20.0),  # pymongo gives seconds
        write_concern=wc or None,
    )


def tls_context(o: Options) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the chain and the host name
    if o.tls_ca:
        ctx.load_verify_locations(cafile=o.tls_ca)
    else:
        ctx.load_default_certs()
    if o.tls_cert_key:
        ctx.load_cert_chain(o.tls_cert_key, password=o.tls_cert_key_password)
    if o.tls_allow_invalid_hostnames or o.tls_allow_invalid_certs:
        ctx.check_hostname = False
    if o.tls_allow_invalid_certs:
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


# ------------------------------------------------------------------------ messages


def encode_msg(command: dict, request_id: int) -> bytes:
    body = b"\x00\x00\x00\x00" + b"\x00" + bson.encode(command)  # flags, section kind 0
    return _HEADER.pack(16 + len(body), request_id, 0, OP_MSG) + body


class Template:
    """An OP_MSG encoded once; each use writes it with a request id and Int64 values.

    `command` holds `bson.Int64` sentinels (distinct values) where the variable
    integers go. One `struct` call copies the constant pieces and packs the
    variables: `write(buf, pos, request_id, *values)` writes the message (`size`
    bytes) at `pos`; `use(request_id, *values)` returns it.
    """

    def __init__(self, command: dict, sentinels: list[int]):
        raw = encode_msg(command, 0)
        offsets = []
        for value in sentinels:
            needle = struct.pack("<q", value)
            if raw.count(needle) != 1:
                raise ValueError(f"sentinel {value} must occur exactly once")
            offsets.append(raw.index(needle))
        # Pieces in message order: 4 length bytes, the request id, then constant
        # bytes and Int64 values alternately.
        order = sorted(range(len(offsets)), key=offsets.__getitem__)
        fmt, self.pieces, at = ["<4si"], [raw[:4]], 8
        for k in order:
            fmt += [f"{offsets[k] - at}sq"]
            self.pieces.append(raw[at : offsets[k]])
            at = offsets[k] + 8
        fmt.append(f"{len(raw) - at}s")
        self.pieces.append(raw[at:])
        self.struct = struct.Struct("".join(fmt))
        self.size = len(raw)
        self.raw = raw
        self.write = self._writer(order)

    def _writer(self, order):
        """write(buf, pos, request_id, *values): the message at `pos` (`size` bytes).
        Specialised for one and two values: one Python call and one C call per message."""
        pack, p = self.struct.pack_into, self.pieces
        if order == [0]:
            p0, p1, p2 = p
            return lambda buf, pos, rid, a: pack(buf, pos, p0, rid, p1, a, p2)
        if order == [0, 1]:
            p0, p1, p2, p3 = p
            return lambda buf, pos, rid, a, b: pack(buf, pos, p0, rid, p1, a, p2, b, p3)

        def write(buf, pos, rid, *values):
            args = [p[0], rid]
            for i, k in enumerate(order):
                args += [p[i + 1], values[k]]
            pack(buf, pos, *args, p[-1])

        return write

    def use(self, request_id: int, *values: int) -> bytes:
        buf = bytearray(self.size)
        self.write(buf, 0, request_id, *values)
        return bytes(buf)


def _reply_doc(msg) -> dict:
    """The kind-0 document of an OP_MSG reply (header included in `msg`)."""
    flags = int.from_bytes(msg[16:20], "little")
    if msg[20] != 0:
        raise WireError("reply without a kind-0 section")
    end = len(msg) - 4 if flags & 1 else len(msg)  # checksumPresent: CRC-32C at the end
    return bson.decode(bytes(msg[21:end]))


class ReplyShapes:
    """Recognises success replies of one kind of request by their bytes.

    `accept(reply)` judges a decoded reply: None for success, else the reason.
    Success replies are remembered (up to MAX_SHAPES of them, by length): a
    later reply of the same length whose bytes equal one of them outside one
    varying region is the same success, without decoding. The region is the
    content of the single document in the array named by `inner` (e.g.
    b"\x04firstBatch\x00": the document a read returned); without `inner`, the
    whole reply must be equal. The bytes kept before the region end with that
    document's length and those after it start by closing the array, so a
    matching reply has the remembered structure (ok: 1, exactly one document,
    ...) and only that document's content differs (it is not parsed: the
    workload needs its presence, not its fields). Any other reply is decoded
    and judged.
    """

    MAX_SHAPES = 16

    def __init__(self, name: str, accept: Callable[[dict], str | None], inner: bytes | None = None):
        self.name = name
        self.accept = accept
        self.inner = inner
        self.known: dict[int, list[tuple[bytes, bytes]]] = {}  # length -> [(from byte 16, suffix)]
        self.shapes = 0
        self.expect = 26  # bytes a reply is expected to take: the shortest success seen

    def judge(self, msg: bytes) -> str | None:
        """Decodes and judges one reply (the slow path); learns it when it succeeded."""
        try:
            reply = _reply_doc(msg)
        except (bson.errors.InvalidBSON, WireError, IndexError) as e:
            return f"undecodable reply: {e}"
        why = self.accept(reply)
        if why is None and self.shapes < self.MAX_SHAPES:
            self._learn(msg)
        return why

    def _learn(self, msg: bytes) -> None:
        self.expect = len(msg) if not self.shapes else min(self.expect, len(msg))
        if self.inner is None:
            self._add(len(msg), msg[16:], b"")
            return
        if msg.count(self.inner) != 1:
            return
        el = msg.index(self.inner) + len(self.inner) + 4  # past the array's length
        if msg[el : el + 3] != b"\x030\x00":  # element "0", an embedded document
            return
        doc = el + 3
        end = doc + int.from_bytes(msg[doc : doc + 4], "little")
        if msg[end : end + 1] != b"\x00":  # the array ends after that one document
            return
        self._add(len(msg), msg[16 : doc + 4], msg[end:])

    def _add(self, length: int, prefix: bytes, suffix: bytes) -> None:
        shapes = self.known.setdefault(length, [])
        if (prefix, suffix) not in shapes:
            shapes.append((prefix, suffix))
            self.shapes += 1


# ---------------------------------------------------------------------- connection


class Connection:
    """One socket to one server; commands one at a time or pipelined."""

    def __init__(self, host: str, port: int, o: Options | None = None, timeout: float = 30.0):
        o = o or Options(seeds=[(host, port)])
        self.address = (host, int(port))
        sock = socket.create_connection(self.address, timeout=o.connect_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if o.tls:
                sock = tls_context(o).wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        self._attach(sock, timeout)

    @classmethod
    def over(cls, sock: socket.socket, timeout: float = 30.0) -> Connection:
        """A Connection over a socket that is already connected."""
        self = cls.__new__(cls)
        self.address = ("socket", 0)
        self._attach(sock, timeout)
        return self

    def _attach(self, sock, timeout: float) -> None:
        sock.setblocking(False)  # waits are our own polls (see _fill, send)
        self.sock = sock
        self.timeout = timeout
        self._readable = select.poll()
        self._readable.register(sock.fileno(), select.POLLIN)
        self._writable = select.poll()
        self._writable.register(sock.fileno(), select.POLLOUT)
        self._lowat = 1
        self._buf = bytearray(BUF_BYTES)
        self._pos = self._end = 0  # unread bytes are _buf[_pos:_end]
        self._next_id = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def ids(self, n: int) -> int:
        """Reserves `n` consecutive request ids (positive int32); returns the first."""
        first = self._next_id
        if first + n > 0x7FFFFFFF:
            first = 1
        self._next_id = first + n
        return first

    # -- generic, decoded
    def pipeline(self, commands: list[dict]) -> list[tuple[dict, float]]:
        """Replies (decoded) with the seconds from send to each reply, in order."""
        first = self.ids(len(commands))
        msgs = [encode_msg(c, first + i) for i, c in enumerate(commands)]
        return self.receive(list(range(first, first + len(msgs))), self.send(msgs))

    def send(self, messages) -> float:
        """Sends a batch (a list of messages, or one buffer); returns its send time."""
        t0 = time.perf_counter()
        view = memoryview(b"".join(messages) if isinstance(messages, list) else messages)
        while view:
            try:
                view = view[self.sock.send(view) :]
            except _WOULD_BLOCK as e:
                self._wait(
                    self._readable if isinstance(e, ssl.SSLWantReadError) else self._writable
                )
        return t0

    def _wait(self, poller, timeout: float | None = None) -> bool:
        """Waits for the socket (poller: _readable or _writable); False on timeout."""
        if poller.poll(1000 * (self.timeout if timeout is None else timeout)):
            return True
        if timeout is None:
            raise WireError(f"no progress in {self.timeout:g} s (server {self.address[0]})")
        return False

    def receive(self, ids: list[int], sent_at: float) -> list[tuple[dict, float]]:
        """The decoded replies to requests `ids` sent at `sent_at`, with seconds since then."""
        out = []
        for rid in ids:
            length = self._message()
            elapsed = time.perf_counter() - sent_at
            msg = bytes(self._buf[self._pos : self._pos + length])
            self._pos += length
            _, _, response_to, opcode = _HEADER.unpack_from(msg)
            if response_to != rid or opcode != OP_MSG:
                raise WireError(f"unexpected reply (to {response_to}, opcode {opcode}) for {rid}")
            out.append((_reply_doc(msg), elapsed))
        return out

    def _message(self, hint: int = 0) -> int:
        """Reads until a whole message is buffered at _pos; returns its length."""
        if self._end - self._pos < 16:
            self._fill(16, hint)
        length = int.from_bytes(self._buf[self._pos : self._pos + 4], "little")
        if not 21 <= length <= MAX_MESSAGE:
            raise WireError(f"malformed reply (length {length})")
        if self._end - self._pos < length:
            self._fill(length, hint)
        return length

    def _fill(self, need: int, hint: int = 0) -> None:
        """At least `need` unread bytes in the buffer (compacting or growing it).

        Waking up costs more than the Python work on a reply, so when the socket
        is empty the wait lasts until `hint` unread bytes are expected (the
        kernel's SO_RCVLOWAT), or PATIENCE seconds, whichever is first; then
        until anything arrives.
        """
        buf, pos, end = self._buf, self._pos, self._end
        if pos + max(need, hint) > len(buf) or pos > len(buf) // 2:  # keep room for reads
            if need > len(buf):
                self._buf = bytearray(max(need, 2 * len(buf)))
            self._buf[: end - pos] = buf[pos:end]
            buf, pos, end = self._buf, 0, end - pos
            self._pos = 0
        view = memoryview(buf)
        patient = hint > need
        try:
            while end - pos < need:
                try:
                    n = self.sock.recv_into(view[end:])
                except _WOULD_BLOCK as e:
                    if isinstance(e, ssl.SSLWantWriteError):
                        self._wait(self._writable)
                        continue
                    lowat = min(hint if patient else need, len(buf) - pos, MAX_LOWAT) - (end - pos)
                    self._set_lowat(max(1, lowat))
                    if not self._wait(self._readable, PATIENCE if patient else None):
                        patient = False  # fewer bytes than expected: take what there is
                    continue
                if not n:
                    raise WireError("connection closed by the server")
                end += n
        finally:
            self._end = end

    def _set_lowat(self, lowat: int) -> None:
        if lowat != self._lowat:
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, lowat)
            except OSError:  # not every platform lets it be set: then no coalescing
                pass
            self._lowat = lowat

    # -- fast path for the benchmark loop
    def receive_checked(self, first_id: int, checks: list[ReplyShapes], sent_at: float):
        """Replies to requests first_id, first_id+1, ... (one per entry of `checks`).

        Returns (seconds from `sent_at` to the arrival of each reply, [(index,
        reason)] of the replies `checks[index]` did not accept).
        """
        times: list[float] = []
        failures: list[tuple[int, str]] = []
        unpack = _HEADER.unpack_from
        buf, pos, end = self._buf, self._pos, self._end
        elapsed = time.perf_counter() - sent_at
        rid = first_id
        for i, chk in enumerate(checks):
            avail = end - pos
            if avail >= 16:
                length, _, response_to, opcode = unpack(buf, pos)
            if avail < 16 or avail < length:
                # Wait for this reply and, if the socket is empty, the bytes the
                # next COALESCE replies are expected to take (one wake-up for them).
                hint = sum([c.expect for c in checks[i : i + COALESCE]])
                self._pos, self._end = pos, end
                length = self._message(hint)
                buf, pos, end = self._buf, self._pos, self._end
                elapsed = time.perf_counter() - sent_at
                _, _, response_to, opcode = unpack(buf, pos)
            if response_to != rid or opcode != OP_MSG or length < 21:
                self._pos = pos
                raise WireError(f"unexpected reply (to {response_to}, opcode {opcode}) for {rid}")
            for prefix, suffix in chk.known.get(length, ()):
                if buf.startswith(prefix, pos + 16) and buf.endswith(suffix, pos, pos + length):
                    break
            else:
                why = chk.judge(bytes(buf[pos : pos + length]))
                if why is not None:
                    failures.append((i, why))
            times.append(elapsed)
            pos += length
            rid += 1
        self._pos, self._end = pos, end
        return times, failures

    def command(self, command: dict) -> dict:
        reply, _ = self.pipeline([command])[0]
        if not reply.get("ok"):
            raise WireError(f"{next(iter(command))} failed: {reply.get('errmsg', reply)}")
        return reply

    # -- handshake and authentication
    def hello(self, o: Options | None = None) -> dict:
        """`hello` (or legacy `isMaster` for servers without it), asking which SCRAM
        mechanisms the URI's user has."""
        extra = {}
        if o is not None and o.username:
            extra["saslSupportedMechs"] = f"{o.auth_source}.{o.username}"
        if o is not None and o.load_balanced:
            extra["loadBalanced"] = True
        reply = self.pipeline([{"hello": 1, **extra, "$db": "admin"}])[0][0]
        if not reply.get("ok"):
            reply = self.command({"isMaster": 1, **extra, "$db": "admin"})
        return reply

    def authenticate(self, o: Options, offered: list[str] | None = None) -> str | None:
        """SCRAM with the user of `o`; returns the mechanism used (None: no user)."""
        if not o.username:
            return None
        if o.password is None:
            raise AuthError(f"user {o.username!r}: the URI has no password")
        mechanism = o.mechanism
        if mechanism is None:
            if not offered or "SCRAM-SHA-256" in offered:
                mechanism = "SCRAM-SHA-256"
            elif "SCRAM-SHA-1" in offered:
                mechanism = "SCRAM-SHA-1"
            else:
                raise AuthError(
                    f"user {o.username!r} on {o.auth_source}: the server offers"
                    f" {', '.join(offered)}, none of which this driver implements"
                    " (SCRAM-SHA-256, SCRAM-SHA-1)"
                )
        scram = ScramClient.for_mongodb(mechanism, o.username, o.password)
        who = f"user {o.username!r} on {o.auth_source} ({mechanism})"
        reply = self._sasl(
            {
                "saslStart": 1,
                "mechanism": mechanism,
                "payload": bson.Binary(scram.first()),
                "autoAuthorize": 1,
                "options": {"skipEmptyExchange": True},
                "$db": o.auth_source,
            },
            who,
        )
        conversation = reply.get("conversationId")
        reply = self._sasl(
            {
                "saslContinue": 1,
                "conversationId": conversation,
                "payload": bson.Binary(scram.final(bytes(reply.get("payload", b"")), who)),
                "$db": o.auth_source,
            },
            who,
        )
        scram.verify(bytes(reply.get("payload", b"")), who)
        while not reply.get("done"):  # a server that ignores skipEmptyExchange
            reply = self._sasl(
                {
                    "saslContinue": 1,
                    "conversationId": conversation,
                    "payload": bson.Binary(b""),
                    "$db": o.auth_source,
                },
                who,
            )
        return mechanism

    def _sasl(self, command: dict, who: str) -> dict:
        reply = self.pipeline([command])[0][0]
        if not reply.get("ok"):
            raise AuthError(f"authentication of {who} failed: {reply.get('errmsg', 'no reason')}")
        return reply


# ---------------------------------------------------------------------------- SCRAM


def _scram_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _fields(message: bytes) -> dict[str, str]:
    out = {}
    for part in message.decode("utf-8").split(","):
        key, sep, value = part.partition("=")
        if sep:
            out[key] = value
    return out


class ScramClient:
    """The client side of one SCRAM conversation (RFC 5802; RFC 7677 for SHA-256).

    `secret` is the password as SCRAM hashes it; `for_mongodb` derives it the
    way MongoDB does. No channel binding. Nothing derived from the secret
    appears in an exception or a repr.
    """

    MIN_ITERATIONS = 4096

    def __init__(self, digest: str, username: str, secret: bytes, nonce: str | None = None):
        self.digest = digest
        self._secret = secret
        self.nonce = nonce or base64.b64encode(os.urandom(24)).decode()
        self.first_bare = f"n={_scram_name(username)},r={self.nonce}"
        self._server_signature: bytes | None = None

    @classmethod
    def for_mongodb(cls, mechanism: str, username: str, password: str, nonce=None):
        """SCRAM-SHA-256 SASLprep's the password; MongoDB's SCRAM-SHA-1 hashes
        the hex MD5 of "user:mongo:password" instead of the password."""
        if mechanism == "SCRAM-SHA-256":
            return cls("sha256", username, _saslprep(password).encode("utf-8"), nonce)
        if mechanism == "SCRAM-SHA-1":
            md5 = hashlib.md5(f"{username}:mongo:{password}".encode()).hexdigest()
            return cls("sha1", username, md5.encode(), nonce)
        raise AuthError(f"unsupported mechanism {mechanism}")

    def __repr__(self) -> str:
        return f"ScramClient({self.digest})"

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self.digest).digest()

    def final(self, server_first: bytes, who: str = "the user") -> bytes:
        """The client-final message for the server-first message."""
        f = _fields(server_first)
        try:
            nonce, salt, iterations = f["r"], base64.b64decode(f["s"]), int(f["i"])
        except (KeyError, ValueError) as e:
            raise AuthError(f"authentication of {who}: malformed server-first message") from e
        if not nonce.startswith(self.nonce) or len(nonce) == len(self.nonce):
            raise AuthError(f"authentication of {who}: the server's nonce does not extend ours")
        if iterations < self.MIN_ITERATIONS:
            raise AuthError(f"authentication of {who}: iteration count {iterations} < 4096")
        salted = _salted_password(self.digest, self._secret, salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self.digest, client_key).digest()
        without_proof = f"c=biws,r={nonce}"  # biws = base64("n,,"): no channel binding
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes, who: str = "the user") -> None:
        """Checks the server's signature: the server knew the password too."""
        f = _fields(server_final)
        if "e" in f:
            raise AuthError(f"authentication of {who} failed: {f['e']}")
        if "v" not in f:
            raise AuthError(f"authentication of {who}: malformed server-final message")
        # Compared as text: a non-canonical base64 of the right bytes is refused too.
        expected = base64.b64encode(self._server_signature or b"").decode()
        if self._server_signature is None or not hmac.compare_digest(f["v"], expected):
            raise AuthError(
                f"authentication of {who}: the server's signature is wrong"
                " (it does not know the password: not the expected server?)"
            )


@functools.lru_cache(maxsize=8)
def _salted_password(digest: str, secret: bytes, salt: bytes, iterations: int) -> bytes:
    # Every connection of a run logs in with the same salt: derive the key once
    # (as pymongo does), not once per connection inside the timed phase.
    return hashlib.pbkdf2_hmac(digest, secret, salt, iterations)


def _saslprep(password: str) -> str:
    try:
        from pymongo.saslprep import HAVE_STRINGPREP, saslprep
    except ImportError:
        return password
    if not HAVE_STRINGPREP:
        return password
    # Queries (not stored strings): unassigned code points are allowed, as in pymongo.
    # Its errors name the failed check, never the text.
    return saslprep(password, prohibit_unassigned_code_points=False)


# -------------------------------------------------------------------------- discovery


def server_role(hello: dict) -> str:
    if hello.get("msg") == "isdbgrid":
        return "mongos"
    if hello.get("setName"):
        if hello.get("isWritablePrimary") or hello.get("ismaster"):
            return "primary"
        if hello.get("secondary"):
            return "secondary"
        if hello.get("arbiterOnly"):
            return "arbiter"
        return "replica set member that is not primary"
    if hello.get("isreplicaset"):
        return "replica set member not initiated yet"
    return "standalone"


WRITABLE = ("standalone", "mongos", "primary")


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return (host, int(port)) if host else (address, 27017)


def find_primary(o: Options, opener: Callable[[str, int], Connection]):
    """(connection, hello) of a server to write to: the primary of a replica set
    (found by asking the seeds and following `primary`), a mongos, a standalone
    or the load balancer. Never a secondary: raises WireError when there is no
    primary, naming what each seed said."""
    queue, seen, notes = list(o.seeds), set(), []
    while queue:
        host, port = queue.pop(0)
        if (host, port) in seen:
            continue
        seen.add((host, port))
        try:
            conn = opener(host, port)
        except OSError as e:  # includes TLS failures
            notes.append(f"{host}:{port}: {e}")
            continue
        try:
            hello = conn.hello(o)
        except (OSError, WireError) as e:
            conn.close()
            notes.append(f"{host}:{port}: {e}")
            continue
        if o.load_balanced:
            return conn, hello
        role = server_role(hello)
        set_name = hello.get("setName")
        if o.replica_set and set_name != o.replica_set:
            conn.close()
            notes.append(f"{host}:{port} is a {role}, not a member of replica set {o.replica_set}")
            continue
        if role in WRITABLE:
            return conn, hello
        conn.close()
        notes.append(f"{host}:{port} is a {role}")
        if o.direct:
            break
        if hello.get("primary"):
            queue.insert(0, _host_port(hello["primary"]))
        queue += [_host_port(h) for h in hello.get("hosts", [])]
    raise WireError(
        "the pipelined driver writes to a primary (or mongos, or standalone) only, and found"
        " none: " + "; ".join(notes or ["no seeds"])
    )


def connect(uri: str | Options, timeout: float = 30.0, opener=None) -> Connection:
    """A connection to the deployment's primary (see find_primary), authenticated
    when the URI has a user."""
    o = uri if isinstance(uri, Options) else options(uri)
    if o.load_balanced and len(o.seeds) != 1:
        raise WireError("loadBalanced=true needs exactly one host")
    if opener is None:

        def opener(host, port):
            return Connection(host, port, o, timeout=timeout)

    conn, hello = find_primary(o, opener)
    try:
        conn.authenticate(o, hello.get("saslSupportedMechs"))
    except BaseException:
        conn.close()
        raise
    return conn
