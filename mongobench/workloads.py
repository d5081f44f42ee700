"""Workloads: what the client threads of one variant do.

A workload is a class registered under the name experiments use in their
`workload:` field. `prepare()` builds the starting state (untimed);
`worker()` runs in each client thread during the timed phase and accounts
every operation in its `ThreadStats`: counted operations, documents, bytes and
errors (errors are counted and kept, never swallowed into throughput).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from pymongo import WriteConcern
from pymongo.errors import BulkWriteError, PyMongoError

from mongobench.docgen import DocFactory
from mongobench.latency import LatencyRecorder
from mongobench.topology import shard_collection_command

COLLECTION = "perftables"
KB = 1024

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

    def error(self, op: str, exc: BaseException, n: int = 1) -> None:
        key = f"{op}: {type(exc).__name__}"
        self.errors[key] += n
        self.error_samples.setdefault(key, str(exc)[:300])

    def merge(self, other: ThreadStats) -> None:
        self.latency.merge(other.latency)
        self.ops.update(other.ops)
        self.docs += other.docs
        self.bytes += other.bytes
        self.errors.update(other.errors)
        self.counters.update(other.counters)
        for k, v in other.error_samples.items():
            self.error_samples.setdefault(k, v)


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

    def prepare(self) -> dict:
        """Untimed set-up; returns facts for the result (e.g. preload size)."""
        return {}

    def planned(self) -> dict:
        """What the timed phase intends to do (reported beside what it did)."""
        return {}

    def worker(self, idx: int, nthreads: int, stats: ThreadStats, stop: threading.Event):
        raise NotImplementedError

    def finish(self) -> dict:
        """Untimed measurements after the timed phase (e.g. storage size)."""
        return {}


def timed_call(stats: ThreadStats, op: str, fn, *args, **kwargs):
    """Run one operation; record its latency, or count its error."""
    t0 = time.perf_counter_ns()
    try:
        result = fn(*args, **kwargs)
    except PyMongoError as e:
        stats.error(op, e)
        return None, False
    stats.latency.record(op, (time.perf_counter_ns() - t0) / 1000.0)
    stats.ops[op] += 1
    return result, True


def split(total: int, parts: int, idx: int) -> int:
    """Share of `total` for part `idx` of `parts` (shares differ by at most 1)."""
    return total // parts + (1 if idx < total % parts else 0)


@register("insert")
class InsertWorkload(Workload):
    """Bulk inserts of fixed-size documents into an (optionally preloaded) collection.

    Settings: doc_size_kb, total_docs, batch_size, threads, id_type,
    secondary_indexes (random-integer fields i0.., one index each),
    preload_docs (loaded before the timed phase, untimed), write_concern.
    """

    required = ("doc_size_kb", "total_docs", "batch_size", "threads", "id_type")

    def __init__(self, db, settings, log=print):
        super().__init__(db, settings, log)
        self.doc_bytes = int(self.s["doc_size_kb"] * KB)
        self.n_indexes = int(self.s.get("secondary_indexes") or 0)
        self.total_docs = int(self.s["total_docs"])
        self.preload_docs = int(self.s.get("preload_docs") or 0)
        if int(self.s["batch_size"]) < 1:
            raise ValueError("batch_size must be >= 1")

    def factory(self, seed: int) -> DocFactory:
        return DocFactory(self.doc_bytes, self.s["id_type"], n_int_fields=self.n_indexes, seed=seed)

    def prepare(self):
        coll = self.fresh()
        for i in range(self.n_indexes):
            coll.create_index([(f"i{i}", 1)], name=f"i{i}_1")
        if self.preload_docs:
            self.log(f"preloading {self.preload_docs} documents")
            stats = ThreadStats()
            self._insert(coll, self.factory(seed=10_000), self.preload_docs, stats, None)
            if stats.errors:
                raise RuntimeError(f"preload failed: {dict(stats.errors)} {stats.error_samples}")
        return {"preload_docs": self.preload_docs}

    def planned(self):
        return {"docs": self.total_docs, "doc_bytes": self.doc_bytes}

    def worker(self, idx, nthreads, stats, stop):
        quota = split(self.total_docs, nthreads, idx)
        self._insert(self.collection(), self.factory(seed=idx + 1), quota, stats, stop)

    def _insert(self, coll, factory, quota, stats, stop):
        batch = int(self.s["batch_size"])
        done = 0
        while done < quota and not (stop and stop.is_set()):
            n = min(batch, quota - done)
            docs = factory.batch(n)
            done += n
            t0 = time.perf_counter_ns()
            try:
                if n == 1:
                    coll.insert_one(docs[0])
                else:
                    coll.insert_many(docs, ordered=False)
                ok = n
            except BulkWriteError as e:
                # Unordered: every document that failed has its write error.
                # nInserted alone is not trusted (mongo-java-server overstates it).
                failed = len(e.details.get("writeErrors", []))
                ok = min(e.details.get("nInserted", 0), n - failed)
                stats.error("insert", e, failed or n - ok)
            except PyMongoError as e:
                # Unknown how many landed: count none as throughput, all as errors.
                stats.error("insert", e, n)
                continue
            stats.latency.record("insert", (time.perf_counter_ns() - t0) / 1000.0)
            stats.ops["insert"] += 1
            stats.docs += ok
            stats.bytes += ok * factory.n_bytes


# Registers the keyed workloads (queries, updates, ...); imported last on purpose.
from mongobench import workloads_keyed  # noqa: E402, F401
