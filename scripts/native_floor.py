"""The native floor under a variant's client cost, for bench_client.py.

The bench runs each variant a second time with every request its clients send
recorded (`recording`: the multiplexed driver's sources, wrapped; worker
processes fork, so they inherit the wrapper). native_floor.c (C, no Python)
then replays those requests over as many connections as the variant has
clients, one in flight on each, replies read and nothing checked: the CPU any
client pays here to send those requests and receive those replies. The
replay starts from the variant's prepared state (prepared again) and asks no
more of the server than the recorded run did (a replayed getMore meets a closed
cursor), so the figure is a lower bound on what a native client would pay.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from subprocess import PIPE

from pymongo import MongoClient

from mongobench.core.split import part
from mongobench.driver import multiplex, sources
from mongobench.driver.catalog import WORKLOADS

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native_floor.c")


def compile_c(source: str, what: str, work: str) -> str | None:
    """Compiles `source` (a C file of scripts/) into `work`; None (and why on stdout, naming
    `what`) without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        print(f"{what}: no C compiler (cc) on this machine; not measured")
        return None
    out = os.path.join(work, os.path.splitext(os.path.basename(source))[0])
    subprocess.run([cc, "-O2", "-o", out, source], check=True)
    return out


def build(work: str) -> str | None:
    """Compiles native_floor.c into `work` (compile_c)."""
    return compile_c(SOURCE, "native floor", work)


def wake_us(binary: str, idle_s: float, wakes: int) -> float:
    """CPU of one wake-up of a C process blocked in epoll after `idle_s` idle."""
    out = subprocess.run(
        [binary, "wake", repr(idle_s), str(wakes)], check=True, capture_output=True, text=True
    )
    return float(out.stdout.split()[0])


def _recording(source, directory: str):
    """`source`, with every request it sends appended, when the client is done, to this
    process's file in `directory` (a source reuses its buffers: each is copied)."""

    def wrapped(c):
        sink: list[bytes] = []
        gen = source(c)
        try:
            data, check = next(gen)
            while True:
                sink.append(bytes(data))
                data, check = gen.send((yield data, check))
        except StopIteration:
            return
        finally:
            gen.close()
            with open(os.path.join(directory, f"requests.{os.getpid()}"), "ab") as f:
                f.write(b"".join(sink))

    return wrapped


@contextlib.contextmanager
def recording(directory: str):
    """Within it, the multiplexed driver's sources record their requests into
    `directory`; `requests(directory)` reads them back."""
    make = sources.make

    def recorded(*args, **kwargs):
        return _recording(make(*args, **kwargs), directory)

    sources.make = recorded
    try:
        yield
    finally:
        sources.make = make


def requests(directory: str) -> list[bytes]:
    """The requests recorded in `directory` (whole messages, by their length prefix)."""
    out = []
    for name in sorted(os.listdir(directory)):
        if name.startswith("requests."):
            with open(os.path.join(directory, name), "rb") as f:
                data = f.read()
            at = 0
            while at < len(data):
                n = int.from_bytes(data[at : at + 4], "little")
                out.append(data[at : at + n])
                at += n
    return out


def replay_us(
    binary: str, uri: str, requests: list[bytes], clients: int, processes: int = 1
) -> float:
    """C's CPU per reply replaying `requests` over `clients` connections (opened and
    authenticated here) spread over `processes` processes as the variant's clients
    were; each process sends its share of the requests once, in turn."""
    return replay(binary, uri, requests, clients, processes)["cpu_us"]


def replay(binary: str, uri: str, requests: list[bytes], clients: int, processes: int = 1) -> dict:
    """replay_us's run: {"cpu_us": C's CPU per reply, "round_trip_us": the wall time a
    connection waited per reply (with one connection, the round trip)}."""
    processes = max(1, min(processes, clients))
    socks = multiplex.open_sockets(uri, clients)
    work = tempfile.mkdtemp(prefix="native-floor-")
    try:
        runs = []
        for p in range(processes):
            mine = requests[p::processes]
            path = os.path.join(work, f"requests.{p}")
            with open(path, "wb") as f:
                f.write(b"".join(mine))
            fds = [socks[i].fileno() for i in part(clients, processes, p)]
            cmd = [binary, "loop", str(len(mine)), path, *map(str, fds)]
            run = subprocess.Popen(cmd, pass_fds=fds, stdout=PIPE, stderr=PIPE, text=True)
            runs.append((run, len(fds)))
        cpu_us = replies = waited_us = 0.0
        for run, conns in runs:
            out, err = run.communicate()
            if run.returncode:
                raise RuntimeError(f"native floor: {err.strip()}")
            us, n, wall = out.split()
            cpu_us, replies = cpu_us + float(us) * int(n), replies + int(n)
            waited_us += float(wall) * conns  # each connection waited the whole loop
        return {"cpu_us": cpu_us / replies, "round_trip_us": waited_us / replies}
    finally:
        shutil.rmtree(work)
        for s in socks:
            s.close()


def floor(binary: str, uri: str, directory: str, res: dict, database: str) -> dict:
    """The native floor of `res`, a perftables result run within `recording(directory)`:
    C's CPU per operation (and per document) replaying its requests over its clients,
    from the state the variant's preparation leaves (prepared again, untimed)."""
    sent = requests(directory)
    logical = sum(res["ops"].values()) + sum(res["errors"].values())
    if not sent or not logical:
        raise RuntimeError(f"native floor: {res['experiment']}/{res['label']} sent nothing")
    with MongoClient(uri) as client:
        workload = WORKLOADS[res["workload"]](client[database], res["settings"], log=lambda m: 0)
        workload.uri = uri
        workload.prepare()
    per_reply = replay_us(binary, uri, sent, int(res["threads"]), res["client_processes"])
    return {
        "us_per_op": per_reply * len(sent) / logical,
        "us_per_doc": per_reply * len(sent) / res["docs"] if res["docs"] else None,
        "round_trips_per_op": len(sent) / logical,
    }
