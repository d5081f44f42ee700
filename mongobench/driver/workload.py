"""Workloads declared once, run by two executors.

A declaration (`KeyedWrite`: an update or replace per operation; `KeyedDelete`: each key
deleted once; `CursorRead`: a find or aggregate read to its end; `KeyedMix`: a read or an
update by a zipfian key, by weight; `KeyedUpsert`: an update by key that may miss, then
inserts) says what one client of a workload does per operation, and nothing about how it
is sent: the command (with ops.sentinel slots for what changes per operation), the
values of one operation drawn from the client's random generator, the name the operation
counts under and how its reply counts. Two executors run it:

- the multiplexed driver (`sources.declared`, `cursor_sources.declared`): the command
  encoded once per client
  (ops.Tmpl), the values patched into its bytes per operation, the reply checked in place;
- pymongo (`Declared.worker`, the reference path and the one set-up uses): the same
  command through the collection API, the values put into it (ops.filler);
- and for a KeyedMix, read_update's pipelined driver
  (`readupdate.ReadUpdateWorkload._pipelined`: batches in flight on one connection).

Both draw the same values from the same seeds in the same order and count the same
operations, documents, bytes and errors under the same names, which the cross-path test
(tests/integration/test_driver_multiplex.py) compares executor against executor.

The inserting declarations (`Inserts`, `Records`) and their pymongo executor are in
driver.writes; `Split` runs two declarations side by side (mixed: inserts beside finds).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

from pymongo import ReturnDocument
from pymongo.errors import PyMongoError

from mongobench.core.split import part
from mongobench.driver import ops, writes
from mongobench.driver.base import TimedLoop
from mongobench.driver.docgen import DocFactory
from mongobench.driver.writes import Inserts, Records
from mongobench.driver.zipfian import Zipfian


@dataclass(frozen=True)
class KeyedWrite:
    """One update (or replace) statement per operation, `total_ops` or `duration_s` of them
    per variant, each client drawing from random.Random(client index + 1).

    `keys` (> 0): the operation's one value is a key drawn uniformly from [0, keys)
    (`rng.randrange(keys)`); else `values(rng)` gives one operation's values in the order
    of `slots` (neither: the command never changes). With `doc` (client index ->
    DocFactory), the statement replaces the document of the operation's key with a fresh
    one of the factory (that key its `_id`), and each document counted also counts the
    factory's size in bytes. The reply's `counted` figure (`n`: matched, `nModified`:
    modified) is the documents written; with `expect` (count, message) any other count is
    an error with that message, after its latency is recorded. `ranges`: how `values` draws
    them, so a compiled source can draw them: (slot index, lo, hi) of each value in the
    order drawn, each rng.randrange(lo, hi)."""

    op: str
    coll: str
    filter: dict
    update: dict | list | None = None
    slots: tuple = ()
    values: Callable | None = None
    counted: str = "n"
    expect: tuple[int, str] | None = None
    doc: Callable[[int], DocFactory] | None = None
    keys: int = 0
    ranges: tuple | None = None

    def __post_init__(self):
        if self.keys and (self.values or len(self.slots) != 1):
            raise ValueError(f"{self.op}: keys draws the one value of one slot")
        if self.ranges is not None and (
            self.values is None
            or sorted(j for j, _, _ in self.ranges) != list(range(len(self.slots)))
        ):
            raise ValueError(f"{self.op}: ranges describe the draws of values, one a slot")
        if self.counted not in ("n", "nModified"):
            raise ValueError(f"counted must be n or nModified, not {self.counted!r}")
        if self.doc is not None and not self.keys:
            raise ValueError(f"{self.op}: a replacement document (doc) is addressed by keys")
        if (self.update is None) == (self.doc is None):
            raise ValueError(f"{self.op}: an update or a replacement document (doc), not both")


@dataclass(frozen=True)
class KeyedDelete:
    """Each client deletes its share (core.split.part) of the keys [0, `keys`) once, in
    order, `per` keys an operation: deleteOne of {_id: lo} (per 1, counted as delete_one) or
    deleteMany of {_id: {$gte: lo, $lt: hi}} (delete_many); the client stops when its keys
    are done (data-bounded: no total_ops or duration_s). The documents deleted are counted;
    fewer than the operation's keys is also an error under "delete", counted once a key
    not deleted (`SHORT`), the operation still counted."""

    coll: str
    keys: int
    per: int = 1

    SHORT = "fewer documents deleted than keys"

    def __post_init__(self):
        if self.per < 1:
            raise ValueError(f"docs_per_delete must be >= 1, not {self.per}")

    @property
    def op(self) -> str:
        return "delete_one" if self.per == 1 else "delete_many"

    @property
    def slots(self) -> tuple:
        return (ops.sentinel(0),) if self.per == 1 else (ops.sentinel(0), ops.sentinel(1))

    @property
    def filter(self) -> dict:
        k = self.slots
        return {"_id": k[0]} if self.per == 1 else {"_id": {"$gte": k[0], "$lt": k[1]}}

    def steps(self, idx: int, clients: int):
        """The (lo, hi) key ranges of client `idx` of `clients`, one an operation."""
        mine = part(self.keys, clients, idx)
        end = mine.stop
        return ((lo, min(end, lo + self.per)) for lo in range(mine.start, end, self.per))


@dataclass(frozen=True)
class CursorRead:
    """One find (`op` "find": `filter`, `projection`, `skip`, `limit`) or aggregate (`op`
    "aggregate": `filter` is the pipeline) per operation, its cursor read to the end
    (getMores counted as `getmores` on the multiplexed path), `total_ops` or `duration_s`
    of them, each client drawing from random.Random(client index + 1). `values(rng)` gives
    one operation's values in the order of `slots` (Int64 sentinels take ints, text
    sentinels bytes). The documents returned are counted; with `expect` any other number
    is an error ("<n> documents instead of <expect>"), after its latency is recorded.
    `ranges`: how `values` draws them, in order (query templates: queries.Template.ranges),
    so a compiled source can draw them: (lo, hi) for one rng.randrange(lo, hi), (lo, hi, n)
    for n distinct values (queries.sample_distinct), (prefix, alphabet, k) for a text slot's
    prefix + "".join(rng.choices(alphabet, k=k)) (ASCII)."""

    op: str
    coll: str
    filter: dict | list
    slots: tuple = ()
    values: Callable | None = None
    projection: dict | None = None
    skip: int = 0
    limit: int = 0
    expect: int | None = None
    ranges: tuple | None = None

    def __post_init__(self):
        if self.op not in ("find", "aggregate"):
            raise ValueError(f"a cursor is opened by find or aggregate, not {self.op!r}")

    @functools.cached_property
    def _fill(self):
        return ops.filler(self.filter, self.slots)

    def cursor(self, coll, vals):
        """The pymongo cursor of one operation with values `vals`."""
        if self.op == "aggregate":
            return coll.aggregate(self._fill(vals))
        cursor = coll.find(self._fill(vals), self.projection)
        if self.skip:
            cursor = cursor.skip(self.skip)
        return cursor.limit(self.limit)


def _pymongo_write(coll, d: KeyedWrite, idx: int):
    """KeyedWrite's pymongo executor: one operation per call."""
    fill_filter = ops.filler(d.filter, d.slots)
    op, expect, doc = d.op, d.expect, d.doc(idx) if d.doc else None
    modified = d.counted == "nModified"
    if doc is not None:
        size = doc.size

        def send(vals):
            return coll.replace_one(fill_filter(vals), doc.make(_id=vals[0]))
    else:
        size, fill_update = 0, ops.filler(d.update, d.slots)

        def send(vals):
            return coll.update_one(fill_filter(vals), fill_update(vals))

    keys, values = d.keys, d.values

    def one(rng, i, stats, idx):
        vals = (rng.randrange(keys),) if keys else values(rng) if values else ()
        t0 = time.perf_counter_ns()
        try:
            res = send(vals)
        except PyMongoError as e:
            stats.error(op, e)
            return
        stats.latency.record(op, (time.perf_counter_ns() - t0) / 1000.0)
        n = res.modified_count if modified else res.matched_count
        if expect is not None and n != expect[0]:
            stats.error(op, RuntimeError(expect[1]))
            return
        stats.ops[op] += 1
        stats.docs += n
        stats.bytes += size * n

    return one


def _pymongo_cursor(coll, d: CursorRead, idx: int):
    """CursorRead's pymongo executor: one operation per call."""
    op, expect = d.op, d.expect

    def one(rng, i, stats, idx):
        vals = d.values(rng) if d.values else ()
        t0 = time.perf_counter_ns()
        try:
            got = sum(1 for _ in d.cursor(coll, vals))
        except PyMongoError as e:
            stats.error(op, e)
            return
        stats.latency.record(op, (time.perf_counter_ns() - t0) / 1000.0)
        stats.docs += got
        if expect is not None and got != expect:
            stats.error(op, RuntimeError(f"{got} documents instead of {expect}"))
            return
        stats.ops[op] += 1

    return one


def _pymongo_deletes(coll, d: KeyedDelete, idx, nthreads, stats, stop):
    """KeyedDelete's pymongo executor: the client's whole share."""
    fill, op = ops.filler(d.filter, d.slots), d.op
    send = coll.delete_one if d.per == 1 else coll.delete_many
    for lo, hi in d.steps(idx, nthreads):
        if stop.is_set():
            return
        t0 = time.perf_counter_ns()
        try:
            n = send(fill((lo, hi))).deleted_count
        except PyMongoError as e:
            stats.error(op, e)
            continue
        stats.latency.record(op, (time.perf_counter_ns() - t0) / 1000.0)
        stats.ops[op] += 1
        stats.docs += n
        if n != hi - lo:
            stats.error("delete", RuntimeError(d.SHORT), hi - lo - n)


# ----------------------------------------------------------------------------- keyed mix and upsert
# (read_update, update_api)


@dataclass(frozen=True)
class KeyedMix:
    """A weighted mix of a read and an update by key (YCSB's core workload), `total_ops` or
    `duration_s` operations per variant. Each operation draws from random.Random(client
    index + 1), in this order, its key (`keys`: a Zipfian over [0, keys.n); keys.key of one
    rng.random(), or keys.sampler(rng.random) as one closure) and u = rng.random(): u <
    `reads` makes it a read, a find_one of `filter` (counted under READ, with the document
    it found; none found is an error NOT_FOUND under READ, after its latency is recorded),
    else an update of `filter` by `update` (slots: the key, then the operation's number;
    counted under UPDATE, with the documents it matched)."""

    coll: str
    keys: Zipfian
    reads: float
    filter: dict
    update: dict
    slots: tuple

    READ, UPDATE, NOT_FOUND = "read", "update", "document not found"

    def __post_init__(self):
        if len(self.slots) != 2:
            raise ValueError("a keyed mix's slots are its key and the operation's number")

    def templates(self, db: str, wc: dict | None) -> tuple[ops.Tmpl, ops.Tmpl]:
        """The read's and the update's requests as the wire executors send them (the find
        as pymongo's find_one: limit 1, single batch)."""
        read = ops.find_tmpl(db, self.coll, self.filter, list(self.slots[:1]), ops.FIND_ONE)
        return read, ops.update_tmpl(db, self.coll, self.filter, self.update, list(self.slots), wc)


@dataclass(frozen=True)
class KeyedUpsert:
    """An update by key that may miss (update_api), `total_ops` or `duration_s` operations
    per variant. Each operation draws from random.Random(client index + 1) whether its key
    is new (`draw`: `percent_new` percent of them, a key of the client's own beyond the
    data) or one of [0, `keys`), then sends `fn` (update_one: an update; or
    find_one_and_update: a findAndModify returning the new document) of {_id: key} with
    `update(document)`, the document a fresh one of `doc(client index)` with the key as its
    `_id`, and `upsert`. A miss without upsert inserts that document (in the operation's
    latency; counted as fallback_inserts); a miss with upsert is an error (MISSED). Each
    operation is counted under `fn` with one document, and as new_keys or existing_keys."""

    fn: str
    coll: str
    keys: int
    percent_new: float
    upsert: bool
    doc: Callable[[int], DocFactory]
    update: Callable[[object], dict]

    FUNCTIONS = ("update_one", "find_one_and_update")
    MISSED = "upsert neither matched nor inserted"

    def __post_init__(self):
        if self.fn not in self.FUNCTIONS:
            raise ValueError(f"function must be one of {self.FUNCTIONS}, not {self.fn!r}")

    def new_base(self, idx: int) -> int:
        """The first new key of client `idx` (its new keys are disjoint from the others')."""
        return self.keys * (idx + 1) + 10**9

    def draw(self, rng, base: int, i: int) -> tuple[int, bool]:
        """Operation `i`'s (key, is new) from the client's generator, its first new key
        `base`."""
        pct = self.percent_new
        is_new = pct > 0 and rng.random() * 100 < pct
        return (base + i if is_new else rng.randrange(self.keys)), is_new


def _pymongo_mix(coll, d: KeyedMix, idx: int):
    """KeyedMix's pymongo executor: one operation per call."""
    fill_q, fill_u = ops.filler(d.filter, d.slots[:1]), ops.filler(d.update, d.slots)
    key_of, reads, read, update = d.keys.key, d.reads, d.READ, d.UPDATE

    def one(rng, i, stats, idx):
        key = key_of(rng.random())
        op = read if rng.random() < reads else update
        t0 = time.perf_counter_ns()
        try:
            if op is read:
                n = 0 if coll.find_one(fill_q((key,))) is None else 1
            else:
                n = coll.update_one(fill_q((key,)), fill_u((key, i))).matched_count
        except PyMongoError as e:
            stats.error(op, e)
            return
        stats.latency.record(op, (time.perf_counter_ns() - t0) / 1000.0)
        if op is read and not n:
            stats.error(op, RuntimeError(d.NOT_FOUND))
            return
        stats.ops[op] += 1
        stats.docs += n

    return one


def _pymongo_upsert(coll, d: KeyedUpsert, idx: int):
    """KeyedUpsert's pymongo executor: one operation per call."""
    factory, base, fn, upsert = d.doc(idx), d.new_base(idx), d.fn, d.upsert

    def one(rng, i, stats, idx):
        key, is_new = d.draw(rng, base, i)
        full = factory.make(_id=key)
        update = d.update(full)
        t0 = time.perf_counter_ns()
        try:
            if fn == "update_one":
                hit = coll.update_one({"_id": key}, update, upsert=upsert)
                missed = hit.matched_count == 0 and hit.upserted_id is None
            else:
                hit = coll.find_one_and_update(
                    {"_id": key}, update, upsert=upsert, return_document=ReturnDocument.AFTER
                )
                missed = hit is None
            if missed and not upsert:
                coll.insert_one(full)
                stats.counters["fallback_inserts"] += 1
        except PyMongoError as e:
            stats.error(fn, e)
            return
        if missed and upsert:
            stats.error(fn, RuntimeError(d.MISSED))
            return
        stats.latency.record(fn, (time.perf_counter_ns() - t0) / 1000.0)
        stats.ops[fn] += 1
        stats.counters["new_keys" if is_new else "existing_keys"] += 1
        stats.docs += 1

    return one


PYMONGO = {
    KeyedWrite: _pymongo_write,
    CursorRead: _pymongo_cursor,
    KeyedMix: _pymongo_mix,
    KeyedUpsert: _pymongo_upsert,
}


@dataclass(frozen=True)
class Split:
    """Two declarations side by side: the clients of index < `first` run `head`, the others
    `rest` (seed 004's mixed workload: inserts beside finds)."""

    first: int
    head: Inserts | Records | KeyedWrite | KeyedUpsert | KeyedMix | CursorRead
    rest: Inserts | Records | KeyedWrite | KeyedUpsert | KeyedMix | CursorRead

    def pick(self, idx: int):
        """The declaration client `idx` runs."""
        return self.head if idx < self.first else self.rest


class Declared(TimedLoop):
    """A TimedLoop workload given by its declaration (`declare()`, from its settings); its
    pymongo worker is the declaration's pymongo executor."""

    def declare(
        self,
    ) -> KeyedWrite | KeyedDelete | CursorRead | KeyedMix | KeyedUpsert | Inserts | Records | Split:
        raise NotImplementedError

    def worker(self, idx, nthreads, stats, stop):
        d = self.declare()
        if isinstance(d, Split):
            d = d.pick(idx)
        if isinstance(d, (Inserts, Records)):
            return writes.pymongo_worker(self, d, idx, nthreads, stats, stop)
        if isinstance(d, KeyedDelete):  # data-bounded, not a TimedLoop
            self.ready()
            _pymongo_deletes(self.collection(d.coll), d, idx, nthreads, stats, stop)
            return
        self.loop(idx, nthreads, stats, stop, PYMONGO[type(d)](self.collection(d.coll), d, idx))
