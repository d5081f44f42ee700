"""The keyed writes' compiled source (driver._loop.KeyedWrites) against its Python twin
(sources._writes): the same requests byte for byte (the keys random.Random draws), the same
accounting of every outcome, the same end; and run by the compiled loop over a socketpair
against scripted replies, where it skips the check for a reply equal to the last success."""

from __future__ import annotations

import dataclasses
import inspect
import random
import socket
import struct
import sys
import threading
import time

import bson
import pytest
from native_helpers import compiled, drive, latencies, twins

from mongobench.driver import (
    cursor_sources,
    docgen,
    multiplex,
    native,
    ops,
    replies,
    sources,
    writes,
)
from mongobench.driver.base import ThreadStats
from mongobench.driver.catalog import WORKLOADS

OK = (None, 1, 1, 0, None, 0)
NOT_MODIFIED = (None, 1, 0, 0, None, 0)
FAILED = ("WriteError", 0, 0, 0, "E11000 duplicate key", 0)
SCRIPT = [OK, OK, NOT_MODIFIED, OK, FAILED, OK, (None, 3, 3, 0, None, 0), OK, OK, OK]

# keyed writes without a document: one uniform key (update_fields: nModified, expected 1;
# update_indexed: nModified, anything), or none (hot_update: n, expected 1)
WORKLOAD_CASES = {
    "update_fields": {"preload_docs": 300, "doc_size_kb": 1, "threads": 3, "n_fields": 2,
                      "doc_range": 300},
    "update_indexed": {"preload_docs": 300, "doc_size_kb": 1, "threads": 3, "indexes": 2,
                       "update_indexed_fields": False},
    "hot_update": {"preload_docs": 10, "doc_size_kb": 1, "threads": 3},
    # the indexed fields' new values drawn before the key (KeyedWrite.ranges)
    "update_indexed:fields": {"preload_docs": 300, "doc_size_kb": 1, "threads": 3, "indexes": 3,
                              "update_indexed_fields": True},
    # a fresh document of the key per operation (a DocWriter), its bytes counted
    "replace": {"preload_docs": 300, "doc_size_kb": 1, "threads": 3, "doc_range": 200},
}  # fmt: skip


@pytest.mark.parametrize("workload", sorted(WORKLOAD_CASES))
@pytest.mark.parametrize("index", [0, 2])
def test_same_requests_and_accounting_as_the_python_source(workload, index):
    module = compiled()
    settings = dict(WORKLOAD_CASES[workload], total_ops=24)
    source = sources.make(workload.split(":")[0], settings, "db")
    assert source.compiled is not None
    (py_sent, py), (c_sent, mine) = twins(source, module, index, 24, SCRIPT * 3)
    assert len(py_sent) == 8  # the client's share of 24
    assert [r for r, _ in c_sent] == [r for r, _ in py_sent]
    assert all(a is b for (_, a), (_, b) in zip(c_sent, py_sent, strict=True))
    assert mine.ops == py.ops and sum(py.ops.values()) > 0
    assert (mine.docs, mine.bytes) == (py.docs, py.bytes)
    assert (py.bytes > 0) == (workload == "replace")  # a replacement counts its document
    assert mine.errors == py.errors and mine.error_samples == py.error_samples
    assert "WriteError" in " ".join(py.errors)
    lat = latencies(mine)
    assert {op: sum(c.values()) for op, c in lat.items()} == {
        op: sum(c.values()) for op, c in latencies(py).items()
    }
    assert all(1000 <= us < 50_000 for c in lat.values() for us in c)  # from the fill: 1 ms on


@pytest.mark.parametrize("keys", [1, 2, 3, 60, 1000, 15_000_000, 2**31, 2**32 - 1])
def test_keys_drawn_as_random_randrange_draws_them(keys):
    """Past the generator's regeneration (every 624 words) and across bit widths."""
    module = compiled()
    t = ops.update_tmpl("db", "c", {"_id": ops.sentinel(0)}, {"$inc": {"n": 1}}, [ops.sentinel(0)])
    at = t.slots[0][0]
    run, stats = multiplex.Run(), ThreadStats()
    state = random.Random(7).getstate()[1]
    gen = module.KeyedWrites(
        t.raw, 1, ((at, 0, keys),), state, object(), "update", -1, run, stats,
        multiplex.count_error, stats.latency.record, 1, 0, None, 0,
    )  # fmt: skip
    sent = drive(gen, run, [OK] * 1499)
    drawn = [struct.unpack_from("<q", r, at)[0] for r, _ in sent]
    rng = random.Random(7)
    assert drawn == [rng.randrange(keys) for _ in range(1500)]


def _draw_reads(module, template: bytes, draws, seed: int, n: int) -> list:
    """The first n requests of a KeyedReads of `draws` (random.Random(seed)'s), every find
    answered with one document."""
    gm = ops.get_more_tmpl("db", "c", False)
    run, stats = multiplex.Run(), ThreadStats()
    gen = module.KeyedReads(
        template, 1, draws, random.Random(seed).getstate()[1], object(), "find", -1, run,
        stats, multiplex.count_error, stats.latency.record, gm.raw, gm.slots[0][0], -1,
        object(), stats.counters, 0, -1,
    )  # fmt: skip
    return drive(gen, run, [(None, 1, 0, None)] * (n - 1))


def test_values_drawn_in_order_as_randrange_draws_them():
    """Several values of several ranges (a query template's), negative bounds too."""
    module = compiled()
    ranges = ((0, 2), (-5, 5), (10**9, 10**9 + 7), (0, 2**32 - 1))
    slots = [ops.sentinel(k) for k in range(len(ranges))]
    t = ops.find_tmpl("db", "c", {f"f{k}": v for k, v in enumerate(slots)}, slots)
    draws = tuple((t.slots[k][0], lo, hi) for k, (lo, hi) in enumerate(ranges))
    sent = _draw_reads(module, t.raw, draws, 3, 1000)
    rng = random.Random(3)
    for req, _ in sent:
        assert [struct.unpack_from("<q", req, at)[0] for at, _, _ in draws] == [
            rng.randrange(lo, hi) for lo, hi in ranges
        ]


@pytest.mark.parametrize("alphabet,k", [("ab", 1), ("abcdefghijklmnopqrstuvwxyz", 2), ("xyz", 9)])
def test_letters_drawn_as_random_choices_draws_them(alphabet, k):
    """Text values (regex_prefix's): k letters as rng.choices(alphabet, k=k), between int
    draws, past the generator's regeneration."""
    module = compiled()
    text, key = ops.text_sentinel(k + 1), ops.sentinel(0)
    t = ops.find_tmpl("db", "c", {"name": {"$regex": text}, "n": key}, [text, key])
    (at, code), (key_at, _) = t.slots[0], t.slots[1]
    assert code == f"{k + 1}s"
    raw = bytearray(t.raw)
    raw[at : at + 1] = b"^"
    draws = ((at + 1, alphabet.encode(), k), (key_at, 0, 1000))
    sent = _draw_reads(module, bytes(raw), draws, 5, 800)
    rng = random.Random(5)
    for req, _ in sent:
        expected = ("^" + "".join(rng.choices(alphabet, k=k))).encode(), rng.randrange(1000)
        assert (req[at : at + k + 1], struct.unpack_from("<q", req, key_at)[0]) == expected


def test_regex_prefix_has_a_compiled_twin():
    """The prefix queries (the shell loop's) from the compiled source: the same requests and
    accounting as the Python source, a short batch counted as the Python one counts it."""
    module = compiled()
    settings = {"preload_docs": 100, "threads": 1, "prefix_len": 2, "limit": 10, "total_ops": 30}
    source = sources.make("regex_prefix", settings, "db")
    assert source.compiled is not None
    script = [(None, 10, 0, None)] * 5 + [(None, 3, 0, None)] + [(None, 10, 0, None)] * 30
    (py_sent, py), (c_sent, mine) = twins(source, module, 1, 30, script)
    assert len(py_sent) == 10 and [r for r, _ in c_sent] == [r for r, _ in py_sent]
    assert len({r for r, _ in py_sent}) > 5  # prefixes drawn, not one request
    assert mine.ops == py.ops and (mine.docs, mine.bytes) == (py.docs, py.bytes)
    assert py.docs == 93 and mine.errors == py.errors


@pytest.mark.parametrize("bucket_size", [500, 5, 0])
def test_bucket_records_have_a_compiled_twin(bucket_size):
    """Seed 004's bucket test from the compiled source: each record's statement as the
    Python source encodes it (the tag's 1 or 2 digits pick its shape), but for the time it
    carries (8 bytes, read when made); the same accounting and end."""
    module = compiled()

    def atomic(request: bytes) -> dict:  # the record's fields in the request's command
        cmd = bson.decode(request[21:])
        stmt = (cmd.get("updates") or cmd["documents"])[0]
        return stmt["u"]["$push"]["items"] if bucket_size else stmt

    settings = {"records": 40, "bucket_size": bucket_size, "threads": 3}
    source = sources.make("bucket", settings, "db", {"w": 1})
    assert source.compiled is not None
    t0 = time.time()
    (py_sent, py), (c_sent, mine) = twins(source, module, 1, None, SCRIPT * 3)
    t1 = time.time()
    assert len(py_sent) == len(c_sent) == 13  # records 14..26 of 40, then the end
    for (p, _), (c, _) in zip(py_sent, c_sent, strict=True):
        assert len(p) == len(c)
        diff = [i for i in range(len(p)) if p[i] != c[i]]
        assert not diff or diff[-1] - diff[0] < 8  # the time only
        assert t0 <= atomic(c)["ts"] <= t1 and t0 <= atomic(p)["ts"] <= t1
        at = bytes(c).index(struct.pack("<d", atomic(c)["ts"]))
        assert c[:at] + p[at : at + 8] + c[at + 8 :] == p  # the rest byte for byte
    tags = [atomic(r)["tag"] for r, _ in c_sent]
    assert tags == [f"t{rec % 13}" for rec in range(14, 27)]  # both shapes
    assert mine.ops == py.ops and (mine.docs, mine.bytes) == (py.docs, py.bytes)
    assert mine.errors == py.errors and mine.error_samples == py.error_samples


def test_records_the_compiled_source_cannot_make_run_in_python():
    d = WORKLOADS["bucket"](None, {"records": 40, "bucket_size": 5, "threads": 1}).declare()
    assert sources.executor(d, "db", None).compiled is not None
    two_texts = d.fields + (writes.Field(mod=7, prefix="x"),)
    no_mod = d.fields[:4] + (writes.Field(prefix="t"),)
    for fields in (two_texts, no_mod):
        changed = dataclasses.replace(d, fields=fields, shape=lambda v: {"v": v})
        assert not hasattr(sources.executor(changed, "db", None), "compiled")
    past_int32 = dataclasses.replace(d, records=2**31 + 1)
    assert not hasattr(sources.executor(past_int32, "db", None), "compiled")
    for bad in ({"div": 0}, {"mod": -1}):
        with pytest.raises(ValueError, match="divides by 1 or more"):
            writes.Field(**bad)


def test_an_outcome_of_the_wrong_shape_is_refused():
    module = compiled()
    source = sources.make("hot_update", dict(WORKLOAD_CASES["hot_update"], total_ops=9), "db")
    run, stats = multiplex.Run(), ThreadStats()
    gen = source.compiled(multiplex.Client(0, 1, run, stats, total=9), module)
    next(gen)
    for bad in (("WriteError", 0, 0, "a cursor check's"), [None, 1, 1, 0, None, 0], None):
        with pytest.raises(TypeError, match="outcome"):
            gen.send(bad)
    assert not stats.ops and not stats.errors


def test_a_stopped_run_ends_it_at_its_next_operation():
    module = compiled()
    source = sources.make("hot_update", dict(WORKLOAD_CASES["hot_update"], total_ops=100), "db")
    run, stats = multiplex.Run(), ThreadStats()
    gen = source.compiled(multiplex.Client(0, 1, run, stats, total=100), module)
    next(gen)
    gen.send(OK)
    run.stopped = True
    with pytest.raises(StopIteration):
        gen.send(OK)
    assert stats.ops == {"update": 2}  # both replies counted, no third request


def test_where_no_compiled_source_stands_in(monkeypatch):
    s = dict(WORKLOAD_CASES["update_fields"], total_ops=10)
    assert sources.make("update_fields", s, "db").compiled is not None
    # an open loop
    assert not hasattr(
        sources.make("update_fields", dict(s, target_ops_per_s=100), "db"), "compiled"
    )
    # keys past 32 bits: the Python source
    d = dataclasses.replace(WORKLOADS["update_fields"](None, s).declare(), keys=2**32)
    assert sources.executor(d, "db", None).compiled is None
    api = {"preload_docs": 300, "doc_size_kb": 1, "threads": 3, "total_ops": 6,
           "function": "update_one", "upsert": True, "percent_new": 0}  # fmt: skip
    d = dataclasses.replace(WORKLOADS["update_api"](None, api).declare(), keys=2**32)
    assert sources.executor(d, "db", None).compiled is None
    assert sources.make("update_api", api, "db").compiled is not None


INIT_ONCE = {
    "KeyedWrites": ("update_fields", WORKLOAD_CASES["update_fields"]),
    "KeyedReads": ("query", {"preload_docs": 2000, "doc_size_kb": 1, "group_size": 200,
                             "threads": 3, "query": {"group": "RANDINT(0,groups)"},
                             "limit": 150}),
    "KeyedUpserts": ("update_api", {"preload_docs": 300, "doc_size_kb": 1, "threads": 3,
                                    "function": "update_one", "upsert": True,
                                    "percent_new": 50}),
    "Inserts": ("insert", {"doc_size_kb": 1, "threads": 3, "batch_size": 10,
                           "total_docs": 60, "id_type": "serial"}),
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(INIT_ONCE))
def test_a_compiled_source_is_initialised_once(kind):
    """A second __init__ is refused before it touches anything: one failing half-way would
    leave the live source pointing into objects it no longer holds. The source still runs."""
    module = compiled()
    workload, s = INIT_ONCE[kind]
    source = sources.make(workload, dict(s, total_ops=6), "db")
    run, stats = multiplex.Run(), ThreadStats()
    gen = source.compiled(multiplex.Client(0, 1, run, stats, total=6), module)
    assert type(gen).__name__ == kind
    with pytest.raises(RuntimeError, match=f"{kind}: initialised already"):
        gen.__init__()
    first = next(gen)
    assert isinstance(first, tuple) and len(first) == 2
    if kind == "Inserts":
        writer = module.DocWriter(docgen.DocFactory(64, "serial"))
        with pytest.raises(RuntimeError, match="DocWriter: initialised already"):
            writer.__init__(docgen.DocFactory(64, "serial"))


def test_bad_construction_is_refused():
    module = compiled()
    t = ops.update_tmpl("db", "c", {"_id": ops.sentinel(0)}, {"$inc": {"n": 1}}, [ops.sentinel(0)])
    run, stats = multiplex.Run(), ThreadStats()
    state = random.Random(1).getstate()[1]

    at = t.slots[0][0]
    gm = ops.get_more_tmpl("db", "c", True)
    common = dict(template=t.raw, rid=1, draws=((at, 0, 10),), state=state, check=None,
                  op="update", quota=-1, run=run, stats=stats,
                  count_error=multiplex.count_error, record=stats.latency.record)  # fmt: skip

    def writes(**kw):
        return module.KeyedWrites(**{**common, **dict(field=1, expect=0, expect_msg=None,
                                                      size=0), **kw})  # fmt: skip

    def reads(**kw):
        return module.KeyedReads(**{**common, **dict(
            get_more=gm.raw, id_at=gm.slots[0][0], size_at=gm.slots[1][0], get_more_check=None,
            counters=stats.counters, limit=10, expect=-1), **kw})  # fmt: skip

    writes()
    reads()
    bad_common = [{"draws": ((len(t.raw) - 4, 0, 10),)}, {"draws": ((at, 5, 5),)},
                  {"draws": ((at, 0, 2**32),)}, {"draws": ((8, 0, 10),)}, {"state": (1, 2)},
                  {"draws": ((at, 0, 10),) * 129}, {"draws": (((at,) * 12, 0, 11),)},
                  {"draws": (((), 0, 10),)}, {"draws": (((at, 8), 0, 10),)},
                  {"draws": ((len(t.raw) - 2, b"ab", 3),)}, {"draws": ((at, b"", 3),)},
                  {"draws": ((at, b"ab", 0),)}, {"draws": ((8, b"ab", 2),)}]  # fmt: skip
    for bad in bad_common:
        for make in (writes, reads):
            with pytest.raises(ValueError, match="compiled source"):
                make(**bad)
    with pytest.raises(ValueError, match="KeyedWrites"):
        writes(field=7)
    steps = {"draws": (), "steps": (0, 10, 1, at, -1), "short_op": "delete"}
    writes(**steps)
    for bad in ({"draws": ((at, 0, 10),)}, {"quota": 5}, {"short_op": None},
                {"steps": (0, 10, 0, at, -1)}, {"steps": (0, 10, 1, len(t.raw) - 4, -1)},
                {"steps": (0, 10, 1, at, 4)}):  # fmt: skip
        with pytest.raises(ValueError, match="KeyedWrites"):
            writes(**{**steps, **bad})
    for bad in ({"id_at": len(gm.raw) - 4}, {"size_at": 4}, {"limit": 0}):
        with pytest.raises(ValueError, match="KeyedReads"):
            reads(**bad)
    one = ((t.raw, (at,)),)
    records = {"draws": (), "records": (0, 10, (0,), (1,), (0,), one)}
    writes(**records)
    for bad in ({"draws": ((at, 0, 10),)}, {"quota": 5},
                {"records": (0, 10, (1,), (1,), (13,), one)},  # 2 digits: no shape for them
                {"records": (0, 2**32, (0,), (1,), (0,), one)},  # past an int32
                {"records": (0, 10, (0,), (1,), (0,), ((t.raw, (len(t.raw) - 2,)),))},
                {"records": (0, 10, (3,), (1,), (0,), one)}, {"records": (5, 4, (0,), (1,), (0,), one)},
                {"records": (0, 10, (0,), (0,), (0,), one)}):  # fmt: skip
        with pytest.raises(ValueError, match="KeyedWrites"):
            writes(**{**records, **bad})


def _reply(rid: int, doc: dict) -> bytes:
    body = b"\x00\x00\x00\x00\x00" + bson.encode(doc)
    return struct.pack("<iiii", 16 + len(body), 99, rid, 2013) + body


def _run_over_socketpair(kind, monkeypatch, replies_: list[dict]):
    """update_fields' one client against a peer answering `replies_` in turn; (stats,
    requests the peer read, the loop's kind, the source's type)."""
    stats, seen, loop, gen = _loop_over_socketpair(kind, monkeypatch, replies_)
    return stats, seen, loop.kind, type(gen).__name__


def _loop_over_socketpair(kind, monkeypatch, replies_: list[dict]):
    """As _run_over_socketpair: (stats, requests the peer read, the loop once run, its
    client's source)."""
    monkeypatch.setenv(native.ENV, kind)
    s = dict(WORKLOAD_CASES["update_fields"], total_ops=len(replies_))
    source = sources.make("update_fields", s, "db")
    mine, peer = socket.socketpair()
    mine.setblocking(False)
    seen = []

    def serve():
        for doc in replies_:
            head = peer.recv(16, socket.MSG_WAITALL)
            (length,) = struct.unpack_from("<i", head)
            seen.append(head + peer.recv(length - 16, socket.MSG_WAITALL))
            peer.sendall(_reply(struct.unpack_from("<i", head, 4)[0], doc))

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    loop = multiplex.prepare_clients(None, source, range(1), 1, total=len(replies_), socks=[mine])
    [c] = loop.conns.values()
    gen = c.gen
    del c
    stats, _, _ = multiplex.run_prepared(loop)
    server.join(5)
    peer.close()
    return stats, seen, loop, gen


def test_the_compiled_loop_runs_it_and_checks_every_new_reply(monkeypatch):
    """Equal replies reuse the last success's outcome; any other is checked (nModified 0
    after two equal successes is still the error it is, a server error too)."""
    compiled()
    ok = {"n": 1, "nModified": 1, "ok": 1.0}
    script = [ok, ok, {"n": 1, "nModified": 0, "ok": 1.0}, ok, {"ok": 0.0, "errmsg": "boom",
              "code": 2, "codeName": "BadValue"}, ok, ok]  # fmt: skip
    runs = {}
    for kind in (native.NATIVE, native.PYTHON):
        stats, seen, loop_kind, gen = _run_over_socketpair(kind, monkeypatch, script)
        assert loop_kind == kind
        assert gen == ("KeyedWrites" if kind == native.NATIVE else "generator")
        runs[kind] = (stats, seen)
    (mine, c_seen), (py, py_seen) = runs[native.NATIVE], runs[native.PYTHON]
    assert c_seen == py_seen and len(c_seen) == len(script)
    assert mine.ops == py.ops == {"update": 5}
    assert mine.errors == py.errors and len(py.errors) == 2
    assert mine.error_samples == py.error_samples


def test_the_loop_picks_the_compiled_source_only_with_the_compiled_loop(monkeypatch):
    module = compiled()
    source = sources.make("hot_update", dict(WORKLOAD_CASES["hot_update"], total_ops=4), "db")
    for kind, expected in ((native.NATIVE, module.KeyedWrites), (native.PYTHON, None)):
        monkeypatch.setenv(native.ENV, kind)
        mine, peer = socket.socketpair()
        loop = multiplex.prepare_clients(None, source, range(1), 1, total=4, socks=[mine])
        [c] = loop.conns.values()
        assert type(c.gen) is expected if expected else type(c.gen).__name__ == "generator"
        loop.ep.close()
        mine.close()
        peer.close()


QUERY = {"preload_docs": 2000, "doc_size_kb": 1, "group_size": 200, "threads": 3, "total_ops": 45}
READ_CASES = {
    # a limit: getMores carry batchSize (what the limit leaves); 150 documents expected
    "find_limit": ("query", dict(QUERY, query={"group": "RANDINT(0,groups)"}, limit=150)),
    "find_two_values": ("query", dict(
        QUERY, query={"group": "RANDINT(0,groups)", "group_seq": {"$gte": "RANDINT(5,50)"}},
        limit=10, skip=2)),
    # $in: 100 distinct values (queries.sample_distinct), a range tight enough to redraw
    "find_in": ("query", dict(QUERY, query={"_id": {"$in": "RANDINTLIST(0,docs,100)"}},
                              limit=150)),  # the script's counts: 150 expected
    "find_in_redrawn": ("query", dict(QUERY, query={
        "group": "RANDINT(0,groups)", "_id": {"$in": "RANDINTLIST(7,257,100)"}}, limit=150)),
    # more than half the range: random.sample's pool, every value of a range of 100 too
    "find_in_sampled": ("query", dict(QUERY, query={
        "a": {"$in": "RANDINTLIST(0,150,100)"}, "b": {"$in": "RANDINTLIST(3,13,10)"}},
        limit=150)),
    # no limit: getMores without batchSize, any number of documents
    "aggregate": ("aggregate", dict(QUERY, pipeline=[
        {"$match": {"group": "RANDINT(0,groups)"}}, {"$project": {"group": 1}}])),
}  # fmt: skip
CURSOR_SCRIPT = [
    (None, 101, 77, None),
    (None, 49, 0, None),  # a getMore completes it
    (None, 150, 0, None),  # one batch
    ("OperationFailure", 0, 0, "boom"),
    (None, 101, 78, None),
    ("CursorNotFound", 0, 0, "cursor gone"),  # its getMore fails
    (None, 10, 0, None),  # fewer than expected (find_limit)
    (None, 3, 5, None),
    (None, 4, 6, None),
    (None, 3, 0, None),  # two getMores
]


@pytest.mark.parametrize("case", sorted(READ_CASES))
@pytest.mark.parametrize("index", [0, 1])
def test_reads_same_requests_and_accounting_as_the_python_source(case, index):
    module = compiled()
    workload, settings = READ_CASES[case]
    source = sources.make(workload, settings, "db")
    (py_sent, py), (c_sent, mine) = twins(source, module, index, 45, CURSOR_SCRIPT * 3)
    assert [r for r, _ in c_sent] == [r for r, _ in py_sent] and len(py_sent) > 20
    assert all(a is b for (_, a), (_, b) in zip(c_sent, py_sent, strict=True))
    assert mine.ops == py.ops and sum(py.ops.values()) > 0
    assert mine.docs == py.docs and mine.counters == py.counters and py.counters["getmores"]
    assert mine.errors == py.errors and mine.error_samples == py.error_samples
    assert len(py.errors) == (2 if case == "aggregate" else 3)  # finds expect their limit
    assert {op: sum(c.values()) for op, c in latencies(mine).items()} == {
        op: sum(c.values()) for op, c in latencies(py).items()
    }


def test_reads_with_values_it_cannot_draw_run_in_python():
    """Lists of more than 128 values are drawn by the Python source, and letters of more than
    one byte each."""
    s = dict(QUERY, query={"_id": {"$in": "RANDINTLIST(0,docs,129)"}}, limit=30)
    assert sources.make("query", s, "db").compiled is None  # more values than it holds
    regex = {"preload_docs": 2000, "threads": 3, "prefix_len": 1, "limit": 10, "total_ops": 60}
    assert sources.make("regex_prefix", regex, "db").compiled is not None
    d = WORKLOADS["regex_prefix"](None, regex).declare()
    wide = dataclasses.replace(d, ranges=(("^", "aé", 1),))  # é: two bytes in UTF-8
    assert cursor_sources.declared(wide, "db").compiled is None
    assert sources.make("query", READ_CASES["find_limit"][1], "db").compiled is not None


def _cursor_reply(doc, batch: str = "firstBatch", tail: bytes = b"") -> bytearray:
    body = b"\x00\x00\x00\x00\x00" + bson.encode(doc) + tail
    return bytearray(struct.pack("<iiii", 16 + len(body), 9, 1, 2013) + body)


def _cursor_corpus():
    docs = [{"_id": i, "x": "y" * (i % 7), "a": [i] * (i % 3)} for i in range(20)]
    son = bson.SON
    for batch in ("firstBatch", "nextBatch"):
        for n in (0, 1, 2, 20):
            cursor = {batch: docs[:n], "id": bson.Int64(77 * n), "ns": "db.c"}
            yield "mongod", batch, son([("cursor", cursor), ("ok", 1.0)])
            yield "id first", batch, son([("cursor", son([("id", bson.Int64(n)), ("ns", "db.c"),
                                                          (batch, docs[:n])])), ("ok", 1.0)])  # fmt: skip
            yield "cluster time", batch, son([("cursor", cursor), ("ok", 1.0), (
                "$clusterTime", {"clusterTime": bson.Timestamp(1, n)}), ("operationTime",
                bson.Timestamp(1, n))])  # fmt: skip
        cursor = {batch: docs[:3], "id": bson.Int64(5), "ns": "db.c"}
        for ok in (1, bson.Int64(1), True, 0.0, 0, False, "1"):
            yield f"ok {ok!r}", batch, son([("cursor", cursor), ("ok", ok)])
        yield "an error", batch, {"ok": 0.0, "errmsg": "boom", "code": 2, "codeName": "BadValue"}
        yield "wce", batch, son([("cursor", cursor), ("ok", 1.0), ("writeConcernError",
                                {"code": 64, "errmsg": "waiting"})])  # fmt: skip
        yield "int32 id", batch, {"cursor": {batch: docs[:3], "id": 5}, "ok": 1.0}
        yield "no id", batch, {"cursor": {batch: docs[:3]}, "ok": 1.0}
        yield (
            "batch not an array",
            batch,
            {"cursor": {batch: {"0": 1}, "id": bson.Int64(0)}, "ok": 1},
        )
        yield "cursor not a document", batch, {"cursor": 5, "ok": 1.0}
        yield "no cursor", batch, {"n": 1, "ok": 1.0}
        yield "duplicate ok", batch, son([("cursor", cursor), ("ok", 1.0)])  # + a second below


@pytest.mark.parametrize(("name", "batch", "doc"), list(_cursor_corpus()))
def test_a_plain_cursor_success_is_checked_in_c_as_the_check_does(name, batch, doc):
    """Where the C check answers, it answers as CursorCheck; it answers every plain success
    (any layout, replica-set fields after it) and leaves the rest to CursorCheck."""
    fast = compiled().cursor_success
    check = replies.CursorCheck("find", batch.encode())
    buf = _cursor_reply(doc)
    if name == "duplicate ok":  # a second ok: 0 after the first: the last one counts
        raw = bson.encode(doc)[:-1] + b"\x01ok\x00" + struct.pack("<d", 0.0) + b"\x00"
        buf = _cursor_reply({}, batch)[:21] + struct.pack("<i", len(raw)) + raw[4:]
        buf[:4] = struct.pack("<i", len(buf))
        assert check(buf, len(buf))[0] not in (None, "InvalidBSON")  # it is ok: 0
    got = fast(buf, len(buf), batch.encode())
    plain = name in ("mongod", "id first", "cluster time") or name in (
        "ok 1",
        "ok Int64(1)",
        "ok True",
    )
    assert (got is not None) == plain
    if got is not None:
        assert got == check(buf, len(buf)) and got[0] is None
    other = "nextBatch" if batch == "firstBatch" else "firstBatch"
    assert fast(buf, len(buf), other.encode()) is None  # another batch name: not a success


def test_malformed_replies_are_left_to_the_check():
    fast = compiled().cursor_success
    good = _cursor_reply({"cursor": {"firstBatch": [{"a": 1}], "id": bson.Int64(0)}, "ok": 1.0})
    assert fast(good, len(good), b"firstBatch") == (None, 1, 0, None)
    for cut in range(21, len(good)):  # every truncation
        assert fast(good[:cut], cut, b"firstBatch") is None
    bad = bytearray(good)
    bad[25] = 0x7A  # the cursor's type byte: an unknown type
    assert fast(bad, len(bad), b"firstBatch") is None


def _find_and_modify_corpus():
    son, doc = bson.SON, {"_id": 5, "n": 1, "pad": "x" * 40}
    leo = {"n": 1, "updatedExisting": True}
    up = {"n": 1, "updatedExisting": False, "upserted": 5}
    cluster = [("$clusterTime", {"clusterTime": bson.Timestamp(1, 2)}),
               ("operationTime", bson.Timestamp(1, 2))]  # fmt: skip
    yield "found", son([("lastErrorObject", leo), ("value", doc), ("ok", 1.0)])
    yield "missed", son([("lastErrorObject", {"n": 0, "updatedExisting": False}),
                         ("value", None), ("ok", 1.0)])  # fmt: skip
    yield "upserted", son([("lastErrorObject", up), ("value", doc), ("ok", 1.0)])
    yield "upserted, value first", son([("value", None), ("lastErrorObject", up), ("ok", 1)])
    yield "cluster time", son([("lastErrorObject", leo), ("value", doc), ("ok", 1.0), *cluster])
    yield "no lastErrorObject", son([("value", doc), ("ok", bson.Int64(1))])
    yield "ok True", son([("value", doc), ("ok", True)])
    for ok in (0.0, 0, False, "1"):
        yield f"ok {ok!r}", son([("lastErrorObject", leo), ("value", doc), ("ok", ok)])
    yield "no value", son([("lastErrorObject", leo), ("ok", 1.0)])
    yield "an error", {"ok": 0.0, "errmsg": "boom", "code": 2, "codeName": "BadValue"}
    yield "wce", son([("lastErrorObject", leo), ("value", doc), ("ok", 1.0),
                      ("writeConcernError", {"code": 64, "errmsg": "waiting"})])  # fmt: skip
    yield "value a string", son([("value", "x"), ("ok", 1.0)])


FAM_PLAIN = ("found", "missed", "upserted", "upserted, value first", "cluster time",
             "no lastErrorObject", "ok True", "value a string")  # fmt: skip


@pytest.mark.parametrize(("name", "doc"), list(_find_and_modify_corpus()))
def test_a_plain_find_and_modify_success_is_checked_in_c_as_the_check_does(name, doc):
    """Where the C check answers, it answers as FindAndModifyCheck (found, upserted); it
    answers every plain success and leaves the rest to the check."""
    fast = compiled().find_and_modify_success
    check = replies.FindAndModifyCheck("find_one_and_update")
    buf = _cursor_reply(doc)
    got = fast(buf, len(buf))
    assert (got is not None) == (name in FAM_PLAIN)
    if got is not None:
        assert got == check(buf, len(buf)) and got[0] is None
    for cut in range(21, len(buf)):  # a truncated reply is the check's
        assert fast(buf[:cut], cut) is None


def _write_corpus():
    son = bson.SON
    cluster = [("$clusterTime", {"clusterTime": bson.Timestamp(1, 2)}),
               ("operationTime", bson.Timestamp(1, 2))]  # fmt: skip
    yield "insert", son([("n", 1), ("ok", 1.0)])
    yield "update", son([("n", 1), ("nModified", 1), ("ok", 1.0)])
    yield "update, none modified", son([("n", 1), ("nModified", 0), ("ok", 1)])
    yield "upsert", son([("n", 1), ("nModified", 0), ("upserted", [{"index": 0, "_id": 77}]),
                         ("ok", 1.0)])  # fmt: skip
    yield "upserts", son([("upserted", [{"index": i, "_id": f"k{i}"} for i in range(3)]),
                          ("n", 3), ("nModified", 0), ("ok", True)])  # fmt: skip
    yield "int64 counts", son([("n", bson.Int64(2)), ("nModified", bson.Int64(2)), ("ok", 1.0)])
    yield "ok only", {"ok": 1.0}
    yield "double n", son([("n", 1.0), ("ok", 1.0)])
    yield "cluster time", son([("n", 1), ("ok", 1.0), *cluster])
    for ok in (0.0, 0, False, "1"):
        yield f"ok {ok!r}", son([("n", 1), ("ok", ok)])
    yield "no ok", {"n": 1}
    yield "an error", {"ok": 0.0, "errmsg": "boom", "code": 2, "codeName": "BadValue"}
    yield "write error", son([("n", 0), ("writeErrors", [{"index": 0, "code": 11000,
                             "errmsg": "E11000 duplicate key"}]), ("ok", 1.0)])  # fmt: skip
    yield "wce", son([("n", 1), ("ok", 1.0), ("writeConcernError", {"code": 64,
                                                                    "errmsg": "waiting"})])  # fmt: skip
    yield "upserted not an array", son([("n", 1), ("upserted", {"0": 1}), ("ok", 1.0)])


WRITE_PLAIN = ("insert", "update", "update, none modified", "upsert", "upserts",
               "int64 counts", "ok only", "ok True")  # fmt: skip


@pytest.mark.parametrize(("name", "doc"), list(_write_corpus()))
def test_a_plain_write_success_is_checked_in_c_as_the_check_does(name, doc):
    """Where the C check answers, it answers as WriteCheck (n, nModified, upserted); it
    answers plain successes, an upsert's among them, and leaves the rest to the check."""
    fast = compiled().write_success
    buf = _cursor_reply(doc)
    got = fast(buf, len(buf))
    assert (got is not None) == (name in WRITE_PLAIN)
    if got is not None:
        for bulk in (False, True):
            assert got == replies.WriteCheck("update", bulk)(buf, len(buf)) and got[0] is None
    for cut in range(21, len(buf)):  # a truncated reply is the check's
        assert fast(buf[:cut], cut) is None


def test_plain_successes_are_read_in_c_for_write_checks_only(monkeypatch):
    """write_success stands in for the check only where the check is a WriteCheck (the
    class itself): another check is called for every reply the last success does not
    equal, so a check that answers otherwise is never bypassed."""
    compiled()
    one = {"n": 1, "nModified": 1, "ok": 1.0}
    other = {"nModified": 1, "n": 1, "ok": 1.0}  # the same success, other bytes
    script = [one, other] * 4
    calls = []

    class Counted(replies.WriteCheck):
        def __call__(self, buf, length):
            calls.append(length)
            return super().__call__(buf, length)

    stats, _, _, gen = _run_over_socketpair(native.NATIVE, monkeypatch, script)
    assert gen == "KeyedWrites" and stats.ops == {"update": 8}
    monkeypatch.setattr(replies.WriteCheck, "__call__", Counted.__call__)
    stats, _, _, _ = _run_over_socketpair(native.NATIVE, monkeypatch, script)
    assert stats.ops == {"update": 8} and calls == []  # all read in C
    monkeypatch.undo()
    monkeypatch.setattr(replies, "WriteCheck", Counted)
    stats, _, _, gen = _run_over_socketpair(native.NATIVE, monkeypatch, script)
    assert gen == "KeyedWrites" and stats.ops == {"update": 8}
    assert len(calls) == len(script)  # each reply differs from the one before


DELETE_SCRIPT = [
    (None, 1, 0, 0, None, 0),
    (None, 7, 0, 0, None, 0),  # all its keys (one, or a range)
    (None, 0, 0, 0, None, 0),  # none deleted: short
    ("WriteError", 0, 0, 0, "boom", 0),
    (None, 3, 0, 0, None, 0),  # a range short of 4
]


@pytest.mark.parametrize("per", [1, 7])
@pytest.mark.parametrize("index", [0, 2])
def test_deletes_same_requests_and_accounting_as_the_python_source(per, index):
    """Each client's keys in order, one or a range an operation, to its last (a shorter
    range); a delete short of its keys counts one error a key."""
    module = compiled()
    settings = {"preload_docs": 100, "doc_size_kb": 1, "threads": 3, "docs_per_delete": per}
    source = sources.make("delete", settings, "db")
    (py_sent, py), (c_sent, mine) = twins(source, module, index, None, DELETE_SCRIPT * 20)
    assert [r for r, _ in c_sent] == [r for r, _ in py_sent]
    keys = 34 if index == 0 else 33  # core.split.part(100, 3, index)
    assert len(py_sent) == -(-keys // per)  # the last range shorter
    assert all(a is b for (_, a), (_, b) in zip(c_sent, py_sent, strict=True))
    assert mine.ops == py.ops and mine.docs == py.docs and sum(py.ops.values()) > 0
    assert mine.errors == py.errors and mine.error_samples == py.error_samples
    assert py.errors["delete: RuntimeError"]  # the short ones counted (too many: negative)


W_OK, W_MISS = (None, 1, 1, 0, None, 0), (None, 0, 0, 0, None, 0)
W_UPSERTED, W_FAIL = (None, 0, 0, 1, None, 0), ("WriteError", 0, 0, 0, "E11000 dup", 0)
F_FOUND, F_MISS = (None, True, False, None), (None, False, False, None)
F_UPSERTED, F_FAIL = (None, True, True, None), ("OperationFailure", False, False, "boom")
UPSERT_SCRIPTS = {  # (function, upsert): outcomes in turn (a miss without upsert: an insert's)
    ("update_one", False): [W_OK, W_MISS, W_OK, W_MISS, W_FAIL, W_FAIL, W_OK],
    ("update_one", True): [W_OK, W_UPSERTED, W_MISS, W_FAIL, W_OK],
    ("find_one_and_update", False): [F_FOUND, F_MISS, W_OK, F_MISS, W_FAIL, F_FAIL, F_FOUND],
    ("find_one_and_update", True): [F_FOUND, F_UPSERTED, F_MISS, F_FAIL, F_FOUND],
}


@pytest.mark.parametrize(("fn", "upsert"), sorted(UPSERT_SCRIPTS))
@pytest.mark.parametrize("percent_new", [0, 50])
def test_upserts_same_requests_and_accounting_as_the_python_source(fn, upsert, percent_new):
    """The statement with a fresh document of the drawn key (new ones the client's own), the
    fallback insert of that document on a miss, the counters of each."""
    module = compiled()
    settings = {"preload_docs": 300, "doc_size_kb": 1, "threads": 3, "total_ops": 60,
                "function": fn, "upsert": upsert, "percent_new": percent_new}  # fmt: skip
    source = sources.make("update_api", settings, "db")
    (py_sent, py), (c_sent, mine) = twins(source, module, 1, 60, UPSERT_SCRIPTS[fn, upsert] * 4)
    assert len(py_sent) >= 20 and [r for r, _ in c_sent] == [r for r, _ in py_sent]
    assert all(a is b for (_, a), (_, b) in zip(c_sent, py_sent, strict=True))
    assert mine.ops == py.ops and mine.docs == py.docs and sum(py.ops.values()) > 0
    assert mine.counters == py.counters and mine.errors == py.errors
    assert mine.error_samples == py.error_samples and py.errors
    assert bool(py.counters["new_keys"]) == (percent_new > 0)
    if not upsert:
        assert py.counters["fallback_inserts"] > 0


def test_a_replacement_without_a_doc_writer_runs_in_python(monkeypatch):
    module = compiled()
    settings = dict(WORKLOAD_CASES["replace"], total_ops=6)
    source = sources.make("replace", settings, "db")
    run, stats = multiplex.Run(), ThreadStats()
    client = multiplex.Client(0, 1, run, stats, total=6)
    assert type(source.compiled(client, module)).__name__ == "KeyedWrites"
    monkeypatch.setattr(sources, "_doc_writer", lambda docs, module: None)
    assert inspect.isgenerator(source.compiled(client, module))


def test_a_replacement_s_document_is_checked():
    module = compiled()
    t = ops.update_tmpl("db", "c", {"_id": ops.sentinel(0)}, {"$inc": {"n": 1}}, [ops.sentinel(0)])
    run, stats = multiplex.Run(), ThreadStats()
    docs = module.DocWriter(docgen.DocFactory(64, "serial"))
    args = (t.raw, 1, ((t.slots[0][0], 0, 10),), random.Random().getstate()[1], object(),
            "replace", -1, run, stats, multiplex.count_error, stats.latency.record, 1, 0, None,
            64)  # fmt: skip
    module.KeyedWrites(*args, docs=docs, doc_at=16)
    for bad in ({"docs": object(), "doc_at": 16}, {"docs": docs, "doc_at": len(t.raw) - 10},
                {"docs": docs, "doc_at": 4}):  # fmt: skip
        with pytest.raises(ValueError, match="DocWriter"):
            module.KeyedWrites(*args, **bad)


def test_ended_sources_are_freed_after_the_timed_phase_not_in_it(monkeypatch):
    """A bulk insert's source holds tens of MB of messages: freeing them (unmapped page by
    page) is teardown, so the loop keeps every ended client until release(), which the
    workers call once they have read the timed phase's CPU."""
    compiled()
    ok = {"n": 1, "nModified": 1, "ok": 1.0}
    stats, _, loop, gen = _loop_over_socketpair(native.NATIVE, monkeypatch, [ok, ok])
    held = sys.getrefcount(gen)  # this test's two references, and the ended client's
    assert stats.ops == {"update": 2} and not loop.conns
    assert [e.gen for e in loop.ended] == [gen]
    loop.release()
    assert not loop.ended and sys.getrefcount(gen) == held - 1
