"""Sources for the multiplexed driver: what each workload's clients send.

A workload declared in driver.workload (its command, keys and counting, written once) is
run here by `declared`, its multiplexed executor; pymongo runs the same declaration
(workload.Declared.worker): the same keys from the same seeds, the same logical
operations, the same accounting of operations, documents, bytes, counters and errors,
under the same names, over pre-encoded requests. `make(workload, settings, database, wc)`
returns the source for `multiplex.Loop`. Setup and preparation stay on pymongo (the
workload's `prepare`); the cross-path test compares both executors.

Where the pymongo path records a latency before it finds a result wrong (a
read that found nothing, an update that matched nothing), so does this one.

A source builds what a client needs once (documents, templates: for large
documents many milliseconds) when it is called, before the timed phase
(multiplex.Loop calls it when it is built); only the generator it returns runs
in the timed phase.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import struct
from dataclasses import dataclass

from bson.raw_bson import RawBSONDocument

from mongobench.core.split import part
from mongobench.driver import cursor_sources, docgen, multiplex, ops, protocol, replies
from mongobench.driver.base import SAMPLE_IDS
from mongobench.driver.catalog import WORKLOADS
from mongobench.driver.cursor_sources import micros
from mongobench.driver.docgen import DocFactory
from mongobench.driver.multiplex import Client, count_error
from mongobench.driver.workload import (
    CursorRead,
    Declared,
    KeyedDelete,
    KeyedMix,
    KeyedUpsert,
    Split,
)
from mongobench.driver.writes import Inserts, Records


def _doc_slot(tmpl: ops.Tmpl, docs: DocFactory) -> int:
    """Offset of the placeholder document (the factory's template) inside the template's
    message."""
    if tmpl.raw.count(docs.raw) != 1:
        raise ValueError("the placeholder document must occur exactly once")
    return tmpl.raw.index(docs.raw)


def _insert_sizes(batches: set[int], per_msg: int) -> set[int]:
    """The message sizes (documents) of batches of `batches` documents."""
    sizes = set()
    for n in batches:
        if n >= per_msg:
            sizes.add(per_msg)
        sizes.add(n % per_msg)
    return sizes


def _placeholder(docs: DocFactory) -> RawBSONDocument:
    return RawBSONDocument(docs.raw)


@dataclass(frozen=True)
class Counted:
    """How a write's reply counts: under `op`; the reply's `field` (1: n, 2: nModified;
    None: one document an operation, as an unacknowledged write counts) is the documents
    written (`size` bytes each); with `expect` (value, message) any other count is an
    error, after its latency is recorded (as the pymongo path records it)."""

    op: str
    field: int | None = 1
    expect: tuple[int, str] | None = None
    size: int = 0


def _writes(c: Client, buf, check, fill, counted: Counted, steps=None):
    """The shape of the writes, one round trip an operation: per step `i` (the client's
    operation numbers, else `steps`) `fill(buf, i)` writes the request into the buffer
    (or returns a request of its own); the reply counts as `counted` says."""
    run, stats = c.run, c.stats
    record, counts = c.record, stats.ops
    op, field, expect, size = counted.op, counted.field, counted.expect, counted.size
    for i in c.ops() if steps is None else steps:
        if run.stopped:
            return
        req = fill(buf, i) or buf
        t0 = c.begin()
        out = yield req, check
        if out[0] is not None:
            count_error(stats, op, out[0], out[4])
            continue
        record(op, micros(run, t0))
        n = out[field] if field else 1
        if expect is not None and n != expect[0]:
            count_error(stats, op, "RuntimeError", expect[1])
            continue
        counts[op] += 1
        stats.docs += n
        stats.bytes += size * n


# ----------------------------------------------------------------------------- workloads


def declared(name, s, db, wc):
    """The multiplexed executor of a declared workload (driver.workload)."""
    return executor(WORKLOADS[name](None, s).declare(), db, wc)


def executor(d, db, wc):
    """The multiplexed executor of declaration `d`: its command encoded once per client,
    each operation's values patched in, its reply counted as the declaration says (a
    cursor's: cursor_sources.declared)."""
    if isinstance(d, Split):
        head, rest = executor(d.head, db, wc), executor(d.rest, db, wc)
        source = lambda c: head(c) if c.index < d.first else rest(c)  # noqa: E731
        if getattr(head, "compiled", None) or getattr(rest, "compiled", None):
            source.compiled = lambda c, module: _twin(head if c.index < d.first else rest)(
                c, module
            )
        return source
    if isinstance(d, Inserts):
        return inserts(d, db, wc)
    if isinstance(d, Records):
        return records(d, db, wc)
    if isinstance(d, CursorRead):
        return cursor_sources.declared(d, db)
    if isinstance(d, KeyedDelete):
        return _deletes(d, db, wc)
    if isinstance(d, KeyedMix):
        return _mix(d, db, wc)
    if isinstance(d, KeyedUpsert):
        return _upsert(d, db, wc)
    check = replies.WriteCheck(d.op)  # one per process: its memo serves every client
    slots, values = list(d.slots), d.values
    count = Counted(d.op, 2 if d.counted == "nModified" else 1, d.expect)
    shared = None if d.doc else ops.update_tmpl(db, d.coll, d.filter, d.update, slots, wc)

    def replacement(c: Client):  # the client's factory, its statement, the document's place
        docs = d.doc(c.index).prepare(1)
        t = ops.update_tmpl(db, d.coll, d.filter, _placeholder(docs), slots, wc)
        return docs, t, _doc_slot(t, docs)

    def source(c: Client):
        rng, rid = random.Random(c.index + 1), c.rid
        if d.doc is not None:
            docs, t, at = replacement(c)
            write, key, keys = t.write, rng.randrange, d.keys

            def fill(buf, i):
                k = key(keys)
                write(buf, rid, k)
                docs.write(buf, at, 1, (k,))

            return _writes(c, t.buffer(), check, fill, dataclasses.replace(count, size=docs.size))
        write, keys, buf = shared.write, d.keys, shared.buffer()
        if keys:  # one uniform key: the generator's method bound, no tuple per operation
            key = rng.randrange
            return _writes(c, buf, check, lambda buf, i: write(buf, rid, key(keys)), count)
        if values is None:
            return _writes(c, buf, check, lambda buf, i: write(buf, rid), count)
        return _writes(c, buf, check, lambda buf, i: write(buf, rid, *values(rng)), count)

    if d.doc is not None:
        source.compiled = _compiled_writes(
            None, d.keys, check, count, replacement=replacement, fallback=source
        )
    elif values is None or d.ranges is not None:
        source.compiled = _compiled_writes(shared, d.keys, check, count, d.ranges)
    return source


def _twin(source):
    """`compiled(c, module)` of a source: its compiled twin's, else the source itself."""
    return getattr(source, "compiled", None) or (lambda c, module: source(c))


def _compiled_writes(
    t, keys: int, check, count: Counted, ranges=None, replacement=None, fallback=None
):
    """The executor's source for a keyed write as the compiled loop's own
    (driver._loop.KeyedWrites: the same requests, keys and accounting, with no bytecode
    per operation): one uniform key, values drawn as `ranges` say, or none. With
    `replacement(c)` -> (factory, template, offset), a fresh document of the key, and
    `fallback(c)`, the Python source, where the factory has no DocWriter.
    `compiled(c, module)`, or None where it cannot stand in (a range of 2**32 or more)."""
    spec = ranges if ranges is not None else ((0, 0, keys),) if keys else ()  # (slot, lo, hi)
    if any(hi - lo >= 1 << 32 for _, lo, hi in spec) or (
        t is not None and any(t.slots[j][1] != "q" for j, _, _ in spec)
    ):
        return None
    expect, message = count.expect if count.expect is not None else (0, None)

    def compiled(c: Client, module):
        docs, tmpl, at = replacement(c) if replacement is not None else (None, t, -1)
        writer = _doc_writer(docs, module) if docs is not None else None
        if docs is not None and writer is None:
            return fallback(c)
        draws = tuple((tmpl.slots[j][0], lo, hi) for j, lo, hi in spec)
        size = docs.size if docs is not None else count.size
        state = random.Random(c.index + 1).getstate()[1]
        return module.KeyedWrites(
            tmpl.raw, c.rid, draws, state, check, count.op,
            c.quota if c.quota is not None else -1, c.run, c.stats, count_error, c.record,
            count.field or 0, expect, message, size, docs=writer, doc_at=at,
        )  # fmt: skip

    return compiled


def _deletes(d: KeyedDelete, db, wc):
    """KeyedDelete's multiplexed executor."""
    many, op = d.per > 1, d.op
    t = ops.delete_tmpl(db, d.coll, d.filter, list(d.slots), wc, many=many)
    check = replies.WriteCheck(op)

    def source(c: Client):
        run, stats = c.run, c.stats
        record, counts = c.record, stats.ops
        buf, write, rid = t.buffer(), t.write, c.rid
        for lo, hi in d.steps(c.index, c.clients):
            if run.stopped:
                return
            if many:
                write(buf, rid, lo, hi)
            else:
                write(buf, rid, lo)
            t0 = c.begin()
            out = yield buf, check
            if out[0] is not None:
                count_error(stats, op, out[0], out[4])
                continue
            record(op, micros(run, t0))
            counts[op] += 1
            stats.docs += out[1]
            if out[1] != hi - lo:
                count_error(stats, "delete", "RuntimeError", d.SHORT, hi - lo - out[1])

    lo_at, hi_at = t.slots[0][0], t.slots[1][0] if many else -1

    def compiled(c: Client, module):  # the compiled loop's twin (KeyedWrites, in steps)
        mine = part(d.keys, c.clients, c.index)
        return module.KeyedWrites(
            t.raw, c.rid, (), random.Random().getstate()[1], check, op, -1, c.run, c.stats,
            count_error, c.record, 1, 0, None, 0, steps=(mine.start, mine.stop, d.per, lo_at,
            hi_at), short_op="delete", short_msg=d.SHORT,
        )  # fmt: skip

    source.compiled = compiled
    return source


# ----------------------------------------------------------------------------- inserts


def inserts(d: Inserts, db, wc):
    """Inserts's multiplexed executor: each batch's documents written by its factory
    straight into the message (a document sequence, split as pymongo's insert_many
    splits it)."""
    bulk = ops.BulkInsert(db, d.coll, wc)
    checks = {True: replies.WriteCheck("insert", bulk=True), False: replies.WriteCheck("insert")}

    def prepare(c: Client):
        docs = d.factory(c.index)
        per_msg = min(d.batch, bulk.max_docs(docs.size))
        docs.prepare(*_insert_sizes(d.sizes(c.index, c.clients), per_msg))
        return docs, per_msg

    def message(docs, per_msg: int) -> bytearray:  # the Python source writes each into it
        return bytearray(bulk.prefix_size() + per_msg * docs.size)

    def setup(c: Client):
        docs, per_msg = prepare(c)
        return docs, per_msg, message(docs, per_msg)

    def run_ops(c: Client, docs, per_msg, buf):
        run, stats = c.run, c.stats
        record, counts = c.record, stats.ops
        serial, first, sampled = docs.id_type == "serial", d.first, 0
        size = docs.size if d.count_bytes else 0
        steps = d.steps(c.index, c.clients) if d.total is not None else None
        for step in steps if steps is not None else c.ops():
            if run.stopped:
                return
            done, n = step if steps is not None else (0, d.batch)
            t0, ok, failed, bad = c.begin(), 0, 0, None
            for lo in range(0, n, per_msg):  # insert_many splits as pymongo does
                m = min(per_msg, n - lo)
                pos = bulk.write_prefix(buf, c.rid, m * docs.size)
                k = first + done + lo
                docs.write(buf, pos, m, range(k, k + m) if serial else None)
                out = yield memoryview(buf)[: pos + m * docs.size], checks[n > 1]
                if out[0] is not None and (n == 1 or out[0] != "BulkWriteError"):
                    bad = out
                    break
                if out[0] is not None:
                    fails = out[5]
                    ok += min(out[1], m - fails)
                    failed += fails or (m - min(out[1], m))
                    bad = bad or out
                else:
                    ok += m
            if bad is not None and (n == 1 or bad[0] != "BulkWriteError"):
                count_error(stats, "insert", bad[0], bad[4], n)
                continue
            if bad is not None:
                count_error(stats, "insert", "BulkWriteError", bad[4], failed)
            record("insert", micros(run, t0))
            counts["insert"] += 1
            stats.docs += ok
            stats.bytes += ok * size
            if bad is None and sampled < SAMPLE_IDS:  # this client's first ones, for the audit
                stats.sample_id(docgen.first_id(buf, pos))
                sampled += 1

    def compiled(c: Client, module):  # the compiled loop's twin (Inserts)
        docs, per_msg = prepare(c)
        writer = _doc_writer(docs, module)
        if writer is None:
            return run_ops(c, docs, per_msg, message(docs, per_msg))
        prefix = bytearray(bulk.prefix_size())
        pos = bulk.write_prefix(prefix, c.rid, 0)
        sizes = tuple(sorted(n for n in _insert_sizes(d.sizes(c.index, c.clients), per_msg) if n))
        if d.total is not None:
            mine, quota = part(d.total, c.clients, c.index), -1
            steps = (mine.start, mine.stop, d.first)
        else:
            steps, quota = None, c.quota if c.quota is not None else -1
        return module.Inserts(
            bytes(prefix), c.rid, (), random.Random().getstate()[1], checks[False], "insert",
            quota, c.run, c.stats, count_error, c.record, docs=writer, bulk_check=checks[True],
            per_msg=per_msg, batch=d.batch, sizes=sizes, seq_at=pos - len(bulk.ident) - 4,
            count_bytes=d.count_bytes, steps=steps, first_id=docgen.first_id,
            sample_id=c.stats.sample_id, samples=SAMPLE_IDS,
        )  # fmt: skip

    source = lambda c: run_ops(c, *setup(c))  # noqa: E731
    source.compiled = compiled
    return source


def _doc_writer(docs: DocFactory, module):
    """The factory's compiled twin (driver._loop.DocWriter: the same documents, its state
    taken over), or None for a factory it cannot stand in for (integer fields beyond 64, or
    their range beyond 2**31)."""
    try:
        return module.DocWriter(docs)
    except ValueError:
        return None


def records(d: Records, db, wc):
    """Records's multiplexed executor: each record's statement encoded when it is sent (a
    few microseconds; it may carry the time)."""
    if d.kind == "insert":
        key, cmd = "documents", {"insert": d.coll, "ordered": True}
    else:
        key, cmd = "updates", {"update": d.coll, "ordered": True}
    check, make = replies.WriteCheck(d.op), d.statement

    def encode(stmt: dict, rid: int = 0) -> bytes:
        return protocol.encode_msg(ops._with_wc({**cmd, key: [stmt], "$db": db}, wc), rid)

    def source(c: Client):
        def fill(_, rec):
            return encode(make(rec), c.rid)

        steps = part(d.records, c.clients, c.index)
        return _writes(c, None, check, fill, Counted(d.op, None), steps)

    shapes = _record_shapes(d, encode)
    if shapes is not None:
        kinds = tuple(2 if f.now else 0 if f.prefix is None else 1 for f in d.fields)
        fields = (kinds, tuple(f.div for f in d.fields), tuple(f.mod for f in d.fields), shapes)

        def compiled(c: Client, module):  # the compiled loop's twin (KeyedWrites, records)
            steps = part(d.records, c.clients, c.index)
            spec = (steps.start, steps.stop, *fields)
            return module.KeyedWrites(
                shapes[0][0], c.rid, (), random.Random(0).getstate()[1], check, d.op, -1,
                c.run, c.stats, count_error, c.record, 0, 0, None, 0, records=spec,
            )  # fmt: skip

        source.compiled = compiled
    return source


def _i32_sentinel(k: int) -> int:
    """The k-th int32 placeholder of a record's statement (pymongo encodes an int below
    2**31 as an int32)."""
    return 0x5EC0DE00 + k


def _double_sentinel(k: int) -> float:
    return struct.unpack("<d", bytes([0x5E, 0xC0, 0xDE, k, 0x11, 0x22, 0x33, 0x7E]))[0]


def _record_shapes(d: Records, encode) -> tuple | None:
    """The statement's requests for the compiled twin, one a length of the text field's
    number (1, 2, ... digits; one request without a text field), each with its fields'
    offsets (a text's digits after its prefix, written in): ((request, offsets), ...).
    None where it cannot stand in: more than 16 fields or one text, a text without a
    modulo, an int of 2**31 or more, a placeholder found other than once."""
    texts = [f for f in d.fields if f.prefix is not None]
    if len(d.fields) > 16 or len(texts) > 1 or any(not f.mod for f in texts):
        return None
    if d.records > 2**31 or not all(f.prefix.isascii() for f in texts):
        return None
    shapes = []
    for digits in range(1, len(str(texts[0].mod - 1)) + 1 if texts else 2):
        values, needles = [], []
        for k, f in enumerate(d.fields):
            if f.now:
                values.append(_double_sentinel(k))
                needles.append((struct.pack("<d", values[-1]), 0))
            elif f.prefix is None:
                values.append(_i32_sentinel(k))
                needles.append((struct.pack("<i", values[-1]), 0))
            else:
                values.append(f.prefix + ops.text_sentinel(digits))
                needles.append((values[-1].encode(), len(f.prefix)))
        raw = encode(d.shape(values))
        if any(raw.count(needle) != 1 for needle, _ in needles):
            return None
        ats = tuple(raw.index(needle) + skip for needle, skip in needles)
        shapes.append((raw, ats))
    return tuple(shapes)


# ----------------------------------------------------------------------------- keyed mix, upsert


def _mix(d: KeyedMix, db, wc):
    """KeyedMix's multiplexed executor: the read and the update share one round trip."""
    read_t, update_t = d.templates(db, wc)
    reads, read, update, not_found = d.reads, d.READ, d.UPDATE, d.NOT_FOUND
    # immutable, shared by the clients: the key distribution and the reply checks
    rcheck, ucheck = replies.CursorCheck(read), replies.WriteCheck(update)

    def source(c: Client):
        rng = random.Random(c.index + 1)
        rand, run, stats = rng.random, c.run, c.stats
        next_key = d.keys.sampler(rand)  # d.keys.key(rand()) as one closure
        record, counts = c.record, stats.ops
        rbuf, ubuf = read_t.buffer(), update_t.buffer()
        rwrite, uwrite = read_t.write, update_t.write
        for i in c.ops():
            if run.stopped:
                return
            key = next_key()
            if rand() < reads:  # a read's error message is its reply's field 3
                rwrite(rbuf, c.rid, key)
                buf, check, op, msg = rbuf, rcheck, read, 3
            else:
                uwrite(ubuf, c.rid, key, i)
                buf, check, op, msg = ubuf, ucheck, update, 4
            t0 = c.begin()
            out = yield buf, check
            if out[0] is not None:
                count_error(stats, op, out[0], out[msg])
                continue
            record(op, micros(run, t0))
            if out[1] == 1 or msg == 4:  # a read finds its one document
                counts[op] += 1
                stats.docs += out[1]
            else:
                count_error(stats, read, "RuntimeError", not_found)

    return source


def _upsert(d: KeyedUpsert, db, wc):
    """KeyedUpsert's multiplexed executor: the statement, then on a miss without upsert
    the insert of the document it carried (copied from the statement's bytes)."""
    fn, upsert, k0 = d.fn, d.upsert, ops.sentinel(0)

    def setup(c: Client):
        docs = d.doc(c.index).prepare(1)
        full = _placeholder(docs)
        update = d.update(full)
        if fn == "update_one":
            t = ops.update_tmpl(db, d.coll, {"_id": k0}, update, [k0], wc, upsert=upsert)
        else:
            t = ops.find_and_modify_tmpl(db, d.coll, {"_id": k0}, update, [k0], wc, upsert=upsert)
        ins = ops.Tmpl(ops._with_wc({"insert": d.coll, "ordered": True, "documents": [full],
                                     "$db": db}, wc))  # fmt: skip
        return docs, t, ins, _doc_slot(t, docs), _doc_slot(ins, docs)

    check = replies.WriteCheck(fn) if fn == "update_one" else replies.FindAndModifyCheck(fn)
    ins_check = replies.WriteCheck(fn)

    def run_ops(c: Client, docs, t, ins, at, ins_at):
        dn = docs.size
        rng = random.Random(c.index + 1)
        run, stats = c.run, c.stats
        record, counts, counters = c.record, stats.ops, stats.counters
        buf, ibuf = t.buffer(), ins.buffer()
        base, draw = d.new_base(c.index), d.draw
        for i in c.ops():
            if run.stopped:
                return
            key, is_new = draw(rng, base, i)
            t.write(buf, c.rid, key)
            docs.write(buf, at, 1, (key,))
            t0 = c.begin()
            out = yield buf, check
            if out[0] is not None:
                count_error(stats, fn, out[0], out[4] if fn == "update_one" else out[3])
                continue
            missed = (out[1] == 0 and out[3] == 0) if fn == "update_one" else not out[1]
            if missed and not upsert:
                ins.write(ibuf, c.rid)
                ibuf[ins_at : ins_at + dn] = buf[at : at + dn]
                out = yield ibuf, ins_check
                if out[0] is not None:
                    count_error(stats, fn, out[0], out[4])
                    continue
                counters["fallback_inserts"] += 1
            elif missed:
                count_error(stats, fn, "RuntimeError", d.MISSED)
                continue
            record(fn, micros(run, t0))
            counts[fn] += 1
            counters["new_keys" if is_new else "existing_keys"] += 1
            stats.docs += 1

    def compiled(c: Client, module):  # the compiled loop's twin (KeyedUpserts)
        docs, t, ins, at, ins_at = setup(c)
        writer = _doc_writer(docs, module) or docs.write
        return module.KeyedUpserts(
            t.raw, c.rid, (), random.Random(c.index + 1).getstate()[1], check, fn,
            c.quota if c.quota is not None else -1, c.run, c.stats, count_error, c.record,
            t.slots[0][0], d.keys, float(d.percent_new), d.new_base(c.index), writer, at,
            docs.size, fn == "update_one", upsert, ins.raw, ins_at, ins_check, c.stats.counters,
            d.MISSED,
        )  # fmt: skip

    source = lambda c: run_ops(c, *setup(c))  # noqa: E731
    source.compiled = compiled if 0 < d.keys < 1 << 32 else None
    return source


# Every workload is declared (driver.workload): run by its multiplexed executor.
SOURCES = {
    name: functools.partial(declared, name)
    for name, cls in WORKLOADS.items()
    if issubclass(cls, Declared)
}


def data_bounded(d) -> bool:
    """Whether the clients of declaration `d` stop when their share of the data is done
    (inserts of a total, records, deletes); the others loop until total_ops or duration_s
    (endless without either)."""
    if isinstance(d, Split):
        return data_bounded(d.head) and data_bounded(d.rest)
    return isinstance(d, (Records, KeyedDelete)) or (isinstance(d, Inserts) and d.total is not None)


def check_bounds(workload: str, d, settings: dict) -> None:
    """Raises ValueError (as the pymongo path's loop does) for a variant of `workload`
    (declaration `d`) that would never end."""
    if not data_bounded(d) and not (settings.get("total_ops") or settings.get("duration_s")):
        raise ValueError(f"workload {workload} needs total_ops or duration_s")


def make(workload: str, settings: dict, database: str, wc: dict | None = None):
    """The source for `workload` with the variant's settings (wc: the write concern,
    see ops.write_concern); in an open loop with `target_ops_per_s` (multiplex.paced)."""
    if workload not in SOURCES:
        raise ValueError(f"the multiplexed driver has no source for workload {workload!r}")
    source = SOURCES[workload](settings, database, wc)
    rate = settings.get("target_ops_per_s")
    return multiplex.paced(source, float(rate)) if rate else source
