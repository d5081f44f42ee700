import collections
import random
import struct

import bson
import pytest

from mongobench import latency, wire
from mongobench.workloads_keyed import Zipfian


def test_template_patches_id_and_values():
    t = wire.Template(
        {"find": "kv", "filter": {"_id": bson.Int64(0x5EED0001)}, "$db": "d"}, [0x5EED0001]
    )
    msg = t.use(42, 7)
    length, rid, to, opcode = struct.unpack("<iiii", msg[:16])
    assert (length, rid, to, opcode) == (len(msg), 42, 0, wire.OP_MSG)
    assert bson.decode(msg[21:]) == {"find": "kv", "filter": {"_id": 7}, "$db": "d"}
    assert msg == wire.encode_msg({"find": "kv", "filter": {"_id": bson.Int64(7)}, "$db": "d"}, 42)
    with pytest.raises(ValueError, match="exactly once"):
        wire.Template({"a": bson.Int64(5), "b": bson.Int64(5)}, [5])


def test_target_refuses_credentials_and_reads_tls():
    with pytest.raises(wire.WireError, match="does not authenticate"):
        wire.target("mongodb://u:p@h:1/")
    t = wire.target("mongodb://h1:27018,h2/?tls=true&tlsInsecure=true", primary=("h2", 27017))
    assert t == {"host": "h2", "port": 27017, "tls": True, "tls_ca": None, "tls_insecure": True}


def test_zipfian_is_skewed_and_in_range():
    z = Zipfian(10_000)
    rng = random.Random(3)
    keys = [z.key(rng.random()) for _ in range(50_000)]
    assert min(keys) >= 0 and max(keys) < 10_000
    top = collections.Counter(keys).most_common(10)
    # With theta 0.99 the ten hottest keys take a large share; uniform would give 0.1 %.
    assert sum(c for _, c in top) / len(keys) > 0.2
    assert len(set(keys)) > 2_000
    big = Zipfian(100_000_000)  # zeta by integral beyond 10^5 terms: quick and sane
    assert 0 < big.rank(0.5) < 100_000_000


def test_recorder_buffering_gives_the_same_histogram():
    buffered = latency.LatencyRecorder()
    direct = latency.new_histogram()
    rng = random.Random(1)
    for _ in range(10_000):
        v = rng.expovariate(1 / 500.0) + 1
        buffered.record("read", v)
        direct.record_value(int(v))
    h = buffered.histograms["read"]
    assert h.get_total_count() == direct.get_total_count()
    for p in (50, 99, 99.9):
        assert h.get_value_at_percentile(p) == direct.get_value_at_percentile(p)
    buffered.record("read", 10)  # records after a read are kept too
    assert buffered.histograms["read"].get_total_count() == 10_001
