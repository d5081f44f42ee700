from bson.int64 import Int64

from mongobench.measure import serverstats

# Shape of a real mongod 7.0 serverStatus (sections documented in the manual).
REAL = {
    "version": "7.0.14",
    "process": "mongod",
    "storageEngine": {"name": "wiredTiger"},
    "wiredTiger": {
        "cache": {"pages read into cache": Int64(120)},
        "block-manager": {"bytes written": Int64(4096000)},
        "log": {"total size of compressed records": Int64(1024000)},
    },
    "metrics": {"operation": {"writeConflicts": Int64(3)}},
    "network": {"physicalBytesOut": Int64(5000), "bytesOut": Int64(4000)},
    "opcounters": {
        "insert": Int64(10),
        "query": 1,
        "update": 2,
        "delete": 0,
        "getmore": 0,
        "command": 9,
    },
    # latency in microseconds, as mongod reports it
    "opLatencies": {
        "reads": {"latency": Int64(50_000), "ops": Int64(100)},
        "writes": {"latency": Int64(1_200_000), "ops": Int64(400)},
        "commands": {"latency": Int64(9_000), "ops": Int64(30)},
        "transactions": {"latency": Int64(0), "ops": Int64(0)},
    },
}
# The stand-in's: no wiredTiger, no opcounters.
STANDIN = {"version": "5.0.0", "connections": {"current": 2}, "network": {"bytesOut": 10}}


def test_extract_real_server():
    c = serverstats.extract(REAL)
    assert c["cache_pages_read"] == 120
    assert c["cache_bytes_written"] == 4096000
    assert c["wal_bytes"] == 1024000
    assert c["write_conflicts"] == 3
    assert c["network_bytes_out"] == 5000  # physical wins over logical
    assert c["op_insert"] == 10


def test_missing_sections_are_none_not_zero():
    c = serverstats.extract(STANDIN)
    assert c["cache_pages_read"] is None and c["wal_bytes"] is None and c["op_insert"] is None
    assert c["network_bytes_out"] == 10  # falls back to bytesOut
    assert all(v is None for v in serverstats.extract(None).values())


def test_deltas():
    before = serverstats.extract(REAL)
    after_doc = {**REAL, "metrics": {"operation": {"writeConflicts": Int64(10)}}}
    after_doc["wiredTiger"] = {**REAL["wiredTiger"], "cache": {"pages read into cache": Int64(100)}}
    d = serverstats.deltas(before, serverstats.extract(after_doc))
    assert d["write_conflicts"] == 7
    assert d["cache_pages_read"] is None  # went backwards: a restart, unknowable
    assert d["op_insert"] == 0
    assert (
        serverstats.deltas(serverstats.extract(STANDIN), serverstats.extract(REAL))["wal_bytes"]
        is None
    )


def test_server_info():
    assert serverstats.server_info(REAL) == {
        "server_version": "7.0.14",
        "server_process": "mongod",
        "storage_engine": "wiredTiger",
    }
    assert serverstats.server_info(None)["server_version"] == "unknown"


def test_op_latencies_mean_per_kind_in_ms():
    before = serverstats.extract(REAL)
    assert before["oplat_writes_latency"] == 1_200_000 and before["oplat_writes_ops"] == 400
    later = {k: dict(v) for k, v in REAL["opLatencies"].items()}
    later["writes"] = {"latency": Int64(3_200_000), "ops": Int64(1400)}  # +1,000 ops in 2 s
    d = serverstats.deltas(before, serverstats.extract({**REAL, "opLatencies": later}))
    assert serverstats.op_latency_ms(d, "writes") == 2.0
    assert serverstats.op_latency_ms(d, "reads") is None  # no read in the phase: no mean
    missing = serverstats.deltas(serverstats.extract(STANDIN), serverstats.extract(STANDIN))
    assert serverstats.op_latency_ms(missing, "writes") is None
