"""The stand-in claims a MongoDB release current drivers accept, and answers what they send:
the installed pymongo (client-requirements.txt has no upper bound) and the engine's own
OP_MSG driver (mongobench.driver.connection)."""

from __future__ import annotations

import pymongo
import pytest
from standin_helpers import built_workdir

from mongobench.driver import connection as wire
from testbed import bed as testbed

pytestmark = pytest.mark.integration

# What java/standin's StandinBackend.VERSION claims: MongoDB 7.0.
WIRE_VERSION = 21
VERSION = "7.0.0"


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    srv = testbed.start_server(str(built_workdir(tmp_path_factory, "standin-version")), "standin")
    yield srv
    srv.stop()


def test_installed_pymongo_accepts_the_claimed_wire_version():
    assert pymongo.MIN_SUPPORTED_WIRE_VERSION <= WIRE_VERSION <= pymongo.MAX_SUPPORTED_WIRE_VERSION


def test_hello_build_info_and_server_status_agree(standin):
    with wire.connect(standin.uri, timeout=10) as conn:
        hello = conn.hello()
        assert hello["maxWireVersion"] == WIRE_VERSION
        assert hello["minWireVersion"] == 0
        assert "helloOk" not in hello
        legacy = conn.command({"isMaster": 1, "helloOk": True, "$db": "admin"})
        assert legacy["maxWireVersion"] == WIRE_VERSION and legacy["helloOk"] is True
        info = conn.command({"buildInfo": 1, "$db": "admin"})
        assert info["version"] == VERSION and info["versionArray"] == [7, 0, 0]
        assert conn.command({"serverStatus": 1, "$db": "admin"})["version"] == VERSION


def test_current_pymongo_reads_writes_and_kills_cursors(standin):
    with pymongo.MongoClient(standin.uri, serverSelectionTimeoutMS=5000) as client:
        assert client.server_info()["version"] == VERSION
        coll = client.version_check.docs
        coll.drop()
        coll.insert_many([{"i": i} for i in range(50)])
        assert [d["i"] for d in coll.find(batch_size=7).sort("i", 1)] == list(range(50))  # getMore
        assert coll.update_one({"i": 3}, {"$set": {"x": 1}}).modified_count == 1
        assert coll.find_one({"x": 1})["i"] == 3

        def open_cursors() -> int:
            return client.admin.command("serverStatus")["metrics"]["cursor"]["open"]["total"]

        cursor = coll.find(batch_size=5)
        next(cursor)
        assert open_cursors() == 1
        cursor.close()  # killCursors
        assert open_cursors() == 0
        assert coll.delete_many({}).deleted_count == 50
