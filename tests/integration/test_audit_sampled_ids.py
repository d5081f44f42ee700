"""The audit's sampled ids (issue 23): acknowledged inserts are looked up by _id after the
timed phase, so a loss the count hides (another document in its place) is found."""

import bson
import pytest
from standin_helpers import built_workdir

from mongobench.driver import docgen
from mongobench.driver.catalog import WORKLOADS
from mongobench.perftables import runner as perftables
from mongobench.perftables.request import PerftablesRun
from mongobench.reports import results
from testbed import bed as testbed

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("id_type", docgen.ID_TYPES)
def test_first_id_reads_the_id_field_alone(id_type):
    f = docgen.DocFactory(1024, id_type, seed=3)
    doc = f.make(_id=7) if id_type == "serial" else f.make()
    assert docgen.first_id(doc.raw) == bson.decode(doc.raw)["_id"]
    buf = bytearray(b"xx" + doc.raw)
    assert docgen.first_id(buf, 2) == bson.decode(doc.raw)["_id"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = testbed.start_server(str(built_workdir(tmp_path_factory, "audit-ids")))
    yield srv
    srv.stop()


@pytest.mark.parametrize("client_path", ["multiplexed", "pymongo"])
def test_inserted_ids_are_sampled_and_found(server, tmp_path, client_path):
    run = perftables.run(
        PerftablesRun(
            experiments=["insert_batchsize"],
            scale="smoke",
            out=str(tmp_path / "r.json"),
            variants=["10"],
            os_path="none",
            client_path=client_path,
        ),
        server.uri,
        log=lambda m: None,
    )
    (res,) = run["results"]
    audit = res["audit"]
    assert audit["sampled_ids"] == 2 * 48, audit  # two per client
    assert audit["sampled_missing"] == 0 and audit["lost_writes"] == 0, audit
    md = results.to_samples(run)[0]["metadata"]
    assert md["audit_sampled_ids"] == 96 and md["audit_sampled_missing"] == 0


def test_a_loss_the_count_hides_is_found(server, tmp_path, monkeypatch):
    base = WORKLOADS["insert"]

    class Replaced(base):  # the server "keeps" as many documents, but other ones
        def finish(self):
            coll = self.db["perftables"]
            n = coll.count_documents({})
            coll.delete_many({})
            coll.insert_many([{"_id": f"other-{i}"} for i in range(n)])
            return super().finish()

    monkeypatch.setitem(WORKLOADS, "insert", Replaced)
    run = perftables.run(
        PerftablesRun(
            experiments=["insert_batchsize"],
            scale="smoke",
            out=str(tmp_path / "r.json"),
            variants=["10"],
            os_path="none",
        ),
        server.uri,
        log=lambda m: None,
    )
    audit = run["results"][0]["audit"]
    assert audit["expected"] == audit["found"], audit  # the count alone sees nothing
    assert audit["sampled_missing"] == audit["sampled_ids"] > 0, audit
    assert audit["lost_writes"] == audit["sampled_missing"], audit
