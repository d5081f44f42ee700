"""The inserting declarations of driver.workload (`Inserts`: DocFactory documents in batches;
`Records`: one small statement per record, made when sent) and their pymongo executor.

What driver.workload says of every declaration holds here: one declaration, run by the
multiplexed executor (`sources.inserts`, `sources.records`) and by pymongo
(`pymongo_worker`), the same documents from the same seeds, counted the same under the same
names; the cross-path test compares the two executors.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from pymongo.errors import BulkWriteError, PyMongoError

from mongobench.core.split import part
from mongobench.driver import docgen
from mongobench.driver.base import SAMPLE_IDS, ThreadStats
from mongobench.driver.docgen import DocFactory


@dataclass(frozen=True)
class Inserts:
    """Insert commands (unordered) of `batch` documents made by `doc(client index)`, counted
    as "insert": one operation per command, the documents acknowledged (and their bytes,
    with `count_bytes`). With `total`, each client inserts its part (core.split.part) of
    `total` documents, in batches (data-bounded: no total_ops or duration_s); serial `_id`s
    are then `first` + the document's number in that order. Without `total`, one batch per
    operation, `total_ops` or `duration_s` of them (a DocFactory making its own `_id`s).

    A failed batch of one document, or a failure that is not a bulk write error, counts all
    its documents as errors and no latency; a bulk write error counts the documents that
    failed as errors and the others as inserted. The first documents of each client's first
    SAMPLE_IDS wholly acknowledged batches are kept for the audit (docgen.first_id)."""

    coll: str
    doc: Callable[[int], DocFactory]
    batch: int = 1
    total: int | None = None
    first: int = 0
    count_bytes: bool = True
    op = "insert"

    def __post_init__(self):
        if self.batch < 1:
            raise ValueError("batch_size must be >= 1")

    def steps(self, idx: int, clients: int):
        """The (first document number, documents) of client `idx`'s batches (with `total`)."""
        mine = part(self.total, clients, idx)
        end = mine.stop
        return ((lo, min(self.batch, end - lo)) for lo in range(mine.start, end, self.batch))

    def sizes(self, idx: int, clients: int) -> set[int]:
        """The batch sizes client `idx` sends."""
        if self.total is None:
            return {self.batch}
        quota = len(part(self.total, clients, idx))
        return {n for n in (min(self.batch, quota), quota % self.batch) if n}

    def factory(self, idx: int) -> DocFactory:
        """Client `idx`'s document factory (its executor builds the batch writers it needs
        before the timed phase: DocFactory.prepare)."""
        docs = self.doc(idx)
        if docs.id_type == "serial" and self.total is None:
            raise ValueError("serial _ids are numbered in a total: insert them with total_docs")
        return docs


@dataclass(frozen=True)
class Field:
    """One value of a record's statement, from the record's number: (record // `div`) %
    `mod` (`mod` 0: no modulo), an int, or with `prefix` that text followed by the number in
    decimal; or with `now` the time (time.time()) when the statement is made."""

    div: int = 1
    mod: int = 0
    prefix: str | None = None
    now: bool = False

    def __post_init__(self):
        if self.div < 1 or self.mod < 0:
            raise ValueError("a record's field divides by 1 or more, modulo 0 (none) or more")

    def value(self, rec: int):
        if self.now:
            return time.time()
        v = rec // self.div
        if self.mod:
            v %= self.mod
        return v if self.prefix is None else f"{self.prefix}{v}"


@dataclass(frozen=True)
class Records:
    """Each client writes its part (core.split.part) of the records [0, `records`) once, in
    order, one operation each (data-bounded), counted under `op`, one document each.
    `statement(record)` is made when the operation is sent (it may carry the time):
    `shape` of the `fields`' values, in order: the document of an insert (`kind` "insert"),
    or the {q, u, upsert} statement of an update (`kind` "update"). Declared so, a compiled
    source can make the same statements (sources.records)."""

    op: str
    coll: str
    records: int
    kind: str
    fields: tuple[Field, ...]
    shape: Callable[[list], dict]

    def __post_init__(self):
        if self.kind not in ("insert", "update"):
            raise ValueError(f"a record is written by insert or update, not {self.kind!r}")

    def statement(self, rec: int) -> dict:
        return self.shape([f.value(rec) for f in self.fields])


def inserter(coll, docs: DocFactory, d: Inserts, stats: ThreadStats):
    """Inserts's pymongo executor: `one(lo, n)` inserts a batch of `n` documents (serial
    `_id`s from `d.first + lo`) into `coll` (also the preload of the insert workload)."""
    serial, size = docs.id_type == "serial", docs.size if d.count_bytes else 0
    sampled = 0

    def one(lo: int, n: int) -> None:
        nonlocal sampled
        batch = docs.batch(n, range(d.first + lo, d.first + lo + n) if serial else None)
        t0 = time.perf_counter_ns()
        try:
            if n == 1:
                coll.insert_one(batch[0])
            else:
                coll.insert_many(batch, ordered=False)
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
            return
        stats.latency.record("insert", (time.perf_counter_ns() - t0) / 1000.0)
        stats.ops["insert"] += 1
        stats.docs += ok
        stats.bytes += ok * size
        if ok == n and sampled < SAMPLE_IDS:  # this client's first ones, for the audit
            stats.sample_id(docgen.first_id(batch[0].raw))
            sampled += 1

    return one


def _records(coll, d: Records, idx, nthreads, stats, stop):
    """Records's pymongo executor: the client's whole part."""
    op, make = d.op, d.statement
    for rec in part(d.records, nthreads, idx):
        if stop.is_set():
            return
        stmt = make(rec)
        t0 = time.perf_counter_ns()
        try:
            if d.kind == "insert":
                coll.insert_one(stmt)
            else:
                coll.update_one(stmt["q"], stmt["u"], upsert=bool(stmt.get("upsert")))
        except PyMongoError as e:
            stats.error(op, e)
            continue
        stats.latency.record(op, (time.perf_counter_ns() - t0) / 1000.0)
        stats.ops[op] += 1
        stats.docs += 1


def pymongo_worker(w, d: Inserts | Records, idx, nthreads, stats, stop):
    """The pymongo executor of `d` for client `idx` of workload `w` (a driver.workload
    Declared): its set-up, `w.ready()`, then its operations."""
    coll = w.collection(d.coll)
    if isinstance(d, Records):
        w.ready()
        return _records(coll, d, idx, nthreads, stats, stop)
    one = inserter(coll, d.factory(idx).prepare(*d.sizes(idx, nthreads)), d, stats)
    if d.total is None:
        return w.loop(idx, nthreads, stats, stop, lambda rng, i, stats, idx: one(0, d.batch))
    w.ready()
    for lo, n in d.steps(idx, nthreads):
        if stop.is_set():
            return
        one(lo, n)
