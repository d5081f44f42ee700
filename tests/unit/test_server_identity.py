"""Which server was tested (identity), what a variant needs (probe.requirements), and how n/a
variants and differing products show in samples, the report and compare's warnings."""

import pytest

from mongobench.perftables import experiments as exp_mod
from mongobench.perftables import identity, probe
from mongobench.reports import report, results
from mongobench.reports.runs import Run, comparability_warnings

FERRET_BI = {"version": "7.0.42", "ferretdbVersion": "v1.24.2", "modules": []}
FERRET_ST = {"process": "ferretdb", "version": "7.0.42", "ferretdbVersion": "v1.24.2"}


@pytest.mark.parametrize(
    ("bi", "st", "hello", "hosts", "product", "version", "backend"),
    [
        (FERRET_BI, FERRET_ST, {"maxWireVersion": 21}, ["127.0.0.1"], "FerretDB", "v1.24.2", None),
        ({"version": "7.0.0"}, {"process": "java"}, {}, [], identity.STANDIN_PRODUCT, "unknown",
         "memory"),
        ({"version": "8.0.4", "modules": []}, {"process": "mongod"}, {}, ["db1"], "mongod",
         "8.0.4", None),
        ({"version": "8.0.4", "modules": ["enterprise"]}, {"process": "mongos"},
         {"msg": "isdbgrid"}, ["x"], "mongos", "8.0.4", "enterprise"),
        ({"version": "7.0.14"}, {"process": "mongod"}, {},
         ["c0-shard-00-00.ab1cd.mongodb.net"], "MongoDB Atlas", "7.0.14", None),
        ({"version": "5.0.0"}, {}, {}, ["docs.cluster-xyz.us-east-1.docdb.amazonaws.com"],
         "Amazon DocumentDB", "5.0.0", None),
        ({"version": "6.0.0"}, {}, {}, ["acct.mongo.cosmos.azure.com"],
         "Azure Cosmos DB for MongoDB (RU)", "6.0.0", None),
        (None, None, None, [], "unknown", "unknown", None),
    ],
)  # fmt: skip
def test_identify(bi, st, hello, hosts, product, version, backend):
    ident = identity.identify(bi, st, hello, hosts)
    assert ident["server_product"] == product
    assert ident["server_product_version"] == version
    assert ident["server_backend"] == backend


def test_ferretdb_claims_and_backend_from_explain():
    ident = identity.identify(FERRET_BI, FERRET_ST, {"maxWireVersion": 21})
    assert ident["server_compat"] == "MongoDB 7.0.42, wire 21"
    sqlite = {"queryPlanner": {"Plan": ["id=2 parent=0 notused=0 detail=SCAN t"]}}
    pg = {"queryPlanner": {"Plan": {"Node Type": "Seq Scan"}}}
    assert identity.backend_from_explain(sqlite) == "SQLite"
    assert identity.backend_from_explain(pg) == "PostgreSQL"
    assert identity.backend_from_explain({"queryPlanner": {"winningPlan": {}}}) is None
    assert probe.explain_format(sqlite) == "FerretDB/SQLite"
    assert (
        probe.explain_format({"queryPlanner": {"winningPlan": {"stage": "COLLSCAN"}}}) == "mongod"
    )
    assert probe.explain_format({}) == "unknown"
    ident["server_backend"] = "SQLite"
    assert identity.describe(ident) == "FerretDB v1.24.2 (SQLite), claims MongoDB 7.0.42, wire 21"


def test_requirements_of_the_catalogs_variants():
    plans = dict(
        (e.name, vs) for e, vs in exp_mod.plan(exp_mod.load(), ["aggregation", "update_fields"],
                                               "smoke")
    )  # fmt: skip
    agg = {v.label: probe.requirements(v.settings) for v in plans["aggregation"]}
    assert agg == {"$group of 400 documents": [probe.GROUP],
                   "$lookup of 400 documents": [probe.LOOKUP]}  # fmt: skip
    upd = {v.label: probe.requirements(v.settings) for v in plans["update_fields"]}
    assert upd["50, 500000, validation"] == [probe.VALIDATORS]
    assert upd["50, 500000, pipeline"] == [probe.PIPELINE_UPDATES]
    assert upd["1, 500000, plain"] == []
    caps = {"lacks": {probe.LOOKUP: "no $lookup"}}
    assert probe.lacking(plans["aggregation"][1].settings, caps) == [probe.LOOKUP]
    assert probe.lacking(plans["aggregation"][0].settings, caps) == []
    # the user may run it anyway (it then fails as the server answers)
    forced = exp_mod.plan(exp_mod.load(), ["aggregation"], "smoke",
                          overrides={"run_unsupported": True})[0][1]  # fmt: skip
    assert probe.lacking(forced[1].settings, caps) == []
    assert probe.requirements({"write_concern": 0}) == [probe.W0]
    pipeline = [{"$group": {"_id": "$g", "a": {"$avg": "$x"}}}]
    assert probe.requirements({"pipeline": pipeline}) == [probe.GROUP, probe.GROUP_ACCUMULATORS]


def _run(results_list, server=None):
    return {"scale": "smoke", "server_version": "7.0.42", "topology": "Single",
            "server": server, "results": results_list}  # fmt: skip


def test_na_variant_is_a_sample_and_a_report_line_never_a_failure():
    server = identity.identify(FERRET_BI, FERRET_ST, {"maxWireVersion": 21})
    run = _run(
        [{"status": "n/a", "experiment": "aggregation", "label": "$lookup of 400 documents",
          "reason": "server lacks $lookup"}],
        server,
    )  # fmt: skip
    assert results.failed(run) == []
    samples = results.to_samples(run)
    [s] = samples
    assert s["metric"] == results.NA_METRIC
    assert s["metadata"]["na_reason"] == "server lacks $lookup"
    assert s["metadata"]["server_product"] == "FerretDB"
    assert s["metadata"]["server_product_version"] == "v1.24.2"
    text = report.render(samples)
    assert "- $lookup of 400 documents: n/a (server lacks $lookup)" in text
    assert "FAILED" not in text and "failed" not in text.lower()


def test_compare_warns_when_products_differ():
    def samples(product, version):
        md = {"experiment": "x", "server_product": product, "server_product_version": version}
        return [{"metric": "m", "value": 1, "unit": "u", "metadata": md}]

    runs = [Run("a.json", "a", samples("FerretDB", "v1.24.2"), label="a"),
            Run("b.json", "b", samples("mongod", "8.0.4"), label="b")]  # fmt: skip
    warnings = comparability_warnings(runs)
    assert any(w.startswith("the runs differ in server product") for w in warnings), warnings
    assert "FerretDB" in " ".join(warnings)


def test_plans_of_other_servers():
    from mongobench.driver.queries import plan_of

    sqlite_scan = {"queryPlanner": {"Plan": ["id=2 parent=0 notused=0 detail=SCAN query"]},
                   "filterPushdown": False}  # fmt: skip
    assert plan_of(sqlite_scan) == "COLLSCAN (FerretDB/SQLite: filterPushdown false)"
    sqlite_idx = {"queryPlanner": {"Plan": ["detail=SEARCH query USING INDEX g_1 (g=?)"]},
                  "filterPushdown": True}  # fmt: skip
    assert plan_of(sqlite_idx) == "IXSCAN (FerretDB/SQLite index)"
    pg_seq = {"queryPlanner": {"Plan": {"Node Type": "Seq Scan"}}, "filterPushdown": True}
    assert plan_of(pg_seq) == "COLLSCAN (FerretDB/PostgreSQL: full scan)"
    mongod = {
        "queryPlanner": {"winningPlan": {"stage": "FETCH", "inputStage": {"stage": "IXSCAN"}}}
    }
    assert plan_of(mongod) == "IXSCAN"
    assert plan_of({"queryPlanner": {"something": "else"}}) == "plan format unknown"
