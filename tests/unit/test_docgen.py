import re
import uuid
from collections import Counter

import bson
import pytest

from mongobench.driver import docgen
from mongobench.driver.docgen import DocFactory, business_id


@pytest.mark.parametrize("kb", [1, 4, 32, 256, 2048])
@pytest.mark.parametrize("id_type", ["objectid", "uuid", "business_id"])
def test_documents_have_the_exact_size(kb, id_type):
    f = DocFactory(kb * 1024, id_type, n_int_fields=2)
    doc = f.make()
    assert len(doc.raw) == kb * 1024
    assert bson.decode(doc.raw)  # valid BSON after patching


def test_id_types():
    oid = bson.decode(DocFactory(1024, "objectid").make().raw)["_id"]
    assert isinstance(oid, bson.ObjectId)
    raw_uuid = bson.decode(DocFactory(1024, "uuid").make().raw)["_id"]
    assert isinstance(raw_uuid, bson.Binary) and raw_uuid.subtype == 4
    assert uuid.UUID(bytes=bytes(raw_uuid)).version == 4
    bid = bson.decode(DocFactory(1024, "business_id").make().raw)["_id"]
    assert re.fullmatch(r"ACC\d{5}[0-9a-f]{8}", bid)  # seed 000: ACC + 5 digits + 8 hex


def test_ids_are_unique_and_content_random():
    f = DocFactory(4096, "business_id", n_int_fields=3, seed=7)
    docs = [bson.decode(d.raw) for d in f.batch(500)]
    assert len({d["_id"] for d in docs}) == 500
    assert len({d["s0"] for d in docs}) == 500
    assert all(0 <= d["i2"] < 1_000_000 for d in docs)
    assert len({d["i0"] for d in docs}) > 400


def test_same_seed_same_content():
    a = DocFactory(1024, "uuid", n_int_fields=1, seed=3).make()
    b = DocFactory(1024, "uuid", n_int_fields=1, seed=3).make()
    assert a.raw == b.raw


def test_explicit_values():
    f = DocFactory(1024, "objectid", n_int_fields=2)
    d = bson.decode(f.make(_id=bson.ObjectId(b"a" * 12), ints=[5, 6]).raw)
    assert d["_id"] == bson.ObjectId(b"a" * 12) and (d["i0"], d["i1"]) == (5, 6)


def test_bad_arguments():
    with pytest.raises(ValueError, match="id_type"):
        DocFactory(1024, "counter")
    with pytest.raises(ValueError, match="at least"):
        DocFactory(10)
    with pytest.raises(ValueError, match="business id"):
        DocFactory(1024, "business_id").make(_id="ACC1")
    assert business_id(1234, 167, 3) == "ACC01234000a7003"
    with pytest.raises(ValueError, match="lane"):
        DocFactory(1024, "business_id", seed=docgen.LANES)


def test_serial_ids_and_named_int_fields():
    f = DocFactory(1024, "serial", int_fields=("group", "group_seq"))
    d = bson.decode(f.make(_id=2**40 + 5, ints=[7, 399]).raw)
    assert d["_id"] == 2**40 + 5 and (d["group"], d["group_seq"]) == (7, 399)
    with pytest.raises(ValueError, match="given by the caller"):
        f.make()


def test_business_ids_rise_per_account_and_stay_unique_across_lanes():
    """About 20,000 accounts; within an account a lane's keys rise (the seed's
    timestamp part); two lanes (threads, processes) never make the same key."""
    lanes = [DocFactory(128, "business_id", seed=lane) for lane in (1, 2)]
    ids = [bson.decode(d.raw)["_id"] for f in lanes for d in f.batch(30_000)]
    assert len(set(ids)) == len(ids) == 60_000
    accounts = {int(i[3:8]) for i in ids}
    assert max(accounts) < docgen.ACCOUNTS and len(accounts) > 0.9 * docgen.ACCOUNTS
    busiest = Counter(i[3:8] for i in ids[:30_000]).most_common(1)[0][0]
    first = [i for i in ids[:30_000] if i[3:8] == busiest]
    assert first == sorted(first) and len(first) > 1
    assert {i[-3:] for i in ids} == {"001", "002"}


def test_uuids_are_version_4_in_batches():
    f = DocFactory(256, "uuid", seed=2)
    got = [uuid.UUID(bytes=bytes(bson.decode(d.raw)["_id"])) for d in f.batch(200)]
    assert all(u.version == 4 and u.variant == uuid.RFC_4122 for u in got)
    assert len(set(got)) == 200


@pytest.mark.parametrize(
    "id_type, shape",
    [
        ("objectid", r"ObjectId\('[0-9a-f]{24}'\)"),
        ("uuid", r"UUID\('[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}'\)"),
        ("business_id", r"'ACC\d{5}[0-9a-f]{8}'"),
        ("serial", r"0"),
    ],
)
def test_key_example_shows_the_key_shape(id_type, shape):
    assert re.fullmatch(shape, docgen.key_example(id_type))


def test_bodies_come_from_a_pool_that_repeats_only_after_pool_bytes(monkeypatch):
    """The text of a client's documents is drawn from the process's pool: distinct
    within POOL_BYTES of documents, then the same bodies again (fresh _id and ints)."""
    monkeypatch.setattr(docgen, "_POOLS", {})
    monkeypatch.setattr(docgen, "POOL_BYTES", 64 * 1024)
    f = DocFactory(1024, "objectid", n_int_fields=2, seed=5)
    assert f._n_bodies == 64 * 1024 // len(f._bodies[0])
    m = f._n_bodies
    docs = [bson.decode(d.raw) for d in f.batch(m)] + [bson.decode(d.raw) for d in f.batch(m)]
    texts = [tuple(v for k, v in d.items() if k.startswith("s")) for d in docs]
    assert len(set(texts[:m])) == m  # every body of the pool once
    assert texts[m:] == texts[:m]  # then again, in order
    assert len({d["_id"] for d in docs}) == 2 * m
    assert all(len(t) > 10 and all(re.fullmatch("[0-9a-f]{32}", x) for x in t) for t in texts)
    other = DocFactory(1024, "objectid", n_int_fields=2, seed=6)
    assert other._bodies is f._bodies  # one pool per layout and process
    assert bson.decode(other.make().raw)["s0"] != docs[0]["s0"]  # its own start (seeded)
