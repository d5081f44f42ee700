"""Record a client's requests with the stand-in's replies, and replay them, for
bench_client.py --replay.

`Recorder` is a proxy between a client and the stand-in: it forwards every byte both
ways and keeps each request with the reply the server gave to it (by responseTo), in
one file of pairs. `Server` runs replay_server.c (C) on that file, pinned to one core:
it answers each request with the reply recorded for it (the same request, else one of
the same shape; see replay_server.c) and patches responseTo, so a client measured
against it pays only its own costs and the server is never the limit.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading

from native_floor import compile_c

from mongobench.driver import connection

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "replay_server.c")
OP_MSG = 2013


def build(work: str) -> str | None:
    """Compiles replay_server.c into `work` (native_floor.compile_c)."""
    return compile_c(SOURCE, "replay server", work)


def _messages(buf: bytearray):
    """Whole messages at the start of `buf`, removed from it."""
    out, at = [], 0
    while len(buf) - at >= 4:
        n = int.from_bytes(buf[at : at + 4], "little")
        if n < 16 or len(buf) - at < n:
            break
        out.append(bytes(buf[at : at + n]))
        at += n
    del buf[:at]
    return out


def _more_to_come(msg: bytes) -> bool:
    """An OP_MSG the server answers with nothing (moreToCome)."""
    op = int.from_bytes(msg[12:16], "little")
    return op == OP_MSG and bool(int.from_bytes(msg[16:20], "little") & 2)


class Recorder:
    """A proxy on 127.0.0.1 (`uri`) to the server of `upstream_uri` that records each
    request with its reply; `write(path)` saves the pairs (request, reply, ...)."""

    def __init__(self, upstream_uri: str):
        o = connection.options(upstream_uri)
        if o.tls or o.username:
            raise ValueError("the replay recorder proxies plain, unauthenticated servers only")
        self.upstream = o.seeds[0]
        self.pairs: list[bytes] = []
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        port = self.listener.getsockname()[1]
        self.uri = f"mongodb://127.0.0.1:{port}/?directConnection=true"
        self.socks: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.socks += [client, server]
            asked: dict[int, bytes] = {}
            threading.Thread(
                target=self._requests, args=(client, server, asked), daemon=True
            ).start()
            threading.Thread(
                target=self._replies, args=(server, client, asked), daemon=True
            ).start()

    def _requests(self, src, dst, asked):
        buf = bytearray()
        try:
            while data := src.recv(1 << 16):
                buf += data
                for msg in _messages(buf):  # noted before the server can answer it
                    if not _more_to_come(msg):
                        asked[int.from_bytes(msg[4:8], "little")] = msg
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def _replies(self, src, dst, asked):
        buf = bytearray()
        try:
            while data := src.recv(1 << 16):
                buf += data
                for msg in _messages(buf):
                    req = asked.pop(int.from_bytes(msg[8:12], "little"), None)
                    if req is not None:
                        with self.lock:
                            self.pairs += [req, msg]
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def write(self, path: str) -> int:
        """Saves the pairs recorded so far; returns how many."""
        with self.lock:
            data = b"".join(self.pairs)
            n = len(self.pairs) // 2
        with open(path, "wb") as f:
            f.write(data)
        return n

    def close(self):
        self.closed = True
        self.listener.close()
        with self.lock:
            for s in self.socks:
                with contextlib.suppress(OSError):
                    s.close()


class Server:
    """replay_server (the compiled `binary`) on the pairs file `path`, pinned to `cpu`
    (None: not pinned); `uri` is its address. `stop()` returns its counts."""

    def __init__(self, binary: str, path: str, cpu: int | None = None):
        cmd = [binary, path] + ([str(cpu)] if cpu is not None else [])
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.proc.kill()
            err = self.proc.communicate()[1]
            raise RuntimeError(f"replay server did not start: {err.strip() or line.strip()}")
        self.uri = f"mongodb://127.0.0.1:{int(line)}/?directConnection=true"

    def stop(self) -> dict:
        """Stops it; its counts: requests served, exact, by shape, missed."""
        self.proc.terminate()
        out, err = self.proc.communicate(timeout=30)
        if self.proc.returncode not in (0, -15):
            raise RuntimeError(f"replay server failed: {err.strip()}")
        fields = out.split()
        if len(fields) != 4:
            return {}
        names = ("requests", "exact", "by_shape", "missed")
        counts: dict = dict(zip(names, map(int, fields), strict=True))
        if counts["missed"]:
            counts["missed_requests"] = [
                ln.removeprefix("missed: ") for ln in err.splitlines() if ln.startswith("missed:")
            ]
        return counts


def cpus() -> tuple[int, list[int]]:
    """(the server's core, the client's cores): the last core of this process's set for
    the server, the others for the client; on one core, both share it."""
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        return mine[0], mine
    return mine[-1], mine[:-1]


@contextlib.contextmanager
def pinned(cores: list[int]):
    """This process (and what it starts) on `cores` within the block."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
