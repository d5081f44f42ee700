"""A variant's clients over several processes (every core of the client).

One Python process runs on one core (the GIL), so the N virtual clients of a
variant are split over P worker processes (default: the machine's CPUs), each
running its share on its own event loop (multiplex.prepare_clients and
run_prepared). The workers are forked where the platform allows it (the source
factory is inherited; with spawn it must be picklable). Every worker opens its
connections and sets up its clients (templates, documents, the document pool:
seconds for large documents), then says it is ready, and waits for the start
time the parent hands out once all of them (and, with several client VMs, every
VM's) are ready, so the timed phases start together and hold only operations. Each
returns its statistics (encoded histograms, counters, errors) and its own CPU
time over the timed phase; the parent merges them exactly once.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import traceback
from dataclasses import dataclass, field

from mongobench.core import interrupt
from mongobench.driver import multiplex, protocol

try:
    import resource
except ImportError:  # not Unix
    resource = None
from mongobench.core import split
from mongobench.core.latency import LatencyRecorder
from mongobench.core.series import Series
from mongobench.driver.base import ThreadStats

START_MARGIN_S = 0.05  # from the last worker's "ready" to the common start
READY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Phase:
    """The run options of one timed phase: `total` operations split over all clients,
    `duration` seconds bounding it, `timeout` seconds for each reply, `interval` seconds of
    the per-interval figures (None: none recorded)."""

    total: int | None = None
    duration: float | None = None
    timeout: float = 30.0
    interval: float | None = None


@dataclass
class Result:
    stats: ThreadStats
    cpu_s: float  # CPU of the workers over their timed phases (user + system)
    wall_s: float  # from the common start to the last worker's end (the timed window)
    processes: int
    start: float = 0.0  # time.time() of the common start
    # ops, cpu_s, wall_s, clients, loop and sources of each worker
    per_process: list[dict] = field(default_factory=list)
    worker_wall_s: float = 0.0  # the slowest worker's own timed wall time
    # this process's CPU from the common start to the last worker's result: its share of
    # the timed phase (not the results' decoding after it, as the workers' encoding)
    parent_cpu_s: float = 0.0

    def __post_init__(self):
        if self.per_process and not self.worker_wall_s:
            self.worker_wall_s = max(p["wall_s"] for p in self.per_process)


def kinds(parts, key: str = "loop") -> str | None:
    """What workers (or client VMs) `parts` ran, by `key`: their "loop" ("native", the
    compiled one, or "python"; driver.native) or "sources" (their clients' sources,
    "compiled" or "python"), joined when they differ ("native,python"); None when none ran."""
    seen = set()
    for p in parts or ():
        seen.update((p.get(key) or "").split(","))
    return ",".join(sorted(seen - {""})) or None


def default_processes() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def _cpu() -> float:
    """This process's user + system CPU seconds (getrusage: microseconds, where
    os.times counts clock ticks of 10 ms)."""
    if resource is None:
        t = os.times()
        return t.user + t.system
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _worker(conn, uri, make_source, indices, clients, phase: Phase, stop, parent):
    """One process: connect and set up every client (sources, documents, pools), report
    ready, wait for the start, run, send the stats."""
    interrupt.worker_defaults(parent)
    total, duration, timeout = phase.total, phase.duration, phase.timeout
    try:
        source = make_source()
        try:
            socks, refused = multiplex.open_sockets(uri, len(indices), timeout), None
        except protocol.AuthError:
            raise  # wrong credentials fail the run, as they do on the pymongo path
        except (OSError, protocol.WireError) as e:
            # A server that cannot be reached: the first operation of each client
            # is counted as an error, as pymongo counts its server selection failures.
            socks, refused = None, e
        loop = None
        if socks is not None:
            loop = multiplex.prepare_clients(
                uri, source, indices, clients, total, stop, timeout, socks=socks
            )
        conn.send(("ready", None))
        start = conn.recv()  # time.time() of the common start

        mark = {}

        def wait_start():
            delay = start - time.time()
            if delay > 0:
                time.sleep(delay)
            mark["cpu0"] = _cpu()  # the timed phase's CPU starts here

        if loop is None:
            wait_start()
            stats, wall = multiplex.unreached(source, indices, clients, total, refused), 0.0
        else:
            stats, _, wall = multiplex.run_prepared(
                loop, duration, start_at=wait_start, interval=phase.interval, common_start=start
            )
        end = time.time()
        cpu = _cpu() - mark["cpu0"]
        if loop is not None:
            loop.release()  # after the CPU is read: the sources' teardown is not timed
        part = dict(encode_stats(stats), cpu_s=cpu, wall_s=wall, end=end, clients=len(indices))
        part["loop"] = loop.kind if loop is not None else None  # compiled or Python
        part["sources"] = loop.sources if loop is not None else None
        conn.send(("done", part))
    except BaseException:  # noqa: BLE001 - reported to the parent, which fails the run
        try:
            conn.send(("failed", traceback.format_exc()))
        except OSError:
            pass
    finally:
        conn.close()


def encode_stats(stats: ThreadStats) -> dict:
    """`stats` as plain data (pipes between processes, documents between client VMs)."""
    return {
        "latency": stats.latency.encode(),
        "service_latency": stats.service.encode(),
        "ops": dict(stats.ops),
        "docs": stats.docs,
        "bytes": stats.bytes,
        "errors": dict(stats.errors),
        "error_samples": dict(stats.error_samples),
        "counters": dict(stats.counters),
        **({"series": stats.series.encode()} if stats.series is not None else {}),
        "written_ids": list(stats.written_ids),
    }


def decode_stats(part: dict) -> ThreadStats:
    s = ThreadStats(
        latency=LatencyRecorder.decode(part["latency"]),
        service=LatencyRecorder.decode(part.get("service_latency") or {}),
    )
    s.ops.update(part["ops"])
    s.docs, s.bytes = part["docs"], part["bytes"]
    s.errors.update(part["errors"])
    s.error_samples.update(part["error_samples"])
    s.counters.update(part["counters"])
    if part.get("series"):
        s.series = Series.decode(part["series"])
    s.written_ids.extend(part.get("written_ids") or ())
    return s


def run(
    uri: str,
    make_source,
    clients: int,
    processes: int | None = None,
    phase: Phase = Phase(),
    stop=None,
    on_ready=None,
    indices: range | None = None,
) -> Result:
    """Runs `clients` virtual clients over `processes` workers (at most one per client).

    `make_source()` (called in each worker) returns the source (see
    multiplex); `phase` holds the run options (Phase: total operations split over all
    clients, duration, reply timeout, interval of the per-interval figures, which
    Result.stats.series merges over the workers by interval start on the common clock);
    `stop` (a multiprocessing Event) ends it early. A worker that fails fails the run (RuntimeError with its traceback).
    `on_ready()` is called once every worker is connected, just before the
    common start (the caller starts its own measurements there); when it returns
    a time (time.time()), that is the common start (several client VMs start
    together). `indices`: the clients this machine runs, of `clients` in all
    (default: every one); none gives an empty result at the common start.
    """
    indices = range(clients) if indices is None else indices
    if not len(indices):
        start = (on_ready() if on_ready is not None else None) or time.time()
        time.sleep(max(0.0, start - time.time()))
        return Result(ThreadStats(), 0.0, 0.0, 0, start=start)
    procs_n = max(1, min(processes or default_processes(), len(indices)))
    ctx = _context()
    stop = stop if stop is not None else ctx.Event()
    workers, pipes = [], []
    for p in range(procs_n):
        r = split.part(len(indices), procs_n, p)
        mine = indices[r.start : r.stop]
        parent, child = ctx.Pipe()
        w = ctx.Process(
            target=_worker,
            args=(child, uri, make_source, mine, clients, phase, stop, os.getpid()),
            daemon=True,
        )
        w.start()
        child.close()
        workers.append(w)
        pipes.append(parent)
    parts, failures = [None] * procs_n, []
    try:
        for i, pipe in enumerate(pipes):
            if not pipe.poll(READY_TIMEOUT_S):
                failures.append(f"worker {i}: not ready in {READY_TIMEOUT_S:g} s")
                continue
            try:
                kind, what = pipe.recv()
            except EOFError:
                kind, what = "failed", f"worker {i} exited before it was ready"
            if kind != "ready":
                failures.append(what)
        if failures:
            stop.set()
            raise RuntimeError("multiplexed driver: " + "\n".join(map(str, failures)))
        start = (on_ready() if on_ready is not None else None) or time.time() + START_MARGIN_S
        cpu0 = time.process_time()
        for pipe in pipes:
            pipe.send(start)
        for i, pipe in enumerate(pipes):
            try:
                kind, what = pipe.recv()
            except EOFError:
                kind, what = "failed", f"worker {i} exited without a result"
            if kind == "done":
                parts[i] = what
            else:
                failures.append(what)
        parent_cpu = time.process_time() - cpu0
        # From the common start to the last worker's end: not the results' transfer
        ends = [p["end"] for p in parts if p is not None]
        wall = (max(ends) if ends else time.time()) - start
    except KeyboardInterrupt:  # SIGTERM or SIGINT (core.interrupt): end the workers now
        stop.set()
        for w in workers:
            w.terminate()
        raise
    finally:
        for w in workers:
            w.join(timeout=10)
            if w.is_alive():
                w.kill()
                w.join()
        for pipe in pipes:
            pipe.close()
    if failures:
        raise RuntimeError("multiplexed driver: a worker failed:\n" + str(failures[0]))
    total_stats = ThreadStats()
    for part in parts:
        total_stats.merge(decode_stats(part))
    return Result(
        stats=total_stats,
        cpu_s=sum(p["cpu_s"] for p in parts),
        wall_s=wall,
        processes=procs_n,
        start=start,
        parent_cpu_s=parent_cpu,
        per_process=[
            {
                "ops": sum(p["ops"].values()),
                "cpu_s": p["cpu_s"],
                "wall_s": p["wall_s"],
                "clients": p["clients"],
                "loop": p.get("loop"),
                "sources": p.get("sources"),
            }
            for p in parts
        ],  # fmt: skip
    )
