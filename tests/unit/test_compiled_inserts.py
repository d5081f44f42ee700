"""The compiled documents and inserts (driver._loop.DocWriter, Inserts) against their Python
twins (docgen.DocFactory.write, sources.inserts): the same documents byte for byte for the
same calls (but an ObjectId's timestamp, the clock's second), the same messages, the same
accounting of every outcome (bulk write errors per document), the audit's sampled _ids."""

from __future__ import annotations

import random
import tracemalloc

import pytest
from native_helpers import compiled, latencies, twins

from mongobench.driver import docgen, multiplex, ops, sources
from mongobench.driver.base import ThreadStats
from mongobench.driver.docgen import DocFactory

WRITES = [1, 3, 1, 40, 7, 1, 100, 2]  # documents a call, past the pool's end (small pools)


def _pair(monkeypatch, size, id_type, **kw):
    """Two equal factories (a pool of 37 bodies, so the calls wrap it), the second's writer."""
    monkeypatch.setattr(docgen, "POOL_BYTES", 37 * size)
    monkeypatch.setattr(docgen, "_POOLS", {})
    monkeypatch.setattr(docgen.os, "urandom", lambda n: bytes(range(7, 7 + n)))  # ObjectIds'
    a, b = DocFactory(size, id_type, seed=5, **kw), DocFactory(size, id_type, seed=5, **kw)
    return a, compiled().DocWriter(b)


def _masked(data: bytes, size: int, id_off: int, id_type: str) -> bytes:
    """The documents with an ObjectId's timestamp zeroed (the one field made from the clock)."""
    if id_type != "objectid":
        return data
    out = bytearray(data)
    for d in range(0, len(out), size):
        out[d + id_off : d + id_off + 4] = bytes(4)
    return bytes(out)


@pytest.mark.parametrize("id_type", docgen.ID_TYPES)
@pytest.mark.parametrize(("size", "ints"), [(64, 0), (1024, 0), (1024, 3), (4096, 2)])
def test_documents_equal_the_factory_s(monkeypatch, id_type, size, ints):
    py, c = _pair(monkeypatch, size, id_type, n_int_fields=ints, int_range=1000 + size)
    assert c.size == py.size
    first = 10
    for n in WRITES:
        want, got = bytearray(7 + n * py.size), bytearray(7 + n * py.size)
        ids = range(first, first + n) if id_type == "serial" else None
        assert py.write(want, 7, n, ids) == c.write(got, 7, n, ids) == n * py.size
        assert _masked(got, py.size, py._id_off + 7, id_type) == _masked(
            want, py.size, py._id_off + 7, id_type
        )
        assert got[:7] == bytes(7)  # nothing before pos
        first += n


def test_object_ids_carry_the_clock_and_count_on(monkeypatch):
    py, c = _pair(monkeypatch, 256, "objectid")
    buf = bytearray(3 * py.size)
    c.write(buf, 0, 3)
    oids = [docgen.first_id(buf, d * py.size) for d in range(3)]
    want = [docgen.first_id(doc.raw, 0) for doc in py.batch(3)]
    assert [abs(a.generation_time - b.generation_time).total_seconds() <= 1 for a, b in
            zip(oids, want, strict=True)] == [True] * 3  # fmt: skip
    assert [o.binary[4:] for o in oids] == [o.binary[4:] for o in want]


def _near_the_end(seq: int):
    """A business-id factory whose every account has used `seq` keys, and its writer."""
    a, b = (DocFactory(128, "business_id", seed=docgen.LANES - 1) for _ in range(2))
    a._account_seq = [seq] * docgen.ACCOUNTS
    b._account_seq = [seq] * docgen.ACCOUNTS
    return a, compiled().DocWriter(b)


def test_business_ids_run_out_as_the_factory_s():
    py, c = _near_the_end(2**20 - 1)
    want, got = bytearray(py.size), bytearray(py.size)
    py.write(want, 0, 1)
    c.write(got, 0, 1)
    assert got == want and b"fffff" in bytes(got)  # an account's last key
    for writer in _near_the_end(2**20):
        with pytest.raises(ValueError, match="has used all 1048576 keys"):
            writer.write(bytearray(2 * py.size), 0, 2)


def test_what_it_cannot_stand_in_for_is_refused(monkeypatch):
    module = compiled()
    with pytest.raises(ValueError, match="integer range"):
        module.DocWriter(DocFactory(256, n_int_fields=1, int_range=2**32))
    _, c = _pair(monkeypatch, 256, "serial")
    with pytest.raises(ValueError, match="given by the caller"):
        c.write(bytearray(256), 0, 1)
    with pytest.raises(ValueError, match="fewer ids"):
        c.write(bytearray(512), 0, 2, [1])
    with pytest.raises(ValueError, match="past the buffer"):
        c.write(bytearray(300), 100, 1, [1])
    assert sources._doc_writer(DocFactory(256, n_int_fields=1, int_range=2**32), module) is None


OK = (None, 1, 0, 0, None, 0)
OK_BULK = (None, 4, 0, 0, None, 0)  # as many as the message held (min with its documents)
BULK_ERR = ("BulkWriteError", 2, 0, 0, "E11000 duplicate key", 1)
BULK_ERR_NO_FAILS = ("BulkWriteError", 1, 0, 0, "write concern", 0)
FAILED = ("OperationFailure", 0, 0, 0, "not primary", 0)
SCRIPTS = {
    "one": [OK, OK, FAILED, OK, BULK_ERR, OK, OK],
    "bulk": [OK_BULK, BULK_ERR, OK_BULK, FAILED, BULK_ERR_NO_FAILS, OK_BULK, OK_BULK, OK_BULK],
}
CASES = {  # (settings, script): batches of one, batches of 10 in messages of up to 4
    "one document": ({"batch_size": 1, "total_docs": 30}, "one"),
    "bulk": ({"batch_size": 10, "total_docs": 125}, "bulk"),
    "bulk with indexes": ({"batch_size": 10, "total_docs": 125, "secondary_indexes": 2}, "bulk"),
}


def _insert_source(settings: dict, id_type: str, monkeypatch):
    monkeypatch.setattr(ops, "MAX_MESSAGE", 4 * 1024 + 200)  # 4 documents a message
    monkeypatch.setattr(docgen, "POOL_BYTES", 37 * 1024)
    monkeypatch.setattr(docgen, "_POOLS", {})
    monkeypatch.setattr(docgen.os, "urandom", lambda n: bytes(range(7, 7 + n)))
    base = {"doc_size_kb": 1, "threads": 3, "id_type": id_type, "preload_docs": 5}
    return sources.make("insert", {**base, **settings}, "db")


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("id_type", ["serial", "uuid", "objectid"])
@pytest.mark.parametrize("index", [0, 2])
def test_inserts_same_messages_and_accounting_as_the_python_source(
    monkeypatch, case, id_type, index
):
    settings, script = CASES[case]
    source = _insert_source(settings, id_type, monkeypatch)
    (py_sent, py), (c_sent, mine) = twins(source, compiled(), index, None, SCRIPTS[script] * 4)
    assert len(c_sent) == len(py_sent) >= 10
    prefix = ops.BulkInsert("db", "coll").prefix_size()
    for (a, ca), (b, cb) in zip(c_sent, py_sent, strict=True):
        assert ca is cb and len(a) == len(b)
        docs = DocFactory(1024, id_type)
        assert _masked(a[prefix:], docs.size, docs._id_off, id_type) == _masked(
            b[prefix:], docs.size, docs._id_off, id_type
        )
        assert a[:prefix] == b[:prefix]
    assert mine.ops == py.ops and sum(py.ops.values()) > 0
    assert (mine.docs, mine.bytes) == (py.docs, py.bytes) and py.bytes == 1024 * py.docs
    assert mine.errors == py.errors and mine.error_samples == py.error_samples
    assert len(py.errors) == 2

    def untimed(ids):  # an ObjectId but its timestamp
        return [getattr(i, "binary", b"    " + repr(i).encode())[4:] for i in ids]

    assert untimed(mine.written_ids) == untimed(py.written_ids) and py.written_ids
    lat = latencies(mine)
    assert {op: sum(c.values()) for op, c in lat.items()} == {
        op: sum(c.values()) for op, c in latencies(py).items()
    }
    assert all(1000 <= us < 50_000 for c in lat.values() for us in c)


def test_inserts_without_a_total_run_to_the_quota(monkeypatch):
    """Seed 004's mixed test: endless inserts of one document, no bytes counted."""
    settings = {
        "preload_docs": 50,
        "doc_size_kb": 1,
        "group_size": 10,
        "threads": 3,
        "insert_threads": 2,
        "query": {"_id": 10},
        "limit": 1,
        "total_ops": 9,
    }
    source = sources.make("mixed", settings, "db")
    assert source.compiled is not None
    (py_sent, py), (c_sent, mine) = twins(source, compiled(), 1, 30, [OK, FAILED] * 9)
    assert len(py_sent) == len(c_sent) == 10  # the client's share of 30
    assert [r for r, _ in c_sent] != [r for r, _ in py_sent]  # ObjectIds: other random bytes
    assert mine.ops == py.ops == {"insert": 5} and mine.errors == py.errors
    assert (mine.docs, mine.bytes) == (py.docs, py.bytes) == (5, 0)


def test_a_stopped_run_ends_it_at_its_next_batch(monkeypatch):
    source = _insert_source({"batch_size": 10, "total_docs": 125}, "serial", monkeypatch)
    run, stats = multiplex.Run(), ThreadStats()
    gen = source.compiled(multiplex.Client(0, 1, run, stats), compiled())
    next(gen)
    gen.send(OK_BULK)  # the batch's second message
    run.stopped = True
    gen.send(OK_BULK)
    with pytest.raises(StopIteration):  # its last: the batch is counted, no other starts
        gen.send((None, 2, 0, 0, None, 0))
    assert stats.ops == {"insert": 1} and stats.docs == 10


def test_bad_construction_is_refused(monkeypatch):
    module = compiled()
    source = _insert_source({"batch_size": 10, "total_docs": 125}, "serial", monkeypatch)
    run, stats = multiplex.Run(), ThreadStats()
    gen = source.compiled(multiplex.Client(0, 1, run, stats), module)
    next(gen)
    with pytest.raises(TypeError, match="outcome"):
        gen.send((None, 1, 0, 0, None))
    docs = module.DocWriter(DocFactory(1024, "serial"))
    common = (b"\0" * 60, 1, (), random.Random().getstate()[1], object(), "insert", -1, run,
              stats, multiplex.count_error, stats.latency.record)  # fmt: skip
    good = {"docs": docs, "bulk_check": object(), "per_msg": 4, "batch": 10, "sizes": (4, 2),
            "seq_at": 40, "count_bytes": True, "steps": (0, 10, 0), "first_id": docgen.first_id,
            "sample_id": stats.sample_id, "samples": 2}  # fmt: skip
    module.Inserts(*common, **good)
    for bad in ({"sizes": (5,)}, {"sizes": ()}, {"per_msg": 0}, {"seq_at": 58},
                {"steps": (0, 10)}, {"docs": object()}):  # fmt: skip
        with pytest.raises((ValueError, TypeError)):
            module.Inserts(*common, **{**good, **bad})


def test_the_compiled_source_does_not_allocate_the_python_source_s_message():
    """The twin writes into messages of its own: a client of 8 MB messages allocates one
    of them, not also the Python source's buffer (48 clients of 1 MB held 48 MB more)."""
    module = compiled()
    settings = {
        "doc_size_kb": 4,
        "threads": 1,
        "id_type": "uuid",
        "batch_size": 2000,
        "total_docs": 2000,
    }
    source = sources.make("insert", settings, "db")
    run, stats = multiplex.Run(), ThreadStats()
    source.compiled(multiplex.Client(0, 1, run, stats), module)  # the pool, built once
    message = 2000 * 4096
    tracemalloc.start()
    try:
        gen = source.compiled(multiplex.Client(0, 1, run, stats), module)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert message < peak < 1.5 * message
    assert len(next(gen)[0]) > message  # its own, written
