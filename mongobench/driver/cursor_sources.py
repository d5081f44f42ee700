"""The multiplexed executor of the cursor workloads (driver.workload.CursorRead: find
and aggregate, declared once), with their getMores (see driver.sources for what a
source is).
"""

from __future__ import annotations

import random

from mongobench.driver import ops, replies
from mongobench.driver.multiplex import Client, count_error
from mongobench.driver.workload import CursorRead


def micros(run, t0: float) -> float:
    return (run.now - t0) * 1e6


def _get_mores(c: Client, got: int, cid: int, get_more, limit: int, batch: int = 0):
    """After a find/aggregate whose first batch held `got` documents and left cursor
    `cid` open: yields getMores until the cursor is exhausted (batchSize as pymongo:
    what the limit leaves, at most `batch`); returns (error outcome or None,
    documents, getMores)."""
    more = 0
    gm_tmpl, gm_buf, gm_check = get_more
    while cid:
        if limit or batch:
            size = (min(limit - got, batch) if batch else limit - got) if limit else batch
            gm_tmpl.write(gm_buf, c.rid, cid, size)
        else:
            gm_tmpl.write(gm_buf, c.rid, cid)
        out = yield gm_buf, gm_check
        more += 1
        if out[0] is not None:
            return out, got, more
        got += out[1]
        cid = out[2]
    return None, got, more


def _get_more(db, coll, op, limit, batch=0):
    t = ops.get_more_tmpl(db, coll, batch_size=bool(limit or batch))
    return t, t.buffer(), replies.CursorCheck(op, b"nextBatch")


def _finder(c, first_t, values, check, get_more, limit, expect: int | None):
    """A source body for find / aggregate loops: each logical operation is the
    command (judged by `check`, shared by the clients) and its getMores;
    `expect`: the documents each must return."""
    op = check.op
    rng = random.Random(c.index + 1)
    run, stats = c.run, c.stats
    record, counts, counters = c.record, stats.ops, stats.counters
    buf = first_t.buffer()
    gm = (get_more[0], get_more[0].buffer(), get_more[2])
    for _ in c.ops():
        if run.stopped:
            return
        first_t.write(buf, c.rid, *values(rng))
        t0 = c.begin()
        out = yield buf, check
        if out[0] is not None:
            bad, got, more = out, 0, 0
        elif out[2]:  # the cursor stays open: its getMores (a generator only then: the
            # common single batch makes none per operation)
            bad, got, more = yield from _get_mores(c, out[1], out[2], gm, limit)
        else:
            bad, got, more = None, out[1], 0
        counters["getmores"] += more
        if bad is not None:
            count_error(stats, op, bad[0], bad[3])
            continue
        record(op, micros(run, t0))
        stats.docs += got
        if expect is not None and got != expect:
            count_error(stats, op, "RuntimeError", f"{got} documents instead of {expect}")
        else:
            counts[op] += 1


def declared(d: CursorRead, db: str):
    """The multiplexed executor of a declared cursor workload (driver.workload.CursorRead):
    its command encoded once, each operation's values patched in, then its getMores."""
    if d.op == "aggregate":
        t = ops.aggregate_tmpl(db, d.coll, d.filter, list(d.slots))
    else:
        find = ops.Find(d.projection, skip=d.skip, limit=d.limit)
        t = ops.find_tmpl(db, d.coll, d.filter, list(d.slots), find)
    get_more = _get_more(db, d.coll, d.op, d.limit)
    check = replies.CursorCheck(d.op)
    values = d.values or (lambda rng: ())

    def source(c: Client):
        return _finder(c, t, values, check, get_more, d.limit, d.expect)

    if d.values is None or d.ranges is not None:
        source.compiled = _compiled(t, d, check, get_more)
    return source


def _compiled(t: ops.Tmpl, d: CursorRead, check, get_more):
    """The source as the compiled loop's own (driver._loop.KeyedReads: the same requests,
    values and getMores, the same accounting, with no bytecode per operation but the
    checks'): `compiled(c, module)`, or None where it cannot stand in (a range of 2**32 or
    more, more than 128 values, text not of one-byte letters)."""
    draws, k = [], 0  # (offset, lo, hi), (offsets, lo, hi) of n distinct values, or letters
    raw = bytearray(t.raw)  # text prefixes written once: only the letters are drawn
    for lo, hi, *n in d.ranges or ():
        if isinstance(lo, str):  # (prefix, alphabet, letters)
            at, code = t.slots[k]
            prefix, alphabet = lo.encode(), hi.encode()
            if not (alphabet.isascii() and code == f"{len(prefix) + n[0]}s"):
                return None
            raw[at : at + len(prefix)] = prefix
            draws.append((at + len(prefix), alphabet, n[0]))
            k += 1
            continue
        slots = [t.slots[j] for j in range(k, k + (n[0] if n else 1))]
        if hi - lo >= 1 << 32 or any(code != "q" for _, code in slots):
            return None
        draws.append((tuple(at for at, _ in slots) if n else slots[0][0], lo, hi))
        k += len(slots)
    if k > 128:
        return None
    draws, raw = tuple(draws), bytes(raw)
    gm, _, gm_check = get_more
    size_at = gm.slots[1][0] if 1 in gm.slots else -1
    expect = d.expect if d.expect is not None else -1

    def compiled(c: Client, module):
        state = random.Random(c.index + 1).getstate()[1]
        return module.KeyedReads(
            raw, c.rid, draws, state, check, check.op, c.quota if c.quota is not None else -1,
            c.run, c.stats, count_error, c.record, gm.raw, gm.slots[0][0], size_at, gm_check,
            c.stats.counters, d.limit, expect,
        )  # fmt: skip

    return compiled
