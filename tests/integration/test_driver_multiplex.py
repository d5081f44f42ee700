"""The multiplexed driver against the stand-in: the same operations, documents,
errors and getMores as the pymongo path (every workload is declared once, driver.workload:
its two executors running one declaration), and processes that merge exactly."""

from __future__ import annotations

import functools
import multiprocessing
import os
import re
import shutil
import threading
import time
import urllib.parse

import bson
import pytest
from native_helpers import compiled
from pymongo import MongoClient, monitoring
from pymongo.errors import BulkWriteError, DuplicateKeyError
from standin_helpers import built_workdir, write_users_file

from mongobench.driver import (
    connection,
    cursor_sources,
    multiplex,
    native,
    ops,
    procs,
    replies,
    sources,
)
from mongobench.driver.base import ThreadStats
from mongobench.driver.catalog import WORKLOADS
from mongobench.remote import tlscerts
from testbed import bed as testbed

pytestmark = pytest.mark.integration
DB = "mbdriver"


class GetMores(monitoring.CommandListener):
    def __init__(self):
        self.n = 0

    def started(self, event):
        if event.command_name == "getMore":
            self.n += 1

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass


@pytest.fixture(autouse=True, params=[native.NATIVE, native.PYTHON])
def loop_kind(request, monkeypatch):
    """Every test runs on the compiled loop and on the Python one, the reference (both must
    give what pymongo gives); the worker processes inherit the choice."""
    if request.param == native.NATIVE:
        compiled()
    monkeypatch.setenv(native.ENV, request.param)
    return request.param


@pytest.fixture(scope="module")
def mongo(server_uri):
    listener = GetMores()
    with MongoClient(server_uri, event_listeners=[listener]) as client:
        yield client, listener


def run_pymongo(client, workload, settings, uri=None) -> ThreadStats:
    """What variant.run_variant does with the workload's threads (no sampling)."""
    client[DB]["perftables_meta"].delete_many({})  # fresh data: every run starts equal
    w = WORKLOADS[workload](client[DB], settings, log=lambda m: None)
    w.uri = uri
    w.prepare()
    n = int(settings["threads"])
    stats, stop = [ThreadStats() for _ in range(n)], threading.Event()
    threads = [threading.Thread(target=w.worker, args=(i, n, stats[i], stop)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = ThreadStats()
    for s in stats:
        total.merge(s)
    return total


def run_multiplexed(client, uri, workload, settings, processes) -> procs.Result:
    client[DB]["perftables_meta"].delete_many({})
    WORKLOADS[workload](client[DB], settings, log=lambda m: None).prepare()  # same start state
    wc = ops.write_concern(settings.get("write_concern"), None)
    make = functools.partial(sources.make, workload, settings, DB, wc)
    total = settings.get("total_ops")
    res = procs.run(uri, make, int(settings["threads"]), processes, procs.Phase(total=total))
    # the loop asked for ran (the Python one over TLS: the compiled one reads plain sockets)
    tls = connection.options(uri).tls
    assert procs.kinds(res.per_process) == (native.PYTHON if tls else os.environ[native.ENV])
    return res


QUERY = {"preload_docs": 2000, "doc_size_kb": 1, "group_size": 200, "threads": 3, "total_ops": 45}
CASES = {
    "read_update": ("read_update", {
        "preload_docs": 500, "doc_size_kb": 1, "threads": 4, "read_proportion": 0.5,
        "driver": "pymongo", "total_ops": 300}),
    "hot_update": ("hot_update", {
        "preload_docs": 10, "doc_size_kb": 1, "threads": 4, "total_ops": 120}),
    "update_one_fallback": ("update_api", {
        "preload_docs": 300, "doc_size_kb": 1, "threads": 4, "total_ops": 160,
        "function": "update_one", "upsert": False, "percent_new": 50}),
    "update_one_upsert": ("update_api", {
        "preload_docs": 300, "doc_size_kb": 1, "threads": 4, "total_ops": 160,
        "function": "update_one", "upsert": True, "percent_new": 50}),
    "find_and_modify_fallback": ("update_api", {
        "preload_docs": 300, "doc_size_kb": 1, "threads": 4, "total_ops": 160,
        "function": "find_one_and_update", "upsert": False, "percent_new": 50}),
    "find_and_modify_upsert": ("update_api", {
        "preload_docs": 300, "doc_size_kb": 1, "threads": 4, "total_ops": 160,
        "function": "find_one_and_update", "upsert": True, "percent_new": 50}),
    "update_fields_inc": ("update_fields", {
        "preload_docs": 300, "doc_size_kb": 4, "threads": 4, "total_ops": 160, "n_fields": 5,
        "doc_range": 300}),
    "replace": ("replace", {
        "preload_docs": 300, "doc_size_kb": 1, "threads": 3, "total_ops": 120,
        "doc_range": 300}),
    "update_indexed": ("update_indexed", {
        "preload_docs": 300, "doc_size_kb": 1, "threads": 3, "total_ops": 120, "indexes": 2,
        "update_indexed_fields": True}),
    "delete_one": ("delete", {
        "preload_docs": 300, "doc_size_kb": 1, "threads": 3, "docs_per_delete": 1}),
    "delete_many": ("delete", {
        "preload_docs": 300, "doc_size_kb": 1, "threads": 3, "docs_per_delete": 7}),
    "find_getmore": ("query", dict(QUERY, query={"group": "RANDINT(0,groups)"}, limit=150)),
    "find_skip_limit": ("query", dict(
        QUERY, query={"group": "RANDINT(0,groups)"}, limit=20, skip=30)),
    "find_in": ("query", dict(
        QUERY, query={"_id": {"$in": "RANDINTLIST(0,docs,30)"}}, limit=30)),
    "find_short": ("query", dict(  # limit beyond the group: every find is an error
        QUERY, query={"group": "RANDINT(0,groups)"}, limit=250)),
    "find_projection": ("query", dict(
        QUERY, query={"group": "RANDINT(0,groups)"}, limit=5, projection={"group_seq": 1})),
    "aggregate_group": ("aggregate", dict(QUERY, pipeline=[
        {"$match": {"group": "RANDINT(0,groups)"}},
        {"$group": {"_id": "$group", "n": {"$sum": 1}, "seq": {"$sum": "$group_seq"}}}])),
    "aggregate_many": ("aggregate", dict(QUERY, pipeline=[  # 200 documents: a getMore
        {"$match": {"group": "RANDINT(0,groups)"}}, {"$project": {"group": 1}}])),
    "regex_prefix": ("regex_prefix", {
        "preload_docs": 2000, "threads": 3, "prefix_len": 1, "limit": 10, "total_ops": 60}),
    "insert_bulk": ("insert", {
        "doc_size_kb": 1, "total_docs": 500, "batch_size": 10, "threads": 3,
        "id_type": "objectid", "secondary_indexes": 1}),
    "insert_one": ("insert", {
        "doc_size_kb": 0.0625, "total_docs": 90, "batch_size": 1, "threads": 3,
        "id_type": "uuid"}),
    "insert_business_id": ("insert", {
        "doc_size_kb": 1, "total_docs": 3000, "batch_size": 100, "threads": 3,
        "id_type": "business_id"}),
    "mixed": ("mixed", dict(  # seed 004: findOne({_id: 100}, {_id: 1}) beside the inserts
        QUERY, threads=4, insert_threads=2, total_ops=120, query={"_id": 100},
        projection={"_id": 1})),
    "bucket_push": ("bucket", {"records": 300, "bucket_size": 7, "threads": 3}),
    "bucket_insert": ("bucket", {"records": 300, "bucket_size": 0, "threads": 3}),
}  # fmt: skip


def nonzero(counts) -> dict:
    """The pymongo path leaves 0 entries behind (+1 then -1 for a wrong result)."""
    return {k: v for k, v in counts.items() if v}


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_outcome_as_pymongo(mongo, server_uri, case):
    client, listener = mongo
    workload, settings = CASES[case]
    before = listener.n
    ref = run_pymongo(client, workload, settings)
    ref_getmores = listener.n - before
    got = run_multiplexed(client, server_uri, workload, settings, processes=2)
    mine = got.stats
    assert nonzero(mine.ops) == nonzero(ref.ops)
    assert sum(mine.ops.values()) > 0 or case == "find_short"
    assert mine.docs == ref.docs
    assert mine.bytes == ref.bytes
    assert {k: v for k, v in mine.errors.items() if v} == {k: v for k, v in ref.errors.items() if v}
    counters = dict(mine.counters)
    assert counters.pop("getmores", 0) == ref_getmores
    assert nonzero(counters) == nonzero(ref.counters)
    mine_counts = {op: h.get_total_count() for op, h in mine.latency.histograms.items()}
    ref_counts = {op: h.get_total_count() for op, h in ref.latency.histograms.items()}
    assert mine_counts == ref_counts
    assert got.processes == 2
    assert sum(p["ops"] for p in got.per_process) == sum(mine.ops.values())


def test_read_update_pipelined_runs_the_same_declaration(mongo, server_uri):
    """read_update's third executor of its KeyedMix (driver: pipelined) draws the same keys
    and the same choices from the same seeds as the multiplexed one: the same reads and
    updates, the same documents, no error."""
    client, _ = mongo
    settings = CASES["read_update"][1]
    mine = run_multiplexed(client, server_uri, "read_update", settings, processes=1).stats
    piped = run_pymongo(client, "read_update", dict(settings, driver="pipelined"), server_uri)
    assert nonzero(piped.ops) == nonzero(mine.ops) and set(mine.ops) == {"read", "update"}
    assert piped.docs == mine.docs == settings["total_ops"]
    assert not piped.errors and not mine.errors


def test_business_ids_have_the_seed_shape_on_both_paths(mongo, server_uri):
    """Seed 000: "ACC" + 5-digit account + 8 hex digits; each client writes in its lane."""
    client, _ = mongo
    workload, settings = CASES["insert_business_id"]
    for run in (
        lambda: run_pymongo(client, workload, settings),
        lambda: run_multiplexed(client, server_uri, workload, settings, processes=2),
    ):
        run()
        ids = [d["_id"] for d in client[DB]["perftables"].find({}, {"_id": 1})]
        assert len(set(ids)) == len(ids) == 3000
        assert all(re.fullmatch(r"ACC\d{5}[0-9a-f]{8}", i) for i in ids)
        assert {i[-3:] for i in ids} == {"001", "002", "003"}  # lanes: client index + 1


def test_expected_errors_are_counted(mongo, server_uri):
    """find_short: each find returns the group's 200 documents instead of 250."""
    client, _ = mongo
    workload, settings = CASES["find_short"]
    mine = run_multiplexed(client, server_uri, workload, settings, processes=1).stats
    assert mine.errors == {"find: RuntimeError": 45}
    assert mine.docs == 45 * 200


def test_processes_merge_exactly(mongo, server_uri):
    client, _ = mongo
    settings = dict(CASES["read_update"][1], threads=5, total_ops=1001)
    got = run_multiplexed(client, server_uri, "read_update", settings, processes=2)
    s = got.stats
    assert sum(s.ops.values()) == 1001 and not s.errors
    assert s.docs == 1001
    assert [p["clients"] for p in got.per_process] == [3, 2]
    assert sum(p["ops"] for p in got.per_process) == 1001
    hists = s.latency.histograms
    assert sum(h.get_total_count() for h in hists.values()) == 1001
    assert all(h.get_max_value() > 0 for h in hists.values())
    assert got.cpu_s > 0


def test_stop_flag_ends_an_endless_run(mongo, server_uri):
    """No quota, no deadline: the stop flag ends every process's clients, each
    after its operation in flight (so nothing is cut off or counted as an error)."""
    client, _ = mongo
    settings = {k: v for k, v in CASES["read_update"][1].items() if k != "total_ops"}
    client[DB]["perftables_meta"].delete_many({})
    WORKLOADS["read_update"](client[DB], settings, log=lambda m: None).prepare()
    stop = multiprocessing.get_context(procs._context().get_start_method()).Event()
    timer = threading.Timer(1.0, stop.set)
    timer.start()
    make = functools.partial(sources.make, "read_update", settings, DB, None)
    got = procs.run(server_uri, make, 4, 2, stop=stop)
    timer.join()
    assert sum(got.stats.ops.values()) > 0 and not got.stats.errors
    assert got.stats.docs == sum(got.stats.ops.values())
    # The timer started before the workers' set-up, which the timed window leaves out: the
    # window is shorter than 1 s by that set-up (a loaded machine spends most of it there).
    assert 0 < got.wall_s < 10


def test_duration_ends_the_run_at_its_deadline(mongo, server_uri):
    """No quota: the clients stop at the deadline (the wait ends there, not at a
    later tick), each after its operation in flight."""
    client, _ = mongo
    settings = {k: v for k, v in CASES["read_update"][1].items() if k != "total_ops"}
    client[DB]["perftables_meta"].delete_many({})
    WORKLOADS["read_update"](client[DB], settings, log=lambda m: None).prepare()
    make = functools.partial(sources.make, "read_update", settings, DB, None)
    got = procs.run(server_uri, make, 4, 1, procs.Phase(duration=0.3))
    assert sum(got.stats.ops.values()) > 0 and not got.stats.errors
    assert 0.3 <= got.per_process[0]["wall_s"] < 0.3 + multiplex.TICK


def test_this_process_counts_its_cpu_up_to_the_results_not_their_decoding(
    mongo, server_uri, monkeypatch
):
    """The caller's share of the timed phase (parent_cpu_s) ends when the last worker's
    result is in: decoding and merging the results comes after the phase, as the workers'
    encoding does (their CPU is read before it)."""
    client, _ = mongo
    settings = {k: v for k, v in CASES["read_update"][1].items() if k != "total_ops"}
    client[DB]["perftables_meta"].delete_many({})
    WORKLOADS["read_update"](client[DB], settings, log=lambda m: None).prepare()
    make = functools.partial(sources.make, "read_update", settings, DB, None)
    decode = procs.decode_stats

    def slow_decode(part):  # 0.2 s of this process's CPU after the phase
        t0 = time.process_time()
        while time.process_time() - t0 < 0.2:
            pass
        return decode(part)

    monkeypatch.setattr(procs, "decode_stats", slow_decode)
    cpu0 = time.process_time()
    got = procs.run(server_uri, make, 4, 1, procs.Phase(duration=0.3))
    assert time.process_time() - cpu0 >= 0.2  # the decoding ran in this process
    assert sum(got.stats.ops.values()) > 0 and not got.stats.errors
    assert 0 < got.parent_cpu_s < 0.1, got.parent_cpu_s
    assert got.cpu_s > 0  # the worker's own


def _cursor(c, first, buf, get_more, limit, batch=0):
    """A find (judged by `first`) and its getMores, as the query sources send them."""
    out = yield buf, first
    if out[0] is not None:
        return out, 0, 0
    return (yield from cursor_sources._get_mores(c, out[1], out[2], get_more, limit, batch))


def _dup_source(client_: multiplex.Client):
    """insert_one of an existing _id, then insert_many (unordered) with two of five
    documents existing: the outcomes pymongo raises as exceptions."""
    bulk = ops.BulkInsert(DB, "dups")
    buf = bytearray(4096)
    single, many = replies.WriteCheck("insert_one"), replies.WriteCheck("insert_many", bulk=True)
    docs = [bson.encode({"_id": k, "v": 1}) for k in (1, 10, 2, 11, 12)]
    for check, batch in ((single, docs[:1]), (many, docs)):
        data = b"".join(batch)
        pos = bulk.write_prefix(buf, client_.rid, len(data))
        buf[pos : pos + len(data)] = data
        out = yield memoryview(buf)[: pos + len(data)], check
        # The stand-in's n counts a failed single insert; pymongo ignores n there.
        n = f"/n={out[1]}" if check.bulk else ""
        key = f"{out[0]}{n}/write_errors={out[5]}"
        client_.stats.counters[key] += 1


def test_duplicate_keys_classified_as_pymongo(mongo, server_uri):
    client, _ = mongo
    coll = client[DB]["dups"]
    coll.drop()
    coll.insert_many([{"_id": 1}, {"_id": 2}])
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"_id": 1, "v": 1})
    with pytest.raises(BulkWriteError) as e:
        coll.insert_many([{"_id": k, "v": 1} for k in (1, 10, 2, 11, 12)], ordered=False)
    ref_inserted, ref_failed = e.value.details["nInserted"], len(e.value.details["writeErrors"])
    assert ref_failed == 2
    coll.delete_many({"_id": {"$gte": 10}})
    stats, _, _ = multiplex.run_clients(server_uri, _dup_source, range(1), 1)
    assert dict(stats.counters) == {
        "DuplicateKeyError/write_errors=1": 1,
        f"BulkWriteError/n={ref_inserted}/write_errors={ref_failed}": 1,
    }
    assert coll.count_documents({}) == 5


def test_broken_connection_counts_the_operation_in_flight(mongo, server_uri):
    """A connection closed under a client: its operation is an error, the others finish."""
    socks = multiplex.open_sockets(server_uri, 2)
    ping = ops.Tmpl({"ping": 1, "$db": "admin"})

    def source(c):
        buf, check = ping.buffer(), replies.WriteCheck("ping")
        for i in range(20):
            if c.index == 0 and i == 5:
                socks[0].shutdown(2)  # the server sees EOF; we read an error or EOF
            ping.write(buf, c.rid)
            out = yield buf, check
            c.stats.ops["ping"] += out[0] is None

    run, stats = multiplex.Run(), ThreadStats()
    members = [multiplex.Client(i, 2, run, stats) for i in range(2)]
    multiplex.Loop(socks, members, source, run, stats, timeout=5).run_all()
    assert stats.ops["ping"] == 25
    assert sum(stats.errors.values()) == 1
    [key] = stats.errors
    assert key.startswith("ping: ")


def test_get_more_as_pymongo(mongo, server_uri):
    """A cursor over several batches: the documents and getMores pymongo sees
    (batchSize 7, limit 50: getMore batchSize min(what is left, 7))."""
    client, listener = mongo
    settings = dict(QUERY, query={}, limit=1)
    run_pymongo(client, "query", settings)  # loads the query collection
    coll = client[DB]["query"]
    for limit in (50, 0):
        before = listener.n
        cursor = coll.find({"group": 3}, {"_id": 0, "nofieldsplease": 1}).batch_size(7)
        ref_docs = len(list(cursor.limit(limit)))
        ref_getmores = listener.n - before
        assert ref_getmores >= 2
        find = ops.Find({"_id": 0, "nofieldsplease": 1}, limit=limit, batch_size=7)
        t = ops.find_tmpl(DB, "query", {"group": 3}, [], find)
        gm_t = ops.get_more_tmpl(DB, "query", batch_size=True)
        gm = (gm_t, gm_t.buffer(), replies.CursorCheck("find", b"nextBatch"))

        def source(c, t=t, gm=gm, limit=limit):
            buf = t.buffer()
            t.write(buf, c.rid)
            bad, got, more = yield from _cursor(c, replies.CursorCheck("find"), buf, gm, limit, 7)
            c.stats.counters.update(docs=got, getmores=more, errors=bad is not None)

        stats, _, _ = multiplex.run_clients(server_uri, source, range(1), 1)
        assert nonzero(stats.counters) == {"docs": ref_docs, "getmores": ref_getmores}


# ------------------------------------------------------------------ TLS and SCRAM

TLS_PASSWORD = "Mx:pa55/Secr3t!"


@pytest.fixture(scope="module")
def tls_uri(tmp_path_factory):
    """A stand-in serving TLS only (throwaway CA) with SCRAM-SHA-256 users."""
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed for the throwaway CA")
    work = built_workdir(tmp_path_factory, "driver-tls")
    users = write_users_file(work, [{"user": "alice", "password": TLS_PASSWORD}])
    certs = tlscerts.generate(str(work / "tls"), ["127.0.0.1", "localhost"], days=2)
    srv = testbed.start_server(str(work / "srv"), users_file=users, tls_pem=certs.server_pem)
    scheme, rest = srv.uri.split("://", 1)
    auth = f"alice:{urllib.parse.quote(TLS_PASSWORD, safe='')}@"
    sep = "&" if "?" in rest else "?"
    yield f"{scheme}://{auth}{rest}{sep}tlsCAFile={urllib.parse.quote(certs.ca_cert)}"
    srv.stop()


def test_tls_and_scram(tls_uri):
    """Two processes of clients over TLS with SCRAM; replies larger than a client's
    buffer (30 x 1 KB documents) arrive whole through the TLS layer."""
    settings = dict(CASES["read_update"][1], threads=4, total_ops=400)
    with MongoClient(tls_uri) as client:
        got = run_multiplexed(client, tls_uri, "read_update", settings, processes=2)
    assert sum(got.stats.ops.values()) == 400 and not got.stats.errors
    assert got.stats.docs == 400

    t = ops.find_tmpl(DB, "kv", {}, [], ops.Find(limit=30))
    gm_t = ops.get_more_tmpl(DB, "kv", batch_size=True)

    def source(c):
        buf = t.buffer()
        for _ in range(5):
            t.write(buf, c.rid)
            gm = (gm_t, gm_t.buffer(), replies.CursorCheck("find", b"nextBatch"))
            bad, got, _ = yield from _cursor(c, replies.CursorCheck("find"), buf, gm, 30)
            c.stats.counters.update(docs=got, errors=bad is not None)

    stats, _, _ = multiplex.run_clients(tls_uri, source, range(2), 2)
    assert nonzero(stats.counters) == {"docs": 2 * 5 * 30}


def test_a_server_that_cannot_be_reached_costs_each_client_one_error(tmp_path):
    """No server: every client's first operation is an error (as pymongo counts its
    server selection failures), nothing succeeds, and the run itself does not fail."""
    settings = CASES["hot_update"][1]
    make = functools.partial(sources.make, "hot_update", settings, DB, None)
    got = procs.run(
        "mongodb://127.0.0.1:1/", make, 5, 2, procs.Phase(total=settings["total_ops"], timeout=2)
    )
    assert not got.stats.ops and got.stats.docs == 0
    assert dict(got.stats.errors) == {"update: ConnectionFailure": 5}
    assert "Connection refused" in got.stats.error_samples["update: ConnectionFailure"]
