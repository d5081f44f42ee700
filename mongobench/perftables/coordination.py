"""Several client VMs: every variant's timed phase runs on all of them at once.

Client VM 0 (the leader) runs the perftables run as usual: it prepares each variant,
measures around it and writes the results. For a timed phase on the multiplexed path it
hands the job to the other client VMs (followers, `mongobench perftables follow`): the
virtual clients are split over the VMs (VM i runs its share of the global client indices,
so keys and operation counts are split as they are over processes), every VM connects its
workers and says it is ready, the leader hands out one start time, and each follower sends
back its statistics, which the leader merges exactly once with its own.

The channel is a collection on the target itself (database `mongobench_coord`): the one
network path every client VM already has, so no port is opened between VMs. It is used
before and after timed phases only (a few small reads per second while the leader
prepares), and dropped at the end. The VMs' clocks must agree (NTP) to within the start
margin; each follower says how late it started (`late_s`).
"""

from __future__ import annotations

import functools
import time
import traceback

import pymongo
from pymongo.errors import DuplicateKeyError, PyMongoError

from mongobench.core.poll import PollTimeout, poll_until
from mongobench.core.split import part
from mongobench.driver import connection, ops, procs, sources

COORD_DB = "mongobench_coord"
START_MARGIN_S = 1.0  # from the last VM's "ready" to the common start
READY_TIMEOUT_S = 180.0  # every follower connected (it may be busy with the last job)
LEADER_WAIT_S = 300.0  # a follower's wait for its leader's first word (a wrong run id)
POLL_S = 0.05


class CoordinationError(RuntimeError):
    pass


def client_range(clients: int, vms: int, index: int) -> range:
    """The global client indices VM `index` runs (shares differ by at most one)."""
    return part(clients, vms, index)


def _wait(
    coll, ids: list[str], timeout: float, what: str, *, every: bool = True, interval: float = POLL_S
) -> dict:
    """Documents `ids` of `coll` once all exist (`every`) or once any does; a
    CoordinationError names the missing ones after `timeout`."""

    def check():
        docs = {d["_id"]: d for d in coll.find({"_id": {"$in": ids}})}
        return (len(docs) == len(ids) if every else bool(docs)), docs

    try:
        return poll_until(check, timeout=timeout, interval=interval)
    except PollTimeout as t:
        missing = ", ".join(i for i in ids if i not in t.last)
        raise CoordinationError(f"{what}: nothing from {missing} within {timeout:.0f} s") from None


class Leader:
    """Client VM 0's side: announces each timed phase, starts it on every VM, merges."""

    def __init__(self, client, run_id: str, vms: int, on_phase=None):
        self.coll = client[COORD_DB][f"run_{run_id}"]
        self.vms = vms
        self.seq = 0
        # told what the leader waits for (the run's heartbeat says it): on_phase(what, limit_s)
        self.on_phase = on_phase or (lambda name, planned_s=None: None)
        self.lost: str | None = None  # followers that missed a start: the rest fail at once
        self.coll.drop()  # a crashed earlier run with this id left its documents
        # the followers' first word: they give up when it does not come (a wrong run id)
        self.coll.insert_one({"_id": "leader", "at": time.time()})

    def timed(self, uri, workload, settings, database, nthreads, processes, phase, on_ready):
        """The timed phase of `nthreads` clients over every VM, run options `phase` (a
        procs.Phase; its reply timeout applies to the leader only: a follower takes the
        default, as before). Returns the leader's
        procs.Result with the followers' statistics, CPU and processes merged in, the client
        cores of all VMs, and one summary per VM."""
        if self.lost:
            raise CoordinationError(f"not run: {self.lost}")
        seq, self.seq = self.seq, self.seq + 1
        total, duration, interval = phase.total, phase.duration, phase.interval
        followers = range(1, self.vms)
        self.coll.insert_one({
            "_id": f"job-{seq}", "workload": workload, "settings": settings,
            "database": database, "clients": nthreads, "total": total,
            "duration": duration, "vms": self.vms, "interval_s": interval,
        })  # fmt: skip

        def ready():
            ids = [f"ready-{seq}-{i}" for i in followers]
            self.on_phase(
                f"waiting for client VM(s) {', '.join(map(str, followers))} to be ready",
                READY_TIMEOUT_S,
            )
            try:
                _wait(self.coll, ids, READY_TIMEOUT_S, "client VMs ready")
            except CoordinationError as e:
                # a follower that missed one start misses the next ones: no 3 minutes each
                self.lost = str(e)
                raise
            start = time.time() + START_MARGIN_S
            self.coll.insert_one({"_id": f"start-{seq}", "at": start})
            self.on_phase("timed", duration)
            on_ready()
            return start

        make = functools.partial(sources.make, workload, settings, database, _wc(settings, uri))
        mine = procs.run(
            uri, make, nthreads, processes, phase, on_ready=ready,
            indices=client_range(nthreads, self.vms, 0),
        )  # fmt: skip
        ids = [f"result-{seq}-{i}" for i in followers]
        # A follower's share takes about as long as the leader's; a lost one fails the variant.
        limit = max(600.0, 10 * mine.wall_s)
        self.on_phase("waiting for the client VMs' results", limit)
        try:
            got = _wait(self.coll, ids, limit, "client VM results")
        except CoordinationError as e:
            self.lost = str(e)
            raise
        failed = [f"client VM {i}: {got[k]['failed']}" for i, k in zip(followers, ids, strict=True)
                  if "failed" in got[k]]  # fmt: skip
        if failed:
            raise CoordinationError("\n".join(failed))
        cores = min(mine.processes, procs.default_processes())
        per_vm = [_summary(0, mine.stats, mine.cpu_s, mine.wall_s, mine.processes, 0.0)]
        per_vm[0]["loop"] = procs.kinds(mine.per_process)
        per_vm[0]["sources"] = procs.kinds(mine.per_process, "sources")
        for i, k in zip(followers, ids, strict=True):
            d = got[k]
            stats = procs.decode_stats(d["stats"])
            mine.stats.merge(stats)
            mine.cpu_s += d["cpu_s"]
            mine.wall_s = max(mine.wall_s, d["wall_s"])  # both from the common start
            mine.worker_wall_s = max(mine.worker_wall_s, d.get("worker_wall_s", 0.0))
            mine.processes += d["processes"]
            cores += d["cores"]
            per_vm.append(_summary(i, stats, d["cpu_s"], d["wall_s"], d["processes"], d["late_s"]))
            per_vm[-1]["loop"], per_vm[-1]["sources"] = d.get("loop"), d.get("sources")
        return mine, cores, per_vm

    def finish(self, timeout: float = 30.0) -> None:
        """Tells the followers the run is over; drops the collection once they said bye
        (`timeout` 0, or a follower lost: says it within a second, and waits for nobody)."""
        if self.lost:
            timeout = 0.0
        try:
            with pymongo.timeout(timeout or 1.0):
                self.coll.insert_one({"_id": "done"})
        except DuplicateKeyError:
            pass
        except PyMongoError:
            if not timeout:
                return
            raise
        if not timeout:
            return
        try:
            _wait(self.coll, [f"bye-{i}" for i in range(1, self.vms)], timeout, "client VMs")
        except CoordinationError:
            return  # a follower is gone or busy: its "done" must stay readable (PKB stops it)
        self.coll.drop()


def _summary(vm, stats, cpu_s, wall_s, processes, late_s) -> dict:
    return {
        "vm": vm, "ops": sum(stats.ops.values()), "cpu_s": cpu_s, "wall_s": wall_s,
        "processes": processes, "late_s": late_s,
    }  # fmt: skip


def _wc(settings: dict, uri: str):
    return ops.write_concern(settings.get("write_concern"), connection.options(uri).write_concern)


def follow(
    client,
    uri: str,
    run_id: str,
    index: int,
    processes: int | None,
    log=print,
    leader_wait_s: float = LEADER_WAIT_S,
) -> int:
    """Client VM `index`'s side: runs its share of every announced timed phase until the
    leader says done; returns how many it ran. A CoordinationError when no leader with
    `run_id` said a word within `leader_wait_s` (a wrong run id, or no leader started)."""
    coll = client[COORD_DB][f"run_{run_id}"]
    try:
        _wait(coll, ["leader", "job-0", "done"], leader_wait_s, "leader", every=False,
              interval=0.2)  # fmt: skip
    except CoordinationError:
        raise CoordinationError(
            f"no leader with run id {run_id!r} within {leader_wait_s:g} s: is"
            f" `perftables run --client-vms K --run-id {run_id}` running on client VM 0?"
        ) from None
    seq = 0
    while True:
        # The leader may prepare for hours between timed phases: no deadline here (PKB's
        # Cleanup stops a follower whose leader is gone).
        docs = _wait(
            coll, [f"job-{seq}", "done"], float("inf"), "leader", every=False, interval=0.2
        )
        if "done" in docs and f"job-{seq}" not in docs:
            coll.insert_one({"_id": f"bye-{index}"})
            return seq
        job = docs[f"job-{seq}"]
        mine = client_range(job["clients"], job["vms"], index)

        late = {}

        def ready(seq=seq, late=late):
            coll.insert_one({"_id": f"ready-{seq}-{index}", "at": time.time()})
            start = _wait(coll, [f"start-{seq}"], READY_TIMEOUT_S, "start time")[f"start-{seq}"]
            late["s"] = max(0.0, time.time() - start["at"])  # past it: this VM starts late
            return start["at"]

        try:
            make = functools.partial(
                sources.make, job["workload"], job["settings"], job["database"],
                _wc(job["settings"], uri),
            )  # fmt: skip
            phase = procs.Phase(
                total=job["total"], duration=job["duration"], interval=job.get("interval_s")
            )
            res = procs.run(
                uri, make, job["clients"], processes, phase, on_ready=ready, indices=mine
            )
            doc = {
                "stats": procs.encode_stats(res.stats), "cpu_s": res.cpu_s,
                "wall_s": res.wall_s, "worker_wall_s": res.worker_wall_s,
                "processes": res.processes,
                "cores": min(res.processes, procs.default_processes()),
                "late_s": late.get("s", 0.0),
                "clients": len(mine),
                "loop": procs.kinds(res.per_process),
                "sources": procs.kinds(res.per_process, "sources"),
            }  # fmt: skip
            log(f"client VM {index}: job {seq}: {sum(res.stats.ops.values())} ops")
        except Exception:  # noqa: BLE001 - sent to the leader, which fails the variant
            doc = {"failed": traceback.format_exc()[-3000:]}
            log(f"client VM {index}: job {seq} failed:\n{doc['failed']}")
        coll.insert_one(dict(doc, _id=f"result-{seq}-{index}"))
        seq += 1
