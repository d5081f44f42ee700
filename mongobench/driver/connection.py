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
ops.Tmpl); replies are checked in place (see ReplyShapes): a reply is decoded
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

import select
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import bson
from pymongo import uri_parser

from mongobench.driver.protocol import (
    _WOULD_BLOCK,
    BUF_BYTES,
    COALESCE,
    HEADER,
    MAX_LOWAT,
    MAX_MESSAGE,
    OP_MSG,
    PATIENCE,
    AuthError,
    ReplyShapes,
    WireError,
    _reply_doc,
    encode_msg,
)
from mongobench.driver.scram import SCRAM_MECHANISMS, ScramClient

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
    # The URI's timeoutMS, else its socketTimeoutMS (seconds); None: neither is set.
    reply_timeout: float | None = None
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
        # pymongo keeps timeoutMS under its lower-case name
        reply_timeout=_seconds(opts.get("timeoutms", opts.get("timeoutMS")))
        or _seconds(opts.get("socketTimeoutMS")),
        write_concern=wc or None,
    )


def _seconds(value) -> float | None:
    """pymongo's parsed timeout option (seconds; 0 or None: no limit) as a positive float."""
    return float(value) if value else None


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
            _, _, response_to, opcode = HEADER.unpack_from(msg)
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
        unpack = HEADER.unpack_from
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
