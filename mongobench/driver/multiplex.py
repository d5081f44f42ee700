"""Many virtual clients on one event loop, each with one operation in flight.

A virtual client is what one of UniBench's (or the pymongo path's) threads
is: its own connection, one request at a time, the next one sent when the
reply to the last has been read. Here N of them share a process: one epoll
wait returns the sockets whose replies arrived, and the loop reads each reply,
hands it to its client and sends that client's next request. So a process
pays one send and one receive per operation, a share of one wake-up, and a
few microseconds of Python, instead of a thread switch and pymongo's
hundreds of microseconds.

What a client does is a generator (its *source*), called with its `Client`:
it yields `(request, check)` (a bytes-like OP_MSG whose request id is
`client.rid`, and a reply check from `ops`) and receives the check's outcome
for that reply. A logical operation of several round trips ("update, then
insert on a miss", "find, then getMore until the cursor is exhausted") is
simply several yields. The source accounts its operations in `client.stats`
(a ThreadStats shared by the process's clients): it takes the time before its
first send (`time.perf_counter()`) and `client.run.now` (the time of the
wake-up that read the last reply) as the end, so latency runs from the send
to the reply with no queueing behind other requests of its own. It stops when
its quota is done or `client.run.stopped` turns true (a deadline or a stop
flag); an operation in flight is always completed first.

Open loop (`paced`, the `target_ops_per_s` setting): each client follows an intended
schedule, the variant's rate split evenly over every client of every process and client
VM (`Schedule`). The source takes its start with `client.begin()` instead of the clock:
that is the operation's intended send time, and the loop holds its first request until
then (a timer), or sends it at once when the client is late (its last operation ended
after this one was due). Its latency still counts from the intended time, so a server
that falls behind shows in the latency instead of silently slowing the clients down
(coordinated omission, as wrk2 and YCSB's intended-time measurement correct it);
`client.record` also records the service time (from the actual send) in
`stats.service`. Closed loop (the default), `begin()` is the clock and the next request
goes as soon as the last reply is read.

A connection that breaks, times out or answers out of protocol costs its
client: the operation in flight is counted as an error under the check's `op`
(e.g. "read: AutoReconnect") and that client stops; the others go on.
"""

from __future__ import annotations

import heapq
import inspect
import itertools
import math
import select
import ssl
import struct
import time
from collections.abc import Callable, Generator

from mongobench.core.split import share
from mongobench.driver import connection, native, protocol
from mongobench.driver.base import ThreadStats

BUF_BYTES = 16 << 10  # per-client receive buffer; grows for a larger reply
_HDR = struct.Struct("<iii")
_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
# Seconds between checks of the stop flag and the reply timeout. The deadline is
# checked at every wake-up, and the wait ends at it, so this only bounds how late a
# stop flag is seen. An idle client paid for every tick: on a VM a wake-up after
# tens of ms idle costs 30-60 us of CPU (cold caches), a tenth of a slow variant's
# client CPU at 50 ms ticks.
TICK = 0.5
# An open loop's last wait before a held send, in sleeps of at most this (a reply arriving
# meanwhile is read at most this late; each sleep costs a poll of the sockets)
FINE_S = 0.0005

Source = Callable[["Client"], Generator]


class Run:
    """What a loop's clients share: the time of the current wake-up, whether to stop, and
    the start of the timed phase (`epoch`: an open loop's schedules count from it)."""

    __slots__ = ("now", "stopped", "epoch")

    def __init__(self):
        self.now = self.epoch = time.perf_counter()
        self.stopped = False


class Schedule:
    """One virtual client's intended send times in an open loop: `rate` operations per
    second split evenly over `clients` clients, their sends interleaved. Client `index`
    sends its k-th operation at epoch + (k * clients + index) / rate: every time is
    computed from the epoch, never by adding intervals (no drift), and the clients
    together send at exactly `rate`. A late client is not given a new schedule: its
    next operations are due at once (catch-up), each counting from its own time."""

    __slots__ = ("index", "clients", "rate", "k")

    def __init__(self, rate: float, index: int, clients: int):
        if not rate > 0:
            raise ValueError(f"target_ops_per_s must be > 0, not {rate}")
        self.index, self.clients, self.rate, self.k = index, clients, float(rate), 0

    def due(self, k: int) -> float:
        """Seconds after the epoch when operation k is due."""
        return (k * self.clients + self.index) / self.rate

    def next(self, epoch: float) -> float:
        """The intended time of the next operation (perf_counter seconds)."""
        k, self.k = self.k, self.k + 1
        return epoch + self.due(k)

    def owed(self, elapsed: float) -> int:
        """Operations due in the first `elapsed` seconds that were not begun: what a
        client that fell behind still owed when the phase ended."""
        if elapsed < self.due(0):
            return 0
        return max(0, int((elapsed * self.rate - self.index) // self.clients) + 1 - self.k)


class Client:
    """One virtual client as its source sees it.

    A source takes each logical operation's start with `begin()` and records its latency
    with `record(op, micros)` (both differ in an open loop: see `pace`)."""

    __slots__ = (
        "index", "clients", "rid", "quota", "run", "stats", "schedule", "due", "lag", "record",
    )  # fmt: skip

    def __init__(self, index: int, clients: int, run: Run, stats: ThreadStats, total=None):
        self.index = index  # among all clients of the variant (every process)
        self.clients = clients
        self.rid = index + 1  # request id of every request (one in flight: never ambiguous)
        self.quota = share(int(total), clients, index) if total else None
        self.run = run
        self.stats = stats
        self.schedule = None  # closed loop
        self.due = None  # open loop: the intended send time of the request to hold
        self.lag = 0.0  # open loop: how late (s) the current operation was sent
        self.record = stats.latency.record

    def ops(self):
        """Operation numbers 0, 1, ... up to the client's quota (endless without one)."""
        return range(self.quota) if self.quota is not None else itertools.count()

    def pace(self, rate: float) -> None:
        """Puts the client in an open loop at its share of `rate` operations per second:
        `begin()` gives the intended send times and `record` also records the service
        time (the latency less the send's lateness) in `stats.service`."""
        self.schedule = Schedule(rate, self.index, self.clients)
        intended, service = self.stats.latency.record, self.stats.service.record

        def record(op: str, micros: float) -> None:
            intended(op, micros)
            service(op, micros - self.lag * 1e6)

        self.record = record

    def begin(self) -> float:
        """The start of a logical operation, from which its latency counts: the clock
        (closed loop), or the operation's intended send time (open loop; the loop then
        holds its first request until that time, or sends it at once when late)."""
        if self.schedule is None:
            return time.perf_counter()
        self.due = due = self.schedule.next(self.run.epoch)
        return due


def paced(source: Source, rate: float) -> Source:
    """`source` with its clients in an open loop at `rate` operations per second in all."""

    def start(c: Client):
        c.pace(rate)
        return source(c)

    return start


def count_error(stats: ThreadStats, op: str, kind: str, message, n: int = 1) -> None:
    """ThreadStats.error without an exception object: the key is "<op>: <kind>"."""
    key = f"{op}: {kind}"
    stats.errors[key] += n
    stats.error_samples.setdefault(key, str(message)[:300])


def unreached(source: Source, indices: range, clients: int, total, error) -> ThreadStats:
    """The statistics of clients that could not connect: each one's first operation
    is an error ("<op>: ConnectionFailure"), nothing else is attempted."""
    run, stats = Run(), ThreadStats()
    for i in indices:
        gen = source(Client(i, clients, run, stats, total))
        try:
            _, check = next(gen)
        except StopIteration:
            continue
        finally:
            gen.close()
        count_error(stats, check.op, "ConnectionFailure", error)
    return stats


def open_sockets(uri: str | connection.Options, n: int, timeout: float = 30.0) -> list:
    """`n` connected, authenticated, non-blocking sockets to the deployment's primary
    (wire.connect finds it once; the others go straight there)."""
    o = uri if isinstance(uri, connection.Options) else connection.options(uri)
    first = connection.connect(o, timeout=timeout)
    host, port = first.address
    socks = [first.sock]
    try:
        for _ in range(n - 1):
            conn = connection.Connection(host, port, o, timeout=timeout)
            try:
                hello = conn.hello(o)
                conn.authenticate(o, hello.get("saslSupportedMechs"))
            except BaseException:
                conn.close()
                raise
            socks.append(conn.sock)
    except BaseException:
        for s in socks:
            s.close()
        raise
    return socks


class _Conn:
    __slots__ = (
        "sock", "fd", "client", "gen", "check", "buf", "view", "got", "pending",
        "recv_into", "send", "rid",
    )  # fmt: skip

    def __init__(self, sock, client, gen):
        self.sock, self.fd, self.client, self.gen = sock, sock.fileno(), client, gen
        # bound once: the loop calls them for every reply
        self.recv_into, self.send, self.rid = sock.recv_into, sock.send, client.rid
        self.check = None
        self.buf = bytearray(BUF_BYTES)
        self.view = memoryview(self.buf)
        self.got = 0
        self.pending = None  # the unsent rest of a request


class _Wakes:
    """What either loop (compiled or Python) does at each wake-up, between the replies it
    serves: the per-interval cut (core.series: at the first wake-up past a boundary), the
    deadline, and every TICK the stop flag and the reply timeout (Loop._check_time)."""

    __slots__ = ("loop", "series", "cut_at", "deadline", "next_tick", "last_reply")

    def __init__(self, loop: Loop, now: float):
        self.loop, self.series = loop, loop.stats.series
        self.cut_at = self.series.next_cut if self.series is not None else math.inf
        self.deadline = loop.deadline if loop.deadline is not None else math.inf
        self.next_tick = self.last_reply = now

    def until(self) -> float:
        """The next time a wake-up has work of its own."""
        return min(self.next_tick, self.cut_at, self.deadline)

    def woke(self, now: float, replied: float | None) -> None:
        """A wake-up at `now`; `replied`: when the last reply came in it (None: none)."""
        if now >= self.cut_at:
            self.series.cut(now)
            self.cut_at = self.series.next_cut
        if replied is not None:
            self.last_reply = replied
        loop = self.loop
        if now >= self.deadline:
            loop.run.stopped = True
        if now >= self.next_tick:
            self.next_tick = now + TICK
            if len(loop.timers) >= len(loop.conns):  # none in flight: no reply is awaited
                self.last_reply = now
            loop._check_time(now, now - self.last_reply)


class Loop:
    """Runs one source per socket until every source is done (or has failed).

    `deadline` (perf_counter seconds) and `stop` (anything with is_set()) set
    `run.stopped`; `timeout` is how long the loop waits with no reply at all
    before it fails the clients still waiting. The inner loop runs in C where it is built
    and the run allows it (driver.native: plain sockets, closed loop); `kind` says which.
    """

    def __init__(
        self,
        socks: list,
        clients: list[Client],
        source: Source,
        run: Run,
        stats: ThreadStats,
        deadline: float | None = None,
        stop=None,
        timeout: float = 30.0,
    ):
        self.run, self.stats = run, stats
        self.deadline, self.stop, self.timeout = deadline, stop, timeout
        self.conns = {}
        # Ended clients, kept until release(): freeing a source's buffers (tens of MB for
        # bulk inserts, unmapped page by page) is teardown, not the timed phase's work
        self.ended: list[_Conn] = []
        self.timers = []  # open loop: (due, fd, request) held until due (a heap)
        self.ep = select.epoll()
        tls = any(isinstance(s, ssl.SSLSocket) for s in socks)
        # a source with a compiled twin (never an open loop's: paced() hides it) runs it
        # where the compiled loop runs
        compiled = getattr(source, "compiled", None)
        module = native.module(tls, False) if compiled is not None else None
        for sock, client in zip(socks, clients, strict=True):
            gen = compiled(client, module) if module is not None else source(client)
            c = _Conn(sock, client, gen)
            self.conns[c.fd] = c
            self.ep.register(c.fd, select.EPOLLIN)
        paced = any(c.schedule is not None for c in clients)  # their sources set it
        self.native = native.module(tls, paced)
        self.kind = native.NATIVE if self.native is not None else native.PYTHON
        # a compiled source is no generator; a twin that cannot stand in returns Python's
        made = {"python" if inspect.isgenerator(c.gen) else "compiled" for c in self.conns.values()}
        self.sources = ",".join(sorted(made)) or None

    # -- failures and the slow paths (partial sends and replies)
    def _fail(self, c: _Conn, kind: str, message) -> None:
        if c.check is not None:
            count_error(self.stats, c.check.op, kind, message)
        self._drop(c)

    def _drop(self, c: _Conn, owing: bool = True) -> None:
        """Ends a client (`owing`: ended before its work was done: stopped or failed)."""
        sched = c.client.schedule
        if self.conns.pop(c.fd, None) is not None and sched is not None and owing:
            # an open loop's catch-up accounting: operations due that were never begun
            owed = sched.owed(self.run.now - self.run.epoch)
            if owed:
                self.stats.counters["open_loop_owed_ops"] += owed
        try:
            self.ep.unregister(c.fd)
        except (OSError, ValueError):
            pass
        c.gen.close()
        c.sock.close()
        self.ended.append(c)

    def release(self) -> None:
        """Frees the ended clients' sources and buffers: after the timed phase's CPU is read."""
        self.ended.clear()

    def _send(self, c: _Conn, data) -> None:
        """Sends a request (what the socket does not take now goes on EPOLLOUT)."""
        try:
            n = c.send(data)
        except _WOULD_BLOCK:
            n = 0
        except OSError as e:
            self._fail(c, "AutoReconnect", f"send: {e}")
            return
        if n != len(data):
            self._pend(c, data, n)

    def _pend(self, c: _Conn, data, n: int) -> None:
        """Keeps what the socket did not take of a request, to send on EPOLLOUT."""
        c.pending = memoryview(data)[n:]
        self.ep.modify(c.fd, select.EPOLLIN | select.EPOLLOUT)

    def _flush(self, c: _Conn) -> None:
        try:
            n = c.sock.send(c.pending)
        except _WOULD_BLOCK:
            return
        except OSError as e:
            self._fail(c, "AutoReconnect", f"send: {e}")
            return
        c.pending = c.pending[n:]
        if not c.pending:
            c.pending = None
            self.ep.modify(c.fd, select.EPOLLIN)

    def _read_rest(self, c: _Conn, got: int) -> int:
        """Reads until a whole reply is buffered or the socket is empty (a TLS
        socket can hold decrypted bytes that epoll does not report). Returns the
        reply's length when it is complete, 0 when it is not yet, -1 on failure."""
        while True:
            if got >= 16:
                length = _HDR.unpack_from(c.buf)[0]
                if not 21 <= length <= protocol.MAX_MESSAGE:
                    self._fail(c, "ProtocolError", f"malformed reply (length {length})")
                    return -1
                if got >= length:
                    c.got = got
                    return length
                if length > len(c.buf):
                    grown = bytearray(max(length, 2 * len(c.buf)))
                    grown[:got] = c.buf[:got]
                    c.buf, c.view = grown, memoryview(grown)
            try:
                n = c.sock.recv_into(c.view[got:])
            except _WOULD_BLOCK:
                c.got = got
                return 0
            except OSError as e:
                self._fail(c, "AutoReconnect", f"receive: {e}")
                return -1
            if not n:
                self._fail(c, "AutoReconnect", "connection closed by the server")
                return -1
            got += n

    def _next(self, c: _Conn, outcome) -> None:
        """Hands `outcome` to the client's source and sends its next request."""
        try:
            data, c.check = c.gen.send(outcome) if outcome is not None else next(c.gen)
        except StopIteration:  # its work is done, or it saw the stop
            c.check = None
            self._drop(c, owing=self.run.stopped)
            return
        if c.client.due is not None and self._hold(c, data, self.run.now):
            return
        self._send(c, data)

    def _hold(self, c: _Conn, data, now: float) -> bool:
        """Open loop: the first request of an operation waits for its intended time (True:
        held on a timer); a late one goes now, its lateness kept for the service time."""
        client = c.client
        due, client.due = client.due, None
        if due > now:
            heapq.heappush(self.timers, (due, c.fd, data))
            return True
        client.lag = now - due
        return False

    def _fire(self, now: float) -> None:
        """Sends the held requests that are due (all of them dropped, unsent, once the
        phase is stopped: their operations were never started)."""
        timers = self.timers
        while timers and (self.run.stopped or timers[0][0] <= now):
            due, fd, data = heapq.heappop(timers)
            c = self.conns.get(fd)
            if c is None:
                continue
            if self.run.stopped:
                c.check = None  # not sent: not an error
                self._drop(c)
                continue
            c.client.lag = now - due
            self._send(c, data)

    def _check_time(self, now: float, idle: float) -> None:
        if self.stop is not None and self.stop.is_set():
            self.run.stopped = True
        if idle > self.timeout:
            for c in list(self.conns.values()):
                self._fail(c, "NetworkTimeout", f"no reply in {self.timeout:g} s")

    # -- the loop
    def run_all(self) -> None:
        run, conns, clock = self.run, self.conns, time.perf_counter
        run.now = run.epoch = clock()
        if self.deadline is not None and run.now >= self.deadline:
            run.stopped = True
        for c in list(conns.values()):
            self._next(c, None)
        try:
            if self.native is not None:
                self._run_native()
            else:
                self._run_python()
        finally:
            for c in list(conns.values()):
                self._drop(c)
            self.ep.close()

    def _run_native(self) -> None:
        """The compiled loop serves the replies until the next tick, cut or deadline; what
        comes then is the Python loop's own (_Wakes)."""
        run, conns, serve = self.run, self.conns, self.native.run
        fd, most = self.ep.fileno(), protocol.MAX_MESSAGE
        wakes = _Wakes(self, time.perf_counter())
        while conns:
            until = wakes.next_tick if run.stopped else wakes.until()
            now, seen = serve(fd, conns, until, self, run, most)
            run.now = now
            wakes.woke(now, seen)

    def _run_python(self) -> None:
        run, conns, clock, timers = self.run, self.conns, time.perf_counter, self.timers
        poll, unpack = self.ep.poll, _HDR.unpack_from
        wakes = _Wakes(self, clock())
        epollout, deadline = select.EPOLLOUT, wakes.deadline
        while conns:
            wait = TICK if run.stopped else min(TICK, max(0.001, deadline - run.now))
            if timers:  # an open loop's next held send
                ahead = timers[0][0] - run.now
                if ahead < 0.001:  # epoll waits whole (rounded up) milliseconds: the
                    # last one in short sleeps, so a send is µs late, not up to 1 ms
                    if ahead > 0:
                        time.sleep(min(ahead, FINE_S))
                    wait = 0.0
                else:  # wakes before the send is due, at most 1 ms before
                    wait = min(wait, ahead - 0.001)
            events = poll(wait)
            now = run.now = clock()
            wakes.woke(now, now if events else None)
            if timers:
                self._fire(now)
            for fd, ev in events:
                c = conns.get(fd)
                if c is None:
                    continue
                if ev & epollout and c.pending is not None:
                    self._flush(c)
                    if c.pending is not None or not ev & ~epollout:
                        continue
                buf = c.buf
                try:
                    n = c.recv_into(c.view[c.got :] if c.got else buf)
                except _WOULD_BLOCK:
                    continue
                except OSError as e:
                    self._fail(c, "AutoReconnect", f"receive: {e}")
                    continue
                if not n:
                    self._fail(c, "AutoReconnect", "connection closed by the server")
                    continue
                got = c.got + n
                if got >= 16:
                    length, _, response_to = unpack(buf)
                else:
                    length = 1 << 62
                if got < length:
                    length = self._read_rest(c, got)
                    if length <= 0:
                        continue
                    buf, got = c.buf, c.got
                    _, _, response_to = unpack(buf)
                c.got = 0
                if got != length or response_to != c.rid:
                    self._fail(
                        c, "ProtocolError", f"unexpected reply (to {response_to}, {got} bytes)"
                    )
                    continue
                try:
                    data, c.check = c.gen.send(c.check(buf, length))
                except StopIteration:
                    c.check = None
                    self._drop(c, owing=run.stopped)
                    continue
                if c.client.due is not None and self._hold(c, data, now):
                    continue
                self._send(c, data)


def prepare_clients(
    uri: str | connection.Options,
    source: Source,
    indices: range,
    clients: int,
    total=None,
    stop=None,
    timeout: float = 30.0,
    socks: list | None = None,
) -> Loop:
    """The loop of the clients `indices` (of `clients` in all) with their connections
    open and their sources set up (documents, templates, pools: for large documents
    seconds): everything before the timed phase. `run_prepared` times it."""
    socks = socks if socks is not None else open_sockets(uri, len(indices), timeout)
    run, stats = Run(), ThreadStats()
    members = [Client(i, clients, run, stats, total) for i in indices]
    return Loop(socks, members, source, run, stats, None, stop, timeout)


def run_prepared(
    loop: Loop,
    duration: float | None = None,
    start_at: Callable[[], None] | None = None,
    interval: float | None = None,
    common_start: float | None = None,
) -> tuple[ThreadStats, float, float]:
    """Waits for the start (`start_at()` returns when the timed phase starts), runs the
    prepared loop for at most `duration` seconds, and returns (stats, seconds of this
    process's CPU, wall seconds) of the timed phase alone. `interval`: seconds of the
    per-interval figures (stats.series, core.series), counted from `common_start`
    (time.time() of the phase's common start; default: this process's own start). The
    ended clients stay allocated until `loop.release()`, for the caller to call once it
    has read its CPU."""
    if start_at is not None:
        start_at()
    t0 = time.perf_counter()
    late = max(0.0, time.time() - common_start) if common_start else 0.0
    loop.stats.record_intervals(interval, t0 - late)
    loop.deadline = t0 + duration if duration else None
    cpu0 = time.process_time()
    loop.run_all()
    loop.stats.close_intervals()
    return loop.stats, time.process_time() - cpu0, time.perf_counter() - t0


def run_clients(
    uri: str | connection.Options,
    source: Source,
    indices: range,
    clients: int,
    duration: float | None = None,
    start_at: Callable[[], None] | None = None,
    **prepare,
) -> tuple[ThreadStats, float, float]:
    """Runs the clients `indices` (of `clients` in all) in this process: prepare_clients
    (`prepare`: its total, stop, timeout, socks), then run_prepared (`start_at` is called
    between them)."""
    loop = prepare_clients(uri, source, indices, clients, **prepare)
    try:
        return run_prepared(loop, duration, start_at)
    finally:
        loop.release()
