"""The test bed's FerretDB: the pinned release, built by the project from the Go module proxy,
on SQLite and on a private PostgreSQL cluster; the probe names it and what it lacks."""

import os

import pymongo
import pytest
from ferretdb_helpers import start

from mongobench.perftables import probe
from testbed import bed as testbed
from testbed import ferretdb

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("kind", "backend"), [("ferretdb", "SQLite"),
                                               ("ferretdb-postgresql", "PostgreSQL")])  # fmt: skip
def test_ferretdb_serves_and_is_named(tmp_path, kind, backend):
    srv = start(tmp_path / kind, kind)
    pg = srv.pg_datadir
    try:
        assert srv.kind == kind
        with pymongo.MongoClient(srv.uri, serverSelectionTimeoutMS=20000) as c:
            c.t.c.insert_many([{"_id": i} for i in range(5)])
            assert c.t.c.count_documents({}) == 5
            answers = probe.gather(c)
            ident = probe.server_identity(c, answers)
            caps = probe.capabilities(c, "t", answers, srv.uri)
        assert ident["server_product"] == "FerretDB"
        assert ident["server_product_version"] == ferretdb.VERSION
        assert caps["backend"] == backend
        assert caps["explain_format"] == f"FerretDB/{backend}"
        for feature in (probe.LOOKUP, probe.VALIDATORS, probe.PIPELINE_UPDATES, probe.W0):
            assert feature in caps["lacks"], caps["lacks"]
        assert probe.GROUP not in caps["lacks"]
        assert (pg is not None) == (kind == "ferretdb-postgresql")
    finally:
        srv.stop()
    assert not testbed.alive(srv.pid)
    if pg:
        assert not os.path.exists(pg)  # the private cluster is stopped and removed


def test_testbed_up_and_down_with_ferretdb(tmp_path):
    start_dir = tmp_path / "bed"
    if not ferretdb.available():
        pytest.skip("no Go toolchain: FerretDB cannot be built here")
    state = testbed.up(str(start_dir), with_ssh=False, server="ferretdb-postgresql")
    try:
        assert state["server_kind"] == "ferretdb-postgresql"
        assert os.path.isdir(state["pg_datadir"])
        with pymongo.MongoClient(state["uri"], serverSelectionTimeoutMS=20000) as c:
            assert c.admin.command("buildInfo")["ferretdbVersion"] == ferretdb.VERSION
    finally:
        testbed.down(str(start_dir))
    assert not os.path.exists(state["pg_datadir"])
    assert not testbed.alive(state["pids"]["server"])
