"""Workloads: what the client threads of one variant do.

A workload is a class registered under the name experiments use in their
`workload:` field. `prepare()` builds the starting state (untimed);
`worker()` runs in each client thread during the timed phase and accounts
every operation in its `ThreadStats`: counted operations, documents, bytes and
errors (errors are counted and kept, never swallowed into throughput).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from pymongo import WriteConcern
from pymongo.errors import PyMongoError

from mongobench.core.latency import LatencyRecorder
from mongobench.core.series import Series
from mongobench.core.shardkey import shard_collection_command
from mongobench.core.split import part, share
from mongobench.core.units import KiB
from mongobench.driver.docgen import DocFactory

COLLECTION = "perftables"
# The audit's sampled ids: the first acknowledged batches' first documents of each client
SAMPLE_IDS = 2
SAMPLE_IDS_TOTAL = 256
WORKLOADS: dict[str, type[Workload]] = {}


def register(name):
    def deco(cls):
        cls.name = name
        WORKLOADS[name] = cls
        return cls

    return deco


@dataclass
class ThreadStats:
    latency: LatencyRecorder = field(default_factory=LatencyRecorder)
    ops: Counter = field(default_factory=Counter)  # successful operations by type
    docs: int = 0  # documents written or returned
    bytes: int = 0
    errors: Counter = field(default_factory=Counter)  # "<op>: <ErrorClass>" -> count
    error_samples: dict = field(default_factory=dict)  # first message per key
    counters: Counter = field(default_factory=Counter)  # workload-specific counts
    # open loop: latency from the actual send (`latency` counts from the intended time)
    service: LatencyRecorder = field(default_factory=LatencyRecorder)
    series: Series | None = None  # per-interval figures of the timed phase (core.series)
    written_ids: list = field(default_factory=list)  # a sample of acknowledged inserts' _id

    def sample_id(self, _id) -> None:
        """Keeps `_id` (of an acknowledged insert) for the audit (callers take SAMPLE_IDS per
        client; at most SAMPLE_IDS_TOTAL are kept)."""
        if _id is not None and len(self.written_ids) < SAMPLE_IDS_TOTAL:
            self.written_ids.append(_id)

    def error(self, op: str, exc: BaseException, n: int = 1) -> None:
        if self.latency.tick is not None:
            self.latency.tick()
        key = f"{op}: {type(exc).__name__}"
        self.errors[key] += n
        self.error_samples.setdefault(key, str(exc)[:300])

    def merge(self, other: ThreadStats) -> None:
        self.latency.merge(other.latency)
        self.service.merge(other.service)
        self.ops.update(other.ops)
        self.docs += other.docs
        self.bytes += other.bytes
        self.errors.update(other.errors)
        self.counters.update(other.counters)
        for k, v in other.error_samples.items():
            self.error_samples.setdefault(k, v)
        self.written_ids.extend(
            other.written_ids[: max(0, SAMPLE_IDS_TOTAL - len(self.written_ids))]
        )
        if other.series is not None:
            if self.series is None:
                self.series = Series(other.series.interval_s)
            self.series.merge(other.series)

    def record_intervals(self, interval_s: float | None, t0: float, tick: bool = False) -> None:
        """Starts the per-interval recorder (core.series) of the timed phase starting at `t0`
        (perf_counter seconds) when `interval_s` is set; `tick`: the clock is checked at each
        recorded operation or error (a client thread; the multiplexed loop checks it at each
        wake-up instead)."""
        if interval_s:
            series = Series.live(self, interval_s, t0)
            if tick:
                self.latency.tick = series.check

    def close_intervals(self, now: float | None = None) -> None:
        """The end of the timed phase: the last counts go to the last interval."""
        if self.series is not None:
            self.latency.tick = None
            self.series.close(now)


class Workload:
    """Base: settings validation and shared helpers."""

    name = "?"
    required: tuple[str, ...] = ()
    uri: str | None = None  # set by the runner; never copied into settings or results

    def __init__(self, db, settings: dict, log=print):
        missing = [k for k in self.required if k not in settings]
        if missing:
            raise ValueError(f"workload {self.name} needs settings {', '.join(missing)}")
        self.db = db
        self.s = settings
        self.log = log

    def collection(self, name=COLLECTION):
        wc = self.s.get("write_concern")
        if wc is None:
            return self.db[name]
        w = int(wc) if str(wc).isdigit() else wc
        return self.db.get_collection(name, write_concern=WriteConcern(w=w))

    def fresh(self, name=COLLECTION):
        """Drops collection `name` and, on a sharded deployment (setting `sharded`), shards
        it again with the `shard_key` setting, so the data that follows is distributed."""
        coll = self.collection(name)
        coll.drop()
        if self.s.get("sharded"):
            key = self.s.get("shard_key") or "_id:hashed"
            ns = f"{self.db.name}.{name}"
            self.db.client.admin.command(shard_collection_command(ns, key))
        return coll

    @classmethod
    def key_example(cls, settings: dict) -> str:
        """One `_id` the variant's operations address, as mongosh shows it (in the
        metadata as key_example): integer keys 0..preload_docs unless the query names one."""
        query = settings.get("query")
        if isinstance(query, dict) and isinstance(query.get("_id"), int):
            return str(query["_id"])
        return str(int(settings.get("preload_docs") or 0) // 2)

    @classmethod
    def ran_as(cls, settings: dict) -> dict:
        """Settings whose real value differs from the set one, and that real value: a scale
        that leaves each client fewer documents than its batch makes every batch smaller
        (insert_batchsize's 1000 and 2000 both run as 16 at smoke). {} when none does."""
        return {}

    def prepare(self) -> dict:
        """Untimed set-up; returns facts for the result (e.g. preload size)."""
        return {}

    def planned(self) -> dict:
        """What the timed phase intends to do (reported beside what it did)."""
        return {}

    def worker(self, idx: int, nthreads: int, stats: ThreadStats, stop: threading.Event):
        """One client thread's timed phase. It sets up what it needs (collections,
        documents, templates, connections), then calls `self.ready()`, which returns
        when every client thread is ready: only what follows is timed."""
        raise NotImplementedError

    def ready(self) -> None:
        """Called by each client thread once its set-up is done; returns at the common
        start (the runner's gate; nothing outside a timed phase)."""
        gate = getattr(self, "gate", None)
        if gate is not None:
            gate()

    def finish(self) -> dict:
        """Untimed measurements after the timed phase (e.g. storage size)."""
        return {}

    # The audit of acknowledged writes (see `audit`): what the workload's acknowledged writes
    # must have left on the server, in words; None: nothing this workload writes is checked.
    audit_check: str | None = None

    def audit_state(self) -> int:
        """The figure the audit compares: a document count or a counter."""
        raise NotImplementedError

    def audit_expected(self, baseline: int, stats: ThreadStats) -> int:
        """The figure every acknowledged write of the timed phase implies."""
        return baseline + stats.docs

    def audit_lost(self, expected: int, found: int) -> int:
        """Acknowledged writes that are not there (default: fewer than expected)."""
        return max(0, expected - found)

    def audit_sample(self, stats: ThreadStats) -> tuple[int, int] | None:
        """(sampled, missing): acknowledged writes looked up one by one; None: none sampled."""
        return None


# The updates' audit sums the incremented field over the documents the variant addresses when
# they are at most this many (an _id range read after the timed phase); above, it counts them.
AUDIT_SUM_MAX = 200_000


class UpdateAudit:
    """The audit of an update workload (a mixin for Workload): with `audit_inc` (a field every
    acknowledged update increments by 1) and at most AUDIT_SUM_MAX documents addressed, that
    field's sum over `_id` in [0, audit_range) = before + acknowledged updates; otherwise the
    documents are counted (updates and replaces neither add nor remove any)."""

    audit_inc: str | None = None
    coll_name = COLLECTION

    def audit_range(self) -> int:
        return int(self.s["preload_docs"])

    def _summed(self) -> bool:
        return bool(self.audit_inc) and self.audit_range() <= AUDIT_SUM_MAX

    @property
    def audit_check(self):
        if self._summed():
            return f"sum of {self.audit_inc} = before + acknowledged updates (each adds 1)"
        return "documents = before (updates and replaces neither add nor remove)"

    def audit_state(self):
        coll = self.db[self.coll_name]
        if not self._summed():
            return coll.estimated_document_count()
        rows = list(
            coll.aggregate([
                {"$match": {"_id": {"$gte": 0, "$lt": self.audit_range()}}},
                {"$group": {"_id": None, "n": {"$sum": f"${self.audit_inc}"}}},
            ])
        )  # fmt: skip
        return int(rows[0]["n"]) if rows else 0

    def audit_expected(self, baseline, stats):
        return baseline + stats.docs if self._summed() else baseline


def audit_baseline(workload: Workload) -> int | None:
    """The audited figure before the timed phase (after prepare, outside the timed window)."""
    return workload.audit_state() if workload.audit_check else None


def audit(workload: Workload, baseline: int | None, stats: ThreadStats) -> dict | None:
    """After the timed phase (outside its window): the acknowledged writes checked against
    what the server has. {"check", "expected", "found", "lost_writes"}; None: not audited."""
    if baseline is None:
        return None
    found = workload.audit_state()
    expected = workload.audit_expected(baseline, stats)
    out = {
        "check": workload.audit_check,
        "expected": expected,
        "found": found,
        "lost_writes": workload.audit_lost(expected, found),
    }
    sample = workload.audit_sample(stats)
    if sample is not None:  # a count can hide a loss (another document in its place)
        out["sampled_ids"], out["sampled_missing"] = sample
        out["lost_writes"] = max(out["lost_writes"], sample[1])
    return out


META = "perftables_meta"
LOAD_BATCH = 1000
LOAD_THREADS = 4


def load_serial(workload: Workload, coll_name: str, n: int, doc_kb: float, fields, shape: str):
    """Fill `coll_name` with documents `_id` 0..n-1 (Int64) unless it already holds them.

    `fields(i)` gives the named integer fields of document i. Returns True when
    the data was reused.
    """
    db = workload.db
    names = tuple(fields(0).keys())
    marker = {"_id": coll_name, "docs": n, "doc_kb": doc_kb, "shape": shape, "fields": list(names)}
    coll = workload.collection(coll_name)
    found = db[META].find_one({"_id": coll_name})
    if found == marker and coll.estimated_document_count() == n:
        return True
    db[META].delete_one({"_id": coll_name})
    coll = workload.fresh(coll_name)
    errors = []

    def body(t):
        f = DocFactory(int(doc_kb * KiB), "serial", int_fields=names, seed=1000 + t)
        mine = part(n, LOAD_THREADS, t)
        try:
            for lo in range(mine.start, mine.stop, LOAD_BATCH):
                docs = [
                    f.make(_id=i, ints=list(fields(i).values()))
                    for i in range(lo, min(mine.stop, lo + LOAD_BATCH))
                ]
                coll.insert_many(docs, ordered=False)
        except PyMongoError as e:
            errors.append(e)

    threads = [threading.Thread(target=body, args=(t,)) for t in range(LOAD_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"loading {coll_name} failed: {errors[0]}")
    count = coll.count_documents({})
    if count != n:
        raise RuntimeError(f"loading {coll_name}: {count} documents instead of {n}")
    db[META].replace_one({"_id": coll_name}, marker, upsert=True)
    return False


class TimedLoop(Workload):
    """Count-based (`total_ops`) or time-based (`duration_s`) operation loops."""

    def loop(self, idx, nthreads, stats, stop, one_op):
        quota = self.s.get("total_ops")
        quota = share(int(quota), nthreads, idx) if quota else None
        duration = self.s.get("duration_s")
        self.ready()
        t_end = time.perf_counter() + float(duration) if duration else None
        if quota is None and t_end is None:
            raise ValueError(f"workload {self.name} needs total_ops or duration_s")
        rng = random.Random(idx + 1)
        i = 0
        while not stop.is_set():
            if quota is not None and i >= quota:
                break
            if t_end is not None and time.perf_counter() >= t_end:
                break
            one_op(rng, i, stats, idx)
            i += 1

    def planned(self):
        return {k: self.s[k] for k in ("total_ops", "duration_s") if self.s.get(k)}
